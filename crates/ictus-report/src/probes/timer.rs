//! What the report says about `timer`: the wake-up latency of a periodic thread.
//! Its terminal view (what `ictus probe timer` prints), its seed table and its plots.

use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::histogram::HistogramData;
use ictus_core::{Nanos, Percentile};
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::timer;

use crate::plots::{self, Plot, merged};
use crate::probes::ProbeReport;
use crate::results::{Results, Run, class_name, load_name};
use crate::tables::{
    Cell as TableCell, Column, Row, THIN_NOTE, Table, matrix, pct_cell, present, refused_note,
    table, why_cells,
};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Timer;

/// The report of `timer`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    compare_plots,
    latency: true,
    ..ProbeReport::new(ID, render, 4, |r| vec![seed_table(r)], figures)
};

/// The human view: configuration, one row per thread and the merged row.
fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<timer::RecordedParams>();
    let _ = writeln!(
        out,
        "timer: {} thread(s), interval {}, {} periods each, mode {}{}",
        record.threads.len(),
        Nanos::new(p.as_ref().and_then(|p| p.interval_ns()).unwrap_or(0)),
        p.as_ref().and_then(|p| p.loops()).unwrap_or(0),
        p.as_ref().map_or("?", |p| p.mode()),
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    let _ = writeln!(out, "wake-up latency in microseconds:");
    let mut table = terminal::table();
    let mut header = vec!["thread", "policy"];
    header.extend(terminal::latency_header());
    table.set_header(header);
    for t in &record.threads {
        let name = match t.config.pinned_cpu {
            Some(cpu) => format!("CPU {cpu}"),
            None => format!("#{} (unpinned)", t.thread),
        };
        let mut row = vec![Cell::new(name), Cell::new(t.config.policy.to_string())];
        row.extend(terminal::latency_cells(&t.latency));
        table.add_row(row);
    }
    if let Some(merged) = record.merged.as_ref().filter(|_| record.threads.len() > 1) {
        let mut row = vec![Cell::new("all"), Cell::new("")];
        row.extend(terminal::latency_cells(merged));
        table.add_row(row);
    }
    terminal::right_align(&mut table, 2);
    let _ = writeln!(out, "{table}");
    for t in &record.threads {
        let s = &t.latency.summary;
        let _ = write!(
            out,
            "thread {}: stddev {}, max at sample #{}",
            t.thread,
            terminal::fmt(s.stddev_ns.map(|m| Nanos::new(m.round() as u64))),
            t.latency.max_index.map_or("-".into(), |i| i.to_string()),
        );
        if let Some(m) = t.config.hybrid_margin_ns {
            let _ = write!(out, ", hybrid margin {}", Nanos::new(m));
        }
        let _ = writeln!(out);
    }
    if let Some(note) = terminal::thin_note(record.threads.iter().map(|t| &t.latency)) {
        let _ = writeln!(out, "{note}");
    }
    out
}

// --- seed 002 Table 1 -----------------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Wake-up latency by configuration and load",
        "seed 002 Table 1",
    );
    t.keys = vec!["configuration".into(), "load".into()];
    t.columns = vec![
        Column::new("samples"),
        Column::new("mean"),
        Column::new("99 %"),
        Column::new("99.999 %"),
        Column::new("max"),
        Column::new("missed periods"),
    ];
    let Some(rows) = present(r, &mut t, ID, matrix(r, ID)) else {
        return t;
    };
    let mut interval = None;
    for (config, run) in rows {
        let keys = vec![
            class_name(config.class).to_string(),
            load_name(&config.load),
        ];
        let cells = match run {
            Err(why) => why_cells(why, t.columns.len()),
            Ok(run) => {
                refused_note(&mut t, run);
                interval = interval.or(run
                    .record
                    .parameters_as::<timer::RecordedParams>()
                    .and_then(|p| p.interval_ns())
                    .map(|v| v as f64));
                match &run.record.merged {
                    None => why_cells("no latency in the record".into(), t.columns.len()),
                    Some(l) => {
                        let s = &l.summary;
                        vec![
                            TableCell::num(format::count(s.count), s.count as f64),
                            s.mean_ns.map_or(TableCell::empty(), TableCell::ns),
                            pct_cell(l, Percentile::P99),
                            pct_cell(l, Percentile::P99999),
                            s.max_ns
                                .map_or(TableCell::empty(), |v| TableCell::ns(v.as_u64() as f64)),
                            TableCell::num(format::count(l.missed), l.missed as f64),
                        ]
                    }
                }
            }
        };
        t.rows.push(Row { keys, cells });
    }
    t.caption = format!(
        "How late a thread wakes after its absolute deadline (`clock_nanosleep`, every {}), all measuring threads together, per scheduling class and background load: the seed's user latency, 99.999 % and max.",
        interval.map_or("period".to_string(), format::ns)
    );
    if t.rows.iter().any(|r| r.cells.iter().any(|c| c.thin)) {
        t.notes.push(THIN_NOTE.to_string());
    }
    t
}

/// The wake-up latency tails of every configuration, then each one's histogram.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    let mut runs: Vec<&Run> = r.of(ID).collect();
    runs.sort_by_key(|x| x.config());
    let series: Vec<(String, &HistogramData)> = runs
        .iter()
        .filter_map(|x| Some((x.config().to_string(), merged(x)?)))
        .collect();
    list.push(Plot::figure(
        plots::exceedance("Wake-up latency tails", &series),
        "Share of wake-ups at least this late, per configuration (log-log): the right end of each line is the max, each decade down is one more nine.",
    ));
    for run in runs {
        if let Some(h) = merged(run) {
            list.push(Plot::figure(
                plots::histogram(&format!("Wake-up latency: {}", run.config()), h, None),
                format!("Histogram of `{}` (log-log, 40 bins a decade).", run.id),
            ));
        }
    }
    list.push(Plot::Note("A timeline of wake-up latency needs the raw samples, which the records do not carry yet; the execution-time timeline under the next table shows when slow runs happened.".into()));
    list
}

/// Compared: the wake-up latency tails of every run overlaid, one plot per
/// configuration (`headers` names the runs).
fn compare_plots(runs: &[Results], headers: &[String]) -> Option<Vec<Plot>> {
    let mut list = Vec::new();
    let mut configs: Vec<_> = runs
        .iter()
        .flat_map(|r| r.of(ID).map(|x| x.config()))
        .collect();
    configs.sort();
    configs.dedup();
    for c in configs {
        let series: Vec<(String, &HistogramData)> = runs
            .iter()
            .zip(headers)
            .filter_map(|(r, h)| {
                let run = r.of(ID).find(|x| x.config() == c)?;
                Some((h.clone(), merged(run)?))
            })
            .collect();
        list.push(Plot::figure(
            plots::exceedance(&format!("Wake-up latency tails: {c}"), &series),
            "Share of wake-ups at least this late, one line per run (log-log).",
        ));
    }
    Some(list)
}
