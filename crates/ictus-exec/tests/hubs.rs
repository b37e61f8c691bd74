//! Hubs declared in a schedule (`[[hub]]`), owned by the run and shared by name: a
//! subsystem thread sends numbers on a FIFO hub to an echo subsystem, in a thread or
//! in a process of its own (the `hub_echo` example program), which sends them back on
//! another FIFO and counts them on a semaphore. Structure only, never timings.

mod common;
// The echo subsystem of the `hub_echo` program, to run it in-process too.
#[allow(dead_code)] // its `main`, which only the program runs
#[path = "../examples/hub_echo.rs"]
mod hub_echo;

use std::path::Path;
use std::time::Duration;

use common::{options, schedule_file, schedule_text, segments_of, subsystem};
use hub_echo::{Echo, OFFSET};
use ictus_exec::hub::{FifoReceiver, FifoSender, Semaphore};
use ictus_exec::program::Executive;
use ictus_exec::report::RunReport;
use ictus_exec::schedule::Schedule;
use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};

/// Sends the frame number each release and collects what comes back (the test
/// reads it from the subsystem itself after the run).
struct Source {
    tx: FifoSender<u64>,
    rx: FifoReceiver<u64>,
    echoed: Semaphore,
    sent: u64,
    back: Vec<u64>,
    tokens: u64,
}

impl Subsystem for Source {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        // The kinds and types are checked by name.
        assert!(reg.event("to_echo").is_err());
        assert!(reg.fifo_sender::<u32>("from_echo").is_err());
        assert!(reg.semaphore("nothing").is_err());
        Ok(Source {
            tx: reg.fifo_sender("to_echo")?,
            rx: reg.fifo_receiver("from_echo")?,
            echoed: reg.semaphore("echoed")?,
            sent: 0,
            back: Vec::with_capacity(1024),
            tokens: 0,
        })
    }

    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        if self.tx.try_send(frame.number()).is_ok() {
            self.sent += 1;
        }
        // The test's own bookkeeping may allocate; the hubs do not.
        while let Some(n) = self.rx.try_recv() {
            self.back.push(n);
        }
        while self.echoed.try_take() {
            self.tokens += 1;
        }
        Ok(Flow::Continue)
    }
}

fn schedule(dir: &Path, name: &str, echo_process: &str) -> Schedule {
    let text = schedule_text(
        name,
        2,
        &format!(
            r#"[[subsystem]]
name = "source"
start = 0
period = 2

[[subsystem]]
name = "echo"
start = 1
period = 2
process = "{echo_process}"

[[hub]]
name = "to_echo"
kind = "fifo"
type = "u64"
capacity = 64

[[hub]]
name = "from_echo"
kind = "fifo"
type = "u64"
capacity = 64

[[hub]]
name = "echoed"
kind = "semaphore"
"#
        ),
    );
    schedule_file(dir, "schedule.toml", &text)
}

/// Runs the schedule with `echo` in-process or as the `hub_echo` program and checks
/// that what came back is exactly what was sent, echoed, in order.
fn echo_round_trip(echo_process: &str, tag: &str) -> RunReport {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-hubs-{tag}-{}", std::process::id());
    let s = schedule(dir.path(), &name, echo_process);
    assert_eq!(s.hubs.len(), 3);
    let mut executive = Executive::new(s).subsystem::<Source>("source");
    if echo_process == "in-process" {
        executive = executive.subsystem::<Echo>("echo");
    }
    let mut outcome = executive
        .options(options(dir.path(), Duration::from_millis(400)))
        .run()
        .unwrap();
    let source: Source = outcome.take("source").unwrap();
    let r = outcome.report;
    assert!(r.complete, "{r:?}");
    assert!(
        r.subsystems
            .iter()
            .all(|s| s.lost == 0 && s.crashed.is_none())
    );
    let (back, sent) = (&source.back, source.sent);
    assert!(!back.is_empty(), "nothing came back ({sent} sent)");
    assert!(back.len() as u64 <= sent);
    // Every echo is a frame number of the source (even frames), plus the offset, in
    // the order sent, each once.
    assert!(
        back.iter()
            .all(|n| *n >= OFFSET && (n - OFFSET).is_multiple_of(2)),
        "{back:?}"
    );
    assert!(back.windows(2).all(|w| w[0] < w[1]), "{back:?}");
    // One token per echo; the source took those given before its last frame.
    assert!(source.tokens <= back.len() as u64 + 64);
    assert!(source.tokens > 0);
    // The subsystem taken back holds its hub handles, so the run's hubs outlive
    // the run until it is dropped; then nothing is left.
    drop(source);
    assert!(segments_of(&name).is_empty(), "{:?}", segments_of(&name));
    r
}

#[test]
fn hubs_pass_messages_between_threads_by_name() {
    let r = echo_round_trip("in-process", "thr");
    assert!(r.subsystems.iter().all(|s| {
        s.outcome
            .as_ref()
            .is_none_or(|o| o.pid == std::process::id())
    }));
}

#[test]
fn hubs_pass_messages_between_processes_by_name() {
    let r = echo_round_trip("hub_echo", "proc");
    let echo = subsystem(&r, "echo");
    let outcome = echo.outcome.as_ref().expect("echo reported its figures");
    assert_ne!(
        outcome.pid,
        std::process::id(),
        "echo ran in a process of its own"
    );
}
