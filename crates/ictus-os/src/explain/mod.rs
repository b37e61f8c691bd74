//! Why a deadline was missed: every miss explained from what an ordinary kernel
//! offers, with no tracer.
//!
//! A real-time thread that misses (a late release beyond a threshold, periods missed
//! entirely, its own execution overrunning) pushes a [`MissEvent`] into its
//! [`MissReporter`]: a preallocated SPSC ring, one push, no allocation, no system
//! call; a full ring drops the event and counts it. A sampler thread ([`Explainer`],
//! in `sampler`), placed off the measured CPUs, reads per-CPU and per-thread counters
//! on a short period, stamps each reading, and correlates every reported event with
//! the readings around its window afterwards. What moved in that window on that CPU
//! becomes the event's [`Cause`]s:
//!
//! - interrupts on that CPU by name (`/proc/interrupts`), softirqs (`/proc/softirqs`);
//! - another thread that ran there while the thread waited to run (its `schedstat`
//!   run delay or involuntary switches moved), named from a scan of every thread's
//!   `stat` and `schedstat`: the one that ran most on that CPU in the window;
//! - RT throttling: real-time threads ran the CPU's whole RT budget
//!   (`sched_rt_runtime_us` of `sched_rt_period_us`) just before;
//! - the hypervisor (steal, `/proc/stat`), the thread's page faults, the CPU waking
//!   from an idle state with an exit latency (cpuidle's usage counters), the thread's
//!   own execution overrunning.
//!
//! Each cause carries the time it accounts for of the miss's lateness, from the finest
//! source the kernel gives without a tracer (`schedstat` in ns, `/proc/stat` in ticks,
//! cpuidle's exit latency, or a count times a measured per-event cost, said so in
//! [`Timed::source`]); the time none of them accounts for is a cause of its own: on a
//! virtual machine a host stall (the vCPU did not run), on bare metal "unaccounted"
//! (SMIs, firmware). Only a cause that accounts for a real share ([`NAMED_SHARE`]) is
//! named as the reason; the others are listed as seen. The judging is a pure function
//! ([`judge`], in `account`, where the accounting is tabled) tested on invented
//! windows.

#![allow(
    clippy::disallowed_types,
    reason = "the explainer's target (tid, CPU) and drop count: single words one thread publishes and the sampler reads; no protocol for loom to explore"
)]

mod account;
mod cause;
mod sampler;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use ictus_core::Nanos;
use ictus_core::sync::spsc::{self, Consumer, Producer};
use serde::{Deserialize, Serialize};

pub use account::{
    EVENT_COST, FAULT_COST, IdleWindow, IrqTime, Judged, NAMED_SHARE, WindowDeltas, judge,
};
pub use cause::{Cause, CauseKind, Source, TaskRan, Timed};
pub use sampler::{ExplainConfig, Explainer, RecentMisses, unavailable};

/// What kind of miss an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissKind {
    /// Released later than the threshold.
    Late,
    /// One or more periods missed entirely.
    Missed,
    /// Its own execution ran past its budget.
    Overrun,
}

impl MissKind {
    /// The word in tables.
    pub fn word(self) -> &'static str {
        match self {
            MissKind::Late => "late",
            MissKind::Missed => "missed",
            MissKind::Overrun => "overrun",
        }
    }
}

/// One miss, as the real-time thread reports it (plain data, `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissEvent {
    /// What happened.
    pub kind: MissKind,
    /// The sample or frame index.
    pub seq: u64,
    /// The window's start (monotonic): the deadline, or the release for an overrun.
    pub start: Nanos,
    /// The window's end (monotonic): when the thread woke, or finished.
    pub end: Nanos,
    /// How late the release was.
    pub lateness: Nanos,
    /// Periods missed entirely.
    pub missed: u64,
    /// The execution time (overruns; zero otherwise).
    pub exec: Nanos,
    /// The execution budget (overruns; zero otherwise).
    pub budget: Nanos,
}

/// The identity a watched thread gives itself once it runs where it will measure.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Its kernel thread id, 0 until attached.
    tid: AtomicI64,
    /// The CPU it was on when it attached (-1: unknown).
    cpu: AtomicI64,
    /// Events dropped because the ring was full.
    dropped: AtomicU64,
    /// The sampler's thread, set once it runs: a miss wakes it (see
    /// [`MissReporter::report`]).
    sampler: std::sync::OnceLock<std::thread::Thread>,
}

/// The real-time side: one per watched thread. [`report`](Self::report) is one push
/// into a preallocated ring.
#[derive(Debug)]
pub struct MissReporter {
    producer: Producer<MissEvent>,
    watch: Arc<Watch>,
    threshold: Nanos,
    /// The end of the last event that woke the sampler.
    woke_at: Nanos,
}

/// The least time between two misses of one thread that wake the sampler: in a
/// storm of misses it wakes at most 500 times a second for each thread, and a miss
/// in between waits at most this long for its closing reading.
const WAKE_EVERY: Nanos = Nanos::from_millis(2);

impl MissReporter {
    /// Called by the watched thread once it is placed (pinned, policy set): records
    /// its thread id and CPU for the sampler. Not on the hot path.
    pub fn attach(&self) {
        let cpu = crate::sched::current_cpu().map_or(-1, |c| c as i64);
        // Relaxed: the sampler only reads these to choose which files to open; a late
        // view only delays that, and the Release store of tid below publishes cpu.
        self.watch.cpu.store(cpu, Ordering::Relaxed);
        // Release: pairs with the Acquire load of tid in the sampler's attach check.
        self.watch
            .tid
            .store(crate::sched::thread_id(), Ordering::Release);
    }

    /// The lateness from which a release is reported (`Late`).
    pub fn threshold(&self) -> Nanos {
        self.threshold
    }

    /// Reports a release `lateness` late for `deadline` (woke at `deadline +
    /// lateness`), with `missed` periods missed before it, when it passes the
    /// threshold or periods were missed. Allocation-free.
    #[inline]
    pub fn release(&mut self, seq: u64, deadline: Nanos, lateness: Nanos, missed: u64) {
        if missed == 0 && lateness < self.threshold {
            return;
        }
        self.report(MissEvent {
            kind: if missed > 0 {
                MissKind::Missed
            } else {
                MissKind::Late
            },
            seq,
            start: deadline,
            end: deadline + lateness,
            lateness,
            missed,
            exec: Nanos::ZERO,
            budget: Nanos::ZERO,
        });
    }

    /// Reports an event. A full ring drops it and counts the drop; never blocks.
    /// It wakes the sampler (a futex wake when it sleeps, no more than every
    /// 2 ms), so that the reading that closes the event's window comes
    /// right after its end and not at the sampler's next period.
    #[inline]
    pub fn report(&mut self, event: MissEvent) {
        let end = event.end;
        if self.producer.push(event).is_err() {
            // Relaxed: a counter read once after the run.
            self.watch.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if end.saturating_sub(self.woke_at) >= WAKE_EVERY
            && let Some(sampler) = self.watch.sampler.get()
        {
            sampler.unpark();
            self.woke_at = end;
        }
    }
}

/// The sampler's side of one watched thread.
#[derive(Debug)]
pub(crate) struct WatchedThread {
    pub(crate) name: String,
    pub(crate) consumer: Consumer<MissEvent>,
    pub(crate) watch: Arc<Watch>,
}

/// A reporter and the sampler's end of its ring, with room for `capacity` events
/// not yet read.
pub(crate) fn pair(
    name: String,
    capacity: usize,
    threshold: Nanos,
) -> (MissReporter, WatchedThread) {
    let (producer, consumer) = spsc::channel(capacity);
    let watch = Arc::new(Watch {
        cpu: AtomicI64::new(-1),
        ..Watch::default()
    });
    (
        MissReporter {
            producer,
            watch: watch.clone(),
            threshold,
            woke_at: Nanos::ZERO,
        },
        WatchedThread {
            name,
            consumer,
            watch,
        },
    )
}

/// One explained miss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    /// The watched thread (`timer-0`, a subsystem's name...).
    pub thread: String,
    /// The CPU it was on.
    pub cpu: Option<usize>,
    /// What happened.
    pub kind: MissKind,
    /// Its sample or frame index.
    pub seq: u64,
    /// When, from the start of the run.
    pub at_ns: u64,
    /// How late the release was.
    pub lateness_ns: u64,
    /// Periods missed entirely.
    pub missed: u64,
    /// The window correlated (from the reading before its start to the one after its
    /// end).
    pub window_ns: u64,
    /// The reasons: causes whose time accounts for at least a fifth of the lateness
    /// (else the largest), each with that time, the largest first. The time nothing
    /// in the guest accounts for is one of them (`host-stall`, `unaccounted`). Empty
    /// only in records written before the accounting: nothing moved.
    pub causes: Vec<Timed>,
    /// Causes that moved in the window but account for too little of the lateness
    /// to be its reason, the largest first.
    #[serde(default)]
    pub seen: Vec<Timed>,
    /// What the counters in this guest account for together (every cause but the
    /// inferred rest, reasons and seen), at most the lateness.
    #[serde(default)]
    pub accounted_ns: u64,
    /// `accounted_ns` over the lateness, 0 to 1.
    #[serde(default)]
    pub accounted_share: f64,
    /// The causes' times added before the cap: above the lateness, they overlap (an
    /// interrupt served while the thread waited ready) or a count spans more than
    /// the lateness, and `accounted_ns` was capped.
    #[serde(default)]
    pub causes_sum_ns: u64,
    /// The watched thread's own run time in the window (`schedstat`; 0: not read).
    #[serde(default)]
    pub run_ns: u64,
    /// The time it waited ready to run in the window (`schedstat`).
    #[serde(default)]
    pub run_delay_ns: u64,
    /// The sampler had no reading on both sides of its window (it was starved, or
    /// the miss came before its first reading): not judged, `causes` empty but for
    /// an overrun (which the loop measured itself).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unread: bool,
}

impl Explained {
    /// The kind of the cause that accounts for most (`Unexplained` when nothing
    /// moved, in records written before the accounting).
    pub fn dominant(&self) -> CauseKind {
        self.causes
            .first()
            .map_or(CauseKind::Unexplained, Timed::kind)
    }

    /// The cause that accounts for most as the breakdown groups it: `preempted by
    /// kworker/1:2`, `host stall (the vCPU did not run)`, ...
    pub fn dominant_phrase(&self) -> String {
        if self.unread && self.causes.is_empty() {
            return UNREAD.to_string();
        }
        self.causes.first().map_or_else(
            || CauseKind::Unexplained.phrase().to_string(),
            |c| c.cause.phrase(),
        )
    }

    /// Whether what the guest's counters account for reaches half the lateness.
    pub fn half_accounted(&self) -> bool {
        self.accounted_ns.saturating_mul(2) >= self.lateness_ns.max(1)
    }
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} #{} at {}: {}",
            self.thread,
            self.kind.word(),
            self.seq,
            Nanos::new(self.at_ns),
            Nanos::new(self.lateness_ns)
        )?;
        if self.missed > 0 {
            write!(f, " late, {} period(s) missed", self.missed)?;
        } else {
            f.write_str(" late")?;
        }
        if let Some(cpu) = self.cpu {
            write!(f, " on CPU {cpu}")?;
        }
        if self.unread && self.causes.is_empty() {
            return f.write_str(
                ": not read: the sampler had no reading on both sides of its window (it was \
                 starved, or the miss came before its first reading)",
            );
        }
        if self.causes.is_empty() {
            return f.write_str(": unexplained: nothing visible on this CPU");
        }
        f.write_str(": ")?;
        for (i, c) in self.causes.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{c}")?;
        }
        if !self.seen.is_empty() {
            f.write_str("; seen, too small to be the reason: ")?;
            for (i, c) in self.seen.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{c}")?;
            }
        }
        if self.causes.iter().any(|c| c.source != Source::None) {
            write!(
                f,
                " (counters here account for {:.0} %",
                self.accounted_share * 100.0
            )?;
            if self.causes_sum_ns > self.lateness_ns {
                write!(
                    f,
                    ": their {} together overlap, capped at the lateness",
                    Nanos::new(self.causes_sum_ns)
                )?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The breakdown's words for misses the sampler did not read around.
const UNREAD: &str = "not read by the sampler";

/// How many misses each cause accounts for most of, and the time each cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// Misses reported (late releases beyond the threshold, missed periods,
    /// overruns), explained or not.
    pub events: u64,
    /// Misses not explained because a ring was full or they came after the
    /// sampler's end.
    pub dropped: u64,
    /// By the cause that accounts for most of each miss, as the breakdown words them
    /// (`preempted by kworker/1:2`, `host stall (the vCPU did not run)`), most first.
    pub by_cause: Vec<(String, u64)>,
    /// Misses that nothing in the guest accounts for most of: the time left is the
    /// largest part (`host-stall`, `unaccounted`), or, in records written before the
    /// accounting, nothing moved.
    pub unexplained: u64,
    /// Misses in which each cause kind moved at all (a reason or seen).
    pub seen: Vec<(CauseKind, u64)>,
    /// The periods the explained misses cover: one stall that skipped 30 releases is
    /// one miss of 30 periods (0 in records written before it was kept).
    #[serde(default)]
    pub periods: u64,
    /// The time each cause accounted for where it was a reason, over every miss, in
    /// the words of `by_cause`, most first (ns).
    #[serde(default)]
    pub time_by_cause: Vec<(String, u64)>,
    /// The misses' lateness added (ns).
    #[serde(default)]
    pub lateness_ns: u64,
    /// What the counters in this guest accounted for of it (ns).
    #[serde(default)]
    pub accounted_ns: u64,
    /// Misses whose counters account for at least half their lateness.
    #[serde(default)]
    pub half_accounted: u64,
}

impl Breakdown {
    /// Adds one explained miss.
    pub fn add(&mut self, e: &Explained) {
        self.events += 1;
        self.periods += e.missed.max(1);
        if e.dominant().is_leftover() && !e.unread {
            self.unexplained += 1;
        }
        bump(&mut self.by_cause, e.dominant_phrase(), 1);
        for c in e.causes.iter().filter(|c| c.accounts_ns > 0) {
            bump(&mut self.time_by_cause, c.cause.phrase(), c.accounts_ns);
        }
        for c in e.causes.iter().chain(&e.seen) {
            let k = c.kind();
            if k.is_leftover() {
                continue;
            }
            match self.seen.iter_mut().find(|(kind, _)| *kind == k) {
                Some((_, n)) => *n += 1,
                None => self.seen.push((k, 1)),
            }
        }
        self.lateness_ns += e.lateness_ns;
        self.accounted_ns += e.accounted_ns;
        if e.half_accounted() {
            self.half_accounted += 1;
        }
        self.sort();
    }

    fn sort(&mut self) {
        self.by_cause
            .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        self.time_by_cause
            .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        self.seen.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }

    /// The time a cause (in the words of `by_cause`) accounted for where it was a
    /// reason.
    pub fn time_of(&self, phrase: &str) -> Option<u64> {
        self.time_by_cause
            .iter()
            .find(|(p, _)| p == phrase)
            .map(|(_, t)| *t)
    }

    /// The breakdown in one line: "30 misses: 21 host stall (the vCPU did not run)
    /// 63.0 ms, 6 preempted by kworker/1:2 4.10 ms, 3 with softirqs 60.0 us; counters
    /// here account for 7 % of 70.0 ms late".
    pub fn summary(&self) -> String {
        if self.events == 0 && self.dropped == 0 {
            return "no misses to explain".into();
        }
        let mut s = format!(
            "{} miss{}",
            self.events,
            if self.events == 1 { "" } else { "es" }
        );
        if self.periods > self.events {
            s.push_str(&format!(" ({} periods)", self.periods));
        }
        for (i, (phrase, n)) in self.by_cause.iter().enumerate() {
            s.push_str(if i == 0 { ": " } else { ", " });
            s.push_str(&format!("{n} {phrase}"));
            if let Some(t) = self.time_of(phrase).filter(|t| *t > 0) {
                s.push_str(&format!(" {}", Nanos::new(t)));
            }
        }
        if self.lateness_ns > 0 && !self.time_by_cause.is_empty() {
            s.push_str(&format!(
                "; counters here account for {:.0} % of {} late",
                100.0 * self.accounted_ns as f64 / self.lateness_ns as f64,
                Nanos::new(self.lateness_ns)
            ));
        }
        if self.dropped > 0 {
            s.push_str(&format!(
                " ({} more not explained: ring full)",
                self.dropped
            ));
        }
        s
    }

    /// Adds another breakdown (another sampler's, of the same run).
    pub fn absorb(&mut self, o: Breakdown) {
        self.events += o.events;
        self.periods += o.periods;
        self.dropped += o.dropped;
        self.unexplained += o.unexplained;
        self.lateness_ns += o.lateness_ns;
        self.accounted_ns += o.accounted_ns;
        self.half_accounted += o.half_accounted;
        for (phrase, n) in o.by_cause {
            bump(&mut self.by_cause, phrase, n);
        }
        for (phrase, t) in o.time_by_cause {
            bump(&mut self.time_by_cause, phrase, t);
        }
        for (kind, n) in o.seen {
            match self.seen.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, m)) => *m += n,
                None => self.seen.push((kind, n)),
            }
        }
        self.sort();
    }
}

fn bump(v: &mut Vec<(String, u64)>, key: String, by: u64) {
    match v.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += by,
        None => v.push((key, by)),
    }
}

/// What the sampler did, for the record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplerReport {
    /// Its period.
    pub period_ns: u64,
    /// Readings taken.
    pub samples: u64,
    /// The CPUs it ran on.
    pub cpus: String,
    /// Whether it shared a CPU with a watched thread (then it disturbs what it
    /// watches).
    pub shares_watched_cpu: bool,
    /// Mean time one reading took.
    pub reading_mean_ns: u64,
    /// Longest reading.
    pub reading_max_ns: u64,
    /// Scans of every thread (to name the thread that ran).
    pub task_scans: u64,
    /// Its own run time (its thread's schedstat; the run's samplers together when
    /// several processes explain), 0 in records written before it was kept.
    #[serde(default)]
    pub cpu_ns: u64,
    /// How long it ran (the longest of several).
    #[serde(default)]
    pub wall_ns: u64,
    /// What it reads, and what it cannot read here (with why).
    pub sources: Vec<String>,
}

impl SamplerReport {
    /// The share of one CPU its run time was over its life (the run's samplers
    /// together), `None` where not measured.
    pub fn cpu_share(&self) -> Option<f64> {
        (self.wall_ns > 0 && self.cpu_ns > 0).then(|| self.cpu_ns as f64 / self.wall_ns as f64)
    }
}

/// Every miss of a run explained: the record's `explanation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The `CLOCK_MONOTONIC` reading from which the misses' `at_ns` count, to set them
    /// beside other logs of the same machine (0 in records written before it was kept).
    #[serde(default)]
    pub clock_start_ns: u64,
    /// The lateness from which a release counts as a miss.
    pub threshold_ns: u64,
    /// The misses by dominant cause.
    pub breakdown: Breakdown,
    /// Each explained miss, the first [`ExplainConfig::keep`] in full.
    pub events: Vec<Explained>,
    /// Explained misses beyond those kept (in the breakdown, not listed).
    pub events_not_kept: u64,
    /// The sampler.
    pub sampler: SamplerReport,
}

impl Explanation {
    /// Adds another sampler's explanation (another process's threads of the same
    /// run): its misses, its breakdown (by dominant cause, most first) and its
    /// readings. The threshold and the sampler's CPUs stay this one's.
    pub fn absorb(&mut self, other: Explanation) {
        self.breakdown.absorb(other.breakdown);
        // Its misses count from its own start: from this one's.
        let shift = |at: u64| {
            if self.clock_start_ns == 0 || other.clock_start_ns == 0 {
                return at;
            }
            (at + other.clock_start_ns).saturating_sub(self.clock_start_ns)
        };
        let shifted: Vec<Explained> = other
            .events
            .into_iter()
            .map(|mut e| {
                e.at_ns = shift(e.at_ns);
                e
            })
            .collect();
        self.events.extend(shifted);
        self.events.sort_by_key(|e| e.at_ns);
        self.events_not_kept += other.events_not_kept;
        let (s, o) = (&mut self.sampler, other.sampler);
        s.reading_mean_ns = (s.reading_mean_ns * s.samples + o.reading_mean_ns * o.samples)
            / (s.samples + o.samples).max(1);
        s.samples += o.samples;
        s.reading_max_ns = s.reading_max_ns.max(o.reading_max_ns);
        s.task_scans += o.task_scans;
        s.cpu_ns += o.cpu_ns;
        s.wall_ns = s.wall_ns.max(o.wall_ns);
        s.shares_watched_cpu |= o.shares_watched_cpu;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A miss `lateness_us` late, judged from `w` as the sampler does.
    fn judged(w: WindowDeltas) -> Explained {
        let j = judge(&w);
        let lateness_ns = w.lateness.as_u64();
        Explained {
            accounted_share: j.accounted_ns as f64 / lateness_ns.max(1) as f64,
            accounted_ns: j.accounted_ns,
            causes_sum_ns: j.sum_ns,
            causes: j.causes,
            seen: j.seen,
            run_delay_ns: w.run_delay_ns,
            lateness_ns,
            ..explained(Vec::new())
        }
    }

    fn explained(causes: Vec<Timed>) -> Explained {
        Explained {
            thread: "timer-0".into(),
            cpu: Some(1),
            kind: MissKind::Late,
            seq: 7,
            at_ns: 1_000_000,
            lateness_ns: 2_000_000,
            missed: 0,
            window_ns: 4_000_000,
            causes,
            seen: Vec::new(),
            accounted_ns: 0,
            accounted_share: 0.0,
            causes_sum_ns: 0,
            run_ns: 0,
            run_delay_ns: 0,
            unread: false,
        }
    }

    fn on_a_vm(lateness_us: u64) -> WindowDeltas {
        WindowDeltas {
            lateness: Nanos::from_micros(lateness_us),
            tick_ns: 10_000_000,
            hypervisor: Some("KVM (Firecracker)".into()),
            ..WindowDeltas::default()
        }
    }

    fn kworker(ran_ns: u64) -> TaskRan {
        TaskRan {
            pid: 1,
            tid: 2,
            comm: "kworker/1:2".into(),
            policy: "OTHER".into(),
            ran_ns,
            over_ns: 1_000_000_000,
        }
    }

    fn explanation(thread: &str, causes: Vec<Timed>) -> Explanation {
        let e = Explained {
            thread: thread.into(),
            at_ns: 0,
            lateness_ns: 1_000,
            window_ns: 2_000,
            ..explained(causes)
        };
        let mut breakdown = Breakdown::default();
        breakdown.add(&e);
        Explanation {
            clock_start_ns: 0,
            threshold_ns: 1_000,
            breakdown,
            events: vec![e],
            events_not_kept: 0,
            sampler: SamplerReport {
                period_ns: 1_000_000,
                samples: 10,
                cpus: "0".into(),
                shares_watched_cpu: false,
                reading_mean_ns: 100,
                reading_max_ns: 200,
                task_scans: 1,
                cpu_ns: 0,
                wall_ns: 0,
                sources: Vec::new(),
            },
        }
    }

    #[test]
    fn absorbing_another_explanation_adds_its_misses_to_the_breakdown() {
        let steal = || vec![Cause::Steal { ns: 5_000 }.into()];
        let mut sut = explanation("a", steal());
        sut.absorb(explanation("b", steal()));
        sut.absorb(explanation("b", Vec::new()));
        assert_eq!(sut.breakdown.events, 3);
        assert_eq!(sut.breakdown.unexplained, 1);
        assert_eq!(
            sut.breakdown.summary(),
            "3 misses: 2 with the hypervisor's steal, 1 unexplained"
        );
        let threads: Vec<&str> = sut.events.iter().map(|e| e.thread.as_str()).collect();
        assert_eq!(threads, ["a", "b", "b"]);
        assert_eq!(
            (sut.sampler.samples, sut.sampler.reading_mean_ns),
            (30, 100)
        );
    }

    #[test]
    fn absorbed_misses_are_timed_from_the_first_samplers_start() {
        let mut sut = explanation("a", Vec::new());
        sut.clock_start_ns = 1_000_000;
        sut.events[0].at_ns = 500;
        let mut later = explanation("b", Vec::new());
        later.clock_start_ns = 1_000_200;
        later.events[0].at_ns = 100;
        sut.absorb(later);
        let at: Vec<(&str, u64)> = sut
            .events
            .iter()
            .map(|e| (e.thread.as_str(), e.at_ns))
            .collect();
        assert_eq!(at, [("b", 300), ("a", 500)]);
    }

    #[test]
    fn the_breakdown_counts_each_miss_under_the_cause_that_accounts_for_most() {
        let mut sut = Breakdown::default();
        // 3 misses of 4 ms where a softirq and an interrupt moved: the host's.
        for _ in 0..3 {
            sut.add(&judged(WindowDeltas {
                softirqs: vec![("SCHED".into(), 1)],
                interrupts: vec![("36:virtio1-req.0".into(), 1)],
                ..on_a_vm(4_000)
            }));
        }
        // 2 misses of 1 ms a kworker held for 800 us (the host the other 200 us).
        for _ in 0..2 {
            sut.add(&judged(WindowDeltas {
                run_delay_ns: 800_000,
                others_ran_ns: 800_000,
                top_other: Some(kworker(800_000)),
                ..on_a_vm(1_000)
            }));
        }
        // 1 miss of 20 ms, 30 ms of steal (20 ms certain).
        sut.add(&judged(WindowDeltas {
            steal_ns: 30_000_000,
            ..on_a_vm(20_000)
        }));
        assert_eq!(
            sut.by_cause,
            [
                ("host stall (the vCPU did not run)".to_string(), 3),
                ("preempted by kworker/1:2".to_string(), 2),
                ("with the hypervisor's steal".to_string(), 1),
            ]
        );
        assert_eq!(sut.unexplained, 3);
        // The time each cost where it was a reason: the host's 3 x 3.988 ms and
        // 2 x 200 us; the kworker's 2 x 800 us; the steal's 20 ms.
        assert_eq!(sut.time_of("with the hypervisor's steal"), Some(20_000_000));
        assert_eq!(sut.time_of("preempted by kworker/1:2"), Some(1_600_000));
        assert_eq!(
            sut.time_of("host stall (the vCPU did not run)"),
            Some(3 * 3_988_000 + 2 * 200_000)
        );
        assert_eq!(sut.time_by_cause[0].0, "with the hypervisor's steal");
        // Seen at all: the softirqs and interrupts, never as a reason.
        assert!(sut.seen.contains(&(CauseKind::Softirqs, 3)));
        assert!(sut.time_of("with softirqs").is_none());
        assert_eq!(sut.lateness_ns, 3 * 4_000_000 + 2 * 1_000_000 + 20_000_000);
        assert_eq!(sut.accounted_ns, 3 * 12_000 + 2 * 800_000 + 20_000_000);
        assert_eq!(sut.half_accounted, 3);
        assert_eq!(
            sut.summary(),
            "6 misses: 3 host stall (the vCPU did not run) 12.36 ms, 2 preempted by \
             kworker/1:2 1.60 ms, 1 with the hypervisor's steal 20.00 ms; counters here \
             account for 64 % of 34.00 ms late"
        );
    }

    #[test]
    fn a_miss_says_its_reasons_with_their_time_and_what_was_only_seen() {
        let sut = judged(WindowDeltas {
            softirqs: vec![("SCHED".into(), 1)],
            ..on_a_vm(4_360)
        });
        let text = sut.to_string();
        assert!(
            text.contains(
                "4.36 ms late on CPU 1: host stall: the vCPU did not run: 4.35 ms that \
                 nothing in this guest accounts for"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "seen, too small to be the reason: softirqs: SCHED 1 [6.0 us, 0 %: count x \
                 measured per-event cost, estimate]"
            ),
            "{text}"
        );
        assert!(text.ends_with("(counters here account for 0 %)"), "{text}");
        assert_eq!(sut.dominant(), CauseKind::HostStall);
    }

    #[test]
    fn records_keep_their_old_keys_and_old_records_still_read() {
        let sut = judged(WindowDeltas {
            run_delay_ns: 900_000,
            others_ran_ns: 900_000,
            top_other: Some(kworker(900_000)),
            ..on_a_vm(1_000)
        });
        let json = serde_json::to_value(&sut).unwrap();
        let first = &json["causes"][0];
        assert_eq!(first["cause"], "preempted");
        assert_eq!(first["run_delay_ns"], 900_000);
        assert_eq!(first["by"]["comm"], "kworker/1:2");
        assert_eq!(first["accounts_ns"], 900_000);
        assert_eq!(first["source"], "schedstat");
        assert_eq!(json["seen"][0]["cause"], "host-stall");
        let back: Explained = serde_json::from_value(json).unwrap();
        assert_eq!(back, sut);
        // Written before the accounting: causes without time, no seen.
        let old = r#"{"thread":"timer-0","cpu":1,"kind":"late","seq":3,"at_ns":5,
            "lateness_ns":1000,"missed":0,"window_ns":2000,
            "causes":[{"cause":"softirqs","kinds":[["SCHED",1]]}]}"#;
        let old: Explained = serde_json::from_str(old).unwrap();
        assert_eq!(old.dominant(), CauseKind::Softirqs);
        assert_eq!(old.causes[0].source, Source::None);
        assert!(old.seen.is_empty());
    }

    #[test]
    fn a_stall_that_skipped_releases_is_one_miss_of_its_periods() {
        let mut sut = Breakdown::default();
        let mut stall = explained(vec![Cause::Steal { ns: 30_000_000 }.into()]);
        stall.missed = 30;
        sut.add(&stall);
        sut.add(&explained(vec![]));
        assert_eq!((sut.events, sut.periods), (2, 31));
        assert_eq!(
            sut.summary(),
            "2 misses (31 periods): 1 unexplained, 1 with the hypervisor's steal"
        );
    }

    #[test]
    fn a_reporter_reports_only_beyond_its_threshold_and_counts_drops() {
        let (mut sut, mut watched) = pair("t".into(), 2, Nanos::from_micros(100));
        sut.release(1, Nanos::from_millis(1), Nanos::from_micros(99), 0);
        assert!(watched.consumer.pop().is_none());
        sut.release(2, Nanos::from_millis(2), Nanos::from_micros(100), 0);
        sut.release(3, Nanos::from_millis(3), Nanos::from_micros(5), 2);
        sut.release(4, Nanos::from_millis(4), Nanos::from_micros(500), 0);
        let a = watched.consumer.pop().unwrap();
        assert_eq!((a.kind, a.seq), (MissKind::Late, 2));
        let b = watched.consumer.pop().unwrap();
        assert_eq!((b.kind, b.missed), (MissKind::Missed, 2));
        assert!(watched.consumer.pop().is_none());
        assert_eq!(watched.watch.dropped.load(Ordering::Relaxed), 1);
        sut.attach();
        assert_eq!(
            watched.watch.tid.load(Ordering::Acquire),
            crate::sched::thread_id()
        );
    }
}
