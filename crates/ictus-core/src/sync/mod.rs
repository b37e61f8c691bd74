//! Lock-free building blocks for threads that must never block: a cache-line
//! wrapper, single-producer single-consumer rings, and a spinning barrier.
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
mod padded;
#[allow(unsafe_code)]
pub mod spsc;

pub use barrier::SpinBarrier;
pub use padded::CachePadded;
