//! A miss explained: its causes with their times, the breakdown of a run's misses
//! by the cause that accounts for most, the sampler's own report, and all of it
//! together as a record keeps it.

use ictus_core::Nanos;
use serde::{Deserialize, Serialize};
use std::fmt;

use super::cause::{CauseKind, Source, Timed};
use super::miss::MissKind;

/// One explained miss.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
pub(super) const UNREAD: &str = "not read by the sampler";

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

pub(super) fn bump(v: &mut Vec<(String, u64)>, key: String, by: u64) {
    match v.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += by,
        None => v.push((key, by)),
    }
}

/// What the sampler did, for the record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// What it may cost: a share of one CPU (its part of the host's budget; the
    /// samplers' sum when several processes explain), 0 in records written before
    /// it was kept or where it was not bounded.
    #[serde(default)]
    pub budget: f64,
    /// The most it stretched its period and scans' spacing to hold its budget (1:
    /// never; 0 in records written before it was kept).
    #[serde(default)]
    pub slowest: u32,
    /// How long it ran stretched.
    #[serde(default)]
    pub stretched_ns: u64,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The `CLOCK_MONOTONIC` reading from which the misses' `at_ns` count, to set them
    /// beside other logs of the same machine (0 in records written before it was kept).
    #[serde(default)]
    pub clock_start_ns: u64,
    /// The lateness from which a release counts as a miss.
    pub threshold_ns: u64,
    /// The misses by dominant cause.
    pub breakdown: Breakdown,
    /// Each explained miss, the first [`ExplainConfig::keep`](crate::ExplainConfig::keep) in full.
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
        s.budget += o.budget;
        s.slowest = s.slowest.max(o.slowest);
        s.stretched_ns = s.stretched_ns.max(o.stretched_ns);
        s.wall_ns = s.wall_ns.max(o.wall_ns);
        s.shares_watched_cpu |= o.shares_watched_cpu;
    }
}
