//! What the report says about `compute`: computing power on a mass-interaction model (seed 000 Table 7).
//! Its terminal view (what `ictus probe compute` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::Point;
use ictus_probe::view::compute::{MODEL_SIZE, SPLIT, Step};
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `compute`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Compute,
    terminal: render,
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
