//! Keeping the real-time CPUs to themselves: shielding, interrupts, memory.

use ictus_os::facts::{self, Attempt, Capabilities};

use crate::doctor::audit::{Check, CheckId, Status, check};
use crate::doctor::facts::PlatformFacts;
use crate::doctor::text::{attempt_text, bytes, rlimit_text, rt_cpus};

pub(crate) fn check_cpu_shielding(f: &PlatformFacts) -> Check {
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

pub(crate) fn check_irq_affinity(f: &PlatformFacts) -> Check {
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

pub(crate) fn check_memory(f: &PlatformFacts) -> Check {
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
