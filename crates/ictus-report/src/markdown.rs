//! The Markdown report: title and host, the verdict, contents, then the seeds' tables
//! in order, warnings and the survey's steps.

use std::fmt::Write as _;

use ictus_os::provenance::Provenance;

use crate::format;
use crate::probes::ProbeReport;
use crate::results::{Results, STEP_HEADER, WHY_HEADER, WHY_NOTE, short_time, step_rows, why_rows};
use crate::tables::Table;

/// What the top of both reports says.
pub(crate) struct Front {
    pub(crate) title: String,
    pub(crate) incomplete: Option<String>,
    pub(crate) host: Vec<String>,
    pub(crate) verdict: String,
    pub(crate) evidence: Vec<String>,
    pub(crate) audit: Option<String>,
}

pub(crate) fn front(r: &Results) -> Front {
    let p = r.provenance();
    let title = match p {
        Some(p) if r.manifest.is_some() => format!("ictus survey of {}", p.hostname),
        Some(p) => format!("ictus results from {}", p.hostname),
        None => "ictus results".to_string(),
    };
    let incomplete = (!r.complete()).then(|| {
        let mut why = Vec::new();
        if r.manifest.as_ref().is_some_and(|m| !m.complete) {
            why.push("the survey was stopped before its end".to_string());
        }
        let partial: Vec<&str> = r
            .runs
            .iter()
            .filter(|x| !x.record.complete)
            .map(|x| x.id.as_str())
            .collect();
        if !partial.is_empty() {
            why.push(format!("stopped early: {}", partial.join(", ")));
        }
        format!(
            "INCOMPLETE: {}. The figures cover what ran.",
            why.join("; ")
        )
    });
    let mut host = Vec::new();
    if let Some(p) = p {
        let [machine, mut when] = provenance_lines(p);
        host.push(machine);
        if let Some(m) = &r.manifest {
            let profile = serde_json::to_value(m.profile)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = write!(
                when,
                ", profile {profile}; target loop: {} on {} cores exchanging {} B",
                format::hz(m.target.frequency_hz),
                m.target.cores,
                m.target.exchange_bytes
            );
        }
        when.push('.');
        host.push(when);
    }
    let (verdict, evidence) = match r.manifest.as_ref().and_then(|m| m.verdict.as_ref()) {
        Some(v) => {
            let mut e = v.evidence.clone();
            e.extend(v.best.clone());
            e.extend(v.sound_line.clone());
            (v.line.clone(), e)
        }
        // No survey: the probe whose headline is a verdict (the loop's) speaks.
        None => {
            let probe = ProbeReport::verdict_probe();
            match r.of(probe).find_map(|x| x.record.headline.clone()) {
                Some(h) => (
                    format!("No survey verdict here; the {probe} probe found: {h}."),
                    Vec::new(),
                ),
                None if r.manifest.is_some() => (
                    format!("No verdict: the survey stopped before the {probe} probe ran."),
                    Vec::new(),
                ),
                // No survey and no loop: an executive's run speaks for itself.
                None => match crate::probes::run_headline(r) {
                    Some(h) => (
                        format!("No survey verdict here; the executive's run found: {h}."),
                        Vec::new(),
                    ),
                    None => (
                        format!("No verdict: these results have no {probe} record."),
                        Vec::new(),
                    ),
                },
            }
        }
    };
    let audit = r.audit.as_ref().map(|a| {
        let mut s = format!("Platform audit: {}", a.verdict.summary);
        if !a.verdict.blockers.is_empty() {
            let _ = write!(s, " Blockers: {}.", a.verdict.blockers.join("; "));
        }
        s
    });
    Front {
        title,
        incomplete,
        host,
        verdict,
        evidence,
        audit,
    }
}

/// The two lines a report prints of a record's provenance: the host (name, kernel and
/// preemption model, CPUs, virtualisation), then when and with which ictus it was
/// measured, left open so that a caller may add to it before the closing period.
pub(crate) fn provenance_lines(p: &Provenance) -> [String; 2] {
    let preempt = format!(
        "preemption {}{}",
        p.preemption.model,
        if p.preemption.dynamic {
            " (dynamic)"
        } else {
            ""
        }
    );
    let machine = format!(
        "{} · Linux {} ({preempt}) · {}, {} CPUs{} · {}",
        p.hostname,
        p.kernel_release,
        p.cpu_model.as_deref().unwrap_or("unknown CPU"),
        p.cpu_count,
        match p.smt {
            Some(true) => ", SMT on",
            Some(false) => ", SMT off",
            None => "",
        },
        p.virtualization
            .as_deref()
            .map_or("bare metal".to_string(), |v| format!(
                "virtual machine: {v}"
            )),
    );
    let when = format!(
        "Measured {} to {} UTC with ictus {}",
        short_time(&p.start_time),
        p.end_time.as_deref().map_or("?".to_string(), short_time),
        p.tool_version
    );
    [machine, when]
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A Markdown table from a header and rows; `right` tells which columns are numbers.
pub(crate) fn md_table(out: &mut String, header: &[String], right: &[bool], rows: &[Vec<String>]) {
    let _ = writeln!(
        out,
        "| {} |",
        header
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|{}|",
        right
            .iter()
            .map(|&r| if r { "---:" } else { "---" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} |",
            row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
}

fn render_table(out: &mut String, n: usize, t: &Table) {
    let _ = writeln!(
        out,
        "## {n}. {} ({}) <a id=\"{}\"></a>\n",
        t.title, t.seed, t.id
    );
    if let Some(why) = &t.absent {
        let _ = writeln!(out, "\n{}\n", capitalise(why));
        return;
    }
    let _ = writeln!(out, "{}\n", t.caption);
    let grid = t.grid();
    md_table(out, &grid.header, &grid.numeric, &grid.rows);
    if !t.notes.is_empty() {
        out.push('\n');
        for note in &t.notes {
            let _ = writeln!(out, "- {note}");
        }
    }
    out.push('\n');
}

pub(crate) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The whole report.
pub fn markdown(r: &Results) -> String {
    let f = front(r);
    let tables = crate::probes::tables(r);
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", f.title);
    if let Some(i) = &f.incomplete {
        let _ = writeln!(out, "> **{i}**\n");
    }
    for h in &f.host {
        let _ = writeln!(out, "{h}  ");
    }
    let _ = writeln!(out, "Source: `{}`\n", r.source.display());
    let _ = writeln!(out, "## Verdict\n");
    // At a glance first: each configuration held or not, with its misses by cause.
    if let Some(rows) = crate::glance::rows(r) {
        md_table(
            &mut out,
            &crate::glance::HEADER.map(String::from),
            &[false, false, true, true, false, false, false],
            &rows,
        );
        out.push('\n');
    }
    let _ = writeln!(out, "**{}**\n", f.verdict);
    for e in &f.evidence {
        let _ = writeln!(out, "- {e}");
    }
    if !f.evidence.is_empty() {
        out.push('\n');
    }
    let advice = crate::glance::advice(r);
    if !advice.is_empty() {
        let _ = writeln!(out, "What to do:\n");
        for (place, a) in &advice {
            let _ = writeln!(out, "- *{place}*: {a}");
        }
        out.push('\n');
    }
    if let Some(a) = &f.audit {
        let _ = writeln!(out, "{a}\n");
    }
    let _ = writeln!(out, "## Contents\n");
    for (i, t) in tables.iter().enumerate() {
        let _ = writeln!(out, "{}. [{}](#{}) ({})", i + 1, t.title, t.id, t.seed);
    }
    if why_rows(r).is_some() {
        let _ = writeln!(out, "- [Why the misses](#why)");
    }
    let _ = writeln!(out, "- [Warnings](#warnings)");
    if r.manifest.is_some() {
        let _ = writeln!(out, "- [Steps of the survey](#steps)");
    }
    let _ = writeln!(
        out,
        "\nPlots (latency histograms and tails, memory latency, throughput, the loop) are in `report.html`.\n"
    );
    for (i, t) in tables.iter().enumerate() {
        render_table(&mut out, i + 1, t);
    }
    why(&mut out, r);
    warnings(&mut out, r);
    steps(&mut out, r);
    out
}

fn why(out: &mut String, r: &Results) {
    let Some(rows) = why_rows(r) else {
        return;
    };
    let _ = writeln!(out, "## Why the misses <a id=\"why\"></a>\n");
    let _ = writeln!(out, "{WHY_NOTE}\n");
    md_table(out, &WHY_HEADER.map(String::from), &[false; 5], &rows);
    out.push('\n');
}

/// Distinct warnings with the steps that met them.
pub(crate) fn warning_list(r: &Results) -> Vec<(String, String, Option<String>, Vec<String>)> {
    let mut list: Vec<(String, String, Option<String>, Vec<String>)> = Vec::new();
    for run in &r.runs {
        for w in &run.record.warnings {
            match list
                .iter_mut()
                .find(|(id, m, _, _)| *id == w.id.name() && *m == w.message)
            {
                Some(entry) => entry.3.push(run.id.clone()),
                None => list.push((
                    w.id.name().to_string(),
                    w.message.clone(),
                    w.advice.clone(),
                    vec![run.id.clone()],
                )),
            }
        }
    }
    list
}

fn warnings(out: &mut String, r: &Results) {
    let _ = writeln!(out, "## Warnings <a id=\"warnings\"></a>\n");
    let list = warning_list(r);
    if list.is_empty() {
        let _ = writeln!(out, "None of the records carries a warning.\n");
        return;
    }
    for (id, message, advice, steps) in list {
        let _ = write!(out, "- **{id}** ({}): {message}", steps.join(", "));
        if let Some(a) = advice {
            let _ = write!(out, " *Advice:* {a}");
        }
        out.push('\n');
    }
    out.push('\n');
}

fn steps(out: &mut String, r: &Results) {
    let Some(rows) = step_rows(r) else {
        return;
    };
    let _ = writeln!(out, "## Steps of the survey <a id=\"steps\"></a>\n");
    md_table(out, &STEP_HEADER.map(String::from), &[false; 5], &rows);
    out.push('\n');
}
