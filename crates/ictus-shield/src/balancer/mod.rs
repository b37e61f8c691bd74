//! The asymmetric balancer (seed 002 §2.3, §3.2).
//!
//! A supervisor thread on the NRT CPUs periodically places the RT1+ and normal tasks
//! registered with it. ARTiS's rules, in user space:
//!
//! - **Load.** Per CPU, `load = L / (1 - RT)` (§3.2.2). Here **L** is the number of
//!   *registered* tasks with a non-real-time policy that are runnable (state `R` in
//!   `/proc/TID/task/TID/stat`) on that CPU at a sample, and **RT** is the share of
//!   time that *registered* tasks with a real-time policy (FIFO, RR, DEADLINE) used
//!   on that CPU: each sample, their runtime delta from `/proc/TID/task/TID/schedstat`
//!   over the sample interval, capped at 1, smoothed as the kernel's `CALC_LOAD` does
//!   with a weight of `1 / rt_window` (ARTiS: 500 samples, about half a second; until
//!   that many samples exist the weight is `1 / samples`, a plain average, so a fresh
//!   balancer does not start from zero). When RT nears 1 the free share is floored at
//!   [`MIN_FREE_SHARE`]: such a CPU counts as a hundred times as loaded per task. A CPU
//!   without runnable non-real-time tasks has load 0 however busy its real-time tasks
//!   keep it, as in ARTiS.
//! - **Push, not pull** (§3.2.3): only the supervisor moves tasks, and the RT CPUs
//!   never run balancing code. Every `rt_push_period` (ARTiS: 4x as often as the
//!   rest) RT1+ tasks found on NRT CPUs are pushed to the least loaded RT CPU they are
//!   allowed on (see [`push_rt`]). Every `push_period` one task is pushed from the most
//!   loaded CPU to the least loaded one, when that lowers the higher of the two loads
//!   (the difference is worth more than one task on the destination), moving normal
//!   tasks off RT CPUs before RT1+ tasks and RT1+ tasks onto RT CPUs before normal
//!   ones (§3.2.5); among tasks bound for an RT CPU, those whose next migration attempt
//!   is predicted furthest away go first (§3.2.4). Only tasks counted in L move in this
//!   push: real-time tasks change no L.
//! - **Anti ping-pong** (§3.2.4): no task is moved onto an RT CPU while
//!   [`MigrationStats::may_return`] says its next migration attempt is predicted soon
//!   (counted as `withheld`), nor while it is inside a section.
//! - **RT0 tasks never move**; their CPU time counts as RT load. No task is ever
//!   pinned outside the CPUs it was registered with.
//!
//! The supervisor runs on the NRT CPUs at `SCHED_FIFO` [`DEFAULT_FIFO_PRIORITY`]
//! (above every RT1+ task, so that none can keep it off its CPU; a refusal is noted
//! and it runs anyway). It opens each task's `/proc` files once, before raising its
//! priority, and rereads them: it never looks a `/proc` path up while it runs (see
//! `Tracked::read` in the source for the kernel spin that avoids).
//!
//! At start every movable task is placed once (RT1+ over the RT CPUs, normal tasks
//! over the NRT CPUs, least loaded first, then balanced as the pushes would; see
//! [`place_all`]). A placement pins the task to exactly one
//! CPU with `sched_setaffinity`: the balancer owns the placement of registered tasks,
//! which the kernel's own balancer would otherwise undo. Every move is a [`Decision`]
//! with its reason in words, and counted in the [`Report`]. When the balancer stops,
//! every task it pinned gets back the affinity it had when the balancer started.
//!
//! # Talking to tasks without a shared lock
//!
//! Each task reports its migration attempts to the supervisor through its own
//! lock-free SPSC ring ([`Balancer::register`] returns the producer end for
//! [`crate::migrate::Migrator::report_to`]). A section reports its start *before* the
//! task touches its affinity, and its end after. The supervisor drains the rings at
//! every sample and never moves a task inside a section onto an RT CPU. For the race
//! where a section starts between that check and the move, it drains the task's ring
//! again right after every move onto an RT CPU: the kernel serialises the two
//! affinity changes of the task under the task's own lock, so if the task's move came
//! first the supervisor's second look is bound to see the report; it then moves the
//! task straight off the RT CPU (counted as `raced`). The task never waits for the
//! supervisor. If a ring overflows (the task reported faster than the supervisor
//! drained), the task is treated as inside a section until its next report arrives.
//!
//! # What differs from ARTiS
//!
//! - ARTiS balanced every task in the kernel; this balancer sees only the tasks
//!   registered with it, and L and RT count only those. Other tasks on a CPU are
//!   invisible to it.
//! - ARTiS moved tasks through its RT-FIFOs so that an RT CPU never took a runqueue
//!   lock an NRT CPU held. Here a move is `sched_setaffinity`, which the kernel
//!   carries out with its own locks: the task's `pi_lock` and the runqueue locks of
//!   both CPUs. The RT CPU's side of the balancer is lock-free (the tasks only push to
//!   their rings), but each move does take kernel locks an RT CPU's scheduler also
//!   takes, as the stock load balancer does. Reading `/proc/TID/task/TID/stat` briefly
//!   takes the task's signal-handler lock.
//! - RT1+ tasks whose real-time policy was refused run `SCHED_OTHER`: they count in L,
//!   not RT. The RT push then moves such a task onto an RT CPU only when that CPU,
//!   with it, is no more loaded than the best NRT CPU it may use (else it swaps places
//!   with a normal task on an RT CPU, which changes no load), and the other push may
//!   move it off an RT CPU when no normal task there can go: neither undoes the
//!   other. ARTiS had no such tasks: its RT1+ tasks were always real-time.
//!
//! ```
//! use ictus_shield::balancer::{CpuState, Role, Snapshot, TaskState, push_one};
//! use ictus_shield::migrate::MigrationStats;
//!
//! // CPU 0 is NRT with two runnable normal tasks; CPU 1 is RT and idle.
//! let task = |tid| TaskState {
//!     tid,
//!     role: Role::Normal,
//!     cpu: Some(0),
//!     allowed: "0-1".parse().unwrap(),
//!     realtime: false,
//!     runnable: true,
//!     rt_share: 0.0,
//!     stats: MigrationStats::default(),
//!     in_section: false,
//! };
//! let mut snapshot = Snapshot {
//!     now_ns: 0,
//!     cpus: vec![
//!         CpuState { cpu: 0, rt: false, runnable: 2, rt_share: 0.0 },
//!         CpuState { cpu: 1, rt: true, runnable: 0, rt_share: 0.0 },
//!     ],
//!     tasks: vec![task(10), task(11)],
//! };
//! let pass = push_one(&mut snapshot, 20_000_000);
//! assert_eq!((pass.moves[0].from, pass.moves[0].to), (Some(0), 1));
//! assert_eq!(snapshot.load_of(0), 1.0);
//! // Balanced now: the next pass moves nothing.
//! assert!(push_one(&mut snapshot, 20_000_000).moves.is_empty());
//! ```
//!
//! The live balancer:
//!
//! ```no_run
//! use ictus_core::CpuSet;
//! use ictus_shield::balancer::{Balancer, Config, Role};
//! use ictus_shield::migrate::{Migrator, Return};
//! use ictus_shield::partition::Partition;
//! let online: CpuSet = "0-3".parse().unwrap();
//! let partition = Partition::new("2-3".parse().unwrap(), &online).unwrap();
//! let mut balancer = Balancer::new(partition.clone(), Config::default());
//! let tid = ictus_os::sched::thread_id() as i32;
//! let ring = balancer.register(tid, Role::Rt1, online.clone());
//! let mut migrator = Migrator::new(partition, Return::Stay).report_to(ring);
//! let running = balancer.start().unwrap();
//! // ... work, with `migrator.section()` around what endangers latency ...
//! let report = running.stop();
//! assert!(report.samples > 0);
//! ```

use std::cmp::Ordering as CmpOrdering;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ictus_core::sync::spsc::{self, Consumer, Producer};
use ictus_core::{CpuSet, Nanos};
use ictus_os::sched::{self, Policy};
use ictus_os::{affinity_of, clock, wait};
use serde::{Deserialize, Serialize};

use crate::migrate::{Attempt, MigrationStats};
use crate::partition::Partition;

/// Slots in each task's report ring (two reports per section).
pub const RING_CAPACITY: usize = 512;

/// The least free share `1 - RT` the load formula divides by: a CPU its real-time
/// tasks keep fully busy counts as a hundred times as loaded per task, not infinitely.
pub const MIN_FREE_SHARE: f64 = 0.01;

/// Notes kept in a report; later ones are counted in a last note.
const MAX_NOTES: usize = 100;

/// Loads closer than this are equal (float noise never triggers a move).
const LOAD_EPSILON: f64 = 1e-9;

/// The shortest sample period the supervisor accepts.
const MIN_SAMPLE_PERIOD: Duration = Duration::from_micros(100);

/// The longest the supervisor sleeps before looking at its stop flag.
const STOP_CHECK: Nanos = Nanos::from_millis(10);

/// `USER_HZ`: the tick of the CPU times in `/proc/TID/stat` on every Linux
/// architecture ictus runs on (used only when `schedstat` is missing).
const USER_HZ: u64 = 100;

/// The most real-time time, in whole samples, carried over to later samples.
const MAX_CARRY: f64 = 10.0;

/// Linux's `ESRCH`: no such thread (it exited; nothing to give back).
const ESRCH: i32 = 3;

/// ARTiS's load of a CPU (seed 002 §3.2.2): `runnable / (1 - rt_share)`, with
/// `runnable` (L) the runnable non-real-time tasks and `rt_share` (RT) the smoothed
/// share of time real-time tasks used. The free share is floored at
/// [`MIN_FREE_SHARE`]; no runnable task means load 0.
pub fn load(runnable: u32, rt_share: f64) -> f64 {
    if runnable == 0 {
        return 0.0;
    }
    let free = (1.0 - rt_share.clamp(0.0, 1.0)).max(MIN_FREE_SHARE);
    f64::from(runnable) / free
}

/// One sample's real-time share, at most 1, from `raw` (run time over the interval)
/// plus what earlier samples carried over; the excess is carried on (at most
/// [`MAX_CARRY`]). The kernel updates a running task's run time only at ticks and
/// switches, so a 1 ms sample can see 4 ms of it at once: capping without carrying
/// would lose that time.
fn capped_with_carry(raw: f64, carry: &mut f64) -> f64 {
    let total = raw.max(0.0) + *carry;
    let share = total.min(1.0);
    *carry = (total - share).min(MAX_CARRY);
    share
}

/// What a registered task is to the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Bound to its CPU: never moved, but its CPU time counts as real-time load.
    Rt0,
    /// Real-time, movable: prefers RT CPUs.
    Rt1,
    /// Not real-time, movable: prefers NRT CPUs.
    Normal,
}

impl Role {
    /// `rt0`, `rt1` or `normal`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Rt0 => "rt0",
            Role::Rt1 => "rt1",
            Role::Normal => "normal",
        }
    }
}

impl fmt::Display for Role {
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

// ---------------------------------------------------------------------------------
// The decisions, as pure functions over a snapshot.
// ---------------------------------------------------------------------------------

/// One CPU as a balancing pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuState {
    /// The CPU.
    pub cpu: usize,
    /// Whether it is an RT CPU.
    pub rt: bool,
    /// L: registered non-real-time tasks runnable on it.
    pub runnable: u32,
    /// RT: smoothed share of its time used by registered real-time tasks, 0..=1.
    pub rt_share: f64,
}

impl CpuState {
    /// `L / (1 - RT)`.
    pub fn load(&self) -> f64 {
        load(self.runnable, self.rt_share)
    }
}

/// One registered task as a balancing pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    /// Its thread id.
    pub tid: i32,
    /// Its role.
    pub role: Role,
    /// The CPU it is on (`None`: unknown, or not a CPU of the partition).
    pub cpu: Option<usize>,
    /// The CPUs it may ever be placed on.
    pub allowed: CpuSet,
    /// Whether it runs a real-time policy (its time counts in RT, not in L).
    pub realtime: bool,
    /// Whether it was runnable at the sample (it counts in L if not real-time).
    pub runnable: bool,
    /// Its own smoothed share of a CPU (real-time tasks), moved with it.
    pub rt_share: f64,
    /// Its migration statistics, from its reports.
    pub stats: MigrationStats,
    /// Whether it is inside a section (or may be: its reports were lost).
    pub in_section: bool,
}

/// Everything a balancing pass decides from.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Monotonic time of the snapshot, in ns (the clock of the tasks' statistics).
    pub now_ns: u64,
    /// The CPUs of the partition.
    pub cpus: Vec<CpuState>,
    /// The registered tasks.
    pub tasks: Vec<TaskState>,
}

/// One move a pass decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Index of the task in [`Snapshot::tasks`].
    pub task: usize,
    /// Its thread id.
    pub tid: i32,
    /// The CPU it was on.
    pub from: Option<usize>,
    /// The CPU to pin it to.
    pub to: usize,
    /// Why, in words.
    pub reason: String,
}

/// What one pass decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassOutcome {
    /// The moves, in order; already applied to the snapshot.
    pub moves: Vec<Move>,
    /// Tasks not moved onto an RT CPU by the anti ping-pong rule.
    pub withheld: u64,
    /// Tasks not moved onto an RT CPU because they were inside a section.
    pub in_section: u64,
}

/// Why a task may not go to a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    /// An RT0 task: never moved.
    Fixed,
    /// Not one of its allowed CPUs, or not a CPU of the partition.
    NotAllowed,
    /// An RT CPU, and the task is inside a section.
    InSection,
    /// An RT CPU, and its next migration attempt is predicted soon.
    Withheld,
}

impl Snapshot {
    fn index_of(&self, cpu: usize) -> Option<usize> {
        self.cpus.iter().position(|c| c.cpu == cpu)
    }

    /// The load of `cpu` (0 for a CPU not in the snapshot).
    pub fn load_of(&self, cpu: usize) -> f64 {
        self.index_of(cpu).map_or(0.0, |i| self.cpus[i].load())
    }

    /// Whether `cpu` is an RT CPU of the snapshot.
    pub fn is_rt(&self, cpu: usize) -> bool {
        self.index_of(cpu).is_some_and(|i| self.cpus[i].rt)
    }

    /// Registered tasks on `cpu`.
    fn tasks_on(&self, cpu: usize) -> usize {
        self.tasks.iter().filter(|t| t.cpu == Some(cpu)).count()
    }

    /// Moves task `task` to `to` in the snapshot: its contribution to RT (real-time: its
    /// own share) or to L goes with it. A non-real-time task counts in L where it goes
    /// even if it slept at the sample: it will run there next, and a pass placing
    /// several sleeping tasks must see each one it placed.
    pub fn apply(&mut self, task: usize, to: usize) {
        let Some(to_i) = self.index_of(to) else {
            return;
        };
        let t = &self.tasks[task];
        let from_i = t.cpu.and_then(|c| self.index_of(c));
        if from_i != Some(to_i) {
            if t.realtime {
                let mut share = t.rt_share.clamp(0.0, 1.0);
                if let Some(f) = from_i {
                    share = share.min(self.cpus[f].rt_share);
                    self.cpus[f].rt_share -= share;
                }
                self.cpus[to_i].rt_share = (self.cpus[to_i].rt_share + share).min(1.0);
            } else {
                if let Some(f) = from_i
                    && t.runnable
                {
                    self.cpus[f].runnable = self.cpus[f].runnable.saturating_sub(1);
                }
                self.cpus[to_i].runnable += 1;
                self.tasks[task].runnable = true;
            }
        }
        self.tasks[task].cpu = Some(to);
    }

    /// Whether task `t` may be pinned to `to`: the one check every pass goes through.
    fn admissible(&self, t: &TaskState, to: usize, horizon_ns: u64) -> Result<(), Block> {
        if t.role == Role::Rt0 {
            return Err(Block::Fixed);
        }
        if !t.allowed.contains(to) || self.index_of(to).is_none() {
            return Err(Block::NotAllowed);
        }
        if self.is_rt(to) {
            if t.in_section {
                return Err(Block::InSection);
            }
            if !t.stats.may_return(self.now_ns, horizon_ns) {
                return Err(Block::Withheld);
            }
        }
        Ok(())
    }

    /// The CPU's rank as a home for task `t` (lower is better): for a non-real-time
    /// task the load with it added, for a real-time task the real-time share with it
    /// added; then fewer tasks, then the lower number.
    fn home_key(&self, t: &TaskState, cpu_i: usize) -> (f64, f64, usize, usize) {
        let c = &self.cpus[cpu_i];
        let here = t.cpu == Some(c.cpu);
        let others = self.tasks_on(c.cpu) - usize::from(here);
        if t.realtime {
            let share = if here {
                c.rt_share
            } else {
                c.rt_share + t.rt_share
            };
            (share, c.load(), others, c.cpu)
        } else {
            let l = if here && t.runnable {
                c.runnable
            } else {
                c.runnable + 1
            };
            (load(l, c.rt_share), c.rt_share, others, c.cpu)
        }
    }
}

fn cmp_key(a: &(f64, f64, usize, usize), b: &(f64, f64, usize, usize)) -> CmpOrdering {
    a.0.total_cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.cmp(&b.2))
        .then(a.3.cmp(&b.3))
}

/// A duration in words: `150 us`, `4.2 ms`, `41 ms`, `2.5 s`.
fn words(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 10e9 {
        format!("{:.0} s", ns / 1e9)
    } else if ns >= 1e9 {
        format!("{:.1} s", ns / 1e9)
    } else if ns >= 10e6 {
        format!("{:.0} ms", ns / 1e6)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.0} us", ns / 1e3)
    }
}

/// Why the anti ping-pong rule lets `stats` go back to an RT CPU at `now_ns`.
fn return_reason(stats: &MigrationStats, now_ns: u64) -> String {
    match stats.predicted_next_ns() {
        None if stats.attempts == 0 => "no migration attempt yet".to_string(),
        None => "one migration attempt so far, no period known".to_string(),
        Some(next) if next > now_ns => {
            format!("next attempt predicted in {}", words(next - now_ns))
        }
        Some(next) => format!(
            "predicted attempt overdue by {}, more than its {} period",
            words(now_ns - next),
            words(stats.mean_period_ns as u64)
        ),
    }
}

/// Why the anti ping-pong rule keeps `stats` off RT CPUs at `now_ns`.
fn withheld_reason(stats: &MigrationStats, now_ns: u64) -> String {
    match stats.predicted_next_ns() {
        Some(next) if next > now_ns => {
            format!("next attempt predicted in {}", words(next - now_ns))
        }
        Some(next) => format!("predicted attempt overdue by only {}", words(now_ns - next)),
        None => "no prediction".to_string(),
    }
}

fn side(rt: bool) -> &'static str {
    if rt { "RT" } else { "NRT" }
}

/// The placement at start: every movable task is placed once. RT1+ tasks are first
/// put over the RT CPUs and normal tasks over the NRT CPUs they are allowed on, each
/// on the least loaded one, counting the tasks placed before it (and every task as
/// runnable: one asleep now runs soon). An RT1+ task that may not go to an RT CPU now
/// (inside a section, or its next attempt predicted soon), or is allowed on none, goes
/// to the other side; so does a normal task allowed on no NRT CPU. Then [`push_rt`]
/// and [`push_one`] run on that layout until nothing moves, so that the placement is
/// already the one the passes keep (seed 002 Table 3: 10 normal tasks on the NRT CPU
/// and 1 on each busy RT CPU at once). Every task placed yields one move, even to the
/// CPU it is on: the pin is the point.
pub fn place_all(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    let movable = |t: &TaskState| {
        t.role != Role::Rt0 && snapshot.cpus.iter().any(|c| t.allowed.contains(c.cpu))
    };
    let mut order: Vec<usize> = (0..snapshot.tasks.len())
        .filter(|&i| movable(&snapshot.tasks[i]))
        .collect();
    order.sort_by_key(|&i| (snapshot.tasks[i].role != Role::Rt1, snapshot.tasks[i].tid));
    // Take the movable tasks off their CPUs: they are all being placed. Set aside with
    // no CPU, they count nowhere until placed, and then as runnable.
    let mut work = snapshot.clone();
    for &i in &order {
        let t = &work.tasks[i];
        if let Some(f) = t.cpu.and_then(|c| work.index_of(c)) {
            if t.realtime {
                work.cpus[f].rt_share = (work.cpus[f].rt_share - t.rt_share).max(0.0);
            } else if t.runnable {
                work.cpus[f].runnable = work.cpus[f].runnable.saturating_sub(1);
            }
        }
        work.tasks[i].cpu = None;
        work.tasks[i].runnable = true;
    }
    let mut first: Vec<Option<(usize, String)>> = vec![None; work.tasks.len()];
    for &i in &order {
        let t = work.tasks[i].clone();
        let prefer_rt = t.role == Role::Rt1;
        let mut blocked = None;
        let candidates: Vec<usize> = (0..work.cpus.len())
            .filter(
                |&c| match work.admissible(&t, work.cpus[c].cpu, horizon_ns) {
                    Ok(()) => true,
                    Err(b) => {
                        if work.cpus[c].rt == prefer_rt && b != Block::NotAllowed {
                            blocked = Some(b);
                        }
                        false
                    }
                },
            )
            .collect();
        let preferred: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&c| work.cpus[c].rt == prefer_rt)
            .collect();
        let pool = if preferred.is_empty() {
            match blocked {
                Some(Block::Withheld) => out.withheld += 1,
                Some(Block::InSection) => out.in_section += 1,
                _ => {}
            }
            &candidates
        } else {
            &preferred
        };
        let Some(&best) = pool
            .iter()
            .min_by(|&&a, &&b| cmp_key(&work.home_key(&t, a), &work.home_key(&t, b)))
        else {
            // Nowhere to go: it stays, and counts where it is.
            if let Some(c) = snapshot.tasks[i].cpu {
                work.apply(i, c);
            }
            continue;
        };
        let to = work.cpus[best].cpu;
        let why = if !preferred.is_empty() {
            format!("{} side", side(prefer_rt))
        } else {
            match blocked {
                Some(Block::InSection) => "inside a section".to_string(),
                Some(Block::Withheld) => withheld_reason(&t.stats, work.now_ns),
                _ => format!("no {} CPU allowed", side(prefer_rt)),
            }
        };
        work.apply(i, to);
        first[i] = Some((to, why));
    }
    // Settle: the layout the passes would reach, reached now.
    for _ in 0..2 * order.len() + 4 {
        let rt = push_rt(&mut work, horizon_ns);
        let one = push_one(&mut work, horizon_ns);
        if rt.moves.is_empty() && one.moves.is_empty() {
            break;
        }
    }
    for &i in &order {
        let (Some((at_first, why)), Some(to)) = (&first[i], work.tasks[i].cpu) else {
            continue;
        };
        let why = if *at_first == to {
            why.clone()
        } else {
            format!("{why}, then balanced by load")
        };
        let t = &work.tasks[i];
        out.moves.push(Move {
            task: i,
            tid: t.tid,
            from: snapshot.tasks[i].cpu,
            to,
            reason: format!(
                "start: {} to {} CPU {to} ({why}; load there {:.1})",
                t.role,
                side(work.is_rt(to)),
                work.load_of(to)
            ),
        });
    }
    for m in &out.moves {
        snapshot.apply(m.task, m.to);
    }
    out
}

/// The frequent RT push (seed 002 §3.2.5, `only_rt`): RT1+ tasks on NRT CPUs go to the
/// least loaded RT CPU they are allowed on, unless inside a section or withheld by the
/// anti ping-pong rule. A real-time RT1+ task goes whatever the load (its time counts
/// in RT, not in L, as in ARTiS). A non-real-time one (`SCHED_FIFO` refused, say)
/// counts in L: it goes only if the RT CPU with it is no more loaded than the least
/// loaded NRT CPU it may use (counting it there), so that [`push_one`] never sends it
/// back; else it swaps places with a normal task on an RT CPU, which leaves every load
/// as it was. Moves are applied to the snapshot as made.
pub fn push_rt(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    for i in 0..snapshot.tasks.len() {
        let t = snapshot.tasks[i].clone();
        let Some(from) = t.cpu.filter(|&c| snapshot.index_of(c).is_some()) else {
            continue;
        };
        if t.role != Role::Rt1 || snapshot.is_rt(from) {
            continue;
        }
        let rt_allowed: Vec<usize> = (0..snapshot.cpus.len())
            .filter(|&c| snapshot.cpus[c].rt && t.allowed.contains(snapshot.cpus[c].cpu))
            .collect();
        let Some(&any_rt) = rt_allowed.first() else {
            continue;
        };
        match snapshot.admissible(&t, snapshot.cpus[any_rt].cpu, horizon_ns) {
            Err(Block::InSection) => {
                out.in_section += 1;
                continue;
            }
            Err(Block::Withheld) => {
                out.withheld += 1;
                continue;
            }
            Err(_) => continue,
            Ok(()) => {}
        }
        let Some(&best) = rt_allowed
            .iter()
            .min_by(|&&a, &&b| cmp_key(&snapshot.home_key(&t, a), &snapshot.home_key(&t, b)))
        else {
            continue;
        };
        let to = snapshot.cpus[best].cpu;
        let why = return_reason(&t.stats, snapshot.now_ns);
        if t.realtime {
            snapshot.apply(i, to);
            out.moves.push(Move {
                task: i,
                tid: t.tid,
                from: t.cpu,
                to,
                reason: format!("{} back to RT CPU {to}: {why}", t.role),
            });
            continue;
        }
        let on_rt = snapshot.home_key(&t, best).0;
        let on_nrt = (0..snapshot.cpus.len())
            .filter(|&c| !snapshot.cpus[c].rt && t.allowed.contains(snapshot.cpus[c].cpu))
            .map(|c| snapshot.home_key(&t, c).0)
            .fold(f64::INFINITY, f64::min);
        if on_rt <= on_nrt + LOAD_EPSILON {
            snapshot.apply(i, to);
            out.moves.push(Move {
                task: i,
                tid: t.tid,
                from: t.cpu,
                to,
                reason: format!(
                    "{} back to RT CPU {to}: {why}; load there with it {on_rt:.1}, \
                     {on_nrt:.1} at best on an NRT CPU",
                    t.role
                ),
            });
            continue;
        }
        // A swap with a normal task on an RT CPU: same loads, each on its side.
        let partner = rt_allowed
            .iter()
            .filter_map(|&c| {
                let cpu = snapshot.cpus[c].cpu;
                (0..snapshot.tasks.len())
                    .filter(|&j| {
                        let u = &snapshot.tasks[j];
                        u.cpu == Some(cpu)
                            && u.role == Role::Normal
                            && !u.realtime
                            && u.runnable == t.runnable
                            && snapshot.admissible(u, from, horizon_ns).is_ok()
                    })
                    .min_by_key(|&j| snapshot.tasks[j].tid)
                    .map(|j| (c, j))
            })
            .min_by(|a, b| cmp_key(&snapshot.home_key(&t, a.0), &snapshot.home_key(&t, b.0)));
        if let Some((c, j)) = partner {
            let to = snapshot.cpus[c].cpu;
            let (u_tid, u_role) = (snapshot.tasks[j].tid, snapshot.tasks[j].role);
            snapshot.apply(i, to);
            snapshot.apply(j, from);
            out.moves.push(Move {
                task: i,
                tid: t.tid,
                from: t.cpu,
                to,
                reason: format!(
                    "{} back to RT CPU {to}: {why}; swapped with {u_role} task {u_tid}, \
                     loads unchanged",
                    t.role
                ),
            });
            out.moves.push(Move {
                task: j,
                tid: u_tid,
                from: Some(to),
                to: from,
                reason: format!(
                    "{u_role} off RT CPU {to} to NRT CPU {from}: swapped with {} task {}, \
                     loads unchanged",
                    t.role, t.tid
                ),
            });
        }
    }
    out
}

/// The other push (seed 002 §3.2.3 to §3.2.5): one non-real-time runnable task goes
/// from the most loaded CPU to the least loaded one, if that lowers the higher of the
/// two loads, i.e. the difference is worth more than one task on the destination.
/// Off an RT CPU normal tasks go first, RT1+ tasks only when no normal task there
/// may; onto an RT CPU RT1+ tasks go first, then the tasks whose next attempt is
/// predicted furthest away; between NRT CPUs normal tasks go first, between RT CPUs
/// RT1+ tasks. When the busiest pair has no task that may move, the next pair is
/// tried. The move, if any, is applied to the snapshot.
pub fn push_one(snapshot: &mut Snapshot, horizon_ns: u64) -> PassOutcome {
    let mut out = PassOutcome::default();
    let n = snapshot.cpus.len();
    let mut by_load: Vec<usize> = (0..n).collect();
    by_load.sort_by(|&a, &b| {
        snapshot.cpus[a]
            .load()
            .total_cmp(&snapshot.cpus[b].load())
            .then(snapshot.cpus[a].cpu.cmp(&snapshot.cpus[b].cpu))
    });
    let mut counted = vec![false; snapshot.tasks.len()];
    for &s in by_load.iter().rev() {
        let src = snapshot.cpus[s].clone();
        let src_load = src.load();
        if src_load <= LOAD_EPSILON {
            break;
        }
        for &d in &by_load {
            let dst = &snapshot.cpus[d];
            if d == s || load(dst.runnable + 1, dst.rt_share) + LOAD_EPSILON >= src_load {
                continue;
            }
            let dst = dst.clone();
            let mut candidates: Vec<usize> = (0..snapshot.tasks.len())
                .filter(|&i| {
                    let t = &snapshot.tasks[i];
                    t.cpu == Some(src.cpu)
                        && t.role != Role::Rt0
                        && !t.realtime
                        && t.runnable
                        && t.allowed.contains(dst.cpu)
                })
                .collect();
            let now = snapshot.now_ns;
            candidates.sort_by_key(|&i| {
                let t = &snapshot.tasks[i];
                let first_role = if dst.rt { Role::Rt1 } else { Role::Normal };
                let quiet = t
                    .stats
                    .predicted_next_ns()
                    .map_or(u64::MAX, |next| next.saturating_sub(now));
                (
                    t.role != first_role,
                    if dst.rt { u64::MAX - quiet } else { 0 },
                    t.tid,
                )
            });
            for i in candidates {
                let t = &snapshot.tasks[i];
                match snapshot.admissible(t, dst.cpu, horizon_ns) {
                    Ok(()) => {}
                    Err(b) => {
                        if !counted[i] {
                            counted[i] = true;
                            match b {
                                Block::InSection => out.in_section += 1,
                                Block::Withheld => out.withheld += 1,
                                _ => {}
                            }
                        }
                        continue;
                    }
                }
                let how = match (src.rt, dst.rt) {
                    (true, false) => format!("off RT CPU {} to NRT CPU {}", src.cpu, dst.cpu),
                    (false, true) => format!("onto RT CPU {} from NRT CPU {}", dst.cpu, src.cpu),
                    _ => format!("from CPU {} to CPU {}", src.cpu, dst.cpu),
                };
                let reason = format!(
                    "{} {how}: load {:.1} vs {:.1}",
                    t.role,
                    src_load,
                    dst.load()
                );
                let (tid, from) = (t.tid, t.cpu);
                snapshot.apply(i, dst.cpu);
                out.moves.push(Move {
                    task: i,
                    tid,
                    from,
                    to: dst.cpu,
                    reason,
                });
                return out;
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------
// The live balancer.
// ---------------------------------------------------------------------------------

/// One registration, before start.
#[derive(Debug)]
struct Registration {
    tid: i32,
    role: Role,
    allowed: CpuSet,
    rx: Consumer<Attempt>,
}

/// A balancer being set up: register tasks, then [`Balancer::start`].
#[derive(Debug)]
pub struct Balancer {
    partition: Partition,
    config: Config,
    tasks: Vec<Registration>,
}

/// A running balancer; [`Running::stop`] ends it and returns its report. Dropping it
/// stops it too (the report is then lost).
#[derive(Debug)]
pub struct Running {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Report>>,
}

impl Balancer {
    /// A balancer over `partition`.
    pub fn new(partition: Partition, config: Config) -> Balancer {
        Balancer {
            partition,
            config,
            tasks: Vec::new(),
        }
    }

    /// Registers thread `tid` with its role and the CPUs it may ever use. Returns the
    /// producer end of its ring: give it to the task's `Migrator::report_to`.
    pub fn register(&mut self, tid: i32, role: Role, allowed: CpuSet) -> Producer<Attempt> {
        let (tx, rx) = spsc::channel(RING_CAPACITY);
        self.tasks.push(Registration {
            tid,
            role,
            allowed,
            rx,
        });
        tx
    }

    /// Starts the supervisor thread on the NRT CPUs.
    pub fn start(self) -> std::io::Result<Running> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let supervisor = Supervisor::new(self);
        let handle = std::thread::Builder::new()
            .name("ictus-balancer".to_string())
            .spawn(move || supervisor.run(&flag))?;
        Ok(Running {
            stop,
            handle: Some(handle),
        })
    }
}

impl Running {
    /// Stops the supervisor and returns what it did.
    pub fn stop(mut self) -> Report {
        self.finish()
    }

    fn finish(&mut self) -> Report {
        // Release: pairs with the Acquire load in Supervisor::run, which then stops.
        self.stop.store(true, Ordering::Release);
        match self.handle.take() {
            Some(handle) => handle.join().unwrap_or_else(|_| Report {
                notes: vec!["the balancer thread panicked: its report is lost".to_string()],
                ..Report::default()
            }),
            None => Report::default(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.finish();
        }
    }
}

/// What `/proc` says of a task at a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcTask {
    /// Field 3: `R`, `S`, `D`, `Z`, ...
    state: u8,
    /// Field 39: the CPU it last ran on.
    processor: usize,
    /// Field 41: the policy number (1 FIFO, 2 RR, 6 DEADLINE are real-time).
    policy: u32,
    /// Fields 14 and 15: user and system time, in `USER_HZ` ticks.
    ticks: u64,
}

impl ProcTask {
    fn realtime(&self) -> bool {
        matches!(self.policy, 1 | 2 | 6)
    }
}

/// Parses `/proc/TID/stat`: the command name may hold spaces, parentheses and bytes
/// that are not UTF-8, so fields are counted from the last `)`.
fn parse_stat(text: &[u8]) -> Option<ProcTask> {
    let t = ictus_os::procstat::TaskStat::parse(text)?;
    Some(ProcTask {
        state: t.state,
        processor: t.processor,
        policy: t.policy,
        ticks: t.ticks(),
    })
}

/// Whether a read error means the thread is gone.
fn is_gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ESRCH) || e.kind() == io::ErrorKind::NotFound
}

/// Opens a task's `/proc` file; done once, before the supervisor raises its priority.
fn open_proc(tid: i32, name: &str) -> io::Result<File> {
    File::open(format!("/proc/{tid}/task/{tid}/{name}"))
}

/// A registered task, as the supervisor tracks it.
#[derive(Debug)]
struct Tracked {
    tid: i32,
    role: Role,
    allowed: CpuSet,
    rx: Consumer<Attempt>,
    /// `/proc/TID/task/TID/stat`, open for the whole run (see [`Tracked::read`]).
    stat: File,
    /// `/proc/TID/task/TID/schedstat`, where the kernel has it.
    schedstat: Option<File>,
    /// The affinity it had when the balancer started, given back at stop.
    affinity_before: Option<CpuSet>,
    stats: MigrationStats,
    in_section: bool,
    /// Its ring overflowed: treated as inside a section until its next report.
    uncertain: bool,
    last_runtime_ns: Option<u64>,
    proc: Option<ProcTask>,
    /// The CPU the balancer pinned it to, while that pin holds.
    pinned: Option<usize>,
    /// Whether the balancer ever pinned it (its affinity is given back at stop).
    ever_pinned: bool,
    rt_share: f64,
    /// Its run time seen beyond a whole sample, carried to the next ones.
    carry: f64,
}

impl Tracked {
    /// A task just registered: nothing sampled, pinned or reported yet.
    fn new(
        tid: i32,
        role: Role,
        allowed: CpuSet,
        rx: Consumer<Attempt>,
        stat: File,
        schedstat: Option<File>,
    ) -> Tracked {
        Tracked {
            tid,
            role,
            allowed,
            rx,
            stat,
            schedstat,
            affinity_before: affinity_of::affinity_of(tid).ok(),
            stats: MigrationStats::default(),
            in_section: false,
            uncertain: false,
            last_runtime_ns: None,
            proc: None,
            pinned: None,
            ever_pinned: false,
            rt_share: 0.0,
            carry: 0.0,
        }
    }

    /// Where it is, or will run next: the pin if one holds (a sleeping task's
    /// `processor` is where it last ran), else the CPU it last ran on.
    fn cpu(&self) -> Option<usize> {
        self.pinned.or(self.proc.map(|p| p.processor))
    }

    fn realtime(&self) -> bool {
        self.proc.is_some_and(|p| p.realtime())
    }

    /// Reads its state, CPU and policy, and its run time in ns, from the files opened
    /// at start (`pread` at offset 0), using `buf`. `Ok(None)`: the thread is gone.
    ///
    /// The files stay open because a path lookup under `/proc/TID` after the thread
    /// exits makes the kernel invalidate those dentries (`d_invalidate`), which spins
    /// until any other thread that is pruning them is done: at FIFO priority on a CPU
    /// where that thread was preempted (the exiting task itself, say) it never is. This
    /// was seen: a supervisor at FIFO 50 spinning in `shrink_dcache_parent` for minutes.
    fn read(&self, buf: &mut [u8]) -> io::Result<Option<(ProcTask, u64)>> {
        let len = match self.stat.read_at(buf, 0) {
            Ok(0) => return Ok(None),
            Ok(len) => len,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let proc = parse_stat(&buf[..len])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable stat line"))?;
        let Some(file) = &self.schedstat else {
            return Ok(Some((proc, proc.ticks * (1_000_000_000 / USER_HZ))));
        };
        let mut line = [0u8; 96];
        let len = match file.read_at(&mut line, 0) {
            Ok(0) => return Ok(None),
            Ok(len) => len,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let runtime = std::str::from_utf8(&line[..len])
            .ok()
            .and_then(|s| s.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "unreadable schedstat line")
            })?;
        Ok(Some((proc, runtime)))
    }
}

/// The supervisor thread's state.
#[derive(Debug)]
struct Supervisor {
    partition: Partition,
    config: Config,
    /// The partition's CPUs, in order; per-CPU vectors are indexed alike.
    cpus: Vec<usize>,
    rt_ema: Vec<f64>,
    /// Per CPU: real-time time seen beyond a whole sample, carried to the next ones.
    rt_carry: Vec<f64>,
    runnable: Vec<u32>,
    tasks: Vec<Tracked>,
    start_ns: u64,
    last_sample_ns: u64,
    notes_left_out: u64,
    /// Room for one `stat` line.
    buf: Vec<u8>,
    report: Report,
}

impl Supervisor {
    fn new(balancer: Balancer) -> Supervisor {
        let Balancer {
            partition,
            config,
            tasks,
        } = balancer;
        let cpus = partition.all().cpus().to_vec();
        let all = partition.all();
        let mut report = Report::default();
        let mut schedstat_missing = false;
        let tasks = tasks
            .into_iter()
            .filter_map(|r| {
                let stat = match open_proc(r.tid, "stat") {
                    Ok(f) => f,
                    Err(e) => {
                        report.notes.push(format!(
                            "task {} is not there ({e}): dropped at start",
                            r.tid
                        ));
                        report.dropped_tasks.push(r.tid);
                        return None;
                    }
                };
                let schedstat = open_proc(r.tid, "schedstat").ok();
                schedstat_missing |= schedstat.is_none();
                let allowed = CpuSet::from_cpus(
                    r.allowed
                        .cpus()
                        .iter()
                        .copied()
                        .filter(|&c| all.contains(c)),
                );
                if allowed.is_empty() && r.role != Role::Rt0 {
                    report.notes.push(format!(
                        "task {}: its allowed CPUs ({}) hold no CPU of the partition ({all}): \
                         it is sampled but never moved",
                        r.tid, r.allowed
                    ));
                }
                Some(Tracked::new(r.tid, r.role, allowed, r.rx, stat, schedstat))
            })
            .collect();
        if schedstat_missing {
            report.notes.push(
                "no /proc/TID/schedstat (a kernel without CONFIG_SCHED_INFO): run times come \
                 from the tick-based times in stat, too coarse for short samples"
                    .to_string(),
            );
        }
        let n = cpus.len();
        Supervisor {
            partition,
            config,
            cpus,
            rt_ema: vec![0.0; n],
            rt_carry: vec![0.0; n],
            runnable: vec![0; n],
            tasks,
            start_ns: 0,
            last_sample_ns: 0,
            notes_left_out: 0,
            buf: vec![0; 4096],
            report,
        }
    }

    fn note(&mut self, text: String) {
        if self.report.notes.len() < MAX_NOTES {
            self.report.notes.push(text);
        } else {
            self.notes_left_out += 1;
        }
    }

    fn cpu_index(&self, cpu: usize) -> Option<usize> {
        self.cpus.iter().position(|&c| c == cpu)
    }

    fn horizon_ns(&self) -> u64 {
        u64::try_from(self.config.horizon.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Pins and prioritises the supervisor thread itself; refusals become notes.
    fn prepare_self(&mut self) {
        if let Err(e) = sched::set_affinity(&self.partition.nrt) {
            self.note(format!(
                "the balancer could not pin itself to the NRT CPUs {}: {e}",
                self.partition.nrt
            ));
        }
        match self.config.fifo_priority {
            None => self.note("the balancer runs SCHED_OTHER, as configured".to_string()),
            Some(priority) => match sched::set_policy(Policy::Fifo { priority }) {
                Ok(()) => self.report.supervisor_fifo = true,
                Err(e) => self.note(format!(
                    "the balancer runs SCHED_OTHER: SCHED_FIFO {priority} was refused ({e}); \
                     it may then be delayed by the very load it balances"
                )),
            },
        }
    }

    fn run(mut self, stop: &AtomicBool) -> Report {
        self.prepare_self();
        let period = Nanos::new(
            u64::try_from(self.config.sample_period.max(MIN_SAMPLE_PERIOD).as_nanos())
                .unwrap_or(u64::MAX),
        );
        let to_ns = |d: Duration| Nanos::new(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let rt_period = to_ns(self.config.rt_push_period).max(period);
        let push_period = to_ns(self.config.push_period).max(period);
        self.start_ns = clock::monotonic_now().as_u64();
        // Prime the runtimes: the first sample needs a previous reading.
        self.drain_all();
        self.sample(self.start_ns, false);
        let start = Nanos::new(self.start_ns);
        let mut next = start.saturating_add(period);
        let mut next_rt = start.saturating_add(rt_period);
        let mut next_push = start.saturating_add(push_period);
        let mut placed = false;
        // Acquire: pairs with the Release store in Running::finish.
        while !stop.load(Ordering::Acquire) {
            let now = clock::monotonic_now();
            if now < next {
                wait::sleep_until(next.min(now.saturating_add(STOP_CHECK)));
                continue;
            }
            next = next.saturating_add(period);
            if next <= now {
                // Missed samples are skipped, not caught up.
                next = now.saturating_add(period);
            }
            self.drain_all();
            let now_ns = now.as_u64();
            self.sample(now_ns, true);
            if !placed {
                placed = true;
                self.pass(now_ns, place_all);
                continue;
            }
            if now >= next_rt {
                next_rt = next_rt.saturating_add(rt_period).max(now);
                self.pass(now_ns, push_rt);
            }
            if now >= next_push {
                next_push = next_push.saturating_add(push_period).max(now);
                self.pass(now_ns, push_one);
            }
        }
        // One last sample: the report ends on the state at the stop, and a balancer
        // stopped before its first period has still sampled once.
        self.drain_all();
        self.sample(clock::monotonic_now().as_u64(), true);
        self.finish()
    }

    /// Drains every task's ring.
    fn drain_all(&mut self) {
        for i in 0..self.tasks.len() {
            self.drain(i);
        }
    }

    /// Drains task `i`'s ring; returns whether a section start was among the reports.
    fn drain(&mut self, i: usize) -> bool {
        let t = &mut self.tasks[i];
        let mut popped = 0usize;
        let mut started = false;
        while let Some(a) = t.rx.pop() {
            popped += 1;
            if a.in_section {
                started = true;
                self.report.attempts_received += 1;
                if a.moved {
                    // It changes its own affinity: the balancer's pin no longer holds.
                    t.pinned = None;
                }
            } else {
                self.report.section_ends_received += 1;
            }
            t.stats = a.stats;
            t.in_section = a.in_section;
        }
        if popped >= t.rx.capacity() {
            t.uncertain = true;
            self.report.ring_overflows += 1;
        } else if popped > 0 {
            t.uncertain = false;
        }
        started
    }

    /// Reads every task's state and runtime and drops the tasks that exited; when
    /// `count`, also updates L and the smoothed RT per CPU (the first reading only
    /// primes the runtimes).
    fn sample(&mut self, now_ns: u64, count: bool) {
        let interval = now_ns.saturating_sub(self.last_sample_ns);
        if count && interval == 0 {
            return;
        }
        let mut rt_sample = vec![0.0f64; self.cpus.len()];
        let mut runnable = vec![0u32; self.cpus.len()];
        self.report.samples += u64::from(count);
        // CALC_LOAD's weight 1 / rt_window, after a plain average while fewer samples
        // exist.
        let weight = 1.0
            / self
                .report
                .samples
                .clamp(1, u64::from(self.config.rt_window.max(1))) as f64;
        let mut i = 0;
        while i < self.tasks.len() {
            let read = self.tasks[i].read(&mut self.buf);
            let (proc, runtime) = match read {
                Ok(Some(r)) if !matches!(r.0.state, b'Z' | b'X' | b'x') => r,
                other => {
                    let why = match other {
                        Err(e) => format!("could not be read ({e})"),
                        Ok(_) => "exited".to_string(),
                    };
                    let tid = self.tasks[i].tid;
                    self.tasks.remove(i);
                    self.report.dropped_tasks.push(tid);
                    let at = words(now_ns.saturating_sub(self.start_ns));
                    self.note(format!("task {tid} {why}; dropped at {at}"));
                    continue;
                }
            };
            let t = &mut self.tasks[i];
            let delta = t
                .last_runtime_ns
                .map_or(0, |last| runtime.saturating_sub(last));
            t.last_runtime_ns = Some(runtime);
            // A runnable task found off its pin was moved by someone else.
            if proc.state == b'R' && t.pinned.is_some_and(|p| p != proc.processor) {
                t.pinned = None;
            }
            t.proc = Some(proc);
            if count {
                let raw = if proc.realtime() && interval > 0 {
                    delta as f64 / interval as f64
                } else {
                    0.0
                };
                let share = capped_with_carry(raw, &mut t.carry);
                t.rt_share += weight * (share - t.rt_share);
                if proc.realtime() {
                    if let Some(c) = self.cpus.iter().position(|&c| c == proc.processor) {
                        rt_sample[c] += share;
                    }
                } else if proc.state == b'R'
                    && let Some(c) = t.cpu().and_then(|c| self.cpus.iter().position(|&x| x == c))
                {
                    runnable[c] += 1;
                }
            }
            i += 1;
        }
        self.last_sample_ns = now_ns;
        if count {
            for ((ema, carry), &raw) in self
                .rt_ema
                .iter_mut()
                .zip(&mut self.rt_carry)
                .zip(&rt_sample)
            {
                let s = capped_with_carry(raw, carry);
                *ema += weight * (s - *ema);
            }
            self.runnable = runnable;
        }
    }

    fn snapshot(&self, now_ns: u64) -> Snapshot {
        Snapshot {
            now_ns,
            cpus: self
                .cpus
                .iter()
                .enumerate()
                .map(|(i, &cpu)| CpuState {
                    cpu,
                    rt: self.partition.is_rt(cpu),
                    runnable: self.runnable[i],
                    rt_share: self.rt_ema[i],
                })
                .collect(),
            tasks: self
                .tasks
                .iter()
                .map(|t| TaskState {
                    tid: t.tid,
                    role: t.role,
                    cpu: t.cpu().filter(|c| self.cpus.contains(c)),
                    allowed: t.allowed.clone(),
                    realtime: t.realtime(),
                    runnable: t.proc.is_some_and(|p| p.state == b'R'),
                    rt_share: t.rt_share,
                    stats: t.stats,
                    in_section: t.in_section || t.uncertain,
                })
                .collect(),
        }
    }

    /// Runs one pass over a fresh snapshot and carries out its moves.
    fn pass(&mut self, now_ns: u64, pass: fn(&mut Snapshot, u64) -> PassOutcome) {
        let mut snapshot = self.snapshot(now_ns);
        let outcome = pass(&mut snapshot, self.horizon_ns());
        self.report.passes += 1;
        self.report.withheld += outcome.withheld;
        self.report.in_section_skips += outcome.in_section;
        for m in outcome.moves {
            self.carry_out(m.task, m.from, m.to, m.reason, now_ns);
        }
    }

    /// Pins task `i` to `to`, logs the decision, and after a move onto an RT CPU
    /// checks the task's ring again (the race described in the module docs).
    fn carry_out(&mut self, i: usize, from: Option<usize>, to: usize, reason: String, now_ns: u64) {
        if !self.pin(i, from, to, reason, now_ns) || !self.partition.is_rt(to) {
            return;
        }
        if !self.drain(i) {
            return;
        }
        self.report.raced += 1;
        let t = &self.tasks[i];
        if !(t.in_section || t.uncertain) {
            return;
        }
        // Still inside the section: off the RT CPU at once, to the least loaded NRT CPU
        // it may use.
        let best = t
            .allowed
            .cpus()
            .iter()
            .copied()
            .filter(|&c| !self.partition.is_rt(c))
            .filter_map(|c| self.cpu_index(c).map(|x| (c, x)))
            .min_by(|a, b| {
                load(self.runnable[a.1] + 1, self.rt_ema[a.1])
                    .total_cmp(&load(self.runnable[b.1] + 1, self.rt_ema[b.1]))
                    .then(a.0.cmp(&b.0))
            });
        let tid = t.tid;
        match best {
            Some((nrt, _)) => {
                let reason = format!(
                    "{} off RT CPU {to} at once: a section started during the move",
                    t.role
                );
                self.pin(i, Some(to), nrt, reason, now_ns);
            }
            None => self.note(format!(
                "task {tid} started a section while being moved to RT CPU {to} and is \
                 allowed on no NRT CPU: left there"
            )),
        }
    }

    /// Sets the affinity; on success updates the live state and logs the decision.
    fn pin(
        &mut self,
        i: usize,
        from: Option<usize>,
        to: usize,
        reason: String,
        now_ns: u64,
    ) -> bool {
        let tid = self.tasks[i].tid;
        if let Err(e) = affinity_of::set_affinity_of(tid, &CpuSet::from_cpus([to])) {
            self.report.refused += 1;
            self.note(format!("pinning task {tid} to CPU {to} was refused: {e}"));
            return false;
        }
        let t = &mut self.tasks[i];
        t.pinned = Some(to);
        t.ever_pinned = true;
        // A real-time task takes its share of RT with it, as in the pure passes.
        if t.realtime()
            && let (Some(f), Some(d)) = (
                from.and_then(|c| self.cpus.iter().position(|&x| x == c)),
                self.cpus.iter().position(|&x| x == to),
            )
            && f != d
        {
            let share = t.rt_share.clamp(0.0, 1.0).min(self.rt_ema[f]);
            self.rt_ema[f] -= share;
            self.rt_ema[d] = (self.rt_ema[d] + share).min(1.0);
        }
        if self.partition.is_rt(to) {
            self.report.to_rt += 1;
        } else {
            self.report.to_nrt += 1;
        }
        if self.report.decisions.len() < self.config.max_decisions {
            self.report.decisions.push(Decision {
                at_ns: now_ns.saturating_sub(self.start_ns),
                tid,
                from,
                to,
                reason,
            });
        } else {
            self.report.decisions_dropped += 1;
        }
        true
    }

    /// Gives back the affinities it took and fills in the end of the report.
    fn finish(mut self) -> Report {
        let mut pinned = Vec::new();
        let mut give_back = Vec::new();
        for t in &self.tasks {
            if let Some(cpu) = t.pinned {
                pinned.push((t.tid, cpu));
            }
            if t.ever_pinned {
                let before = t
                    .affinity_before
                    .clone()
                    .unwrap_or_else(|| t.allowed.clone());
                give_back.push((t.tid, before));
            }
        }
        for (tid, before) in give_back {
            if let Err(e) = affinity_of::set_affinity_of(tid, &before)
                && e.raw_os_error() != Some(ESRCH)
            {
                self.note(format!(
                    "giving task {tid} its affinity {before} back was refused: {e}"
                ));
            }
        }
        self.report.pinned_at_stop = pinned;
        self.report.rt_share = self
            .cpus
            .iter()
            .zip(&self.rt_ema)
            .map(|(&c, &s)| (c, s))
            .collect();
        self.report.load = self
            .cpus
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, load(self.runnable[i], self.rt_ema[i])))
            .collect();
        if self.notes_left_out > 0 {
            let n = self.notes_left_out;
            self.report.notes.push(format!("{n} more notes left out"));
        }
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HORIZON: u64 = 20_000_000;

    fn cpu(cpu: usize, rt: bool) -> CpuState {
        CpuState {
            cpu,
            rt,
            runnable: 0,
            rt_share: 0.0,
        }
    }

    fn task(tid: i32, role: Role, on: usize, allowed: &str) -> TaskState {
        TaskState {
            tid,
            role,
            cpu: Some(on),
            allowed: allowed.parse().unwrap(),
            realtime: false,
            runnable: true,
            rt_share: 0.0,
            stats: MigrationStats::default(),
            in_section: false,
        }
    }

    /// A snapshot whose L and RT are those of its tasks.
    fn snapshot(now_ns: u64, cpus: Vec<CpuState>, tasks: Vec<TaskState>) -> Snapshot {
        let mut s = Snapshot {
            now_ns,
            cpus,
            tasks,
        };
        for c in &mut s.cpus {
            c.runnable = 0;
            c.rt_share = 0.0;
        }
        for t in s.tasks.clone() {
            let Some(i) = t.cpu.and_then(|c| s.index_of(c)) else {
                continue;
            };
            if t.realtime {
                s.cpus[i].rt_share = (s.cpus[i].rt_share + t.rt_share).min(1.0);
            } else if t.runnable {
                s.cpus[i].runnable += 1;
            }
        }
        s
    }

    /// Runs RT pushes and pushes until nothing moves (at most `limit` rounds).
    fn settle(s: &mut Snapshot, limit: usize) -> PassOutcome {
        let mut all = PassOutcome::default();
        for _ in 0..limit {
            let rt = push_rt(s, HORIZON);
            let one = push_one(s, HORIZON);
            let moved = !rt.moves.is_empty() || !one.moves.is_empty();
            all.withheld += rt.withheld + one.withheld;
            all.in_section += rt.in_section + one.in_section;
            all.moves.extend(rt.moves);
            all.moves.extend(one.moves);
            if !moved {
                return all;
            }
        }
        panic!("no fixed point after {limit} rounds: {s:#?}");
    }

    fn count_on(s: &Snapshot, cpu: usize, role: Role) -> usize {
        s.tasks
            .iter()
            .filter(|t| t.cpu == Some(cpu) && t.role == role)
            .count()
    }

    /// Stats of a task attempting every `period_ns`, the last attempt `ago_ns` before
    /// `now_ns`.
    fn attempting(period_ns: u64, now_ns: u64, ago_ns: u64) -> MigrationStats {
        let mut s = MigrationStats::default();
        let last = now_ns - ago_ns;
        for k in (0..5).rev() {
            s.record(last - k * period_ns);
        }
        s
    }

    #[test]
    fn load_is_runnable_over_the_free_share() {
        assert_eq!(load(2, 0.0), 2.0);
        assert!((load(2, 0.5) - 4.0).abs() < 1e-12);
        assert!((load(1, 0.9) - 10.0).abs() < 1e-9);
        assert_eq!(load(0, 0.9), 0.0, "no runnable task: no load, as in ARTiS");
        assert!((load(1, 1.0) - 1.0 / MIN_FREE_SHARE).abs() < 1e-9);
        assert!((load(1, 1.5) - 1.0 / MIN_FREE_SHARE).abs() < 1e-9);
    }

    #[test]
    fn seed_figure_2_five_tasks_beside_a_three_quarter_rt_task_split_four_one() {
        // Seed 002 §3.2.2: 2 CPUs, an RT task using 3/4 of CPU 1, 5 Linux tasks.
        let mut rt = task(1, Role::Rt0, 1, "1");
        rt.realtime = true;
        rt.rt_share = 0.75;
        let mut tasks = vec![rt];
        tasks.extend((0..5).map(|k| task(10 + k, Role::Normal, (k % 2) as usize, "0-1")));
        let mut sut = snapshot(0, vec![cpu(0, false), cpu(1, true)], tasks);
        settle(&mut sut, 20);
        assert_eq!(count_on(&sut, 0, Role::Normal), 4);
        assert_eq!(count_on(&sut, 1, Role::Normal), 1);
    }

    #[test]
    fn seed_table_3_thirteen_normal_tasks_beside_three_busy_rt0_tasks_go_ten_one_one_one() {
        let cpus = vec![cpu(0, false), cpu(1, true), cpu(2, true), cpu(3, true)];
        let mut tasks = Vec::new();
        for c in 1..4 {
            let mut t = task(c as i32, Role::Rt0, c, &c.to_string());
            t.realtime = true;
            t.rt_share = 0.9;
            tasks.push(t);
        }
        // Stock placement: the 13 normal tasks spread evenly, 4 3 3 3.
        tasks.extend((0..13).map(|k| task(100 + k, Role::Normal, (k % 4) as usize, "0-3")));
        let mut sut = snapshot(0, cpus, tasks);
        let before: Vec<f64> = (0..4).map(|c| sut.load_of(c)).collect();
        assert!((before[1] - 30.0).abs() < 1e-6, "3 tasks at 10 % free");
        let pass = settle(&mut sut, 50);
        assert_eq!(count_on(&sut, 0, Role::Normal), 10);
        for c in 1..4 {
            assert_eq!(count_on(&sut, c, Role::Normal), 1, "CPU {c}");
            assert_eq!(count_on(&sut, c, Role::Rt0), 1, "RT0 stays on CPU {c}");
        }
        assert!(
            pass.moves
                .iter()
                .all(|m| m.reason.starts_with("normal off RT CPU"))
        );
        // Equity: every normal task gets about a tenth of a CPU.
        for c in 0..4 {
            assert!(
                (sut.load_of(c) - 10.0).abs() < 1e-6,
                "CPU {c}: {}",
                sut.load_of(c)
            );
        }
    }

    #[test]
    fn seed_table_3_from_the_placement_at_start_too() {
        let cpus = vec![cpu(0, false), cpu(1, true), cpu(2, true), cpu(3, true)];
        let mut tasks = Vec::new();
        for c in 1..4 {
            let mut t = task(c as i32, Role::Rt0, c, &c.to_string());
            t.realtime = true;
            t.rt_share = 0.9;
            tasks.push(t);
        }
        tasks.extend((0..13).map(|k| task(100 + k, Role::Normal, 1, "0-3")));
        let mut sut = snapshot(0, cpus, tasks);
        let placed = place_all(&mut sut, HORIZON);
        assert_eq!(placed.moves.len(), 13, "every movable task is placed once");
        assert_eq!(
            count_on(&sut, 0, Role::Normal),
            10,
            "the settled layout at once"
        );
        for c in 1..4 {
            assert_eq!(count_on(&sut, c, Role::Normal), 1, "CPU {c}");
        }
        let to_rt: Vec<&Move> = placed.moves.iter().filter(|m| m.to != 0).collect();
        assert_eq!(to_rt.len(), 3);
        assert!(
            to_rt
                .iter()
                .all(|m| m.reason.contains("then balanced by load")),
            "{to_rt:?}"
        );
        assert!(settle(&mut sut, 5).moves.is_empty(), "the passes keep it");
    }

    #[test]
    fn seed_table_5_rt1_tasks_take_the_rt_cpus_and_normal_tasks_the_nrt_cpus() {
        // NRT NRT RT RT; 8 RT50 tasks and 8 normal tasks, spread evenly at first.
        for realtime in [true, false] {
            let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, true), cpu(3, true)];
            let mut tasks = Vec::new();
            for k in 0..8 {
                let mut t = task(10 + k, Role::Rt1, (k % 4) as usize, "0-3");
                t.realtime = realtime;
                t.rt_share = 0.5;
                tasks.push(t);
                tasks.push(task(20 + k, Role::Normal, (k % 4) as usize, "0-3"));
            }
            let mut sut = snapshot(0, cpus, tasks);
            settle(&mut sut, 50);
            for c in [0, 1] {
                assert_eq!(count_on(&sut, c, Role::Rt1), 0, "realtime {realtime}");
                assert_eq!(count_on(&sut, c, Role::Normal), 4, "realtime {realtime}");
            }
            for c in [2, 3] {
                assert_eq!(count_on(&sut, c, Role::Rt1), 4, "realtime {realtime}");
                assert_eq!(count_on(&sut, c, Role::Normal), 0, "realtime {realtime}");
            }
        }
    }

    #[test]
    fn seed_table_5_the_placement_at_start_sorts_the_roles() {
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, true), cpu(3, true)];
        let mut tasks = Vec::new();
        for k in 0..8 {
            tasks.push(task(10 + k, Role::Rt1, 0, "0-3"));
            tasks.push(task(20 + k, Role::Normal, 3, "0-3"));
        }
        let mut sut = snapshot(0, cpus, tasks);
        let pass = place_all(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 16);
        for (c, rt1, normal) in [(0, 0, 4), (1, 0, 4), (2, 4, 0), (3, 4, 0)] {
            assert_eq!(count_on(&sut, c, Role::Rt1), rt1, "CPU {c}");
            assert_eq!(count_on(&sut, c, Role::Normal), normal, "CPU {c}");
        }
        assert!(pass.moves.iter().all(|m| m.reason.starts_with("start: ")));
    }

    #[test]
    fn seed_table_4_often_migrating_rt1_tasks_are_withheld_rarely_migrating_ones_return() {
        let now = 10_000_000_000;
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, true), cpu(3, true)];
        let mut tasks = Vec::new();
        for k in 0..8 {
            // Often migrating: every 200 us, last 50 us ago.
            let mut om = task(10 + k, Role::Rt1, (k % 2) as usize, "0-3");
            om.stats = attempting(200_000, now, 50_000);
            tasks.push(om);
            // Infrequently migrating: every 200 ms, last 1 ms ago.
            let mut im = task(20 + k, Role::Rt1, (k % 2) as usize, "0-3");
            im.stats = attempting(200_000_000, now, 1_000_000);
            tasks.push(im);
        }
        let mut sut = snapshot(now, cpus, tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.withheld, 8);
        assert_eq!(pass.moves.len(), 8);
        assert!(pass.moves.iter().all(|m| (20..28).contains(&m.tid)));
        assert!(pass.moves.iter().all(|m| m.to >= 2));
        assert!(
            pass.moves[0]
                .reason
                .contains("next attempt predicted in 199 ms"),
            "{}",
            pass.moves[0].reason
        );
        for t in &sut.tasks {
            let on_rt = t.cpu.is_some_and(|c| c >= 2);
            assert_eq!(on_rt, t.tid >= 20, "task {}", t.tid);
        }
    }

    #[test]
    fn seed_table_4_normal_tasks_the_push_favours_the_rarely_migrating_ones() {
        let now = 10_000_000_000;
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, true), cpu(3, true)];
        let mut tasks = Vec::new();
        for k in 0..8 {
            let mut om = task(10 + k, Role::Normal, (k % 2) as usize, "0-3");
            om.stats = attempting(200_000, now, 50_000);
            tasks.push(om);
            let mut im = task(20 + k, Role::Normal, (k % 2) as usize, "0-3");
            im.stats = attempting(200_000_000, now, 1_000_000);
            tasks.push(im);
        }
        let mut sut = snapshot(now, cpus, tasks);
        let pass = settle(&mut sut, 50);
        assert!(
            pass.moves.iter().all(|m| m.tid >= 20),
            "only IM tasks go to RT CPUs"
        );
        for c in 0..4 {
            assert_eq!(sut.load_of(c), 4.0, "balanced: CPU {c}");
        }
        for t in &sut.tasks {
            let on_rt = t.cpu.is_some_and(|c| c >= 2);
            assert_eq!(on_rt, t.tid >= 20, "task {}", t.tid);
        }
    }

    #[test]
    fn an_often_migrating_task_alone_is_withheld_even_from_an_idle_rt_cpu() {
        let now = 1_000_000_000;
        let mut om = task(10, Role::Normal, 0, "0-1");
        om.stats = attempting(200_000, now, 50_000);
        let mut other = task(11, Role::Normal, 0, "0");
        other.stats = MigrationStats::default();
        let mut sut = snapshot(now, vec![cpu(0, false), cpu(1, true)], vec![om, other]);
        let pass = push_one(&mut sut, HORIZON);
        assert!(pass.moves.is_empty());
        assert_eq!(pass.withheld, 1);
    }

    #[test]
    fn a_task_inside_a_section_is_not_moved_onto_an_rt_cpu() {
        let mut t = task(10, Role::Rt1, 0, "0-1");
        t.in_section = true;
        let mut sut = snapshot(0, vec![cpu(0, false), cpu(1, true)], vec![t.clone()]);
        let pass = push_rt(&mut sut, HORIZON);
        assert!(pass.moves.is_empty());
        assert_eq!(pass.in_section, 1);
        let placed = place_all(&mut sut, HORIZON);
        assert_eq!(placed.moves[0].to, 0, "placed on the NRT side instead");
        assert!(placed.moves[0].reason.contains("inside a section"));
        assert_eq!(placed.in_section, 1);
    }

    #[test]
    fn non_realtime_rt1_tasks_spread_when_their_rt_cpu_cannot_hold_them() {
        // FIFO refused: 6 RT1 tasks run SCHED_OTHER and count in L. One RT CPU cannot
        // hold them all while 3 NRT CPUs idle.
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, false), cpu(3, true)];
        let tasks = (0..6).map(|k| task(10 + k, Role::Rt1, 3, "0-3")).collect();
        let mut sut = snapshot(0, cpus.clone(), tasks);
        let pass = settle(&mut sut, 20);
        assert!(
            pass.moves.iter().all(|m| m.from == Some(3)),
            "off the RT CPU only"
        );
        assert_eq!(
            count_on(&sut, 3, Role::Rt1),
            2,
            "the RT CPU keeps its share"
        );
        for c in 0..3 {
            assert!(sut.load_of(c) <= 2.0, "CPU {c}: {}", sut.load_of(c));
        }
        // The placement at start reaches the same layout, in one move per task.
        let tasks = (0..6).map(|k| task(10 + k, Role::Rt1, 3, "0-3")).collect();
        let mut sut = snapshot(0, cpus, tasks);
        assert_eq!(place_all(&mut sut, HORIZON).moves.len(), 6);
        assert_eq!(count_on(&sut, 3, Role::Rt1), 2);
        assert!(settle(&mut sut, 5).moves.is_empty());
    }

    #[test]
    fn sleeping_rt1_tasks_are_not_all_pushed_onto_one_rt_cpu_in_one_pass() {
        // Seen live: tasks asleep at a start gate count in no L, and one pass sent
        // every one of them to the same RT CPU.
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, false), cpu(3, true)];
        let tasks = (0..3)
            .map(|k| {
                let mut t = task(10 + k, Role::Rt1, k as usize, "0-3");
                t.runnable = false;
                t
            })
            .collect();
        let mut sut = snapshot(0, cpus, tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 1, "{:?}", pass.moves);
        assert_eq!(sut.cpus[3].runnable, 1, "the task placed counts there");
        assert!(push_rt(&mut sut, HORIZON).moves.is_empty());
    }

    #[test]
    fn realtime_rt1_tasks_go_to_rt_cpus_whatever_their_load() {
        let cpus = vec![cpu(0, false), cpu(1, true)];
        let tasks = (0..4)
            .map(|k| {
                let mut t = task(10 + k, Role::Rt1, 0, "0-1");
                t.realtime = true;
                t.rt_share = 0.25;
                t
            })
            .collect();
        let mut sut = snapshot(0, cpus, tasks);
        let pass = settle(&mut sut, 10);
        assert_eq!(pass.moves.len(), 4);
        assert_eq!(count_on(&sut, 1, Role::Rt1), 4);
    }

    #[test]
    fn a_non_realtime_rt1_task_swaps_with_a_normal_task_on_an_rt_cpu() {
        let cpus = vec![cpu(0, false), cpu(1, true)];
        let tasks = vec![
            task(10, Role::Rt1, 0, "0-1"),
            task(20, Role::Normal, 1, "0-1"),
        ];
        let mut sut = snapshot(0, cpus, tasks);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(pass.moves.len(), 2, "{:?}", pass.moves);
        assert_eq!((pass.moves[0].tid, pass.moves[0].to), (10, 1));
        assert_eq!((pass.moves[1].tid, pass.moves[1].to), (20, 0));
        assert!(pass.moves[0].reason.contains("swapped with normal task 20"));
        assert_eq!((sut.load_of(0), sut.load_of(1)), (1.0, 1.0));
        assert!(settle(&mut sut, 5).moves.is_empty());
    }

    #[test]
    fn a_non_realtime_rt1_task_stays_off_a_busier_rt_cpu_without_a_partner() {
        let cpus = vec![cpu(0, false), cpu(1, true)];
        let mut tasks = vec![task(10, Role::Rt1, 0, "0-1")];
        tasks.extend((0..2).map(|k| task(20 + k, Role::Rt1, 1, "0-1")));
        let mut sut = snapshot(0, cpus, tasks);
        assert!(push_rt(&mut sut, HORIZON).moves.is_empty());
        assert!(settle(&mut sut, 5).moves.is_empty(), "2 vs 1 is balanced");
    }

    #[test]
    fn rt0_tasks_never_move_and_count_as_rt_load() {
        let mut rt0 = task(1, Role::Rt0, 1, "0-1");
        rt0.realtime = true;
        rt0.rt_share = 0.9;
        let mut busy = task(2, Role::Rt0, 0, "0-1");
        busy.realtime = false;
        let normals = (0..3).map(|k| task(10 + k, Role::Normal, 0, "0-1"));
        let tasks = [rt0, busy].into_iter().chain(normals).collect();
        let mut sut = snapshot(0, vec![cpu(0, false), cpu(1, true)], tasks);
        let placed = place_all(&mut sut, HORIZON);
        let pushed = settle(&mut sut, 10);
        assert!(
            placed
                .moves
                .iter()
                .chain(&pushed.moves)
                .all(|m| m.tid >= 10)
        );
        assert_eq!(sut.tasks[0].cpu, Some(1));
        assert_eq!(sut.tasks[1].cpu, Some(0));
    }

    #[test]
    fn a_task_is_never_placed_outside_its_allowed_cpus() {
        let cpus = vec![cpu(0, false), cpu(1, false), cpu(2, true)];
        let tasks = vec![
            task(10, Role::Rt1, 0, "0-1"),
            task(11, Role::Normal, 2, "2"),
            task(12, Role::Normal, 0, "0"),
            task(13, Role::Normal, 0, "0"),
        ];
        let mut sut = snapshot(0, cpus, tasks);
        let placed = place_all(&mut sut, HORIZON);
        let pass = settle(&mut sut, 10);
        for m in placed.moves.iter().chain(&pass.moves) {
            assert!(sut.tasks[m.task].allowed.contains(m.to), "{m:?}");
        }
        assert_eq!(
            sut.tasks[0].cpu,
            Some(1),
            "RT1 allowed on no RT CPU: least loaded NRT"
        );
        assert!(placed.moves[0].reason.contains("no RT CPU allowed"));
        assert_eq!(
            sut.tasks[1].cpu,
            Some(2),
            "normal allowed only on an RT CPU"
        );
    }

    #[test]
    fn reasons_say_why_in_words() {
        let now = 1_000_000_000;
        let mut t = task(10, Role::Rt1, 0, "0-3");
        t.stats = attempting(50_000_000, now, 9_000_000);
        t.realtime = true;
        let cpus = vec![cpu(0, false), cpu(3, true)];
        let mut sut = snapshot(now, cpus.clone(), vec![t.clone()]);
        let pass = push_rt(&mut sut, HORIZON);
        assert_eq!(
            pass.moves[0].reason,
            "rt1 back to RT CPU 3: next attempt predicted in 41 ms"
        );
        t.realtime = false;
        let mut sut = snapshot(now, cpus, vec![t]);
        assert_eq!(
            push_rt(&mut sut, HORIZON).moves[0].reason,
            "rt1 back to RT CPU 3: next attempt predicted in 41 ms; \
             load there with it 1.0, 1.0 at best on an NRT CPU"
        );
        let mut sut = snapshot(
            0,
            vec![cpu(0, false), cpu(2, true)],
            (0..3)
                .map(|k| task(10 + k, Role::Normal, 2, "0-2"))
                .collect(),
        );
        assert_eq!(
            push_one(&mut sut, HORIZON).moves[0].reason,
            "normal off RT CPU 2 to NRT CPU 0: load 3.0 vs 0.0"
        );
        assert_eq!(words(150_000), "150 us");
        assert_eq!(words(4_200_000), "4.2 ms");
        assert_eq!(words(2_500_000_000), "2.5 s");
    }

    #[test]
    fn run_time_seen_late_is_carried_to_the_next_samples() {
        // Ticks every 4 samples: the run time shows up 4 samples' worth at a time.
        let mut carry = 0.0;
        let seen: Vec<f64> = [0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 4.0]
            .into_iter()
            .map(|raw| capped_with_carry(raw, &mut carry))
            .collect();
        assert_eq!(seen, [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(carry, 3.0);
        capped_with_carry(100.0, &mut carry);
        assert_eq!(carry, MAX_CARRY);
    }

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        // Fields 4 to 52 hold their own number, but for utime (14), stime (15),
        // processor (39) and policy (41).
        let fields: Vec<String> = (4..=52)
            .map(|n| match n {
                14 => "120".to_string(),
                15 => "30".to_string(),
                39 => "5".to_string(),
                41 => "1".to_string(),
                n => n.to_string(),
            })
            .collect();
        let line = format!("1234 (a) b (c) R {}", fields.join(" "));
        let sut = parse_stat(line.as_bytes()).unwrap();
        assert_eq!(sut.state, b'R');
        assert_eq!(sut.processor, 5);
        assert_eq!(sut.policy, 1);
        assert_eq!(sut.ticks, 150);
        assert!(sut.realtime());
        assert_eq!(parse_stat(b"12 (x) S 1"), None);
        let mut odd = b"7 (\xff\xfe) ".to_vec();
        odd.extend_from_slice(line.split_once(") ").unwrap().1.as_bytes());
        assert_eq!(parse_stat(&odd), Some(sut));
    }

    #[test]
    fn a_thread_that_exits_reads_as_gone_through_the_files_opened_before() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(sched::thread_id() as i32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let (_ring, rx) = spsc::channel::<Attempt>(1);
        let sut = Tracked::new(
            tid,
            Role::Normal,
            CpuSet::from_cpus([0]),
            rx,
            open_proc(tid, "stat").unwrap(),
            open_proc(tid, "schedstat").ok(),
        );
        let mut buf = vec![0; 4096];
        assert!(sut.read(&mut buf).unwrap().is_some(), "alive");
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        assert!(sut.read(&mut buf).unwrap().is_none(), "gone");
    }

    #[test]
    fn the_own_thread_reads_from_proc() {
        let tid = sched::thread_id() as i32;
        let (tx, rx) = spsc::channel::<Attempt>(1);
        drop(tx);
        let sut = Tracked::new(
            tid,
            Role::Normal,
            CpuSet::from_cpus([0]),
            rx,
            open_proc(tid, "stat").unwrap(),
            open_proc(tid, "schedstat").ok(),
        );
        // The kernel adds up a running thread's run time at ticks and switches: run a
        // while, then switch.
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(1));
        let mut buf = vec![0; 4096];
        let (proc, runtime) = sut.read(&mut buf).unwrap().unwrap();
        assert_eq!(proc.state, b'R', "the reading thread runs");
        assert!(runtime > 0);
        assert!(ictus_os::facts::online_cpus().contains(proc.processor));
    }

    #[test]
    fn config_and_report_read_without_the_added_fields() {
        let config = serde_json::json!({
            "sample_period": {"secs": 0, "nanos": 1_000_000},
            "rt_window": 500,
            "rt_push_period": {"secs": 0, "nanos": 5_000_000},
            "push_period": {"secs": 0, "nanos": 20_000_000},
            "horizon": {"secs": 0, "nanos": 20_000_000},
        });
        let sut: Config = serde_json::from_value(config).unwrap();
        assert_eq!(sut, Config::default());
        let report = serde_json::to_value(Report::default()).unwrap();
        let back: Report = serde_json::from_value(report).unwrap();
        assert_eq!(back, Report::default());
    }

    #[test]
    fn a_balancer_with_no_task_starts_and_stops() {
        let online = ictus_os::facts::online_cpus();
        let Some(&last) = online.cpus().last() else {
            return;
        };
        if online.len() < 2 {
            return;
        }
        let partition = Partition::new(CpuSet::from_cpus([last]), &online).unwrap();
        let sut = Balancer::new(partition, Config::default()).start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let report = sut.stop();
        assert!(report.samples > 0);
        assert!(report.decisions.is_empty());
        assert_eq!(report.rt_share.len(), online.len());
        assert!(report.supervisor_fifo || !report.notes.is_empty());
    }

    // ---- properties ----

    fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
        (2usize..7, 0usize..12)
            .prop_flat_map(|(ncpu, ntask)| {
                let rt_mask = prop::collection::vec(any::<bool>(), ncpu);
                let rt_share = prop::collection::vec(0.0f64..1.0, ncpu);
                let tasks = prop::collection::vec(
                    (
                        prop_oneof![Just(Role::Rt0), Just(Role::Rt1), Just(Role::Normal)],
                        0..ncpu,
                        prop::collection::vec(any::<bool>(), ncpu),
                        any::<bool>(),
                        any::<bool>(),
                        0.0f64..1.0,
                        any::<bool>(),
                        prop::option::of((1u64..1_000_000_000, 0u64..2_000_000_000)),
                    ),
                    ntask,
                );
                (Just(ncpu), rt_mask, rt_share, tasks)
            })
            .prop_map(|(ncpu, rt_mask, shares, tasks)| {
                let now = 10_000_000_000u64;
                let mut rt_mask = rt_mask;
                // Both sides non-empty, as a partition.
                rt_mask[0] = false;
                rt_mask[ncpu - 1] = true;
                let cpus: Vec<CpuState> = (0..ncpu)
                    .map(|c| CpuState {
                        cpu: c,
                        rt: rt_mask[c],
                        runnable: 0,
                        rt_share: shares[c] * 0.5,
                    })
                    .collect();
                let tasks = tasks
                    .into_iter()
                    .enumerate()
                    .map(
                        |(k, (role, on, mask, realtime, runnable, share, in_section, stats))| {
                            let mut allowed: Vec<usize> = (0..ncpu).filter(|&c| mask[c]).collect();
                            if allowed.is_empty() {
                                allowed.push(on);
                            }
                            TaskState {
                                tid: 100 + k as i32,
                                role,
                                cpu: Some(on),
                                allowed: CpuSet::from_cpus(allowed),
                                realtime,
                                runnable,
                                rt_share: share * 0.3,
                                stats: stats.map_or_else(
                                    MigrationStats::default,
                                    |(period, ago)| {
                                        attempting(period, now, ago.min(now - 5 * period))
                                    },
                                ),
                                in_section,
                            }
                        },
                    )
                    .collect();
                let mut s = snapshot(now, cpus.clone(), tasks);
                for (c, orig) in s.cpus.iter_mut().zip(&cpus) {
                    c.rt_share = (c.rt_share + orig.rt_share).min(1.0);
                }
                s
            })
    }

    fn check_moves(before: &Snapshot, moves: &[Move]) -> Result<(), TestCaseError> {
        for m in moves {
            let t = &before.tasks[m.task];
            prop_assert_eq!(t.tid, m.tid);
            prop_assert!(t.role != Role::Rt0, "an RT0 task moved: {:?}", m);
            prop_assert!(t.allowed.contains(m.to), "outside allowed: {:?}", m);
            if before.is_rt(m.to) {
                prop_assert!(!t.in_section, "onto an RT CPU inside a section: {:?}", m);
                prop_assert!(
                    t.stats.may_return(before.now_ns, HORIZON),
                    "onto an RT CPU against the anti ping-pong rule: {:?}",
                    m
                );
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn passes_never_move_rt0_never_leave_allowed_never_enter_rt_in_a_section(
            start in arb_snapshot(),
            order in prop::collection::vec(0u8..3, 1..12),
        ) {
            let mut sut = start.clone();
            let placed = place_all(&mut sut, HORIZON);
            check_moves(&start, &placed.moves)?;
            for step in order {
                let before = sut.clone();
                let pass = match step {
                    0 => push_rt(&mut sut, HORIZON),
                    1 => push_one(&mut sut, HORIZON),
                    _ => place_all(&mut sut, HORIZON),
                };
                check_moves(&before, &pass.moves)?;
                prop_assert!(step != 1 || pass.moves.len() <= 1);
            }
            for (a, b) in start.tasks.iter().zip(&sut.tasks) {
                if a.role == Role::Rt0 {
                    prop_assert_eq!(a.cpu, b.cpu);
                }
            }
            for c in &sut.cpus {
                prop_assert!((0.0..=1.0).contains(&c.rt_share));
            }
        }

        #[test]
        fn a_push_never_raises_the_higher_of_the_two_loads(start in arb_snapshot()) {
            let mut sut = start.clone();
            let pass = push_one(&mut sut, HORIZON);
            if let Some(m) = pass.moves.first() {
                let from = m.from.unwrap();
                let before = start.load_of(from).max(start.load_of(m.to));
                let after = sut.load_of(from).max(sut.load_of(m.to));
                prop_assert!(after < before, "{} -> {}: {:?}", before, after, m);
            }
        }
    }
}
