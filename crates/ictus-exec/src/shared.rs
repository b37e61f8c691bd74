//! The control block's shared memory: an `ictus_os::shm` segment seen as words.

use std::sync::atomic::AtomicU64;

use ictus_os::shm::{Segment, ShmError};

/// The 64-bit words of a shared-memory segment (unlinked on drop by its owner).
pub(crate) struct SharedWords {
    segment: Segment,
}

impl SharedWords {
    /// Creates segment `name` of `words` zeroed words, owned by this process (a
    /// stale segment of the name, left by a crash, is reclaimed).
    pub(crate) fn create(name: &str, words: usize) -> Result<SharedWords, ShmError> {
        Ok(SharedWords {
            segment: Segment::create(name, words, 0, |_, _| {})?,
        })
    }

    /// Maps the segment `name` of its live owner.
    pub(crate) fn open(name: &str) -> Result<SharedWords, ShmError> {
        Ok(SharedWords {
            segment: Segment::open(name)?,
        })
    }

    /// The words.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.segment.words()
    }
}
