//! What a run reports: the figures of its subsystems, threads and hosts
//! ([`RunReport`] and what it holds), as records carry them.
//!
//! They live apart from the runner ([`crate::run`]) and the link ([`crate::link`]),
//! which both write them, so that a reader of a report (a child sending its outcome,
//! a link, the CLI, a record) needs neither.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ictus_core::histogram::HistogramData;
use ictus_core::{LatencyHistogram, Summary};
use serde::{Deserialize, Serialize};

/// A distribution with its exact summary, as records carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Count, extremes, moments, percentiles.
    pub summary: Summary,
    /// 0-based index of the first max sample.
    pub max_index: Option<u64>,
    /// Non-empty buckets.
    pub histogram: HistogramData,
}

impl Distribution {
    /// The distribution of `h`.
    pub fn of(h: &LatencyHistogram) -> Distribution {
        Distribution {
            summary: h.summary(),
            max_index: h.max_index(),
            histogram: h.data(),
        }
    }
}

/// A shortfall with advice (a refused policy, an unlocked memory, ...): the same type
/// as a probe record's warnings.
pub type RunWarning = ictus_core::warning::Warning;
pub use ictus_core::warning::WarningId;

/// What one subsystem thread reports when it ends (a child sends it in a file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadOutcome {
    /// The subsystem.
    pub subsystem: String,
    /// Its process.
    pub pid: u32,
    /// Its thread.
    pub tid: u64,
    /// The class asked for, in words.
    pub class_requested: String,
    /// The class obtained, in words (differs when a policy was refused).
    pub class_obtained: String,
    /// The policy read back.
    pub policy: String,
    /// The CPUs it could run on, read back.
    pub affinity: String,
    /// Whether the process's memory was locked.
    pub memory_locked: bool,
    /// The hybrid wait's margin, when hybrid.
    pub hybrid_margin_ns: Option<u64>,
    /// Frames run.
    pub frames_run: u64,
    /// Releases skipped while still running (or waking late).
    pub overruns: u64,
    /// Longest run of consecutive skipped releases.
    pub longest_overrun_streak: u64,
    /// Release jitter (wake-up minus deadline).
    pub jitter: Distribution,
    /// Execution time (wake-up to outputs published).
    pub exec: Distribution,
    /// How its loop ended: `stopped`, `aborted`, `coordinator-gone`.
    pub end: String,
    /// Reads and writes it gave up on a cell whose writer was not progressing
    /// (it ran on with the last coherent copy; see [`crate::subsystem::Ports`]).
    #[serde(default)]
    pub torn: u64,
    /// Shortfalls met while setting it up.
    pub warnings: Vec<RunWarning>,
    /// The last frame it ran.
    #[serde(default)]
    pub last_frame: Option<u64>,
    /// Frames whose `run` returned an error.
    #[serde(default)]
    pub errors: u64,
    /// The first of those errors (its frame, and its message with its sources).
    #[serde(default)]
    pub first_error: Option<(u64, String)>,
    /// The error its `shutdown` returned, if it did.
    #[serde(default)]
    pub shutdown_error: Option<String>,
    /// The misses of a subsystem in a process of its own, explained by that
    /// process's sampler (the run takes them into [`RunReport::explanation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<ictus_explain::Explanation>,
}

/// What a run's tap did (see [`crate::tap`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapReport {
    /// Records (frames, cells, events) handed to the sinks.
    pub records: u64,
    /// Per subsystem tapped: records its ring was full for and dropped.
    pub dropped: BTreeMap<String, u64>,
    /// What each sink wrote, a line each.
    pub written: Vec<String>,
}

/// One subsystem's figures for the whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsystemReport {
    /// Its name.
    pub name: String,
    /// `in-process` or the program's path.
    pub process: String,
    /// Start frame.
    pub start: u64,
    /// Period in frames.
    pub period: u64,
    /// Its CPU, if pinned.
    pub cpu: Option<usize>,
    /// Releases due before the stop frame.
    pub releases_due: u64,
    /// Frames it ran.
    pub frames_run: u64,
    /// Releases it skipped (overruns).
    pub overruns: u64,
    /// Longest run of consecutive overruns.
    pub longest_overrun_streak: u64,
    /// Releases lost otherwise: `due - run - overruns` (a crashed process's frames).
    pub lost: u64,
    /// Releases after it said it had finished ([`crate::subsystem::Flow::Finished`]):
    /// not due, not lost.
    #[serde(default)]
    pub finished_early: u64,
    /// Frames whose `run` returned an error.
    #[serde(default)]
    pub errors: u64,
    /// Why it stopped early, if it did (`killed by signal 9 after frame 1234`).
    pub crashed: Option<String>,
    /// The thread's own report (absent when it crashed).
    pub outcome: Option<ThreadOutcome>,
}

/// The seed 003 stress-test result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StressReport {
    /// Frames spent in RUN.
    pub run_frames: u64,
    /// The final value of each counter.
    pub counters: Vec<(String, i64)>,
    /// The largest.
    pub final_value: i64,
    /// `run_frames - final_value`.
    pub missed_frames: i64,
    /// Cells whose elements do not all carry the counter's value (a torn or
    /// incoherent transfer; zero when every transfer was frame-coherent).
    pub incoherent_cells: u64,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run's name.
    pub name: String,
    /// The schedule file.
    pub schedule: PathBuf,
    /// The tick.
    pub tick_ns: u64,
    /// Minor frames per major frame.
    pub major_frame: u64,
    /// The wait mode.
    pub wait: String,
    /// Frames run: the stop frame.
    pub frames: u64,
    /// Frames spent in each state.
    pub state_frames: BTreeMap<String, u64>,
    /// Transitions: `(first frame, state)`.
    pub transitions: Vec<(u64, String)>,
    /// Per subsystem.
    pub subsystems: Vec<SubsystemReport>,
    /// The stress check, when the schedule has one.
    pub stress: Option<StressReport>,
    /// Shortfalls, each with advice.
    pub warnings: Vec<RunWarning>,
    /// What happened during the run, in order (crashes, late acknowledgements).
    pub events: Vec<String>,
    /// False when stopped by a signal rather than by the duration, or when a
    /// subsystem lost frames (it crashed, left, or never ran them).
    pub complete: bool,
    /// The subsystem whose `on_overrun = "stop-run"` stopped the run (its overruns
    /// or its watchdog), if one did; the run is then incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Each host's link figures, when the run spans hosts (this host's first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostReport>,
    /// The CPU latency QoS in force for the whole run (asked for, held, or
    /// refused with why).
    #[serde(default)]
    pub pm_qos: Option<ictus_os::pm_qos::PmQosState>,
    /// Every miss of this host's subsystems explained (late releases past the
    /// threshold, skipped releases, overruns; a program's by its own sampler);
    /// absent with [`crate::run::RunOptions::explain`] off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<ictus_explain::Explanation>,
    /// What the run's tap handed its sinks and what they wrote (`--record`,
    /// `--trace`); absent when nothing was tapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<TapReport>,
}

/// One kind of refusal from one sender, in a host's report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedFigure {
    /// The sender (a host of the schedule), or `unknown`.
    pub from: String,
    /// What was refused, in words.
    pub what: String,
    /// How many times.
    pub count: u64,
}

/// Publications of one sender that never reached a host (gaps in the sender's
/// numbering: dropped on a full queue on the way).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedFigure {
    /// The sender (a host of the schedule).
    pub from: String,
    /// Its cell publications that never came.
    pub count: u64,
}

/// Late arrivals on one host of one kind (a cell, or the tick) from one sender,
/// whose time went mostly to one part of the way ([`LateWhere`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateFigure {
    /// `cell NAME` or `tick`.
    pub what: String,
    /// The host that sent it.
    pub from: String,
    /// Where most of the time went.
    pub stage: LateWhere,
    /// Arrivals after they were due.
    pub arrivals: u64,
    /// Frames in which this host's copy was older than due because of them (an
    /// arrival due by frame F that came during frame G costs F to G; frames that
    /// two late arrivals of the same copy share count once).
    pub frames: u64,
    /// Their lateness past the due time, summed, and the worst.
    pub late_total_ns: u64,
    /// The worst lateness.
    pub late_worst_ns: u64,
    /// The first frame one of them was due by.
    pub first_frame: u64,
}

/// Where a late arrival's time went: on the sender before the put (its forwarder's
/// wake-up, the copy, a sender not scheduled) or after it (Zenoh, the network, the
/// receiver's callback); a tick carries no stamp of its put, so it is not split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LateWhere {
    /// Most of it on the sender, before Zenoh had it.
    Sender,
    /// Most of it after the put: Zenoh, the network, the receiver's callback.
    Transit,
    /// Not split (ticks, and cells without the put's stamp).
    Whole,
}

impl LateWhere {
    /// Its name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            LateWhere::Sender => "sender",
            LateWhere::Transit => "transit",
            LateWhere::Whole => "whole",
        }
    }
}

/// One host's view of the link, in the run's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// The host's name in the schedule.
    pub name: String,
    /// `main` or `node`.
    pub role: String,
    /// This host's clock minus the main coordinator's, as measured (0 on the main
    /// host), and half the round trip of the exchange that measured it.
    pub clock_offset_ns: i64,
    /// Half the round trip of that exchange: the offset's uncertainty.
    pub clock_uncertainty_ns: u64,
    /// Ticks received (none on the main host, which sends them).
    pub ticks: u64,
    /// Ticks sent (main host) or missing from the received sequence (nodes).
    pub ticks_sent_or_missing: u64,
    /// Tick arrival after the frame's deadline (arrival on this host's clock minus
    /// the deadline converted to it).
    pub tick_lateness: Option<Distribution>,
    /// Cell publications received from other hosts.
    pub cells_received: u64,
    /// Cell publications sent.
    pub cells_sent: u64,
    /// Payload bytes sent (ticks, cells, status), without Zenoh's framing.
    pub bytes_sent: u64,
    /// Delay from a subsystem's publication on another host to the copy in this
    /// host's table (one-way, on clocks converted with the measured offset).
    pub cell_latency: Option<Distribution>,
    /// The part of it spent on the sending host: from a publication here to the
    /// forwarder handing it to the transport (the forwarder's wake-up and copy).
    #[serde(default)]
    pub forward_delay: Option<Distribution>,
    /// What this host refused of what the others sent, by sender and kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedFigure>,
    /// The other hosts' cell publications that never came, by sender (none: not
    /// listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<DroppedFigure>,
    /// Arrivals on this host after they were due (cells past the frame after their
    /// writer's, ticks past one tick after their deadline), each named or counted in
    /// the run's events.
    #[serde(default)]
    pub late: u64,
    /// The same arrivals accounted: by what came late, from which host and the part
    /// of the way that took most of its time, with the frames they cost here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_by: Vec<LateFigure>,
    /// Where the cells' time went, stage by stage, in [`LinkStage::ALL`]'s order: the
    /// sending stages as this host forwarded, the receiving ones as it received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageFigure>,
}

/// One stage of a cell's way from a subsystem's publication on one host to its copy
/// in another host's table, each bounded by two stamps the link takes. Measured per
/// stage because the whole (cell latency) only says how long, not where: the stages
/// are what a change to the forwarder, Zenoh's configuration or the copy moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkStage {
    /// Sending host: the notice's stamp (a frame's end or an early flush) to the
    /// forwarder awake and scanning.
    Wake,
    /// Sending host: the forwarder awake to the publication encoded (the cell's
    /// seqlock read and the encoding).
    Encode,
    /// Sending host: encoded to Zenoh's `put` returned.
    Put,
    /// Receiving host: encoded on the sender (its stamp, converted with the two
    /// clocks' measured offsets) to Zenoh's callback entered here: `put` and
    /// Zenoh's path both ways, the transport between.
    Transit,
    /// Receiving host: the callback entered to the ranges copied into this host's
    /// cells (the claims' check included).
    Copy,
}

impl LinkStage {
    /// Every stage, in the order a publication passes them.
    pub const ALL: [LinkStage; 5] = [
        LinkStage::Wake,
        LinkStage::Encode,
        LinkStage::Put,
        LinkStage::Transit,
        LinkStage::Copy,
    ];

    /// Its name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            LinkStage::Wake => "wake",
            LinkStage::Encode => "encode",
            LinkStage::Put => "put",
            LinkStage::Transit => "transit",
            LinkStage::Copy => "copy",
        }
    }

    /// Whether the sending host measures it (else the receiving one does).
    pub fn on_sender(self) -> bool {
        matches!(self, LinkStage::Wake | LinkStage::Encode | LinkStage::Put)
    }
}

/// One stage's delays on one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageFigure {
    /// Which stage.
    pub stage: LinkStage,
    /// Its delays, one per publication.
    pub delay: Distribution,
}
