//! The real-time paths of the core allocate nothing after construction: the SPSC
//! rings, the spin barrier, the histogram and the mass-interaction model's step. A
//! counting global allocator watches them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::mass::{Model, Params};
use ictus_core::sync::{SpinBarrier, spsc};
use ictus_core::{LatencyHistogram, Nanos};

/// Counts allocations of the threads that set `WATCHING` (this binary's tests run one
/// at a time under `SERIAL`, since the counter is shared).
struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (the test harness's own threads
    /// allocate at any time and are never watched).
    static WATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds
// the GlobalAlloc contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a plain event counter, read after the watched section.
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout, as the caller's contract requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: see `alloc`.
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System` with `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with the counter on; returns the allocations it made.
fn allocations_of(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    ALLOCATIONS.load(Ordering::Relaxed)
}

#[test]
fn ring_traffic_allocates_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut tx, mut rx) = spsc::channel::<u64>(64);
    let (mut btx, mut brx) = spsc::bytes::channel(512, 8);
    let n = allocations_of(|| {
        for i in 0..10_000u64 {
            tx.push(i).unwrap();
            assert_eq!(rx.pop(), Some(i));
            assert!(btx.try_write(|buf| {
                buf[..8].copy_from_slice(&i.to_ne_bytes());
                8
            }));
            assert_eq!(brx.try_read(|b| b.len()), Some(8));
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn the_spin_barrier_and_the_model_step_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut model = Model::chain(1_000, &Params::default()).unwrap();
    let parts = model.partition(2);
    let barrier = SpinBarrier::new(2);
    let mut histogram = LatencyHistogram::new();
    let n = allocations_of(|| {
        for _ in 0..100 {
            model.step();
            histogram.record(Nanos::new(1_234));
        }
    });
    assert_eq!(n, 0, "single-thread step and record");
    // Threads are started before watching; only their steady-state loop is watched.
    // The test thread waits on blocking barriers so it never spins against them.
    let start = std::sync::Barrier::new(3);
    let done = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        for part in &parts {
            let (model, barrier, start, done) = (&model, &barrier, &start, &done);
            s.spawn(move || {
                start.wait();
                WATCHING.with(|w| w.set(true));
                for _ in 0..1_000 {
                    model.step_part(part, || {
                        barrier.wait();
                    });
                }
                WATCHING.with(|w| w.set(false));
                done.wait();
            });
        }
        ALLOCATIONS.store(0, Ordering::Relaxed);
        start.wait();
        done.wait();
        assert_eq!(
            ALLOCATIONS.load(Ordering::Relaxed),
            0,
            "partitioned steps with spin rendezvous"
        );
    });
}
