//! The result of a run, as written to JSON: each task, group and CPU, the timeline.

use ictus_core::CpuSet;
use ictus_os::provenance::Provenance;
use serde::{Deserialize, Serialize};

use crate::balancer;
use crate::partition::Partition;
use crate::scenario::spec::{GroupClass, Scenario};

use super::options::BalancerMode;

/// The `schema` field of every scenario result.
pub const RESULT_SCHEMA: &str = "ictus.scenario-result";
/// The result format's version. Version 1 files written before results carried a
/// [`ScenarioResult::provenance`] read as they are, with none.
pub const RESULT_VERSION: u32 = 1;

/// Minimum, mean and maximum over the tasks of a group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinAvgMax {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub avg: f64,
    /// Largest.
    pub max: f64,
}

impl MinAvgMax {
    /// Over `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<MinAvgMax> {
        let (mut n, mut sum, mut min, mut max) = (0u64, 0.0, f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        (n > 0).then(|| MinAvgMax {
            min,
            avg: (sum / n as f64).clamp(min, max),
            max,
        })
    }
}

/// A share of samples on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// The CPU.
    pub cpu: usize,
    /// Percent of the running samples (0 to 100).
    pub percent: f64,
}

/// Section (migration attempt) counters of one task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionCounts {
    /// Sections entered (migration attempts).
    pub attempts: u64,
    /// Sections that moved the task off an RT CPU.
    pub moves: u64,
    /// Moves the kernel refused.
    pub failures: u64,
    /// Section starts dropped because the balancer's ring was full.
    pub dropped_reports: u64,
}

/// One task's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// Its group.
    pub group: String,
    /// Its index in the group.
    pub index: u32,
    /// Its kernel thread id.
    pub tid: i32,
    /// The CPUs it was given at the start.
    pub affinity: CpuSet,
    /// The policy it ran with (what was obtained, not what was asked).
    pub policy: String,
    /// Whether it did all its loops (false: stopped early).
    pub finished: bool,
    /// Loops done.
    pub loops_done: u64,
    /// Wall time from the common start to its end.
    pub completion_ns: u64,
    /// CPU time it consumed.
    pub cpu_time_ns: u64,
    /// Share of its running samples (state R) on each CPU.
    pub cpu_share: Vec<CpuShare>,
    /// Samples that saw it.
    pub samples: u64,
    /// Samples that saw it running or runnable (state R).
    pub samples_running: u64,
    /// Context switches it made itself (sleeps, blocking).
    pub voluntary_ctxt_switches: Option<u64>,
    /// Context switches forced on it (preemption).
    pub involuntary_ctxt_switches: Option<u64>,
    /// Migrations counted by the kernel (`se.nr_migrations`, where the kernel shows it).
    pub migrations: Option<u64>,
    /// CPU changes the sampler saw.
    pub migrations_sampled: u64,
    /// Its sections.
    pub sections: SectionCounts,
}

impl TaskResult {
    /// Migrations: the kernel's count where known, else the sampled one.
    pub fn migrations_best(&self) -> u64 {
        self.migrations.unwrap_or(self.migrations_sampled)
    }
}

/// One group's figures: min / average / max over its tasks (seed 002 Tables 3-5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// The group.
    pub name: String,
    /// Its class.
    pub class: GroupClass,
    /// Tasks in it.
    pub tasks: u32,
    /// Tasks that did all their loops.
    pub finished: u32,
    /// Completion time.
    pub completion_ns: Option<MinAvgMax>,
    /// CPU time.
    pub cpu_time_ns: Option<MinAvgMax>,
    /// The group's running samples on each CPU ("CPU repartition").
    pub cpu_share: Vec<CpuShare>,
    /// Voluntary context switches.
    pub voluntary_ctxt_switches: Option<MinAvgMax>,
    /// Involuntary context switches.
    pub involuntary_ctxt_switches: Option<MinAvgMax>,
    /// Migrations (the kernel's count when it shows it for every task, else sampled).
    pub migrations: Option<MinAvgMax>,
    /// `kernel` or `sampled`.
    pub migrations_source: String,
    /// Sections entered.
    pub section_attempts: Option<MinAvgMax>,
    /// Sections that moved off an RT CPU.
    pub section_moves: Option<MinAvgMax>,
}

/// One CPU's idle time (`/proc/stat` idle plus iowait).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuIdleTime {
    /// The CPU.
    pub cpu: usize,
    /// Whether it is an RT CPU of the partition.
    pub rt: bool,
    /// From the start until the first task finished (as `lbμ` reports it).
    pub idle_until_first_end_ns: Option<u64>,
    /// From the start until the end.
    pub idle_ns: u64,
    /// Time the hypervisor ran something else while this CPU wanted to run.
    pub steal_ns: u64,
}

/// How many tasks of each group were running (state R) on each CPU over time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The timeline buckets' width.
    pub bucket_ns: u64,
    /// The CPUs, in the order of each bucket's rows.
    pub cpus: Vec<usize>,
    /// The groups, in the order of each row's columns.
    pub groups: Vec<String>,
    /// The buckets, in time order (a bucket without samples is left out).
    pub buckets: Vec<TimelineBucket>,
}

/// One timeline bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineBucket {
    /// Its start, since the common start.
    pub start_ns: u64,
    /// Samples in it.
    pub samples: u32,
    /// Mean running tasks: `running[cpu][group]`, in the order of `cpus` and `groups`.
    pub running: Vec<Vec<f64>>,
}

/// What one group asked for and what it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyOutcome {
    /// The group.
    pub group: String,
    /// The policy asked for.
    pub asked: String,
    /// The policy obtained (of the first task refused, or of all).
    pub obtained: String,
    /// Tasks whose policy was refused.
    pub refused_tasks: u32,
    /// The kernel's reason, when refused.
    pub reason: Option<String>,
}

/// The sampler, as it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplerInfo {
    /// Its period.
    pub period_ns: u64,
    /// Its policy (it asks for FIFO 99 so that real-time tasks filling the CPUs do not
    /// starve it; it sleeps between samples).
    pub policy: String,
    /// Its CPUs (the NRT CPUs).
    pub cpus: CpuSet,
    /// Samples taken.
    pub samples: u64,
    /// Periods skipped because a sample came late.
    pub missed: u64,
    /// CPU time it consumed.
    pub cpu_time_ns: u64,
}

/// Everything a scenario run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Always [`RESULT_SCHEMA`].
    pub schema: String,
    /// Always [`RESULT_VERSION`] for this ictus.
    pub version: u32,
    /// The ictus version that ran it (as in the provenance, kept for older readers).
    pub tool_version: String,
    /// The host (as in the provenance, kept for older readers).
    pub hostname: String,
    /// The kernel release (as in the provenance, kept for older readers).
    pub kernel: String,
    /// When the tasks were released (milliseconds since the Unix epoch).
    pub started_unix_ms: u64,
    /// The tool, the host and the time, as in every probe record: captured before the
    /// scenario starts, its end time stamped once the run is over. `None` only in
    /// results written before ictus recorded it.
    #[serde(default)]
    pub provenance: Option<Provenance>,
    /// The scenario file.
    pub source: Option<String>,
    /// The scenario, as checked.
    pub scenario: Scenario,
    /// The placement.
    pub balancer: BalancerMode,
    /// The machine's online CPUs.
    pub cpus_online: CpuSet,
    /// The CPUs this run could use (online and allowed).
    pub cpus_in_play: CpuSet,
    /// The logical partition.
    pub partition: Partition,
    /// One loop's duration, calibrated at the start (best of several).
    pub loop_ns: f64,
    /// Whether every task did all its loops.
    pub complete: bool,
    /// Why the run stopped early.
    pub stopped: Option<String>,
    /// From the common start to the last task's end.
    pub wall_ns: u64,
    /// When the first task finished.
    pub first_end_ns: Option<u64>,
    /// The sampler.
    pub sampler: SamplerInfo,
    /// Per group.
    pub groups: Vec<GroupStats>,
    /// Per task.
    pub tasks: Vec<TaskResult>,
    /// Per CPU in play.
    pub cpus: Vec<CpuIdleTime>,
    /// Running tasks per group per CPU over time.
    pub timeline: Timeline,
    /// What each group asked for and got.
    pub policies: Vec<PolicyOutcome>,
    /// What the balancer did (`--balancer ictus`).
    pub balancer_report: Option<balancer::Report>,
    /// Host steal time over the run, all CPUs together.
    pub steal_ns: u64,
    /// Shortfalls worth knowing.
    pub warnings: Vec<String>,
}
