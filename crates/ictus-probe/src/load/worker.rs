//! What every kind of load is made of: its plan of jobs, the worker each job runs
//! on, what it counts, and the state the workers share.

use ictus_core::{CpuSet, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::thread_time::thread_cpu_time;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};

use super::spec::*;

/// The stop flag and the start gate, shared by the handle and every worker.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Set once, to stop every worker.
    ///
    /// Relaxed everywhere: the flag carries no data. Workers hand their results back
    /// through `JoinHandle::join`, which synchronises with the end of the thread, so
    /// no other memory needs ordering against the flag; a Relaxed store still becomes
    /// visible to the polling workers within far less than their ~1 ms polling step.
    pub(super) stop: AtomicBool,
    pub(super) gate: Mutex<bool>,
    pub(super) gate_opened: Condvar,
}

impl Shared {
    pub(super) fn request_stop(&self) {
        // Relaxed: see `stop`.
        self.stop.store(true, Ordering::Relaxed);
        // Workers still waiting at the gate see the flag once released.
        self.open_gate();
    }
    pub(super) fn open_gate(&self) {
        *self.gate.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.gate_opened.notify_all();
    }
    pub(super) fn wait_at_gate(&self) {
        let mut open = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = self
                .gate_opened
                .wait(open)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// What a kind hands to [`start`]: its workers, and the directory to remove afterwards.
pub(super) struct Plan {
    pub(super) jobs: Vec<Job>,
    pub(super) scratch: Option<ScratchDir>,
}

impl Plan {
    /// One worker of `kind` on each of `cpus`, running the work `work` makes for its
    /// CPU; no directory to remove.
    pub(super) fn per_cpu<W>(kind: &str, cpus: &CpuSet, work: impl Fn(usize) -> W) -> Plan
    where
        W: FnOnce(&Worker<'_>) -> Result<Tally, LoadStartError> + Send + 'static,
    {
        Plan {
            jobs: cpus
                .cpus()
                .iter()
                .map(|&cpu| Job::new(kind, cpu, work(cpu)))
                .collect(),
            scratch: None,
        }
    }
}

/// The work of one worker, run on its own thread after it is pinned.
pub(super) type Work = Box<dyn FnOnce(&Worker<'_>) -> Result<Tally, LoadStartError> + Send>;

/// One worker to start.
pub(super) struct Job {
    pub(super) cpu: usize,
    /// Thread name (Linux keeps 15 bytes).
    pub(super) name: String,
    pub(super) work: Work,
}

impl Job {
    pub(super) fn new(
        kind: &str,
        cpu: usize,
        work: impl FnOnce(&Worker<'_>) -> Result<Tally, LoadStartError> + Send + 'static,
    ) -> Job {
        Job {
            cpu,
            name: format!("load-{kind}{cpu}"),
            work: Box::new(work),
        }
    }
}

/// What a worker counted while running.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Work done, by name; reported as `<name>_per_s`.
    pub(super) counts: BTreeMap<&'static str, u64>,
    /// Sizes, reported as they are (the name carries the unit).
    pub(super) sizes: BTreeMap<&'static str, u64>,
    /// Why the worker stopped before it was asked to.
    pub(super) error: Option<String>,
}

impl Tally {
    pub(super) fn count(mut self, name: &'static str, n: u64) -> Self {
        self.counts.insert(name, n);
        self
    }
    pub(super) fn size(mut self, name: &'static str, n: u64) -> Self {
        self.sizes.insert(name, n);
        self
    }
    pub(super) fn error(mut self, error: Option<String>) -> Self {
        self.error = error;
        self
    }
}

/// A finished worker.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) elapsed: Nanos,
    pub(super) cpu_time: Nanos,
    pub(super) tally: Tally,
}

/// What a worker's work sees: the start gate and the stop flag.
pub(super) struct Worker<'a> {
    pub(super) shared: &'a Shared,
    pub(super) signal: &'a ReadySignal,
    /// Wall clock and thread CPU time when the run began.
    pub(super) began: Cell<Option<(Nanos, Nanos)>>,
}

impl Worker<'_> {
    /// Preparation is done: tells [`start`], waits for every other worker, and starts
    /// the clocks.
    pub(super) fn ready(&self) {
        self.signal.send(Ok(()));
        self.shared.wait_at_gate();
        self.began.set(Some((monotonic_now(), thread_cpu_time())));
    }

    /// Whether to go on (false once a stop was requested).
    #[inline]
    pub(super) fn running(&self) -> bool {
        // Relaxed: see `Shared::stop`.
        !self.shared.stop.load(Ordering::Relaxed)
    }
}

/// A worker's one message to [`start`]: ready, or why not. Sends a failure on drop if
/// nothing was sent, so a worker that panics while preparing cannot hang `start`.
pub(super) struct ReadySignal {
    pub(super) kind: LoadKind,
    pub(super) cpu: usize,
    pub(super) tx: Sender<Result<(), LoadError>>,
    pub(super) sent: Cell<bool>,
}

impl ReadySignal {
    pub(super) fn send(&self, result: Result<(), LoadStartError>) {
        if self.sent.replace(true) {
            return;
        }
        let message = result.map_err(|source| LoadError::Setup {
            kind: self.kind,
            cpu: self.cpu,
            source,
        });
        // The receiver is gone only when `start` already returned an error.
        let _ = self.tx.send(message);
    }
}

impl Drop for ReadySignal {
    fn drop(&mut self) {
        self.send(Err(LoadStartError::Panicked));
    }
}

/// The largest cache the kernel reports, in bytes, or 32 MiB when it reports none.
pub(super) fn largest_cache_bytes() -> u64 {
    facts::caches()
        .iter()
        .filter_map(|c| c.size_bytes)
        .max()
        .unwrap_or(32 << 20)
}

/// A zeroed-then-touched buffer of `len` elements, every page faulted in now rather
/// than in the hot loop.
pub(super) fn touched_buffer<T: Copy>(len: usize, fill: T) -> Result<Vec<T>, LoadStartError> {
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|_| LoadStartError::Memory {
            bytes: (len * std::mem::size_of::<T>()) as u64,
        })?;
    buffer.resize(len, fill);
    Ok(buffer)
}

/// A directory of our own for the disk load's files, removed by [`ScratchDir::remove`]
/// or on drop.
#[derive(Debug)]
pub(super) struct ScratchDir {
    path: PathBuf,
    removed: bool,
}

impl ScratchDir {
    /// Creates `ictus-load-<pid>-<n>` under `$TMPDIR` if set, else `/var/tmp` (kept on
    /// disk by convention, where `/tmp` is often tmpfs and its `fsync` reaches no
    /// device), else the system's temporary directory.
    pub(super) fn create() -> Result<ScratchDir, LoadError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base_dir();
        loop {
            // Relaxed: only uniqueness within the process matters, which the atomic
            // read-modify-write gives in any order.
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("ictus-load-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(ScratchDir {
                        path,
                        removed: false,
                    });
                }
                // Left over by an earlier process with the same pid: pick another.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(LoadError::TempDir { base, source }),
            }
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it.
    pub(super) fn remove(mut self) -> Result<(), String> {
        self.removed = true;
        std::fs::remove_dir_all(&self.path)
            .map_err(|e| format!("removing {} failed: {e}", self.path.display()))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.removed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn base_dir() -> PathBuf {
    if std::env::var_os("TMPDIR").is_some_and(|t| !t.is_empty()) {
        return std::env::temp_dir();
    }
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() {
        return var_tmp.to_path_buf();
    }
    std::env::temp_dir()
}
