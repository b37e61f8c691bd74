//! What the report says about `jitter`: the execution-time variation of a fixed routine.
//! Its terminal view (what `ictus probe jitter` prints), its seed table and its plots.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::jitter::view::{Runs, SlowRun};
use ictus_probe::jitter::{JitterParams, Routine};
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::survey::{Class, LoadCase};

use crate::plots::{self, Plot};
use crate::probes::ProbeReport;
use crate::results::{Results, load_name};
use crate::tables::{Cell as TableCell, Column, Row, Table, matrix, present, refused_note, table};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Jitter;

/// The report of `jitter`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    latency: true,
    ..ProbeReport::new(ID, render, 5, |r| vec![seed_table(r)], figures)
};

/// Seed 002 Table 2's columns per thread, then the duration distribution.
fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let params = record.parameters_as::<JitterParams>();
    let what = match params.as_ref().map(|p| p.routine) {
        Some(Routine::Divisions { divisions }) => format!("{divisions} integer divisions"),
        Some(Routine::Synchronised { elements }) => {
            format!("y = a x + y over {elements} f64 per thread, then a spin rendezvous")
        }
        None => "the routine".to_string(),
    };
    let _ = writeln!(
        out,
        "jitter: {what}, {} runs per thread",
        params.map_or("?".to_string(), |p| p.runs.to_string())
    );
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    let mut table = terminal::table();
    table.set_header(vec![
        "thread",
        "CPU",
        "policy",
        "Tmin",
        "max - Tmin",
        "% of Tmin",
        "runs > 2 Tmin",
    ]);
    for t in &record.threads {
        let m = record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Runs>())
            .find(|p| p.labels.thread == t.thread)
            .map(|p| p.metrics);
        let ns = |v: f64| Nanos::new(v as u64);
        table.add_row(vec![
            Cell::new(t.thread),
            Cell::new(t.config.pinned_cpu.map_or("-".into(), |c| c.to_string())),
            Cell::new(t.config.policy.to_string()),
            Cell::new(terminal::fmt(m.as_ref().map(|m| ns(m.tmin_ns)))),
            Cell::new(terminal::fmt(m.as_ref().map(|m| ns(m.max_minus_tmin_ns)))),
            Cell::new(
                m.as_ref()
                    .map_or("-".into(), |m| format!("{:.1}", m.variation_percent)),
            ),
            Cell::new(m.map_or("-".into(), |m| format!("{}", m.slow_runs))),
        ]);
    }
    let _ = writeln!(out, "{table}");
    let _ = writeln!(out, "run duration in microseconds:");
    let mut table = terminal::table();
    let mut header = vec!["thread"];
    header.extend(terminal::latency_header_without_missed());
    table.set_header(header);
    for t in &record.threads {
        let mut row = vec![Cell::new(t.thread)];
        row.extend(terminal::latency_cells_without_missed(&t.latency));
        table.add_row(row);
    }
    terminal::right_align(&mut table, 1);
    let _ = writeln!(out, "{table}");
    let slow: Vec<String> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<SlowRun>())
        .take(12)
        .map(|p| {
            format!(
                "{} at {}",
                Nanos::new(p.metrics.duration_ns as u64),
                Nanos::new(p.labels.at_ns)
            )
        })
        .collect();
    if !slow.is_empty() {
        let _ = writeln!(
            out,
            "slow runs (duration at time since start): {}",
            slow.join(", ")
        );
    }
    if let Some(note) = terminal::thin_note(record.threads.iter().map(|t| &t.latency)) {
        let _ = writeln!(out, "{note}");
    }
    out
}

// --- seed 002 Table 2 -----------------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Execution-time variation by priority and load",
        "seed 002 Table 2",
    );
    let Some(rows) = present(r, &mut t, ID, matrix(r, ID)) else {
        return t;
    };
    // Tmin: the shortest run among all configurations, as the seed defines it.
    let tmin = r
        .of(ID)
        .filter_map(|run| run.record.merged.as_ref()?.summary.min_ns)
        .map(|v| v.as_u64() as f64)
        .fold(f64::INFINITY, f64::min);
    let classes: BTreeSet<Class> = rows.iter().map(|(c, _)| c.class).collect();
    let loads: BTreeSet<LoadCase> = rows.iter().map(|(c, _)| c.load.clone()).collect();
    t.keys = vec!["load".into()];
    t.columns = classes
        .iter()
        .map(|c| {
            Column::new(match c {
                Class::NormalUnpinned => "normal priority (unpinned)",
                Class::RtPinned => "real-time priority (pinned)",
                Class::Shielded => "shielded (RT0)",
            })
        })
        .collect();
    for load in &loads {
        let cells = classes
            .iter()
            .map(|class| {
                match rows
                    .iter()
                    .find(|(c, _)| c.class == *class && &c.load == load)
                {
                    None => TableCell::text("not in the survey"),
                    Some((_, Err(why))) => TableCell::text(why.clone()),
                    Some((_, Ok(run))) => {
                        refused_note(&mut t, run);
                        match run.record.merged.as_ref().and_then(|l| l.summary.max_ns) {
                            Some(max) => {
                                let spread = max.as_u64() as f64 - tmin;
                                TableCell::num(
                                    format!(
                                        "{} ({} %)",
                                        format::ns(spread),
                                        format::sig3(100.0 * spread / tmin)
                                    ),
                                    spread,
                                )
                            }
                            None => TableCell::empty(),
                        }
                    }
                }
            })
            .collect();
        t.rows.push(Row {
            keys: vec![load_name(load)],
            cells,
        });
    }
    let params = r
        .of(ID)
        .next()
        .and_then(|run| run.record.parameters_as::<JitterParams>());
    let routine = match params.as_ref().map(|p| p.routine) {
        Some(Routine::Divisions { divisions }) => {
            format!("{} integer divisions", format::count(divisions))
        }
        Some(Routine::Synchronised { .. }) => "the synchronised routine".to_string(),
        None => "the routine".to_string(),
    };
    let runs = params.map_or(String::new(), |p| {
        format!(", {} runs per configuration", format::count(p.runs))
    });
    t.caption = format!(
        "The longest run of {routine} minus Tmin, and that as a share of Tmin, per scheduling priority and load{runs}. Tmin = {}, the shortest run of all configurations, as the seed defines it.",
        format::ns(tmin)
    );
    t
}

/// The slow runs of every configuration over time, or a note that there were none.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    let mut series = Vec::new();
    for run in r.of(ID) {
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
        Some(svg) => list.push(Plot::figure(
            Some(svg),
            "Every run that took more than twice Tmin, at the time it started. A regular pattern with a 1 s period is real-time throttling (95 % of each second by default); on a VM, steal time.",
        )),
        None => list.push(Plot::Note(
            "No run took more than twice Tmin: no slow-run timeline to plot.".into(),
        )),
    }
    list
}
