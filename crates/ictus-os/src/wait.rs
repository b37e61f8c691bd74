//! The three ways to wait for an absolute deadline on `CLOCK_MONOTONIC`.
//!
//! - [`WaitMode::Nanosleep`]: `clock_nanosleep(TIMER_ABSTIME)`, as cyclictest does.
//!   The CPU is free while waiting; the wake-up latency of the kernel and (on a
//!   virtual machine) of the host is paid every period.
//! - [`WaitMode::Hybrid`]: sleep until `deadline - margin`, then spin on the clock.
//!   Seed 003 (Figures 6 to 9) shows why: the sleep absorbs most of the period and the
//!   spin removes the wake-up latency, as long as the margin covers it.
//! - [`WaitMode::Spin`]: read the clock until the deadline passes. Lowest latency,
//!   a whole CPU burnt (and, under SCHED_FIFO, subject to RT throttling).
//!
//! ```
//! use ictus_os::{clock::monotonic_now, wait::{wait_until, WaitMode}};
//! use ictus_core::Nanos;
//! let deadline = monotonic_now() + Nanos::from_micros(200);
//! let woke = wait_until(deadline, WaitMode::Hybrid { margin: Nanos::from_micros(50) });
//! assert!(woke >= deadline);
//! ```

use ictus_core::{LatencyHistogram, Nanos, Percentile};
use serde::{Deserialize, Serialize};

use crate::clock::monotonic_now;

/// How to wait for a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "mode")]
pub enum WaitMode {
    /// `clock_nanosleep` with `TIMER_ABSTIME`.
    Nanosleep,
    /// Sleep until `deadline - margin`, then spin.
    Hybrid {
        /// How long before the deadline the sleep ends.
        margin: Nanos,
    },
    /// Busy-wait on the clock.
    Spin,
}

impl WaitMode {
    /// The mode's name as the CLI and records spell it.
    pub fn name(&self) -> &'static str {
        match self {
            WaitMode::Nanosleep => "nanosleep",
            WaitMode::Hybrid { .. } => "hybrid",
            WaitMode::Spin => "spin",
        }
    }
}

/// Sleeps until `deadline` with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`,
/// resuming after signals. Returns at or after the deadline.
#[inline]
pub fn sleep_until(deadline: Nanos) {
    let ns = deadline.as_u64();
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer is
        // unused and may be null. The call only reads `ts`.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number itself. With an absolute deadline the
        // only errors are EINTR (sleep again, to the same deadline) and EINVAL (a
        // timespec out of range, which the arithmetic above cannot build).
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Spins until the clock reads at least `deadline`; returns that reading.
#[inline]
pub fn spin_until(deadline: Nanos) -> Nanos {
    loop {
        let now = monotonic_now();
        if now >= deadline {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Waits for `deadline` in `mode`; returns the first clock reading after the wait,
/// which is the wake-up time the lateness is measured from.
#[inline]
pub fn wait_until(deadline: Nanos, mode: WaitMode) -> Nanos {
    match mode {
        WaitMode::Nanosleep => {
            sleep_until(deadline);
            monotonic_now()
        }
        WaitMode::Hybrid { margin } => {
            let wake_early = deadline.saturating_sub(margin);
            if monotonic_now() < wake_early {
                sleep_until(wake_early);
            }
            spin_until(deadline)
        }
        WaitMode::Spin => spin_until(deadline),
    }
}

/// The hybrid margin derived from measured wake-up latency.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MarginCalibration {
    /// The margin chosen: the p99.9 of the measured wake-up lateness plus 20 %,
    /// never more than half the period: a hybrid wait that spins longer than that is
    /// a spin, and under SCHED_FIFO a thread that spins most of each period meets
    /// the RT throttle (about 50 ms stalled every second by default).
    pub margin_ns: Nanos,
    /// Number of absolute sleeps measured.
    pub samples: u64,
    /// p99.9 of their lateness.
    pub p999_ns: Nanos,
    /// Their worst lateness.
    pub max_ns: Nanos,
}

/// The longest sleep [`calibrate_margin`] measures: the lateness of a wake-up hardly
/// depends on the sleep's length past a few milliseconds (deep idle states are
/// entered within that), and a 1 s tick must not make calibration last minutes.
pub const MAX_CALIBRATION_SLEEP: Nanos = Nanos::from_millis(10);

/// The longest [`calibrate_margin`] runs: fewer samples are taken when `samples`
/// sleeps would take longer.
pub const MAX_CALIBRATION_TIME: Nanos = Nanos::from_secs(1);

/// Measures up to `samples` absolute sleeps of one `period` each (at most
/// [`MAX_CALIBRATION_SLEEP`] each, and [`MAX_CALIBRATION_TIME`] in all) on the calling
/// thread (in its current policy and affinity) and derives a hybrid margin from
/// their lateness.
pub fn calibrate_margin(period: Nanos, samples: u64) -> MarginCalibration {
    let step = period.min(MAX_CALIBRATION_SLEEP).max(Nanos::new(1));
    let samples = samples
        .min(MAX_CALIBRATION_TIME.as_u64() / step.as_u64())
        .max(1);
    let mut h = LatencyHistogram::new();
    let mut deadline = monotonic_now() + step;
    for _ in 0..samples {
        sleep_until(deadline);
        let now = monotonic_now();
        h.record(now.saturating_sub(deadline));
        deadline = (deadline + step).max(now + step);
    }
    let p999 = h.percentile(Percentile::P999).unwrap_or(Nanos::ZERO);
    let margin = Nanos::new(p999.as_u64() + p999.as_u64() / 5).min(Nanos::new(period.as_u64() / 2));
    MarginCalibration {
        margin_ns: margin,
        samples: h.count(),
        p999_ns: p999,
        max_ns: h.max().unwrap_or(Nanos::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_returns_at_or_after_the_deadline() {
        for mode in [
            WaitMode::Nanosleep,
            WaitMode::Hybrid {
                margin: Nanos::from_micros(100),
            },
            WaitMode::Spin,
        ] {
            let deadline = monotonic_now() + Nanos::from_micros(300);
            let woke = wait_until(deadline, mode);
            assert!(woke >= deadline, "{mode:?} woke before its deadline");
        }
    }

    #[test]
    fn a_past_deadline_returns_at_once_in_every_mode() {
        let past = monotonic_now().saturating_sub(Nanos::from_millis(1));
        for mode in [
            WaitMode::Nanosleep,
            WaitMode::Hybrid {
                margin: Nanos::from_millis(5),
            },
            WaitMode::Spin,
        ] {
            assert!(wait_until(past, mode) >= past);
        }
    }

    #[test]
    fn calibration_never_exceeds_half_the_period() {
        let sut = calibrate_margin(Nanos::from_micros(50), 20);
        assert_eq!(sut.samples, 20);
        assert!(sut.margin_ns <= Nanos::from_micros(25));
        assert!(sut.p999_ns <= sut.max_ns);
    }

    #[test]
    fn a_long_period_is_calibrated_with_short_sleeps_and_few_of_them() {
        // An hour-long period must not mean hours of calibration: the sleeps are
        // capped and so is their number (this test would hang otherwise).
        let sut = calibrate_margin(Nanos::from_secs(3600), 1_000);
        let most = MAX_CALIBRATION_TIME.as_u64() / MAX_CALIBRATION_SLEEP.as_u64();
        assert!(sut.samples >= 1 && sut.samples <= most, "{}", sut.samples);
        assert!(sut.margin_ns <= Nanos::from_secs(1800));
    }
}
