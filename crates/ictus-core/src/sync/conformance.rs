//! One property, every ring (model: iceoryx2's conformance tests): each of the three
//! bounded FIFO rings of `sync` (the typed [`spsc`](super::spsc) ring, its
//! [`bytes`](super::spsc::bytes) twin of variable-length messages, and the hub's
//! [`Ring`](super::hub::Ring) on caller-owned words) behaves as a `VecDeque` bounded
//! at its capacity under any sequence of pushes and pops, and every view of its length
//! agrees with the model's.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::Arc;

use proptest::prelude::*;

use super::AtomicU32;
use super::hub::{Ring as HubRing, RingConsumer, RingProducer, SpinPark};
use super::spsc::{self, Full};

/// A bounded FIFO ring as the property drives it, one thread at both ends.
trait Ring {
    /// What one push carries.
    type Message: Clone + PartialEq + Debug;
    /// The message a push of `v` sends (rings of different shapes make different
    /// messages of it).
    fn message(&self, v: u8) -> Self::Message;
    /// The most messages it holds.
    fn capacity(&self) -> usize;
    /// Pushes `m`; false when the ring is full (and `m` is not in it).
    fn push(&mut self, m: &Self::Message) -> bool;
    /// Pops the oldest message.
    fn pop(&mut self) -> Option<Self::Message>;
    /// Every view of its length (each end's).
    fn lens(&self) -> Vec<usize>;
    /// Every view of its emptiness (each end's).
    fn empties(&self) -> Vec<bool>;
}

/// The property: `sut` behaves as a `VecDeque` bounded at its capacity under `ops`
/// (`Some(v)`: push the message made of `v`; `None`: pop).
fn behaves_like_a_bounded_vecdeque<R: Ring>(
    mut sut: R,
    ops: &[Option<u8>],
) -> Result<(), TestCaseError> {
    let mut model = VecDeque::new();
    for op in ops {
        match *op {
            Some(v) => {
                let m = sut.message(v);
                let pushed = sut.push(&m);
                prop_assert_eq!(pushed, model.len() < sut.capacity());
                if pushed {
                    model.push_back(m);
                }
            }
            None => prop_assert_eq!(sut.pop(), model.pop_front()),
        }
        for len in sut.lens() {
            prop_assert_eq!(len, model.len());
        }
        for empty in sut.empties() {
            prop_assert_eq!(empty, model.is_empty());
        }
    }
    Ok(())
}

fn ops() -> impl Strategy<Value = Vec<Option<u8>>> {
    proptest::collection::vec(proptest::option::of(any::<u8>()), 0..200)
}

/// The typed ring, carrying `u16`s.
struct Typed {
    capacity: usize,
    tx: spsc::Producer<u16>,
    rx: spsc::Consumer<u16>,
}

impl Ring for Typed {
    type Message = u16;
    fn message(&self, v: u8) -> u16 {
        u16::from(v) * 257
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn push(&mut self, m: &u16) -> bool {
        match self.tx.push(*m) {
            Ok(()) => true,
            // A full ring hands the value back.
            Err(Full(back)) => {
                assert_eq!(back, *m, "a full ring returns the value pushed");
                false
            }
        }
    }
    fn pop(&mut self) -> Option<u16> {
        self.rx.pop()
    }
    fn lens(&self) -> Vec<usize> {
        vec![self.tx.len(), self.rx.len()]
    }
    fn empties(&self) -> Vec<bool> {
        vec![self.tx.is_empty(), self.rx.is_empty()]
    }
}

/// The byte ring, carrying messages of 0 to `slot_bytes` bytes.
struct Bytes {
    slot_bytes: usize,
    slots: usize,
    tx: spsc::bytes::ByteProducer,
    rx: spsc::bytes::ByteConsumer,
}

impl Ring for Bytes {
    type Message = Vec<u8>;
    fn message(&self, v: u8) -> Vec<u8> {
        vec![v; usize::from(v) % (self.slot_bytes + 1)]
    }
    fn capacity(&self) -> usize {
        self.slots
    }
    fn push(&mut self, m: &Vec<u8>) -> bool {
        self.tx.try_write(|buf| {
            buf[..m.len()].copy_from_slice(m);
            m.len()
        })
    }
    fn pop(&mut self) -> Option<Vec<u8>> {
        self.rx.try_read(|m| m.to_vec())
    }
    fn lens(&self) -> Vec<usize> {
        vec![self.tx.len(), self.rx.len()]
    }
    fn empties(&self) -> Vec<bool> {
        vec![self.tx.is_empty(), self.rx.is_empty()]
    }
}

/// The hub's ring on words of its own, carrying messages of `bytes` bytes.
struct Hub {
    words: Arc<[AtomicU32]>,
    capacity: u32,
    bytes: usize,
    p: RingProducer,
    c: RingConsumer,
}

impl Hub {
    fn new(capacity: u32, bytes: usize) -> Hub {
        let words: Arc<[AtomicU32]> = (0..HubRing::words_for(capacity, bytes))
            .map(|_| AtomicU32::new(0))
            .collect();
        let (p, c) = {
            let ring = HubRing::new(&words, capacity, bytes);
            (ring.producer(), ring.consumer())
        };
        Hub {
            words,
            capacity,
            bytes,
            p,
            c,
        }
    }

    fn ring(&self) -> HubRing<'_> {
        HubRing::new(&self.words, self.capacity, self.bytes)
    }
}

impl Ring for Hub {
    type Message = Vec<u8>;
    fn message(&self, v: u8) -> Vec<u8> {
        vec![v; self.bytes]
    }
    fn capacity(&self) -> usize {
        self.capacity as usize
    }
    fn push(&mut self, m: &Vec<u8>) -> bool {
        let ring = HubRing::new(&self.words, self.capacity, self.bytes);
        ring.try_push(&mut self.p, m, &SpinPark)
    }
    fn pop(&mut self) -> Option<Vec<u8>> {
        let ring = HubRing::new(&self.words, self.capacity, self.bytes);
        let mut out = vec![0; self.bytes];
        ring.try_pop(&mut self.c, &mut out, &SpinPark)
            .then_some(out)
    }
    fn lens(&self) -> Vec<usize> {
        vec![self.ring().len() as usize]
    }
    fn empties(&self) -> Vec<bool> {
        vec![self.ring().is_empty()]
    }
}

proptest! {
    #![proptest_config(crate::sync::test_support::proptest_config())]

    #[test]
    fn the_typed_ring_behaves_like_a_bounded_vecdeque(capacity in 1usize..9, ops in ops()) {
        let (tx, rx) = spsc::channel::<u16>(capacity);
        behaves_like_a_bounded_vecdeque(Typed { capacity, tx, rx }, &ops)?;
    }

    #[test]
    fn the_byte_ring_behaves_like_a_bounded_vecdeque(
        slot_bytes in 0usize..200,
        slots in 1usize..6,
        ops in ops(),
    ) {
        let (tx, rx) = spsc::bytes::channel(slot_bytes, slots);
        behaves_like_a_bounded_vecdeque(Bytes { slot_bytes, slots, tx, rx }, &ops)?;
    }

    #[test]
    fn the_hub_ring_behaves_like_a_bounded_vecdeque(
        capacity in 1u32..6,
        bytes in 0usize..10,
        ops in ops(),
    ) {
        behaves_like_a_bounded_vecdeque(Hub::new(capacity, bytes), &ops)?;
    }
}
