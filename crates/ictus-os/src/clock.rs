//! `CLOCK_MONOTONIC`: reads, resolution, and the measured cost of a read.
//!
//! ```
//! use ictus_core::Clock;
//! use ictus_os::clock::MonotonicClock;
//! let a = MonotonicClock.now();
//! let b = MonotonicClock.now();
//! assert!(b >= a);
//! ```

use ictus_core::{Clock, LatencyHistogram, Nanos};

/// The kernel's `CLOCK_MONOTONIC`: the clock all ictus deadlines are on.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        monotonic_now()
    }
}

/// Reads `CLOCK_MONOTONIC` (through the vDSO: no system call on x86-64 with a TSC clocksource).
#[inline]
pub fn monotonic_now() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux,
    // so the call cannot fail and writes only `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    timespec_ns(&ts)
}

/// A timespec as nanoseconds (the monotonic clock is never negative).
#[inline]
fn timespec_ns(ts: &libc::timespec) -> Nanos {
    Nanos::new(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The resolution `clock_getres(CLOCK_MONOTONIC)` reports (1 ns with high-resolution
/// timers, a tick without them).
pub fn resolution() -> Option<Nanos> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    (rc == 0).then(|| timespec_ns(&ts))
}

/// The cost of one clock read: `samples` back-to-back pairs, the difference of each.
pub fn measure_read_cost(samples: u64) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for _ in 0..samples {
        let a = monotonic_now();
        let b = monotonic_now();
        h.record(b.saturating_sub(a));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_never_go_backwards() {
        let mut prev = monotonic_now();
        for _ in 0..10_000 {
            let now = monotonic_now();
            assert!(now >= prev);
            prev = now;
        }
    }

    #[test]
    fn read_cost_counts_every_sample() {
        let sut = measure_read_cost(1_000);
        assert_eq!(sut.count(), 1_000);
    }

    #[test]
    fn resolution_is_positive() {
        assert!(resolution().is_some_and(|r| r > Nanos::ZERO));
    }
}
