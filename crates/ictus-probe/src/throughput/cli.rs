//! `ictus probe throughput` on the command line: its options, their parameters, and
//! the work a progress bar counts.
//!
//! The default policy (fifo 95) makes the spinning sides real-time on every CPU
//! they use: on a two-CPU machine the rest of the system then runs only while the
//! kernel's real-time throttle stalls them (about 50 ms each second), which shows
//! as max latencies of that size. Use --policy other for a quick look.

use std::time::Duration;

use ictus_core::Nanos;

use super::{MAX_PAYLOAD_BYTES, Pacing, Placement, ThroughputError, ThroughputParams, Transport};
use crate::cli::{
    ArgsError, MAX_COUNT, OutputArgs, ProbeCommand, RunFn, SchedArgs, any_duration, bytes_in,
    positive_duration, sched_spec, times,
};
use crate::setup::PlacementError;
use crate::setup::{Choice, Length};

/// Data transfer between two threads by payload size, over an SPSC ring, a pipe, a
/// Unix socket and buffer handover (seed 004 Figures 6 and 7).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transports to measure: spsc, pipe, unix, handover, or all (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "all", value_parser = parse_transport)]
    pub transport: Vec<Choice<Transport>>,
    /// Where the two threads run.
    #[arg(long, default_value = "both", value_parser = super::placement_parser())]
    pub placement: Choice<Placement>,
    /// Whether the sender waits for each message to be taken (sync) or only when
    /// the transport is full (stream).
    #[arg(long, value_enum, default_value = "sync")]
    pub mode: Pacing,
    /// Largest payload of the sweep 0, 1, 2, 4 ... (bytes; K, KiB, M, MiB accepted).
    #[arg(long, default_value = "32768", value_parser = parse_bytes)]
    pub max_payload: usize,
    /// Payload sizes to measure instead of the sweep (bytes, comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes, conflicts_with = "max_payload")]
    pub sizes: Option<Vec<usize>>,
    /// How long to measure each point, after its warm-up (e.g. 100ms).
    #[arg(long, default_value = "100ms", value_parser = positive_duration, conflicts_with = "messages")]
    pub point_time: Duration,
    /// Measure this many messages per point instead of a duration.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub messages: Option<u64>,
    /// Warm-up before each point, discarded.
    #[arg(long, default_value = "10ms", value_parser = any_duration)]
    pub warmup: Duration,
    /// Round trips of the bare cache-line reference between the first two CPUs.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub round_trips: u64,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

/// One `--transport` word: a transport or `all`.
fn parse_transport(s: &str) -> Result<Choice<Transport>, String> {
    if s == "all" {
        return Ok(Choice::All);
    }
    Transport::from_name(s)
        .map(Choice::One)
        .ok_or_else(|| format!("'{s}' is not spsc, pipe, unix, handover or all"))
}

/// A payload size (see [`bytes_in`]) up to [`MAX_PAYLOAD_BYTES`].
fn parse_bytes(s: &str) -> Result<usize, String> {
    bytes_in(0, MAX_PAYLOAD_BYTES)(s)
}

impl ProbeCommand for Args {
    type Params = ThroughputParams;
    type Error = ThroughputError;

    fn params(&self) -> Result<ThroughputParams, ArgsError<ThroughputError>> {
        let sched = sched_spec(&self.sched, Nanos::from_millis(1))?;
        let mut transports = Vec::new();
        for choice in &self.transport {
            let add: &[Transport] = match choice {
                Choice::All => &Transport::ALL,
                Choice::One(t) => std::slice::from_ref(t),
            };
            for t in add {
                if !transports.contains(t) {
                    transports.push(*t);
                }
            }
        }
        let placements = self.placement.values(&Placement::ALL);
        let sizes = match &self.sizes {
            Some(sizes) => sizes.clone(),
            None => super::sizes_up_to(self.max_payload),
        };
        let params = ThroughputParams {
            sched,
            transports,
            placements,
            mode: self.mode,
            sizes,
            length: match self.messages {
                Some(n) => Length::Count(n),
                None => Length::Duration(Nanos::from(self.point_time)),
            },
            warmup: Nanos::from(self.warmup),
            round_trips: self.round_trips,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &ThroughputError) -> Option<&'static str> {
        match error {
            ThroughputError::NoCpu
            | ThroughputError::TooFewCpus { .. }
            | ThroughputError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            ThroughputError::Unpinned => Some("--no-pin"),
            ThroughputError::ZeroRoundTrips => Some("--round-trips"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &ThroughputParams) -> (Duration, &'static str) {
        let points = params.points().len() as u32;
        let per_point = match params.length {
            Length::Duration(d) => Duration::from(d),
            // Assume a few microseconds per message for the estimate.
            Length::Count(n) => times(Duration::from_micros(5), n),
        };
        let memcpy = match params.length {
            Length::Duration(d) => Duration::from(d),
            Length::Count(_) => Duration::from_millis(10),
        };
        // About 200 ns per cache-line round trip.
        let expected = times(
            per_point.saturating_add(Duration::from(params.warmup)),
            u64::from(points),
        )
        .saturating_add(times(memcpy, params.sizes.len() as u64))
        .saturating_add(times(Duration::from_nanos(200), params.round_trips));
        (expected, "points")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("32K"), Ok(32 * 1024));
        assert_eq!(parse_bytes("1MiB"), Ok(1024 * 1024));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("1024M").is_err());
    }

    #[test]
    fn transports_parse_by_name_or_all() {
        assert_eq!(parse_transport("unix"), Ok(Choice::One(Transport::Unix)));
        assert_eq!(parse_transport("all"), Ok(Choice::All));
        assert!(parse_transport("carrier-pigeon").is_err());
    }
}
