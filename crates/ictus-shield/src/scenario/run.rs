//! The runner: one thread per fake task, all released together; a sampler reading
//! each task's state and CPU every period; the balancer (or none) placing them; a
//! [`ScenarioResult`] at the end.
//!
//! Setup is done before the start: every task enters its class (a refused real-time
//! policy falls back to `SCHED_OTHER` and is recorded, with the kernel's reason), sets
//! its affinity, gets its migration guard and waits at the start gate. The work loop
//! only computes, sleeps and enters sections; the `/proc` files are read by the
//! sampler, and by each task once, after its last loop.
//!
//! A stop (the watcher's [`Flow::Stop`], the duration limit) reaches every thread
//! within the watcher's 50 ms poll: tasks sleep and sections spin on the run's stop
//! [`Latch`], and the sampler sleeps on a latch of its own, so a task asked to sleep
//! for years ends as soon as the run stops, and so does a sampler with a long period.
//!
//! ```no_run
//! use ictus_shield::scenario::{self, BalancerMode, Flow, RunOptions};
//! let s = scenario::spec::load(std::path::Path::new("table5-2cpu.toml"))?;
//! let r = scenario::run(&s, &RunOptions::new(BalancerMode::None), |_| Flow::Continue)?;
//! for g in &r.groups {
//!     println!("{}: {:?}", g.name, g.completion_ns);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a scenario's start time, end count and per-task flags: each one writer, read by the watcher; no protocol for loom to explore"
)]

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ictus_core::sync::spsc::Producer;
use ictus_core::{CpuSet, Nanos};
use ictus_os::handoff::Latch;
use ictus_os::procstat::{self, StatSnapshot, StealDelta};
use ictus_os::provenance::Provenance;
use ictus_os::sched::{self, Policy};
use ictus_os::{clock, facts, thread_time};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::spec::{self, GroupClass, Scenario};
use crate::ShieldError;
use crate::balancer::{self, Balancer, Role};
use crate::class::{self, Class, ClassError, Options};
use crate::migrate::{Attempt, Migrator, Return};
use crate::partition::{self, Partition};

/// The `schema` field of every scenario result.
pub const RESULT_SCHEMA: &str = "ictus.scenario-result";
/// The result format's version. Version 1 files written before results carried a
/// [`ScenarioResult::provenance`] read as they are, with none.
pub const RESULT_VERSION: u32 = 1;
/// Integer divisions in one loop.
pub const LOOP_DIVISIONS: u32 = 32;
/// The timeline keeps at most this many buckets (neighbours are merged beyond).
pub const MAX_BUCKETS: usize = 1000;
/// How often the coordinating thread looks at the tasks and calls the watcher.
const POLL: Duration = Duration::from_millis(50);

/// Where the tasks are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BalancerMode {
    /// Stock Linux placement: tasks keep their group's CPUs; sections run in place
    /// (the attempts are still counted).
    None,
    /// The ictus balancer places the movable tasks; sections move to the NRT CPUs.
    Ictus,
}

impl BalancerMode {
    /// `none` or `ictus`.
    pub fn name(self) -> &'static str {
        match self {
            BalancerMode::None => "none",
            BalancerMode::Ictus => "ictus",
        }
    }
}

impl fmt::Display for BalancerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The placement.
    pub balancer: BalancerMode,
    /// The balancer's tuning (with [`BalancerMode::Ictus`]).
    pub balancer_config: balancer::Config,
    /// The file the scenario came from, recorded in the result.
    pub source: Option<PathBuf>,
    /// The command line, recorded in the result's provenance.
    pub argv: Vec<String>,
}

impl RunOptions {
    /// Default options with `balancer`.
    pub fn new(balancer: BalancerMode) -> RunOptions {
        RunOptions {
            balancer,
            balancer_config: balancer::Config::default(),
            source: None,
            argv: Vec::new(),
        }
    }
}

/// Where a run stands, for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Since the common start.
    pub elapsed: Duration,
    /// Tasks finished.
    pub finished: usize,
    /// Tasks in all.
    pub tasks: usize,
}

/// What the watcher wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop every task now; the result is marked incomplete.
    Stop,
}

/// Why a scenario could not run. Nothing is left running.
#[derive(Debug, Error)]
pub enum RunError {
    /// The partition does not fit the CPUs this run may use.
    #[error("the scenario's partition: {0}")]
    Partition(#[from] ShieldError),
    /// A thread could not be started.
    #[error("starting a thread: {0}")]
    Spawn(#[source] io::Error),
    /// A task could not be set up (its affinity refused, ...).
    #[error("task {index} of group {group}: {what}")]
    Task {
        /// Its group.
        group: String,
        /// Its index in the group.
        index: u32,
        /// What failed.
        what: String,
    },
    /// The balancer did not start.
    #[error("starting the balancer: {0}")]
    Balancer(#[source] io::Error),
    /// `/proc/stat` could not be read.
    #[error("reading /proc/stat: {0}")]
    ProcStat(#[source] io::Error),
}

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
    /// Attempt reports dropped because the balancer's ring was full.
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
pub struct CpuIdle {
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
    /// Bucket width.
    pub bucket_ns: u64,
    /// The CPUs, in the order of each bucket's rows.
    pub cpus: Vec<usize>,
    /// The groups, in the order of each row's columns.
    pub groups: Vec<String>,
    /// The buckets, in time order (a bucket without samples is left out).
    pub buckets: Vec<Bucket>,
}

/// One timeline bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
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
    pub cpus: Vec<CpuIdle>,
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

/// One loop: a chain of [`LOOP_DIVISIONS`] dependent 64-bit integer divisions (a few
/// hundred nanoseconds; the run calibrates and reports it).
#[inline(never)]
pub fn one_loop(x: u64) -> u64 {
    let mut a = std::hint::black_box(x) | 1;
    for _ in 0..LOOP_DIVISIONS {
        let d = (a & 0x00ff_ffff) | 0x0001_0000;
        a = ((a.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15) / d).wrapping_add(a.wrapping_mul(3));
    }
    std::hint::black_box(a)
}

/// One loop's duration in ns: the best of many short timed batches on the calling
/// thread (short, so that some batch runs without being preempted on a busy machine).
pub fn calibrate() -> f64 {
    const BATCH: u64 = 500;
    let mut best = f64::INFINITY;
    let mut x = 7;
    for _ in 0..40 {
        let t0 = clock::monotonic_now();
        for _ in 0..BATCH {
            x = one_loop(x);
        }
        let dt = clock::monotonic_now().saturating_sub(t0).as_u64() as f64;
        best = best.min(dt / BATCH as f64);
    }
    std::hint::black_box(x);
    best
}

/// What one task is asked to do.
#[derive(Debug, Clone)]
struct Plan {
    group: usize,
    index: u32,
    class: Class,
    affinity: CpuSet,
    loops: u64,
    sleep: Option<(u64, Duration)>,
    section: Option<(u64, Duration)>,
}

/// What a task says once set up.
struct Ready {
    task: usize,
    tid: i32,
    policy: String,
    refused: Option<String>,
    error: Option<String>,
}

/// What a task says at its end.
#[derive(Default)]
struct TaskEnd {
    started: bool,
    finished: bool,
    loops_done: u64,
    end_ns: u64,
    cpu_time_ns: u64,
    voluntary: Option<u64>,
    involuntary: Option<u64>,
    migrations: Option<u64>,
    sections: SectionCounts,
}

/// State shared by the coordinator, the tasks and the sampler.
struct Shared {
    /// Raised when everything must stop (Ctrl-C, duration limit, a failed setup).
    /// Tasks sleep and sections spin on it, so a stop reaches a task at once however
    /// long it was asked to sleep.
    abort: Latch,
    /// Raised when the sampler must stop; it sleeps between samples on it.
    sampling_over: Latch,
    /// The common start (monotonic ns), written before the gate opens.
    start_ns: AtomicU64,
    /// Tasks finished (or stopped).
    ended: AtomicUsize,
    /// Per task: whether it has ended (the sampler stops reading it).
    done: Vec<AtomicBool>,
    /// The start gate. Waiters park until it is open and they are unparked: no lock
    /// is shared, so a task preempted by a real-time one cannot hold up the others
    /// (a mutex here inverts priorities: a normal task holding it while FIFO tasks
    /// fill the CPUs blocks the FIFO 99 sampler).
    open: AtomicBool,
    /// `/proc/stat` when the first task finished (set once, by that task).
    first_end: OnceLock<(u64, StatSnapshot)>,
}

impl Shared {
    /// Nothing started yet, for `tasks` tasks.
    fn new(tasks: usize) -> Shared {
        Shared {
            abort: Latch::new(),
            sampling_over: Latch::new(),
            start_ns: AtomicU64::new(0),
            ended: AtomicUsize::new(0),
            done: (0..tasks).map(|_| AtomicBool::new(false)).collect(),
            open: AtomicBool::new(false),
            first_end: OnceLock::new(),
        }
    }

    fn wait_gate(&self) {
        // Acquire: pairs with the Release store in `open_gate`.
        while !self.open.load(Ordering::Acquire) {
            std::thread::park();
        }
    }

    /// Opens the gate and wakes `threads`, in order.
    fn open_gate<'a>(&self, threads: impl IntoIterator<Item = &'a std::thread::Thread>) {
        // Release: pairs with the Acquire load in `wait_gate`.
        self.open.store(true, Ordering::Release);
        for t in threads {
            t.unpark();
        }
    }

    fn start(&self) -> u64 {
        // Acquire: pairs with the Release store in `Setting::release` before the gate
        // opens.
        self.start_ns.load(Ordering::Acquire)
    }
}

/// Runs `scenario` and returns what it measured. `watch` is called about every 50 ms
/// with the progress, from the calling thread; [`Flow::Stop`] stops the tasks.
pub fn run(
    scenario: &Scenario,
    opts: &RunOptions,
    mut watch: impl FnMut(&Progress) -> Flow,
) -> Result<ScenarioResult, RunError> {
    let mut provenance = Provenance::capture(opts.argv.clone());
    let online = facts::online_cpus();
    let in_play = spec::machine_cpus();
    let partition = partition::logical(scenario.rt_cpus.clone(), &in_play)?;
    let mut warnings = Vec::new();
    if let Ok(Some(applied)) = partition::applied(std::path::Path::new(crate::DEFAULT_JOURNAL)) {
        warnings.push(format!(
            "a shield is applied (RT CPUs {}); the scenario uses its own logical partition (RT CPUs {})",
            applied.rt, partition.rt
        ));
    }
    let loop_ns = calibrate();
    let plans = plans(scenario, &in_play, &mut warnings);
    let shared = Arc::new(Shared::new(plans.len()));
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let setting = Setting {
        scenario,
        opts,
        plans: &plans,
        in_play: &in_play,
        partition: &partition,
        shared: &shared,
    };

    // Set up every task; each waits at the gate.
    let Tasks {
        handles,
        feeds,
        ready,
    } = setting.start_tasks()?;
    // The balancer, then the sampler; then the start.
    let started = setting.release(handles, &feeds, &ready)?;
    // Watch.
    let ended = setting.watch_to_end(started, &mut watch)?;

    // Assemble.
    let tasks = setting.task_results(&ready, &ended);
    let groups = group_stats(scenario, &tasks, &ended.sampled, &in_play);
    let first_end = shared.first_end.get().cloned();
    let steal = ended.stat_end.steal_since(&ended.stat_start);
    let cpus = cpu_idle(
        &in_play,
        &partition,
        first_end.as_ref().map(|(_, s)| s),
        &ended.stat_start,
        &ended.stat_end,
        &steal,
    );
    let policies = policy_outcomes(scenario, &plans, &ready);
    let wall = ended.end.saturating_sub(ended.start);
    warnings.extend(run_warnings(
        &policies,
        &ended.sampled.info,
        steal.total_ns,
        wall,
        in_play.len(),
        &tasks,
    ));
    provenance.finish();
    Ok(ScenarioResult {
        schema: RESULT_SCHEMA.to_string(),
        version: RESULT_VERSION,
        tool_version: provenance.tool_version.clone(),
        hostname: provenance.hostname.clone(),
        kernel: provenance.kernel_release.clone(),
        started_unix_ms,
        provenance: Some(provenance),
        source: opts.source.as_ref().map(|p| p.display().to_string()),
        scenario: scenario.clone(),
        balancer: opts.balancer,
        cpus_online: online,
        cpus_in_play: in_play,
        partition,
        loop_ns,
        complete: ended.stopped.is_none() && tasks.iter().all(|t| t.finished),
        stopped: ended.stopped,
        wall_ns: wall,
        first_end_ns: first_end.map(|(t, _)| t.saturating_sub(ended.start)),
        sampler: ended.sampled.info,
        groups,
        tasks,
        cpus,
        timeline: ended.sampled.timeline,
        policies,
        balancer_report: ended.balancer_report,
        steal_ns: steal.total_ns,
        warnings,
    })
}

/// Where a task learns its balancer's ring: `Some` with [`BalancerMode::Ictus`], `None`
/// without a balancer or when the run is aborted.
type Feed = mpsc::Sender<Option<Producer<Attempt>>>;

/// What every phase of a run reads.
struct Setting<'a> {
    scenario: &'a Scenario,
    opts: &'a RunOptions,
    plans: &'a [Plan],
    in_play: &'a CpuSet,
    partition: &'a Partition,
    shared: &'a Arc<Shared>,
}

/// The task threads, set up and waiting at the gate.
struct Tasks {
    handles: Vec<JoinHandle<TaskEnd>>,
    feeds: Vec<Feed>,
    /// In plan order.
    ready: Vec<Ready>,
}

/// A run under way: the gate opened at `start`.
struct Started {
    handles: Vec<JoinHandle<TaskEnd>>,
    sampler: JoinHandle<Sampled>,
    running: Option<balancer::Running>,
    stat_start: StatSnapshot,
    coordinator: Raised,
    start: u64,
}

/// A run over: every thread joined, the balancer stopped.
struct Ended {
    /// In plan order.
    ends: Vec<TaskEnd>,
    start: u64,
    end: u64,
    stopped: Option<String>,
    sampled: Sampled,
    balancer_report: Option<balancer::Report>,
    stat_start: StatSnapshot,
    stat_end: StatSnapshot,
}

impl Setting<'_> {
    /// Starts one thread per plan and waits until each has set itself up. On a
    /// failure, the threads started are stopped.
    fn start_tasks(&self) -> Result<Tasks, RunError> {
        let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
        let (handles, feeds, failure) = self.spawn_tasks(ready_tx);
        match self.gather_ready(&ready_rx, handles.len(), failure) {
            Ok(ready) => Ok(Tasks {
                handles,
                feeds,
                ready,
            }),
            Err(e) => {
                abort_tasks(self.shared, &feeds, handles);
                Err(e)
            }
        }
    }

    /// Spawns the task threads, in plan order; each says on `ready_tx` when it is set
    /// up, then waits for its feed and the gate. Stops at the first thread that cannot
    /// be started, and returns that failure with the threads started.
    fn spawn_tasks(
        &self,
        ready_tx: mpsc::Sender<Ready>,
    ) -> (Vec<JoinHandle<TaskEnd>>, Vec<Feed>, Option<RunError>) {
        let n = self.plans.len();
        let mut feeds = Vec::with_capacity(n);
        let mut handles: Vec<JoinHandle<TaskEnd>> = Vec::with_capacity(n);
        let ret = match self.opts.balancer {
            BalancerMode::None => Return::Never,
            BalancerMode::Ictus => Return::Stay,
        };
        for (k, plan) in self.plans.iter().enumerate() {
            let (feed_tx, feed_rx) = mpsc::channel::<Option<Producer<Attempt>>>();
            let ctx = TaskCtx {
                k,
                plan: plan.clone(),
                partition: self.partition.clone(),
                // RT0 is never moved back by the balancer: its sections return at once.
                ret: match (plan.class.clone(), ret) {
                    (Class::Rt0 { .. }, Return::Stay) => Return::Restore,
                    (_, r) => r,
                },
                shared: self.shared.clone(),
                ready: ready_tx.clone(),
                feed: feed_rx,
            };
            let name = format!("{}-{}", self.scenario.groups[plan.group].name, plan.index);
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || task_main(ctx))
            {
                Ok(h) => {
                    handles.push(h);
                    feeds.push(feed_tx);
                }
                Err(e) => return (handles, feeds, Some(RunError::Spawn(e))),
            }
        }
        (handles, feeds, None)
    }

    /// What the `started` tasks said once set up, in plan order. The error is
    /// `failure` when given, else the first task's that could not set itself up, else
    /// a task thread that ended without a word.
    fn gather_ready(
        &self,
        ready_rx: &mpsc::Receiver<Ready>,
        started: usize,
        mut failure: Option<RunError>,
    ) -> Result<Vec<Ready>, RunError> {
        let mut ready: Vec<Option<Ready>> = (0..self.plans.len()).map(|_| None).collect();
        for _ in 0..started {
            match ready_rx.recv() {
                Ok(r) => {
                    let k = r.task;
                    if failure.is_none()
                        && let Some(what) = &r.error
                    {
                        failure = Some(RunError::Task {
                            group: self.scenario.groups[self.plans[k].group].name.clone(),
                            index: self.plans[k].index,
                            what: what.clone(),
                        });
                    }
                    ready[k] = Some(r);
                }
                Err(_) => break,
            }
        }
        if failure.is_none() && ready.iter().any(Option::is_none) {
            failure = Some(RunError::Task {
                group: "?".into(),
                index: 0,
                what: "a task thread ended during its setup".into(),
            });
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(ready.into_iter().flatten().collect()),
        }
    }

    /// Starts the balancer and the sampler, then opens the gate: the common start. On
    /// a failure, everything started is stopped.
    fn release(
        &self,
        handles: Vec<JoinHandle<TaskEnd>>,
        feeds: &[Feed],
        ready: &[Ready],
    ) -> Result<Started, RunError> {
        let shared = self.shared;
        let running = match self.start_balancer(feeds, ready) {
            Ok(r) => r,
            Err(e) => {
                abort_tasks(shared, &[], handles);
                return Err(RunError::Balancer(e));
            }
        };
        let sampler = match self.spawn_sampler(ready) {
            Ok(h) => h,
            Err(e) => {
                abort_tasks(shared, &[], handles);
                if let Some(r) = running {
                    let _ = r.stop();
                }
                return Err(RunError::Spawn(e));
            }
        };
        let stat_start = match procstat::read() {
            Ok(s) => s,
            Err(e) => {
                shared.sampling_over.raise();
                abort_tasks(shared, &[], handles);
                shared.open_gate(std::iter::once(sampler.thread()));
                let _ = sampler.join();
                if let Some(r) = running {
                    let _ = r.stop();
                }
                return Err(RunError::ProcStat(e));
            }
        };
        // The coordinator releases the tasks and watches them from the NRT CPUs, above them.
        let coordinator = Raised::raise(&self.partition.nrt);
        let start = clock::monotonic_now().as_u64();
        // Release: pairs with the Acquire loads in `Shared::start` (tasks, sampler).
        shared.start_ns.store(start, Ordering::Release);
        shared
            .open_gate(std::iter::once(sampler.thread()).chain(handles.iter().map(|h| h.thread())));
        Ok(Started {
            handles,
            sampler,
            running,
            stat_start,
            coordinator,
            start,
        })
    }

    /// Feeds every task: with [`BalancerMode::Ictus`], registers it with a new
    /// balancer, hands it its ring and starts the balancer; else tells it there is none.
    fn start_balancer(
        &self,
        feeds: &[Feed],
        ready: &[Ready],
    ) -> io::Result<Option<balancer::Running>> {
        match self.opts.balancer {
            BalancerMode::None => {
                for f in feeds {
                    let _ = f.send(None);
                }
                Ok(None)
            }
            BalancerMode::Ictus => {
                let mut b =
                    Balancer::new(self.partition.clone(), self.opts.balancer_config.clone());
                for (k, plan) in self.plans.iter().enumerate() {
                    let role = match plan.class {
                        Class::Rt0 { .. } => Role::Rt0,
                        Class::Rt1 { .. } => Role::Rt1,
                        Class::Normal => Role::Normal,
                    };
                    let producer = b.register(ready[k].tid, role, plan.affinity.clone());
                    let _ = feeds[k].send(Some(producer));
                }
                b.start().map(Some)
            }
        }
    }

    /// Starts the sampler thread and waits until it has raised itself.
    fn spawn_sampler(&self, ready: &[Ready]) -> io::Result<JoinHandle<Sampled>> {
        let (sampler_ready_tx, sampler_ready_rx) = mpsc::channel();
        let sampler_ctx = SamplerCtx {
            tids: ready.iter().map(|r| r.tid).collect(),
            groups: self.plans.iter().map(|p| p.group).collect(),
            group_names: self
                .scenario
                .groups
                .iter()
                .map(|g| g.name.clone())
                .collect(),
            cpus: self.in_play.cpus().to_vec(),
            nrt: self.partition.nrt.clone(),
            period: self.scenario.sample_period,
            bucket: self.scenario.timeline_bucket,
            shared: self.shared.clone(),
            ready: sampler_ready_tx,
        };
        let sampler = std::thread::Builder::new()
            .name("scenario-sampler".into())
            .spawn(move || sampler_main(sampler_ctx))?;
        let _ = sampler_ready_rx.recv();
        Ok(sampler)
    }

    /// Watches the run until every task has ended or it must stop, then joins the
    /// tasks and the sampler, stops the balancer and reads `/proc/stat` again.
    fn watch_to_end(
        &self,
        started: Started,
        watch: &mut impl FnMut(&Progress) -> Flow,
    ) -> Result<Ended, RunError> {
        let Started {
            handles,
            sampler,
            running,
            stat_start,
            coordinator,
            start,
        } = started;
        let stopped = self.watch_tasks(start, watch);
        let ends: Vec<TaskEnd> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        let end = clock::monotonic_now().as_u64();
        self.shared.sampling_over.raise();
        let sampled = sampler.join().unwrap_or_default();
        drop(coordinator);
        let balancer_report = running.map(|r| r.stop());
        let stat_end = procstat::read().map_err(RunError::ProcStat)?;
        watch(&Progress {
            elapsed: Duration::from_nanos(end.saturating_sub(start)),
            finished: ends.iter().filter(|e| e.finished).count(),
            tasks: self.plans.len(),
        });
        Ok(Ended {
            ends,
            start,
            end,
            stopped,
            sampled,
            balancer_report,
            stat_start,
            stat_end,
        })
    }

    /// Calls `watch` every [`POLL`] until every task has ended. When it asks, or at
    /// the scenario's duration limit, tells the tasks to stop and returns why.
    fn watch_tasks(&self, start: u64, watch: &mut impl FnMut(&Progress) -> Flow) -> Option<String> {
        let n = self.plans.len();
        let mut stopped = None;
        loop {
            std::thread::sleep(POLL);
            // Acquire: pairs with the AcqRel increment of each task's end.
            let ended = self.shared.ended.load(Ordering::Acquire);
            let elapsed =
                Duration::from_nanos(clock::monotonic_now().as_u64().saturating_sub(start));
            if ended >= n {
                break;
            }
            if watch(&Progress {
                elapsed,
                finished: ended,
                tasks: n,
            }) == Flow::Stop
            {
                stopped = Some("stopped on request".to_string());
            } else if let Some(limit) = self.scenario.duration_limit
                && elapsed >= limit
            {
                stopped = Some(format!(
                    "stopped at the duration limit ({})",
                    spec::format_duration(limit)
                ));
            }
            if stopped.is_some() {
                self.shared.abort.raise();
                break;
            }
        }
        stopped
    }

    /// Each task's figures, in plan order.
    fn task_results(&self, ready: &[Ready], ended: &Ended) -> Vec<TaskResult> {
        let (start, end) = (ended.start, ended.end);
        self.plans
            .iter()
            .zip(ready)
            .zip(&ended.ends)
            .enumerate()
            .map(|(k, ((plan, r), e))| {
                let runs = &ended.sampled.per_task[k];
                let total: u64 = runs.per_cpu.iter().sum();
                TaskResult {
                    group: self.scenario.groups[plan.group].name.clone(),
                    index: plan.index,
                    tid: r.tid,
                    affinity: plan.affinity.clone(),
                    policy: r.policy.clone(),
                    finished: e.finished,
                    loops_done: e.loops_done,
                    completion_ns: if e.started {
                        e.end_ns.saturating_sub(start)
                    } else {
                        end.saturating_sub(start)
                    },
                    cpu_time_ns: e.cpu_time_ns,
                    cpu_share: shares(self.in_play, &runs.per_cpu, total),
                    samples: runs.samples,
                    samples_running: runs.running,
                    voluntary_ctxt_switches: e.voluntary,
                    involuntary_ctxt_switches: e.involuntary,
                    migrations: e.migrations,
                    migrations_sampled: runs.changes,
                    sections: e.sections,
                }
            })
            .collect()
    }
}

/// Stops tasks that were set up but not started: tells them to give up, hands each
/// of `feeds` no balancer, opens the gate and joins them.
fn abort_tasks(shared: &Shared, feeds: &[Feed], handles: Vec<JoinHandle<TaskEnd>>) {
    shared.abort.raise();
    for f in feeds {
        let _ = f.send(None);
    }
    shared.open_gate(handles.iter().map(|h| h.thread()));
    for h in handles {
        let _ = h.join();
    }
}

/// Each CPU's idle time from the start to the end (and to the first task's end,
/// `first_end`, when one finished) and its steal time.
fn cpu_idle(
    in_play: &CpuSet,
    partition: &Partition,
    first_end: Option<&StatSnapshot>,
    stat_start: &StatSnapshot,
    stat_end: &StatSnapshot,
    steal: &StealDelta,
) -> Vec<CpuIdle> {
    let tick_ns = |s: &StatSnapshot, ticks: u64| {
        ticks.saturating_mul(1_000_000_000) / s.ticks_per_second.max(1)
    };
    let idle_of = |s: &StatSnapshot, cpu: usize| {
        s.per_cpu
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(0, |(_, t)| t.idle + t.iowait)
    };
    in_play
        .cpus()
        .iter()
        .map(|&cpu| CpuIdle {
            cpu,
            rt: partition.is_rt(cpu),
            idle_until_first_end_ns: first_end
                .map(|s| tick_ns(s, idle_of(s, cpu).saturating_sub(idle_of(stat_start, cpu)))),
            idle_ns: tick_ns(
                stat_end,
                idle_of(stat_end, cpu).saturating_sub(idle_of(stat_start, cpu)),
            ),
            steal_ns: steal
                .per_cpu_ns
                .iter()
                .find(|(c, _)| *c == cpu)
                .map_or(0, |(_, v)| *v),
        })
        .collect()
}

/// The shortfalls a finished run found: refused policies, a sampler that was not
/// raised or came late, host steal over 1 % of the `cpus` CPUs' `wall` time, dropped
/// attempt reports.
fn run_warnings(
    policies: &[PolicyOutcome],
    sampler: &SamplerInfo,
    steal_ns: u64,
    wall: u64,
    cpus: usize,
    tasks: &[TaskResult],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for p in policies {
        if let Some(reason) = &p.reason {
            warnings.push(format!(
                "group {}: {} refused for {} task(s), ran {} instead: {reason}",
                p.group, p.asked, p.refused_tasks, p.obtained
            ));
        }
    }
    if !sampler.policy.starts_with("fifo") {
        warnings.push(format!(
            "the sampler runs {} (FIFO 99 was refused): real-time tasks filling the CPUs delay its samples",
            sampler.policy
        ));
    }
    if sampler.missed > sampler.samples / 10 {
        warnings.push(format!(
            "the sampler missed {} of {} periods: the timeline and CPU shares are coarser than asked",
            sampler.missed,
            sampler.missed + sampler.samples
        ));
    }
    let all_cpu = wall.saturating_mul(cpus as u64).max(1);
    if steal_ns * 100 > all_cpu {
        warnings.push(format!(
            "the host stole {:.1} % of the CPU time during the run (a virtual machine sharing its host): completion times include it",
            steal_ns as f64 * 100.0 / all_cpu as f64
        ));
    }
    let dropped: u64 = tasks.iter().map(|t| t.sections.dropped_reports).sum();
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} migration attempt report(s) were dropped: the balancer's rings were full"
        ));
    }
    warnings
}

/// The calling thread raised to FIFO 99 on `cpus` for a while; dropping it puts back
/// its policy and affinity. Where FIFO is refused, it only pins.
struct Raised {
    policy: Option<Policy>,
    affinity: Option<CpuSet>,
}

impl Raised {
    fn raise(cpus: &CpuSet) -> Raised {
        let raised = Raised {
            policy: sched::current_policy().ok(),
            affinity: sched::current_affinity().ok(),
        };
        let _ = sched::set_affinity(cpus);
        let _ = sched::set_policy(Policy::Fifo { priority: 99 });
        raised
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some(p) = self.policy {
            let _ = sched::set_policy(p);
        }
        if let Some(a) = &self.affinity {
            let _ = sched::set_affinity(a);
        }
    }
}

/// One plan per task, in group order. rt0 tasks get one CPU each.
fn plans(scenario: &Scenario, in_play: &CpuSet, warnings: &mut Vec<String>) -> Vec<Plan> {
    let mut plans = Vec::new();
    for (gi, g) in scenario.groups.iter().enumerate() {
        let usable = CpuSet::from_cpus(
            g.cpus
                .cpus()
                .iter()
                .copied()
                .filter(|&c| in_play.contains(c)),
        );
        if usable != g.cpus {
            warnings.push(format!(
                "group {}: CPUs {} asked, {} usable (online and allowed); the tasks use those",
                g.name, g.cpus, usable
            ));
        }
        for index in 0..g.count {
            let (class, affinity) = match g.class {
                GroupClass::Rt0 => {
                    let cpu = usable.cpus()[index as usize % usable.len()];
                    (Class::Rt0 { cpu }, CpuSet::from_cpus([cpu]))
                }
                GroupClass::Rt1 { policy, priority } => {
                    (Class::Rt1 { policy, priority }, usable.clone())
                }
                GroupClass::Normal => (Class::Normal, usable.clone()),
            };
            plans.push(Plan {
                group: gi,
                index,
                class,
                affinity,
                loops: g.loops,
                sleep: g.sleep.map(|e| (e.loops, e.duration)),
                section: g.section.map(|e| (e.loops, e.duration)),
            });
        }
    }
    plans
}

/// What a task thread needs.
struct TaskCtx {
    k: usize,
    plan: Plan,
    partition: Partition,
    ret: Return,
    shared: Arc<Shared>,
    ready: mpsc::Sender<Ready>,
    feed: mpsc::Receiver<Option<Producer<Attempt>>>,
}

fn task_main(ctx: TaskCtx) -> TaskEnd {
    let TaskCtx {
        k,
        plan,
        partition,
        ret,
        shared,
        ready,
        feed,
    } = ctx;
    let tid = sched::thread_id() as i32;
    let options = Options {
        lock_memory: false,
        prefault_stack: true,
    };
    let mut refused = None;
    let mut error = None;
    match class::enter(plan.class.clone(), options, None) {
        Ok(_) => {}
        Err(ClassError::Policy(e)) => {
            refused = Some(e.to_string());
            if let Err(e) = class::enter(Class::Normal, options, None) {
                error = Some(format!("entering the normal class after a refusal: {e}"));
            }
        }
        Err(e) => error = Some(e.to_string()),
    }
    if error.is_none()
        && let Err(e) = sched::set_affinity(&plan.affinity)
    {
        error = Some(format!("affinity {}: {e}", plan.affinity));
    }
    let policy =
        sched::current_policy().map_or_else(|e| format!("unknown ({e})"), |p| p.to_string());
    let failed = error.is_some();
    let _ = ready.send(Ready {
        task: k,
        tid,
        policy,
        refused,
        error,
    });
    drop(ready);
    let producer = feed.recv().ok().flatten();
    let mut migrator = Migrator::new(partition, ret);
    if let Some(p) = producer {
        migrator = migrator.report_to(p);
    }
    shared.wait_gate();
    if failed || shared.abort.is_raised() {
        return TaskEnd::default();
    }
    let cpu_before = thread_time::thread_cpu_time();

    // The work: only computing, sleeping and sections from here to the last loop.
    let mut x = k as u64;
    let mut to_sleep = plan.sleep.map_or(u64::MAX, |(every, _)| every);
    let mut to_section = plan.section.map_or(u64::MAX, |(every, _)| every);
    let mut done = 0u64;
    let mut finished = true;
    while done < plan.loops {
        x = one_loop(x);
        done += 1;
        if done & 0x3ff == 0 && shared.abort.is_raised() {
            finished = false;
            break;
        }
        to_sleep -= 1;
        if to_sleep == 0
            && let Some((every, d)) = plan.sleep
        {
            to_sleep = every;
            if shared.abort.sleep_for(d) {
                finished = false;
                break;
            }
        }
        to_section -= 1;
        if to_section == 0
            && let Some((every, d)) = plan.section
        {
            to_section = every;
            let _section = migrator.section();
            if busy(d, &shared.abort) {
                finished = false;
                break;
            }
        }
    }
    let end_ns = clock::monotonic_now().as_u64();
    std::hint::black_box(x);

    // After the last loop: what the kernel counted.
    let cpu_time_ns = thread_time::thread_cpu_time()
        .saturating_sub(cpu_before)
        .as_u64();
    let (voluntary, involuntary) = ctxt_switches();
    let migrations = nr_migrations();
    let stats = migrator.stats();
    let sections = SectionCounts {
        attempts: stats.attempts,
        moves: stats.moves,
        failures: migrator.failures(),
        dropped_reports: migrator.dropped_reports(),
    };
    // Release: pairs with the Acquire load of the sampler, which stops reading it.
    shared.done[k].store(true, Ordering::Release);
    // AcqRel: the first to end takes the idle snapshot; pairs with the coordinator's
    // Acquire load.
    if shared.ended.fetch_add(1, Ordering::AcqRel) == 0
        && finished
        && let Ok(snap) = procstat::read()
    {
        let _ = shared.first_end.set((end_ns, snap));
    }
    TaskEnd {
        started: true,
        finished,
        loops_done: done,
        end_ns,
        cpu_time_ns,
        voluntary,
        involuntary,
        migrations,
        sections,
    }
}

/// Busy for `d` (the work inside a section), or until `stop` is raised; returns
/// whether it was.
fn busy(d: Duration, stop: &Latch) -> bool {
    let end = clock::monotonic_now()
        .as_u64()
        .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    while clock::monotonic_now().as_u64() < end {
        if stop.is_raised() {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// The calling thread's context switches, from `/proc/thread-self/status`.
fn ctxt_switches() -> (Option<u64>, Option<u64>) {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
    };
    (
        field("voluntary_ctxt_switches"),
        field("nonvoluntary_ctxt_switches"),
    )
}

/// The calling thread's migrations as the kernel counts them (`se.nr_migrations` in
/// `/proc/thread-self/sched`, present with `CONFIG_SCHED_DEBUG`).
fn nr_migrations() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("se.nr_migrations"))
        .and_then(|v| v.trim().trim_start_matches(':').trim().parse().ok())
}

/// What the sampler thread needs.
struct SamplerCtx {
    tids: Vec<i32>,
    groups: Vec<usize>,
    group_names: Vec<String>,
    cpus: Vec<usize>,
    nrt: CpuSet,
    period: Duration,
    bucket: Duration,
    shared: Arc<Shared>,
    /// Told once the sampler has raised itself: the gate must not open before, or
    /// real-time tasks would starve it before it could.
    ready: mpsc::Sender<()>,
}

/// What the sampler saw of one task.
#[derive(Debug, Clone, Default)]
struct TaskSamples {
    samples: u64,
    running: u64,
    changes: u64,
    per_cpu: Vec<u64>,
}

/// What the sampler returns.
#[derive(Debug, Default)]
struct Sampled {
    info: SamplerInfo,
    per_task: Vec<TaskSamples>,
    timeline: Timeline,
}

/// The state (field 3) and the CPU last run on (field 39) from a `stat` line.
fn parse_stat(line: &[u8]) -> Option<(u8, usize)> {
    ictus_os::procstat::TaskStat::parse(line).map(|t| (t.state, t.processor))
}

fn sampler_main(ctx: SamplerCtx) -> Sampled {
    let _ = sched::set_affinity(&ctx.nrt);
    let policy = match sched::set_policy(Policy::Fifo { priority: 99 }) {
        Ok(()) => "fifo 99".to_string(),
        Err(_) => sched::current_policy().map_or_else(|_| "other".into(), |p| p.to_string()),
    };
    let mut reader = TaskReader::open(&ctx.tids, &ctx.cpus);
    let mut counts = vec![vec![0u32; ctx.group_names.len()]; ctx.cpus.len()];
    let bucket_ns = ctx.bucket.as_nanos().max(1) as u64;
    let period = ctx.period.as_nanos().max(1) as u64;
    let mut timeline = TimelineSums::new(ctx.cpus.len(), ctx.group_names.len(), bucket_ns);
    let mut info = SamplerInfo {
        period_ns: period,
        policy,
        cpus: ctx.nrt.clone(),
        ..SamplerInfo::default()
    };
    let cpu_before = thread_time::thread_cpu_time();
    let _ = ctx.ready.send(());
    drop(ctx.ready);
    ctx.shared.wait_gate();
    if ctx.shared.abort.is_raised() {
        return Sampled {
            info,
            per_task: reader.per_task,
            timeline: Timeline::default(),
        };
    }
    let start = ctx.shared.start();
    let mut next = start;
    // Each sleep ends at the next period or when the coordinator says the run is
    // over, whichever comes first: a long period never holds up the end.
    while !ctx.shared.sampling_over.sleep_until(Nanos::new(next)) {
        let now = clock::monotonic_now().as_u64();
        let late = now.saturating_sub(next) / period;
        info.missed += late;
        next += (late + 1) * period;
        let t = now.saturating_sub(start);
        timeline.move_to(t);
        for row in counts.iter_mut() {
            row.fill(0);
        }
        let live = reader.sample(&ctx.shared, &ctx.groups, &mut counts);
        if live == 0 && t > 0 && ctx.shared.done.iter().all(|d| d.load(Ordering::Acquire)) {
            break;
        }
        timeline.add(&counts);
        info.samples += 1;
    }
    timeline.flush();
    info.cpu_time_ns = thread_time::thread_cpu_time()
        .saturating_sub(cpu_before)
        .as_u64();
    let mut timeline = Timeline {
        bucket_ns,
        cpus: ctx.cpus.clone(),
        groups: ctx.group_names.clone(),
        buckets: timeline.buckets,
    };
    coarsen(&mut timeline, MAX_BUCKETS);
    Sampled {
        info,
        per_task: reader.per_task,
        timeline,
    }
}

/// The sampler's view of the tasks: each one's stat file, opened once before the
/// start, and what was seen of it so far.
struct TaskReader {
    /// Per task; closed once it has ended or cannot be read.
    files: Vec<Option<File>>,
    per_task: Vec<TaskSamples>,
    last_cpu: Vec<Option<usize>>,
    /// A CPU's place among the CPUs in play, by CPU number.
    pos: Vec<Option<usize>>,
    buf: [u8; 1024],
}

impl TaskReader {
    /// Opens the stat files of `tids`, counting their running samples on `cpus`.
    fn open(tids: &[i32], cpus: &[usize]) -> TaskReader {
        let max_cpu = cpus.iter().copied().max().unwrap_or(0);
        let mut pos = vec![None; max_cpu + 1];
        for (i, &c) in cpus.iter().enumerate() {
            pos[c] = Some(i);
        }
        TaskReader {
            files: tids
                .iter()
                .map(|tid| File::open(format!("/proc/self/task/{tid}/stat")).ok())
                .collect(),
            per_task: vec![
                TaskSamples {
                    per_cpu: vec![0; cpus.len()],
                    ..TaskSamples::default()
                };
                tids.len()
            ],
            last_cpu: vec![None; tids.len()],
            pos,
            buf: [0u8; 1024],
        }
    }

    /// One sample of every task still running: its state and CPU, counted per task
    /// and, when running, in `counts[cpu][group]` (`groups` gives each task's group).
    /// Returns how many tasks could be read.
    fn sample(&mut self, shared: &Shared, groups: &[usize], counts: &mut [Vec<u32>]) -> usize {
        let mut live = 0;
        for k in 0..self.files.len() {
            // Acquire: pairs with the task's Release store at its end.
            if shared.done[k].load(Ordering::Acquire) {
                self.files[k] = None;
                continue;
            }
            let Some(f) = &self.files[k] else { continue };
            let got = f.read_at(&mut self.buf, 0).ok().filter(|&len| len > 0);
            let Some((state, cpu)) = got.and_then(|len| parse_stat(&self.buf[..len])) else {
                self.files[k] = None;
                continue;
            };
            live += 1;
            let s = &mut self.per_task[k];
            s.samples += 1;
            if self.last_cpu[k].is_some_and(|c| c != cpu) {
                s.changes += 1;
            }
            self.last_cpu[k] = Some(cpu);
            if state == b'R' {
                s.running += 1;
                if let Some(Some(p)) = self.pos.get(cpu) {
                    s.per_cpu[*p] += 1;
                    counts[*p][groups[k]] += 1;
                }
            }
        }
        live
    }
}

/// The timeline as it is sampled: the running tasks of the current bucket summed,
/// the buckets before it done.
struct TimelineSums {
    bucket_ns: u64,
    /// `sums[cpu][group]` over the current bucket's samples.
    sums: Vec<Vec<u64>>,
    /// Samples in the current bucket.
    samples: u32,
    /// The current bucket's index (its start over `bucket_ns`).
    index: u64,
    buckets: Vec<Bucket>,
}

impl TimelineSums {
    fn new(cpus: usize, groups: usize, bucket_ns: u64) -> TimelineSums {
        TimelineSums {
            bucket_ns,
            sums: vec![vec![0u64; groups]; cpus],
            samples: 0,
            index: 0,
            buckets: Vec::new(),
        }
    }

    /// Moves to the bucket of time `t`, closing the current one if `t` is past it.
    fn move_to(&mut self, t: u64) {
        let b = t / self.bucket_ns;
        if b != self.index {
            self.flush();
            self.index = b;
        }
    }

    /// Adds one sample's running tasks, `counts[cpu][group]`.
    fn add(&mut self, counts: &[Vec<u32>]) {
        for (row, c) in self.sums.iter_mut().zip(counts) {
            for (s, &v) in row.iter_mut().zip(c) {
                *s += u64::from(v);
            }
        }
        self.samples += 1;
    }

    /// Closes the current bucket: kept as means when it has samples; the sums start
    /// again from zero.
    fn flush(&mut self) {
        if self.samples > 0 {
            let samples = self.samples;
            self.buckets.push(Bucket {
                start_ns: self.index * self.bucket_ns,
                samples,
                running: self
                    .sums
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|&s| (s as f64 / f64::from(samples) * 100.0).round() / 100.0)
                            .collect()
                    })
                    .collect(),
            });
        }
        for row in self.sums.iter_mut() {
            row.fill(0);
        }
        self.samples = 0;
    }
}

/// Merges neighbouring buckets (weighted by their samples) until at most `max` are left.
pub fn coarsen(timeline: &mut Timeline, max: usize) {
    while timeline.buckets.len() > max.max(1) {
        let wide = timeline.bucket_ns * 2;
        let mut merged: Vec<Bucket> = Vec::with_capacity(timeline.buckets.len() / 2 + 1);
        for b in timeline.buckets.drain(..) {
            let start = b.start_ns / wide * wide;
            match merged.last_mut() {
                Some(m) if m.start_ns == start => {
                    let (wa, wb) = (f64::from(m.samples), f64::from(b.samples));
                    for (ra, rb) in m.running.iter_mut().zip(&b.running) {
                        for (a, v) in ra.iter_mut().zip(rb) {
                            *a = ((*a * wa + v * wb) / (wa + wb) * 100.0).round() / 100.0;
                        }
                    }
                    m.samples += b.samples;
                }
                _ => merged.push(Bucket {
                    start_ns: start,
                    ..b
                }),
            }
        }
        timeline.buckets = merged;
        timeline.bucket_ns = wide;
    }
}

/// Percentages of `counts` (in the order of `cpus`) over `total`; empty when no sample.
fn shares(cpus: &CpuSet, counts: &[u64], total: u64) -> Vec<CpuShare> {
    if total == 0 {
        return Vec::new();
    }
    cpus.cpus()
        .iter()
        .zip(counts)
        .map(|(&cpu, &c)| CpuShare {
            cpu,
            percent: c as f64 * 100.0 / total as f64,
        })
        .collect()
}

fn group_stats(
    scenario: &Scenario,
    tasks: &[TaskResult],
    sampled: &Sampled,
    in_play: &CpuSet,
) -> Vec<GroupStats> {
    scenario
        .groups
        .iter()
        .map(|g| {
            let mine: Vec<(usize, &TaskResult)> = tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| t.group == g.name)
                .collect();
            let mut per_cpu = vec![0u64; in_play.len()];
            for (k, _) in &mine {
                for (a, b) in per_cpu.iter_mut().zip(&sampled.per_task[*k].per_cpu) {
                    *a += b;
                }
            }
            let total = per_cpu.iter().sum();
            let finished: Vec<&TaskResult> = mine
                .iter()
                .map(|(_, t)| *t)
                .filter(|t| t.finished)
                .collect();
            let kernel = mine.iter().all(|(_, t)| t.migrations.is_some()) && !mine.is_empty();
            let stat = |f: &dyn Fn(&TaskResult) -> Option<u64>| {
                MinAvgMax::of(mine.iter().filter_map(|(_, t)| f(t)).map(|v| v as f64))
            };
            GroupStats {
                name: g.name.clone(),
                class: g.class,
                tasks: g.count,
                finished: finished.len() as u32,
                completion_ns: MinAvgMax::of(finished.iter().map(|t| t.completion_ns as f64)),
                cpu_time_ns: stat(&|t| Some(t.cpu_time_ns)),
                cpu_share: shares(in_play, &per_cpu, total),
                voluntary_ctxt_switches: stat(&|t| t.voluntary_ctxt_switches),
                involuntary_ctxt_switches: stat(&|t| t.involuntary_ctxt_switches),
                migrations: stat(&|t| Some(t.migrations_best())),
                migrations_source: if kernel { "kernel" } else { "sampled" }.to_string(),
                section_attempts: g.section.and_then(|_| stat(&|t| Some(t.sections.attempts))),
                section_moves: g.section.and_then(|_| stat(&|t| Some(t.sections.moves))),
            }
        })
        .collect()
}

fn policy_outcomes(scenario: &Scenario, plans: &[Plan], ready: &[Ready]) -> Vec<PolicyOutcome> {
    scenario
        .groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let mine: Vec<&Ready> = plans
                .iter()
                .zip(ready)
                .filter(|(p, _)| p.group == gi)
                .map(|(_, r)| r)
                .collect();
            let refused: Vec<&&Ready> = mine.iter().filter(|r| r.refused.is_some()).collect();
            let asked = match g.class {
                GroupClass::Normal => "other".to_string(),
                GroupClass::Rt0 => format!("fifo {}", class::RT0_PRIORITY),
                GroupClass::Rt1 { policy, priority } => policy.at(priority).to_string(),
            };
            PolicyOutcome {
                group: g.name.clone(),
                asked,
                obtained: refused
                    .first()
                    .map(|r| r.policy.clone())
                    .or_else(|| mine.first().map(|r| r.policy.clone()))
                    .unwrap_or_default(),
                refused_tasks: refused.len() as u32,
                reason: refused.first().and_then(|r| r.refused.clone()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::spec::{Every, Group};

    #[test]
    fn a_stat_line_gives_state_and_cpu() {
        let line = b"1234 (a (weird) name) R 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 100 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
        assert_eq!(parse_stat(line), Some((b'R', 3)));
        assert_eq!(parse_stat(b"garbage"), None);
    }

    #[test]
    fn min_avg_max_orders_its_figures() {
        let sut = MinAvgMax::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((sut.min, sut.avg, sut.max), (1.0, 2.0, 3.0));
        assert_eq!(MinAvgMax::of([]), None);
    }

    #[test]
    fn coarsening_merges_neighbours_weighted_by_samples() {
        let bucket = |start_ns, samples, v: f64| Bucket {
            start_ns,
            samples,
            running: vec![vec![v]],
        };
        let mut sut = Timeline {
            bucket_ns: 10,
            cpus: vec![0],
            groups: vec!["g".into()],
            buckets: vec![bucket(0, 1, 1.0), bucket(10, 3, 2.0), bucket(20, 2, 4.0)],
        };
        coarsen(&mut sut, 2);
        assert_eq!(sut.bucket_ns, 20);
        assert_eq!(sut.buckets.len(), 2);
        assert_eq!(sut.buckets[0].samples, 4);
        assert_eq!(sut.buckets[0].running[0][0], 1.75);
        assert_eq!(sut.buckets[1].start_ns, 20);
    }

    #[test]
    fn one_loop_is_not_constant() {
        assert_ne!(one_loop(1), one_loop(2));
        assert!(calibrate() > 0.0);
    }

    /// A small real run: 2 groups x 2 tasks, tiny loop counts. Structure only.
    #[test]
    fn a_small_run_reports_every_task_group_cpu_and_the_timeline() {
        let machine = spec::machine_cpus();
        if machine.len() < 2 {
            return;
        }
        let last = *machine.cpus().last().unwrap();
        let scenario = Scenario {
            name: "small".into(),
            description: String::new(),
            rt_cpus: CpuSet::from_cpus([last]),
            duration_limit: Some(Duration::from_secs(20)),
            sample_period: Duration::from_millis(1),
            timeline_bucket: Duration::from_millis(10),
            groups: vec![
                Group {
                    name: "crunch".into(),
                    count: 2,
                    cpus: machine.clone(),
                    class: GroupClass::Normal,
                    loops: 200_000,
                    sleep: None,
                    section: None,
                },
                Group {
                    name: "sections".into(),
                    count: 2,
                    cpus: machine.clone(),
                    class: GroupClass::Normal,
                    loops: 200_000,
                    sleep: Some(Every {
                        loops: 20_000,
                        duration: Duration::from_millis(1),
                    }),
                    section: Some(Every {
                        loops: 1_000,
                        duration: Duration::from_micros(5),
                    }),
                },
            ],
        };
        for mode in [BalancerMode::None, BalancerMode::Ictus] {
            let mut calls = 0;
            let sut = run(&scenario, &RunOptions::new(mode), |_| {
                calls += 1;
                Flow::Continue
            })
            .unwrap();
            assert!(calls >= 1, "the watcher is called at least at the end");
            assert_eq!(sut.schema, RESULT_SCHEMA);
            assert!(sut.complete, "{:?}", sut.stopped);
            assert_eq!(sut.tasks.len(), 4);
            assert!(sut.loop_ns > 0.0);
            for t in &sut.tasks {
                assert!(t.finished && t.loops_done == 200_000);
                assert!(t.completion_ns > 0 && t.completion_ns <= sut.wall_ns);
                assert!(t.tid > 0);
                if !t.cpu_share.is_empty() {
                    let sum: f64 = t.cpu_share.iter().map(|s| s.percent).sum();
                    assert!((sum - 100.0).abs() < 1e-6, "{sum}");
                }
                assert!(t.voluntary_ctxt_switches.is_some());
            }
            let sections = sut.tasks.iter().filter(|t| t.group == "sections");
            for t in sections {
                assert_eq!(t.sections.attempts, 200);
            }
            assert_eq!(sut.groups.len(), 2);
            for g in &sut.groups {
                let c = g.completion_ns.unwrap();
                assert!(c.min <= c.avg && c.avg <= c.max);
                for s in [
                    g.involuntary_ctxt_switches,
                    g.voluntary_ctxt_switches,
                    g.migrations,
                ] {
                    let s = s.unwrap();
                    assert!(s.min <= s.avg && s.avg <= s.max);
                }
            }
            assert_eq!(sut.cpus.len(), machine.len());
            assert!(sut.first_end_ns.is_some());
            assert!(!sut.timeline.buckets.is_empty());
            assert_eq!(sut.timeline.cpus, machine.cpus());
            for b in &sut.timeline.buckets {
                assert_eq!(b.running.len(), machine.len());
                assert!(b.running.iter().all(|row| row.len() == 2));
            }
            assert_eq!(sut.balancer_report.is_some(), mode == BalancerMode::Ictus);
            let p = sut
                .provenance
                .as_ref()
                .expect("a new result has a provenance");
            assert_eq!(p.tool, "ictus");
            assert_eq!(p.hostname, sut.hostname);
            assert_eq!(p.online_cpus, sut.cpus_online);
            // Both stamps have the same fixed-width RFC 3339 form, so text order is time order.
            let end = p.end_time.as_deref().expect("stamped at the end");
            assert!(p.start_time.as_str() <= end, "{} > {end}", p.start_time);
            let json = serde_json::to_string(&sut).unwrap();
            let back: ScenarioResult = serde_json::from_str(&json).unwrap();
            assert_eq!(back.tasks.len(), 4);
        }
    }

    /// Ten years.
    const DECADE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

    #[test]
    fn a_stop_wakes_tasks_sleeping_or_busy_for_years_and_a_sampler_with_a_long_period() {
        let machine = spec::machine_cpus();
        if machine.len() < 2 {
            return;
        }
        let scenario = Scenario {
            name: "decade".into(),
            description: String::new(),
            rt_cpus: CpuSet::from_cpus([*machine.cpus().last().unwrap()]),
            duration_limit: None,
            sample_period: DECADE,
            timeline_bucket: DECADE,
            groups: vec![
                Group {
                    name: "sleepers".into(),
                    count: 2,
                    cpus: machine.clone(),
                    class: GroupClass::Normal,
                    loops: 10,
                    sleep: Some(Every {
                        loops: 1,
                        duration: DECADE,
                    }),
                    section: None,
                },
                Group {
                    name: "section".into(),
                    count: 1,
                    cpus: machine.clone(),
                    class: GroupClass::Normal,
                    loops: 10,
                    sleep: None,
                    section: Some(Every {
                        loops: 1,
                        duration: DECADE,
                    }),
                },
            ],
        };
        for mode in [BalancerMode::None, BalancerMode::Ictus] {
            let s = scenario.clone();
            let (tx, rx) = mpsc::channel();
            // The run on a thread of its own, so that a stop that is not seen fails
            // the test instead of hanging it.
            std::thread::spawn(move || {
                let mut calls = 0;
                let result = run(&s, &RunOptions::new(mode), |_| {
                    calls += 1;
                    // Let the tasks fall asleep first.
                    if calls > 4 {
                        Flow::Stop
                    } else {
                        Flow::Continue
                    }
                });
                let _ = tx.send(result);
            });
            let sut = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("the run under {mode} did not stop"))
                .unwrap();
            assert!(!sut.complete);
            assert_eq!(sut.stopped.as_deref(), Some("stopped on request"));
            assert_eq!(sut.tasks.len(), 3);
            for t in &sut.tasks {
                assert!(!t.finished, "{} {}", t.group, t.index);
                assert!(t.loops_done >= 1 && t.loops_done < 10, "{}", t.loops_done);
            }
            assert_eq!(sut.balancer_report.is_some(), mode == BalancerMode::Ictus);
        }
    }

    #[test]
    fn a_stop_from_the_watcher_ends_the_run_incomplete() {
        let machine = spec::machine_cpus();
        if machine.len() < 2 {
            return;
        }
        let scenario = Scenario {
            name: "long".into(),
            description: String::new(),
            rt_cpus: CpuSet::from_cpus([*machine.cpus().last().unwrap()]),
            duration_limit: None,
            sample_period: Duration::from_millis(1),
            timeline_bucket: Duration::from_millis(10),
            groups: vec![Group {
                name: "forever".into(),
                count: 2,
                cpus: machine.clone(),
                class: GroupClass::Normal,
                loops: u64::MAX / 4,
                sleep: None,
                section: None,
            }],
        };
        let sut = run(&scenario, &RunOptions::new(BalancerMode::None), |_| {
            Flow::Stop
        })
        .unwrap();
        assert!(!sut.complete);
        assert_eq!(sut.stopped.as_deref(), Some("stopped on request"));
        assert!(sut.tasks.iter().all(|t| !t.finished));
        assert!(sut.groups[0].completion_ns.is_none());
    }
}
