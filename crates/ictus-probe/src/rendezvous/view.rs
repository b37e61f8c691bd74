//! The `rendezvous` probe's measurements: one point per thread count, flag spacing
//! and payload, and the bare cache-line round trip they are compared with.

use serde::{Deserialize, Serialize};

use crate::view::Kind;

/// One point of the sweep (`rendezvous`).
pub enum Rendezvous {}

impl Kind for Rendezvous {
    const NAMES: &'static [&'static str] = &["rendezvous"];
    type Labels = RendezvousLabels;
    type Metrics = RendezvousMetrics;
}

/// Where a rendezvous point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RendezvousLabels {
    /// Threads meeting.
    pub threads: usize,
    /// Bytes between their flags.
    pub spacing_bytes: usize,
    /// The spacing in words (`same line`, `adjacent`, `5000 B`).
    pub spacing: String,
    /// Bytes each thread exchanges per rendezvous (rounded up to words).
    pub payload_bytes: usize,
}

/// What a rendezvous point measured (left out where a time was zero).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RendezvousMetrics {
    /// Rendezvous per second, set by the slowest thread.
    pub rendezvous_per_s: Option<f64>,
    /// Time per rendezvous.
    pub ns_per_rendezvous: Option<f64>,
    /// The rate over the bare cache-line round-trip rate.
    pub vs_cacheline_limit: Option<f64>,
}

/// The bare cache-line round trip between the first two CPUs
/// (`cacheline-round-trip`), the hardware's limit for a rendezvous and the reference of
/// a throughput run.
pub enum CachelineRoundTrip {}

impl Kind for CachelineRoundTrip {
    const NAMES: &'static [&'static str] = &["cacheline-round-trip"];
    type Labels = CachelineLabels;
    type Metrics = RoundTripMetrics;
}

/// The CPUs of the round trip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachelineLabels {
    /// The two CPUs.
    pub cpus: CpuPair,
}

/// Two CPUs, written as each probe writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CpuPair {
    /// `[0, 1]`, as throughput writes them.
    Pair([usize; 2]),
    /// `"0-1"`, as rendezvous writes them.
    Dashed(String),
}

impl std::fmt::Display for CpuPair {
    /// `[0,1]` or `0-1`, as written.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuPair::Pair([a, b]) => write!(f, "[{a},{b}]"),
            CpuPair::Dashed(s) => f.write_str(s),
        }
    }
}

/// A bare round trip's cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundTripMetrics {
    /// Time per round trip.
    pub ns_per_round_trip: f64,
    /// Round trips per second (left out when the time was zero).
    pub round_trips_per_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn a_rendezvous_point_reads_back_with_the_keys_the_report_knows() {
        let sut = Point::<Rendezvous>::new(
            RendezvousLabels {
                threads: 2,
                spacing_bytes: 5000,
                spacing: "5000 B".into(),
                payload_bytes: 512,
            },
            RendezvousMetrics {
                rendezvous_per_s: Some(1e6),
                ns_per_rendezvous: Some(1000.0),
                vs_cacheline_limit: Some(0.8),
            },
        );
        let m = round_trip(&sut, "rendezvous");
        assert_eq!(
            keys(&m),
            (
                vec!["payload_bytes", "spacing", "spacing_bytes", "threads"],
                vec![
                    "ns_per_rendezvous",
                    "rendezvous_per_s",
                    "vs_cacheline_limit"
                ]
            )
        );
    }

    #[test]
    fn the_cacheline_round_trip_reads_back_as_either_probe_writes_it() {
        let metrics = RoundTripMetrics {
            ns_per_round_trip: 120.0,
            round_trips_per_s: Some(1e9 / 120.0),
        };
        let cpus = CpuPair::Dashed("0-1".into());
        let sut = Point::<CachelineRoundTrip>::new(CachelineLabels { cpus }, metrics.clone());
        let m = round_trip(&sut, "cacheline-round-trip");
        assert_eq!(m.labels["cpus"], "0-1");
        assert_eq!(sut.labels.cpus.to_string(), "0-1");
        let cpus = CpuPair::Pair([0, 1]);
        let sut = Point::<CachelineRoundTrip>::new(CachelineLabels { cpus }, metrics);
        let m = round_trip(&sut, "cacheline-round-trip");
        assert_eq!(m.labels["cpus"], serde_json::json!([0, 1]));
        assert_eq!(sut.labels.cpus.to_string(), "[0,1]");
    }
}
