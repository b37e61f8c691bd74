//! What the report says about `irq`: interrupt latency apart from thread latency (timerlat).
//! Its terminal view (what `ictus probe irq` prints); it has no seed table.

use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_probe::irq::view::Timerlat;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;

use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `irq`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Irq,
    terminal: render,
    table_order: u32::MAX,
    tables: |_| Vec::new(),
    plots: |_| Vec::new(),
    compare_plots: |_, _| None,
    latency: false,
    compare_note: None,
    verdict: false,
};

/// The verdict, then per CPU and context the latency distribution.
fn render(record: &RunRecord) -> String {
    let mut out = terminal::headline(record);
    if record.measurements.is_empty() {
        return out;
    }
    let _ = writeln!(out, "latency in microseconds:");
    let mut table = terminal::table();
    let mut header = vec!["CPU", "context"];
    header.extend(terminal::latency_header_without_missed());
    table.set_header(header);
    for m in &record.measurements {
        let Some(p) = m.read::<Timerlat>() else {
            continue;
        };
        let mut row = vec![Cell::new(p.labels.cpu), Cell::new(p.labels.context)];
        if let Some(l) = &m.latency {
            row.extend(terminal::latency_cells_without_missed(l));
        }
        table.add_row(row);
    }
    terminal::right_align(&mut table, 2);
    let _ = writeln!(out, "{table}");
    out
}
