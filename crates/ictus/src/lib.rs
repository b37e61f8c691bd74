//! ictus for programs: one dependency for a real-time loop on ordinary multi-core
//! Linux. A subsystem needs only the [`prelude`]:
//!
//! ```no_run
//! use ictus::prelude::*;
//!
//! /// Reads `count.n` as published last frame and publishes it plus one.
//! struct Counter {
//!     n: Input<i64>,
//!     next: Output<i64>,
//! }
//!
//! impl Subsystem for Counter {
//!     type Error = RegistryError;
//!     fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
//!         Ok(Counter { n: reg.input("count.n")?, next: reg.output("count.n")? })
//!     }
//!     fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
//!         let n = frame.get(&self.n) + 1;
//!         frame.set(&self.next, n);
//!         Ok(Flow::Continue)
//!     }
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let schedule = Schedule::builder("minimal")
//!         .tick(Nanos::from_millis(1))
//!         .initial_state("run")
//!         .cell("count", [ElementDecl::of::<i64>("n")])
//!         .subsystem(SubsystemDecl::new("counter").cpu(0).fifo(80))
//!         .build(&online_cpus())?;
//!     let outcome = Executive::new(schedule)
//!         .subsystem::<Counter>("counter")
//!         .duration(std::time::Duration::from_millis(20))
//!         .run()?;
//!     println!("count.n = {}", outcome.cell::<i64>("count.n")?);
//!     Ok(())
//! }
//! ```
//!
//! The libraries behind it, for what the prelude does not cover:
//! - [`exec`]: the cyclic executive (schedules, cells, hubs, states, runs);
//! - [`shield`]: task classes (RT0, RT1+, normal), the shield (the RT/NRT partition
//!   and its exact reset), the balancer, scenarios;
//! - [`probe`]: the probes, the loads, the audit and the result record;
//! - [`run_record`]: the record of a run of the executive, as `ictus run` writes it;
//! - [`explain`]: why a deadline was missed (the miss reporter and its sampler);
//! - [`capture`]: the files a run writes for other tools (MCAP recordings,
//!   Chrome/Perfetto timelines);
//! - [`os`]: the Linux calls (clocks, waits, scheduling, memory, shared memory);
//! - [`core`]: the portable parts (time, histograms, the lock-free rings, the seqlock,
//!   the spin barrier);
//! - `net` (feature `net`): the executive across hosts, on Zenoh.
#![forbid(unsafe_code)]

pub use ictus_capture as capture;
pub use ictus_core as core;
pub use ictus_exec as exec;
pub use ictus_explain as explain;
#[cfg(feature = "net")]
pub use ictus_net as net;
pub use ictus_os as os;
pub use ictus_probe as probe;
pub use ictus_shield as shield;

pub use ictus_exec::run_record;

/// What a program with subsystems uses: the subsystem trait, its handles and
/// statuses, the schedule (from a file or built in code), running it and reading
/// its outcome back, and the time and CPU types.
pub mod prelude {
    pub use ictus_core::{CpuSet, Nanos};
    pub use ictus_exec::builder::{ElementDecl, SubsystemDecl};
    pub use ictus_exec::program::{Executive, Outcome};
    pub use ictus_exec::report::RunReport;
    pub use ictus_exec::run::{RunError, RunOptions};
    pub use ictus_exec::schedule::Schedule;
    pub use ictus_exec::subsystem::{
        BoxError, Flow, Frame, Input, OnError, Output, Registry, RegistryError, Subsystem,
    };
    pub use ictus_os::facts::online_cpus;
}
