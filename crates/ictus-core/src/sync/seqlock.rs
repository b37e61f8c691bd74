//! A byte-region seqlock: writers publish a whole byte payload, readers copy a
//! coherent snapshot of it, and nobody ever blocks anybody for longer than one
//! copy. This is what a communication cell of the cyclic executive is.
//!
//! A region is a run of 64-bit atomic words: the sequence number first, then
//! the payload, 8 bytes a word (`region_words(len)` words for `len` bytes).
//! The payload bytes are kept in the words in native byte order, so the bytes
//! of the region in memory are exactly the payload bytes, whichever process
//! maps it.
//!
//! - A write claims the region by moving the sequence from even `s` to odd
//!   `s + 1` (a compare-and-swap, so two writers never interleave), stores the
//!   payload words, and publishes by storing `s + 2`.
//! - A read loads the sequence; if it is odd a write is under way and it tries
//!   again. Otherwise it copies the words it wants, then loads the sequence
//!   again: if it changed, a write overlapped the copy and it tries again;
//!   if not, the copy is one coherent snapshot, and the (even) sequence is
//!   returned. `sequence / 2` is the number of writes so far.
//!
//! Every payload access is an atomic load or store (Relaxed, ordered by fences
//! and by the sequence's Acquire/Release, as in Boehm, "Can seqlocks get along
//! with programming language memory models?", 2012), so a read that overlaps
//! a write is not a data race under the Rust memory model, only a wasted copy
//! that is thrown away. No torn value is ever returned. The same holds between
//! processes sharing the words through a shared-memory mapping.
//!
//! Readers spin while a write is in progress: a reader must not preempt the
//! writer of the same region on one CPU at a higher priority (the executive
//! never schedules them so). [`SeqlockView::try_read`] makes a single attempt
//! for callers that must not wait. A writer that dies half way (a killed
//! process) leaves the sequence odd; [`SeqlockView::recover`] lets the owner
//! of the region reopen it.
//!
//! [`SeqlockView`] works on words the caller owns (`&[AtomicU64]`, for example
//! a shared-memory mapping); [`Seqlock`] owns its words.
//!
//! ```
//! use ictus_core::sync::seqlock::Seqlock;
//!
//! let sut = Seqlock::new(12);
//! sut.write(b"hello, world");
//! let mut out = [0u8; 12];
//! assert_eq!(sut.read(&mut out), 2); // one write so far
//! assert_eq!(&out, b"hello, world");
//! sut.write_at(7, b"cells");
//! assert_eq!(sut.read(&mut out), 4);
//! assert_eq!(&out, b"hello, cells");
//! ```

use std::fmt;

use super::atomic::{AtomicU64, Ordering, fence, spin_loop};

/// Bytes in one word of a region.
pub const WORD_BYTES: usize = 8;

/// Words a region needs for a payload of `len` bytes: the sequence word, then
/// the payload rounded up to whole words.
pub const fn region_words(len: usize) -> usize {
    1 + len.div_ceil(WORD_BYTES)
}

/// A seqlock over words the caller owns: word 0 is the sequence, the payload
/// of `len` bytes follows.
///
/// Cheap to make (two slices and a length) and `Copy`: build one per access
/// from the mapping if that is easiest.
#[derive(Clone, Copy)]
pub struct SeqlockView<'a> {
    seq: &'a AtomicU64,
    payload: &'a [AtomicU64],
    len: usize,
}

impl<'a> SeqlockView<'a> {
    /// A view of a payload of `len` bytes kept in `region` (whose first
    /// [`region_words(len)`](region_words) words are used).
    ///
    /// A region of zeros is a valid seqlock holding zeros that was never
    /// written (sequence 0).
    ///
    /// # Panics
    ///
    /// If `region` is shorter than `region_words(len)`.
    pub fn new(region: &'a [AtomicU64], len: usize) -> Self {
        let need = region_words(len);
        assert!(
            region.len() >= need,
            "a seqlock of {len} bytes needs {need} words, the region has {}",
            region.len()
        );
        let (seq, payload) = region[..need]
            .split_first()
            .expect("need is at least one word");
        SeqlockView { seq, payload, len }
    }

    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sequence number now: twice the writes completed, plus one while a
    /// write is under way.
    pub fn sequence(&self) -> u64 {
        // Acquire: pairs with the Release store in `end_write`, so a caller that
        // sees a write counted also sees its payload.
        self.seq.load(Ordering::Acquire)
    }

    /// Whether a write is under way (or a writer died during one).
    pub fn is_writing(&self) -> bool {
        self.sequence() & 1 == 1
    }

    /// Replaces the whole payload with `bytes`.
    ///
    /// Spins while another write is under way; never allocates.
    ///
    /// # Panics
    ///
    /// If `bytes.len()` differs from the payload length (checked before the
    /// region is claimed, so a panic leaves it untouched).
    #[inline]
    pub fn write(&self, bytes: &[u8]) {
        assert_eq!(
            bytes.len(),
            self.len,
            "a write must cover the whole {}-byte payload",
            self.len
        );
        self.write_at(0, bytes);
    }

    /// Replaces the payload bytes `offset..offset + bytes.len()` with `bytes`,
    /// keeping the others; one write, counted in the sequence like a whole one.
    ///
    /// # Panics
    ///
    /// If the range passes the end of the payload (checked before the region
    /// is claimed).
    #[inline]
    pub fn write_at(&self, offset: usize, bytes: &[u8]) {
        self.check_range(offset, bytes.len());
        let odd = self.begin_write();
        store_bytes(self.payload, offset, bytes);
        self.end_write(odd);
    }

    /// One attempt at [`write_at`](Self::write_at): claims the region only if
    /// no write is under way, writes and publishes; `false` (nothing written)
    /// when another write held it. For writers that must not wait on a writer
    /// that may never finish (a stopped or dead process).
    ///
    /// # Panics
    ///
    /// If the range passes the end of the payload (checked before the region
    /// is claimed).
    #[inline]
    pub fn try_write_at(&self, offset: usize, bytes: &[u8]) -> bool {
        self.check_range(offset, bytes.len());
        let Some(odd) = self.try_begin_write() else {
            return false;
        };
        store_bytes(self.payload, offset, bytes);
        self.end_write(odd);
        true
    }

    /// Claims the region for a write and never publishes it, as a writer does
    /// that is stopped or dies half way through (fault injection; readers see
    /// a write under way until [`recover`](Self::recover)). `false` when another
    /// write held it.
    #[doc(hidden)]
    pub fn abandon_write(&self) -> bool {
        self.try_begin_write().is_some()
    }

    /// Copies the whole payload into `out` and returns the (even) sequence of
    /// the snapshot. Spins while a write is under way or overlaps the copy.
    ///
    /// # Panics
    ///
    /// If `out.len()` differs from the payload length.
    #[inline]
    pub fn read(&self, out: &mut [u8]) -> u64 {
        assert_eq!(
            out.len(),
            self.len,
            "a read must cover the whole {}-byte payload",
            self.len
        );
        self.read_at(0, out)
    }

    /// Copies the payload bytes `offset..offset + out.len()` into `out` and
    /// returns the (even) sequence of the snapshot.
    ///
    /// # Panics
    ///
    /// If the range passes the end of the payload.
    #[inline]
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> u64 {
        loop {
            if let Some(seq) = self.try_read_at(offset, out) {
                return seq;
            }
            spin_loop();
        }
    }

    /// One attempt at [`read`](Self::read): `None` when a write was under way
    /// or overlapped the copy (then `out` holds garbage, never a value to use).
    ///
    /// # Panics
    ///
    /// If `out.len()` differs from the payload length.
    #[inline]
    pub fn try_read(&self, out: &mut [u8]) -> Option<u64> {
        assert_eq!(
            out.len(),
            self.len,
            "a read must cover the whole {}-byte payload",
            self.len
        );
        self.try_read_at(0, out)
    }

    /// One attempt at [`read_at`](Self::read_at).
    ///
    /// # Panics
    ///
    /// If the range passes the end of the payload.
    #[inline]
    pub fn try_read_at(&self, offset: usize, out: &mut [u8]) -> Option<u64> {
        self.check_range(offset, out.len());
        // Acquire: pairs with the Release store in `end_write`, so the payload
        // stores of the write that made this (even) value happen before our loads.
        let before = self.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        load_bytes(self.payload, offset, out);
        // Acquire fence: pairs with the Release fence in `begin_write`. If any
        // load above saw a store of a later write, that write's odd sequence
        // happens before the load below, which then differs from `before`.
        fence(Ordering::Acquire);
        // Relaxed: ordered after the payload loads by the fence above.
        let after = self.seq.load(Ordering::Relaxed);
        (before == after).then_some(before)
    }

    /// Reopens a region whose writer died during a write (the sequence stuck
    /// odd): moves the sequence on to even, so that reads and writes go on.
    /// The payload keeps whatever the dead writer left, possibly part old and
    /// part new. Returns whether the sequence was odd.
    ///
    /// Call it only when no writer is alive (the owner knows, for example after
    /// the writing process was reported dead): a live writer's write would be
    /// exposed half done.
    pub fn recover(&self) -> bool {
        // Relaxed: a guess; the compare-and-swap decides.
        let s = self.seq.load(Ordering::Relaxed);
        // Release: like `end_write`, publishes what the dead writer stored.
        s & 1 == 1
            && self
                .seq
                .compare_exchange(s, s + 1, Ordering::Release, Ordering::Relaxed)
                .is_ok()
    }

    /// Claims the region if no write is under way: the odd sequence it set,
    /// or `None` when the sequence was odd. Retries only a compare-and-swap
    /// lost to a claim that has already finished (never waits on a writer).
    #[inline]
    fn try_begin_write(&self) -> Option<u64> {
        loop {
            // Relaxed: only a guess at the current value; the compare-and-swap
            // below decides.
            let s = self.seq.load(Ordering::Relaxed);
            if s & 1 == 1 {
                return None;
            }
            // Acquire: pairs with the Release store in `end_write` of the
            // previous write, as in `begin_write`.
            if self
                .seq
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // Release fence: pairs with the Acquire fence in `try_read_at`,
                // as in `begin_write`.
                fence(Ordering::Release);
                return Some(s + 1);
            }
            spin_loop();
        }
    }

    /// Claims the region for one write; returns the odd sequence it set.
    #[inline]
    fn begin_write(&self) -> u64 {
        loop {
            // Relaxed: only a guess at the current value; the compare-and-swap
            // below decides.
            let s = self.seq.load(Ordering::Relaxed);
            if s & 1 == 0 {
                // Acquire: pairs with the Release store in `end_write` of the
                // previous write, so its payload stores happen before ours (and a
                // partial write's read-modify-write of a boundary word sees them).
                let claimed = self
                    .seq
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
                if claimed {
                    // Release fence: pairs with the Acquire fence in
                    // `try_read_at`: a reader that loads any payload word stored
                    // after this point then sees the odd sequence (or a later one).
                    fence(Ordering::Release);
                    return s + 1;
                }
            }
            spin_loop();
        }
    }

    /// Publishes the write claimed by `begin_write`.
    #[inline]
    fn end_write(&self, odd: u64) {
        // Release: pairs with the Acquire load of the sequence in `try_read_at`
        // (and the Acquire compare-and-swap of the next `begin_write`), so our
        // payload stores happen before their loads.
        self.seq.store(odd + 1, Ordering::Release);
    }

    /// Panics unless `offset..offset + len` lies within the payload.
    #[inline]
    fn check_range(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "bytes {offset}..{} pass the end of the {}-byte payload",
            offset.saturating_add(len),
            self.len
        );
    }
}

impl fmt::Debug for SeqlockView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeqlockView")
            .field("len", &self.len)
            .field("sequence", &self.sequence())
            .finish()
    }
}

/// Copies payload bytes `offset..offset + out.len()` out of `words`.
///
/// Relaxed loads (all): the caller orders them with the sequence (see
/// `try_read_at`).
#[inline]
fn load_bytes(words: &[AtomicU64], offset: usize, out: &mut [u8]) {
    if out.is_empty() {
        return;
    }
    let mut w = offset / WORD_BYTES;
    let skip = offset % WORD_BYTES;
    let mut out = out;
    if skip != 0 {
        let bytes = words[w].load(Ordering::Relaxed).to_ne_bytes();
        let n = (WORD_BYTES - skip).min(out.len());
        out[..n].copy_from_slice(&bytes[skip..skip + n]);
        out = &mut out[n..];
        w += 1;
    }
    let last = w + (out.len() / WORD_BYTES);
    let mut chunks = out.chunks_exact_mut(WORD_BYTES);
    for (chunk, word) in (&mut chunks).zip(&words[w..]) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let bytes = words[last].load(Ordering::Relaxed).to_ne_bytes();
        let n = tail.len();
        tail.copy_from_slice(&bytes[..n]);
    }
}

/// Stores `bytes` as payload bytes `offset..offset + bytes.len()` of `words`,
/// keeping the other bytes of the first and last word.
///
/// Relaxed (all): the caller holds the write claim, so no other writer touches
/// the words meanwhile, and the claim's Acquire made the previous write's
/// stores visible to the read-modify-write of the boundary words; readers are
/// ordered by the fence in `begin_write` and the Release in `end_write`.
#[inline]
fn store_bytes(words: &[AtomicU64], offset: usize, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let mut w = offset / WORD_BYTES;
    let skip = offset % WORD_BYTES;
    let mut bytes = bytes;
    if skip != 0 {
        let n = (WORD_BYTES - skip).min(bytes.len());
        let mut word = words[w].load(Ordering::Relaxed).to_ne_bytes();
        word[skip..skip + n].copy_from_slice(&bytes[..n]);
        words[w].store(u64::from_ne_bytes(word), Ordering::Relaxed);
        bytes = &bytes[n..];
        w += 1;
    }
    let chunks = bytes.chunks_exact(WORD_BYTES);
    let tail = chunks.remainder();
    for (chunk, word) in chunks.zip(&words[w..]) {
        let value = u64::from_ne_bytes(chunk.try_into().expect("chunks of 8 bytes"));
        word.store(value, Ordering::Relaxed);
    }
    if !tail.is_empty() {
        let last = w + (bytes.len() / WORD_BYTES);
        let mut word = words[last].load(Ordering::Relaxed).to_ne_bytes();
        word[..tail.len()].copy_from_slice(tail);
        words[last].store(u64::from_ne_bytes(word), Ordering::Relaxed);
    }
}

/// A seqlock that owns its words (in process memory): the same operations as
/// [`SeqlockView`], which [`view`](Self::view) lends.
pub struct Seqlock {
    words: Box<[AtomicU64]>,
    len: usize,
}

impl Seqlock {
    /// A seqlock of `len` zero bytes, never written (sequence 0). Allocates
    /// here only.
    pub fn new(len: usize) -> Self {
        Seqlock {
            words: (0..region_words(len)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }

    /// The view that all the operations go through.
    #[inline]
    pub fn view(&self) -> SeqlockView<'_> {
        SeqlockView::new(&self.words, self.len)
    }

    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// See [`SeqlockView::sequence`].
    pub fn sequence(&self) -> u64 {
        self.view().sequence()
    }

    /// See [`SeqlockView::write`].
    #[inline]
    pub fn write(&self, bytes: &[u8]) {
        self.view().write(bytes);
    }

    /// See [`SeqlockView::write_at`].
    #[inline]
    pub fn write_at(&self, offset: usize, bytes: &[u8]) {
        self.view().write_at(offset, bytes);
    }

    /// See [`SeqlockView::read`].
    #[inline]
    pub fn read(&self, out: &mut [u8]) -> u64 {
        self.view().read(out)
    }

    /// See [`SeqlockView::read_at`].
    #[inline]
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> u64 {
        self.view().read_at(offset, out)
    }

    /// See [`SeqlockView::try_read`].
    #[inline]
    pub fn try_read(&self, out: &mut [u8]) -> Option<u64> {
        self.view().try_read(out)
    }
}

impl fmt::Debug for Seqlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.view().fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    #[test]
    fn try_write_refuses_while_a_write_is_abandoned_and_goes_on_after_recover() {
        let sut = Seqlock::new(8);
        assert!(sut.view().try_write_at(0, &[1; 8]));
        assert_eq!(sut.sequence(), 2);
        assert!(sut.view().abandon_write());
        assert!(sut.view().is_writing());
        assert!(
            !sut.view().try_write_at(0, &[2; 8]),
            "a held region is refused"
        );
        let mut out = [0u8; 8];
        assert_eq!(sut.try_read(&mut out), None);
        assert!(sut.view().recover());
        assert!(sut.view().try_write_at(4, &[3; 4]));
        assert_eq!(sut.read(&mut out), 6);
        assert_eq!(out, [1, 1, 1, 1, 3, 3, 3, 3]);
    }

    #[test]
    fn a_region_holds_the_sequence_and_whole_payload_words() {
        assert_eq!(region_words(0), 1);
        assert_eq!(region_words(1), 2);
        assert_eq!(region_words(8), 2);
        assert_eq!(region_words(9), 3);
        assert_eq!(region_words(4872), 1 + 609);
    }

    #[test]
    fn read_returns_what_was_written_and_the_sequence_counts_writes() {
        let sut = Seqlock::new(13);
        let mut out = [0xffu8; 13];
        assert_eq!(sut.read(&mut out), 0);
        assert_eq!(out, [0; 13]);
        let data: Vec<u8> = (1..=13).collect();
        sut.write(&data);
        assert_eq!(sut.read(&mut out), 2);
        assert_eq!(&out[..], &data[..]);
        sut.write(&[9; 13]);
        assert_eq!(sut.read(&mut out), 4);
        assert_eq!(out, [9; 13]);
        assert_eq!(sut.sequence(), 4);
    }

    #[test]
    fn a_partial_write_keeps_the_other_bytes() {
        let sut = Seqlock::new(20);
        sut.write(&[1; 20]);
        sut.write_at(5, &[2; 9]);
        let mut out = [0; 20];
        sut.read(&mut out);
        let mut expected = [1u8; 20];
        expected[5..14].fill(2);
        assert_eq!(out, expected);
        let mut part = [0; 3];
        assert_eq!(sut.read_at(12, &mut part), 4);
        assert_eq!(part, [2, 2, 1]);
    }

    #[test]
    fn the_payload_bytes_are_the_bytes_of_the_words_in_memory() {
        let words: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        let sut = SeqlockView::new(&words, 16);
        sut.write(b"0123456789abcdef");
        assert_eq!(words[1].load(Ordering::Relaxed).to_ne_bytes(), *b"01234567");
        assert_eq!(words[2].load(Ordering::Relaxed).to_ne_bytes(), *b"89abcdef");
    }

    #[test]
    fn two_views_of_the_same_words_see_each_others_writes() {
        let words: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        let writer = SeqlockView::new(&words, 24);
        let sut = SeqlockView::new(&words, 24);
        writer.write(&[7; 24]);
        let mut out = [0; 24];
        assert_eq!(sut.read(&mut out), 2);
        assert_eq!(out, [7; 24]);
        assert_eq!(sut.len(), 24);
        assert!(!sut.is_empty());
    }

    #[test]
    fn a_read_fails_while_a_write_is_under_way_until_recovered() {
        let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
        let sut = SeqlockView::new(&words, 8);
        sut.write(&[3; 8]);
        // A writer that died after claiming the region.
        words[0].store(3, Ordering::Relaxed);
        let mut out = [0; 8];
        assert!(sut.is_writing());
        assert_eq!(sut.try_read(&mut out), None);
        assert!(sut.recover());
        assert!(!sut.recover(), "already even");
        assert_eq!(sut.try_read(&mut out), Some(4));
        assert_eq!(out, [3; 8]);
        sut.write(&[4; 8]);
        assert_eq!(sut.read(&mut out), 6);
    }

    #[test]
    #[should_panic(expected = "needs 3 words")]
    fn a_region_too_small_is_refused() {
        let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
        let _ = SeqlockView::new(&words, 9);
    }

    #[test]
    #[should_panic(expected = "pass the end")]
    fn a_write_past_the_end_panics_before_claiming() {
        let sut = Seqlock::new(8);
        sut.write_at(4, &[0; 5]);
    }

    #[test]
    fn an_empty_payload_still_counts_writes() {
        let sut = Seqlock::new(0);
        assert!(sut.is_empty());
        sut.write(&[]);
        assert_eq!(sut.read(&mut []), 2);
    }

    #[test]
    fn reader_never_sees_a_torn_write() {
        const WRITES: u64 = if cfg!(miri) { 50 } else { 20_000 };
        const LEN: usize = 61;
        let sut = Arc::new(Seqlock::new(LEN));
        let writer = {
            let sut = Arc::clone(&sut);
            std::thread::spawn(move || {
                for i in 1..=WRITES {
                    sut.write(&[i as u8; LEN]);
                }
            })
        };
        let mut out = [0u8; LEN];
        let mut last = 0;
        loop {
            let seq = sut.read(&mut out);
            assert!(seq >= last, "sequence went back from {last} to {seq}");
            assert_eq!(seq % 2, 0);
            last = seq;
            let expected = (seq / 2) as u8;
            assert!(
                out.iter().all(|&b| b == expected),
                "torn snapshot at sequence {seq}: {out:?}"
            );
            if seq == 2 * WRITES {
                break;
            }
        }
        writer.join().unwrap();
    }

    #[test]
    fn two_writers_of_different_bytes_never_lose_each_others_updates() {
        const WRITES: u8 = if cfg!(miri) { 20 } else { 200 };
        let sut = Arc::new(Seqlock::new(12));
        let spawn = |offset: usize| {
            let sut = Arc::clone(&sut);
            std::thread::spawn(move || {
                for i in 1..=WRITES {
                    sut.write_at(offset, &[i; 5]);
                }
            })
        };
        let (a, b) = (spawn(0), spawn(7));
        a.join().unwrap();
        b.join().unwrap();
        let mut out = [0; 12];
        assert_eq!(sut.read(&mut out), 4 * u64::from(WRITES));
        assert_eq!(&out[..5], &[WRITES; 5]);
        assert_eq!(&out[5..7], &[0, 0]);
        assert_eq!(&out[7..], &[WRITES; 5]);
    }

    proptest! {
        #![proptest_config(crate::sync::test_support::proptest_config())]

        #[test]
        fn behaves_like_a_byte_vector(
            len in 0usize..40,
            writes in proptest::collection::vec((0usize..40, proptest::collection::vec(any::<u8>(), 0..40)), 0..20),
            reads in proptest::collection::vec((0usize..40, 0usize..40), 0..10),
        ) {
            let sut = Seqlock::new(len);
            let mut model = vec![0u8; len];
            let mut count = 0;
            for (offset, bytes) in writes {
                let offset = offset.min(len);
                let n = bytes.len().min(len - offset);
                sut.write_at(offset, &bytes[..n]);
                model[offset..offset + n].copy_from_slice(&bytes[..n]);
                count += 1;
            }
            let mut all = vec![0; len];
            prop_assert_eq!(sut.read(&mut all), 2 * count);
            prop_assert_eq!(&all, &model);
            for (offset, n) in reads {
                let offset = offset.min(len);
                let n = n.min(len - offset);
                let mut out = vec![0; n];
                sut.read_at(offset, &mut out);
                prop_assert_eq!(&out[..], &model[offset..offset + n]);
            }
        }
    }
}
