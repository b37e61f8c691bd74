//! `ictus probe pingpong`: arguments to parameters, the run with its progress bar,
//! and its human view printed (`ictus_report::probes`).

use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use ictus_core::Nanos;
use ictus_probe::pingpong::{self, Length, PingpongParams, Placement, Primitive};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::args::{OutputArgs, SchedArgs, positive_duration};
use crate::common::{self, Bar};

/// Hand-off primitives on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PrimitiveArg {
    /// Futex wait and wake on a flag word (what semaphores and mutexes use).
    Futex,
    /// A pipe per direction, one u64 each way (as perf bench sched pipe).
    Pipe,
    /// An eventfd per direction.
    Eventfd,
    /// Mutex and condition variable (std).
    Condvar,
    /// A POSIX message queue per direction (as pmqtest).
    Mq,
    /// Poll a flag with sched_yield between checks (same CPU only).
    Yield,
    /// Every primitive in turn.
    All,
}

/// Thread placements on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PlacementArg {
    /// Both threads on the first CPU of --cpus.
    SameCpu,
    /// The threads on the first two CPUs of --cpus.
    CrossCpu,
    /// Same CPU, then across CPUs.
    Both,
}

/// Context switch and hand-off latency: two threads wake each other in turn.
#[derive(clap::Args, Debug)]
pub(crate) struct PingpongArgs {
    /// How the threads wake each other.
    #[arg(long, value_enum, default_value = "futex")]
    pub(crate) primitive: PrimitiveArg,
    /// Where the two threads run.
    #[arg(long, value_enum, default_value = "same-cpu")]
    pub(crate) placement: PlacementArg,
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
    let primitives = match args.primitive {
        PrimitiveArg::All => Primitive::ALL.to_vec(),
        PrimitiveArg::Futex => vec![Primitive::Futex],
        PrimitiveArg::Pipe => vec![Primitive::Pipe],
        PrimitiveArg::Eventfd => vec![Primitive::Eventfd],
        PrimitiveArg::Condvar => vec![Primitive::Condvar],
        PrimitiveArg::Mq => vec![Primitive::Mq],
        PrimitiveArg::Yield => vec![Primitive::Yield],
    };
    let placements = match args.placement {
        PlacementArg::SameCpu => vec![Placement::SameCpu],
        PlacementArg::CrossCpu => vec![Placement::CrossCpu],
        PlacementArg::Both => Placement::ALL.to_vec(),
    };
    let params = PingpongParams {
        primitives,
        placements,
        length: match args.loops {
            Some(n) => Length::Loops(n),
            None => Length::Duration(Nanos::from(args.duration)),
        },
        warmup: Nanos::from(args.warmup),
        cpus: sched.cpus,
        policy: sched.policy,
        mlock: sched.mlock,
        pm_qos: sched.pm_qos,
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
        Length::Loops(n) => (
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
