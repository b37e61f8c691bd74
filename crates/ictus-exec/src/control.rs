//! The control block: the words the coordinator and the subsystems share, in process
//! memory for threads or in a POSIX shared-memory segment for child processes.
//!
//! It is the whole child protocol. The beat is the monotonic clock itself: the
//! coordinator publishes the *epoch* (the deadline of frame 0) and the tick, and each
//! subsystem thread, in whatever process, waits for its own absolute deadlines
//! `epoch + frame * tick`. No wake-up is relayed, so a subsystem's release jitter is
//! its own timer latency, and a crashed process cannot stall the others. Beside the
//! epoch: the state word ([`crate::state::StateWord`]), the stop frame, the
//! coordinator's heartbeat, and one slot per subsystem with its live counters and its
//! acknowledgement.
//!
//! Every word is an `AtomicU64`. Header and slots are 128 bytes each, so the
//! counters one subsystem writes never share a cache-line pair with another's.
//!
//! ```
//! use ictus_exec::control::{Control, Status};
//! let sut = Control::in_process(2, 1_000_000);
//! sut.slot(1).set_status(Status::Ready);
//! assert_eq!(sut.slot(1).status(), Status::Ready);
//! assert_eq!(sut.epoch(), None);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the protocols on them are ictus_core::sync's (seqlock, hub), model-checked there, or this file's, tested across processes"
)]

use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::Nanos;

use crate::state::{Ack, StateWord};

/// The most subsystems one run holds.
pub const MAX_SUBSYSTEMS: usize = 64;

/// Words per header and per slot (128 bytes: a cache-line pair).
pub const SLOT_WORDS: usize = 16;

/// The magic word: "ictusCB" and the layout version (4: errors and stop asks).
pub const MAGIC: u64 = 0x6963_7475_7343_4204;

/// Bytes a control block of `slots` subsystems takes (without writer claims).
pub const fn size_bytes(slots: usize) -> usize {
    (slots + 1) * SLOT_WORDS * 8
}

/// Words of a control block of `slots` subsystems and `claims` element claims.
const fn total_words(slots: usize, claims: usize) -> usize {
    (slots + 1) * SLOT_WORDS + claims
}

// Header words.
const H_MAGIC: usize = 0;
const H_EPOCH: usize = 1;
const H_TICK: usize = 2;
const H_STATE: usize = 3;
const H_STOP: usize = 4;
const H_HEARTBEAT: usize = 5;
const H_SLOTS: usize = 6;
const H_PID: usize = 7;
const H_ABORT: usize = 8;
const H_CLAIMS: usize = 9;

/// In an element's claim word, beside its writer's slot + 1: a subsystem reads it.
const READ_HERE: u64 = 1 << 63;
const H_START: usize = 10;

// Slot words.
const S_STATUS: usize = 0;
const S_PID: usize = 1;
const S_FRAMES: usize = 2;
const S_OVERRUNS: usize = 3;
const S_STREAK: usize = 4;
const S_LAST_FRAME: usize = 5;
const S_ACK: usize = 6;
const S_LAST_EXEC: usize = 7;
const S_MAX_JITTER: usize = 8;
const S_MAX_EXEC: usize = 9;
const S_TID: usize = 10;
const S_TORN: usize = 11;
const S_TORN_CELL: usize = 12;
const S_WINDOW: usize = 13;
const S_ERRORS: usize = 14;
const S_STOP_ASKED: usize = 15;

/// Bits of the jitter in a packed window word; the window's index (plus one) fills
/// the others.
const WINDOW_JITTER_BITS: u32 = 40;

/// Packs a complete jitter window (its index and its largest release jitter, in
/// nanoseconds, saturated at 2^40 - 1, about 18 minutes) into one word, so a reader
/// never sees the index of one window with the figure of another.
pub(crate) fn pack_window(index: u64, max_jitter: Nanos) -> u64 {
    let mask = (1u64 << WINDOW_JITTER_BITS) - 1;
    ((index.wrapping_add(1)) << WINDOW_JITTER_BITS) | max_jitter.as_u64().min(mask)
}

/// The window a packed word holds (index modulo 2^24), if any.
fn unpack_window(word: u64) -> Option<(u64, Nanos)> {
    let index = word >> WINDOW_JITTER_BITS;
    (index != 0).then(|| {
        (
            index - 1,
            Nanos::new(word & ((1u64 << WINDOW_JITTER_BITS) - 1)),
        )
    })
}

/// Where a subsystem is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Not started, or its process has not attached yet.
    Empty = 0,
    /// Its thread runs `init`.
    Starting = 1,
    /// `init` done; waiting for the epoch.
    Ready = 2,
    /// In its frame loop.
    Running = 3,
    /// Left its loop at the stop frame and shut down.
    Finished = 4,
    /// `init` failed, its thread panicked or its process died.
    Failed = 5,
}

impl Status {
    /// The status a word holds (unknown words read as failed).
    pub fn from_word(w: u64) -> Status {
        match w {
            1 => Status::Starting,
            2 => Status::Ready,
            3 => Status::Running,
            4 => Status::Finished,
            5 => Status::Failed,
            _ => Status::Empty,
        }
    }

    /// Lower-case name for status lines.
    pub fn name(self) -> &'static str {
        match self {
            Status::Empty => "empty",
            Status::Starting => "starting",
            Status::Ready => "ready",
            Status::Running => "running",
            Status::Finished => "finished",
            Status::Failed => "failed",
        }
    }
}

/// Why a control block could not be made or joined.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The shared-memory segment could not be made or opened.
    #[error(transparent)]
    Shared(#[from] ictus_os::shm::ShmError),
    /// The segment is not a control block this build can read.
    #[error("segment {segment} {problem}")]
    Layout {
        /// The segment's name.
        segment: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// Storage of a control block.
enum Store {
    Heap(Box<[AtomicU64]>),
    Shared(crate::shared::SharedWords),
}

/// A control block (see the module documentation).
pub struct Control {
    store: Store,
    slots: usize,
    claims: usize,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("slots", &self.slots)
            .field("epoch", &self.epoch())
            .finish_non_exhaustive()
    }
}

impl Control {
    /// A block in process memory for `slots` subsystems and a tick of `tick_ns`.
    pub fn in_process(slots: usize, tick_ns: u64) -> Control {
        Control::in_process_with_claims(slots, tick_ns, 0)
    }

    /// A block in process memory that also tracks the writer of each of `elements`
    /// cell elements (one writer per element).
    pub fn in_process_with_claims(slots: usize, tick_ns: u64, elements: usize) -> Control {
        let words: Box<[AtomicU64]> = (0..total_words(slots, elements))
            .map(|_| AtomicU64::new(0))
            .collect();
        let sut = Control {
            store: Store::Heap(words),
            slots,
            claims: elements,
        };
        sut.init(slots, tick_ns);
        sut
    }

    /// A block in the shared-memory segment `name`, owned (and unlinked on drop) by
    /// this process; a stale segment of the name left by a crash is reclaimed.
    pub fn create_shared_named(
        name: &str,
        slots: usize,
        tick_ns: u64,
        elements: usize,
    ) -> Result<Control, ControlError> {
        let words = crate::shared::SharedWords::create(name, total_words(slots, elements))?;
        let sut = Control {
            store: Store::Shared(words),
            slots,
            claims: elements,
        };
        sut.init(slots, tick_ns);
        Ok(sut)
    }

    /// The block in the shared-memory segment `name` that a live coordinator made.
    pub fn open_shared_named(name: &str) -> Result<Control, ControlError> {
        let words = crate::shared::SharedWords::open(name)?;
        let w = words.words();
        let layout = |problem: &'static str| ControlError::Layout {
            segment: name.to_string(),
            problem,
        };
        if w.len() < SLOT_WORDS {
            return Err(layout("is too small for a control block"));
        }
        // Acquire: pairs with the Release store of the magic in `init`.
        if w[H_MAGIC].load(Ordering::Acquire) != MAGIC {
            return Err(layout("holds no control block of this version"));
        }
        // Relaxed: written before the magic, which we read with Acquire above.
        let slots = w[H_SLOTS].load(Ordering::Relaxed) as usize;
        let claims = w[H_CLAIMS].load(Ordering::Relaxed) as usize;
        if total_words(slots, claims) > w.len() {
            return Err(layout("is shorter than its control block"));
        }
        Ok(Control {
            store: Store::Shared(words),
            slots,
            claims,
        })
    }

    fn init(&self, slots: usize, tick_ns: u64) {
        let w = self.words();
        w[H_TICK].store(tick_ns, Ordering::Relaxed);
        w[H_STOP].store(u64::MAX, Ordering::Relaxed);
        w[H_SLOTS].store(slots as u64, Ordering::Relaxed);
        w[H_PID].store(u64::from(std::process::id()), Ordering::Relaxed);
        // Without /proc a start time of 0; `ProcessId::is_alive` then trusts the
        // signal alone, as it cannot read the start time either.
        let start = ictus_os::process::ProcessId::current().map_or(0, |p| p.start_time);
        w[H_START].store(start, Ordering::Relaxed);
        w[H_CLAIMS].store(self.claims as u64, Ordering::Relaxed);
        for k in 0..slots {
            let s = self.slot(k);
            s.word(S_ACK).store(Ack::NONE, Ordering::Relaxed);
            s.word(S_LAST_FRAME).store(u64::MAX, Ordering::Relaxed);
        }
        // Release: pairs with the Acquire load of the magic in `open_shared_named`, so an
        // attaching process sees every word initialised above.
        w[H_MAGIC].store(MAGIC, Ordering::Release);
    }

    fn words(&self) -> &[AtomicU64] {
        match &self.store {
            Store::Heap(w) => w,
            Store::Shared(s) => s.words(),
        }
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The tick the block was made for.
    pub fn tick(&self) -> Nanos {
        Nanos::new(self.words()[H_TICK].load(Ordering::Relaxed))
    }

    /// Slot `k`.
    ///
    /// # Panics
    /// When `k` is not below [`slots`](Self::slots).
    pub fn slot(&self, k: usize) -> Slot<'_> {
        assert!(k < self.slots, "slot {k} of {}", self.slots);
        let base = (k + 1) * SLOT_WORDS;
        Slot {
            words: &self.words()[base..base + SLOT_WORDS],
        }
    }

    /// The deadline of frame 0, once the coordinator has published it.
    #[inline]
    pub fn epoch(&self) -> Option<Nanos> {
        // Acquire: pairs with the Release store in `set_epoch`.
        let e = self.words()[H_EPOCH].load(Ordering::Acquire);
        (e != 0).then_some(Nanos::new(e))
    }

    /// Publishes the epoch: the subsystems start their frame loops.
    pub fn set_epoch(&self, epoch: Nanos) {
        // Release: pairs with the Acquire load in `epoch`; the state word and every
        // slot written before are visible to a subsystem that sees the epoch.
        self.words()[H_EPOCH].store(epoch.as_u64().max(1), Ordering::Release);
    }

    /// The transition in force.
    #[inline]
    pub fn state(&self) -> StateWord {
        // Acquire: pairs with the Release store in `set_state`.
        StateWord::unpack(self.words()[H_STATE].load(Ordering::Acquire))
    }

    /// Announces a transition.
    pub fn set_state(&self, word: StateWord) {
        // Release: pairs with the Acquire load in `state`.
        self.words()[H_STATE].store(word.pack(), Ordering::Release);
    }

    /// The first frame no subsystem runs (`u64::MAX`: none set).
    #[inline]
    pub fn stop_frame(&self) -> u64 {
        // Acquire: pairs with the Release store in `set_stop_frame`.
        self.words()[H_STOP].load(Ordering::Acquire)
    }

    /// Sets the stop frame (only ever lowered).
    pub fn set_stop_frame(&self, frame: u64) {
        // Release: pairs with the Acquire load in `stop_frame`.
        self.words()[H_STOP].fetch_min(frame, Ordering::Release);
    }

    /// The coordinator's last heartbeat (its monotonic clock).
    #[inline]
    pub fn heartbeat(&self) -> Nanos {
        // Relaxed: a liveness hint, ordering nothing.
        Nanos::new(self.words()[H_HEARTBEAT].load(Ordering::Relaxed))
    }

    /// Stamps the coordinator's heartbeat.
    pub fn beat(&self, now: Nanos) {
        // Relaxed: see `heartbeat`.
        self.words()[H_HEARTBEAT].store(now.as_u64(), Ordering::Relaxed);
    }

    /// The coordinator's process id.
    pub fn coordinator_pid(&self) -> u32 {
        // Relaxed: written once before the magic (see `init`).
        self.words()[H_PID].load(Ordering::Relaxed) as u32
    }

    /// The coordinator's process (pid and start time), so that a coordinator gone
    /// and its pid reused reads as gone.
    pub fn coordinator(&self) -> ictus_os::process::ProcessId {
        ictus_os::process::ProcessId {
            pid: self.coordinator_pid(),
            // Relaxed: written once before the magic (see `init`).
            start_time: self.words()[H_START].load(Ordering::Relaxed),
        }
    }

    /// Whether the run was abandoned before its epoch (a subsystem failed to start).
    pub fn aborted(&self) -> bool {
        // Acquire: pairs with the Release store in `abort`.
        self.words()[H_ABORT].load(Ordering::Acquire) != 0
    }

    /// Claims cell element `element` for the subsystem in `slot`: one writer per
    /// element, across every process of the run. Returns the other writer's slot.
    pub fn claim_writer(&self, element: usize, slot: usize) -> Result<(), usize> {
        if element >= self.claims {
            return Ok(());
        }
        let w = &self.words()[total_words(self.slots, 0) + element];
        let me = slot as u64 + 1;
        // Acquire: pairs with the other claims' compare-and-swap.
        let mut v = w.load(Ordering::Acquire);
        loop {
            match v & !READ_HERE {
                0 => {}
                owner if owner == me => return Ok(()),
                owner => return Err(owner as usize - 1),
            }
            // AcqRel: the claim is a one-time decision between registering subsystems
            // (the read mark, another bit of the word, is kept).
            match w.compare_exchange(v, v | me, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => v = now,
            }
        }
    }

    /// The slot writing cell element `element`, if any.
    pub fn writer_of(&self, element: usize) -> Option<usize> {
        if element >= self.claims {
            return None;
        }
        // Acquire: pairs with the claim's compare-and-swap.
        let v = self.words()[total_words(self.slots, 0) + element].load(Ordering::Acquire);
        let owner = v & !READ_HERE;
        (owner != 0).then(|| owner as usize - 1)
    }

    /// Marks cell element `element` as read by a subsystem of this block (so a late
    /// copy of it from another host costs a frame here).
    pub fn mark_read(&self, element: usize) {
        if element < self.claims {
            // Release: pairs with `read_here`'s Acquire (registration, then the link).
            self.words()[total_words(self.slots, 0) + element]
                .fetch_or(READ_HERE, Ordering::Release);
        }
    }

    /// Whether a subsystem of this block reads cell element `element`.
    pub fn read_here(&self, element: usize) -> bool {
        element < self.claims
            // Acquire: pairs with `mark_read`.
            && self.words()[total_words(self.slots, 0) + element].load(Ordering::Acquire) & READ_HERE != 0
    }

    /// Abandons the run: waiting subsystems leave without running a frame.
    pub fn abort(&self) {
        // Release: pairs with the Acquire load in `aborted`.
        self.words()[H_ABORT].store(1, Ordering::Release);
        self.set_stop_frame(0);
    }
}

/// One subsystem's words.
#[derive(Clone, Copy)]
pub struct Slot<'a> {
    words: &'a [AtomicU64],
}

/// A snapshot of one slot, for status lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotView {
    /// Life stage.
    pub status: Status,
    /// The process it runs in.
    pub pid: u32,
    /// Its thread.
    pub tid: u64,
    /// Frames it ran.
    pub frames_run: u64,
    /// Releases it skipped because it was still running (or woke late).
    pub overruns: u64,
    /// The longest run of consecutive skipped releases.
    pub longest_streak: u64,
    /// The last frame it ran.
    pub last_frame: Option<u64>,
    /// Its last acknowledgement.
    pub ack: Option<Ack>,
    /// Its last execution time.
    pub last_exec: Nanos,
    /// Its largest release jitter so far.
    pub max_jitter: Nanos,
    /// Its longest execution so far.
    pub max_exec: Nanos,
    /// Reads and writes it gave up on a cell whose writer was not progressing.
    pub torn: u64,
    /// The cell of the last of those.
    pub last_torn_cell: Option<usize>,
    /// Its last complete jitter window: the window's index (frame / window frames,
    /// modulo 2^24) and its largest release jitter (see [`crate::live`]).
    pub window_jitter: Option<(u64, Nanos)>,
    /// Frames whose `run` returned an error.
    pub errors: u64,
    /// The frame in which it asked the run to stop, if it did.
    pub stop_asked: Option<u64>,
}

impl<'a> Slot<'a> {
    fn word(&self, i: usize) -> &'a AtomicU64 {
        &self.words[i]
    }

    /// Its life stage.
    pub fn status(&self) -> Status {
        // Acquire: pairs with the Release store in `set_status`.
        Status::from_word(self.word(S_STATUS).load(Ordering::Acquire))
    }

    /// Moves it to `status`.
    pub fn set_status(&self, status: Status) {
        // Release: pairs with the Acquire load in `status`: what the subsystem wrote
        // before (its pid, its counters) is visible to whoever sees the new status.
        self.word(S_STATUS).store(status as u64, Ordering::Release);
    }

    /// Records the process and thread running it.
    pub fn set_ids(&self, pid: u32, tid: u64) {
        // Relaxed: published by the Release store of the status that follows.
        self.word(S_PID).store(u64::from(pid), Ordering::Relaxed);
        self.word(S_TID).store(tid, Ordering::Relaxed);
    }

    /// Publishes the counters after a frame (hot path: relaxed stores only).
    #[inline]
    pub(crate) fn publish(&self, c: &Counters) {
        // Relaxed throughout: monitoring figures, each read on its own; the final
        // figures travel with the Release store of `Finished`.
        self.word(S_FRAMES).store(c.frames_run, Ordering::Relaxed);
        self.word(S_OVERRUNS).store(c.overruns, Ordering::Relaxed);
        self.word(S_STREAK)
            .store(c.longest_streak, Ordering::Relaxed);
        self.word(S_LAST_FRAME)
            .store(c.last_frame, Ordering::Relaxed);
        self.word(S_LAST_EXEC)
            .store(c.last_exec.as_u64(), Ordering::Relaxed);
        self.word(S_MAX_JITTER)
            .store(c.max_jitter.as_u64(), Ordering::Relaxed);
        self.word(S_MAX_EXEC)
            .store(c.max_exec.as_u64(), Ordering::Relaxed);
        self.word(S_TORN).store(c.torn, Ordering::Relaxed);
        self.word(S_TORN_CELL)
            .store(c.last_torn_cell, Ordering::Relaxed);
        self.word(S_WINDOW).store(c.window_done, Ordering::Relaxed);
        self.word(S_ERRORS).store(c.errors, Ordering::Relaxed);
    }

    /// The subsystem asks the run to stop (at frame `frame`); the first ask stays.
    #[inline]
    pub fn ask_stop(&self, frame: u64) {
        // Relaxed: polled by the coordinator, which announces the stop itself.
        let _ = self.word(S_STOP_ASKED).compare_exchange(
            0,
            frame.saturating_add(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Records an acknowledgement.
    #[inline]
    pub fn acknowledge(&self, ack: Ack) {
        // Release: pairs with the Acquire load in `view`.
        self.word(S_ACK).store(ack.pack(), Ordering::Release);
    }

    /// The last acknowledgement.
    pub fn ack(&self) -> Option<Ack> {
        // Acquire: pairs with the Release store in `acknowledge`.
        Ack::unpack(self.word(S_ACK).load(Ordering::Acquire))
    }

    /// A snapshot of every word.
    pub fn view(&self) -> SlotView {
        let r = |i: usize| self.word(i).load(Ordering::Relaxed);
        let last = r(S_LAST_FRAME);
        SlotView {
            status: self.status(),
            pid: r(S_PID) as u32,
            tid: r(S_TID),
            frames_run: r(S_FRAMES),
            overruns: r(S_OVERRUNS),
            longest_streak: r(S_STREAK),
            last_frame: (last != u64::MAX).then_some(last),
            ack: self.ack(),
            last_exec: Nanos::new(r(S_LAST_EXEC)),
            max_jitter: Nanos::new(r(S_MAX_JITTER)),
            max_exec: Nanos::new(r(S_MAX_EXEC)),
            torn: r(S_TORN),
            last_torn_cell: usize::try_from(r(S_TORN_CELL))
                .ok()
                .filter(|_| r(S_TORN) > 0),
            window_jitter: unpack_window(r(S_WINDOW)),
            errors: r(S_ERRORS),
            stop_asked: r(S_STOP_ASKED).checked_sub(1),
        }
    }
}

/// The live counters a subsystem thread keeps (and publishes to its slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames run.
    pub frames_run: u64,
    /// Releases skipped.
    pub overruns: u64,
    /// Longest run of consecutive skipped releases.
    pub longest_streak: u64,
    /// The last frame run (`u64::MAX`: none).
    pub last_frame: u64,
    /// The last execution time.
    pub last_exec: Nanos,
    /// The largest release jitter.
    pub max_jitter: Nanos,
    /// The longest execution.
    pub max_exec: Nanos,
    /// Reads and writes given up on a cell whose writer was not progressing.
    pub torn: u64,
    /// The cell of the last of those (meaningful when `torn > 0`).
    pub last_torn_cell: u64,
    /// The window of frames under way (frame / window frames).
    pub window: u64,
    /// The largest release jitter in it so far.
    pub window_max: Nanos,
    /// The last complete window, packed (0: none yet).
    pub window_done: u64,
    /// Frames whose `run` returned an error.
    pub errors: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateId;

    #[test]
    fn header_and_slots_sit_in_separate_line_pairs() {
        assert_eq!(SLOT_WORDS * 8, 128);
        let sut = Control::in_process(3, 1_000);
        let base = sut.words().as_ptr() as usize;
        let s1 = sut.slot(1).words.as_ptr() as usize;
        assert_eq!((s1 - base) % 128, 0);
        assert_eq!(s1 - base, 2 * 128);
    }

    #[test]
    fn one_writer_per_element_and_a_read_mark_beside_it() {
        let sut = Control::in_process_with_claims(3, 1, 4);
        // Read before it is written, and after: the mark and the writer both hold.
        sut.mark_read(1);
        assert_eq!(sut.claim_writer(1, 2), Ok(()));
        assert_eq!(sut.claim_writer(1, 2), Ok(()));
        assert_eq!(sut.claim_writer(1, 0), Err(2));
        assert_eq!(sut.claim_writer(2, 0), Ok(()));
        sut.mark_read(2);
        assert_eq!((sut.writer_of(1), sut.writer_of(2)), (Some(2), Some(0)));
        assert_eq!(sut.claim_writer(2, 1), Err(0));
        let read: Vec<bool> = (0..5).map(|e| sut.read_here(e)).collect();
        assert_eq!(read, [false, true, true, false, false]);
        assert_eq!(sut.writer_of(3), None);
    }

    #[test]
    fn a_new_block_has_no_epoch_no_stop_and_no_acknowledgement() {
        let sut = Control::in_process(1, 250_000);
        assert_eq!(sut.epoch(), None);
        assert_eq!(sut.stop_frame(), u64::MAX);
        assert_eq!(sut.tick(), Nanos::new(250_000));
        assert_eq!(sut.slot(0).ack(), None);
        assert_eq!(sut.slot(0).view().last_frame, None);
    }

    #[test]
    fn the_stop_frame_only_moves_earlier() {
        let sut = Control::in_process(1, 1);
        sut.set_stop_frame(90);
        sut.set_stop_frame(120);
        assert_eq!(sut.stop_frame(), 90);
    }

    #[test]
    fn a_packed_window_reads_back_whole_and_saturates() {
        assert_eq!(unpack_window(0), None);
        let w = pack_window(7, Nanos::new(123_456));
        assert_eq!(unpack_window(w), Some((7, Nanos::new(123_456))));
        let huge = pack_window(0, Nanos::new(u64::MAX));
        assert_eq!(
            unpack_window(huge),
            Some((0, Nanos::new((1 << WINDOW_JITTER_BITS) - 1)))
        );
        let sut = Control::in_process(1, 1_000);
        assert_eq!(sut.slot(0).view().window_jitter, None);
        let c = Counters {
            window_done: w,
            ..Counters::default()
        };
        sut.slot(0).publish(&c);
        assert_eq!(
            sut.slot(0).view().window_jitter,
            Some((7, Nanos::new(123_456)))
        );
    }

    #[test]
    fn acknowledgements_and_state_round_trip() {
        let sut = Control::in_process(2, 1);
        sut.set_state(StateWord::constant(StateId::RUN));
        assert_eq!(sut.state().at(5), StateId::RUN);
        let a = Ack {
            state: StateId::PAUSE,
            frame: 77,
        };
        sut.slot(1).acknowledge(a);
        assert_eq!(sut.slot(1).view().ack, Some(a));
        assert_eq!(sut.slot(0).ack(), None);
    }
}
