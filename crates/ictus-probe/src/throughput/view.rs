//! The `throughput` probe's measurements: one transfer point per transport, placement
//! and payload, memcpy on one CPU as the bound, and the targets judged on them. The
//! other reference, the bare cache-line round trip, is
//! [`CachelineRoundTrip`](crate::rendezvous::view::CachelineRoundTrip).

use serde::{Deserialize, Serialize};

use super::{MEASUREMENT, Pacing, Placement, Transport};
use crate::view::Kind;

/// A transfer point (`transfer`): its latency is the one-way time.
pub enum Transfer {}

impl Kind for Transfer {
    const NAMES: &'static [&'static str] = &[MEASUREMENT];
    type Labels = TransferLabels;
    type Metrics = TransferMetrics;
}

/// Where a transfer point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferLabels {
    /// How the messages travel.
    pub transport: Transport,
    /// One CPU or two.
    pub placement: Placement,
    /// Bytes per message.
    pub payload_bytes: usize,
    /// Acknowledged messages or a stream.
    pub mode: Pacing,
    /// The CPUs of the sender and the receiver.
    pub cpus: [usize; 2],
    /// The policy the threads ran with (`fifo 95`).
    pub policy: String,
}

/// What a transfer point measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferMetrics {
    /// Messages received and timed.
    pub messages: f64,
    /// First stamp to last arrival.
    pub elapsed_ns: f64,
    /// Payload bytes per second.
    pub bytes_per_s: f64,
    /// Messages per second.
    pub messages_per_s: f64,
    /// Mean one-way time (sender's stamp to the receiver holding the message).
    pub one_way_mean_ns: Option<f64>,
    /// Median one-way time.
    pub one_way_p50_ns: Option<f64>,
    /// 99th percentile one-way time.
    pub one_way_p99_ns: Option<f64>,
    /// Longest one-way time.
    pub one_way_max_ns: Option<f64>,
    /// Mean round trip (sync mode).
    pub round_trip_mean_ns: Option<f64>,
    /// Median round trip (sync mode).
    pub round_trip_p50_ns: Option<f64>,
    /// 99th percentile round trip (sync mode).
    pub round_trip_p99_ns: Option<f64>,
    /// Longest round trip (sync mode).
    pub round_trip_max_ns: Option<f64>,
    /// Messages of the untimed batch (sync mode).
    pub batch_messages: Option<f64>,
    /// Mean round trip in the untimed batch, no clock read inside it.
    pub batch_round_trip_ns: Option<f64>,
    /// Half of that: the one-way time without a clock read.
    pub one_way_half_round_trip_ns: Option<f64>,
}

/// One thread's memcpy at one size (`memcpy`), the bound of a transfer.
pub enum Memcpy {}

impl Kind for Memcpy {
    const NAMES: &'static [&'static str] = &["memcpy"];
    type Labels = MemcpyLabels;
    type Metrics = MemcpyMetrics;
}

/// Where a memcpy point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemcpyLabels {
    /// Bytes per copy.
    pub payload_bytes: usize,
    /// The CPU it ran on.
    pub cpu: usize,
}

/// What a memcpy point measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemcpyMetrics {
    /// Copies made.
    pub copies: f64,
    /// Bytes copied per second.
    pub bytes_per_s: f64,
    /// Copies per second.
    pub copies_per_s: f64,
    /// Time per copy.
    pub ns_per_copy: f64,
}

/// The targets, judged on the spsc cross-CPU points (`targets`).
pub enum Targets {}

impl Kind for Targets {
    const NAMES: &'static [&'static str] = &["targets"];
    type Labels = TargetsLabels;
    type Metrics = TargetsMetrics;
}

/// The points the targets are judged on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetsLabels {
    /// The mode of the run.
    pub mode: Pacing,
    /// The payload of the one-way target (the smallest).
    pub one_way_payload_bytes: u64,
    /// The payload of the bandwidth target (the largest).
    pub bandwidth_payload_bytes: u64,
}

/// The targets and what was measured against them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetsMetrics {
    /// The one-way time may be at most this many times half the bare round trip.
    pub one_way_target_max: f64,
    /// The bandwidth must be at least this share of memcpy's.
    pub bandwidth_target_min: f64,
    /// Half the bare cache-line round trip.
    pub half_round_trip_ns: Option<f64>,
    /// The spsc one-way time (half its untimed round trip).
    pub spsc_one_way_ns: Option<f64>,
    /// The one-way target's figure.
    pub spsc_one_way_vs_half_round_trip: Option<f64>,
    /// The timestamped spsc one-way median.
    pub spsc_one_way_p50_ns: Option<f64>,
    /// That over half the bare round trip.
    pub spsc_one_way_p50_vs_half_round_trip: Option<f64>,
    /// What a clock read costs.
    pub clock_read_ns: Option<f64>,
    /// The timestamped median without its clock read, over half the bare round trip.
    pub spsc_one_way_p50_net_vs_half_round_trip: Option<f64>,
    /// The spsc bandwidth at the largest payload.
    pub spsc_bytes_per_s: Option<f64>,
    /// memcpy's at that size.
    pub memcpy_bytes_per_s: Option<f64>,
    /// The bandwidth target's figure.
    pub spsc_vs_memcpy: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn a_transfer_reads_back_with_the_keys_the_report_knows() {
        let sut = Point::<Transfer>::new(
            TransferLabels {
                transport: Transport::Spsc,
                placement: Placement::CrossCpu,
                payload_bytes: 64,
                mode: Pacing::Sync,
                cpus: [0, 1],
                policy: "fifo 95".into(),
            },
            TransferMetrics {
                messages: 200.0,
                elapsed_ns: 1e6,
                bytes_per_s: 12_800_000.0,
                messages_per_s: 2e5,
                one_way_mean_ns: Some(300.0),
                one_way_p50_ns: Some(250.0),
                one_way_p99_ns: None,
                one_way_max_ns: None,
                round_trip_mean_ns: None,
                round_trip_p50_ns: None,
                round_trip_p99_ns: None,
                round_trip_max_ns: None,
                batch_messages: None,
                batch_round_trip_ns: None,
                one_way_half_round_trip_ns: Some(200.0),
            },
        );
        let m = round_trip(&sut, "transfer");
        assert_eq!(m.labels["transport"], "spsc");
        assert_eq!(m.labels["mode"], "sync");
        assert_eq!(
            keys(&m),
            (
                vec![
                    "cpus",
                    "mode",
                    "payload_bytes",
                    "placement",
                    "policy",
                    "transport"
                ],
                vec![
                    "bytes_per_s",
                    "elapsed_ns",
                    "messages",
                    "messages_per_s",
                    "one_way_half_round_trip_ns",
                    "one_way_mean_ns",
                    "one_way_p50_ns"
                ]
            )
        );
    }

    #[test]
    fn memcpy_and_the_targets_read_back() {
        let memcpy = Point::<Memcpy>::new(
            MemcpyLabels {
                payload_bytes: 4096,
                cpu: 0,
            },
            MemcpyMetrics {
                copies: 10.0,
                bytes_per_s: 4e9,
                copies_per_s: 1e6,
                ns_per_copy: 1000.0,
            },
        );
        round_trip(&memcpy, "memcpy");
        let targets = Point::<Targets>::new(
            TargetsLabels {
                mode: Pacing::Stream,
                one_way_payload_bytes: 0,
                bandwidth_payload_bytes: 4096,
            },
            TargetsMetrics {
                one_way_target_max: 1.5,
                bandwidth_target_min: 0.5,
                half_round_trip_ns: None,
                spsc_one_way_ns: None,
                spsc_one_way_vs_half_round_trip: None,
                spsc_one_way_p50_ns: None,
                spsc_one_way_p50_vs_half_round_trip: None,
                clock_read_ns: None,
                spsc_one_way_p50_net_vs_half_round_trip: None,
                spsc_bytes_per_s: Some(3e9),
                memcpy_bytes_per_s: Some(4e9),
                spsc_vs_memcpy: Some(0.75),
            },
        );
        let m = round_trip(&targets, "targets");
        assert_eq!(
            keys(&m).1,
            vec![
                "bandwidth_target_min",
                "memcpy_bytes_per_s",
                "one_way_target_max",
                "spsc_bytes_per_s",
                "spsc_vs_memcpy"
            ]
        );
    }
}
