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
//! The ring also tells the balancer when the task is inside a section, so that it never
//! pins the task onto an RT CPU in the middle of one: a section sends one report when
//! it starts, **before** the task touches its affinity, and one when it ends
//! ([`SectionStart::in_section`]). Sending the start first matters: if the balancer's move
//! lands just after the task's own, the kernel serialises the two affinity changes of
//! the task under that task's lock, so the balancer's check of the ring right after its
//! move is bound to see the report, and it moves the task off the RT CPU again (see
//! `balancer`). The task never waits for the balancer: a full ring drops the report and
//! counts it.
//!
//! ```no_run
//! use ictus_core::CpuSet;
//! use ictus_shield::migrate::{Migrator, Return};
//! use ictus_shield::partition;
//! let online: CpuSet = "0-3".parse().unwrap();
//! let mut m = Migrator::new(partition::logical("2-3".parse().unwrap(), &online).unwrap(), Return::Restore);
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

/// One report of a section, as the balancer receives it: its start (the attempt) or
/// its end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SectionStart {
    /// The task's thread id.
    pub tid: i32,
    /// When.
    pub at_ns: u64,
    /// The CPU it was on (at the start: before any move; at the end: after the section).
    pub cpu: Option<usize>,
    /// Whether the section moves the task off an RT CPU. The start report is sent
    /// before the move, so there it says the move is being made; the end report says
    /// whether the kernel carried it out.
    pub moved: bool,
    /// Its statistics after this attempt.
    pub stats: MigrationStats,
    /// Whether the task is inside the section after this report: true for the report
    /// sent when a section starts, false for the one sent when it ends.
    #[serde(default = "in_section_default")]
    pub in_section: bool,
}

/// Reports written before end reports existed were all section starts.
fn in_section_default() -> bool {
    true
}

/// A task's migration guard factory and statistics.
#[derive(Debug)]
pub struct Migrator {
    partition: Partition,
    stats: MigrationStats,
    ret: Return,
    tid: i32,
    reporter: Option<Producer<SectionStart>>,
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
    pub fn report_to(mut self, producer: Producer<SectionStart>) -> Migrator {
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
    /// attempt, reports it, and, on an RT CPU, moves to the NRT CPUs first.
    pub fn section(&mut self) -> Section<'_> {
        let now = clock::monotonic_now().as_u64();
        let cpu = sched::current_cpu();
        self.stats.record(now);
        let moving = self.ret != Return::Never && cpu.is_some_and(|c| self.partition.is_rt(c));
        // The start is reported before the affinity changes: the balancer's check
        // after its own move relies on this order (see the module docs).
        self.report(now, cpu, moving, true);
        let mut restore = None;
        let mut moved = false;
        if moving {
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
        Section {
            migrator: self,
            restore,
            moved,
        }
    }

    /// Sends one report to the balancer, if there is one; never waits.
    fn report(&mut self, at_ns: u64, cpu: Option<usize>, moved: bool, in_section: bool) {
        if let Some(r) = &mut self.reporter {
            let attempt = SectionStart {
                tid: self.tid,
                at_ns,
                cpu,
                moved,
                stats: self.stats,
                in_section,
            };
            if r.push(attempt).is_err() {
                self.dropped_reports += 1;
            }
        }
    }
}

/// A section in progress; dropping it ends the section (and reports the end).
#[derive(Debug)]
pub struct Section<'a> {
    migrator: &'a mut Migrator,
    restore: Option<ictus_core::CpuSet>,
    moved: bool,
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
        // The end is reported after the affinity is back: until the balancer reads it,
        // it still treats the task as inside the section.
        let now = clock::monotonic_now().as_u64();
        let cpu = sched::current_cpu();
        self.migrator.report(now, cpu, self.moved, false);
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

    /// The last online CPU, and the partition that makes it the RT CPU; `None`, after
    /// saying that `test` was skipped, on a machine of one CPU.
    fn last_cpu_as_rt(test: &str) -> Option<(usize, Partition)> {
        let online = facts::online_cpus();
        if online.len() < 2 {
            ictus_os::testing::skipped(test, "needs two online CPUs");
            return None;
        }
        let rt_cpu = *online.cpus().last().unwrap();
        let partition = crate::partition::logical(CpuSet::from_cpus([rt_cpu]), &online).unwrap();
        Some((rt_cpu, partition))
    }

    #[test]
    fn a_section_on_an_rt_cpu_moves_to_the_nrt_cpus_and_back() {
        let Some((rt_cpu, partition)) =
            last_cpu_as_rt("a_section_on_an_rt_cpu_moves_to_the_nrt_cpus_and_back")
        else {
            return;
        };
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
            let start = rx.pop().unwrap();
            assert!(start.moved && start.in_section);
            assert_eq!(start.cpu, Some(rt_cpu));
            let end = rx.pop().unwrap();
            assert!(end.moved && !end.in_section);
            assert!(end.at_ns >= start.at_ns);
            assert_eq!(rx.pop(), None);
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
    fn every_section_reports_its_start_then_its_end() {
        let Some((_, partition)) = last_cpu_as_rt("every_section_reports_its_start_then_its_end")
        else {
            return;
        };
        let reports = std::thread::spawn(move || {
            let (tx, mut rx) = ictus_core::sync::spsc::channel(8);
            let mut m = Migrator::new(partition, Return::Never).report_to(tx);
            for _ in 0..3 {
                let _s = m.section();
            }
            std::iter::from_fn(|| rx.pop()).collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        let phases: Vec<bool> = reports.iter().map(|r| r.in_section).collect();
        assert_eq!(phases, [true, false, true, false, true, false]);
        assert_eq!(reports[5].stats.attempts, 3);
        assert!(reports.iter().all(|r| !r.moved));
    }

    #[test]
    fn a_full_ring_drops_and_counts_reports_without_waiting() {
        let online = facts::online_cpus();
        let partition = match online.cpus().last() {
            Some(&last) if online.len() >= 2 => {
                crate::partition::logical(CpuSet::from_cpus([last]), &online).unwrap()
            }
            _ => return,
        };
        let (tx, mut rx) = ictus_core::sync::spsc::channel(1);
        let mut sut = Migrator::new(partition, Return::Never).report_to(tx);
        drop(sut.section());
        assert_eq!(sut.dropped_reports(), 1, "the end did not fit");
        assert!(rx.pop().unwrap().in_section);
    }

    #[test]
    fn an_attempt_without_in_section_reads_as_a_start() {
        let json = r#"{"tid":1,"at_ns":5,"cpu":null,"moved":false,
            "stats":{"attempts":1,"moves":0,"mean_period_ns":0.0,"last_attempt_ns":5}}"#;
        let sut: SectionStart = serde_json::from_str(json).unwrap();
        assert!(sut.in_section);
    }

    #[test]
    fn never_only_counts() {
        let online = facts::online_cpus();
        if online.len() < 2 {
            ictus_os::testing::skipped("never_only_counts", "needs two online CPUs");
            return;
        }
        let rt_cpu = *online.cpus().last().unwrap();
        let partition = crate::partition::logical(CpuSet::from_cpus([rt_cpu]), &online).unwrap();
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
