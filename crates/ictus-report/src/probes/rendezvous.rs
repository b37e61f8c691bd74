//! What the report says about `rendezvous`: spin rendezvous between cores (seed 000 Table 6).
//! Its terminal view (what `ictus probe rendezvous` prints) and its seed table.

use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::rendezvous::view::{CachelineRoundTrip, Rendezvous};
use ictus_probe::view::Point;

use crate::probes::ProbeReport;
use crate::results::Results;
use crate::tables::{
    Cell as TableCell, Column, Row, Table, configuration_key, row_keys, runs_of, setup_words, table,
};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Rendezvous;

/// The report of `rendezvous`.
pub(crate) const REPORT: ProbeReport = ProbeReport {
    latency: true,
    ..ProbeReport::new(ID, render, 2, |r| vec![seed_table(r)], |_| Vec::new())
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

// --- seed 000 Table 6 -----------------------------------------------------------

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Rendezvous frequency by threads and spacing",
        "seed 000 Table 6",
    );
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.extend([
        "threads".to_string(),
        "position of the flags".to_string(),
        "data".to_string(),
    ]);
    t.columns = vec![
        Column::new("frequency"),
        Column::new("per rendezvous"),
        Column::new("vs bare cache-line round trip"),
    ];
    let mut limit = None;
    for run in &runs {
        for m in &run.record.measurements {
            if let Some(c) = m.read::<CachelineRoundTrip>() {
                limit = Some(c.metrics.ns_per_round_trip);
            }
            let Some(p) = m.read::<Rendezvous>() else {
                continue;
            };
            let mut keys = row_keys(several, run);
            let payload = p.labels.payload_bytes;
            keys.extend([
                p.labels.threads.to_string(),
                p.labels.spacing,
                if payload == 0 {
                    "none".to_string()
                } else {
                    format!("{payload} B each way")
                },
            ]);
            let rate = p.metrics.rendezvous_per_s;
            let per = p.metrics.ns_per_rendezvous;
            let vs = p.metrics.vs_cacheline_limit;
            t.rows.push(Row {
                keys,
                cells: vec![
                    rate.map_or(TableCell::empty(), |v| {
                        TableCell::num(format!("{} kHz", format::sig3(v / 1e3)), v)
                    }),
                    per.map_or(TableCell::empty(), TableCell::ns),
                    vs.map_or(TableCell::empty(), |v| TableCell::num(format!("{v:.2}"), v)),
                ],
            });
        }
    }
    t.caption = format!(
        "Rendezvous per second by spinning on shared flags, without extra load ({}), by number of threads and the distance between their flags, as the seed measured; with and without 512 B exchanged each way (seed 000 Table 1a's payload).{}",
        setup_words(runs[0]),
        limit.map_or(String::new(), |l| format!(
            " The last column compares with the bare cache-line round trip between the two CPUs ({}), the hardware's limit.",
            format::ns(l)
        )),
    );
    t
}
