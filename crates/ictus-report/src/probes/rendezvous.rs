//! What the report says about `rendezvous`: spin rendezvous between cores (seed 000 Table 6).
//! Its terminal view (what `ictus probe rendezvous` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::Point;
use ictus_probe::view::rendezvous::{CachelineRoundTrip, Rendezvous};
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `rendezvous`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Rendezvous,
    terminal: render,
};

/// `v` with `decimals` decimals, or `-` when it was not measured.
fn fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

/// Seed 000 Table 6's shape: rate by thread count and spacing, then the distributions.
fn render(record: &RunRecord) -> String {
    let mut out = terminal::headline(record);
    if let Some(rt) = record
        .measurements
        .iter()
        .find_map(|m| m.read::<CachelineRoundTrip>())
    {
        let _ = writeln!(
            out,
            "bare cache-line round trip on CPUs {}: {:.0} ns ({} M/s)",
            rt.labels.cpus,
            rt.metrics.ns_per_round_trip,
            fixed(rt.metrics.round_trips_per_s.map(|r| r / 1e6), 2)
        );
    }
    let _ = writeln!(
        out,
        "per-rendezvous time in microseconds (each sample includes one clock read):"
    );
    let mut table = terminal::table();
    let mut header = vec!["threads", "flags", "payload", "kHz", "ns each", "vs limit"];
    header.extend(terminal::latency_header_without_missed());
    table.set_header(header);
    for m in &record.measurements {
        let Some(Point { labels, metrics }) = m.read::<Rendezvous>() else {
            continue;
        };
        let mut row = vec![
            Cell::new(labels.threads),
            Cell::new(labels.spacing),
            Cell::new(format!("{} B", labels.payload_bytes)),
            Cell::new(fixed(metrics.rendezvous_per_s.map(|r| r / 1e3), 0)),
            Cell::new(fixed(metrics.ns_per_rendezvous, 0)),
            Cell::new(format!("{}x", fixed(metrics.vs_cacheline_limit, 2))),
        ];
        if let Some(l) = &m.latency {
            row.extend(terminal::latency_cells_without_missed(l));
        }
        table.add_row(row);
    }
    terminal::right_align(&mut table, 3);
    let _ = writeln!(out, "{table}");
    let _ = writeln!(
        out,
        "vs limit: the rendezvous rate over the bare cache-line round-trip rate (the issue's bar for 2 threads: at least 0.8)."
    );
    out
}
