//! The HTML report: the Markdown report's content with inline SVG plots, in one
//! self-contained file (no script, no network).

use std::fmt::Write as _;

use crate::compare::{Comparison, RUNS_HEADER};
use crate::format::escape;
use crate::markdown::{capitalise, front, warning_list};
use crate::plots::Plot;
use crate::probes::ProbeReport;
use crate::results::{Results, STEP_HEADER, WHY_HEADER, WHY_NOTE, step_rows, why_rows};
use crate::tables::Table;

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
.verdict figure.glance { border: none; background: none; padding: 0; margin: 0.2em 0 0.6em; }
.verdict figure.glance figcaption { max-width: none; }
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
        "<h2 id=\"verdict\">Verdict</h2>\n<div class=\"verdict{}\">",
        if holds { "" } else { " fails" },
    );
    // At a glance first: each configuration held or not, with its misses by cause.
    if let Some(svg) = crate::glance::svg(r) {
        let _ = writeln!(
            out,
            "<figure class=\"glance\">{svg}<figcaption>Each configuration of the loop: held or \
             not, its misses, its worst step and the cause that cost most; the bar is its \
             misses' lateness by the cause that accounts for it (hover for the time), the \
             share the counters on this machine account for beside it.</figcaption></figure>"
        );
    }
    let _ = writeln!(out, "<p class=\"line\">{}</p>", escape(&f.verdict));
    if !f.evidence.is_empty() {
        out.push_str("<ul>");
        for e in &f.evidence {
            let _ = write!(out, "<li>{}</li>", escape(e));
        }
        out.push_str("</ul>");
    }
    let advice = crate::glance::advice(r);
    if !advice.is_empty() {
        out.push_str("<p class=\"advice\"><b>What to do:</b></p><ul class=\"advice\">");
        for (place, a) in &advice {
            let _ = write!(out, "<li><i>{}</i>: {}</li>", escape(place), inline(a));
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
    let tables = crate::probes::tables(r);
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

/// The plots of a probe's section, as figures and notes.
fn plot_list(out: &mut String, list: Vec<Plot>) {
    for p in list {
        match p {
            Plot::Figure { svg, caption } => figure(out, svg, &caption),
            Plot::Note(text) => {
                let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&text));
            }
        }
    }
}

/// The plots under the table `id`: its probe's, or none.
fn plots_for(out: &mut String, r: &Results, id: &str) {
    if let Some(p) = ProbeReport::of_table(id) {
        plot_list(out, (p.plots)(r));
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
        if let Some(list) =
            ProbeReport::of_table(s.id).and_then(|p| (p.compare_plots)(runs, headers))
        {
            out.push_str("<div class=\"plots\">\n");
            plot_list(&mut out, list);
            out.push_str("</div>\n");
        }
    }
    page(&format!("ictus compare: {} runs", runs.len()), &out)
}
