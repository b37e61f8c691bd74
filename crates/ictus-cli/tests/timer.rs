//! End-to-end: `ictus probe timer` as a user runs it.
// A test that cannot run here says so on stderr (shown with --nocapture).

use assert_cmd::Command;
use serde_json::Value;

fn ictus() -> Command {
    Command::cargo_bin("ictus").expect("the ictus binary is built")
}

fn record(args: &[&str]) -> Value {
    let out = ictus().args(args).output().expect("ictus runs");
    assert!(
        out.status.success(),
        "ictus {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "--json prints nothing but the record, stderr had: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON record")
}

const SUMMARY_KEYS: [&str; 11] = [
    "count",
    "min_ns",
    "mean_ns",
    "stddev_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "p99999_ns",
    "max_ns",
];

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
        let count = t["latency"]["summary"]["count"].as_u64().unwrap();
        let missed = t["latency"]["missed"].as_u64().unwrap();
        assert_eq!(
            count + missed,
            1_000,
            "every period is measured or counted missed"
        );
        assert!(t["config"]["policy"]["policy"].is_string());
        assert!(t["config"]["affinity"].is_array());
    }
    assert_latency_result(&r["merged"]);
    let merged =
        r["merged"]["summary"]["count"].as_u64().unwrap() + r["merged"]["missed"].as_u64().unwrap();
    assert_eq!(merged, 1_000 * threads.len() as u64);
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
    let out = ictus()
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
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
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
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(r["parameters"]["mode"], "hybrid");
    assert!(r["threads"][0]["config"]["hybrid_margin_ns"].is_u64());
    let m = &r["merged"];
    assert_eq!(
        m["summary"]["count"].as_u64().unwrap() + m["missed"].as_u64().unwrap(),
        200
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_refused_realtime_policy_is_a_warning_not_a_crash() {
    // Drop every privilege: uid/gid nobody, no groups, no capabilities. setpriv needs
    // root to do that; anywhere else this test says it was skipped.
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if !is_root || !setpriv.exists() {
        ictus_os::testing::skipped(
            "a_refused_realtime_policy_is_a_warning_not_a_crash",
            "needs root and setpriv",
        );
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("ictus");
    let out = std::process::Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args([
            "probe",
            "timer",
            "--policy",
            "fifo",
            "--priority",
            "80",
            "--mlock",
        ])
        .args(["--loops", "100", "--cpus", "0", "--warmup", "0s", "--json"])
        .output()
        .unwrap();
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("Permission denied") {
        ictus_os::testing::skipped(
            "a_refused_realtime_policy_is_a_warning_not_a_crash",
            &format!("user nobody cannot execute {}", bin.display()),
        );
        return;
    }
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
    let m = &r["merged"];
    assert_eq!(
        m["summary"]["count"].as_u64().unwrap() + m["missed"].as_u64().unwrap(),
        100
    );
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
        let out = ictus()
            .args(["probe", "timer"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} exits 2; stderr: {stderr}"
        );
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{args:?}: one line, got: {stderr}"
        );
        assert!(
            stderr.contains(expect),
            "{args:?}: '{expect}' missing from: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    }
}
