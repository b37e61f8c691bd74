//! Who ran on a CPU between two scans (or two readings): the thread that held it off
//! the watched one, and what all the others ran.

use std::collections::HashMap;

use ictus_core::Nanos;

use crate::cause::TaskRan;

/// Of the threads (but `skip`) that ran on `cpu` between two scans, the one that
/// held it: one whose scheduling class outranks the watched thread's (`own`, from
/// [`class_rank`]) first, as a FIFO 99 burner is the cause over a kworker that ran
/// longer in the second between scans; then the one that ran most.
pub(super) fn preemptor(
    before: &Scan,
    after: &Scan,
    cpu: usize,
    skip: &[i64],
    own: u32,
) -> Option<TaskRan> {
    after
        .tasks
        .iter()
        .filter(|(tid, s)| s.processor == cpu && !skip.contains(tid))
        .filter_map(|(tid, s)| {
            // One the scan before did not list was born since: all its run time is
            // in the window.
            let ran = s
                .run_ns
                .saturating_sub(before.tasks.get(tid).map_or(0, |b| b.run_ns));
            (ran > 0).then_some((*tid, s, ran))
        })
        .max_by_key(|(tid, s, ran)| (class_rank(s.policy, s.rt_priority) > own, *ran, *tid))
        .map(|(tid, s, ran)| TaskRan {
            pid: s.pid,
            tid,
            comm: s.comm.clone(),
            policy: policy_words(s.policy, s.rt_priority),
            ran_ns: ran,
            over_ns: after.t.saturating_sub(before.t).as_u64(),
        })
}

/// What the threads (but `skip`) on `cpu` ran between two scans, together.
pub(super) fn ran_on(before: &Scan, after: &Scan, cpu: usize, skip: &[i64]) -> u64 {
    after
        .tasks
        .iter()
        .filter(|(tid, s)| s.processor == cpu && !skip.contains(tid))
        .map(|(tid, s)| {
            s.run_ns
                .saturating_sub(before.tasks.get(tid).map_or(0, |b| b.run_ns))
        })
        .sum()
}

/// Who preempts whom: deadline over real-time (by priority) over the rest.
pub(super) fn class_rank(policy: u32, priority: u32) -> u32 {
    match policy {
        6 => 1000,
        1 | 2 => 1 + priority,
        _ => 0,
    }
}

pub(super) fn policy_words(policy: u32, priority: u32) -> String {
    match policy {
        1 => format!("FIFO {priority}"),
        2 => format!("RR {priority}"),
        3 => "BATCH".into(),
        5 => "IDLE".into(),
        6 => "DEADLINE".into(),
        _ => "OTHER".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Seen;
    use super::*;
    use ictus_core::Nanos;

    fn scan(t: u64, tasks: &[(i64, &str, usize, u32, u32, u64)]) -> Scan {
        Scan {
            t: Nanos::new(t),
            tasks: tasks
                .iter()
                .map(|&(tid, comm, processor, policy, rt_priority, run_ns)| {
                    let seen = Seen {
                        pid: tid,
                        comm: comm.into(),
                        processor,
                        policy,
                        rt_priority,
                        run_ns,
                    };
                    (tid, seen)
                })
                .collect(),
        }
    }

    #[test]
    fn a_thread_that_outranks_the_watched_one_is_named_before_one_that_ran_longer() {
        let before = scan(
            0,
            &[(10, "kworker", 1, 0, 0, 0), (11, "burner", 1, 1, 99, 0)],
        );
        let after = scan(
            100_000_000,
            &[
                (10, "kworker", 1, 0, 0, 29_000_000),
                (11, "burner", 1, 1, 99, 5_000_000),
            ],
        );
        // Watched at FIFO 95: the FIFO 99 burner held the CPU, though it ran less.
        let by = preemptor(&before, &after, 1, &[], class_rank(1, 95)).unwrap();
        assert_eq!(
            (by.comm.as_str(), by.policy.as_str()),
            ("burner", "FIFO 99")
        );
        // Watched at FIFO 99 itself: neither outranks it, so the one that ran most.
        let by = preemptor(&before, &after, 1, &[], class_rank(1, 99)).unwrap();
        assert_eq!(by.comm, "kworker");
        // Skipped threads (the watched ones, the sampler) and other CPUs never count.
        assert_eq!(
            preemptor(&before, &after, 1, &[10], class_rank(1, 99))
                .unwrap()
                .comm,
            "burner"
        );
        assert!(preemptor(&before, &after, 0, &[], 0).is_none());
    }
}

/// What a scan saw of one thread.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) pid: i64,
    pub(super) comm: String,
    pub(super) processor: usize,
    pub(super) policy: u32,
    pub(super) rt_priority: u32,
    pub(super) run_ns: u64,
}

pub(super) struct Scan {
    pub(super) t: Nanos,
    pub(super) tasks: HashMap<i64, Seen>,
}
