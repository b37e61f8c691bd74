//! End-to-end: `ictus probe pingpong` as a user runs it.

mod common;

use common::{ictus, succeeds};
use serde_json::Value;

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[test]
fn every_primitive_and_placement_gives_a_consistent_record() {
    let out = succeeds(ictus().args([
        "probe",
        "pingpong",
        "--primitive",
        "all",
        "--placement",
        if online_cpus() >= 2 {
            "both"
        } else {
            "same-cpu"
        },
        "--loops",
        "200",
        "--warmup",
        "1ms",
        "--policy",
        "other",
        "--json",
    ]));
    let r: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON record");
    assert_eq!(r["probe"], "pingpong");
    assert_eq!(r["complete"], true);
    assert_eq!(r["parameters"]["loops"], 200);

    let measurements = r["measurements"].as_array().expect("measurements");
    let expected = if online_cpus() >= 2 { 11 } else { 6 };
    assert_eq!(measurements.len(), expected);
    if online_cpus() >= 2 {
        assert_eq!(r["parameters"]["skipped"][0], "yield/cross-cpu");
    }
    let threads = r["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 2 * measurements.len());

    let mut seen = std::collections::BTreeSet::new();
    for m in measurements {
        assert_eq!(m["name"], "handoff");
        let primitive = m["labels"]["primitive"].as_str().expect("primitive label");
        let placement = m["labels"]["placement"].as_str().expect("placement label");
        assert!(seen.insert((primitive.to_string(), placement.to_string())));
        assert_eq!(m["metrics"]["round_trips"], 200.0);
        assert!(m["metrics"]["round_trips_per_s"].as_f64().unwrap() > 0.0);
        assert!(m["metrics"]["round_trip_mean_ns"].as_f64().unwrap() > 0.0);
        let latency = &m["latency"];
        assert_eq!(latency["summary"]["count"], 400, "{primitive} {placement}");
        let buckets = latency["histogram"]["buckets"].as_array().expect("buckets");
        let in_buckets: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(in_buckets, 400);

        let cpus = m["labels"]["cpus"].as_array().expect("cpus label");
        for (side, index) in m["labels"]["threads"]
            .as_array()
            .expect("threads label")
            .iter()
            .enumerate()
        {
            let t = &threads[index.as_u64().unwrap() as usize];
            assert_eq!(t["latency"]["summary"]["count"], 200);
            assert_eq!(t["config"]["pinned_cpu"], cpus[side]);
            assert_eq!(t["config"]["policy"]["policy"], "other");
        }
        if placement == "same-cpu" {
            assert_eq!(cpus[0], cpus[1]);
        } else {
            assert_ne!(cpus[0], cpus[1]);
        }
    }
}

#[test]
fn the_human_view_has_one_row_per_point() {
    let out = succeeds(ictus().args([
        "probe",
        "pingpong",
        "--primitive",
        "pipe",
        "--loops",
        "100",
        "--warmup",
        "1ms",
        "--policy",
        "other",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("pingpong:"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(" pipe ")).count(), 1);
    assert!(text.contains("round trips/s"));
}

fn refused(args: &[&str]) -> String {
    common::refused(
        ictus()
            .args(["probe", "pingpong", "--policy", "other"])
            .args(args),
    )
}

#[test]
fn bad_options_exit_2_with_one_line() {
    let err = refused(&["--placement", "cross-cpu", "--cpus", "0"]);
    assert!(err.contains("two CPUs"), "{err}");
    let err = refused(&[
        "--primitive",
        "yield",
        "--placement",
        "cross-cpu",
        "--cpus",
        "0",
    ]);
    assert!(err.contains("yield"), "{err}");
    let err = refused(&["--loops", "0"]);
    assert!(err.contains("at least 1"), "{err}");
    refused(&["--primitive", "semaphore"]);
    refused(&["--no-pin"]);
}
