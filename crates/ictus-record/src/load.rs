//! What a background load is and what it achieved, as a record holds it
//! ([`Environment::loads`](crate::record::Environment::loads)); running the loads is
//! `ictus_probe::load`'s.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};
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
