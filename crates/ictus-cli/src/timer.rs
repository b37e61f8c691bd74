//! `ictus probe timer`: arguments to parameters, the run with its progress bar, and
//! the human view of the record.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use comfy_table::{Cell, CellAlignment, Table, presets};
use ictus_core::{CpuSet, Nanos, Percentile};
use ictus_os::facts;
use ictus_os::sched::Policy;
use ictus_probe::progress::Progress;
use ictus_probe::record::{LatencyResult, RunRecord};
use ictus_probe::timer::{self, Length, ModeRequest, TimerParams};
use indicatif::{ProgressBar, ProgressStyle};

use crate::Failure;
use crate::args::{ModeArg, PolicyArg, TimerArgs};

/// Turns the command line into probe parameters, refusing what can never run.
pub(crate) fn params(args: &TimerArgs) -> Result<TimerParams, Failure> {
    let interval = Nanos::from(args.interval);
    let cpus = if args.cpus.trim() == "all" {
        facts::online_cpus()
    } else {
        args.cpus
            .parse::<CpuSet>()
            .map_err(|e| Failure::usage(anyhow::anyhow!("--cpus {}: {e}", args.cpus)))?
    };
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
                .unwrap_or(Nanos::new(interval.as_u64() / 10));
            if runtime > interval {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--dl-runtime {} is longer than the interval {interval}",
                    Nanos::from(args.dl_runtime.unwrap_or_default())
                )));
            }
            Policy::Deadline {
                runtime_ns: runtime.as_u64(),
                deadline_ns: interval.as_u64(),
                period_ns: interval.as_u64(),
            }
        }
    };
    if args.margin.is_some() && args.mode != ModeArg::Hybrid {
        return Err(Failure::usage(anyhow::anyhow!(
            "--margin applies only to --mode hybrid"
        )));
    }
    let params = TimerParams {
        interval,
        length: match args.loops {
            Some(n) => Length::Loops(n),
            None => Length::Duration(Nanos::from(args.duration)),
        },
        cpus,
        pin: !args.no_pin,
        policy,
        mlock: args.mlock,
        mode: match args.mode {
            ModeArg::Nanosleep => ModeRequest::Nanosleep,
            ModeArg::Spin => ModeRequest::Spin,
            ModeArg::Hybrid => ModeRequest::Hybrid {
                margin: args.margin.map(Nanos::from),
            },
        },
        warmup: Nanos::from(args.warmup),
    };
    timer::validate(&params).map_err(Failure::usage)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &TimerArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let params = params(args)?;
    let expected = Duration::from(params.interval * (params.loops() + params.warmup_loops()));
    let bar = (!args.json && expected > Duration::from_secs(2)).then(|| watch(progress));
    let record = timer::run(&params, std::env::args().collect(), progress);
    if let Some(bar) = bar {
        progress.finish();
        let _ = bar.join();
    }
    let record = record.context("timer probe")?;
    if let Some(path) = &args.output {
        let json = serde_json::to_string_pretty(&record)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("writing the record to {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        print!("{}", render(&record));
    }
    Ok(())
}

/// Draws a progress bar on stderr (hidden when stderr is not a terminal).
fn watch(progress: &Arc<Progress>) -> std::thread::JoinHandle<()> {
    let progress = progress.clone();
    std::thread::spawn(move || {
        let bar = ProgressBar::new(progress.total().max(1));
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed:>4} [{wide_bar}] {percent:>3}% periods, {eta} left",
            )
            .expect("constant template")
            .progress_chars("=> "),
        );
        while !progress.is_finished() {
            bar.set_length(progress.total().max(1));
            bar.set_position(progress.done());
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    })
}

/// The human view: configuration, one row per thread and the merged row, notes,
/// warnings.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = &record.parameters;
    let _ = writeln!(
        out,
        "timer: {} thread(s), interval {}, {} periods each, mode {}{}",
        record.threads.len(),
        Nanos::new(p["interval_ns"].as_u64().unwrap_or(0)),
        p["loops"].as_u64().unwrap_or(0),
        p["mode"].as_str().unwrap_or("?"),
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    if !record.complete {
        let _ = writeln!(
            out,
            "INCOMPLETE: stopped early; figures cover the periods that ran."
        );
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    let mut header = vec!["thread", "policy", "count", "min", "mean"];
    header.extend(Percentile::ALL.iter().map(|p| p.label()));
    header.extend(["max", "missed (run)"]);
    let _ = writeln!(out, "wake-up latency in microseconds:");
    table.set_header(header);
    for t in &record.threads {
        let name = match t.config.pinned_cpu {
            Some(cpu) => format!("CPU {cpu}"),
            None => format!("#{} (unpinned)", t.thread),
        };
        table.add_row(row(&name, &t.config.policy.to_string(), &t.latency));
    }
    if record.threads.len() > 1 {
        table.add_row(row("all", "", &record.merged));
    }
    for col in 2..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}");
    for t in &record.threads {
        let s = &t.latency.summary;
        let _ = write!(
            out,
            "thread {}: stddev {}, max at sample #{}",
            t.thread,
            fmt(s.stddev_ns.map(|m| Nanos::new(m.round() as u64))),
            t.latency.max_index.map_or("-".into(), |i| i.to_string()),
        );
        if let Some(m) = t.config.hybrid_margin_ns {
            let _ = write!(out, ", hybrid margin {}", Nanos::new(m));
        }
        let _ = writeln!(out);
    }
    let thin = &record.merged.thin_percentiles;
    if !thin.is_empty()
        || record
            .threads
            .iter()
            .any(|t| !t.latency.thin_percentiles.is_empty())
    {
        let _ = writeln!(
            out,
            "~ marks a percentile that too few samples support (p99.99 needs 10,000, p99.999 100,000)."
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
    for w in &record.warnings {
        let _ = writeln!(out, "warning: {}", w.message);
        if let Some(a) = &w.advice {
            let _ = writeln!(out, "  advice: {a}");
        }
    }
    out
}

fn fmt(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// A latency in microseconds with 0.1 us resolution, as the table shows it.
fn micros(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| format!("{:.1}", n.as_micros_f64()))
}

fn row(name: &str, policy: &str, r: &LatencyResult) -> Vec<Cell> {
    let s = &r.summary;
    let mut cells = vec![
        Cell::new(name),
        Cell::new(policy),
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
