//! `ictus probe throughput`: arguments to parameters, the run with its progress bar,
//! and its human view printed (`ictus_report::probes`: seed 004 Figures 6 and 7 as
//! tables).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::progress::Progress;
use ictus_probe::setup::{Choice, Length};
use ictus_probe::throughput::{
    self, MAX_PAYLOAD_BYTES, Mode, Placement, ThroughputParams, Transport,
};

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs, positive_duration};

/// Data transfer between two threads by payload size, over an SPSC ring, a pipe, a
/// Unix socket pair and buffer handover (seed 004 Figures 6 and 7).
///
/// The default policy (fifo 95) makes the spinning sides real-time on every CPU
/// they use: on a two-CPU machine the rest of the system then runs only while the
/// kernel's real-time throttle stalls them (about 50 ms each second), which shows
/// as max latencies of that size. Use --policy other for a quick look.
#[derive(Debug, Args)]
pub(crate) struct ThroughputArgs {
    /// Transports to measure: spsc, pipe, unix, handover, or all (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "all", value_parser = parse_transport)]
    pub(crate) transport: Vec<Choice<Transport>>,
    /// Where the two threads run.
    #[arg(long, default_value = "both", value_parser = throughput::placement_parser())]
    pub(crate) placement: Choice<Placement>,
    /// Whether the sender waits for each message to be taken (sync) or only when
    /// the transport is full (stream).
    #[arg(long, value_enum, default_value = "sync")]
    pub(crate) mode: Mode,
    /// Largest payload of the sweep 0, 1, 2, 4 ... (bytes; K, KiB, M, MiB accepted).
    #[arg(long, default_value = "32768", value_parser = parse_bytes)]
    pub(crate) max_payload: usize,
    /// Payload sizes to measure instead of the sweep (bytes, comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes, conflicts_with = "max_payload")]
    pub(crate) sizes: Option<Vec<usize>>,
    /// How long to measure each point, after its warm-up (e.g. 100ms).
    #[arg(long, default_value = "100ms", value_parser = positive_duration, conflicts_with = "messages")]
    pub(crate) point_time: Duration,
    /// Measure this many messages per point instead of a duration.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) messages: Option<u64>,
    /// Warm-up before each point, discarded.
    #[arg(long, default_value = "10ms", value_parser = ictus_probe::cli::any_duration)]
    pub(crate) warmup: Duration,
    /// Round trips of the bare cache-line reference between the first two CPUs.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) round_trips: u64,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
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

/// A payload size (see [`ictus_probe::cli::bytes_in`]) up to [`MAX_PAYLOAD_BYTES`].
fn parse_bytes(s: &str) -> Result<usize, String> {
    ictus_probe::cli::bytes_in(0, MAX_PAYLOAD_BYTES)(s)
}

/// Turns the command line into probe parameters, refusing what can never run.
pub(crate) fn params(args: &ThroughputArgs) -> Result<ThroughputParams, Failure> {
    let sched = common::sched_spec(&args.sched, Nanos::from_millis(1))?;
    let mut transports = Vec::new();
    for choice in &args.transport {
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
    let placements = args.placement.values(&Placement::ALL);
    let sizes = match &args.sizes {
        Some(sizes) => sizes.clone(),
        None => throughput::sizes_up_to(args.max_payload),
    };
    let params = ThroughputParams {
        sched,
        transports,
        placements,
        mode: args.mode,
        sizes,
        length: match args.messages {
            Some(n) => Length::Count(n),
            None => Length::Duration(Nanos::from(args.point_time)),
        },
        warmup: Nanos::from(args.warmup),
        round_trips: args.round_trips,
    };
    throughput::validate(&params).map_err(crate::refusal::refused)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &ThroughputArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    let points = params.points().len() as u32;
    let per_point = match params.length {
        Length::Duration(d) => Duration::from(d),
        // Assume a few microseconds per message for the estimate.
        Length::Count(n) => common::times(Duration::from_micros(5), n),
    };
    let memcpy = match params.length {
        Length::Duration(d) => Duration::from(d),
        Length::Count(_) => Duration::from_millis(10),
    };
    // About 200 ns per cache-line round trip.
    let expected = common::times(
        per_point.saturating_add(Duration::from(params.warmup)),
        u64::from(points),
    )
    .saturating_add(common::times(memcpy, params.sizes.len() as u64))
    .saturating_add(common::times(Duration::from_nanos(200), params.round_trips));
    let probe = || throughput::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, "points");
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
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
