//! `load`: background disturbances to measure under (seed 002 §5.1.3, extended).
//!
//! ARTiS measured its latencies under five loads: a computing loop pinned on each
//! processor, a disk reader and writer, a network flood, a program calling an
//! `ioctl()` that took the big kernel lock, and a cache-miss generator. ictus runs
//! them, plus a memory-bandwidth hog, as threads of its own process:
//!
//! | kind | what each worker does | metrics |
//! |---|---|---|
//! | [`cpu`](LoadKind::Cpu) | an endless integer loop, no system call | `ops_per_s` |
//! | [`disk`](LoadKind::Disk) | write 256 KiB, `fsync`, read 256 KiB back, in a temporary directory | `fsyncs_per_s`, `write_bytes_per_s`, `read_bytes_per_s`, `bytes_per_s` |
//! | [`net`](LoadKind::Net) | UDP flood over loopback (127.0.0.1), a sender and a receiver | `packets_per_s` (received), `sent_packets_per_s`, `bytes_per_s`, `send_failures_per_s` (when any) |
//! | [`syscall`](LoadKind::Syscall) | `pipe2`, a 1-byte write and read, two `close`s | `ops_per_s`, `syscalls_per_s` |
//! | [`cachemiss`](LoadKind::Cachemiss) | random read-modify-writes over 4x the last-level cache | `accesses_per_s`, `buffer_bytes` |
//! | [`membw`](LoadKind::Membw) | streaming copies between two buffers larger than the LLC | `bytes_per_s` (copied), `buffer_bytes` |
//!
//! Every kind runs one worker per CPU of its [`LoadSpec::cpus`], pinned there and left
//! in (or returned to) `SCHED_OTHER`; `net` pairs its CPUs instead (see
//! [`LoadKind::Net`]). Each worker prepares first (pins itself, allocates and touches
//! its buffers, opens its files); [`start`] returns once all are prepared, and they
//! begin together. They count their work in local variables and publish it when
//! stopped, so the hot loops share nothing but the stop flag.
//!
//! On this machine kind matters: sync-heavy disk I/O combined with busy CPUs makes the
//! host stall the guest for 10 ms and more. That is the machine, and the loads do not
//! hide it.
//!
//! ```
//! use ictus_core::CpuSet;
//! use ictus_probe::load::{self, LoadKind, LoadSpec};
//! let first = ictus_os::facts::online_cpus().cpus()[0];
//! let running = load::start(&[LoadSpec {
//!     kind: LoadKind::Cpu,
//!     cpus: CpuSet::from_cpus([first]),
//! }])
//! .unwrap();
//! std::thread::sleep(std::time::Duration::from_millis(50));
//! let reports = running.stop();
//! assert!(reports[0].metrics["ops_per_s"] > 0.0);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

mod cachemiss;
mod cpu;
mod disk;
mod membw;
mod net;
mod syscall;
mod under;

pub use under::{UnderLoadsError, hold, under_loads};

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};

use ictus_core::{CpuSet, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::sched::{self, Policy, SchedError};
use ictus_os::thread_time::thread_cpu_time;
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

/// Starts the loads and returns once every worker is prepared and running. A failure
/// stops and joins whatever had started, removes temporary files, and is returned.
pub fn start(specs: &[LoadSpec]) -> Result<RunningLoads, LoadError> {
    validate(specs)?;
    let shared = Arc::new(Shared::default());
    // From here on, an early return drops `running`, which stops and joins every
    // worker spawned so far and then removes the temporary directories.
    let mut running = RunningLoads {
        shared: shared.clone(),
        loads: Vec::with_capacity(specs.len()),
        started: None,
        stopped: false,
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut expected = 0;
    for spec in specs {
        let plan = match spec.kind {
            LoadKind::Cpu => cpu::plan(&spec.cpus),
            LoadKind::Disk => disk::plan(&spec.cpus)?,
            LoadKind::Net => net::plan(&spec.cpus)?,
            LoadKind::Syscall => syscall::plan(&spec.cpus),
            LoadKind::Cachemiss => cachemiss::plan(&spec.cpus),
            LoadKind::Membw => membw::plan(&spec.cpus),
        };
        let mut load = Load {
            kind: spec.kind,
            cpus: spec.cpus.clone(),
            workers: Vec::with_capacity(plan.jobs.len()),
            scratch: plan.scratch,
        };
        for job in plan.jobs {
            let cpu = job.cpu;
            let spawned = spawn(spec.kind, job, shared.clone(), ready_tx.clone());
            match spawned {
                Ok(handle) => {
                    load.workers.push(WorkerHandle { cpu, handle });
                    expected += 1;
                }
                Err(source) => {
                    running.loads.push(load);
                    return Err(LoadError::Spawn {
                        kind: spec.kind,
                        cpu,
                        source,
                    });
                }
            }
        }
        running.loads.push(load);
    }
    drop(ready_tx);
    for _ in 0..expected {
        // Every worker sends exactly one message (its `ReadySignal` sends on drop when
        // the worker failed or panicked before it was ready), so this cannot hang.
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvError) => break,
        }
    }
    running.started = Some(monotonic_now());
    shared.open_gate();
    Ok(running)
}

/// Loads that are running. [`stop`](RunningLoads::stop) them to get their reports;
/// dropping them also stops and joins every worker and removes temporary files, so an
/// early return or a panic leaves nothing behind.
#[derive(Debug)]
pub struct RunningLoads {
    shared: Arc<Shared>,
    loads: Vec<Load>,
    started: Option<Nanos>,
    stopped: bool,
}

impl RunningLoads {
    /// Stops every worker, waits for them, removes temporary files, and reports, one
    /// report per spec, in the order given to [`start`].
    pub fn stop(mut self) -> Vec<LoadReport> {
        self.shutdown()
    }

    /// The temporary directories the disk loads write in (removed when stopped).
    pub fn scratch_dirs(&self) -> Vec<PathBuf> {
        self.loads
            .iter()
            .filter_map(|l| l.scratch.as_ref().map(|s| s.path().to_path_buf()))
            .collect()
    }

    /// Worker threads running, over all loads.
    pub fn workers(&self) -> usize {
        self.loads.iter().map(|l| l.workers.len()).sum()
    }

    fn shutdown(&mut self) -> Vec<LoadReport> {
        if self.stopped {
            return Vec::new();
        }
        self.stopped = true;
        let end = monotonic_now();
        self.shared.request_stop();
        let duration = self.started.map_or(Nanos::ZERO, |s| end.saturating_sub(s));
        // Join every worker of every load before removing any directory.
        let joined: Vec<Vec<(usize, thread::Result<Outcome>)>> = self
            .loads
            .iter_mut()
            .map(|load| {
                load.workers
                    .drain(..)
                    .map(|w| (w.cpu, w.handle.join()))
                    .collect()
            })
            .collect();
        self.loads
            .iter_mut()
            .zip(joined)
            .map(|(load, outcomes)| load.report(duration, outcomes))
            .collect()
    }
}

impl Drop for RunningLoads {
    fn drop(&mut self) {
        // Runs before the fields are dropped: threads are joined first, then the
        // scratch directories (fields of `loads`) are removed.
        let _ = self.shutdown();
    }
}

/// One running load.
#[derive(Debug)]
struct Load {
    kind: LoadKind,
    cpus: CpuSet,
    workers: Vec<WorkerHandle>,
    scratch: Option<disk::ScratchDir>,
}

impl Load {
    fn report(
        &mut self,
        duration: Nanos,
        outcomes: Vec<(usize, thread::Result<Outcome>)>,
    ) -> LoadReport {
        let mut report = LoadReport {
            kind: self.kind,
            cpus: self.cpus.clone(),
            workers: outcomes.len(),
            duration_ns: duration.as_u64(),
            cpu_time_ns: 0,
            metrics: BTreeMap::new(),
            errors: Vec::new(),
        };
        for (cpu, outcome) in outcomes {
            let outcome = match outcome {
                Ok(o) => o,
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    report
                        .errors
                        .push(format!("the worker on CPU {cpu} panicked: {why}"));
                    continue;
                }
            };
            report.cpu_time_ns += outcome.cpu_time.as_u64();
            let secs = outcome.elapsed.as_secs_f64();
            if secs > 0.0 {
                for (name, count) in &outcome.tally.counts {
                    *report.metrics.entry(format!("{name}_per_s")).or_default() +=
                        *count as f64 / secs;
                }
            }
            for (name, value) in &outcome.tally.sizes {
                let slot = report.metrics.entry((*name).to_string()).or_default();
                *slot = slot.max(*value as f64);
            }
            if let Some(e) = outcome.tally.error {
                report.errors.push(format!("worker on CPU {cpu}: {e}"));
            }
        }
        if let Some(scratch) = self.scratch.take()
            && let Err(e) = scratch.remove()
        {
            report.errors.push(e.to_string());
        }
        report
    }
}

#[derive(Debug)]
struct WorkerHandle {
    cpu: usize,
    handle: JoinHandle<Outcome>,
}

/// The stop flag and the start gate, shared by the handle and every worker.
#[derive(Debug, Default)]
struct Shared {
    /// Set once, to stop every worker.
    ///
    /// Relaxed everywhere: the flag carries no data. Workers hand their results back
    /// through `JoinHandle::join`, which synchronises with the end of the thread, so
    /// no other memory needs ordering against the flag; a Relaxed store still becomes
    /// visible to the polling workers within far less than their ~1 ms polling step.
    stop: AtomicBool,
    gate: Mutex<bool>,
    gate_opened: Condvar,
}

impl Shared {
    fn request_stop(&self) {
        // Relaxed: see `stop`.
        self.stop.store(true, Ordering::Relaxed);
        // Workers still waiting at the gate see the flag once released.
        self.open_gate();
    }
    fn open_gate(&self) {
        *self.gate.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.gate_opened.notify_all();
    }
    fn wait_at_gate(&self) {
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
struct Plan {
    jobs: Vec<Job>,
    scratch: Option<disk::ScratchDir>,
}

impl Plan {
    /// One worker of `kind` on each of `cpus`, running the work `work` makes for its
    /// CPU; no directory to remove.
    fn per_cpu<W>(kind: &str, cpus: &CpuSet, work: impl Fn(usize) -> W) -> Plan
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
type Work = Box<dyn FnOnce(&Worker<'_>) -> Result<Tally, LoadStartError> + Send>;

/// One worker to start.
struct Job {
    cpu: usize,
    /// Thread name (Linux keeps 15 bytes).
    name: String,
    work: Work,
}

impl Job {
    fn new(
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
struct Tally {
    /// Work done, by name; reported as `<name>_per_s`.
    counts: BTreeMap<&'static str, u64>,
    /// Sizes, reported as they are (the name carries the unit).
    sizes: BTreeMap<&'static str, u64>,
    /// Why the worker stopped before it was asked to.
    error: Option<String>,
}

impl Tally {
    fn count(mut self, name: &'static str, n: u64) -> Self {
        self.counts.insert(name, n);
        self
    }
    fn size(mut self, name: &'static str, n: u64) -> Self {
        self.sizes.insert(name, n);
        self
    }
    fn error(mut self, error: Option<String>) -> Self {
        self.error = error;
        self
    }
}

/// A finished worker.
#[derive(Debug)]
struct Outcome {
    elapsed: Nanos,
    cpu_time: Nanos,
    tally: Tally,
}

/// What a worker's work sees: the start gate and the stop flag.
struct Worker<'a> {
    shared: &'a Shared,
    signal: &'a ReadySignal,
    /// Wall clock and thread CPU time when the run began.
    began: Cell<Option<(Nanos, Nanos)>>,
}

impl Worker<'_> {
    /// Preparation is done: tells [`start`], waits for every other worker, and starts
    /// the clocks.
    fn ready(&self) {
        self.signal.send(Ok(()));
        self.shared.wait_at_gate();
        self.began.set(Some((monotonic_now(), thread_cpu_time())));
    }

    /// Whether to go on (false once a stop was requested).
    #[inline]
    fn running(&self) -> bool {
        // Relaxed: see `Shared::stop`.
        !self.shared.stop.load(Ordering::Relaxed)
    }
}

/// A worker's one message to [`start`]: ready, or why not. Sends a failure on drop if
/// nothing was sent, so a worker that panics while preparing cannot hang `start`.
struct ReadySignal {
    kind: LoadKind,
    cpu: usize,
    tx: Sender<Result<(), LoadError>>,
    sent: Cell<bool>,
}

impl ReadySignal {
    fn send(&self, result: Result<(), LoadStartError>) {
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

fn spawn(
    kind: LoadKind,
    job: Job,
    shared: Arc<Shared>,
    tx: Sender<Result<(), LoadError>>,
) -> io::Result<JoinHandle<Outcome>> {
    let Job { cpu, name, work } = job;
    thread::Builder::new().name(name).spawn(move || {
        let signal = ReadySignal {
            kind,
            cpu,
            tx,
            sent: Cell::new(false),
        };
        let worker = Worker {
            shared: &shared,
            signal: &signal,
            began: Cell::new(None),
        };
        let result = prepare_thread(cpu).and_then(|()| work(&worker));
        let ended = (monotonic_now(), thread_cpu_time());
        let tally = match (result, worker.began.get()) {
            (Ok(tally), _) => tally,
            (Err(e), None) => {
                signal.send(Err(e));
                Tally::default()
            }
            // Failed after the start: the report says why.
            (Err(e), Some(_)) => Tally::default().error(Some(e.to_string())),
        };
        let (elapsed, cpu_time) = worker.began.get().map_or((Nanos::ZERO, Nanos::ZERO), |b| {
            (ended.0.saturating_sub(b.0), ended.1.saturating_sub(b.1))
        });
        Outcome {
            elapsed,
            cpu_time,
            tally,
        }
    })
}

/// Pins the calling worker to `cpu` and makes sure it is not real-time (a thread
/// inherits its creator's policy).
fn prepare_thread(cpu: usize) -> Result<(), LoadStartError> {
    sched::set_affinity(&CpuSet::from_cpus([cpu])).map_err(LoadStartError::Pin)?;
    if sched::current_policy().is_ok_and(|p| p.is_realtime()) {
        sched::set_policy(Policy::Other { nice: 0 }).map_err(LoadStartError::Policy)?;
    }
    Ok(())
}

/// The largest cache the kernel reports, in bytes, or 32 MiB when it reports none.
fn largest_cache_bytes() -> u64 {
    facts::caches()
        .iter()
        .filter_map(|c| c.size_bytes)
        .max()
        .unwrap_or(32 << 20)
}

/// A zeroed-then-touched buffer of `len` elements, every page faulted in now rather
/// than in the hot loop.
fn touched_buffer<T: Copy>(len: usize, fill: T) -> Result<Vec<T>, LoadStartError> {
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|_| LoadStartError::Memory {
            bytes: (len * std::mem::size_of::<T>()) as u64,
        })?;
    buffer.resize(len, fill);
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Load tests count the process's `load-*` threads, so they run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Threads of this process named like load workers. (Other tests of this binary
    /// start and end threads concurrently, so the total count is not stable; the
    /// workers' names are.)
    fn load_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("load-"))
            })
            .count()
    }

    /// Load threads once the joined ones have left /proc: a thread that `join` has
    /// returned for can still be listed for a moment while the kernel reaps it, so
    /// this waits up to a second; one that outlived `stop` stays listed.
    fn load_threads_after_stop() -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        loop {
            let n = load_threads();
            if n == 0 || std::time::Instant::now() > deadline {
                return n;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn all_cpus() -> CpuSet {
        facts::online_cpus()
    }

    fn run_for(kind: LoadKind, cpus: CpuSet) -> LoadReport {
        let _serial = serial();
        assert_eq!(load_threads_after_stop(), 0);
        let sut = start(&[LoadSpec { kind, cpus }]).unwrap();
        assert_eq!(load_threads(), sut.workers());
        let dirs = sut.scratch_dirs();
        assert!(dirs.iter().all(|d| d.is_dir()));
        thread::sleep(Duration::from_millis(200));
        let mut reports = sut.stop();
        assert_eq!(
            load_threads_after_stop(),
            0,
            "{kind}: a worker outlived stop"
        );
        assert!(dirs.iter().all(|d| !d.exists()), "{kind}: scratch left");
        assert_eq!(reports.len(), 1);
        let report = reports.remove(0);
        assert_eq!(report.kind, kind);
        assert!(report.errors.is_empty(), "{kind}: {:?}", report.errors);
        assert!(report.duration_ns > 0);
        assert!(report.cpu_time_ns > 0, "{kind}: no CPU time");
        report
    }

    fn assert_positive(report: &LoadReport, key: &str) {
        let value = report.metrics.get(key).copied().unwrap_or_default();
        assert!(
            value > 0.0,
            "{}: {key} is {value}: {:?}",
            report.kind,
            report.metrics
        );
    }

    #[test]
    fn cpu_load_spins_on_every_cpu_and_stops() {
        let report = run_for(LoadKind::Cpu, all_cpus());
        assert_eq!(report.workers, all_cpus().len());
        assert_positive(&report, "ops_per_s");
    }

    #[test]
    fn disk_load_writes_fsyncs_reads_and_removes_its_directory() {
        let report = run_for(LoadKind::Disk, all_cpus());
        assert_positive(&report, "fsyncs_per_s");
        assert_positive(&report, "write_bytes_per_s");
        assert_positive(&report, "read_bytes_per_s");
    }

    #[test]
    fn net_load_floods_loopback_in_pairs() {
        let report = run_for(LoadKind::Net, all_cpus());
        assert_eq!(report.workers, all_cpus().len().next_multiple_of(2));
        assert_positive(&report, "sent_packets_per_s");
        assert_positive(&report, "packets_per_s");
        assert_positive(&report, "bytes_per_s");
    }

    #[test]
    fn net_load_on_one_cpu_puts_both_ends_there() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Net, CpuSet::from_cpus([first]));
        assert_eq!(report.workers, 2);
        assert_positive(&report, "packets_per_s");
    }

    #[test]
    fn syscall_load_cycles_pipes() {
        let report = run_for(LoadKind::Syscall, all_cpus());
        assert_positive(&report, "ops_per_s");
        let expected = report.metrics["ops_per_s"] * syscall::SYSCALLS_PER_OP as f64;
        assert!((report.metrics["syscalls_per_s"] - expected).abs() <= expected * 1e-9);
    }

    #[test]
    fn cachemiss_load_uses_at_least_four_times_the_largest_cache() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Cachemiss, CpuSet::from_cpus([first]));
        assert_positive(&report, "accesses_per_s");
        assert!(report.metrics["buffer_bytes"] >= 4.0 * largest_cache_bytes() as f64);
    }

    #[test]
    fn membw_load_copies() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Membw, CpuSet::from_cpus([first]));
        assert_positive(&report, "bytes_per_s");
        assert!(report.metrics["buffer_bytes"] >= 4.0 * largest_cache_bytes() as f64);
    }

    #[test]
    fn dropping_running_loads_stops_them_and_removes_scratch() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let cpus = CpuSet::from_cpus([first]);
        let sut = start(&[
            LoadSpec {
                kind: LoadKind::Cpu,
                cpus: cpus.clone(),
            },
            LoadSpec {
                kind: LoadKind::Disk,
                cpus,
            },
        ])
        .unwrap();
        let dirs = sut.scratch_dirs();
        assert_eq!(dirs.len(), 1);
        assert!(load_threads() >= 2);
        drop(sut);
        assert_eq!(load_threads_after_stop(), 0);
        assert!(!dirs[0].exists());
    }

    #[test]
    fn reports_come_back_in_spec_order() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let specs: Vec<LoadSpec> = [LoadKind::Syscall, LoadKind::Cpu]
            .into_iter()
            .map(|kind| LoadSpec {
                kind,
                cpus: CpuSet::from_cpus([first]),
            })
            .collect();
        let reports = start(&specs).unwrap().stop();
        let kinds: Vec<LoadKind> = reports.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [LoadKind::Syscall, LoadKind::Cpu]);
    }

    #[test]
    fn an_offline_cpu_is_refused_before_anything_starts() {
        let err = start(&[LoadSpec {
            kind: LoadKind::Cpu,
            cpus: CpuSet::from_cpus([1000]),
        }])
        .unwrap_err();
        assert!(matches!(
            err,
            LoadError::CpuOffline {
                kind: LoadKind::Cpu,
                cpu: 1000,
                ..
            }
        ));
    }

    #[test]
    fn an_empty_cpu_set_is_refused() {
        let err = validate(&[LoadSpec {
            kind: LoadKind::Net,
            cpus: CpuSet::default(),
        }])
        .unwrap_err();
        assert!(matches!(
            err,
            LoadError::NoCpu {
                kind: LoadKind::Net
            }
        ));
    }

    #[test]
    fn kind_names_round_trip_through_from_str_and_serde() {
        for kind in LoadKind::ALL {
            assert_eq!(kind.name().parse::<LoadKind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
        assert_eq!(" CPU ".parse::<LoadKind>().unwrap(), LoadKind::Cpu);
        let err = "bogus".parse::<LoadKind>().unwrap_err();
        assert!(err.to_string().contains("'bogus'"));
    }

    #[test]
    fn a_worker_that_fails_while_preparing_fails_start_and_stops_the_others() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        let good = spawn(
            LoadKind::Cpu,
            cpu::plan(&CpuSet::from_cpus([first])).jobs.remove(0),
            shared.clone(),
            tx.clone(),
        )
        .unwrap();
        let bad = spawn(
            LoadKind::Disk,
            Job::new("bad", first, |_| {
                Err(LoadStartError::Io {
                    what: "opening nothing".into(),
                    source: io::Error::from(io::ErrorKind::NotFound),
                })
            }),
            shared.clone(),
            tx,
        )
        .unwrap();
        let messages: Vec<_> = rx.iter().take(2).collect();
        assert!(messages.iter().any(|m| m.is_ok()));
        assert!(messages.iter().any(|m| matches!(
            m,
            Err(LoadError::Setup {
                kind: LoadKind::Disk,
                source: LoadStartError::Io { .. },
                ..
            })
        )));
        shared.request_stop();
        good.join().unwrap();
        bad.join().unwrap();
        assert_eq!(load_threads_after_stop(), 0);
    }
}
