//! The platform audit behind `ictus doctor`: which real-time features this machine
//! has, which this process may use, and what to do about the rest.
//!
//! The audit gathers [`PlatformFacts`] once (from [`ictus_os::facts`]), then builds one
//! [`Check`] per feature with a pure function of those facts, so every verdict can be
//! tested with invented machines. Missing features never make the audit fail.
//!
//! ```
//! let audit = ictus_probe::doctor::audit();
//! assert!(audit.checks.iter().any(|c| c.id == ictus_probe::doctor::CheckId::Preemption));
//! assert!(!audit.verdict.summary.is_empty());
//! ```

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts::{
    self, Attempt, BootParams, Cache, Capabilities, Cgroups, Clocksource, CpuIdle, IrqAffinity,
    KernelConfig, KernelInfo, PreemptModel, Preemption, ResumeLatency, Rlimit, RtBudget, StealTime,
    Swap,
};
use serde::{Deserialize, Serialize};

/// How a feature stands on this machine, for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The feature is there and this process can use it.
    Available,
    /// The machine (kernel, hardware, configuration) lacks it.
    Missing,
    /// It exists, but this process may not use it.
    NeedsPrivilege,
    /// It could not be determined; the detail says why.
    Unknown,
}

impl Status {
    /// The kebab-case name, as serialized.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Missing => "missing",
            Status::NeedsPrivilege => "needs-privilege",
            Status::Unknown => "unknown",
        }
    }
}

/// One audited feature.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// Its stable identifier.
    pub id: CheckId,
    /// Short human title (at most 26 characters), such as `Real-time priority (FIFO)`.
    pub title: String,
    /// How the feature stands.
    pub status: Status,
    /// One line of facts, with numbers.
    pub detail: String,
    /// What a person can do (a command, a boot parameter), when the status is not
    /// `available` or the setting hurts real-time work.
    pub advice: Option<String>,
}

/// The whole audit: every check and the verdict drawn from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Audit {
    /// The checks, in a stable order.
    pub checks: Vec<Check>,
    /// The conclusion.
    pub verdict: Verdict,
    /// The idle facts behind the `idle-states` check, per CPU and per state (absent
    /// from audits written before ictus read them).
    #[serde(default)]
    pub idle: CpuIdle,
}

/// The conclusion of the audit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// One or two plain sentences.
    pub summary: String,
    /// What makes hard real-time impossible here (for this process).
    pub blockers: Vec<String>,
    /// What degrades real-time behaviour without preventing it.
    pub notes: Vec<String>,
}

/// The stable identifier of a check: its kebab-case name in `doctor.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    /// CPUs, topology, SMT, caches, NUMA.
    Cpus,
    /// The kernel's preemption model.
    Preemption,
    /// The tick and the timers' resolution.
    Hz,
    /// The clocksource.
    Clocksource,
    /// Whether this process may use `SCHED_FIFO`.
    RtPrivileges,
    /// The global RT throttle.
    RtThrottling,
    /// Whether this process may use `SCHED_DEADLINE`.
    SchedDeadline,
    /// cpusets and isolated CPUs.
    CpuShielding,
    /// Steering interrupts off CPUs.
    IrqAffinity,
    /// Memory locking, swap, transparent huge pages.
    Memory,
    /// The CPU frequency governor.
    Power,
    /// The idle states, what waking from them costs, and the PM QoS that keeps CPUs
    /// out of them.
    IdleStates,
    /// Whether a hypervisor runs this machine, and its steal time.
    Virtualization,
    /// The run's keys (`ictus doctor --keys FOLDER` only, after the others): when
    /// each certificate ends.
    Keys,
    /// The kernel's latency tracers.
    Tracers,
    /// A check this version does not know (an audit written by a later one).
    #[serde(other)]
    Other,
}

impl CheckId {
    /// Every check of the machine, in the order the audit lists them ([`CheckId::Keys`]
    /// follows them when asked for).
    pub const ALL: [CheckId; 14] = [
        CheckId::Cpus,
        CheckId::Preemption,
        CheckId::Hz,
        CheckId::Clocksource,
        CheckId::RtPrivileges,
        CheckId::RtThrottling,
        CheckId::SchedDeadline,
        CheckId::CpuShielding,
        CheckId::IrqAffinity,
        CheckId::Memory,
        CheckId::Power,
        CheckId::IdleStates,
        CheckId::Virtualization,
        CheckId::Tracers,
    ];

    /// Its name in `doctor.json` (`rt-privileges`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CheckId::Cpus => "cpus",
            CheckId::Preemption => "preemption",
            CheckId::Hz => "hz",
            CheckId::Clocksource => "clocksource",
            CheckId::RtPrivileges => "rt-privileges",
            CheckId::RtThrottling => "rt-throttling",
            CheckId::SchedDeadline => "sched-deadline",
            CheckId::CpuShielding => "cpu-shielding",
            CheckId::IrqAffinity => "irq-affinity",
            CheckId::Memory => "memory",
            CheckId::Power => "power",
            CheckId::IdleStates => "idle-states",
            CheckId::Virtualization => "virtualization",
            CheckId::Tracers => "tracers",
            CheckId::Keys => "keys",
            CheckId::Other => "other",
        }
    }
}

impl std::fmt::Display for CheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything the audit looks at, gathered once. Built by [`PlatformFacts::gather`];
/// tests build invented ones.
#[derive(Debug, Clone)]
pub struct PlatformFacts {
    /// Online CPUs.
    pub online: CpuSet,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Whether SMT is active.
    pub smt: Option<bool>,
    /// Hardware threads sharing a core.
    pub sibling_groups: Vec<CpuSet>,
    /// Distinct caches.
    pub caches: Vec<Cache>,
    /// Online NUMA nodes.
    pub numa_nodes: CpuSet,
    /// `uname`.
    pub kernel: KernelInfo,
    /// Preemption model.
    pub preemption: Preemption,
    /// Kernel build configuration.
    pub config: Option<KernelConfig>,
    /// `CLOCK_MONOTONIC` resolution.
    pub clock_resolution: Option<Nanos>,
    /// Clocksource.
    pub clocksource: Clocksource,
    /// Trial of `SCHED_FIFO`.
    pub fifo: Attempt,
    /// `RLIMIT_RTPRIO`.
    pub rtprio: Option<Rlimit>,
    /// `RLIMIT_MEMLOCK`.
    pub memlock: Option<Rlimit>,
    /// Effective capabilities.
    pub capabilities: Option<Capabilities>,
    /// Global RT throttle.
    pub rt_throttle: Option<RtBudget>,
    /// Whether the global RT throttle is writable.
    pub rt_throttle_writable: bool,
    /// Trial of `SCHED_DEADLINE`.
    pub deadline: Attempt,
    /// cgroups and cpuset access.
    pub cgroups: Cgroups,
    /// Real-time boot parameters.
    pub boot: BootParams,
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: CpuSet,
    /// `/sys/devices/system/cpu/nohz_full` (`None`: not built).
    pub nohz_full: Option<CpuSet>,
    /// IRQ affinity files.
    pub irq: IrqAffinity,
    /// Whether irqbalance runs.
    pub irqbalance: bool,
    /// Swap areas.
    pub swaps: Vec<Swap>,
    /// Transparent huge page mode.
    pub thp: Option<String>,
    /// Trial of `mlock`.
    pub mlock: Attempt,
    /// cpufreq governors.
    pub governor: Option<String>,
    /// cpuidle setup: driver, governor, each CPU's states and resume-latency limit,
    /// `/dev/cpu_dma_latency`.
    pub idle: CpuIdle,
    /// Hypervisor, `None` on bare metal.
    pub virtualization: Option<String>,
    /// Steal time since boot.
    pub steal: Option<StealTime>,
    /// Available ftrace tracers (`None`: tracefs not readable).
    pub tracers: Option<Vec<String>>,
}

impl PlatformFacts {
    /// Reads every fact from the running system (and runs the harmless trial calls).
    pub fn gather() -> PlatformFacts {
        PlatformFacts {
            online: facts::online_cpus(),
            cpu_model: facts::cpu_model(),
            smt: facts::smt_active(),
            sibling_groups: facts::smt_sibling_groups(),
            caches: facts::caches(),
            numa_nodes: facts::numa_nodes(),
            kernel: facts::kernel(),
            preemption: facts::preemption(),
            config: facts::kernel_config(),
            clock_resolution: ictus_os::clock::resolution(),
            clocksource: facts::clocksource(),
            fifo: facts::try_sched_fifo(),
            rtprio: facts::rlimit_rtprio(),
            memlock: facts::rlimit_memlock(),
            capabilities: facts::capabilities(),
            rt_throttle: facts::rt_throttling(),
            rt_throttle_writable: facts::rt_throttling_writable(),
            deadline: facts::try_sched_deadline(),
            cgroups: facts::cgroups(),
            boot: facts::boot_params(),
            isolated: facts::isolated_cpus(),
            nohz_full: facts::nohz_full_cpus(),
            irq: facts::irq_affinity(),
            irqbalance: facts::irqbalance_running(),
            swaps: facts::swaps(),
            thp: facts::thp_mode(),
            mlock: facts::try_mlock(),
            governor: facts::governor(),
            idle: facts::idle(),
            virtualization: facts::virtualization(),
            steal: facts::steal_time(),
            tracers: facts::tracers(),
        }
    }
}

/// Audits the running machine.
pub fn audit() -> Audit {
    audit_from(&PlatformFacts::gather())
}

/// Audits the machine the facts describe.
pub fn audit_from(f: &PlatformFacts) -> Audit {
    let checks = vec![
        check_cpus(f),
        check_preemption(f),
        check_hz(f),
        check_clocksource(f),
        check_rt_privileges(f),
        check_rt_throttling(f),
        check_sched_deadline(f),
        check_cpu_shielding(f),
        check_irq_affinity(f),
        check_memory(f),
        check_power(f),
        check_idle_states(f),
        check_virtualization(f),
        check_tracers(f),
    ];
    let verdict = verdict(f, &checks);
    Audit {
        checks,
        verdict,
        idle: f.idle.clone(),
    }
}

fn check(
    id: CheckId,
    title: &str,
    status: Status,
    detail: String,
    advice: Option<String>,
) -> Check {
    Check {
        id,
        title: title.to_owned(),
        status,
        detail,
        advice,
    }
}

/// `50 ms`, `1 s`, `2500 us`: whole units without decimals where they divide it
/// (`2.50 ms` where none does).
fn duration_text(d: Nanos) -> String {
    d.show(ictus_core::time::DurationStyle::Whole).to_string()
}

/// `32 KiB`, `8 MiB`, `1536 B`.
fn bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{} {unit}", b / size);
        }
    }
    if b >= 1 << 20 {
        return format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    }
    format!("{b} B")
}

fn limit(v: Option<u64>, unit_bytes: bool) -> String {
    match v {
        None => "unlimited".to_owned(),
        Some(n) if unit_bytes => bytes(n),
        Some(n) => n.to_string(),
    }
}

fn rlimit_text(r: Option<Rlimit>, unit_bytes: bool) -> String {
    match r {
        None => "unknown".to_owned(),
        Some(r) if r.soft == r.hard => limit(r.soft, unit_bytes),
        Some(r) => format!(
            "{} (hard {})",
            limit(r.soft, unit_bytes),
            limit(r.hard, unit_bytes)
        ),
    }
}

fn attempt_text(a: &Attempt) -> String {
    match a {
        Attempt::Succeeded => "allowed".to_owned(),
        Attempt::Failed { errno, error } => {
            format!("refused with {} ({error})", errno_name(*errno))
        }
    }
}

fn errno_name(errno: i32) -> String {
    match errno {
        1 => "EPERM".into(),
        12 => "ENOMEM".into(),
        13 => "EACCES".into(),
        16 => "EBUSY".into(),
        22 => "EINVAL".into(),
        38 => "ENOSYS".into(),
        n => format!("errno {n}"),
    }
}

/// The CPUs a real-time workload would get: every online CPU but the first.
fn rt_cpus(online: &CpuSet) -> String {
    let rest = CpuSet::from_cpus(online.cpus().iter().skip(1).copied());
    if rest.is_empty() {
        "1".to_owned()
    } else {
        rest.to_string()
    }
}

fn check_cpus(f: &PlatformFacts) -> Check {
    let mut parts = vec![format!("{} online ({})", f.online.len(), f.online)];
    if let Some(model) = &f.cpu_model {
        parts.push(model.clone());
    }
    let siblings = if f.sibling_groups.is_empty() {
        "siblings unknown".to_owned()
    } else if f.sibling_groups.iter().all(|g| g.len() == 1) {
        "1 thread per core".to_owned()
    } else {
        let groups: Vec<String> = f.sibling_groups.iter().map(|g| g.to_string()).collect();
        format!("thread siblings {}", groups.join(" "))
    };
    parts.push(match f.smt {
        Some(true) => format!("SMT on ({siblings})"),
        Some(false) => format!("SMT off ({siblings})"),
        None => format!("SMT unknown ({siblings})"),
    });
    if !f.caches.is_empty() {
        let caches: Vec<String> = f
            .caches
            .iter()
            .filter(|c| {
                c.shared_cpus
                    .contains(f.online.cpus().first().copied().unwrap_or(0))
            })
            .map(|c| match c.size_bytes {
                Some(s) => format!("{} {}", c.name(), bytes(s)),
                None => c.name(),
            })
            .collect();
        parts.push(caches.join(", "));
    }
    let nodes = f.numa_nodes.len().max(1);
    parts.push(format!(
        "{nodes} NUMA node{}",
        if nodes == 1 { "" } else { "s" }
    ));
    let detail = parts.join("; ");
    if f.online.len() < 2 {
        return check(
            CheckId::Cpus,
            "CPUs and topology",
            Status::Missing,
            detail,
            Some(
                "one CPU leaves no room for a shielded real-time CPU: use a machine (or VM) with at least 2 CPUs"
                    .into(),
            ),
        );
    }
    let advice = (f.smt == Some(true)).then(|| {
        "SMT shares a core between threads: keep the sibling of each real-time CPU idle, or boot with nosmt (echo off > /sys/devices/system/cpu/smt/control)".to_owned()
    });
    check(
        CheckId::Cpus,
        "CPUs and topology",
        Status::Available,
        detail,
        advice,
    )
}

fn check_preemption(f: &PlatformFacts) -> Check {
    let p = &f.preemption;
    let dynamic = if p.dynamic { ", PREEMPT_DYNAMIC" } else { "" };
    let detail = format!("{}{dynamic} (from {})", p.model, p.source);
    let title = "Kernel preemption";
    let switch = if p.dynamic {
        "boot with preempt=full (this kernel is PREEMPT_DYNAMIC) or use a PREEMPT_RT kernel"
    } else {
        "use a PREEMPT_RT kernel (or one built with CONFIG_PREEMPT)"
    };
    match p.model {
        PreemptModel::Rt => check(CheckId::Preemption, title, Status::Available, detail, None),
        PreemptModel::Full | PreemptModel::Lazy => check(
            CheckId::Preemption,
            title,
            Status::Available,
            detail,
            Some("for the lowest worst-case latency use a PREEMPT_RT kernel".into()),
        ),
        PreemptModel::None | PreemptModel::Voluntary => check(
            CheckId::Preemption,
            title,
            Status::Missing,
            format!(
                "{detail}: kernel code is not preempted, so wake-up latency follows the longest kernel path"
            ),
            Some(switch.into()),
        ),
        PreemptModel::Unknown => check(
            CheckId::Preemption,
            title,
            Status::Unknown,
            format!(
                "{detail}: no readable source names the model (kernel log needs CAP_SYSLOG, no /proc/config.gz)"
            ),
            Some("run as root, or check `dmesg | grep 'Dynamic Preempt'` and `uname -v`".into()),
        ),
    }
}

fn tick_mode(config: Option<&KernelConfig>) -> Option<&'static str> {
    let c = config?;
    Some(if c.enabled("CONFIG_NO_HZ_FULL") {
        "NO_HZ_FULL"
    } else if c.enabled("CONFIG_NO_HZ_IDLE") {
        "NO_HZ_IDLE"
    } else if c.enabled("CONFIG_HZ_PERIODIC") {
        "periodic tick"
    } else {
        "tick mode unknown"
    })
}

fn check_hz(f: &PlatformFacts) -> Check {
    let title = "Tick and timer resolution";
    let hz = f.config.as_ref().and_then(KernelConfig::hz);
    let hz_text = match hz {
        Some(hz) if hz > 0 => format!(
            "HZ={hz} (tick {})",
            Nanos::new(1_000_000_000 / u64::from(hz))
        ),
        _ => "HZ unknown (no kernel config)".to_owned(),
    };
    let mut parts = vec![hz_text];
    if let Some(mode) = tick_mode(f.config.as_ref()) {
        parts.push(mode.to_owned());
    }
    match f.clock_resolution {
        None => {
            parts.push("clock_getres(CLOCK_MONOTONIC) failed".into());
            check(CheckId::Hz, title, Status::Unknown, parts.join(", "), None)
        }
        Some(res) if res.as_u64() <= 1_000 => {
            parts.push(format!(
                "clock_getres(CLOCK_MONOTONIC) = {res} (high-resolution timers)"
            ));
            check(
                CheckId::Hz,
                title,
                Status::Available,
                parts.join(", "),
                None,
            )
        }
        Some(res) => {
            parts.push(format!(
                "clock_getres(CLOCK_MONOTONIC) = {res}: timers fire only on ticks"
            ));
            check(
                CheckId::Hz,
                title,
                Status::Missing,
                parts.join(", "),
                Some("enable high-resolution timers: a kernel with CONFIG_HIGH_RES_TIMERS=y, booted without highres=off".into()),
            )
        }
    }
}

fn check_clocksource(f: &PlatformFacts) -> Check {
    let title = "Clocksource";
    let available = if f.clocksource.available.is_empty() {
        "none listed".to_owned()
    } else {
        f.clocksource.available.join(" ")
    };
    let Some(current) = &f.clocksource.current else {
        return check(
            CheckId::Clocksource,
            title,
            Status::Unknown,
            "/sys/devices/system/clocksource/clocksource0 not readable".into(),
            None,
        );
    };
    let detail = format!("{current} (available: {available})");
    let slow = ["hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"].contains(&current.as_str());
    let advice = slow.then(|| {
        let mut a = format!("{current} makes every clock read a slow device access (microseconds)");
        if f.clocksource.available.iter().any(|s| s == "tsc") {
            a.push_str(": echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource");
        } else {
            a.push_str(": check `dmesg | grep -i tsc` for why the TSC was rejected (tsc=reliable if it is trustworthy)");
        }
        a
    });
    check(
        CheckId::Clocksource,
        title,
        Status::Available,
        detail,
        advice,
    )
}

fn caps_text(caps: Option<Capabilities>) -> String {
    match caps {
        None => "capabilities unknown".to_owned(),
        Some(c) => {
            let names = c.rt_names();
            let missing: Vec<&str> = [
                (Capabilities::SYS_NICE, "CAP_SYS_NICE"),
                (Capabilities::IPC_LOCK, "CAP_IPC_LOCK"),
                (Capabilities::SYS_RESOURCE, "CAP_SYS_RESOURCE"),
            ]
            .into_iter()
            .filter(|(cap, _)| !c.has(*cap))
            .map(|(_, n)| n)
            .collect();
            let have = if names.is_empty() {
                "none of CAP_SYS_NICE, CAP_IPC_LOCK, CAP_SYS_RESOURCE, CAP_SYS_ADMIN".to_owned()
            } else {
                names.join(" ")
            };
            if missing.is_empty() || names.is_empty() {
                format!("capabilities: {have}")
            } else {
                format!("capabilities: {have} (no {})", missing.join(" "))
            }
        }
    }
}

/// The cgroup `cpu` budget of this process when it is zero (FIFO is refused there).
fn zero_cgroup_budget(f: &PlatformFacts) -> Option<String> {
    let budget = f.cgroups.cpu_rt_budget?;
    if budget.runtime_ns != Some(Nanos::ZERO) {
        return None;
    }
    let member = f
        .cgroups
        .memberships
        .iter()
        .find(|m| m.controllers.iter().any(|c| c == "cpu"))?;
    Some(member.path.clone())
}

fn check_rt_privileges(f: &PlatformFacts) -> Check {
    let title = "Real-time priority (FIFO)";
    let detail = format!(
        "SCHED_FIFO {}; RLIMIT_RTPRIO {}; RLIMIT_MEMLOCK {}; {}",
        attempt_text(&f.fifo),
        rlimit_text(f.rtprio, false),
        rlimit_text(f.memlock, true),
        caps_text(f.capabilities)
    );
    let via_cap = f.rtprio.is_some_and(|r| r.soft == Some(0))
        && f.capabilities
            .is_some_and(|c| c.has(Capabilities::SYS_NICE));
    match &f.fifo {
        Attempt::Succeeded if via_cap => check(
            CheckId::RtPrivileges,
            title,
            Status::Available,
            format!("{detail}; FIFO works through CAP_SYS_NICE"),
            None,
        ),
        Attempt::Succeeded => check(
            CheckId::RtPrivileges,
            title,
            Status::Available,
            detail,
            None,
        ),
        Attempt::Failed { errno: 1, .. } => {
            let advice = match zero_cgroup_budget(f) {
                Some(path) => format!(
                    "this process's cpu cgroup {path} has cpu.rt_runtime_us = 0: give it an RT budget (echo 100000 > /sys/fs/cgroup/cpu{path}/cpu.rt_runtime_us) or run in the root cpu cgroup"
                ),
                None => "grant real-time priority: sudo setcap cap_sys_nice,cap_ipc_lock+ep $(which ictus), or `ulimit -r 95` (limits.conf: `@realtime - rtprio 95`), or run as root".to_owned(),
            };
            check(
                CheckId::RtPrivileges,
                title,
                Status::NeedsPrivilege,
                detail,
                Some(advice),
            )
        }
        Attempt::Failed { errno, .. } => check(
            CheckId::RtPrivileges,
            title,
            Status::Unknown,
            format!("{detail}; unexpected {}", errno_name(*errno)),
            Some("check `chrt -f 1 true` and the kernel log".into()),
        ),
    }
}

fn check_rt_throttling(f: &PlatformFacts) -> Check {
    let title = "RT throttling";
    let Some(budget) = f.rt_throttle else {
        return check(
            CheckId::RtThrottling,
            title,
            Status::Unknown,
            "/proc/sys/kernel/sched_rt_runtime_us not readable".into(),
            None,
        );
    };
    let us = |n: Nanos| n.as_u64() / 1_000;
    let runtime = budget
        .runtime_ns
        .map_or("-1".to_owned(), |r| us(r).to_string());
    let mut detail = format!(
        "sched_rt_runtime_us {runtime} of sched_rt_period_us {}",
        us(budget.period_ns)
    );
    match budget.stall_per_period() {
        Some(stall) if stall.as_u64() > 0 => {
            let per_second = stall.as_u64() as f64 * 1e9 / budget.period_ns.as_u64().max(1) as f64;
            detail.push_str(&format!(
                ": a busy SCHED_FIFO task is stalled about {} every second",
                duration_text(Nanos::new(per_second as u64))
            ));
        }
        _ => detail.push_str(": no throttling (a runaway SCHED_FIFO task can hang its CPU)"),
    }
    if let Some(cg) = f.cgroups.cpu_rt_budget {
        let cg_runtime = cg.runtime_ns.map_or("-1".to_owned(), |r| us(r).to_string());
        detail.push_str(&format!(
            "; cpu cgroup rt_runtime_us {cg_runtime}/{}",
            us(cg.period_ns)
        ));
    }
    let status = if f.rt_throttle_writable {
        Status::Available
    } else {
        Status::NeedsPrivilege
    };
    let advice = if budget.throttles() {
        let prefix = if f.rt_throttle_writable {
            ""
        } else {
            "as root: "
        };
        Some(format!(
            "{prefix}sysctl kernel.sched_rt_runtime_us=-1 lifts the stall, but only together with a watchdog (a lower-priority FIFO task or an external monitor) since a runaway loop then owns its CPU"
        ))
    } else if !f.rt_throttle_writable {
        Some("changing the throttle needs root (sysctl kernel.sched_rt_runtime_us)".into())
    } else {
        None
    };
    check(CheckId::RtThrottling, title, status, detail, advice)
}

fn check_sched_deadline(f: &PlatformFacts) -> Check {
    let title = "SCHED_DEADLINE";
    let detail = format!(
        "sched_setattr(SCHED_DEADLINE, runtime 1 ms, period 10 ms) {}",
        attempt_text(&f.deadline)
    );
    match &f.deadline {
        Attempt::Succeeded => check(CheckId::SchedDeadline, title, Status::Available, detail, None),
        Attempt::Failed { errno: 1, .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::NeedsPrivilege,
            detail,
            Some("needs CAP_SYS_NICE (sudo setcap cap_sys_nice+ep $(which ictus)) and an affinity that spans the whole root domain: restrict CPUs with an exclusive cpuset, not with sched_setaffinity".into()),
        ),
        Attempt::Failed { errno: 16, .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::Unknown,
            format!("{detail}: admission control found no free bandwidth"),
            Some("other deadline tasks hold the bandwidth; check kernel.sched_rt_runtime_us".into()),
        ),
        Attempt::Failed { .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::Missing,
            detail,
            Some("this kernel does not offer SCHED_DEADLINE (Linux 3.14 or later with SMP)".into()),
        ),
    }
}

fn check_cpu_shielding(f: &PlatformFacts) -> Check {
    let title = "CPU shielding";
    let mode = match f.cgroups.mode {
        facts::CgroupMode::V1 => "cgroup v1",
        facts::CgroupMode::V2 => "cgroup v2",
        facts::CgroupMode::Hybrid => "cgroup hybrid (v1 + v2)",
        facts::CgroupMode::None => "no cgroups mounted",
    };
    let cpuset = match &f.cgroups.cpuset {
        None => "no cpuset controller".to_owned(),
        Some(c) => format!(
            "cpuset v{} at {} {}",
            c.version,
            c.directory,
            if c.writable { "writable" } else { "read-only" }
        ),
    };
    let param = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    let isolated = if f.isolated.is_empty() {
        "none".to_owned()
    } else {
        f.isolated.to_string()
    };
    let nohz = match &f.nohz_full {
        None => "nohz_full not built".to_owned(),
        Some(s) if s.is_empty() => "nohz_full none".to_owned(),
        Some(s) => format!("nohz_full {s}"),
    };
    let detail = format!(
        "{mode}; {cpuset}; isolcpus={} (isolated CPUs: {isolated}); {nohz}; rcu_nocbs={}",
        param(&f.boot.isolcpus),
        param(&f.boot.rcu_nocbs)
    );
    let cpus = rt_cpus(&f.online);
    let plural = if cpus.contains(['-', ',']) { "s" } else { "" };
    let boot_advice = format!(
        "boot with isolcpus=domain,managed_irq,{cpus} nohz_full={cpus} rcu_nocbs={cpus} to keep CPU{plural} {cpus} free of system work (CPU {} stays for the system)",
        f.online.cpus().first().copied().unwrap_or(0)
    );
    let isolated_any = !f.isolated.is_empty();
    match &f.cgroups.cpuset {
        Some(c) if c.writable => check(
            CheckId::CpuShielding,
            title,
            Status::Available,
            detail,
            (!isolated_any).then_some(format!(
                "no isolated CPUs: shield with a cpuset at run time, or {boot_advice}"
            )),
        ),
        Some(_) if !isolated_any => check(
            CheckId::CpuShielding,
            title,
            Status::NeedsPrivilege,
            detail,
            Some(format!(
                "run as root, or have the cpuset delegated (systemd: Delegate=yes, AllowedCPUs=); or {boot_advice}"
            )),
        ),
        _ if isolated_any => check(
            CheckId::CpuShielding,
            title,
            Status::Available,
            detail,
            None,
        ),
        _ => check(
            CheckId::CpuShielding,
            title,
            Status::Missing,
            detail,
            Some(match f.cgroups.mode {
                facts::CgroupMode::V2 | facts::CgroupMode::Hybrid => format!(
                    "enable the cpuset controller (echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control), or {boot_advice}"
                ),
                _ => format!(
                    "mount the cpuset controller (mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset), or {boot_advice}"
                ),
            }),
        ),
    }
}

fn check_irq_affinity(f: &PlatformFacts) -> Check {
    let title = "Interrupt shielding";
    let default = f.irq.default_affinity.as_deref().unwrap_or("unknown");
    let detail = format!(
        "{} of {} IRQs have a writable smp_affinity (access check; managed IRQs may still refuse); default_smp_affinity {default}; irqbalance {}",
        f.irq.writable,
        f.irq.irqs,
        if f.irqbalance {
            "running"
        } else {
            "not running"
        }
    );
    let irqbalance = f.irqbalance.then(|| {
        format!(
            "irqbalance moves IRQs back onto real-time CPUs: systemctl stop irqbalance, or set IRQBALANCE_BANNED_CPULIST={}",
            rt_cpus(&f.online)
        )
    });
    if f.irq.irqs == 0 {
        return check(
            CheckId::IrqAffinity,
            title,
            Status::Unknown,
            format!("{detail}: /proc/irq lists no IRQs"),
            irqbalance,
        );
    }
    if f.irq.writable == 0 {
        let mut advice =
            "steering interrupts needs root (echo <mask> > /proc/irq/N/smp_affinity)".to_owned();
        if let Some(i) = irqbalance {
            advice.push_str("; ");
            advice.push_str(&i);
        }
        return check(
            CheckId::IrqAffinity,
            title,
            Status::NeedsPrivilege,
            detail,
            Some(advice),
        );
    }
    check(
        CheckId::IrqAffinity,
        title,
        Status::Available,
        detail,
        irqbalance,
    )
}

fn check_memory(f: &PlatformFacts) -> Check {
    let title = "Memory locking and swap";
    let swap_total: u64 = f.swaps.iter().map(|s| s.size_bytes).sum();
    let swap = if f.swaps.is_empty() {
        "no swap".to_owned()
    } else {
        format!("swap {} in {} area(s)", bytes(swap_total), f.swaps.len())
    };
    let thp = f.thp.as_deref().unwrap_or("not available");
    let ipc_lock = f
        .capabilities
        .is_some_and(|c| c.has(Capabilities::IPC_LOCK));
    let detail = format!(
        "{swap}; THP {thp}; mlock of one page {}; RLIMIT_MEMLOCK {}{}",
        attempt_text(&f.mlock),
        rlimit_text(f.memlock, true),
        if ipc_lock {
            " (CAP_IPC_LOCK lifts it)"
        } else {
            ""
        }
    );
    let mut advice: Vec<String> = Vec::new();
    let status = match &f.mlock {
        Attempt::Succeeded => Status::Available,
        Attempt::Failed {
            errno: 1 | 12 | 11, ..
        } => {
            advice.push("allow memory locking: `ulimit -l unlimited` (limits.conf: `@realtime - memlock unlimited`) or sudo setcap cap_ipc_lock+ep $(which ictus)".into());
            Status::NeedsPrivilege
        }
        Attempt::Failed { .. } => Status::Unknown,
    };
    if !f.swaps.is_empty() {
        advice.push("lock real-time processes in memory (mlockall, ictus does this) or turn swap off (swapoff -a)".into());
    }
    if thp == "always" {
        advice.push("THP always can stall on compaction: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled".into());
    }
    let advice = (!advice.is_empty()).then(|| advice.join("; "));
    check(CheckId::Memory, title, status, detail, advice)
}

fn check_power(f: &PlatformFacts) -> Check {
    let title = "CPU frequency";
    match &f.governor {
        None => check(
            CheckId::Power,
            title,
            Status::Available,
            "no cpufreq: the kernel does not change the clock speed (fixed, or set by the firmware or the host)".into(),
            None,
        ),
        Some(g) if g == "performance" => check(
            CheckId::Power,
            title,
            Status::Available,
            "governor performance".into(),
            None,
        ),
        Some(g) => check(
            CheckId::Power,
            title,
            Status::Available,
            format!("governor {g}: the clock speed follows the load, so a loop that just woke runs slower"),
            Some("set the performance governor: cpupower frequency-set -g performance".into()),
        ),
    }
}

/// An idle state whose exit latency is at most this is cheap to wake from: a timer
/// wake-up is late by no more than a few microseconds because of it.
pub const CHEAP_EXIT_LATENCY: Nanos = Nanos::from_micros(5);

/// One idle state over every CPU that has it: the largest exit latency a CPU
/// declares for it, its use summed.
#[derive(Debug, Clone, PartialEq)]
struct StateTotal {
    name: String,
    exit_latency: Nanos,
    /// Times entered, all CPUs together.
    usage: u64,
    /// Time spent in it, all CPUs together.
    time: Nanos,
    /// Whether some CPU may enter it (not disabled there).
    enabled: bool,
}

/// The idle states by their index (`stateK`), over every CPU.
fn state_totals(idle: &CpuIdle) -> Vec<StateTotal> {
    let mut totals: Vec<StateTotal> = Vec::new();
    for cpu in &idle.cpus {
        for (k, s) in cpu.states.iter().enumerate() {
            if k == totals.len() {
                totals.push(StateTotal {
                    name: s.name.clone(),
                    exit_latency: Nanos::ZERO,
                    usage: 0,
                    time: Nanos::ZERO,
                    enabled: false,
                });
            }
            let t = &mut totals[k];
            t.exit_latency = t.exit_latency.max(s.exit_latency_ns);
            t.usage = t.usage.saturating_add(s.usage);
            t.time = Nanos::new(t.time.as_u64().saturating_add(s.time_ns.as_u64()));
            t.enabled |= !s.disabled;
        }
    }
    totals
}

/// `392863 times for 55.1 s`.
fn usage_text(t: &StateTotal) -> String {
    let time = t.time.show(ictus_core::time::DurationStyle::Tenths);
    format!("{} times for {time}", t.usage)
}

/// The CPUs under each resume-latency limit: `none on CPUs 0-1`, `0 us on CPUs 2-3`.
fn resume_latency_text(idle: &CpuIdle) -> Option<String> {
    let mut groups: Vec<(Option<ResumeLatency>, Vec<usize>)> = Vec::new();
    for cpu in &idle.cpus {
        match groups.iter_mut().find(|(l, _)| *l == cpu.resume_latency) {
            Some((_, cpus)) => cpus.push(cpu.cpu),
            None => groups.push((cpu.resume_latency, vec![cpu.cpu])),
        }
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(limit, cpus)| {
            let limit = match limit {
                None => "unreadable".to_owned(),
                Some(ResumeLatency::NoConstraint) => "none".to_owned(),
                Some(ResumeLatency::Limit(l)) => duration_text(l),
            };
            format!("{limit} on CPUs {}", CpuSet::from_cpus(cpus))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// What ictus does about idle states, for the detail.
const ICTUS_IDLE_HANDLING: &str = "ictus: the probes, `ictus run` and `ictus node` hold /dev/cpu_dma_latency at 0 for their run unless --pm-qos off (as cyclictest does: idle CPUs then only poll); `ictus shield` sets the RT CPUs' resume-latency QoS";

fn check_idle_states(f: &PlatformFacts) -> Check {
    let title = "Idle states";
    let idle = &f.idle;
    let totals = state_totals(idle);
    let device = idle.cpu_dma_latency;
    let dma = match (device.present, device.writable) {
        (false, _) => "/dev/cpu_dma_latency absent",
        (true, true) => "/dev/cpu_dma_latency writable",
        (true, false) => "/dev/cpu_dma_latency present but not writable",
    };
    let vm = f.virtualization.is_some();
    let driver = idle.driver.as_deref().filter(|d| *d != "none");
    let (Some(driver), false) = (driver, totals.is_empty()) else {
        let mut detail =
            "no cpuidle driver: an idle CPU runs the architecture's default idle".to_owned();
        if vm {
            detail.push_str(" (HLT in this VM, which exits to the host: waking it also waits for the host to run the vCPU again)");
        }
        detail.push_str(&format!("; {dma}"));
        return check(CheckId::IdleStates, title, Status::Available, detail, None);
    };
    let governor = idle.governor.as_deref().unwrap_or("unknown");
    let mut parts = vec![format!("driver {driver}, governor {governor}")];
    let states: Vec<String> = totals
        .iter()
        .map(|t| {
            format!(
                "{} (exit {}{}) used {}",
                t.name,
                duration_text_us(t.exit_latency),
                if t.enabled { "" } else { ", disabled" },
                usage_text(t)
            )
        })
        .collect();
    parts.push(format!("states: {}", states.join("; ")));
    let deepest = totals
        .iter()
        .filter(|t| t.enabled)
        .max_by_key(|t| t.exit_latency);
    if let Some(d) = deepest {
        parts.push(format!(
            "a timer wake-up on a CPU idling in its deepest state ({}) is delayed by its exit latency, {}",
            d.name,
            duration_text_us(d.exit_latency)
        ));
    }
    // In a guest every state but polling halts the vCPU, and the host takes over.
    let halting: Vec<&str> = totals
        .iter()
        .filter(|t| t.enabled && t.name != "POLL")
        .map(|t| t.name.as_str())
        .collect();
    if vm && !halting.is_empty() {
        parts.push(format!(
            "in this VM {} halts the vCPU, which exits to the host: waking it also waits for the host to run the vCPU again",
            halting.join(", ")
        ));
    }
    if let Some(resume) = resume_latency_text(idle) {
        parts.push(format!("resume-latency QoS: {resume}"));
    }
    parts.push(dma.to_owned());
    parts.push(ICTUS_IDLE_HANDLING.to_owned());
    let detail = parts.join("; ");

    let costly: Vec<String> = totals
        .iter()
        .filter(|t| t.enabled && t.exit_latency > CHEAP_EXIT_LATENCY)
        .map(|t| format!("{} {}", t.name, duration_text_us(t.exit_latency)))
        .collect();
    let halt_unheld = vm && !halting.is_empty() && !device.writable;
    if costly.is_empty() {
        let advice = halt_unheld.then(|| {
            "to keep the vCPUs polling instead of exiting to the host, run as root or give the user write access to /dev/cpu_dma_latency (udev: KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\")".to_owned()
        });
        return check(
            CheckId::IdleStates,
            title,
            Status::Available,
            detail,
            advice,
        );
    }
    let costly = costly.join(", ");
    match (device.present, device.writable) {
        (true, true) => check(CheckId::IdleStates, title, Status::Available, detail, None),
        (true, false) => check(
            CheckId::IdleStates,
            title,
            Status::NeedsPrivilege,
            detail,
            Some(format!(
                "states with a larger exit latency ({costly}) stay open to idle CPUs: run as root or give the user write access to /dev/cpu_dma_latency (udev: KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\") so that ictus can hold it at 0"
            )),
        ),
        (false, _) => check(
            CheckId::IdleStates,
            title,
            Status::Missing,
            detail,
            Some(format!(
                "states with a larger exit latency ({costly}) and no /dev/cpu_dma_latency to hold them off: disable them (echo 1 > /sys/devices/system/cpu/cpu*/cpuidle/stateN/disable) or boot with processor.max_cstate=1 intel_idle.max_cstate=0"
            )),
        ),
    }
}

/// An exit latency in microseconds, as the kernel declares it: `0 us`, `133 us`.
fn duration_text_us(d: Nanos) -> String {
    d.show(ictus_core::time::DurationStyle::Micros).to_string()
}

fn steal_text(steal: Option<StealTime>) -> String {
    match steal {
        None => "steal time unknown".to_owned(),
        Some(s) => format!(
            "steal {:.1} s since boot ({:.2} % of CPU time)",
            s.steal_ns.as_secs_f64(),
            s.fraction() * 100.0
        ),
    }
}

fn check_virtualization(f: &PlatformFacts) -> Check {
    let title = "Bare metal (no hypervisor)";
    match &f.virtualization {
        None => check(
            CheckId::Virtualization,
            title,
            Status::Available,
            format!("bare metal; {}", steal_text(f.steal)),
            None,
        ),
        Some(h) => check(
            CheckId::Virtualization,
            title,
            Status::Missing,
            format!("virtual machine: {h}; {}", steal_text(f.steal)),
            Some("the host schedules these vCPUs: pin each vCPU to a dedicated, isolated host core (and give the guest no more vCPUs than that), or run on bare metal for hard real-time".into()),
        ),
    }
}

fn check_tracers(f: &PlatformFacts) -> Check {
    let title = "Latency tracers";
    const WANTED: [(&str, &str); 3] = [
        ("hwlat", "CONFIG_HWLAT_TRACER"),
        ("timerlat", "CONFIG_TIMERLAT_TRACER"),
        ("osnoise", "CONFIG_OSNOISE_TRACER"),
    ];
    let build_advice = "rebuild the kernel with CONFIG_HWLAT_TRACER, CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER (or use rtla from a distribution kernel that has them)";
    // None of the wanted tracers, whether tracefs or the kernel config says so.
    let none_built = |detail| {
        check(
            CheckId::Tracers,
            title,
            Status::Missing,
            detail,
            Some(build_advice.into()),
        )
    };
    if let Some(list) = &f.tracers {
        let have: Vec<&str> = WANTED
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| list.iter().any(|t| t == n))
            .collect();
        let detail = format!(
            "available_tracers: {}; wanted present: {}",
            list.join(" "),
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(" ")
            }
        );
        return if have.is_empty() {
            none_built(detail)
        } else {
            let advice = (have.len() < WANTED.len()).then(|| build_advice.to_owned());
            check(CheckId::Tracers, title, Status::Available, detail, advice)
        };
    }
    let Some(config) = &f.config else {
        return check(
            CheckId::Tracers,
            title,
            Status::Unknown,
            "tracefs not readable and no kernel config to tell what is built".into(),
            Some("as root: mount -t tracefs nodev /sys/kernel/tracing; cat /sys/kernel/tracing/available_tracers".into()),
        );
    };
    let built: Vec<&str> = WANTED
        .iter()
        .filter(|(_, key)| config.enabled(key))
        .map(|(n, _)| *n)
        .collect();
    let detail = format!(
        "tracefs not mounted or not readable; {} built: {}",
        config.source,
        if built.is_empty() {
            "none of hwlat timerlat osnoise".to_owned()
        } else {
            built.join(" ")
        }
    );
    if built.is_empty() {
        none_built(detail)
    } else {
        check(
            CheckId::Tracers,
            title,
            Status::NeedsPrivilege,
            detail,
            Some("as root: mount -t tracefs nodev /sys/kernel/tracing".into()),
        )
    }
}

fn status_of(checks: &[Check], id: CheckId) -> Option<&Check> {
    checks.iter().find(|c| c.id == id)
}

fn verdict(f: &PlatformFacts, checks: &[Check]) -> Verdict {
    let mut blockers: Vec<String> = Vec::new();
    // (short label for the summary, full note)
    let mut notes: Vec<(String, String)> = Vec::new();
    let is = |id: CheckId, s: Status| status_of(checks, id).is_some_and(|c| c.status == s);

    if !f.fifo.is_ok() {
        blockers.push(format!(
            "no permission to use SCHED_FIFO: {}",
            attempt_text(&f.fifo)
        ));
    }
    if !f.mlock.is_ok() {
        blockers.push(format!(
            "memory cannot be locked, so page faults can strike the loop: mlock {}",
            attempt_text(&f.mlock)
        ));
    }
    if is(CheckId::Hz, Status::Missing) {
        blockers.push("no high-resolution timers: wake-ups are quantised to the tick".into());
    }
    if f.online.len() < 2 {
        blockers.push("a single CPU: nothing can be shielded".into());
    }

    match f.preemption.model {
        PreemptModel::None | PreemptModel::Voluntary => notes.push((
            format!("preemption model {}", f.preemption.model),
            format!(
                "kernel preemption is {}: a real-time task waits for the kernel to reach a preemption point (milliseconds under I/O load)",
                f.preemption.model
            ),
        )),
        PreemptModel::Unknown => notes.push((
            "preemption model unknown".into(),
            "the preemption model could not be determined".into(),
        )),
        _ => {}
    }
    if let Some(h) = &f.virtualization {
        let steal = f
            .steal
            .map(|s| format!(", {:.2} % steal so far", s.fraction() * 100.0))
            .unwrap_or_default();
        notes.push((
            format!("virtual machine ({h})"),
            format!("virtual machine ({h}{steal}): the host can preempt a vCPU at any moment"),
        ));
    }
    if f.rt_throttle.is_some_and(|b| b.throttles()) {
        let stall = f
            .rt_throttle
            .and_then(|b| b.stall_per_period())
            .unwrap_or(Nanos::ZERO);
        let period = f.rt_throttle.map_or(Nanos::ZERO, |b| b.period_ns);
        notes.push((
            "RT throttling on".into(),
            format!(
                "RT throttling is on: a busy SCHED_FIFO task is stalled {} of every {}",
                duration_text(stall),
                duration_text(period)
            ),
        ));
    }
    if f.isolated.is_empty() && f.online.len() >= 2 {
        notes.push((
            "no isolated CPUs".into(),
            "no isolated CPUs: real-time CPUs must be shielded at run time".into(),
        ));
    }
    if f.smt == Some(true) {
        notes.push((
            "SMT on".into(),
            "SMT is on: a sibling thread shares the core of a real-time CPU".into(),
        ));
    }
    if f.irqbalance {
        notes.push((
            "irqbalance running".into(),
            "irqbalance is running and will move interrupts onto real-time CPUs".into(),
        ));
    }
    if !f.swaps.is_empty() {
        notes.push((
            "swap on".into(),
            "swap is on: unlocked memory of real-time processes may be paged out".into(),
        ));
    }
    if let Some(g) = &f.governor
        && g != "performance"
    {
        notes.push((
            format!("governor {g}"),
            format!("CPU frequency governor is {g}: clock speed changes with load"),
        ));
    }

    if is(CheckId::IdleStates, Status::NeedsPrivilege) || is(CheckId::IdleStates, Status::Missing) {
        notes.push((
            "deep idle states".into(),
            "idle CPUs may enter states whose exit latency delays every wake-up, and this process cannot hold the CPU latency QoS that keeps them out".into(),
        ));
    }
    let summary = if !blockers.is_empty() {
        format!(
            "This machine cannot run hard real-time loops for this process: {}.",
            blockers.join("; ")
        )
    } else if notes.is_empty() {
        "This machine can run hard real-time loops: every check passed.".to_owned()
    } else {
        let labels: Vec<&str> = notes.iter().map(|(s, _)| s.as_str()).collect();
        format!(
            "This machine can run real-time loops with caveats: {}.",
            labels.join(", ")
        )
    };
    Verdict {
        summary,
        blockers,
        notes: notes.into_iter().map(|(_, n)| n).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_os::facts::{
        CgroupMembership, CgroupMode, CpuIdleStates, CpusetAccess, IdleState, PmQosDevice,
        parse_kernel_config,
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
}
