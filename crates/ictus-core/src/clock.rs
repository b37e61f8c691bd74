//! The [`Clock`] trait and a [`MockClock`] for deterministic tests.
//!
//! ```
//! use ictus_core::{Clock, MockClock, Nanos};
//! let clock = MockClock::new(Nanos::from_millis(5));
//! clock.advance(Nanos::from_micros(250));
//! assert_eq!(clock.now(), Nanos::new(5_250_000));
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "the mock clock's reading: one word a test sets and reads, no protocol"
)]

use std::sync::atomic::{AtomicU64, Ordering};

use crate::time::Nanos;

/// A monotonic clock: readings never go backwards.
pub trait Clock {
    /// The current reading.
    fn now(&self) -> Nanos;
}

/// A clock that moves only when told to. Shareable between threads.
#[derive(Debug, Default)]
pub struct MockClock {
    now_ns: AtomicU64,
}

impl MockClock {
    /// A clock reading `start`.
    pub fn new(start: Nanos) -> Self {
        MockClock {
            now_ns: AtomicU64::new(start.as_u64()),
        }
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Nanos) {
        // Relaxed: the mock clock orders nothing but itself.
        self.now_ns.fetch_add(d.as_u64(), Ordering::Relaxed);
    }
    /// Moves the clock to `t`, which must not be earlier than the current reading.
    ///
    /// # Panics
    /// When `t` is earlier than the current reading (a monotonic clock never goes back).
    pub fn set(&self, t: Nanos) {
        // Relaxed: see `advance`.
        let prev = self.now_ns.swap(t.as_u64(), Ordering::Relaxed);
        assert!(prev <= t.as_u64(), "MockClock moved backwards");
    }
}

impl Clock for MockClock {
    fn now(&self) -> Nanos {
        // Relaxed: see `advance`.
        Nanos::new(self.now_ns.load(Ordering::Relaxed))
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Nanos {
        (**self).now()
    }
}
