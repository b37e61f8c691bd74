//! A run's time base once its start has set the epoch: the frame a time falls in,
//! and the first frame a change can still be announced for.

use ictus_core::Nanos;

use crate::executive;

/// The run's time base, once the epoch is set.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    /// The deadline of frame 0.
    pub(super) epoch: Nanos,
    pub(super) tick: Nanos,
    /// Minor frames per major frame.
    pub(super) major: u64,
    /// How far ahead a change is announced.
    pub(super) lead: Nanos,
}

impl Clock {
    /// The frame `now` falls in.
    pub(super) fn frame(&self, now: Nanos) -> u64 {
        now.saturating_sub(self.epoch).as_u64() / self.tick.as_u64()
    }

    /// The first major frame a change decided at `now` can still be announced for.
    pub(super) fn announce(&self, now: Nanos) -> u64 {
        executive::announce_frame(self.epoch, self.tick, self.major, now, self.lead)
    }
}
