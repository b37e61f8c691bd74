//! What `ictus run` and `ictus node` print: the live status line, how the run ended
//! (for the live page), and the record's human view (one row per subsystem, one per
//! host across hosts, the events).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::{Cell, CellAlignment, Table, presets};
use ictus::run_record::RunParams;
use ictus_core::{Nanos, Percentile};
use ictus_exec::report::RunReport;
use ictus_exec::run::LiveStatus;
use ictus_probe::record::{Measurement, RunRecord};
use ictus_probe::view::Point;
use ictus_probe::view::run::{
    CellLatency, EXECUTION_TIME, LateArrivals, LinkStageDelay, RELEASE_JITTER, Stress, Subsystem,
    TickArrival,
};

use crate::common;

/// How a run ended, for the live page.
pub(crate) fn ended(report: &RunReport) -> String {
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    let mut line = format!(
        "the run ended at frame {} ({})",
        report.frames,
        if report.complete {
            "complete"
        } else {
            "stopped early or incomplete"
        }
    );
    if lost > 0 {
        let _ = write!(line, "; {lost} frame(s) lost");
    }
    if let Some(s) = &report.stress {
        let _ = write!(line, "; stress: {} missed frame(s)", s.missed_frames);
    }
    line
}

/// One line: the frame, the state, and per subsystem its frames and overruns.
pub(crate) fn status_line(s: &LiveStatus) -> String {
    let mut line = format!("{} frame {} {}", s.name, s.frame, s.state.to_uppercase());
    for sub in &s.subsystems {
        let _ = write!(
            line,
            " | {} {} ovr {}",
            sub.name, sub.frames_run, sub.overruns
        );
        if sub.status != "running" {
            let _ = write!(line, " ({})", sub.status);
        }
    }
    if !s.pending.is_empty() {
        let names: Vec<String> = s.pending.iter().map(|(n, f)| format!("{n} {f}f")).collect();
        let _ = write!(line, " | no ack: {}", names.join(", "));
    }
    line
}

/// The human view: one row per subsystem, the stress check, the events.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<RunParams>();
    let _ = writeln!(
        out,
        "run {}: tick {}, major frame {} ticks, wait {}",
        p.as_ref().map_or("?", |p| &p.name),
        Nanos::new(p.as_ref().map_or(0, |p| p.tick_ns)),
        p.as_ref().map_or(0, |p| p.major_frame),
        p.as_ref().map_or("?", |p| p.wait.mode(Nanos::ZERO).name()),
    );
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
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
    // Per subsystem: its release jitter (read), then its execution time.
    type Pair<'a> = (
        Option<(&'a Measurement, Point<Subsystem>)>,
        Option<&'a Measurement>,
    );
    let mut by_name: BTreeMap<String, Pair<'_>> = BTreeMap::new();
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
    let order = p.as_ref().map_or(&[][..], |p| &p.subsystems);
    for name in order.iter().map(|s| &s.name) {
        let Some((Some((j, point)), e)) = by_name.get(name) else {
            continue;
        };
        let (labels, metrics) = (&point.labels, &point.metrics);
        let mut process = labels.process.clone();
        if let Some(c) = &labels.crashed {
            let _ = write!(process, " ({c})");
        }
        let count = |v: f64| v as u64;
        table.add_row(vec![
            Cell::new(name),
            Cell::new(process),
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
            Cell::new(percentile(Some(j), Some(Percentile::P99))),
            Cell::new(percentile(Some(j), None)),
            Cell::new(percentile(*e, Some(Percentile::P99))),
            Cell::new(percentile(*e, None)),
        ]);
    }
    for col in 3..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}");
    if let Some(hosts) = hosts_table(record) {
        let _ = writeln!(out, "{hosts}");
    }
    if let Some(stages) = stages_table(record) {
        let _ = writeln!(out, "{stages}");
    }
    if let Some(late) = late_table(record) {
        let _ = writeln!(out, "{late}");
    }
    for e in p.iter().flat_map(|p| &p.events) {
        let _ = writeln!(out, "event: {e}");
    }
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// A percentile of `m`'s latency (the max for `None`) in microseconds, or `-`.
fn percentile(m: Option<&Measurement>, p: Option<Percentile>) -> String {
    common::micros(m.and_then(|m| m.latency.as_ref()).and_then(|l| match p {
        Some(p) => l.summary.percentile(p),
        None => l.summary.max_ns,
    }))
}

/// What came late across hosts and what it cost: one row per host it arrived on,
/// thing (a cell, the tick), sender and the part of the way that took most of its
/// time, the costliest first; then the frames by sender and stage, in one line.
fn late_table(record: &RunRecord) -> Option<String> {
    let mut late: Vec<Point<LateArrivals>> = record
        .measurements
        .iter()
        .filter_map(|m| m.read::<LateArrivals>())
        .collect();
    if late.is_empty() {
        return None;
    }
    late.sort_by(|a, b| b.metrics.frames.total_cmp(&a.metrics.frames));
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table.set_header(vec![
        "late on",
        "what",
        "from",
        "time went",
        "arrivals",
        "frames",
        "late total ms",
        "worst ms",
        "first due",
    ]);
    let ms = |ns: f64| format!("{:.2}", ns / 1e6);
    let mut by: BTreeMap<(String, String), f64> = BTreeMap::new();
    for l in &late {
        let (labels, m) = (&l.labels, &l.metrics);
        let key = if labels.what == "tick" {
            "tick".to_string()
        } else {
            labels.stage.clone()
        };
        *by.entry((labels.from.clone(), key)).or_default() += m.frames;
        table.add_row(vec![
            Cell::new(&labels.host),
            Cell::new(&labels.what),
            Cell::new(&labels.from),
            Cell::new(&labels.stage),
            Cell::new(format!("{:.0}", m.arrivals)),
            Cell::new(format!("{:.0}", m.frames)),
            Cell::new(ms(m.late_total_ns)),
            Cell::new(ms(m.late_worst_ns)),
            Cell::new(format!("{:.0}", m.first_frame)),
        ]);
    }
    for col in 4..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    Some(
        format!("{table}\n{}", late_lines(record, by))
            .trim_end()
            .to_string(),
    )
}

/// The late copies' frames by sender and stage, the late ticks' frames, and both beside
/// the stress check's missed frames: one line each.
fn late_lines(record: &RunRecord, by: BTreeMap<(String, String), f64>) -> String {
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
    let mut text = String::new();
    let copies: f64 = cells.iter().map(|(_, f)| f).sum();
    if !cells.is_empty() {
        let _ = writeln!(
            text,
            "frames read with a late copy of a cell, by sender and where the time went: {}",
            words.join(", ")
        );
    }
    if ticks > 0.0 {
        let _ = writeln!(
            text,
            "frames with a late tick: {ticks:.0} (a node keeps its own beat: a late tick \
             delays what the main host tells, not a release)"
        );
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
        let _ = writeln!(
            text,
            "late copies ({copies:.0} frames) and overruns ({overruns:.0}) beside the stress \
             check's {:.0} missed frames",
            st.metrics.missed_frames
        );
    }
    text
}

/// Where the cells' time went between hosts: one row per host and stage, in the
/// record's order (a publication's).
fn stages_table(record: &RunRecord) -> Option<Table> {
    let stages: Vec<(&Measurement, Point<LinkStageDelay>)> = record
        .measurements
        .iter()
        .filter_map(|m| Some((m, m.read::<LinkStageDelay>()?)))
        .collect();
    if stages.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table.set_header(vec![
        "host",
        "stage",
        "publications",
        "p50 us",
        "p99 us",
        "max us",
    ]);
    for (m, s) in &stages {
        table.add_row(vec![
            Cell::new(&s.labels.host),
            Cell::new(&s.labels.stage),
            Cell::new(format!("{:.0}", s.metrics.publications)),
            Cell::new(percentile(Some(m), Some(Percentile::P50))),
            Cell::new(percentile(Some(m), Some(Percentile::P99))),
            Cell::new(percentile(Some(m), None)),
        ]);
    }
    for col in 2..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    Some(table)
}

/// The link figures of a run across hosts: one row per host.
fn hosts_table(record: &RunRecord) -> Option<Table> {
    let ticks: Vec<(&Measurement, Point<TickArrival>)> = record
        .measurements
        .iter()
        .filter_map(|m| Some((m, m.read::<TickArrival>()?)))
        .collect();
    if ticks.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
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
    for (t, tick) in &ticks {
        let host = &tick.labels.host;
        let cell = record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<CellLatency>()?)))
            .find(|(_, c)| &c.labels.host == host);
        let (c, cells) = (cell.as_ref().map(|c| c.0), cell.as_ref().map(|c| &c.1));
        let figure = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let role = tick.labels.role.as_str();
        let main = tick.labels.is_main();
        let ticks = if main {
            format!("{} sent", figure(tick.metrics.ticks_sent))
        } else {
            format!(
                "{} ({} missing)",
                figure(Some(tick.metrics.ticks_received)),
                figure(tick.metrics.ticks_missing)
            )
        };
        let tick_percentile = |p| {
            if main {
                "-".to_string()
            } else {
                percentile(Some(t), p)
            }
        };
        table.add_row(vec![
            Cell::new(host),
            Cell::new(role),
            Cell::new(ticks),
            Cell::new(tick_percentile(Some(Percentile::P50))),
            Cell::new(tick_percentile(Some(Percentile::P99))),
            Cell::new(tick_percentile(None)),
            Cell::new(figure(cells.map(|c| c.metrics.cells_sent))),
            Cell::new(figure(cells.map(|c| c.metrics.cells_received))),
            Cell::new(percentile(c, Some(Percentile::P50))),
            Cell::new(percentile(c, Some(Percentile::P99))),
            Cell::new(percentile(c, None)),
            Cell::new(figure(Some(tick.metrics.bytes_sent))),
        ]);
    }
    for col in 2..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus::run_record::fill;

    use ictus_probe::provenance::Provenance;
    use ictus_probe::record::Obtained;

    use ictus::run_record::example::{params, report};

    #[test]
    fn what_fill_writes_the_render_reads_back() {
        let report = report();
        let parameters = serde_json::to_value(params(report.events.clone())).unwrap();
        let mut sut = RunRecord::new(
            "run",
            Provenance::capture(Vec::new()),
            parameters,
            Obtained::default(),
        );
        fill(&mut sut, &report);
        let text = render(&sut);
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
        use ictus_os::explain::{
            Breakdown, Cause, Explained, Explanation, MissKind, SamplerReport,
        };
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
            seen: Vec::new(),
            accounted_ns: 0,
            accounted_share: 0.0,
            causes_sum_ns: 0,
            run_ns: 0,
            run_delay_ns: 0,
            unread: false,
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
            clock_start_ns: 0,
            threshold_ns: 1_000_000,
            breakdown,
            events: vec![miss],
            events_not_kept: 0,
            sampler: SamplerReport {
                period_ns: 1_000_000,
                samples: 10,
                cpus: "0".into(),
                shares_watched_cpu: false,
                reading_mean_ns: 1,
                reading_max_ns: 2,
                task_scans: 1,
                cpu_ns: 0,
                wall_ns: 0,
                budget: 0.0,
                slowest: 0,
                stretched_ns: 0,
                sources: Vec::new(),
            },
        });
        let parameters = serde_json::to_value(params(Vec::new())).unwrap();
        let mut sut = RunRecord::new(
            "run",
            Provenance::capture(Vec::new()),
            parameters,
            Obtained::default(),
        );
        fill(&mut sut, &report);
        assert_eq!(sut.obtained.pm_qos, report.pm_qos);
        assert_eq!(sut.explanation, report.explanation);
        let footer = common::footer(&sut);
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
