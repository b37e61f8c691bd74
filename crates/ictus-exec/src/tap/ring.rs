//! The tap's rings: one bounded single-producer single-consumer ring per
//! subsystem slot, the FIFO hub's [`Ring`] protocol on 32-bit words, in the
//! coordinator's memory or in a shared-memory segment that programs open by
//! name. A subsystem's thread is the only producer of its ring ([`TapWriter`]),
//! the recorder thread the only consumer ([`TapReader`]).
//!
//! A message is an 80-byte head (what it is, the frame, the stamps, the
//! payload's length) and, for a cell, the cell's bytes. Only those bytes are
//! stored, so a frame's timing costs 80 bytes however large the cells. A full
//! ring refuses the message; the writer counts it in its slot's drop word and
//! goes on. Neither side ever waits for the other, sleeps, or makes a system
//! call (the reader polls; no one sleeps on the ring's words, so a push never
//! wakes anyone).

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the ring protocol on them is ictus_core::sync::hub's, model-checked there"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use ictus_core::Nanos;
use ictus_core::sync::hub::{Ring, RingConsumer, RingProducer, SpinPark, WORD_BYTES};
use ictus_os::shm::Segment;

/// Whether a cell record is what a subsystem read or what it published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// What the subsystem pulled at the start of its frame (recorded when it
    /// changed since its last frame: a new publication).
    Input,
    /// What it published at the end of its frame (or in an early flush).
    Output,
}

/// One frame of one subsystem, as its thread timed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRecord {
    /// The subsystem's slot (its index in the schedule).
    pub slot: usize,
    /// The frame number.
    pub frame: u64,
    /// The state it ran in.
    pub state: u8,
    /// Its release (monotonic clock).
    pub deadline: Nanos,
    /// When the thread woke for it.
    pub woke: Nanos,
    /// When its rendezvous with its synchronous group ended (`None`: no group).
    pub agreed: Option<Nanos>,
    /// When its outputs were published and the frame ended.
    pub end: Nanos,
    /// Its execution budget: its period.
    pub budget: Nanos,
    /// Releases skipped before it ran (following its group) and after it
    /// ended (an overrun or a late wake-up): the misses.
    pub skipped: u64,
    /// The CPU it ended on (`None`: unknown).
    pub cpu: Option<u32>,
    /// Whether its `run` returned an error.
    pub error: bool,
}

impl FrameRecord {
    /// Release lateness: wake-up minus deadline.
    pub fn lateness(&self) -> Nanos {
        self.woke.saturating_sub(self.deadline)
    }

    /// Execution time: wake-up to the end.
    pub fn exec(&self) -> Nanos {
        self.end.saturating_sub(self.woke)
    }

    /// Whether its execution ran past its budget.
    pub fn overrun(&self) -> bool {
        self.exec() > self.budget
    }
}

/// "TAP1": the first word of a tap's memory.
const MAGIC: u32 = u32::from_le_bytes(*b"TAP1");
/// Words of the header: magic, slots, capacity, message bytes, whether cells
/// are tapped.
const HEADER_WORDS: usize = 32;
/// Words before each slot's ring: its drop count, then padding to 128 bytes.
const SLOT_HEAD_WORDS: usize = 32;
/// Bytes of a message's head.
pub const HEAD_BYTES: usize = 80;
/// The most memory the rings of one run take, in all.
pub const MAX_BYTES: usize = 96 << 20;
/// The most memory one ring takes. Small, so that a push writes lines that
/// are still in the caches rather than memory's: with seed 003's 4,872-byte
/// cells (an input and an output a frame) 1 MiB holds 70 frames of a
/// subsystem, 53 ms at a 250 us tick with period 3, for the recorder (drained
/// every 2 ms) to fall behind by. On this project's VM, A/B at 1 ms: 4 MiB
/// rings cost 1.5 us of execution time a frame (p50), 1 MiB 1.1 to 1.2 us;
/// 2 x 30 s at 250 us dropped nothing.
pub const MAX_RING_BYTES: usize = 1 << 20;
/// The most messages one ring holds.
const MAX_CAPACITY: u32 = 8192;
/// The fewest.
const MIN_CAPACITY: u32 = 64;

const KIND_FRAME: u32 = 1;
const KIND_INPUT: u32 = 2;
const KIND_OUTPUT: u32 = 3;
const NONE64: u64 = u64::MAX;
const NONE32: u32 = u32::MAX;

/// Where the rings' words live.
enum Memory {
    Owned(Box<[AtomicU32]>),
    Shared(Segment),
}

impl Memory {
    fn words(&self) -> &[AtomicU32] {
        match self {
            Memory::Owned(w) => w,
            Memory::Shared(s) => s.words32(),
        }
    }
}

/// The rings of a run's subsystems (cloning shares them).
#[derive(Clone)]
pub struct TapRings {
    memory: Arc<Memory>,
    slots: usize,
    capacity: u32,
    bytes: usize,
}

impl std::fmt::Debug for TapRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapRings")
            .field("slots", &self.slots)
            .field("capacity", &self.capacity)
            .field("message_bytes", &self.bytes)
            .finish()
    }
}

/// The layout of rings for `slots` subsystems whose largest cell has
/// `max_cell` bytes: each ring holds as many messages as fit the memory
/// bounds ([`MAX_RING_BYTES`] each, [`MAX_BYTES`] over all), between 64 and
/// 8,192.
fn layout(slots: usize, max_cell: usize) -> (u32, usize, usize) {
    let bytes = (HEAD_BYTES + max_cell).next_multiple_of(WORD_BYTES);
    let per_slot = (MAX_BYTES / slots.max(1)).min(MAX_RING_BYTES);
    let fit = (per_slot / bytes) as u64;
    let capacity = fit.clamp(u64::from(MIN_CAPACITY), u64::from(MAX_CAPACITY)) as u32;
    let ring_words = SLOT_HEAD_WORDS + Ring::words_for(capacity, bytes);
    (capacity, bytes, HEADER_WORDS + slots * ring_words)
}

/// Writes a zero into every page of `words`, so that no push is the first
/// write to a page: a page fault (the kernel finding a zeroed page, a
/// microsecond or more) on a real-time thread, every 4 KiB for the first lap
/// of the ring otherwise. (Programs that lock their memory keep it so.)
fn prefault(words: &[AtomicU32]) {
    const WORDS_PER_PAGE: usize = 4096 / WORD_BYTES;
    for w in words.iter().step_by(WORDS_PER_PAGE) {
        // Relaxed: nobody else has the memory yet.
        w.store(0, Ordering::Relaxed);
    }
}

impl TapRings {
    /// Rings in this process's memory, for cells of up to `max_cell` bytes (0:
    /// no cell is tapped, only frames).
    pub fn in_process(slots: usize, max_cell: usize) -> TapRings {
        let (capacity, bytes, words) = layout(slots, max_cell);
        let w: Box<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
        prefault(&w);
        Self::header(&w, slots, capacity, bytes, max_cell > 0);
        TapRings {
            memory: Arc::new(Memory::Owned(w)),
            slots,
            capacity,
            bytes,
        }
    }

    /// Rings in the shared-memory segment `name`, for programs to open (cells
    /// of up to `max_cell` bytes; 0: only frames).
    pub fn create_shared(
        name: &str,
        slots: usize,
        max_cell: usize,
    ) -> Result<TapRings, ictus_os::shm::ShmError> {
        let (capacity, bytes, words) = layout(slots, max_cell);
        let segment = Segment::create(name, 0, words, |_, w| {
            prefault(w);
            Self::header(w, slots, capacity, bytes, max_cell > 0);
        })?;
        Ok(TapRings {
            memory: Arc::new(Memory::Shared(segment)),
            slots,
            capacity,
            bytes,
        })
    }

    /// The rings another process made, by the segment's name.
    pub fn open_shared(name: &str) -> Result<TapRings, ictus_os::shm::ShmError> {
        let segment = Segment::open(name)?;
        let corrupt = |why: &str| ictus_os::shm::ShmError::Corrupt {
            path: segment.path(),
            reason: why.to_string(),
        };
        let w = segment.words32();
        // Relaxed (all): `open` took the segment over with an Acquire of its
        // ready flag, stored after the header.
        let word = |i: usize| w.get(i).map(|x| x.load(Ordering::Relaxed));
        if word(0) != Some(MAGIC) {
            return Err(corrupt("not a tap's rings"));
        }
        let (slots, capacity, bytes) = (
            word(1).unwrap_or(0) as usize,
            word(2).unwrap_or(0),
            word(3).unwrap_or(0) as usize,
        );
        let need = HEADER_WORDS + slots * (SLOT_HEAD_WORDS + Ring::words_for(capacity, bytes));
        if capacity == 0 || bytes < HEAD_BYTES || w.len() < need {
            return Err(corrupt("the rings' layout does not fit the segment"));
        }
        Ok(TapRings {
            memory: Arc::new(Memory::Shared(segment)),
            slots,
            capacity,
            bytes,
        })
    }

    fn header(w: &[AtomicU32], slots: usize, capacity: u32, bytes: usize, cells: bool) {
        // Relaxed (all): published by the segment's ready flag, or by the
        // thread spawns that hand the rings over.
        w[0].store(MAGIC, Ordering::Relaxed);
        w[1].store(slots as u32, Ordering::Relaxed);
        w[2].store(capacity, Ordering::Relaxed);
        w[3].store(bytes as u32, Ordering::Relaxed);
        w[4].store(u32::from(cells), Ordering::Relaxed);
    }

    /// Whether the subsystems push their cells (else only their frames' timing:
    /// no sink of the run takes cells).
    pub fn cells_tapped(&self) -> bool {
        // Relaxed: written before the rings were handed over.
        self.memory.words()[4].load(Ordering::Relaxed) != 0
    }

    /// Messages each ring holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The largest cell a message carries.
    pub fn max_cell(&self) -> usize {
        self.bytes - HEAD_BYTES
    }

    /// The slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn region(&self, slot: usize) -> (&AtomicU32, Ring<'_>) {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        let per = SLOT_HEAD_WORDS + Ring::words_for(self.capacity, self.bytes);
        let start = HEADER_WORDS + slot * per;
        let w = &self.memory.words()[start..start + per];
        (
            &w[0],
            Ring::new(&w[SLOT_HEAD_WORDS..], self.capacity, self.bytes),
        )
    }

    /// Records slot `slot`'s ring dropped because it was full.
    pub fn dropped(&self, slot: usize) -> u64 {
        // Relaxed: a count, read after the writer ended (or as a snapshot).
        u64::from(self.region(slot).0.load(Ordering::Relaxed))
    }

    /// The producer's end of slot `slot`'s ring. One at a time.
    pub fn writer(&self, slot: usize) -> TapWriter {
        let cursor = self.region(slot).1.producer();
        TapWriter {
            rings: self.clone(),
            slot,
            cursor,
            drops: 0,
        }
    }

    /// The consumer's end of slot `slot`'s ring. One at a time.
    pub fn reader(&self, slot: usize) -> TapReader {
        let cursor = self.region(slot).1.consumer();
        TapReader {
            rings: self.clone(),
            slot,
            cursor,
            buf: vec![0; self.bytes],
        }
    }
}

/// The subsystem's end of its ring: pushes, never waits, never allocates.
pub struct TapWriter {
    rings: TapRings,
    slot: usize,
    cursor: RingProducer,
    drops: u32,
}

impl std::fmt::Debug for TapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapWriter")
            .field("slot", &self.slot)
            .field("drops", &self.drops)
            .finish_non_exhaustive()
    }
}

/// A message's head, laid out in native byte order.
#[derive(Clone, Copy)]
struct Head {
    kind: u32,
    /// The cell (inputs, outputs) or the state (frames).
    what: u32,
    frame: u64,
    deadline: u64,
    woke: u64,
    agreed: u64,
    end: u64,
    budget: u64,
    skipped: u64,
    cpu: u32,
    flags: u32,
    len: u32,
}

impl Head {
    fn cell(kind: u32, cell: usize, frame: u64, len: usize) -> Head {
        Head {
            kind,
            what: cell as u32,
            frame,
            deadline: 0,
            woke: 0,
            agreed: NONE64,
            end: 0,
            budget: 0,
            skipped: 0,
            cpu: NONE32,
            flags: 0,
            len: len as u32,
        }
    }

    #[inline]
    fn encode(&self) -> [u8; HEAD_BYTES] {
        let mut b = [0u8; HEAD_BYTES];
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.what.to_ne_bytes());
        for (i, v) in [
            self.frame,
            self.deadline,
            self.woke,
            self.agreed,
            self.end,
            self.budget,
            self.skipped,
        ]
        .iter()
        .enumerate()
        {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_ne_bytes());
        }
        b[64..68].copy_from_slice(&self.cpu.to_ne_bytes());
        b[68..72].copy_from_slice(&self.flags.to_ne_bytes());
        b[72..76].copy_from_slice(&self.len.to_ne_bytes());
        b
    }

    fn decode(b: &[u8]) -> Head {
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Head {
            kind: u32_at(0),
            what: u32_at(4),
            frame: u64_at(8),
            deadline: u64_at(16),
            woke: u64_at(24),
            agreed: u64_at(32),
            end: u64_at(40),
            budget: u64_at(48),
            skipped: u64_at(56),
            cpu: u32_at(64),
            flags: u32_at(68),
            len: u32_at(72),
        }
    }
}

impl TapWriter {
    /// The slot it writes for.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Records dropped so far because the ring was full.
    pub fn drops(&self) -> u64 {
        u64::from(self.drops)
    }

    #[inline]
    fn push(&mut self, head: &Head, body: &[u8]) -> bool {
        let (drops, ring) = self.rings.region(self.slot);
        if body.len() > ring.message_bytes() - HEAD_BYTES
            || !ring.try_push_parts(&mut self.cursor, &head.encode(), body, &SpinPark)
        {
            self.drops = self.drops.saturating_add(1);
            // Relaxed: a count only this writer stores; read as a snapshot.
            drops.store(self.drops, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A cell the subsystem read (`Input`) or published (`Output`) in `frame`;
    /// `false` when the ring was full (counted).
    #[inline]
    pub fn cell(&mut self, direction: Direction, frame: u64, cell: usize, bytes: &[u8]) -> bool {
        let kind = match direction {
            Direction::Input => KIND_INPUT,
            Direction::Output => KIND_OUTPUT,
        };
        self.push(&Head::cell(kind, cell, frame, bytes.len()), bytes)
    }

    /// A frame's timing; `false` when the ring was full (counted).
    #[inline]
    pub fn frame(&mut self, r: &FrameRecord) -> bool {
        let head = Head {
            kind: KIND_FRAME,
            what: u32::from(r.state),
            frame: r.frame,
            deadline: r.deadline.as_u64(),
            woke: r.woke.as_u64(),
            agreed: r.agreed.map_or(NONE64, Nanos::as_u64),
            end: r.end.as_u64(),
            budget: r.budget.as_u64(),
            skipped: r.skipped,
            cpu: r.cpu.unwrap_or(NONE32),
            flags: u32::from(r.error),
            len: 0,
        };
        self.push(&head, &[])
    }
}

/// One message taken from a ring.
#[derive(Debug)]
pub enum Taken<'a> {
    /// A frame's timing.
    Frame(FrameRecord),
    /// A cell read or published.
    Cell {
        /// Which.
        direction: Direction,
        /// The frame.
        frame: u64,
        /// The cell.
        cell: usize,
        /// Its bytes.
        bytes: &'a [u8],
    },
}

/// The recorder's end of one ring.
pub struct TapReader {
    rings: TapRings,
    slot: usize,
    cursor: RingConsumer,
    buf: Vec<u8>,
}

impl std::fmt::Debug for TapReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapReader")
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

impl TapReader {
    /// The slot it reads.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The next message, if any (a message of an unknown kind is skipped).
    pub fn take(&mut self) -> Option<Taken<'_>> {
        loop {
            let (_, ring) = self.rings.region(self.slot);
            if !ring.try_pop(&mut self.cursor, &mut self.buf, &SpinPark) {
                return None;
            }
            let h = Head::decode(&self.buf);
            let slot = self.slot;
            let stamp = Nanos::new;
            match h.kind {
                KIND_FRAME => {
                    return Some(Taken::Frame(FrameRecord {
                        slot,
                        frame: h.frame,
                        state: h.what as u8,
                        deadline: stamp(h.deadline),
                        woke: stamp(h.woke),
                        agreed: (h.agreed != NONE64).then(|| stamp(h.agreed)),
                        end: stamp(h.end),
                        budget: stamp(h.budget),
                        skipped: h.skipped,
                        cpu: (h.cpu != NONE32).then_some(h.cpu),
                        error: h.flags & 1 != 0,
                    }));
                }
                KIND_INPUT | KIND_OUTPUT => {
                    let len = (h.len as usize).min(self.buf.len() - HEAD_BYTES);
                    return Some(Taken::Cell {
                        direction: if h.kind == KIND_INPUT {
                            Direction::Input
                        } else {
                            Direction::Output
                        },
                        frame: h.frame,
                        cell: h.what as usize,
                        bytes: &self.buf[HEAD_BYTES..HEAD_BYTES + len],
                    });
                }
                _ => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(slot: usize, f: u64) -> FrameRecord {
        FrameRecord {
            slot,
            frame: f,
            state: 3,
            deadline: Nanos::from_millis(f),
            woke: Nanos::from_millis(f) + Nanos::from_micros(5),
            agreed: f
                .is_multiple_of(2)
                .then(|| Nanos::from_millis(f) + Nanos::from_micros(7)),
            end: Nanos::from_millis(f) + Nanos::from_micros(50),
            budget: Nanos::from_millis(1),
            skipped: f % 3,
            cpu: (!f.is_multiple_of(5)).then_some(1),
            error: f == 4,
        }
    }

    #[test]
    fn frames_and_cells_come_out_as_they_went_in_per_slot() {
        let rings = TapRings::in_process(2, 100);
        let mut w1 = rings.writer(1);
        let mut r1 = rings.reader(1);
        let mut r0 = rings.reader(0);
        let cell: Vec<u8> = (0..100).collect();
        for f in 0..6 {
            assert!(w1.cell(Direction::Input, f, 2, &cell[..50]));
            assert!(w1.frame(&frame(1, f)));
            assert!(w1.cell(Direction::Output, f, 0, &cell));
        }
        assert!(r0.take().is_none());
        for f in 0..6 {
            match r1.take() {
                Some(Taken::Cell {
                    direction: Direction::Input,
                    frame,
                    cell: 2,
                    bytes,
                }) => {
                    assert_eq!(frame, f);
                    assert_eq!(bytes, &cell[..50]);
                }
                other => panic!("expected an input, got {other:?}"),
            }
            match r1.take() {
                Some(Taken::Frame(r)) => assert_eq!(r, frame(1, f)),
                other => panic!("expected a frame, got {other:?}"),
            }
            match r1.take() {
                Some(Taken::Cell {
                    direction: Direction::Output,
                    bytes,
                    ..
                }) => assert_eq!(bytes, &cell[..]),
                other => panic!("expected an output, got {other:?}"),
            }
        }
        assert!(r1.take().is_none());
        assert_eq!(rings.dropped(1), 0);
    }

    #[test]
    fn a_full_ring_drops_and_counts_and_never_blocks() {
        let rings = TapRings::in_process(1, 8);
        let cap = u64::from(rings.capacity());
        let mut w = rings.writer(0);
        let mut pushed = 0;
        for f in 0..cap + 10 {
            pushed += u64::from(w.frame(&frame(0, f)));
        }
        assert_eq!(pushed, cap);
        assert_eq!((w.drops(), rings.dropped(0)), (10, 10));
        // A cell larger than the ring's message is dropped, not cut.
        assert!(!w.cell(Direction::Output, 0, 0, &[0; 9]));
        let mut r = rings.reader(0);
        let mut n = 0;
        while r.take().is_some() {
            n += 1;
        }
        assert_eq!(n, cap);
        // Room again.
        assert!(w.frame(&frame(0, 0)));
    }

    #[test]
    fn the_rings_stay_within_their_memory_bound() {
        for (slots, cell) in [(1, 8), (3, 4872), (64, 64 << 10), (2, 1 << 20)] {
            let (capacity, bytes, words) = layout(slots, cell);
            assert!((MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity));
            assert!(bytes >= HEAD_BYTES + cell);
            // Within the bound unless the minimum capacity needs more.
            assert!(words * 4 <= MAX_BYTES + 1024 * slots || capacity == MIN_CAPACITY);
        }
    }

    #[test]
    fn programs_open_the_rings_by_name() {
        let name = format!("ictus-tap-test-{}", std::process::id());
        let made = TapRings::create_shared(&name, 2, 64).unwrap();
        let opened = TapRings::open_shared(&name).unwrap();
        assert_eq!(
            (opened.slots(), opened.capacity(), opened.max_cell()),
            (2, made.capacity(), made.max_cell())
        );
        let mut w = opened.writer(1);
        assert!(w.frame(&frame(1, 9)));
        match made.reader(1).take() {
            Some(Taken::Frame(r)) => assert_eq!(r.frame, 9),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
}
