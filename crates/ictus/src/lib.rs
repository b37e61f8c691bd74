//! ictus for programs: one dependency for a real-time loop on ordinary multi-core
//! Linux. A subsystem needs only the [`prelude`]:
//!
//! ```no_run
//! use ictus::prelude::*;
//!
//! /// Reads `count.n` as published last frame and publishes it plus one.
//! #[derive(Default)]
//! struct Counter {
//!     io: Option<(Input<i64>, Output<i64>)>,
//! }
//!
//! impl Subsystem for Counter {
//!     fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
//!         self.io = Some((reg.input("count.n")?, reg.output("count.n")?));
//!         Ok(())
//!     }
//!     fn run(&mut self, frame: &mut Frame) {
//!         if let Some((n, next)) = self.io {
//!             let v = frame.get(&n) + 1;
//!             frame.set(&next, v);
//!         }
//!     }
//! }
//! ```
//!
//! The libraries behind it, for what the prelude does not cover:
//! - [`exec`]: the cyclic executive (schedules, cells, hubs, states, runs);
//! - [`shield`]: task classes (RT0, RT1+, normal), the shield (the RT/NRT partition
//!   and its exact reset), the balancer, scenarios;
//! - [`probe`]: the probes, the loads, the audit and the result record;
//! - [`os`]: the Linux calls (clocks, waits, scheduling, memory, shared memory);
//! - [`core`]: the portable parts (time, histograms, the lock-free rings, the seqlock,
//!   the spin barrier);
//! - `net` (feature `net`): the executive across hosts, on Zenoh.
#![forbid(unsafe_code)]

pub use ictus_core as core;
pub use ictus_exec as exec;
#[cfg(feature = "net")]
pub use ictus_net as net;
pub use ictus_os as os;
pub use ictus_probe as probe;
pub use ictus_shield as shield;

/// What a program with subsystems uses: the subsystem trait and its handles, the
/// schedule, running it, and the time and CPU types.
pub mod prelude {
    pub use ictus_core::{CpuSet, Nanos};
    pub use ictus_exec::run::{RunOptions, RunReport, run};
    pub use ictus_exec::schedule::Schedule;
    pub use ictus_exec::subsystem::{Frame, Input, Output, Registry, RegistryError, Subsystem};
    pub use ictus_os::facts::online_cpus;
}
