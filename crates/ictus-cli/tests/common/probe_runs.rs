//! What the probe tests share: running `ictus probe NAME ... --json` and the checks
//! every record must pass, and picking a record's measurements by name.

use assert_cmd::Command;
use serde_json::Value;

pub(crate) fn ictus() -> Command {
    Command::cargo_bin("ictus").expect("the ictus binary is built")
}

pub(crate) fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// Runs `ictus probe ARGS --json` and returns the record after the checks every
/// record must pass.
pub(crate) fn record(probe: &str, args: &[&str]) -> Value {
    let out = ictus()
        .args(["probe", probe])
        .args(args)
        .arg("--json")
        .output()
        .expect("ictus runs");
    assert!(
        out.status.success(),
        "ictus probe {probe} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON record");
    assert_eq!(r["schema"], "ictus.run-record");
    assert_eq!(r["probe"], probe);
    assert_eq!(r["complete"], true);
    assert!(r["provenance"]["end_time"].is_string());
    assert!(r["environment"]["clock"]["read_cost"]["count"].is_u64());
    for m in r["measurements"].as_array().expect("measurements") {
        assert!(m["name"].is_string());
        if let Some(l) = m.get("latency").filter(|l| !l.is_null()) {
            let count = l["summary"]["count"].as_u64().unwrap();
            let buckets: u64 = l["histogram"]["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["count"].as_u64().unwrap())
                .sum();
            assert_eq!(count, buckets, "histogram holds every sample");
        }
    }
    r
}

pub(crate) fn points<'a>(r: &'a Value, name: &str) -> Vec<&'a Value> {
    r["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == name)
        .collect()
}
