//! The release build is fast because code that runs once is built without
//! optimisation (root Cargo.toml, `[profile.release.package.*]`; issue 33). That is
//! safe only while every crate so lowered is one a frame, a probe or a link never
//! touches. This test reads the root manifest and refuses a lowered crate that is not
//! on [`RUNS_ONCE`] (each with what it does and when), a wildcard, and a release
//! profile that optimises less or keeps debug info.

use std::path::Path;

/// The crates the release build may optimise less, each with why it does not matter.
const RUNS_ONCE: &[(&str, &str)] = &[
    (
        "zenoh-config",
        "Zenoh's configuration, read when a session opens",
    ),
    (
        "schemars",
        "the configuration's schema, built when a session opens",
    ),
    (
        "serde_yaml",
        "a configuration format, read when a session opens",
    ),
    ("ron", "a configuration format, read when a session opens"),
    ("json5", "a configuration format, read when a session opens"),
    ("toml", "the schedule and scenario files, read before a run"),
    ("clap_builder", "the command line, parsed once"),
    ("clap_complete", "shell completions, printed on request"),
    (
        "x509-parser",
        "certificates, read when a key is checked or a link opens",
    ),
    ("rcgen", "certificates, made by `ictus keys`"),
    ("tracing-subscriber", "log output setup, once"),
    (
        "regex-automata",
        "log filters (tracing-subscriber's env-filter), built once",
    ),
    (
        "regex-syntax",
        "log filters (tracing-subscriber's env-filter), built once",
    ),
    ("comfy-table", "terminal tables, drawn after a run"),
    (
        "ictus-report",
        "the reports, drawn after a run from its record",
    ),
];

fn manifest() -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn opt_level(v: &toml::Value) -> String {
    match v {
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn only_code_that_runs_once_is_built_with_less_optimisation() {
    let m = manifest();
    let release = m["profile"]["release"]
        .as_table()
        .expect("[profile.release]");
    if let Some(level) = release.get("opt-level") {
        assert_eq!(
            opt_level(level),
            "3",
            "the release profile itself must stay at opt-level 3"
        );
    }
    assert_eq!(
        release.get("debug").and_then(toml::Value::as_bool),
        Some(false),
        "the release profile keeps no debug info (the `profiling` profile has it)"
    );
    let packages = release
        .get("package")
        .and_then(toml::Value::as_table)
        .expect("[profile.release.package.*]: the lowered crates");
    let mut refused = Vec::new();
    for (name, settings) in packages {
        let Some(level) = settings.get("opt-level") else {
            continue;
        };
        if opt_level(level) == "3" {
            continue;
        }
        if name == "*" || !RUNS_ONCE.iter().any(|(c, _)| c == name) {
            refused.push(format!("{name} (opt-level {})", opt_level(level)));
        }
    }
    assert!(
        refused.is_empty(),
        "optimised less without a reason in RUNS_ONCE (a frame, probe or link may run it): {refused:?}"
    );
    for (name, _) in RUNS_ONCE {
        assert!(
            packages.contains_key(*name),
            "{name} is on RUNS_ONCE but not lowered: take it out"
        );
    }
}
