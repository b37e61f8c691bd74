//! End-to-end: `ictus run` and `ictus ctl` as a user runs them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use common::{
    exits, finish, ictus_in as ictus, kill, measurements, poll, refused, scratch_run, shm_left,
    socket, spawn_in_group, stress_copy, subsystem_pid, succeeds, wait_for_socket, warns,
    write_file,
};
use serde_json::Value;

/// `ictus run ARGS` in a process group of its own, as a shell runs a foreground job.
fn spawn_run(dir: &Path, args: &[&str]) -> Child {
    spawn_in_group(dir, &[&["run"], args].concat())
}

/// The segments of run `name` left in /dev/shm.
fn shm_files(name: &str) -> Vec<String> {
    shm_left(&format!("{name}."))
}

/// Writes `text` as schedule `file` in `dir`, runs `ictus run ARGS SCHEDULE` there,
/// and checks it is refused before anything starts: exit code 2, one line on
/// stderr. The schedule's path and that line.
fn refused_run(dir: &Path, file: &str, text: &str, args: &[&str]) -> (PathBuf, String) {
    let path = write_file(dir, file, text);
    let err = refused(ictus(dir).arg("run").args(args).arg(&path));
    (path, err)
}

/// A schedule of run `name`, a 1 ms tick and one subsystem `s`, whose last lines
/// are `rest`.
fn one_subsystem(name: &str, rest: &str) -> String {
    format!(
        "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"s\"\n{rest}"
    )
}

/// A schedule in `dir` of run `cli-TAG-PID` whose one subsystem is a program that
/// never joins the run (so it cannot watch the heartbeat): `sleep` with an argument
/// no other process has, `MARK` and this process's id. The run name, that argument
/// and the schedule's path.
fn never_joins(dir: &Path, tag: &str, mark: u8) -> (String, String, PathBuf) {
    let name = format!("cli-{tag}-{}", std::process::id());
    let marker = format!("{mark}{}.5", std::process::id());
    let path = write_file(
        dir,
        &format!("{tag}.toml"),
        &one_subsystem(
            &name,
            &format!("class = \"normal\"\nprocess = \"sleep\"\nargs = [\"{marker}\"]\n"),
        ),
    );
    (name, marker, path)
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
    let (dir, name) = scratch_run("bad");
    let text = ring(&name).replace(
        "period = 2\nbuiltin = \"increment\"\nconfig = { from = \"Q\"",
        "period = 4\nbuiltin = \"increment\"\nconfig = { from = \"Q\"",
    );
    let (path, err) = refused_run(dir.path(), "bad.toml", &text, &[]);
    let want = format!(
        "{}:27:10: period 4 is longer than the major frame of 2 minor frames",
        path.display()
    );
    assert!(err.contains(&want), "stderr: {err}");
    assert!(shm_files(&name).is_empty());
    assert!(!socket(dir.path(), &name).exists());
}

#[test]
fn a_malformed_cell_file_names_file_line_and_column_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cells = write_file(
        dir.path(),
        "cells.toml",
        "[[cell]]\nname = \"A\"\nelements = [ { name = \"x\", type = \"f33\" } ]\n",
    );
    let (_, err) = refused_run(
        dir.path(),
        "s.toml",
        "tick = \"1ms\"\nmajor_frame = 1\ncells = \"cells.toml\"\n[[subsystem]]\nname = \"a\"\nbuiltin = \"idle\"\n",
        &[],
    );
    assert!(
        err.contains(&format!("{}:3:", cells.display())),
        "stderr: {err}"
    );
    assert!(err.contains("f33"), "stderr: {err}");
}

#[test]
fn an_in_process_subsystem_without_a_builtin_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, err) = refused_run(
        dir.path(),
        "s.toml",
        "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n",
        &[],
    );
    assert!(
        err.contains(&format!("{}:4:8: subsystem 'a'", path.display())),
        "stderr: {err}"
    );
}

#[test]
fn a_short_in_process_run_writes_a_record_with_per_subsystem_figures() {
    let (dir, name) = scratch_run("ring");
    let path = write_file(dir.path(), "ring.toml", &ring(&name));
    let record = dir.path().join("record.json");
    let out = succeeds(
        ictus(dir.path())
            .args(["run", "--duration", "400ms", "--quiet", "-o"])
            .arg(&record)
            .arg(&path),
    );
    let r = common::read_json(&record);
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
    let stress = measurements(&r, "stress").next().unwrap();
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
    let err = refused(ictus(dir.path()).args(["ctl", "pause"]));
    assert!(err.contains("no run is active"), "{err}");
}

#[test]
fn ctl_commands_a_running_schedule() {
    let (dir, name) = scratch_run("ctl");
    let path = write_file(dir.path(), "ring.toml", &ring(&name));
    let run = common::spawn(
        dir.path(),
        &["run", "--json", "--duration", "3s", path.to_str().unwrap()],
    );
    wait_for_socket(dir.path(), &name);
    std::thread::sleep(Duration::from_millis(300));
    let pause = succeeds(ictus(dir.path()).args(["ctl", "pause", "--name", &name]));
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
    let frames = measurements(&r, "frames").next().unwrap();
    assert!(frames["metrics"]["pause_frames"].as_f64().unwrap() > 0.0);
    assert!(
        frames["metrics"]["frames"].as_f64().unwrap() < 3000.0,
        "stopped early"
    );
    assert!(!socket(dir.path(), &name).exists());
}

/// The stress schedule under run name `cli-TAG-PID`, run by `ictus run --json ARGS`
/// in a process group of its own, once its control socket is there and `settle`
/// more has passed: the run folder, the run name and the process.
fn stress_run(tag: &str, args: &[&str], settle: Duration) -> (tempfile::TempDir, String, Child) {
    let (dir, name) = scratch_run(tag);
    let path = stress_copy(dir.path(), &name);
    let run = spawn_run(
        dir.path(),
        &[&["--json"], args, &[path.to_str().unwrap()]].concat(),
    );
    wait_for_socket(dir.path(), &name);
    std::thread::sleep(settle);
    (dir, name, run)
}

fn metric(record: &Value, measurement: &str, key: &str) -> Option<f64> {
    measurements(record, measurement).next()?["metrics"][key].as_f64()
}

#[test]
fn ctrl_c_to_the_whole_process_group_stops_at_a_major_frame_and_loses_nothing() {
    let (_dir, name, run) = stress_run(
        "sigint",
        &["--tick", "5ms", "--duration", "60s"],
        Duration::from_millis(800),
    );
    // A terminal's Ctrl-C: SIGINT to every process of the foreground group.
    kill("INT", format!("-{}", run.id()));
    let out = finish(run, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], false, "stopped before its duration");
    assert!(metric(&r, "stress", "run_frames").unwrap() > 0.0);
    // What the signal must never cause is a lost frame (a B killed by SIGINT).
    // Missed frames come only from lateness: on an idle machine there are none; on
    // a busy one (CI runs these tests side by side) a miss must be explained by a
    // subsystem released late plus running long for a whole tick, or an overrun.
    let mut late_ns = 0.0_f64;
    let mut overruns = 0.0;
    for m in r["measurements"].as_array().unwrap() {
        let max = m["latency"]["summary"]["max_ns"].as_f64().unwrap_or(0.0);
        if m["name"] == "release-jitter" {
            assert_eq!(m["metrics"]["lost_frames"].as_f64(), Some(0.0), "{m}");
            assert!(m["labels"].get("crashed").is_none(), "{m}");
            overruns += m["metrics"]["overruns"].as_f64().unwrap();
            late_ns = late_ns.max(max);
        }
        if m["name"] == "execution-time" {
            late_ns = late_ns.max(max);
        }
    }
    let missed = metric(&r, "stress", "missed_frames").unwrap();
    assert!(
        missed == 0.0 || overruns > 0.0 || late_ns >= 2.5e6,
        "{missed} missed frames with no overrun and every release and frame within \
         half a 5 ms tick: {stderr}"
    );
    assert!(!warns(&r, "crash"), "{}", r["warnings"]);
    assert!(shm_files(&name).is_empty());
}

#[test]
fn a_coordinator_paused_longer_than_the_heartbeat_keeps_its_children() {
    let (_dir, _name, run) = stress_run(
        "stall",
        &["--tick", "5ms", "--duration", "6s"],
        Duration::from_millis(500),
    );
    // Only the coordinator: its children run on (they are in its group, so name
    // the one process).
    let pid = run.id();
    kill("STOP", pid);
    std::thread::sleep(ictus_exec::child::HEARTBEAT_TIMEOUT.into());
    std::thread::sleep(Duration::from_millis(1000));
    kill("CONT", pid);
    let out = finish(run, Duration::from_secs(40));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    for m in r["measurements"].as_array().unwrap() {
        if m["name"] == "release-jitter" {
            assert_eq!(
                m["metrics"]["lost_frames"].as_f64(),
                Some(0.0),
                "{} left while its coordinator was paused: {stderr}",
                m["labels"]["subsystem"]
            );
        }
    }
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(r["complete"], true);
}

#[test]
fn a_crashed_subsystem_gives_exit_code_3_an_incomplete_record_and_a_warning() {
    let (dir, name, run) = stress_run("crash", &["--duration", "3s"], Duration::from_millis(800));
    let b = subsystem_pid(&common::ctl_status(dir.path(), &name), "B");
    assert_ne!(b, u64::from(run.id()));
    kill("KILL", b);
    let out = finish(run, Duration::from_secs(30));
    exits(&out, 3);
    assert!(String::from_utf8_lossy(&out.stderr).contains("frame(s) were lost"));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], false);
    assert!(warns(&r, "frames-lost"));
    assert!(shm_files(&name).is_empty());
}

#[test]
fn ctrl_c_and_ctl_stop_end_a_start_up_that_never_completes() {
    for how in ["ctrl-c", "ctl-stop"] {
        let (dir, name) = scratch_run(&format!("never-{how}"));
        // A program that never joins the run.
        let text = format!(
            "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = 1\n[[cell]]\nname = \"P\"\nelements = [ {{ name = \"n\", type = \"i32\" }} ]\n[[subsystem]]\nname = \"s\"\nprocess = \"/bin/sleep\"\nargs = [\"300\"]\n"
        );
        let path = write_file(dir.path(), "never.toml", &text);
        let run = spawn_run(dir.path(), &["--duration", "1s", path.to_str().unwrap()]);
        wait_for_socket(dir.path(), &name);
        std::thread::sleep(Duration::from_millis(300));
        let sleeper = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rsplit(") ")
                            .next()
                            .map(|rest| rest.split(' ').nth(1) == Some(&run.id().to_string()))
                    })
                    .unwrap_or(false)
            });
        match how {
            "ctrl-c" => kill("INT", format!("-{}", run.id())),
            _ => {
                succeeds(ictus(dir.path()).args(["ctl", "stop", "--name", &name]));
            }
        }
        let out = finish(run, Duration::from_secs(15));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{how}: {stderr}");
        assert!(
            stderr.contains("stopped before the start"),
            "{how}: {stderr}"
        );
        if let Some(pid) = sleeper {
            assert!(
                ictus_os::process::ProcessId::of(pid).is_none(),
                "{how}: the program was left running"
            );
        }
        assert!(shm_files(&name).is_empty());
    }
}

#[test]
fn ctl_refuses_a_run_name_that_is_a_path_and_a_command_of_two_lines() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(ictus(dir.path()).args(["ctl", "status", "--name", "../../etc/passwd"]));
    assert!(err.contains("run name"), "{err}");
    let err = refused(ictus(dir.path()).args(["ctl", "pause\nstop"]));
    assert!(err.contains("a command is one word"), "{err}");
}

#[test]
fn an_unwritable_output_is_refused_before_the_run_starts() {
    let (dir, name) = scratch_run("out");
    let record = dir.path().join("no/such/dir/record.json");
    // Exit 2 (bad input, nothing ran), not the 1 of a run that failed at the end.
    let (_, err) = refused_run(
        dir.path(),
        "ring.toml",
        &ring(&name),
        &["--duration", "30s", "-o", record.to_str().unwrap()],
    );
    assert!(err.contains("does not exist"), "{err}");
    assert!(shm_files(&name).is_empty());
}

#[test]
fn a_missing_program_is_refused_at_its_line_with_exit_2() {
    let (dir, name) = scratch_run("noprog");
    let text = format!(
        "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = 1\n[[cell]]\nname = \"P\"\nelements = [ {{ name = \"n\", type = \"i32\" }} ]\n[[subsystem]]\nname = \"s\"\nprocess = \"no-such-program-anywhere\"\n"
    );
    let (path, err) = refused_run(dir.path(), "noprog.toml", &text, &[]);
    assert!(err.contains(&format!("{}:8:8:", path.display())), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(shm_files(&name).is_empty());
}

#[test]
fn a_tick_override_obeys_the_rules_of_the_files_tick_and_starts_nothing() {
    let (dir, name) = scratch_run("tick");
    let text = format!(
        "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = 20\n[[subsystem]]\nname = \"s\"\nbuiltin = \"idle\"\n"
    );
    // Below the floor and above the ceiling.
    for (tick, rule) in [("1ns", "outside"), ("2s", "outside")] {
        let (path, err) = refused_run(
            dir.path(),
            "tick.toml",
            &text,
            &["--duration", "1s", "--tick", tick],
        );
        // The value came from the command line: the file's line is not blamed.
        assert!(err.starts_with("ictus: --tick "), "{err}");
        assert!(!err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(rule), "{err}");
    }
    // A major frame of 20 ticks of 600 ms is past the 10 s limit.
    let (path, err) = refused_run(
        dir.path(),
        "tick.toml",
        &text,
        &["--duration", "1s", "--tick", "600ms"],
    );
    assert!(err.contains(&format!("{}:3:", path.display())), "{err}");
    // A tick that wraps a 64-bit count of nanoseconds never reaches the schedule.
    refused_run(dir.path(), "tick.toml", &text, &["--tick", "1000years"]);
    assert!(shm_files(&name).is_empty());
}

/// Pids of the processes whose command line holds `word` as one argument.
fn processes_with_arg(word: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == word.as_bytes()))
        })
        .collect()
}

#[test]
fn a_run_killed_outright_takes_its_programs_with_it_and_its_name_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let (name, marker, path) = never_joins(dir.path(), "kill9", 9);
    let mut run = spawn_run(dir.path(), &["--duration", "1s", path.to_str().unwrap()]);
    wait_for_socket(dir.path(), &name);
    let started = poll(|| processes_with_arg(&marker), |p| !p.is_empty());
    assert_eq!(started.len(), 1, "the program started once");
    run.kill().unwrap();
    let _ = run.wait();
    let left = poll(|| processes_with_arg(&marker), Vec::is_empty);
    assert!(left.is_empty(), "the program outlived its run: {left:?}");
    // The killed run left its segments; the next run of the name reclaims them.
    let path = write_file(
        dir.path(),
        "kill9.toml",
        &one_subsystem(&name, "class = \"normal\"\nbuiltin = \"idle\"\n"),
    );
    let out = ictus(dir.path())
        .args(["run", "--quiet", "--duration", "50ms"])
        .arg(&path)
        .output()
        .unwrap();
    exits(&out, 0);
    assert!(shm_files(&name).is_empty());
}

/// Writes `text` as a schedule in `dir`, runs it, and checks it is refused before
/// anything starts: exit code 2, `FILE:LINE:COLUMN` at `at` (`"5:8"`), `says` in the
/// message, no segment of run `name` left.
fn refused_schedule(dir: &Path, name: &str, text: &str, at: &str, says: &str) {
    let (path, err) = refused_run(dir, "refused.toml", text, &["--duration", "1s"]);
    assert!(err.contains(&format!("{}:{at}:", path.display())), "{err}");
    assert!(err.contains(says), "{err}");
    assert!(shm_files(name).is_empty());
}

#[test]
fn a_program_file_without_an_execute_bit_is_refused_at_its_line_with_exit_2() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, name) = scratch_run("noexec");
    // A file without an execute bit, by a relative and an absolute path.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "not a program\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (program, words) in [
        ("./plain", "is not executable"),
        ("/etc/passwd", "is not executable"),
    ] {
        refused_schedule(
            dir.path(),
            &name,
            &one_subsystem(
                &name,
                &format!("class = \"normal\"\nprocess = \"{program}\"\n"),
            ),
            "5:8",
            words,
        );
    }
}

#[test]
fn a_program_that_never_joins_gives_up_the_run_after_the_ready_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (name, marker, path) = never_joins(dir.path(), "never", 8);
    let run = spawn_run(
        dir.path(),
        &[
            "--ready-timeout",
            "1s",
            "--duration",
            "1s",
            path.to_str().unwrap(),
        ],
    );
    // Bounded: the watchdog of `finish` kills it if it waits for ever.
    let out = finish(run, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("'s' did not start: not ready after 1s"),
        "{err}"
    );
    assert!(
        processes_with_arg(&marker).is_empty(),
        "the program was ended"
    );
    assert!(shm_files(&name).is_empty());
    assert!(!socket(dir.path(), &name).exists());
}

#[test]
fn a_malformed_host_table_is_refused_at_its_place_with_exit_2() {
    let (dir, name) = scratch_run("hosts");
    for (address, says) in [
        ("10.77.0.2", "is not an address and port"),
        ("10.77.0.1:7447", "is already host 'main's"),
    ] {
        refused_schedule(
            dir.path(),
            &name,
            &format!(
                "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = 1\n[[host]]\nname = \"main\"\naddress = \"10.77.0.1:7447\"\n[[host]]\nname = \"h2\"\naddress = \"{address}\"\n[[subsystem]]\nname = \"s\"\nhost = \"h2\"\nbuiltin = \"idle\"\n"
            ),
            "9:11",
            says,
        );
    }
}

/// `ictus run ARGS` of the stress schedule (run `cli-TAG-PID`) as `edit` makes it,
/// for 300 ms; the record it wrote.
fn stress_record(tag: &str, edit: &dyn Fn(String) -> String, args: &[&str]) -> Value {
    let (dir, name) = scratch_run(tag);
    let path = stress_copy(dir.path(), &name);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(text)).unwrap();
    let record = dir.path().join("record.json");
    succeeds(
        ictus(dir.path())
            .args(["run", "--duration", "300ms", "--quiet", "-o"])
            .arg(&record)
            .args(args)
            .arg(&path),
    );
    common::read_json(&record)
}

#[test]
fn a_run_records_the_cpu_latency_qos_in_force_and_its_misses_explained() {
    let r = stress_record("qos", &|t| t, &["--explain-threshold", "500us"]);
    // Held at 0 us by default, or refused with why (no device, not root).
    let q = &r["obtained"]["pm_qos"];
    assert_eq!(q["requested"], 0, "{q}");
    assert!(q["held_us"] == 0 || q["refused"].is_string(), "{q}");
    if q["refused"].is_string() {
        assert!(warns(&r, "pm-qos-refused"), "a refusal is a warning");
    }
    let e = &r["explanation"];
    assert_eq!(e["threshold_ns"], 500_000, "{e}");
    assert!(e["sampler"]["samples"].as_u64().unwrap() > 0, "{e}");
    let events = e["breakdown"]["events"].as_u64().unwrap();
    let listed = e["events"].as_array().unwrap();
    assert_eq!(listed.len() as u64, events.min(1_000));
    let names = ["A", "B", "C"];
    assert!(
        listed
            .iter()
            .all(|ev| names.contains(&ev["thread"].as_str().unwrap()))
    );
}

#[test]
fn a_subsystem_in_a_process_of_its_own_has_its_misses_explained_too() {
    // With nanosleep every wake-up comes after its deadline: at a 1 ns threshold
    // every release of A, B (`process = "own"`) and C is a miss to explain.
    let nanosleep = |t: String| t.replace("wait = \"hybrid\"", "wait = \"nanosleep\"");
    let r = stress_record("own", &nanosleep, &["--explain-threshold", "1ns"]);
    let e = &r["explanation"];
    let threads: std::collections::BTreeSet<&str> = e["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ev| ev["thread"].as_str().unwrap())
        .collect();
    assert_eq!(
        threads.into_iter().collect::<Vec<_>>(),
        ["A", "B", "C"],
        "{e}"
    );
}

#[test]
fn the_schedules_pm_qos_holds_unless_the_command_line_says_otherwise() {
    let off = |t: String| format!("pm_qos = \"off\"\n{t}");
    let r = stress_record("qos-off", &off, &["--explain", "off"]);
    assert_eq!(r["obtained"]["pm_qos"]["requested"], "off");
    assert_eq!(r["obtained"]["pm_qos"]["held_us"], Value::Null);
    assert!(r.get("explanation").is_none(), "--explain off");
    let r = stress_record("qos-flag", &off, &["--pm-qos", "20"]);
    assert_eq!(r["obtained"]["pm_qos"]["requested"], 20);
}

#[test]
fn a_pm_qos_that_is_neither_off_nor_a_bound_is_refused_at_its_line_and_column() {
    let (dir, name) = scratch_run("qos-bad");
    let text = one_subsystem(&name, "builtin = \"idle\"\n")
        .replace("major_frame = 1\n", "major_frame = 1\npm_qos = \"fast\"\n");
    refused_schedule(dir.path(), &name, &text, "4:10", "pm_qos 'fast'");
}

#[test]
fn ctl_status_lists_the_last_misses_explained() {
    // With nanosleep every wake-up comes after its deadline: at a 1 ns threshold
    // every release is a miss to explain.
    let (dir, name) = scratch_run("misses");
    let text = one_subsystem(&name, "builtin = \"idle\"\n").replace(
        "major_frame = 1\n",
        "major_frame = 1\nwait = \"nanosleep\"\n",
    );
    let path = write_file(dir.path(), "misses.toml", &text);
    let run = common::spawn(
        dir.path(),
        &[
            "run",
            "--json",
            "--duration",
            "3s",
            "--explain-threshold",
            "1ns",
            path.to_str().unwrap(),
        ],
    );
    wait_for_socket(dir.path(), &name);
    let status = poll(
        || {
            let out = ictus(dir.path())
                .args(["ctl", "status", "--name", &name])
                .output()
                .unwrap();
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
        },
        |s| s["misses"].as_array().is_some_and(|m| !m.is_empty()),
    );
    let misses = status["misses"].as_array().expect("misses in the status");
    assert!(!misses.is_empty() && misses.len() <= 16, "{status}");
    for m in misses {
        assert_eq!(m["subsystem"], "s", "{m}");
        // Late, or (on a busy machine) releases skipped or an overrun.
        assert!(["late", "missed", "overrun"].contains(&m["kind"].as_str().unwrap()));
        assert!(m["lateness_ns"].as_u64().unwrap() >= 1, "{m}");
        assert!(!m["cause"].as_str().unwrap().is_empty(), "{m}");
    }
    succeeds(ictus(dir.path()).args(["ctl", "stop", "--name", &name]));
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["explanation"]["breakdown"]["events"].as_u64().unwrap() >= 1);
}

#[test]
fn on_overrun_stop_run_in_a_schedule_file_ends_the_run_early_naming_the_subsystem() {
    // With nanosleep at a 10 us tick every wake-up passes several releases: the
    // subsystem overruns two in a row at once, and its on_overrun stops the run
    // long before the 60 s asked for.
    let (dir, name) = scratch_run("on-overrun");
    let text = one_subsystem(
        &name,
        "builtin = \"idle\"\non_overrun = \"stop-run\"\noverrun_after = 2\n",
    )
    .replace(
        "tick = \"1ms\"\n",
        "tick = \"10us\"\nwait = \"nanosleep\"\n",
    );
    let path = write_file(dir.path(), "overrun.toml", &text);
    let run = spawn_run(
        dir.path(),
        &["--json", "--duration", "60s", path.to_str().unwrap()],
    );
    let out = finish(run, Duration::from_secs(30));
    exits(&out, 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("s overran"), "{stderr}");
    assert!(stderr.contains("stop-run"), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], false);
    assert!(warns(&r, "overrun"), "{r}");
    let w = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "overrun")
        .unwrap();
    let message = w["message"].as_str().unwrap();
    assert!(message.starts_with("s: "), "{message}");
    assert!(message.contains("the run stops"), "{message}");
    let events = r["parameters"]["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.as_str().unwrap().contains("the run stops")),
        "{events:?}"
    );
}

#[test]
fn an_unknown_on_overrun_mode_is_refused_at_its_value_with_exit_2() {
    let (dir, name) = scratch_run("on-overrun-bad");
    let text = one_subsystem(
        &name,
        "builtin = \"idle\"\non_overrun = \"mode\"\noverrun_mode = \"hover\"\n",
    );
    refused_schedule(dir.path(), &name, &text, "8:16", "unknown state 'hover'");
}

#[test]
fn a_subsystem_writing_past_its_writes_in_the_schedule_is_refused_at_the_start() {
    // p increments P into Q, all of Q; the schedule says it writes Q.n only.
    let (dir, name) = scratch_run("writes");
    let text = ring(&name).replace(
        "config = { from = \"P\", to = \"Q\" }",
        "config = { from = \"P\", to = \"Q\" }\nwrites = [\"Q.n\"]",
    );
    assert!(text.contains("writes = [\"Q.n\"]"), "{text}");
    let path = write_file(dir.path(), "writes.toml", &text);
    let out = ictus(dir.path())
        .args(["run", "--duration", "1s"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("it writes Q.v, which its writes in the schedule")
            && err.contains(&format!("{}:", path.display())),
        "{err}"
    );
    assert!(!out.status.success(), "{err}");
    assert!(shm_left(&name).is_empty());
}
