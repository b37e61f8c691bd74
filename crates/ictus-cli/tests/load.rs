//! End-to-end: `ictus load` as a user runs it.

mod common;

use common::{ictus, json_only, refused, succeeds};

/// Runs `ictus` expecting a usage error: exit 2 and one line on stderr.
fn usage_error(args: &[&str]) -> String {
    refused(ictus().args(args))
}

#[test]
fn a_short_cpu_load_reports_its_rate_as_json() {
    let reports = json_only(ictus().args(["load", "cpu", "--duration", "300ms", "--json"]));
    let reports = reports.as_array().expect("a JSON array");
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["kind"], "cpu");
    assert!(r["workers"].as_u64().unwrap() >= 1);
    assert!(r["duration_ns"].as_u64().unwrap() > 0);
    assert!(r["cpu_time_ns"].as_u64().unwrap() > 0);
    assert!(r["metrics"]["ops_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0);
}

#[test]
fn an_unknown_kind_is_a_usage_error_naming_it() {
    let stderr = usage_error(&["load", "bogus"]);
    assert!(stderr.contains("bogus"), "{stderr}");
}

#[test]
fn an_offline_cpu_is_a_usage_error() {
    let stderr = usage_error(&["load", "cpu", "--cpus", "1000", "--duration", "1s"]);
    assert!(stderr.contains("1000"), "{stderr}");
}

#[test]
fn a_zero_duration_is_a_usage_error() {
    usage_error(&["load", "cpu", "--duration", "0s"]);
}

#[test]
fn the_human_view_has_one_line_per_load() {
    let out = succeeds(ictus().args(["load", "cpu", "syscall", "--duration", "200ms"]));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("cpu") && lines[0].contains("ops"));
    assert!(lines[1].starts_with("syscall") && lines[1].contains("ops"));
}
