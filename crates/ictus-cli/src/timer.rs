//! `ictus probe timer`: arguments to parameters, the run with its progress bar, and
//! its human view printed (`ictus_report::probes`).

use std::sync::Arc;
use std::time::Duration;

use ictus_core::Nanos;
use ictus_probe::progress::Progress;
use ictus_probe::setup::Length;
use ictus_probe::timer::{self, ModeRequest, TimerParams};

use crate::Failure;
use crate::args::TimerArgs;
use crate::common::{self, Bar};

/// Turns the command line into probe parameters, refusing what can never run.
pub(crate) fn params(args: &TimerArgs) -> Result<TimerParams, Failure> {
    let interval = Nanos::from(args.interval);
    let sched = common::sched_spec(&args.sched, interval)?;
    if args.margin.is_some() && !matches!(args.mode, ModeRequest::Hybrid { .. }) {
        return Err(Failure::usage(anyhow::anyhow!(
            "--margin applies only to --mode hybrid"
        )));
    }
    let params = TimerParams {
        interval,
        length: match args.loops {
            Some(n) => Length::Count(n),
            None => Length::Duration(Nanos::from(args.duration)),
        },
        sched,
        mode: match args.mode {
            ModeRequest::Hybrid { .. } => ModeRequest::Hybrid {
                margin: args.margin.map(Nanos::from),
            },
            other => other,
        },
        warmup: Nanos::from(args.warmup),
    };
    timer::validate(&params).map_err(crate::refusal::refused)?;
    if let Some(n) = args.loops {
        common::check_span("--loops", n, "--interval", args.interval)?;
    }
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &TimerArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    let expected = common::times(
        Duration::from(params.interval),
        params.loops().saturating_add(params.warmup_loops()),
    );
    let probe = || timer::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, "periods");
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
}
