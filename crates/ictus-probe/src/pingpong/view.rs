//! The hand-off probe's measurement: one hand-off point per primitive and
//! placement.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::setup::Placement;
use crate::view::Kind;

/// The name of every point's measurement in `record.measurements`.
pub const MEASUREMENT: &str = "handoff";

/// How one thread wakes the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Primitive {
    /// A flag word per direction, slept on with `FUTEX_WAIT` and woken with
    /// `FUTEX_WAKE` (what a semaphore or mutex does underneath).
    Futex,
    /// A pipe per direction carrying one u64 (as `perf bench sched pipe`).
    Pipe,
    /// An eventfd per direction.
    Eventfd,
    /// `std::sync::Mutex` with a `Condvar` per direction.
    Condvar,
    /// A POSIX message queue per direction (as rt-tests `pmqtest`).
    Mq,
    /// A flag word per direction, polled with `sched_yield` between checks: both
    /// threads always runnable, on one CPU only.
    Yield,
}

impl Primitive {
    /// Every primitive, in the order `all` runs them.
    pub const ALL: [Primitive; 6] = [
        Primitive::Futex,
        Primitive::Pipe,
        Primitive::Eventfd,
        Primitive::Condvar,
        Primitive::Mq,
        Primitive::Yield,
    ];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Primitive::Futex => "futex",
            Primitive::Pipe => "pipe",
            Primitive::Eventfd => "eventfd",
            Primitive::Condvar => "condvar",
            Primitive::Mq => "mq",
            Primitive::Yield => "yield",
        }
    }

    /// Whether the primitive means anything with the threads on two CPUs (`yield`
    /// does not: each thread would spin alone on its CPU, yielding to nobody).
    pub fn works_across_cpus(self) -> bool {
        self != Primitive::Yield
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A hand-off point (`handoff`): its latency is the one-way hand-off time.
pub enum Handoff {}

impl Kind for Handoff {
    const NAMES: &'static [&'static str] = &[MEASUREMENT];
    type Labels = HandoffLabels;
    type Metrics = HandoffMetrics;
}

/// Where a hand-off point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HandoffLabels {
    /// How the threads wake each other.
    pub primitive: Primitive,
    /// One CPU or two.
    pub placement: Placement,
    /// The CPUs of A and B.
    pub cpus: [usize; 2],
    /// The indices of A and B in the record's `threads`.
    pub threads: [usize; 2],
    /// A SCHED_OTHER thread spun on each measured CPU.
    pub cpu_load: bool,
}

/// What a hand-off point measured: the round trips (two hand-offs each).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HandoffMetrics {
    /// Round trips timed.
    pub round_trips: f64,
    /// Time they took.
    pub elapsed_ns: f64,
    /// Round trips per second.
    pub round_trips_per_s: f64,
    /// Mean round trip.
    pub round_trip_mean_ns: Option<f64>,
    /// Its standard deviation.
    pub round_trip_stddev_ns: Option<f64>,
    /// Shortest round trip.
    pub round_trip_min_ns: Option<f64>,
    /// Median round trip.
    pub round_trip_p50_ns: Option<f64>,
    /// 99th percentile round trip.
    pub round_trip_p99_ns: Option<f64>,
    /// Longest round trip.
    pub round_trip_max_ns: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn a_handoff_reads_back_with_the_keys_the_report_knows() {
        let sut = Point::<Handoff>::new(
            HandoffLabels {
                primitive: Primitive::Futex,
                placement: Placement::CrossCpu,
                cpus: [0, 1],
                threads: [2, 3],
                cpu_load: true,
            },
            HandoffMetrics {
                round_trips: 100.0,
                elapsed_ns: 1e6,
                round_trips_per_s: 1e5,
                round_trip_mean_ns: Some(10_000.0),
                round_trip_stddev_ns: Some(100.0),
                round_trip_min_ns: Some(9_000.0),
                round_trip_p50_ns: Some(9_900.0),
                round_trip_p99_ns: Some(12_000.0),
                round_trip_max_ns: Some(20_000.0),
            },
        );
        let m = round_trip(&sut, "handoff");
        assert_eq!(m.labels["placement"], "cross-cpu");
        assert_eq!(
            keys(&m).0,
            vec!["cpu_load", "cpus", "placement", "primitive", "threads"]
        );
        assert_eq!(keys(&m).1.len(), 9);
    }
}
