//! The minimal subsystem of the README, run in-process for a few frames: one input,
//! one output, one schedule.
//!
//! ```text
//! cargo run --release -p ictus --example minimal
//! ```
//!
//! The subsystem reads element `count.n` as it was published at the end of the
//! previous frame and writes it back plus one, so after `F` frames it holds `F`:
//! a frame counter that goes through the cells.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

// --- the README's snippet, verbatim -------------------------------------------------
use ictus::prelude::*;

/// Reads `count.n` as published last frame and publishes it plus one.
#[derive(Default)]
struct Counter {
    io: Option<(Input<i64>, Output<i64>)>,
    last: i64,
}

impl Subsystem for Counter {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        self.io = Some((reg.input("count.n")?, reg.output("count.n")?));
        Ok(())
    }
    fn run(&mut self, frame: &mut Frame) {
        if let Some((n, next)) = self.io {
            self.last = frame.get(&n) + 1;
            frame.set(&next, self.last);
        }
    }
}

const SCHEDULE: &str = r#"
name = "minimal"
tick = "1ms"          # one frame
major_frame = 1
initial_state = "run"

[[cell]]
name = "count"
elements = [{ name = "n", type = "i64" }]

[[subsystem]]
name = "counter"      # in-process: made by the factory given to run::run
cpu = 0
class = "rt1"         # SCHED_FIFO 80, or the normal class (with a warning) if refused
priority = 80
"#;
// --- end of the snippet ---------------------------------------------------------------

/// Runs the counter and, at shutdown, hands its last value to `main`.
struct Watched(Counter, Arc<AtomicI64>);

impl Subsystem for Watched {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        self.0.init(reg)
    }
    fn run(&mut self, frame: &mut Frame) {
        self.0.run(frame);
    }
    fn shutdown(&mut self) {
        // Relaxed: read by main after run::run has joined this thread.
        self.1.store(self.0.last, Ordering::Relaxed);
    }
}

fn main() -> ExitCode {
    let schedule = match Schedule::parse(SCHEDULE, "minimal.toml", &online_cpus()) {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let options = RunOptions {
        duration: Some(Duration::from_millis(20)),
        control_socket: false,
        ..RunOptions::default()
    };
    let last = Arc::new(AtomicI64::new(0));
    let mut factory = |_: &_| -> Result<Box<dyn Subsystem>, String> {
        Ok(Box::new(Watched(Counter::default(), Arc::clone(&last))))
    };
    let report = match run(&schedule, &mut factory, options) {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    let mut out = String::new();
    for s in &report.subsystems {
        out += &format!(
            "{}: {} frames run of {} due, {} overruns; count.n = {}\n",
            s.name,
            s.frames_run,
            s.releases_due,
            s.overruns,
            last.load(Ordering::Relaxed)
        );
    }
    for w in &report.warnings {
        out += &format!("warning: {}\n", w.message);
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "minimal: {message}");
    ExitCode::FAILURE
}
