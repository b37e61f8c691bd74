//! The watchdog on the real machine, in this process: a SCHED_FIFO loop pinned to
//! CPU 1 that never sleeps is demoted to SCHED_OTHER within a few limits; a FIFO
//! thread that sleeps 1 ms every 10 ms is left alone.
//!
//! The watchdog watches only this process's threads (`only_pids`), so it never
//! touches anything else on the machine. Needs the right to set SCHED_FIFO and
//! CPUs 0 and 1 online; skips visibly otherwise.

use std::time::{Duration, Instant};

use ictus_core::CpuSet;
use ictus_os::sched::{self, Policy};
use ictus_shield::watchdog::{Config, Watchdog};

const LIMIT: Duration = Duration::from_millis(300);
/// How long the runaway loop may spin before the test gives up on the watchdog.
const GIVE_UP: Duration = Duration::from_secs(5);
const RT_CPU: usize = 1;

fn skip_reason() -> Option<String> {
    let online = ictus_os::facts::online_cpus();
    if !online.contains(0) || !online.contains(RT_CPU) {
        return Some(format!(
            "needs CPUs 0 and {RT_CPU} online (online: {online})"
        ));
    }
    let probe = std::thread::spawn(|| {
        sched::set_policy(Policy::Fifo { priority: 10 }).map_err(|e| e.to_string())
    });
    match probe.join() {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("SCHED_FIFO refused: {e}")),
        Err(_) => Some("the probe thread panicked".into()),
    }
}

/// Pins the calling thread to the RT CPU at FIFO 10.
fn become_rt() {
    sched::set_affinity(&CpuSet::from_cpus([RT_CPU])).unwrap();
    sched::set_policy(Policy::Fifo { priority: 10 }).unwrap();
}

/// Spins for `d` without any system call that could sleep.
fn spin(d: Duration) {
    let begin = Instant::now();
    while begin.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_runaway_fifo_loop_is_demoted_and_a_sleeping_one_is_not() {
    if let Some(why) = skip_reason() {
        ictus_os::testing::skipped(
            "a_runaway_fifo_loop_is_demoted_and_a_sleeping_one_is_not",
            &why,
        );
        return;
    }
    let config = Config {
        cpus: Some(CpuSet::from_cpus([RT_CPU])),
        run_on: Some(CpuSet::from_cpus([0])),
        only_pids: Some(vec![std::process::id() as i32]),
        ..Config::new(LIMIT)
    };
    let sut = Watchdog::start(config).unwrap();
    assert!(sut.placement().refused.is_empty(), "{:?}", sut.placement());
    assert_eq!(sut.placement().policy, "fifo 99");

    // A FIFO thread that busy-works 9 ms and sleeps 1 ms, for four limits.
    let polite = std::thread::spawn(|| {
        become_rt();
        let begin = Instant::now();
        while begin.elapsed() < LIMIT * 4 {
            spin(Duration::from_millis(9));
            std::thread::sleep(Duration::from_millis(1));
        }
        sched::current_policy().unwrap()
    });
    assert_eq!(polite.join().unwrap(), Policy::Fifo { priority: 10 });
    assert_eq!(
        sut.demotions(),
        Vec::new(),
        "the sleeping thread is left alone"
    );

    // A FIFO loop that never sleeps, watching its own policy.
    let runaway = std::thread::spawn(|| {
        become_rt();
        let tid = sched::thread_id() as i32;
        let begin = Instant::now();
        while begin.elapsed() < GIVE_UP {
            if sched::current_policy().unwrap() == (Policy::Other { nice: 0 }) {
                return (tid, Some(begin.elapsed()));
            }
        }
        (tid, None)
    });
    let (tid, demoted_after) = runaway.join().unwrap();
    let demotions = sut.stop();
    let after = demoted_after.unwrap_or_else(|| {
        panic!("the loop still ran SCHED_FIFO after {GIVE_UP:?}; demotions: {demotions:?}")
    });
    assert!(after >= LIMIT, "demoted after {after:?}, before the limit");
    assert_eq!(demotions.len(), 1, "{demotions:?}");
    let d = &demotions[0];
    assert_eq!(d.tid, tid);
    assert_eq!(d.pid, std::process::id() as i32);
    assert_eq!(d.policy_before, Policy::Fifo { priority: 10 });
    assert_eq!(d.cpu, RT_CPU);
    assert!(d.held_for >= LIMIT, "{d:?}");
    assert_eq!(d.refused, None);
}
