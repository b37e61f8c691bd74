//! The watchdog: demotes a real-time thread that has kept its CPU for longer than a
//! limit, so a runaway FIFO loop never freezes the machine (seed 003 warns of exactly
//! this: a cold reboot). With the RT throttle off (`--rt-throttle off`) nothing else
//! stops such a loop.
//!
//! Three parts, each testable on its own:
//!
//! - [`Judge`]: the decision, a pure function of [`Sample`]s and the time they were
//!   taken (tested with fake samples, no `/proc`).
//! - [`read_samples`]: the samples, read from `/proc/*/task/*/{stat,schedstat,status}`.
//! - [`Watchdog`]: a thread that scans every `interval`, runs SCHED_FIFO 99 pinned to
//!   the NRT CPUs where it may (so it runs even while the RT CPUs are hogged), and
//!   demotes each overrun to SCHED_OTHER (nice 0), recording a [`Demotion`].
//!
//! The rule: a thread with policy FIFO or RR (DEADLINE is bounded by the kernel;
//! kernel threads and the watchdog's own threads are never touched) that has made no
//! voluntary context switch and has run at least [`HOG_SHARE_PERCENT`] % of the wall
//! time for `limit` or longer is an overrun. Its streak starts again at every
//! voluntary switch, and whenever it got less than [`BUSY_SHARE_PERCENT`] % of a scan
//! interval (it was waiting for its CPU, not holding it): so a loop preempted by a
//! higher priority is judged from when it gets the CPU, while the default throttle's
//! 50 ms pause per second does not hide a hog.
//!
//! ```no_run
//! use std::time::Duration;
//! use ictus_shield::watchdog::{Config, Watchdog};
//!
//! let sut = Watchdog::start(Config::new(Duration::from_secs(1))).unwrap();
//! // ... a FIFO loop that neither sleeps nor blocks for 1 s becomes SCHED_OTHER.
//! for d in sut.stop() {
//!     println!("demoted {} ({}) after {:?}", d.tid, d.comm, d.held_for);
//! }
//! ```

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ictus_core::CpuSet;
use ictus_os::sched::{self, Policy, SchedError};
use serde::{Deserialize, Serialize};

use crate::journal::{self, Entry};
use crate::snapshot::{self, PF_KTHREAD, RT_RUNTIME};

/// The kernel's policy number of `SCHED_OTHER` (`/proc/<tid>/stat` field 41).
pub const SCHED_OTHER: u32 = 0;
/// The kernel's policy number of `SCHED_FIFO`.
pub const SCHED_FIFO: u32 = 1;
/// The kernel's policy number of `SCHED_RR`.
pub const SCHED_RR: u32 = 2;
/// The kernel's policy number of `SCHED_DEADLINE`.
pub const SCHED_DEADLINE: u32 = 6;

/// A thread is an overrun once it ran at least this share of the wall time, with no
/// voluntary switch, for the limit.
pub const HOG_SHARE_PERCENT: u64 = 90;
/// A scan interval in which a thread ran less than this share starts its streak again.
pub const BUSY_SHARE_PERCENT: u64 = 50;

/// What the shield writes to the watchdog process's stdin once the process is
/// journaled; anything else (end of file: the applying process died first) tells it
/// to exit at once, having changed nothing.
pub const GO: &str = "go";
/// What the watchdog process writes to its stdout once it watches.
pub const READY: &str = "ready";

/// How the watchdog watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// How long a real-time thread may hold its CPU without a voluntary switch.
    pub limit: Duration,
    /// Time between scans (`limit / 4` by [`Config::new`]).
    pub interval: Duration,
    /// The CPUs watched (the RT CPUs); `None`: all.
    pub cpus: Option<CpuSet>,
    /// Where the watchdog thread runs (the NRT CPUs); `None`: where it may.
    pub run_on: Option<CpuSet>,
    /// Its SCHED_FIFO priority; `None`: SCHED_OTHER.
    pub priority: Option<u8>,
    /// Processes never demoted (besides the watchdog thread itself), such as the
    /// watchdog's own process.
    pub exempt_pids: Vec<i32>,
    /// When set, only threads of these processes are watched (tests use it so they
    /// never touch the rest of the machine).
    pub only_pids: Option<Vec<i32>>,
    /// A log to append every demotion to, as a JSON line ([`LogEvent::Demotion`]).
    pub log: Option<PathBuf>,
}

impl Config {
    /// Watches every CPU with `limit`, scanning every `limit / 4`, at SCHED_FIFO 99.
    pub fn new(limit: Duration) -> Config {
        Config {
            limit,
            interval: (limit / 4).max(Duration::from_millis(1)),
            cpus: None,
            run_on: None,
            priority: Some(99),
            exempt_pids: Vec::new(),
            only_pids: None,
            log: None,
        }
    }
}

impl Default for Config {
    /// A limit of one second.
    fn default() -> Config {
        Config::new(Duration::from_secs(1))
    }
}

/// One reading of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Thread id.
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// Start time in clock ticks since boot (`stat` field 22).
    pub start_time: u64,
    /// Command name.
    pub comm: String,
    /// A kernel thread (`PF_KTHREAD`, or no `exe`).
    pub kernel_thread: bool,
    /// Policy number (`stat` field 41): [`SCHED_FIFO`], [`SCHED_RR`], ...
    pub policy: u32,
    /// Real-time priority (`stat` field 40).
    pub rt_priority: u8,
    /// The CPU it last ran on (`stat` field 39).
    pub cpu: usize,
    /// Time it spent on a CPU, in nanoseconds (`schedstat`'s first field).
    pub runtime_ns: u64,
    /// Voluntary context switches so far (`status`).
    pub voluntary_switches: u64,
}

/// A thread that held its CPU for the limit: the judge's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun {
    /// Thread id.
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// Its start time, to tell a reused id apart before demoting.
    pub start_time: u64,
    /// Command name.
    pub comm: String,
    /// Its policy now.
    pub policy: Policy,
    /// The CPU it runs on.
    pub cpu: usize,
    /// How long it has held its CPU.
    pub held_for: Duration,
}

/// Which threads the judge may find guilty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// The limit.
    pub limit: Duration,
    /// Watched CPUs; `None`: all.
    pub cpus: Option<CpuSet>,
    /// Threads never judged (the watchdog's own).
    pub exempt_tids: BTreeSet<i32>,
    /// Processes never judged.
    pub exempt_pids: BTreeSet<i32>,
    /// When set, only these processes are judged.
    pub only_pids: Option<BTreeSet<i32>>,
}

#[derive(Debug, Clone, Copy)]
struct Streak {
    since: Duration,
    runtime_at_since: u64,
    last: Duration,
    runtime_at_last: u64,
    voluntary: u64,
}

/// The decision: fed the samples of each scan with the time they were taken, it names
/// the overruns. Pure: no clock, no `/proc`, no system call.
#[derive(Debug, Clone, Default)]
pub struct Judge {
    rules: Rules,
    streaks: HashMap<(i32, u64), Streak>,
    ignored: HashSet<(i32, u64)>,
}

impl Judge {
    /// A judge with no history.
    pub fn new(rules: Rules) -> Judge {
        Judge {
            rules,
            ..Judge::default()
        }
    }

    /// The rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Never names this thread again (a demotion the kernel refused is not retried
    /// every scan).
    pub fn ignore(&mut self, tid: i32, start_time: u64) {
        self.ignored.insert((tid, start_time));
        self.streaks.remove(&(tid, start_time));
    }

    /// Whether the rules let this thread be judged at all.
    pub fn watched(&self, s: &Sample) -> bool {
        let r = &self.rules;
        matches!(s.policy, SCHED_FIFO | SCHED_RR)
            && !s.kernel_thread
            && !r.exempt_tids.contains(&s.tid)
            && !r.exempt_pids.contains(&s.pid)
            && r.only_pids.as_ref().is_none_or(|p| p.contains(&s.pid))
            && r.cpus.as_ref().is_none_or(|c| c.contains(s.cpu))
            && !self.ignored.contains(&(s.tid, s.start_time))
    }

    /// Takes one scan's samples, read at `now` (any monotonic origin), and returns the
    /// threads that held their CPU for the limit. A thread named once starts a new
    /// streak; threads absent from the scan are forgotten.
    pub fn judge(&mut self, now: Duration, samples: &[Sample]) -> Vec<Overrun> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let present: HashSet<(i32, u64)> = samples.iter().map(|s| (s.tid, s.start_time)).collect();
        self.ignored.retain(|k| present.contains(k));
        for s in samples {
            if !self.watched(s) {
                continue;
            }
            let key = (s.tid, s.start_time);
            seen.insert(key);
            let fresh = Streak {
                since: now,
                runtime_at_since: s.runtime_ns,
                last: now,
                runtime_at_last: s.runtime_ns,
                voluntary: s.voluntary_switches,
            };
            let Some(streak) = self.streaks.get_mut(&key) else {
                self.streaks.insert(key, fresh);
                continue;
            };
            let wall = now.saturating_sub(streak.last).as_nanos();
            let ran = u128::from(s.runtime_ns.saturating_sub(streak.runtime_at_last));
            if s.voluntary_switches != streak.voluntary
                || ran * 100 < wall * u128::from(BUSY_SHARE_PERCENT)
            {
                *streak = fresh;
                continue;
            }
            streak.last = now;
            streak.runtime_at_last = s.runtime_ns;
            let held = now.saturating_sub(streak.since);
            let consumed = u128::from(s.runtime_ns.saturating_sub(streak.runtime_at_since));
            if held >= self.rules.limit
                && consumed * 100 >= held.as_nanos() * u128::from(HOG_SHARE_PERCENT)
            {
                let policy = if s.policy == SCHED_RR {
                    Policy::Rr {
                        priority: s.rt_priority,
                    }
                } else {
                    Policy::Fifo {
                        priority: s.rt_priority,
                    }
                };
                out.push(Overrun {
                    tid: s.tid,
                    pid: s.pid,
                    start_time: s.start_time,
                    comm: s.comm.clone(),
                    policy,
                    cpu: s.cpu,
                    held_for: held,
                });
                self.streaks.remove(&key);
            }
        }
        self.streaks.retain(|k, _| seen.contains(k));
        out
    }
}

/// The fields of `/proc/<pid>/task/<tid>/stat` the watchdog reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFields {
    /// Command name (between the parentheses).
    pub comm: String,
    /// Kernel task flags (field 9).
    pub flags: u64,
    /// Start time (field 22).
    pub start_time: u64,
    /// Last CPU (field 39).
    pub cpu: usize,
    /// Real-time priority (field 40).
    pub rt_priority: u8,
    /// Policy (field 41).
    pub policy: u32,
}

/// Parses a `stat` line; the command name may hold spaces and parentheses.
pub fn parse_stat(stat: &str) -> Option<StatFields> {
    let t = ictus_os::procstat::TaskStat::parse(stat.as_bytes())?;
    let comm = ictus_os::procstat::TaskStat::comm(stat.as_bytes())?;
    Some(StatFields {
        comm: String::from_utf8_lossy(comm).into_owned(),
        flags: t.flags,
        start_time: t.start_time,
        cpu: t.processor,
        rt_priority: u8::try_from(t.rt_priority).ok()?,
        policy: t.policy,
    })
}

/// `voluntary_ctxt_switches` of a `status` file.
pub fn parse_voluntary_switches(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads every thread with a FIFO or RR policy (the others cannot hog a CPU, and are
/// left out to keep the scan cheap); of the processes in `only_pids` when given.
/// Threads that vanish while being read are passed over.
pub fn read_samples(only_pids: Option<&BTreeSet<i32>>) -> Vec<Sample> {
    let pids: Vec<i32> = match only_pids {
        Some(p) => p.iter().copied().collect(),
        None => snapshot::numeric_entries("/proc")
            .into_iter()
            .filter_map(|p| i32::try_from(p).ok())
            .collect(),
    };
    let mut out = Vec::new();
    for pid in pids {
        for tid in snapshot::numeric_entries(&format!("/proc/{pid}/task")) {
            let Ok(tid) = i32::try_from(tid) else {
                continue;
            };
            if let Some(sample) = read_sample(pid, tid) {
                out.push(sample);
            }
        }
    }
    out
}

fn read_sample(pid: i32, tid: i32) -> Option<Sample> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = parse_stat(&std::fs::read_to_string(format!("{dir}/stat")).ok()?)?;
    if !matches!(stat.policy, SCHED_FIFO | SCHED_RR) {
        return None;
    }
    let runtime_ns = std::fs::read_to_string(format!("{dir}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let voluntary_switches =
        parse_voluntary_switches(&std::fs::read_to_string(format!("{dir}/status")).ok()?)?;
    // Kernel threads have no executable (ENOENT); EACCES only means not ours to read.
    let no_exe = std::fs::read_link(format!("{dir}/exe"))
        .is_err_and(|e| e.kind() == io::ErrorKind::NotFound);
    Some(Sample {
        tid,
        pid,
        start_time: stat.start_time,
        comm: stat.comm,
        kernel_thread: stat.flags & PF_KTHREAD != 0 || no_exe,
        policy: stat.policy,
        rt_priority: stat.rt_priority,
        cpu: stat.cpu,
        runtime_ns,
        voluntary_switches,
    })
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// One demotion (or a refused attempt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Demotion {
    /// Thread id.
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// Command name.
    pub comm: String,
    /// Its policy before (FIFO or RR with its priority).
    pub policy_before: Policy,
    /// The CPU it held.
    pub cpu: usize,
    /// How long it had held it without a voluntary switch.
    #[serde(rename = "held_for_ms", with = "millis")]
    pub held_for: Duration,
    /// When, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// Why the kernel refused the demotion; `None` when the thread is SCHED_OTHER now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Where and how the watchdog thread runs, as obtained (not just asked for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPlace {
    /// The watchdog thread's id.
    pub tid: i32,
    /// Its policy (`fifo 99`, or `other` where FIFO was refused).
    pub policy: String,
    /// The CPUs it is pinned to, when pinning worked.
    pub pinned_to: Option<CpuSet>,
    /// What was refused, with the reason and the fix.
    pub refused: Vec<String>,
}

/// One line of the watchdog's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LogEvent {
    /// The watchdog process started watching.
    Started {
        /// Its pid.
        pid: u32,
        /// Its limit, in milliseconds.
        limit_ms: u64,
        /// The CPUs watched; `None`: all.
        watched_cpus: Option<CpuSet>,
        /// Where its thread runs.
        placement: ThreadPlace,
        /// When, in milliseconds since the Unix epoch.
        at_unix_ms: u64,
    },
    /// A thread was demoted (or the attempt refused).
    Demotion(Demotion),
    /// The watchdog process stopped.
    Stopped {
        /// Why (`signal`, `journal removed`).
        why: String,
        /// The RT throttle value it wrote back, if it wrote one.
        restored_rt_runtime_us: Option<String>,
        /// When, in milliseconds since the Unix epoch.
        at_unix_ms: u64,
    },
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The watchdog's log for a journal: beside it, `<journal stem>.watchdog.log`
/// (`/run/ictus/shield.watchdog.log` for the default journal).
pub fn log_path(journal: &Path) -> PathBuf {
    journal.with_extension("watchdog.log")
}

/// Appends one event to the log as a JSON line.
pub fn append_log(path: &Path, event: &LogEvent) -> io::Result<()> {
    let mut line = serde_json::to_string(event).map_err(io::Error::other)?;
    line.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// Reads the log's events; lines that are not events (what the process wrote to
/// stderr, a torn last line) are passed over. No log: no events.
pub fn read_log(path: &Path) -> Vec<LogEvent> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A running watchdog thread. Stops when [`Watchdog::stop`]ped or dropped.
#[derive(Debug)]
pub struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    demotions: Arc<Mutex<Vec<Demotion>>>,
    placement: ThreadPlace,
}

impl Watchdog {
    /// Starts the watchdog thread; returns once it is placed and has scanned once.
    pub fn start(config: Config) -> io::Result<Watchdog> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let demotions = Arc::new(Mutex::new(Vec::new()));
        let shared = demotions.clone();
        let thread = std::thread::Builder::new()
            .name("ictus-watchdog".into())
            .spawn(move || watch(&config, &ready_tx, &stop_rx, &shared))?;
        let Ok(placement) = ready_rx.recv() else {
            let _ = thread.join();
            return Err(io::Error::other(
                "the watchdog thread ended before its first scan",
            ));
        };
        Ok(Watchdog {
            stop: Some(stop_tx),
            thread: Some(thread),
            demotions,
            placement,
        })
    }

    /// Where and how its thread runs.
    pub fn placement(&self) -> &ThreadPlace {
        &self.placement
    }

    /// The demotions so far.
    pub fn demotions(&self) -> Vec<Demotion> {
        self.demotions
            .lock()
            .map(|d| d.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Stops the thread and returns every demotion.
    pub fn stop(mut self) -> Vec<Demotion> {
        self.halt();
        self.demotions()
    }

    fn halt(&mut self) {
        // Dropping the sender wakes the thread from its wait at once.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Pins first, then raises the priority: the thread never runs at FIFO 99 on an RT CPU.
fn place(config: &Config) -> ThreadPlace {
    let mut refused = Vec::new();
    let pinned_to = config
        .run_on
        .as_ref()
        .and_then(|cpus| match sched::set_affinity(cpus) {
            Ok(()) => Some(cpus.clone()),
            Err(e) => {
                refused.push(e.to_string());
                None
            }
        });
    let policy = match config.priority {
        Some(priority) => match sched::set_policy(Policy::Fifo { priority }) {
            Ok(()) => Policy::Fifo { priority }.to_string(),
            Err(e) => {
                refused.push(format!(
                    "{e} The watchdog runs as SCHED_OTHER and may be starved while a real-time loop hogs its CPU."
                ));
                sched::current_policy().map_or_else(|_| "other".into(), |p| p.to_string())
            }
        },
        None => "other".into(),
    };
    ThreadPlace {
        tid: sched::thread_id() as i32,
        policy,
        pinned_to,
        refused,
    }
}

fn watch(
    config: &Config,
    ready: &mpsc::Sender<ThreadPlace>,
    stop: &mpsc::Receiver<()>,
    demotions: &Mutex<Vec<Demotion>>,
) {
    let placement = place(config);
    let only_pids: Option<BTreeSet<i32>> = config
        .only_pids
        .as_ref()
        .map(|p| p.iter().copied().collect());
    let mut judge = Judge::new(Rules {
        limit: config.limit,
        cpus: config.cpus.clone(),
        exempt_tids: BTreeSet::from([placement.tid]),
        exempt_pids: config.exempt_pids.iter().copied().collect(),
        only_pids: only_pids.clone(),
    });
    let origin = Instant::now();
    let mut ready = Some((ready, placement));
    loop {
        let now = origin.elapsed();
        let samples = read_samples(only_pids.as_ref());
        for overrun in judge.judge(now, &samples) {
            let Some(demotion) = demote(&overrun) else {
                continue;
            };
            if demotion.refused.is_some() {
                judge.ignore(overrun.tid, overrun.start_time);
            }
            if let Some(log) = &config.log {
                // Best effort: the demotion itself matters more than its record.
                let _ = append_log(log, &LogEvent::Demotion(demotion.clone()));
            }
            match demotions.lock() {
                Ok(mut d) => d.push(demotion),
                Err(p) => p.into_inner().push(demotion),
            }
        }
        if let Some((tx, placement)) = ready.take() {
            let _ = tx.send(placement);
        }
        match stop.recv_timeout(config.interval) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Demotes one overrun to SCHED_OTHER; `None` when it exited or its id was reused.
fn demote(o: &Overrun) -> Option<Demotion> {
    let stat = std::fs::read_to_string(format!("/proc/{}/task/{}/stat", o.pid, o.tid)).ok()?;
    if parse_stat(&stat)?.start_time != o.start_time {
        return None;
    }
    let refused = match sched::set_policy_of(o.tid, Policy::Other { nice: 0 }) {
        Ok(()) => None,
        Err(SchedError::Refused { source, .. }) if source.raw_os_error() == Some(3) => {
            return None; // ESRCH: it exited meanwhile
        }
        Err(e) => Some(e.to_string()),
    };
    Some(Demotion {
        tid: o.tid,
        pid: o.pid,
        comm: o.comm.clone(),
        policy_before: o.policy,
        cpu: o.cpu,
        held_for: o.held_for,
        at_unix_ms: unix_ms(),
        refused,
    })
}

/// The journaled prior value of the RT throttle, once the shield has journaled it.
pub fn journaled_rt_runtime(journal: &Path) -> Option<String> {
    journal::read(journal)
        .ok()??
        .into_iter()
        .find_map(|e| match e {
            Entry::Write { path, prior_value } if path == Path::new(RT_RUNTIME) => {
                Some(prior_value)
            }
            _ => None,
        })
}

/// Keeps the RT throttle safe while the watchdog process runs: it remembers the
/// throttle's journaled prior value as soon as the shield journals it, and writes it
/// back when the watchdog stops ([`ThrottleGuard::restore`], also on drop, so on a
/// panic too): without the watchdog, throttling must not stay off. A `kill -9` of the
/// watchdog process skips this; `ictus shield reset` restores the value anyway, and
/// `status` warns while the throttle is off without a watchdog.
#[derive(Debug)]
pub struct ThrottleGuard {
    journal: PathBuf,
    prior: Option<String>,
    done: bool,
}

impl ThrottleGuard {
    /// A guard for the shield journaled at `journal`.
    pub fn new(journal: &Path) -> ThrottleGuard {
        let mut guard = ThrottleGuard {
            journal: journal.to_path_buf(),
            prior: None,
            done: false,
        };
        guard.refresh();
        guard
    }

    /// Looks for the journaled prior value, until found.
    pub fn refresh(&mut self) {
        if self.prior.is_none() {
            self.prior = journaled_rt_runtime(&self.journal);
        }
    }

    /// The prior value known so far.
    pub fn prior(&self) -> Option<&str> {
        self.prior.as_deref()
    }

    /// Writes the prior value back where the throttle differs from it; returns the
    /// value written, if one was.
    pub fn restore(&mut self) -> io::Result<Option<String>> {
        self.refresh();
        self.done = true;
        let Some(prior) = &self.prior else {
            return Ok(None);
        };
        let now = std::fs::read_to_string(RT_RUNTIME)?;
        if now.trim() == prior {
            return Ok(None);
        }
        OpenOptions::new()
            .write(true)
            .open(RT_RUNTIME)?
            .write_all(prior.as_bytes())?;
        Ok(Some(prior.clone()))
    }
}

impl Drop for ThrottleGuard {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.restore();
        }
    }
}

/// A watchdog process started and waiting for [`GO`]: not yet watching. Dropping it
/// closes its stdin, and the process exits having done nothing.
#[derive(Debug)]
pub struct Standby {
    /// Its pid.
    pub pid: i32,
    /// Its start time.
    pub start_time: u64,
    /// Its log.
    pub log: PathBuf,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

/// Starts `program args` as a watchdog process, detached: its own process group (a
/// Ctrl-C at the terminal does not reach it), working directory `/`, stdin and stdout
/// the handshake pipes, stderr appended to `log` (emptied first). A thread reaps it
/// when it exits, so it never lingers as a zombie of a long-lived caller.
pub fn spawn_pending(program: &Path, args: &[String], log: &Path) -> io::Result<Standby> {
    let stderr = OpenOptions::new().create(true).append(true).open(log)?;
    stderr.set_len(0)?;
    let mut child: Child = Command::new(program)
        .args(args)
        .current_dir("/")
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other("no handshake pipes"));
    };
    let pid = child.id() as i32;
    let start_time = ictus_os::process::ProcessId::of(child.id()).map(|p| p.start_time);
    let reaper = std::thread::Builder::new()
        .name("ictus-watchdog-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
    let start_time = match (start_time, reaper) {
        (Some(s), Ok(_)) => s,
        (_, Err(e)) => return Err(e), // stdin drops: it exits
        (None, Ok(_)) => return Err(io::Error::other("it exited at once")),
    };
    Ok(Standby {
        pid,
        start_time,
        log: log.to_path_buf(),
        stdin,
        stdout,
    })
}

impl Standby {
    /// Tells it to watch ([`GO`]), then waits up to `timeout` for [`READY`].
    pub fn release(mut self, timeout: Duration) -> io::Result<()> {
        self.stdin.write_all(format!("{GO}\n").as_bytes())?;
        self.stdin.flush()?;
        drop(self.stdin);
        let (tx, rx) = mpsc::channel();
        let stdout = self.stdout;
        std::thread::Builder::new()
            .name("ictus-watchdog-ready".into())
            .spawn(move || {
                let mut line = String::new();
                let read = BufReader::new(stdout).read_line(&mut line);
                let _ = tx.send(read.map(|_| line));
            })?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(line)) if line.trim() == READY => Ok(()),
            Ok(Ok(line)) if line.is_empty() => Err(io::Error::other(format!(
                "it exited before it was ready (see {})",
                self.log.display()
            ))),
            Ok(Ok(line)) => Err(io::Error::other(format!(
                "it answered {:?} instead of {READY:?}",
                line.trim()
            ))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other(format!(
                "not ready within {} ms",
                timeout.as_millis()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_millis(1000);
    const STEP: Duration = Duration::from_millis(250);

    fn fifo(tid: i32) -> Sample {
        Sample {
            tid,
            pid: 100,
            start_time: 7,
            comm: format!("t{tid}"),
            kernel_thread: false,
            policy: SCHED_FIFO,
            rt_priority: 10,
            cpu: 1,
            runtime_ns: 0,
            voluntary_switches: 5,
        }
    }

    fn rules() -> Rules {
        Rules {
            limit: LIMIT,
            ..Rules::default()
        }
    }

    /// Feeds `scans` scans, `STEP` apart; `at(i, sample)` shapes scan i. Returns
    /// (scan index, overrun) pairs.
    fn run(
        sut: &mut Judge,
        base: &Sample,
        scans: u32,
        at: impl Fn(u32, &mut Sample),
    ) -> Vec<(u32, Overrun)> {
        let mut out = Vec::new();
        for i in 0..scans {
            let mut s = base.clone();
            at(i, &mut s);
            for o in sut.judge(STEP * i, &[s]) {
                out.push((i, o));
            }
        }
        out
    }

    fn busy(i: u32, s: &mut Sample) {
        s.runtime_ns = (STEP * i).as_nanos() as u64;
    }

    #[test]
    fn a_thread_over_the_limit_is_demoted_once() {
        let mut sut = Judge::new(rules());
        let out = run(&mut sut, &fifo(1), 6, busy);
        assert_eq!(out.len(), 1, "{out:?}");
        let (scan, o) = &out[0];
        assert_eq!(*scan, 4, "named at the first scan at or past the limit");
        assert_eq!(o.held_for, LIMIT);
        assert_eq!(o.policy, Policy::Fifo { priority: 10 });
        assert_eq!((o.tid, o.pid, o.cpu), (1, 100, 1));
    }

    #[test]
    fn a_thread_that_sleeps_voluntarily_is_not_demoted() {
        let mut sut = Judge::new(rules());
        // Busy 90 % of the time, but it blocks once in every interval.
        let out = run(&mut sut, &fifo(1), 40, |i, s| {
            s.runtime_ns = (STEP * i).as_nanos() as u64 * 9 / 10;
            s.voluntary_switches = u64::from(i);
        });
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn sched_other_deadline_and_kernel_threads_are_never_demoted() {
        let shapes: [fn(&mut Sample); 3] = [
            |s: &mut Sample| s.policy = SCHED_OTHER,
            |s: &mut Sample| s.policy = SCHED_DEADLINE,
            |s: &mut Sample| s.kernel_thread = true,
        ];
        for shape in shapes {
            let mut sut = Judge::new(rules());
            let out = run(&mut sut, &fifo(1), 40, |i, s| {
                busy(i, s);
                shape(s);
            });
            assert!(out.is_empty(), "{out:?}");
        }
    }

    #[test]
    fn the_watchdogs_own_pid_and_thread_are_never_demoted() {
        let mut sut = Judge::new(Rules {
            exempt_pids: BTreeSet::from([100]),
            ..rules()
        });
        assert!(run(&mut sut, &fifo(1), 40, busy).is_empty());
        let mut sut = Judge::new(Rules {
            exempt_tids: BTreeSet::from([1]),
            ..rules()
        });
        assert!(run(&mut sut, &fifo(1), 40, busy).is_empty());
        assert_eq!(run(&mut sut, &fifo(2), 6, busy).len(), 1, "another thread");
    }

    #[test]
    fn unwatched_cpus_and_other_processes_are_left_alone() {
        let mut sut = Judge::new(Rules {
            cpus: Some("0".parse().unwrap()),
            ..rules()
        });
        assert!(run(&mut sut, &fifo(1), 40, busy).is_empty());
        let mut sut = Judge::new(Rules {
            only_pids: Some(BTreeSet::from([200])),
            ..rules()
        });
        assert!(run(&mut sut, &fifo(1), 40, busy).is_empty());
    }

    #[test]
    fn a_thread_waiting_for_its_cpu_is_judged_from_when_it_runs() {
        let mut sut = Judge::new(rules());
        // Preempted (no runtime) for 8 scans, then busy: named 4 scans after it ran.
        let out = run(&mut sut, &fifo(1), 16, |i, s| {
            s.runtime_ns = (STEP * i.saturating_sub(8)).as_nanos() as u64;
        });
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].0, 12);
    }

    #[test]
    fn the_default_throttle_pause_does_not_hide_a_hog() {
        let mut sut = Judge::new(rules());
        // 95 % of each second, the pause falling in one interval of four (80 % there).
        let out = run(&mut sut, &fifo(1), 8, |i, s| {
            let full = (STEP * i).as_nanos() as u64;
            s.runtime_ns = full - u64::from(i.div_ceil(4)) * 50_000_000;
        });
        assert_eq!(out.len(), 1, "{out:?}");
    }

    #[test]
    fn a_thread_running_under_ninety_percent_is_not_demoted() {
        let mut sut = Judge::new(rules());
        let out = run(&mut sut, &fifo(1), 40, |i, s| {
            s.runtime_ns = (STEP * i).as_nanos() as u64 * 8 / 10;
        });
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_reused_thread_id_starts_a_new_streak_and_ignored_threads_stay_ignored() {
        let mut sut = Judge::new(rules());
        let out = run(&mut sut, &fifo(1), 8, |i, s| {
            busy(i, s);
            s.start_time = if i < 3 { 7 } else { 8 };
        });
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 7, "four scans after the new thread appeared");
        let mut sut = Judge::new(rules());
        sut.ignore(1, 7);
        assert!(run(&mut sut, &fifo(1), 40, busy).is_empty());
    }

    #[test]
    fn stat_fields_are_read_past_a_command_name_with_parentheses() {
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[0] = "R".into();
        fields[9 - 3] = PF_KTHREAD.to_string();
        fields[39 - 3] = "1".into();
        fields[40 - 3] = "10".into();
        fields[41 - 3] = "1".into();
        let line = format!("42 (a) b (c) {}", fields.join(" "));
        let sut = parse_stat(&line).unwrap();
        assert_eq!(sut.comm, "a) b (c");
        assert_eq!(sut.flags, PF_KTHREAD);
        assert_eq!(sut.start_time, 22);
        assert_eq!((sut.cpu, sut.rt_priority, sut.policy), (1, 10, SCHED_FIFO));
        assert_eq!(
            parse_voluntary_switches("Name:\tx\nvoluntary_ctxt_switches:\t12\n"),
            Some(12)
        );
    }

    #[test]
    fn demotions_round_trip_through_the_log_and_stray_lines_are_passed_over() {
        let dir = std::env::temp_dir().join(format!("ictus-watchdog-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = log_path(&dir.join("shield.journal"));
        assert_eq!(path, dir.join("shield.watchdog.log"));
        let _ = std::fs::remove_file(&path);
        let sut = LogEvent::Demotion(Demotion {
            tid: 5,
            pid: 4,
            comm: "spin".into(),
            policy_before: Policy::Fifo { priority: 10 },
            cpu: 1,
            held_for: Duration::from_millis(1250),
            at_unix_ms: 1,
            refused: None,
        });
        append_log(&path, &sut).unwrap();
        std::fs::write(
            &path,
            std::fs::read_to_string(&path).unwrap() + "thread panicked\n{\"event\":",
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""held_for_ms":1250"#), "{text}");
        assert_eq!(read_log(&path), vec![sut]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_process_threads_are_read_when_they_are_real_time_only() {
        let own = BTreeSet::from([std::process::id() as i32]);
        // The test threads run SCHED_OTHER: none is a sample.
        assert!(
            read_samples(Some(&own))
                .iter()
                .all(|s| s.policy != SCHED_OTHER)
        );
    }
}
