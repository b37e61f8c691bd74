//! End-to-end: `ictus probe throughput` gives a valid record from a tiny run, and
//! refuses bad options with one line and exit code 2.

mod common;

use common::probe_runs::{self, points, two_cpus};
use common::{ictus, refused, succeeds};
use serde_json::Value;

/// `ictus probe throughput ARGS --json`, checked as every record is.
fn record(args: &[&str]) -> Value {
    probe_runs::record("throughput", args)
}

#[test]
fn a_tiny_run_gives_every_point_the_references_and_the_targets() {
    let placement = if two_cpus() { "both" } else { "same-cpu" };
    let r = record(&[
        "--sizes",
        "0,64,4096",
        "--point-time",
        "5ms",
        "--warmup",
        "1ms",
        "--round-trips",
        "10000",
        "--placement",
        placement,
        "--policy",
        "other",
    ]);
    let placements = if two_cpus() { 2 } else { 1 };
    let transfers = points(&r, "transfer");
    assert_eq!(transfers.len(), 4 * placements * 3);
    for m in &transfers {
        assert!(m["metrics"]["messages"].as_f64().unwrap() >= 1.0, "{m}");
        assert!(m["metrics"]["messages_per_s"].as_f64().unwrap() > 0.0);
        assert!(m["metrics"]["one_way_mean_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(m["labels"]["mode"], "sync");
        let bytes = m["metrics"]["bytes_per_s"].as_f64().unwrap();
        assert_eq!(bytes > 0.0, m["labels"]["payload_bytes"] != 0, "{m}");
    }
    assert_eq!(points(&r, "memcpy").len(), 3);
    assert_eq!(
        r["parameters"]["payload_bytes"],
        serde_json::json!([0, 64, 4096])
    );
    if two_cpus() {
        assert_eq!(points(&r, "cacheline-round-trip").len(), 1);
        let targets = points(&r, "targets");
        assert_eq!(targets.len(), 1);
        assert!(targets[0]["metrics"]["spsc_vs_memcpy"].as_f64().unwrap() > 0.0);
        assert!(r["headline"].as_str().unwrap().contains("memcpy"));
    }
}

#[test]
fn the_human_view_has_a_table_per_transport_and_placement() {
    let out = succeeds(ictus().args([
        "probe",
        "throughput",
        "--transport",
        "spsc,pipe",
        "--placement",
        "same-cpu",
        "--mode",
        "stream",
        "--sizes",
        "0,1K",
        "--messages",
        "200",
        "--round-trips",
        "1000",
        "--policy",
        "other",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("spsc, same-cpu"), "{text}");
    assert!(text.contains("pipe, same-cpu"), "{text}");
    assert!(text.contains("stream mode"), "{text}");
    assert!(text.contains("1 KiB"), "{text}");
    assert!(!text.contains("unix"), "{text}");
}

#[test]
fn bad_options_give_one_line_and_exit_two() {
    let mut cases = vec![
        vec!["--transport", "carrier-pigeon"],
        vec!["--mode", "async"],
        vec!["--max-payload", "12 parsecs"],
        vec!["--sizes", "1G"],
        vec!["--messages", "0"],
        vec!["--point-time", "0s"],
        vec!["--sizes", "64", "--max-payload", "128"],
        vec!["--no-pin"],
        vec!["--cpus", "999"],
    ];
    if two_cpus() {
        cases.push(vec!["--cpus", "0", "--placement", "cross-cpu"]);
    }
    for args in cases {
        refused(ictus().args(["probe", "throughput"]).args(&args));
    }
}
