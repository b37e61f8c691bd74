//! What the report says about `jitter`: the execution-time variation of a fixed routine.
//! Its terminal view (what `ictus probe jitter` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::jitter::{JitterParams, Routine};
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::jitter::{Runs, SlowRun};
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `jitter`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Jitter,
    terminal: render,
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
