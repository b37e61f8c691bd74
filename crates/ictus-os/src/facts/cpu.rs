//! CPUs: which are online, their topology and caches, NUMA nodes, frequency governor,
//! idle states, steal time and whether they are virtual.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ictus_core::{CpuSet, Nanos};
use serde::{Deserialize, Serialize};

use super::read::read_trimmed;

const CPU_SYS: &str = "/sys/devices/system/cpu";

/// The CPUs that are online (`/sys/devices/system/cpu/online`); falls back to the
/// affinity of this process, then to `available_parallelism` numbered from 0.
pub fn online_cpus() -> CpuSet {
    if let Some(set) =
        read_trimmed(format!("{CPU_SYS}/online")).and_then(|s| s.parse::<CpuSet>().ok())
        && !set.is_empty()
    {
        return set;
    }
    if let Some(set) = affinity_of_this_process() {
        return set;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    CpuSet::from_cpus(0..n)
}

fn affinity_of_this_process() -> Option<CpuSet> {
    // SAFETY: cpu_set_t is plain data for which all-zero bytes are a valid empty set.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `mask`, which lives across the call; pid 0
    // is the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&mask), &mut mask) };
    if rc != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of_val(&mask);
    // SAFETY: CPU_ISSET only reads `mask`, and `cpu` stays below the bit size of the set.
    let cpus = (0..max).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &mask) });
    let set = CpuSet::from_cpus(cpus);
    (!set.is_empty()).then_some(set)
}

/// The CPU model (`model name` in `/proc/cpuinfo`, or `Model`/`cpu model` on other
/// architectures).
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    ["model name", "Model", "cpu model"]
        .iter()
        .find_map(|key| cpuinfo_value(&info, key))
}

fn cpuinfo_value(info: &str, key: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key && !v.trim().is_empty()).then(|| v.trim().to_owned())
    })
}

/// Whether simultaneous multithreading is active: `smt/active`, else whether any online
/// CPU has a thread sibling. `None` when neither can be read.
pub fn smt_active() -> Option<bool> {
    match read_trimmed(format!("{CPU_SYS}/smt/active")).as_deref() {
        Some("1") => return Some(true),
        Some("0") => return Some(false),
        _ => {}
    }
    let groups = smt_sibling_groups();
    (!groups.is_empty()).then(|| groups.iter().any(|g| g.len() > 1))
}

/// The distinct sets of hardware threads that share a core
/// (`topology/thread_siblings_list` of each online CPU); empty when unknown.
pub fn smt_sibling_groups() -> Vec<CpuSet> {
    let groups: BTreeSet<Vec<usize>> = online_cpus()
        .cpus()
        .iter()
        .filter_map(|cpu| {
            read_trimmed(format!("{CPU_SYS}/cpu{cpu}/topology/thread_siblings_list"))?
                .parse::<CpuSet>()
                .ok()
        })
        .map(|s| s.cpus().to_vec())
        .collect();
    groups.into_iter().map(CpuSet::from_cpus).collect()
}

/// CPUs isolated from the scheduler at boot (`isolcpus=`, `/sys/devices/system/cpu/isolated`).
pub fn isolated_cpus() -> CpuSet {
    read_trimmed(format!("{CPU_SYS}/isolated"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

/// CPUs running without the periodic tick (`/sys/devices/system/cpu/nohz_full`);
/// `None` when the kernel has no `CONFIG_NO_HZ_FULL` (the file is absent).
pub fn nohz_full_cpus() -> Option<CpuSet> {
    let s = read_trimmed(format!("{CPU_SYS}/nohz_full"))?;
    // Kernels print "(null)" when the feature is built but unused.
    Some(s.parse().unwrap_or_default())
}

/// One CPU cache, as `/sys/devices/system/cpu/cpu*/cache/index*` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// Level: 1, 2, 3...
    pub level: u8,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// Size in bytes, when known.
    pub size_bytes: Option<u64>,
    /// Cache line size in bytes, when known.
    pub line_bytes: Option<u64>,
    /// The CPUs sharing this cache.
    pub shared_cpus: CpuSet,
}

impl Cache {
    /// Short name such as `L1d`, `L1i`, `L2`.
    pub fn name(&self) -> String {
        match self.kind.as_str() {
            "Data" => format!("L{}d", self.level),
            "Instruction" => format!("L{}i", self.level),
            _ => format!("L{}", self.level),
        }
    }
}

/// The distinct caches of the online CPUs, ordered by level and kind; empty when
/// `/sys` does not describe them.
pub fn caches() -> Vec<Cache> {
    let mut found: Vec<Cache> = Vec::new();
    for cpu in online_cpus().cpus() {
        let Ok(entries) = std::fs::read_dir(format!("{CPU_SYS}/cpu{cpu}/cache")) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("index"))
            })
            .collect();
        dirs.sort();
        for dir in dirs {
            if let Some(cache) = read_cache(&dir, *cpu)
                && !found.contains(&cache)
            {
                found.push(cache);
            }
        }
    }
    found.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    found
}

fn read_cache(dir: &Path, cpu: usize) -> Option<Cache> {
    let level = read_trimmed(dir.join("level"))?.parse().ok()?;
    let kind = read_trimmed(dir.join("type")).unwrap_or_else(|| "Unknown".to_owned());
    let size_bytes = read_trimmed(dir.join("size")).and_then(|s| parse_cache_size(&s));
    let line_bytes = read_trimmed(dir.join("coherency_line_size")).and_then(|s| s.parse().ok());
    let shared_cpus = read_trimmed(dir.join("shared_cpu_list"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| CpuSet::from_cpus([cpu]));
    Some(Cache {
        level,
        kind,
        size_bytes,
        line_bytes,
        shared_cpus,
    })
}

/// Parses a cache size as `/sys` prints it (`512K`, `32M`, `64`) into bytes.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, factor) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(factor)
}

/// The online NUMA nodes (`/sys/devices/system/node/online`); empty when the kernel
/// has no NUMA support.
pub fn numa_nodes() -> CpuSet {
    read_trimmed("/sys/devices/system/node/online")
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

/// The cpufreq governors of the online CPUs: one name such as `performance`, or
/// `mixed: performance,powersave`. `None` when there is no cpufreq.
pub fn governor() -> Option<String> {
    let names: BTreeSet<String> = online_cpus()
        .cpus()
        .iter()
        .filter_map(|cpu| read_trimmed(format!("{CPU_SYS}/cpu{cpu}/cpufreq/scaling_governor")))
        .collect();
    match names.len() {
        0 => None,
        1 => names.into_iter().next(),
        _ => Some(format!(
            "mixed: {}",
            names.into_iter().collect::<Vec<_>>().join(",")
        )),
    }
}

/// One idle state of one CPU (`cpuN/cpuidle/stateK`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// `name`: `POLL`, `C1`, `C6`, `haltpoll idle`...
    pub name: String,
    /// `desc`: the driver's words for it (`CPUIDLE CORE POLL IDLE`, `MWAIT 0x20`);
    /// empty when unreadable.
    pub desc: String,
    /// `latency`: the worst-case exit latency the driver declares, what leaving the
    /// state adds to a wake-up.
    pub exit_latency_ns: Nanos,
    /// `residency`: the target residency, the shortest idle period for which
    /// entering the state pays off.
    pub target_residency_ns: Nanos,
    /// `usage`: how many times the CPU entered the state since boot.
    pub usage: u64,
    /// `time`: how long the CPU spent in the state since boot.
    pub time_ns: Nanos,
    /// Whether the state is disabled (`disable` = 1).
    pub disabled: bool,
}

/// A CPU's PM QoS resume-latency limit (`power/pm_qos_resume_latency_us`): how deep
/// the cpuidle governor may let that CPU idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResumeLatency {
    /// `0`: no limit, every enabled state may be used.
    #[serde(rename = "no-constraint")]
    NoConstraint,
    /// At most this exit latency (`n/a` reads as 0: only polling).
    #[serde(rename = "limit_ns")]
    Limit(Nanos),
}

impl ResumeLatency {
    /// Parses the file's text: `0` (no constraint), `n/a` (0: no latency at all) or
    /// a number of microseconds; `None` for anything else.
    pub fn parse(text: &str) -> Option<ResumeLatency> {
        match text.trim() {
            "n/a" => Some(ResumeLatency::Limit(Nanos::ZERO)),
            "0" => Some(ResumeLatency::NoConstraint),
            t => t
                .parse::<u64>()
                .ok()
                .map(|us| ResumeLatency::Limit(Nanos::from_micros(us))),
        }
    }

    /// `n/a`: no resume latency accepted at all; only idle states without an exit
    /// latency (polling). What the shield writes to hold a CPU out of idle.
    pub const NONE_ACCEPTED: ResumeLatency = ResumeLatency::Limit(Nanos::ZERO);
}

/// What the limit means, in words: `no constraint`, `no idle state with an exit
/// latency` (`n/a`) or `idle states that exit within 20 us`.
impl std::fmt::Display for ResumeLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ResumeLatency::NoConstraint => f.write_str("no constraint"),
            ResumeLatency::Limit(Nanos::ZERO) => f.write_str("no idle state with an exit latency"),
            ResumeLatency::Limit(l) => {
                let within = l.show(ictus_core::time::DurationStyle::Micros);
                write!(f, "idle states that exit within {within}")
            }
        }
    }
}

/// One CPU's idle states and its resume-latency limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdleStates {
    /// The CPU.
    pub cpu: usize,
    /// Its idle states, in the kernel's order (shallowest first).
    pub states: Vec<IdleState>,
    /// `power/pm_qos_resume_latency_us`; `None` when unreadable.
    pub resume_latency: Option<ResumeLatency>,
}

/// `/dev/cpu_dma_latency`, through which a process holds the CPU latency QoS (a
/// bound written there keeps every CPU out of deeper idle states while the file
/// stays open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmQosDevice {
    /// The device exists.
    pub present: bool,
    /// This process may open it for writing (`access(W_OK)`; nothing is opened).
    pub writable: bool,
}

/// The cpuidle setup: driver, governor, each online CPU's states and resume-latency
/// limit, and the CPU latency QoS device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdle {
    /// `current_driver`, such as `intel_idle`, `acpi_idle`, `haltpoll` or `none`.
    pub driver: Option<String>,
    /// `current_governor` (or `current_governor_ro`), such as `menu`, `teo`,
    /// `haltpoll`.
    pub governor: Option<String>,
    /// Per online CPU (a CPU without a `cpuidle` folder has no states).
    pub cpus: Vec<CpuIdleStates>,
    /// `/dev/cpu_dma_latency`.
    pub cpu_dma_latency: PmQosDevice,
}

/// The cpuidle driver, governor, the states of every online CPU and the CPU latency
/// QoS device; driver, governor and states are empty when there is no cpuidle.
pub fn idle() -> CpuIdle {
    let mut idle = idle_in(Path::new(CPU_SYS), online_cpus().cpus());
    idle.cpu_dma_latency = PmQosDevice {
        present: cpu_dma_latency_present(),
        writable: cpu_dma_latency_writable(),
    };
    idle
}

/// The cpuidle setup of `cpus` as the tree at `cpu_sys` (`/sys/devices/system/cpu`
/// or an invented one) describes it, without the QoS device.
fn idle_in(cpu_sys: &Path, cpus: &[usize]) -> CpuIdle {
    let base = cpu_sys.join("cpuidle");
    let driver = read_trimmed(base.join("current_driver"));
    let governor = read_trimmed(base.join("current_governor"))
        .or_else(|| read_trimmed(base.join("current_governor_ro")));
    let cpus = cpus
        .iter()
        .map(|&cpu| {
            let dir = cpu_sys.join(format!("cpu{cpu}"));
            CpuIdleStates {
                cpu,
                states: idle_states(&dir.join("cpuidle")),
                resume_latency: read_trimmed(dir.join("power/pm_qos_resume_latency_us"))
                    .and_then(|t| ResumeLatency::parse(&t)),
            }
        })
        .collect();
    CpuIdle {
        driver,
        governor,
        cpus,
        cpu_dma_latency: PmQosDevice::default(),
    }
}

/// The states under one CPU's `cpuidle` folder, `state0` up to the first absent one.
fn idle_states(dir: &Path) -> Vec<IdleState> {
    let mut states = Vec::new();
    for k in 0.. {
        let state = dir.join(format!("state{k}"));
        let Some(name) = read_trimmed(state.join("name")) else {
            break;
        };
        let number = |file: &str| -> u64 {
            read_trimmed(state.join(file))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        };
        states.push(IdleState {
            name,
            desc: read_trimmed(state.join("desc")).unwrap_or_default(),
            exit_latency_ns: Nanos::from_micros(number("latency")),
            target_residency_ns: Nanos::from_micros(number("residency")),
            usage: number("usage"),
            time_ns: Nanos::from_micros(number("time")),
            disabled: read_trimmed(state.join("disable")).as_deref() == Some("1"),
        });
    }
    states
}

/// Whether `/dev/cpu_dma_latency` exists (a PM QoS request there keeps CPUs out of
/// deep idle states while the file stays open).
pub fn cpu_dma_latency_present() -> bool {
    Path::new(crate::pm_qos::DEVICE).exists()
}

/// Whether this process may open `/dev/cpu_dma_latency` for writing (`access(W_OK)`;
/// nothing is opened).
pub fn cpu_dma_latency_writable() -> bool {
    super::read::writable(Path::new(crate::pm_qos::DEVICE))
}

/// Time stolen by the hypervisor from all CPUs since boot (`steal` in `/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StealTime {
    /// Time stolen, summed over all CPUs.
    pub steal_ns: Nanos,
    /// All accounted CPU time (user, nice, system, idle, iowait, irq, softirq, steal),
    /// summed over all CPUs.
    pub total_ns: Nanos,
}

impl StealTime {
    /// The stolen share of all CPU time, 0.0 to 1.0.
    pub fn fraction(&self) -> f64 {
        if self.total_ns.as_u64() == 0 {
            0.0
        } else {
            self.steal_ns.as_u64() as f64 / self.total_ns.as_u64() as f64
        }
    }
}

/// Steal time since boot, from the `cpu` line of `/proc/stat`.
pub fn steal_time() -> Option<StealTime> {
    let snap = crate::procstat::read().ok()?;
    Some(StealTime {
        steal_ns: Nanos::new(snap.steal_total_ns()),
        total_ns: Nanos::new(snap.accounted_total_ns()),
    })
}

/// The hypervisor when this is a virtual machine, such as `KVM (Firecracker)`, `xen`
/// or `VMware`; `None` on bare metal.
///
/// Reads the `hypervisor` CPU flag and, on x86, the CPUID hypervisor signature, then
/// `/sys/hypervisor/type` and the DMI vendor and product names.
pub fn virtualization() -> Option<String> {
    let flag = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .is_some_and(|info| {
            info.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
        });
    let sys_type = read_trimmed("/sys/hypervisor/type").filter(|s| !s.is_empty());
    let vendor = read_trimmed("/sys/class/dmi/id/sys_vendor").filter(|s| !s.is_empty());
    let product = read_trimmed("/sys/class/dmi/id/product_name").filter(|s| !s.is_empty());
    let dmi_virtual = [vendor.as_deref(), product.as_deref()]
        .into_iter()
        .flatten()
        .any(is_virtual_dmi_name);
    if !flag && sys_type.is_none() && !dmi_virtual {
        return None;
    }
    let name = cpuid_hypervisor()
        .or(sys_type)
        .or_else(|| vendor.clone())
        .unwrap_or_else(|| "unknown hypervisor".to_owned());
    let firecracker = read_trimmed("/proc/cmdline")
        .is_some_and(|c| c.to_ascii_lowercase().contains("firecracker"))
        || vendor.as_deref() == Some("Firecracker");
    let platform = if firecracker {
        Some("Firecracker".to_owned())
    } else {
        product.or(vendor).filter(|p| *p != name)
    };
    Some(match platform {
        Some(p) => format!("{name} ({p})"),
        None => name,
    })
}

fn is_virtual_dmi_name(s: &str) -> bool {
    [
        "QEMU",
        "KVM",
        "VMware",
        "VirtualBox",
        "innotek",
        "Xen",
        "Firecracker",
        "Parallels",
        "BHYVE",
        "Virtual Machine",
    ]
    .iter()
    .any(|v| s.contains(v))
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn cpuid_hypervisor() -> Option<String> {
    #[cfg(target_arch = "x86")]
    use core::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64::__cpuid;
    // Leaf 1, ECX bit 31: running under a hypervisor.
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let leaf = __cpuid(0x4000_0000);
    let mut sig = Vec::with_capacity(12);
    for reg in [leaf.ebx, leaf.ecx, leaf.edx] {
        sig.extend_from_slice(&reg.to_le_bytes());
    }
    let sig = String::from_utf8_lossy(&sig)
        .trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .to_owned();
    Some(hypervisor_name(&sig))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn cpuid_hypervisor() -> Option<String> {
    None
}

#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "x86")),
    allow(dead_code)
)]
fn hypervisor_name(signature: &str) -> String {
    match signature {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG)",
        "VBoxVBoxVBox" => "VirtualBox",
        "bhyve bhyve" => "bhyve",
        "ACRNACRNACRN" => "ACRN",
        "lrpepyh  vr" | "prl hyperv" => "Parallels",
        "" => "unknown hypervisor",
        other => other,
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_with_suffixes_become_bytes() {
        let sut = parse_cache_size;
        assert_eq!(sut("512K"), Some(512 * 1024));
        assert_eq!(sut("32768K"), Some(32 * 1024 * 1024));
        assert_eq!(sut("2M"), Some(2 * 1024 * 1024));
        assert_eq!(sut("64"), Some(64));
        assert_eq!(sut(" 32K\n"), Some(32 * 1024));
    }

    #[test]
    fn cache_sizes_that_are_not_numbers_are_rejected() {
        let sut = parse_cache_size;
        assert_eq!(sut(""), None);
        assert_eq!(sut("K"), None);
        assert_eq!(sut("big"), None);
    }

    #[test]
    fn steal_time_is_a_share_of_accounted_time() {
        let sut = steal_time().expect("/proc/stat is readable");
        assert!(sut.steal_ns <= sut.total_ns);
        assert!((0.0..=1.0).contains(&sut.fraction()));
    }

    #[test]
    fn cpuinfo_values_are_found_by_exact_key() {
        let info =
            "processor\t: 0\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t: fpu hypervisor\n";
        assert_eq!(
            cpuinfo_value(info, "model name").as_deref(),
            Some("AMD EPYC")
        );
        assert_eq!(cpuinfo_value(info, "model").as_deref(), Some("1"));
        assert_eq!(cpuinfo_value(info, "Model"), None);
    }

    #[test]
    fn hypervisor_signatures_have_friendly_names() {
        assert_eq!(hypervisor_name("KVMKVMKVM"), "KVM");
        assert_eq!(hypervisor_name("Microsoft Hv"), "Hyper-V");
        assert_eq!(hypervisor_name("SomethingNew"), "SomethingNew");
    }

    #[test]
    fn caches_are_named_by_level_and_kind() {
        let sut = Cache {
            level: 1,
            kind: "Data".into(),
            size_bytes: Some(32768),
            line_bytes: Some(64),
            shared_cpus: CpuSet::from_cpus([0]),
        };
        assert_eq!(sut.name(), "L1d");
    }

    /// Writes `files` (path under `root`, contents) into a new tree.
    fn tree(files: &[(String, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{text}\n")).unwrap();
        }
        root
    }

    #[test]
    fn idle_states_are_read_per_cpu_with_their_latency_residency_and_use() {
        let mut files = vec![
            ("cpuidle/current_driver".to_string(), "haltpoll"),
            ("cpuidle/current_governor_ro".to_string(), "haltpoll"),
            ("cpu1/power/pm_qos_resume_latency_us".to_string(), "0"),
        ];
        for (k, name, desc, latency, usage, time) in [
            (
                0,
                "POLL",
                "CPUIDLE CORE POLL IDLE",
                "0",
                "392863",
                "55089700",
            ),
            (
                1,
                "haltpoll idle",
                "default architecture idle",
                "1",
                "135250",
                "556374781",
            ),
        ] {
            for (file, text) in [
                ("name", name),
                ("desc", desc),
                ("latency", latency),
                ("residency", latency),
                ("usage", usage),
                ("time", time),
                ("disable", "0"),
            ] {
                files.push((format!("cpu1/cpuidle/state{k}/{file}"), text));
            }
        }
        let root = tree(&files);
        let sut = idle_in(root.path(), &[1]);
        assert_eq!(sut.driver.as_deref(), Some("haltpoll"));
        assert_eq!(sut.governor.as_deref(), Some("haltpoll"));
        assert_eq!(sut.cpus.len(), 1);
        let cpu = &sut.cpus[0];
        assert_eq!(cpu.cpu, 1);
        assert_eq!(cpu.resume_latency, Some(ResumeLatency::NoConstraint));
        let names: Vec<&str> = cpu.states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["POLL", "haltpoll idle"]);
        let halt = &cpu.states[1];
        assert_eq!(halt.desc, "default architecture idle");
        assert_eq!(halt.exit_latency_ns, Nanos::from_micros(1));
        assert_eq!(halt.target_residency_ns, Nanos::from_micros(1));
        assert_eq!(halt.usage, 135_250);
        assert_eq!(halt.time_ns, Nanos::from_micros(556_374_781));
        assert!(!halt.disabled);
    }

    #[test]
    fn a_machine_without_cpuidle_has_no_driver_and_no_states() {
        let root = tree(&[("cpu0/power/pm_qos_resume_latency_us".to_string(), "n/a")]);
        let sut = idle_in(root.path(), &[0]);
        assert_eq!(sut.driver, None);
        assert_eq!(sut.governor, None);
        assert!(sut.cpus[0].states.is_empty());
        assert_eq!(
            sut.cpus[0].resume_latency,
            Some(ResumeLatency::Limit(Nanos::ZERO))
        );
    }

    #[test]
    fn resume_latency_zero_means_no_constraint_and_n_a_means_none_allowed() {
        let sut = ResumeLatency::parse;
        assert_eq!(sut("0\n"), Some(ResumeLatency::NoConstraint));
        assert_eq!(sut("n/a"), Some(ResumeLatency::Limit(Nanos::ZERO)));
        assert_eq!(
            sut("20"),
            Some(ResumeLatency::Limit(Nanos::from_micros(20)))
        );
        assert_eq!(sut("soon"), None);
    }

    #[test]
    fn resume_latency_says_what_the_kernel_means_in_words() {
        let words = |t: &str| ResumeLatency::parse(t).unwrap().to_string();
        assert_eq!(words("0"), "no constraint");
        assert_eq!(words("n/a"), "no idle state with an exit latency");
        assert_eq!(words("20\n"), "idle states that exit within 20 us");
        assert_eq!(
            ResumeLatency::parse("n/a"),
            Some(ResumeLatency::NONE_ACCEPTED)
        );
        assert_eq!(ResumeLatency::parse("-1"), None);
    }

    #[test]
    fn this_machine_lists_every_online_cpu_for_its_idle_states() {
        let sut = idle();
        let cpus: Vec<usize> = sut.cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(cpus, online_cpus().cpus());
        if sut.cpu_dma_latency.writable {
            assert!(sut.cpu_dma_latency.present);
        }
    }

    #[test]
    fn online_cpus_is_never_empty() {
        let sut = online_cpus();
        assert!(!sut.is_empty());
    }
}
