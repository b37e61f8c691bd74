//! Fault injection on the executive: a writer stopped half way through a cell write
//! on the same CPU as its reader (the reader must not spin on it, the coordinator
//! must name the cell and the writer, end the run on time and reap every process),
//! and a member of a synchronous group that panics (its partner must not spin on
//! the rendezvous for ever). Structure only, never timings (a watchdog turns a hang
//! into a failure).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{no_segments_of, options, schedule_file, schedule_text, subsystem, warning, watchdog};
use ictus_exec::report::WarningId;
use ictus_exec::run;
use ictus_exec::schedule::{Schedule, SubsystemSpec};
use ictus_exec::subsystem::{Flow, Frame, Maker, Registry, RegistryError, Subsystem};

/// W (a program) writes X; R (in-process) reads X and writes Y; both on the last
/// CPU, in the same real-time class when the machine grants it.
fn stall_schedule(dir: &Path, name: &str) -> Schedule {
    let cpu = ictus_os::facts::online_cpus()
        .cpus()
        .last()
        .copied()
        .unwrap();
    let text = schedule_text(
        name,
        2,
        &format!(
            r#"[[cell]]
name = "X"
elements = [ {{ name = "n", type = "i32" }}, {{ name = "pad", type = "f64", len = 32 }} ]

[[cell]]
name = "Y"
elements = [ {{ name = "n", type = "i32" }}, {{ name = "pad", type = "f64", len = 32 }} ]

[[subsystem]]
name = "W"
start = 0
period = 2
cpu = {cpu}
class = "rt1"
priority = 80
process = "stall_writer"
config = {{ to = "X.n", stall_at = 200 }}

[[subsystem]]
name = "R"
start = 1
period = 2
cpu = {cpu}
class = "rt1"
priority = 80
builtin = "increment"
config = {{ from = "X", to = "Y" }}
"#
        ),
    );
    schedule_file(dir, "stall.toml", &text)
}

#[test]
fn a_writer_stopped_mid_write_is_reported_and_the_run_still_ends() {
    watchdog(Duration::from_secs(90), "stall test");
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-stall-{}", std::process::id());
    let s = stall_schedule(dir.path(), &name);
    let r = run::run(
        &s,
        &mut run::builtin,
        options(dir.path(), Duration::from_millis(1500)),
    )
    .unwrap();
    let torn = warning(&r, WarningId::CellTorn);
    assert!(
        torn.message
            .contains("cell X torn: writer W not progressing"),
        "{}",
        torn.message
    );
    let reader = subsystem(&r, "R");
    assert_eq!(reader.lost, 0, "the reader kept its beat: {reader:?}");
    assert!(reader.outcome.as_ref().is_some_and(|o| o.torn > 0));
    let writer = subsystem(&r, "W");
    assert!(
        writer.lost > 0,
        "the stopped writer's frames are lost: {writer:?}"
    );
    assert!(
        writer
            .crashed
            .as_deref()
            .is_some_and(|c| c.contains("signal 9")),
        "the stopped writer was ended: {writer:?}"
    );
    assert!(!r.complete, "a run that lost frames is not complete");
    warning(&r, WarningId::FramesLost);
    no_segments_of(&name);
}

/// Meets its group partner every frame (twice, as the haptic model does) and, when
/// `panic_at` is set, panics in that frame.
struct Member {
    panic_at: Option<u64>,
}

impl Subsystem for Member {
    type Error = RegistryError;
    fn init(_reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Member { panic_at: None })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        frame.rendezvous();
        if self.panic_at.is_some_and(|at| frame.number() >= at) {
            panic!("member fails on purpose in frame {}", frame.number());
        }
        frame.rendezvous();
        Ok(Flow::Continue)
    }
}

#[test]
fn a_group_member_that_panics_ends_its_partner_and_the_run_reports_it() {
    watchdog(Duration::from_secs(90), "group panic test");
    let cpus = ictus_os::facts::online_cpus();
    let cpus: Vec<usize> = cpus.cpus().to_vec();
    assert!(cpus.len() >= 2, "a synchronous group needs two CPUs");
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-group-{}", std::process::id());
    let text = schedule_text(
        &name,
        1,
        &format!(
            r#"[[subsystem]]
name = "steady"
cpu = {a}
class = "normal"
group = "pair"

[[subsystem]]
name = "faulty"
cpu = {b}
class = "normal"
group = "pair"
"#,
            a = cpus[0],
            b = cpus[1]
        ),
    );
    let s = schedule_file(dir.path(), "group.toml", &text);
    let mut factory = |spec: &SubsystemSpec| -> Result<Maker, String> {
        let panic_at = (spec.name == "faulty").then_some(100);
        Ok(Maker::with(move |_| {
            Ok::<_, RegistryError>(Member { panic_at })
        }))
    };
    // Long enough that a partner spinning on the dead member would show as a hang.
    let r = run::run(
        &s,
        &mut factory,
        options(dir.path(), Duration::from_secs(2)),
    )
    .unwrap();
    let crash = warning(&r, WarningId::Crash);
    assert!(
        crash.message.contains("faulty: its thread panicked"),
        "{}",
        crash.message
    );
    let steady = subsystem(&r, "steady");
    let end = steady.outcome.as_ref().map(|o| o.end.as_str());
    assert_eq!(end, Some("group-broken"), "{steady:?}");
    assert!(steady.lost > 0, "the partner's remaining frames are lost");
    assert!(subsystem(&r, "faulty").lost > 0);
    assert!(
        r.events
            .iter()
            .any(|e| e.contains("a member of its synchronous group left the run")),
        "{:#?}",
        r.events
    );
    assert!(!r.complete);
    no_segments_of(&name);
}

/// A program's `run` error crosses the process boundary: counted, its message in
/// the report, its frames lost after it stopped (`on_error = "stop"`), and the
/// in-process subsystem beside it keeps its beat.
#[test]
fn a_program_s_run_error_reaches_the_report_and_stops_only_that_program() {
    watchdog(Duration::from_secs(60), "erring program test");
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-erring-{}", std::process::id());
    let text = schedule_text(
        &name,
        1,
        r#"[[subsystem]]
name = "E"
process = "erring"
config = { fail_from = 10 }

[[subsystem]]
name = "I"
builtin = "idle"
"#,
    );
    let s = schedule_file(dir.path(), "erring.toml", &text);
    let r = run::run(
        &s,
        &mut run::builtin,
        options(dir.path(), Duration::from_millis(200)),
    )
    .unwrap();
    let e = subsystem(&r, "E");
    let outcome = e.outcome.as_ref().expect("the program wrote its figures");
    assert_ne!(outcome.pid, std::process::id(), "E ran in its own process");
    assert_eq!((e.errors, e.frames_run), (1, 10), "{e:?}");
    assert_eq!(outcome.end, "failed");
    let (frame, message) = outcome.first_error.clone().expect("its first error");
    assert_eq!(Some(frame), outcome.last_frame);
    assert_eq!(message, "sensor read failed at its frame 10");
    assert!(e.lost > 0 && e.crashed.is_none(), "{e:?}");
    let w = warning(&r, WarningId::SubsystemError);
    assert!(
        w.message.contains("E: its run returned 1 error(s)")
            && w.message.contains("sensor read failed at its frame 10"),
        "{}",
        w.message
    );
    assert_eq!(subsystem(&r, "I").lost, 0);
    assert!(!r.complete);
    no_segments_of(&name);
}
