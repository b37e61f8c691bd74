//! What every probe's command shares (its arguments are `ictus_probe::cli`'s): the
//! progress bar, the measurement with its loads, and writing the record or printing
//! its human view (the views and their footer live in `ictus_report`).

use std::sync::Arc;
use std::time::Duration;

use ictus_core::CpuSet;
use ictus_os::facts;
use ictus_probe::cli::{OutputArgs, SchedArgs};
use ictus_probe::load::UnderLoadsError;
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;
use indicatif::{ProgressBar, ProgressStyle};

use crate::Failure;

/// Parses a CPU list option (see [`ictus_probe::cli::cpus`]): bad input, exit 2.
pub(crate) fn cpus(flag: &str, text: &str) -> Result<CpuSet, Failure> {
    ictus_probe::cli::cpus(flag, text).map_err(Failure::usage)
}

/// Runs `probe` under the loads `--load` names (none: just runs it), then stops them
/// and puts what each achieved into the record. A load that cannot start is bad input
/// and nothing runs; the loads stop on every path (their `Drop` joins them).
pub(crate) fn with_loads<E>(
    args: &SchedArgs,
    probe: impl FnOnce() -> Result<RunRecord, E>,
) -> Result<RunRecord, Failure>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let specs = if args.loads.is_empty() {
        Vec::new()
    } else {
        let cpus = match &args.load_cpus {
            Some(text) => cpus("--load-cpus", text)?,
            None => facts::online_cpus(),
        };
        crate::load::kinds_on(&args.loads, cpus)?
    };
    ictus_probe::load::under_loads(&specs, probe).map_err(|e| match e {
        UnderLoadsError::Start(e) => anyhow::Error::new(e).context("starting the loads").into(),
        UnderLoadsError::Probe(e) => anyhow::Error::new(e).into(),
    })
}

/// Draws a progress bar on stderr from `progress` until the probe finishes, when the
/// run is expected to last over two seconds and the record is not going to stdout.
/// Hidden automatically when stderr is not a terminal.
pub(crate) struct Bar(Option<std::thread::JoinHandle<()>>);

impl Bar {
    /// Starts drawing (or not: see the type's documentation).
    pub(crate) fn start(
        progress: &Arc<Progress>,
        expected: Duration,
        out: &OutputArgs,
        unit: &str,
    ) -> Self {
        if out.json || expected <= Duration::from_secs(2) {
            return Bar(None);
        }
        let progress = progress.clone();
        let template =
            format!("{{elapsed:>4}} [{{wide_bar}}] {{percent:>3}}% {unit}, {{eta}} left");
        Bar(Some(std::thread::spawn(move || {
            let bar = ProgressBar::new(progress.total().max(1));
            bar.set_style(
                ProgressStyle::with_template(&template)
                    .expect("constant template")
                    .progress_chars("=> "),
            );
            while !progress.is_finished() {
                bar.set_length(progress.total().max(1));
                bar.set_position(progress.done());
                bar.set_message(progress.label());
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        })))
    }

    /// Waits for the bar to clear (call after the probe returned).
    pub(crate) fn done(self, progress: &Progress) {
        progress.finish();
        if let Some(h) = self.0 {
            let _ = h.join();
        }
    }
}

/// Runs `probe` under the loads `sched` names (see [`with_loads`]) while `bar` draws,
/// then writes its record where `out` says, with `render` for the human view (see
/// [`emit`]).
pub(crate) fn measure<E>(
    bar: Bar,
    progress: &Progress,
    sched: &SchedArgs,
    out: &OutputArgs,
    probe: impl FnOnce() -> Result<RunRecord, E>,
    render: impl FnOnce(&RunRecord) -> String,
) -> Result<(), Failure>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let record = with_loads(sched, probe);
    bar.done(progress);
    let record = record?;
    emit(&record, out, render)
}

/// Refuses, before anything runs, an output path that could not be written: a
/// directory, a missing directory, no permission. Bad input: exit 2.
pub(crate) fn check_output(path: &std::path::Path) -> Result<(), Failure> {
    ictus_os::fs::check_writable(path).map_err(Failure::usage)
}

/// Refuses `out`'s `-o` path before the measurement starts (see [`check_output`]).
pub(crate) fn check_outputs(out: &OutputArgs) -> Result<(), Failure> {
    match &out.output {
        Some(path) => check_output(path),
        None => Ok(()),
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub(crate) fn write_output(path: &std::path::Path, bytes: impl AsRef<[u8]>) -> Result<(), Failure> {
    Ok(ictus_os::fs::write_atomic(path, bytes)?)
}

/// Writes the record where `out` says, or its human view on stdout.
pub(crate) fn emit(
    record: &RunRecord,
    out: &OutputArgs,
    render: impl FnOnce(&RunRecord) -> String,
) -> Result<(), Failure> {
    if let Some(path) = &out.output {
        let json = serde_json::to_string_pretty(record)?;
        write_output(path, json + "\n")?;
    }
    if out.json {
        crate::say(&(serde_json::to_string_pretty(record)? + "\n"))?;
    } else {
        crate::say(&(render(record) + &footer(record)))?;
    }
    Ok(())
}

// What every human view ends with: it lives in ictus_report::terminal.
use ictus_report::terminal::footer;
