//! End-to-end: `ictus survey` writes a complete results directory, and Ctrl-C leaves
//! a consistent, incomplete one with nothing running and nothing left behind. As
//! root, with a writable cpuset (v1), the survey applies its shield for the shielded
//! steps and resets it exactly: a snapshot of the machine (cpusets, IRQ affinities,
//! the RT throttle) is the same before and after, also after Ctrl-C while shielded.
#![allow(clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// A survey may apply a shield: the tests run one at a time.
use common::{ictus, kill, one_at_a_time, read_json, succeeds};
use ictus_shield::snapshot::{differences, state};
use serde_json::Value;

/// Why the survey will not try the shielded configuration here, if it will not.
fn no_shield() -> Option<String> {
    if let Some(need) = ictus_shield::apply::privilege_shortfall() {
        return Some(format!("the shield needs {need}"));
    }
    if !ictus_os::facts::cgroups()
        .cpuset
        .is_some_and(|c| c.writable && c.version == 1)
    {
        return Some("no writable cgroup v1 cpuset".into());
    }
    if ictus_os::facts::online_cpus().len() < 2 {
        return Some("fewer than two online CPUs".into());
    }
    if Path::new(ictus_shield::DEFAULT_JOURNAL).exists() {
        return Some("a shield is applied on this machine".into());
    }
    None
}

/// What changed on the machine between two snapshots, tasks aside (they come and go).
fn changed(before: &BTreeMap<String, String>) -> Vec<String> {
    differences(before, &state())
        .into_iter()
        .filter(|d| !d.starts_with("task:"))
        .collect()
}

/// The shield's log in a manifest, and its shielded steps' statuses.
fn shield_of(manifest: &Value) -> (Vec<String>, Vec<String>) {
    let log = manifest["shield"]
        .as_array()
        .map(|a| a.iter().map(|l| l.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    let steps = manifest["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["class"] == "shielded")
        .map(|s| s["status"].as_str().unwrap().to_string())
        .collect();
    (log, steps)
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ictus-survey-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The one results directory a survey made under `root`.
fn results(root: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "one results directory: {dirs:?}");
    dirs[0].clone()
}

/// A smoke survey into `root`, running (its stdout piped), to be interrupted.
fn smoke_survey(root: &Path) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("ictus"))
        .args(["survey", "--profile", "smoke", "--results"])
        .arg(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Ctrl-C to the survey: it must still write what it measured and exit 0.
fn interrupt(child: std::process::Child) -> std::process::Output {
    kill("INT", child.id());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a stopped survey still writes and exits 0"
    );
    out
}

#[test]
fn a_survey_writes_every_record_the_manifest_and_both_reports() {
    let _machine = one_at_a_time();
    let before = state();
    let root = temp_dir("full");
    let out = succeeds(
        ictus()
            .args(["survey", "--profile", "smoke", "--results"])
            .arg(&root),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = results(&root);
    let manifest = read_json(&dir.join("survey.json"));
    assert_eq!(manifest["schema"], "ictus.survey");
    assert_eq!(manifest["complete"], true);
    let line = manifest["verdict"]["line"].as_str().unwrap();
    assert!(
        line.starts_with("Yes: ") || line.starts_with("No: "),
        "{line}"
    );
    assert!(
        stdout.starts_with(line),
        "the terminal leads with the verdict: {stdout}"
    );
    for step in manifest["steps"].as_array().unwrap() {
        match step["status"].as_str().unwrap() {
            "done" => {
                let record = read_json(&dir.join(step["file"].as_str().unwrap()));
                assert_eq!(record["probe"], step["probe"]);
            }
            "skipped" => assert!(step["reason"].is_string(), "{step}"),
            other => panic!("step {} is {other}", step["id"]),
        }
    }
    assert!(read_json(&dir.join("doctor.json"))["checks"].is_array());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(line), "the report leads with the verdict");
    assert!(
        std::fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .contains("<svg")
    );
    assert!(stdout.contains("Report: "));
    // The shielded configuration: tried and undone exactly, or skipped saying why.
    let (log, shielded) = shield_of(&manifest);
    match no_shield() {
        None => {
            assert!(
                log.first()
                    .is_some_and(|l| l.starts_with("applied: RT CPUs"))
                    && log.last().is_some_and(|l| l.starts_with("reset: ")),
                "{log:?}"
            );
            assert!(shielded.iter().any(|s| s == "done"), "{shielded:?}");
        }
        Some(why) => {
            eprintln!("the shielded steps were skipped: {why}");
            assert!(shielded.iter().all(|s| s == "skipped"), "{shielded:?}");
        }
    }
    assert_eq!(
        changed(&before),
        Vec::<String>::new(),
        "the machine is as it was"
    );
    python_reads(&dir, &manifest);
    std::fs::remove_dir_all(&root).unwrap();
}

/// The Python package (python/ictus, issue 34) reads the survey directory just made:
/// its steps and verdict as the manifest has them.
fn python_reads(dir: &Path, manifest: &Value) {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let Ok(out) = std::process::Command::new("python3")
        .args(["-m", "ictus", "show"])
        .arg(dir)
        .env("PYTHONPATH", &package)
        .output()
    else {
        ictus_os::testing::skipped(
            "a_survey_writes_every_record_the_manifest_and_both_reports (Python)",
            "no python3",
        );
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = manifest["steps"].as_array().unwrap();
    let done = steps.iter().filter(|s| s["status"] == "done").count();
    assert!(text.contains(&format!("{done} done")), "{text}");
    let line = manifest["verdict"]["line"].as_str().unwrap();
    assert!(text.contains(line), "{text}");
}

#[test]
fn ctrl_c_while_shielded_resets_the_shield_exactly() {
    if let Some(why) = no_shield() {
        ictus_os::testing::skipped("ctrl_c_while_shielded_resets_the_shield_exactly", &why);
        return;
    }
    let _machine = one_at_a_time();
    let before = state();
    let root = temp_dir("shielded");
    let mut child = smoke_survey(&root);
    let pid = child.id();
    // Wait until this survey's shield is applied (its journal exists), then Ctrl-C.
    // It comes after the pinned and unpinned steps, which take what the machine
    // makes them take (123 s on this VM on 2026-11-28, past a 120 s limit this
    // test had): the test waits for the survey, and fails only if the survey ends
    // without a shield (or after 10 minutes, ending it).
    let journal_of_child = || {
        std::fs::read_dir("/run/ictus").ok().and_then(|d| {
            d.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("survey-shield-{pid}-")))
            })
        })
    };
    let start = Instant::now();
    let journal = loop {
        if let Some(j) = journal_of_child() {
            break j;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the survey ended ({status}) without applying its shield");
        }
        if start.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the survey had not applied its shield after 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !changed(&before).is_empty(),
        "the shield changed the machine"
    );
    interrupt(child);
    assert_eq!(
        changed(&before),
        Vec::<String>::new(),
        "the machine is as it was"
    );
    assert!(!journal.exists(), "the journal is gone with the shield");
    let manifest = read_json(&results(&root).join("survey.json"));
    assert_eq!(manifest["complete"], false);
    let (log, _) = shield_of(&manifest);
    assert!(
        log.last().is_some_and(|l| l.starts_with("reset: ")),
        "{log:?}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn ctrl_c_stops_the_survey_and_leaves_an_incomplete_consistent_directory() {
    let _machine = one_at_a_time();
    let root = temp_dir("stopped");
    let child = smoke_survey(&root);
    // Wait until the survey has written its first records, then interrupt it.
    let start = Instant::now();
    loop {
        let written = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| std::fs::read_dir(e.path()).map_or(0, |d| d.count()))
            .sum::<usize>();
        if written >= 4 || start.elapsed() > Duration::from_secs(20) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = child.id();
    let out = interrupt(child);
    let dir = results(&root);
    let manifest = read_json(&dir.join("survey.json"));
    assert_eq!(manifest["complete"], false);
    let statuses: Vec<&str> = manifest["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert!(statuses.contains(&"not-run"), "{statuses:?}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("INCOMPLETE"),
        "the report says it is incomplete"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("INCOMPLETE"));
    // No load left a scratch directory behind.
    let leftovers: Vec<_> = std::fs::read_dir("/var/tmp")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&format!("ictus-load-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir_all(&root).unwrap();
}
