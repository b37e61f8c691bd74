//! Cooperative migration (seed 002 §2.2, §3.1): a task of class RT1+ or normal wraps
//! code that endangers latency (blocking I/O, a lock shared with NRT tasks, a system
//! call that may sleep) in a [`Migrator::section`]. On an RT CPU it first moves itself
//! to the NRT CPUs, so the RT0 task of that CPU is never held up by it.
//!
//! ARTiS did this in the kernel, on `preempt_disable()`; from user space the task
//! says so itself. Every call is an *attempt* and updates ARTiS's statistics
//! (§3.2.4): attempts, a time-weighted average period between attempts, the time of
//! the last one. The balancer reads them, through a lock-free SPSC ring, to predict
//! the next attempt and not move the task back to an RT CPU just before it.
//!
//! ```no_run
//! use ictus_core::CpuSet;
//! use ictus_shield::migrate::{Migrator, Return};
//! use ictus_shield::partition::Partition;
//! let online: CpuSet = "0-3".parse().unwrap();
//! let mut m = Migrator::new(Partition::new("2-3".parse().unwrap(), &online).unwrap(), Return::Restore);
//! {
//!     let _section = m.section();
//!     // write a file, take a lock shared with NRT tasks, ...
//! } // back where it was
//! ```

use ictus_core::sync::spsc::Producer;
use ictus_os::{clock, sched};
use serde::{Deserialize, Serialize};

use crate::partition::Partition;

/// Weight of the newest period in the time-weighted average (as the kernel's load
/// averages: recent periods count more).
pub const PERIOD_WEIGHT: f64 = 0.25;

/// ARTiS's per-task migration statistics (seed 002 §3.2.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationStats {
    /// Migration attempts (sections entered), wherever the task was.
    pub attempts: u64,
    /// Sections entered on an RT CPU, which moved the task.
    pub moves: u64,
    /// Time-weighted average period between attempts, in ns (0 before the second).
    pub mean_period_ns: f64,
    /// Monotonic time of the last attempt, in ns.
    pub last_attempt_ns: Option<u64>,
}

impl MigrationStats {
    /// Records an attempt at `now_ns`.
    pub fn record(&mut self, now_ns: u64) {
        if let Some(last) = self.last_attempt_ns {
            let period = now_ns.saturating_sub(last) as f64;
            self.mean_period_ns = if self.attempts < 2 {
                period
            } else {
                self.mean_period_ns + PERIOD_WEIGHT * (period - self.mean_period_ns)
            };
        }
        self.attempts += 1;
        self.last_attempt_ns = Some(now_ns);
    }

    /// When the next attempt is expected: last attempt plus the mean period (`None`
    /// before two attempts: no period known).
    pub fn predicted_next_ns(&self) -> Option<u64> {
        (self.attempts >= 2)
            .then_some(self.last_attempt_ns)
            .flatten()
            .map(|last| last + self.mean_period_ns as u64)
    }

    /// The anti ping-pong rule of seed 002 §3.2.4: whether the task may be moved back
    /// to an RT CPU at `now_ns`.
    ///
    /// - Next attempt predicted after now: only if it is at least `horizon_ns` away
    ///   (a system-wide constant).
    /// - Predicted before now (overdue): only if it is overdue by more than one mean
    ///   period (the behaviour changed); an attempt just missed is still likely soon.
    /// - No prediction (fewer than two attempts): yes.
    pub fn may_return(&self, now_ns: u64, horizon_ns: u64) -> bool {
        let Some(next) = self.predicted_next_ns() else {
            return true;
        };
        if next > now_ns {
            next - now_ns >= horizon_ns
        } else {
            (now_ns - next) as f64 > self.mean_period_ns
        }
    }
}

/// What a section does when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Return {
    /// Put the affinity back as it was: the task returns at once (standalone use).
    Restore,
    /// Stay on the NRT CPUs: the balancer brings the task back when its next attempt
    /// is not predicted soon (ARTiS's way).
    Stay,
    /// Record the attempt only, never move (stock Linux placement, for comparison).
    Never,
}

/// One attempt, as the balancer receives it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The task's thread id.
    pub tid: i32,
    /// When.
    pub at_ns: u64,
    /// The CPU it was on.
    pub cpu: Option<usize>,
    /// Whether it moved.
    pub moved: bool,
    /// Its statistics after this attempt.
    pub stats: MigrationStats,
}

/// A task's migration guard factory and statistics.
#[derive(Debug)]
pub struct Migrator {
    partition: Partition,
    stats: MigrationStats,
    ret: Return,
    tid: i32,
    reporter: Option<Producer<Attempt>>,
    dropped_reports: u64,
    failures: u64,
}

impl Migrator {
    /// A migrator for the calling thread.
    pub fn new(partition: Partition, ret: Return) -> Migrator {
        Migrator {
            partition,
            stats: MigrationStats::default(),
            ret,
            tid: sched::thread_id() as i32,
            reporter: None,
            dropped_reports: 0,
            failures: 0,
        }
    }

    /// Sends every attempt to the balancer through `producer` (lock-free; when the ring
    /// is full the report is dropped and counted, never waited for).
    pub fn report_to(mut self, producer: Producer<Attempt>) -> Migrator {
        self.reporter = Some(producer);
        self
    }

    /// The statistics so far.
    pub fn stats(&self) -> MigrationStats {
        self.stats
    }

    /// Reports dropped because the balancer's ring was full.
    pub fn dropped_reports(&self) -> u64 {
        self.dropped_reports
    }

    /// Moves that the kernel refused (the section then ran where the task was).
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Enters a section that endangers latency (`artis_try_to_migrate`): records the
    /// attempt and, on an RT CPU, moves to the NRT CPUs first.
    pub fn section(&mut self) -> Section<'_> {
        let now = clock::monotonic_now().as_u64();
        let cpu = sched::current_cpu();
        self.stats.record(now);
        let mut restore = None;
        let mut moved = false;
        if self.ret != Return::Never && cpu.is_some_and(|c| self.partition.is_rt(c)) {
            let before = sched::current_affinity().ok();
            match sched::set_affinity(&self.partition.nrt) {
                Ok(()) => {
                    moved = true;
                    self.stats.moves += 1;
                    if self.ret == Return::Restore {
                        restore = before;
                    }
                }
                Err(_) => self.failures += 1,
            }
        }
        if let Some(r) = &mut self.reporter {
            let attempt = Attempt {
                tid: self.tid,
                at_ns: now,
                cpu,
                moved,
                stats: self.stats,
            };
            if r.push(attempt).is_err() {
                self.dropped_reports += 1;
            }
        }
        Section {
            migrator: self,
            restore,
        }
    }
}

/// A section in progress; dropping it ends the section.
#[derive(Debug)]
pub struct Section<'a> {
    migrator: &'a mut Migrator,
    restore: Option<ictus_core::CpuSet>,
}

impl Section<'_> {
    /// The task's statistics, this attempt included.
    pub fn stats(&self) -> MigrationStats {
        self.migrator.stats
    }
}

impl Drop for Section<'_> {
    fn drop(&mut self) {
        if let Some(cpus) = self.restore.take()
            && sched::set_affinity(&cpus).is_err()
        {
            self.migrator.failures += 1;
        }
    }
}

/// Nanoseconds, for callers keeping their own clock.
pub fn now_ns() -> u64 {
    clock::monotonic_now().as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_core::CpuSet;
    use ictus_os::facts;
    use proptest::prelude::*;

    #[test]
    fn the_mean_period_follows_the_attempts() {
        let mut s = MigrationStats::default();
        s.record(1_000);
        assert_eq!(s.predicted_next_ns(), None);
        s.record(2_000);
        assert_eq!(s.mean_period_ns, 1_000.0);
        assert_eq!(s.predicted_next_ns(), Some(3_000));
        s.record(4_000);
        assert_eq!(s.mean_period_ns, 1_250.0);
        assert_eq!(s.attempts, 3);
        assert_eq!(s.last_attempt_ns, Some(4_000));
    }

    #[test]
    fn a_task_about_to_attempt_again_stays_away() {
        let mut s = MigrationStats::default();
        for t in [0, 200_000, 400_000] {
            s.record(t);
        }
        // Next predicted at 600 us; the horizon is 1 ms.
        assert!(!s.may_return(450_000, 1_000_000), "predicted soon");
        assert!(!s.may_return(700_000, 1_000_000), "just overdue");
        assert!(
            s.may_return(900_000, 1_000_000),
            "overdue by more than a period"
        );
        // A rarely attempting task: predicted far away.
        let mut rare = MigrationStats::default();
        for t in [0, 200_000_000, 400_000_000] {
            rare.record(t);
        }
        assert!(rare.may_return(401_000_000, 1_000_000));
        assert!(MigrationStats::default().may_return(0, 1_000_000));
    }

    proptest! {
        #[test]
        fn the_mean_period_stays_within_the_observed_periods(gaps in prop::collection::vec(1u64..1_000_000, 2..50)) {
            let mut s = MigrationStats::default();
            let mut t = 0;
            s.record(t);
            for g in &gaps {
                t += g;
                s.record(t);
            }
            let (lo, hi) = (*gaps.iter().min().unwrap() as f64, *gaps.iter().max().unwrap() as f64);
            prop_assert!(s.mean_period_ns >= lo - 1e-6 && s.mean_period_ns <= hi + 1e-6);
            prop_assert_eq!(s.attempts, gaps.len() as u64 + 1);
        }
    }

    #[test]
    fn a_section_on_an_rt_cpu_moves_to_the_nrt_cpus_and_back() {
        let online = facts::online_cpus();
        if online.len() < 2 {
            return;
        }
        let rt_cpu = *online.cpus().last().unwrap();
        let partition = Partition::new(CpuSet::from_cpus([rt_cpu]), &online).unwrap();
        let nrt = partition.nrt.clone();
        let (inside, after, stats) = std::thread::spawn(move || {
            sched::set_affinity(&CpuSet::from_cpus([rt_cpu])).unwrap();
            let (tx, mut rx) = ictus_core::sync::spsc::channel(4);
            let mut m = Migrator::new(partition, Return::Restore).report_to(tx);
            let inside = {
                let _s = m.section();
                (sched::current_affinity().unwrap(), sched::current_cpu())
            };
            let after = sched::current_affinity().unwrap();
            let report = rx.pop().unwrap();
            assert!(report.moved);
            (inside, after, m.stats())
        })
        .join()
        .unwrap();
        assert_eq!(inside.0, nrt);
        assert!(inside.1.is_some_and(|c| nrt.contains(c)));
        assert_eq!(after, CpuSet::from_cpus([rt_cpu]));
        assert_eq!((stats.attempts, stats.moves), (1, 1));
    }

    #[test]
    fn never_only_counts() {
        let online = facts::online_cpus();
        if online.len() < 2 {
            return;
        }
        let rt_cpu = *online.cpus().last().unwrap();
        let partition = Partition::new(CpuSet::from_cpus([rt_cpu]), &online).unwrap();
        let (aff, stats) = std::thread::spawn(move || {
            sched::set_affinity(&CpuSet::from_cpus([rt_cpu])).unwrap();
            let mut m = Migrator::new(partition, Return::Never);
            let aff = {
                let _s = m.section();
                sched::current_affinity().unwrap()
            };
            (aff, m.stats())
        })
        .join()
        .unwrap();
        assert_eq!(aff, CpuSet::from_cpus([rt_cpu]));
        assert_eq!((stats.attempts, stats.moves), (1, 0));
    }
}
