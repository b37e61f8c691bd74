//! The hand-off probe on the command line: its options, their parameters, and
//! the work a progress bar counts.

use std::time::Duration;

use ictus_core::Nanos;

use super::{PingpongError, PingpongParams, Placement, Primitive};
use crate::cli::{
    ArgsError, MAX_COUNT, OutputArgs, ProbeCommand, RunFn, SchedArgs, UsageError, any_duration,
    positive_duration, sched_spec, times,
};
use crate::setup::PlacementError;
use crate::setup::{Choice, Length};

/// Context switch and hand-off latency between two threads (seed 001 Table 3, seed 004 Table 2).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// How the threads wake each other.
    #[arg(long, default_value = "futex", value_parser = super::primitive_parser())]
    pub primitive: Choice<Primitive>,
    /// Where the two threads run.
    #[arg(long, default_value = "same-cpu", value_parser = super::placement_parser())]
    pub placement: Choice<Placement>,
    /// How long to measure each primitive and placement, after the warm-up (e.g. 2s).
    #[arg(short = 'D', long, default_value = "2s", value_parser = positive_duration, conflicts_with = "loops")]
    pub duration: Duration,
    /// Measure this many round trips per primitive and placement instead of a duration.
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u64).range(..=MAX_COUNT))]
    pub loops: Option<u64>,
    /// Warm-up before each primitive and placement, discarded.
    #[arg(long, default_value = "100ms", value_parser = any_duration)]
    pub warmup: Duration,
    /// Spin a SCHED_OTHER thread on each measured CPU (seed 001's "CPU load").
    #[arg(long)]
    pub cpu_load: bool,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

impl ProbeCommand for Args {
    type Params = PingpongParams;
    type Error = PingpongError;

    fn params(&self) -> Result<PingpongParams, ArgsError<PingpongError>> {
        let sched = sched_spec(&self.sched, Nanos::from_millis(1))?;
        if !sched.pin {
            return Err(UsageError::new(format!(
                "{} always pins its two threads (--placement says where): drop --no-pin",
                super::PROBE.name()
            ))
            .into());
        }
        let primitives = self.primitive.values(&Primitive::ALL);
        let placements = self.placement.values(&Placement::ALL);
        let params = PingpongParams {
            primitives,
            placements,
            length: match self.loops {
                Some(n) => Length::Count(n),
                None => Length::Duration(Nanos::from(self.duration)),
            },
            warmup: Nanos::from(self.warmup),
            sched,
            cpu_load: self.cpu_load,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &PingpongError) -> Option<&'static str> {
        match error {
            PingpongError::NoCpu
            | PingpongError::TooFewCpus { .. }
            | PingpongError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            PingpongError::ZeroLoops => Some("--loops"),
            PingpongError::ZeroDuration => Some("--duration"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &PingpongParams) -> (Duration, &'static str) {
        let points = params.points().len() as u32;
        let (expected, unit) = match params.length {
            // Same-CPU round trips take a few microseconds: assume 5 us for the estimate.
            Length::Count(n) => (
                times(
                    Duration::from_micros(5),
                    n.saturating_mul(u64::from(points)),
                ),
                "round trips",
            ),
            Length::Duration(d) => (times(Duration::from(d), u64::from(points)), "ms measured"),
        };
        let warmup = times(Duration::from(params.warmup), u64::from(points));
        (expected.saturating_add(warmup), unit)
    }
}
