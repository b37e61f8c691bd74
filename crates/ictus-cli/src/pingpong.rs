//! `ictus probe pingpong`: arguments to parameters, the run with its progress bar,
//! and the human view of the record.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::pingpong::{self, PingpongParams, Placement, Primitive};
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;
use ictus_probe::setup::{Choice, Length};
use ictus_probe::view::pingpong::Handoff;

use crate::Failure;
use crate::args::{OutputArgs, SchedArgs, positive_duration};
use crate::common::{self, Bar};

/// Context switch and hand-off latency: two threads wake each other in turn.
#[derive(clap::Args, Debug)]
pub(crate) struct PingpongArgs {
    /// How the threads wake each other.
    #[arg(long, default_value = "futex", value_parser = pingpong::primitive_parser())]
    pub(crate) primitive: Choice<Primitive>,
    /// Where the two threads run.
    #[arg(long, default_value = "same-cpu", value_parser = pingpong::placement_parser())]
    pub(crate) placement: Choice<Placement>,
    /// How long to measure each primitive and placement, after the warm-up (e.g. 2s).
    #[arg(short = 'D', long, default_value = "2s", value_parser = positive_duration, conflicts_with = "loops")]
    pub(crate) duration: Duration,
    /// Measure this many round trips per primitive and placement instead of a duration.
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u64).range(..=crate::args::MAX_COUNT))]
    pub(crate) loops: Option<u64>,
    /// Warm-up before each primitive and placement, discarded.
    #[arg(long, default_value = "100ms", value_parser = crate::args::any_duration)]
    pub(crate) warmup: Duration,
    /// Spin a SCHED_OTHER thread on each measured CPU (seed 001's "CPU load").
    #[arg(long)]
    pub(crate) cpu_load: bool,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// Turns the command line into probe parameters, refusing what can never run.
pub(crate) fn params(args: &PingpongArgs) -> Result<PingpongParams, Failure> {
    let sched = common::sched_spec(&args.sched, Nanos::from_millis(1))?;
    if !sched.pin {
        return Err(Failure::usage(anyhow::anyhow!(
            "pingpong always pins its two threads (--placement says where): drop --no-pin"
        )));
    }
    let primitives = args.primitive.values(&Primitive::ALL);
    let placements = args.placement.values(&Placement::ALL);
    let params = PingpongParams {
        primitives,
        placements,
        length: match args.loops {
            Some(n) => Length::Count(n),
            None => Length::Duration(Nanos::from(args.duration)),
        },
        warmup: Nanos::from(args.warmup),
        sched,
        cpu_load: args.cpu_load,
    };
    pingpong::validate(&params).map_err(crate::refusal::refused)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &PingpongArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    let points = params.points().len() as u32;
    let (expected, unit) = match params.length {
        // Same-CPU round trips take a few microseconds: assume 5 us for the estimate.
        Length::Count(n) => (
            common::times(
                Duration::from_micros(5),
                n.saturating_mul(u64::from(points)),
            ),
            "round trips",
        ),
        Length::Duration(d) => (
            common::times(Duration::from(d), u64::from(points)),
            "ms measured",
        ),
    };
    let expected = expected.saturating_add(common::times(
        Duration::from(params.warmup),
        u64::from(points),
    ));
    let probe = || pingpong::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, unit);
    common::measure(bar, progress, &args.sched, &args.out, probe, render)
}

/// Microseconds with 0.1 us resolution from a nanosecond figure, or `-`.
fn micros(ns: Option<f64>) -> String {
    ns.filter(|v| v.is_finite())
        .map_or_else(|| "-".into(), |v| format!("{:.1}", v / 1_000.0))
}

/// The human view: one row per primitive and placement.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<pingpong::ParamsRecord>();
    let length = match p.as_ref().map(|p| (p.loops, p.duration_ns)) {
        Some((Some(n), _)) => format!("{n} round trips"),
        Some((None, Some(d))) => format!("{}", Nanos::new(d)),
        _ => "?".into(),
    };
    let policy = record
        .threads
        .first()
        .map_or_else(|| "?".into(), |t| t.config.policy.to_string());
    let _ = writeln!(
        out,
        "pingpong: 2 threads, policy {policy}, {length} per point after {} warm-up, {}{}",
        Nanos::new(p.as_ref().map_or(0, |p| p.warmup_ns)),
        if p.as_ref().is_some_and(|p| p.cpu_load) {
            "with a SCHED_OTHER spinner on each measured CPU"
        } else {
            "no CPU load"
        },
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    let _ = writeln!(
        out,
        "round trip = 2 hand-offs; hand-off latency (one way, sender's stamp to receiver awake) in microseconds:"
    );
    let mut table = common::table();
    let mut header = vec![
        "primitive",
        "placement",
        "CPUs",
        "round trips/s",
        "round trip ± sd",
    ];
    // Nothing is missed in a ping-pong: no missed column; the stddev is shown.
    let mut latency = common::latency_header_without_missed();
    latency.insert(3, "sd");
    header.extend(latency);
    table.set_header(header);
    for m in &record.measurements {
        let Some(p) = m.read::<Handoff>() else {
            continue;
        };
        let [a, b] = p.labels.cpus;
        let mut row = vec![
            Cell::new(p.labels.primitive),
            Cell::new(p.labels.placement),
            Cell::new(format!("{a},{b}")),
            Cell::new(format!("{:.0}", p.metrics.round_trips_per_s)),
            Cell::new(format!(
                "{} ± {}",
                micros(p.metrics.round_trip_mean_ns),
                micros(p.metrics.round_trip_stddev_ns)
            )),
        ];
        if let Some(l) = &m.latency {
            let mut cells = common::latency_cells_without_missed(l);
            cells.insert(3, Cell::new(micros(l.summary.stddev_ns)));
            row.extend(cells);
        }
        table.add_row(row);
    }
    common::right_align(&mut table, 2);
    let _ = writeln!(out, "{table}");
    if let Some(skipped) = p.map(|p| p.skipped).filter(|s| !s.is_empty()) {
        let _ = writeln!(
            out,
            "not run: {} (yield means nothing across CPUs)",
            skipped.join(", ")
        );
    }
    let refused: Vec<_> = record
        .threads
        .iter()
        .filter(|t| t.config.policy != t.config.policy_requested)
        .collect();
    if !refused.is_empty() {
        let _ = writeln!(
            out,
            "{} thread(s) ran with {} instead of {}",
            refused.len(),
            refused[0].config.policy,
            refused[0].config.policy_requested
        );
    }
    if let Some(note) = common::thin_note(
        record
            .measurements
            .iter()
            .filter_map(|m| m.latency.as_ref()),
    ) {
        let _ = writeln!(out, "{note}");
    }
    out
}
