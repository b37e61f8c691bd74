//! What the report says about `compute`: computing power on a mass-interaction model (seed 000 Table 7).
//! Its terminal view (what `ictus probe compute` prints), its seed table and its plots.

use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::compute::view::{MODEL_SIZE, SPLIT, Step};
use ictus_probe::record::{RunRecord, WarningId};
use ictus_probe::registry::ProbeId;
use ictus_probe::view::Point;

use crate::plots::{self, Axes, Plot};
use crate::probes::ProbeReport;
use crate::results::Results;
use crate::tables::{
    Cell as TableCell, Column, Row, Table, configuration_key, row_keys, runs_of, setup_words, table,
};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Compute;

/// The report of `compute`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    compare_note: Some(
        "Time reduction against the reference, as seed 000 Table 7 gives it: 1 − the ratio of the time per step.",
    ),
    ..ProbeReport::new(ID, render, 3, |r| vec![seed_table(r)], figures)
};

/// Time per step against model size, then the split with its speed-up.
fn render(record: &RunRecord) -> String {
    let mut out = terminal::headline(record);
    let with_reference = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Step>())
        .any(|p| p.metrics.time_reduction_vs_reference.is_some());
    for (name, title) in [
        (MODEL_SIZE, "one thread, by model size"),
        (SPLIT, "split across threads, spin rendezvous twice a step"),
    ] {
        let mut table = terminal::table();
        let mut header = vec![
            "modules",
            "threads",
            "per step (p50)",
            "per module",
            "p99",
            "max",
        ];
        if name == SPLIT {
            header.push("speed-up");
        }
        if with_reference {
            header.push("time reduction vs reference");
        }
        table.set_header(header);
        for m in record.measurements.iter().filter(|m| m.name == name) {
            let Some(Point { labels, metrics }) = m.read::<Step>() else {
                continue;
            };
            let l = m.latency.as_ref().map(|l| &l.summary);
            let mut row = vec![
                Cell::new(labels.modules),
                Cell::new(labels.threads),
                Cell::new(Nanos::new(metrics.ns_per_step as u64)),
                Cell::new(format!("{:.2} ns", metrics.ns_per_module_step)),
                Cell::new(terminal::fmt(l.and_then(|s| s.p99_ns))),
                Cell::new(terminal::fmt(l.and_then(|s| s.max_ns))),
            ];
            if name == SPLIT {
                row.push(Cell::new(
                    metrics.speedup.map_or("-".into(), |v| format!("{v:.2}")),
                ));
            }
            if with_reference {
                row.push(Cell::new(
                    metrics
                        .time_reduction_vs_reference
                        .map_or("no such point".into(), |v| format!("{v:.2}")),
                ));
            }
            table.add_row(row);
        }
        terminal::right_align(&mut table, 2);
        let _ = writeln!(out, "{title}:\n{table}");
    }
    out
}

// --- seed 000 Table 7 -----------------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(ID.name(), "Computing power", "seed 000 Table 7");
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.extend(["model".to_string(), "threads".to_string()]);
    t.columns = vec![
        Column::new("time per step"),
        Column::new("per module and step"),
        Column::new("speed-up"),
        Column::new("time reduction vs reference"),
    ];
    let mut reference = None;
    for run in &runs {
        if let Some(w) = run
            .record
            .warnings
            .iter()
            .find(|w| w.id == WarningId::Reference)
        {
            reference = Some(w.message.clone());
        }
        for p in run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Step>())
        {
            let mut keys = row_keys(several, run);
            keys.push(format!("{} modules", p.labels.modules));
            keys.push(p.labels.threads.to_string());
            let step = Some(p.metrics.ns_per_step);
            let module = Some(p.metrics.ns_per_module_step);
            let speedup = p.metrics.speedup;
            let reduction = match p.metrics.time_reduction_vs_reference {
                // The metric is reference time / our time; the seed's reduction is
                // 1 - our time / reference time.
                Some(x) if x > 0.0 => {
                    let red = 1.0 - 1.0 / x;
                    TableCell::num(
                        format!("{:.0} % (speed ×{})", red * 100.0, format::sig3(x)),
                        red * 100.0,
                    )
                }
                _ => TableCell::text(if p.labels.reference.is_some() {
                    "no such point in the reference"
                } else {
                    "no reference"
                }),
            };
            t.rows.push(Row {
                keys,
                cells: vec![
                    step.map_or(TableCell::empty(), TableCell::ns),
                    module.map_or(TableCell::empty(), TableCell::ns),
                    speedup.map_or(TableCell::empty(), |v| TableCell::num(format!("{v:.2}"), v)),
                    reduction,
                ],
            });
        }
    }
    t.caption = format!(
        "Time per step of a mass-interaction model (CORDIS-ANIMA chain) growing on one thread, then split over threads that meet twice a step ({}); the seed's measure is the time reduction against a reference machine.",
        setup_words(runs[0])
    );
    match reference {
        Some(msg) => t.notes.push(format!("Time reduction = 1 − this time / reference time, as the seed's; {msg}.")),
        None => t.notes.push("No reference record: `ictus compare REFERENCE THIS` sets another machine's survey beside this one, or `ictus probe compute --reference FILE` measures against a record.".to_string()),
    }
    t
}

/// Per compute run: the time per module and step against the model's size.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    for run in r.of(ID) {
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
        list.push(Plot::figure(
            plots::curves(
                "Computing cost by model size",
                &axes,
                &[("one thread".to_string(), points)],
                &[],
            ),
            "Time per module and step as the model grows: flat while it fits in cache.",
        ));
    }
    list
}
