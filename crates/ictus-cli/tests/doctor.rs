//! End-to-end: `ictus doctor` and `ictus doctor --json` on the machine running the tests.

mod common;

use common::{ictus, succeeds};

const IDS: [&str; 13] = [
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
