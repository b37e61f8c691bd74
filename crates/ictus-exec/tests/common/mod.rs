//! Helpers shared by the executive's integration tests: a schedule written to a
//! file and read back, the options of a short run, what a run reports, and the
//! checks that nothing is left behind and nothing hangs.
// Not every test binary that shares this module uses every helper.
#![allow(dead_code)]
#![allow(clippy::print_stderr)] // the watchdog says why it ended the test process

pub(crate) mod setup;

use std::path::Path;
use std::time::Duration;

use ictus_core::warning::Warning;
use ictus_exec::report::{RunReport, SubsystemReport, WarningId};
use ictus_exec::run::RunOptions;
use ictus_exec::schedule::Schedule;

/// A schedule's text: run `name` with a 1 ms tick, `major_frame` ticks to a major
/// frame and the initial state `run`, then `tables` (its cells, subsystems, hubs).
pub(crate) fn schedule_text(name: &str, major_frame: u64, tables: &str) -> String {
    format!(
        "name = \"{name}\"\ntick = \"1ms\"\nmajor_frame = {major_frame}\ninitial_state = \"run\"\n\n{tables}"
    )
}

/// Writes `text` as `file` in `dir` and reads it back as a schedule, on this
/// machine's CPUs.
pub(crate) fn schedule_file(dir: &Path, file: &str, text: &str) -> Schedule {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    Schedule::from_file(&path, &ictus_os::facts::online_cpus()).unwrap()
}

/// `text` as a schedule named `file` in `dir` (not written), on this machine's CPUs.
pub(crate) fn parse_schedule(dir: &Path, file: &str, text: &str) -> Schedule {
    Schedule::parse(text, dir.join(file), &ictus_os::facts::online_cpus()).unwrap()
}

/// The options of a run of `duration` whose control socket is in `dir`.
pub(crate) fn options(dir: &Path, duration: Duration) -> RunOptions {
    RunOptions {
        duration: Some(duration),
        run_dir: dir.join("run"),
        ..RunOptions::default()
    }
}

/// The options of a run of `duration` without a control socket (its run files in
/// `dir`).
pub(crate) fn options_without_socket(dir: &Path, duration: Duration) -> RunOptions {
    RunOptions {
        control_socket: false,
        ..options(dir, duration)
    }
}

/// The report of subsystem `name`.
pub(crate) fn subsystem<'a>(r: &'a RunReport, name: &str) -> &'a SubsystemReport {
    r.subsystems
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no subsystem {name} in {r:#?}"))
}

/// The first warning of kind `id`.
pub(crate) fn warning(r: &RunReport, id: WarningId) -> &Warning {
    r.warnings
        .iter()
        .find(|w| w.id == id)
        .unwrap_or_else(|| panic!("no {id:?} warning: {:#?}", r.warnings))
}

/// The shared memory segments of run `name` in /dev/shm.
pub(crate) fn segments_of(name: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&format!("ictus-{name}.")))
        .collect()
}

/// Asserts that run `name` left no segment behind.
pub(crate) fn no_segments_of(name: &str) {
    let left = segments_of(name);
    assert!(left.is_empty(), "segments left behind: {left:?}");
}

/// Fails the test process instead of letting CI hang.
pub(crate) fn watchdog(limit: Duration, what: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{what}: still running after {limit:?}: the run hangs");
        std::process::exit(101);
    });
}
