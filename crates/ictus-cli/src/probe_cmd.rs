//! `ictus probe <probe>`: every probe run the same way through its
//! [`ProbeCommand`] (its folder's `cli::Args`): outputs checked, arguments to
//! parameters, the run under its loads with a progress bar, and the human view
//! printed (`ictus_report::probes`).

use std::sync::Arc;

use ictus_probe::cli::{ArgsError, ProbeCommand};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::args::ProbeCommand as Command;
use crate::common::{self, Bar};
use crate::refusal::refused;

/// Runs the probe `args` names and prints its record.
pub(crate) fn run<A: ProbeCommand>(args: &A, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(args.out())?;
    let params = args.params().map_err(|e| match e {
        ArgsError::Usage(e) => Failure::usage(e),
        ArgsError::Refused(e) => {
            let flag = A::refused_flag(&e);
            refused(e, flag)
        }
    })?;
    let (expected, unit) = A::work(&params);
    let probe = || A::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, args.out(), unit);
    match args.sched() {
        Some(sched) => common::measure(
            bar,
            progress,
            sched,
            args.out(),
            probe,
            ictus_report::probes::terminal,
        ),
        // No scheduling options, so no loads: the probe runs alone.
        None => {
            let record = probe();
            bar.done(progress);
            let record = record.map_err(anyhow::Error::new)?;
            common::emit(&record, args.out(), ictus_report::probes::terminal)
        }
    }
}

/// The dispatch over [`Command`], generated from the registry like the enum: each
/// probe runs through [`run`].
macro_rules! dispatch {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        /// Runs the probe `command` names and prints its record.
        pub(crate) fn dispatch(command: &Command, progress: &Arc<Progress>) -> Result<(), Failure> {
            match command {
                $(Command::$variant(args) => run(args, progress),)*
            }
        }
    };
}

ictus_probe::for_each_probe!(dispatch);
