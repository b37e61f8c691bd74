//! Shared memory as words: the control block's `ictus_os::shm` segment, and the
//! self-describing header the cells' and the hubs' segments start with (a magic
//! word, a layout version, then their table as JSON), so that a process that maps
//! one by name learns its layout from it.

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the protocols on them are ictus_core::sync's (seqlock, hub), model-checked there, or this file's, tested across processes"
)]

use std::sync::atomic::{AtomicU64, Ordering};

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

/// Writes the header of a self-describing segment into a new segment's `words`:
/// `magic`, `version` and the length of `json` in bytes in words 0 to 2, then `json`
/// from word `at` on (the last word padded with zeros).
pub(crate) fn write_described(
    words: &[AtomicU64],
    magic: u64,
    version: u64,
    at: usize,
    json: &[u8],
) {
    // Relaxed (all): published by the segment's ready flag (Release in
    // Segment::create), which read_described's Segment::open acquires.
    words[0].store(magic, Ordering::Relaxed);
    words[1].store(version, Ordering::Relaxed);
    words[2].store(json.len() as u64, Ordering::Relaxed);
    for (chunk, word) in json.chunks(8).zip(&words[at..]) {
        let mut bytes = [0u8; 8];
        bytes[..chunk.len()].copy_from_slice(chunk);
        word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
    }
}

/// Reads back what [`write_described`] wrote in a segment of `what` (`"cells"`,
/// `"hubs"`) whose JSON starts at word `at`: the JSON, and the words the header and
/// the JSON take. The error says why the segment is no such segment.
pub(crate) fn read_described(
    words: &[AtomicU64],
    magic: u64,
    version: u64,
    at: usize,
    what: &str,
) -> Result<(Vec<u8>, usize), String> {
    if words.len() < at {
        return Err("the segment is too small".into());
    }
    // Relaxed (all): the segment's ready flag (Acquire in Segment::open) orders
    // these after the creator's stores (write_described).
    if words[0].load(Ordering::Relaxed) != magic {
        return Err(format!("it holds something else than {what}"));
    }
    let found = words[1].load(Ordering::Relaxed);
    if found != version {
        return Err(format!(
            "layout version {found} (this build reads {version})"
        ));
    }
    let json_len = usize::try_from(words[2].load(Ordering::Relaxed)).unwrap_or(usize::MAX);
    let json_words = json_len.div_ceil(8);
    if at.saturating_add(json_words) > words.len() {
        return Err("the table runs past the segment".into());
    }
    let mut json = Vec::with_capacity(json_words * 8);
    for word in &words[at..at + json_words] {
        json.extend_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
    json.truncate(json_len);
    Ok((json, at + json_words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_header_reads_back_and_a_wrong_one_is_named() {
        let words: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        write_described(&words, 7, 2, 4, b"{\"a\": 12345}");
        let (json, used) = read_described(&words, 7, 2, 4, "things").unwrap();
        assert_eq!(json, b"{\"a\": 12345}");
        assert_eq!(used, 4 + 2, "13 bytes take two words");
        let err = read_described(&words, 8, 2, 4, "things").unwrap_err();
        assert_eq!(err, "it holds something else than things");
        let err = read_described(&words, 7, 3, 4, "things").unwrap_err();
        assert_eq!(err, "layout version 2 (this build reads 3)");
        let err = read_described(&words[..5], 7, 2, 4, "things").unwrap_err();
        assert_eq!(err, "the table runs past the segment");
        let err = read_described(&words[..3], 7, 2, 4, "things").unwrap_err();
        assert_eq!(err, "the segment is too small");
    }
}
