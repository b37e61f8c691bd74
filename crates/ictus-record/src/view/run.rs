//! The measurements of `ictus run` (a cyclic executive's run): per subsystem its
//! release jitter and execution time, the frames, the stress check, and per host the
//! link's figures.

use serde::{Deserialize, Serialize};

use super::{Empty, Kind};

/// The name of a subsystem's release-jitter measurement.
pub const RELEASE_JITTER: &str = "release-jitter";
/// The name of a subsystem's execution-time measurement.
pub const EXECUTION_TIME: &str = "execution-time";

/// A subsystem's release jitter or execution time (`release-jitter`,
/// `execution-time`): the same labels and counts, the latency differs.
pub enum Subsystem {}

impl Kind for Subsystem {
    const NAMES: &'static [&'static str] = &[RELEASE_JITTER, EXECUTION_TIME];
    type Labels = SubsystemLabels;
    type Metrics = SubsystemMetrics;
}

/// Which subsystem, and how it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsystemLabels {
    /// Its name in the schedule.
    pub subsystem: String,
    /// Where it ran (`in-process`, a process name).
    pub process: String,
    /// Its first frame.
    pub start_frame: u64,
    /// Frames between its releases.
    pub period_frames: u64,
    /// The CPU it was pinned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// The class it obtained (`rt0`, `normal (other)`), when it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The policy it obtained, when it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How it crashed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crashed: Option<String>,
}

/// A subsystem's frame accounting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsystemMetrics {
    /// Releases due over the run.
    pub releases_due: f64,
    /// Frames it ran.
    pub frames_run: f64,
    /// Releases it missed because its previous frame was still running.
    pub overruns: f64,
    /// Longest run of consecutive overruns.
    pub longest_overrun_streak: f64,
    /// Frames lost (a crash, a process that never answered).
    pub lost_frames: f64,
    /// The hybrid wait's margin (release jitter only).
    pub hybrid_margin_ns: Option<f64>,
    /// Frames whose `run` returned an error (absent in records before the
    /// subsystem API returned errors).
    #[serde(default)]
    pub errors: Option<f64>,
    /// Releases after the subsystem said it had finished: not due, not lost.
    #[serde(default)]
    pub finished_early: Option<f64>,
}

/// The run's frames (`frames`); the frames spent in each state are written beside
/// them as `STATE_frames`.
pub enum Frames {}

impl Kind for Frames {
    const NAMES: &'static [&'static str] = &["frames"];
    type Labels = FramesLabels;
    type Metrics = FramesMetrics;
}

/// The run's timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FramesLabels {
    /// The tick.
    pub tick_ns: u64,
    /// Ticks per major frame.
    pub major_frame: u64,
    /// How the executive waits for a tick.
    pub wait: String,
}

/// The frames run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FramesMetrics {
    /// Frames run in all.
    pub frames: f64,
}

/// The stress check (`stress`): counters passed around the schedule.
pub enum Stress {}

impl Kind for Stress {
    const NAMES: &'static [&'static str] = &["stress"];
    type Labels = Empty;
    type Metrics = StressMetrics;
}

/// What the stress check found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StressMetrics {
    /// Frames in the run state.
    pub run_frames: f64,
    /// The counters' final value.
    pub final_value: f64,
    /// Frames the counters missed.
    pub missed_frames: f64,
    /// Cells read torn or out of step.
    pub incoherent_cells: f64,
}

/// How a host's tick arrived (`tick-arrival`): its latency is the tick's lateness.
pub enum TickArrival {}

impl Kind for TickArrival {
    const NAMES: &'static [&'static str] = &["tick-arrival"];
    type Labels = HostLabels;
    type Metrics = TickMetrics;
}

/// How a host's cells travelled (`cell-latency`): its latency is a cell's.
pub enum CellLatency {}

impl Kind for CellLatency {
    const NAMES: &'static [&'static str] = &["cell-latency"];
    type Labels = HostLabels;
    type Metrics = CellMetrics;
}

/// How long a host held the cells it forwarded (`forward-delay`).
pub enum ForwardDelay {}

impl Kind for ForwardDelay {
    const NAMES: &'static [&'static str] = &["forward-delay"];
    type Labels = HostLabels;
    type Metrics = ForwardMetrics;
}

/// One stage of the cells' way between hosts (`link-stage`): its latency is the
/// stage's delay, on the host that measured it (the sender for `wake`, `encode` and
/// `put`, the receiver for `transit` and `copy`); a record lists them in the order a
/// publication passes them.
pub enum LinkStageDelay {}

impl Kind for LinkStageDelay {
    const NAMES: &'static [&'static str] = &["link-stage"];
    type Labels = StageLabels;
    type Metrics = StageMetrics;
}

/// The host and stage a stage's figure is about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageLabels {
    /// Its name in the schedule.
    pub host: String,
    /// `main` or another role.
    pub role: String,
    /// The stage (`wake`, `encode`, `put`, `transit`, `copy`).
    pub stage: String,
}

/// A stage's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageMetrics {
    /// Publications measured.
    pub publications: f64,
}

/// Late arrivals on a host (`late-arrivals`): one measurement per thing that came
/// late (a cell, the tick), sender and the part of the way that took most of its
/// time (`sender`: before the put; `transit`: Zenoh, the network, the receiver's
/// callback; `whole`: not split), with the frames they cost there.
pub enum LateArrivals {}

impl Kind for LateArrivals {
    const NAMES: &'static [&'static str] = &["late-arrivals"];
    type Labels = LateLabels;
    type Metrics = LateMetrics;
}

/// What came late where, from which host, and where its time went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LateLabels {
    /// The host it arrived on, its name in the schedule.
    pub host: String,
    /// `main` or another role.
    pub role: String,
    /// `cell NAME` or `tick`.
    pub what: String,
    /// The host that sent it.
    pub from: String,
    /// `sender`, `transit` or `whole`.
    pub stage: String,
}

/// How many came late, the frames they cost and by how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LateMetrics {
    /// Arrivals after they were due.
    pub arrivals: f64,
    /// Frames in which the host's copy was older than due because of them.
    pub frames: f64,
    /// Lateness summed over the arrivals.
    pub late_total_ns: f64,
    /// The worst lateness.
    pub late_worst_ns: f64,
    /// The first frame one of them was due by.
    pub first_frame: f64,
}

/// The host a link figure is about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLabels {
    /// Its name in the schedule.
    pub host: String,
    /// `main` (it sends the tick) or another role.
    pub role: String,
}

impl HostLabels {
    /// Whether this host sends the tick.
    pub fn is_main(&self) -> bool {
        self.role == "main"
    }
}

/// A host's clock against the main host's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostClock {
    /// Its offset.
    pub clock_offset_ns: f64,
    /// The offset's uncertainty.
    pub clock_uncertainty_ns: f64,
}

/// A host's ticks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TickMetrics {
    /// The host's clock.
    #[serde(flatten)]
    pub clock: HostClock,
    /// Ticks received.
    pub ticks_received: f64,
    /// Ticks sent (the main host).
    pub ticks_sent: Option<f64>,
    /// Ticks that never arrived (the other hosts).
    pub ticks_missing: Option<f64>,
    /// Bytes the host sent.
    pub bytes_sent: f64,
}

/// A host's cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellMetrics {
    /// The host's clock.
    #[serde(flatten)]
    pub clock: HostClock,
    /// Cells sent.
    pub cells_sent: f64,
    /// Cells received.
    pub cells_received: f64,
    /// Messages from other hosts refused (not theirs to send), all kinds; the kinds
    /// are the run's `link-refused` warnings.
    #[serde(default)]
    pub refused: f64,
    /// Other hosts' cell publications that never came (dropped on a full queue on
    /// the way), all senders; the senders are the run's `link-dropped` warnings.
    #[serde(default)]
    pub dropped: f64,
    /// Cells and ticks that arrived after they were due, each named or counted in
    /// the run's events.
    #[serde(default)]
    pub late: f64,
}

/// A forwarding host's cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForwardMetrics {
    /// The host's clock.
    #[serde(flatten)]
    pub clock: HostClock,
    /// Cells sent.
    pub cells_sent: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::check::{keys, round_trip};

    #[test]
    fn a_subsystem_reads_back_under_both_names() {
        let sut = Point::<Subsystem>::new(
            SubsystemLabels {
                subsystem: "p".into(),
                process: "in-process".into(),
                start_frame: 0,
                period_frames: 2,
                cpu: None,
                class: Some("normal (other)".into()),
                policy: Some("other".into()),
                crashed: None,
            },
            SubsystemMetrics {
                releases_due: 200.0,
                frames_run: 199.0,
                overruns: 1.0,
                longest_overrun_streak: 1.0,
                lost_frames: 0.0,
                hybrid_margin_ns: Some(50_000.0),
                errors: Some(2.0),
                finished_early: None,
            },
        );
        round_trip(&sut, EXECUTION_TIME);
        let m = round_trip(&sut, RELEASE_JITTER);
        assert_eq!(
            keys(&m),
            (
                vec![
                    "class",
                    "period_frames",
                    "policy",
                    "process",
                    "start_frame",
                    "subsystem"
                ],
                vec![
                    "errors",
                    "frames_run",
                    "hybrid_margin_ns",
                    "longest_overrun_streak",
                    "lost_frames",
                    "overruns",
                    "releases_due"
                ]
            )
        );
    }

    #[test]
    fn frames_and_stress_read_back() {
        let frames = Point::<Frames>::new(
            FramesLabels {
                tick_ns: 1_000_000,
                major_frame: 2,
                wait: "hybrid".into(),
            },
            FramesMetrics { frames: 400.0 },
        );
        let mut m = round_trip(&frames, "frames");
        m.metrics.insert("run_frames".into(), 400.0);
        assert_eq!(m.read::<Frames>(), Some(frames));
        let stress = Point::<Stress>::new(
            Empty {},
            StressMetrics {
                run_frames: 400.0,
                final_value: 388.0,
                missed_frames: 12.0,
                incoherent_cells: 0.0,
            },
        );
        assert!(round_trip(&stress, "stress").labels.is_empty());
    }

    #[test]
    fn the_link_figures_read_back_with_the_clock_beside_them() {
        let labels = HostLabels {
            host: "b".into(),
            role: "follower".into(),
        };
        let clock = HostClock {
            clock_offset_ns: -1500.0,
            clock_uncertainty_ns: 200.0,
        };
        let tick = Point::<TickArrival>::new(
            labels.clone(),
            TickMetrics {
                clock: clock.clone(),
                ticks_received: 99.0,
                ticks_sent: None,
                ticks_missing: Some(1.0),
                bytes_sent: 4096.0,
            },
        );
        let m = round_trip(&tick, "tick-arrival");
        assert!(!tick.labels.is_main());
        assert_eq!(
            keys(&m),
            (
                vec!["host", "role"],
                vec![
                    "bytes_sent",
                    "clock_offset_ns",
                    "clock_uncertainty_ns",
                    "ticks_missing",
                    "ticks_received"
                ]
            )
        );
        let cells = Point::<CellLatency>::new(
            labels.clone(),
            CellMetrics {
                clock: clock.clone(),
                cells_sent: 10.0,
                cells_received: 9.0,
                refused: 2.0,
                dropped: 3.0,
                late: 4.0,
            },
        );
        round_trip(&cells, "cell-latency");
        let forward = Point::<ForwardDelay>::new(
            labels,
            ForwardMetrics {
                clock,
                cells_sent: 10.0,
            },
        );
        round_trip(&forward, "forward-delay");
        let stage = Point::<LinkStageDelay>::new(
            StageLabels {
                host: "h2".into(),
                role: "node".into(),
                stage: "transit".into(),
            },
            StageMetrics { publications: 9.0 },
        );
        let late = Point::<LateArrivals>::new(
            LateLabels {
                host: "h3".into(),
                role: "node".into(),
                what: "cell B".into(),
                from: "h2".into(),
                stage: "sender".into(),
            },
            LateMetrics {
                arrivals: 3.0,
                frames: 4.0,
                late_total_ns: 9e6,
                late_worst_ns: 5e6,
                first_frame: 120.0,
            },
        );
        round_trip(&late, "late-arrivals");
        let m = round_trip(&stage, "link-stage");
        assert_eq!(
            keys(&m),
            (vec!["host", "role", "stage"], vec!["publications"])
        );
    }
}
