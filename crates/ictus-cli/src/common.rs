//! What every probe's command shares: scheduling options to a [`SchedSpec`], the
//! progress bar, the measurement with its loads, and writing the record or printing
//! its human view (the views and their footer live in `ictus_report`).

use std::sync::Arc;
use std::time::Duration;

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;
use ictus_os::sched::{Policy, PolicyKind};
use ictus_probe::load::UnderLoadsError;
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;
use ictus_probe::setup::SchedSpec;
use indicatif::{ProgressBar, ProgressStyle};

use crate::Failure;
use crate::args::{MAX_DURATION, OutputArgs, SchedArgs};

/// Parses a CPU list option (`flag` is `--cpus`, `--load-cpus`...): `all`, or a list
/// of online CPUs, at least one. Every refusal names the flag and its value: bad
/// input, exit 2.
pub(crate) fn cpus(flag: &str, text: &str) -> Result<CpuSet, Failure> {
    let refuse = |why: String| Failure::usage(anyhow::anyhow!("{flag} '{text}': {why}"));
    let online = facts::online_cpus();
    if text.trim() == "all" {
        return Ok(online);
    }
    let set = text.parse::<CpuSet>().map_err(|e| refuse(e.to_string()))?;
    if set.is_empty() {
        return Err(refuse(
            "no CPU given (expected a list like 0-3,6, or all)".into(),
        ));
    }
    if let Some(cpu) = set.cpus().iter().find(|&&c| !online.contains(c)) {
        return Err(refuse(format!(
            "CPU {cpu} is not online (online CPUs: {online})"
        )));
    }
    Ok(set)
}

/// The scheduling options as a [`SchedSpec`], every online CPU when `--cpus` is not
/// given. `period` sizes a deadline reservation (deadline and period equal it; runtime
/// `--dl-runtime`, by default a tenth).
pub(crate) fn sched_spec(args: &SchedArgs, period: Nanos) -> Result<SchedSpec, Failure> {
    sched_spec_or(args, period, facts::online_cpus)
}

/// [`sched_spec`] with the probe's own default CPUs when `--cpus` is not given.
pub(crate) fn sched_spec_or(
    args: &SchedArgs,
    period: Nanos,
    default_cpus: impl FnOnce() -> CpuSet,
) -> Result<SchedSpec, Failure> {
    let policy = match args.policy {
        PolicyKind::Other => Policy::Other { nice: args.nice },
        PolicyKind::Batch => Policy::Batch { nice: args.nice },
        PolicyKind::Idle => Policy::Idle,
        PolicyKind::Fifo => Policy::Fifo {
            priority: args.priority,
        },
        PolicyKind::Rr => Policy::Rr {
            priority: args.priority,
        },
        PolicyKind::Deadline => {
            let runtime = args
                .dl_runtime
                .map(Nanos::from)
                .unwrap_or(Nanos::new(period.as_u64() / 10));
            if runtime > period {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--dl-runtime {runtime} is longer than the period {period}"
                )));
            }
            Policy::Deadline {
                runtime_ns: runtime.as_u64(),
                deadline_ns: period.as_u64(),
                period_ns: period.as_u64(),
            }
        }
    };
    let cpus = match &args.cpus {
        Some(text) => cpus("--cpus", text)?,
        None => default_cpus(),
    };
    Ok(SchedSpec {
        cpus,
        pin: !args.no_pin,
        policy,
        mlock: args.mlock,
        pm_qos: args.pm_qos,
        explain: args.explain.on(),
        explain_threshold: args.explain_threshold.map(Nanos::from),
    })
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

/// Refuses `count` periods of `period` lasting over [`MAX_DURATION`]: deadlines that far
/// out would overflow the clock arithmetic. Bad input: exit 2.
pub(crate) fn check_span(
    count_flag: &str,
    count: u64,
    period_flag: &str,
    period: Duration,
) -> Result<(), Failure> {
    if period.as_nanos() * u128::from(count) > MAX_DURATION.as_nanos() {
        return Err(Failure::usage(anyhow::anyhow!(
            "{count_flag} {count} times {period_flag} of {} is longer than the {} limit of a run",
            humantime::format_duration(period),
            humantime::format_duration(MAX_DURATION)
        )));
    }
    Ok(())
}

/// `d` times `n`, saturating: for estimates of how long a run takes (the progress
/// bar), which must never overflow whatever the counts.
pub(crate) fn times(d: Duration, n: u64) -> Duration {
    Duration::from_nanos(
        u64::try_from(d.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_mul(n),
    )
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

// What every human view ends with, and the run view's (run.rs) microseconds: they
// live in ictus_report::terminal.
pub(crate) use ictus_report::terminal::{footer, micros};
