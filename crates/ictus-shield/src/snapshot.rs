//! What the machine looks like, read (never written): the facts a plan is computed
//! from, and the full state that `reset` must bring back.

use ictus_os::procstat::TaskStat;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

/// The kernel's flag for threads whose affinity user space may not change
/// (per-CPU kernel threads).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;
/// The kernel's flag for kernel threads.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// Which cpuset hierarchy the machine offers, and its root directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version", content = "root")]
pub enum CpusetRoot {
    /// A cgroup v1 hierarchy with the cpuset controller.
    #[serde(rename = "v1")]
    V1(PathBuf),
    /// The cgroup v2 hierarchy, with cpuset among its controllers.
    #[serde(rename = "v2")]
    V2(PathBuf),
}

impl CpusetRoot {
    /// The root directory.
    pub fn dir(&self) -> &Path {
        match self {
            CpusetRoot::V1(p) | CpusetRoot::V2(p) => p,
        }
    }
}

/// One thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Thread id.
    pub tid: i32,
    /// Start time in clock ticks since boot (`/proc/<tid>/stat` field 22): tells a
    /// reused thread id apart.
    pub start_time: u64,
    /// Kernel task flags (`PF_*`).
    pub flags: u64,
    /// The command name.
    pub comm: String,
    /// CPUs it may run on, when readable.
    pub affinity: Option<CpuSet>,
    /// Its cpuset path (`/proc/<tid>/cpuset`), such as `/` or `/ictus-nrt`.
    pub cpuset: String,
    /// The CPU it last ran on.
    pub last_cpu: Option<usize>,
}

impl Task {
    /// Whether it is a kernel thread.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
    /// Whether user space may move it (not a per-CPU kernel thread).
    pub fn is_movable(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY == 0
    }
}

/// One interrupt line with an affinity file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    /// IRQ number.
    pub irq: u32,
    /// `smp_affinity_list` as read.
    pub affinity: String,
}

/// The facts a plan is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Online CPUs.
    pub online: CpuSet,
    /// The cpuset hierarchy, if any.
    pub cpuset: Option<CpusetRoot>,
    /// The root cpuset's memory nodes.
    pub mems: String,
    /// v1: the root's `cpuset.sched_load_balance`; v2: the root's `cgroup.subtree_control`.
    pub root_files: BTreeMap<String, String>,
    /// Every readable thread.
    pub threads: Vec<Task>,
    /// Interrupts with affinity files.
    pub irqs: Vec<Irq>,
    /// `/proc/irq/default_smp_affinity`.
    pub default_irq_affinity: Option<String>,
    /// `/sys/devices/virtual/workqueue/cpumask`, where present.
    pub workqueue_cpumask: Option<String>,
    /// The pid of a running irqbalance.
    pub irqbalance: Option<i32>,
    /// `/proc/sys/kernel/sched_rt_runtime_us` (the RT throttle; `-1` is off), where present.
    #[serde(default)]
    pub rt_runtime_us: Option<String>,
    /// Each online CPU's resume latency QoS, where the kernel has the file.
    #[serde(default)]
    pub resume_qos: Vec<CpuResumeQos>,
}

/// One CPU's resume latency QoS file ([`resume_qos_path`]) as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuResumeQos {
    /// The CPU.
    pub cpu: usize,
    /// The file's text, exactly as read (trimmed): what `reset` writes back.
    pub value: String,
    /// Whether this process may write it (`access(W_OK)`: root, and `/sys` not
    /// mounted read-only).
    pub writable: bool,
}

/// The workqueue cpumask file.
pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";
/// The default IRQ affinity file.
pub const DEFAULT_IRQ_AFFINITY: &str = "/proc/irq/default_smp_affinity";
/// The RT throttle: microseconds per `sched_rt_period_us` that real-time tasks may use;
/// `-1` turns throttling off.
pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// What the shield writes to each RT CPU's resume latency QoS: `n/a`, no resume
/// latency accepted, so the CPU enters no idle state with an exit latency: the per-CPU
/// counterpart of cyclictest's 0 on `/dev/cpu_dma_latency`, but journaled, so it
/// outlives the applying process and `reset` puts back the exact prior text.
///
/// Why `n/a` and not a number: since Linux 4.16 ("PM / QoS: Fix device resume latency
/// framework") the file's `0` means *no constraint* (the kernel stores
/// `PM_QOS_RESUME_LATENCY_NO_CONSTRAINT`, S32_MAX, and shows it as 0: what a CPU reads
/// by default), and `n/a` stores the kernel's 0, *no latency at all*. The cpuidle
/// governors (menu, teo, ladder, haltpoll) read that raw value
/// (`dev_pm_qos_raw_resume_latency` in `cpuidle_governor_latency_req`) and at 0 pick
/// only the polling state. `1` would still admit states that exit within 1 us (the
/// haltpoll state of a KVM guest, C1 on many x86 parts): on a 6.18 guest, CPU 1's
/// `haltpoll idle` state (exit latency 1 us) stopped being entered once its file read
/// `n/a`, and was entered again at `1` as at `0`. Kernels before 4.16 refuse `n/a` (EINVAL);
/// apply then records the step as refused and goes on.
pub const RESUME_QOS_HELD: &str = "n/a";

/// The directory of the CPU devices.
const CPU_DEVICES: &str = "/sys/devices/system/cpu";

/// CPU `cpu`'s resume latency QoS file (`pm_qos_resume_latency_us`): the longest
/// exit latency, in microseconds, of an idle state the cpuidle governor may pick on it.
pub fn resume_qos_path(cpu: usize) -> PathBuf {
    PathBuf::from(format!(
        "{CPU_DEVICES}/cpu{cpu}/power/pm_qos_resume_latency_us"
    ))
}

/// The CPU whose resume latency QoS file `path` is; `None` for any other file.
pub fn resume_qos_cpu(path: &Path) -> Option<usize> {
    let cpu = path
        .to_str()?
        .strip_prefix(CPU_DEVICES)?
        .strip_prefix("/cpu")?
        .strip_suffix("/power/pm_qos_resume_latency_us")?;
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    cpu.parse().ok()
}

/// CPU `cpu`'s resume latency QoS, where the kernel has the file.
pub fn resume_qos(cpu: usize) -> Option<CpuResumeQos> {
    let path = resume_qos_path(cpu);
    Some(CpuResumeQos {
        cpu,
        value: read_trimmed(&path)?,
        writable: ictus_os::facts::writable(&path),
    })
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

pub(crate) fn numeric_entries(dir: &str) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// Finds the cpuset hierarchy: a v1 cpuset mount first, else v2 with cpuset enabled.
pub fn cpuset_root() -> Option<CpusetRoot> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(point), Some(fstype), Some(options)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        if *fstype == "cgroup" && options.split(',').any(|o| o == "cpuset") {
            return Some(CpusetRoot::V1(PathBuf::from(point)));
        }
        if *fstype == "cgroup2" {
            let controllers = read_trimmed(Path::new(point).join("cgroup.controllers"));
            if controllers.is_some_and(|c| c.split_whitespace().any(|c| c == "cpuset")) {
                v2 = Some(CpusetRoot::V2(PathBuf::from(point)));
            }
        }
    }
    v2
}

/// Parses `/proc/<tid>/stat`: (start time, flags, last CPU). The command name may hold
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(stat: &str) -> Option<(u64, u64, Option<usize>)> {
    TaskStat::parse(stat.as_bytes()).map(|t| (t.start_time, t.flags, Some(t.processor)))
}

/// Reads one thread; `None` when it vanished or has exited (a zombie not yet reaped:
/// it cannot be moved, runs nowhere, and keeps the cpuset it died in).
pub fn read_task(tid: i32) -> Option<Task> {
    let dir = format!("/proc/{tid}");
    let stat = TaskStat::read(&format!("{dir}/stat")).filter(|t| !t.exited())?;
    let (start_time, flags, last_cpu) = (stat.start_time, stat.flags, Some(stat.processor));
    Some(Task {
        tid,
        start_time,
        flags,
        comm: read_trimmed(format!("{dir}/comm")).unwrap_or_default(),
        affinity: ictus_os::affinity_of::affinity_of(tid).ok(),
        cpuset: read_trimmed(format!("{dir}/cpuset")).unwrap_or_default(),
        last_cpu,
    })
}

/// Every thread of every process that can be read.
pub fn threads() -> Vec<Task> {
    let mut out = Vec::new();
    for pid in numeric_entries("/proc") {
        for tid in numeric_entries(&format!("/proc/{pid}/task")) {
            if let Some(task) = i32::try_from(tid).ok().and_then(read_task) {
                out.push(task);
            }
        }
    }
    out
}

/// Every IRQ with an affinity file.
pub fn irqs() -> Vec<Irq> {
    numeric_entries("/proc/irq")
        .into_iter()
        .filter_map(|irq| {
            Some(Irq {
                irq,
                affinity: read_trimmed(format!("/proc/irq/{irq}/smp_affinity_list"))?,
            })
        })
        .collect()
}

/// Reads the machine.
pub fn machine() -> Machine {
    let cpuset = cpuset_root();
    let mut root_files = BTreeMap::new();
    let mut mems = String::new();
    if let Some(root) = &cpuset {
        let (names, mems_file): (&[&str], &str) = match root {
            CpusetRoot::V1(_) => (&["cpuset.sched_load_balance"], "cpuset.mems"),
            CpusetRoot::V2(_) => (&["cgroup.subtree_control"], "cpuset.mems.effective"),
        };
        for name in names {
            if let Some(v) = read_trimmed(root.dir().join(name)) {
                root_files.insert((*name).to_owned(), v);
            }
        }
        mems = read_trimmed(root.dir().join(mems_file)).unwrap_or_else(|| "0".into());
    }
    let online = ictus_os::facts::online_cpus();
    Machine {
        resume_qos: online
            .cpus()
            .iter()
            .filter_map(|&c| resume_qos(c))
            .collect(),
        online,
        cpuset,
        mems,
        root_files,
        threads: threads(),
        irqs: irqs(),
        default_irq_affinity: read_trimmed(DEFAULT_IRQ_AFFINITY),
        workqueue_cpumask: read_trimmed(WORKQUEUE_CPUMASK),
        irqbalance: irqbalance_pid(),
        rt_runtime_us: read_trimmed(RT_RUNTIME),
    }
}

/// Whether irqbalance runs.
pub fn irqbalance_running() -> bool {
    irqbalance_pid().is_some()
}

fn irqbalance_pid() -> Option<i32> {
    numeric_entries("/proc").into_iter().find_map(|pid| {
        (read_trimmed(format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"))
            .then(|| i32::try_from(pid).ok())
            .flatten()
    })
}

/// Everything the shield may touch, as `name -> value`: every file of the cpuset
/// root and of the shield's groups, every IRQ affinity, the default IRQ affinity, the
/// workqueue cpumask, the RT throttle, each online CPU's resume latency QoS, and each
/// thread's cpuset and affinity (keyed by tid and start time). Two states compare
/// with [`differences`].
pub fn state() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(root) = cpuset_root() {
        let mut dirs = vec![root.dir().to_path_buf()];
        for group in ["ictus-rt", "ictus-nrt"] {
            let dir = root.dir().join(group);
            out.insert(format!("group:{group}"), dir.is_dir().to_string());
            if dir.is_dir() {
                dirs.push(dir);
            }
        }
        for dir in dirs {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in rd.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                // What the shield may write: cpuset settings and, on v2, the controllers
                // enabled below the root. Other controllers' files (memory.numa_stat,
                // io.stat, ...) change by themselves and are none of the shield's business.
                let relevant = (name.starts_with("cpuset.") || name == "cgroup.subtree_control")
                    && !name.contains("pressure")
                    && !name.ends_with(".stat")
                    && !name.ends_with(".events");
                if entry.path().is_file()
                    && relevant
                    && let Some(v) = read_trimmed(entry.path())
                {
                    out.insert(entry.path().display().to_string(), v);
                }
            }
        }
    }
    for irq in numeric_entries("/proc/irq") {
        let path = format!("/proc/irq/{irq}/smp_affinity");
        if let Some(v) = read_trimmed(&path) {
            out.insert(path, v);
        }
    }
    for path in [DEFAULT_IRQ_AFFINITY, WORKQUEUE_CPUMASK, RT_RUNTIME] {
        if let Some(v) = read_trimmed(path) {
            out.insert(path.to_owned(), v);
        }
    }
    for &cpu in ictus_os::facts::online_cpus().cpus() {
        let path = resume_qos_path(cpu);
        if let Some(v) = read_trimmed(&path) {
            out.insert(path.display().to_string(), v);
        }
    }
    for task in threads() {
        let affinity = task.affinity.map(|a| a.to_string()).unwrap_or_default();
        out.insert(
            format!("task:{}:{}", task.tid, task.start_time),
            format!("cpuset={} affinity={affinity}", task.cpuset),
        );
    }
    out
}

/// What differs between two states. Threads that exist in only one of them (born or
/// gone in between) are not differences.
pub fn differences(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (key, old) in before {
        match after.get(key) {
            Some(new) if new != old => out.push(format!("{key}: {old} -> {new}")),
            None if !key.starts_with("task:") => out.push(format!("{key}: {old} -> (gone)")),
            _ => {}
        }
    }
    for (key, new) in after {
        if !before.contains_key(key) && !key.starts_with("task:") {
            out.push(format!("{key}: (absent) -> {new}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let line = "42 (a (b) c) S 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 17 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0";
        let (start, flags, cpu) = parse_stat(line).unwrap();
        assert_eq!(start, 17);
        assert_eq!(flags, 69238880);
        assert_eq!(cpu, Some(1));
        assert!(flags & PF_NO_SETAFFINITY != 0);
    }

    #[test]
    fn a_resume_qos_path_names_its_cpu_and_no_other_file_does() {
        assert_eq!(resume_qos_cpu(&resume_qos_path(12)), Some(12));
        for other in [
            "/sys/devices/system/cpu/cpu/power/pm_qos_resume_latency_us",
            "/sys/devices/system/cpu/cpux1/power/pm_qos_resume_latency_us",
            "/sys/devices/system/cpu/cpu1/power/autosuspend_delay_ms",
            "/proc/sys/kernel/sched_rt_runtime_us",
        ] {
            assert_eq!(resume_qos_cpu(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn threads_born_or_gone_are_not_differences() {
        let before = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("task:5:9".to_owned(), "x".to_owned()),
        ]);
        let after = BTreeMap::from([
            ("a".to_owned(), "2".to_owned()),
            ("task:6:9".to_owned(), "y".to_owned()),
        ]);
        assert_eq!(differences(&before, &after), vec!["a: 1 -> 2".to_owned()]);
    }
}
