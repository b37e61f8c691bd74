//! The Markdown backend: lays out a [`Document`] as Markdown. The figures are left
//! out (the contents say where they are); everything else is written as the model
//! holds it.

use std::fmt::Write as _;

use crate::doc::{
    Appendix, Body, Contents, Document, Front, Grid, Layout, Section, Verdict, Warning,
};
use crate::format::capitalise;

/// `doc` as Markdown.
pub(crate) fn layout(doc: &Document) -> String {
    Markdown::body(doc)
}

/// The Markdown backend.
struct Markdown;

impl Layout for Markdown {
    fn title(out: &mut String, text: &str) {
        let _ = writeln!(out, "# {text}\n");
    }

    fn heading(out: &mut String, text: &str) {
        let _ = writeln!(out, "## {text}\n");
    }

    fn paragraph(out: &mut String, text: &str) {
        let _ = writeln!(out, "{text}\n");
    }

    fn byline(out: &mut String, text: &str) {
        Self::paragraph(out, text);
    }

    fn lines(out: &mut String, lines: &[String]) {
        let _ = writeln!(out, "{}\n", lines.join("  \n"));
    }

    fn alert(out: &mut String, text: &str) {
        let _ = writeln!(out, "> **{text}**\n");
    }

    fn list(out: &mut String, items: &[String], blank_after: bool) {
        for i in items {
            let _ = writeln!(out, "- {i}");
        }
        if blank_after {
            out.push('\n');
        }
    }

    fn table(out: &mut String, grid: &Grid) {
        md_table(out, grid);
        out.push('\n');
    }

    fn image(out: &mut String, alt: &str, src: &str) {
        let _ = writeln!(out, "![{alt}]({src})\n");
    }

    fn front(out: &mut String, f: &Front) {
        let _ = writeln!(out, "# {}\n", f.title);
        if let Some(i) = &f.incomplete {
            let _ = writeln!(out, "> **{i}**\n");
        }
        for h in &f.host {
            let _ = writeln!(out, "{h}  ");
        }
        let _ = writeln!(out, "Source: `{}`\n", f.source);
    }

    fn verdict(out: &mut String, v: &Verdict) {
        let _ = writeln!(out, "## Verdict\n");
        // At a glance first: each configuration held or not, with its misses by cause.
        if let Some(g) = &v.glance {
            md_table(out, &g.table);
            out.push('\n');
        }
        let _ = writeln!(out, "**{}**\n", v.line);
        for e in &v.evidence {
            let _ = writeln!(out, "- {e}");
        }
        if !v.evidence.is_empty() {
            out.push('\n');
        }
        let advice = v.glance.as_ref().map_or(&[][..], |g| &g.advice[..]);
        if !advice.is_empty() {
            let _ = writeln!(out, "What to do:\n");
            for (place, a) in advice {
                let _ = writeln!(out, "- *{place}*: {a}");
            }
            out.push('\n');
        }
        if let Some(a) = &v.audit {
            let _ = writeln!(out, "{a}\n");
        }
    }

    fn contents(out: &mut String, c: &Contents) {
        let _ = writeln!(out, "## Contents\n");
        for e in &c.entries {
            let _ = writeln!(out, "{}. [{}](#{}) ({})", e.number, e.title, e.id, e.seed);
        }
        for (id, title) in &c.more {
            let _ = writeln!(out, "- [{title}](#{id})");
        }
        let _ = writeln!(out, "\n{}\n", c.figures_elsewhere);
    }

    fn section(out: &mut String, s: &Section) {
        let e = &s.entry;
        let _ = writeln!(
            out,
            "## {}. {} ({}) <a id=\"{}\"></a>\n",
            e.number, e.title, e.seed, e.id
        );
        match &s.body {
            Body::Absent(why) => {
                let _ = writeln!(out, "\n{}\n", capitalise(why));
            }
            Body::Unmeasured(text) => {
                let _ = writeln!(out, "{text}\n");
            }
            Body::Table {
                caption,
                grid,
                notes,
                loose_notes,
                figures: _,
            } => {
                if let Some(c) = caption {
                    let _ = writeln!(out, "{c}\n");
                }
                md_table(out, grid);
                if *loose_notes {
                    for note in notes {
                        let _ = writeln!(out, "\n- {note}");
                    }
                } else if !notes.is_empty() {
                    out.push('\n');
                    for note in notes {
                        let _ = writeln!(out, "- {note}");
                    }
                }
                out.push('\n');
            }
        }
    }

    fn appendix(out: &mut String, a: &Appendix) {
        let _ = writeln!(out, "## {} <a id=\"{}\"></a>\n", a.title, a.id);
        if let Some(note) = a.note {
            let _ = writeln!(out, "{note}\n");
        }
        md_table(out, &a.grid);
        out.push('\n');
    }

    fn warnings(out: &mut String, list: &[Warning]) {
        let _ = writeln!(out, "## Warnings <a id=\"warnings\"></a>\n");
        if list.is_empty() {
            let _ = writeln!(out, "None of the records carries a warning.\n");
            return;
        }
        for w in list {
            let _ = write!(
                out,
                "- **{}** ({}): {}",
                w.id,
                w.steps.join(", "),
                w.message
            );
            if let Some(a) = &w.advice {
                let _ = write!(out, " *Advice:* {a}");
            }
            out.push('\n');
        }
        out.push('\n');
    }
}

/// A table cell: pipes escaped, one line.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table; `g.numeric` tells which columns are right-aligned.
fn md_table(out: &mut String, g: &Grid) {
    let row = |cells: &[String]| {
        cells
            .iter()
            .map(|c| cell(c))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let _ = writeln!(out, "| {} |", row(&g.header));
    let _ = writeln!(
        out,
        "|{}|",
        g.numeric
            .iter()
            .map(|&r| if r { "---:" } else { "---" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in &g.rows {
        let _ = writeln!(out, "| {} |", row(r));
    }
}
