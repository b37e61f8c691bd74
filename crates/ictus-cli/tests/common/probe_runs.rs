//! What the probe tests share: running `ictus probe NAME ... --json` and the checks
//! every record must pass, and picking a record's measurements by name.

use serde_json::Value;

use super::{ictus, measurements, succeeds};

pub(crate) fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// Runs `ictus probe ARGS --json` and returns the record after the checks every
/// record must pass.
pub(crate) fn record(probe: &str, args: &[&str]) -> Value {
    let out = succeeds(ictus().args(["probe", probe]).args(args).arg("--json"));
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

pub(crate) fn points<'a>(r: &'a Value, name: &'a str) -> Vec<&'a Value> {
    measurements(r, name).collect()
}

/// The periods a latency result accounts for: those measured and those missed.
pub(crate) fn periods(latency: &Value) -> u64 {
    latency["summary"]["count"].as_u64().unwrap() + latency["missed"].as_u64().unwrap()
}
