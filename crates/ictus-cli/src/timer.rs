//! `ictus probe timer`: arguments to parameters, the run with its progress bar, and
//! the human view of the record.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::progress::Progress;
use ictus_probe::record::RunRecord;
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
    common::measure(bar, progress, &args.sched, &args.out, probe, render)
}

/// The human view: configuration, one row per thread and the merged row.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<timer::RecordedParams>();
    let _ = writeln!(
        out,
        "timer: {} thread(s), interval {}, {} periods each, mode {}{}",
        record.threads.len(),
        Nanos::new(p.as_ref().and_then(|p| p.interval_ns()).unwrap_or(0)),
        p.as_ref().and_then(|p| p.loops()).unwrap_or(0),
        p.as_ref().map_or("?", |p| p.mode()),
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    let _ = writeln!(out, "wake-up latency in microseconds:");
    let mut table = common::table();
    let mut header = vec!["thread", "policy"];
    header.extend(common::latency_header());
    table.set_header(header);
    for t in &record.threads {
        let name = match t.config.pinned_cpu {
            Some(cpu) => format!("CPU {cpu}"),
            None => format!("#{} (unpinned)", t.thread),
        };
        let mut row = vec![Cell::new(name), Cell::new(t.config.policy.to_string())];
        row.extend(common::latency_cells(&t.latency));
        table.add_row(row);
    }
    if let Some(merged) = record.merged.as_ref().filter(|_| record.threads.len() > 1) {
        let mut row = vec![Cell::new("all"), Cell::new("")];
        row.extend(common::latency_cells(merged));
        table.add_row(row);
    }
    common::right_align(&mut table, 2);
    let _ = writeln!(out, "{table}");
    for t in &record.threads {
        let s = &t.latency.summary;
        let _ = write!(
            out,
            "thread {}: stddev {}, max at sample #{}",
            t.thread,
            common::fmt(s.stddev_ns.map(|m| Nanos::new(m.round() as u64))),
            t.latency.max_index.map_or("-".into(), |i| i.to_string()),
        );
        if let Some(m) = t.config.hybrid_margin_ns {
            let _ = write!(out, ", hybrid margin {}", Nanos::new(m));
        }
        let _ = writeln!(out);
    }
    if let Some(note) = common::thin_note(record.threads.iter().map(|t| &t.latency)) {
        let _ = writeln!(out, "{note}");
    }
    out
}
