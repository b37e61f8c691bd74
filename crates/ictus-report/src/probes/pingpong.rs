//! What the report says about `pingpong`: the hand-off time between two threads.
//! Its terminal view (what `ictus probe pingpong` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::pingpong;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::pingpong::Handoff;
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `pingpong`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Pingpong,
    terminal: render,
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
