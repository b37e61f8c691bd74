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
//!
//! A room of its own above `ictus-os` (the Linux layer, whose readers of the kernel's
//! counters, scheduling calls and clocks it uses), below the probes and the executive
//! that report misses to it: it holds no system call and no `unsafe` of its own.

#![forbid(unsafe_code)]
#![allow(
    clippy::disallowed_types,
    reason = "the explainer's target (tid, CPU) and drop count: single words one thread publishes and the sampler reads; no protocol for loom to explore"
)]

mod account;
mod advice;
mod cause;
mod explained;
#[cfg(test)]
mod fixtures;
mod miss;
mod sampler;

pub use account::{
    EVENT_COST, FAULT_COST, IdleWindow, IrqTime, Judged, NAMED_SHARE, WindowDeltas, judge,
};
pub use advice::{ALL_KINDS, CauseTime, TimeByCause, advice, advice_of};
pub use cause::{Cause, CauseKind, Source, TaskRan, Timed};
pub use explained::{Breakdown, Explained, Explanation, SamplerReport};
pub use miss::{MissEvent, MissKind, MissReporter};
pub(crate) use miss::{WatchedThread, pair};
pub use sampler::{ExplainConfig, Explainer, HOST_BUDGET, RecentMisses, unavailable};

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    use ictus_core::Nanos;

    /// A miss of `timer-0`, judged from `w` as the sampler does.
    fn judged(w: WindowDeltas) -> Explained {
        crate::fixtures::judged_miss("timer-0", &w)
    }

    /// A miss of `timer-0` 2 ms late with `causes`.
    fn explained(causes: Vec<Timed>) -> Explained {
        crate::fixtures::miss_of("timer-0", 2_000_000, causes)
    }

    fn on_a_vm(lateness_us: u64) -> WindowDeltas {
        crate::fixtures::window(lateness_us, true)
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
        crate::fixtures::explanation_of(1_000, vec![e])
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
            ictus_os::sched::thread_id()
        );
    }
}
