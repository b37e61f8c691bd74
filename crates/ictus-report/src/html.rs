//! The HTML backend: lays out a [`Document`] as one self-contained page (no script,
//! no network), the figures as inline SVG.

use std::fmt::Write as _;

use crate::doc::{
    Appendix, Body, Contents, Document, Front, Grid, Layout, Plot, Section, Verdict, Warning,
};
use crate::format::{capitalise, escape};

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

fn figure(out: &mut String, svg: Option<&str>, caption: &str) {
    if let Some(svg) = svg {
        let _ = writeln!(
            out,
            "<figure>{svg}<figcaption>{}</figcaption></figure>",
            inline(caption)
        );
    }
}

/// A table; `g.numeric[i]` right-aligns column `i` (numbers).
fn html_table(out: &mut String, g: &Grid) {
    out.push_str("<table>\n<tr>");
    for h in &g.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for row in &g.rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if g.numeric.get(i).copied().unwrap_or(false) {
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

/// `doc` as an HTML page.
pub(crate) fn layout(doc: &Document) -> String {
    page(&doc.title, &Html::body(doc))
}

/// The HTML backend.
struct Html;

impl Layout for Html {
    fn title(out: &mut String, text: &str) {
        let _ = writeln!(out, "<h1>{}</h1>", escape(text));
    }

    fn heading(out: &mut String, text: &str) {
        let _ = writeln!(out, "<h2>{}</h2>", escape(text));
    }

    fn paragraph(out: &mut String, text: &str) {
        let _ = writeln!(out, "<p>{}</p>", inline(text));
    }

    fn byline(out: &mut String, text: &str) {
        let _ = writeln!(out, "<p class=\"host\">{}</p>", escape(text));
    }

    fn lines(out: &mut String, lines: &[String]) {
        let lines: Vec<String> = lines.iter().map(|l| inline(l)).collect();
        let _ = writeln!(out, "<p>{}</p>", lines.join("<br>"));
    }

    fn alert(out: &mut String, text: &str) {
        let _ = writeln!(out, "<p class=\"incomplete\"><b>{}</b></p>", escape(text));
    }

    fn list(out: &mut String, items: &[String], _blank_after: bool) {
        out.push_str("<ul>");
        for i in items {
            let _ = write!(out, "<li>{}</li>", inline(i));
        }
        out.push_str("</ul>\n");
    }

    fn table(out: &mut String, grid: &Grid) {
        html_table(out, grid);
    }

    fn image(out: &mut String, alt: &str, src: &str) {
        let _ = writeln!(
            out,
            "<p><img src=\"{}\" alt=\"{}\"></p>",
            escape(src),
            escape(alt)
        );
    }

    fn front(out: &mut String, f: &Front) {
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
            escape(&f.source)
        );
    }

    fn verdict(out: &mut String, v: &Verdict) {
        let _ = writeln!(
            out,
            "<h2 id=\"verdict\">Verdict</h2>\n<div class=\"verdict{}\">",
            if v.holds { "" } else { " fails" },
        );
        // At a glance first: each configuration held or not, with its misses by cause.
        if let Some(g) = &v.glance {
            let _ = writeln!(
                out,
                "<figure class=\"glance\">{}<figcaption>{}</figcaption></figure>",
                g.svg,
                escape(&g.caption)
            );
        }
        let _ = writeln!(out, "<p class=\"line\">{}</p>", escape(&v.line));
        if !v.evidence.is_empty() {
            out.push_str("<ul>");
            for e in &v.evidence {
                let _ = write!(out, "<li>{}</li>", escape(e));
            }
            out.push_str("</ul>");
        }
        let advice = v.glance.as_ref().map_or(&[][..], |g| &g.advice[..]);
        if !advice.is_empty() {
            out.push_str("<p class=\"advice\"><b>What to do:</b></p><ul class=\"advice\">");
            for (place, a) in advice {
                let _ = write!(out, "<li><i>{}</i>: {}</li>", escape(place), inline(a));
            }
            out.push_str("</ul>");
        }
        if let Some(a) = &v.audit {
            let _ = write!(out, "<p>{}</p>", escape(a));
        }
        out.push_str("</div>\n");
    }

    fn contents(out: &mut String, c: &Contents) {
        out.push_str("<h2>Contents</h2>\n<nav><ol>");
        for e in &c.entries {
            let _ = write!(
                out,
                "<li><a href=\"#{}\">{}</a> ({})</li>",
                e.id,
                escape(&e.title),
                escape(e.seed)
            );
        }
        out.push_str("</ol><p>");
        let more: Vec<String> = c
            .more
            .iter()
            .map(|(id, title)| format!("<a href=\"#{id}\">{}</a>", escape(title)))
            .collect();
        out.push_str(&more.join(" · "));
        out.push_str("</p></nav>\n");
    }

    fn section(out: &mut String, s: &Section) {
        let e = &s.entry;
        let _ = writeln!(
            out,
            "<h2 id=\"{}\">{}. {}</h2>",
            e.id,
            e.number,
            escape(&e.title)
        );
        let _ = writeln!(out, "<p class=\"seed\">{}</p>", escape(&capitalise(e.seed)));
        match &s.body {
            Body::Absent(why) => {
                let _ = writeln!(out, "<p>{}</p>", inline(&capitalise(why)));
            }
            Body::Unmeasured(text) => {
                let _ = writeln!(out, "<p>{}</p>", inline(text));
            }
            Body::Table {
                caption,
                grid,
                notes,
                loose_notes: _,
                figures,
            } => {
                if let Some(c) = caption {
                    let _ = writeln!(out, "<p>{}</p>", inline(c));
                }
                html_table(out, grid);
                if !notes.is_empty() {
                    out.push_str("<ul class=\"notes\">");
                    for note in notes {
                        let _ = write!(out, "<li>{}</li>", inline(note));
                    }
                    out.push_str("</ul>\n");
                }
                if let Some(list) = figures {
                    out.push_str("<div class=\"plots\">\n");
                    for p in list {
                        match p {
                            Plot::Figure { svg, caption } => figure(out, svg.as_deref(), caption),
                            Plot::Note(text) => {
                                let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(text));
                            }
                        }
                    }
                    out.push_str("</div>\n");
                }
            }
        }
    }

    fn appendix(out: &mut String, a: &Appendix) {
        let _ = writeln!(out, "<h2 id=\"{}\">{}</h2>", a.id, escape(a.title));
        if let Some(note) = a.note {
            let _ = writeln!(out, "<p>{}</p>", escape(note));
        }
        html_table(out, &a.grid);
    }

    fn warnings(out: &mut String, list: &[Warning]) {
        let _ = writeln!(out, "<h2 id=\"warnings\">Warnings</h2>");
        if list.is_empty() {
            out.push_str("<p>None of the records carries a warning.</p>\n");
            return;
        }
        out.push_str("<ul>");
        for w in list {
            let _ = write!(
                out,
                "<li><b>{}</b> ({}): {}",
                escape(&w.id),
                escape(&w.steps.join(", ")),
                escape(&w.message)
            );
            if let Some(a) = &w.advice {
                let _ = write!(out, " <i>Advice:</i> {}", escape(a));
            }
            out.push_str("</li>");
        }
        out.push_str("</ul>\n");
    }
}
