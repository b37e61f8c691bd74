//! What the report says about `loop`: whether this machine holds a fully synchronous loop (seed 000 §3.1).
//! Its terminal view (what `ictus probe loop` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::Point;
use ictus_probe::view::r#loop::Trial;
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `loop`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Loop,
    terminal: render,
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
