//! `ictus probe pingpong`: arguments to parameters, the run with its progress bar,
//! and its human view printed (`ictus_report::probes`).

use std::sync::Arc;
use std::time::Duration;

use ictus_core::Nanos;
use ictus_probe::pingpong::{self, PingpongParams, Placement, Primitive};
use ictus_probe::progress::Progress;
use ictus_probe::setup::{Choice, Length};

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs, positive_duration};

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
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u64).range(..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) loops: Option<u64>,
    /// Warm-up before each primitive and placement, discarded.
    #[arg(long, default_value = "100ms", value_parser = ictus_probe::cli::any_duration)]
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
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
}
