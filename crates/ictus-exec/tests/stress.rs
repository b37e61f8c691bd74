//! End to end: seed 003's stress test across two processes (A and C in this process,
//! B in the `stress_b` example program), its missed-frame arithmetic, a `kill -9` of
//! B, and a rerun after it. Structure and invariants only, never timings.

#![allow(
    clippy::disallowed_types,
    reason = "a test's flags and counters between its threads"
)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use common::{
    no_segments_of, options, options_without_socket, parse_schedule, schedule_file, warning,
};
use ictus_exec::report::{RunReport, WarningId};
use ictus_exec::run::{self, LiveStatus};
use ictus_exec::schedule::Schedule;

/// The repository's examples folder.
fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The stress schedule under another run name (tests run side by side), in `dir`,
/// with its tick replaced.
fn schedule(dir: &Path, name: &str, tick: &str) -> Schedule {
    let text = std::fs::read_to_string(examples().join("stress/schedule.toml")).unwrap();
    let text = text
        .replace("name = \"stress\"", &format!("name = \"{name}\""))
        .replace("tick = \"1ms\"", &format!("tick = \"{tick}\""))
        // B as a program of its own that links ictus-exec (the example), rather
        // than the builtin hosted by the ictus binary.
        .replace(
            "process = \"own\"\nbuiltin = \"increment\"\nconfig = { from = \"B\", to = \"C\" }",
            "process = \"stress_b\"",
        );
    std::fs::copy(examples().join("stress/cells.toml"), dir.join("cells.toml")).unwrap();
    schedule_file(dir, "schedule.toml", &text)
}

fn check_accounting(r: &RunReport) {
    for s in &r.subsystems {
        assert_eq!(
            s.frames_run + s.overruns + s.lost,
            s.releases_due,
            "{}: run + overruns + lost = due",
            s.name
        );
        assert_eq!(
            s.releases_due,
            r.frames / 3,
            "{}: one release per major frame",
            s.name
        );
    }
}

#[test]
fn the_stress_ring_runs_across_two_processes_and_counts_its_missed_frames() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-stress-{}", std::process::id());
    let s = schedule(dir.path(), &name, "1ms");
    let r = run::run(
        &s,
        &mut run::builtin,
        options(dir.path(), Duration::from_millis(1500)),
    )
    .unwrap();
    assert!(r.complete);
    assert_eq!(r.frames, 1500);
    assert_eq!(r.state_frames.get("run"), Some(&1500));
    check_accounting(&r);
    let b = &r.subsystems[1];
    let outcome = b.outcome.as_ref().expect("B reported its figures");
    assert_ne!(
        outcome.pid,
        std::process::id(),
        "B ran in a process of its own"
    );
    assert_eq!(
        r.subsystems[0].outcome.as_ref().unwrap().pid,
        std::process::id()
    );
    let st = r.stress.as_ref().unwrap();
    assert_eq!(st.run_frames, 1500);
    assert_eq!(st.missed_frames, st.run_frames as i64 - st.final_value);
    assert!(st.final_value <= 1500 && st.final_value > 0, "{st:?}");
    assert_eq!(st.incoherent_cells, 0, "every transfer is frame-coherent");
    assert!(
        r.subsystems
            .iter()
            .all(|s| s.lost == 0 && s.crashed.is_none())
    );
    no_segments_of(&name);
}

#[test]
fn a_killed_process_is_reported_the_others_keep_their_beat_and_a_rerun_works() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-crash-{}", std::process::id());
    let s = schedule(dir.path(), &name, "1ms");
    let killed = Arc::new(AtomicBool::new(false));
    let pid = Arc::new(AtomicU32::new(0));
    let (k, p) = (Arc::clone(&killed), Arc::clone(&pid));
    let mut opts = options(dir.path(), Duration::from_millis(2400));
    opts.on_status = Some(Box::new(move |st: &LiveStatus| {
        // Relaxed: flags of this test.
        if st.frame > 600 && !k.load(Ordering::Relaxed) {
            let b = st.subsystems.iter().find(|s| s.name == "B").unwrap();
            p.store(b.pid, Ordering::Relaxed);
            ictus_os::process::signal(b.pid as i32, ictus_os::process::SIGKILL).unwrap();
            k.store(true, Ordering::Relaxed);
        }
    }));
    opts.status_every = Duration::from_millis(50);
    let r = run::run(&s, &mut run::builtin, opts).unwrap();
    assert!(killed.load(Ordering::Relaxed));
    assert_ne!(pid.load(Ordering::Relaxed), std::process::id());
    check_accounting(&r);
    let b = &r.subsystems[1];
    assert!(
        b.crashed.as_deref().is_some_and(|c| c.contains("signal 9")),
        "{b:?}"
    );
    assert!(b.lost > 0, "B's frames after its death count as lost");
    warning(&r, WarningId::Crash);
    for s in [&r.subsystems[0], &r.subsystems[2]] {
        assert_eq!(s.lost, 0, "{} kept its beat", s.name);
        assert!(s.outcome.is_some());
    }
    let st = r.stress.as_ref().unwrap();
    assert!(st.missed_frames >= b.lost as i64, "{st:?}");
    no_segments_of(&name);
    // A rerun of the same name needs no cleanup.
    let r = run::run(
        &s,
        &mut run::builtin,
        options(dir.path(), Duration::from_millis(300)),
    )
    .unwrap();
    check_accounting(&r);
    assert!(r.subsystems.iter().all(|s| s.crashed.is_none()));
    no_segments_of(&name);
}

#[test]
fn a_synchronous_group_runs_the_same_frames_on_two_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
name = "t-group"
tick = "500us"
major_frame = 2
initial_state = "run"
[[subsystem]]
name = "a"
period = 2
group = "g"
builtin = "idle"
[[subsystem]]
name = "b"
period = 2
group = "g"
builtin = "idle"
"#
    .replace("t-group", &format!("t-group-{}", std::process::id()));
    let s = parse_schedule(dir.path(), "g.toml", &text);
    let opts = options_without_socket(dir.path(), Duration::from_millis(300));
    let r = run::run(&s, &mut run::builtin, opts).unwrap();
    let (a, b) = (&r.subsystems[0], &r.subsystems[1]);
    assert_eq!(a.frames_run, b.frames_run);
    assert_eq!(a.overruns, b.overruns);
    assert_eq!(a.frames_run + a.overruns, a.releases_due);
}

/// Seed 003's SETUP1/SETUP2 problem: B needs data A produces during setup. Through
/// the setup channel B simply waits for it, whatever order the two start in.
#[test]
fn setup_data_flows_from_one_init_to_another_without_a_race() {
    use common::setup::{Producer, ROUTE};
    use ictus_exec::program::Executive;
    use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};

    /// Keeps what it got; the test takes it back after the run.
    struct Consumer(Vec<u8>);
    impl Subsystem for Consumer {
        type Error = RegistryError;
        fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
            Ok(Consumer(
                reg.setup().get("route", Duration::from_secs(5)).unwrap(),
            ))
        }
        fn run(&mut self, _: &mut Frame) -> Result<Flow, RegistryError> {
            Ok(Flow::Continue)
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "name = \"t-setup-{}\"\ntick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"b\"\n[[subsystem]]\nname = \"a\"\n",
        std::process::id()
    );
    let s = parse_schedule(dir.path(), "s.toml", &text);
    let opts = options_without_socket(dir.path(), Duration::from_millis(50));
    let mut outcome = Executive::new(s)
        .subsystem::<Producer>("a")
        .subsystem::<Consumer>("b")
        .options(opts)
        .run()
        .unwrap();
    let consumer: Consumer = outcome.take("b").expect("b ran in-process");
    assert_eq!(consumer.0, ROUTE);
    assert!(outcome.take::<Consumer>("a").is_none(), "a is a Producer");
}
