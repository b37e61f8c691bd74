//! `ictus probe timer` on the command line: its options, their parameters, and the
//! work a progress bar counts.

use std::time::Duration;

use ictus_core::Nanos;

use super::{ModeRequest, TimerError, TimerParams};
use crate::cli::{
    ArgsError, MAX_COUNT, OutputArgs, ProbeCommand, RunFn, SchedArgs, any_duration, check_span,
    interval, positive_duration, sched_spec, times,
};
use crate::setup::Length;
use crate::setup::PlacementError;

/// Timer wake-up latency (what cyclictest measures), counting missed periods.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Period between wake-ups (e.g. 1ms, 100us).
    #[arg(short, long, default_value = "1ms", value_parser = interval)]
    pub interval: Duration,
    /// How long to measure, after the warm-up (e.g. 10s, 2m).
    #[arg(short = 'D', long, default_value = "10s", value_parser = positive_duration, conflicts_with = "loops")]
    pub duration: Duration,
    /// Measure this many periods per thread instead of a duration.
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub loops: Option<u64>,
    #[command(flatten)]
    sched: SchedArgs,
    /// How to wait for each deadline.
    #[arg(long, value_enum, default_value = "nanosleep")]
    pub mode: ModeRequest,
    /// Hybrid mode: spin for this long before each deadline (default: calibrated from
    /// the measured wake-up latency).
    #[arg(long, value_parser = any_duration)]
    pub margin: Option<Duration>,
    /// Warm-up before measuring, discarded.
    #[arg(long, default_value = "100ms", value_parser = any_duration)]
    pub warmup: Duration,
    #[command(flatten)]
    out: OutputArgs,
}

impl ProbeCommand for Args {
    type Params = TimerParams;
    type Error = TimerError;

    fn params(&self) -> Result<TimerParams, ArgsError<TimerError>> {
        let interval = Nanos::from(self.interval);
        let sched = sched_spec(&self.sched, interval)?;
        if self.margin.is_some() && !matches!(self.mode, ModeRequest::Hybrid { .. }) {
            return Err(
                crate::cli::UsageError::new("--margin applies only to --mode hybrid").into(),
            );
        }
        let params = TimerParams {
            interval,
            length: match self.loops {
                Some(n) => Length::Count(n),
                None => Length::Duration(Nanos::from(self.duration)),
            },
            sched,
            mode: match self.mode {
                ModeRequest::Hybrid { .. } => ModeRequest::Hybrid {
                    margin: self.margin.map(Nanos::from),
                },
                other => other,
            },
            warmup: Nanos::from(self.warmup),
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        if let Some(n) = self.loops {
            check_span("--loops", n, "--interval", self.interval)?;
        }
        Ok(params)
    }

    fn refused_flag(error: &TimerError) -> Option<&'static str> {
        match error {
            TimerError::ZeroInterval => Some("--interval"),
            TimerError::NoCpu | TimerError::Setup(PlacementError::CpuOffline { .. }) => {
                Some("--cpus")
            }
            TimerError::TooShort { .. } => Some("--duration"),
            TimerError::Margin { .. } => Some("--margin"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &TimerParams) -> (Duration, &'static str) {
        let expected = times(
            Duration::from(params.interval),
            params.loops().saturating_add(params.warmup_loops()),
        );
        (expected, "periods")
    }
}
