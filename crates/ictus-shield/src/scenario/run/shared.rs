//! What the coordinator, the tasks and the sampler share: the stop, the gate, the ends.

#![allow(
    clippy::disallowed_types,
    reason = "a scenario's start time, end count and per-task flags: each one writer, read by the watcher; no protocol for loom to explore"
)]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use ictus_os::handoff::Latch;
use ictus_os::procstat::StatSnapshot;

/// State shared by the coordinator, the tasks and the sampler.
pub(super) struct Shared {
    /// Raised when everything must stop (Ctrl-C, duration limit, a failed setup).
    /// Tasks sleep and sections spin on it, so a stop reaches a task at once however
    /// long it was asked to sleep.
    pub(super) abort: Latch,
    /// Raised when the sampler must stop; it sleeps between samples on it.
    pub(super) sampling_over: Latch,
    /// The common start (monotonic ns), written before the gate opens.
    pub(super) start_ns: AtomicU64,
    /// Tasks finished (or stopped).
    pub(super) ended: AtomicUsize,
    /// Per task: whether it has ended (the sampler stops reading it).
    pub(super) done: Vec<AtomicBool>,
    /// The start gate. Waiters park until it is open and they are unparked: no lock
    /// is shared, so a task preempted by a real-time one cannot hold up the others
    /// (a mutex here inverts priorities: a normal task holding it while FIFO tasks
    /// fill the CPUs blocks the FIFO 99 sampler).
    pub(super) open: AtomicBool,
    /// `/proc/stat` when the first task finished (set once, by that task).
    pub(super) first_end: OnceLock<(u64, StatSnapshot)>,
}

impl Shared {
    /// Nothing started yet, for `tasks` tasks.
    pub(super) fn new(tasks: usize) -> Shared {
        Shared {
            abort: Latch::new(),
            sampling_over: Latch::new(),
            start_ns: AtomicU64::new(0),
            ended: AtomicUsize::new(0),
            done: (0..tasks).map(|_| AtomicBool::new(false)).collect(),
            open: AtomicBool::new(false),
            first_end: OnceLock::new(),
        }
    }

    pub(super) fn wait_gate(&self) {
        // Acquire: pairs with the Release store in `open_gate`.
        while !self.open.load(Ordering::Acquire) {
            std::thread::park();
        }
    }

    /// Opens the gate and wakes `threads`, in order.
    pub(super) fn open_gate<'a>(&self, threads: impl IntoIterator<Item = &'a std::thread::Thread>) {
        // Release: pairs with the Acquire load in `wait_gate`.
        self.open.store(true, Ordering::Release);
        for t in threads {
            t.unpark();
        }
    }

    pub(super) fn start(&self) -> u64 {
        // Acquire: pairs with the Release store in `Setting::release` before the gate
        // opens.
        self.start_ns.load(Ordering::Acquire)
    }
}
