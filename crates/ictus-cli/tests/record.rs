//! Recording and replay (issue 24, docs/recording.md): `ictus replay` runs one
//! subsystem of a recording again and compares it bit for bit, in process (a
//! built-in, `process = "own"` too) and in a program's own process
//! (`stress_b`, built with the workspace's examples as `cargo test --workspace`
//! does); a tampered recording names its first difference; files that are not
//! recordings are refused in words; the `mcap` Python package reads a recording.
//!
//! The recordings here are written through the library's `McapSink` with the
//! records of seed 003's ring computed frame by frame (what the tap hands a sink),
//! so that every frame is known; `ictus run --record` writes the same file from a
//! real run.
//!
//! The Python: `ICTUS_PYTHON_MCAP`, else `target/py-mcap/bin/python` at the
//! workspace root (`.ci/run` makes it, with `mcap==1.6.0`); without `mcap`
//! importable in either, that test says it was skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ictus, ictus_in, refused, scratch_run, stress_copy};
use ictus_core::Nanos;
use ictus_exec::schedule::Schedule;
use ictus_exec::tap::mcap::McapSink;
use ictus_exec::tap::{CellRecord, Direction, FrameRecord, Sink, TapEnd, TapRun};
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Records `frames` frames of the ring in `schedule` (A: A to B, B: B to C, C: C
/// to A, one per minor frame) to `out`, as a recorder thread would.
fn record_ring(schedule: &Path, out: &Path, frames: u64) {
    let s = Schedule::from_file(schedule, &ictus_core::CpuSet::from_cpus(0..1024)).unwrap();
    let table = s.cell_table().unwrap();
    let text = std::fs::read_to_string(schedule).unwrap();
    // Cell B is written by slot 0 (A), C by 1 (B), A by 2 (C).
    let writers: Vec<Vec<Option<usize>>> = (0..3)
        .map(|cell| vec![Some((cell + 2) % 3); table.cells()[cell].elements().len()])
        .collect();
    let epoch = Nanos::from_secs(50);
    let mut sink = McapSink::create(out).unwrap();
    sink.begin(&TapRun {
        schedule: &s,
        schedule_text: Some(&text),
        table: &table,
        host: "here",
        slots: &[0, 1, 2],
        epoch,
        epoch_unix: Nanos::from_secs(1_750_000_000),
        tick: s.tick,
        writers,
        states: vec!["off".into(), "pause".into(), "run".into()],
        cells: vec![true; 3],
        every: 1,
    })
    .unwrap();
    let mut cells: Vec<Vec<u8>> = table.cells().iter().map(|c| vec![0; c.bytes()]).collect();
    for f in 0..frames {
        let slot = (f % 3) as usize;
        let (from, to) = (slot, (slot + 1) % 3);
        let cell = |cell, direction, bytes: &[u8], sink: &mut McapSink| {
            sink.cell(&CellRecord {
                slot,
                frame: f,
                cell,
                direction,
                bytes,
            })
            .unwrap();
        };
        cell(from, Direction::Input, &cells[from], &mut sink);
        let mut next = cells[to].clone();
        ictus_exec::stress::increment(&table.cells()[from], &cells[from], &mut next);
        cells[to] = next;
        cell(to, Direction::Output, &cells[to], &mut sink);
        let deadline = epoch + s.tick * f;
        sink.frame(&FrameRecord {
            slot,
            frame: f,
            state: 2,
            deadline,
            woke: deadline + Nanos::from_micros(5),
            agreed: None,
            end: deadline + Nanos::from_micros(40),
            budget: s.tick * 3,
            skipped: 0,
            cpu: Some(1),
            error: false,
        })
        .unwrap();
    }
    sink.end(&TapEnd {
        dropped: vec![(0, 0), (1, 0), (2, 0)],
        records: frames * 3,
    })
    .unwrap();
}

/// `ictus replay FILE --subsystem NAME`'s output, whatever its exit code.
fn replay(file: &Path, name: &str, more: &[&str]) -> std::process::Output {
    ictus()
        .arg("replay")
        .arg(file)
        .args(["--subsystem", name])
        .args(more)
        .output()
        .unwrap()
}

/// The frames a successful replay says it replayed.
fn replayed(out: &std::process::Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "replay failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("bit for bit equal"), "{text}");
    text.split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no frame count in {text}"))
}

#[test]
fn a_recorded_ring_replays_bit_for_bit_in_process_and_in_a_program() {
    let (dir, name) = scratch_run("replay");
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("ring.mcap");
    record_ring(&schedule, &file, 30);
    assert_eq!(replayed(&replay(&file, "A", &[])), 10);
    // B runs in a process of its own under `ictus run` (a built-in): replayed here.
    assert_eq!(replayed(&replay(&file, "B", &["--beat", "recorded"])), 10);
    // B as a program: replayed in the program's own process.
    let text = std::fs::read_to_string(&schedule).unwrap().replace(
        "process = \"own\"\nbuiltin = \"increment\"\nconfig = { from = \"B\", to = \"C\" }",
        "process = \"stress_b\"",
    );
    std::fs::write(&schedule, text).unwrap();
    record_ring(&schedule, &file, 30);
    let program = workspace().join("target/debug/examples/stress_b");
    assert!(
        program.is_file(),
        "{} is built with the workspace's examples (cargo build --examples)",
        program.display()
    );
    let out = replay(&file, "B", &[]);
    assert_eq!(replayed(&out), 10);
    assert_eq!(
        replayed(&replay(
            &file,
            "B",
            &["--program", program.to_str().unwrap()]
        )),
        10
    );
}

/// `ictus run SCHEDULE --record FILE` for a second at 1 ms; the run's record.
fn record_run(dir: &Path, schedule: &Path, file: &Path) {
    let out = ictus_in(dir)
        .args([
            "run",
            "--tick",
            "1ms",
            "--duration",
            "1s",
            "--quiet",
            "--json",
            "--record",
        ])
        .arg(file)
        .arg(schedule)
        .output()
        .unwrap();
    // A lost frame (exit 3) on a loaded machine still leaves a whole recording.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "ictus run --record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_recorded_run_replays_bit_for_bit_built_ins_and_a_program() {
    let _machine = common::one_at_a_time();
    let (dir, name) = scratch_run("recrun");
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("run.mcap");
    record_run(dir.path(), &schedule, &file);
    for s in ["A", "B", "C"] {
        assert!(replayed(&replay(&file, s, &[])) > 0, "{s}");
    }
    // B as a program (the stress_b example), recorded and replayed in its process.
    let text = std::fs::read_to_string(&schedule).unwrap().replace(
        "process = \"own\"\nbuiltin = \"increment\"\nconfig = { from = \"B\", to = \"C\" }",
        "process = \"stress_b\"",
    );
    std::fs::write(&schedule, text).unwrap();
    let program = workspace().join("target/debug/examples/stress_b");
    let file = dir.path().join("program.mcap");
    record_run(dir.path(), &schedule, &file);
    assert!(
        replayed(&replay(
            &file,
            "B",
            &["--program", program.to_str().unwrap()]
        )) > 0
    );
    assert!(replayed(&replay(&file, "A", &[])) > 0);
}

/// Copies the recording `src` to `dst` with `tamper` applied to each message
/// (its topic, its frame's log time and its sequence).
fn rewrite(src: &Path, dst: &Path, mut tamper: impl FnMut(&str, u32, &mut Vec<u8>)) {
    let bytes = std::fs::read(src).unwrap();
    let mut metadata = Vec::new();
    for record in mcap::read::ChunkFlattener::new(&bytes).unwrap() {
        if let mcap::records::Record::Metadata(m) = record.unwrap() {
            metadata.push(m);
        }
    }
    let mut out =
        mcap::Writer::new(std::io::BufWriter::new(std::fs::File::create(dst).unwrap())).unwrap();
    for m in metadata.iter().filter(|m| m.name == "ictus") {
        out.write_metadata(m).unwrap();
    }
    for message in mcap::MessageStream::new(&bytes).unwrap() {
        let mut message = message.unwrap();
        let mut data = message.data.into_owned();
        tamper(&message.channel.topic, message.sequence, &mut data);
        message.data = data.into();
        out.write(&message).unwrap();
    }
    for m in metadata.iter().filter(|m| m.name != "ictus") {
        out.write_metadata(m).unwrap();
    }
    out.finish().unwrap();
}

#[test]
fn a_tampered_recording_names_its_first_difference() {
    let (dir, name) = scratch_run("tamper");
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("ring.mcap");
    record_ring(&schedule, &file, 15);
    let tampered = dir.path().join("tampered.mcap");
    // A's publications of B at frames 0, 3, 6...: the second one's `int` changed.
    let mut seen = 0;
    rewrite(&file, &tampered, |topic, sequence, data| {
        if topic == "cells/B" && sequence == 0 {
            if seen == 1 {
                data[4] ^= 1;
            }
            seen += 1;
        }
    });
    assert_eq!(replayed(&replay(&tampered, "B", &[])), 5, "B is untouched");
    let out = replay(&tampered, "A", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("A differs from the recording at frame 3, cell B, element int[0]: recorded 5, replayed 4"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn what_cannot_be_replayed_is_refused_in_words() {
    let (dir, name) = scratch_run("refuse");
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("ring.mcap");
    record_ring(&schedule, &file, 6);
    let mut cmd = ictus();
    cmd.arg("replay").arg(&file).args(["--subsystem", "Z"]);
    let err = refused(&mut cmd);
    assert!(
        err.contains("subsystem 'Z' is not in the recording (its subsystems: A, B, C)"),
        "{err}"
    );
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.mcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let mut cmd = ictus();
    cmd.arg("replay").arg(&cut).args(["--subsystem", "A"]);
    let err = refused(&mut cmd);
    assert!(err.contains("cut.mcap is truncated"), "{err}");
    std::fs::write(&cut, "name = \"not a recording\"\n").unwrap();
    let mut cmd = ictus();
    cmd.arg("replay").arg(&cut).args(["--subsystem", "A"]);
    let err = refused(&mut cmd);
    assert!(err.contains("cut.mcap is not an MCAP file"), "{err}");
    // A path that cannot be written starts nothing.
    let mut cmd = ictus();
    cmd.arg("run")
        .arg(&schedule)
        .args(["--duration", "1s", "--record"])
        .arg(dir.path().join("no/such/dir/r.mcap"));
    let err = refused(&mut cmd);
    assert!(
        err.contains("--record ") && err.contains("no/such/dir/r.mcap: No such file or directory"),
        "{err}"
    );
}

/// A Python that imports `mcap`, if there is one.
fn python() -> Option<PathBuf> {
    common::python_with(
        "ICTUS_PYTHON_MCAP",
        "target/py-mcap/bin/python",
        "mcap.reader",
    )
}

#[test]
fn the_python_mcap_package_reads_a_recording() {
    const TEST: &str = "the_python_mcap_package_reads_a_recording";
    let Some(python) = python() else {
        ictus_os::testing::skipped(
            TEST,
            "no Python with mcap (set ICTUS_PYTHON_MCAP, or make target/py-mcap as .ci/run does)",
        );
        return;
    };
    let (dir, name) = scratch_run("pymcap");
    let schedule = stress_copy(dir.path(), &name);
    let file = dir.path().join("ring.mcap");
    record_ring(&schedule, &file, 9);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/read_the_recording.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let a = &v["channels"]["cells/A"];
    assert_eq!(a["message_encoding"], "cdr");
    assert_eq!(a["schema_encoding"], "ros2msg");
    assert!(
        a["schema"]
            .as_str()
            .unwrap()
            .starts_with("int32 int\nint32[12] int12\nint32[200] int200\nint16 short\n"),
        "{a}"
    );
    assert_eq!(v["channels"]["frames"]["message_encoding"], "json");
    assert_eq!(v["channels"]["frames"]["schema_encoding"], "jsonschema");
    // 9 frames: each subsystem 3, each publishing one cell and reading one.
    for topic in [
        "cells/A",
        "cells/B",
        "cells/C",
        "inputs/A/A",
        "inputs/B/B",
        "inputs/C/C",
    ] {
        assert_eq!(v["counts"][topic], 3, "{topic}: {}", v["counts"]);
    }
    assert_eq!(v["counts"]["frames"], 9);
    // C publishes A at frame 2: A's int went 0 -> (B: 1) -> (C: 2)... C writes A
    // as C plus one, and C was written by B at frame 1 as B + 1 = 2: A is 3.
    assert_eq!(v["first_a"]["int"], 3);
    assert_eq!(v["first_a"]["sequence"], 2, "the writer's slot");
    assert_eq!(
        v["first_a"]["log_time"].as_u64(),
        Some(1_750_000_000_000_000_000 + 2 * 1_000_000)
    );
    assert_eq!(v["frame"]["subsystem"], "A");
    assert_eq!(v["frame"]["lateness_ns"], 5_000);
    let meta = v["metadata"]["ictus"].as_array().unwrap();
    for key in [
        "cells",
        "epoch_unix",
        "format",
        "schedule",
        "tick_ns",
        "writers",
    ] {
        assert!(meta.iter().any(|k| k == key), "{key} in {meta:?}");
    }
    assert!(v["metadata"]["ictus.end"].is_array());
}
