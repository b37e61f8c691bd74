//! What the report says about `pingpong`: the hand-off time between two threads.
//! Its terminal view (what `ictus probe pingpong` prints), its seed table and its plots.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::pingpong;
use ictus_probe::pingpong::view::Handoff;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::survey::{Class, LoadCase};

use crate::plots::{self, Plot};
use crate::probes::ProbeReport;
use crate::results::{Results, Run, class_name, load_name};
use crate::tables::{Cell as TableCell, Column, Row, Table, refused_note, runs_of, table};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Pingpong;

/// The report of `pingpong`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    latency: true,
    ..ProbeReport::new(ID, render, 6, |r| vec![seed_table(r)], figures)
};

/// Microseconds with 0.1 us resolution from a nanosecond figure, or `-`.
fn micros(ns: Option<f64>) -> String {
    ns.filter(|v| v.is_finite())
        .map_or_else(|| "-".into(), |v| format!("{:.1}", v / 1_000.0))
}

/// The human view: one row per primitive and placement.
fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<pingpong::ParamsRecord>();
    let length = match p.as_ref().map(|p| (p.loops, p.duration_ns)) {
        Some((Some(n), _)) => format!("{n} round trips"),
        Some((None, Some(d))) => format!("{}", Nanos::new(d)),
        _ => "?".into(),
    };
    let policy = record
        .threads
        .first()
        .map_or_else(|| "?".into(), |t| t.config.policy.to_string());
    let _ = writeln!(
        out,
        "pingpong: 2 threads, policy {policy}, {length} per point after {} warm-up, {}{}",
        Nanos::new(p.as_ref().map_or(0, |p| p.warmup_ns)),
        if p.as_ref().is_some_and(|p| p.cpu_load) {
            "with a SCHED_OTHER spinner on each measured CPU"
        } else {
            "no CPU load"
        },
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    let _ = writeln!(
        out,
        "round trip = 2 hand-offs; hand-off latency (one way, sender's stamp to receiver awake) in microseconds:"
    );
    let mut table = terminal::table();
    let mut header = vec![
        "primitive",
        "placement",
        "CPUs",
        "round trips/s",
        "round trip ± sd",
    ];
    // Nothing is missed in a ping-pong: no missed column; the stddev is shown.
    let mut latency = terminal::latency_header_without_missed();
    latency.insert(3, "sd");
    header.extend(latency);
    table.set_header(header);
    for m in &record.measurements {
        let Some(p) = m.read::<Handoff>() else {
            continue;
        };
        let [a, b] = p.labels.cpus;
        let mut row = vec![
            Cell::new(p.labels.primitive),
            Cell::new(p.labels.placement),
            Cell::new(format!("{a},{b}")),
            Cell::new(format!("{:.0}", p.metrics.round_trips_per_s)),
            Cell::new(format!(
                "{} ± {}",
                micros(p.metrics.round_trip_mean_ns),
                micros(p.metrics.round_trip_stddev_ns)
            )),
        ];
        if let Some(l) = &m.latency {
            let mut cells = terminal::latency_cells_without_missed(l);
            cells.insert(3, Cell::new(micros(l.summary.stddev_ns)));
            row.extend(cells);
        }
        table.add_row(row);
    }
    terminal::right_align(&mut table, 2);
    let _ = writeln!(out, "{table}");
    if let Some(skipped) = p.map(|p| p.skipped).filter(|s| !s.is_empty()) {
        let _ = writeln!(
            out,
            "not run: {} (yield means nothing across CPUs)",
            skipped.join(", ")
        );
    }
    let refused: Vec<_> = record
        .threads
        .iter()
        .filter(|t| t.config.policy != t.config.policy_requested)
        .collect();
    if !refused.is_empty() {
        let _ = writeln!(
            out,
            "{} thread(s) ran with {} instead of {}",
            refused.len(),
            refused[0].config.policy,
            refused[0].config.policy_requested
        );
    }
    if let Some(note) = terminal::thin_note(
        record
            .measurements
            .iter()
            .filter_map(|m| m.latency.as_ref()),
    ) {
        let _ = writeln!(out, "{note}");
    }
    out
}

// --- seed 001 Table 3 -----------------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Context switch time with and without CPU load",
        "seed 001 Table 3",
    );
    let missing = r.missing(ID);
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    // Rows: class x primitive x placement; columns: loads.
    let mut cells: BTreeMap<(Class, String), BTreeMap<LoadCase, TableCell>> = BTreeMap::new();
    let mut loads = BTreeSet::new();
    for run in &runs {
        refused_note(&mut t, run);
        for (m, p) in run
            .record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<Handoff>()?)))
        {
            let load = if p.labels.cpu_load {
                LoadCase::One(ictus_probe::load::LoadKind::Cpu)
            } else {
                run.load.clone()
            };
            loads.insert(load.clone());
            let what = format!("{}, {}", p.labels.primitive, p.labels.placement);
            let cell = match &m.latency {
                Some(l) => match (l.summary.mean_ns, l.summary.stddev_ns) {
                    (Some(mean), Some(sd)) => TableCell::num(
                        format!("{} (SD={})", format::ns(mean), format::ns(sd)),
                        mean,
                    ),
                    _ => TableCell::empty(),
                },
                None => TableCell::empty(),
            };
            cells
                .entry((run.class, what))
                .or_default()
                .insert(load, cell);
        }
    }
    for (c, _) in &missing {
        loads.insert(c.load.clone());
    }
    t.keys = vec!["configuration".into(), "primitive, placement".into()];
    t.columns = loads
        .iter()
        .map(|l| {
            Column::new(match l {
                LoadCase::Idle => "no load".to_string(),
                other => load_name(other),
            })
        })
        .collect();
    for ((class, what), by_load) in &cells {
        t.rows.push(Row {
            keys: vec![class_name(*class).to_string(), what.clone()],
            cells: loads
                .iter()
                .map(|l| {
                    by_load.get(l).cloned().unwrap_or_else(|| {
                        missing
                            .iter()
                            .find(|(c, _)| c.class == *class && &c.load == l)
                            .map_or(TableCell::text("not in the survey"), |(_, why)| {
                                TableCell::text(why.clone())
                            })
                    })
                })
                .collect(),
        });
    }
    t.caption = "One-way hand-off time between two threads (one wakes the other and the kernel switches to it), mean and standard deviation, as the seed's context switch time; CPU load is a busy thread on each measured CPU. Futex hand-offs are what semaphores and mutexes use; same-cpu is a true context switch, cross-cpu a wake-up on another CPU.".to_string();
    t
}

/// The hand-off time tails of every configuration, load and placement.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    let mut series = Vec::new();
    let mut runs: Vec<&Run> = r.of(ID).collect();
    runs.sort_by_key(|x| x.config());
    for run in runs {
        for m in &run.record.measurements {
            if let (Some(p), Some(l)) = (m.read::<Handoff>(), &m.latency) {
                let load = if p.labels.cpu_load {
                    "cpu load".to_string()
                } else {
                    load_name(&run.load)
                };
                series.push((
                    format!("{}, {load}, {}", class_name(run.class), p.labels.placement),
                    &l.histogram,
                ));
            }
        }
    }
    list.push(Plot::figure(
        plots::exceedance("Hand-off time tails", &series),
        "Share of hand-offs taking at least this long, per configuration, load and placement (log-log).",
    ));
    list
}
