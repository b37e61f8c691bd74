//! What the balancer decides with and reports: the roles of CPUs, its settings,
//! its decisions and reports.

#[cfg(doc)]
use crate::migrate::MigrationStats;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Slots in each task's report ring (two reports per section).
pub const RING_CAPACITY: usize = 512;

/// The least free share `1 - RT` the load formula divides by: a CPU its real-time
/// tasks keep fully busy counts as a hundred times as loaded per task, not infinitely.
pub const MIN_FREE_SHARE: f64 = 0.01;

/// What a registered task is to the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskRole {
    /// Bound to its CPU: never moved, but its CPU time counts as real-time load.
    Rt0,
    /// Real-time, movable: prefers RT CPUs.
    Rt1,
    /// Not real-time, movable: prefers NRT CPUs.
    Normal,
}

impl TaskRole {
    /// `rt0`, `rt1` or `normal`.
    pub fn name(self) -> &'static str {
        match self {
            TaskRole::Rt0 => "rt0",
            TaskRole::Rt1 => "rt1",
            TaskRole::Normal => "normal",
        }
    }
}

impl fmt::Display for TaskRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Tuning. The defaults follow ARTiS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// How often per-CPU load and real-time share are sampled.
    pub sample_period: Duration,
    /// How many samples the real-time share is smoothed over (ARTiS: 500).
    pub rt_window: u32,
    /// How often RT1+ tasks are pushed from NRT to RT CPUs (ARTiS: 4x the others).
    pub rt_push_period: Duration,
    /// How often the other pushes run.
    pub push_period: Duration,
    /// The anti ping-pong horizon: a task whose next migration attempt is predicted
    /// within this is not moved back to an RT CPU.
    pub horizon: Duration,
    /// The `SCHED_FIFO` priority the supervisor asks for (default
    /// [`DEFAULT_FIFO_PRIORITY`]); `None` keeps it `SCHED_OTHER`. A refusal is noted in
    /// the report and the balancer runs anyway. Below an RT1+ task's priority, that task
    /// can keep the supervisor off its CPU.
    #[serde(default = "default_fifo_priority")]
    pub fifo_priority: Option<u8>,
    /// Decisions kept in the report; later ones are only counted.
    #[serde(default = "default_max_decisions")]
    pub max_decisions: usize,
}

/// The supervisor's default priority: above every RT1+ task (1 to 98), as ARTiS's
/// balancer ran inside the scheduler, above every task. It shares no CPU with RT0
/// (99 too): it runs on the NRT CPUs. At 50, a compute-bound RT50 task that a section
/// left on the NRT CPUs (seed 002 Table 5) starves it: measured on 2 CPUs, its rings
/// overflowed and the RT50 tasks spent 99 % of their time on the NRT CPU.
pub const DEFAULT_FIFO_PRIORITY: u8 = 99;

fn default_fifo_priority() -> Option<u8> {
    Some(DEFAULT_FIFO_PRIORITY)
}

fn default_max_decisions() -> usize {
    100_000
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sample_period: Duration::from_millis(1),
            rt_window: 500,
            rt_push_period: Duration::from_millis(5),
            push_period: Duration::from_millis(20),
            horizon: Duration::from_millis(20),
            fifo_priority: default_fifo_priority(),
            max_decisions: default_max_decisions(),
        }
    }
}

/// One placement decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Nanoseconds since the balancer started.
    pub at_ns: u64,
    /// The task moved.
    pub tid: i32,
    /// The CPU it was on.
    pub from: Option<usize>,
    /// The CPU it was pushed to.
    pub to: usize,
    /// Why, in words.
    pub reason: String,
}

/// What the balancer did over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Report {
    /// Every decision, in order (at most `Config::max_decisions`).
    pub decisions: Vec<Decision>,
    /// Samples taken.
    pub samples: u64,
    /// Balancing passes run (the placement at start, RT pushes and other pushes).
    pub passes: u64,
    /// Moves back to an RT CPU withheld by the anti ping-pong rule.
    pub withheld: u64,
    /// Migration attempts received from tasks.
    pub attempts_received: u64,
    /// Moves the kernel refused.
    pub refused: u64,
    /// Smoothed real-time share per CPU at the end (CPU, share 0..1).
    pub rt_share: Vec<(usize, f64)>,
    /// Whether the balancer thread ran with a real-time policy (and why not).
    pub notes: Vec<String>,
    /// Decisions made after the log was full: counted, not kept.
    #[serde(default)]
    pub decisions_dropped: u64,
    /// Decisions that put a task on an RT CPU.
    #[serde(default)]
    pub to_rt: u64,
    /// Decisions that put a task on an NRT CPU.
    #[serde(default)]
    pub to_nrt: u64,
    /// Moves onto an RT CPU not made because the task was inside a section.
    #[serde(default)]
    pub in_section_skips: u64,
    /// Moves onto an RT CPU during which the task started a section (the task was
    /// moved off the RT CPU again at once if still inside it).
    #[serde(default)]
    pub raced: u64,
    /// Section ends received from tasks.
    #[serde(default)]
    pub section_ends_received: u64,
    /// Ring drains that found a task's ring full: reports may have been lost, and the
    /// task was treated as inside a section until its next report.
    #[serde(default)]
    pub ring_overflows: u64,
    /// Tasks that exited (or could no longer be read) and were dropped.
    #[serde(default)]
    pub dropped_tasks: Vec<i32>,
    /// Load `L / (1 - RT)` per CPU at the last sample (CPU, load).
    #[serde(default)]
    pub load: Vec<(usize, f64)>,
    /// Where each task the balancer had pinned was pinned when it stopped (tid, CPU),
    /// before its affinity was given back.
    #[serde(default)]
    pub pinned_at_stop: Vec<(i32, usize)>,
    /// Whether the supervisor ran `SCHED_FIFO`.
    #[serde(default)]
    pub supervisor_fifo: bool,
}
