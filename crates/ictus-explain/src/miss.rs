//! A miss as the measuring thread reports it: its kind, the event pushed without
//! waiting, the reporter that pushes it, and the threads the sampler watches.

use ictus_core::Nanos;
use ictus_core::sync::spsc::{self, Consumer, Producer};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// What kind of miss an event is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissKind {
    /// Released later than the threshold (the most common kind, and the default).
    #[default]
    Late,
    /// One or more periods missed entirely.
    Missed,
    /// Its own execution ran past its budget.
    Overrun,
}

impl MissKind {
    /// The word in tables.
    pub fn word(self) -> &'static str {
        match self {
            MissKind::Late => "late",
            MissKind::Missed => "missed",
            MissKind::Overrun => "overrun",
        }
    }
}

/// One miss, as the real-time thread reports it (plain data, `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissEvent {
    /// What happened.
    pub kind: MissKind,
    /// The sample or frame index.
    pub seq: u64,
    /// The window's start (monotonic): the deadline, or the release for an overrun.
    pub start: Nanos,
    /// The window's end (monotonic): when the thread woke, or finished.
    pub end: Nanos,
    /// How late the release was.
    pub lateness: Nanos,
    /// Periods missed entirely.
    pub missed: u64,
    /// The execution time (overruns; zero otherwise).
    pub exec: Nanos,
    /// The execution budget (overruns; zero otherwise).
    pub budget: Nanos,
}

/// The identity a watched thread gives itself once it runs where it will measure.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Its kernel thread id, 0 until attached.
    pub(crate) tid: AtomicI64,
    /// The CPU it was on when it attached (-1: unknown).
    pub(crate) cpu: AtomicI64,
    /// Events dropped because the ring was full.
    pub(crate) dropped: AtomicU64,
    /// The sampler's thread, set once it runs: a miss wakes it (see
    /// [`MissReporter::report`]).
    pub(crate) sampler: std::sync::OnceLock<std::thread::Thread>,
}

/// The real-time side: one per watched thread. [`report`](Self::report) is one push
/// into a preallocated ring.
#[derive(Debug)]
pub struct MissReporter {
    pub(crate) producer: Producer<MissEvent>,
    pub(crate) watch: Arc<Watch>,
    pub(crate) threshold: Nanos,
    /// The end of the last event that woke the sampler.
    pub(crate) woke_at: Nanos,
}

/// The least time between two misses of one thread that wake the sampler: in a
/// storm of misses it wakes at most 500 times a second for each thread, and a miss
/// in between waits at most this long for its closing reading.
pub(super) const WAKE_EVERY: Nanos = Nanos::from_millis(2);

impl MissReporter {
    /// Called by the watched thread once it is placed (pinned, policy set): records
    /// its thread id and CPU for the sampler. Not on the hot path.
    pub fn attach(&self) {
        let cpu = ictus_os::sched::current_cpu().map_or(-1, |c| c as i64);
        // Relaxed: the sampler only reads these to choose which files to open; a late
        // view only delays that, and the Release store of tid below publishes cpu.
        self.watch.cpu.store(cpu, Ordering::Relaxed);
        // Release: pairs with the Acquire load of tid in the sampler's attach check.
        self.watch
            .tid
            .store(ictus_os::sched::thread_id(), Ordering::Release);
    }

    /// The lateness from which a release is reported (`Late`).
    pub fn threshold(&self) -> Nanos {
        self.threshold
    }

    /// Reports a release `lateness` late for `deadline` (woke at `deadline +
    /// lateness`), with `missed` periods missed before it, when it passes the
    /// threshold or periods were missed. Allocation-free.
    #[inline]
    pub fn release(&mut self, seq: u64, deadline: Nanos, lateness: Nanos, missed: u64) {
        if missed == 0 && lateness < self.threshold {
            return;
        }
        self.report(MissEvent {
            kind: if missed > 0 {
                MissKind::Missed
            } else {
                MissKind::Late
            },
            seq,
            start: deadline,
            end: deadline + lateness,
            lateness,
            missed,
            exec: Nanos::ZERO,
            budget: Nanos::ZERO,
        });
    }

    /// Reports an event. A full ring drops it and counts the drop; never blocks.
    /// It wakes the sampler (a futex wake when it sleeps, no more than every
    /// 2 ms), so that the reading that closes the event's window comes
    /// right after its end and not at the sampler's next period.
    #[inline]
    pub fn report(&mut self, event: MissEvent) {
        let end = event.end;
        if self.producer.push(event).is_err() {
            // Relaxed: a counter read once after the run.
            self.watch.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if end.saturating_sub(self.woke_at) >= WAKE_EVERY
            && let Some(sampler) = self.watch.sampler.get()
        {
            sampler.unpark();
            self.woke_at = end;
        }
    }
}

/// The sampler's side of one watched thread.
#[derive(Debug)]
pub(crate) struct WatchedThread {
    pub(crate) name: String,
    pub(crate) consumer: Consumer<MissEvent>,
    pub(crate) watch: Arc<Watch>,
}

/// A reporter and the sampler's end of its ring, with room for `capacity` events
/// not yet read.
pub(crate) fn pair(
    name: String,
    capacity: usize,
    threshold: Nanos,
) -> (MissReporter, WatchedThread) {
    let (producer, consumer) = spsc::channel(capacity);
    let watch = Arc::new(Watch {
        cpu: AtomicI64::new(-1),
        ..Watch::default()
    });
    (
        MissReporter {
            producer,
            watch: watch.clone(),
            threshold,
            woke_at: Nanos::ZERO,
        },
        WatchedThread {
            name,
            consumer,
            watch,
        },
    )
}
