//! `ictus probe jitter` on the command line: its options, their parameters, and the
//! work a progress bar counts.

use std::time::Duration;

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;

use super::{JitterError, JitterParams, Routine};
use crate::cli::{
    ArgsError, MAX_COUNT, OutputArgs, ProbeCommand, RunFn, SchedArgs, UsageError, sched_spec_or,
    times,
};

/// Execution-time variation of a fixed routine (seed 002 Table 2, seed 000 Fig. 3).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Integer divisions per run (seed 002: one million).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub work: u64,
    /// Timed runs per thread.
    #[arg(short = 'n', long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub runs: u64,
    /// Run the synchronised kernel instead (seed 000 Figure 3): this many threads on the
    /// first CPUs of --cpus compute y = a x + y on their own data and meet at a spin
    /// rendezvous every step.
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    pub threads: Option<u64>,
    /// Elements (f64) per thread for the synchronised kernel.
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub elements: u64,
    /// Untimed runs first.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(..=MAX_COUNT))]
    pub warmup_runs: u64,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

impl ProbeCommand for Args {
    type Params = JitterParams;
    type Error = JitterError;

    /// Without `--cpus`: the last online CPU (the divisions) or every online CPU (the
    /// synchronised kernel).
    fn params(&self) -> Result<JitterParams, ArgsError<JitterError>> {
        let mut sched = sched_spec_or(&self.sched, Nanos::from_millis(10), || {
            let online = facts::online_cpus();
            match self.threads {
                Some(_) => online,
                None => CpuSet::from_cpus(online.cpus().last().copied()),
            }
        })?;
        let routine = match self.threads {
            None => Routine::Divisions {
                divisions: self.work,
            },
            Some(k) => {
                let k = k as usize;
                if sched.cpus.len() < k {
                    return Err(UsageError::new(format!(
                        "--threads {k} needs {k} CPUs, --cpus gives {} ({})",
                        sched.cpus.len(),
                        sched.cpus
                    ))
                    .into());
                }
                sched.cpus = CpuSet::from_cpus(sched.cpus.cpus()[..k].iter().copied());
                Routine::Synchronised {
                    elements: self.elements as usize,
                }
            }
        };
        let params = JitterParams {
            sched,
            routine,
            runs: self.runs,
            warmup_runs: self.warmup_runs,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &JitterError) -> Option<&'static str> {
        match error {
            JitterError::TooLarge { .. } => Some("--elements"),
            JitterError::NoCpu => Some("--cpus"),
            JitterError::TooFewThreads(_) => Some("--threads"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &JitterParams) -> (Duration, &'static str) {
        // About 2.5 ns per division here; the bar appears for runs expected over 2 s.
        let expected = match params.routine {
            Routine::Divisions { divisions } => times(
                Duration::from_nanos(2),
                divisions.saturating_mul(params.runs),
            ),
            Routine::Synchronised { elements } => times(
                Duration::from_nanos(1),
                (elements as u64).saturating_mul(params.runs),
            ),
        };
        (expected, "runs")
    }
}
