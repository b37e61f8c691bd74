//! The measurements of ictus: one module per probe, the platform audit, and the
//! [`record::RunRecord`] every probe returns.
//!
//! Nothing here prints: probes return data, and report progress through
//! [`progress::Progress`], which the caller may watch from another thread.
#![forbid(unsafe_code)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod compute;
pub mod doctor;
pub mod import;
pub mod irq;
pub mod jitter;
pub mod load;
pub mod r#loop;
pub mod memlat;
pub mod pingpong;
pub mod probe;
pub mod progress;
pub mod provenance;
pub mod record;
pub mod registry;
pub mod rendezvous;
pub mod session;
pub mod setup;
pub mod survey;
pub mod throughput;
pub mod timer;
pub mod view;
