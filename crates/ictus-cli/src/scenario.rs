//! `ictus scenario FILE.toml`: the load-balancer tester (seed 002 §5.3.1, `lbμ`).
//! Runs a scenario's fake tasks under stock Linux placement, the ictus balancer, or
//! both one after the other, and writes `result.json`, `report.md` and
//! `timeline.svg` (with both: one directory per placement and `compare.md`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use comfy_table::CellAlignment;
use ictus_probe::progress::Progress;
use ictus_report::scenario as report;
use ictus_shield::scenario::run::{GroupStats, ScenarioResult};
use ictus_shield::scenario::{self, BalancerMode, Scenario, ScenarioOptions, WatchFlow, spec};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{Failure, say};

/// Placements on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum BalancerArg {
    /// Stock Linux placement: tasks keep their group's CPUs.
    None,
    /// The ictus balancer places the movable tasks.
    Ictus,
    /// Both, one after the other, then the two side by side.
    Both,
}

/// Options of `ictus scenario`.
#[derive(Debug, Args)]
pub(crate) struct ScenarioArgs {
    /// The scenario (TOML; see examples/scenarios/).
    #[arg(value_name = "FILE.toml")]
    pub(crate) file: PathBuf,
    /// Placement: none (stock Linux), ictus, or both one after the other.
    #[arg(long, value_enum, default_value = "none")]
    pub(crate) balancer: BalancerArg,
    /// Output directory (default: a new one under --results).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub(crate) output: Option<PathBuf>,
    /// Where new output directories go.
    #[arg(long, value_name = "DIR", default_value = "ictus-results")]
    pub(crate) results: PathBuf,
    /// Print the result as JSON on stdout (with both: an array of two).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Checks the file (nothing starts when it is refused), runs, writes, summarises.
pub(crate) fn run(args: &ScenarioArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let scenario = spec::load(&args.file).map_err(Failure::usage)?;
    let modes: &[BalancerMode] = match args.balancer {
        BalancerArg::None => &[BalancerMode::None],
        BalancerArg::Ictus => &[BalancerMode::Ictus],
        BalancerArg::Both => &[BalancerMode::None, BalancerMode::Ictus],
    };
    let dir = match &args.output {
        Some(d) => d.clone(),
        None => new_dir(&args.results, &scenario.name),
    };
    // A directory that cannot take the results is bad input, found before the run.
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("{}: cannot create the output directory", dir.display()))
        .map_err(Failure::usage)?;
    crate::common::check_output(&dir.join(report::RESULT_FILE))?;
    let mut results = Vec::new();
    let mut written = Vec::new();
    for &mode in modes {
        if progress.stop_requested() {
            break;
        }
        let opts = ScenarioOptions {
            source: Some(args.file.clone()),
            argv: std::env::args().collect(),
            ..ScenarioOptions::new(mode)
        };
        let result = run_one(&scenario, &opts, progress, !args.json)?;
        let sub = if modes.len() > 1 {
            let sub = dir.join(mode.name());
            std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
            sub
        } else {
            dir.clone()
        };
        written.extend(report::write_files(&sub, &result)?);
        results.push(result);
    }
    if results.len() > 1 {
        let path = dir.join(report::COMPARE_FILE);
        crate::common::write_output(&path, report::compare_markdown(&results))?;
        written.push(path);
    }
    if args.json {
        let json = if results.len() == 1 {
            serde_json::to_string_pretty(&results[0])?
        } else {
            serde_json::to_string_pretty(&results)?
        };
        say(&(json + "\n"))?;
    } else {
        let mut out = String::new();
        for r in &results {
            out.push_str(&summary(r));
        }
        let _ = writeln!(
            out,
            "wrote {}",
            written
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        say(&out)?;
    }
    if results.len() < modes.len() {
        return Err(anyhow::anyhow!("stopped before every placement ran").into());
    }
    Ok(())
}

/// A new directory under `root` named by host, time and scenario; never an existing one.
fn new_dir(root: &Path, name: &str) -> PathBuf {
    let base = ictus_probe::survey::results_dir(root);
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let stem = format!(
        "{}-scenario-{}",
        base.file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        slug.trim_matches('-')
    );
    let mut dir = root.join(&stem);
    let mut k = 2;
    while dir.exists() {
        dir = root.join(format!("{stem}-{k}"));
        k += 1;
    }
    dir
}

/// Runs one placement with a progress line on stderr (when it is a terminal).
fn run_one(
    scenario: &Scenario,
    opts: &ScenarioOptions,
    progress: &Progress,
    show: bool,
) -> Result<ScenarioResult, Failure> {
    let bar = if show {
        ProgressBar::new(u64::from(scenario.tasks()))
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix} {elapsed:>4} [{wide_bar}] {pos}/{len} tasks done")
            .expect("constant template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} ({})", scenario.name, opts.balancer));
    bar.enable_steady_tick(Duration::from_millis(200));
    let result = scenario::run(scenario, opts, |p| {
        bar.set_position(p.finished as u64);
        if progress.stop_requested() {
            WatchFlow::Stop
        } else {
            WatchFlow::Continue
        }
    });
    bar.finish_and_clear();
    result.map_err(|e| match e {
        scenario::ScenarioError::Partition(_) => Failure::usage(e),
        other => Failure::from(other),
    })
}

/// The terminal view of one run: one line of context, one row per group, the CPUs.
fn summary(r: &ScenarioResult) -> String {
    let mut out = String::new();
    let cpus: Vec<usize> = r.cpus.iter().map(|c| c.cpu).collect();
    let roles: Vec<&str> = r
        .cpus
        .iter()
        .map(|c| if c.rt { "RT" } else { "NRT" })
        .collect();
    let _ = writeln!(
        out,
        "{} under balancer {}: {} tasks, wall {:.2} s, one loop {:.0} ns, CPUs {} ({}){}",
        r.scenario.name,
        r.balancer,
        r.tasks.len(),
        r.wall_ns as f64 / 1e9,
        r.loop_ns,
        r.cpus_in_play,
        roles.join(" "),
        if r.complete { "" } else { ", INCOMPLETE" }
    );
    let mut table = ictus_report::terminal::table();
    table.set_header(vec![
        "group".to_string(),
        "class".to_string(),
        "tasks".to_string(),
        "completion s (min/avg/max)".to_string(),
        format!("% on CPUs {}", join(&cpus)),
        "invol. ctxt sw.".to_string(),
        "migrations".to_string(),
    ]);
    for g in &r.groups {
        table.add_row(group_row(g));
    }
    for i in 2..7 {
        if let Some(c) = table.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}");
    let idle = |first: bool| {
        r.cpus
            .iter()
            .map(|c| {
                let v = if first {
                    c.idle_until_first_end_ns
                } else {
                    Some(c.idle_ns)
                };
                v.map_or_else(|| "-".to_string(), |v| format!("{:.0}", v as f64 / 1e6))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        out,
        "CPU idle (ms), CPUs {}: until the first task ended {}; over the run {}",
        join(&cpus),
        idle(true),
        idle(false)
    );
    if let Some(b) = &r.balancer_report {
        let _ = writeln!(
            out,
            "balancer: {} decisions, {} withheld, {} attempts received",
            b.decisions.len(),
            b.withheld,
            b.attempts_received
        );
    }
    if let Some(why) = &r.stopped {
        let _ = writeln!(out, "INCOMPLETE: {why}; the figures cover what ran.");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// One group's row: its tasks, completion times, share of the CPUs, switches and
/// migrations.
fn group_row(g: &GroupStats) -> Vec<String> {
    let share = if g.cpu_share.is_empty() {
        "-".to_string()
    } else {
        g.cpu_share
            .iter()
            .map(|s| format!("{:.0}", s.percent))
            .collect::<Vec<_>>()
            .join(" ")
    };
    vec![
        g.name.clone(),
        g.class.to_string(),
        format!("{}/{}", g.finished, g.tasks),
        g.completion_ns.map_or_else(
            || "-".to_string(),
            |m| {
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    m.min / 1e9,
                    m.avg / 1e9,
                    m.max / 1e9
                )
            },
        ),
        share,
        g.involuntary_ctxt_switches
            .map_or_else(|| "-".to_string(), |m| format!("{:.0}", m.avg)),
        g.migrations
            .map_or_else(|| "-".to_string(), |m| format!("{:.0}", m.avg)),
    ]
}

fn join(cpus: &[usize]) -> String {
    cpus.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}
