//! Hubs declared in a schedule (`[[hub]]`), owned by the run and shared by name: a
//! subsystem thread sends numbers on a FIFO hub to an echo subsystem, in a thread or
//! in a process of its own (the `hub_echo` example program), which sends them back on
//! another FIFO and counts them on a semaphore. Structure only, never timings.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ictus_exec::hub::{FifoReceiver, FifoSender, Semaphore};
use ictus_exec::run::{self, RunOptions};
use ictus_exec::schedule::Schedule;
use ictus_exec::subsystem::{Frame, Registry, RegistryError, Subsystem};

const OFFSET: u64 = 1_000_000;

/// Sends the frame number each release and collects what comes back.
struct Source {
    tx: Option<FifoSender<u64>>,
    rx: Option<FifoReceiver<u64>>,
    echoed: Option<Semaphore>,
    sent: Arc<AtomicU64>,
    back: Arc<Mutex<Vec<u64>>>,
    tokens: Arc<AtomicU64>,
}

impl Subsystem for Source {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        self.tx = Some(reg.fifo_sender("to_echo")?);
        self.rx = Some(reg.fifo_receiver("from_echo")?);
        self.echoed = Some(reg.semaphore("echoed")?);
        // The kinds and types are checked by name.
        assert!(reg.event("to_echo").is_err());
        assert!(reg.fifo_sender::<u32>("from_echo").is_err());
        assert!(reg.semaphore("nothing").is_err());
        Ok(())
    }

    fn run(&mut self, frame: &mut Frame) {
        let (Some(tx), Some(rx), Some(echoed)) = (&mut self.tx, &mut self.rx, &self.echoed) else {
            return;
        };
        if tx.try_send(frame.number()).is_ok() {
            // Relaxed: read after the run has joined every thread.
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        // The test's own bookkeeping may allocate; the hubs do not.
        let mut back = self.back.lock().unwrap();
        while let Some(n) = rx.try_recv() {
            back.push(n);
        }
        while echoed.try_take() {
            self.tokens.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The in-process twin of `examples/hub_echo.rs`.
#[derive(Default)]
struct Echo {
    rx: Option<FifoReceiver<u64>>,
    tx: Option<FifoSender<u64>>,
    echoed: Option<Semaphore>,
}

impl Subsystem for Echo {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        self.rx = Some(reg.fifo_receiver("to_echo")?);
        self.tx = Some(reg.fifo_sender("from_echo")?);
        self.echoed = Some(reg.semaphore("echoed")?);
        Ok(())
    }

    fn run(&mut self, _frame: &mut Frame) {
        let (Some(rx), Some(tx), Some(echoed)) = (&mut self.rx, &mut self.tx, &self.echoed) else {
            return;
        };
        while let Some(n) = rx.try_recv() {
            if tx.try_send(n + OFFSET).is_ok() {
                echoed.give();
            }
        }
    }
}

fn schedule(dir: &Path, name: &str, echo_process: &str) -> Schedule {
    let text = format!(
        r#"name = "{name}"
tick = "1ms"
major_frame = 2
initial_state = "run"

[[subsystem]]
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
    );
    let path = dir.join("schedule.toml");
    std::fs::write(&path, text).unwrap();
    Schedule::from_file(&path, &ictus_os::facts::online_cpus()).unwrap()
}

fn segments_of(name: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&format!("ictus-{name}.")))
        .collect()
}

/// Runs the schedule with `echo` in-process or as the `hub_echo` program and checks
/// that what came back is exactly what was sent, echoed, in order.
fn echo_round_trip(echo_process: &str, tag: &str) -> run::RunReport {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-hubs-{tag}-{}", std::process::id());
    let s = schedule(dir.path(), &name, echo_process);
    assert_eq!(s.hubs.len(), 3);
    let sent = Arc::new(AtomicU64::new(0));
    let back = Arc::new(Mutex::new(Vec::new()));
    let tokens = Arc::new(AtomicU64::new(0));
    let (sent2, back2, tokens2) = (sent.clone(), back.clone(), tokens.clone());
    let mut factory =
        move |spec: &ictus_exec::schedule::SubsystemSpec| -> Result<Box<dyn Subsystem>, String> {
            match spec.name.as_str() {
                "source" => Ok(Box::new(Source {
                    tx: None,
                    rx: None,
                    echoed: None,
                    sent: sent2.clone(),
                    back: back2.clone(),
                    tokens: tokens2.clone(),
                })),
                "echo" => Ok(Box::new(Echo::default())),
                other => Err(format!("no subsystem {other}")),
            }
        };
    let r = run::run(
        &s,
        &mut factory,
        RunOptions {
            duration: Some(Duration::from_millis(400)),
            run_dir: dir.path().join("run"),
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert!(r.complete, "{r:?}");
    assert!(
        r.subsystems
            .iter()
            .all(|s| s.lost == 0 && s.crashed.is_none())
    );
    let back = back.lock().unwrap();
    let sent = sent.load(Ordering::Relaxed);
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
    assert!(tokens.load(Ordering::Relaxed) <= back.len() as u64 + 64);
    assert!(tokens.load(Ordering::Relaxed) > 0);
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
    let echo = r.subsystems.iter().find(|s| s.name == "echo").unwrap();
    let outcome = echo.outcome.as_ref().expect("echo reported its figures");
    assert_ne!(
        outcome.pid,
        std::process::id(),
        "echo ran in a process of its own"
    );
}
