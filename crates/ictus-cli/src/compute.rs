//! `ictus probe compute`: computing power on a mass-interaction model (seed 000 Table 7).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::compute::{self, ComputeParams};
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs, positive_duration};

/// Options of `ictus probe compute`.
#[derive(Debug, Args)]
pub(crate) struct ComputeArgs {
    /// Model sizes (modules) of the one-thread sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "11,101,1001,10001,100001,1000001",
        value_parser = ictus_probe::cli::count_in(3, compute::MAX_MODULES, "modules")
    )]
    pub(crate) sizes: Vec<usize>,
    /// Model size (modules) split across threads.
    #[arg(long, default_value_t = 100_001, value_parser = ictus_probe::cli::count_in(3, compute::MAX_MODULES, "modules"))]
    pub(crate) split_modules: usize,
    /// Thread counts of the split (default: 1 to the number of CPUs).
    #[arg(short = 't', long, value_delimiter = ',', value_parser = ictus_probe::cli::count_in(1, ictus_probe::cli::MAX_THREADS, "threads"))]
    pub(crate) threads: Option<Vec<usize>>,
    /// Time spent on each point.
    #[arg(long, default_value = "200ms", value_parser = positive_duration)]
    pub(crate) point_time: Duration,
    /// A compute record (JSON) to express every figure against, as a time reduction.
    #[arg(long)]
    pub(crate) reference: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &ComputeArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let sched = common::sched_spec(&args.sched, Nanos::from_millis(1))?;
    let params = ComputeParams {
        threads: args
            .threads
            .clone()
            .unwrap_or_else(|| (1..=sched.cpus.len()).collect()),
        sched,
        sizes: args.sizes.clone(),
        split_modules: args.split_modules,
        point_time: Nanos::from(args.point_time),
    };
    compute::validate(&params).map_err(crate::refusal::refused)?;
    let reference = match &args.reference {
        Some(path) => {
            let r = RunRecord::load(path)
                .map_err(|e| Failure::usage(anyhow::Error::new(e).context("--reference")))?;
            compute::check_reference(&r).map_err(|e| {
                Failure::usage(anyhow::anyhow!("--reference {}: {e}", path.display()))
            })?;
            Some(r)
        }
        None => None,
    };
    let points = (params.sizes.len() + params.threads.len()) as u32;
    let expected = common::times(args.point_time, u64::from(points));
    let probe = || {
        compute::run(
            &params,
            std::env::args().collect(),
            reference.as_ref(),
            progress,
        )
    };
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
