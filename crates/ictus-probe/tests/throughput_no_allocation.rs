//! The throughput probe's transfer loops allocate nothing: a counting global
//! allocator watches both threads while messages move.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use ictus_core::{LatencyHistogram, Nanos};
use ictus_probe::progress::Progress;
use ictus_probe::throughput::{self, Length, Mode, Placement, Plan, Transport};

/// Counts allocations made while `WATCHING` is set (by any thread: the test runs alone
/// in this binary).
struct Counting;

static WATCHING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds
// the GlobalAlloc contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a plain event counter, read after the watched section.
        if WATCHING.load(Ordering::Relaxed) {
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
        if WATCHING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System` with `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn throughput_loops_allocate_nothing_on_any_transport_in_either_mode() {
    const MESSAGES: u64 = 2_000;
    for transport in Transport::ALL {
        for mode in [Mode::Sync, Mode::Stream] {
            for payload in [0, 64, 4096] {
                let at = format!("{transport} {mode} {payload} B");
                // Waiting as on one CPU: the unpinned threads may share one.
                let (mut tx, mut rx) =
                    throughput::link(transport, mode, payload, Placement::SameCpu).unwrap();
                let start = Barrier::new(2);
                let received = AtomicBool::new(false);
                let mut round_trip = LatencyHistogram::new();
                let progress = Progress::new();
                let plan = Plan {
                    warmup: Nanos::ZERO,
                    length: Length::Messages(MESSAGES),
                };
                ALLOCATIONS.store(0, Ordering::Relaxed);
                let (sent, got) = thread::scope(|scope| {
                    let receiver = scope.spawn(|| {
                        let mut one_way = LatencyHistogram::new();
                        start.wait();
                        let got = rx.receive_messages(&mut one_way).unwrap();
                        // Release: pairs with the Acquire load below, so the watch
                        // ends only after this loop did.
                        received.store(true, Ordering::Release);
                        got
                    });
                    start.wait();
                    WATCHING.store(true, Ordering::Relaxed);
                    let sent = tx.send_messages(&plan, &mut round_trip, &progress).unwrap();
                    // Acquire: pairs with the Release store above.
                    while !received.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    WATCHING.store(false, Ordering::Relaxed);
                    (sent, receiver.join().unwrap())
                });
                assert_eq!(sent.messages, MESSAGES, "{at}");
                assert_eq!(got.measured, MESSAGES, "{at}");
                assert_eq!(sent.checksum, got.checksum, "{at}");
                assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0, "{at} allocated");
            }
        }
    }
}
