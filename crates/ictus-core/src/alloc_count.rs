//! A counting global allocator for tests that prove a real-time path allocates
//! nothing. Install it in a test binary and count what a closure allocates:
//!
//! ```ignore
//! use ictus_core::alloc_count::{self, Counting};
//! #[global_allocator]
//! static GLOBAL: Counting = Counting;
//!
//! let _turn = alloc_count::one_at_a_time();
//! assert_eq!(alloc_count::allocations_of(|| hot_path()), 0);
//! ```
//!
//! Counting is per thread ([`watch`]) or for every thread at once ([`watch_all`]); the
//! counter is shared, so a binary's watched tests run one at a time
//! ([`one_at_a_time`]).

#![allow(
    clippy::disallowed_types,
    reason = "the counting global allocator's own counters: relaxed increments on any thread, read by the test that set it up; loom cannot run a global allocator"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Forwards to the system allocator, counting allocations and reallocations made
/// while watched.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (a test harness's own threads
    /// allocate at any time and are never watched).
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}
static WATCHING_ALL: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn watched() -> bool {
    // Relaxed: plain flags, set before and cleared after the watched section on the
    // same thread (or, for `watch_all`, around a section the test joins).
    WATCHING_ALL.load(Ordering::Relaxed) || WATCHING.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds the
// GlobalAlloc contract; the counter and the flags have no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if watched() {
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
        if watched() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System` with `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Waits for this binary's other watched tests: the counter is one per binary, so
/// each watched test holds the returned guard while it counts. A test that failed
/// holding it does not stop the others.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts (or stops counting) the calling thread's allocations.
pub fn watch(on: bool) {
    WATCHING.with(|w| w.set(on));
}

/// Counts (or stops counting) every thread's allocations.
pub fn watch_all(on: bool) {
    WATCHING_ALL.store(on, Ordering::Relaxed);
}

/// Sets the counter to zero.
pub fn reset() {
    ALLOCATIONS.store(0, Ordering::Relaxed);
}

/// Allocations counted since the last [`reset`].
pub fn count() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Runs `f` with the calling thread watched; returns the allocations it made.
pub fn allocations_of(f: impl FnOnce()) -> u64 {
    reset();
    watch(true);
    f();
    watch(false);
    count()
}
