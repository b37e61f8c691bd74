//! The cyclic executive of ictus (seed 003, with the hubs of seed 004):
//! subsystems that run on a static frame schedule and talk through typed,
//! frame-coherent communication cells, plus hubs for the rest.
//!
//! - [`cell`]: the cell table (TOML or built in code), typed elements and
//!   their storage, in process memory or in POSIX shared memory.
//! - [`hub`]: semaphores, events, FIFOs, ports and resources, by name,
//!   between threads or processes. A schedule's `[[hub]]` tables are owned by
//!   the run ([`run`]) and reached by name from any subsystem's `init`
//!   ([`subsystem::Registry::hubs`]), in a thread or in a launched program.
#![forbid(unsafe_code)]

pub mod builder;
pub mod builtins;
pub mod cell;
pub mod child;
pub mod control;
pub mod ctl;
pub mod executive;
pub mod group;
pub mod hub;
pub mod link;
pub mod live;
pub mod program;
#[cfg(feature = "mcap")]
pub mod replay;
pub mod report;
pub mod role;
pub mod run;
pub mod run_record;
pub mod schedule;
mod shared;
pub mod state;
pub mod stress;
pub mod subsystem;
pub mod tap;
