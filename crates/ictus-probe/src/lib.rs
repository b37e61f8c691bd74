//! The measurements of ictus: one module per probe, the platform audit, and the
//! [`record::RunRecord`] every probe returns.
//!
//! Nothing here prints: probes return data, and report progress through
//! [`progress::Progress`], which the caller may watch from another thread.
#![forbid(unsafe_code)]

pub mod doctor;
pub mod progress;
pub mod provenance;
pub mod record;
pub mod timer;
