//! Task classes (seed 002 §2.1 and §4.3): the libartis API in Rust shape.
//!
//! - **RT0**: `SCHED_FIFO` at the highest priority, bound to one RT CPU, memory locked,
//!   stack prefaulted. The hard real-time task: alone on its shielded CPU.
//! - **RT1+**: `SCHED_FIFO` or `SCHED_RR` at priority 1 to 98, affinity spanning RT and
//!   NRT CPUs. Soft real-time work that may migrate.
//! - **Normal**: `SCHED_OTHER`: the "Linux tasks" of ARTiS.
//!
//! Every call acts on the calling thread and applies the priority **before** the
//! affinity, as seed 002 §4.3 requires. A call that fails part-way puts back what it had
//! changed, so a refusal changes nothing. With a shield applied (its journal present),
//! the thread also joins the cpuset group its class needs.
//!
//! The classes live in `ictus-class`, below the shield and the executive; this module
//! re-exports them and adds [`enter_rt0`] and [`enter_rt1`], which enter against the
//! shield applied with the default journal.
//!
//! ```no_run
//! use ictus_shield::class;
//! match class::enter_rt0(1) {
//!     Ok(entered) => {
//!         // ... the real-time loop ...
//!         class::leave(&entered).unwrap();
//!     }
//!     Err(e) => eprintln!("not RT0: {e}"),
//! }
//! ```

use std::path::Path;

pub use ictus_class::*;

use crate::DEFAULT_JOURNAL;

/// The applied shield's partition, if any (read from the default journal).
fn shield() -> Option<Partition> {
    crate::partition::applied(Path::new(DEFAULT_JOURNAL))
        .ok()
        .flatten()
}

/// Enters RT0 on `cpu` (`artis_enter_rt0`): FIFO 99, then bound to `cpu`, memory locked,
/// stack prefaulted.
pub fn enter_rt0(cpu: usize) -> Result<Entered, ClassError> {
    enter(Class::Rt0 { cpu }, Options::default(), shield().as_ref())
}

/// Enters RT1+ (`artis_enter_rt1plus`): `policy` at `priority` (1 to 98), then an affinity
/// spanning RT and NRT CPUs.
pub fn enter_rt1(policy: RtPolicy, priority: u8) -> Result<Entered, ClassError> {
    enter(
        Class::Rt1 { policy, priority },
        Options::default(),
        shield().as_ref(),
    )
}
