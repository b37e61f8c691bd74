//! The minimal subsystem of the README, run in-process for 20 frames: one input,
//! one output, a schedule built in code, the result read back from the cells.
//!
//! ```text
//! cargo run --release -p ictus --example minimal
//! ```
//!
//! The subsystem reads element `count.n` as it was published at the end of the
//! previous frame and writes it back plus one, so after `F` frames it holds `F`:
//! a frame counter that goes through the cells.

use std::io::Write;
use std::time::Duration;

// --- the README's snippet, verbatim -------------------------------------------------
use ictus::prelude::*;

/// Reads `count.n` as published last frame and publishes it plus one.
struct Counter {
    n: Input<i64>,
    next: Output<i64>,
}

impl Subsystem for Counter {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Counter {
            n: reg.input("count.n")?,
            next: reg.output("count.n")?,
        })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        let n = frame.get(&self.n) + 1;
        frame.set(&self.next, n);
        Ok(Flow::Continue)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let schedule = Schedule::builder("minimal")
        .tick(Nanos::from_millis(1)) // one frame
        .initial_state("run")
        .cell("count", [ElementDecl::of::<i64>("n")])
        // SCHED_FIFO 80 on CPU 0, or the normal class (with a warning) if refused.
        .subsystem(SubsystemDecl::new("counter").cpu(0).fifo(80))
        .build(&online_cpus())?;
    let outcome = Executive::new(schedule)
        .subsystem::<Counter>("counter")
        .duration(Duration::from_millis(20))
        .run()?;
    let mut out = String::new();
    for s in &outcome.report.subsystems {
        out += &format!(
            "{}: {} frames run of {} due, {} overruns; count.n = {}\n",
            s.name,
            s.frames_run,
            s.releases_due,
            s.overruns,
            outcome.cell::<i64>("count.n")?
        );
    }
    for w in &outcome.report.warnings {
        out += &format!("warning: {}\n", w.message);
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(())
}
// --- end of the snippet ---------------------------------------------------------------
