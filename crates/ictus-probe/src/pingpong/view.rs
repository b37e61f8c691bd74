//! The `pingpong` probe's measurement: one hand-off point per primitive and
//! placement.

use serde::{Deserialize, Serialize};

use super::{MEASUREMENT, Placement, Primitive};
use crate::view::Kind;

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
