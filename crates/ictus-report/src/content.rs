//! What a results report says, built once as a [`Document`]: the front (title,
//! incompleteness, host), the verdict with the glance and the advice, the contents,
//! one section per seed table with its probe's plots, why the misses, the warnings
//! and the survey's steps. The Markdown and HTML backends lay it out.

use std::fmt::Write as _;

use crate::doc::{
    Appendix, Block, Body, Contents, Document, Entry, Front, Grid, Section, Verdict, Warning,
};
use crate::format;
use crate::probes::ProbeReport;
use crate::results::{
    Results, STEP_HEADER, WHY_HEADER, WHY_NOTE, provenance_lines, step_rows, why_rows,
};

/// Where the plots are, said by a report that leaves them out.
const FIGURES_ELSEWHERE: &str = "Plots (latency histograms and tails, memory latency, throughput, the loop) are in `report.html`.";

/// The report of `r`.
pub(crate) fn report(r: &Results) -> Document {
    let front = front(r);
    let (line, evidence) = verdict_line(r);
    let verdict = Verdict {
        holds: r
            .manifest
            .as_ref()
            .and_then(|m| m.verdict.as_ref())
            .is_some_and(|v| v.holds),
        glance: crate::glance::model(r),
        line,
        evidence,
        audit: r.audit.as_ref().map(|a| {
            let mut s = format!("Platform audit: {}", a.verdict.summary);
            if !a.verdict.blockers.is_empty() {
                let _ = write!(s, " Blockers: {}.", a.verdict.blockers.join("; "));
            }
            s
        }),
    };
    let title = front.title.clone();
    let tables = crate::probes::tables(r);
    let why = why_rows(r);
    let steps = step_rows(r);
    let mut more = Vec::new();
    if why.is_some() {
        more.push(("why", "Why the misses"));
    }
    more.push(("warnings", "Warnings"));
    if steps.is_some() {
        more.push(("steps", "Steps of the survey"));
    }
    let sections: Vec<Section> = tables
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let entry = Entry {
                number: i + 1,
                id: t.id,
                title: t.title.clone(),
                seed: t.seed,
            };
            let body = match &t.absent {
                Some(why) => Body::Absent(why.clone()),
                None => Body::Table {
                    caption: Some(t.caption.clone()),
                    grid: t.grid(),
                    notes: t.notes.clone(),
                    loose_notes: false,
                    figures: Some(
                        ProbeReport::of_table(t.id)
                            .map(|p| (p.plots)(r))
                            .unwrap_or_default(),
                    ),
                },
            };
            Section { entry, body }
        })
        .collect();
    let mut blocks = vec![
        Block::Front(front),
        Block::Verdict(verdict),
        Block::Contents(Contents {
            entries: sections.iter().map(|s| s.entry.clone()).collect(),
            more,
            figures_elsewhere: FIGURES_ELSEWHERE,
        }),
    ];
    blocks.extend(sections.into_iter().map(Block::Section));
    if let Some(rows) = why {
        blocks.push(Block::Appendix(Appendix {
            id: "why",
            title: "Why the misses",
            note: Some(WHY_NOTE),
            grid: Grid::text(&WHY_HEADER, rows),
        }));
    }
    blocks.push(Block::Warnings(warnings(r)));
    if let Some(rows) = steps {
        blocks.push(Block::Appendix(Appendix {
            id: "steps",
            title: "Steps of the survey",
            note: None,
            grid: Grid::text(&STEP_HEADER, rows),
        }));
    }
    Document { title, blocks }
}

/// What the top of a report says: title, incompleteness, host.
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
    Front {
        title,
        incomplete,
        host,
        source: r.source.display().to_string(),
    }
}

/// The verdict in one line and what it rests on: the survey's, else the headline of
/// the verdict's probe, else the executive's run's.
pub(crate) fn verdict_line(r: &Results) -> (String, Vec<String>) {
    match r.manifest.as_ref().and_then(|m| m.verdict.as_ref()) {
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
    }
}

/// Distinct warnings with the steps that met them.
fn warnings(r: &Results) -> Vec<Warning> {
    let mut list: Vec<Warning> = Vec::new();
    for run in &r.runs {
        for w in &run.record.warnings {
            match list
                .iter_mut()
                .find(|x| x.id == w.id.name() && x.message == w.message)
            {
                Some(entry) => entry.steps.push(run.id.clone()),
                None => list.push(Warning {
                    id: w.id.name().to_string(),
                    message: w.message.clone(),
                    advice: w.advice.clone(),
                    steps: vec![run.id.clone()],
                }),
            }
        }
    }
    list
}
