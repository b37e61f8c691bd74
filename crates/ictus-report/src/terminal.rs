//! The terminal backend: the tables, headline and footer every probe's human view is
//! built from (comfy-table, horizontal rules only, numbers right-aligned), and the
//! document's glance laid out for a terminal. It knows no probe: each probe's view
//! lives in its file under [`crate::probes`].

use std::fmt::Write as _;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use ictus_core::{Nanos, Percentile};
use ictus_probe::record::{LatencyResult, RunRecord};

use crate::doc::Glance;

/// The glance as a table 120 columns wide at most, then the advice, a line each.
pub(crate) fn glance(g: &Glance) -> String {
    let mut t = table();
    t.set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(120);
    t.set_header(&g.table.header);
    for row in &g.table.rows {
        t.add_row(row);
    }
    let mut out = format!("{t}\n");
    for (place, a) in &g.advice {
        let _ = writeln!(out, "advice ({place}): {a}");
    }
    out
}

/// What most human views begin with: the record's headline on a line of its own, when
/// it has one.
pub fn headline(record: &RunRecord) -> String {
    let mut out = String::new();
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// An empty table in the style of every human view: horizontal rules only.
pub fn table() -> Table {
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table
}

/// Aligns the columns of `table` from `from` on to the right (where the numbers are).
pub fn right_align(table: &mut Table, from: usize) {
    for col in from..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// What every human view ends with: incompleteness, steal time, the clock, warnings.
pub fn footer(record: &RunRecord) -> String {
    let mut out = String::new();
    if !record.complete {
        let _ = writeln!(
            out,
            "INCOMPLETE: stopped early; the figures cover what ran."
        );
    }
    for l in &record.environment.loads {
        let figures: Vec<String> = l
            .metrics
            .iter()
            .map(|(k, v)| format!("{k} {v:.3e}"))
            .collect();
        let _ = writeln!(
            out,
            "load {} on CPUs {} ({} workers): {}",
            l.kind.name(),
            l.cpus,
            l.workers,
            figures.join(", ")
        );
    }
    if let Some(steal) = &record.environment.steal {
        let _ = writeln!(
            out,
            "steal time during the run: {} ({:.3} % of all CPUs)",
            Nanos::new(steal.total_ns),
            steal.share * 100.0
        );
    }
    if let Some(clock) = &record.environment.clock {
        let _ = writeln!(
            out,
            "clock: {} (resolution {}), a read costs {} (p50), {} (max of {})",
            clock
                .clocksource
                .as_deref()
                .unwrap_or("unknown clocksource"),
            fmt(clock.resolution_ns.map(Nanos::new)),
            fmt(clock.read_cost.p50_ns),
            fmt(clock.read_cost.max_ns),
            clock.read_cost.count
        );
    }
    if let Some(q) = &record.obtained.pm_qos {
        let _ = writeln!(
            out,
            "CPU latency QoS (/dev/cpu_dma_latency): {}",
            q.phrase()
        );
    }
    if let Some(e) = &record.explanation {
        out.push_str(&why_the_misses(e, 10));
    }
    for w in &record.warnings {
        let _ = writeln!(out, "warning: {}", w.message);
        if let Some(a) = &w.advice {
            let _ = writeln!(out, "  advice: {a}");
        }
    }
    out
}

/// The "why the misses" section: the breakdown, then the first `listed` explained
/// misses, then how the sampler ran.
pub fn why_the_misses(e: &ictus_explain::Explanation, listed: usize) -> String {
    let mut out = String::new();
    // Overruns are counted where the measuring loop has a budget (the executive's
    // subsystems), so they are named only where they occur.
    let overruns = e
        .events
        .iter()
        .any(|ev| ev.kind == ictus_explain::MissKind::Overrun);
    let _ = writeln!(
        out,
        "why the misses (releases {} or more late, missed periods{}): {}",
        Nanos::new(e.threshold_ns),
        if overruns { ", overruns" } else { "" },
        e.breakdown.summary()
    );
    if let Some(a) = ictus_explain::advice(e) {
        let _ = writeln!(out, "  advice: {a}");
    }
    for ev in e.events.iter().take(listed) {
        let _ = writeln!(out, "  {ev}");
    }
    let more = (e.events.len().saturating_sub(listed)) as u64 + e.events_not_kept;
    if more > 0 {
        let _ = writeln!(out, "  ... and {more} more (all in the record)");
    }
    let s = &e.sampler;
    let _ = writeln!(
        out,
        "  sampler: every {} on CPU(s) {}{}, {} readings (mean {}, max {}), {} thread scans{}",
        Nanos::new(s.period_ns),
        s.cpus,
        if s.shares_watched_cpu {
            " (shared with the measured threads)"
        } else {
            ""
        },
        s.samples,
        Nanos::new(s.reading_mean_ns),
        Nanos::new(s.reading_max_ns),
        s.task_scans,
        s.cpu_share().map_or(String::new(), |share| format!(
            ", {:.2} % of a CPU ({} run in {}){}",
            share * 100.0,
            Nanos::new(s.cpu_ns),
            Nanos::new(s.wall_ns),
            budget_words(s)
        ))
    );
    out
}

/// A time with its unit, or `-`.
pub fn fmt(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// A latency in microseconds with 0.1 us resolution, or `-`.
pub fn micros(v: Option<Nanos>) -> String {
    v.map_or_else(|| "-".to_string(), |n| format!("{:.1}", n.as_micros_f64()))
}

/// The header cells of a latency row (after the caller's own leading columns).
pub fn latency_header() -> Vec<&'static str> {
    let mut header = vec!["count", "min", "mean"];
    header.extend(Percentile::ALL.iter().map(|p| p.label()));
    header.extend(["max", "missed (run)"]);
    header
}

/// A latency row in microseconds; percentiles too few samples support are marked `~`.
pub fn latency_cells(r: &LatencyResult) -> Vec<Cell> {
    let s = &r.summary;
    let mut cells = vec![
        Cell::new(s.count),
        Cell::new(micros(s.min_ns)),
        Cell::new(micros(s.mean_ns.map(|m| Nanos::new(m.round() as u64)))),
    ];
    for p in Percentile::ALL {
        let mut v = micros(s.percentile(p));
        if !s.supports(p) {
            v.insert(0, '~');
        }
        cells.push(Cell::new(v));
    }
    cells.push(Cell::new(micros(s.max_ns)));
    cells.push(Cell::new(format!("{} ({})", r.missed, r.longest_miss_run)));
    cells
}

/// [`latency_header`] without the missed column, for what has no periods to miss.
pub fn latency_header_without_missed() -> Vec<&'static str> {
    let mut header = latency_header();
    header.pop();
    header
}

/// [`latency_cells`] without the missed column, for what has no periods to miss.
pub fn latency_cells_without_missed(r: &LatencyResult) -> Vec<Cell> {
    let mut cells = latency_cells(r);
    cells.pop();
    cells
}

/// The note explaining `~`, when any result in `results` has thin percentiles.
pub fn thin_note<'a>(results: impl IntoIterator<Item = &'a LatencyResult>) -> Option<&'static str> {
    results
        .into_iter()
        .any(|r| !r.thin_percentiles.is_empty())
        .then_some("~ marks a percentile that too few samples support (p99.99 needs 10,000, p99.999 100,000).")
}

/// The sampler's budget and, when it slowed down to hold it, by how much and for how
/// long (nothing for records without a budget).
fn budget_words(s: &ictus_explain::SamplerReport) -> String {
    if s.budget <= 0.0 {
        return String::new();
    }
    let mut w = format!(", budget {:.2} %", s.budget * 100.0);
    if s.slowest > 1 {
        w.push_str(&format!(
            ", its period stretched up to {}x for {} to hold it",
            s.slowest,
            Nanos::new(s.stretched_ns)
        ));
    }
    w
}
