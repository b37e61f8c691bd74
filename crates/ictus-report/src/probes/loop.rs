//! What the report says about `loop`: whether this machine holds a fully synchronous loop (seed 000 §3.1).
//! Its terminal view (what `ictus probe loop` prints), its seed table and its plots.

use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::r#loop::LoopParams;
use ictus_probe::r#loop::view::Trial;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::Point;

use crate::plots::{self, Plot, merged};
use crate::probes::ProbeReport;
use crate::results::Results;
use crate::tables::{
    Cell as TableCell, Column, Row, Table, configuration_key, row_keys, runs_of, setup_words, table,
};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Loop;

/// The report of `loop`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    latency: true,
    verdict: true,
    ..ProbeReport::new(ID, render, 8, |r| vec![seed_table(r)], figures)
};

/// The verdict first, then one row per trial.
fn render(record: &RunRecord) -> String {
    let mut out = terminal::headline(record);
    let mut table = terminal::table();
    table.set_header(vec![
        "frequency",
        "period",
        "steps",
        "misses",
        "late",
        "skipped",
        "longest run",
        "step p50",
        "step p99",
        "step max",
        "min slack",
        "release p99",
        "margin",
    ]);
    for m in &record.measurements {
        let Some(Point { labels, metrics }) = m.read::<Trial>() else {
            continue;
        };
        let n = |v: Option<f64>| v.map(|v| Nanos::new(v as u64));
        let l = m.latency.as_ref().map(|l| &l.summary);
        table.add_row(vec![
            Cell::new(format!("{} Hz", labels.frequency_hz.round())),
            Cell::new(Nanos::new(labels.period_ns)),
            Cell::new(labels.steps),
            Cell::new(metrics.misses),
            Cell::new(metrics.late_steps),
            Cell::new(metrics.skipped_releases),
            Cell::new(metrics.longest_miss_run),
            Cell::new(terminal::fmt(l.and_then(|s| s.p50_ns))),
            Cell::new(terminal::fmt(l.and_then(|s| s.p99_ns))),
            Cell::new(terminal::fmt(l.and_then(|s| s.max_ns))),
            Cell::new(terminal::fmt(n(metrics.min_slack_ns))),
            Cell::new(terminal::fmt(n(metrics.release_p99_ns))),
            Cell::new(terminal::fmt(n(Some(metrics.hybrid_margin_ns)))),
        ]);
    }
    terminal::right_align(&mut table, 1);
    let _ = writeln!(out, "{table}");
    let _ = writeln!(
        out,
        "step: from the deadline to the end of the step's output; a miss is a step that ends after its period, or a release skipped because an earlier step ran past it."
    );
    out
}

// --- the loop (seed 000 §3.1) ---------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Fully synchronous loop: trials",
        "seed 000 §3.1 and Table 1",
    );
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.push("frequency".into());
    t.columns = vec![
        Column::new("period"),
        Column::new("steps"),
        Column::new("missed"),
        Column::new("worst step"),
        Column::new("least slack"),
        Column::text("outcome"),
    ];
    for run in &runs {
        let mut trials: Vec<Point<Trial>> = run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Trial>())
            .collect();
        trials.sort_by(|a, b| a.labels.frequency_hz.total_cmp(&b.labels.frequency_hz));
        for p in trials {
            let mut keys = row_keys(several, run);
            keys.push(format::hz(p.labels.frequency_hz));
            let misses = p.metrics.misses;
            let steps = p.labels.steps;
            t.rows.push(Row {
                keys,
                cells: vec![
                    TableCell::ns(p.labels.period_ns as f64),
                    TableCell::num(format::count(steps), steps as f64),
                    TableCell::num(format::count(misses as u64), misses),
                    p.metrics
                        .worst_completion_ns
                        .map_or(TableCell::empty(), TableCell::ns),
                    p.metrics
                        .min_slack_ns
                        .map_or(TableCell::empty(), TableCell::ns),
                    TableCell::text(if p.metrics.held() { "held" } else { "missed" }),
                ],
            });
        }
    }
    let p = runs[0].record.parameters_as::<LoopParams>();
    t.caption = format!(
        "The loop of seed 000 Figure 1 (input, rendezvous, compute, rendezvous, output inside one period) on {} threads, a model of {} modules, {} B exchanged per rendezvous ({}), tried at rising frequencies until a step misses its deadline.",
        p.as_ref().map_or(0, |p| p.threads),
        p.as_ref().map_or(0, |p| p.modules),
        p.as_ref().map_or(0, |p| p.exchange_bytes),
        setup_words(runs[0]),
    );
    if let Some(h) = &runs[0].record.headline {
        t.notes.push(format!("The probe's conclusion: {h}."));
    }
    t
}

/// Per loop run: the step completion histogram, the period of the fastest trial held
/// without a miss marked.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    for run in r.of(ID) {
        let period = run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Trial>())
            .filter(|t| t.metrics.held())
            .map(|t| t.labels.period_ns as f64)
            .fold(f64::INFINITY, f64::min);
        if let Some(h) = merged(run) {
            list.push(Plot::figure(
                plots::histogram(
                    "Loop step completion",
                    h,
                    period.is_finite().then_some((period, "period")),
                ),
                "Step completion (deadline to the end of the output phase) in the fastest trial held without a miss (the first trial when none held); the red line is that trial's period. The gap between them is the slack.",
            ));
        }
    }
    list
}
