//! `ictus probe compute` on the command line: its options, their parameters (with
//! the reference record read), and the work a progress bar counts.

use std::path::PathBuf;
use std::time::Duration;

use ictus_core::Nanos;

use super::{ComputeError, ComputeParams, MAX_MODULES};
use crate::cli::{
    ArgsError, MAX_THREADS, OutputArgs, ProbeCommand, RunFn, SchedArgs, UsageError, count_in,
    positive_duration, sched_spec, times,
};
use crate::record::RunRecord;

/// Computing power on a mass-interaction model, by size and split (seed 000 Table 7).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model sizes (modules) of the one-thread sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "11,101,1001,10001,100001,1000001",
        value_parser = count_in(3, MAX_MODULES, "modules")
    )]
    pub sizes: Vec<usize>,
    /// Model size (modules) split across threads.
    #[arg(long, default_value_t = 100_001, value_parser = count_in(3, MAX_MODULES, "modules"))]
    pub split_modules: usize,
    /// Thread counts of the split (default: 1 to the number of CPUs).
    #[arg(short = 't', long, value_delimiter = ',', value_parser = count_in(1, MAX_THREADS, "threads"))]
    pub threads: Option<Vec<usize>>,
    /// Time spent on each point.
    #[arg(long, default_value = "200ms", value_parser = positive_duration)]
    pub point_time: Duration,
    /// A compute record (JSON) to express every figure against, as a time reduction.
    #[arg(long)]
    pub reference: Option<PathBuf>,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

impl ProbeCommand for Args {
    /// The parameters, and the reference record `--reference` names.
    type Params = (ComputeParams, Option<RunRecord>);
    type Error = ComputeError;

    fn params(&self) -> Result<Self::Params, ArgsError<ComputeError>> {
        let sched = sched_spec(&self.sched, Nanos::from_millis(1))?;
        let params = ComputeParams {
            threads: self
                .threads
                .clone()
                .unwrap_or_else(|| (1..=sched.cpus.len()).collect()),
            sched,
            sizes: self.sizes.clone(),
            split_modules: self.split_modules,
            point_time: Nanos::from(self.point_time),
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        let reference = match &self.reference {
            Some(path) => {
                let r = RunRecord::load(path).map_err(|e| UsageError::caused("--reference", e))?;
                super::check_reference(&r)
                    .map_err(|e| UsageError::new(format!("--reference {}: {e}", path.display())))?;
                Some(r)
            }
            None => None,
        };
        Ok((params, reference))
    }

    fn refused_flag(error: &ComputeError) -> Option<&'static str> {
        match error {
            ComputeError::Threads { .. } => Some("--threads"),
            ComputeError::Reference { .. } => Some("--reference"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = |(params, reference), argv, progress| {
        super::run(params, argv, reference.as_ref(), progress)
    };

    fn work((params, _): &Self::Params) -> (Duration, &'static str) {
        let points = (params.sizes.len() + params.threads.len()) as u32;
        (
            times(Duration::from(params.point_time), u64::from(points)),
            "points",
        )
    }
}
