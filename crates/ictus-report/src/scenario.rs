//! Reports of a load-balancer scenario (`ictus scenario`, seed 002 §5.3): the seed's
//! Tables 3 to 5 for one run in Markdown, the timeline of running tasks per CPU as an
//! SVG (one panel per CPU, one line per group), and runs of the same scenario under
//! different placements side by side.
//!
//! ```no_run
//! use std::path::Path;
//! use ictus_report::scenario;
//! let none = scenario::read_result(Path::new("none/result.json"))?;
//! let ictus = scenario::read_result(Path::new("ictus/result.json"))?;
//! let page = scenario::compare_markdown(&[none, ictus]);
//! # let _ = page;
//! # Ok::<(), ictus_report::ReportError>(())
//! ```

use std::error::Error;
use std::path::{Path, PathBuf};

use ictus_shield::balancer::{Decision, Report};
use ictus_shield::scenario::run::{CpuShare, GroupStats, MinAvgMax, ScenarioResult};
use ictus_shield::scenario::{RESULT_SCHEMA, RESULT_VERSION};
use plotters::prelude::*;

use crate::ReportError;
use crate::doc::{Block, Document, Grid};
use crate::format::sig3;
use crate::plots::{self, colour};
use crate::results::{check_schema, check_version, parse_json, provenance_lines};

/// The result's file name in a scenario's output directory.
pub const RESULT_FILE: &str = "result.json";
/// The timeline's file name.
pub const TIMELINE_FILE: &str = "timeline.svg";
/// The side-by-side page's file name (runs of one scenario under several placements).
pub const COMPARE_FILE: &str = "compare.md";

/// A count or mean: whole numbers as such, others with three significant digits.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        sig3(v)
    }
}

/// Seconds with three significant digits.
fn secs(ns: f64) -> String {
    sig3(ns / 1e9)
}

/// Milliseconds with three significant digits.
fn millis(ns: f64) -> String {
    num(ns / 1e6)
}

/// `min / avg / max` of nanoseconds, in seconds.
fn span_secs(v: Option<MinAvgMax>) -> String {
    v.map_or_else(
        || "-".to_string(),
        |m| format!("{} / {} / {}", secs(m.min), secs(m.avg), secs(m.max)),
    )
}

/// `min / avg / max` of counts.
fn span_count(v: Option<MinAvgMax>) -> String {
    v.map_or_else(
        || "-".to_string(),
        |m| format!("{} / {} / {}", num(m.min), num(m.avg), num(m.max)),
    )
}

/// The mean of counts, or `-`.
fn avg(v: Option<MinAvgMax>) -> String {
    v.map_or_else(|| "-".to_string(), |m| num(m.avg))
}

/// One percentage per CPU of `cpus`, space separated as the seed prints them.
fn shares_row(cpus: &[usize], shares: &[CpuShare]) -> String {
    if shares.is_empty() {
        return "-".to_string();
    }
    cpus.iter()
        .map(|c| {
            shares
                .iter()
                .find(|s| s.cpu == *c)
                .map_or_else(|| "-".to_string(), |s| format!("{:.1}", s.percent))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `NRT RT RT RT`: the partition in CPU order.
fn roles(r: &ScenarioResult) -> String {
    r.cpus
        .iter()
        .map(|c| if c.rt { "RT" } else { "NRT" })
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_list(r: &ScenarioResult) -> Vec<usize> {
    r.cpus.iter().map(|c| c.cpu).collect()
}

/// Reads a `result.json`, checking its schema and version.
pub fn read_result(path: &Path) -> Result<ScenarioResult, ReportError> {
    let name = path.display().to_string();
    // Refuses a FIFO, a device, a directory or an absurd size without blocking.
    let text = ictus_os::fs::read_input(path, ictus_os::fs::InputKind::Manifest.max_bytes())?;
    let value: serde_json::Value = parse_json(&text, &name)?;
    check_schema(&text, &name, &value, "schema", RESULT_SCHEMA)?;
    let version = value["version"].as_u64().unwrap_or(0);
    check_version(&text, &name, "version", version, RESULT_VERSION)?;
    parse_json(&text, &name)
}

/// Writes `result.json`, `report.md` and `timeline.svg` into `dir` (which exists) and
/// returns their paths.
pub fn write_files(dir: &Path, r: &ScenarioResult) -> Result<[PathBuf; 3], ReportError> {
    let json = serde_json::to_string_pretty(r).map_err(|e| ReportError::Serialize {
        path: dir.join(RESULT_FILE).display().to_string(),
        message: e.to_string(),
    })? + "\n";
    let files = [
        (dir.join(RESULT_FILE), json),
        (
            dir.join(crate::MARKDOWN_FILE),
            markdown(r, Some(TIMELINE_FILE)),
        ),
        (dir.join(TIMELINE_FILE), timeline_svg(r)),
    ];
    for (path, _) in &files {
        ictus_os::fs::check_writable(path)?;
    }
    for (path, text) in &files {
        ictus_os::fs::write_atomic(path, text)?;
    }
    let [(a, _), (b, _), (c, _)] = files;
    Ok([a, b, c])
}

/// The report of one run: the seed's table for it, the groups, the CPUs, every task,
/// the timeline (linked as `timeline`, when given), the balancer's account, warnings.
pub fn markdown(r: &ScenarioResult, timeline: Option<&str>) -> String {
    crate::markdown::layout(&document(r, timeline))
}

/// The report of one run as a document (see [`markdown`]).
fn document(r: &ScenarioResult, timeline: Option<&str>) -> Document {
    let mut out = Vec::new();
    let cpus = cpu_list(r);
    heading(&mut out, r);
    summary(&mut out, r, &cpus);
    groups(&mut out, r);
    cpus_idle(&mut out, r);
    timeline_section(&mut out, r, timeline);
    tasks(&mut out, r, &cpus);
    if !r.policies.is_empty() {
        policies(&mut out, r);
    }
    if let Some(b) = &r.balancer_report {
        balancer(&mut out, b);
    }
    if !r.warnings.is_empty() {
        out.push(Block::Heading("Warnings".into()));
        out.push(Block::List {
            items: r.warnings.iter().map(ToString::to_string).collect(),
            blank_after: true,
        });
    }
    let s = &r.scenario;
    Document {
        title: format!("Scenario {} under balancer {}", s.name, r.balancer),
        blocks: out,
    }
}

/// The title, the description, the provenance as the probe reports print it (a result
/// written before results carried one: its host, kernel and ictus version), the run in
/// one paragraph, and INCOMPLETE when it was.
fn heading(out: &mut Vec<Block>, r: &ScenarioResult) {
    let s = &r.scenario;
    out.push(Block::Title(format!(
        "Scenario `{}` under balancer `{}`",
        s.name, r.balancer
    )));
    if !s.description.trim().is_empty() {
        out.push(Block::Paragraph(s.description.trim().to_string()));
    }
    match &r.provenance {
        Some(p) => {
            let [machine, when] = provenance_lines(p);
            out.push(Block::Lines(vec![machine, format!("{when}.")]));
        }
        None => {
            out.push(Block::Paragraph(format!(
                "Host `{}`, kernel `{}`, ictus {}.",
                r.hostname, r.kernel, r.tool_version
            )));
        }
    }
    out.push(Block::Paragraph(format!(
        "CPUs in play {} as {} (RT CPUs {}, NRT CPUs {}). \
         {} tasks in {} group(s); one loop = {} ns (calibrated). Wall time {} s{}.",
        r.cpus_in_play,
        roles(r),
        r.partition.rt,
        r.partition.nrt,
        r.tasks.len(),
        r.groups.len(),
        sig3(r.loop_ns),
        secs(r.wall_ns as f64),
        r.source
            .as_deref()
            .map_or_else(String::new, |p| format!("; scenario file `{p}`"))
    )));
    if let Some(why) = &r.stopped {
        out.push(Block::Paragraph(format!(
            "**INCOMPLETE**: {why}; the figures cover what ran."
        )));
    }
}

/// The seed's Tables 3 to 5 for this run: one row per figure, the CPUs in one column.
fn summary(out: &mut Vec<Block>, r: &ScenarioResult, cpus: &[usize]) {
    out.push(Block::Heading("Summary (as seed 002 Tables 3 to 5)".into()));
    let mut rows = vec![
        vec![
            "CPU idle time until the first task ended (ms)".to_string(),
            idle_row(r, true),
        ],
        vec![
            "CPU idle time over the run (ms)".to_string(),
            idle_row(r, false),
        ],
    ];
    for g in &r.groups {
        rows.push(vec![
            format!("CPU repartition of {} tasks (%)", g.name),
            shares_row(cpus, &g.cpu_share),
        ]);
    }
    for g in &r.groups {
        rows.push(vec![
            format!("{} tasks completion time (s)", g.name),
            span_secs(g.completion_ns),
        ]);
    }
    for g in &r.groups {
        rows.push(vec![
            format!("{} tasks involuntary ctxt switches", g.name),
            avg(g.involuntary_ctxt_switches),
        ]);
    }
    out.push(Block::Table(Grid {
        header: [String::new(), format!("CPUs {} ({})", join(cpus), roles(r))].to_vec(),
        numeric: [false, true].to_vec(),
        rows,
    }));
    out.push(Block::Paragraph(
        "Completion time is minimum / average / maximum; shares are of the samples that saw a \
         task of the group running (state R) on each CPU; context switches are the mean per task."
            .into(),
    ));
}

/// One row per group.
fn groups(out: &mut Vec<Block>, r: &ScenarioResult) {
    out.push(Block::Heading("Groups".into()));
    let rows: Vec<Vec<String>> = r.groups.iter().map(group_row).collect();
    out.push(Block::Table(Grid {
        header: [
            "group",
            "class",
            "tasks (finished)",
            "completion (s) min / avg / max",
            "CPU time (s) avg",
            "voluntary ctxt sw. min / avg / max",
            "involuntary ctxt sw. min / avg / max",
            "migrations min / avg / max",
            "sections avg (moved)",
        ]
        .map(String::from)
        .to_vec(),
        numeric: [false, false, true, true, true, true, true, true, true].to_vec(),
        rows,
    }));
}

/// One row per CPU: its role, idle and steal time.
fn cpus_idle(out: &mut Vec<Block>, r: &ScenarioResult) {
    out.push(Block::Heading("CPUs".into()));
    let rows: Vec<Vec<String>> = r
        .cpus
        .iter()
        .map(|c| {
            vec![
                c.cpu.to_string(),
                if c.rt { "RT" } else { "NRT" }.to_string(),
                c.idle_until_first_end_ns
                    .map_or_else(|| "-".to_string(), |v| millis(v as f64)),
                millis(c.idle_ns as f64),
                millis(c.steal_ns as f64),
            ]
        })
        .collect();
    out.push(Block::Table(Grid {
        header: [
            "CPU",
            "role",
            "idle until the first end (ms)",
            "idle over the run (ms)",
            "steal (ms)",
        ]
        .map(String::from)
        .to_vec(),
        numeric: [true, false, true, true, true].to_vec(),
        rows,
    }));
    out.push(Block::Paragraph(format!(
        "Idle time is `/proc/stat` idle plus iowait, in clock ticks ({}).",
        r.first_end_ns.map_or_else(
            || "no task finished".to_string(),
            |t| format!("the first task finished at {} s", secs(t as f64))
        )
    )));
}

/// How the timeline was sampled, and the picture (`timeline`) when there is one.
fn timeline_section(out: &mut Vec<Block>, r: &ScenarioResult, timeline: Option<&str>) {
    out.push(Block::Heading("Timeline".into()));
    out.push(Block::Paragraph(format!(
        "Mean running tasks (state R) of each group on each CPU, in buckets of {} ms, \
         sampled every {} ms by a thread running {} on CPUs {} ({} samples, {} periods missed, \
         {} ms of CPU time).",
        sig3(r.timeline.bucket_ns as f64 / 1e6),
        sig3(r.sampler.period_ns as f64 / 1e6),
        r.sampler.policy,
        r.sampler.cpus,
        r.sampler.samples,
        r.sampler.missed,
        millis(r.sampler.cpu_time_ns as f64)
    )));
    if let Some(file) = timeline {
        out.push(Block::Image {
            alt: "running tasks per CPU over time".into(),
            src: file.into(),
        });
    }
}

/// One row per task.
fn tasks(out: &mut Vec<Block>, r: &ScenarioResult, cpus: &[usize]) {
    out.push(Block::Heading("Tasks".into()));
    let rows: Vec<Vec<String>> = r
        .tasks
        .iter()
        .map(|t| {
            vec![
                format!("{}/{}", t.group, t.index),
                t.tid.to_string(),
                t.policy.clone(),
                t.affinity.to_string(),
                if t.finished {
                    secs(t.completion_ns as f64)
                } else {
                    format!("{} (stopped)", secs(t.completion_ns as f64))
                },
                secs(t.cpu_time_ns as f64),
                shares_row(cpus, &t.cpu_share),
                opt(t.voluntary_ctxt_switches),
                opt(t.involuntary_ctxt_switches),
                match t.migrations {
                    Some(k) => format!("{k} ({} sampled)", t.migrations_sampled),
                    None => format!("{} (sampled)", t.migrations_sampled),
                },
                format!("{} ({})", t.sections.attempts, t.sections.moves),
            ]
        })
        .collect();
    out.push(Block::Table(Grid {
        header: [
            "task".to_string(),
            "tid".to_string(),
            "policy".to_string(),
            "CPUs".to_string(),
            "completion (s)".to_string(),
            "CPU time (s)".to_string(),
            format!("% on CPUs {}", join(cpus)),
            "voluntary".to_string(),
            "involuntary".to_string(),
            "migrations".to_string(),
            "sections (moved)".to_string(),
        ]
        .to_vec(),
        numeric: [
            false, true, false, false, true, true, true, true, true, true, true,
        ]
        .to_vec(),
        rows,
    }));
}

/// What each group asked for and obtained.
fn policies(out: &mut Vec<Block>, r: &ScenarioResult) {
    out.push(Block::Heading("Policies".into()));
    let rows: Vec<Vec<String>> = r
        .policies
        .iter()
        .map(|p| {
            vec![
                p.group.clone(),
                p.asked.clone(),
                p.obtained.clone(),
                p.refused_tasks.to_string(),
                p.reason.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    out.push(Block::Table(Grid {
        header: [
            "group",
            "asked",
            "obtained",
            "refused tasks",
            "the kernel's reason",
        ]
        .map(String::from)
        .to_vec(),
        numeric: [false, false, false, true, false].to_vec(),
        rows,
    }));
}

/// The balancer's account: its counters, the real-time shares at the end, its notes
/// and its first decisions.
fn balancer(out: &mut Vec<Block>, b: &Report) {
    out.push(Block::Heading("Balancer".into()));
    out.push(Block::Paragraph(format!(
        "{} decision(s) over {} pass(es) and {} sample(s); {} move(s) back to an RT CPU withheld \
         (anti ping-pong); {} migration attempt(s) received; {} move(s) refused by the kernel.",
        b.decisions.len(),
        b.passes,
        b.samples,
        b.withheld,
        b.attempts_received,
        b.refused
    )));
    if !b.rt_share.is_empty() {
        out.push(Block::Paragraph(format!(
            "Real-time share at the end: {}.",
            b.rt_share
                .iter()
                .map(|(c, s)| format!("CPU {c} {:.1} %", s * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if !b.notes.is_empty() {
        out.push(Block::List {
            items: b.notes.clone(),
            blank_after: true,
        });
    }
    if !b.decisions.is_empty() {
        decisions(out, &b.decisions);
    }
}

/// The first decisions of the balancer; all of them are in the result file.
fn decisions(out: &mut Vec<Block>, decisions: &[Decision]) {
    const SHOWN: usize = 20;
    let rows: Vec<Vec<String>> = decisions
        .iter()
        .take(SHOWN)
        .map(|d| {
            vec![
                millis(d.at_ns as f64),
                d.tid.to_string(),
                d.from.map_or_else(|| "-".to_string(), |c| c.to_string()),
                d.to.to_string(),
                d.reason.clone(),
            ]
        })
        .collect();
    out.push(Block::Table(Grid {
        header: ["at (ms)", "tid", "from", "to", "why"]
            .map(String::from)
            .to_vec(),
        numeric: [true, true, true, true, false].to_vec(),
        rows,
    }));
    if decisions.len() > SHOWN {
        out.push(Block::Paragraph(format!(
            "(the first {SHOWN} of {}; all are in `result.json`)",
            decisions.len()
        )));
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn join(cpus: &[usize]) -> String {
    cpus.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn idle_row(r: &ScenarioResult, until_first: bool) -> String {
    r.cpus
        .iter()
        .map(|c| {
            let v = if until_first {
                c.idle_until_first_end_ns
            } else {
                Some(c.idle_ns)
            };
            v.map_or_else(|| "-".to_string(), |v| millis(v as f64))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn group_row(g: &GroupStats) -> Vec<String> {
    vec![
        g.name.clone(),
        g.class.to_string(),
        format!("{} ({})", g.tasks, g.finished),
        span_secs(g.completion_ns),
        g.cpu_time_ns
            .map_or_else(|| "-".to_string(), |m| secs(m.avg)),
        span_count(g.voluntary_ctxt_switches),
        span_count(g.involuntary_ctxt_switches),
        format!("{} ({})", span_count(g.migrations), g.migrations_source),
        match (g.section_attempts, g.section_moves) {
            (Some(a), Some(m)) => format!("{} ({})", num(a.avg), num(m.avg)),
            _ => "-".to_string(),
        },
    ]
}

/// Runs of one scenario side by side (`none` against `ictus`), in the seed's layout:
/// one column per run, per-CPU figures space separated in CPU order.
pub fn compare_markdown(runs: &[ScenarioResult]) -> String {
    match compare_document(runs) {
        Some(doc) => crate::markdown::layout(&doc),
        None => "No scenario results to compare.\n".to_string(),
    }
}

/// Runs of one scenario side by side as a document (see [`compare_markdown`]), `None`
/// without a run.
fn compare_document(runs: &[ScenarioResult]) -> Option<Document> {
    let mut out = Vec::new();
    let first = runs.first()?;
    compare_heading(&mut out, first, runs);
    let labels: Vec<String> = runs
        .iter()
        .map(|r| format!("balancer `{}`", r.balancer))
        .collect();
    let rows: Vec<Vec<String>> = compared_figures(&group_names(runs))
        .iter()
        .map(|(label, f)| {
            std::iter::once(label.clone())
                .chain(runs.iter().map(f))
                .collect()
        })
        .collect();
    let header: Vec<String> = std::iter::once(String::new()).chain(labels).collect();
    let right: Vec<bool> = std::iter::once(false)
        .chain(runs.iter().map(|_| true))
        .collect();
    out.push(Block::Table(Grid {
        header: header.to_vec(),
        numeric: right.to_vec(),
        rows,
    }));
    out.push(Block::Paragraph(
        "Completion time is minimum / average / maximum. As seed 002 notes for Table 3, a high \
         average with a low spread means equity; only the maximum measures computing power."
            .into(),
    ));
    let mut items = Vec::new();
    for r in runs {
        if let Some(why) = &r.stopped {
            items.push(format!("balancer `{}`: INCOMPLETE, {why}", r.balancer));
        }
        for w in &r.warnings {
            items.push(format!("balancer `{}`: {w}", r.balancer));
        }
    }
    if !items.is_empty() {
        // The page ends with the list.
        out.push(Block::List {
            items,
            blank_after: false,
        });
    }
    let title = match out.first() {
        Some(Block::Title(t)) => t.clone(),
        _ => String::new(),
    };
    Some(Document { title, blocks: out })
}

/// The title (the scenario of the `first` run and the placements), its description,
/// a note when the runs are not of one scenario, and the host.
fn compare_heading(out: &mut Vec<Block>, first: &ScenarioResult, runs: &[ScenarioResult]) {
    out.push(Block::Title(format!(
        "Scenario `{}`: {}",
        first.scenario.name,
        runs.iter()
            .map(|r| r.balancer.name())
            .collect::<Vec<_>>()
            .join(" vs ")
    )));
    if !first.scenario.description.trim().is_empty() {
        out.push(Block::Paragraph(
            first.scenario.description.trim().to_string(),
        ));
    }
    if runs.iter().any(|r| r.scenario != first.scenario) {
        out.push(Block::Paragraph(
            "**Note**: these runs are not of the same scenario; compare with care.".into(),
        ));
    }
    out.push(Block::Paragraph(format!(
        "Host `{}`; CPUs {} as {}. Per-CPU figures are in CPU order.",
        first.hostname,
        join(&cpu_list(first)),
        roles(first)
    )));
}

/// The groups of all `runs`, in order of first appearance.
fn group_names(runs: &[ScenarioResult]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for g in &r.groups {
            if !names.contains(&g.name.as_str()) {
                names.push(&g.name);
            }
        }
    }
    names
}

/// Group `name` of run `r`, when it has one.
fn group_of<'a>(r: &'a ScenarioResult, name: &str) -> Option<&'a GroupStats> {
    r.groups.iter().find(|g| g.name == name)
}

/// A row of the comparison: its label and its figure for one run.
type Figure = (String, Box<dyn Fn(&ScenarioResult) -> String>);

/// A row of the comparison labelled `label`: `figure` of group `name` in each run,
/// `-` in a run without that group.
fn group_figure(
    label: String,
    name: &str,
    figure: impl Fn(&ScenarioResult, &GroupStats) -> String + 'static,
) -> Figure {
    let name = name.to_string();
    (
        label,
        Box::new(move |r: &ScenarioResult| {
            group_of(r, &name).map_or_else(|| "-".to_string(), |g| figure(r, g))
        }),
    )
}

/// The rows of the comparison, in the seed's order, for the groups `names`: idle
/// times, then per group its CPU shares, completion times, context switches and
/// migrations, then the wall time and the balancer's decisions.
fn compared_figures(names: &[&str]) -> Vec<Figure> {
    let mut figures: Vec<Figure> = vec![
        (
            "CPU idle time until the first task ended (ms)".into(),
            Box::new(|r: &ScenarioResult| idle_row(r, true)),
        ),
        (
            "CPU idle time over the run (ms)".into(),
            Box::new(|r: &ScenarioResult| idle_row(r, false)),
        ),
    ];
    for name in names {
        figures.push(group_figure(
            format!("CPU repartition of {name} tasks (%)"),
            name,
            |r, g| shares_row(&cpu_list(r), &g.cpu_share),
        ));
    }
    for name in names {
        figures.push(group_figure(
            format!("{name} tasks completion time (s)"),
            name,
            |_, g| span_secs(g.completion_ns),
        ));
    }
    for (label, pick) in [
        ("involuntary ctxt switches", 0usize),
        ("voluntary ctxt switches", 1),
        ("migrations", 2),
    ] {
        for name in names {
            figures.push(group_figure(
                format!("{name} tasks {label} (avg)"),
                name,
                move |_, g| {
                    avg(match pick {
                        0 => g.involuntary_ctxt_switches,
                        1 => g.voluntary_ctxt_switches,
                        _ => g.migrations,
                    })
                },
            ));
        }
    }
    figures.push((
        "wall time (s)".into(),
        Box::new(|r: &ScenarioResult| secs(r.wall_ns as f64)),
    ));
    figures.push((
        "balancer decisions (withheld)".into(),
        Box::new(|r: &ScenarioResult| {
            r.balancer_report.as_ref().map_or_else(
                || "-".to_string(),
                |b| format!("{} ({})", b.decisions.len(), b.withheld),
            )
        }),
    ));
    figures
}

/// Panel height of the timeline, per CPU.
const PANEL_H: u32 = 190;
/// Timeline width.
const TIMELINE_W: u32 = 760;

/// The timeline as an SVG: one panel per CPU, one line per group, x in seconds since
/// the start, y the mean running tasks.
pub fn timeline_svg(r: &ScenarioResult) -> String {
    let t = &r.timeline;
    let ncpu = t.cpus.len().max(1);
    let height = 40 + PANEL_H * ncpu as u32;
    crate::plots::svg((TIMELINE_W, height), |root| draw_timeline(root, r)).unwrap_or_else(|e| {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{TIMELINE_W}\" height=\"40\"><text x=\"10\" y=\"25\">timeline not drawn: {}</text></svg>\n",
            crate::format::escape(&e.to_string())
        )
    })
}

fn draw_timeline(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    r: &ScenarioResult,
) -> Result<(), Box<dyn Error>> {
    let t = &r.timeline;
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "{}: running tasks per CPU (balancer {})",
            r.scenario.name, r.balancer
        ),
        ("sans-serif", 17),
    )?;
    if t.buckets.is_empty() || t.cpus.is_empty() {
        root.draw(&Text::new(
            "no samples",
            (20, 20),
            ("sans-serif", 14).into_font(),
        ))?;
        return Ok(());
    }
    let width = t.bucket_ns as f64 / 1e9;
    let xmax = t
        .buckets
        .iter()
        .map(|b| b.start_ns as f64 / 1e9 + width)
        .fold(0.0f64, f64::max)
        .max(r.wall_ns as f64 / 1e9)
        .max(1e-3);
    let ymax = t
        .buckets
        .iter()
        .flat_map(|b| b.running.iter().flatten().copied())
        .fold(1.0f64, f64::max)
        .ceil()
        + 0.5;
    let panels = root.split_evenly((t.cpus.len(), 1));
    for (i, panel) in panels.iter().enumerate() {
        let cpu = t.cpus[i];
        let rt = r.partition.is_rt(cpu);
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("CPU {cpu} ({})", if rt { "RT" } else { "NRT" }),
                ("sans-serif", 14),
            )
            .margin(6)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the start")
            .y_desc("running tasks")
            .y_label_formatter(&crate::plots::tick_num)
            .x_label_formatter(&crate::plots::tick_num)
            .draw()?;
        for (g, name) in t.groups.iter().enumerate() {
            let c = colour(g);
            let points: Vec<(f64, f64)> = t
                .buckets
                .iter()
                .map(|b| {
                    (
                        b.start_ns as f64 / 1e9 + width / 2.0,
                        b.running
                            .get(i)
                            .and_then(|row| row.get(g))
                            .copied()
                            .unwrap_or(0.0),
                    )
                })
                .collect();
            plots::line(&mut chart, name, points, c)?;
        }
        plots::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}
