//! Bounded single-producer single-consumer rings: one thread writes, one reads,
//! neither ever blocks, waits for the other, or allocates after construction.
//!
//! - [`channel`] carries values of one type `T`.
//! - [`bytes::channel`] carries variable-length byte messages in fixed-size slots.
//!
//! The typed ring's shared part is a `#[repr(C)]` block that holds only two
//! indices, each in its own [`CachePadded`] pair of lines: `head`
//! (the next position to read, written only by the consumer) and `tail` (the
//! next position to write, written only by the producer). Each side keeps its
//! own index in a private field and a cached copy of the other side's index,
//! and reloads that copy only when the ring looks full (producer) or empty
//! (consumer). In steady state a push or a pop therefore touches one shared
//! line it owns and the slot, and nothing the other core is writing. (The
//! design follows Erik Rigtorp's `SPSCQueue` and iceoryx2's lock-free queue.)
//! The byte ring has no shared index at all: a sequence word in each slot's
//! first line carries the signal next to the data (see [`bytes`]).
//!
//! Positions run over `0..2 * capacity` and the slot of position `p` is
//! `p % capacity`, so full (`tail - head == capacity`) and empty
//! (`tail == head`) are told apart without a wasted slot, and every index is
//! an offset, never a pointer, ready for a later home in shared memory.
//!
//! ```
//! use ictus_core::sync::spsc;
//!
//! let (mut tx, mut rx) = spsc::channel::<u32>(2);
//! tx.push(1).unwrap();
//! tx.push(2).unwrap();
//! // Full: the value comes back to the caller.
//! assert_eq!(tx.push(3).unwrap_err().into_inner(), 3);
//! assert_eq!(rx.pop(), Some(1));
//! assert_eq!(rx.len(), 1);
//! tx.push(3).unwrap();
//! assert_eq!((rx.pop(), rx.pop(), rx.pop()), (Some(2), Some(3), None));
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::CachePadded;
use super::atomic::{Arc, AtomicUsize, Ordering, UnsafeCell};

pub mod bytes;

/// [`Producer::push`] found the ring full; the value is handed back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Full<T>(pub T);

impl<T> Full<T> {
    /// The value that was not pushed.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for Full<T> {
    /// Does not print the value, so that `T` need not be `Debug` for `unwrap`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Full(..)")
    }
}

impl<T> fmt::Display for Full<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the ring is full")
    }
}

impl<T> std::error::Error for Full<T> {}

/// The part of a ring that both sides write: the two positions, a cache-line
/// pair apart. Offsets only, no pointers.
#[repr(C)]
struct Indices {
    /// Next position to read. Stored only by the consumer.
    head: CachePadded<AtomicUsize>,
    /// Next position to write. Stored only by the producer.
    tail: CachePadded<AtomicUsize>,
    /// Number of slots; never changes.
    capacity: usize,
}

impl Indices {
    /// An empty ring of `capacity` slots.
    ///
    /// # Panics
    ///
    /// If `capacity` is zero or `2 * capacity` overflows.
    fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a ring needs at least one slot");
        assert!(
            capacity.checked_mul(2).is_some(),
            "ring capacity {capacity} is too large"
        );
        Indices {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            capacity,
        }
    }

    /// Both positions, for use when no other handle is alive (`Drop`).
    fn quiescent_positions(&self) -> (usize, usize) {
        // Relaxed (both): only called from `Drop` of the last owner; the `Arc`
        // release/acquire on the reference count already ordered the final stores
        // of head and tail (each end's Cursor::hand_over) before this point.
        (
            self.head.load(Ordering::Relaxed),
            self.tail.load(Ordering::Relaxed),
        )
    }
}

/// Number of items between positions `head` and `tail` (positions run over
/// `0..2 * capacity`).
#[inline(always)]
fn distance(head: usize, tail: usize, capacity: usize) -> usize {
    if tail >= head {
        tail - head
    } else {
        tail + 2 * capacity - head
    }
}

/// The position after `pos`.
#[inline(always)]
fn advance(pos: usize, capacity: usize) -> usize {
    let next = pos + 1;
    if next == 2 * capacity { 0 } else { next }
}

/// The slot that position `pos` names.
#[inline(always)]
fn slot_of(pos: usize, capacity: usize) -> usize {
    if pos >= capacity { pos - capacity } else { pos }
}

/// The slots of the positions from `head` up to, not including, `tail`.
fn occupied_slots(head: usize, tail: usize, capacity: usize) -> impl Iterator<Item = usize> {
    let mut pos = head;
    std::iter::from_fn(move || {
        if pos == tail {
            return None;
        }
        let slot = slot_of(pos, capacity);
        pos = advance(pos, capacity);
        Some(slot)
    })
}

/// Which end of the ring a [`Cursor`] is: the shared position it stores, the one it
/// watches, and when it has a slot to go to.
trait End {
    /// The shared position this end stores: the producer's `tail`, the consumer's
    /// `head`.
    fn own(shared: &Indices) -> &AtomicUsize;
    /// The shared position the other end stores.
    fn other(shared: &Indices) -> &AtomicUsize;
    /// Whether, with this end at `own` and the other at `other`, this end has a slot
    /// to go to: a free one for the producer (the ring is not full), a published one
    /// for the consumer (it is not empty).
    fn has_slot(own: usize, other: usize, capacity: usize) -> bool;
    /// Positions `head` and `tail`, from this end's `own` and the other's `other`.
    fn head_tail(own: usize, other: usize) -> (usize, usize);
}

/// The producer's end: stores `tail`, goes to free slots.
#[derive(Debug)]
enum Write {}

impl End for Write {
    #[inline(always)]
    fn own(shared: &Indices) -> &AtomicUsize {
        &shared.tail
    }
    #[inline(always)]
    fn other(shared: &Indices) -> &AtomicUsize {
        &shared.head
    }
    #[inline(always)]
    fn has_slot(tail: usize, head: usize, capacity: usize) -> bool {
        distance(head, tail, capacity) != capacity
    }
    #[inline(always)]
    fn head_tail(tail: usize, head: usize) -> (usize, usize) {
        (head, tail)
    }
}

/// The consumer's end: stores `head`, goes to published slots.
#[derive(Debug)]
enum Read {}

impl End for Read {
    #[inline(always)]
    fn own(shared: &Indices) -> &AtomicUsize {
        &shared.head
    }
    #[inline(always)]
    fn other(shared: &Indices) -> &AtomicUsize {
        &shared.tail
    }
    #[inline(always)]
    fn has_slot(head: usize, tail: usize, _capacity: usize) -> bool {
        tail != head
    }
    #[inline(always)]
    fn head_tail(head: usize, tail: usize) -> (usize, usize) {
        (head, tail)
    }
}

/// One end's private view of the indices (`E` says which end): its own position
/// and a cached copy of the other end's.
#[derive(Debug)]
struct Cursor<E> {
    /// Our own position; equal to the shared one we store after every hand-over.
    own: usize,
    /// Last value of the other end's position we loaded; the other end may be
    /// ahead of it.
    cached_other: usize,
    capacity: usize,
    end: PhantomData<E>,
}

impl<E: End> Cursor<E> {
    fn new(capacity: usize) -> Self {
        Cursor {
            own: 0,
            cached_other: 0,
            capacity,
            end: PhantomData,
        }
    }

    /// The slot this end goes to next: the free slot the next item goes to
    /// (producer) or the oldest published one (consumer); `None` when the ring is
    /// full (producer) or empty (consumer).
    ///
    /// A returned slot is this end's alone until [`Cursor::hand_over`]: the other
    /// end has handed it over (the consumer released it or never held it; the
    /// producer published it) and will not touch it before our position moves past
    /// it.
    #[inline]
    fn next_slot(&mut self, shared: &Indices) -> Option<usize> {
        if !E::has_slot(self.own, self.cached_other, self.capacity) {
            // Acquire: pairs with the Release store in the other end's `hand_over`,
            // so what it did to the slot (the producer's write, the consumer's last
            // read) happens before what we do to it.
            self.cached_other = E::other(shared).load(Ordering::Acquire);
            if !E::has_slot(self.own, self.cached_other, self.capacity) {
                return None;
            }
        }
        Some(slot_of(self.own, self.capacity))
    }

    /// Hands the slot returned by the last `next_slot` to the other end.
    #[inline]
    fn hand_over(&mut self, shared: &Indices) {
        self.own = advance(self.own, self.capacity);
        // Release: pairs with the Acquire load in the other end's `next_slot`, so
        // what we did to the slot happens before the other end touches it.
        E::own(shared).store(self.own, Ordering::Release);
    }

    /// Items in the ring; the other end may change them at any moment, so this is
    /// an upper bound (producer) or a lower bound (consumer) by the time the caller
    /// sees it.
    fn len(&self, shared: &Indices) -> usize {
        // Relaxed: a snapshot for counting only; no slot is touched on its
        // strength, so it pairs with nothing.
        let other = E::other(shared).load(Ordering::Relaxed);
        let (head, tail) = E::head_tail(self.own, other);
        distance(head, tail, self.capacity)
    }
}

/// The shared block of a typed ring: indices first, then the slots.
#[repr(C)]
struct Ring<T> {
    indices: Indices,
    /// Slot `i` holds an initialised `T` exactly when `i` is one of
    /// `occupied_slots(head, tail)`.
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<T>() {
            return;
        }
        let (head, tail) = self.indices.quiescent_positions();
        for slot in occupied_slots(head, tail, self.indices.capacity) {
            self.slots[slot].with_mut(|p| {
                // SAFETY: `slot` lies between head and tail, so it holds a value
                // that was written by a push and not moved out by a pop; both
                // handles are gone (this is the last owner), so nothing else can
                // reach it, and it is dropped exactly once.
                unsafe { (*p).assume_init_drop() }
            });
        }
    }
}

/// Creates a ring of `capacity` values of `T`, returning its two ends.
///
/// All memory is allocated here; [`Producer::push`] and [`Consumer::pop`] never
/// allocate. Build it in the prepare phase, before the real-time loop starts
/// (with `mlockall(MCL_FUTURE)` in force, its pages are resident at once).
///
/// # Panics
///
/// If `capacity` is zero or so large that `2 * capacity` overflows.
pub fn channel<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let ring = Arc::new(Ring {
        indices: Indices::new(capacity),
        slots: (0..capacity)
            .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
            .collect(),
    });
    (
        Producer {
            ring: Arc::clone(&ring),
            cursor: Cursor::new(capacity),
        },
        Consumer {
            ring,
            cursor: Cursor::new(capacity),
        },
    )
}

/// The writing end of a ring made by [`channel`].
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
    cursor: Cursor<Write>,
}

// SAFETY: a `Producer` is the only handle that writes slots or `tail`, and it is
// not `Clone`; moving it to another thread moves that exclusive role with it. The
// values it writes are dropped or read on whichever thread holds the `Consumer`
// (or drops the last handle), hence `T: Send`. No `&T` is ever shared between the
// ends, so `T: Sync` is not needed. Slot accesses on the two threads are ordered by
// the head/tail Release/Acquire pairs of the two ends' `Cursor`s.
unsafe impl<T: Send> Send for Producer<T> {}

impl<T> Producer<T> {
    /// Appends `value`, or hands it back in [`Full`] when the ring is full.
    ///
    /// Never blocks and never allocates.
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), Full<T>> {
        let Some(slot) = self.cursor.next_slot(&self.ring.indices) else {
            return Err(Full(value));
        };
        self.ring.slots[slot].with_mut(|p| {
            // SAFETY: `next_slot` gave us this slot: the consumer released it (our
            // Acquire load of head saw that) and will not read it before we publish,
            // so the write races with nothing. The slot holds no value (a pop moved
            // it out, or it was never written), so nothing is leaked.
            unsafe { p.write(MaybeUninit::new(value)) }
        });
        self.cursor.hand_over(&self.ring.indices);
        Ok(())
    }

    /// Items in the ring (an upper bound: the consumer may be taking some).
    pub fn len(&self) -> usize {
        self.cursor.len(&self.ring.indices)
    }

    /// Whether the ring is empty (may turn false only through this producer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of values the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.cursor.capacity
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

/// The reading end of a ring made by [`channel`].
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
    cursor: Cursor<Read>,
}

// SAFETY: a `Consumer` is the only handle that reads slots or stores `head`, and it
// is not `Clone`; moving it to another thread moves that exclusive role with it. It
// takes ownership of values written on the producer's thread, hence `T: Send`; no
// `&T` is shared between the ends, so `T: Sync` is not needed. Slot accesses are
// ordered by the head/tail Release/Acquire pairs in the two cursors.
unsafe impl<T: Send> Send for Consumer<T> {}

impl<T> Consumer<T> {
    /// Removes the oldest value, or returns `None` when the ring is empty.
    ///
    /// Never blocks and never allocates.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let slot = self.cursor.next_slot(&self.ring.indices)?;
        let value = self.ring.slots[slot].with(|p| {
            // SAFETY: `next_slot` gave us this slot: the producer published it (our
            // Acquire load of tail saw that), so it holds an initialised value that
            // the producer will not touch again before we release it. We move the
            // value out and release the slot at once, so it is never read twice.
            unsafe { p.read().assume_init() }
        });
        self.cursor.hand_over(&self.ring.indices);
        Some(value)
    }

    /// Items in the ring (a lower bound: the producer may be adding some).
    pub fn len(&self) -> usize {
        self.cursor.len(&self.ring.indices)
    }

    /// Whether the ring is empty (may turn true only through this consumer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of values the ring holds when full.
    pub fn capacity(&self) -> usize {
        self.cursor.capacity
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::offset_of;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;

    /// Counts its drops in a shared counter.
    struct DropCounter(std::sync::Arc<StdAtomicUsize>);

    impl Drop for DropCounter {
        fn drop(&mut self) {
            // Relaxed: a plain event counter, read after the drops.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn head_and_tail_sit_in_separate_line_pairs() {
        let head = offset_of!(Indices, head);
        let tail = offset_of!(Indices, tail);
        assert!(tail - head >= 128, "head at {head}, tail at {tail}");
        assert_eq!(head % 128, 0);
        assert_eq!(tail % 128, 0);
        assert!(offset_of!(Indices, capacity) - tail >= 128);
        assert_eq!(std::mem::align_of::<Indices>(), 128);
        assert_eq!(offset_of!(Ring<u64>, indices), 0);
    }

    #[test]
    fn push_fails_when_full_and_gives_the_value_back() {
        let (mut sut, _rx) = channel::<String>(1);
        sut.push("a".into()).unwrap();
        let err = sut.push("b".into()).unwrap_err();
        assert_eq!(err.into_inner(), "b");
        assert_eq!(Full(0).to_string(), "the ring is full");
    }

    #[test]
    fn pop_returns_none_when_empty() {
        let (_tx, mut sut) = channel::<u8>(4);
        assert_eq!(sut.pop(), None);
        assert!(sut.is_empty());
        assert_eq!(sut.capacity(), 4);
    }

    #[test]
    fn positions_wrap_many_times_without_losing_order() {
        let (mut tx, mut sut) = channel::<u32>(3);
        for i in 0..100 {
            tx.push(i).unwrap();
            tx.push(i + 1000).unwrap();
            assert_eq!(sut.len(), 2);
            assert_eq!(tx.len(), 2);
            assert_eq!(sut.pop(), Some(i));
            assert_eq!(sut.pop(), Some(i + 1000));
            assert!(tx.is_empty());
        }
    }

    #[test]
    fn dropping_both_ends_drops_the_remaining_items() {
        let drops = std::sync::Arc::new(StdAtomicUsize::new(0));
        let (mut tx, mut rx) = channel::<DropCounter>(4);
        for _ in 0..4 {
            assert!(tx.push(DropCounter(drops.clone())).is_ok());
        }
        drop(rx.pop());
        // Wrap the positions so the survivors straddle the end of the slots.
        assert!(tx.push(DropCounter(drops.clone())).is_ok());
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(tx);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        drop(rx);
        assert_eq!(drops.load(Ordering::Relaxed), 5);
    }

    #[test]
    #[should_panic(expected = "at least one slot")]
    fn a_ring_of_no_slots_is_refused() {
        let _ = channel::<u8>(0);
    }

    #[test]
    fn two_threads_pass_a_million_sequence_numbers_in_order() {
        const N: u64 = if cfg!(miri) { 2_000 } else { 1_000_000 };
        let (mut tx, mut sut) = channel::<u64>(1024);
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let mut v = i;
                while let Err(Full(back)) = tx.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        });
        let mut expected = 0;
        while expected < N {
            match sut.pop() {
                Some(v) => {
                    assert_eq!(v, expected);
                    expected += 1;
                }
                None => std::hint::spin_loop(),
            }
        }
        producer.join().unwrap();
        assert_eq!(sut.pop(), None);
    }
}
