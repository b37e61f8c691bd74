//! What the report says about `timer`: the wake-up latency of a periodic thread.
//! Its terminal view (what `ictus probe timer` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::timer;
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `timer`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Timer,
    terminal: render,
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
