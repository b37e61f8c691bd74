//! What the sampler may cost (issue 30: "the sampler's own cost", at most 1 % of a
//! CPU whatever the number of subsystems): its own run time, read from its thread's
//! schedstat twice a second, against a budget. Above it, the sampler reads and scans
//! less often (its period and its scans' spacing times a factor, at most four times
//! larger at each weighing, up to [`SLOWEST`]); with room again, it speeds back up. A miss still wakes
//! it, so each miss's window closes at once; what widens is where windows open.
//!
//! What a reading and a scan cost grows with what the machine runs (a scan reads
//! every thread's schedstat; a build's hundreds of short-lived threads are each a
//! file to open), which no fixed period bounds: the budget does.

use ictus_core::Nanos;

use super::files::Reread;

/// The most the period and the scans' spacing are stretched: 16 times (a reading
/// every 160 ms at the default 10 ms period, a scan every 16 s). Past it the sampler
/// costs what it costs, and the record says so (its share against its budget).
pub(super) const SLOWEST: u32 = 16;

/// How often the sampler weighs its own cost: twice a second, so that a short run
/// that starts over budget comes under it within a second or two.
const EVERY: Nanos = Nanos::from_millis(500);

/// The sampler's own cost against its budget, and how much it slows down to hold it.
pub(super) struct Budget {
    /// The share of one CPU it may use (0: no budget, never slows).
    share: f64,
    /// Its own thread's schedstat, opened from the sampler's thread.
    own: Option<Reread>,
    /// The last weighing: when, and its run time then.
    mark: Option<(Nanos, u64)>,
    /// The factor its period and scans' spacing are stretched by now (1: as set).
    slow: u32,
    /// The largest factor it came to.
    slowest: u32,
    /// How long it ran stretched.
    stretched: Nanos,
}

impl Budget {
    /// A budget of `share` of one CPU, for the thread that calls it (it opens that
    /// thread's schedstat).
    pub(super) fn new(share: f64) -> Budget {
        Budget {
            share,
            own: Reread::sized("/proc/thread-self/schedstat", 128),
            mark: None,
            slow: 1,
            slowest: 1,
            stretched: Nanos::ZERO,
        }
    }

    /// The factor its period and scans' spacing are stretched by now.
    pub(super) fn slow(&self) -> u32 {
        self.slow
    }

    /// The largest factor it came to.
    pub(super) fn slowest(&self) -> u32 {
        self.slowest
    }

    /// How long it ran stretched.
    pub(super) fn stretched(&self) -> Nanos {
        self.stretched
    }

    /// Weighs its cost since the last weighing, twice a second at most, at `now`.
    pub(super) fn weigh(&mut self, now: Nanos) {
        if self.share <= 0.0 {
            return;
        }
        let Some(ran) = self
            .own
            .as_mut()
            .and_then(Reread::read)
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        else {
            return;
        };
        let Some((t, before)) = self.mark else {
            self.mark = Some((now, ran));
            return;
        };
        let wall = now.saturating_sub(t);
        if wall < EVERY {
            return;
        }
        if self.slow > 1 {
            self.stretched += wall;
        }
        self.mark = Some((now, ran));
        let used = ran.saturating_sub(before) as f64 / wall.as_u64() as f64;
        self.slow = next_slow(self.slow, used, self.share);
        self.slowest = self.slowest.max(self.slow);
    }
}

/// The next stretch factor from the current one, the share of a CPU used over the
/// last weighing and the budget: over budget, stretched by what it used over the
/// budget (at most four times, at most [`SLOWEST`]); at less than 45 % of the budget
/// (so that halving the stretch, which about doubles the cost, stays under 90 %),
/// halved; else kept.
fn next_slow(slow: u32, used: f64, budget: f64) -> u32 {
    if used > budget {
        let want = (f64::from(slow) * used / budget).ceil() as u32;
        want.clamp(slow + 1, slow * 4).min(SLOWEST)
    } else if used < 0.45 * budget && slow > 1 {
        (slow / 2).max(1)
    } else {
        slow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_budget_it_slows_by_what_it_used_at_most_four_times_a_step_and_with_room_it_speeds_back()
    {
        // 1.5 % used against 0.8 %: stretched by that, at most four times.
        assert_eq!(next_slow(1, 0.015, 0.008), 2);
        assert_eq!(next_slow(2, 0.030, 0.008), 8);
        assert_eq!(next_slow(1, 0.100, 0.008), 4);
        // Just over: one step more, never the same.
        assert_eq!(next_slow(4, 0.0081, 0.008), 5);
        // Never past the slowest.
        assert_eq!(next_slow(SLOWEST, 0.5, 0.008), SLOWEST);
        assert_eq!(next_slow(12, 0.5, 0.008), SLOWEST);
        // Within budget, kept; well under, halved, never below 1.
        assert_eq!(next_slow(4, 0.006, 0.008), 4);
        assert_eq!(next_slow(4, 0.003, 0.008), 2);
        assert_eq!(next_slow(1, 0.0, 0.008), 1);
    }

    #[test]
    fn the_first_weighing_marks_and_another_too_soon_waits() {
        let mut b = Budget::new(0.008);
        if b.own.is_none() {
            // No schedstat here (a kernel without CONFIG_SCHED_INFO): it never
            // slows, which the record shows as a factor of 1.
            b.weigh(Nanos::from_secs(1));
            assert_eq!(b.slow(), 1);
            return;
        }
        b.weigh(Nanos::from_secs(10));
        assert!(b.mark.is_some());
        let mark = b.mark;
        b.weigh(Nanos::from_secs(10) + Nanos::from_millis(200));
        assert_eq!(b.mark, mark, "weighed again within half a second");
        assert_eq!(b.slowest(), 1);
        assert_eq!(b.stretched(), Nanos::ZERO);
    }

    #[test]
    fn no_budget_never_reads_or_slows() {
        let mut b = Budget::new(0.0);
        b.weigh(Nanos::from_secs(1));
        b.weigh(Nanos::from_secs(5));
        assert!(b.mark.is_none());
        assert_eq!(b.slow(), 1);
    }
}
