//! The changes a shield makes, computed from a [`Machine`] by pure functions: tested
//! on fake machines, run by [`crate::apply()`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::ShieldError;
use crate::mask::{format_mask, parse_mask};
use crate::snapshot::{
    CpusetRoot, DEFAULT_IRQ_AFFINITY, Machine, RESUME_QOS_HELD, RT_RUNTIME, WORKQUEUE_CPUMASK,
    resume_qos_path,
};

/// The shield's cpuset groups, under the cpuset root: named in `ictus-class`, where a
/// task class joins them.
pub use ictus_class::partition::{NRT_GROUP, RT_GROUP};

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// CPUs for the real-time work.
    pub rt_cpus: CpuSet,
    /// IRQs that serve the RT tasks: steered to the RT CPUs instead.
    pub irq_for: Vec<u32>,
    /// Turn the RT throttle off (`sched_rt_runtime_us` = -1). Refused without
    /// `watchdog`; written only after the watchdog runs.
    pub rt_throttle_off: bool,
    /// Start a watchdog process (see [`crate::watchdog`]).
    pub watchdog: Option<WatchdogLaunch>,
    /// Hold each RT CPU's resume latency QoS at [`RESUME_QOS_HELD`] (no idle state
    /// with an exit latency) while the shield is applied.
    pub resume_qos: bool,
}

impl Request {
    /// A request for a partition with each RT CPU's resume latency QoS held: no
    /// watchdog, the RT throttle left as it is.
    pub fn partition(rt_cpus: CpuSet, irq_for: Vec<u32>) -> Request {
        Request {
            rt_cpus,
            irq_for,
            rt_throttle_off: false,
            watchdog: None,
            resume_qos: true,
        }
    }
}

/// How to start the watchdog process. The shield starts `program args`, detached, and
/// speaks the handshake of [`crate::watchdog::GO`] and [`crate::watchdog::READY`] with it
/// (the CLI re-executes itself as `ictus shield watchdog ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogLaunch {
    /// Its limit (recorded in the journal and shown by `status`).
    pub limit: Duration,
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

/// The shortest watchdog limit accepted: it scans four times per limit.
pub const MIN_WATCHDOG_LIMIT: Duration = Duration::from_millis(10);

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Change {
    /// Write `value` to a file (its prior value is journaled first).
    Write {
        /// The file.
        path: PathBuf,
        /// The new value.
        value: String,
    },
    /// Create a cgroup directory (journaled: reset empties and removes it).
    Mkdir {
        /// The directory.
        path: PathBuf,
    },
    /// Move a thread into a cgroup (its affinity and prior group are journaled).
    MoveTask {
        /// Thread id.
        tid: i32,
        /// Its start time, to tell a reused id apart.
        start_time: u64,
        /// The `tasks` file of its group now (where reset puts it back).
        from: PathBuf,
        /// The `tasks` file of the group it goes to.
        to: PathBuf,
    },
    /// Journal a thread's affinity without changing it (cgroup v2): making the RT
    /// CPUs an isolated partition takes them out of every other thread's affinity, and
    /// removing the partition does not give them back; reset does.
    KeepAffinity {
        /// Thread id.
        tid: i32,
        /// Its start time, to tell a reused id apart.
        start_time: u64,
    },
    /// Stop irqbalance (it would undo the IRQ affinity).
    StopIrqbalance {
        /// Its pid.
        pid: i32,
    },
    /// Start the watchdog process (journaled with its pid and start time; reset stops it).
    StartWatchdog {
        /// Its limit, in milliseconds.
        limit_ms: u64,
        /// The program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Something left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skip {
    /// What (`task 12 (ksoftirqd/1)`, `IRQ 36`).
    pub what: String,
    /// Why.
    pub why: String,
}

/// The changes, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// RT CPUs.
    pub rt_cpus: CpuSet,
    /// NRT CPUs: every other online CPU.
    pub nrt_cpus: CpuSet,
    /// cgroup version used: 1 or 2.
    pub cgroup_version: u8,
    /// The steps.
    pub steps: Vec<Change>,
    /// What the plan leaves alone, known in advance.
    pub skipped: Vec<Skip>,
}

/// Checks the RT CPUs against the online ones and returns the NRT CPUs.
pub fn split(rt: &CpuSet, online: &CpuSet) -> Result<CpuSet, ShieldError> {
    if rt.is_empty() {
        return Err(ShieldError::NoRtCpu);
    }
    if let Some(&cpu) = rt.cpus().iter().find(|&&c| !online.contains(c)) {
        return Err(ShieldError::CpuOffline {
            cpu,
            online: online.clone(),
        });
    }
    let nrt = CpuSet::from_cpus(online.cpus().iter().copied().filter(|&c| !rt.contains(c)));
    if nrt.is_empty() {
        return Err(ShieldError::NoNrtCpu {
            rt: rt.clone(),
            online: online.clone(),
        });
    }
    Ok(nrt)
}

/// Computes the plan. Fails on bad input only; changes nothing.
pub fn plan(machine: &Machine, request: &Request) -> Result<Plan, ShieldError> {
    check_watchdog(request)?;
    let rt = &request.rt_cpus;
    let nrt = split(rt, &machine.online)?;
    let known: BTreeSet<u32> = machine.irqs.iter().map(|i| i.irq).collect();
    if let Some(&irq) = request.irq_for.iter().find(|i| !known.contains(i)) {
        return Err(ShieldError::NoSuchIrq { irq });
    }
    let Some(cpuset) = &machine.cpuset else {
        return Err(ShieldError::NoCpuset);
    };
    let mut steps = Vec::new();
    let mut skipped = Vec::new();
    let root = cpuset.dir();
    let cgroup_version = match cpuset {
        CpusetRoot::V1(_) => {
            v1_groups(machine, root, rt, &nrt, &mut steps, &mut skipped);
            1
        }
        CpusetRoot::V2(_) => {
            v2_controller_and_affinities(machine, root, &mut steps);
            2
        }
    };
    irq_steps(machine, request, &nrt, &mut steps);
    mask_steps(machine, &nrt, &mut steps);
    if request.resume_qos {
        resume_qos_steps(machine, rt, &mut steps, &mut skipped);
    }
    if cgroup_version == 2 {
        v2_partition(machine, &root.join(RT_GROUP), rt, &mut steps);
    }
    if let Some(pid) = machine.irqbalance {
        // First, so it cannot undo the IRQ affinity while the rest is applied.
        steps.insert(0, Change::StopIrqbalance { pid });
    }
    // Last: the watchdog, and only once it runs, the RT throttle off.
    if let Some(w) = &request.watchdog {
        steps.push(Change::StartWatchdog {
            limit_ms: w.limit.as_millis() as u64,
            program: w.program.clone(),
            args: w.args.clone(),
        });
    }
    if request.rt_throttle_off {
        throttle_off(machine, &mut steps, &mut skipped);
    }
    Ok(Plan {
        rt_cpus: rt.clone(),
        nrt_cpus: nrt,
        cgroup_version,
        steps,
        skipped,
    })
}

/// The RT throttle goes off only under a watchdog, and the watchdog's limit is not
/// below [`MIN_WATCHDOG_LIMIT`].
fn check_watchdog(request: &Request) -> Result<(), ShieldError> {
    if request.rt_throttle_off && request.watchdog.is_none() {
        return Err(ShieldError::ThrottleWithoutWatchdog);
    }
    if let Some(w) = &request.watchdog
        && w.limit < MIN_WATCHDOG_LIMIT
    {
        return Err(ShieldError::WatchdogTooShort {
            limit_ms: w.limit.as_millis() as u64,
            min_ms: MIN_WATCHDOG_LIMIT.as_millis() as u64,
        });
    }
    Ok(())
}

fn write(path: PathBuf, value: String) -> Change {
    Change::Write { path, value }
}

/// cgroup v1: the RT and NRT groups, the root's balancing off, and every thread of
/// the root moved to the NRT group (kernel threads that cannot move are skipped).
fn v1_groups(
    machine: &Machine,
    root: &Path,
    rt: &CpuSet,
    nrt: &CpuSet,
    steps: &mut Vec<Change>,
    skipped: &mut Vec<Skip>,
) {
    let rt_dir = root.join(RT_GROUP);
    let nrt_dir = root.join(NRT_GROUP);
    for (dir, cpus, balance) in [(&rt_dir, rt, "0"), (&nrt_dir, nrt, "1")] {
        steps.push(Change::Mkdir { path: dir.clone() });
        steps.push(write(dir.join("cpuset.cpus"), cpus.to_string()));
        steps.push(write(dir.join("cpuset.mems"), machine.mems.clone()));
        steps.push(write(dir.join("cpuset.cpu_exclusive"), "1".into()));
        steps.push(write(dir.join("cpuset.sched_load_balance"), balance.into()));
    }
    // The root stops balancing across all CPUs, so the RT CPUs form their own
    // scheduling domain.
    if machine
        .root_files
        .get("cpuset.sched_load_balance")
        .map(String::as_str)
        != Some("0")
    {
        steps.push(write(root.join("cpuset.sched_load_balance"), "0".into()));
    }
    let from = root.join("tasks");
    let to = nrt_dir.join("tasks");
    for task in machine.threads.iter().filter(|t| t.cpuset == "/") {
        if task.is_movable() {
            steps.push(Change::MoveTask {
                tid: task.tid,
                start_time: task.start_time,
                from: from.clone(),
                to: to.clone(),
            });
        } else {
            skipped.push(Skip {
                what: format!("task {} ({})", task.tid, task.comm),
                why: "kernel thread with a fixed affinity (PF_NO_SETAFFINITY)".into(),
            });
        }
    }
}

/// cgroup v2, before the IRQs: the cpuset controller for the root's children, and
/// every movable thread's affinity journaled.
fn v2_controller_and_affinities(machine: &Machine, root: &Path, steps: &mut Vec<Change>) {
    let controls = machine
        .root_files
        .get("cgroup.subtree_control")
        .map(String::as_str)
        .unwrap_or("");
    if !controls.split_whitespace().any(|c| c == "cpuset") {
        steps.push(write(root.join("cgroup.subtree_control"), "+cpuset".into()));
    }
    // The partition itself comes after the IRQs and masks (`v2_partition`), so reset
    // removes it first and then puts back what the kernel changed with it.
    // Every movable thread: removing the partition resets the affinity of
    // threads pinned elsewhere too (seen on a 6.x kernel: per-CPU pins became
    // all CPUs).
    for task in &machine.threads {
        if task.affinity.is_some() && task.is_movable() {
            steps.push(Change::KeepAffinity {
                tid: task.tid,
                start_time: task.start_time,
            });
        }
    }
}

/// Every IRQ to the NRT CPUs, or to the RT CPUs when the request names it; those
/// already there are left alone.
fn irq_steps(machine: &Machine, request: &Request, nrt: &CpuSet, steps: &mut Vec<Change>) {
    let rt = &request.rt_cpus;
    for irq in &machine.irqs {
        let target = if request.irq_for.contains(&irq.irq) {
            rt
        } else {
            nrt
        };
        if irq.affinity.parse::<CpuSet>().ok().as_ref() != Some(target) {
            steps.push(write(
                PathBuf::from(format!("/proc/irq/{}/smp_affinity_list", irq.irq)),
                target.to_string(),
            ));
        }
    }
}

/// The default IRQ affinity and the workqueue mask to the NRT CPUs, where present
/// and not already so.
fn mask_steps(machine: &Machine, nrt: &CpuSet, steps: &mut Vec<Change>) {
    for (current, path) in [
        (&machine.default_irq_affinity, DEFAULT_IRQ_AFFINITY),
        (&machine.workqueue_cpumask, WORKQUEUE_CPUMASK),
    ] {
        if let Some(current) = current
            && parse_mask(current).as_ref() != Some(nrt)
        {
            steps.push(write(PathBuf::from(path), format_mask(nrt)));
        }
    }
}

/// Each RT CPU's resume latency QoS to [`RESUME_QOS_HELD`] (see there why that
/// value), an ordinary journaled write; a CPU without the file, with a file this
/// process may not write, or already held, is a note.
fn resume_qos_steps(
    machine: &Machine,
    rt: &CpuSet,
    steps: &mut Vec<Change>,
    skipped: &mut Vec<Skip>,
) {
    for &cpu in rt.cpus() {
        let path = resume_qos_path(cpu);
        let why = match machine.resume_qos.iter().find(|q| q.cpu == cpu) {
            None => {
                "this kernel has no per-CPU resume latency QoS: the CPU may still enter idle states with an exit latency"
            }
            Some(q) if q.value == RESUME_QOS_HELD => {
                "already n/a: no idle state with an exit latency"
            }
            Some(q) if !q.writable => {
                "not writable (is /sys mounted read-only?): the CPU may still enter idle states with an exit latency"
            }
            Some(_) => {
                steps.push(write(path, RESUME_QOS_HELD.into()));
                continue;
            }
        };
        skipped.push(Skip {
            what: path.display().to_string(),
            why: why.into(),
        });
    }
}

/// cgroup v2: the RT group at `rt_dir`, made an isolated partition.
fn v2_partition(machine: &Machine, rt_dir: &Path, rt: &CpuSet, steps: &mut Vec<Change>) {
    steps.push(Change::Mkdir {
        path: rt_dir.to_path_buf(),
    });
    steps.push(write(rt_dir.join("cpuset.cpus"), rt.to_string()));
    steps.push(write(rt_dir.join("cpuset.mems"), machine.mems.clone()));
    // apply falls back to `root` where the kernel does not know `isolated`.
    steps.push(write(
        rt_dir.join("cpuset.cpus.partition"),
        "isolated".into(),
    ));
}

/// The RT throttle off, where the kernel has one and it is on.
fn throttle_off(machine: &Machine, steps: &mut Vec<Change>, skipped: &mut Vec<Skip>) {
    match machine.rt_runtime_us.as_deref() {
        Some("-1") => skipped.push(Skip {
            what: RT_RUNTIME.into(),
            why: "RT throttling is already off".into(),
        }),
        Some(_) => steps.push(write(PathBuf::from(RT_RUNTIME), "-1".into())),
        None => skipped.push(Skip {
            what: RT_RUNTIME.into(),
            why: "this kernel has no RT throttle".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::snapshot::{CpuResumeQos, Irq, PF_KTHREAD, PF_NO_SETAFFINITY, Task};

    fn task(tid: i32, flags: u64, cpuset: &str) -> Task {
        Task {
            tid,
            start_time: 100 + tid as u64,
            flags,
            comm: format!("t{tid}"),
            affinity: Some("0-3".parse().unwrap()),
            cpuset: cpuset.into(),
            last_cpu: Some(0),
        }
    }

    fn fake(cpuset: CpusetRoot) -> Machine {
        Machine {
            online: "0-3".parse().unwrap(),
            cpuset: Some(cpuset),
            mems: "0".into(),
            root_files: BTreeMap::from([
                ("cpuset.sched_load_balance".into(), "1".into()),
                ("cgroup.subtree_control".into(), "memory".into()),
            ]),
            threads: vec![
                task(1, 0, "/"),
                task(2, PF_KTHREAD | PF_NO_SETAFFINITY, "/"),
                task(3, 0, "/other"),
            ],
            irqs: vec![
                Irq {
                    irq: 10,
                    affinity: "0-3".into(),
                },
                Irq {
                    irq: 11,
                    affinity: "0-1".into(),
                },
                Irq {
                    irq: 12,
                    affinity: "0".into(),
                },
            ],
            default_irq_affinity: Some("f".into()),
            workqueue_cpumask: Some("f".into()),
            irqbalance: None,
            rt_runtime_us: Some("950000".into()),
            resume_qos: (0..4).map(|cpu| resume_qos(cpu, "0", true)).collect(),
        }
    }

    fn resume_qos(cpu: usize, value: &str, writable: bool) -> CpuResumeQos {
        CpuResumeQos {
            cpu,
            value: value.into(),
            writable,
        }
    }

    fn resume_qos_writes(plan: &Plan) -> Vec<(String, String)> {
        writes(plan)
            .into_iter()
            .filter(|(p, _)| p.ends_with("pm_qos_resume_latency_us"))
            .collect()
    }

    fn qos_path(cpu: usize) -> String {
        resume_qos_path(cpu).display().to_string()
    }

    fn request(rt: &str, irq_for: &[u32]) -> Request {
        Request::partition(rt.parse().unwrap(), irq_for.to_vec())
    }

    fn launch(limit: Duration) -> WatchdogLaunch {
        WatchdogLaunch {
            limit,
            program: "/bin/ictus".into(),
            args: vec!["shield".into(), "watchdog".into()],
        }
    }

    fn writes(plan: &Plan) -> Vec<(String, String)> {
        plan.steps
            .iter()
            .filter_map(|s| match s {
                Change::Write { path, value } => Some((path.display().to_string(), value.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_online_cpu_as_rt_is_refused() {
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &request("0-3", &[]));
        assert!(matches!(sut, Err(ShieldError::NoNrtCpu { .. })));
    }

    #[test]
    fn offline_cpu_and_unknown_irq_are_refused() {
        let m = fake(CpusetRoot::V1("/cs".into()));
        assert!(matches!(
            plan(&m, &request("9", &[])),
            Err(ShieldError::CpuOffline { cpu: 9, .. })
        ));
        assert!(matches!(
            plan(&m, &request("3", &[99])),
            Err(ShieldError::NoSuchIrq { irq: 99 })
        ));
    }

    #[test]
    fn v1_moves_movable_root_threads_and_skips_per_cpu_kthreads() {
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &request("2-3", &[])).unwrap();
        assert_eq!(sut.nrt_cpus.to_string(), "0-1");
        let moved: Vec<i32> = sut
            .steps
            .iter()
            .filter_map(|s| match s {
                Change::MoveTask { tid, to, .. } => {
                    assert_eq!(to, &PathBuf::from("/cs/ictus-nrt/tasks"));
                    Some(*tid)
                }
                _ => None,
            })
            .collect();
        assert_eq!(moved, vec![1]);
        assert_eq!(sut.skipped.len(), 1);
        assert!(writes(&sut).contains(&("/cs/ictus-rt/cpuset.cpus".into(), "2-3".into())));
        assert!(writes(&sut).contains(&("/cs/cpuset.sched_load_balance".into(), "0".into())));
    }

    #[test]
    fn irqs_go_to_nrt_except_those_for_rt_tasks_and_unchanged_ones_are_left() {
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &request("2-3", &[12])).unwrap();
        let w = writes(&sut);
        assert!(w.contains(&("/proc/irq/10/smp_affinity_list".into(), "0-1".into())));
        assert!(!w.iter().any(|(p, _)| p == "/proc/irq/11/smp_affinity_list"));
        assert!(w.contains(&("/proc/irq/12/smp_affinity_list".into(), "2-3".into())));
        assert!(w.contains(&(DEFAULT_IRQ_AFFINITY.into(), "3".into())));
        assert!(w.contains(&(WORKQUEUE_CPUMASK.into(), "3".into())));
    }

    #[test]
    fn v2_makes_an_isolated_partition_and_moves_no_thread() {
        let sut = plan(&fake(CpusetRoot::V2("/cg".into())), &request("3", &[])).unwrap();
        assert_eq!(sut.cgroup_version, 2);
        assert!(
            !sut.steps
                .iter()
                .any(|s| matches!(s, Change::MoveTask { .. }))
        );
        let w = writes(&sut);
        assert_eq!(
            w[0],
            ("/cg/cgroup.subtree_control".into(), "+cpuset".into())
        );
        assert!(w.contains(&(
            "/cg/ictus-rt/cpuset.cpus.partition".into(),
            "isolated".into()
        )));
        // Every movable thread has its affinity journaled, and the
        // partition comes after them and after the IRQs and masks, so reset removes it
        // first and then puts back what the kernel changed with it.
        let at = |f: &dyn Fn(&Change) -> bool| sut.steps.iter().position(f).unwrap();
        let partition = at(&|s| matches!(s, Change::Mkdir { .. }));
        let last_keep = sut
            .steps
            .iter()
            .rposition(|s| matches!(s, Change::KeepAffinity { .. }))
            .expect("affinities journaled");
        let last_irq = sut
            .steps
            .iter()
            .rposition(|s| matches!(s, Change::Write { path, .. } if path.starts_with("/proc/irq")))
            .unwrap();
        assert!(last_keep < partition && last_irq < partition);
    }

    #[test]
    fn irqbalance_is_stopped_first() {
        let mut m = fake(CpusetRoot::V1("/cs".into()));
        m.irqbalance = Some(77);
        let sut = plan(&m, &request("3", &[])).unwrap();
        assert_eq!(sut.steps[0], Change::StopIrqbalance { pid: 77 });
    }

    #[test]
    fn throttle_off_without_a_watchdog_is_refused() {
        let mut r = request("3", &[]);
        r.rt_throttle_off = true;
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &r);
        assert!(matches!(sut, Err(ShieldError::ThrottleWithoutWatchdog)));
    }

    #[test]
    fn a_watchdog_limit_below_the_minimum_is_refused() {
        let mut r = request("3", &[]);
        r.watchdog = Some(launch(Duration::from_millis(1)));
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &r);
        assert!(matches!(
            sut,
            Err(ShieldError::WatchdogTooShort { limit_ms: 1, .. })
        ));
    }

    #[test]
    fn the_throttle_goes_off_last_and_only_after_the_watchdog_starts() {
        let mut r = request("3", &[]);
        r.rt_throttle_off = true;
        r.watchdog = Some(launch(Duration::from_secs(1)));
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &r).unwrap();
        let n = sut.steps.len();
        assert!(matches!(
            &sut.steps[n - 2],
            Change::StartWatchdog { limit_ms: 1000, .. }
        ));
        assert_eq!(
            sut.steps[n - 1],
            Change::Write {
                path: RT_RUNTIME.into(),
                value: "-1".into()
            }
        );
    }

    #[test]
    fn a_watchdog_alone_leaves_the_throttle_and_an_absent_throttle_is_skipped() {
        let mut r = request("3", &[]);
        r.watchdog = Some(launch(Duration::from_secs(1)));
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &r).unwrap();
        assert!(!writes(&sut).iter().any(|(p, _)| p == RT_RUNTIME));
        r.rt_throttle_off = true;
        let mut m = fake(CpusetRoot::V1("/cs".into()));
        m.rt_runtime_us = None;
        let sut = plan(&m, &r).unwrap();
        assert!(!writes(&sut).iter().any(|(p, _)| p == RT_RUNTIME));
        assert!(sut.skipped.iter().any(|s| s.what == RT_RUNTIME));
    }

    #[test]
    fn each_rt_cpu_resume_qos_is_held_at_n_a_and_no_other_cpu_is_touched() {
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &request("2-3", &[])).unwrap();
        assert_eq!(
            resume_qos_writes(&sut),
            vec![
                (qos_path(2), RESUME_QOS_HELD.to_owned()),
                (qos_path(3), RESUME_QOS_HELD.to_owned()),
            ]
        );
        assert!(sut.skipped.iter().all(|s| !s.what.contains("pm_qos")));
    }

    #[test]
    fn an_absent_unwritable_or_already_held_resume_qos_is_a_note_not_a_step() {
        let mut m = fake(CpusetRoot::V1("/cs".into()));
        m.resume_qos = vec![
            resume_qos(0, "0", true),
            resume_qos(2, "0", false),
            resume_qos(3, RESUME_QOS_HELD, true),
        ];
        let sut = plan(&m, &request("1-3", &[])).unwrap();
        assert_eq!(resume_qos_writes(&sut), Vec::<(String, String)>::new());
        let noted: Vec<&str> = sut
            .skipped
            .iter()
            .filter(|s| s.what.contains("pm_qos"))
            .map(|s| s.what.as_str())
            .collect();
        assert_eq!(noted, vec![qos_path(1), qos_path(2), qos_path(3)]);
    }

    #[test]
    fn resume_qos_off_leaves_every_cpu_alone_without_a_note() {
        let mut r = request("3", &[]);
        r.resume_qos = false;
        let sut = plan(&fake(CpusetRoot::V1("/cs".into())), &r).unwrap();
        assert_eq!(resume_qos_writes(&sut), Vec::<(String, String)>::new());
        assert!(sut.skipped.iter().all(|s| !s.what.contains("pm_qos")));
    }

    #[test]
    fn the_resume_qos_is_held_after_the_irqs_and_before_the_partition_and_the_watchdog() {
        let mut r = request("3", &[]);
        r.watchdog = Some(launch(Duration::from_secs(1)));
        let sut = plan(&fake(CpusetRoot::V2("/cg".into())), &r).unwrap();
        let qos = sut
            .steps
            .iter()
            .position(|s| matches!(s, Change::Write { path, .. } if path == &resume_qos_path(3)))
            .expect("CPU 3's resume latency QoS is held");
        let last_irq = sut
            .steps
            .iter()
            .rposition(|s| matches!(s, Change::Write { path, .. } if path.starts_with("/proc/irq")))
            .unwrap();
        let partition = sut
            .steps
            .iter()
            .position(|s| matches!(s, Change::Mkdir { .. }))
            .unwrap();
        let watchdog = sut
            .steps
            .iter()
            .position(|s| matches!(s, Change::StartWatchdog { .. }))
            .unwrap();
        assert!(last_irq < qos && qos < partition && partition < watchdog);
    }
}
