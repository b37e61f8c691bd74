use super::*;
use crate::scenario::spec::{Every, TaskGroup};
use std::sync::mpsc;
use std::time::Duration;

use ictus_core::CpuSet;

use crate::scenario::spec::{self, GroupClass, Scenario};

use super::options::{BalancerMode, ScenarioOptions, WatchFlow};
use super::result::{MinAvgMax, RESULT_SCHEMA, ScenarioResult, Timeline, TimelineBucket};
use super::sampler::parse_stat;
use super::task::{calibrate, one_loop};
use super::timeline::coarsen;

#[test]
fn a_stat_line_gives_state_and_cpu() {
    let line = b"1234 (a (weird) name) R 1 1234 1234 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 100 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
    assert_eq!(parse_stat(line), Some((b'R', 3)));
    assert_eq!(parse_stat(b"garbage"), None);
}

#[test]
fn min_avg_max_orders_its_figures() {
    let sut = MinAvgMax::of([3.0, 1.0, 2.0]).unwrap();
    assert_eq!((sut.min, sut.avg, sut.max), (1.0, 2.0, 3.0));
    assert_eq!(MinAvgMax::of([]), None);
}

#[test]
fn coarsening_merges_neighbours_weighted_by_samples() {
    let bucket = |start_ns, samples, v: f64| TimelineBucket {
        start_ns,
        samples,
        running: vec![vec![v]],
    };
    let mut sut = Timeline {
        bucket_ns: 10,
        cpus: vec![0],
        groups: vec!["g".into()],
        buckets: vec![bucket(0, 1, 1.0), bucket(10, 3, 2.0), bucket(20, 2, 4.0)],
    };
    coarsen(&mut sut, 2);
    assert_eq!(sut.bucket_ns, 20);
    assert_eq!(sut.buckets.len(), 2);
    assert_eq!(sut.buckets[0].samples, 4);
    assert_eq!(sut.buckets[0].running[0][0], 1.75);
    assert_eq!(sut.buckets[1].start_ns, 20);
}

#[test]
fn one_loop_is_not_constant() {
    assert_ne!(one_loop(1), one_loop(2));
    assert!(calibrate() > 0.0);
}

/// A small real run: 2 groups x 2 tasks, tiny loop counts. Structure only.
#[test]
fn a_small_run_reports_every_task_group_cpu_and_the_timeline() {
    let machine = spec::machine_cpus();
    if machine.len() < 2 {
        return;
    }
    let last = *machine.cpus().last().unwrap();
    let scenario = Scenario {
        name: "small".into(),
        description: String::new(),
        rt_cpus: CpuSet::from_cpus([last]),
        duration_limit: Some(Duration::from_secs(20)),
        sample_period: Duration::from_millis(1),
        timeline_bucket: Duration::from_millis(10),
        groups: vec![
            TaskGroup {
                name: "crunch".into(),
                count: 2,
                cpus: machine.clone(),
                class: GroupClass::Normal,
                loops: 200_000,
                sleep: None,
                section: None,
            },
            TaskGroup {
                name: "sections".into(),
                count: 2,
                cpus: machine.clone(),
                class: GroupClass::Normal,
                loops: 200_000,
                sleep: Some(Every {
                    loops: 20_000,
                    duration: Duration::from_millis(1),
                }),
                section: Some(Every {
                    loops: 1_000,
                    duration: Duration::from_micros(5),
                }),
            },
        ],
    };
    for mode in [BalancerMode::None, BalancerMode::Ictus] {
        let mut calls = 0;
        let sut = run(&scenario, &ScenarioOptions::new(mode), |_| {
            calls += 1;
            WatchFlow::Continue
        })
        .unwrap();
        assert!(calls >= 1, "the watcher is called at least at the end");
        assert_eq!(sut.schema, RESULT_SCHEMA);
        assert!(sut.complete, "{:?}", sut.stopped);
        assert_eq!(sut.tasks.len(), 4);
        assert!(sut.loop_ns > 0.0);
        for t in &sut.tasks {
            assert!(t.finished && t.loops_done == 200_000);
            assert!(t.completion_ns > 0 && t.completion_ns <= sut.wall_ns);
            assert!(t.tid > 0);
            if !t.cpu_share.is_empty() {
                let sum: f64 = t.cpu_share.iter().map(|s| s.percent).sum();
                assert!((sum - 100.0).abs() < 1e-6, "{sum}");
            }
            assert!(t.voluntary_ctxt_switches.is_some());
        }
        let sections = sut.tasks.iter().filter(|t| t.group == "sections");
        for t in sections {
            assert_eq!(t.sections.attempts, 200);
        }
        assert_eq!(sut.groups.len(), 2);
        for g in &sut.groups {
            let c = g.completion_ns.unwrap();
            assert!(c.min <= c.avg && c.avg <= c.max);
            for s in [
                g.involuntary_ctxt_switches,
                g.voluntary_ctxt_switches,
                g.migrations,
            ] {
                let s = s.unwrap();
                assert!(s.min <= s.avg && s.avg <= s.max);
            }
        }
        assert_eq!(sut.cpus.len(), machine.len());
        assert!(sut.first_end_ns.is_some());
        assert!(!sut.timeline.buckets.is_empty());
        assert_eq!(sut.timeline.cpus, machine.cpus());
        for b in &sut.timeline.buckets {
            assert_eq!(b.running.len(), machine.len());
            assert!(b.running.iter().all(|row| row.len() == 2));
        }
        assert_eq!(sut.balancer_report.is_some(), mode == BalancerMode::Ictus);
        let p = sut
            .provenance
            .as_ref()
            .expect("a new result has a provenance");
        assert_eq!(p.tool, "ictus");
        assert_eq!(p.hostname, sut.hostname);
        assert_eq!(p.online_cpus, sut.cpus_online);
        // Both stamps have the same fixed-width RFC 3339 form, so text order is time order.
        let end = p.end_time.as_deref().expect("stamped at the end");
        assert!(p.start_time.as_str() <= end, "{} > {end}", p.start_time);
        let json = serde_json::to_string(&sut).unwrap();
        let back: ScenarioResult = serde_json::from_str(&json).unwrap();
        assert_eq!(back.tasks.len(), 4);
    }
}

/// Ten years.
const DECADE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

#[test]
fn a_stop_wakes_tasks_sleeping_or_busy_for_years_and_a_sampler_with_a_long_period() {
    let machine = spec::machine_cpus();
    if machine.len() < 2 {
        return;
    }
    let scenario = Scenario {
        name: "decade".into(),
        description: String::new(),
        rt_cpus: CpuSet::from_cpus([*machine.cpus().last().unwrap()]),
        duration_limit: None,
        sample_period: DECADE,
        timeline_bucket: DECADE,
        groups: vec![
            TaskGroup {
                name: "sleepers".into(),
                count: 2,
                cpus: machine.clone(),
                class: GroupClass::Normal,
                loops: 10,
                sleep: Some(Every {
                    loops: 1,
                    duration: DECADE,
                }),
                section: None,
            },
            TaskGroup {
                name: "section".into(),
                count: 1,
                cpus: machine.clone(),
                class: GroupClass::Normal,
                loops: 10,
                sleep: None,
                section: Some(Every {
                    loops: 1,
                    duration: DECADE,
                }),
            },
        ],
    };
    for mode in [BalancerMode::None, BalancerMode::Ictus] {
        let s = scenario.clone();
        let (tx, rx) = mpsc::channel();
        // The run on a thread of its own, so that a stop that is not seen fails
        // the test instead of hanging it.
        std::thread::spawn(move || {
            let mut calls = 0;
            let result = run(&s, &ScenarioOptions::new(mode), |_| {
                calls += 1;
                // Let the tasks fall asleep first.
                if calls > 4 {
                    WatchFlow::Stop
                } else {
                    WatchFlow::Continue
                }
            });
            let _ = tx.send(result);
        });
        let sut = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the run under {mode} did not stop"))
            .unwrap();
        assert!(!sut.complete);
        assert_eq!(sut.stopped.as_deref(), Some("stopped on request"));
        assert_eq!(sut.tasks.len(), 3);
        for t in &sut.tasks {
            assert!(!t.finished, "{} {}", t.group, t.index);
            assert!(t.loops_done >= 1 && t.loops_done < 10, "{}", t.loops_done);
        }
        assert_eq!(sut.balancer_report.is_some(), mode == BalancerMode::Ictus);
    }
}

#[test]
fn a_stop_from_the_watcher_ends_the_run_incomplete() {
    let machine = spec::machine_cpus();
    if machine.len() < 2 {
        return;
    }
    let scenario = Scenario {
        name: "long".into(),
        description: String::new(),
        rt_cpus: CpuSet::from_cpus([*machine.cpus().last().unwrap()]),
        duration_limit: None,
        sample_period: Duration::from_millis(1),
        timeline_bucket: Duration::from_millis(10),
        groups: vec![TaskGroup {
            name: "forever".into(),
            count: 2,
            cpus: machine.clone(),
            class: GroupClass::Normal,
            loops: u64::MAX / 4,
            sleep: None,
            section: None,
        }],
    };
    let sut = run(&scenario, &ScenarioOptions::new(BalancerMode::None), |_| {
        WatchFlow::Stop
    })
    .unwrap();
    assert!(!sut.complete);
    assert_eq!(sut.stopped.as_deref(), Some("stopped on request"));
    assert!(sut.tasks.iter().all(|t| !t.finished));
    assert!(sut.groups[0].completion_ns.is_none());
}
