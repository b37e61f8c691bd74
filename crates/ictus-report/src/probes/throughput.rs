//! What the report says about `throughput`: payload throughput by transport and size.
//! Its terminal view (what `ictus probe throughput` prints), its seed table and its plots.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_probe::record::{Measurement, RunRecord};
use ictus_probe::registry::ProbeId;
use ictus_probe::rendezvous::view::CachelineRoundTrip;
use ictus_probe::throughput::view::{Memcpy, Targets, Transfer};
use ictus_probe::throughput::{Pacing, Placement, Transport};
use ictus_probe::view::Point;

use crate::plots::{self, Axes, Plot};
use crate::probes::ProbeReport;
use crate::results::Results;
use crate::tables::{Cell as TableCell, Column, Row, Table, runs_of, setup_words, table};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Throughput;

/// The report of `throughput`.
pub(crate) const REPORT: ProbeReport =
    ProbeReport::new(ID, render, 7, |r| vec![seed_table(r)], figures);

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
            mode.map_or("?", Pacing::name)
        );
        let sync = mode == Some(Pacing::Sync);
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

// --- seed 004 Figures 6 and 7 ---------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Port throughput by payload",
        "seed 004 Figures 6 and 7",
    );
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    let mut series: Vec<String> = Vec::new();
    let mut points: BTreeMap<usize, BTreeMap<String, f64>> = BTreeMap::new();
    let mut mode = None;
    for run in &runs {
        for m in &run.record.measurements {
            let Some((name, size, rate)) = rate_point(m) else {
                continue;
            };
            if let Some(p) = m.read::<Transfer>() {
                mode = mode.or(Some(p.labels.mode));
            }
            if !series.contains(&name) {
                series.push(name.clone());
            }
            points.entry(size).or_default().insert(name, rate);
        }
    }
    // memcpy last: it is the bound, not a transport.
    series.sort_by_key(|s| s.starts_with("memcpy"));
    t.keys = vec!["payload".into()];
    t.columns = series.iter().map(|s| Column::new(s.clone())).collect();
    for (size, by) in &points {
        t.rows.push(Row {
            keys: vec![format::bytes(*size as f64)],
            cells: series
                .iter()
                .map(|s| {
                    by.get(s).map_or(TableCell::empty(), |&v| {
                        TableCell::num(format::mb_per_s(v), v)
                    })
                })
                .collect(),
        });
    }
    t.caption = format!(
        "Payload bytes per second from one thread to another by payload size, as seed 004's port test ({} mode: {}), with a plain memcpy on one CPU as the bound; {}.",
        mode.map_or("sync", Pacing::name),
        if mode == Some(Pacing::Stream) {
            "the sender waits only when the transport is full"
        } else {
            "each message is acknowledged before the next is sent"
        },
        setup_words(runs[0])
    );
    t
}

/// A throughput record's transfer or memcpy point: its series (`spsc, cross-cpu`,
/// `memcpy (one CPU)`), payload and bytes per second.
pub(crate) fn rate_point(m: &Measurement) -> Option<(String, usize, f64)> {
    if let Some(p) = m.read::<Transfer>() {
        let name = format!("{}, {}", p.labels.transport, p.labels.placement);
        return Some((name, p.labels.payload_bytes, p.metrics.bytes_per_s));
    }
    let p = m.read::<Memcpy>()?;
    Some((
        "memcpy (one CPU)".to_string(),
        p.labels.payload_bytes,
        p.metrics.bytes_per_s,
    ))
}

/// The payload throughput against its size, one curve per transport and placement
/// and one for memcpy.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for run in r.of(ID) {
        for m in &run.record.measurements {
            let Some((name, size, rate)) = rate_point(m) else {
                continue;
            };
            let size = size as f64;
            match series.iter_mut().find(|(n, _)| *n == name) {
                Some((_, p)) => p.push((size, rate / 1e6)),
                None => series.push((name, vec![(size, rate / 1e6)])),
            }
        }
    }
    let axes = Axes {
        x_desc: "payload",
        y_desc: "MB/s",
        x_fmt: &plots::tick_bytes,
        y_fmt: &plots::tick_num,
        x_bytes: true,
    };
    list.push(Plot::figure(
        plots::curves("Throughput by payload", &axes, &series, &[]),
        "Payload throughput against payload size (log-log), as seed 004's Figures 6 and 7.",
    ));
    list
}
