//! The facts the audit looks at, gathered once from [`ictus_os::facts`].

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts::{
    self, Attempt, BootParams, Cache, Capabilities, Cgroups, Clocksource, CpuIdle, IrqAffinity,
    KernelConfig, KernelInfo, Preemption, Rlimit, RtBudget, StealTime, Swap,
};

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
