//! End-to-end: `ictus survey` writes a complete results directory, and Ctrl-C leaves
//! a consistent, incomplete one with nothing running and nothing left behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

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

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_survey_writes_every_record_the_manifest_and_both_reports() {
    let root = temp_dir("full");
    let out = assert_cmd::Command::cargo_bin("ictus")
        .unwrap()
        .args(["survey", "--profile", "smoke", "--results"])
        .arg(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = results(&root);
    let manifest = json(&dir.join("survey.json"));
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
                let record = json(&dir.join(step["file"].as_str().unwrap()));
                assert_eq!(record["probe"], step["probe"]);
            }
            "skipped" => assert!(step["reason"].is_string(), "{step}"),
            other => panic!("step {} is {other}", step["id"]),
        }
    }
    assert!(json(&dir.join("doctor.json"))["checks"].is_array());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(line), "the report leads with the verdict");
    assert!(
        std::fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .contains("<svg")
    );
    assert!(stdout.contains("Report: "));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn ctrl_c_stops_the_survey_and_leaves_an_incomplete_consistent_directory() {
    let root = temp_dir("stopped");
    let bin = assert_cmd::cargo::cargo_bin("ictus");
    let child = std::process::Command::new(bin)
        .args(["survey", "--profile", "smoke", "--results"])
        .arg(&root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
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
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a stopped survey still writes and exits 0"
    );
    let dir = results(&root);
    let manifest = json(&dir.join("survey.json"));
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
