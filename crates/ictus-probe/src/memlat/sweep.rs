//! The sweep: each point's buffer prepared, every thread started together at a gate,
//! the repetitions timed.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::thread;

use ictus_core::Nanos;
use ictus_os::buffer::{Buffer, BufferError, ChaseRing};
use ictus_os::clock::monotonic_now;
use ictus_os::memory;

use crate::progress::Progress;
use crate::record::{ThreadConfig, Warning};
use crate::setup;

use super::params::{
    AccessKind, LINE_BYTES, MemlatError, MemlatParams, PageSize, SweepPoint, WARM_CAP_BYTES,
};
use super::walk::{
    CHASE_CHUNK, STRIDED_CHUNK, WORDS_PER_LINE, build_cycle, read_strided, write_strided,
};

/// One thread's figures at one point.
#[derive(Clone, Debug)]
pub(super) struct PointResult {
    /// Nanoseconds per access of each repetition.
    pub(super) ns: Vec<f64>,
    /// Share of the buffer on huge pages, when asked for.
    pub(super) huge_share: Option<f64>,
}

/// What one measuring thread hands back from a sweep.
pub(super) struct Outcome {
    pub(super) config: ThreadConfig,
    pub(super) warnings: Vec<Warning>,
    /// One per point run, in order.
    pub(super) results: Vec<PointResult>,
    /// The working set of a buffer that could not be made, and why.
    pub(super) error: Option<(usize, BufferError)>,
}

/// What the threads of one sweep share.
pub(super) struct Shared<'a> {
    pub(super) params: &'a MemlatParams,
    pub(super) points: &'a [SweepPoint],
    pub(super) progress: &'a Progress,
    pub(super) barrier: Barrier,
    /// Whether the next point runs: written by thread 0 before the point's first
    /// barrier, read by all after it.
    pub(super) go: AtomicBool,
    /// Set by a thread whose buffer could not be made; the sweep stops after the point.
    pub(super) failed: AtomicBool,
}

/// Runs every point with `k` threads at once.
pub(super) fn sweep(
    params: &MemlatParams,
    points: &[SweepPoint],
    k: usize,
    progress: &Progress,
) -> Result<Vec<Outcome>, MemlatError> {
    let shared = Shared {
        params,
        points,
        progress,
        barrier: Barrier::new(k),
        go: AtomicBool::new(true),
        failed: AtomicBool::new(false),
    };
    let gate = Gate::default();
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(k);
        for (index, &cpu) in params.sched.cpus.cpus().iter().take(k).enumerate() {
            let (shared, gate) = (&shared, &gate);
            let spawned = thread::Builder::new()
                .name(format!(
                    "ictus-{}-{index}",
                    crate::registry::ProbeId::Memlat.name()
                ))
                .stack_size(2 * memory::PREFAULT_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    measure(shared, gate, index, params.sched.pin.then_some(cpu))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // Release the threads already started before they reach a barrier.
                    gate.set(false);
                    return Err(MemlatError::Setup(setup::PlacementError::Spawn {
                        thread: index,
                        source,
                    }));
                }
            }
        }
        gate.set(true);
        Ok(handles
            .into_iter()
            .map(|h| h.join().expect("measuring threads do not panic"))
            .collect())
    })
}

/// Where started threads wait until all of a sweep's threads exist (`true`) or one
/// could not be started (`false`).
#[derive(Default)]
pub(super) struct Gate {
    pub(super) state: Mutex<Option<bool>>,
    pub(super) changed: Condvar,
}

impl Gate {
    pub(super) fn set(&self, go: bool) {
        *self.state.lock().expect("gate lock is never poisoned") = Some(go);
        self.changed.notify_all();
    }
    pub(super) fn wait(&self) -> bool {
        let mut state = self.state.lock().expect("gate lock is never poisoned");
        loop {
            match *state {
                Some(go) => return go,
                None => {
                    state = self
                        .changed
                        .wait(state)
                        .expect("gate lock is never poisoned")
                }
            }
        }
    }
}

/// One measuring thread: prepare once, then per point: build and warm its own buffer,
/// and run the repetitions in step with the other threads.
pub(super) fn measure(
    shared: &Shared<'_>,
    gate: &Gate,
    index: usize,
    cpu: Option<usize>,
) -> Outcome {
    let params = shared.params;
    let (config, warnings) = setup::prepare_thread(cpu, params.sched.policy);
    let mut outcome = Outcome {
        config,
        warnings,
        results: Vec::with_capacity(shared.points.len()),
        error: None,
    };
    if !gate.wait() {
        setup::release_thread();
        return outcome;
    }
    for point in shared.points {
        if index == 0 {
            let go = !shared.progress.stop_requested()
                // Relaxed: the barrier below orders this load after every thread's
                // store of `failed` in the previous point.
                && !shared.failed.load(Ordering::Relaxed);
            // Relaxed: the barrier below (a mutex inside) publishes the store to the
            // loads after it; the next store comes after all threads passed the
            // point's repetition barriers, so after their loads.
            shared.go.store(go, Ordering::Relaxed);
        }
        shared.barrier.wait();
        // Relaxed: see the store above.
        if !shared.go.load(Ordering::Relaxed) {
            break;
        }
        let seed = 0x9e37_79b9_7f4a_7c15 ^ (point.size as u64) ^ ((index as u64) << 48);
        let mut prepared = match Prepared::new(point, params.pages, seed) {
            Ok(p) => Some(p),
            Err(e) => {
                // Relaxed: read by thread 0 after the next barrier (see above).
                shared.failed.store(true, Ordering::Relaxed);
                outcome.error = Some((point.size, e));
                None
            }
        };
        let huge_share = match (&prepared, params.pages) {
            (Some(p), PageSize::Transparent) => p.huge_share(),
            _ => None,
        };
        let mut ns = Vec::with_capacity(params.repeat as usize);
        for _ in 0..params.repeat {
            // Every thread takes part in every barrier, even without a buffer, so that
            // none waits forever.
            shared.barrier.wait();
            if let Some(p) = prepared.as_mut() {
                ns.push(p.repetition(params.point_time));
            }
        }
        drop(prepared);
        if outcome.error.is_none() {
            outcome.results.push(PointResult { ns, huge_share });
        }
        if index == 0 {
            shared.progress.advance(1);
        }
    }
    setup::release_thread();
    outcome
}

/// A point's buffer, built, faulted in and warmed, with where its walk stands.
pub(super) enum Prepared {
    /// The pointer chase (the ring remembers where it stands).
    Chase(ChaseRing),
    /// Strided reads or writes.
    Strided {
        buffer: Buffer,
        write: bool,
        stride: usize,
        /// Byte offset of the next access.
        at: usize,
    },
}

impl Prepared {
    pub(super) fn new(point: &SweepPoint, pages: PageSize, seed: u64) -> Result<Self, BufferError> {
        let mut buffer = Buffer::new(point.size, pages.os())?;
        let mut sut = match point.kind {
            AccessKind::Chase => {
                // Writes one word per line: every page is faulted in.
                build_cycle(buffer.words_mut(), seed);
                Prepared::Chase(
                    ChaseRing::from_links(buffer, WORDS_PER_LINE)
                        .expect("a Sattolo cycle links line starts only"),
                )
            }
            AccessKind::Read | AccessKind::Write => {
                buffer.bytes_mut().fill(0x5a);
                Prepared::Strided {
                    buffer,
                    write: point.kind == AccessKind::Write,
                    stride: point.stride,
                    at: 0,
                }
            }
        };
        let pass = point.size.min(WARM_CAP_BYTES);
        let warm = match point.kind {
            AccessKind::Chase => (pass / LINE_BYTES) as u64,
            _ => (pass.saturating_sub(8) / point.stride) as u64 + 1,
        };
        sut.accesses(warm);
        Ok(sut)
    }

    pub(super) fn buffer(&self) -> &Buffer {
        match self {
            Prepared::Chase(ring) => ring.buffer(),
            Prepared::Strided { buffer, .. } => buffer,
        }
    }

    pub(super) fn huge_share(&self) -> Option<f64> {
        let buffer = self.buffer();
        buffer
            .huge_bytes()
            .map(|b| (b as f64 / buffer.len() as f64).min(1.0))
    }

    /// Runs `n` accesses from where the walk stands.
    pub(super) fn accesses(&mut self, n: u64) {
        match self {
            Prepared::Chase(ring) => ring.chase(n),
            Prepared::Strided {
                buffer,
                write: false,
                stride,
                at,
            } => {
                black_box(read_strided(buffer.bytes(), *stride, at, n));
            }
            Prepared::Strided {
                buffer,
                write: true,
                stride,
                at,
            } => {
                write_strided(buffer.bytes_mut(), *stride, at, n);
                black_box(buffer.bytes().as_ptr());
            }
        }
    }

    /// One time-bounded repetition: nanoseconds per access.
    pub(super) fn repetition(&mut self, length: Nanos) -> f64 {
        let chunk = match self {
            Prepared::Chase(_) => CHASE_CHUNK,
            Prepared::Strided { .. } => STRIDED_CHUNK,
        };
        let start = monotonic_now();
        let end = start.saturating_add(length);
        let mut done = 0u64;
        loop {
            self.accesses(chunk);
            done += chunk;
            let now = monotonic_now();
            if now >= end {
                return now.saturating_sub(start).as_u64() as f64 / done as f64;
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The kernels' set-up and walks (the loops themselves are in ictus_os::buffer)
