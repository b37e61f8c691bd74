//! A single-producer single-consumer ring of byte messages of any length up
//! to a fixed slot size, written and read in place (no copy through a `Vec`,
//! no allocation after construction).
//!
//! Each slot is a run of 64-byte lines. Its first line starts with a 16-byte
//! header, the slot's sequence word and the message length, followed by the
//! first [`FIRST_LINE_PAYLOAD`] payload bytes; the payload goes on in the
//! slot's further lines. The sequence word is both the signal and the
//! ownership of the slot (the scheme of Dmitry Vyukov's bounded queue and of
//! FastForward):
//!
//! - the producer writes the length and the payload, then publishes the slot
//!   by storing "holds the message at position `p`" (Release);
//! - the consumer polls the sequence word of the slot it expects next
//!   (Acquire), reads the message in place, then hands the slot back by
//!   storing "free for position `p + slots`", the message a lap later
//!   (Release);
//! - the producer finds out that a slot is free from that same word
//!   (Acquire), just before it writes the slot anyway.
//!
//! There is no shared head or tail index: each side keeps its position in a
//! private field, and every access the steady state makes to shared memory is
//! to the slot it is about to read or write. A message of up to
//! [`FIRST_LINE_PAYLOAD`] bytes therefore crosses from one core to the other
//! in a single cache-line transfer, signal and data together, instead of one
//! transfer for the index and a second, dependent one for the slot. (A shared
//! index, even one reloaded only when the ring looks full or empty, costs a
//! second line transfer per message whenever the consumer keeps up with the
//! producer, which is always the case in a latency-bound exchange.)
//!
//! The sequence word of the slot for position `p` (positions count messages
//! from 0, wrapping) holds `2p` while the slot is free for that message and
//! `2p + 1` once the message is in it. The parity tells the two states apart
//! even when a ring of one slot reuses the slot for the very next position,
//! and each side looks for one exact value, so the wraparound of the
//! positions is harmless. Everything shared is bytes and offsets, no
//! pointers, ready for a later home in shared memory.
//!
//! ```
//! use ictus_core::sync::spsc::bytes;
//!
//! let (mut tx, mut rx) = bytes::channel(16, 2);
//! assert!(tx.try_write(|buf| {
//!     buf[..5].copy_from_slice(b"hello");
//!     5
//! }));
//! assert!(tx.try_write(|_| 0)); // empty messages are fine
//! assert!(!tx.try_write(|_| unreachable!("not called when full")));
//! assert_eq!(rx.try_read(|msg| msg.to_vec()), Some(b"hello".to_vec()));
//! assert_eq!(rx.try_read(|msg| msg.len()), Some(0));
//! assert_eq!(rx.try_read(|msg| msg.len()), None);
//! ```

use std::fmt;

use super::super::atomic::{Arc, AtomicUsize, Ordering, UnsafeCell};

/// Bytes in a cache line, and the alignment of every slot.
const LINE_BYTES: usize = 64;

/// Where the sequence word sits in a slot (an `AtomicUsize`).
const SEQ_OFFSET: usize = 0;

/// Where the message length sits in a slot (a `u64`).
const LEN_OFFSET: usize = 8;

/// Where the payload starts in a slot, in bytes from the slot's start (which
/// is on a 64-byte line): after the sequence word and the length.
///
/// The payload is therefore 16-byte aligned. A writer that copies from its
/// own buffer into the slot copies fastest when its source sits at the same
/// offset from a line (on some cores, a copy whose destination lies a few
/// bytes past its source modulo 4 KiB runs many times slower).
pub const PAYLOAD_OFFSET: usize = 16;

/// Payload bytes that share the slot's first line with its header: a message
/// this long or shorter moves between cores as one cache line.
pub const FIRST_LINE_PAYLOAD: usize = LINE_BYTES - PAYLOAD_OFFSET;

/// One cache line of slot storage; its alignment makes every slot start on a line.
#[repr(C, align(64))]
struct Line([u8; LINE_BYTES]);

/// The sequence word of a slot that is free for the message at `pos`.
#[inline(always)]
fn free_for(pos: usize) -> usize {
    pos.wrapping_mul(2)
}

/// The sequence word of a slot that holds the message at `pos`.
#[inline(always)]
fn holding(pos: usize) -> usize {
    pos.wrapping_mul(2) | 1
}

/// The shared block of a byte ring: the slots, each a header and a payload.
#[repr(C)]
struct ByteRing {
    /// Largest payload of one message.
    slot_bytes: usize,
    /// Lines from the start of one slot to the start of the next.
    lines_per_slot: usize,
    /// Number of slots.
    slots: usize,
    /// Under loom the sequence words live here, as loom atomics (which cannot
    /// be placed in raw memory); the header's first word is then unused.
    #[cfg(loom)]
    seqs: Box<[AtomicUsize]>,
    /// One guard per slot. Every access to a slot's length and payload happens
    /// inside a `with` (read) or `with_mut` (write) of its guard, so under loom
    /// the guard stands for those bytes and a race on them is reported as a race
    /// on it. In normal builds the guards are zero-sized and cost nothing.
    guards: Box<[UnsafeCell<()>]>,
    /// All slots, back to back: plain bytes, no pointers.
    lines: Box<[std::cell::UnsafeCell<Line>]>,
}

impl ByteRing {
    /// Pointer to the first byte (the sequence word) of `slot`.
    ///
    /// The pointer may be used for `lines_per_slot * 64` bytes.
    #[inline(always)]
    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        let first = slot * self.lines_per_slot;
        let lines = &self.lines[first..first + self.lines_per_slot];
        std::cell::UnsafeCell::raw_get(lines.as_ptr()).cast::<u8>()
    }

    /// The sequence word of `slot`.
    #[cfg(not(loom))]
    #[inline(always)]
    fn seq(&self, slot: usize) -> &AtomicUsize {
        let word = self.slot_ptr(slot).wrapping_add(SEQ_OFFSET).cast::<usize>();
        // SAFETY: `word` points into `self.lines`, which lives as long as `&self`,
        // is writable (it comes from an `UnsafeCell`), and is aligned for `usize`
        // (a slot starts on a 64-byte line and SEQ_OFFSET is 0). These bytes were
        // written non-atomically only in `channel`, before the ring was shared;
        // from then on every access to them goes through this atomic, always
        // `usize`-sized. Nothing else overlaps them: the length and the payload
        // start at LEN_OFFSET and PAYLOAD_OFFSET, past the word.
        unsafe { AtomicUsize::from_ptr(word) }
    }

    /// The sequence word of `slot`.
    #[cfg(loom)]
    #[inline(always)]
    fn seq(&self, slot: usize) -> &AtomicUsize {
        &self.seqs[slot]
    }

    /// The slot after `slot`.
    #[inline(always)]
    fn next_slot(&self, slot: usize) -> usize {
        let next = slot + 1;
        if next == self.slots { 0 } else { next }
    }
}

/// One side's private place in the ring: the position of its next message and
/// that position's slot.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    /// Messages this side has written (or read) so far, wrapping.
    pos: usize,
    /// `pos % slots`, kept alongside so that wrapping `pos` does not skip slots.
    slot: usize,
}

impl Cursor {
    /// Moves to the next message.
    #[inline(always)]
    fn advance(&mut self, ring: &ByteRing) {
        self.pos = self.pos.wrapping_add(1);
        self.slot = ring.next_slot(self.slot);
    }

    /// The position and slot `k` messages after this one (`k < slots`).
    fn ahead(self, k: usize, ring: &ByteRing) -> (usize, usize) {
        (self.pos.wrapping_add(k), (self.slot + k) % ring.slots)
    }
}

/// Creates a ring of `slots` messages of at most `slot_bytes` bytes each,
/// returning its two ends.
///
/// All memory is allocated and written here (so its pages are already
/// faulted in); [`ByteProducer::try_write`] and [`ByteConsumer::try_read`]
/// never allocate.
///
/// # Panics
///
/// If `slots` is zero, or the ring would not fit in memory.
pub fn channel(slot_bytes: usize, slots: usize) -> (ByteProducer, ByteConsumer) {
    assert!(slots > 0, "a ring needs at least one slot");
    let lines_per_slot = slot_bytes
        .checked_add(PAYLOAD_OFFSET + LINE_BYTES - 1)
        .expect("slot_bytes is too large")
        / LINE_BYTES;
    let total_lines = lines_per_slot
        .checked_mul(slots)
        .expect("byte ring is too large");
    let lines = (0..total_lines)
        .map(|i| {
            let mut line = Line([0; LINE_BYTES]);
            if i % lines_per_slot == 0 {
                // Slot `s` starts free for the message at position `s`.
                let seq = free_for(i / lines_per_slot).to_ne_bytes();
                line.0[SEQ_OFFSET..SEQ_OFFSET + seq.len()].copy_from_slice(&seq);
            }
            std::cell::UnsafeCell::new(line)
        })
        .collect();
    #[allow(
        clippy::arc_with_non_send_sync,
        reason = "the ring is shared only through the two handles, which are Send by their own ownership argument"
    )]
    let ring = Arc::new(ByteRing {
        slot_bytes,
        lines_per_slot,
        slots,
        #[cfg(loom)]
        seqs: (0..slots).map(|s| AtomicUsize::new(free_for(s))).collect(),
        guards: (0..slots).map(|_| UnsafeCell::new(())).collect(),
        lines,
    });
    let start = Cursor { pos: 0, slot: 0 };
    (
        ByteProducer {
            ring: Arc::clone(&ring),
            cursor: start,
        },
        ByteConsumer {
            ring,
            cursor: start,
        },
    )
}

/// The writing end of a ring made by [`channel`].
pub struct ByteProducer {
    ring: Arc<ByteRing>,
    /// The next message to write.
    cursor: Cursor,
}

// SAFETY: a `ByteProducer` is the only handle that writes a slot's length and
// payload or stores a "holding" sequence word, and it is not `Clone`; moving it to
// another thread moves that exclusive role with it. The payload is plain bytes, so
// nothing thread-bound crosses over. Slot accesses on the two threads are ordered
// by the Release/Acquire pairs on each slot's sequence word.
unsafe impl Send for ByteProducer {}

impl ByteProducer {
    /// Writes one message: `f` gets the whole free slot (`slot_bytes` long,
    /// holding stale bytes), fills a prefix of it and returns that prefix's
    /// length. Returns `false`, without calling `f`, when the ring is full.
    ///
    /// Never blocks and never allocates. If `f` panics nothing is sent.
    ///
    /// # Panics
    ///
    /// If `f` returns a length greater than `slot_bytes`.
    #[inline]
    pub fn try_write(&mut self, f: impl FnOnce(&mut [u8]) -> usize) -> bool {
        let ring = &*self.ring;
        let Cursor { pos, slot } = self.cursor;
        let seq = ring.seq(slot);
        // Acquire: pairs with the Release store of `free_for` in
        // ByteConsumer::try_read, so the consumer's reads of the message a lap
        // ago happen before we overwrite the slot.
        if seq.load(Ordering::Acquire) != free_for(pos) {
            return false;
        }
        ring.guards[slot].with_mut(|_| {
            let start = ring.slot_ptr(slot);
            // SAFETY: the slot's sequence word says it is free for our position,
            // so the consumer has finished with it (our Acquire load saw its
            // Release store) and will not read it before we publish: no other
            // reference to these bytes exists. The payload starts PAYLOAD_OFFSET
            // into the slot and `slot_bytes` more bytes fit in its
            // `lines_per_slot` lines (see `channel`); the sequence word lies
            // before it, outside the slice.
            let payload = unsafe {
                std::slice::from_raw_parts_mut(start.add(PAYLOAD_OFFSET), ring.slot_bytes)
            };
            let used = f(payload);
            assert!(
                used <= ring.slot_bytes,
                "message of {used} bytes does not fit a {}-byte slot",
                ring.slot_bytes
            );
            // SAFETY: the length is the 8 bytes at LEN_OFFSET of the same
            // exclusively held slot, aligned for u64 (the slot starts on a line),
            // apart from the sequence word; the `payload` borrow ended with `f`.
            unsafe { start.add(LEN_OFFSET).cast::<u64>().write(used as u64) };
        });
        // Release: pairs with the Acquire load in ByteConsumer::try_read, so our
        // writes of the length and the payload happen before the consumer reads
        // them.
        seq.store(holding(pos), Ordering::Release);
        self.cursor.advance(ring);
        true
    }

    /// Messages in the ring (an upper bound: the consumer may be taking some).
    ///
    /// Looks at the sequence words of up to `log2(slots) + 1` slots, which
    /// may pull their lines from the consumer's core: not for a hot path.
    pub fn len(&self) -> usize {
        let ring = &*self.ring;
        // The messages of the last `slots` positions that the consumer has
        // taken form a prefix of them: find its end.
        let oldest = Cursor {
            pos: self.cursor.pos.wrapping_sub(ring.slots),
            slot: self.cursor.slot,
        };
        let (mut lo, mut hi) = (0, ring.slots);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (pos, slot) = oldest.ahead(mid, ring);
            // Relaxed: a snapshot for counting only; no slot is touched on its
            // strength, so it pairs with nothing.
            let taken = ring.seq(slot).load(Ordering::Relaxed) != holding(pos);
            if taken {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        ring.slots - lo
    }

    /// Whether the ring is empty (may turn false only through this producer):
    /// whether the consumer has taken the last message written.
    ///
    /// Looks at one sequence word, that of the last message's slot, so a
    /// producer that waits for its message to be taken spins on the very line
    /// the consumer hands back.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let ring = &*self.ring;
        let last = self.cursor.pos.wrapping_sub(1);
        let slot = if self.cursor.slot == 0 {
            ring.slots - 1
        } else {
            self.cursor.slot - 1
        };
        // Acquire: pairs with the Release store of `free_for` in
        // ByteConsumer::try_read, so that a caller who waits for this to turn true
        // sees everything the consumer did before taking the message. Messages
        // are taken in order, so when the last is taken all are.
        ring.seq(slot).load(Ordering::Acquire) != holding(last)
    }

    /// The number of messages the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.ring.slots
    }

    /// The largest message, in bytes.
    pub fn slot_bytes(&self) -> usize {
        self.ring.slot_bytes
    }
}

impl fmt::Debug for ByteProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByteProducer")
            .field("capacity", &self.capacity())
            .field("slot_bytes", &self.slot_bytes())
            .field("len", &self.len())
            .finish()
    }
}

/// The reading end of a ring made by [`channel`].
pub struct ByteConsumer {
    ring: Arc<ByteRing>,
    /// The next message to read.
    cursor: Cursor,
}

// SAFETY: a `ByteConsumer` is the only handle that reads a slot's length and
// payload or stores a "free" sequence word, and it is not `Clone`; moving it to
// another thread moves that exclusive role with it. The payload is plain bytes.
// Slot accesses are ordered by the Release/Acquire pairs on each slot's sequence
// word.
unsafe impl Send for ByteConsumer {}

impl ByteConsumer {
    /// Reads the oldest message: `f` sees exactly the bytes that were written,
    /// and its result is returned. Returns `None`, without calling `f`, when the
    /// ring is empty.
    ///
    /// Never blocks and never allocates. If `f` panics the message stays in
    /// the ring.
    #[inline]
    pub fn try_read<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let ring = &*self.ring;
        let Cursor { pos, slot } = self.cursor;
        let seq = ring.seq(slot);
        // Acquire: pairs with the Release store of `holding` in
        // ByteProducer::try_write, so the producer's writes of the length and the
        // payload happen before we read them.
        if seq.load(Ordering::Acquire) != holding(pos) {
            return None;
        }
        let result = ring.guards[slot].with(|_| {
            let start = ring.slot_ptr(slot);
            // SAFETY: the slot's sequence word says it holds our position's
            // message (our Acquire load saw the producer's Release store), and the
            // producer will not write the slot again before we hand it back. The
            // length is the 8 bytes at LEN_OFFSET, aligned for u64 (slots start on
            // a 64-byte line) and initialised (all lines are zeroed in `channel`).
            let written = unsafe { start.add(LEN_OFFSET).cast::<u64>().read() };
            // Clamp: the length is never trusted to stay inside the slot, even if
            // another process wrote it.
            let len = usize::try_from(written).map_or(ring.slot_bytes, |n| n.min(ring.slot_bytes));
            // SAFETY: same slot, held by us alone until we hand it back; `len`
            // bytes from PAYLOAD_OFFSET lie inside the slot (clamped above), past
            // the sequence word, and are initialised.
            let payload = unsafe { std::slice::from_raw_parts(start.add(PAYLOAD_OFFSET), len) };
            f(payload)
        });
        // Release: pairs with the Acquire load in ByteProducer::try_write, so our
        // reads of the slot happen before the producer writes the message a lap
        // later into it.
        seq.store(free_for(pos.wrapping_add(ring.slots)), Ordering::Release);
        self.cursor.advance(ring);
        Some(result)
    }

    /// Messages in the ring (a lower bound: the producer may be adding some).
    ///
    /// Looks at the sequence words of up to `log2(slots) + 1` slots, which
    /// may pull their lines from the producer's core: not for a hot path.
    pub fn len(&self) -> usize {
        let ring = &*self.ring;
        // The positions from ours on that hold a message form a prefix of the
        // next `slots`: find its end.
        let (mut lo, mut hi) = (0, ring.slots);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (pos, slot) = self.cursor.ahead(mid, ring);
            // Relaxed: a snapshot for counting only; no slot is touched on its
            // strength, so it pairs with nothing.
            let written = ring.seq(slot).load(Ordering::Relaxed) == holding(pos);
            if written {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether the ring is empty (may turn true only through this consumer):
    /// whether the next message is not there yet.
    ///
    /// Looks at one sequence word, that of the next message's slot.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let Cursor { pos, slot } = self.cursor;
        // Relaxed: a snapshot only; reading the message goes through `try_read`,
        // whose own Acquire load pairs with the producer's Release store.
        self.ring.seq(slot).load(Ordering::Relaxed) != holding(pos)
    }

    /// The number of messages the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.ring.slots
    }

    /// The largest message, in bytes.
    pub fn slot_bytes(&self) -> usize {
        self.ring.slot_bytes
    }
}

impl fmt::Debug for ByteConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByteConsumer")
            .field("capacity", &self.capacity())
            .field("slot_bytes", &self.slot_bytes())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slots_start_on_a_line_and_leave_room_for_the_header() {
        for (slot_bytes, lines) in [(0, 1), (48, 1), (49, 2), (32_768, 513)] {
            let (sut, _rx) = channel(slot_bytes, 3);
            assert_eq!(sut.ring.lines_per_slot, lines, "slot_bytes {slot_bytes}");
            assert_eq!(sut.ring.slot_ptr(1) as usize % 64, 0);
        }
        assert_eq!(FIRST_LINE_PAYLOAD, 48);
        assert_eq!(PAYLOAD_OFFSET % 16, 0);
        assert!(LEN_OFFSET >= SEQ_OFFSET + size_of::<usize>());
        assert!(PAYLOAD_OFFSET >= LEN_OFFSET + size_of::<u64>());
    }

    #[test]
    fn a_small_message_and_its_signal_share_the_slots_first_line() {
        let (mut tx, sut) = channel(64, 2);
        assert!(tx.try_write(|buf| {
            buf[..FIRST_LINE_PAYLOAD].fill(1);
            FIRST_LINE_PAYLOAD
        }));
        let line = sut.ring.slot_ptr(0) as usize;
        assert_eq!(
            sut.ring.seq(0) as *const AtomicUsize as usize,
            line + SEQ_OFFSET
        );
        // The sequence word, the length and the payload's last byte: one line.
        let last = line + PAYLOAD_OFFSET + FIRST_LINE_PAYLOAD - 1;
        assert_eq!(last / 64, line / 64);
        assert_eq!(sut.ring.seq(0).load(Ordering::Relaxed), holding(0));
        assert_eq!(sut.ring.seq(1).load(Ordering::Relaxed), free_for(1));
    }

    #[test]
    fn a_ring_of_one_slot_reuses_it_for_every_message() {
        let (mut tx, mut sut) = channel(8, 1);
        for i in 0..5u8 {
            assert!(sut.is_empty());
            assert!(tx.try_write(|b| {
                b[0] = i;
                1
            }));
            assert!(!tx.try_write(|_| 0));
            assert_eq!((tx.len(), sut.len()), (1, 1));
            assert_eq!(sut.try_read(|m| m.to_vec()), Some(vec![i]));
            assert_eq!(sut.try_read(|m| m.to_vec()), None);
            assert!(tx.is_empty());
        }
    }

    #[test]
    #[should_panic(expected = "at least one slot")]
    fn a_ring_of_no_slots_is_refused() {
        let _ = channel(8, 0);
    }

    #[test]
    fn positions_that_wrap_around_keep_their_order() {
        let (mut tx, mut sut) = channel(8, 3);
        // As if 2^64 - 4 messages had gone through already.
        let pos = usize::MAX - 3;
        for slot in 0..3 {
            let p = pos.wrapping_add((slot + 3 - pos % 3) % 3);
            sut.ring.seq(slot).store(free_for(p), Ordering::Relaxed);
        }
        tx.cursor = Cursor { pos, slot: pos % 3 };
        sut.cursor = tx.cursor;
        for i in 0..10u8 {
            assert!(tx.try_write(|b| {
                b[0] = i;
                1
            }));
            assert!(tx.try_write(|b| {
                b[0] = i + 100;
                1
            }));
            assert_eq!((tx.len(), sut.len()), (2, 2));
            assert_eq!(sut.try_read(|m| m[0]), Some(i));
            assert_eq!(sut.try_read(|m| m[0]), Some(i + 100));
            assert!(sut.is_empty() && tx.is_empty());
        }
        assert!(sut.cursor.pos < 100);
    }

    #[test]
    fn a_full_slot_round_trips() {
        let (mut tx, mut sut) = channel(100, 1);
        assert!(tx.try_write(|buf| {
            assert_eq!(buf.len(), 100);
            buf.fill(0xAB);
            100
        }));
        assert!(!tx.try_write(|_| 0));
        assert_eq!(
            sut.try_read(|m| m.iter().all(|&b| b == 0xAB) && m.len() == 100),
            Some(true)
        );
        assert!(sut.is_empty());
        assert_eq!((tx.capacity(), tx.slot_bytes()), (1, 100));
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_message_longer_than_the_slot_is_refused() {
        let (mut sut, _rx) = channel(8, 1);
        sut.try_write(|_| 9);
    }

    #[test]
    fn a_panicking_reader_leaves_the_message_in_place() {
        let (mut tx, mut sut) = channel(4, 2);
        assert!(tx.try_write(|b| {
            b[0] = 7;
            1
        }));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sut.try_read(|_| panic!("reader failed"))
        }));
        assert!(caught.is_err());
        assert_eq!(sut.try_read(|m| m.to_vec()), Some(vec![7]));
    }

    #[test]
    fn two_threads_pass_numbered_messages_of_every_length_in_order() {
        const N: usize = if cfg!(miri) { 300 } else { 200_000 };
        const SLOT: usize = 96;
        let (mut tx, mut sut) = channel(SLOT, 8);
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let len = i % (SLOT + 1);
                while !tx.try_write(|buf| {
                    for (k, b) in buf[..len].iter_mut().enumerate() {
                        *b = (i + k) as u8;
                    }
                    len
                }) {
                    std::hint::spin_loop();
                }
            }
        });
        let mut i = 0;
        while i < N {
            let ok = sut.try_read(|m| {
                m.len() == i % (SLOT + 1) && m.iter().enumerate().all(|(k, &b)| b == (i + k) as u8)
            });
            match ok {
                Some(ok) => {
                    assert!(ok, "message {i} arrived damaged");
                    i += 1;
                }
                None => std::hint::spin_loop(),
            }
        }
        producer.join().unwrap();
    }
}
