//! The hot loops allocate nothing: a counting global allocator watches them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::{LatencyHistogram, MissCounter, Nanos, PeriodicDeadlines};
use ictus_os::clock::monotonic_now;
use ictus_os::wait::WaitMode;
use ictus_probe::progress::Progress;
use ictus_probe::timer::measure_grid;

/// Counts allocations made while `WATCHING` is set (by any thread: the test runs alone
/// in this binary).
struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (the test harness's own threads
    /// allocate at any time and are never watched).
    static WATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

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

/// The tests share the counter: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_rendezvous_exchange_allocates_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ex = ictus_probe::rendezvous::Exchange::new(2, 64, 512);
    let start = std::sync::Barrier::new(3);
    let done = std::sync::Barrier::new(3);
    ALLOCATIONS.store(0, Ordering::Relaxed);
    std::thread::scope(|s| {
        for me in 0..2 {
            let (ex, start, done) = (&ex, &start, &done);
            s.spawn(move || {
                let mut sum = 0u64;
                start.wait();
                WATCHING.with(|w| w.set(true));
                for step in 1..=5_000u64 {
                    ex.exchange(me, 2, step, |i| step ^ i as u64, |_, _, w| sum ^= w);
                }
                WATCHING.with(|w| w.set(false));
                done.wait();
                std::hint::black_box(sum);
            });
        }
        start.wait();
        done.wait();
    });
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0);
}

#[test]
fn the_timer_hot_loop_allocates_nothing_in_any_mode() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for mode in [
        WaitMode::Nanosleep,
        WaitMode::Hybrid {
            margin: Nanos::from_micros(30),
        },
        WaitMode::Spin,
    ] {
        let mut histogram = LatencyHistogram::new();
        let mut misses = MissCounter::default();
        let progress = Progress::new();
        let start = monotonic_now() + Nanos::from_micros(100);
        let mut grid = PeriodicDeadlines::new(start, Nanos::from_micros(100), Some(2_000)).unwrap();
        ALLOCATIONS.store(0, Ordering::Relaxed);
        WATCHING.with(|w| w.set(true));
        measure_grid(&mut grid, mode, &mut histogram, &mut misses, &progress);
        WATCHING.with(|w| w.set(false));
        assert_eq!(histogram.count() + misses.missed, 2_000, "{mode:?}");
        assert_eq!(progress.done(), 2_000);
        assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0, "{mode:?} allocated");
    }
}
