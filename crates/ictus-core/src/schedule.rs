//! Absolute periodic deadlines: lateness, missed periods, and phase that never drifts.
//!
//! Release `k` is due at `start + k * period`. After a wake-up for a release,
//! every later release whose deadline has already passed is *missed*: it is
//! counted, then skipped, and the next deadline stays on the original grid
//! (cyclictest skips such periods silently; ictus counts them).
//!
//! ```
//! use ictus_core::{Nanos, PeriodicDeadlines};
//! let mut sut = PeriodicDeadlines::new(Nanos::ZERO, Nanos::from_millis(1), Some(10)).unwrap();
//! assert_eq!(sut.next_deadline(), Some(Nanos::ZERO));
//! // Woke 3.5 ms late for release 0: releases 1, 2 and 3 are already past.
//! let r = sut.complete(Nanos::new(3_500_000));
//! assert_eq!((r.lateness, r.missed), (Nanos::new(3_500_000), 3));
//! assert_eq!(sut.next_deadline(), Some(Nanos::from_millis(4)));
//! ```

use thiserror::Error;

use crate::time::Nanos;

/// Why [`PeriodicDeadlines`] cannot be made.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DeadlinesError {
    /// A period of zero has no next deadline.
    #[error("the period must be greater than zero")]
    ZeroPeriod,
}

/// The outcome of one serviced release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// Sequence number of the release (0 for the first).
    pub index: u64,
    /// When it was due.
    pub deadline: Nanos,
    /// How late the wake-up was: `woke - deadline`, zero if it was not late.
    pub lateness: Nanos,
    /// How many later releases had already passed, and were skipped.
    pub missed: u64,
}

/// A grid of absolute deadlines `start + k * period`, optionally `limit` of them.
#[derive(Clone, Debug)]
pub struct PeriodicDeadlines {
    start: Nanos,
    period: Nanos,
    index: u64,
    limit: Option<u64>,
}

impl PeriodicDeadlines {
    /// A grid starting at `start`; `limit` is the number of releases, `None` for no end.
    pub fn new(start: Nanos, period: Nanos, limit: Option<u64>) -> Result<Self, DeadlinesError> {
        if period == Nanos::ZERO {
            return Err(DeadlinesError::ZeroPeriod);
        }
        Ok(PeriodicDeadlines {
            start,
            period,
            index: 0,
            limit,
        })
    }

    /// The period of the grid.
    pub fn period(&self) -> Nanos {
        self.period
    }

    /// Index of the next release.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The deadline of the next release, or `None` when all `limit` releases are done
    /// (or the grid would overflow the clock).
    pub fn next_deadline(&self) -> Option<Nanos> {
        if self.limit.is_some_and(|l| self.index >= l) {
            return None;
        }
        let offset = self.period.as_u64().checked_mul(self.index)?;
        self.start.checked_add(Nanos::new(offset))
    }

    /// Closes the current release, serviced at `woke`, and moves to the first release
    /// whose deadline lies after `woke`. Missed releases never run past `limit`.
    ///
    /// Call only while [`next_deadline`](Self::next_deadline) is `Some`.
    pub fn complete(&mut self, woke: Nanos) -> Release {
        let deadline = self.next_deadline().unwrap_or(Nanos::MAX);
        let index = self.index;
        let lateness = woke.saturating_sub(deadline);
        // First k with start + k*period > woke, at least index + 1.
        let next = match woke.checked_sub(self.start) {
            Some(since_start) => (since_start.as_u64() / self.period.as_u64()).saturating_add(1),
            None => 0,
        }
        .max(index + 1);
        let next = match self.limit {
            Some(l) => next.min(l.max(index + 1)),
            None => next,
        };
        self.index = next;
        Release {
            index,
            deadline,
            lateness,
            missed: next - index - 1,
        }
    }
}

/// Missed-period accounting: the total and the longest run of consecutive misses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MissCounter {
    /// Releases missed entirely.
    pub missed: u64,
    /// The longest run of consecutive missed releases.
    pub longest_run: u64,
}

impl MissCounter {
    /// Accounts the misses that followed one serviced release.
    pub fn add(&mut self, release: &Release) {
        self.missed += release.missed;
        self.longest_run = self.longest_run.max(release.missed);
    }

    /// Combines two counters (runs are per thread, so the longest of either).
    pub fn merge(&mut self, other: &MissCounter) {
        self.missed += other.missed;
        self.longest_run = self.longest_run.max(other.longest_run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, MockClock};

    fn ms(v: u64) -> Nanos {
        Nanos::from_millis(v)
    }

    #[test]
    fn zero_period_is_refused() {
        assert_eq!(
            PeriodicDeadlines::new(Nanos::ZERO, Nanos::ZERO, None).unwrap_err(),
            DeadlinesError::ZeroPeriod
        );
    }

    #[test]
    fn on_time_releases_miss_nothing() {
        let clock = MockClock::new(ms(100));
        let mut sut = PeriodicDeadlines::new(ms(100), ms(1), Some(5)).unwrap();
        let mut misses = MissCounter::default();
        let mut count = 0;
        while let Some(d) = sut.next_deadline() {
            clock.set(d + Nanos::new(7_000));
            let r = sut.complete(clock.now());
            assert_eq!(r.lateness, Nanos::new(7_000));
            misses.add(&r);
            count += 1;
        }
        assert_eq!(count, 5);
        assert_eq!(misses, MissCounter::default());
    }

    #[test]
    fn a_late_wake_counts_missed_periods_and_keeps_phase() {
        let clock = MockClock::new(Nanos::ZERO);
        let mut sut = PeriodicDeadlines::new(Nanos::ZERO, ms(1), None).unwrap();
        // Release 0 on time.
        sut.complete(clock.now());
        // Release 1 serviced 2.3 ms late: releases 2 and 3 are gone.
        clock.set(ms(1) + Nanos::new(2_300_000));
        let r = sut.complete(clock.now());
        assert_eq!(r.index, 1);
        assert_eq!(r.missed, 2);
        assert_eq!(r.lateness, Nanos::new(2_300_000));
        // No drift: the next deadline is on the original grid, not "now + period".
        assert_eq!(sut.next_deadline(), Some(ms(4)));
        assert_eq!(sut.index(), 4);
    }

    #[test]
    fn a_wake_exactly_on_the_next_deadline_skips_it() {
        let mut sut = PeriodicDeadlines::new(Nanos::ZERO, ms(1), None).unwrap();
        let r = sut.complete(ms(1));
        assert_eq!(r.missed, 1);
        assert_eq!(sut.next_deadline(), Some(ms(2)));
    }

    #[test]
    fn the_longest_miss_run_is_the_largest_gap() {
        let mut sut = PeriodicDeadlines::new(Nanos::ZERO, ms(1), None).unwrap();
        let mut misses = MissCounter::default();
        for woke in [
            ms(0),
            ms(3) + Nanos::new(1),
            ms(4),
            ms(9) + Nanos::new(5),
            ms(10),
        ] {
            misses.add(&sut.complete(woke));
        }
        // 0, 1 serviced at 3 ms (2 and 3 missed), 4, 5 serviced at 9 ms (6..=9 missed), 10.
        assert_eq!(misses.missed, 2 + 4);
        assert_eq!(misses.longest_run, 4);
    }

    #[test]
    fn serviced_plus_missed_equals_the_limit() {
        let mut sut = PeriodicDeadlines::new(Nanos::ZERO, ms(1), Some(10)).unwrap();
        let mut serviced = 0;
        let mut misses = MissCounter::default();
        let mut woke = Nanos::ZERO;
        while let Some(d) = sut.next_deadline() {
            // Every third release is serviced 4.5 periods late.
            woke = woke.max(d)
                + if serviced % 3 == 2 {
                    Nanos::new(4_500_000)
                } else {
                    Nanos::ZERO
                };
            misses.add(&sut.complete(woke));
            serviced += 1;
        }
        assert_eq!(serviced + misses.missed, 10);
    }

    #[test]
    fn a_wake_before_the_start_moves_one_release() {
        let mut sut = PeriodicDeadlines::new(ms(10), ms(1), None).unwrap();
        let r = sut.complete(ms(5));
        assert_eq!((r.lateness, r.missed), (Nanos::ZERO, 0));
        assert_eq!(sut.next_deadline(), Some(ms(11)));
    }
}
