//! The shield: an RT/NRT partition of the CPUs with exact undo.
//!
//! `apply` computes a [`plan::Plan`] from a [`snapshot::Machine`] (pure), then runs its
//! steps one by one, appending each prior value to a [`journal`] (fsync'd) *before* the
//! change. `reset` replays the journal backwards, so it restores the machine after an
//! `apply` killed at any point, and does nothing the second time.
//!
//! - cgroup v1: exclusive cpusets `ictus-rt` and `ictus-nrt` under the cpuset root;
//!   every movable thread of the root goes to `ictus-nrt`.
//! - cgroup v2: a child `ictus-rt` made a cpuset partition (`isolated` where the
//!   kernel offers it); the root partition loses those CPUs by itself.
//! - IRQs (and the default IRQ affinity) go to the NRT CPUs, except those named for the
//!   RT tasks, which go to the RT CPUs; the workqueue cpumask goes to the NRT CPUs.
//! - Each RT CPU's resume latency QoS (`pm_qos_resume_latency_us`) is held at `n/a`,
//!   so it enters no idle state with an exit latency (see
//!   [`snapshot::RESUME_QOS_HELD`]); unlike `/dev/cpu_dma_latency` it outlives the
//!   applying process, so it is journaled and reset like the rest.
//! - Optionally a [`watchdog`] process on the NRT CPUs that demotes a real-time thread
//!   which keeps its CPU longer than a limit; only with it may the RT throttle
//!   (`sched_rt_runtime_us`) be turned off, and only after it runs.
//!
//! Nothing here prints; everything returns data.
#![forbid(unsafe_code)]

pub mod apply;
pub mod balancer;
pub mod class;
pub mod journal;
pub mod mask;
pub mod migrate;
pub mod partition;
pub mod plan;
pub mod scenario;
pub mod snapshot;
pub mod status;
pub mod survey;
pub mod watchdog;

use std::path::PathBuf;

use ictus_core::CpuSet;
use thiserror::Error;

pub use apply::{Applied, ResetOutcome, apply, reset};
pub use plan::{Request, WatchdogLaunch};
pub use status::{Status, status};

/// Where the journal lives unless told otherwise.
pub const DEFAULT_JOURNAL: &str = "/run/ictus/shield.journal";

/// Why a shield command refused or failed.
#[derive(Debug, Error)]
pub enum ShieldError {
    /// Every online CPU was asked for the RT side: nothing would be left for the rest.
    #[error(
        "--rt-cpus {rt} leaves no CPU for the rest of the system (online: {online}); keep at least one CPU out"
    )]
    NoNrtCpu {
        /// The RT CPUs asked for.
        rt: CpuSet,
        /// The online CPUs.
        online: CpuSet,
    },
    /// An RT CPU is not online.
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuOffline {
        /// The CPU asked for.
        cpu: usize,
        /// The online CPUs.
        online: CpuSet,
    },
    /// No RT CPU given.
    #[error("--rt-cpus is empty; name at least one CPU")]
    NoRtCpu,
    /// An `--irq-for` IRQ does not exist.
    #[error("IRQ {irq} does not exist (see /proc/interrupts)")]
    NoSuchIrq {
        /// The IRQ asked for.
        irq: u32,
    },
    /// The process lacks the privilege; nothing was changed.
    #[error("the shield needs {need}; nothing was changed")]
    NotPrivileged {
        /// What it would need.
        need: String,
    },
    /// Neither a cgroup v1 cpuset hierarchy nor a v2 hierarchy with the cpuset controller.
    #[error(
        "no cpuset controller is mounted (neither cgroup v1 cpuset nor v2 with cpuset); nothing was changed"
    )]
    NoCpuset,
    /// A shield (perhaps partial) is already applied.
    #[error("a shield is already applied (journal {journal}); run `ictus shield reset` first")]
    AlreadyApplied {
        /// The journal found.
        journal: PathBuf,
    },
    /// The journal could not be written or read.
    #[error("journal {path}: {source}")]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The journal is not a file that can be read as text (a FIFO, a directory,
    /// too large, not UTF-8).
    #[error(transparent)]
    JournalInput(ictus_os::fs::InputError),
    /// The journal holds a line that is not an entry (and not a torn last line).
    #[error(transparent)]
    BadJournal(ictus_os::fs::Located<String>),
    /// A change the shield needs was refused.
    #[error("writing {value:?} to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The value.
        value: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `--rt-throttle off` without a watchdog: a busy FIFO loop would freeze the machine.
    #[error(
        "--rt-throttle off needs --watchdog LIMIT: without throttling a runaway real-time loop freezes the machine"
    )]
    ThrottleWithoutWatchdog,
    /// A watchdog limit too short to scan for.
    #[error("--watchdog {limit_ms} ms is too short; give at least {min_ms} ms")]
    WatchdogTooShort {
        /// The limit asked for, in milliseconds.
        limit_ms: u64,
        /// The shortest accepted, in milliseconds.
        min_ms: u64,
    },
    /// The watchdog process could not be started, or did not report ready.
    #[error("starting the watchdog ({program}): {why}")]
    WatchdogStart {
        /// The program started.
        program: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// `apply` was stopped by the fault-injection hook at this point.
    #[error("stopped at point {at} (fault injection)")]
    Stopped {
        /// The stop point (see `apply::apply_stopping_after`).
        at: usize,
    },
}
