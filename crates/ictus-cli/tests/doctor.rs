//! End-to-end: `ictus doctor` and `ictus doctor --json` on the machine running the tests.

mod common;

use common::{ictus, succeeds};

const IDS: [&str; 14] = [
    "cpus",
    "preemption",
    "hz",
    "clocksource",
    "rt-privileges",
    "rt-throttling",
    "sched-deadline",
    "cpu-shielding",
    "irq-affinity",
    "memory",
    "power",
    "idle-states",
    "virtualization",
    "tracers",
];

const STATUSES: [&str; 4] = ["available", "missing", "needs-privilege", "unknown"];

fn doctor_json() -> serde_json::Value {
    let out = succeeds(ictus().args(["doctor", "--json"]));
    serde_json::from_slice(&out.stdout).expect("doctor --json prints one JSON document")
}

#[test]
fn json_checks_have_exactly_the_documented_fields() {
    let sut = doctor_json();
    let checks = sut["checks"].as_array().expect("a checks array");
    assert!(!checks.is_empty());
    for check in checks {
        let obj = check.as_object().expect("each check is an object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["advice", "detail", "id", "status", "title"],
            "{check}"
        );
        assert!(obj["id"].is_string() && obj["title"].is_string() && obj["detail"].is_string());
        assert!(
            obj["advice"].is_null() || obj["advice"].is_string(),
            "{check}"
        );
        let status = obj["status"].as_str().expect("status is a string");
        assert!(STATUSES.contains(&status), "unexpected status {status}");
    }
}

#[test]
fn json_has_every_check_id_exactly_once() {
    let sut = doctor_json();
    let checks = sut["checks"].as_array().expect("a checks array");
    for id in IDS {
        let n = checks.iter().filter(|c| c["id"] == id).count();
        assert_eq!(n, 1, "check {id} appears {n} times");
    }
    assert_eq!(checks.len(), IDS.len());
}

#[test]
fn json_has_a_verdict() {
    let sut = doctor_json();
    assert!(sut["verdict"]["summary"].is_string());
    assert!(sut["verdict"]["blockers"].is_array());
    assert!(sut["verdict"]["notes"].is_array());
}

#[test]
fn json_has_the_idle_facts_of_every_online_cpu() {
    let sut = doctor_json();
    let idle = &sut["idle"];
    let cpus = idle["cpus"].as_array().expect("an idle.cpus array");
    let online = ictus_os::facts::online_cpus();
    let listed: Vec<u64> = cpus.iter().filter_map(|c| c["cpu"].as_u64()).collect();
    let expected: Vec<u64> = online.cpus().iter().map(|&c| c as u64).collect();
    assert_eq!(listed, expected);
    for cpu in cpus {
        for state in cpu["states"].as_array().expect("a states array") {
            for key in ["exit_latency_ns", "target_residency_ns", "usage", "time_ns"] {
                assert!(state[key].is_u64(), "{key} in {state}");
            }
            assert!(state["name"].is_string() && state["disabled"].is_boolean());
        }
    }
    assert!(idle["cpu_dma_latency"]["present"].is_boolean());
    assert!(idle["cpu_dma_latency"]["writable"].is_boolean());
}

#[test]
fn the_human_report_exits_zero_and_names_every_check() {
    let titles: Vec<String> = doctor_json()["checks"]
        .as_array()
        .expect("a checks array")
        .iter()
        .map(|c| c["title"].as_str().unwrap_or_default().to_owned())
        .collect();
    let out = succeeds(ictus().arg("doctor"));
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    for title in titles {
        assert!(
            text.contains(&title),
            "title {title:?} missing from:\n{text}"
        );
    }
    assert!(text.contains("Verdict"));
}
