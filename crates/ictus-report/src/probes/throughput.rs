//! What the report says about `throughput`: payload throughput by transport and size.
//! Its terminal view (what `ictus probe throughput` prints).

use std::fmt::Write as _;
use comfy_table::Cell;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::throughput::{
    Mode, Placement, Transport,
};
use ictus_probe::view::Point;
use ictus_probe::view::rendezvous::CachelineRoundTrip;
use ictus_probe::view::throughput::{Memcpy, Targets, Transfer};
use crate::probes::ProbeReport;
use crate::terminal;

/// The report of `throughput`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    id: ProbeId::Throughput,
    terminal: render,
};

/// Microseconds with 0.01 us resolution from a nanosecond figure, or `-`.
fn micros(ns: Option<f64>) -> String {
    ns.map_or_else(|| "-".into(), |v| format!("{:.2}", v / 1e3))
}

/// A payload size for tables: `0 B`, `512 B`, `32 KiB`.
fn size(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// One table per transport and placement (seed 004 Figures 6 and 7 as numbers), the
/// references, then the targets.
fn render(record: &RunRecord) -> String {
    let mut out = terminal::headline(record);
    let memcpy: Vec<(usize, f64)> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Memcpy>())
        .map(|p| (p.labels.payload_bytes, p.metrics.bytes_per_s))
        .collect();
    let transfers: Vec<Point<Transfer>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Transfer>())
        .collect();
    let mut groups: Vec<(Transport, Placement)> = Vec::new();
    for p in &transfers {
        let key = (p.labels.transport, p.labels.placement);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for &(transport, placement) in &groups {
        let rows: Vec<&Point<Transfer>> = transfers
            .iter()
            .filter(|p| p.labels.transport == transport && p.labels.placement == placement)
            .collect();
        let mode = rows.first().map(|p| p.labels.mode);
        let cpus = rows
            .first()
            .map(|p| format!("[{},{}]", p.labels.cpus[0], p.labels.cpus[1]));
        let _ = writeln!(
            out,
            "\n{transport}, {placement} (CPUs {}), {} mode; latencies in microseconds:",
            cpus.as_deref().unwrap_or("?"),
            mode.map_or("?", Mode::name)
        );
        let sync = mode == Some(Mode::Sync);
        let mut table = terminal::table();
        let mut header = vec![
            "payload",
            "MB/s",
            "x memcpy",
            "msgs/s",
            "one-way p50",
            "p99",
            "max",
        ];
        if sync {
            header.push("round trip p50");
            header.push("one-way (rt/2)");
        }
        table.set_header(header);
        for p in rows {
            let n = p.labels.payload_bytes;
            let m = &p.metrics;
            let rate = m.bytes_per_s;
            let vs_memcpy = memcpy
                .iter()
                .find(|(size, _)| *size == n)
                .and_then(|&(_, r)| Some(rate / r).filter(|_| n > 0 && r > 0.0));
            let mut row = vec![
                Cell::new(size(n)),
                Cell::new(format!("{:.1}", rate / 1e6)),
                Cell::new(vs_memcpy.map_or("-".into(), |v| format!("{v:.3}"))),
                Cell::new(format!("{:.0}", m.messages_per_s)),
                Cell::new(micros(m.one_way_p50_ns)),
                Cell::new(micros(m.one_way_p99_ns)),
                Cell::new(micros(m.one_way_max_ns)),
            ];
            if sync {
                row.push(Cell::new(micros(m.round_trip_p50_ns)));
                row.push(Cell::new(micros(m.one_way_half_round_trip_ns)));
            }
            table.add_row(row);
        }
        terminal::right_align(&mut table, 0);
        let _ = writeln!(out, "{table}");
    }
    if let Some(rt) = record
        .measurements
        .iter()
        .find_map(|m| m.read::<CachelineRoundTrip>())
    {
        let ns = rt.metrics.ns_per_round_trip;
        let _ = writeln!(
            out,
            "\nbare cache-line round trip on CPUs {}: {ns:.0} ns (half: {:.0} ns)",
            rt.labels.cpus,
            ns / 2.0
        );
    }
    if let Some(big) = memcpy.iter().max_by_key(|(n, _)| *n) {
        let _ = writeln!(
            out,
            "memcpy on one CPU: {:.0} MB/s at {}",
            big.1 / 1e6,
            size(big.0)
        );
    }
    if let Some(t) = record.measurements.iter().find_map(|m| m.read::<Targets>()) {
        let one_way = t
            .metrics
            .spsc_one_way_vs_half_round_trip
            .map_or("not measured".into(), |r| {
                format!("{r:.2} ({})", if r <= 1.5 { "met" } else { "missed" })
            });
        let bandwidth = t.metrics.spsc_vs_memcpy.map_or("not measured".into(), |r| {
            format!("{r:.2} ({})", if r >= 0.5 { "met" } else { "missed" })
        });
        let _ = writeln!(
            out,
            "targets: spsc one-way (half its untimed round trip) / half the bare round trip \
             = {one_way}, target <= 1.5; \
             spsc / memcpy at {} = {bandwidth}, target >= 0.5",
            size(t.labels.bandwidth_payload_bytes as usize)
        );
    }
    out
}
