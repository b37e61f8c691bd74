//! What this process may do: resource limits, capabilities, trial scheduling and
//! memory-locking calls, the RT throttle, cgroups and cpusets, interrupt affinity,
//! swap and transparent huge pages.

use std::io;
use std::path::{Path, PathBuf};

use ictus_core::{CpuSet, Nanos};
use serde::{Deserialize, Serialize};

use super::read::{read_trimmed, writable};

/// A resource limit; `None` means unlimited (`RLIM_INFINITY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    /// The soft limit, the one enforced.
    pub soft: Option<u64>,
    /// The hard limit, up to which an unprivileged process may raise the soft one.
    pub hard: Option<u64>,
}

fn rlimit(resource: libc::__rlimit_resource_t) -> Option<Rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit that outlives the call.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return None;
    }
    let value = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Some(Rlimit {
        soft: value(r.rlim_cur),
        hard: value(r.rlim_max),
    })
}

/// `RLIMIT_RTPRIO`: the highest real-time priority this process may set without
/// `CAP_SYS_NICE`.
pub fn rlimit_rtprio() -> Option<Rlimit> {
    rlimit(libc::RLIMIT_RTPRIO)
}

/// `RLIMIT_MEMLOCK`: how many bytes this process may lock without `CAP_IPC_LOCK`.
pub fn rlimit_memlock() -> Option<Rlimit> {
    rlimit(libc::RLIMIT_MEMLOCK)
}

/// The effective capability set of this process (`CapEff` in `/proc/self/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// The bit mask, bit `n` for capability number `n`.
    pub effective: u64,
}

impl Capabilities {
    /// `CAP_IPC_LOCK`: lock memory beyond `RLIMIT_MEMLOCK`.
    pub const IPC_LOCK: u32 = 14;
    /// `CAP_SYS_ADMIN`: cgroups, debugfs, many administrative knobs.
    pub const SYS_ADMIN: u32 = 21;
    /// `CAP_SYS_NICE`: real-time policies and priorities, affinity of other processes.
    pub const SYS_NICE: u32 = 23;
    /// `CAP_SYS_RESOURCE`: raise hard resource limits.
    pub const SYS_RESOURCE: u32 = 24;

    /// Whether capability number `cap` is effective.
    pub fn has(&self, cap: u32) -> bool {
        cap < 64 && self.effective & (1u64 << cap) != 0
    }

    /// The names of the real-time relevant capabilities that are effective.
    pub fn rt_names(&self) -> Vec<&'static str> {
        [
            (Self::SYS_NICE, "CAP_SYS_NICE"),
            (Self::IPC_LOCK, "CAP_IPC_LOCK"),
            (Self::SYS_RESOURCE, "CAP_SYS_RESOURCE"),
            (Self::SYS_ADMIN, "CAP_SYS_ADMIN"),
        ]
        .into_iter()
        .filter(|(cap, _)| self.has(*cap))
        .map(|(_, name)| name)
        .collect()
    }
}

/// The `CapEff` mask of a `/proc/<pid>/status` text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

/// The effective capabilities of this process.
pub fn capabilities() -> Option<Capabilities> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(Capabilities {
        effective: parse_cap_eff(&status)?,
    })
}

/// The outcome of a trial system call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Attempt {
    /// The call succeeded (and was undone).
    Succeeded,
    /// The call failed.
    Failed {
        /// The OS error number, such as `EPERM` = 1.
        errno: i32,
        /// The OS error text, such as `Operation not permitted`.
        error: String,
    },
}

impl Attempt {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, Attempt::Succeeded)
    }
    /// The OS error number of a failure.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Attempt::Succeeded => None,
            Attempt::Failed { errno, .. } => Some(*errno),
        }
    }
    fn from_io(e: &io::Error) -> Attempt {
        let text = e.to_string();
        // io::Error appends " (os error N)" to the OS text; the errno is kept apart.
        let error = match text.find(" (os error ") {
            Some(i) => text[..i].to_owned(),
            None => text,
        };
        Attempt::Failed {
            errno: e.raw_os_error().unwrap_or(0),
            error,
        }
    }
    fn from_rc(rc: libc::c_long) -> Attempt {
        if rc == 0 {
            Attempt::Succeeded
        } else {
            Attempt::from_io(&io::Error::last_os_error())
        }
    }
}

/// Runs `f` on a throwaway thread that exits right after, so that a scheduling change
/// it makes dies with it.
fn on_throwaway_thread(f: fn() -> Attempt) -> Attempt {
    match std::thread::Builder::new()
        .name("ictus-trial".into())
        .spawn(f)
    {
        Ok(handle) => handle.join().unwrap_or(Attempt::Failed {
            errno: 0,
            error: "trial thread panicked".into(),
        }),
        Err(e) => Attempt::from_io(&e),
    }
}

/// Tries `SCHED_FIFO` priority 1 on a throwaway thread: whether this process may use
/// real-time scheduling.
pub fn try_sched_fifo() -> Attempt {
    on_throwaway_thread(|| {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: `param` is valid for reads during the call; pid 0 is the calling
        // (throwaway) thread on Linux.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        Attempt::from_rc(rc.into())
    })
}

/// Tries `SCHED_DEADLINE` (runtime 1 ms, deadline and period 10 ms) on a throwaway
/// thread that exits at once.
pub fn try_sched_deadline() -> Attempt {
    on_throwaway_thread(|| {
        const SCHED_DEADLINE: u32 = 6;
        let attr = libc::sched_attr {
            size: std::mem::size_of::<libc::sched_attr>() as u32,
            sched_policy: SCHED_DEADLINE,
            sched_flags: 0,
            sched_nice: 0,
            sched_priority: 0,
            sched_runtime: 1_000_000,
            sched_deadline: 10_000_000,
            sched_period: 10_000_000,
        };
        // SAFETY: sched_setattr reads `attr.size` bytes from a valid, initialised
        // sched_attr that outlives the call; pid 0 is the calling (throwaway) thread.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_sched_setattr,
                0 as libc::pid_t,
                &attr as *const libc::sched_attr,
                0 as libc::c_uint,
            )
        };
        Attempt::from_rc(rc)
    })
}

/// Tries to lock one page of memory (`mlock`), then unlocks it.
pub fn try_mlock() -> Attempt {
    // SAFETY: sysconf takes a plain integer and touches no memory of ours.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    let buf = vec![0u8; page];
    // SAFETY: the range lies inside `buf`, which outlives both calls; locking does not
    // change the memory's contents.
    let rc = unsafe { libc::mlock(buf.as_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Attempt::from_rc(rc.into());
    }
    // SAFETY: the same range as the successful mlock above, still alive.
    unsafe { libc::munlock(buf.as_ptr().cast(), buf.len()) };
    Attempt::Succeeded
}

/// A real-time bandwidth budget: real-time tasks may run `runtime` out of every
/// `period` (the global throttle, or a `cpu` cgroup's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtBudget {
    /// Runtime per period; `None` for no limit (`-1`).
    pub runtime_ns: Option<Nanos>,
    /// The accounting period.
    pub period_ns: Nanos,
}

impl RtBudget {
    /// The budget from the kernel's microsecond values (`-1` runtime: no limit).
    pub fn from_micros(runtime_us: i64, period_us: u64) -> RtBudget {
        RtBudget {
            runtime_ns: u64::try_from(runtime_us).ok().map(Nanos::from_micros),
            period_ns: Nanos::from_micros(period_us),
        }
    }
    /// How long a busy real-time task is stalled every period; `None` without a limit.
    pub fn stall_per_period(&self) -> Option<Nanos> {
        self.runtime_ns.map(|r| self.period_ns.saturating_sub(r))
    }
    /// Whether real-time tasks are throttled at all.
    pub fn throttles(&self) -> bool {
        self.stall_per_period().is_some_and(|s| s.as_u64() > 0)
    }
    fn read(runtime: &Path, period: &Path) -> Option<RtBudget> {
        let runtime_us = read_trimmed(runtime)?.parse().ok()?;
        let period_us = read_trimmed(period)?.parse().ok()?;
        Some(RtBudget::from_micros(runtime_us, period_us))
    }
}

/// The global real-time throttle (`kernel.sched_rt_runtime_us` / `sched_rt_period_us`).
pub fn rt_throttling() -> Option<RtBudget> {
    RtBudget::read(
        Path::new("/proc/sys/kernel/sched_rt_runtime_us"),
        Path::new("/proc/sys/kernel/sched_rt_period_us"),
    )
}

/// Whether this process may change the global throttle (`access(W_OK)` on
/// `/proc/sys/kernel/sched_rt_runtime_us`; nothing is written).
pub fn rt_throttling_writable() -> bool {
    writable(Path::new("/proc/sys/kernel/sched_rt_runtime_us"))
}

/// How the cgroup hierarchies are mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupMode {
    /// Only cgroup v1 hierarchies.
    V1,
    /// Only the unified cgroup v2 hierarchy.
    V2,
    /// v1 controllers with a v2 hierarchy beside them.
    Hybrid,
    /// No cgroup file system mounted.
    None,
}

/// One line of `/proc/self/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupMembership {
    /// Hierarchy id (0 for v2).
    pub hierarchy: u32,
    /// The v1 controllers of that hierarchy (`cpu`, `cpuset`, `name=systemd`); empty for v2.
    pub controllers: Vec<String>,
    /// The cgroup path inside the hierarchy, such as `/` or `/user.slice`.
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup` (`id:controllers:path` per line).
pub fn parse_cgroup_file(text: &str) -> Vec<CgroupMembership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy = parts.next()?.parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            let path = parts.next()?.to_owned();
            Some(CgroupMembership {
                hierarchy,
                controllers,
                path,
            })
        })
        .collect()
}

/// Whether this process could shield CPUs with a cpuset (nothing is created).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpusetAccess {
    /// The cgroup version of the cpuset controller: 1 or 2.
    pub version: u8,
    /// This process's cpuset cgroup directory.
    pub directory: String,
    /// Whether the directory is writable (`access(W_OK)`): child cpusets can be made.
    pub writable: bool,
    /// The CPUs this cgroup may use, when readable.
    pub effective_cpus: Option<CpuSet>,
}

/// The cgroup setup seen by this process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroups {
    /// v1, v2, hybrid or none.
    pub mode: CgroupMode,
    /// The lines of `/proc/self/cgroup`.
    pub memberships: Vec<CgroupMembership>,
    /// The real-time budget of this process's v1 `cpu` cgroup (`cpu.rt_runtime_us`),
    /// when the kernel has `CONFIG_RT_GROUP_SCHED`.
    pub cpu_rt_budget: Option<RtBudget>,
    /// The cpuset controller, when mounted.
    pub cpuset: Option<CpusetAccess>,
}

struct Mount {
    point: PathBuf,
    fstype: String,
    options: Vec<String>,
}

fn cgroup_mounts() -> Vec<Mount> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mounts") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (point, fstype, options) = (f.get(1)?, f.get(2)?, f.get(3)?);
            (*fstype == "cgroup" || *fstype == "cgroup2").then(|| Mount {
                point: PathBuf::from(point.replace("\\040", " ")),
                fstype: (*fstype).to_owned(),
                options: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

fn join_cgroup(mount: &Path, path: &str) -> PathBuf {
    let relative = path.trim_start_matches('/');
    if relative.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(relative)
    }
}

/// The cgroup mode, this process's cgroups, its v1 `cpu` real-time budget and whether
/// its cpuset is writable. Reads only; creates nothing.
pub fn cgroups() -> Cgroups {
    let mounts = cgroup_mounts();
    let memberships = std::fs::read_to_string("/proc/self/cgroup")
        .map(|t| parse_cgroup_file(&t))
        .unwrap_or_default();
    let v1 = mounts.iter().any(|m| m.fstype == "cgroup");
    let v2 = mounts.iter().find(|m| m.fstype == "cgroup2");
    let mode = match (v1, v2.is_some()) {
        (true, true) => CgroupMode::Hybrid,
        (true, false) => CgroupMode::V1,
        (false, true) => CgroupMode::V2,
        (false, false) => CgroupMode::None,
    };
    let v1_dir = |controller: &str| -> Option<PathBuf> {
        let mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == controller))?;
        let member = memberships
            .iter()
            .find(|m| m.hierarchy != 0 && m.controllers.iter().any(|c| c == controller))?;
        Some(join_cgroup(&mount.point, &member.path))
    };
    let cpu_rt_budget = v1_dir("cpu").and_then(|dir| {
        RtBudget::read(
            &dir.join("cpu.rt_runtime_us"),
            &dir.join("cpu.rt_period_us"),
        )
    });
    let cpuset = if let Some(dir) = v1_dir("cpuset") {
        Some(CpusetAccess {
            version: 1,
            writable: writable(&dir),
            effective_cpus: read_trimmed(dir.join("cpuset.effective_cpus"))
                .or_else(|| read_trimmed(dir.join("cpuset.cpus")))
                .and_then(|s| s.parse().ok()),
            directory: dir.display().to_string(),
        })
    } else {
        v2.and_then(|mount| {
            let controllers = read_trimmed(mount.point.join("cgroup.controllers"))?;
            if !controllers.split_whitespace().any(|c| c == "cpuset") {
                return None;
            }
            let member = memberships.iter().find(|m| m.hierarchy == 0)?;
            let dir = join_cgroup(&mount.point, &member.path);
            Some(CpusetAccess {
                version: 2,
                writable: writable(&dir),
                effective_cpus: read_trimmed(dir.join("cpuset.cpus.effective"))
                    .and_then(|s| s.parse().ok()),
                directory: dir.display().to_string(),
            })
        })
    };
    Cgroups {
        mode,
        memberships,
        cpu_rt_budget,
        cpuset,
    }
}

/// Interrupt affinity: how many IRQs this process could steer (nothing is written).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqAffinity {
    /// IRQs with an `smp_affinity` file under `/proc/irq`.
    pub irqs: usize,
    /// How many of those files pass `access(W_OK)`. Managed IRQs may still refuse a
    /// write with EPERM.
    pub writable: usize,
    /// `/proc/irq/default_smp_affinity` (a hexadecimal mask).
    pub default_affinity: Option<String>,
}

/// Counts the IRQs and their writable affinity files.
pub fn irq_affinity() -> IrqAffinity {
    let mut out = IrqAffinity {
        default_affinity: read_trimmed("/proc/irq/default_smp_affinity"),
        ..IrqAffinity::default()
    };
    let Ok(entries) = std::fs::read_dir("/proc/irq") else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let is_irq = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        let file = entry.path().join("smp_affinity");
        if is_irq && file.exists() {
            out.irqs += 1;
            if writable(&file) {
                out.writable += 1;
            }
        }
    }
    out
}

/// Whether an `irqbalance` process is running (it would undo manual IRQ affinity).
pub fn irqbalance_running() -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            && read_trimmed(e.path().join("comm")).as_deref() == Some("irqbalance")
    })
}

/// One swap area from `/proc/swaps`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Swap {
    /// The device or file.
    pub device: String,
    /// `partition` or `file`.
    pub kind: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Bytes in use.
    pub used_bytes: u64,
}

/// Parses `/proc/swaps` (sizes in KiB).
pub fn parse_swaps(text: &str) -> Vec<Swap> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(Swap {
                device: (*f.first()?).to_owned(),
                kind: (*f.get(1)?).to_owned(),
                size_bytes: f.get(2)?.parse::<u64>().ok()?.saturating_mul(1024),
                used_bytes: f.get(3)?.parse::<u64>().ok()?.saturating_mul(1024),
            })
        })
        .collect()
}

/// The active swap areas; empty when there are none (or no swap support).
pub fn swaps() -> Vec<Swap> {
    std::fs::read_to_string("/proc/swaps")
        .map(|t| parse_swaps(&t))
        .unwrap_or_default()
}

/// The transparent huge page mode (`always`, `madvise` or `never`); `None` without THP.
pub fn thp_mode() -> Option<String> {
    let line = read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled")?;
    super::kernel::parse_bracketed(&line).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_capability_mask_is_read_as_hex() {
        let status = "Name:\tx\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";
        let sut = Capabilities {
            effective: parse_cap_eff(status).unwrap(),
        };
        assert!(sut.has(Capabilities::SYS_NICE));
        assert!(sut.has(Capabilities::IPC_LOCK));
        assert!(sut.has(Capabilities::SYS_ADMIN));
        assert!(!sut.has(Capabilities::SYS_RESOURCE));
        assert_eq!(
            sut.rt_names(),
            ["CAP_SYS_NICE", "CAP_IPC_LOCK", "CAP_SYS_ADMIN"]
        );
    }

    #[test]
    fn a_status_without_capeff_gives_nothing() {
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
    }

    #[test]
    fn the_default_rt_budget_stalls_fifty_milliseconds_a_second() {
        let sut = RtBudget::from_micros(950_000, 1_000_000);
        assert_eq!(sut.stall_per_period(), Some(Nanos::from_millis(50)));
        assert!(sut.throttles());
    }

    #[test]
    fn a_budget_of_minus_one_does_not_throttle() {
        let sut = RtBudget::from_micros(-1, 1_000_000);
        assert_eq!(sut.runtime_ns, None);
        assert!(!sut.throttles());
    }

    #[test]
    fn cgroup_lines_split_into_hierarchy_controllers_and_path() {
        let sut = parse_cgroup_file("9:name=systemd:/\n3:cpuset:/\n1:cpu:/rt\n0::/user.slice\n");
        assert_eq!(sut.len(), 4);
        assert_eq!(sut[2].controllers, ["cpu"]);
        assert_eq!(sut[2].path, "/rt");
        assert_eq!(sut[3].hierarchy, 0);
        assert!(sut[3].controllers.is_empty());
    }

    #[test]
    fn swap_sizes_are_converted_to_bytes() {
        let sut = parse_swaps(
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/sda2 partition 2097148 1024 -2\n",
        );
        assert_eq!(sut.len(), 1);
        assert_eq!(sut[0].size_bytes, 2_097_148 * 1024);
        assert_eq!(sut[0].used_bytes, 1024 * 1024);
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn the_trial_calls_report_an_outcome_without_panicking() {
        for sut in [try_sched_fifo(), try_sched_deadline(), try_mlock()] {
            assert!(sut.is_ok() || sut.errno().is_some());
        }
    }
}
