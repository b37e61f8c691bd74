//! Bad input and faults (issue 10): every refusal is exit 2 with one line naming what
//! was wrong and the limit; nothing hangs, panics or leaves half a file.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use predicates::prelude::*;

fn ictus() -> Command {
    let mut c = common::ictus();
    // A refusal comes before any measurement: a hang shows as a timeout, not a stall.
    c.timeout(Duration::from_secs(30));
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ictus-report/tests/fixtures/survey-a")
        .join(name)
}

/// Runs `args`, expects exit 2 and one stderr line containing every one of `words`.
fn refused(args: &[&str], words: &[&str]) {
    let err = common::refused(ictus().args(args));
    for w in words {
        assert!(err.contains(w), "{args:?}: expected '{w}' in {err}");
    }
}

#[test]
fn absurd_sizes_and_counts_are_refused_naming_the_limit() {
    let max = "18446744073709551615";
    refused(
        &["probe", "loop", "--exchange", max],
        &["exchange", "1048576"],
    );
    refused(
        &["probe", "rendezvous", "--payload", "1000000000000"],
        &["payload", "1048576"],
    );
    refused(
        &["probe", "rendezvous", "--spacing", max],
        &["spacing", "1048576"],
    );
    refused(
        &["probe", "compute", "--sizes", max],
        &["modules", "10000001"],
    );
    refused(
        &["probe", "loop", "--modules", "1000000000000"],
        &["modules", "10000001"],
    );
    refused(
        &["probe", "memlat", "--sizes", "1000G"],
        &["--sizes", "16 GiB"],
    );
    refused(
        &["probe", "jitter", "--threads", "2", "--elements", max],
        &["elements"],
    );
    refused(&["probe", "pingpong", "--loops", max], &["1000000000000"]);
    refused(
        &["survey", "--exchange", "18446744073709551615K"],
        &["limit"],
    );
}

#[test]
fn absurd_times_are_refused_naming_the_limit() {
    refused(&["probe", "timer", "--duration", "1000years"], &["1day"]);
    refused(
        &["probe", "timer", "--interval", "18446744073709551615ns"],
        &["--interval", "1s"],
    );
    // A period beyond a second would hold off a Ctrl-C for as long.
    refused(
        &["probe", "timer", "--interval", "1h"],
        &["--interval", "1s"],
    );
    refused(&["probe", "pingpong", "--warmup", "100years"], &["1day"]);
    refused(
        &["probe", "timer", "--loops", "1000000", "--interval", "1s"],
        &["--loops", "1day"],
    );
    refused(&["load", "cpu", "--duration", "2days"], &["1day"]);
}

#[test]
fn fifos_and_devices_given_as_inputs_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.json");
    ictus_os::testing::mkfifo(&fifo).unwrap();
    let f = fifo.to_str().unwrap();
    refused(&["import", "cyclictest", f], &["a FIFO"]);
    refused(&["report", f], &["a FIFO"]);
    refused(&["compare", f, f], &["a FIFO"]);
    refused(&["scenario", f], &["a FIFO"]);
    refused(
        &["import", "cyclictest", "/dev/zero"],
        &["character device"],
    );
}

#[test]
fn a_bad_output_path_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/out.json");
    let m = missing.to_str().unwrap();
    // --duration 1day would run for a day if the path were checked afterwards.
    refused(
        &["probe", "timer", "--duration", "1day", "-o", m],
        &["does not exist"],
    );
    refused(
        &[
            "import",
            "cyclictest",
            fixture("survey.json").to_str().unwrap(),
            "-o",
            m,
        ],
        &["does not exist"],
    );
    let rec = fixture("timer-normal-unpinned-cpu.json");
    let r = rec.to_str().unwrap();
    refused(&["compare", r, r, "--html", m], &["does not exist"]);
    refused(
        &["probe", "timer", "-o", dir.path().to_str().unwrap()],
        &["is a directory"],
    );
}

/// Runs `args` on `file` (holding `text`), expects exit 2 and one stderr line that
/// names `FILE:LINE:COLUMN` and contains `words`; returns the JSON value (or key) that
/// starts at that place.
fn refused_at(args: &[&str], file: &Path, text: &str, words: &str) -> serde_json::Value {
    let mut all: Vec<&str> = args.to_vec();
    all.push(file.to_str().unwrap());
    let err = common::refused(ictus().args(&all));
    assert!(err.contains(words), "expected '{words}' in {err}");
    let prefix = format!("ictus: {}:", file.display());
    let rest = err
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("no FILE: in {err}"));
    let mut numbers = rest.splitn(3, ':');
    let line: usize = numbers.next().unwrap().parse().expect(&err);
    let column: usize = numbers.next().unwrap().parse().expect(&err);
    ictus_os::json::value_at(text, ictus_os::json::Place { line, column })
        .unwrap_or_else(|| panic!("{err}: no value at {line}:{column}"))
}

#[test]
fn records_are_validated_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let good: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("loop-rt-pinned-idle.json")).unwrap(),
    )
    .unwrap();
    // (name, JSON pointer, bad value, words in the message)
    let cases: &[(&str, &str, serde_json::Value, &str)] = &[
        (
            "probe",
            "/probe",
            serde_json::json!("warp"),
            "probe: expected one of",
        ),
        (
            "empty-probe",
            "/probe",
            serde_json::json!(""),
            "probe: expected one of",
        ),
        (
            "version",
            "/schema_version",
            serde_json::json!("1"),
            "schema_version: expected the whole number 1, found a string",
        ),
        (
            "negative-version",
            "/schema_version",
            serde_json::json!(-1),
            "schema_version: expected the whole number 1",
        ),
        (
            "huge-version",
            "/schema_version",
            serde_json::json!(99_999_999_999u64),
            "version 99999999999",
        ),
        (
            "figure",
            "/measurements/0/metrics/late_steps",
            serde_json::json!(-1.0),
            "metrics.late_steps: expected a figure",
        ),
        (
            "mean",
            "/measurements/0/latency/summary/mean_ns",
            serde_json::json!(1e308),
            "summary.mean_ns: expected a figure",
        ),
        (
            "cpu-count",
            "/provenance/cpu_count",
            serde_json::json!(99_999_999_999u64),
            "provenance.cpu_count: expected a CPU count",
        ),
        (
            "online-cpus",
            "/provenance/online_cpus",
            serde_json::json!([0, 99_999_999_999u64]),
            "provenance.online_cpus[1]: expected a CPU number",
        ),
        (
            "count-type",
            "/measurements/0/latency/summary/count",
            serde_json::json!("3"),
            "summary.count: invalid type",
        ),
        (
            "array",
            "",
            serde_json::json!([1, 2]),
            "expected 'ictus.run-record'",
        ),
    ];
    for (name, at, bad, words) in cases {
        let mut v = good.clone();
        *v.pointer_mut(at).unwrap() = bad.clone();
        let path = dir.path().join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&v).unwrap();
        std::fs::write(&path, &text).unwrap();
        let found = refused_at(&["report"], &path, &text, words);
        let expected = match bad.as_array() {
            Some(cpus) if *name == "online-cpus" => cpus[1].clone(),
            _ => bad.clone(),
        };
        assert_eq!(found, expected, "{name}");
        assert!(!dir.path().join("report.md").exists(), "{name}");
        // compare reads records the same way.
        let r = fixture("timer-normal-unpinned-cpu.json");
        let out = ictus()
            .args(["compare", r.to_str().unwrap(), path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("{}:", path.display())),
            "{name}"
        );
    }
    // A cyclictest file where a record was expected: placed at the top.
    let ct = dir.path().join("ct.json");
    let text = "{\"thread\": {\"0\": {\"histogram\": {\"1\": 1}, \"cycles\": 1}}}";
    std::fs::write(&ct, text).unwrap();
    let found = refused_at(&["report"], &ct, text, "expected 'ictus.run-record'");
    assert!(found.get("thread").is_some());
}

#[test]
fn invalid_utf8_is_named_once_with_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, b"{\n  \"schema\": \"\xff\xfe\"\n}\n").unwrap();
    let out = ictus()
        .args(["report", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json:2:14:"), "{err}");
    assert_eq!(err.matches("UTF-8").count(), 1, "{err}");
}

#[test]
fn cyclictest_counts_are_imported_in_bulk_and_bad_ones_refused_at_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::write(
        &huge,
        r#"{"thread": {"0": {"histogram": {"3": 1000000000000000000}, "cycles": 1000000000000000000}}}"#,
    )
    .unwrap();
    let out = dir.path().join("rec.json");
    ictus()
        .args(["import", "cyclictest"])
        .arg(&huge)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        rec["threads"][0]["latency"]["summary"]["count"],
        1_000_000_000_000_000_000u64
    );
    // (name, text, words, the value or key at the place named)
    let cases: &[(&str, &str, &str, serde_json::Value)] = &[
        (
            "neg",
            "{\"thread\": {\"0\": {\n\"histogram\": {\"3\": -1}, \"cycles\": 1}}}",
            "invalid value",
            serde_json::json!(-1),
        ),
        (
            "plus",
            "{\"thread\": {\"0\": {\n\"histogram\": {\"+5\": 1}, \"cycles\": 1}}}",
            "expected a bucket in whole microseconds",
            serde_json::json!("+5"),
        ),
        (
            "max-text",
            "{\"thread\": {\"0\": {\"histogram\": {\"5\": 1},\n \"cycles\": 1, \"max\": \"7\"}}}",
            "thread.0.max: invalid type: string",
            serde_json::json!("7"),
        ),
        (
            "max-word",
            "{\"thread\": {\"0\": {\"histogram\": {\"5\": 1},\n \"cycles\": 1, \"max\": \"string\"}}}",
            "thread.0.max: invalid type: string",
            serde_json::json!("string"),
        ),
        (
            "array",
            "[\n  1\n]",
            "expected an object at the top",
            serde_json::json!([1]),
        ),
        (
            "empty",
            "{\"thread\":\n {}}",
            "no thread results",
            serde_json::json!({}),
        ),
        (
            "hist-array",
            "{\"thread\": {\"0\": {\"histogram\": [1], \"cycles\": 1}}}",
            "-h N",
            serde_json::json!([1]),
        ),
        (
            "avg",
            "{\"thread\": {\"0\": {\"histogram\": {\"5\": 1},\n \"cycles\": 1, \"avg\": -3}}}",
            "thread.0.avg: expected a mean latency",
            serde_json::json!(-3),
        ),
        (
            "sum",
            "{\"thread\": {\"0\": {\"histogram\": {\"1\": 18446744073709551615,\n \"2\": 18446744073709551615}, \"cycles\": 1}}}",
            "thread.0.histogram.2: expected counts whose total fits",
            serde_json::json!(18446744073709551615u64),
        ),
    ];
    for (name, text, words, at) in cases {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, text).unwrap();
        let found = refused_at(&["import", "cyclictest"], &path, text, words);
        assert_eq!(&found, at, "{name}");
    }
}

#[test]
fn missing_required_arguments_are_named() {
    for (args, name) in [
        (&["run"][..], "<SCHEDULE>"),
        (&["ctl"][..], "<COMMAND>"),
        (&["exec", "--class", "normal"][..], "<CMD>"),
    ] {
        ictus().args(args).assert().code(2).stderr(
            predicate::str::contains("were not provided:").and(predicate::str::contains(name)),
        );
    }
}

#[test]
fn an_os_error_is_said_once() {
    let out = ictus()
        .args(["import", "cyclictest", "/nonexistent/ct.json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// `(args, words)`: each command must be refused with exit 2, one line, no panic,
/// and every word present (the flag, and the limit or expectation).
type Case<'a> = (&'a [&'a str], &'a [&'a str]);

fn all_refused(cases: &[Case<'_>]) {
    for (args, words) in cases {
        refused(args, words);
    }
}

#[test]
fn negative_numbers_reach_the_option_and_are_refused_naming_it() {
    all_refused(&[
        (
            &["probe", "timer", "--loops", "-1"],
            &["'--loops <LOOPS>'", "-1"],
        ),
        (
            &["probe", "timer", "--interval", "-1"],
            &["--interval", "negative"],
        ),
        (
            &["probe", "timer", "--priority", "-5"],
            &["--priority", "1..=99"],
        ),
        (
            &["probe", "timer", "--duration", "-1s"],
            &["--duration", "negative"],
        ),
        (&["probe", "pingpong", "--duration", "-1s"], &["--duration"]),
        (&["probe", "irq", "--duration", "-1s"], &["--duration"]),
        (&["probe", "jitter", "--runs", "-1"], &["--runs"]),
        (&["probe", "jitter", "--work", "-1"], &["--work"]),
        (&["probe", "rendezvous", "--spacing", "-1"], &["--spacing"]),
        (&["probe", "rendezvous", "--payload", "-1"], &["--payload"]),
        (
            &["probe", "throughput", "--max-payload", "-1"],
            &["--max-payload"],
        ),
        (&["probe", "throughput", "--sizes", "-1"], &["--sizes"]),
        (&["probe", "memlat", "--sizes", "-1"], &["--sizes"]),
        (&["probe", "memlat", "--sizes", "-4K"], &["--sizes"]),
        (
            &["probe", "memlat", "--point-time", "-1s"],
            &["--point-time"],
        ),
        (&["probe", "loop", "--steps", "-1"], &["--steps"]),
        (
            &["probe", "loop", "--frequency", "-10kHz"],
            &["--frequency"],
        ),
        (&["probe", "compute", "--sizes", "-1"], &["--sizes"]),
        (&["run", "x.toml", "--duration", "-1s"], &["--duration"]),
        (
            &["compare", "a", "b", "--reference", "-1"],
            &["--reference"],
        ),
    ]);
}

#[test]
fn trailing_words_of_exec_keep_their_hyphens() {
    ictus()
        .args([
            "exec", "--class", "normal", "--quiet", "--", "echo", "-1", "--json",
        ])
        .assert()
        .success()
        .stdout("-1 --json\n");
}

#[test]
fn a_flag_given_where_a_path_is_expected_is_not_taken_as_the_path() {
    refused(&["probe", "timer", "-o", "--json"], &["--output"]);
}

#[test]
fn bounds_checked_after_reading_a_value_name_the_flag_and_the_limit() {
    let max = "18446744073709551615";
    all_refused(&[
        (
            &["probe", "rendezvous", "--spacing", max],
            &["--spacing", "1048576"],
        ),
        (
            &["probe", "rendezvous", "--spacing", "2M"],
            &["--spacing", "1 MiB"],
        ),
        (
            &["probe", "rendezvous", "--payload", "1048577"],
            &["--payload", "1048576"],
        ),
        (
            &["probe", "rendezvous", "--payload", max],
            &["--payload", "1048576"],
        ),
        (
            &["probe", "rendezvous", "--threads", "0"],
            &["--threads", "2"],
        ),
        (
            &["probe", "rendezvous", "--threads", "1"],
            &["--threads", "2"],
        ),
        (
            &["probe", "rendezvous", "--threads", "1025"],
            &["--threads", "1024"],
        ),
        (
            &["probe", "rendezvous", "--threads", max],
            &["--threads", "1024"],
        ),
        (&["probe", "memlat", "--sizes", "0"], &["--sizes", "4096"]),
        (&["probe", "memlat", "--sizes", "3K"], &["--sizes", "4096"]),
        (
            &["probe", "memlat", "--sizes", "4097"],
            &["--sizes", "64-byte"],
        ),
        (
            &["probe", "memlat", "--sizes", "17G"],
            &["--sizes", "17179869184"],
        ),
        (
            &["probe", "memlat", "--sizes", max],
            &["--sizes", "17179869184"],
        ),
        (&["probe", "memlat", "--sizes", ""], &["--sizes", "empty"]),
        (
            &["probe", "memlat", "--strides", "0"],
            &["--strides", "at least 1"],
        ),
        (
            &["probe", "memlat", "--strides", "2M"],
            &["--strides", "1048576"],
        ),
        (
            &["probe", "memlat", "--strides", max],
            &["--strides", "1048576"],
        ),
        (
            &["probe", "memlat", "--repeat", "0"],
            &["--repeat", "1..=1000"],
        ),
        (&["probe", "memlat", "--threads", "0"], &["--threads", "1"]),
        (
            &["probe", "timer", "--cpus", "1023"],
            &["--cpus", "not online"],
        ),
        (
            &["probe", "timer", "--cpus", "0-1023"],
            &["--cpus", "not online"],
        ),
        (&["probe", "timer", "--cpus", "5000"], &["--cpus", "1023"]),
        (&["probe", "timer", "--cpus", ""], &["--cpus", "no CPU"]),
        (
            &["probe", "timer", "--load", "cpu", "--load-cpus", "1023"],
            &["--load-cpus", "not online"],
        ),
        (
            &["probe", "loop", "--frequency", "-10kHz"],
            &["--frequency", "200000 Hz"],
        ),
        (
            &["probe", "loop", "--frequency", "1e12Hz"],
            &["--frequency", "200000 Hz"],
        ),
        (
            &["probe", "loop", "--frequency", "0.0001Hz"],
            &["--frequency", "100 Hz"],
        ),
        (
            &["probe", "loop", "--frequency", "1Hz"],
            &["--frequency", "100 Hz"],
        ),
        (
            &["probe", "loop", "--threads", "0"],
            &["--threads", "at least 1"],
        ),
        (&["probe", "loop", "--threads", max], &["--threads", "1024"]),
        (
            &["probe", "loop", "--threads", "1024"],
            &["--threads", "CPU"],
        ),
        (&["probe", "loop", "--modules", "0"], &["--modules", "3"]),
        (
            &["probe", "loop", "--modules", max],
            &["--modules", "10000001"],
        ),
        (
            &["probe", "loop", "--exchange", max],
            &["--exchange", "1048576"],
        ),
        (&["probe", "compute", "--sizes", "0"], &["--sizes", "3"]),
        (
            &["probe", "compute", "--sizes", max],
            &["--sizes", "10000001"],
        ),
        (
            &["probe", "compute", "--split-modules", max],
            &["--split-modules", "10000001"],
        ),
        (
            &["probe", "compute", "--threads", "0"],
            &["--threads", "at least 1"],
        ),
        (
            &["probe", "compute", "--threads", "1024"],
            &["--threads", "CPUs"],
        ),
        (
            &["probe", "compute", "--reference", "/nonexistent/r.json"],
            &["--reference", "/nonexistent/r.json"],
        ),
        (
            &["probe", "irq", "--interval", "10us", "--duration", "1s"],
            &["--interval", "100us"],
        ),
    ]);
}

#[test]
fn bounds_of_load_ctl_and_exec_name_the_flag_and_the_limit() {
    let max = "18446744073709551615";
    all_refused(&[
        (
            &["load", "cpu", "--cpus", "1023"],
            &["--cpus", "not online"],
        ),
        (&["load", "cpu", "--cpus", ""], &["--cpus", "no CPU"]),
        (
            &["ctl", "--name", "../../x", "status"],
            &["--name", "run name"],
        ),
        (&["ctl", "--name", "a/b", "status"], &["--name", "run name"]),
        (&["ctl", "--name", "", "status"], &["--name", "empty"]),
        (&["ctl", "--name", ".", "status"], &["--name", "run name"]),
        (
            &["ctl", "--name", "a\nb", "status"],
            &["--name", "run name"],
        ),
        (
            &["ctl", "--name", "\u{e9}", "status"],
            &["--name", "run name"],
        ),
        (
            &["exec", "--class", "rt0", "--cpu", "1023", "--", "true"],
            &["--cpu", "not online"],
        ),
        (
            &["exec", "--class", "rt0", "--cpu", max, "--", "true"],
            &["--cpu", "1023"],
        ),
        (
            &["exec", "--class", "rt1", "--priority", "0", "--", "true"],
            &["--priority", "1 to 98"],
        ),
        (
            &["exec", "--class", "rt1", "--priority", "99", "--", "true"],
            &["--priority", "1 to 98"],
        ),
    ]);
    refused(
        &["ctl", "--name", &"a".repeat(65), "status"],
        &["--name", "64"],
    );
}

#[test]
fn nonsense_that_used_to_run_is_refused_naming_the_flag() {
    all_refused(&[
        (
            &["probe", "timer", "--cpus", "0,,1", "--duration", "1s"],
            &["--cpus", "empty item"],
        ),
        (
            &["probe", "timer", "--cpus", "0,", "--duration", "1s"],
            &["--cpus", "empty item"],
        ),
        (
            &["probe", "memlat", "--sizes", "4K,,8K", "--quick"],
            &["--sizes", "empty item"],
        ),
        (
            &["probe", "memlat", "--strides", "4,", "--quick"],
            &["--strides", "empty item"],
        ),
        (
            &[
                "probe",
                "timer",
                "--mode",
                "hybrid",
                "--margin",
                "2ms",
                "--interval",
                "1ms",
                "--duration",
                "1s",
            ],
            &["--margin", "shorter than the interval"],
        ),
        (
            &[
                "probe",
                "timer",
                "--mode",
                "hybrid",
                "--margin",
                "1ms",
                "--interval",
                "1ms",
                "--duration",
                "1s",
            ],
            &["--margin", "shorter than the interval"],
        ),
        (
            &["probe", "irq", "--cpus", "1023", "--duration", "1s"],
            &["--cpus", "not online"],
        ),
    ]);
}
