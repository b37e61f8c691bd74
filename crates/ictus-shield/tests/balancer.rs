//! The balancer with real threads on this machine: structure only, never timings.
//!
//! The RT CPU is the last online CPU. Two busy normal threads, one RT1 thread
//! (`SCHED_FIFO` 10 where permitted, else `SCHED_OTHER`: the test then skips the one
//! assertion that needs FIFO) that runs one section in `Return::Stay` mode, and one
//! normal thread that exits early are registered; the balancer runs a few hundred ms.

#![allow(
    clippy::disallowed_types,
    reason = "a test's flags between its threads"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ictus_core::CpuSet;
use ictus_os::sched::{self, Policy};
use ictus_os::{affinity_of, facts};
use ictus_shield::balancer::{Balancer, Config, TaskRole};
use ictus_shield::migrate::{Migrator, Return};
use ictus_shield::partition;

/// Spins until `stop`, with short sleeps so that the machine stays usable.
fn spin_until(stop: &AtomicBool) {
    // Acquire: pairs with the Release store of `stop` in the test body.
    while !stop.load(Ordering::Acquire) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn the_balancer_places_real_threads_inside_their_allowed_cpus_and_gives_them_back() {
    let online = facts::online_cpus();
    let Some(&rt_cpu) = online.cpus().last() else {
        return;
    };
    if online.len() < 2 {
        // One CPU: no partition to balance over.
        return;
    }
    let partition = partition::logical(CpuSet::from_cpus([rt_cpu]), &online).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut balancer = Balancer::new(partition.clone(), Config::default());
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    let mut normal_tids = Vec::new();

    for _ in 0..2 {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::clone(&stop);
        threads.push(thread::spawn(move || {
            tx.send(sched::thread_id() as i32).unwrap();
            spin_until(&stop);
        }));
        let tid = rx.recv().unwrap();
        drop(balancer.register(tid, TaskRole::Normal, online.clone()));
        normal_tids.push(tid);
    }

    // The RT1 thread: FIFO 10 if permitted; one section once told to.
    let (tid_tx, tid_rx) = mpsc::channel();
    let (ring_tx, ring_rx) = mpsc::channel();
    let section_now = Arc::new(AtomicBool::new(false));
    let section_done = Arc::new(AtomicBool::new(false));
    let rt1 = {
        let stop = Arc::clone(&stop);
        let partition = partition.clone();
        let (section_now, section_done) = (Arc::clone(&section_now), Arc::clone(&section_done));
        thread::spawn(move || {
            let fifo = sched::set_policy(Policy::Fifo { priority: 10 }).is_ok();
            tid_tx.send((sched::thread_id() as i32, fifo)).unwrap();
            let ring = ring_rx.recv().unwrap();
            let mut migrator = Migrator::new(partition, Return::Stay).report_to(ring);
            // Acquire (both loads): pair with the Release stores in the test body.
            while !section_now.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(1));
            }
            {
                let _section = migrator.section();
                // A blocking call, as one that endangers latency.
                thread::sleep(Duration::from_millis(1));
            }
            // Release: pairs with the Acquire load in the test body.
            section_done.store(true, Ordering::Release);
            spin_until(&stop);
        })
    };
    let (rt1_tid, fifo) = tid_rx.recv().unwrap();
    ring_tx
        .send(balancer.register(rt1_tid, TaskRole::Rt1, online.clone()))
        .unwrap();

    // A normal thread that exits early: the balancer drops it.
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let short = thread::spawn(move || {
        tx.send(sched::thread_id() as i32).unwrap();
        let _ = go_rx.recv();
    });
    let short_tid = rx.recv().unwrap();
    drop(balancer.register(short_tid, TaskRole::Normal, online.clone()));

    let normal_affinity_before: Vec<CpuSet> = normal_tids
        .iter()
        .map(|&tid| affinity_of::affinity_of(tid).unwrap())
        .collect();
    let running = balancer.start().unwrap();
    thread::sleep(Duration::from_millis(50));
    go_tx.send(()).unwrap();
    short.join().unwrap();
    // Release: pairs with the Acquire load in the RT1 thread.
    section_now.store(true, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(10);
    // Acquire: pairs with the Release store in the RT1 thread.
    while !section_done.load(Ordering::Acquire) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(250));
    let rt1_affinity = affinity_of::affinity_of(rt1_tid).unwrap();
    let report = running.stop();
    let normal_affinity_after: Vec<CpuSet> = normal_tids
        .iter()
        .map(|&tid| affinity_of::affinity_of(tid).unwrap())
        .collect();
    // Release: pairs with the Acquire loads in the threads.
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    rt1.join().unwrap();

    assert!(report.samples > 0);
    assert!(report.passes > 0);
    assert!(
        !report.decisions.is_empty(),
        "the placement at start is logged"
    );
    let registered = [normal_tids[0], normal_tids[1], rt1_tid, short_tid];
    for d in &report.decisions {
        assert!(registered.contains(&d.tid), "{d:?}");
        assert!(online.contains(d.to), "inside the allowed CPUs: {d:?}");
        assert!(d.from.is_none_or(|c| online.contains(c)), "{d:?}");
        assert!(!d.reason.is_empty());
    }
    assert_eq!(
        report.decisions.len() as u64,
        report.to_rt + report.to_nrt,
        "every decision is counted"
    );
    assert!(
        report
            .decisions
            .iter()
            .any(|d| d.tid == rt1_tid && d.to == rt_cpu),
        "the RT1 thread was placed on the RT CPU at least once: {:#?}",
        report.decisions
    );
    for &tid in &normal_tids {
        assert!(
            report.decisions.iter().any(|d| d.tid == tid),
            "normal task {tid} placed at start"
        );
    }
    assert!(
        report.attempts_received >= 1,
        "the RT1 section was reported"
    );
    assert!(report.section_ends_received >= 1, "and its end");
    assert!(
        report.dropped_tasks.contains(&short_tid),
        "the thread that exited is dropped: {report:#?}"
    );
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains(&short_tid.to_string()))
    );
    assert_eq!(report.rt_share.len(), online.len());
    assert!(
        report
            .rt_share
            .iter()
            .all(|&(_, s)| (0.0..=1.0).contains(&s))
    );
    assert!(
        report.supervisor_fifo || report.notes.iter().any(|n| n.contains("SCHED_OTHER")),
        "a refused FIFO is noted"
    );
    assert_eq!(
        normal_affinity_after, normal_affinity_before,
        "the affinity is given back at stop"
    );
    if fifo {
        // With FIFO the RT1 thread is real-time: back on its RT CPU after its section.
        assert_eq!(rt1_affinity, CpuSet::from_cpus([rt_cpu]));
        assert!(report.pinned_at_stop.contains(&(rt1_tid, rt_cpu)));
    }
    // Without FIFO (SCHED_OTHER) the RT1 thread counts in L, not RT; where it ends is
    // not asserted.
}
