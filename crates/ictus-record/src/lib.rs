//! The record of an ictus measurement, one home for the probes and the executive:
//! the format ([`record::RunRecord`], its schema and its reading with located
//! errors), the registry of the probes a record may name ([`registry`]), what every
//! run does around its measurement ([`session::Session`], [`progress::Progress`]),
//! and the typed views of its measurements ([`view`], with the executive's run in
//! [`view::run`]).
//!
//! The probes (`ictus-probe`) and the executive (`ictus-exec`) both write records
//! through this crate; the report (`ictus-report`) reads them through it. It sits
//! below all three, so a program that runs the executive writes a record without
//! building the probes or the report.
#![forbid(unsafe_code)]

pub mod load;
pub mod progress;
pub mod provenance;
pub mod record;
pub mod registry;
pub mod session;
pub mod view;
