//! Portable core of ictus: time types, clocks, deadline arithmetic, latency
//! histograms and their summaries.
//!
//! Nothing here calls the operating system, so all of it runs under Miri and
//! is tested with a [`clock::MockClock`]. The Linux side (real clocks, the
//! three ways to wait, scheduling) lives in `ictus-os`.
//!
//! ```
//! use ictus_core::{histogram::LatencyHistogram, time::Nanos};
//! let mut h = LatencyHistogram::new();
//! for v in [12_000, 9_500, 31_000] {
//!     h.record(Nanos::new(v));
//! }
//! let s = h.summary();
//! assert_eq!(s.count, 3);
//! assert_eq!(s.max_ns, Some(Nanos::new(31_000)));
//! ```
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod alloc_count;
pub mod clock;
pub mod cpulist;
pub mod histogram;
pub mod mass;
pub mod schedule;
pub mod summary;
// The atomics facade (`sync::atomic`) re-exports std's atomics, so clippy sees every use
// through it as a raw one: the whole of `sync` is built on the facade (and loom-checked),
// and `tests/one_door.rs` checks that no file of it but the facade names std's or loom's
// atomics.
#[allow(clippy::disallowed_types)]
pub mod sync;
pub mod time;
pub mod warning;

pub use clock::{Clock, MockClock};
pub use cpulist::{CpuListError, CpuSet};
pub use histogram::LatencyHistogram;
pub use schedule::{MissCounter, PeriodicDeadlines, Release};
pub use summary::{Percentile, Summary};
pub use time::Nanos;
