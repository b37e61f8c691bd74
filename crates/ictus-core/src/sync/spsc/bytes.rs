//! A single-producer single-consumer ring of byte messages of any length up
//! to a fixed slot size, written and read in place (no copy through a `Vec`,
//! no allocation after construction).
//!
//! Each slot is a run of 64-byte lines: an 8-byte length, then up to
//! `slot_bytes` bytes of payload (which therefore starts 8-byte aligned). The
//! producer fills a slot through [`ByteProducer::try_write`]; the consumer
//! looks at it through [`ByteConsumer::try_read`]; the indices work exactly as
//! in [`super::channel`].
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

use super::super::atomic::{Arc, UnsafeCell};
use super::{ConsumerCursor, Indices, ProducerCursor};

/// Bytes of the length header at the start of each slot.
const HEADER_BYTES: usize = size_of::<u64>();

/// One cache line of slot storage; its alignment makes every slot start on a line.
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The shared block of a byte ring: indices first, then the slots.
#[repr(C)]
struct ByteRing {
    indices: Indices,
    /// Largest payload of one message.
    slot_bytes: usize,
    /// Lines from the start of one slot to the start of the next.
    lines_per_slot: usize,
    /// One guard per slot. Every access to a slot's bytes happens inside a
    /// `with` (read) or `with_mut` (write) of its guard, so under loom the
    /// guard stands for the bytes and a race on them is reported as a race on
    /// it. In normal builds the guards are zero-sized and cost nothing.
    guards: Box<[UnsafeCell<()>]>,
    /// All slots, back to back: plain bytes, no pointers.
    lines: Box<[std::cell::UnsafeCell<Line>]>,
}

impl ByteRing {
    /// Pointer to the first byte (the length header) of `slot`.
    ///
    /// The pointer may be used for `lines_per_slot * 64` bytes.
    #[inline(always)]
    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        let first = slot * self.lines_per_slot;
        let lines = &self.lines[first..first + self.lines_per_slot];
        std::cell::UnsafeCell::raw_get(lines.as_ptr()).cast::<u8>()
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
    let indices = Indices::new(slots);
    let line_bytes = size_of::<Line>();
    let lines_per_slot = slot_bytes
        .checked_add(HEADER_BYTES + line_bytes - 1)
        .expect("slot_bytes is too large")
        / line_bytes;
    let total_lines = lines_per_slot
        .checked_mul(slots)
        .expect("byte ring is too large");
    #[allow(
        clippy::arc_with_non_send_sync,
        reason = "the ring is shared only through the two handles, which are Send by their own ownership argument"
    )]
    let ring = Arc::new(ByteRing {
        indices,
        slot_bytes,
        lines_per_slot,
        guards: (0..slots).map(|_| UnsafeCell::new(())).collect(),
        lines: (0..total_lines)
            .map(|_| std::cell::UnsafeCell::new(Line([0; 64])))
            .collect(),
    });
    (
        ByteProducer {
            ring: Arc::clone(&ring),
            cursor: ProducerCursor::new(slots),
        },
        ByteConsumer {
            ring,
            cursor: ConsumerCursor::new(slots),
        },
    )
}

/// The writing end of a ring made by [`channel`].
pub struct ByteProducer {
    ring: Arc<ByteRing>,
    cursor: ProducerCursor,
}

// SAFETY: a `ByteProducer` is the only handle that writes slots or stores `tail`,
// and it is not `Clone`; moving it to another thread moves that exclusive role with
// it. The payload is plain bytes, so nothing thread-bound crosses over. Slot accesses
// on the two threads are ordered by the head/tail Release/Acquire pairs in the
// cursors.
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
        let Some(slot) = self.cursor.reserve(&self.ring.indices) else {
            return false;
        };
        let ring = &*self.ring;
        ring.guards[slot].with_mut(|_| {
            let start = ring.slot_ptr(slot);
            // SAFETY: `reserve` gave us this slot: the consumer released it (our
            // Acquire load of head saw that) and will not read it before we
            // publish, so no other reference to these bytes exists. The payload
            // starts HEADER_BYTES into the slot and `slot_bytes` more bytes fit in
            // its `lines_per_slot` lines (see `channel`).
            let payload =
                unsafe { std::slice::from_raw_parts_mut(start.add(HEADER_BYTES), ring.slot_bytes) };
            let used = f(payload);
            assert!(
                used <= ring.slot_bytes,
                "message of {used} bytes does not fit a {}-byte slot",
                ring.slot_bytes
            );
            // SAFETY: the header is the first 8 bytes of the same exclusively held
            // slot; slots start on a 64-byte line, so it is aligned for u64. The
            // `payload` borrow ended with `f`.
            unsafe { start.cast::<u64>().write(used as u64) };
        });
        self.cursor.publish(&ring.indices);
        true
    }

    /// Messages in the ring (an upper bound: the consumer may be taking some).
    pub fn len(&self) -> usize {
        self.cursor.len(&self.ring.indices)
    }

    /// Whether the ring is empty (may turn false only through this producer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of messages the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.cursor.capacity
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
    cursor: ConsumerCursor,
}

// SAFETY: a `ByteConsumer` is the only handle that reads slots or stores `head`, and
// it is not `Clone`; moving it to another thread moves that exclusive role with it.
// The payload is plain bytes. Slot accesses are ordered by the head/tail
// Release/Acquire pairs in the cursors.
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
        let slot = self.cursor.peek(&self.ring.indices)?;
        let ring = &*self.ring;
        let result = ring.guards[slot].with(|_| {
            let start = ring.slot_ptr(slot);
            // SAFETY: `peek` gave us this slot: the producer published it (our
            // Acquire load of tail saw that) and will not write it before we
            // release it. The header is its first 8 bytes, aligned for u64 (slots
            // start on a 64-byte line) and initialised (all lines are zeroed in
            // `channel`).
            let written = unsafe { start.cast::<u64>().read() };
            // Clamp: the length is never trusted to stay inside the slot, even if
            // another process wrote it.
            let len = usize::try_from(written).map_or(ring.slot_bytes, |n| n.min(ring.slot_bytes));
            // SAFETY: same slot, held by us alone until release; `len` bytes after
            // the header lie inside the slot (clamped above) and are initialised.
            let payload = unsafe { std::slice::from_raw_parts(start.add(HEADER_BYTES), len) };
            f(payload)
        });
        self.cursor.release(&ring.indices);
        Some(result)
    }

    /// Messages in the ring (a lower bound: the producer may be adding some).
    pub fn len(&self) -> usize {
        self.cursor.len(&self.ring.indices)
    }

    /// Whether the ring is empty (may turn true only through this consumer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of messages the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.cursor.capacity
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
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn slots_start_on_a_line_and_leave_room_for_the_header() {
        for (slot_bytes, lines) in [(0, 1), (56, 1), (57, 2), (32_768, 513)] {
            let (sut, _rx) = channel(slot_bytes, 3);
            assert_eq!(sut.ring.lines_per_slot, lines, "slot_bytes {slot_bytes}");
            assert_eq!(sut.ring.slot_ptr(1) as usize % 64, 0);
        }
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

    /// proptest's defaults; under Miri only a few cases, and no failure file
    /// (Miri's isolation forbids the file system).
    fn config() -> ProptestConfig {
        if cfg!(miri) {
            ProptestConfig {
                cases: 4,
                failure_persistence: None,
                ..ProptestConfig::default()
            }
        } else {
            ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn messages_round_trip_like_a_bounded_vecdeque(
            slot_bytes in 0usize..200,
            slots in 1usize..6,
            ops in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
                0..100,
            ),
        ) {
            let (mut tx, mut sut) = channel(slot_bytes, slots);
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Some(mut msg) => {
                        msg.truncate(slot_bytes);
                        let wrote = tx.try_write(|buf| {
                            buf[..msg.len()].copy_from_slice(&msg);
                            msg.len()
                        });
                        prop_assert_eq!(wrote, model.len() < slots);
                        if wrote {
                            model.push_back(msg);
                        }
                    }
                    None => prop_assert_eq!(sut.try_read(|m| m.to_vec()), model.pop_front()),
                }
                prop_assert_eq!(sut.len(), model.len());
                prop_assert_eq!(tx.len(), model.len());
            }
        }
    }
}
