//! What every probe's command shares: scheduling options to a [`SchedSpec`], the
//! progress bar, the measurement with its loads, writing the record, and the tables,
//! headline and footer of the human views.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use comfy_table::{Cell, CellAlignment, Table, presets};
use ictus_core::{CpuSet, Nanos, Percentile};
use ictus_os::facts;
use ictus_os::sched::Policy;
use ictus_probe::load::UnderLoadsError;
use ictus_probe::progress::Progress;
use ictus_probe::record::{LatencyResult, RunRecord};
use ictus_probe::setup::SchedSpec;
use indicatif::{ProgressBar, ProgressStyle};

use crate::Failure;
use crate::args::{MAX_DURATION, OutputArgs, PolicyArg, SchedArgs};

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
        PolicyArg::Other => Policy::Other { nice: args.nice },
        PolicyArg::Batch => Policy::Batch { nice: args.nice },
        PolicyArg::Idle => Policy::Idle,
        PolicyArg::Fifo => Policy::Fifo {
            priority: args.priority,
        },
        PolicyArg::Rr => Policy::Rr {
            priority: args.priority,
        },
        PolicyArg::Deadline => {
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

/// What most human views begin with: the record's headline on a line of its own, when
/// it has one.
pub(crate) fn headline(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// An empty table in the style of every human view: horizontal rules only.
pub(crate) fn table() -> Table {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table
}

/// Aligns the columns of `table` from `from` on to the right (where the numbers are).
pub(crate) fn right_align(table: &mut Table, from: usize) {
    for col in from..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// What every human view ends with: incompleteness, steal time, the clock, warnings.
pub(crate) fn footer(record: &RunRecord) -> String {
    let mut out = String::new();
    if !record.complete {
        let _ = writeln!(
            out,
            "INCOMPLETE: stopped early; the figures cover what ran."
        );
    }
    for l in &record.environment.loads {
        let figures: Vec<String> = l
            .metrics
            .iter()
            .map(|(k, v)| format!("{k} {v:.3e}"))
            .collect();
        let _ = writeln!(
            out,
            "load {} on CPUs {} ({} workers): {}",
            l.kind.name(),
            l.cpus,
            l.workers,
            figures.join(", ")
        );
    }
    if let Some(steal) = &record.environment.steal {
        let _ = writeln!(
            out,
            "steal time during the run: {} ({:.3} % of all CPUs)",
            Nanos::new(steal.total_ns),
            steal.share * 100.0
        );
    }
    if let Some(clock) = &record.environment.clock {
        let _ = writeln!(
            out,
            "clock: {} (resolution {}), a read costs {} (p50), {} (max of {})",
            clock
                .clocksource
                .as_deref()
                .unwrap_or("unknown clocksource"),
            fmt(clock.resolution_ns.map(Nanos::new)),
            fmt(clock.read_cost.p50_ns),
            fmt(clock.read_cost.max_ns),
            clock.read_cost.count
        );
    }
    if let Some(q) = &record.obtained.pm_qos {
        let _ = writeln!(
            out,
            "CPU latency QoS (/dev/cpu_dma_latency): {}",
            q.phrase()
        );
    }
    if let Some(e) = &record.explanation {
        out.push_str(&why_the_misses(e, 10));
    }
    for w in &record.warnings {
        let _ = writeln!(out, "warning: {}", w.message);
        if let Some(a) = &w.advice {
            let _ = writeln!(out, "  advice: {a}");
        }
    }
    out
}

/// The "why the misses" section: the breakdown, then the first `listed` explained
/// misses, then how the sampler ran.
pub(crate) fn why_the_misses(e: &ictus_os::explain::Explanation, listed: usize) -> String {
    let mut out = String::new();
    // Overruns are counted where the measuring loop has a budget (the executive's
    // subsystems), so they are named only where they occur.
    let overruns = e
        .events
        .iter()
        .any(|ev| ev.kind == ictus_os::explain::MissKind::Overrun);
    let _ = writeln!(
        out,
        "why the misses (releases {} or more late, missed periods{}): {}",
        Nanos::new(e.threshold_ns),
        if overruns { ", overruns" } else { "" },
        e.breakdown.summary()
    );
    for ev in e.events.iter().take(listed) {
        let _ = writeln!(out, "  {ev}");
    }
    let more = (e.events.len().saturating_sub(listed)) as u64 + e.events_not_kept;
    if more > 0 {
        let _ = writeln!(out, "  ... and {more} more (all in the record)");
    }
    let s = &e.sampler;
    let _ = writeln!(
        out,
        "  sampler: every {} on CPU(s) {}{}, {} readings (mean {}, max {}), {} thread scans",
        Nanos::new(s.period_ns),
        s.cpus,
        if s.shares_watched_cpu {
            " (shared with the measured threads)"
        } else {
            ""
        },
        s.samples,
        Nanos::new(s.reading_mean_ns),
        Nanos::new(s.reading_max_ns),
        s.task_scans
    );
    out
}

/// A time with its unit, or `-`.
pub(crate) fn fmt(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// A latency in microseconds with 0.1 us resolution, or `-`.
pub(crate) fn micros(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| format!("{:.1}", n.as_micros_f64()))
}

/// The header cells of a latency row (after the caller's own leading columns).
pub(crate) fn latency_header() -> Vec<&'static str> {
    let mut header = vec!["count", "min", "mean"];
    header.extend(Percentile::ALL.iter().map(|p| p.label()));
    header.extend(["max", "missed (run)"]);
    header
}

/// A latency row in microseconds; percentiles too few samples support are marked `~`.
pub(crate) fn latency_cells(r: &LatencyResult) -> Vec<Cell> {
    let s = &r.summary;
    let mut cells = vec![
        Cell::new(s.count),
        Cell::new(micros(s.min_ns)),
        Cell::new(micros(s.mean_ns.map(|m| Nanos::new(m.round() as u64)))),
    ];
    for p in Percentile::ALL {
        let mut v = micros(s.percentile(p));
        if !s.supports(p) {
            v.insert(0, '~');
        }
        cells.push(Cell::new(v));
    }
    cells.push(Cell::new(micros(s.max_ns)));
    cells.push(Cell::new(format!("{} ({})", r.missed, r.longest_miss_run)));
    cells
}

/// [`latency_header`] without the missed column, for what has no periods to miss.
pub(crate) fn latency_header_without_missed() -> Vec<&'static str> {
    let mut header = latency_header();
    header.pop();
    header
}

/// [`latency_cells`] without the missed column, for what has no periods to miss.
pub(crate) fn latency_cells_without_missed(r: &LatencyResult) -> Vec<Cell> {
    let mut cells = latency_cells(r);
    cells.pop();
    cells
}

/// The note explaining `~`, when any result in `results` has thin percentiles.
pub(crate) fn thin_note<'a>(
    results: impl IntoIterator<Item = &'a LatencyResult>,
) -> Option<&'static str> {
    results
        .into_iter()
        .any(|r| !r.thin_percentiles.is_empty())
        .then_some("~ marks a percentile that too few samples support (p99.99 needs 10,000, p99.999 100,000).")
}
