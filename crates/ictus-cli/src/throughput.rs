//! `ictus probe throughput`: arguments to parameters, the run with its progress bar,
//! and the human view of the record (seed 004 Figures 6 and 7 as tables).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;
use ictus_probe::setup::{Choice, Length};
use ictus_probe::throughput::{
    self, MAX_PAYLOAD_BYTES, Mode, Placement, ThroughputParams, Transport,
};
use ictus_probe::view::Point;
use ictus_probe::view::rendezvous::CachelineRoundTrip;
use ictus_probe::view::throughput::{Memcpy, Targets, Transfer};

use crate::Failure;
use crate::args::{OutputArgs, SchedArgs, positive_duration};
use crate::common::{self, Bar};

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
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=crate::args::MAX_COUNT))]
    pub(crate) messages: Option<u64>,
    /// Warm-up before each point, discarded.
    #[arg(long, default_value = "10ms", value_parser = crate::args::any_duration)]
    pub(crate) warmup: Duration,
    /// Round trips of the bare cache-line reference between the first two CPUs.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=crate::args::MAX_COUNT))]
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

/// A payload size (see [`crate::args::bytes_in`]) up to [`MAX_PAYLOAD_BYTES`].
fn parse_bytes(s: &str) -> Result<usize, String> {
    crate::args::bytes_in(0, MAX_PAYLOAD_BYTES)(s)
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
    common::measure(bar, progress, &args.sched, &args.out, probe, render)
}

/// A figure from a measurement, if present.
/// Microseconds with 0.01 us resolution from a nanosecond figure, or `-`.
fn micros(ns: Option<f64>) -> String {
    ns.map_or_else(|| "-".into(), |v| format!("{:.2}", v / 1e3))
}

/// A payload size for tables: `0 B`, `512 B`, `32 KiB`.
fn size(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// One table per transport and placement (seed 004 Figures 6 and 7 as numbers), the
/// references, then the targets.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = common::headline(record);
    let memcpy: Vec<(usize, f64)> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Memcpy>())
        .map(|p| (p.labels.payload_bytes, p.metrics.bytes_per_s))
        .collect();
    let transfers: Vec<Point<Transfer>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Transfer>())
        .collect();
    let mut groups: Vec<(Transport, Placement)> = Vec::new();
    for p in &transfers {
        let key = (p.labels.transport, p.labels.placement);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for &(transport, placement) in &groups {
        let rows: Vec<&Point<Transfer>> = transfers
            .iter()
            .filter(|p| p.labels.transport == transport && p.labels.placement == placement)
            .collect();
        let mode = rows.first().map(|p| p.labels.mode);
        let cpus = rows
            .first()
            .map(|p| format!("[{},{}]", p.labels.cpus[0], p.labels.cpus[1]));
        let _ = writeln!(
            out,
            "\n{transport}, {placement} (CPUs {}), {} mode; latencies in microseconds:",
            cpus.as_deref().unwrap_or("?"),
            mode.map_or("?", Mode::name)
        );
        let sync = mode == Some(Mode::Sync);
        let mut table = common::table();
        let mut header = vec![
            "payload",
            "MB/s",
            "x memcpy",
            "msgs/s",
            "one-way p50",
            "p99",
            "max",
        ];
        if sync {
            header.push("round trip p50");
            header.push("one-way (rt/2)");
        }
        table.set_header(header);
        for p in rows {
            let n = p.labels.payload_bytes;
            let m = &p.metrics;
            let rate = m.bytes_per_s;
            let vs_memcpy = memcpy
                .iter()
                .find(|(size, _)| *size == n)
                .and_then(|&(_, r)| Some(rate / r).filter(|_| n > 0 && r > 0.0));
            let mut row = vec![
                Cell::new(size(n)),
                Cell::new(format!("{:.1}", rate / 1e6)),
                Cell::new(vs_memcpy.map_or("-".into(), |v| format!("{v:.3}"))),
                Cell::new(format!("{:.0}", m.messages_per_s)),
                Cell::new(micros(m.one_way_p50_ns)),
                Cell::new(micros(m.one_way_p99_ns)),
                Cell::new(micros(m.one_way_max_ns)),
            ];
            if sync {
                row.push(Cell::new(micros(m.round_trip_p50_ns)));
                row.push(Cell::new(micros(m.one_way_half_round_trip_ns)));
            }
            table.add_row(row);
        }
        common::right_align(&mut table, 0);
        let _ = writeln!(out, "{table}");
    }
    if let Some(rt) = record
        .measurements
        .iter()
        .find_map(|m| m.read::<CachelineRoundTrip>())
    {
        let ns = rt.metrics.ns_per_round_trip;
        let _ = writeln!(
            out,
            "\nbare cache-line round trip on CPUs {}: {ns:.0} ns (half: {:.0} ns)",
            rt.labels.cpus,
            ns / 2.0
        );
    }
    if let Some(big) = memcpy.iter().max_by_key(|(n, _)| *n) {
        let _ = writeln!(
            out,
            "memcpy on one CPU: {:.0} MB/s at {}",
            big.1 / 1e6,
            size(big.0)
        );
    }
    if let Some(t) = record.measurements.iter().find_map(|m| m.read::<Targets>()) {
        let one_way = t
            .metrics
            .spsc_one_way_vs_half_round_trip
            .map_or("not measured".into(), |r| {
                format!("{r:.2} ({})", if r <= 1.5 { "met" } else { "missed" })
            });
        let bandwidth = t.metrics.spsc_vs_memcpy.map_or("not measured".into(), |r| {
            format!("{r:.2} ({})", if r >= 0.5 { "met" } else { "missed" })
        });
        let _ = writeln!(
            out,
            "targets: spsc one-way (half its untimed round trip) / half the bare round trip \
             = {one_way}, target <= 1.5; \
             spsc / memcpy at {} = {bandwidth}, target >= 0.5",
            size(t.labels.bandwidth_payload_bytes as usize)
        );
    }
    out
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
