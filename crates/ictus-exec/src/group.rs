//! The synchronous group (seed 000's fully synchronous loop): subsystems that agree
//! on each frame and meet at a spin rendezvous before it. The frame loop
//! ([`crate::executive::Runner`]) meets the group; a subsystem's registry
//! ([`crate::subsystem::Registry`]) hands its members the rendezvous.

#![allow(
    clippy::disallowed_types,
    reason = "a group's frame counter published for its members to read, and flags; one writer, no protocol beyond Release/Acquire pairs named at each use"
)]

use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::sync::SpinBarrier;

/// The members of a synchronous group: they agree on each frame and meet at a spin
/// rendezvous before it (seed 000's fully synchronous loop).
#[derive(Debug)]
pub struct Group {
    barrier: SpinBarrier,
    /// The largest frame any member has reached (only grows).
    frame: AtomicU64,
}

impl Group {
    /// A group of `members` threads.
    pub fn new(members: usize) -> Group {
        Group {
            barrier: SpinBarrier::new(members),
            frame: AtomicU64::new(0),
        }
    }

    /// The rendezvous every member calls the same number of times in each frame.
    /// Once a member has [left](Group::leave), it returns at once.
    #[inline]
    pub fn rendezvous(&self) {
        self.barrier.wait();
    }

    /// A member leaves for good (its loop ended, or it panicked): the others stop
    /// meeting it, and their loops end at their next frame instead of spinning for
    /// ever on a thread that is gone.
    pub fn leave(&self) {
        self.barrier.abandon();
    }

    /// Whether a member has left.
    #[inline]
    pub fn is_broken(&self) -> bool {
        self.barrier.is_abandoned()
    }

    /// Posts `frame`, meets the others, and returns the frame they all run: the
    /// latest any of them reached (its deadline has passed for all of them).
    #[inline]
    pub(crate) fn agree(&self, frame: u64) -> u64 {
        // Relaxed: ordered by the barrier that follows (its AcqRel arrival).
        self.frame.fetch_max(frame, Ordering::Relaxed);
        self.barrier.wait();
        // Relaxed: every member's fetch_max happens before the barrier above.
        let agreed = self.frame.load(Ordering::Relaxed);
        // Nobody posts the next frame before everybody has read this one.
        self.barrier.wait();
        agreed
    }
}
