//! The sampler: a thread off the watched CPUs that reads per-CPU and per-thread
//! counters on a short period, scans every thread now and then (to name the one that
//! ran), and explains each reported miss once a reading after its window exists.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

mod budget;
mod files;
mod ran;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ictus_core::{CpuSet, Nanos};

use super::{
    Breakdown, Explained, Explanation, IdleWindow, IrqTime, MissEvent, MissKind, MissReporter,
    SamplerReport, TaskRan, WatchedThread, WindowDeltas, judge, pair,
};
use files::{
    Reread, accounting_sources, deltas, faults, idle_states, per_cpu_table, rt_budget, sum_of,
    tracer_source,
};
use ictus_os::clock::monotonic_now;
use ictus_os::procstat::TaskStat;
use ran::{Scan, Seen, class_rank, preemptor, ran_on};

/// How the sampler runs.
#[derive(Clone, Debug)]
pub struct ExplainConfig {
    /// Time between readings.
    pub period: Nanos,
    /// The lateness from which a release is a miss to explain.
    pub threshold: Nanos,
    /// Events each watched thread's ring holds before the sampler reads them.
    pub ring: usize,
    /// Explained misses kept in full in the explanation (all are in the breakdown).
    pub keep: usize,
    /// The CPUs the watched threads run on: read per CPU, and avoided by the sampler
    /// when other CPUs are online.
    pub cpus: CpuSet,
    /// Time between scans of every thread.
    pub scan_every: Nanos,
    /// How long readings are kept (a miss's window must fit).
    pub history: Nanos,
    /// `/proc/softirqs` and the steal in `/proc/stat` (about 3 and 2 us on a 2-CPU
    /// VM with warm caches) are read every this many readings, and at once when a
    /// miss waits for them.
    pub tables_every: u32,
    /// `/proc/interrupts` (25 us warm, above 100 us when the sampler's CPU woke from
    /// idle) is read every this many readings, and at once when a miss waits for it.
    pub interrupts_every: u32,
    /// The watched threads whose counters (2 files each, about 1.3 us) one reading
    /// takes, in turn, so that a reading costs the same for 1 thread or 64; a thread
    /// with a miss waiting is read at the next reading besides.
    pub threads_per_reading: usize,
    /// Run the sampler in `SCHED_IDLE`, below every normal thread, instead of at
    /// nice 0: for a run whose own normal threads share the sampler's CPUs and must
    /// not wait for it (a run across hosts: the forwarder and Zenoh's threads). Its
    /// readings then wait for an idle moment, so under a load on those CPUs they come
    /// late and its windows widen; off by default, where loads are what it explains.
    pub yield_cpu: bool,
    /// What this sampler may cost: its own run time over each second, as a share of
    /// one CPU (0: no bound). Above it, it reads and scans less often (up to 16 times
    /// its period and scan spacing), and the record says by how much and for how
    /// long. A run with programs gives each process's sampler its part of the host's
    /// [`HOST_BUDGET`](crate::HOST_BUDGET).
    pub budget: f64,
}

/// What the samplers of one host may cost together, as a share of one CPU: 0.8 %,
/// under issue 30's bound of 1 %, with room for a second's overshoot before the
/// sampler weighs itself.
pub const HOST_BUDGET: f64 = 0.008;

impl ExplainConfig {
    /// Defaults for watched threads on `cpus` whose misses start at `threshold`: a
    /// reading every 10 ms (4 watched threads' counters, softirqs and steal each;
    /// interrupts every 8th) and one at once when a miss is reported; every
    /// thread scanned every second and after a miss (at most every 50 ms); 2 s of
    /// history; 1,000 explained misses kept in full. What it costs is measured by
    /// `bench/explain-cost.sh` (docs/validation.md): under 1 % of a CPU for 1 to 64
    /// watched threads here, where a reading every millisecond with every file each
    /// time cost 9.2 % with 10.
    pub fn new(cpus: CpuSet, threshold: Nanos) -> ExplainConfig {
        ExplainConfig {
            period: Nanos::from_millis(10),
            threshold,
            ring: 4096,
            keep: 1_000,
            cpus,
            scan_every: Nanos::from_secs(1),
            history: Nanos::from_secs(2),
            tables_every: 1,
            interrupts_every: 8,
            threads_per_reading: 4,
            yield_cpu: false,
            budget: HOST_BUDGET,
        }
    }
}

/// A running sampler. [`finish`](Self::finish) stops it and returns the explanation.
#[derive(Debug)]
pub struct Explainer {
    stop: Arc<AtomicBool>,
    recent: Arc<Mutex<VecDeque<Explained>>>,
    handle: Option<JoinHandle<Explanation>>,
}

/// The threads whose run time every reading takes besides the watched ones': 2,
/// real-time ones first (the ones that can preempt a real-time loop). Each costs a
/// `pread` of another process's `schedstat`: a reading of the timer probe's sampler
/// took 46 to 49 us before they were followed, 59 to 64 us with 4 (0.76 to 0.79 % of a
/// CPU against 0.90 to 0.96 %, bench/explain-cost.sh on a quiet machine, 2 rounds:
/// docs/validation.md), close to the 1 % bound.
const CANDIDATES: usize = 2;

/// The least time between a scan and one a waiting miss asks for.
const SCAN_GAP: Nanos = Nanos::from_millis(50);

/// How many explained misses [`Explainer::recent`] holds.
const RECENT: usize = 16;

impl Explainer {
    /// Starts the sampler for the watched threads named `threads` (one reporter
    /// each, in that order; each thread calls [`MissReporter::attach`] once placed).
    /// `t0` is the run's start, from which events are timed.
    pub fn start(
        config: ExplainConfig,
        threads: &[String],
        t0: Nanos,
    ) -> std::io::Result<(Explainer, Vec<MissReporter>)> {
        let mut reporters = Vec::with_capacity(threads.len());
        let mut watched = Vec::with_capacity(threads.len());
        for name in threads {
            let (r, w) = pair(name.clone(), config.ring.max(2), config.threshold);
            reporters.push(r);
            watched.push(w);
        }
        // Read here, before the sampler runs: the kernel's config is a gzip to inflate
        // (milliseconds in a debug build), and the first reading should not wait.
        let host = Host {
            irq_time_accounting: ictus_os::facts::kernel_config()
                .map(|c| c.enabled("CONFIG_IRQ_TIME_ACCOUNTING")),
            hypervisor: ictus_os::facts::virtualization(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let recent = Arc::new(Mutex::new(VecDeque::with_capacity(RECENT)));
        let handle = {
            let stop = stop.clone();
            let recent = recent.clone();
            std::thread::Builder::new()
                .name("ictus-explain".into())
                .spawn(move || Sampler::new(config, watched, t0, recent, host).run(&stop))?
        };
        Ok((
            Explainer {
                stop,
                recent,
                handle: Some(handle),
            },
            reporters,
        ))
    }

    /// The last explained misses (at most 16), newest last.
    pub fn recent(&self) -> Vec<Explained> {
        self.recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A handle on the last explained misses that outlives a borrow of `self`.
    pub fn recent_handle(&self) -> RecentMisses {
        RecentMisses(self.recent.clone())
    }

    /// Stops the sampler after one last reading, explains what is pending, and
    /// returns everything.
    pub fn finish(mut self) -> Explanation {
        self.stop.store(true, Ordering::Release);
        let handle = self.handle.take().expect("finish runs once");
        handle.thread().unpark();
        handle.join().expect("the sampler does not panic")
    }
}

impl Drop for Explainer {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in the sampler's loop.
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// The warning a run carries when its sampler could not start (`error`): its misses
/// are counted, not explained.
pub fn unavailable(error: &std::io::Error) -> ictus_core::warning::Warning {
    ictus_core::warning::Warning::new(
        ictus_core::warning::WarningId::ExplainUnavailable,
        format!("misses are not explained: the sampler thread could not start ({error})"),
        None,
    )
}

/// The last explained misses of a running sampler, for a live view.
#[derive(Clone, Debug)]
pub struct RecentMisses(Arc<Mutex<VecDeque<Explained>>>);

impl RecentMisses {
    /// The last explained misses (at most 16), newest last.
    pub fn get(&self) -> Vec<Explained> {
        self.0
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Counters of one watched thread at one reading. Its involuntary switches are not
/// read: `status`, their only source, cost 2.3 us a thread a reading (more than
/// `stat` and `schedstat` together), and the run delay gives the time they cost.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadCounters {
    minflt: u64,
    majflt: u64,
    run_ns: u64,
    run_delay_ns: u64,
}

/// One reading, for the CPUs of the config (by their index in it).
#[derive(Clone, Debug, Default)]
struct Reading {
    t: Nanos,
    /// Whether `softirq` and `steal_ticks` were read at this reading (else they are
    /// empty).
    has_tables: bool,
    /// Whether `irq` was read at this reading (else it is empty).
    has_irq: bool,
    /// `[line * ncpu + cpu]`.
    irq: Vec<u64>,
    /// `[kind * ncpu + cpu]`.
    softirq: Vec<u64>,
    steal_ticks: Vec<u64>,
    /// IRQ and softirq time per CPU (`/proc/stat`, ticks), read with steal.
    irq_ticks: Vec<u64>,
    softirq_ticks: Vec<u64>,
    idle_entries: Vec<u64>,
    /// Per CPU: time idle in every state (cpuidle, us).
    idle_us: Vec<u64>,
    /// By watched thread: `None` where its counters were not read at this reading.
    threads: Vec<Option<ThreadCounters>>,
    /// The run time (`schedstat`, ns) of the threads that last ran on the watched
    /// CPUs (see [`Sampler::candidates`]), by thread id.
    others: Vec<(i64, u64)>,
}

impl Reading {
    fn has_thread(&self, thread: usize) -> bool {
        self.threads.get(thread).is_some_and(Option::is_some)
    }
}

/// What the accounting needs to know of the machine, read once before the sampler
/// runs.
struct Host {
    /// Whether the kernel accounts IRQ time (`None`: its config is unreadable).
    irq_time_accounting: Option<bool>,
    /// The hypervisor, on a virtual machine.
    hypervisor: Option<String>,
}

/// One thread's files a scan reads, opened the first time it sees the thread.
struct TaskFiles {
    pid: i64,
    stat: Reread,
    schedstat: Reread,
    /// What the last scan saw (`None` before its first `stat`).
    seen: Option<Seen>,
}

/// The files of one watched thread, opened once it attached.
struct ThreadFiles {
    tid: i64,
    stat: Option<Reread>,
    schedstat: Option<Reread>,
    /// Whether a reading took its counters since it attached.
    read: bool,
}

struct Sampler {
    config: ExplainConfig,
    watched: Vec<WatchedThread>,
    files: Vec<Option<ThreadFiles>>,
    t0: Nanos,
    recent: Arc<Mutex<VecDeque<Explained>>>,
    cpus: Vec<usize>,
    interrupts: Option<Reread>,
    irq_names: Vec<String>,
    softirqs: Option<Reread>,
    softirq_names: Vec<String>,
    stat: Option<Reread>,
    idle: Vec<Vec<Reread>>,
    idle_time: Vec<Vec<Reread>>,
    deepest_idle: Vec<Option<(String, u64)>>,
    /// Whether the kernel accounts IRQ time (`CONFIG_IRQ_TIME_ACCOUNTING`): then
    /// `/proc/stat`'s irq and softirq columns are time, else ticks sampled.
    irq_time_accounting: Option<bool>,
    /// The hypervisor, on a virtual machine.
    hypervisor: Option<String>,
    readings: VecDeque<Reading>,
    scans: VecDeque<Scan>,
    pending: Vec<(usize, MissEvent)>,
    rt_budget: Option<(u64, u64)>,
    own_tid: i64,
    /// The next watched thread whose counters a reading takes in turn.
    next_thread: usize,
    /// The threads (not watched, not the sampler) that ran most on the watched CPUs
    /// over the last second of scans, real-time ones first, at most [`CANDIDATES`]:
    /// every reading takes their run time, so that what they ran in a miss's window
    /// is known to the reading (10 ms), not to the scan (a second).
    candidates: Vec<i64>,
    /// Every thread's `stat` and `schedstat`, kept open between scans.
    task_files: HashMap<i64, TaskFiles>,
    /// When it started (its share of a CPU is its run time over the time since).
    started: Nanos,
    /// Its own cost against its budget.
    budget: budget::Budget,
    // What it reports.
    explanation: Explanation,
    reading_total: Nanos,
}

impl Sampler {
    fn new(
        config: ExplainConfig,
        watched: Vec<WatchedThread>,
        t0: Nanos,
        recent: Arc<Mutex<VecDeque<Explained>>>,
        host: Host,
    ) -> Sampler {
        let cpus = config.cpus.cpus().to_vec();
        let mut sources = Vec::new();
        let mut open = |path: &str, what: &str| {
            let r = Reread::open(path);
            if r.is_none() {
                sources.push(format!("{what}: {path} not readable here"));
            }
            r
        };
        let interrupts = open("/proc/interrupts", "interrupts");
        let softirqs = open("/proc/softirqs", "softirqs");
        let stat = open("/proc/stat", "steal");
        let mut idle = Vec::new();
        let mut idle_time = Vec::new();
        let mut deepest_idle = Vec::new();
        for &cpu in &cpus {
            let (files, times, deepest) = idle_states(cpu);
            idle.push(files);
            idle_time.push(times);
            deepest_idle.push(deepest);
        }
        let rt_budget = rt_budget();
        let keep = config.keep;
        let n = watched.len();
        let own_budget = budget::Budget::new(config.budget);
        Sampler {
            explanation: Explanation {
                clock_start_ns: t0.as_u64(),
                threshold_ns: config.threshold.as_u64(),
                breakdown: Breakdown::default(),
                events: Vec::with_capacity(keep.min(1024)),
                events_not_kept: 0,
                sampler: SamplerReport {
                    period_ns: config.period.as_u64(),
                    samples: 0,
                    cpus: String::new(),
                    shares_watched_cpu: false,
                    reading_mean_ns: 0,
                    reading_max_ns: 0,
                    task_scans: 0,
                    cpu_ns: 0,
                    wall_ns: 0,
                    budget: 0.0,
                    slowest: 0,
                    stretched_ns: 0,
                    sources,
                },
            },
            config,
            watched,
            files: (0..n).map(|_| None).collect(),
            t0,
            recent,
            cpus,
            interrupts,
            irq_names: Vec::new(),
            softirqs,
            softirq_names: Vec::new(),
            stat,
            idle,
            idle_time,
            deepest_idle,
            irq_time_accounting: host.irq_time_accounting,
            hypervisor: host.hypervisor,
            readings: VecDeque::new(),
            scans: VecDeque::new(),
            pending: Vec::new(),
            rt_budget,
            own_tid: 0,
            next_thread: 0,
            candidates: Vec::new(),
            task_files: HashMap::new(),
            started: Nanos::ZERO,
            budget: own_budget,
            reading_total: Nanos::ZERO,
        }
    }

    fn run(mut self, stop: &AtomicBool) -> Explanation {
        self.own_tid = ictus_os::sched::thread_id();
        self.started = monotonic_now();
        for w in &self.watched {
            let _ = w.watch.sampler.set(std::thread::current());
        }
        self.place();
        // SCHED_IDLE when asked (`yield_cpu`): across hosts the sampler shares the
        // other CPUs with the forwarder and Zenoh's threads, and its wake-up every
        // period preempted them. Seed 003's stress test across three hosts at 1 ms,
        // 30 s runs alternated with `--explain off` (135 to 270 missed frames of
        // 30,000): 1,017 and 1,182 with the sampler at nice 0, 572 and 606 at nice 19,
        // 186 and 291 in SCHED_IDLE (docs/executive.md, "Where a cell's time goes").
        // Not by default: under a CPU load on those CPUs (a survey's loads) an idle
        // sampler starves, its readings come hundreds of milliseconds late and its
        // stop waits as long. Entering SCHED_IDLE needs no privilege; should it fail,
        // the sampler runs as before.
        if self.config.yield_cpu {
            let _ = ictus_os::sched::set_policy(ictus_os::sched::Policy::Idle);
        }
        self.describe_sources();
        let base = self.config.period.max(Nanos::from_micros(100));
        let mut next = monotonic_now();
        let mut last_scan = Nanos::ZERO;
        loop {
            // Acquire: pairs with the Release store in Explainer::finish / drop.
            let stopping = stop.load(Ordering::Acquire);
            self.attach_new();
            // Drained first: a reading right after a miss's end reads what it waits
            // for (its thread's counters, interrupts), so its window closes there.
            self.drain();
            // Slowed down to hold its budget, a miss's wake-up reads only when the
            // last reading is a (stretched) period old: a storm of misses would cost
            // a reading each. Their windows then close at the next reading.
            let slow = self.budget.slow();
            let stale = self.readings.back().is_none_or(|r| {
                monotonic_now().saturating_sub(r.t) >= Nanos::new(base.as_u64() * u64::from(slow))
            });
            if slow == 1 || stale || stopping {
                self.read();
            }
            let now = monotonic_now();
            let stretch = |t: Nanos| Nanos::new(t.as_u64() * u64::from(slow));
            let scan_due = now.saturating_sub(last_scan) >= stretch(self.config.scan_every);
            let events_wait = self.pending.iter().any(|(_, e)| {
                self.scans.back().is_none_or(|s| s.t < e.end)
                    && self.readings.back().is_some_and(|r| r.t >= e.end)
            });
            // A scan costs about a millisecond of the sampler's CPU (a reading, 40
            // us): one asked for by waiting events comes at most every 50 ms.
            let may_trigger = now.saturating_sub(last_scan) >= stretch(SCAN_GAP);
            if scan_due || (events_wait && may_trigger) || stopping {
                self.scan();
                last_scan = monotonic_now();
            }
            self.explain_ready(stopping);
            if stopping {
                break;
            }
            // Its own cost, twice a second: over its budget, it stretches its period
            // and its scans' spacing; with room again, it shortens them.
            self.budget.weigh(monotonic_now());
            let gap = stretch(SCAN_GAP);
            let period = Nanos::new(base.as_u64() * u64::from(self.budget.slow()));
            // Until the next period, or a miss's report wakes it (then it reads at
            // once and keeps its period).
            let now = monotonic_now();
            if next <= now {
                next += period;
                if next <= now {
                    next = now + period;
                }
            }
            // A miss that waits for a scan the 50 ms gap held back wakes it when the
            // gap ends, not a period later (a long period left it waiting that long).
            let wake = if self.pending.is_empty() {
                next
            } else {
                next.min((last_scan + gap).max(now))
            };
            std::thread::park_timeout(Duration::from_nanos((wake - now).as_u64()));
        }
        self.close()
    }

    /// Off the watched CPUs when others are online; said in the report either way.
    fn place(&mut self) {
        let online = ictus_os::facts::online_cpus();
        let others: Vec<usize> = online
            .cpus()
            .iter()
            .copied()
            .filter(|c| !self.config.cpus.contains(*c))
            .collect();
        let report = &mut self.explanation.sampler;
        if others.is_empty() {
            report.cpus = online.to_string();
            report.shares_watched_cpu = true;
        } else {
            let set = CpuSet::from_cpus(others);
            report.shares_watched_cpu = ictus_os::sched::set_affinity(&set).is_err();
            report.cpus = set.to_string();
        }
    }

    fn describe_sources(&mut self) {
        let s = &mut self.explanation.sampler.sources;
        s.push(
            "per-CPU: /proc/interrupts, /proc/softirqs, steal, irq and softirq in /proc/stat, \
             cpuidle usage and time; per thread: run time and run delay (schedstat), page \
             faults (stat); every thread's schedstat scanned (and the stat of those that ran) \
             to name the one that ran"
                .into(),
        );
        s.extend(accounting_sources(
            self.irq_time_accounting,
            self.idle.iter().any(|f| !f.is_empty()),
            self.hypervisor.as_deref(),
            1_000_000_000 / ictus_os::procstat::user_hz().max(1),
        ));
        match self.rt_budget {
            Some((rt, period)) => s.push(format!(
                "RT throttling inferred from RT threads' run time: budget {} of {}",
                Nanos::new(rt),
                Nanos::new(period)
            )),
            None => s.push("RT throttling off (sched_rt_runtime_us -1 or unreadable)".into()),
        }
        s.push(tracer_source(ictus_os::tracefs::find().as_ref()));
    }

    fn attach_new(&mut self) {
        for (i, w) in self.watched.iter().enumerate() {
            // Acquire: pairs with the Release store of tid in MissReporter::attach.
            let tid = w.watch.tid.load(Ordering::Acquire);
            // Attached anew from another thread (a probe's next trial): reopen.
            if tid <= 0 || self.files[i].as_ref().is_some_and(|f| f.tid == tid) {
                continue;
            }
            let base = format!("/proc/self/task/{tid}");
            self.files[i] = Some(ThreadFiles {
                tid,
                stat: Reread::sized(&format!("{base}/stat"), 1024),
                schedstat: Reread::sized(&format!("{base}/schedstat"), 128),
                read: false,
            });
        }
    }

    fn read(&mut self) {
        let started = monotonic_now();
        let mut r = if self.readings.len() > 2
            && self
                .readings
                .front()
                .is_some_and(|f| started.saturating_sub(f.t) > self.config.history)
        {
            self.readings.pop_front().expect("not empty")
        } else {
            Reading::default()
        };
        r.t = started;
        let last = |has: fn(&Reading) -> bool| {
            self.readings
                .iter()
                .rev()
                .find(|r| has(r))
                .map_or(Nanos::ZERO, |r| r.t)
        };
        let (last_tables, last_irq) = (last(|r| r.has_tables), last(|r| r.has_irq));
        let waits = |since: Nanos| self.pending.iter().any(|(_, e)| since < e.end);
        let n = self.explanation.sampler.samples;
        r.has_tables =
            waits(last_tables) || n.is_multiple_of(u64::from(self.config.tables_every.max(1)));
        r.has_irq =
            waits(last_irq) || n.is_multiple_of(u64::from(self.config.interrupts_every.max(1)));
        r.irq.clear();
        r.softirq.clear();
        r.steal_ticks.clear();
        r.irq_ticks.clear();
        r.softirq_ticks.clear();
        self.read_tables(&mut r);
        r.idle_entries.clear();
        for files in &mut self.idle {
            r.idle_entries.push(sum_of(files));
        }
        r.idle_us.clear();
        for files in &mut self.idle_time {
            r.idle_us.push(sum_of(files));
        }
        // The threads read now: those whose miss waits for a reading after its end,
        // and the next ones in turn.
        let n = self.files.len();
        let mut wanted = vec![false; n];
        for (i, f) in self.files.iter().enumerate() {
            // Newly attached: a first reading to count from.
            if f.as_ref().is_some_and(|f| !f.read) {
                wanted[i] = true;
            }
        }
        for (i, e) in &self.pending {
            let read_after = self
                .readings
                .iter()
                .rev()
                .find(|r| r.has_thread(*i))
                .is_some_and(|r| r.t >= e.end);
            if !read_after {
                wanted[*i] = true;
            }
        }
        for k in 0..self.config.threads_per_reading.clamp(1, n.max(1)).min(n) {
            wanted[(self.next_thread + k) % n] = true;
        }
        if n > 0 {
            self.next_thread = (self.next_thread + self.config.threads_per_reading.max(1)) % n;
        }
        r.threads.clear();
        for (f, wanted) in self.files.iter_mut().zip(wanted) {
            if !wanted {
                r.threads.push(None);
                continue;
            }
            let mut c = ThreadCounters::default();
            if let Some(f) = f {
                f.read = true;
                if let Some(text) = f.stat.as_mut().and_then(Reread::read) {
                    (c.minflt, c.majflt) = faults(text.as_bytes());
                }
                if let Some(text) = f.schedstat.as_mut().and_then(Reread::read) {
                    let mut w = text
                        .split_whitespace()
                        .map(|v| v.parse::<u64>().unwrap_or(0));
                    c.run_ns = w.next().unwrap_or(0);
                    c.run_delay_ns = w.next().unwrap_or(0);
                }
            }
            r.threads.push(Some(c));
        }
        r.others.clear();
        for tid in &self.candidates {
            if let Some(run) = self
                .task_files
                .get_mut(tid)
                .and_then(|f| f.schedstat.read())
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            {
                r.others.push((*tid, run));
            }
        }
        let took = monotonic_now().saturating_sub(started);
        self.reading_total += took;
        let report = &mut self.explanation.sampler;
        report.samples += 1;
        report.reading_max_ns = report.reading_max_ns.max(took.as_u64());
        self.readings.push_back(r);
    }

    /// The per-CPU tables `r` is to hold: interrupts, softirqs, steal.
    fn read_tables(&mut self, r: &mut Reading) {
        if r.has_irq
            && let Some(f) = self.interrupts.as_mut()
            && let Some(text) = f.read()
        {
            per_cpu_table(text, &self.cpus, &mut self.irq_names, &mut r.irq, true);
        }
        if !r.has_tables {
            return;
        }
        if let Some(f) = self.softirqs.as_mut()
            && let Some(text) = f.read()
        {
            per_cpu_table(
                text,
                &self.cpus,
                &mut self.softirq_names,
                &mut r.softirq,
                false,
            );
        }
        r.steal_ticks.resize(self.cpus.len(), 0);
        r.irq_ticks.resize(self.cpus.len(), 0);
        r.softirq_ticks.resize(self.cpus.len(), 0);
        if let Some(f) = self.stat.as_mut()
            && let Some(text) = f.read()
        {
            // The per-CPU lines come first; the rest (intr, ctxt, ...) is not needed.
            for line in text.lines().skip(1).take_while(|l| l.starts_with("cpu")) {
                let mut w = line.split_whitespace();
                let Some(cpu) = w
                    .next()
                    .and_then(|l| l.strip_prefix("cpu"))
                    .and_then(|n| n.parse::<usize>().ok())
                else {
                    continue;
                };
                if let Some(i) = self.cpus.iter().position(|&c| c == cpu) {
                    // user nice system idle iowait irq softirq steal
                    let mut n = w.map(|s| s.parse::<u64>().unwrap_or(0)).skip(5);
                    r.irq_ticks[i] = n.next().unwrap_or(0);
                    r.softirq_ticks[i] = n.next().unwrap_or(0);
                    r.steal_ticks[i] = n.next().unwrap_or(0);
                }
            }
        }
    }

    fn drain(&mut self) {
        for (i, w) in self.watched.iter_mut().enumerate() {
            while let Some(e) = w.consumer.pop() {
                self.pending.push((i, e));
            }
        }
    }

    fn scan(&mut self) {
        let t = monotonic_now();
        let mut tasks = HashMap::with_capacity(self.task_files.len().max(256));
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        // Each thread's files stay open from the scan that first saw it to the one
        // that finds it gone: a scan then costs two reads per thread, no opens.
        let mut seen = Vec::with_capacity(tasks.capacity());
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else {
                continue;
            };
            let Ok(threads) = std::fs::read_dir(p.path().join("task")) else {
                continue;
            };
            for th in threads.flatten() {
                let Some(tid) = th.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else {
                    continue;
                };
                seen.push(tid);
                if let std::collections::hash_map::Entry::Vacant(v) = self.task_files.entry(tid) {
                    let dir = th.path();
                    let (Some(stat), Some(schedstat)) = (
                        Reread::sized(&dir.join("stat").to_string_lossy(), 512),
                        Reread::sized(&dir.join("schedstat").to_string_lossy(), 64),
                    ) else {
                        continue;
                    };
                    v.insert(TaskFiles {
                        pid,
                        stat,
                        schedstat,
                        seen: None,
                    });
                }
            }
        }
        seen.sort_unstable();
        self.task_files
            .retain(|tid, _| seen.binary_search(tid).is_ok());
        for (&tid, f) in &mut self.task_files {
            let Some(run_ns) = f
                .schedstat
                .read()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            else {
                continue;
            };
            // A thread that did not run since the last scan kept its CPU, class and
            // name (a wake-up, where it may move, makes it run): only those that ran
            // have their `stat` read again.
            let ran = f.seen.as_ref().is_none_or(|s| s.run_ns != run_ns);
            if ran {
                let Some(stat) = f.stat.bytes() else {
                    continue;
                };
                let Some(ts) = TaskStat::parse(stat) else {
                    continue;
                };
                let comm = match (&f.seen, TaskStat::comm(stat)) {
                    (Some(s), Some(c)) if s.comm.as_bytes() == c => s.comm.clone(),
                    (_, c) => String::from_utf8_lossy(c.unwrap_or_default()).into_owned(),
                };
                f.seen = Some(Seen {
                    pid: f.pid,
                    comm,
                    processor: ts.processor,
                    policy: ts.policy,
                    rt_priority: ts.rt_priority,
                    run_ns,
                });
            }
            if let Some(seen) = &f.seen {
                tasks.insert(tid, seen.clone());
            }
        }
        self.explanation.sampler.task_scans += 1;
        // Keep scans over the history and one RT period before it.
        let keep = self.config.history + Nanos::new(self.rt_budget.map_or(0, |b| b.1));
        while self.scans.len() > 2
            && self
                .scans
                .front()
                .is_some_and(|s| t.saturating_sub(s.t) > keep)
        {
            self.scans.pop_front();
        }
        self.scans.push_back(Scan { t, tasks });
        self.pick_candidates();
    }

    /// The threads the readings follow until the next scan: those that ran most on
    /// the watched CPUs over the last second of scans (all it saw there, at the
    /// first), real-time ones first.
    fn pick_candidates(&mut self) {
        let Some(after) = self.scans.back() else {
            return;
        };
        // Over a second at least (scans after misses come 50 ms apart, and a thread
        // that bursts twice a second would drop out between two of them).
        let before = self
            .scans
            .iter()
            .rev()
            .skip(1)
            .find(|s| after.t.saturating_sub(s.t) >= self.config.scan_every)
            .or_else(|| self.scans.front().filter(|s| s.t < after.t));
        let mut skip: Vec<i64> = self.watched_tids().collect();
        skip.push(self.own_tid);
        // Real-time threads first (they are the ones that preempt a real-time loop),
        // then by what they ran.
        let mut ran: Vec<(bool, u64, i64)> = after
            .tasks
            .iter()
            .filter(|(tid, s)| self.config.cpus.contains(s.processor) && !skip.contains(tid))
            .map(|(tid, s)| {
                let earlier = before
                    .and_then(|b| b.tasks.get(tid))
                    .map_or(0, |b| b.run_ns);
                let rt = class_rank(s.policy, s.rt_priority) > 0;
                (rt, s.run_ns.saturating_sub(earlier), *tid)
            })
            .filter(|(_, d, _)| *d > 0)
            .collect();
        ran.sort_unstable_by(|a, b| b.cmp(a));
        self.candidates.clear();
        self.candidates
            .extend(ran.iter().take(CANDIDATES).map(|(_, _, tid)| *tid));
    }

    /// Explains every pending event with a reading and a scan after its end (all of
    /// them when `last`: the last reading and scan are then the end).
    fn explain_ready(&mut self, last: bool) {
        let Some(latest) = self.readings.back().map(|r| r.t) else {
            return;
        };
        let last_with = |has: fn(&Reading) -> bool| {
            self.readings
                .iter()
                .rev()
                .find(|r| has(r))
                .map_or(Nanos::ZERO, |r| r.t)
        };
        let latest_tables = last_with(|r| r.has_tables).min(last_with(|r| r.has_irq));
        let scanned = self.scans.back().map_or(Nanos::ZERO, |s| s.t);
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain(|(i, e)| {
            let thread_read = self
                .readings
                .iter()
                .rev()
                .find(|r| r.has_thread(*i))
                .is_some_and(|r| r.t >= e.end);
            if !last && (latest < e.end || latest_tables < e.end || scanned < e.end || !thread_read)
            {
                return true;
            }
            let explained = self.explain(*i, e);
            self.keep(explained);
            false
        });
        self.pending = pending;
    }

    fn explain(&self, thread: usize, e: &MissEvent) -> Explained {
        let tid = self.files[thread].as_ref().map(|f| f.tid);
        // The thread's CPU: where the scan after the event saw it, else where it
        // attached.
        let cpu = tid
            .and_then(|tid| {
                let s = self.scans.iter().find(|s| s.t >= e.end)?;
                Some(s.tasks.get(&tid)?.processor)
            })
            .or_else(|| {
                usize::try_from(self.watched[thread].watch.cpu.load(Ordering::Relaxed)).ok()
            });
        let before = self.readings.iter().rev().find(|r| r.t <= e.start);
        let after = self.readings.iter().find(|r| r.t >= e.end);
        let (before, after, unread) = match (before, after) {
            (Some(b), Some(a)) => (b, a, b.t >= a.t),
            // A window outside the readings kept: nothing read around it.
            _ => (
                self.readings.front().expect("one reading at least"),
                self.readings.back().expect("one reading at least"),
                true,
            ),
        };
        let tick_ns = 1_000_000_000 / ictus_os::procstat::user_hz().max(1);
        let mut w = WindowDeltas {
            lateness: e.lateness,
            tick_ns,
            hypervisor: self.hypervisor.clone(),
            unread,
            ..WindowDeltas::default()
        };
        if e.kind == MissKind::Overrun {
            w.overrun = Some((e.exec, e.budget));
        }
        let ncpu = self.cpus.len();
        if let Some(ci) = cpu.and_then(|c| self.cpus.iter().position(|&x| x == c)) {
            // The per-CPU tables from the readings that took them around the window.
            let tables_before = self
                .readings
                .iter()
                .rev()
                .find(|r| r.has_tables && r.t <= e.start)
                .unwrap_or(before);
            let tables_after = self
                .readings
                .iter()
                .find(|r| r.has_tables && r.t >= e.end)
                .unwrap_or(after);
            let irq_before = self
                .readings
                .iter()
                .rev()
                .find(|r| r.has_irq && r.t <= e.start)
                .unwrap_or(before);
            let irq_after = self
                .readings
                .iter()
                .find(|r| r.has_irq && r.t >= e.end)
                .unwrap_or(after);
            w.interrupts = deltas(
                &self.irq_names,
                &irq_before.irq,
                &irq_after.irq,
                ncpu,
                ci,
                &["LOC"],
            );
            w.interrupts_span_ns = irq_after.t.saturating_sub(irq_before.t).as_u64();
            w.softirqs_span_ns = tables_after.t.saturating_sub(tables_before.t).as_u64();
            w.softirqs = deltas(
                &self.softirq_names,
                &tables_before.softirq,
                &tables_after.softirq,
                ncpu,
                ci,
                &["TIMER", "HRTIMER"],
            );
            // Steal (and IRQ time) move by whole ticks: the tables before and after
            // are enough.
            let ticks = |v: fn(&Reading) -> &Vec<u64>| {
                let at = |r: &Reading| v(r).get(ci).copied().unwrap_or(0);
                at(tables_after).saturating_sub(at(tables_before)) * tick_ns
            };
            w.steal_ns = ticks(|r| &r.steal_ticks);
            if self.irq_time_accounting == Some(true) {
                w.irq_time = Some(IrqTime {
                    irq_ns: ticks(|r| &r.irq_ticks),
                    softirq_ns: ticks(|r| &r.softirq_ticks),
                });
            }
            if let Some((name, lat)) = &self.deepest_idle[ci] {
                let delta = |v: &[u64], u: &[u64]| {
                    v.get(ci)
                        .copied()
                        .unwrap_or(0)
                        .saturating_sub(u.get(ci).copied().unwrap_or(0))
                };
                w.idle = Some(IdleWindow {
                    state: name.clone(),
                    exit_latency_us: *lat,
                    entries: delta(&after.idle_entries, &before.idle_entries),
                    idle_us: delta(&after.idle_us, &before.idle_us),
                });
            }
        }
        // The thread's own counters from the readings that took them around the
        // window (in turn, so they may lie a few readings further out).
        let thread_before = self
            .readings
            .iter()
            .rev()
            .find(|r| r.t <= e.start && r.has_thread(thread))
            .unwrap_or(before);
        let thread_after = self
            .readings
            .iter()
            .find(|r| r.t >= e.end && r.has_thread(thread))
            .unwrap_or(after);
        if let (Some(Some(b)), Some(Some(a))) = (
            thread_before.threads.get(thread),
            thread_after.threads.get(thread),
        ) {
            w.run_delay_ns = a.run_delay_ns.saturating_sub(b.run_delay_ns);
            // Read in turn, the thread's counters span more than the window: less
            // its usual run delay (each wake-up waits a few microseconds) over the
            // time outside it, at its rate between the two readings before.
            let earlier = self
                .readings
                .iter()
                .rev()
                .find(|r| r.t < thread_before.t && r.has_thread(thread))
                .and_then(|r| Some((r.t, r.threads.get(thread).copied()??)));
            if let Some((t, p)) = earlier {
                let outside = thread_after
                    .t
                    .saturating_sub(thread_before.t)
                    .saturating_sub(e.end.saturating_sub(e.start));
                let usual = b.run_delay_ns.saturating_sub(p.run_delay_ns) as u128
                    * outside.as_u64() as u128
                    / thread_before.t.saturating_sub(t).as_u64().max(1) as u128;
                w.run_delay_ns = w.run_delay_ns.saturating_sub(usual as u64);
            }
            w.run_ns = a.run_ns.saturating_sub(b.run_ns);
            w.minor_faults = a.minflt.saturating_sub(b.minflt);
            w.major_faults = a.majflt.saturating_sub(b.majflt);
        }
        if let Some(cpu) = cpu {
            let (top, lower, others) = self.top_other(cpu, thread, e);
            w.top_other = top;
            w.top_is_lower_class = lower;
            w.others_ran_ns = others;
            // Throttling starts when the budget is used up: measured over the RT
            // period before the window opened (the throttled gap itself lies after).
            w.rt_budget = self.rt_used(cpu, e.start);
        }
        let judged = judge(&w);
        let lateness_ns = e.lateness.as_u64();
        Explained {
            thread: self.watched[thread].name.clone(),
            cpu,
            kind: e.kind,
            seq: e.seq,
            at_ns: e.start.saturating_sub(self.t0).as_u64(),
            lateness_ns,
            missed: e.missed,
            window_ns: after.t.saturating_sub(before.t).as_u64(),
            causes: judged.causes,
            seen: judged.seen,
            accounted_ns: judged.accounted_ns,
            accounted_share: judged.accounted_ns as f64 / lateness_ns.max(1) as f64,
            causes_sum_ns: judged.sum_ns,
            run_ns: w.run_ns,
            run_delay_ns: w.run_delay_ns,
            unread,
        }
    }

    fn watched_tids(&self) -> impl Iterator<Item = i64> + '_ {
        self.files.iter().flatten().map(|f| f.tid)
    }

    /// The thread (not watched, not the sampler) that held `cpu` off the watched
    /// thread between the scans around the event; whether the watched thread is
    /// real-time and that thread of a class that cannot preempt it (it ran because
    /// the real-time threads could not: throttled); and what all such threads ran
    /// on `cpu` between the scans.
    fn top_other(&self, cpu: usize, thread: usize, e: &MissEvent) -> (Option<TaskRan>, bool, u64) {
        let (Some(before), Some(after)) = (
            self.scans.iter().rev().find(|s| s.t <= e.start),
            self.scans.iter().find(|s| s.t >= e.end),
        ) else {
            return (None, false, 0);
        };
        let mut skip: Vec<i64> = self.watched_tids().collect();
        skip.push(self.own_tid);
        let own = self
            .files
            .get(thread)
            .and_then(|f| f.as_ref())
            .and_then(|f| after.tasks.get(&f.tid))
            .map_or(0, |s| class_rank(s.policy, s.rt_priority));
        let mut top = preemptor(before, after, cpu, &skip, own);
        let mut others = ran_on(before, after, cpu, &skip);
        // Finer where the readings around the window followed threads on the CPU:
        // what they ran between those readings (10 ms apart, not a second); the
        // threads they did not follow keep the scans' view.
        if let Some((b, a)) = self.window_view(after, e) {
            let followed = |tid: &i64| a.tasks.contains_key(tid);
            let mut skip_followed = skip.clone();
            skip_followed.extend(a.tasks.keys().copied());
            let unfollowed = ran_on(before, after, cpu, &skip_followed);
            others = ran_on(&b, &a, cpu, &skip) + unfollowed;
            let outranks = |t: &TaskRan| {
                after
                    .tasks
                    .get(&t.tid)
                    .is_some_and(|s| class_rank(s.policy, s.rt_priority) > own)
            };
            let scans_top = top.filter(|t| !followed(&t.tid));
            let window_top = preemptor(&b, &a, cpu, &skip, own);
            // The finer view's, unless only a thread it did not follow could have
            // preempted the watched one.
            top = match (window_top, scans_top) {
                (Some(w), Some(s)) if outranks(&s) && !outranks(&w) => Some(s),
                (w, s) => w.or(s),
            };
        }
        let lower = own > 0
            && top.as_ref().is_some_and(|t| {
                after
                    .tasks
                    .get(&t.tid)
                    .is_some_and(|s| class_rank(s.policy, s.rt_priority) < own)
            });
        (top, lower, others)
    }

    /// The followed threads (the candidates) as two scans at the readings around the
    /// event's window, their names and classes from `named` (the scan after it);
    /// `None` where those readings followed none.
    fn window_view(&self, named: &Scan, e: &MissEvent) -> Option<(Scan, Scan)> {
        let before = self.readings.iter().rev().find(|r| r.t <= e.start)?;
        let after = self.readings.iter().find(|r| r.t >= e.end)?;
        let view = |r: &Reading| Scan {
            t: r.t,
            tasks: r
                .others
                .iter()
                .filter_map(|(tid, run)| {
                    let seen = named.tasks.get(tid)?;
                    Some((
                        *tid,
                        Seen {
                            run_ns: *run,
                            ..seen.clone()
                        },
                    ))
                })
                .collect(),
        };
        let b = view(before);
        let mut a = view(after);
        // Only those read at both: one read at the second alone would count its whole
        // life as run in the window.
        a.tasks.retain(|tid, _| b.tasks.contains_key(tid));
        (!a.tasks.is_empty()).then_some((b, a))
    }

    /// Real-time threads' run time on `cpu` over the RT period before `end`, scaled
    /// to the period, with the period and budget.
    fn rt_used(&self, cpu: usize, end: Nanos) -> Option<(u64, u64, u64)> {
        let (runtime, period) = self.rt_budget?;
        let after = self.scans.iter().find(|s| s.t >= end)?;
        let start = end.saturating_sub(Nanos::new(period));
        let before = self
            .scans
            .iter()
            .rev()
            .find(|s| s.t <= start)
            .or(self.scans.front())?;
        let span = after.t.saturating_sub(before.t).as_u64();
        if span < period / 2 {
            return None;
        }
        let rt: u64 = after
            .tasks
            .iter()
            .filter(|(_, s)| s.processor == cpu && matches!(s.policy, 1 | 2))
            .map(|(tid, s)| {
                s.run_ns
                    .saturating_sub(before.tasks.get(tid).map_or(0, |b| b.run_ns))
            })
            .sum();
        let scaled = (rt as u128 * period as u128 / span.max(1) as u128) as u64;
        Some((scaled.min(period), period, runtime))
    }

    fn keep(&mut self, e: Explained) {
        self.explanation.breakdown.add(&e);
        if let Ok(mut r) = self.recent.lock() {
            if r.len() == RECENT {
                r.pop_front();
            }
            r.push_back(e.clone());
        }
        if self.explanation.events.len() < self.config.keep {
            self.explanation.events.push(e);
        } else {
            self.explanation.events_not_kept += 1;
        }
    }

    fn close(mut self) -> Explanation {
        let dropped: u64 = self
            .watched
            .iter()
            .map(|w| w.watch.dropped.load(Ordering::Relaxed))
            .sum();
        self.explanation.breakdown.dropped += dropped;
        let report = &mut self.explanation.sampler;
        report.reading_mean_ns = self.reading_total.as_u64() / report.samples.max(1);
        // Its own run time (schedstat, ns) over its life: what it cost a CPU.
        report.cpu_ns = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        report.wall_ns = monotonic_now().saturating_sub(self.started).as_u64();
        report.budget = self.config.budget;
        report.slowest = self.budget.slowest();
        report.stretched_ns = self.budget.stretched().as_u64();
        self.explanation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sampler test at a time: one's burner starves another's sampler (its first
    /// reading then comes after the miss it is to explain).
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn a_reported_miss_wakes_the_sampler_before_its_period_ends() {
        let _serial = serial();
        let cpu = ictus_os::sched::current_cpu().unwrap_or(0);
        // A period far longer than the test: only the report can wake it.
        let config = ExplainConfig {
            period: Nanos::from_secs(600),
            scan_every: Nanos::from_secs(600),
            ..ExplainConfig::new(CpuSet::from_cpus([cpu]), Nanos::from_micros(100))
        };
        let t0 = monotonic_now();
        let (sut, mut reporters) = Explainer::start(config, &["me".into()], t0).unwrap();
        reporters[0].attach();
        // Its first reading and scan, then its wait for the next period.
        std::thread::sleep(Duration::from_millis(100));
        let start = monotonic_now();
        std::thread::sleep(Duration::from_millis(2));
        let late = monotonic_now() - start;
        reporters[0].release(1, start, late, 0);
        let mut explained = Vec::new();
        for _ in 0..600 {
            explained = sut.recent();
            if !explained.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            explained.len(),
            1,
            "the miss was not explained before finish"
        );
        assert_eq!(explained[0].seq, 1);
        let e = sut.finish();
        // One reading at the start, one woken by the miss (one more where the scan
        // it waits for was held back by the 50 ms gap), and one at the stop.
        assert!(e.sampler.samples <= 4, "{}", e.sampler.samples);
        assert!(e.sampler.cpu_ns > 0 && e.sampler.wall_ns > 0);
    }

    #[test]
    fn a_sampler_explains_a_reported_miss_and_stops() {
        let _serial = serial();
        let cpu = ictus_os::sched::current_cpu().unwrap_or(0);
        let config = ExplainConfig {
            period: Nanos::from_millis(1),
            scan_every: Nanos::from_millis(20),
            ..ExplainConfig::new(CpuSet::from_cpus([cpu]), Nanos::from_micros(100))
        };
        let t0 = monotonic_now();
        let (sut, mut reporters) = Explainer::start(config, &["me".into()], t0).unwrap();
        reporters[0].attach();
        std::thread::sleep(Duration::from_millis(30));
        let start = monotonic_now();
        // Fault in fresh pages inside the window: the thread's own faults move.
        let v = vec![1u8; 8 << 20];
        std::hint::black_box(&v);
        let end = monotonic_now();
        reporters[0].release(5, start, end - start + Nanos::from_millis(1), 0);
        // Explained once a reading and a scan follow it: within 20 ms when the
        // machine is quiet, later when builds share it.
        let mut recent = Vec::new();
        for _ in 0..300 {
            std::thread::sleep(Duration::from_millis(10));
            recent = sut.recent();
            if !recent.is_empty() {
                break;
            }
        }
        let e = sut.finish();
        assert_eq!(e.breakdown.events, 1);
        assert_eq!(e.events.len(), 1);
        assert_eq!(e.events[0].thread, "me");
        assert_eq!(e.events[0].seq, 5);
        // Named, or seen where its time is small beside the lateness.
        assert!(
            e.events[0].causes.iter().chain(&e.events[0].seen).any(
                |c| matches!(c.cause, super::super::Cause::PageFaults { minor, .. } if minor > 0)
            ),
            "{:?}",
            e.events[0]
        );
        assert_eq!(recent.len(), 1);
        assert!(e.sampler.samples > 2 && e.sampler.task_scans > 0);
    }
    #[test]
    fn a_thread_that_shared_the_cpu_in_the_window_is_timed_by_the_readings_not_the_scans() {
        let _serial = serial();
        let cpu = ictus_os::sched::current_cpu().unwrap_or(0);
        let here = CpuSet::from_cpus([cpu]);
        ictus_os::sched::set_affinity(&here).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let burner = {
            let (stop, here) = (stop.clone(), here.clone());
            std::thread::Builder::new()
                .name("burner".into())
                .spawn(move || {
                    ictus_os::sched::set_affinity(&here).unwrap();
                    // Acquire: pairs with the Release store below.
                    while !stop.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap()
        };
        let config = ExplainConfig {
            period: Nanos::from_millis(1),
            scan_every: Nanos::from_millis(20),
            ..ExplainConfig::new(here, Nanos::from_micros(100))
        };
        let (sut, mut reporters) =
            Explainer::start(config, &["me".into()], monotonic_now()).unwrap();
        reporters[0].attach();
        // Scans see the burner run on this CPU, so the readings follow it.
        std::thread::sleep(Duration::from_millis(80));
        // Spin beside it for 30 ms: each waits while the other runs.
        let start = monotonic_now();
        while monotonic_now() - start < Nanos::from_millis(30) {
            std::hint::spin_loop();
        }
        let end = monotonic_now();
        reporters[0].release(1, start, end - start, 0);
        for _ in 0..300 {
            std::thread::sleep(Duration::from_millis(10));
            if !sut.recent().is_empty() {
                break;
            }
        }
        // Release: pairs with the Acquire load in the burner.
        stop.store(true, Ordering::Release);
        burner.join().unwrap();
        let e = sut.finish();
        let miss = &e.events[0];
        let preempted = miss
            .causes
            .iter()
            .chain(&miss.seen)
            .find_map(|c| match &c.cause {
                super::super::Cause::Preempted { by: Some(t), .. } => Some(t.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{miss}"));
        // The burner, followed by the readings, is timed from those around the window
        // (a few ms apart), not from the scans (20 ms and more apart). Which thread
        // ran most beside the watched one (the burner, or a build or a test of
        // another process on a shared machine) is the machine's business.
        assert!(preempted.ran_ns <= preempted.over_ns, "{miss}");
        if preempted.comm == "burner" {
            assert!(preempted.over_ns <= miss.window_ns, "{miss}");
        }
        assert!(miss.run_delay_ns > 0 && miss.run_ns > 0, "{miss}");
    }
}
