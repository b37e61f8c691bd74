//! `ictus probe jitter`: execution-time variation of a fixed routine.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;
use ictus_probe::jitter::{self, JitterParams, Routine};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs};

/// Options of `ictus probe jitter`.
#[derive(Debug, Args)]
pub(crate) struct JitterArgs {
    /// Integer divisions per run (seed 002: one million).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) work: u64,
    /// Timed runs per thread.
    #[arg(short = 'n', long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) runs: u64,
    /// Run the synchronised kernel instead (seed 000 Figure 3): this many threads on the
    /// first CPUs of --cpus compute y = a x + y on their own data and meet at a spin
    /// rendezvous every step.
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    pub(crate) threads: Option<u64>,
    /// Elements (f64) per thread for the synchronised kernel.
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) elements: u64,
    /// Untimed runs first.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) warmup_runs: u64,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// The command line as probe parameters. Without `--cpus`: the last online CPU (the
/// divisions) or every online CPU (the synchronised kernel).
pub(crate) fn params(args: &JitterArgs) -> Result<JitterParams, Failure> {
    let mut sched = common::sched_spec_or(&args.sched, Nanos::from_millis(10), || {
        let online = facts::online_cpus();
        match args.threads {
            Some(_) => online,
            None => CpuSet::from_cpus(online.cpus().last().copied()),
        }
    })?;
    let routine = match args.threads {
        None => Routine::Divisions {
            divisions: args.work,
        },
        Some(k) => {
            let k = k as usize;
            if sched.cpus.len() < k {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--threads {k} needs {k} CPUs, --cpus gives {} ({})",
                    sched.cpus.len(),
                    sched.cpus
                )));
            }
            sched.cpus = CpuSet::from_cpus(sched.cpus.cpus()[..k].iter().copied());
            Routine::Synchronised {
                elements: args.elements as usize,
            }
        }
    };
    let params = JitterParams {
        sched,
        routine,
        runs: args.runs,
        warmup_runs: args.warmup_runs,
    };
    jitter::validate(&params).map_err(crate::refusal::refused)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &JitterArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    // About 2.5 ns per division here; the bar appears for runs expected over 2 s.
    let expected = match params.routine {
        Routine::Divisions { divisions } => common::times(
            Duration::from_nanos(2),
            divisions.saturating_mul(params.runs),
        ),
        Routine::Synchronised { elements } => common::times(
            Duration::from_nanos(1),
            (elements as u64).saturating_mul(params.runs),
        ),
    };
    let probe = || jitter::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, "runs");
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
}
