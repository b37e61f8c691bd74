//! What the report says about `memlat`: memory access time by working set and stride.
//! Its terminal view (what `ictus probe memlat` prints), its seed table and its plots.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::Nanos;
use ictus_probe::memlat;
use ictus_probe::memlat::view::{
    Access, CHASE, Cache, CacheLabels, Chase, Knee, STRIDED_READ, STRIDED_WRITE, Strided,
};
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::view::{AllOr, Point};

use crate::plots::{self, Axes, Plot};
use crate::probes::ProbeReport;
use crate::results::{Results, Run};
use crate::tables::{
    Cell as TableCell, Column, Row, Table, configuration_key, row_keys, runs_of, setup_words, table,
};
use crate::{format, terminal};

/// This probe.
const ID: ProbeId = ProbeId::Memlat;

/// The report of `memlat`.
pub(crate) const REPORT: ProbeReport =
    ProbeReport::new(ID, render, 1, |r| vec![seed_table(r)], figures);

/// A strided point with fewer accesses than this per pass is marked in the view.
const SHORT_PASS: usize = 8;

fn bytes(n: usize) -> String {
    memlat::format_bytes(n as u64)
}

/// A latency in ns with three significant digits or so.
fn ns(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The human view: the chase curve, the strided table, the cache stages.
fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<memlat::ParamsRecord>();
    let cpus = p.as_ref().map_or(String::new(), |p| {
        p.cpus
            .cpus()
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    let _ = writeln!(
        out,
        "memlat: up to {} thread(s) on CPUs {cpus}, {} pages, {} repetitions of {} per point, {}{}",
        p.as_ref().map_or(1, |p| p.threads),
        p.as_ref().map_or("?", |p| p.pages.as_str()),
        p.as_ref().map_or(0, |p| p.repeat),
        Nanos::new(p.as_ref().map_or(0, |p| p.point_time_ns)),
        p.as_ref()
            .map_or_else(|| "?".to_string(), |p| p.policy.to_string()),
        if record.obtained.mlock {
            ", memory locked"
        } else {
            ""
        },
    );
    render_chase(&mut out, record);
    render_strided(&mut out, record);
    render_stages(&mut out, record);
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "in short: {h}");
    }
    out
}

fn render_chase(out: &mut String, record: &RunRecord) {
    let chase: Vec<Point<Chase>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Chase>())
        .collect();
    if chase.is_empty() {
        return;
    }
    let counts: BTreeSet<usize> = chase.iter().map(|p| p.labels.threads).collect();
    let sizes: BTreeSet<usize> = chase.iter().map(|p| p.labels.working_set_bytes).collect();
    let _ = writeln!(
        out,
        "\npointer chase (one random cycle over 64-byte lines), ns per load, median of the \
         repetitions [min-max]:"
    );
    let mut table = terminal::table();
    let mut header = vec!["working set".to_string()];
    for &k in &counts {
        if k == 1 {
            header.push("1 thread".into());
        } else {
            header.push(format!("{k} threads (mean)"));
            header.push(format!("{k} threads, each"));
        }
    }
    table.set_header(header);
    for &size in &sizes {
        let mut row = vec![Cell::new(bytes(size))];
        for &k in &counts {
            let here: Vec<&Point<Chase>> = chase
                .iter()
                .filter(|p| p.labels.working_set_bytes == size && p.labels.threads == k)
                .collect();
            let agg = here.iter().find(|p| p.labels.thread == AllOr::All);
            row.push(Cell::new(agg.map_or("-".into(), |p| {
                format!(
                    "{} [{}-{}]",
                    ns(p.metrics.ns_per_load),
                    ns(p.metrics.ns_per_load_min),
                    ns(p.metrics.ns_per_load_max)
                )
            })));
            if k > 1 {
                let each: Vec<String> = here
                    .iter()
                    .filter(|p| p.labels.thread != AllOr::All)
                    .map(|p| ns(p.metrics.ns_per_load))
                    .collect();
                row.push(Cell::new(each.join(" / ")));
            }
        }
        table.add_row(row);
    }
    terminal::right_align(&mut table, 1);
    let _ = writeln!(out, "{table}");
}

fn render_strided(out: &mut String, record: &RunRecord) {
    // The aggregates of each point, with their names (read or write).
    let strided: Vec<(&str, Point<Strided>)> = record
        .measurements
        .iter()
        .filter_map(|m| Some((m.name.as_str(), m.read::<Strided>()?)))
        .filter(|(_, p)| p.labels.thread == AllOr::All)
        .collect();
    if strided.is_empty() {
        return;
    }
    let counts: BTreeSet<usize> = strided.iter().map(|(_, p)| p.labels.threads).collect();
    let strides: BTreeSet<usize> = strided
        .iter()
        .filter_map(|(_, p)| p.labels.stride_bytes)
        .collect();
    let sizes: BTreeSet<usize> = strided
        .iter()
        .map(|(_, p)| p.labels.working_set_bytes)
        .collect();
    for &k in &counts {
        let _ = writeln!(
            out,
            "\nstrided 64-bit accesses ({}), ns per access (median), read / write, by stride:",
            if k == 1 {
                "1 thread".to_string()
            } else {
                format!("{k} threads at once, mean per thread")
            }
        );
        let mut table = terminal::table();
        let mut header = vec!["working set".to_string()];
        header.extend(strides.iter().map(|s| format!("{s} B")));
        header.push("GB/s (lines, 64 B stride read)".into());
        table.set_header(header);
        let find = |name: &str, size: usize, stride: usize| {
            strided.iter().map(|(n, p)| (*n, p)).find(|(n, p)| {
                *n == name
                    && p.labels.working_set_bytes == size
                    && p.labels.stride_bytes == Some(stride)
                    && p.labels.threads == k
            })
        };
        let mut any_short = false;
        for &size in &sizes {
            let mut row = vec![Cell::new(bytes(size))];
            for &stride in &strides {
                let fig = |name| {
                    find(name, size, stride)
                        .map_or("-".into(), |(_, p)| ns(p.metrics.ns_per_access))
                };
                let short = size / stride < SHORT_PASS;
                any_short |= short;
                row.push(Cell::new(format!(
                    "{}{} / {}",
                    if short { "*" } else { "" },
                    fig(STRIDED_READ),
                    fig(STRIDED_WRITE)
                )));
            }
            let bw = find(STRIDED_READ, size, 64).map_or("-".into(), |(_, p)| {
                format!("{:.1}", p.metrics.line_bytes_per_s / 1e9)
            });
            row.push(Cell::new(bw));
            table.add_row(row);
        }
        terminal::right_align(&mut table, 1);
        let _ = writeln!(out, "{table}");
        if any_short {
            let _ = writeln!(
                out,
                "* fewer than {SHORT_PASS} accesses per pass over the working set: the same few \
                 words again and again, and the loop's own cost shows."
            );
        }
    }
}

fn render_stages(out: &mut String, record: &RunRecord) {
    let caches: Vec<Point<Cache>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Cache>())
        .collect();
    let knees: Vec<Point<Knee>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Knee>())
        .collect();
    let chase_ran = record.measurements.iter().any(|m| m.is::<Chase>());
    if !chase_ran || (caches.is_empty() && knees.is_empty()) {
        return;
    }
    let knee_ratio = record
        .parameters_as::<memlat::ParamsRecord>()
        .map_or(1.5, |p| p.knee_ratio);
    let _ = writeln!(
        out,
        "\ncache stages: the kernel's caches beside the knees of the 1-thread chase \
         (a rise of more than {knee_ratio}x between working sets):"
    );
    let knee_text = |k: &Point<Knee>| {
        format!(
            "knee between {} and {} (measured): {} -> {} ns",
            bytes(k.labels.lower_bytes),
            bytes(k.labels.upper_bytes),
            ns(k.metrics.ns_below),
            ns(k.metrics.ns_above)
        )
    };
    for c in &caches {
        let CacheLabels {
            cache: name,
            cache_bytes,
            shared_cpus: shared,
        } = &c.labels;
        let size = memlat::format_bytes(*cache_bytes);
        let scope = if shared.contains(['-', ',']) {
            format!(" (kernel, shared by CPUs {shared})")
        } else {
            " (kernel)".to_string()
        };
        let knee = knees.iter().find(|k| k.labels.cache.as_ref() == Some(name));
        let _ = writeln!(
            out,
            "  {name} {size}{scope} ~ {}",
            knee.map_or("no knee measured near it".to_string(), knee_text)
        );
    }
    for k in knees.iter().filter(|k| k.labels.cache.is_none()) {
        let _ = writeln!(
            out,
            "  {}; no kernel-reported cache of that size (TLB reach or a shared cache's \
             effective size?)",
            knee_text(k)
        );
    }
}

// --- seed 000 Table 5 -----------------------------------------------------------

/// The data caches a memlat record lists, smallest first (`L1d`, `L2`, `L3`).
pub(crate) fn caches(run: &Run) -> Vec<(String, u64)> {
    let mut c: Vec<(String, u64)> = run
        .record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Cache>())
        .filter(|c| c.labels.cache != "L1i")
        .map(|c| (c.labels.cache, c.labels.cache_bytes))
        .collect();
    c.sort_by_key(|(_, size)| *size);
    c
}

fn seed_table(r: &Results) -> Table {
    let mut t = table(
        ID.name(),
        "Memory access time by stride",
        "seed 000 Table 5",
    );
    let Some(runs) = runs_of(r, &mut t, ID) else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys
        .extend(["working set".to_string(), "fits in".to_string()]);
    // Columns: the chase, then reads and writes by stride (the seed's "space").
    let mut strides = BTreeSet::new();
    for run in &runs {
        for m in &run.record.measurements {
            if let Some(s) = m.read::<Strided>().and_then(|p| p.labels.stride_bytes) {
                strides.insert(s);
            }
        }
    }
    let mut kinds = vec![(CHASE, None)];
    t.columns.push(Column::new("random chase, per load"));
    for (kind, verb) in [(STRIDED_READ, "read"), (STRIDED_WRITE, "write")] {
        for &s in &strides {
            kinds.push((kind, Some(s)));
            t.columns.push(Column::new(format!("{verb}, space {s} B")));
        }
    }
    let mut repeat = None;
    for run in &runs {
        repeat = run
            .record
            .parameters_as::<memlat::ParamsRecord>()
            .map(|p| p.repeat);
        let caches = caches(run);
        // The one-thread points: (name, labels, ns per access).
        let points: Vec<(&str, Access)> = run
            .record
            .measurements
            .iter()
            .filter_map(|m| Some((m.name.as_str(), Access::read(m)?)))
            .filter(|(_, a)| a.labels.threads == 1)
            .collect();
        let sizes: BTreeSet<usize> = points
            .iter()
            .map(|(_, a)| a.labels.working_set_bytes)
            .collect();
        for size in sizes {
            let fits = caches
                .iter()
                .find(|(_, c)| size as u64 <= *c)
                .map_or("memory".to_string(), |(n, _)| n.clone());
            let mut keys = row_keys(several, run);
            keys.extend([format::bytes(size as f64), fits]);
            let cells = kinds
                .iter()
                .map(|&(kind, stride)| {
                    let at = points.iter().find(|(name, a)| {
                        *name == kind
                            && a.labels.working_set_bytes == size
                            && a.labels.stride_bytes == stride
                    });
                    at.map_or(TableCell::empty(), |(_, a)| TableCell::ns(a.ns))
                })
                .collect();
            t.rows.push(Row { keys, cells });
        }
    }
    let cache_list: Vec<String> = runs
        .first()
        .map(|run| {
            caches(run)
                .iter()
                .map(|(n, s)| format!("{n} {}", format::bytes(*s as f64)))
                .collect()
        })
        .unwrap_or_default();
    t.caption = format!(
        "Average time per 64-bit access, one thread, no load ({}): reads and writes `space` bytes apart, as the seed's columns, and a dependent random chase, whose steps show the cache stages{}. Median of {} repetitions.",
        setup_words(runs[0]),
        if cache_list.is_empty() {
            String::new()
        } else {
            format!(" (the kernel reports {})", cache_list.join(", "))
        },
        repeat.map_or("the".to_string(), |n| n.to_string()),
    );
    t
}

/// Per memlat run: the time per access against the working set, one curve per
/// access pattern, the cache sizes marked.
fn figures(r: &Results) -> Vec<Plot> {
    let mut list = Vec::new();
    for run in r.of(ID) {
        let marks: Vec<(f64, String)> = caches(run)
            .into_iter()
            .map(|(n, s)| (s as f64, format!("{n} {}", format::bytes(s as f64))))
            .collect();
        let axes = Axes {
            x_desc: "working set",
            y_desc: "time per access",
            x_fmt: &plots::tick_bytes,
            y_fmt: &plots::tick_ns,
            x_bytes: true,
        };
        list.push(Plot::figure(
            plots::curves(
                "Memory latency by working set",
                &axes,
                &memlat_series(run),
                &marks,
            ),
            "Time per access against the working set (log-log); vertical lines are the cache sizes the kernel reports. The random chase steps up at each level.",
        ));
    }
    list
}

/// One curve per access pattern of a memlat run (single-threaded measurements only):
/// (working set in bytes, ns per access).
fn memlat_series(run: &Run) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for m in &run.record.measurements {
        let Some(a) = Access::read(m).filter(|a| a.labels.threads == 1) else {
            continue;
        };
        let name = if m.name == CHASE {
            "random chase".to_string()
        } else {
            format!(
                "{}, space {} B",
                m.name.trim_start_matches("strided-"),
                a.labels.stride_bytes.unwrap_or(0)
            )
        };
        let (ws, v) = (a.labels.working_set_bytes as f64, a.ns);
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, p)) => p.push((ws, v)),
            None => series.push((name, vec![(ws, v)])),
        }
    }
    series
}
