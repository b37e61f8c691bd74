//! Why a shield command refused or failed ([`ShieldError`]), and where the journal
//! lives unless told otherwise.

use ictus_core::CpuSet;
use std::path::PathBuf;

use thiserror::Error;

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
