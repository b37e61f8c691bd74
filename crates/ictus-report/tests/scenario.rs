//! The scenario reports of a small hand-made result (2 CPUs, 2 groups of 2 tasks):
//! Markdown snapshots of one run and of two placements side by side, the timeline's
//! structure, and the result file read back or refused by its schema (a result from
//! before results carried a provenance still reads and renders).

use std::time::Duration;

use ictus_core::CpuSet;
use ictus_os::facts::{PreemptModel, Preemption};
use ictus_os::provenance::Provenance;
use ictus_report::ReportError;
use ictus_report::scenario::{compare_markdown, markdown, read_result, timeline_svg, write_files};
use ictus_shield::balancer::{Decision, Report};
use ictus_shield::class::RtPolicy;
use ictus_shield::partition::Partition;
use ictus_shield::scenario::run::{
    CpuIdleTime, CpuShare, GroupStats, MinAvgMax, PolicyOutcome, SamplerInfo, SectionCounts,
    TaskResult, Timeline, TimelineBucket,
};
use ictus_shield::scenario::spec::{Every, GroupClass, Scenario, TaskGroup};
use ictus_shield::scenario::{BalancerMode, RESULT_SCHEMA, RESULT_VERSION, ScenarioResult};

fn cpus(list: &str) -> CpuSet {
    list.parse().unwrap()
}

fn share(a: f64) -> Vec<CpuShare> {
    vec![
        CpuShare { cpu: 0, percent: a },
        CpuShare {
            cpu: 1,
            percent: 100.0 - a,
        },
    ]
}

fn mam(min: f64, avg: f64, max: f64) -> Option<MinAvgMax> {
    Some(MinAvgMax { min, avg, max })
}

fn task(group: &str, index: u32, completion_s: f64, on_cpu0: f64, involuntary: u64) -> TaskResult {
    TaskResult {
        group: group.into(),
        index,
        tid: 1000 + index as i32 + if group == "linux" { 0 } else { 10 },
        affinity: cpus("0-1"),
        policy: if group == "linux" { "other" } else { "fifo 50" }.into(),
        finished: true,
        loops_done: 1_000_000,
        completion_ns: (completion_s * 1e9) as u64,
        cpu_time_ns: 170_000_000,
        cpu_share: share(on_cpu0),
        samples: 1000,
        samples_running: 990,
        voluntary_ctxt_switches: Some(2),
        involuntary_ctxt_switches: Some(involuntary),
        migrations: Some(3),
        migrations_sampled: 2,
        sections: SectionCounts {
            attempts: if group == "linux" { 0 } else { 850 },
            moves: if group == "linux" { 0 } else { 12 },
            failures: 0,
            dropped_reports: 0,
        },
    }
}

/// The provenance of the fixture: a fixed host and time, so the snapshots hold.
fn provenance() -> Provenance {
    Provenance {
        tool: "ictus".into(),
        tool_version: "0.1.0".into(),
        argv: vec!["ictus".into(), "scenario".into(), "tiny.toml".into()],
        start_time: "2023-11-14T22:13:20.000000Z".into(),
        end_time: Some("2023-11-14T22:13:22.000000Z".into()),
        hostname: "testhost".into(),
        kernel_release: "6.1.0-test".into(),
        kernel_version: "#1 SMP PREEMPT_DYNAMIC".into(),
        preemption: Preemption {
            model: PreemptModel::Full,
            dynamic: true,
            source: "test".into(),
        },
        cmdline: "quiet".into(),
        cpu_model: Some("Test CPU @ 3.00GHz".into()),
        cpu_count: 2,
        online_cpus: cpus("0-1"),
        smt: Some(false),
        isolated_cpus: CpuSet::default(),
        governor: Some("performance".into()),
        virtualization: None,
    }
}

/// The scenario of every fixture: two groups of two tasks on NRT RT.
fn tiny() -> Scenario {
    Scenario {
        name: "tiny".into(),
        description: "Two groups of two tasks on NRT RT.".into(),
        rt_cpus: cpus("1"),
        duration_limit: Some(Duration::from_secs(30)),
        sample_period: Duration::from_millis(1),
        timeline_bucket: Duration::from_millis(500),
        groups: vec![
            TaskGroup {
                name: "linux".into(),
                count: 2,
                cpus: cpus("0-1"),
                class: GroupClass::Normal,
                loops: 1_000_000,
                sleep: None,
                section: None,
            },
            TaskGroup {
                name: "rt".into(),
                count: 2,
                cpus: cpus("0-1"),
                class: GroupClass::Rt1 {
                    policy: RtPolicy::Fifo,
                    priority: 50,
                },
                loops: 1_000_000,
                sleep: None,
                section: Some(Every {
                    loops: 1_200,
                    duration: Duration::from_micros(5),
                }),
            },
        ],
    }
}

/// The figures of the fixture's two groups, the linux group getting `a` % of the
/// CPU time and the rt group the rest; `rt_class` is the rt group's class.
fn group_stats(a: f64, rt_class: GroupClass) -> Vec<GroupStats> {
    vec![
        GroupStats {
            name: "linux".into(),
            class: GroupClass::Normal,
            tasks: 2,
            finished: 2,
            completion_ns: mam(1.2e9, 1.35e9, 1.5e9),
            cpu_time_ns: mam(1.7e8, 1.7e8, 1.7e8),
            cpu_share: share(a),
            voluntary_ctxt_switches: mam(2.0, 2.0, 2.0),
            involuntary_ctxt_switches: mam(40.0, 42.0, 44.0),
            migrations: mam(3.0, 3.0, 3.0),
            migrations_source: "kernel".into(),
            section_attempts: None,
            section_moves: None,
        },
        GroupStats {
            name: "rt".into(),
            class: rt_class,
            tasks: 2,
            finished: 2,
            completion_ns: mam(0.4e9, 0.45e9, 0.5e9),
            cpu_time_ns: mam(1.7e8, 1.7e8, 1.7e8),
            cpu_share: share(100.0 - a),
            voluntary_ctxt_switches: mam(2.0, 2.0, 2.0),
            involuntary_ctxt_switches: mam(3.0, 4.0, 5.0),
            migrations: mam(3.0, 3.0, 3.0),
            migrations_source: "kernel".into(),
            section_attempts: mam(850.0, 850.0, 850.0),
            section_moves: mam(12.0, 12.0, 12.0),
        },
    ]
}

/// A run of the same scenario under `mode`, with figures that differ between modes.
fn fixture(mode: BalancerMode) -> ScenarioResult {
    let ictus = mode == BalancerMode::Ictus;
    let scenario = tiny();
    let a = if ictus { 90.0 } else { 50.0 };
    let tasks = vec![
        task("linux", 0, 1.2, a, 40),
        task("linux", 1, 1.5, a, 44),
        task("rt", 0, 0.4, 100.0 - a, 3),
        task("rt", 1, 0.5, 100.0 - a, 5),
    ];
    let groups = group_stats(a, scenario.groups[1].class);
    let bucket = |start_ns: u64, linux: [f64; 2], rt: [f64; 2]| TimelineBucket {
        start_ns,
        samples: 500,
        running: vec![vec![linux[0], rt[0]], vec![linux[1], rt[1]]],
    };
    ScenarioResult {
        schema: RESULT_SCHEMA.into(),
        version: RESULT_VERSION,
        tool_version: "0.1.0".into(),
        hostname: "testhost".into(),
        kernel: "6.1.0-test".into(),
        started_unix_ms: 1_700_000_000_000,
        provenance: Some(provenance()),
        source: Some("examples/scenarios/tiny.toml".into()),
        scenario,
        balancer: mode,
        cpus_online: cpus("0-1"),
        cpus_in_play: cpus("0-1"),
        partition: Partition {
            rt: cpus("1"),
            nrt: cpus("0"),
            groups: None,
        },
        loop_ns: 170.4,
        complete: true,
        stopped: None,
        wall_ns: 1_500_000_000,
        first_end_ns: Some(400_000_000),
        sampler: SamplerInfo {
            period_ns: 1_000_000,
            policy: "fifo 99".into(),
            cpus: cpus("0"),
            samples: 1500,
            missed: 0,
            cpu_time_ns: 30_000_000,
        },
        groups,
        tasks,
        cpus: vec![
            CpuIdleTime {
                cpu: 0,
                rt: false,
                idle_until_first_end_ns: Some(0),
                idle_ns: 0,
                steal_ns: 10_000_000,
            },
            CpuIdleTime {
                cpu: 1,
                rt: true,
                idle_until_first_end_ns: Some(0),
                idle_ns: if ictus { 30_000_000 } else { 0 },
                steal_ns: 0,
            },
        ],
        timeline: Timeline {
            bucket_ns: 500_000_000,
            cpus: vec![0, 1],
            groups: vec!["linux".into(), "rt".into()],
            buckets: vec![
                bucket(0, [1.0, 1.0], [1.0, 1.0]),
                bucket(500_000_000, [1.5, 0.5], [0.0, 0.0]),
                bucket(1_000_000_000, [1.0, 0.0], [0.0, 0.0]),
            ],
        },
        policies: vec![
            PolicyOutcome {
                group: "linux".into(),
                asked: "other".into(),
                obtained: "other".into(),
                refused_tasks: 0,
                reason: None,
            },
            PolicyOutcome {
                group: "rt".into(),
                asked: "fifo 50".into(),
                obtained: "fifo 50".into(),
                refused_tasks: 0,
                reason: None,
            },
        ],
        balancer_report: ictus.then(|| Report {
            decisions: vec![Decision {
                at_ns: 12_000_000,
                tid: 1000,
                from: Some(1),
                to: 0,
                reason: "normal task to the least loaded NRT CPU".into(),
            }],
            samples: 1500,
            passes: 75,
            withheld: 4,
            attempts_received: 1700,
            refused: 0,
            rt_share: vec![(0, 0.0), (1, 0.5)],
            notes: vec!["the balancer ran SCHED_FIFO".into()],
            ..Report::default()
        }),
        steal_ns: 10_000_000,
        warnings: if ictus {
            vec!["the host stole 1.0 % of the CPU time during the run".into()]
        } else {
            Vec::new()
        },
    }
}

#[test]
fn markdown_report_of_one_run() {
    insta::assert_snapshot!(
        "scenario_ictus",
        markdown(&fixture(BalancerMode::Ictus), Some("timeline.svg"))
    );
}

#[test]
fn markdown_of_two_placements_side_by_side() {
    let runs = [fixture(BalancerMode::None), fixture(BalancerMode::Ictus)];
    insta::assert_snapshot!("scenario_compare", compare_markdown(&runs));
}

#[test]
fn the_timeline_has_one_panel_per_cpu_and_one_line_per_group() {
    let r = fixture(BalancerMode::None);
    let sut = timeline_svg(&r);
    assert!(sut.starts_with("<svg"), "{}", &sut[..sut.len().min(200)]);
    assert!(sut.contains("CPU 0 (NRT)") && sut.contains("CPU 1 (RT)"));
    // Text sits on its own line in plotters' SVG.
    assert_eq!(
        sut.matches("\nlinux\n").count(),
        2,
        "one legend entry per panel"
    );
    assert_eq!(sut.matches("\nrt\n").count(), 2);
    assert!(
        sut.matches("<polyline").count() >= 2 * 2 * 2,
        "a line and a legend mark per group per panel"
    );
    assert_eq!(sut, timeline_svg(&r), "deterministic");
}

#[test]
fn an_empty_timeline_still_draws() {
    let mut r = fixture(BalancerMode::None);
    r.timeline.buckets.clear();
    let sut = timeline_svg(&r);
    assert!(sut.contains("no samples"), "{sut}");
}

#[test]
fn the_files_are_written_and_the_result_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let r = fixture(BalancerMode::Ictus);
    let [json, md, svg] = write_files(dir.path(), &r).unwrap();
    assert!(md.ends_with("report.md") && svg.ends_with("timeline.svg"));
    assert_eq!(read_result(&json).unwrap(), r);
}

#[test]
fn a_foreign_or_broken_result_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    std::fs::write(&path, "{\"schema\": \"ictus.run-record\", \"version\": 1}").unwrap();
    assert!(matches!(
        read_result(&path),
        Err(ReportError::Schema { .. })
    ));
    std::fs::write(&path, "{\n  \"schema\": ").unwrap();
    match read_result(&path) {
        Err(ReportError::Json(at)) => assert_eq!(at.place.line, 2),
        other => panic!("expected a JSON error, got {other:?}"),
    }
    let mut v = serde_json::to_value(fixture(BalancerMode::None)).unwrap();
    v["version"] = 99.into();
    std::fs::write(&path, v.to_string()).unwrap();
    let err = read_result(&path).unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
    // A FIFO in its place is refused without blocking (a read would wait for ever).
    let fifo = dir.path().join("fifo.json");
    ictus_os::testing::mkfifo(&fifo).unwrap();
    let err = read_result(&fifo).unwrap_err();
    assert!(matches!(err, ReportError::Input(_)), "{err}");
    assert!(err.to_string().contains("FIFO"), "{err}");
}

#[test]
fn a_result_from_before_the_provenance_still_reads_and_renders() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    let mut v = serde_json::to_value(fixture(BalancerMode::None)).unwrap();
    v.as_object_mut().unwrap().remove("provenance");
    std::fs::write(&path, v.to_string()).unwrap();
    let sut = read_result(&path).unwrap();
    assert_eq!(sut.provenance, None);
    let md = markdown(&sut, None);
    assert!(
        md.contains("Host `testhost`, kernel `6.1.0-test`, ictus 0.1.0."),
        "{md}"
    );
    assert!(!md.contains("Measured "), "{md}");
}

#[test]
fn the_report_shows_the_provenance_as_the_probe_reports_do() {
    let md = markdown(&fixture(BalancerMode::None), None);
    assert!(
        md.contains(
            "testhost · Linux 6.1.0-test (preemption full (dynamic)) · Test CPU @ 3.00GHz, \
             2 CPUs, SMT off · bare metal"
        ),
        "{md}"
    );
    assert!(
        md.contains("Measured 2023-11-14 22:13 to 2023-11-14 22:13 UTC with ictus 0.1.0."),
        "{md}"
    );
}
