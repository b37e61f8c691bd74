//! End-to-end: `ictus probe timer` as a user runs it.
// A test that cannot run here says so on stderr (shown with --nocapture).

mod common;

use common::probe_runs::periods;
use common::{as_nobody, ictus, json_only, read_json, refused, succeeds};
use ictus_core::summary::SUMMARY_KEYS;
use serde_json::Value;

fn record(args: &[&str]) -> Value {
    json_only(ictus().args(args))
}

fn assert_latency_result(r: &Value) {
    let summary = r["summary"].as_object().expect("summary is an object");
    let keys: Vec<&str> = summary.keys().map(String::as_str).collect();
    assert_eq!(keys, SUMMARY_KEYS);
    assert!(r["missed"].is_u64());
    assert!(r["longest_miss_run"].is_u64());
    assert!(r["thin_percentiles"].is_array());
    let buckets = r["histogram"]["buckets"].as_array().expect("buckets");
    let in_buckets: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, summary["count"].as_u64().unwrap());
}

#[test]
fn a_one_second_run_gives_a_valid_record_whose_count_matches_the_interval() {
    let r = record(&[
        "probe",
        "timer",
        "--duration",
        "1s",
        "--interval",
        "1ms",
        "--warmup",
        "10ms",
        "--json",
    ]);
    assert_eq!(r["schema"], "ictus.run-record");
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["probe"], "timer");
    assert_eq!(r["complete"], true);
    for key in [
        "tool_version",
        "argv",
        "start_time",
        "end_time",
        "hostname",
        "kernel_release",
        "kernel_version",
        "preemption",
        "cmdline",
        "cpu_model",
        "cpu_count",
        "smt",
        "isolated_cpus",
        "governor",
        "virtualization",
    ] {
        assert!(r["provenance"].get(key).is_some(), "provenance lacks {key}");
    }
    assert_eq!(r["parameters"]["interval_ns"], 1_000_000);
    assert_eq!(r["parameters"]["loops"], 1_000);
    let threads = r["threads"].as_array().expect("threads");
    assert_eq!(
        threads.len() as u64,
        r["provenance"]["cpu_count"].as_u64().unwrap(),
        "one thread per online CPU by default"
    );
    for t in threads {
        assert_latency_result(&t["latency"]);
        assert_eq!(
            periods(&t["latency"]),
            1_000,
            "every period is measured or counted missed"
        );
        assert!(t["config"]["policy"]["policy"].is_string());
        assert!(t["config"]["affinity"].is_array());
    }
    assert_latency_result(&r["merged"]);
    assert_eq!(periods(&r["merged"]), 1_000 * threads.len() as u64);
    assert!(r["environment"]["steal"]["total_ns"].is_u64());
    assert!(r["environment"]["clock"]["read_cost"]["count"].is_u64());
    let p = r["merged"]["summary"].clone();
    assert!(p["min_ns"].as_u64() <= p["p50_ns"].as_u64());
    assert!(p["p50_ns"].as_u64() <= p["max_ns"].as_u64());
}

#[test]
fn loops_and_modes_and_an_output_file_work_together() {
    let dir = std::env::temp_dir().join(format!("ictus-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("record.json");
    let out = succeeds(
        ictus()
            .args([
                "probe",
                "timer",
                "--loops",
                "200",
                "--interval",
                "200us",
                "--cpus",
                "0",
            ])
            .args(["--mode", "hybrid", "--policy", "other", "--output"])
            .arg(&file),
    );
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("CPU 0"),
        "human output names the CPU: {human}"
    );
    assert!(
        human.contains("p99.999"),
        "human output has the tail: {human}"
    );
    assert!(human.contains('~'), "thin percentiles are marked: {human}");
    let r = read_json(&file);
    assert_eq!(r["parameters"]["mode"], "hybrid");
    assert!(r["threads"][0]["config"]["hybrid_margin_ns"].is_u64());
    assert_eq!(periods(&r["merged"]), 200);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_refused_realtime_policy_is_a_warning_not_a_crash() {
    // Drop every privilege: uid/gid nobody, no groups, no capabilities. setpriv needs
    // root to do that; anywhere else this test says it was skipped.
    let Some(out) = as_nobody(
        "a_refused_realtime_policy_is_a_warning_not_a_crash",
        &[
            "probe",
            "timer",
            "--policy",
            "fifo",
            "--priority",
            "80",
            "--mlock",
            "--loops",
            "100",
            "--cpus",
            "0",
            "--warmup",
            "0s",
            "--json",
        ],
    ) else {
        return;
    };
    assert!(
        out.status.success(),
        "unprivileged run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = r["warnings"].as_array().unwrap();
    let policy = warnings
        .iter()
        .find(|w| w["id"] == "policy-refused")
        .expect("a policy-refused warning");
    let advice = policy["advice"].as_str().unwrap();
    assert!(
        advice.contains("CAP_SYS_NICE"),
        "advice names the privilege: {advice}"
    );
    assert!(warnings.iter().any(|w| w["id"] == "mlock-refused") || r["obtained"]["mlock"] == true);
    assert_eq!(r["threads"][0]["config"]["policy"]["policy"], "other");
    assert_eq!(
        r["threads"][0]["config"]["policy_requested"]["policy"],
        "fifo"
    );
    assert_eq!(periods(&r["merged"]), 100);
}

#[test]
fn bad_arguments_give_one_clear_line_and_a_nonzero_exit() {
    for (args, expect) in [
        (vec!["--interval", "0"], "interval"),
        (vec!["--interval", "0ms"], "greater than zero"),
        (vec!["--cpus", "99"], "CPU 99 is not online"),
        (vec!["--cpus", "1-x"], "--cpus"),
        (vec!["--priority", "200"], "200"),
        (vec!["--duration", "fast"], "fast"),
        (vec!["--margin", "10us"], "--margin"),
    ] {
        let stderr = refused(ictus().args(["probe", "timer"]).args(&args));
        assert!(
            stderr.contains(expect),
            "{args:?}: '{expect}' missing from: {stderr}"
        );
    }
}
