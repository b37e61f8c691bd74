//! The HTML report: the Markdown report's content with inline SVG plots, in one
//! self-contained file (no script, no network).

use std::fmt::Write as _;

use ictus_core::histogram::HistogramData;
use ictus_probe::view::compute::{MODEL_SIZE, Step};
use ictus_probe::view::jitter::SlowRun;
use ictus_probe::view::r#loop::Trial;
use ictus_probe::view::memlat::{Access, CHASE};
use ictus_probe::view::pingpong::Handoff;

use crate::compare::{Comparison, RUNS_HEADER};
use crate::format;
use crate::markdown::{capitalise, front, warning_list};
use crate::plots::{self, Axes};
use crate::results::{
    Results, Run, STEP_HEADER, WHY_HEADER, WHY_NOTE, class_name, load_name, step_rows, why_rows,
};
use crate::tables::{self, Table, caches, rate_point};

/// Escapes text for HTML.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `code` spans from Markdown backticks, on escaped text.
fn inline(s: &str) -> String {
    let e = escape(s);
    let mut out = String::new();
    for (i, part) in e.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2430; max-width: 1180px; margin: 2em auto; padding: 0 1.5em; line-height: 1.45; }
h1 { font-size: 1.8em; margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #d5dae3; padding-bottom: 0.2em; }
.host { color: #4a5568; margin: 0.1em 0; }
.seed { color: #6b7280; font-style: italic; margin-top: -0.6em; }
.incomplete { background: #fde8e8; border: 2px solid #c53030; color: #9b2c2c; padding: 0.6em 1em; font-weight: bold; font-size: 1.2em; }
.verdict { background: #f1f5fb; border-left: 6px solid #2b6cb0; padding: 0.8em 1.2em; }
.verdict.fails { border-left-color: #c05621; }
.verdict p.line { font-size: 1.2em; font-weight: 600; margin: 0.2em 0 0.5em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #d5dae3; padding: 0.3em 0.6em; vertical-align: top; }
th { background: #edf1f7; text-align: left; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafbfd; }
td.key { font-weight: 500; }
ul.notes { color: #4a5568; font-size: 0.9em; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #e2e8f0; padding: 4px; background: #fff; }
figcaption { font-size: 0.85em; color: #4a5568; max-width: 560px; padding: 2px 4px; }
p.note { color: #4a5568; font-size: 0.9em; }
nav ol { columns: 2; }
code { background: #f1f3f6; padding: 0 0.25em; border-radius: 3px; }
"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

fn figure(out: &mut String, svg: Option<String>, caption: &str) {
    if let Some(svg) = svg {
        let _ = writeln!(
            out,
            "<figure>{svg}<figcaption>{}</figcaption></figure>",
            inline(caption)
        );
    }
}

/// A table; `num[i]` right-aligns column `i` (numbers).
fn html_table(out: &mut String, header: &[String], num: &[bool], rows: &[Vec<String>]) {
    out.push_str("<table>\n<tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if num.get(i).copied().unwrap_or(false) {
                "num"
            } else {
                "key"
            };
            let _ = write!(out, "<td class=\"{class}\">{}</td>", inline(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn render_table(out: &mut String, n: usize, t: &Table) {
    let _ = writeln!(out, "<h2 id=\"{}\">{n}. {}</h2>", t.id, escape(&t.title));
    let _ = writeln!(out, "<p class=\"seed\">{}</p>", escape(&capitalise(t.seed)));
    if let Some(why) = &t.absent {
        let _ = writeln!(out, "<p>{}</p>", inline(&capitalise(why)));
        return;
    }
    let _ = writeln!(out, "<p>{}</p>", inline(&t.caption));
    let grid = t.grid();
    html_table(out, &grid.header, &grid.numeric, &grid.rows);
    if !t.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for note in &t.notes {
            let _ = write!(out, "<li>{}</li>", inline(note));
        }
        out.push_str("</ul>\n");
    }
}

fn front_html(out: &mut String, r: &Results) {
    let f = front(r);
    let _ = writeln!(out, "<h1>{}</h1>", escape(&f.title));
    if let Some(i) = &f.incomplete {
        let _ = writeln!(out, "<p class=\"incomplete\">{}</p>", escape(i));
    }
    for h in &f.host {
        let _ = writeln!(out, "<p class=\"host\">{}</p>", escape(h));
    }
    let _ = writeln!(
        out,
        "<p class=\"host\">Source: <code>{}</code></p>",
        escape(&r.source.display().to_string())
    );
    let holds = r
        .manifest
        .as_ref()
        .and_then(|m| m.verdict.as_ref())
        .is_some_and(|v| v.holds);
    let _ = writeln!(
        out,
        "<h2 id=\"verdict\">Verdict</h2>\n<div class=\"verdict{}\"><p class=\"line\">{}</p>",
        if holds { "" } else { " fails" },
        escape(&f.verdict)
    );
    if !f.evidence.is_empty() {
        out.push_str("<ul>");
        for e in &f.evidence {
            let _ = write!(out, "<li>{}</li>", escape(e));
        }
        out.push_str("</ul>");
    }
    if let Some(a) = &f.audit {
        let _ = write!(out, "<p>{}</p>", escape(a));
    }
    out.push_str("</div>\n");
}

/// The whole HTML report.
pub fn html(r: &Results) -> String {
    let tables = tables::tables(r);
    let mut out = String::new();
    front_html(&mut out, r);
    out.push_str("<h2>Contents</h2>\n<nav><ol>");
    for t in &tables {
        let _ = write!(
            out,
            "<li><a href=\"#{}\">{}</a> ({})</li>",
            t.id,
            escape(&t.title),
            escape(t.seed)
        );
    }
    out.push_str("</ol><p>");
    if why_rows(r).is_some() {
        out.push_str("<a href=\"#why\">Why the misses</a> · ");
    }
    out.push_str("<a href=\"#warnings\">Warnings</a>");
    if r.manifest.is_some() {
        out.push_str(" · <a href=\"#steps\">Steps of the survey</a>");
    }
    out.push_str("</p></nav>\n");
    for (i, t) in tables.iter().enumerate() {
        render_table(&mut out, i + 1, t);
        if t.absent.is_none() {
            out.push_str("<div class=\"plots\">\n");
            plots_for(&mut out, r, t.id);
            out.push_str("</div>\n");
        }
    }
    why(&mut out, r);
    warnings(&mut out, r);
    steps(&mut out, r);
    page(&front(r).title, &out)
}

fn merged(run: &Run) -> Option<&HistogramData> {
    run.record
        .merged
        .as_ref()
        .map(|l| &l.histogram)
        .filter(|h| !h.buckets.is_empty())
}

/// The plots under the table `id`.
fn plots_for(out: &mut String, r: &Results, id: &str) {
    match id {
        "timer" => timer_plots(out, r),
        "jitter" => jitter_plots(out, r),
        "memlat" => memlat_plots(out, r),
        "compute" => compute_plots(out, r),
        "pingpong" => pingpong_plots(out, r),
        "throughput" => throughput_plots(out, r),
        "loop" => loop_plots(out, r),
        _ => {}
    }
}

/// The wake-up latency tails of every configuration, then each one's histogram.
fn timer_plots(out: &mut String, r: &Results) {
    let mut runs: Vec<&Run> = r.of("timer").collect();
    runs.sort_by_key(|x| x.config());
    let series: Vec<(String, &HistogramData)> = runs
        .iter()
        .filter_map(|x| Some((x.config().to_string(), merged(x)?)))
        .collect();
    figure(
        out,
        plots::exceedance("Wake-up latency tails", &series),
        "Share of wake-ups at least this late, per configuration (log-log): the right end of each line is the max, each decade down is one more nine.",
    );
    for run in runs {
        if let Some(h) = merged(run) {
            figure(
                out,
                plots::histogram(&format!("Wake-up latency: {}", run.config()), h, None),
                &format!("Histogram of `{}` (log-log, 40 bins a decade).", run.id),
            );
        }
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">A timeline of wake-up latency needs the raw samples, which the records do not carry yet; the execution-time timeline under the next table shows when slow runs happened.</p>"
    );
}

/// The slow runs of every configuration over time, or a note that there were none.
fn jitter_plots(out: &mut String, r: &Results) {
    let mut series = Vec::new();
    for run in r.of("jitter") {
        let points: Vec<(f64, f64)> = run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<SlowRun>())
            .map(|p| (p.labels.at_ns as f64 / 1e9, p.metrics.duration_ns))
            .collect();
        if !points.is_empty() {
            series.push((run.config().to_string(), points));
        }
    }
    match plots::timeline("Slow runs over time", &series) {
        Some(svg) => figure(
            out,
            Some(svg),
            "Every run that took more than twice Tmin, at the time it started. A regular pattern with a 1 s period is real-time throttling (95 % of each second by default); on a VM, steal time.",
        ),
        None => {
            let _ = writeln!(
                out,
                "<p class=\"note\">No run took more than twice Tmin: no slow-run timeline to plot.</p>"
            );
        }
    }
}

/// Per memlat run: the time per access against the working set, one curve per
/// access pattern, the cache sizes marked.
fn memlat_plots(out: &mut String, r: &Results) {
    for run in r.of("memlat") {
        let marks: Vec<(f64, String)> = caches(run)
            .into_iter()
            .map(|(n, s)| (s as f64, format!("{n} {}", format::bytes(s as f64))))
            .collect();
        let axes = Axes {
            x_desc: "working set",
            y_desc: "time per access",
            x_fmt: &plots::tick_bytes,
            y_fmt: &plots::tick_ns,
            x_bytes: true,
        };
        figure(
            out,
            plots::curves(
                "Memory latency by working set",
                &axes,
                &memlat_series(run),
                &marks,
            ),
            "Time per access against the working set (log-log); vertical lines are the cache sizes the kernel reports. The random chase steps up at each level.",
        );
    }
}

/// One curve per access pattern of a memlat run (single-threaded measurements only):
/// (working set in bytes, ns per access).
fn memlat_series(run: &Run) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for m in &run.record.measurements {
        let Some(a) = Access::read(m).filter(|a| a.labels.threads == 1) else {
            continue;
        };
        let name = if m.name == CHASE {
            "random chase".to_string()
        } else {
            format!(
                "{}, space {} B",
                m.name.trim_start_matches("strided-"),
                a.labels.stride_bytes.unwrap_or(0)
            )
        };
        let (ws, v) = (a.labels.working_set_bytes as f64, a.ns);
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, p)) => p.push((ws, v)),
            None => series.push((name, vec![(ws, v)])),
        }
    }
    series
}

/// Per compute run: the time per module and step against the model's size.
fn compute_plots(out: &mut String, r: &Results) {
    for run in r.of("compute") {
        let points: Vec<(f64, f64)> = run
            .record
            .measurements
            .iter()
            .filter(|m| m.name == MODEL_SIZE)
            .filter_map(|m| m.read::<Step>())
            .map(|p| (p.labels.modules as f64, p.metrics.ns_per_module_step))
            .collect();
        let axes = Axes {
            x_desc: "model size (modules)",
            y_desc: "time per module and step",
            x_fmt: &|v| format::count(*v as u64),
            y_fmt: &plots::tick_ns,
            x_bytes: false,
        };
        figure(
            out,
            plots::curves(
                "Computing cost by model size",
                &axes,
                &[("one thread".to_string(), points)],
                &[],
            ),
            "Time per module and step as the model grows: flat while it fits in cache.",
        );
    }
}

/// The hand-off time tails of every configuration, load and placement.
fn pingpong_plots(out: &mut String, r: &Results) {
    let mut series = Vec::new();
    let mut runs: Vec<&Run> = r.of("pingpong").collect();
    runs.sort_by_key(|x| x.config());
    for run in runs {
        for m in &run.record.measurements {
            if let (Some(p), Some(l)) = (m.read::<Handoff>(), &m.latency) {
                let load = if p.labels.cpu_load {
                    "cpu load".to_string()
                } else {
                    load_name(&run.load)
                };
                series.push((
                    format!("{}, {load}, {}", class_name(run.class), p.labels.placement),
                    &l.histogram,
                ));
            }
        }
    }
    figure(
        out,
        plots::exceedance("Hand-off time tails", &series),
        "Share of hand-offs taking at least this long, per configuration, load and placement (log-log).",
    );
}

/// The payload throughput against its size, one curve per transport and placement
/// and one for memcpy.
fn throughput_plots(out: &mut String, r: &Results) {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for run in r.of("throughput") {
        for m in &run.record.measurements {
            let Some((name, size, rate)) = rate_point(m) else {
                continue;
            };
            let size = size as f64;
            match series.iter_mut().find(|(n, _)| *n == name) {
                Some((_, p)) => p.push((size, rate / 1e6)),
                None => series.push((name, vec![(size, rate / 1e6)])),
            }
        }
    }
    let axes = Axes {
        x_desc: "payload",
        y_desc: "MB/s",
        x_fmt: &plots::tick_bytes,
        y_fmt: &plots::tick_num,
        x_bytes: true,
    };
    figure(
        out,
        plots::curves("Throughput by payload", &axes, &series, &[]),
        "Payload throughput against payload size (log-log), as seed 004's Figures 6 and 7.",
    );
}

/// Per loop run: the step completion histogram, the period of the fastest trial held
/// without a miss marked.
fn loop_plots(out: &mut String, r: &Results) {
    for run in r.of("loop") {
        let period = run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Trial>())
            .filter(|t| t.metrics.held())
            .map(|t| t.labels.period_ns as f64)
            .fold(f64::INFINITY, f64::min);
        if let Some(h) = merged(run) {
            figure(
                out,
                plots::histogram(
                    "Loop step completion",
                    h,
                    period.is_finite().then_some((period, "period")),
                ),
                "Step completion (deadline to the end of the output phase) in the fastest trial held without a miss (the first trial when none held); the red line is that trial's period. The gap between them is the slack.",
            );
        }
    }
}

fn warnings(out: &mut String, r: &Results) {
    let _ = writeln!(out, "<h2 id=\"warnings\">Warnings</h2>");
    let list = warning_list(r);
    if list.is_empty() {
        out.push_str("<p>None of the records carries a warning.</p>\n");
        return;
    }
    out.push_str("<ul>");
    for (id, message, advice, steps) in list {
        let _ = write!(
            out,
            "<li><b>{}</b> ({}): {}",
            escape(&id),
            escape(&steps.join(", ")),
            escape(&message)
        );
        if let Some(a) = advice {
            let _ = write!(out, " <i>Advice:</i> {}", escape(&a));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul>\n");
}

fn why(out: &mut String, r: &Results) {
    let Some(rows) = why_rows(r) else {
        return;
    };
    let _ = writeln!(out, "<h2 id=\"why\">Why the misses</h2>");
    let _ = writeln!(out, "<p>{}</p>", escape(WHY_NOTE));
    html_table(out, &WHY_HEADER.map(String::from), &[], &rows);
}

fn steps(out: &mut String, r: &Results) {
    let Some(rows) = step_rows(r) else {
        return;
    };
    let _ = writeln!(out, "<h2 id=\"steps\">Steps of the survey</h2>");
    html_table(out, &STEP_HEADER.map(String::from), &[], &rows);
}

/// The comparison as HTML: the same tables as [`crate::compare_markdown`], and the
/// wake-up latency tails of every run overlaid per configuration.
pub fn compare_html(runs: &[Results], reference: usize) -> String {
    let c = Comparison::new(runs, reference);
    let headers = &c.headers;
    let mut out = String::new();
    let _ = writeln!(out, "<h1>ictus compare: {} runs</h1>", runs.len());
    let _ = writeln!(
        out,
        "<p class=\"host\">Ratios in parentheses are against run {} (value / reference value).</p>",
        c.reference + 1
    );
    html_table(&mut out, &RUNS_HEADER.map(String::from), &[], &c.runs);
    if let Some(note) = &c.settings_note {
        let _ = writeln!(out, "<p class=\"incomplete\"><b>{}</b></p>", escape(note));
    }
    for (n, s) in c.sides.iter().enumerate() {
        let _ = writeln!(
            out,
            "<h2 id=\"{}\">{}. {}</h2>",
            s.id,
            n + 1,
            escape(&s.title)
        );
        let _ = writeln!(out, "<p class=\"seed\">{}</p>", escape(&capitalise(s.seed)));
        if s.rows.is_empty() {
            out.push_str("<p>Not measured in any of the runs.</p>\n");
            continue;
        }
        let grid = s.grid(headers);
        html_table(&mut out, &grid.header, &grid.numeric, &grid.rows);
        if !s.notes.is_empty() {
            out.push_str("<ul class=\"notes\">");
            for note in &s.notes {
                let _ = write!(out, "<li>{}</li>", inline(note));
            }
            out.push_str("</ul>\n");
        }
        if s.id == "timer" {
            out.push_str("<div class=\"plots\">\n");
            let mut configs: Vec<_> = runs
                .iter()
                .flat_map(|r| r.of("timer").map(|x| x.config()))
                .collect();
            configs.sort();
            configs.dedup();
            for c in configs {
                let series: Vec<(String, &HistogramData)> = runs
                    .iter()
                    .zip(headers)
                    .filter_map(|(r, h)| {
                        let run = r.of("timer").find(|x| x.config() == c)?;
                        Some((h.clone(), merged(run)?))
                    })
                    .collect();
                figure(
                    &mut out,
                    plots::exceedance(&format!("Wake-up latency tails: {c}"), &series),
                    "Share of wake-ups at least this late, one line per run (log-log).",
                );
            }
            out.push_str("</div>\n");
        }
    }
    page(&format!("ictus compare: {} runs", runs.len()), &out)
}
