//! `ictus run SCHEDULE`: runs a cyclic executive schedule, with a live status line,
//! and writes a RunRecord with per-subsystem statistics; `ictus ctl STATE`: commands
//! a running schedule.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ictus_core::Nanos;
use ictus_exec::run::{self as exec_run, LiveStatus, RunOptions};
use ictus_exec::schedule::Schedule;
use ictus_exec::tap::Sink;
use ictus_exec::tap::timeline::TraceSink;
use ictus_probe::progress::Progress;
use ictus_probe::session::Session;

use crate::Failure;
use crate::common;
use crate::hosts::{Security, join_hosts, security_for};
use crate::page::Pages;
use crate::replay::record_sink;
use crate::run_args::{CtlArgs, NodeArgs, PageAsk, RunArgs, RunCommon, token_env};
use crate::run_view::{ended, status_line};
use ictus_probe::cli::{OutputArgs, TraceArgs};

/// Loads the schedule; a malformed one is bad input (exit code 2), before anything starts.
fn load(path: &std::path::Path) -> Result<Schedule, Failure> {
    Schedule::from_file(path, &ictus_os::facts::online_cpus()).map_err(Failure::usage)
}

pub(crate) fn run(args: &RunArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let schedule = prepare(&args.schedule, args.tick, &args.common.out)?;
    let security = security_for(&schedule, 0, &args.common.trust)?;
    let how = How {
        here: 0,
        security,
        duration: args.duration,
        ready_timeout: args.ready_timeout,
        quiet: args.quiet,
        common: &args.common,
        page: PageAsk {
            ui: match args.ui {
                Some(addr) => Some((
                    addr,
                    match &args.ui_token_file {
                        Some(t) => Some(t.clone()),
                        None => token_env("ICTUS_UI_TOKEN")?,
                    },
                )),
                None => None,
            },
            ui_read: (
                match &args.ui_read_token_file {
                    Some(t) => Some(t.clone()),
                    None => token_env("ICTUS_UI_READ_TOKEN")?,
                },
                args.ui_open_loopback,
            ),
            metrics: match args.metrics {
                Some(addr) => Some((
                    addr,
                    match &args.metrics_token_file {
                        Some(t) => Some(t.clone()),
                        None => token_env("ICTUS_METRICS_TOKEN")?,
                    },
                )),
                None => None,
            },
        },
    };
    execute(schedule, &how, progress)
}

/// `ictus node SCHEDULE --host NAME`: this host's part of a schedule across hosts.
pub(crate) fn node(args: &NodeArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let schedule = prepare(&args.schedule, args.tick, &args.common.out)?;
    let here = schedule
        .hosts
        .iter()
        .position(|h| h.name == args.host)
        .ok_or_else(|| {
            let names: Vec<&str> = schedule.hosts.iter().map(|h| h.name.as_str()).collect();
            Failure::usage(anyhow::anyhow!(
                "--host {}: {} {}",
                args.host,
                args.schedule.display(),
                if names.is_empty() {
                    "has no host table ([[host]] name and address): it runs on one host, \
                     with `ictus run`"
                        .to_string()
                } else {
                    format!("names the hosts {}", names.join(", "))
                }
            ))
        })?;
    if here == 0 {
        return Err(Failure::usage(anyhow::anyhow!(
            "--host {}: the first host of the table is the main host: run \
             `ictus run {}` there",
            args.host,
            args.schedule.display()
        )));
    }
    let security = security_for(&schedule, here, &args.common.trust)?;
    let how = How {
        here,
        security,
        duration: None,
        ready_timeout: args.ready_timeout,
        quiet: args.quiet,
        common: &args.common,
        page: PageAsk::default(),
    };
    execute(schedule, &how, progress)
}

/// A schedule read and checked (with `--tick`) and an output that can be written,
/// before anything starts.
fn prepare(
    path: &std::path::Path,
    tick: Option<Duration>,
    out: &OutputArgs,
) -> Result<Schedule, Failure> {
    let mut schedule = load(path)?;
    if let Some(t) = tick {
        // Every rule a tick obeys in the file holds for --tick too (bounds, the
        // hybrid margin, the major frame), before anything starts.
        schedule.with_tick(Nanos::from(t)).map_err(|e| {
            Failure::usage(anyhow::Error::new(e).context(format!("--tick {}", Nanos::from(t))))
        })?;
    }
    // The cell table is checked here too, so a malformed one starts nothing.
    schedule.cell_table().map_err(Failure::usage)?;
    // So is the output: a run is never lost to a typo in `-o`.
    if let Some(path) = &out.output {
        ictus_os::fs::check_writable(path).map_err(Failure::usage)?;
    }
    Ok(schedule)
}

/// Which host runs, and how.
struct How<'a> {
    here: usize,
    security: Option<Security>,
    duration: Option<Duration>,
    ready_timeout: Duration,
    quiet: bool,
    /// What it watches, its timeline (`--trace`) and its record.
    common: &'a RunCommon,
    /// The live page and `/metrics`, as asked.
    page: PageAsk,
}

fn execute(mut schedule: Schedule, how: &How<'_>, progress: &Arc<Progress>) -> Result<(), Failure> {
    // The trace's path is only checked (nothing is created) before the
    // recording's file is.
    let mut sinks = Vec::new();
    let trace = trace_sink(&how.common.trace, &mut sinks)?;
    sinks.extend(record_sink(how.common.watch.record.as_deref())?);
    // A page this build cannot serve is refused before the link to the other hosts
    // opens: bad input changes nothing.
    Pages::check(&how.page)?;
    let mut session = Session::begin(std::env::args().collect(), false);
    // Joining keeps this thread off the real-time CPUs (its link's threads inherit
    // that); it gets its own affinity back once the run is over.
    let affinity_before = ictus_os::sched::current_affinity().ok();
    let link = join_hosts(&mut schedule, how.here, how.security.as_ref(), &mut session)?;
    let pages = Pages::start(&schedule, how.here, &how.page)?;
    let stop = Arc::new(AtomicBool::new(false));
    let show = !how.quiet && !how.common.out.json && std::io::stderr().is_terminal();
    let (flag, watch) = (Arc::clone(&stop), Arc::clone(progress));
    let mut publish = pages.publisher();
    let mut last_line = std::time::Instant::now();
    let options = RunOptions {
        duration: how.duration,
        stop: Arc::clone(&stop),
        on_status: Some(Box::new(move |s: &LiveStatus| {
            if watch.stop_requested() {
                // Relaxed: a stop request, polled by the coordinator.
                flag.store(true, Ordering::Relaxed);
            }
            publish(s);
            if show && last_line.elapsed() >= Duration::from_millis(100) {
                last_line = std::time::Instant::now();
                let _ =
                    std::io::stderr().write_all(format!("\r\x1b[2K{}", status_line(s)).as_bytes());
            }
        })),
        // The live page plots one point per jitter window (about 100 ms) and
        // /metrics observes each window's lateness once: sampled twice as often, so
        // no window is skipped.
        status_every: Duration::from_millis(if pages.any() { 50 } else { 100 }),
        ready_timeout: how.ready_timeout,
        // `process = "own"`: ictus hosts the builtin in a child of itself.
        host: std::env::current_exe()
            .ok()
            .map(|exe| (exe, vec!["subsystem".to_string()])),
        link,
        pm_qos: how.common.watch.pm_qos,
        explain: how.common.watch.explain.on(),
        explain_threshold: how.common.watch.explain_threshold.map(Nanos::from),
        sinks,
        ..RunOptions::default()
    };
    let result = exec_run::run(&schedule, &mut exec_run::builtin, options);
    if let Some(a) = affinity_before {
        let _ = ictus_os::sched::set_affinity(&a);
    }
    if show {
        let _ = std::io::stderr().write_all(b"\r\x1b[2K");
    }
    pages.end(&match &result {
        Ok(r) => ended(r),
        Err(e) => format!("the run failed: {e}"),
    });
    let report = match result {
        Ok(r) => r,
        Err(e) if e.is_bad_input() => return Err(Failure::usage(e)),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("running {}", schedule.path.display()))
                .into());
        }
    };
    tap_said(
        &report,
        trace.is_some() || how.common.watch.record.is_some(),
    );
    let record =
        ictus_exec::run_record::finish(session, &schedule, how.duration, &report, progress);
    common::emit(&record, &how.common.out, ictus_report::probes::terminal)?;
    clean(&report)
}

/// Whether the run was clean: no frame lost, no stop by an overrun, no message
/// refused, no frame's error; else the failure that says so (the record is written).
fn clean(report: &ictus_exec::report::RunReport) -> Result<(), Failure> {
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    if lost > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{lost} frame(s) were lost (see the events above); the record is written and marked incomplete"
            ),
        });
    }
    if let Some(by) = &report.stopped_by {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{by} overran and its on_overrun = \"stop-run\" stopped the run (see the warnings above); the record is written and marked incomplete"
            ),
        });
    }
    let refused: u64 = report
        .hosts
        .iter()
        .flat_map(|h| &h.refused)
        .map(|r| r.count)
        .sum();
    if refused > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{refused} message(s) from other hosts were refused (see the warnings above): \
                 nothing of them was copied, and the run is not clean"
            ),
        });
    }
    let errors: u64 = report.subsystems.iter().map(|s| s.errors).sum();
    if errors > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{errors} frame(s) returned an error (see the warnings above); the record is written and marked incomplete"
            ),
        });
    }
    Ok(())
}

/// `--trace`: the timeline sink pushed into `sinks`, its path refused before the
/// run starts when it cannot be written; the path, to say if nothing was written.
fn trace_sink(
    args: &TraceArgs,
    sinks: &mut Vec<Box<dyn Sink>>,
) -> Result<Option<PathBuf>, Failure> {
    let Some(spec) = args.spec().map_err(Failure::usage)? else {
        return Ok(None);
    };
    let sink = TraceSink::new(&spec.path, spec.cap_bytes).map_err(Failure::usage)?;
    sinks.push(Box::new(sink));
    Ok(Some(spec.path))
}

/// Says what the tap's sinks wrote (a line each: the recording, the trace), and
/// its shortfalls (a cap reached, records dropped, a sink stopped), also in a
/// quiet run: they are also among the report's warnings, so in the record.
fn tap_said(report: &ictus_exec::report::RunReport, asked: bool) {
    use ictus_core::warning::WarningId;
    match &report.tap {
        Some(tap) => {
            for line in &tap.written {
                eprintln!("{line}");
            }
            for w in report.warnings.iter().filter(|w| {
                matches!(
                    w.id,
                    WarningId::TraceCapped | WarningId::TapDropped | WarningId::TapSink
                )
            }) {
                eprintln!("warning: {}", w.message);
            }
            let dropped: u64 = tap.dropped.values().sum();
            if dropped > 0 {
                eprintln!(
                    "tap: {} records handed on, {dropped} dropped (see the warnings)",
                    tap.records
                );
            }
        }
        None if asked => {
            eprintln!(
                "tap: nothing was recorded or traced (the run ended before its epoch, or its recorder thread could not start)"
            );
        }
        None => {}
    }
}

/// `ictus run`'s exit code when the run ended but frames were lost (a subsystem
/// crashed, left the run, or was never released for part of it) or, across hosts,
/// something another host sent was refused, or a subsystem's `on_overrun =
/// "stop-run"` stopped it. (0: every frame
/// accounted for, run or overrun; 1: the run failed; 2: bad input, nothing ran.)
pub(crate) const EXIT_FRAMES_LOST: u8 = 3;

/// `ictus subsystem` (hidden): hosts the built-in subsystem that `ictus run`
/// launched this process for.
pub(crate) fn host() -> Result<(), Failure> {
    ictus_exec::child::run_builtin(&mut exec_run::builtin)
        .map(drop)
        .map_err(|e| anyhow::Error::new(e).into())
}

pub(crate) fn ctl(args: &CtlArgs) -> Result<(), Failure> {
    let line = ictus_exec::ctl::command_line(&args.command).map_err(Failure::usage)?;
    let socket = ictus_exec::ctl::find_run(args.name.as_deref()).map_err(Failure::usage)?;
    // No run there is one kind of failure whether a name was given or not: bad input,
    // as `find_run`'s "no run is active".
    let reply = ictus_exec::ctl::request(&socket, &line).map_err(|e| match e {
        e @ ictus_exec::ctl::CtlError::NotRunning { .. } => Failure::usage(e),
        e => e.into(),
    })?;
    if let Some(err) = reply.strip_prefix("error ") {
        return Err(Failure::usage(anyhow::anyhow!("{err}")));
    }
    crate::say(&(reply + "\n"))
}
