//! Lock-free building blocks for threads that must never block: a cache-line
//! wrapper, single-producer single-consumer rings, a spinning barrier, the
//! byte-region [`seqlock`] of the communication cells, and the word-level
//! protocols of the [`hub`]s (semaphore, event, port, FIFO ring).
//!
//! The seqlock and the hubs work on atomic words the caller owns
//! (`&[AtomicU64]`, `&[AtomicU32]`), so the same code serves process memory
//! and a shared-memory mapping between processes.
//!
//! Everything here is portable (no system calls) and allocates only at
//! construction. The atomics go through a private facade that switches to
//! [loom](https://docs.rs/loom) under `--cfg loom`, so the same code is
//! model-checked: see `tests/loom.rs` for the command.
//!
//! ```
//! use ictus_core::sync::{SpinBarrier, spsc};
//! use std::sync::Arc;
//!
//! let (mut tx, mut rx) = spsc::channel::<u64>(8);
//! let barrier = Arc::new(SpinBarrier::new(2));
//! let b = Arc::clone(&barrier);
//! let worker = std::thread::spawn(move || {
//!     b.wait();
//!     for i in 0..100 {
//!         while tx.push(i).is_err() {
//!             std::hint::spin_loop();
//!         }
//!     }
//! });
//! barrier.wait();
//! let mut expected = 0;
//! while expected < 100 {
//!     if let Some(v) = rx.pop() {
//!         assert_eq!(v, expected);
//!         expected += 1;
//!     }
//! }
//! worker.join().unwrap();
//! ```

mod atomic;
mod barrier;
#[cfg(all(test, not(loom)))]
mod conformance;
pub mod hub;
mod padded;
pub mod seqlock;
#[allow(unsafe_code)]
pub mod spsc;

pub use atomic::{AtomicU32, AtomicU64};
pub use barrier::SpinBarrier;
pub use padded::CachePadded;

/// What the unit tests of this module share.
#[cfg(all(test, not(loom)))]
mod test_support {
    use proptest::test_runner::Config as ProptestConfig;

    /// proptest's defaults; under Miri only a few cases, and no failure file
    /// (Miri's isolation forbids the file system).
    pub(crate) fn proptest_config() -> ProptestConfig {
        if cfg!(miri) {
            ProptestConfig {
                cases: 4,
                failure_persistence: None,
                ..ProptestConfig::default()
            }
        } else {
            ProptestConfig::default()
        }
    }
}
