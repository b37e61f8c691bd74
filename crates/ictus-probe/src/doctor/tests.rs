use super::text::bytes;
use super::*;
use ictus_core::{CpuSet, Nanos};
use ictus_os::facts::{
    Attempt, BootParams, Cache, Capabilities, CgroupMembership, CgroupMode, Cgroups, Clocksource,
    CpuIdle, CpuIdleStates, CpusetAccess, IdleState, IrqAffinity, KernelInfo, PmQosDevice,
    PreemptModel, Preemption, ResumeLatency, Rlimit, RtBudget, StealTime, parse_kernel_config,
};

/// A tuned bare-metal PREEMPT_RT machine on which everything is available.
fn tuned_rt_machine() -> PlatformFacts {
    PlatformFacts {
        online: "0-7".parse().unwrap(),
        cpu_model: Some("Test CPU".into()),
        smt: Some(false),
        sibling_groups: (0..8).map(|c| CpuSet::from_cpus([c])).collect(),
        caches: vec![Cache {
            level: 1,
            kind: "Data".into(),
            size_bytes: Some(32 << 10),
            line_bytes: Some(64),
            shared_cpus: CpuSet::from_cpus([0]),
        }],
        numa_nodes: CpuSet::from_cpus([0]),
        kernel: KernelInfo {
            release: "6.12.0-rt".into(),
            version: "#1 SMP PREEMPT_RT".into(),
            machine: "x86_64".into(),
            hostname: "rt".into(),
        },
        preemption: Preemption {
            model: PreemptModel::Rt,
            dynamic: false,
            source: "/sys/kernel/realtime = 1".into(),
        },
        config: Some(parse_kernel_config(
            "CONFIG_HZ=1000\nCONFIG_NO_HZ_FULL=y\nCONFIG_HWLAT_TRACER=y\n",
            "/proc/config.gz",
        )),
        clock_resolution: Some(Nanos::new(1)),
        clocksource: Clocksource {
            current: Some("tsc".into()),
            available: vec!["tsc".into(), "hpet".into()],
        },
        fifo: Attempt::Succeeded,
        rtprio: Some(Rlimit {
            soft: Some(95),
            hard: Some(95),
        }),
        memlock: Some(Rlimit {
            soft: None,
            hard: None,
        }),
        capabilities: Some(Capabilities {
            effective: 1 << Capabilities::SYS_NICE | 1 << Capabilities::IPC_LOCK,
        }),
        rt_throttle: Some(RtBudget::from_micros(-1, 1_000_000)),
        rt_throttle_writable: true,
        deadline: Attempt::Succeeded,
        cgroups: Cgroups {
            mode: CgroupMode::V2,
            memberships: vec![CgroupMembership {
                hierarchy: 0,
                controllers: vec![],
                path: "/".into(),
            }],
            cpu_rt_budget: None,
            cpuset: Some(CpusetAccess {
                version: 2,
                directory: "/sys/fs/cgroup".into(),
                writable: true,
                effective_cpus: Some("0-7".parse().unwrap()),
            }),
        },
        boot: BootParams::parse("isolcpus=domain,managed_irq,1-7 nohz_full=1-7 rcu_nocbs=1-7"),
        isolated: "1-7".parse().unwrap(),
        nohz_full: Some("1-7".parse().unwrap()),
        irq: IrqAffinity {
            irqs: 20,
            writable: 20,
            default_affinity: Some("01".into()),
        },
        irqbalance: false,
        swaps: vec![],
        thp: Some("madvise".into()),
        mlock: Attempt::Succeeded,
        governor: Some("performance".into()),
        idle: CpuIdle {
            cpu_dma_latency: PmQosDevice {
                present: true,
                writable: true,
            },
            ..CpuIdle::default()
        },
        virtualization: None,
        steal: None,
        tracers: Some(vec![
            "hwlat".into(),
            "timerlat".into(),
            "osnoise".into(),
            "nop".into(),
        ]),
    }
}

fn eperm() -> Attempt {
    Attempt::Failed {
        errno: 1,
        error: "Operation not permitted".into(),
    }
}

fn find(audit: &Audit, id: CheckId) -> &Check {
    audit.checks.iter().find(|c| c.id == id).unwrap()
}

#[test]
fn a_tuned_rt_machine_passes_every_check_without_caveats() {
    let sut = audit_from(&tuned_rt_machine());
    for c in &sut.checks {
        assert_eq!(c.status, Status::Available, "{c:?}");
        assert_eq!(c.advice, None, "{c:?}");
    }
    assert!(sut.verdict.blockers.is_empty());
    assert!(sut.verdict.notes.is_empty(), "{:?}", sut.verdict.notes);
    assert!(sut.verdict.summary.contains("every check passed"));
}

#[test]
fn the_checks_come_in_the_documented_order() {
    let sut = audit_from(&tuned_rt_machine());
    let ids: Vec<CheckId> = sut.checks.iter().map(|c| c.id).collect();
    assert_eq!(ids, CheckId::ALL);
}

#[test]
fn fifo_refused_with_eperm_needs_privilege_and_blocks() {
    let mut facts = tuned_rt_machine();
    facts.fifo = eperm();
    facts.rtprio = Some(Rlimit {
        soft: Some(0),
        hard: Some(0),
    });
    let sut = audit_from(&facts);
    let c = find(&sut, CheckId::RtPrivileges);
    assert_eq!(c.status, Status::NeedsPrivilege);
    assert!(c.detail.contains("EPERM"), "{}", c.detail);
    assert!(c.detail.contains("RLIMIT_RTPRIO 0"), "{}", c.detail);
    let advice = c.advice.as_deref().unwrap();
    assert!(advice.contains("setcap cap_sys_nice"), "{advice}");
    assert!(advice.contains("ulimit -r 95"), "{advice}");
    assert_eq!(sut.verdict.blockers.len(), 1);
    assert!(sut.verdict.summary.starts_with("This machine cannot"));
}

#[test]
fn fifo_refused_in_a_cgroup_without_rt_budget_points_at_the_cgroup() {
    let mut facts = tuned_rt_machine();
    facts.fifo = eperm();
    facts.cgroups.memberships = vec![CgroupMembership {
        hierarchy: 1,
        controllers: vec!["cpu".into()],
        path: "/batch".into(),
    }];
    facts.cgroups.cpu_rt_budget = Some(RtBudget::from_micros(0, 1_000_000));
    let sut = check_rt_privileges(&facts);
    assert!(sut.advice.unwrap().contains("cpu.rt_runtime_us"));
}

#[test]
fn preempt_none_is_missing_with_boot_advice_and_a_note() {
    let mut facts = tuned_rt_machine();
    facts.preemption = Preemption {
        model: PreemptModel::None,
        dynamic: true,
        source: "kernel log \"Dynamic Preempt: none\"".into(),
    };
    let sut = audit_from(&facts);
    let c = find(&sut, CheckId::Preemption);
    assert_eq!(c.status, Status::Missing);
    assert!(c.advice.as_deref().unwrap().contains("preempt=full"));
    assert!(c.advice.as_deref().unwrap().contains("PREEMPT_RT"));
    assert!(sut.verdict.blockers.is_empty());
    assert!(sut.verdict.summary.contains("with caveats"));
    assert!(sut.verdict.summary.contains("preemption model none"));
}

#[test]
fn default_rt_throttling_stalls_fifty_milliseconds_and_advises_a_watchdog() {
    let mut facts = tuned_rt_machine();
    facts.rt_throttle = Some(RtBudget::from_micros(950_000, 1_000_000));
    let sut = check_rt_throttling(&facts);
    assert_eq!(sut.status, Status::Available);
    assert!(
        sut.detail
            .contains("a busy SCHED_FIFO task is stalled about 50 ms every second"),
        "{}",
        sut.detail
    );
    let advice = sut.advice.unwrap();
    assert!(advice.contains("sysctl kernel.sched_rt_runtime_us=-1"));
    assert!(advice.contains("watchdog"));
}

#[test]
fn a_read_only_throttle_needs_privilege() {
    let mut facts = tuned_rt_machine();
    facts.rt_throttle = Some(RtBudget::from_micros(950_000, 1_000_000));
    facts.rt_throttle_writable = false;
    let sut = check_rt_throttling(&facts);
    assert_eq!(sut.status, Status::NeedsPrivilege);
    assert!(sut.advice.unwrap().starts_with("as root"));
}

#[test]
fn deadline_refusals_are_told_apart() {
    let mut facts = tuned_rt_machine();
    facts.deadline = eperm();
    assert_eq!(check_sched_deadline(&facts).status, Status::NeedsPrivilege);
    facts.deadline = Attempt::Failed {
        errno: 22,
        error: "Invalid argument".into(),
    };
    assert_eq!(check_sched_deadline(&facts).status, Status::Missing);
    facts.deadline = Attempt::Failed {
        errno: 16,
        error: "Device or resource busy".into(),
    };
    assert_eq!(check_sched_deadline(&facts).status, Status::Unknown);
}

#[test]
fn a_read_only_cpuset_without_isolcpus_needs_privilege() {
    let mut facts = tuned_rt_machine();
    facts.isolated = CpuSet::default();
    facts.boot = BootParams::default();
    if let Some(c) = facts.cgroups.cpuset.as_mut() {
        c.writable = false;
    }
    let sut = check_cpu_shielding(&facts);
    assert_eq!(sut.status, Status::NeedsPrivilege);
    assert!(
        sut.advice
            .unwrap()
            .contains("isolcpus=domain,managed_irq,1-7")
    );
}

#[test]
fn no_cpuset_and_no_isolcpus_is_missing() {
    let mut facts = tuned_rt_machine();
    facts.isolated = CpuSet::default();
    facts.cgroups.cpuset = None;
    let sut = check_cpu_shielding(&facts);
    assert_eq!(sut.status, Status::Missing);
    assert!(sut.advice.unwrap().contains("+cpuset"));
}

#[test]
fn irqbalance_running_gets_advice_even_when_affinity_is_writable() {
    let mut facts = tuned_rt_machine();
    facts.irqbalance = true;
    let sut = check_irq_affinity(&facts);
    assert_eq!(sut.status, Status::Available);
    assert!(sut.detail.contains("20 of 20"));
    assert!(
        sut.advice
            .unwrap()
            .contains("IRQBALANCE_BANNED_CPULIST=1-7")
    );
}

#[test]
fn refused_mlock_needs_privilege_and_blocks() {
    let mut facts = tuned_rt_machine();
    facts.mlock = Attempt::Failed {
        errno: 12,
        error: "Cannot allocate memory".into(),
    };
    let sut = audit_from(&facts);
    assert_eq!(find(&sut, CheckId::Memory).status, Status::NeedsPrivilege);
    assert!(
        find(&sut, CheckId::Memory)
            .advice
            .as_deref()
            .unwrap()
            .contains("cap_ipc_lock")
    );
    assert_eq!(sut.verdict.blockers.len(), 1);
}

#[test]
fn a_virtual_machine_with_steal_is_a_note_not_a_blocker() {
    let mut facts = tuned_rt_machine();
    facts.virtualization = Some("KVM (Firecracker)".into());
    facts.steal = Some(StealTime {
        steal_ns: Nanos::from_secs(2),
        total_ns: Nanos::from_secs(100),
    });
    let sut = audit_from(&facts);
    let c = find(&sut, CheckId::Virtualization);
    assert_eq!(c.status, Status::Missing);
    assert!(c.detail.contains("KVM (Firecracker)"));
    assert!(c.detail.contains("steal 2.0 s"), "{}", c.detail);
    assert!(sut.verdict.blockers.is_empty());
    assert!(sut.verdict.notes.iter().any(|n| n.contains("2.00 % steal")));
}

#[test]
fn tracers_built_but_not_mounted_need_privilege() {
    let mut facts = tuned_rt_machine();
    facts.tracers = None;
    let sut = check_tracers(&facts);
    assert_eq!(sut.status, Status::NeedsPrivilege);
    assert!(sut.detail.contains("hwlat"));
    facts.config = Some(parse_kernel_config("CONFIG_HZ=250\n", "/proc/config.gz"));
    assert_eq!(check_tracers(&facts).status, Status::Missing);
    facts.config = None;
    assert_eq!(check_tracers(&facts).status, Status::Unknown);
}

#[test]
fn coarse_timers_are_missing_and_block() {
    let mut facts = tuned_rt_machine();
    facts.clock_resolution = Some(Nanos::from_millis(4));
    let sut = audit_from(&facts);
    assert_eq!(find(&sut, CheckId::Hz).status, Status::Missing);
    assert!(!sut.verdict.blockers.is_empty());
}

#[test]
fn a_slow_clocksource_gets_advice() {
    let mut facts = tuned_rt_machine();
    facts.clocksource.current = Some("hpet".into());
    let sut = check_clocksource(&facts);
    assert!(sut.advice.unwrap().contains("echo tsc"));
}

#[test]
fn statuses_serialize_in_kebab_case() {
    let sut = serde_json::to_string(&[Status::Available, Status::NeedsPrivilege]).unwrap();
    assert_eq!(sut, r#"["available","needs-privilege"]"#);
    let model = serde_json::to_string(&PreemptModel::Voluntary).unwrap();
    assert_eq!(model, r#""voluntary""#);
}

/// An idle state declaring `exit_us` of exit latency, used `usage` times for
/// `time_ms` on one CPU.
fn state(name: &str, exit_us: u64, usage: u64, time_ms: u64) -> IdleState {
    IdleState {
        name: name.into(),
        desc: String::new(),
        exit_latency_ns: Nanos::from_micros(exit_us),
        target_residency_ns: Nanos::from_micros(exit_us * 3),
        usage,
        time_ns: Nanos::from_millis(time_ms),
        disabled: false,
    }
}

/// `machine` with `driver` and every online CPU in `states`, the QoS device as
/// `device` says.
fn idling(
    mut machine: PlatformFacts,
    driver: &str,
    states: &[IdleState],
    device: PmQosDevice,
) -> PlatformFacts {
    machine.idle = CpuIdle {
        driver: Some(driver.into()),
        governor: Some("menu".into()),
        cpus: machine
            .online
            .cpus()
            .iter()
            .map(|&cpu| CpuIdleStates {
                cpu,
                states: states.to_vec(),
                resume_latency: Some(ResumeLatency::NoConstraint),
            })
            .collect(),
        cpu_dma_latency: device,
    };
    machine
}

const WRITABLE: PmQosDevice = PmQosDevice {
    present: true,
    writable: true,
};
const READ_ONLY: PmQosDevice = PmQosDevice {
    present: true,
    writable: false,
};

/// Intel-like C-states: C1E and C6 exit in more than a few microseconds.
fn c_states() -> Vec<IdleState> {
    vec![
        state("POLL", 0, 10, 1),
        state("C1", 2, 1000, 500),
        state("C1E", 10, 2000, 800),
        state("C6", 133, 5000, 90_000),
    ]
}

#[test]
fn deep_states_with_a_read_only_qos_device_need_privilege_and_say_how_to_get_it() {
    let facts = idling(tuned_rt_machine(), "intel_idle", &c_states(), READ_ONLY);
    let sut = audit_from(&facts);
    let c = find(&sut, CheckId::IdleStates);
    assert_eq!(c.status, Status::NeedsPrivilege);
    assert!(c.detail.contains("C6 (exit 133 us) used"), "{}", c.detail);
    // Summed over the 8 CPUs.
    assert!(
        c.detail.contains("used 40000 times for 720.0 s"),
        "{}",
        c.detail
    );
    assert!(
        c.detail
            .contains("deepest state (C6) is delayed by its exit latency, 133 us"),
        "{}",
        c.detail
    );
    assert!(
        c.detail.contains("present but not writable"),
        "{}",
        c.detail
    );
    let advice = c.advice.as_deref().unwrap();
    assert!(advice.contains("C1E 10 us, C6 133 us"), "{advice}");
    assert!(!advice.contains("C1 2 us"), "{advice}");
    assert!(advice.contains("run as root"), "{advice}");
    assert!(
        advice.contains("write access to /dev/cpu_dma_latency"),
        "{advice}"
    );
    assert!(sut.verdict.notes.iter().any(|n| n.contains("idle CPUs")));
}

#[test]
fn deep_states_with_a_writable_qos_device_are_available_and_held_by_ictus() {
    let facts = idling(tuned_rt_machine(), "intel_idle", &c_states(), WRITABLE);
    let sut = check_idle_states(&facts);
    assert_eq!(sut.status, Status::Available);
    assert_eq!(sut.advice, None);
    assert!(
        sut.detail.contains("hold /dev/cpu_dma_latency at 0"),
        "{}",
        sut.detail
    );
    assert!(sut.detail.contains("--pm-qos off"), "{}", sut.detail);
    assert!(
        sut.detail
            .contains("`ictus shield` sets the RT CPUs' resume-latency QoS")
    );
}

#[test]
fn deep_states_without_a_qos_device_are_missing_with_boot_advice() {
    let absent = PmQosDevice::default();
    let sut = check_idle_states(&idling(
        tuned_rt_machine(),
        "intel_idle",
        &c_states(),
        absent,
    ));
    assert_eq!(sut.status, Status::Missing);
    assert!(sut.advice.unwrap().contains("max_cstate"));
}

#[test]
fn a_disabled_deep_state_does_not_count() {
    let mut states = c_states();
    states[2].disabled = true;
    states[3].disabled = true;
    let sut = check_idle_states(&idling(
        tuned_rt_machine(),
        "intel_idle",
        &states,
        READ_ONLY,
    ));
    assert_eq!(sut.status, Status::Available);
    assert!(
        sut.detail.contains("C6 (exit 133 us, disabled)"),
        "{}",
        sut.detail
    );
    assert!(sut.detail.contains("deepest state (C1)"), "{}", sut.detail);
}

#[test]
fn no_cpuidle_driver_is_available() {
    let mut facts = tuned_rt_machine();
    facts.idle.cpu_dma_latency = READ_ONLY;
    let sut = check_idle_states(&facts);
    assert_eq!(sut.status, Status::Available);
    assert!(
        sut.detail.starts_with("no cpuidle driver"),
        "{}",
        sut.detail
    );
    assert_eq!(sut.advice, None);
}

/// The 2-vCPU development VM: haltpoll, POLL and "haltpoll idle" at 1 us.
fn haltpoll_vm(device: PmQosDevice) -> PlatformFacts {
    let mut facts = idling(
        tuned_rt_machine(),
        "haltpoll",
        &[
            state("POLL", 0, 392_863, 55_089),
            state("haltpoll idle", 1, 135_250, 556_374),
        ],
        device,
    );
    facts.virtualization = Some("KVM".into());
    facts
}

#[test]
fn a_haltpoll_guest_is_available_and_says_its_idle_exits_to_the_host() {
    let sut = check_idle_states(&haltpoll_vm(WRITABLE));
    assert_eq!(sut.status, Status::Available);
    assert_eq!(sut.advice, None);
    assert!(sut.detail.starts_with("driver haltpoll"), "{}", sut.detail);
    assert!(
        sut.detail.contains("POLL (exit 0 us) used"),
        "{}",
        sut.detail
    );
    assert!(
        sut.detail.contains("haltpoll idle (exit 1 us) used"),
        "{}",
        sut.detail
    );
    assert!(
        sut.detail
            .contains("haltpoll idle halts the vCPU, which exits to the host"),
        "{}",
        sut.detail
    );
    assert!(
        sut.detail.contains("resume-latency QoS: none on CPUs 0-7"),
        "{}",
        sut.detail
    );
}

#[test]
fn a_haltpoll_guest_that_cannot_hold_the_qos_is_advised_to() {
    let sut = check_idle_states(&haltpoll_vm(READ_ONLY));
    assert_eq!(sut.status, Status::Available);
    assert!(sut.advice.unwrap().contains("keep the vCPUs polling"));
}

#[test]
fn the_audit_carries_the_idle_facts_in_its_json() {
    let facts = haltpoll_vm(WRITABLE);
    let sut = serde_json::to_value(audit_from(&facts)).unwrap();
    assert_eq!(sut["idle"]["driver"], "haltpoll");
    let cpu = &sut["idle"]["cpus"][0];
    assert_eq!(cpu["resume_latency"], "no-constraint");
    assert_eq!(cpu["states"][1]["name"], "haltpoll idle");
    assert_eq!(cpu["states"][1]["exit_latency_ns"], 1000);
    assert_eq!(cpu["states"][1]["usage"], 135_250);
    assert_eq!(sut["idle"]["cpu_dma_latency"]["writable"], true);
}

#[test]
fn an_audit_written_before_the_idle_facts_still_reads() {
    let sut: Audit = serde_json::from_str(
        r#"{"checks": [], "verdict": {"summary": "s", "blockers": [], "notes": []}}"#,
    )
    .unwrap();
    assert_eq!(sut.idle, CpuIdle::default());
}

#[test]
fn check_ids_serialize_as_their_names_and_unknown_ones_read_as_other() {
    for id in CheckId::ALL {
        let sut = serde_json::to_string(&id).unwrap();
        assert_eq!(sut, format!("\"{}\"", id.name()));
    }
    let sut: CheckId = serde_json::from_str("\"a-later-check\"").unwrap();
    assert_eq!(sut, CheckId::Other);
}

#[test]
fn sizes_print_in_binary_units() {
    assert_eq!(bytes(32 << 10), "32 KiB");
    assert_eq!(bytes(32 << 20), "32 MiB");
    assert_eq!(bytes(8 << 20), "8 MiB");
    assert_eq!(bytes(1000), "1000 B");
}

#[test]
fn auditing_this_machine_yields_every_check_exactly_once() {
    let sut = audit();
    for id in CheckId::ALL {
        let n = sut.checks.iter().filter(|c| c.id == id).count();
        assert_eq!(n, 1, "check {id} appears {n} times");
    }
    assert_eq!(sut.checks.len(), CheckId::ALL.len());
    assert!(!sut.verdict.summary.is_empty());
    for c in &sut.checks {
        assert!(!c.detail.is_empty(), "{c:?}");
        if c.status != Status::Available {
            assert!(
                c.advice.is_some() || c.status == Status::Unknown,
                "{c:?} has no advice"
            );
        }
    }
}
