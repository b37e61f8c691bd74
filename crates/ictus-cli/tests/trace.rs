//! End-to-end: `--trace FILE.json` on `ictus run` and `ictus probe loop` writes a
//! timeline in the Chrome/Perfetto trace-event format.

mod common;

use common::{ictus, ictus_in, read_json, refused, scratch_run, stress_copy, succeeds};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

/// A folder with the stress schedule under run name `cli-TAG-PID`: the folder,
/// the schedule and the trace file to write there.
fn stress(tag: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, name) = scratch_run(tag);
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("trace.json");
    (dir, schedule, file)
}

/// The events of a trace file.
fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"].as_array().expect("traceEvents")
}

/// The name of track `tid` of process `pid`.
fn track_name(trace: &Value, pid: u64, tid: u64) -> Option<&str> {
    events(trace)
        .iter()
        .find(|e| {
            e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid && e["tid"] == tid
        })
        .and_then(|e| e["args"]["name"].as_str())
}

/// The complete events named `name` on track `tid` of process `pid`.
fn complete<'a>(trace: &'a Value, pid: u64, tid: u64, name: &'a str) -> Vec<&'a Value> {
    events(trace)
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid && e["name"] == name)
        .collect()
}

#[test]
fn a_stress_run_traces_each_subsystem_on_its_own_named_track() {
    let (dir, schedule, file) = stress("trace");
    let out = succeeds(
        ictus_in(dir.path())
            .args(["run", "--duration", "300ms", "--quiet", "--trace"])
            .arg(&file)
            .arg(&schedule),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trace: "), "the run says where: {stderr}");
    let trace = read_json(&file);
    assert_eq!(trace["displayTimeUnit"], "ns");
    assert_eq!(trace["metadata"]["left_out"], 0);
    for (slot, sub) in ["A", "B", "C"].into_iter().enumerate() {
        // Tids are unique in the file: 1 + the slot, 1000 + the CPU.
        let tid = 1 + slot as u64;
        assert_eq!(
            track_name(&trace, 1, tid),
            Some(sub),
            "subsystem {sub}'s track"
        );
        let runs = complete(&trace, 1, tid, sub);
        assert!(!runs.is_empty(), "{sub} ran");
        let mut frames: Vec<u64> = runs
            .iter()
            .map(|e| e["args"]["frame"].as_u64().unwrap())
            .collect();
        let n = frames.len();
        frames.dedup();
        assert_eq!(frames.len(), n, "{sub}: one execution per frame");
        // The same executions on the CPUs' tracks.
        let on_cpus: usize = (0..64)
            .map(|cpu| complete(&trace, 2, 1000 + cpu, sub).len())
            .sum();
        assert_eq!(on_cpus, n, "{sub}'s executions on its CPUs");
    }
}

#[test]
fn an_unwritable_trace_is_refused_before_the_run_starts() {
    let (dir, schedule, _) = stress("trace-out");
    let file = dir.path().join("no/such/dir/trace.json");
    let err = refused(
        ictus_in(dir.path())
            .args(["run", "--duration", "30s", "--trace"])
            .arg(&file)
            .arg(&schedule),
    );
    assert!(
        err.contains("--trace") && err.contains("does not exist"),
        "{err}"
    );
}

/// `ictus probe loop` at 1 kHz for `steps` steps (a small model, the normal
/// class) with `args`, traced to a file in a new folder: the folder, the file
/// and what the probe printed.
fn traced_loop(steps: &str, args: &[&str]) -> (tempfile::TempDir, PathBuf, Output) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("loop.json");
    let out = succeeds(
        ictus()
            .args([
                "probe",
                "loop",
                "-f",
                "1kHz",
                "--modules",
                "101",
                "-n",
                steps,
            ])
            .args(["--policy", "other"])
            .args(args)
            .arg("--trace")
            .arg(&file),
    );
    (dir, file, out)
}

/// Checks that the trace `file` kept under a 64 KiB cap and ends with the note.
fn capped(file: &Path) {
    assert!(std::fs::metadata(file).unwrap().len() <= 64 << 10);
    let trace = read_json(file);
    let left_out = trace["metadata"]["left_out"].as_u64().unwrap();
    assert!(left_out > 0);
    let note = events(&trace).last().unwrap();
    assert_eq!(
        note["name"],
        format!("trace cap reached: {left_out} events left out")
    );
}

#[test]
fn the_loop_probe_traces_the_phases_of_every_step_of_every_thread() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record.json");
    let (_trace_dir, file, _) = traced_loop("300", &["-o", record.to_str().unwrap()]);
    let threads = read_json(&record)["threads"].as_array().unwrap().len() as u64;
    let trace = read_json(&file);
    assert_eq!(
        events(&trace)
            .iter()
            .find(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].clone()),
        Some(Value::from("loop at 1 kHz"))
    );
    for me in 0..threads {
        // Trial 1's tracks: tid 10,001 for the leader, then one per thread.
        let tid = 10_001 + me;
        let name = track_name(&trace, 1, tid).unwrap_or_else(|| panic!("thread {me} named"));
        assert!(name.contains("CPU"), "{name}");
        let steps = complete(&trace, 1, tid, "step");
        assert!(!steps.is_empty(), "thread {me} stepped");
        for phase in ["rendezvous 1", "forces", "rendezvous 2", "integrate"] {
            assert_eq!(
                complete(&trace, 1, tid, phase).len(),
                steps.len(),
                "thread {me}: {phase} in every step"
            );
        }
    }
}

#[test]
fn a_capped_loop_trace_ends_with_a_note_and_warns() {
    let (_dir, file, out) = traced_loop("2000", &["--trace-cap", "64KiB"]);
    capped(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("reached its cap") || stderr.contains("reached its cap"),
        "the run says so: {stdout}{stderr}"
    );
}

#[test]
fn a_capped_run_trace_is_warned_and_recorded() {
    let (dir, schedule, file) = stress("trace-cap");
    let record = dir.path().join("record.json");
    let out = succeeds(
        ictus_in(dir.path())
            .args([
                "run",
                "--duration",
                "500ms",
                "--quiet",
                "--trace-cap",
                "64KiB",
            ])
            .arg("--trace")
            .arg(&file)
            .arg("-o")
            .arg(&record)
            .arg(&schedule),
    );
    capped(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reached its cap"), "{stderr}");
    let r = read_json(&record);
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == "trace-capped"),
        "the record says so"
    );
}
