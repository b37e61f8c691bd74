//! The record of a run of the executive (`ictus run`, `ictus node`): the schema of
//! its parameters ([`RunParams`]) and the conversion of a [`RunReport`] into a
//! [`RunRecord`] ([`fill`]), so a program that runs a schedule writes the same record
//! as the command line, and every reader reads it back the same way.
//!
//! It lives beside the executive's report ([`crate::report`]), above the record
//! format (`ictus-record`), which the probes share; the run's views (terminal,
//! Markdown, HTML) are the report crate's, beside the probes' (`ictus_report::probes`).
//!
//! ```no_run
//! use ictus_exec::run::{self, RunOptions};
//! use ictus_exec::run_record;
//! use ictus_exec::schedule::Schedule;
//! use ictus_os::facts::online_cpus;
//! use ictus_record::progress::Progress;
//! use ictus_record::session::Session;
//!
//! let schedule = Schedule::from_file("ring.toml".as_ref(), &online_cpus())?;
//! let session = Session::begin(std::env::args().collect(), false);
//! let report = run::run(&schedule, &mut run::builtin, RunOptions::default())?;
//! let record = run_record::finish(session, &schedule, None, &report, &Progress::new());
//! assert_eq!(record.probe, "run");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use crate::report::{Distribution, HostReport, RunReport, SubsystemReport};
use crate::schedule::{Process, Schedule, WaitSpec};
use ictus_class::Class;
use ictus_core::Nanos;
use ictus_record::progress::Progress;
use ictus_record::record::{LatencyResult, Measurement, RunRecord};
use ictus_record::registry::RUN_RECORD;
use ictus_record::session::Session;
use ictus_record::view::run::{
    CellLatency, CellMetrics, EXECUTION_TIME, ForwardDelay, ForwardMetrics, Frames, FramesLabels,
    FramesMetrics, HostClock, HostLabels, LateArrivals, LateLabels, LateMetrics, LinkStageDelay,
    RELEASE_JITTER, StageLabels, StageMetrics, Stress, StressMetrics, Subsystem, SubsystemLabels,
    SubsystemMetrics, TickArrival, TickMetrics,
};
use ictus_record::view::{Empty, Point};
use serde::{Deserialize, Serialize};

/// The record of `schedule`'s run: `session` finished with the run's parameters
/// (`duration`: the run's limit, if any), then [`fill`]ed from `report`.
pub fn finish(
    session: Session,
    schedule: &Schedule,
    duration: Option<Duration>,
    report: &RunReport,
    progress: &Progress,
) -> RunRecord {
    let parameters = RunParams::of(schedule, duration, &report.events);
    let mut record = session.finish(RUN_RECORD, &parameters, progress);
    fill(&mut record, report);
    record
}

/// The parameters of a run as recorded (units in the key names), and as readers
/// read them back (`RunRecord::parameters_as::<RunParams>()`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunParams {
    /// The schedule's file.
    pub schedule: String,
    /// The run's name (a node's: the schedule's name, a dot and the host's).
    pub name: String,
    /// The tick, in nanoseconds.
    pub tick_ns: u64,
    /// The major frame, in ticks.
    pub major_frame: u64,
    /// How the coordinator waits for a tick.
    pub wait: WaitSpec,
    /// The run's limit, if any.
    pub duration_ns: Option<u64>,
    /// The schedule's hosts (none: one host).
    pub hosts: Vec<HostParams>,
    /// The schedule's subsystems, in its order.
    pub subsystems: Vec<SubsystemParams>,
    /// What happened during the run, when anything did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
}

/// A host of the schedule, as recorded.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostParams {
    /// Its name in the host table.
    pub name: String,
    /// Its address.
    pub address: String,
}

/// A subsystem of the schedule, as recorded.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SubsystemParams {
    /// Its name.
    pub name: String,
    /// Its first frame.
    pub start: u64,
    /// Its period, in frames.
    pub period: u64,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Its task class.
    pub class: Class,
    /// The process it runs in.
    pub process: Process,
    /// The built-in it runs, if one.
    pub builtin: Option<String>,
    /// Its synchronous group, if any.
    pub group: Option<String>,
    /// Its host's name, when the schedule has hosts.
    pub host: Option<String>,
}

impl RunParams {
    /// The parameters of `schedule`'s run, limited to `duration`, with the `events`
    /// that happened during it.
    pub fn of(schedule: &Schedule, duration: Option<Duration>, events: &[String]) -> RunParams {
        RunParams {
            schedule: schedule.path.display().to_string(),
            name: schedule.name.clone(),
            tick_ns: schedule.tick.as_u64(),
            major_frame: schedule.major_frame,
            wait: schedule.wait,
            duration_ns: duration.map(|d| Nanos::from(d).as_u64()),
            hosts: schedule
                .hosts
                .iter()
                .map(|h| HostParams {
                    name: h.name.clone(),
                    address: h.address.to_string(),
                })
                .collect(),
            subsystems: schedule
                .subsystems
                .iter()
                .map(|s| SubsystemParams {
                    name: s.name.clone(),
                    start: s.start,
                    period: s.period,
                    cpu: s.cpu,
                    class: s.class.clone(),
                    process: s.process.clone(),
                    builtin: s.builtin.clone(),
                    group: s.group.clone(),
                    host: schedule.hosts.get(s.host).map(|h| h.name.clone()),
                })
                .collect(),
            events: events.to_vec(),
        }
    }
}

fn latency(d: &Distribution, missed: u64, longest: u64) -> LatencyResult {
    LatencyResult {
        thin_percentiles: d.summary.thin_percentiles(),
        summary: d.summary.clone(),
        max_index: d.max_index,
        missed,
        longest_miss_run: longest,
        histogram: d.histogram.clone(),
    }
}

/// Puts the run's figures into the record: per subsystem a `release-jitter` and an
/// `execution-time` measurement, the stress check, the warnings and the headline.
pub fn fill(record: &mut RunRecord, report: &RunReport) {
    record.complete = record.complete && report.complete;
    record.warnings.extend(report.warnings.iter().cloned());
    record.obtained.pm_qos = report.pm_qos.clone();
    record.explanation = report.explanation.clone();
    for s in &report.subsystems {
        let (jitter, exec) = subsystem_measurements(s);
        record.measurements.push(jitter);
        record.measurements.push(exec);
    }
    let labels = FramesLabels {
        tick_ns: report.tick_ns,
        major_frame: report.major_frame,
        wait: report.wait.clone(),
    };
    let metrics = FramesMetrics {
        frames: report.frames as f64,
    };
    let mut run = Point::<Frames>::new(labels, metrics).measurement();
    // One figure per state of the schedule: the keys are the schedule's own names.
    for (state, frames) in &report.state_frames {
        run = run.metric(&format!("{state}_frames"), *frames as f64);
    }
    record.measurements.push(run);
    if let Some(st) = &report.stress {
        let metrics = StressMetrics {
            run_frames: st.run_frames as f64,
            final_value: st.final_value as f64,
            missed_frames: st.missed_frames as f64,
            incoherent_cells: st.incoherent_cells as f64,
        };
        record
            .measurements
            .push(Point::<Stress>::new(Empty {}, metrics).measurement());
    }
    for h in &report.hosts {
        record.measurements.extend(host_measurements(h));
    }
    record.headline = Some(headline(report));
}

/// A subsystem's `release-jitter` and `execution-time` measurements.
fn subsystem_measurements(s: &SubsystemReport) -> (Measurement, Measurement) {
    let labels = SubsystemLabels {
        subsystem: s.name.clone(),
        process: s.process.clone(),
        start_frame: s.start,
        period_frames: s.period,
        cpu: s.cpu,
        class: s.outcome.as_ref().map(|o| o.class_obtained.clone()),
        policy: s.outcome.as_ref().map(|o| o.policy.clone()),
        crashed: s.crashed.clone(),
    };
    let metrics = SubsystemMetrics {
        releases_due: s.releases_due as f64,
        frames_run: s.frames_run as f64,
        overruns: s.overruns as f64,
        longest_overrun_streak: s.longest_overrun_streak as f64,
        lost_frames: s.lost as f64,
        hybrid_margin_ns: None,
        errors: Some(s.errors as f64),
        finished_early: (s.finished_early > 0).then_some(s.finished_early as f64),
    };
    let mut point = Point::<Subsystem>::new(labels, metrics);
    let mut exec = point.measurement_named(EXECUTION_TIME);
    point.metrics.hybrid_margin_ns = s
        .outcome
        .as_ref()
        .and_then(|o| o.hybrid_margin_ns)
        .map(|m| m as f64);
    let mut jitter = point.measurement_named(RELEASE_JITTER);
    if let Some(o) = &s.outcome {
        jitter = jitter.with_latency(latency(&o.jitter, s.overruns, s.longest_overrun_streak));
        exec = exec.with_latency(latency(&o.exec, s.overruns, s.longest_overrun_streak));
    }
    (jitter, exec)
}

/// A host's link figures: its ticks, its cells, and what it forwarded.
fn host_measurements(h: &HostReport) -> Vec<Measurement> {
    let labels = HostLabels {
        host: h.name.clone(),
        role: h.role.clone(),
    };
    let clock = HostClock {
        clock_offset_ns: h.clock_offset_ns as f64,
        clock_uncertainty_ns: h.clock_uncertainty_ns as f64,
    };
    let main = labels.is_main();
    let ticks = TickMetrics {
        clock: clock.clone(),
        ticks_received: h.ticks as f64,
        ticks_sent: main.then_some(h.ticks_sent_or_missing as f64),
        ticks_missing: (!main).then_some(h.ticks_sent_or_missing as f64),
        bytes_sent: h.bytes_sent as f64,
    };
    let mut tick = Point::<TickArrival>::new(labels.clone(), ticks).measurement();
    if let Some(d) = &h.tick_lateness {
        tick = tick.with_latency(latency(d, 0, 0));
    }
    let cells = CellMetrics {
        clock: clock.clone(),
        cells_sent: h.cells_sent as f64,
        cells_received: h.cells_received as f64,
        refused: h.refused.iter().map(|r| r.count).sum::<u64>() as f64,
        dropped: h.dropped.iter().map(|d| d.count).sum::<u64>() as f64,
        late: h.late as f64,
    };
    let mut cell = Point::<CellLatency>::new(labels.clone(), cells).measurement();
    if let Some(d) = &h.cell_latency {
        cell = cell.with_latency(latency(d, 0, 0));
    }
    let mut out = vec![tick, cell];
    out.extend(h.stages.iter().map(|s| {
        Point::<LinkStageDelay>::new(
            StageLabels {
                host: h.name.clone(),
                role: h.role.clone(),
                stage: s.stage.name().to_string(),
            },
            StageMetrics {
                publications: s.delay.summary.count as f64,
            },
        )
        .measurement()
        .with_latency(latency(&s.delay, 0, 0))
    }));
    if let Some(d) = &h.forward_delay {
        let forwarded = ForwardMetrics {
            clock,
            cells_sent: h.cells_sent as f64,
        };
        out.push(
            Point::<ForwardDelay>::new(labels, forwarded)
                .measurement()
                .with_latency(latency(d, 0, 0)),
        );
    }
    out.extend(h.late_by.iter().map(|l| {
        Point::<LateArrivals>::new(
            LateLabels {
                host: h.name.clone(),
                role: h.role.clone(),
                what: l.what.clone(),
                from: l.from.clone(),
                stage: l.stage.name().to_string(),
            },
            LateMetrics {
                arrivals: l.arrivals as f64,
                frames: l.frames as f64,
                late_total_ns: l.late_total_ns as f64,
                late_worst_ns: l.late_worst_ns as f64,
                first_frame: l.first_frame as f64,
            },
        )
        .measurement()
    }));
    out
}

/// The run in one line: the stress check's outcome, or the frames and what was lost.
fn headline(report: &RunReport) -> String {
    let overruns: u64 = report.subsystems.iter().map(|s| s.overruns).sum();
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    match &report.stress {
        Some(st) => format!(
            "stress: {} frames in RUN at {}, final value {}: {} missed frames ({} overruns, {} lost)",
            st.run_frames,
            Nanos::new(report.tick_ns),
            st.final_value,
            st.missed_frames,
            overruns,
            lost
        ),
        None => format!(
            "{} frames at {}: {} overruns, {} frames lost",
            report.frames,
            Nanos::new(report.tick_ns),
            overruns,
            lost
        ),
    }
}

/// A run of one subsystem on two hosts with every figure a record holds (stress,
/// crash, link stages, late arrivals): the one example the run record's writing and
/// its views are tested on, so the two cannot drift apart.
#[doc(hidden)]
pub mod example {
    use std::collections::BTreeMap;

    use crate::report::{
        Distribution, HostReport, LateFigure, LateWhere, LinkStage, RunReport, StageFigure,
        StressReport, SubsystemReport,
    };
    use crate::schedule::{Process, WaitSpec};
    use ictus_class::Class;
    use ictus_core::Nanos;

    use ictus_record::provenance::Provenance;
    use ictus_record::record::{Obtained, RunRecord};
    use ictus_record::registry::RUN_RECORD;

    use super::{RunParams, SubsystemParams};

    pub fn report() -> RunReport {
        let host = |name: &str, role: &str, ticks: u64, other: u64| HostReport {
            name: name.into(),
            role: role.into(),
            ticks,
            ticks_sent_or_missing: other,
            cells_sent: 10,
            cells_received: 9,
            bytes_sent: 4096,
            ..HostReport::default()
        };
        RunReport {
            name: "ring".into(),
            schedule: "ring.toml".into(),
            tick_ns: 1_000_000,
            major_frame: 2,
            wait: "hybrid".into(),
            frames: 400,
            state_frames: BTreeMap::from([("run".into(), 400)]),
            transitions: Vec::new(),
            subsystems: vec![SubsystemReport {
                name: "p".into(),
                process: "own".into(),
                start: 0,
                period: 2,
                cpu: Some(1),
                releases_due: 200,
                frames_run: 199,
                overruns: 1,
                longest_overrun_streak: 1,
                lost: 3,
                finished_early: 0,
                errors: 2,
                crashed: Some("killed by signal 9".into()),
                outcome: None,
            }],
            stress: Some(StressReport {
                run_frames: 400,
                counters: Vec::new(),
                final_value: 388,
                missed_frames: 12,
                incoherent_cells: 0,
            }),
            warnings: Vec::new(),
            events: vec!["pause at frame 10".into()],
            complete: true,
            stopped_by: None,
            tap: None,
            hosts: vec![host("a", "main", 0, 400), {
                // A node that received: the receiving stages, in order.
                let mut b = host("b", "node", 399, 1);
                let mut h = ictus_core::LatencyHistogram::new();
                h.record(Nanos::new(42_000));
                b.stages = [LinkStage::Transit, LinkStage::Copy]
                    .into_iter()
                    .map(|stage| StageFigure {
                        stage,
                        delay: Distribution::of(&h),
                    })
                    .collect();
                b.late_by = vec![
                    LateFigure {
                        what: "cell p".into(),
                        from: "a".into(),
                        stage: LateWhere::Sender,
                        arrivals: 2,
                        frames: 3,
                        late_total_ns: 2_500_000,
                        late_worst_ns: 2_000_000,
                        first_frame: 17,
                    },
                    LateFigure {
                        what: "tick".into(),
                        from: "a".into(),
                        stage: LateWhere::Whole,
                        arrivals: 1,
                        frames: 5,
                        late_total_ns: 6_000_000,
                        late_worst_ns: 6_000_000,
                        first_frame: 30,
                    },
                ];
                b
            }],
            pm_qos: None,
            explanation: None,
        }
    }

    /// `report`'s record as `ictus run` writes it, its parameters [`params`]'s.
    pub fn record(report: &RunReport) -> RunRecord {
        let parameters = serde_json::to_value(params(report.events.clone()))
            .expect("the parameters are plain data");
        let mut record = RunRecord::new(
            RUN_RECORD,
            Provenance::capture(Vec::new()),
            parameters,
            Obtained::default(),
        );
        super::fill(&mut record, report);
        record
    }

    pub fn params(events: Vec<String>) -> RunParams {
        RunParams {
            schedule: "ring.toml".into(),
            name: "ring".into(),
            tick_ns: 1_000_000,
            major_frame: 2,
            wait: WaitSpec::Hybrid { margin: None },
            duration_ns: None,
            hosts: Vec::new(),
            subsystems: vec![SubsystemParams {
                name: "p".into(),
                start: 0,
                period: 2,
                cpu: Some(1),
                class: Class::Normal,
                process: Process::Own,
                builtin: Some("increment".into()),
                group: None,
                host: None,
            }],
            events,
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    use super::example::{params, record, report};

    #[test]
    fn fill_writes_a_measurement_per_figure() {
        let sut = record(&report());
        let names: Vec<&str> = sut.measurements.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "release-jitter",
                "execution-time",
                "frames",
                "stress",
                "tick-arrival",
                "cell-latency",
                "tick-arrival",
                "cell-latency",
                "link-stage",
                "link-stage",
                "late-arrivals",
                "late-arrivals"
            ]
        );
        let late = sut.measurements[10].read::<LateArrivals>().unwrap();
        assert_eq!(
            (late.labels.host.as_str(), late.labels.from.as_str()),
            ("b", "a")
        );
        assert_eq!(
            (late.labels.stage.as_str(), late.metrics.frames),
            ("sender", 3.0)
        );
        let frames = &sut.measurements[2];
        assert_eq!(frames.read::<Frames>().unwrap().metrics.frames, 400.0);
        assert_eq!(frames.metrics["run_frames"], 400.0);
        assert_eq!(
            sut.headline.as_deref(),
            Some(
                "stress: 400 frames in RUN at 1.00 ms, final value 388: 12 missed frames (1 overruns, 3 lost)"
            )
        );
        let back = sut.parameters_as::<RunParams>().unwrap();
        assert_eq!(back.subsystems[0].name, "p");
    }

    #[test]
    fn the_parameters_are_written_as_before() {
        let sut = serde_json::to_value(params(Vec::new())).unwrap();
        let keys: Vec<&str> = sut
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "schedule",
                "name",
                "tick_ns",
                "major_frame",
                "wait",
                "duration_ns",
                "hosts",
                "subsystems"
            ]
        );
        assert_eq!(sut["wait"]["mode"], "hybrid");
        assert_eq!(sut["subsystems"][0]["class"]["class"], "normal");
        let with_events = serde_json::to_value(params(vec!["x".into()])).unwrap();
        assert_eq!(with_events["events"][0], "x");
    }
}
