//! `/metrics`: the run in the OpenMetrics text format, for Prometheus and Grafana
//! (issue 24; dashboard: docs/grafana-ictus.json).
//!
//! Everything comes from the status snapshots the coordinator hands to
//! [`crate::Ui::publish`] ([`LiveStatus`], built from the subsystems' own counters):
//! [`Metrics::update`] runs in that hook, a scrape encodes on the server's thread
//! (this crate's, off the real-time CPUs). Nothing here runs on, or adds work to, a
//! real-time thread.
//!
//! # Families (prefix `ictus_`, every series labelled `run`)
//! | family | type | labels | from |
//! |---|---|---|---|
//! | `frame` | gauge | | the current frame |
//! | `tick_seconds` | gauge | | the tick |
//! | `frames_total` | counter | `subsystem` | frames run |
//! | `overruns_total` | counter | `subsystem` | releases skipped while still running |
//! | `lost_frames_total` | counter | `subsystem` | releases due, not run, not overrun (a dead subsystem's) |
//! | `errors_total` | counter | `subsystem` | frames whose `run` returned an error |
//! | `subsystem_up` | gauge | `subsystem` | 0 once it failed |
//! | `release_lateness_seconds` | histogram | `subsystem` | the largest release lateness of each jitter window (about 100 ms): one observation per window |
//! | `execution_time_seconds` | histogram | `subsystem` | its last execution time, one observation per snapshot in which it ran |
//! | `max_release_lateness_seconds`, `max_execution_time_seconds` | gauge | `subsystem` | the largest so far |
//! | `cell_age_seconds` | gauge | `cell` | now minus the start of the frame that published it (or the arrival of a copy from another host) |
//! | `cell_writes_total` | counter | `cell` | publications |
//! | `host_up` | gauge | `host`, `role` | whether the host is in the run |
//! | `host_ticks_total`, `host_ticks_missing_total` | counter | `host` | ticks that reached a node, and those that did not |
//! | `host_tick_lateness_seconds` | gauge | `host`, `stat` (`p50`, `max`, `recent`) | tick arrival minus its deadline, on a node |
//! | `link_cell_latency_seconds` | gauge | `host`, `stat` (`p50`, `p99`, `max`) | cells from other hosts: arrival minus the writer's frame start |
//!
//! # Buckets
//! Both histograms share [`BUCKETS`]: 1-2-5 steps from 1 us to 100 ms, then +Inf.
//! ictus loops tick from 100 us to 100 ms, so a lateness or an execution that
//! matters ranges from a few us (1% of a 100 us tick) to a whole 100 ms tick (an
//! overrun of the slowest loop). A 1-2-5 ladder keeps every bucket within 2.5x of
//! its neighbour at every scale, so `histogram_quantile` is off by less than one
//! bucket's width wherever the loop runs, with 16 buckets (18 series with `+Inf`,
//! `_sum`, `_count`) per subsystem: cheap to scrape and to store. Below 1 us the
//! machine's timer itself is not finer; above 100 ms is `+Inf` (and the overrun
//! counter says it).

#![allow(
    clippy::disallowed_types,
    reason = "prometheus-client's f64 gauge names its atomic word; no protocol here"
)]

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use ictus_exec::live::LiveStatus;

/// The upper bounds of the histograms' buckets, in seconds (see the module's text).
pub const BUCKETS: [f64; 16] = [
    1e-6, 2e-6, 5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3,
    50e-3, 100e-3,
];

/// The content type of `/metrics`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;
type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// What a subsystem's histograms saw last, so a snapshot adds only what is new.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    window: Option<u64>,
    frames_run: u64,
}

/// The run's metrics: updated from each snapshot, encoded on each scrape.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    frame: Gauge,
    tick: Seconds,
    frames: Family<Labels, Counter>,
    overruns: Family<Labels, Counter>,
    lost: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    subsystem_up: Family<Labels, Gauge>,
    lateness: Histograms,
    execution: Histograms,
    max_lateness: Family<Labels, Seconds>,
    max_execution: Family<Labels, Seconds>,
    cell_age: Family<Labels, Seconds>,
    cell_writes: Family<Labels, Counter>,
    host_up: Family<Labels, Gauge>,
    host_ticks: Family<Labels, Counter>,
    host_ticks_missing: Family<Labels, Counter>,
    tick_lateness: Family<Labels, Seconds>,
    cell_latency: Family<Labels, Seconds>,
    seen: Mutex<HashMap<String, Seen>>,
}

/// Brings a counter up to a total read from the run (totals only grow).
fn raise(counter: &Counter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

/// Registers each family, with its unit where it has one (`None`: a count).
macro_rules! register {
    ($registry:ident; $($name:literal, $unit:expr, $family:expr, $help:literal;)*) => {
        $(match $unit {
            Some(unit) => $registry.register_with_unit($name, $help, unit, $family.clone()),
            None => $registry.register($name, $help, $family.clone()),
        })*
    };
}

impl Metrics {
    /// The families of the run `run` (its name labels every series), empty until the
    /// first snapshot.
    pub fn new(run: &str) -> Metrics {
        let mut registry = Registry::with_prefix_and_labels(
            "ictus",
            [(
                std::borrow::Cow::Borrowed("run"),
                std::borrow::Cow::Owned(run.to_string()),
            )]
            .into_iter(),
        );
        let m = Metrics {
            registry: Registry::default(),
            frame: Gauge::default(),
            tick: Seconds::default(),
            frames: Family::default(),
            overruns: Family::default(),
            lost: Family::default(),
            errors: Family::default(),
            subsystem_up: Family::default(),
            lateness: Family::new_with_constructor(histogram),
            execution: Family::new_with_constructor(histogram),
            max_lateness: Family::default(),
            max_execution: Family::default(),
            cell_age: Family::default(),
            cell_writes: Family::default(),
            host_up: Family::default(),
            host_ticks: Family::default(),
            host_ticks_missing: Family::default(),
            tick_lateness: Family::default(),
            cell_latency: Family::default(),
            seen: Mutex::new(HashMap::new()),
        };
        // Name, unit (none: a count), help, family.
        register! {
            registry;
            "frame", None, m.frame, "The run's current frame";
            "tick", Some(Unit::Seconds), m.tick, "The run's tick";
            "frames", None, m.frames, "Frames a subsystem ran";
            "overruns", None, m.overruns, "Releases a subsystem skipped because it was still running (or woke late)";
            "lost_frames", None, m.lost, "Releases due, not run and not overrun (a dead subsystem's)";
            "errors", None, m.errors, "Frames whose run returned an error";
            "subsystem_up", None, m.subsystem_up, "1 while the subsystem lives, 0 once it failed (process died, thread panicked, host left)";
            "release_lateness", Some(Unit::Seconds), m.lateness, "The largest release lateness (wake-up minus release) of each jitter window of about 100 ms: one observation per window";
            "execution_time", Some(Unit::Seconds), m.execution, "A subsystem's last execution time, observed once per status snapshot (every 50 ms) in which it ran";
            "max_release_lateness", Some(Unit::Seconds), m.max_lateness, "The largest release lateness so far";
            "max_execution_time", Some(Unit::Seconds), m.max_execution, "The longest execution so far";
            "cell_age", Some(Unit::Seconds), m.cell_age, "How old a cell's content is: now minus the start of the frame that published it, or minus the arrival of a copy from another host";
            "cell_writes", None, m.cell_writes, "Publications of a cell";
            "host_up", None, m.host_up, "1 while the host is in the run (its liveliness token is there)";
            "host_ticks", None, m.host_ticks, "Ticks that reached a node";
            "host_ticks_missing", None, m.host_ticks_missing, "Ticks that never reached a node";
            "host_tick_lateness", Some(Unit::Seconds), m.tick_lateness, "Tick arrival minus the tick's deadline on a node: median so far (p50), largest so far (max), largest over the node's last 100 ms (recent)";
            "link_cell_latency", Some(Unit::Seconds), m.cell_latency, "Cells that came over the link to this host: arrival minus the writer's frame start, so far";
        }
        Metrics { registry, ..m }
    }

    /// Takes in a snapshot: counters rise to its totals, gauges take its values,
    /// histograms observe what is new since the last one.
    pub fn update(&self, s: &LiveStatus) {
        self.frame.set(i64::try_from(s.frame).unwrap_or(i64::MAX));
        self.tick.set(seconds(s.tick_ns));
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for sub in &s.subsystems {
            let l: Labels = vec![("subsystem", sub.name.clone())];
            raise(&self.frames.get_or_create(&l), sub.frames_run);
            raise(&self.overruns.get_or_create(&l), sub.overruns);
            raise(&self.lost.get_or_create(&l), sub.lost);
            raise(&self.errors.get_or_create(&l), sub.errors);
            self.subsystem_up
                .get_or_create(&l)
                .set(i64::from(sub.alive));
            self.max_lateness
                .get_or_create(&l)
                .set(seconds(sub.max_jitter_ns));
            self.max_execution
                .get_or_create(&l)
                .set(seconds(sub.max_exec_ns));
            let last = seen.entry(sub.name.clone()).or_default();
            let lateness = self.lateness.get_or_create(&l);
            if let (Some(w), Some(j)) = (sub.window, sub.window_jitter_ns)
                && last.window != Some(w)
            {
                lateness.observe(seconds(j));
                last.window = Some(w);
            }
            let execution = self.execution.get_or_create(&l);
            if sub.frames_run > last.frames_run {
                execution.observe(seconds(sub.last_exec_ns));
                last.frames_run = sub.frames_run;
            }
        }
        drop(seen);
        for cell in &s.cells {
            let l: Labels = vec![("cell", cell.name.clone())];
            raise(&self.cell_writes.get_or_create(&l), cell.writes);
            match cell.age_ns {
                Some(a) => {
                    self.cell_age.get_or_create(&l).set(seconds(a));
                }
                None => {
                    self.cell_age.remove(&l);
                }
            }
        }
        for host in &s.hosts {
            let l: Labels = vec![("host", host.name.clone())];
            self.host_up
                .get_or_create(&vec![
                    ("host", host.name.clone()),
                    ("role", host.role.clone()),
                ])
                .set(i64::from(host.alive));
            raise(&self.host_ticks.get_or_create(&l), host.ticks);
            raise(
                &self.host_ticks_missing.get_or_create(&l),
                host.ticks_missing,
            );
            for (stat, v) in [
                ("p50", host.tick_late_p50_ns),
                ("max", host.tick_late_max_ns),
                ("recent", host.tick_late_recent_ns),
            ] {
                let l: Labels = vec![("host", host.name.clone()), ("stat", stat.into())];
                if let Some(v) = v {
                    self.tick_lateness.get_or_create(&l).set(seconds(v));
                }
            }
            for (stat, v) in [
                ("p50", host.cell_latency_p50_ns),
                ("p99", host.cell_latency_p99_ns),
                ("max", host.cell_latency_max_ns),
            ] {
                let l: Labels = vec![("host", host.name.clone()), ("stat", stat.into())];
                if let Some(v) = v {
                    self.cell_latency.get_or_create(&l).set(seconds(v));
                }
            }
        }
    }

    /// The exposition: every family, then `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; the families' own encoders do not either.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One subsystem that ran 10 frames (window 3, 40 us late at worst, 250 us of
    /// execution), a cell 1.5 ms old, a main host and a node with tick and link
    /// figures.
    fn status(frames: u64, window: u64) -> LiveStatus {
        serde_json::from_value(serde_json::json!({
            "name": "stress",
            "frame": frames,
            "state": "run",
            "tick_ns": 1_000_000,
            "subsystems": [{
                "name": "ctrl", "status": "running", "pid": 1, "frames_run": frames,
                "overruns": 2, "lost": 0, "errors": 1, "alive": true,
                "max_jitter_ns": 60_000, "window_jitter_ns": 40_000, "window": window,
                "last_exec_ns": 250_000, "max_exec_ns": 300_000
            }],
            "pending": [],
            "cells": [{
                "name": "pos", "bytes": 8, "writers": ["ctrl"], "last_writer": "ctrl",
                "frame": frames, "age_ns": 1_500_000, "writes": frames
            }, {
                "name": "never", "bytes": 8, "writers": [], "last_writer": null,
                "frame": null, "age_ns": null, "writes": 0
            }],
            "hosts": [
                {"name": "a", "role": "main", "alive": true, "ticks": 0, "ticks_missing": 0,
                 "tick_late_p50_ns": null, "tick_late_max_ns": null,
                 "tick_late_recent_ns": null},
                {"name": "b", "role": "node", "alive": false, "ticks": 9, "ticks_missing": 1,
                 "tick_late_p50_ns": 30_000, "tick_late_max_ns": 90_000,
                 "tick_late_recent_ns": 50_000, "cell_latency_p50_ns": 70_000,
                 "cell_latency_p99_ns": 120_000, "cell_latency_max_ns": 200_000}
            ]
        }))
        .unwrap()
    }

    /// Asserts that `text` has a line starting with each of `starts`.
    fn lines(text: &str, starts: &[&str]) {
        for start in starts {
            assert!(
                text.lines().any(|l| l.starts_with(start)),
                "no line starting {start:?} in\n{text}"
            );
        }
    }

    #[test]
    fn the_exposition_names_types_and_labels_every_family_and_ends_in_eof() {
        let m = Metrics::new("stress");
        m.update(&status(10, 3));
        let text = m.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for (family, kind) in [
            ("ictus_frame", "gauge"),
            ("ictus_tick_seconds", "gauge"),
            ("ictus_frames", "counter"),
            ("ictus_overruns", "counter"),
            ("ictus_lost_frames", "counter"),
            ("ictus_errors", "counter"),
            ("ictus_subsystem_up", "gauge"),
            ("ictus_release_lateness_seconds", "histogram"),
            ("ictus_execution_time_seconds", "histogram"),
            ("ictus_max_release_lateness_seconds", "gauge"),
            ("ictus_max_execution_time_seconds", "gauge"),
            ("ictus_cell_age_seconds", "gauge"),
            ("ictus_cell_writes", "counter"),
            ("ictus_host_up", "gauge"),
            ("ictus_host_ticks", "counter"),
            ("ictus_host_ticks_missing", "counter"),
            ("ictus_host_tick_lateness_seconds", "gauge"),
            ("ictus_link_cell_latency_seconds", "gauge"),
        ] {
            lines(
                &text,
                &[
                    &format!("# TYPE {family} {kind}"),
                    &format!("# HELP {family} "),
                ],
            );
        }
        assert!(
            !text.contains(r#"ictus_cell_age_seconds{cell="never""#),
            "{text}"
        );
        lines(
            &text,
            &[
                "# UNIT ictus_release_lateness_seconds seconds",
                r#"ictus_frame{run="stress"} 10"#,
                r#"ictus_frames_total{run="stress",subsystem="ctrl"} 10"#,
                r#"ictus_overruns_total{run="stress",subsystem="ctrl"} 2"#,
                r#"ictus_errors_total{run="stress",subsystem="ctrl"} 1"#,
                r#"ictus_lost_frames_total{run="stress",subsystem="ctrl"} 0"#,
                r#"ictus_cell_age_seconds{run="stress",cell="pos"} 0.0015"#,
                r#"ictus_host_up{run="stress",host="a",role="main"} 1"#,
                r#"ictus_host_up{run="stress",host="b",role="node"} 0"#,
                r#"ictus_host_ticks_missing_total{run="stress",host="b"} 1"#,
                r#"ictus_host_tick_lateness_seconds{run="stress",host="b",stat="recent"} 0.00005"#,
                r#"ictus_link_cell_latency_seconds{run="stress",host="b",stat="p99"} 0.00012"#,
            ],
        );
        // 40 us of lateness falls in the 50 us bucket, not the 20 us one; 250 us of
        // execution in the 500 us one.
        let lateness = r#"ictus_release_lateness_seconds_bucket{run="stress",le="#;
        let execution = r#"ictus_execution_time_seconds_bucket{run="stress",le="#;
        lines(
            &text,
            &[
                &format!(r#"{lateness}"0.00002",subsystem="ctrl"}} 0"#),
                &format!(r#"{lateness}"0.00005",subsystem="ctrl"}} 1"#),
                &format!(r#"{lateness}"+Inf",subsystem="ctrl"}} 1"#),
                &format!(r#"{execution}"0.0002",subsystem="ctrl"}} 0"#),
                &format!(r#"{execution}"0.0005",subsystem="ctrl"}} 1"#),
            ],
        );
        let buckets = text.lines().filter(|l| l.starts_with(lateness)).count();
        assert_eq!(buckets, BUCKETS.len() + 1, "{text}");
    }

    #[test]
    fn a_window_or_a_frame_is_observed_once_and_counters_follow_the_totals() {
        let m = Metrics::new("stress");
        m.update(&status(10, 3));
        // The same window and no new frame: nothing new to observe.
        m.update(&status(10, 3));
        m.update(&status(25, 4));
        let text = m.encode();
        lines(
            &text,
            &[
                r#"ictus_release_lateness_seconds_count{run="stress",subsystem="ctrl"} 2"#,
                r#"ictus_execution_time_seconds_count{run="stress",subsystem="ctrl"} 2"#,
                r#"ictus_frames_total{run="stress",subsystem="ctrl"} 25"#,
            ],
        );
    }

    #[test]
    fn the_grafana_dashboard_asks_only_for_families_that_exist() {
        let m = Metrics::new("stress");
        m.update(&status(10, 3));
        let text = m.encode();
        let dashboard = include_str!("../../../docs/grafana-ictus.json");
        let json: serde_json::Value = serde_json::from_str(dashboard).unwrap();
        let mut asked = 0;
        for word in dashboard.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("ictus_") {
                asked += 1;
                assert!(
                    text.lines().any(|l| l.starts_with(&format!("{word}{{"))
                        || l == format!("# TYPE {word} histogram")),
                    "the dashboard asks for {word}, which /metrics does not serve"
                );
            }
        }
        assert!(asked > 10, "{asked}");
        assert!(json["panels"].as_array().is_some_and(|p| p.len() >= 8));
    }
}
