//! End-to-end: every probe gives a valid record from a tiny run, and refuses bad
//! options with one line and exit code 2.

mod common;

use common::probe_runs::{periods, points, record, two_cpus};
use common::{ictus, refused, succeeds};
use serde_json::Value;

#[test]
fn jitter_gives_tmin_and_the_spread_per_thread() {
    let r = record(
        "jitter",
        &[
            "--work", "20000", "--runs", "30", "--cpus", "0", "--policy", "other",
        ],
    );
    let runs = points(&r, "runs");
    assert_eq!(runs.len(), 1);
    assert!(runs[0]["metrics"]["tmin_ns"].as_f64().unwrap() > 0.0);
    assert_eq!(r["threads"][0]["latency"]["summary"]["count"], 30);
    assert!(r["headline"].as_str().unwrap().starts_with("Tmin "));
}

#[test]
fn rendezvous_gives_a_rate_per_point_and_the_cacheline_limit() {
    if !two_cpus() {
        ictus_os::testing::skipped(
            "rendezvous_gives_a_rate_per_point_and_the_cacheline_limit",
            "needs two CPUs",
        );
        return;
    }
    let r = record(
        "rendezvous",
        &[
            "--spacing",
            "same-line,5000",
            "--payload",
            "0,512",
            "--steps",
            "2000",
            "--timed-steps",
            "200",
            "--round-trips",
            "2000",
            "--policy",
            "other",
        ],
    );
    assert_eq!(points(&r, "rendezvous").len(), 4);
    assert_eq!(points(&r, "cacheline-round-trip").len(), 1);
}

#[test]
fn compute_sweeps_sizes_and_splits() {
    let r = record(
        "compute",
        &[
            "--sizes",
            "11,1001",
            "--split-modules",
            "1001",
            "--point-time",
            "5ms",
            "--policy",
            "other",
        ],
    );
    assert_eq!(points(&r, "model-size").len(), 2);
    assert!(!points(&r, "split").is_empty());
}

#[test]
fn loop_answers_in_one_line_and_counts_every_step() {
    let r = record(
        "loop",
        &[
            "--frequency",
            "1kHz",
            "--steps",
            "300",
            "--modules",
            "101",
            "--threads",
            "1",
            "--policy",
            "other",
        ],
    );
    let h = r["headline"].as_str().unwrap();
    assert!(
        h.contains("sustain") && h.contains("1 kHz on 1 core"),
        "{h}"
    );
    assert_eq!(periods(&r["merged"]), 300);
}

#[test]
fn irq_measures_or_says_why_not() {
    let r = record("irq", &["--duration", "200ms"]);
    let h = r["headline"].as_str().unwrap();
    assert!(
        h.starts_with("IRQ latency not measured: ") || h.starts_with("timer IRQ latency"),
        "{h}"
    );
}

#[test]
fn a_probe_under_load_records_what_the_load_achieved() {
    let r = record(
        "timer",
        &[
            "--loops",
            "100",
            "--cpus",
            "0",
            "--policy",
            "other",
            "--load",
            "cpu",
            "--load-cpus",
            "0",
        ],
    );
    let loads = r["environment"]["loads"].as_array().unwrap();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0]["kind"], "cpu");
    assert!(loads[0]["metrics"]["ops_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn bad_options_give_one_line_and_exit_two() {
    for args in [
        vec!["jitter", "--runs", "0"],
        vec!["jitter", "--threads", "64"],
        vec!["rendezvous", "--threads", "1"],
        vec!["rendezvous", "--spacing", "far"],
        vec!["compute", "--sizes", "2"],
        vec!["compute", "--reference", "/nonexistent.json"],
        vec!["loop", "--frequency", "fast"],
        vec!["loop", "--threads", "64"],
        vec!["irq", "--interval", "1us"],
        vec!["timer", "--load", "bogus"],
    ] {
        refused(ictus().arg("probe").args(&args));
    }
}

#[test]
fn a_cyclictest_file_imports_as_a_timer_record() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ictus-probe/tests/fixtures/cyclictest-2threads.json"
    );
    let out = succeeds(ictus().args(["import", "cyclictest", fixture]));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["probe"], "timer");
    assert_eq!(r["provenance"]["tool"], "cyclictest");
    assert_eq!(r["threads"].as_array().unwrap().len(), 2);
    let bad = ictus()
        .args(["import", "cyclictest", "/nonexistent.json"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/nonexistent.json"));
}
