//! Several runs side by side: the same tables with one column per run and ratios
//! against a reference run.

use std::fmt::Write as _;

use ictus_probe::registry::RUN_RECORD;

use crate::content::{front, verdict_line};
use crate::doc::{Block, Body, Document, Entry, Grid, Section};
use crate::format;
use crate::probes::{self, ProbeReport};
use crate::results::Results;
use crate::tables::Table;

/// The note under a table where a ratio compares thin tails.
pub const THIN_COMPARE_NOTE: &str = "† at least one side of this ratio is a tail percentile that rests on too few samples (p99.999 needs 100,000): the tails of short runs do not compare like with like.";

/// One table across runs.
struct Side {
    id: &'static str,
    title: String,
    seed: &'static str,
    keys: Vec<String>,
    /// Keys (with the figure's name last), then one text per run.
    rows: Vec<(Vec<String>, Vec<String>)>,
    notes: Vec<String>,
}

impl Side {
    /// The key columns, then one number column per run, headed `headers`.
    fn grid(&self, headers: &[String]) -> Grid {
        Grid {
            header: self
                .keys
                .iter()
                .cloned()
                .chain(headers.iter().cloned())
                .collect(),
            numeric: self
                .keys
                .iter()
                .map(|_| false)
                .chain(headers.iter().map(|_| true))
                .collect(),
            rows: self
                .rows
                .iter()
                .map(|(k, v)| k.iter().cloned().chain(v.iter().cloned()).collect())
                .collect(),
        }
    }
}

/// The header of the runs table that opens a comparison.
const RUNS_HEADER: [&str; 4] = ["run", "source", "host", "verdict"];

/// What a comparison says, before it becomes a document.
struct Comparison {
    /// The reference run's index (one out of range means the first).
    reference: usize,
    /// One column header per run, the reference marked.
    headers: Vec<String>,
    /// The runs table, one row per run under [`RUNS_HEADER`].
    runs: Vec<Vec<String>>,
    /// Each table across the runs.
    sides: Vec<Side>,
    /// Said when the runs measured at different CPU latency QoS settings: their
    /// latencies then differ by the idle states, not the machines.
    settings_note: Option<String>,
}

impl Comparison {
    /// `runs` side by side, with ratios against `reference`.
    fn new(runs: &[Results], reference: usize) -> Self {
        let reference = if reference < runs.len() { reference } else { 0 };
        let headers = run_headers(runs, reference);
        let rows = runs
            .iter()
            .zip(&headers)
            .map(|(r, h)| {
                let f = front(r);
                let (verdict, _) = verdict_line(r);
                vec![
                    h.clone(),
                    r.source.display().to_string(),
                    f.host.first().cloned().unwrap_or_default(),
                    match &f.incomplete {
                        Some(i) => format!("{i} {verdict}"),
                        None => verdict,
                    },
                ]
            })
            .collect();
        Comparison {
            reference,
            headers,
            runs: rows,
            sides: sides(runs, reference),
            settings_note: settings_note(runs),
        }
    }
}

/// The CPU latency QoS each run's latency records had in force (`held at 0 us`, `off`,
/// `not recorded` for records older than the setting), and a note when they differ.
fn settings_note(runs: &[Results]) -> Option<String> {
    let settings: Vec<String> = runs
        .iter()
        .map(|r| {
            let mut seen: Vec<String> = r
                .runs
                .iter()
                .filter(|run| {
                    run.record
                        .probe
                        .parse()
                        .is_ok_and(|id| probes::of(id).latency)
                })
                .map(|run| {
                    run.record
                        .obtained
                        .pm_qos
                        .as_ref()
                        .map_or("not recorded".to_string(), |q| q.phrase())
                })
                .collect();
            seen.sort();
            seen.dedup();
            seen.join(" and ")
        })
        .collect();
    let first = settings.first()?;
    if settings.iter().all(|s| s == first) {
        return None;
    }
    let each: Vec<String> = settings
        .iter()
        .enumerate()
        .map(|(i, s)| format!("run {}: {}", i + 1, if s.is_empty() { "-" } else { s }))
        .collect();
    Some(format!(
        "The runs measured at different CPU latency QoS settings ({}): wake-up latencies \
         differ by how deep the CPUs idled, not only by the machines. Compare at equal \
         settings (--pm-qos).",
        each.join("; ")
    ))
}

/// Column headers: `1: vm 2026-11-22 18:36 (reference)`.
fn run_headers(runs: &[Results], reference: usize) -> Vec<String> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let mut h = format!("{}: {}", i + 1, r.label());
            if i == reference {
                h.push_str(" (reference)");
            }
            h
        })
        .collect()
}

/// One side per table any of the runs has, in the order they first appear. Every
/// probe's tables are in every results; only the executive's run's are not, so a run
/// without a table has no run record.
fn sides(runs: &[Results], reference: usize) -> Vec<Side> {
    let per_run: Vec<Vec<Table>> = runs.iter().map(crate::probes::tables).collect();
    let mut models: Vec<&Table> = Vec::new();
    for t in per_run.iter().flatten() {
        if !models.iter().any(|m| m.id == t.id) {
            models.push(t);
        }
    }
    models
        .into_iter()
        .map(|model| {
            let absent = Table {
                rows: Vec::new(),
                absent: Some(format!("not measured: no {RUN_RECORD} record here")),
                ..model.clone()
            };
            let tables: Vec<&Table> = per_run
                .iter()
                .map(|ts| ts.iter().find(|t| t.id == model.id).unwrap_or(&absent))
                .collect();
            side(&tables, reference)
        })
        .collect()
}

fn side(tables: &[&Table], reference: usize) -> Side {
    let first = tables[0];
    let mut s = Side {
        id: first.id,
        title: first.title.clone(),
        seed: first.seed,
        keys: Vec::new(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    // The keys of the first table that has rows.
    let model = tables.iter().find(|t| t.absent.is_none()).unwrap_or(&first);
    s.keys = model.keys.clone();
    s.keys.push("figure".to_string());
    // Row identities: (keys, column name), in order of first appearance.
    let mut ids: Vec<(Vec<String>, String)> = Vec::new();
    for t in tables {
        for row in &t.rows {
            for (c, col) in t.columns.iter().enumerate() {
                if !col.compared || c >= row.cells.len() {
                    continue;
                }
                let id = (row.keys.clone(), col.name.clone());
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    let find = |t: &Table, keys: &[String], col: &str| {
        let c = t.columns.iter().position(|x| x.name == col)?;
        t.rows
            .iter()
            .find(|r| r.keys == keys)?
            .cells
            .get(c)
            .cloned()
    };
    let mut thin_ratio = false;
    for (keys, col) in ids {
        let reference_cell = tables.get(reference).and_then(|t| find(t, &keys, &col));
        let texts = tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if let Some(why) = &t.absent {
                    return why.clone();
                }
                let Some(c) = find(t, &keys, &col) else {
                    return "—".to_string();
                };
                let mut text = c.text.clone();
                if i != reference
                    && let (Some(v), Some(rc)) = (c.value, &reference_cell)
                    && let Some(rv) = rc.value
                    && rv != 0.0
                {
                    let _ = write!(text, " ({}", format::ratio(v / rv));
                    if c.thin || rc.thin {
                        text.push('†');
                        thin_ratio = true;
                    }
                    text.push(')');
                }
                text
            })
            .collect();
        let mut k = keys;
        k.push(col);
        s.rows.push((k, texts));
    }
    // Align key widths: tables with a configuration column in some runs only.
    let width = s.rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    if width > s.keys.len() {
        for _ in s.keys.len()..width {
            s.keys.insert(0, String::new());
        }
    }
    for (k, _) in &mut s.rows {
        while k.len() < s.keys.len() {
            k.insert(0, String::new());
        }
    }
    if thin_ratio {
        s.notes.push(THIN_COMPARE_NOTE.to_string());
    }
    if let Some(note) = ProbeReport::of_table(s.id).and_then(|p| p.compare_note) {
        s.notes.push(note.to_string());
    }
    s
}

/// `runs` side by side as a document: one column per run, ratios against `reference`
/// (an index into `runs`; out of range means the first), and each table's plots
/// across the runs where its probe draws them.
pub(crate) fn document(runs: &[Results], reference: usize) -> Document {
    let c = Comparison::new(runs, reference);
    let title = format!("ictus compare: {} runs", runs.len());
    let mut blocks = vec![
        Block::Title(title.clone()),
        Block::Byline(format!(
            "Ratios in parentheses are against run {} (value / reference value).",
            c.reference + 1
        )),
        Block::Table(Grid::text(&RUNS_HEADER, c.runs.clone())),
    ];
    if let Some(note) = &c.settings_note {
        blocks.push(Block::Alert(note.clone()));
    }
    for (n, s) in c.sides.iter().enumerate() {
        let entry = Entry {
            number: n + 1,
            id: s.id,
            title: s.title.clone(),
            seed: s.seed,
        };
        let body = if s.rows.is_empty() {
            Body::Unmeasured("Not measured in any of the runs.".into())
        } else {
            Body::Table {
                caption: None,
                grid: s.grid(&c.headers),
                notes: s.notes.clone(),
                loose_notes: true,
                figures: ProbeReport::of_table(s.id)
                    .and_then(|p| (p.compare_plots)(runs, &c.headers)),
            }
        };
        blocks.push(Block::Section(Section { entry, body }));
    }
    Document { title, blocks }
}
