//! The measurements of ictus: one module per probe, the platform audit, and the
//! [`record::RunRecord`] every probe returns.
//!
//! The record's format, the registry, the session and the views' machinery are
//! `ictus-record`'s (shared with the executive); they are re-exported here under
//! their old paths ([`record`], [`registry`], [`session`], [`progress`],
//! [`provenance`], [`view`]).
//!
//! Nothing here prints: probes return data, and report progress through
//! [`progress::Progress`], which the caller may watch from another thread.
#![forbid(unsafe_code)]

/// Counts what the measuring threads' hot loops allocate in this crate's tests
/// (none may; see `r#loop::trace::hot_loop`).
#[cfg(test)]
#[global_allocator]
static GLOBAL: ictus_core::alloc_count::Counting = ictus_core::alloc_count::Counting;

// The probes' folders (`src/<probe>/`), one per line of the registry: a new probe
// adds no line here. `cargo fmt` does not reach modules declared by a macro; `.ci/run`
// checks them with rustfmt (`rustfmt --edition 2024 crates/ictus-probe/src/<probe>/mod.rs`).
macro_rules! probe_modules {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        $(pub mod $module;)*
    };
}
crate::for_each_probe!(probe_modules);

#[cfg(feature = "cli")]
pub mod cli;
pub mod doctor;
pub mod import;
pub mod load;
pub mod own_load;
pub mod probe;
pub mod setup;
pub mod survey;
pub mod view;

pub use ictus_record::for_each_probe;
pub use ictus_record::{progress, provenance, record, registry, session};
