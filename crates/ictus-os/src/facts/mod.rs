//! What the machine is: topology, kernel, preemption model, privileges, cgroups,
//! interrupts, memory and power settings, read from `/proc`, `/sys`, `uname`,
//! `clock_getres` and a few harmless trial system calls.
//!
//! Every function returns data and never panics: a file that is absent or unreadable
//! yields `None`, an empty list or an empty set. The audit (`ictus doctor`) and the
//! provenance header of every record are built from these functions.
//!
//! ```
//! use ictus_os::facts;
//! let cpus = facts::online_cpus();
//! assert!(!cpus.is_empty());
//! let kernel = facts::kernel();
//! assert!(!kernel.release.is_empty());
//! let preemption = facts::preemption();
//! assert!(!preemption.source.is_empty());
//! ```
//!
//! The trial calls ([`try_sched_fifo`], [`try_sched_deadline`], [`try_mlock`]) change
//! nothing that outlives them: the scheduling trials run on a throwaway thread that
//! exits at once, and the locked page is unlocked and freed.

mod cpu;
mod kernel;
mod read;
mod system;

pub use cpu::{
    Cache, CpuIdle, CpuIdleStates, IdleState, PmQosDevice, ResumeLatency, StealTime, caches,
    cpu_dma_latency_present, cpu_dma_latency_writable, cpu_model, governor, idle, isolated_cpus,
    nohz_full_cpus, numa_nodes, online_cpus, parse_cache_size, smt_active, smt_sibling_groups,
    steal_time, virtualization,
};
pub use kernel::{
    BootParams, Clocksource, KernelConfig, KernelInfo, PreemptModel, Preemption, boot_params,
    clocksource, cmdline, hz, kernel, kernel_config, parse_bracketed, parse_dynamic_preempt_log,
    parse_kernel_config, parse_preempt_choice, preemption, tracers,
};
pub use read::writable;
pub use system::{
    Attempt, Capabilities, CgroupMembership, CgroupMode, Cgroups, CpusetAccess, IrqAffinity,
    Rlimit, RtBudget, Swap, capabilities, cgroups, irq_affinity, irqbalance_running, parse_cap_eff,
    parse_cgroup_file, parse_swaps, rlimit_memlock, rlimit_rtprio, rt_throttling,
    rt_throttling_writable, swaps, thp_mode, try_mlock, try_sched_deadline, try_sched_fifo,
};
