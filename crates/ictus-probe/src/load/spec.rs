//! What a load is asked for and what it reports: its kinds, specs, reports and
//! errors.

use ictus_core::CpuSet;
use ictus_os::facts;
use ictus_os::sched::SchedError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use thiserror::Error;

/// A kind of background load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum LoadKind {
    /// A busy integer loop per CPU, without any system call (ARTiS "computing load").
    Cpu,
    /// Per CPU, a loop writing 256 KiB to a temporary file, `fsync`ing it and reading
    /// 256 KiB back (ARTiS `iodisk`). Reads are mostly served from the page cache; the
    /// disk sees the writes and the flushes. The temporary directory is under
    /// `$TMPDIR` if set, else `/var/tmp` (on disk, where `/tmp` may be tmpfs), and is
    /// removed when the load stops.
    Disk,
    /// A UDP flood of 64-byte datagrams over loopback (127.0.0.1 only), in
    /// sender/receiver pairs: the CPUs are taken two by two (sender on the first,
    /// receiver on the second); an odd CPU out gets both of a pair. The loopback
    /// replaces ARTiS's ICMP echo flood on a real interface: it exercises the same
    /// softirq and socket paths without leaving the machine.
    Net,
    /// Per CPU, tight system calls that take kernel locks (ARTiS `ioctl`, which took
    /// the big kernel lock, gone since Linux 2.6.39): `pipe2`, a 1-byte `write` and
    /// `read`, and two `close`s. Creating and destroying descriptors takes this
    /// process's file-table spinlock, which all workers share and contend for across
    /// CPUs, plus the pipe mutex, slab allocations and RCU-deferred frees. Cheap,
    /// lockless calls such as `getppid` would only measure the system-call entry.
    Syscall,
    /// Per CPU, random read-modify-writes of 64-byte lines over a private buffer of at
    /// least four times the largest cache the kernel reports (ARTiS `cachemiss`): the
    /// caches and TLBs are cold for whatever runs next on that CPU.
    Cachemiss,
    /// Per CPU, streaming copies between two private buffers, each at least twice the
    /// largest cache: memory bandwidth taken from every other CPU.
    Membw,
}

impl LoadKind {
    /// Every kind, in the order of the documentation.
    pub const ALL: [LoadKind; 6] = [
        LoadKind::Cpu,
        LoadKind::Disk,
        LoadKind::Net,
        LoadKind::Syscall,
        LoadKind::Cachemiss,
        LoadKind::Membw,
    ];

    /// The kind's name, as on the command line and in JSON: `cpu`, `disk`, `net`,
    /// `syscall`, `cachemiss`, `membw`.
    pub fn name(&self) -> &'static str {
        match self {
            LoadKind::Cpu => "cpu",
            LoadKind::Disk => "disk",
            LoadKind::Net => "net",
            LoadKind::Syscall => "syscall",
            LoadKind::Cachemiss => "cachemiss",
            LoadKind::Membw => "membw",
        }
    }
}

impl fmt::Display for LoadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`LoadKind`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("unknown load kind '{name}' (expected cpu, disk, net, syscall, cachemiss or membw)")]
pub struct UnknownLoadKind {
    /// The name given.
    pub name: String,
}

impl FromStr for LoadKind {
    type Err = UnknownLoadKind;
    /// Parses a kind's [`name`](LoadKind::name), ignoring case and surrounding spaces.
    fn from_str(s: &str) -> Result<Self, UnknownLoadKind> {
        let name = s.trim().to_ascii_lowercase();
        LoadKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownLoadKind {
                name: s.to_string(),
            })
    }
}

/// One load to run: a kind on a set of CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// What to run.
    pub kind: LoadKind,
    /// Where: one worker per CPU (pairs for [`LoadKind::Net`]).
    pub cpus: CpuSet,
}

/// What one load achieved, from its start until it was stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The kind.
    pub kind: LoadKind,
    /// The CPUs it ran on.
    pub cpus: CpuSet,
    /// Worker threads it ran.
    pub workers: usize,
    /// Wall time from the common start of the workers to the stop request.
    pub duration_ns: u64,
    /// CPU time the workers consumed while running (`CLOCK_THREAD_CPUTIME_ID`; the
    /// preparation, such as touching buffers, is not included).
    pub cpu_time_ns: u64,
    /// What it achieved, the unit in each key: rates (`ops_per_s`, `bytes_per_s`,
    /// `packets_per_s`, `fsyncs_per_s`, `accesses_per_s`, ...), summed over the
    /// workers, each worker's count divided by its own running time; and sizes
    /// (`buffer_bytes`, per worker).
    pub metrics: BTreeMap<String, f64>,
    /// What went wrong while running (a worker that failed stops early; the others go
    /// on), and failures to clean up.
    pub errors: Vec<String>,
}

/// Why loads could not start.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A load with no CPU.
    #[error("load {kind}: no CPU selected")]
    NoCpu {
        /// The load.
        kind: LoadKind,
    },
    /// A CPU that is not online.
    #[error("load {kind}: CPU {cpu} is not online (online CPUs: {online})")]
    CpuOffline {
        /// The load.
        kind: LoadKind,
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs that are online.
        online: CpuSet,
    },
    /// The disk load's temporary directory could not be created.
    #[error("load disk: creating a temporary directory in {} failed: {source}", base.display())]
    TempDir {
        /// Where it was to be created.
        base: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The net load's loopback sockets could not be set up.
    #[error("load net: {what} failed: {source}")]
    Socket {
        /// The step that failed.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A worker thread could not be created.
    #[error("load {kind}: starting a worker thread for CPU {cpu} failed: {source}")]
    Spawn {
        /// The load.
        kind: LoadKind,
        /// The worker's CPU.
        cpu: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A worker failed while preparing.
    #[error("load {kind}: preparing the worker on CPU {cpu} failed: {source}")]
    Setup {
        /// The load.
        kind: LoadKind,
        /// The worker's CPU.
        cpu: usize,
        /// What failed.
        #[source]
        source: LoadStartError,
    },
}

/// Why a load worker could not prepare, so the load could not start.
#[derive(Debug, Error)]
pub enum LoadStartError {
    /// Pinning to its CPU was refused.
    #[error(transparent)]
    Pin(SchedError),
    /// The worker inherited a real-time policy and could not return to `SCHED_OTHER`.
    #[error("returning to SCHED_OTHER from the inherited real-time policy: {0}")]
    Policy(SchedError),
    /// A buffer could not be allocated.
    #[error("allocating {bytes} bytes failed")]
    Memory {
        /// The size asked for.
        bytes: u64,
    },
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// The step that failed.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The worker panicked before it was ready.
    #[error("the worker panicked")]
    Panicked,
}

/// Checks specs before anything starts: each load has CPUs, and they are online.
pub fn validate(specs: &[LoadSpec]) -> Result<(), LoadError> {
    let online = facts::online_cpus();
    for spec in specs {
        if spec.cpus.is_empty() {
            return Err(LoadError::NoCpu { kind: spec.kind });
        }
        if let Some(&cpu) = spec.cpus.cpus().iter().find(|&&c| !online.contains(c)) {
            return Err(LoadError::CpuOffline {
                kind: spec.kind,
                cpu,
                online,
            });
        }
    }
    Ok(())
}
