//! End-to-end: `ictus probe memlat` gives a valid record on a tiny run and refuses bad
//! input with one line and exit code 2. No timing is asserted.

mod common;

use common::{ictus, refused, succeeds};

const TINY: [&str; 13] = [
    "probe",
    "memlat",
    "--sizes",
    "4K,64K",
    "--strides",
    "64",
    "--repeat",
    "2",
    "--point-time",
    "2ms",
    "--policy",
    "other",
    "--cpus",
];

fn first_cpu() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| s.trim().split([',', '-']).next().map(str::to_owned))
        .unwrap_or_else(|| "0".into())
}

#[test]
fn a_tiny_run_gives_a_record_with_every_point() {
    let cpu = first_cpu();
    let out = succeeds(ictus().args(TINY).args([cpu.as_str(), "--json"]));
    let sut: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(sut["schema"], "ictus.run-record");
    assert_eq!(sut["probe"], "memlat");
    assert_eq!(sut["complete"], true);
    assert_eq!(sut["threads"].as_array().map(Vec::len), Some(0));
    assert!(sut["merged"].is_null());
    assert_eq!(
        sut["parameters"]["sizes_bytes"],
        serde_json::json!([4096, 65536])
    );
    assert_eq!(sut["parameters"]["point_time_ns"], 2_000_000);
    let ms = sut["measurements"].as_array().expect("measurements");
    for size in [4096u64, 65536] {
        let at = |name: &str| {
            ms.iter()
                .filter(|m| m["name"] == name && m["labels"]["working_set_bytes"] == size)
                .collect::<Vec<_>>()
        };
        let chase = at("chase");
        assert_eq!(chase.len(), 1, "one chase point at {size}");
        assert_eq!(chase[0]["labels"]["threads"], 1);
        assert!(chase[0]["metrics"]["ns_per_load"].as_f64().unwrap() > 0.0);
        for name in ["strided-read", "strided-write"] {
            let m = at(name);
            assert_eq!(m.len(), 1, "one {name} point at {size}");
            assert_eq!(m[0]["labels"]["stride_bytes"], 64);
            assert!(m[0]["metrics"]["ns_per_access"].as_f64().unwrap() > 0.0);
            assert!(m[0]["metrics"]["bytes_per_s"].as_f64().unwrap() > 0.0);
        }
    }
}

#[test]
fn the_human_view_shows_both_tables() {
    let cpu = first_cpu();
    let out = succeeds(ictus().args(TINY).arg(cpu.as_str()));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("pointer chase"), "{text}");
    assert!(text.contains("strided 64-bit accesses"), "{text}");
    assert!(text.contains("64 KiB"), "{text}");
}

#[test]
fn bad_input_exits_2_with_one_line_and_runs_nothing() {
    for bad in [
        &["--sizes", "0"][..],
        &["--sizes", "4K,lots"],
        &["--threads", "99"],
        &["--threads", "0"],
        &["--mode", "sideways"],
        &["--strides", "0"],
        &["--pages", "1g"],
        &["--repeat", "0"],
    ] {
        let err = refused(
            ictus()
                .args(["probe", "memlat", "--policy", "other", "--json"])
                .args(bad),
        );
        assert!(err.starts_with("ictus: "), "{bad:?}: {err}");
    }
}
