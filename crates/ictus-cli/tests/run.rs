//! End-to-end: `ictus run` and `ictus ctl` as a user runs them.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn ictus(run_dir: &Path) -> Command {
    let mut c = Command::cargo_bin("ictus").expect("the ictus binary is built");
    c.env("ICTUS_RUN_DIR", run_dir);
    c
}

fn shm_files(name: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.starts_with(&format!("ictus-{name}.")))
                .collect()
        })
        .unwrap_or_default()
}

/// A ring of two built-in subsystems over two inline cells, in one process.
fn ring(name: &str) -> String {
    format!(
        r#"name = "{name}"
tick = "1ms"
major_frame = 2
initial_state = "run"

[stress]
counters = ["P.n", "Q.n"]

[[cell]]
name = "P"
elements = [ {{ name = "n", type = "i32" }}, {{ name = "v", type = "f64", len = 16 }} ]

[[cell]]
name = "Q"
elements = [ {{ name = "n", type = "i32" }}, {{ name = "v", type = "f64", len = 16 }} ]

[[subsystem]]
name = "p"
start = 0
period = 2
builtin = "increment"
config = {{ from = "P", to = "Q" }}

[[subsystem]]
name = "q"
start = 1
period = 2
builtin = "increment"
config = {{ from = "Q", to = "P" }}
"#
    )
}

#[test]
fn a_malformed_schedule_names_file_line_and_column_exits_2_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cli-bad-{}", std::process::id());
    let path = dir.path().join("bad.toml");
    let text = ring(&name).replace(
        "period = 2\nbuiltin = \"increment\"\nconfig = { from = \"Q\"",
        "period = 4\nbuiltin = \"increment\"\nconfig = { from = \"Q\"",
    );
    std::fs::write(&path, text).unwrap();
    let out = ictus(dir.path()).arg("run").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{}:27:10: period 4 is longer than the major frame of 2 minor frames",
        path.display()
    );
    assert!(err.contains(&want), "stderr: {err}");
    assert!(shm_files(&name).is_empty());
    assert!(!dir.path().join(format!("{name}.sock")).exists());
}

#[test]
fn a_malformed_cell_file_names_file_line_and_column_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cells = dir.path().join("cells.toml");
    std::fs::write(
        &cells,
        "[[cell]]\nname = \"A\"\nelements = [ { name = \"x\", type = \"f33\" } ]\n",
    )
    .unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(
        &path,
        "tick = \"1ms\"\nmajor_frame = 1\ncells = \"cells.toml\"\n[[subsystem]]\nname = \"a\"\nbuiltin = \"idle\"\n",
    )
    .unwrap();
    let out = ictus(dir.path()).arg("run").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:3:", cells.display())),
        "stderr: {err}"
    );
    assert!(err.contains("f33"), "stderr: {err}");
}

#[test]
fn an_in_process_subsystem_without_a_builtin_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(
        &path,
        "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n",
    )
    .unwrap();
    let out = ictus(dir.path()).arg("run").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:4:8: subsystem 'a'", path.display())),
        "stderr: {err}"
    );
}

#[test]
fn a_short_in_process_run_writes_a_record_with_per_subsystem_figures() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cli-ring-{}", std::process::id());
    let path = dir.path().join("ring.toml");
    std::fs::write(&path, ring(&name)).unwrap();
    let record = dir.path().join("record.json");
    let out = ictus(dir.path())
        .args(["run", "--duration", "400ms", "--quiet", "-o"])
        .arg(&record)
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(r["schema"], "ictus.run-record");
    assert_eq!(r["probe"], "run");
    assert_eq!(r["parameters"]["tick_ns"], 1_000_000);
    let ms = r["measurements"].as_array().unwrap();
    for sub in ["p", "q"] {
        for kind in ["release-jitter", "execution-time"] {
            let m = ms
                .iter()
                .find(|m| m["name"] == kind && m["labels"]["subsystem"] == sub)
                .unwrap_or_else(|| panic!("{kind} of {sub}"));
            let due = m["metrics"]["releases_due"].as_f64().unwrap();
            let run = m["metrics"]["frames_run"].as_f64().unwrap();
            let over = m["metrics"]["overruns"].as_f64().unwrap();
            assert_eq!(due, 200.0);
            assert_eq!(run + over, due);
            assert_eq!(m["latency"]["summary"]["count"].as_f64().unwrap(), run);
        }
    }
    let stress = ms.iter().find(|m| m["name"] == "stress").unwrap();
    let (frames, value, missed) = (
        stress["metrics"]["run_frames"].as_f64().unwrap(),
        stress["metrics"]["final_value"].as_f64().unwrap(),
        stress["metrics"]["missed_frames"].as_f64().unwrap(),
    );
    assert_eq!(frames, 400.0);
    assert_eq!(missed, frames - value);
    assert!(
        r["headline"]
            .as_str()
            .unwrap()
            .starts_with("stress: 400 frames in RUN")
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("missed frames"));
    assert!(shm_files(&name).is_empty());
}

#[test]
fn ctl_without_a_run_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = ictus(dir.path()).args(["ctl", "pause"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run is active"));
}

#[test]
fn ctl_commands_a_running_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cli-ctl-{}", std::process::id());
    let path = dir.path().join("ring.toml");
    std::fs::write(&path, ring(&name)).unwrap();
    let run = std::process::Command::new(assert_cmd::cargo::cargo_bin("ictus"))
        .env("ICTUS_RUN_DIR", dir.path())
        .args(["run", "--json", "--duration", "3s"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sock = dir.path().join(format!("{name}.sock"));
    for _ in 0..200 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pause = ictus(dir.path())
        .args(["ctl", "pause", "--name", &name])
        .output()
        .unwrap();
    assert!(
        pause.status.success(),
        "{}",
        String::from_utf8_lossy(&pause.stderr)
    );
    assert!(String::from_utf8_lossy(&pause.stdout).starts_with("ok pause from frame "));
    let bad = ictus(dir.path())
        .args(["ctl", "replay", "--name", &name])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let status = ictus(dir.path()).args(["ctl", "status"]).output().unwrap();
    let s: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(s["name"].as_str(), Some(name.as_str()));
    let stop = ictus(dir.path())
        .args(["ctl", "stop", "--name", &name])
        .output()
        .unwrap();
    assert!(stop.status.success());
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let frames = r["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "frames")
        .unwrap();
    assert!(frames["metrics"]["pause_frames"].as_f64().unwrap() > 0.0);
    assert!(
        frames["metrics"]["frames"].as_f64().unwrap() < 3000.0,
        "stopped early"
    );
    assert!(!sock.exists());
}
