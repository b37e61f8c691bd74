//! What the report says about the executive's run (`ictus run`, `ictus node`): the
//! record named [`RUN_RECORD`], written by `ictus_exec::run_record`. It is no probe of
//! the registry, but it is read, tabled and compared like one: its terminal view
//! (what `ictus run` prints: one row per subsystem, one per host across hosts, the
//! link's stages, what came late, the events) and its tables in the Markdown and HTML
//! reports and in `ictus compare` (none where the results hold no run).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::Cell;
use ictus_core::{Nanos, Percentile};
use ictus_exec::run_record::RunParams;
use ictus_probe::record::{LatencyResult, Measurement, RunRecord};
use ictus_probe::registry::RUN_RECORD;
use ictus_probe::view::Point;
use ictus_probe::view::run::{
    CellLatency, EXECUTION_TIME, LateArrivals, LinkStageDelay, RELEASE_JITTER, Stress, Subsystem,
    TickArrival,
};

use crate::results::{Results, Run};
use crate::tables::{Cell as TableCell, Column, Row, Table, pct_cell, table};
use crate::terminal;

/// Where the run's tables come from (a table's `seed`).
const SOURCE: &str = "ictus run";

/// A subsystem's figures: its counts (read from its release jitter), its release
/// jitter and its execution time.
struct SubsystemFigures<'a> {
    name: String,
    point: Point<Subsystem>,
    jitter: &'a Measurement,
    exec: Option<&'a Measurement>,
}

impl SubsystemFigures<'_> {
    /// Where it ran, and how it crashed if it did: `own (killed by signal 9)`.
    fn process(&self) -> String {
        let labels = &self.point.labels;
        match &labels.crashed {
            Some(c) => format!("{} ({c})", labels.process),
            None => labels.process.clone(),
        }
    }
}

/// A host's link figures: its ticks, and its cells when it reported them.
struct HostFigures<'a> {
    tick: &'a Measurement,
    point: Point<TickArrival>,
    cell: Option<(&'a Measurement, Point<CellLatency>)>,
}

/// A run record read once for every view: its parameters and its measurements by kind.
struct Figures<'a> {
    params: Option<RunParams>,
    /// In the schedule's order.
    subsystems: Vec<SubsystemFigures<'a>>,
    hosts: Vec<HostFigures<'a>>,
    /// In the record's order (a publication's).
    stages: Vec<(&'a Measurement, Point<LinkStageDelay>)>,
    /// The costliest (most frames) first.
    late: Vec<Point<LateArrivals>>,
}

impl<'a> Figures<'a> {
    fn of(record: &'a RunRecord) -> Self {
        let params = record.parameters_as::<RunParams>();
        type Pair<'a> = (
            Option<(&'a Measurement, Point<Subsystem>)>,
            Option<&'a Measurement>,
        );
        let mut by_name: BTreeMap<String, Pair<'a>> = BTreeMap::new();
        for m in &record.measurements {
            let Some(point) = m.read::<Subsystem>() else {
                continue;
            };
            let e = by_name.entry(point.labels.subsystem.clone()).or_default();
            match m.name.as_str() {
                RELEASE_JITTER => e.0 = Some((m, point)),
                EXECUTION_TIME => e.1 = Some(m),
                _ => {}
            }
        }
        // In the schedule's order; the names are unique (the schedule refuses twins).
        let subsystems = params
            .iter()
            .flat_map(|p| &p.subsystems)
            .filter_map(|s| match by_name.remove(&s.name)? {
                (Some((jitter, point)), exec) => Some(SubsystemFigures {
                    name: s.name.clone(),
                    point,
                    jitter,
                    exec,
                }),
                (None, _) => None,
            })
            .collect();
        let read = |m: &'a Measurement| Some((m, m.read::<CellLatency>()?));
        let hosts = record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<TickArrival>()?)))
            .map(|(tick, point)| HostFigures {
                cell: record
                    .measurements
                    .iter()
                    .filter_map(read)
                    .find(|(_, c)| c.labels.host == point.labels.host),
                tick,
                point,
            })
            .collect();
        let stages = record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<LinkStageDelay>()?)))
            .collect();
        let mut late: Vec<Point<LateArrivals>> = record
            .measurements
            .iter()
            .filter_map(|m| m.read::<LateArrivals>())
            .collect();
        late.sort_by(|a, b| b.metrics.frames.total_cmp(&a.metrics.frames));
        Figures {
            params,
            subsystems,
            hosts,
            stages,
            late,
        }
    }

    /// The events of the run, as its parameters recorded them.
    fn events(&self) -> impl Iterator<Item = &String> {
        self.params.iter().flat_map(|p| &p.events)
    }

    /// The run's timing in one line: `run ring: tick 1.00 ms, major frame 2 ticks, wait hybrid`.
    fn timing(&self) -> String {
        let p = self.params.as_ref();
        format!(
            "run {}: tick {}, major frame {} ticks, wait {}",
            p.map_or("?", |p| &p.name),
            Nanos::new(p.map_or(0, |p| p.tick_ns)),
            p.map_or(0, |p| p.major_frame),
            p.map_or("?", |p| p.wait.mode(Nanos::ZERO).name()),
        )
    }
}

/// The human view, as `ictus run` prints it before the footer: the run's timing, one
/// row per subsystem, the hosts, the link's stages and what came late across hosts,
/// the events and the headline.
pub(crate) fn terminal(record: &RunRecord) -> String {
    let f = Figures::of(record);
    let mut out = String::new();
    let _ = writeln!(out, "{}", f.timing());
    let mut table = terminal::table();
    table.set_header(vec![
        "subsystem",
        "process",
        "class",
        "run",
        "due",
        "overruns (streak)",
        "lost",
        "errors",
        "jitter p99 us",
        "jitter max us",
        "exec p99 us",
        "exec max us",
    ]);
    for s in &f.subsystems {
        let (labels, metrics) = (&s.point.labels, &s.point.metrics);
        let count = |v: f64| v as u64;
        table.add_row(vec![
            Cell::new(&s.name),
            Cell::new(s.process()),
            Cell::new(labels.class.as_deref().unwrap_or("-")),
            Cell::new(count(metrics.frames_run)),
            Cell::new(count(metrics.releases_due)),
            Cell::new(format!(
                "{} ({})",
                count(metrics.overruns),
                count(metrics.longest_overrun_streak)
            )),
            Cell::new(count(metrics.lost_frames)),
            Cell::new(
                metrics
                    .errors
                    .map_or("-".to_string(), |e| count(e).to_string()),
            ),
            Cell::new(micros(Some(s.jitter), Some(Percentile::P99))),
            Cell::new(micros(Some(s.jitter), None)),
            Cell::new(micros(s.exec, Some(Percentile::P99))),
            Cell::new(micros(s.exec, None)),
        ]);
    }
    terminal::right_align(&mut table, 3);
    let _ = writeln!(out, "{table}");
    if !f.hosts.is_empty() {
        let _ = writeln!(out, "{}", hosts_terminal(&f));
    }
    if !f.stages.is_empty() {
        let _ = writeln!(out, "{}", stages_terminal(&f));
    }
    if !f.late.is_empty() {
        let _ = writeln!(out, "{}", late_terminal(record, &f));
    }
    for e in f.events() {
        let _ = writeln!(out, "event: {e}");
    }
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// A percentile of `m`'s latency (the max for `None`), as a time in nanoseconds.
fn latency_ns(m: Option<&Measurement>, p: Option<Percentile>) -> Option<Nanos> {
    m.and_then(|m| m.latency.as_ref()).and_then(|l| match p {
        Some(p) => l.summary.percentile(p),
        None => l.summary.max_ns,
    })
}

/// A percentile of `m`'s latency (the max for `None`) in microseconds, or `-`.
fn micros(m: Option<&Measurement>, p: Option<Percentile>) -> String {
    terminal::micros(latency_ns(m, p))
}

/// A figure with no decimals, or `-` when there is none.
fn figure(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

/// The link figures of a run across hosts: one row per host.
fn hosts_terminal(f: &Figures<'_>) -> comfy_table::Table {
    let mut table = terminal::table();
    table.set_header(vec![
        "host",
        "role",
        "ticks",
        "tick late p50 us",
        "tick late p99 us",
        "tick late max us",
        "cells sent",
        "cells recv",
        "cell p50 us",
        "cell p99 us",
        "cell max us",
        "bytes sent",
    ]);
    for h in &f.hosts {
        let (c, cells) = (h.cell.as_ref().map(|c| c.0), h.cell.as_ref().map(|c| &c.1));
        let main = h.point.labels.is_main();
        let tick_micros = |p| {
            if main {
                "-".to_string()
            } else {
                micros(Some(h.tick), p)
            }
        };
        table.add_row(vec![
            Cell::new(&h.point.labels.host),
            Cell::new(&h.point.labels.role),
            Cell::new(ticks(&h.point)),
            Cell::new(tick_micros(Some(Percentile::P50))),
            Cell::new(tick_micros(Some(Percentile::P99))),
            Cell::new(tick_micros(None)),
            Cell::new(figure(cells.map(|c| c.metrics.cells_sent))),
            Cell::new(figure(cells.map(|c| c.metrics.cells_received))),
            Cell::new(micros(c, Some(Percentile::P50))),
            Cell::new(micros(c, Some(Percentile::P99))),
            Cell::new(micros(c, None)),
            Cell::new(figure(Some(h.point.metrics.bytes_sent))),
        ]);
    }
    terminal::right_align(&mut table, 2);
    table
}

/// A host's ticks in words: the main host's sent, a node's received and missing.
fn ticks(t: &Point<TickArrival>) -> String {
    if t.labels.is_main() {
        format!("{} sent", figure(t.metrics.ticks_sent))
    } else {
        format!(
            "{} ({} missing)",
            figure(Some(t.metrics.ticks_received)),
            figure(t.metrics.ticks_missing)
        )
    }
}

/// Where the cells' time went between hosts: one row per host and stage, in the
/// record's order (a publication's).
fn stages_terminal(f: &Figures<'_>) -> comfy_table::Table {
    let mut table = terminal::table();
    table.set_header(vec![
        "host",
        "stage",
        "publications",
        "p50 us",
        "p99 us",
        "max us",
    ]);
    for (m, s) in &f.stages {
        table.add_row(vec![
            Cell::new(&s.labels.host),
            Cell::new(&s.labels.stage),
            Cell::new(format!("{:.0}", s.metrics.publications)),
            Cell::new(micros(Some(m), Some(Percentile::P50))),
            Cell::new(micros(Some(m), Some(Percentile::P99))),
            Cell::new(micros(Some(m), None)),
        ]);
    }
    terminal::right_align(&mut table, 2);
    table
}

/// The late arrivals' header, after the host they arrived on.
const LATE_HEADER: [&str; 8] = [
    "what",
    "from",
    "time went",
    "arrivals",
    "frames",
    "late total ms",
    "worst ms",
    "first due",
];

/// A late arrival's figures, as both views show them (times in milliseconds).
fn late_figures(l: &Point<LateArrivals>) -> [String; 5] {
    let ms = |ns: f64| format!("{:.2}", ns / 1e6);
    let m = &l.metrics;
    [
        format!("{:.0}", m.arrivals),
        format!("{:.0}", m.frames),
        ms(m.late_total_ns),
        ms(m.late_worst_ns),
        format!("{:.0}", m.first_frame),
    ]
}

/// What came late across hosts and what it cost: one row per host it arrived on,
/// thing (a cell, the tick), sender and the part of the way that took most of its
/// time, the costliest first; then the frames by sender and stage, in one line.
fn late_terminal(record: &RunRecord, f: &Figures<'_>) -> String {
    let mut table = terminal::table();
    let mut header = vec!["late on"];
    header.extend(LATE_HEADER);
    table.set_header(header);
    for l in &f.late {
        let labels = &l.labels;
        let mut row = vec![
            Cell::new(&labels.host),
            Cell::new(&labels.what),
            Cell::new(&labels.from),
            Cell::new(&labels.stage),
        ];
        row.extend(late_figures(l).into_iter().map(Cell::new));
        table.add_row(row);
    }
    terminal::right_align(&mut table, 4);
    format!("{table}\n{}", late_lines(record, &f.late).join(""))
        .trim_end()
        .to_string()
}

/// The late copies' frames by sender and stage, the late ticks' frames, and both beside
/// the stress check's missed frames: one line each, each ending with a newline.
fn late_lines(record: &RunRecord, late: &[Point<LateArrivals>]) -> Vec<String> {
    let mut by: BTreeMap<(String, String), f64> = BTreeMap::new();
    for l in late {
        let key = if l.labels.what == "tick" {
            "tick".to_string()
        } else {
            l.labels.stage.clone()
        };
        *by.entry((l.labels.from.clone(), key)).or_default() += l.metrics.frames;
    }
    let ticks = by
        .iter()
        .filter(|((_, what), _)| what == "tick")
        .map(|(_, f)| f)
        .sum::<f64>();
    let mut cells: Vec<_> = by
        .into_iter()
        .filter(|((_, what), _)| what != "tick")
        .collect();
    cells.sort_by(|a, b| b.1.total_cmp(&a.1));
    let words: Vec<String> = cells
        .iter()
        .map(|((from, stage), frames)| {
            let place = match stage.as_str() {
                "sender" => format!("on {from} before the put"),
                "transit" => format!("from {from} in transit"),
                _ => format!("from {from}"),
            };
            format!("{frames:.0} {place}")
        })
        .collect();
    let mut lines = Vec::new();
    let copies: f64 = cells.iter().map(|(_, f)| f).sum();
    if !cells.is_empty() {
        lines.push(format!(
            "frames read with a late copy of a cell, by sender and where the time went: {}\n",
            words.join(", ")
        ));
    }
    if ticks > 0.0 {
        lines.push(format!(
            "frames with a late tick: {ticks:.0} (a node keeps its own beat: a late tick \
             delays what the main host tells, not a release)\n"
        ));
    }
    let stress = record.measurements.iter().find_map(|m| m.read::<Stress>());
    if let Some(st) = stress {
        let overruns: f64 = record
            .measurements
            .iter()
            .filter(|m| m.name == RELEASE_JITTER)
            .filter_map(|m| m.read::<Subsystem>())
            .map(|p| p.metrics.overruns)
            .sum();
        lines.push(format!(
            "late copies ({copies:.0} frames) and overruns ({overruns:.0}) beside the stress \
             check's {:.0} missed frames\n",
            st.metrics.missed_frames
        ));
    }
    lines
}

/// The run's tables in the reports and in a comparison: its subsystems, and, for a
/// run across hosts, its hosts, the link's stages and what came late. None where the
/// results hold no run.
pub(crate) fn tables(r: &Results) -> Vec<Table> {
    let runs: Vec<(&Run, Figures<'_>)> = r
        .runs
        .iter()
        .filter(|run| run.record.probe == RUN_RECORD)
        .map(|run| (run, Figures::of(&run.record)))
        .collect();
    if runs.is_empty() {
        return Vec::new();
    }
    let runs = Runs {
        several: runs.len() > 1,
        runs,
    };
    std::iter::once(subsystems_table(&runs))
        .chain(hosts_table(&runs))
        .chain(stages_table(&runs))
        .chain(late_table(&runs))
        .collect()
}

/// The headline of the first executive's run in `r` that has one: the report's verdict
/// where there is neither a survey nor a loop record.
pub(crate) fn headline(r: &Results) -> Option<String> {
    r.runs
        .iter()
        .filter(|run| run.record.probe == RUN_RECORD)
        .find_map(|run| run.record.headline.clone())
}

/// The runs of a results, each read once; with `several`, every row and note is led
/// by its run's id.
struct Runs<'a> {
    runs: Vec<(&'a Run, Figures<'a>)>,
    several: bool,
}

impl Runs<'_> {
    /// An empty table keyed by `keys` (after the run, when there are several).
    fn table(&self, id: &'static str, title: &str, caption: &str, keys: &[&str]) -> Table {
        let mut t = table(id, title, SOURCE);
        t.caption = caption.to_string();
        t.keys = self.keys(None, keys);
        t
    }

    /// A row's keys: `run`'s id first when there are several (the header's: `run`).
    fn keys(&self, run: Option<&Run>, keys: &[&str]) -> Vec<String> {
        let first = self
            .several
            .then(|| run.map_or_else(|| "run".to_string(), |r| r.id.clone()));
        first
            .into_iter()
            .chain(keys.iter().map(|k| k.to_string()))
            .collect()
    }

    /// A note about `run`, led by its id when there are several.
    fn note(&self, run: &Run, text: &str) -> String {
        if self.several {
            format!("{}: {text}", run.id)
        } else {
            text.to_string()
        }
    }
}

/// The subsystems' table, with the runs' timing, events and headlines as notes.
fn subsystems_table(runs: &Runs<'_>) -> Table {
    let mut t = runs.table(
        RUN_RECORD,
        "Subsystems of the run",
        "Per subsystem of the executive's run, in the schedule's order: where it ran and its class, the frames it ran and was due, its overruns (and their longest streak), the frames lost and its errors, then its release jitter and its execution time.",
        &["subsystem"],
    );
    t.columns = [Column::text("process"), Column::text("class")]
        .into_iter()
        .chain(
            [
                "frames run",
                "releases due",
                "overruns",
                "longest overrun streak",
                "lost frames",
                "errors",
                "jitter p50",
                "jitter p99",
                "jitter max",
                "exec p50",
                "exec p99",
                "exec max",
            ]
            .map(Column::new),
        )
        .collect();
    for (run, f) in &runs.runs {
        for s in &f.subsystems {
            let (labels, m) = (&s.point.labels, &s.point.metrics);
            let mut cells = vec![
                TableCell::text(s.process()),
                TableCell::text(labels.class.as_deref().unwrap_or("—")),
            ];
            cells.extend(
                [
                    m.frames_run,
                    m.releases_due,
                    m.overruns,
                    m.longest_overrun_streak,
                    m.lost_frames,
                ]
                .map(|v| count_cell(Some(v))),
            );
            cells.push(count_cell(m.errors));
            cells.extend(latency_cells(Some(s.jitter)));
            cells.extend(latency_cells(s.exec));
            t.rows.push(Row {
                keys: runs.keys(Some(run), &[&s.name]),
                cells,
            });
        }
        t.notes.push(runs.note(run, &f.timing()));
        for e in f.events() {
            t.notes.push(runs.note(run, &format!("event: {e}")));
        }
        if let Some(h) = &run.record.headline {
            t.notes.push(runs.note(run, h));
        }
    }
    if t.rows.is_empty() {
        t.absent = Some("not measured: the run's record holds no subsystem".into());
    }
    t
}

/// The hosts of a run across hosts, if any run has them.
fn hosts_table(runs: &Runs<'_>) -> Option<Table> {
    runs.runs
        .iter()
        .any(|(_, f)| !f.hosts.is_empty())
        .then_some(())?;
    let mut t = runs.table(
        "run-hosts",
        "Hosts of the run",
        "Per host of a run across hosts: the ticks the main host sent or a node received (and missed), how late a node's ticks came, the cells each sent and received and their latency, and the bytes sent.",
        &["host", "role"],
    );
    t.columns = std::iter::once(Column::text("ticks"))
        .chain(
            [
                "tick late p50",
                "tick late p99",
                "tick late max",
                "cells sent",
                "cells received",
                "cell p50",
                "cell p99",
                "cell max",
                "bytes sent",
            ]
            .map(Column::new),
        )
        .collect();
    for (run, f) in &runs.runs {
        for h in &f.hosts {
            let labels = &h.point.labels;
            let cells = h.cell.as_ref().map(|c| &c.1.metrics);
            let mut row = vec![TableCell::text(ticks(&h.point))];
            row.extend(latency_cells((!labels.is_main()).then_some(h.tick)));
            row.push(count_cell(cells.map(|c| c.cells_sent)));
            row.push(count_cell(cells.map(|c| c.cells_received)));
            row.extend(latency_cells(h.cell.as_ref().map(|c| c.0)));
            row.push(count_cell(Some(h.point.metrics.bytes_sent)));
            t.rows.push(Row {
                keys: runs.keys(Some(run), &[&labels.host, &labels.role]),
                cells: row,
            });
        }
    }
    Some(t)
}

/// The link's stages, if any run has them.
fn stages_table(runs: &Runs<'_>) -> Option<Table> {
    runs.runs
        .iter()
        .any(|(_, f)| !f.stages.is_empty())
        .then_some(())?;
    let mut t = runs.table(
        "run-stages",
        "The link's stages",
        "Where the cells' time went between hosts: per host and stage, in the order a publication passes them (the sender's wake, encode and put, the receiver's transit and copy), the publications and the stage's delay.",
        &["host", "stage"],
    );
    t.columns = ["publications", "p50", "p99", "max"]
        .map(Column::new)
        .to_vec();
    for (run, f) in &runs.runs {
        for (m, s) in &f.stages {
            let mut cells = vec![count_cell(Some(s.metrics.publications))];
            cells.extend(latency_cells(Some(m)));
            t.rows.push(Row {
                keys: runs.keys(Some(run), &[&s.labels.host, &s.labels.stage]),
                cells,
            });
        }
    }
    Some(t)
}

/// What came late across hosts, if anything did in any run.
fn late_table(runs: &Runs<'_>) -> Option<Table> {
    runs.runs
        .iter()
        .any(|(_, f)| !f.late.is_empty())
        .then_some(())?;
    let mut t = runs.table(
        "run-late",
        "What came late across hosts",
        "What arrived late on each host, from which sender and where its time went, the costliest first: the arrivals, the frames they made late, the lateness in all and at worst (ms), and the first frame it was due.",
        &["late on", "what", "from", "time went"],
    );
    t.columns = LATE_HEADER[3..].iter().map(|&c| Column::new(c)).collect();
    for (run, f) in &runs.runs {
        for l in &f.late {
            let (labels, m) = (&l.labels, &l.metrics);
            let values = [
                m.arrivals,
                m.frames,
                m.late_total_ns / 1e6,
                m.late_worst_ns / 1e6,
                m.first_frame,
            ];
            t.rows.push(Row {
                keys: runs.keys(
                    Some(run),
                    &[&labels.host, &labels.what, &labels.from, &labels.stage],
                ),
                cells: late_figures(l)
                    .into_iter()
                    .zip(values)
                    .map(|(text, v)| TableCell::num(text, v))
                    .collect(),
            });
        }
        let lines = late_lines(&run.record, &f.late);
        t.notes
            .extend(lines.iter().map(|l| runs.note(run, l.trim_end())));
    }
    Some(t)
}

/// A count, or an empty cell.
fn count_cell(v: Option<f64>) -> TableCell {
    v.map_or_else(TableCell::empty, |v| TableCell::num(format!("{v:.0}"), v))
}

/// `m`'s latency at p50, p99 and its max, thin percentiles marked; empty cells when
/// there is none.
fn latency_cells(m: Option<&Measurement>) -> [TableCell; 3] {
    let Some(l): Option<&LatencyResult> = m.and_then(|m| m.latency.as_ref()) else {
        return [TableCell::empty(), TableCell::empty(), TableCell::empty()];
    };
    let max = l
        .summary
        .max_ns
        .map_or_else(TableCell::empty, |n| TableCell::ns(n.as_u64() as f64));
    [
        pct_cell(l, Percentile::P50),
        pct_cell(l, Percentile::P99),
        max,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_exec::run_record::example::report;

    /// The example run's record, as `ictus run` writes it.
    fn record() -> RunRecord {
        ictus_exec::run_record::example::record(&report())
    }

    /// The example run's record in a file of its own, read as `ictus report` reads it.
    fn results(dir: &tempfile::TempDir, name: &str) -> Results {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_string(&record()).unwrap()).unwrap();
        crate::load(&path).unwrap()
    }

    #[test]
    fn a_run_record_is_tabled_in_the_reports() {
        let dir = tempfile::tempdir().unwrap();
        let r = results(&dir, "ring.json");
        let md = crate::markdown(&r);
        for title in [
            "Subsystems of the run",
            "Hosts of the run",
            "The link's stages",
            "What came late across hosts",
        ] {
            assert!(
                md.contains(&format!("{title} ({SOURCE})")),
                "{title} in\n{md}"
            );
        }
        let row = md
            .lines()
            .find(|l| l.starts_with("| p |"))
            .unwrap_or_else(|| panic!("no row of p in\n{md}"));
        assert!(
            row.starts_with("| p | own (killed by signal 9) | — | 199 | 200 | 1 | 1 | 3 | 2 |"),
            "{row}"
        );
        assert!(md.contains("- event: pause at frame 10\n"), "{md}");
        assert!(
            md.contains("**No survey verdict here; the executive's run found: stress: 400 frames"),
            "{md}"
        );
        assert!(md.contains("- run ring: tick 1.00 ms, major frame 2 ticks, wait hybrid\n"));
        assert!(
            md.contains("| b | sender | 1 |") || md.contains("| b | transit | 1 |"),
            "{md}"
        );
        let html = crate::html(&r);
        assert!(html.contains("Subsystems of the run"), "{html}");
    }

    #[test]
    fn runs_compare_table_by_table_beside_results_without_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let a = results(&dir, "a.json");
        let b = results(&dir, "b.json");
        let none = Results {
            source: dir.path().join("none"),
            manifest: None,
            audit: None,
            runs: Vec::new(),
        };
        let text = crate::compare_markdown(&[a.clone(), b], 0);
        let row = text
            .lines()
            .find(|l| l.starts_with("| p | frames run |"))
            .unwrap_or_else(|| panic!("no frames row in\n{text}"));
        assert!(row.contains("| 199 | 199 (×1.00) |"), "{row}");
        // A side without a run: its column says so, and no table is shifted.
        let text = crate::compare_markdown(&[none, a], 0);
        assert!(text.contains("Subsystems of the run"), "{text}");
        assert!(text.contains("not measured: no run record here"), "{text}");
    }

    #[test]
    fn results_without_a_run_have_no_run_table() {
        let r = Results {
            source: "nowhere".into(),
            manifest: None,
            audit: None,
            runs: Vec::new(),
        };
        assert!(tables(&r).is_empty());
    }

    #[test]
    fn what_fill_writes_the_terminal_view_reads_back() {
        let text = terminal(&record());
        assert_eq!(text, crate::probes::terminal(&record()));
        assert!(
            text.starts_with("run ring: tick 1.00 ms, major frame 2 ticks, wait hybrid\n"),
            "{text}"
        );
        let row = |first: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(first))
                .unwrap_or_else(|| panic!("no row {first} in\n{text}"));
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        };
        assert_eq!(
            row("p ")[..8],
            [
                "p",
                "own (killed by signal 9)",
                "-",
                "199",
                "200",
                "1 (1)",
                "3",
                "2"
            ]
        );
        assert_eq!(row("a ")[..3], ["a", "main", "400 sent"]);
        assert_eq!(row("b ")[..3], ["b", "node", "399 (1 missing)"]);
        assert_eq!(row("b ")[3..6], ["-", "-", "-"]);
        assert_eq!(row("b ")[6..8], ["10", "9"]);
        assert!(text.contains("\nevent: pause at frame 10\n"), "{text}");
        // The stages, in the order a publication passes them, each with its count.
        let stages: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>())
            .filter(|w| w.len() == 3 && ["transit", "copy"].contains(&w[1]))
            .collect();
        assert_eq!(stages, [["b", "transit", "1"], ["b", "copy", "1"]]);
        // What came late, the costliest first, and the frames by sender and stage.
        let late: Vec<Vec<&str>> = text
            .lines()
            .map(|l| {
                l.split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .filter(|c: &Vec<&str>| c.len() == 9 && c[0] == "b")
            .collect();
        assert_eq!(
            late,
            [
                ["b", "tick", "a", "whole", "1", "5", "6.00", "6.00", "30"],
                ["b", "cell p", "a", "sender", "2", "3", "2.50", "2.00", "17"]
            ]
        );
        for line in [
            "frames read with a late copy of a cell, by sender and where the time went: 3 on a \
             before the put\n",
            "frames with a late tick: 5 (a node keeps its own beat",
            "late copies (3 frames) and overruns (1) beside the stress check's 12 missed frames\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn the_qos_in_force_and_the_misses_explained_reach_the_record_and_its_footer() {
        use ictus_explain::{Breakdown, Cause, Explained, Explanation, MissKind, SamplerReport};
        use ictus_os::pm_qos::{PmQos, PmQosState};
        let miss = Explained {
            thread: "p".into(),
            cpu: Some(1),
            kind: MissKind::Overrun,
            seq: 42,
            at_ns: 50_000_000,
            lateness_ns: 1_500_000,
            missed: 2,
            window_ns: 3_000_000,
            causes: vec![
                Cause::Overrun {
                    exec_ns: 2_500_000,
                    budget_ns: 1_000_000,
                }
                .into(),
            ],
            ..Explained::default()
        };
        let mut breakdown = Breakdown::default();
        breakdown.add(&miss);
        let mut report = report();
        report.pm_qos = Some(PmQosState {
            requested: PmQos::Bound(0),
            held_us: Some(0),
            refused: None,
        });
        report.explanation = Some(Explanation {
            threshold_ns: 1_000_000,
            breakdown,
            events: vec![miss],
            sampler: SamplerReport {
                period_ns: 1_000_000,
                samples: 10,
                cpus: "0".into(),
                reading_mean_ns: 1,
                reading_max_ns: 2,
                task_scans: 1,
                ..SamplerReport::default()
            },
            ..Explanation::default()
        });
        let sut = ictus_exec::run_record::example::record(&report);
        assert_eq!(sut.obtained.pm_qos, report.pm_qos);
        assert_eq!(sut.explanation, report.explanation);
        let footer = crate::terminal::footer(&sut);
        assert!(
            footer.contains("CPU latency QoS (/dev/cpu_dma_latency): held at 0 us"),
            "{footer}"
        );
        assert!(
            footer.contains(
                "why the misses (releases 1.00 ms or more late, missed periods, overruns): \
                 1 miss (2 periods): 1 by the thread's own overrun"
            ),
            "{footer}"
        );
        assert!(
            footer.contains("p overrun #42 at 50.00 ms: 1.50 ms late, 2 period(s) missed on CPU 1: its own execution took 2.50 ms of a 1.00 ms budget"),
            "{footer}"
        );
    }
}
