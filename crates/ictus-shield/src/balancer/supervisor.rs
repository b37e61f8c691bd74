//! The live balancer: the supervisor thread, which samples the registered tasks,
//! runs the passes and carries out their moves.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ictus_core::sync::spsc::{self, Consumer, Producer};
use ictus_core::{CpuSet, Nanos};
use ictus_os::sched::{self, Policy};
use ictus_os::{affinity_of, clock, wait};

use super::proc::{ESRCH, Tracked, open_proc};
use super::prose::words;
use super::{
    Config, CpuState, Decision, PassOutcome, RING_CAPACITY, Report, Snapshot, TaskRole, TaskState,
    load, place_all, push_one, push_rt,
};
use crate::migrate::SectionStart;
use crate::partition::Partition;

// ---------------------------------------------------------------------------------
// The live balancer.
// ---------------------------------------------------------------------------------

/// Notes kept in a report; later ones are counted in a last note.
const MAX_NOTES: usize = 100;

/// The shortest sample period the supervisor accepts.
const MIN_SAMPLE_PERIOD: Duration = Duration::from_micros(100);

/// The longest the supervisor sleeps before looking at its stop flag.
const STOP_CHECK: Nanos = Nanos::from_millis(10);

/// The most real-time time, in whole samples, carried over to later samples.
const MAX_CARRY: f64 = 10.0;

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

/// One registration, before start.
#[derive(Debug)]
struct Registration {
    tid: i32,
    role: TaskRole,
    allowed: CpuSet,
    rx: Consumer<SectionStart>,
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
    pub fn register(
        &mut self,
        tid: i32,
        role: TaskRole,
        allowed: CpuSet,
    ) -> Producer<SectionStart> {
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
                if allowed.is_empty() && r.role != TaskRole::Rt0 {
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
    fn a_balancer_with_no_task_starts_and_stops() {
        let online = ictus_os::facts::online_cpus();
        let Some(&last) = online.cpus().last() else {
            return;
        };
        if online.len() < 2 {
            return;
        }
        let partition = crate::partition::logical(CpuSet::from_cpus([last]), &online).unwrap();
        let sut = Balancer::new(partition, Config::default()).start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let report = sut.stop();
        assert!(report.samples > 0);
        assert!(report.decisions.is_empty());
        assert_eq!(report.rt_share.len(), online.len());
        assert!(report.supervisor_fifo || !report.notes.is_empty());
    }
}
