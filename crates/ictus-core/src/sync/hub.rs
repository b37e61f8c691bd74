//! The word-level protocols of the hubs of seed 004 (semaphore, event, port,
//! FIFO ring), over 32-bit atomic words the caller owns, so that they work the
//! same in process memory and in a shared-memory mapping between processes.
//!
//! Nothing here sleeps by itself: every wait spins a little, then asks a
//! [`Park`] to sleep while a word holds a value, and every change that may
//! end a wait asks the `Park` to wake the sleepers of that word. `ictus-os`
//! implements `Park` with `futex(2)` (shared, not private, so that it works
//! across processes); [`SpinPark`] only spins, and is what the loom models use.
//! The named, typed hubs are in `ictus-exec`.
//!
//! Every waiting protocol has the same shape (the futex pattern): the waiter
//! counts itself in a `sleepers` word, then re-checks the word it waits on,
//! then sleeps only while that word keeps the value it saw; the waker changes
//! the word, then wakes only if `sleepers` is not zero. Both sides use SeqCst
//! for those two accesses, so either the waker sees the sleeper or the sleeper
//! sees the change: no wake-up is lost, and the common uncontended case makes
//! no system call.
//!
//! Layouts (in words of the region handed in):
//!
//! - [`SemaphoreWords`]: `[count, sleepers]`.
//! - [`EventWords`]: `[raised, sleepers]`.
//! - [`PortWords`]: `[state, sleepers, message...]`.
//! - [`Ring`]: head and the consumer's sleepers in the first 128 bytes, tail
//!   and the producer's sleepers in the next 128, then the slots.
//!
//! ```
//! use ictus_core::sync::AtomicU32;
//! use ictus_core::sync::hub::{SemaphoreWords, SpinPark};
//!
//! let words = [AtomicU32::new(0), AtomicU32::new(0)];
//! let sut = SemaphoreWords::new(&words);
//! assert!(!sut.try_take());
//! sut.give(&SpinPark);
//! assert_eq!(sut.count(), 1);
//! assert!(sut.take(&SpinPark, None));
//! ```

use std::fmt;
use std::time::Instant;

use super::atomic::{AtomicU32, Ordering, spin_loop};

/// Bytes in one word of a hub region.
pub const WORD_BYTES: usize = 4;

/// How a waiting thread sleeps and how it is woken.
pub trait Park {
    /// How many times a waiter re-checks (spinning) before it sleeps.
    fn spins(&self) -> u32 {
        100
    }

    /// Sleeps while `word` holds `expected`, until woken or until `deadline`.
    /// May return early for any reason: the caller re-checks.
    fn park(&self, word: &AtomicU32, expected: u32, deadline: Option<Instant>);

    /// Wakes up to `count` threads sleeping on `word`.
    fn unpark(&self, word: &AtomicU32, count: u32);

    /// Whether the waiter should give up now, as if its deadline had passed:
    /// looked at before each sleep. For a thread that waits on a hub and must
    /// also hear something else (the home servers of hubs across hosts, whose
    /// `park` also wakes when a command arrives); `false` for everyone else.
    fn interrupted(&self) -> bool {
        false
    }
}

/// A [`Park`] that never sleeps: `park` spins once and returns. For tests and
/// loom models, and for waits on a CPU of one's own.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpinPark;

impl Park for SpinPark {
    fn spins(&self) -> u32 {
        0
    }

    fn park(&self, _word: &AtomicU32, _expected: u32, _deadline: Option<Instant>) {
        spin_loop();
    }

    fn unpark(&self, _word: &AtomicU32, _count: u32) {}
}

/// Wakes everyone.
const ALL: u32 = u32::MAX;

/// Whether `deadline` has passed.
fn expired(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// Waits until `attempt`, given the current value of `word`, succeeds; `false`
/// when `deadline` passed first. `sleepers` counts the threads in the slow
/// path, for [`notify`].
fn wait_for<P: Park + ?Sized>(
    word: &AtomicU32,
    sleepers: &AtomicU32,
    park: &P,
    deadline: Option<Instant>,
    mut attempt: impl FnMut(u32) -> bool,
) -> bool {
    for _ in 0..park.spins() {
        // Acquire: pairs with the Release half of the waker's SeqCst change of
        // `word`, so what it wrote before is visible once `attempt` succeeds.
        if attempt(word.load(Ordering::Acquire)) {
            return true;
        }
        spin_loop();
    }
    // SeqCst (this and the load below): against the SeqCst change of `word` and
    // SeqCst load of `sleepers` in `notify`; in the single total order either
    // the waker's load comes after our increment (it wakes us) or its change of
    // `word` comes before our load (we see it, or park returns at once).
    sleepers.fetch_add(1, Ordering::SeqCst);
    let done = loop {
        let seen = word.load(Ordering::SeqCst);
        if attempt(seen) {
            break true;
        }
        if expired(deadline) || park.interrupted() {
            break false;
        }
        park.park(word, seen, deadline);
    };
    // Relaxed: a waker that still sees us counted only makes a spare wake call.
    sleepers.fetch_sub(1, Ordering::Relaxed);
    done
}

/// Wakes up to `count` sleepers of `word`, after a SeqCst change of `word`.
#[inline]
fn notify<P: Park + ?Sized>(word: &AtomicU32, sleepers: &AtomicU32, park: &P, count: u32) {
    // SeqCst: see `wait_for`.
    if sleepers.load(Ordering::SeqCst) > 0 {
        park.unpark(word, count);
    }
}

/// Stores `bytes` into `words`, 4 bytes a word in native order (the last word
/// padded with zeros).
///
/// Relaxed (all): the caller orders the message with a Release store of the
/// word that hands it over.
fn store_bytes(words: &[AtomicU32], bytes: &[u8]) {
    let chunks = bytes.chunks_exact(WORD_BYTES);
    let tail = chunks.remainder();
    let mut words = words.iter();
    for (chunk, word) in chunks.zip(&mut words) {
        let value = u32::from_ne_bytes(chunk.try_into().expect("chunks of 4 bytes"));
        word.store(value, Ordering::Relaxed);
    }
    if !tail.is_empty() {
        let mut last = [0; WORD_BYTES];
        last[..tail.len()].copy_from_slice(tail);
        if let Some(word) = words.next() {
            word.store(u32::from_ne_bytes(last), Ordering::Relaxed);
        }
    }
}

/// Copies `bytes` into the first bytes of `words` in one copy of memory (the
/// bytes of the last word past the message keep what they held): for a ring's
/// slot, which its producer alone touches until it hands the slot over with a
/// Release store, so the copy races with nothing. A large message costs a
/// `memcpy`, not a store per word. Under loom, [`store_bytes`] (loom sees
/// only atomic accesses).
///
/// # Panics
///
/// If `bytes` is longer than `words`.
#[inline]
#[allow(
    unsafe_code,
    reason = "one memcpy into a ring slot its producer owns alone; see the SAFETY comment"
)]
fn copy_into(words: &[AtomicU32], bytes: &[u8]) {
    assert!(
        bytes.len() <= words.len() * WORD_BYTES,
        "{} bytes do not fit {} words",
        bytes.len(),
        words.len()
    );
    #[cfg(not(loom))]
    // SAFETY: the destination is `bytes.len()` bytes inside `words` (checked
    // above), memory inside `UnsafeCell`s (atomics), so writing through a
    // pointer derived from a shared reference is allowed; no other thread reads
    // or writes these words until the caller's Release store hands them over
    // (the ring's protocol), so the non-atomic copy races with no access, which
    // mixing atomic and non-atomic accesses requires; source and destination do
    // not overlap (`bytes` is the caller's own).
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            words.as_ptr().cast::<u8>().cast_mut(),
            bytes.len(),
        );
    }
    #[cfg(loom)]
    store_bytes(words, bytes);
}

/// Loads `out.len()` bytes from `words` (see [`store_bytes`]).
///
/// Relaxed (all): the caller took the message over with an Acquire.
fn load_bytes(words: &[AtomicU32], out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(WORD_BYTES);
    let mut words = words.iter();
    for (chunk, word) in (&mut chunks).zip(&mut words) {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty()
        && let Some(word) = words.next()
    {
        let n = tail.len();
        tail.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes()[..n]);
    }
}

/// Words that hold `bytes` bytes.
pub const fn words_for_bytes(bytes: usize) -> usize {
    bytes.div_ceil(WORD_BYTES)
}

/// Splits off the first `n` words of `region`.
///
/// # Panics
///
/// If the region is shorter.
fn take_words<'a>(region: &'a [AtomicU32], n: usize, what: &str) -> &'a [AtomicU32] {
    assert!(
        region.len() >= n,
        "a {what} needs {n} words, the region has {}",
        region.len()
    );
    &region[..n]
}

/// A counting semaphore: `give` adds a token, `take` waits for one and
/// removes it. Region: `[count, sleepers]` ([`SemaphoreWords::WORDS`]).
#[derive(Clone, Copy)]
pub struct SemaphoreWords<'a> {
    count: &'a AtomicU32,
    sleepers: &'a AtomicU32,
}

impl<'a> SemaphoreWords<'a> {
    /// Words of a semaphore's region.
    pub const WORDS: usize = 2;

    /// The semaphore kept in the first [`WORDS`](Self::WORDS) words of
    /// `region` (zeros: no token, nobody waiting).
    ///
    /// # Panics
    ///
    /// If the region is shorter.
    pub fn new(region: &'a [AtomicU32]) -> Self {
        let w = take_words(region, Self::WORDS, "semaphore");
        SemaphoreWords {
            count: &w[0],
            sleepers: &w[1],
        }
    }

    /// Sets the count, before anyone uses the semaphore.
    pub fn init(&self, tokens: u32) {
        // Relaxed: set up before the region is shared.
        self.count.store(tokens, Ordering::Relaxed);
        self.sleepers.store(0, Ordering::Relaxed);
    }

    /// Tokens available now.
    pub fn count(&self) -> u32 {
        // Relaxed: a snapshot to look at, pairs with nothing.
        self.count.load(Ordering::Relaxed)
    }

    /// Adds a token and wakes one waiter. Returns `false` (and adds nothing)
    /// when the count is already `u32::MAX`.
    pub fn give<P: Park + ?Sized>(&self, park: &P) -> bool {
        // SeqCst: the Release half pairs with the Acquire of the taker, the
        // total order with the sleepers check in `notify` (see `wait_for`).
        let added = self
            .count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_add(1))
            .is_ok();
        if added {
            notify(self.count, self.sleepers, park, 1);
        }
        added
    }

    /// Takes a token if there is one, without waiting.
    pub fn try_take(&self) -> bool {
        // Acquire: pairs with the Release half of `give`'s SeqCst update, so
        // what the giver did before giving happens before the taker goes on.
        self.count
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |c| c.checked_sub(1))
            .is_ok()
    }

    /// Waits for a token and takes it; `false` if `deadline` passed first.
    pub fn take<P: Park + ?Sized>(&self, park: &P, deadline: Option<Instant>) -> bool {
        wait_for(self.count, self.sleepers, park, deadline, |c| {
            // SeqCst: a taker in the slow path reads `count` in the total order
            // (see `wait_for`); Acquire as in `try_take`.
            c > 0
                && self
                    .count
                    .compare_exchange(c, c - 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
        })
    }
}

impl fmt::Debug for SemaphoreWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreWords")
            .field("count", &self.count())
            .finish()
    }
}

/// A binary event (seed 004): `raise` sets it, `wait` waits until it is set
/// and clears it, so each raise releases one waiter; raising a raised event
/// changes nothing. Region: `[raised, sleepers]` ([`EventWords::WORDS`]).
#[derive(Clone, Copy)]
pub struct EventWords<'a> {
    raised: &'a AtomicU32,
    sleepers: &'a AtomicU32,
}

impl<'a> EventWords<'a> {
    /// Words of an event's region.
    pub const WORDS: usize = 2;

    /// The event kept in the first [`WORDS`](Self::WORDS) words of `region`
    /// (zeros: not raised).
    ///
    /// # Panics
    ///
    /// If the region is shorter.
    pub fn new(region: &'a [AtomicU32]) -> Self {
        let w = take_words(region, Self::WORDS, "event");
        EventWords {
            raised: &w[0],
            sleepers: &w[1],
        }
    }

    /// Whether the event is raised now (nobody has taken it yet).
    pub fn is_raised(&self) -> bool {
        // Relaxed: a snapshot to look at, pairs with nothing.
        self.raised.load(Ordering::Relaxed) != 0
    }

    /// Raises the event and wakes one waiter.
    pub fn raise<P: Park + ?Sized>(&self, park: &P) {
        // SeqCst: the Release half pairs with the Acquire of the waiter that
        // clears it, the total order with the sleepers check in `notify`.
        self.raised.swap(1, Ordering::SeqCst);
        notify(self.raised, self.sleepers, park, 1);
    }

    /// Clears the event if it is raised, without waiting; whether it was.
    pub fn try_wait(&self) -> bool {
        // Acquire: pairs with the Release half of `raise`'s swap.
        self.raised
            .compare_exchange(1, 0, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Waits until the event is raised and clears it; `false` if `deadline`
    /// passed first.
    pub fn wait<P: Park + ?Sized>(&self, park: &P, deadline: Option<Instant>) -> bool {
        wait_for(self.raised, self.sleepers, park, deadline, |r| {
            // SeqCst: see `wait_for`; Acquire as in `try_wait`.
            r == 1
                && self
                    .raised
                    .compare_exchange(1, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
        })
    }
}

impl fmt::Debug for EventWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventWords")
            .field("raised", &self.is_raised())
            .finish()
    }
}

/// A port's states (the `state` word).
mod port_state {
    /// Free for a sender.
    pub(super) const EMPTY: u32 = 0;
    /// A sender is writing the message.
    pub(super) const WRITING: u32 = 1;
    /// A message waits for a receiver.
    pub(super) const FULL: u32 = 2;
    /// A receiver is copying the message.
    pub(super) const READING: u32 = 3;
    /// The receiver has the message; its sender has not seen that yet.
    pub(super) const TAKEN: u32 = 4;
}

/// A port (seed 004's port hub): a synchronous hand-over with copy. A sender
/// copies its message in and waits until a receiver has copied it out; any
/// number of senders and receivers, one message at a time. Each side also
/// comes in two halves (`offer` then `collect`; `claim` then `taken` or
/// `unclaim`), so that a relay can carry the hand-over to another host and
/// the sender still returns only once the real receiver has its copy. Region:
/// `[state, sleepers, message words...]` ([`PortWords::words_for`]).
#[derive(Clone, Copy)]
pub struct PortWords<'a> {
    state: &'a AtomicU32,
    sleepers: &'a AtomicU32,
    message: &'a [AtomicU32],
    bytes: usize,
}

impl<'a> PortWords<'a> {
    /// Words of the region of a port for messages of `bytes` bytes.
    pub const fn words_for(bytes: usize) -> usize {
        2 + words_for_bytes(bytes)
    }

    /// The port for messages of `bytes` bytes kept at the start of `region`
    /// (zeros: empty).
    ///
    /// # Panics
    ///
    /// If the region is shorter than [`words_for(bytes)`](Self::words_for).
    pub fn new(region: &'a [AtomicU32], bytes: usize) -> Self {
        let w = take_words(region, Self::words_for(bytes), "port");
        PortWords {
            state: &w[0],
            sleepers: &w[1],
            message: &w[2..],
            bytes,
        }
    }

    /// Bytes of one message.
    pub fn message_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a message waits for a receiver now.
    pub fn is_full(&self) -> bool {
        // Relaxed: a snapshot to look at, pairs with nothing.
        self.state.load(Ordering::Relaxed) == port_state::FULL
    }

    /// Moves the state on and wakes everyone waiting on it.
    fn set<P: Park + ?Sized>(&self, state: u32, park: &P) {
        // SeqCst: the Release half publishes what we did before (the message,
        // or our copy of it); the total order is for `notify`.
        self.state.store(state, Ordering::SeqCst);
        notify(self.state, self.sleepers, park, ALL);
    }

    /// Sends `message`: waits until the port is free, copies it in, and waits
    /// until a receiver has copied it out ([`offer`](Self::offer), then
    /// [`collect`](Self::collect), with no deadline).
    ///
    /// # Panics
    ///
    /// If `message` is not exactly [`message_bytes`](Self::message_bytes)
    /// long (checked before anything is touched).
    pub fn send<P: Park + ?Sized>(&self, message: &[u8], park: &P) {
        self.offer(message, park, None);
        self.collect(park, None);
    }

    /// The first half of a send: waits until the port is free, copies
    /// `message` in and hands it to the receivers; `false` (nothing done) if
    /// `deadline` passed first. After `true` the port is this sender's until
    /// [`collect`](Self::collect) has seen the message taken.
    ///
    /// # Panics
    ///
    /// If `message` is not exactly [`message_bytes`](Self::message_bytes) long.
    pub fn offer<P: Park + ?Sized>(
        &self,
        message: &[u8],
        park: &P,
        deadline: Option<Instant>,
    ) -> bool {
        assert_eq!(message.len(), self.bytes, "a port message has a fixed size");
        let free = wait_for(self.state, self.sleepers, park, deadline, |s| {
            // SeqCst: see `wait_for`. Acquire: pairs with the previous sender's
            // Release store of EMPTY, which came after its receiver's copy.
            s == port_state::EMPTY
                && self
                    .state
                    .compare_exchange(s, port_state::WRITING, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
        });
        if free {
            store_bytes(self.message, message);
            // Release (in SeqCst): pairs with the receiver's Acquire claim of FULL.
            self.set(port_state::FULL, park);
        }
        free
    }

    /// The second half of a send: waits until a receiver has taken the
    /// offered message, then frees the port; `false` if `deadline` passed
    /// first (the message is still offered: call again).
    pub fn collect<P: Park + ?Sized>(&self, park: &P, deadline: Option<Instant>) -> bool {
        // Acquire (in the load of wait_for): pairs with the receiver's Release
        // store of TAKEN, so its copy is done before we free the port.
        let taken = wait_for(self.state, self.sleepers, park, deadline, |s| {
            s == port_state::TAKEN
        });
        if taken {
            self.set(port_state::EMPTY, park);
        }
        taken
    }

    /// Receives a message into `out`, waiting for a sender; `false` if
    /// `deadline` passed first ([`claim`](Self::claim), then
    /// [`taken`](Self::taken)).
    ///
    /// # Panics
    ///
    /// If `out` is not exactly [`message_bytes`](Self::message_bytes) long.
    pub fn receive<P: Park + ?Sized>(
        &self,
        out: &mut [u8],
        park: &P,
        deadline: Option<Instant>,
    ) -> bool {
        let claimed = self.claim(out, park, deadline);
        if claimed {
            self.taken(park);
        }
        claimed
    }

    /// Receives a message into `out` if one waits now.
    ///
    /// # Panics
    ///
    /// If `out` is not exactly [`message_bytes`](Self::message_bytes) long.
    pub fn try_receive<P: Park + ?Sized>(&self, out: &mut [u8], park: &P) -> bool {
        let claimed = self.try_claim(out);
        if claimed {
            self.taken(park);
        }
        claimed
    }

    /// The first half of a receive: waits for a message, claims it and copies
    /// it into `out`, without telling its sender yet; `false` if `deadline`
    /// passed first. A `true` must be followed by [`taken`](Self::taken) (the
    /// sender's send returns) or [`unclaim`](Self::unclaim) (the message is
    /// offered again): the port stays busy until then. This is how a receiver
    /// on another host is served: its copy travels first, `taken` comes when
    /// it has it.
    ///
    /// # Panics
    ///
    /// If `out` is not exactly [`message_bytes`](Self::message_bytes) long.
    pub fn claim<P: Park + ?Sized>(
        &self,
        out: &mut [u8],
        park: &P,
        deadline: Option<Instant>,
    ) -> bool {
        assert_eq!(out.len(), self.bytes, "a port message has a fixed size");
        let claimed = wait_for(self.state, self.sleepers, park, deadline, |s| {
            // SeqCst: see `wait_for`. Acquire: pairs with the sender's Release
            // store of FULL, so its message is visible.
            s == port_state::FULL
                && self
                    .state
                    .compare_exchange(s, port_state::READING, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
        });
        if claimed {
            load_bytes(self.message, out);
        }
        claimed
    }

    /// [`claim`](Self::claim) if a message waits now.
    ///
    /// # Panics
    ///
    /// If `out` is not exactly [`message_bytes`](Self::message_bytes) long.
    pub fn try_claim(&self, out: &mut [u8]) -> bool {
        assert_eq!(out.len(), self.bytes, "a port message has a fixed size");
        // Acquire: pairs with the sender's Release store of FULL.
        let claimed = self
            .state
            .compare_exchange(
                port_state::FULL,
                port_state::READING,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok();
        if claimed {
            load_bytes(self.message, out);
        }
        claimed
    }

    /// Ends a [`claim`](Self::claim): the message is taken, its sender's
    /// [`collect`](Self::collect) returns. Only after a successful claim.
    pub fn taken<P: Park + ?Sized>(&self, park: &P) {
        // Release (in SeqCst): pairs with the sender's Acquire load of TAKEN,
        // so our copy is done before it frees the port for the next message.
        self.set(port_state::TAKEN, park);
    }

    /// Gives a claimed message back (its receiver went away before it had
    /// it): it waits for another receiver. Only after a successful claim.
    pub fn unclaim<P: Park + ?Sized>(&self, park: &P) {
        // Release (in SeqCst): the message words are unchanged; pairs with the
        // next claimer's Acquire as the sender's store of FULL did.
        self.set(port_state::FULL, park);
    }

    /// Whether an offered message was taken and waits for its sender's
    /// [`collect`](Self::collect) (a snapshot).
    pub fn is_taken(&self) -> bool {
        // Relaxed: a snapshot to look at; `collect` does the Acquire.
        self.state.load(Ordering::Relaxed) == port_state::TAKEN
    }
}

impl fmt::Debug for PortWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortWords")
            .field("message_bytes", &self.bytes)
            // Relaxed: a snapshot to look at.
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

/// Word index of `head` in a ring's region (the consumer's line pair).
const HEAD: usize = 0;
/// Word index of the consumer's sleeper count.
const CONSUMER_SLEEPERS: usize = 1;
/// Word index of `tail` (the producer's line pair, 128 bytes on).
const TAIL: usize = 32;
/// Word index of the producer's sleeper count.
const PRODUCER_SLEEPERS: usize = 33;
/// Word index of the first slot.
const SLOTS: usize = 64;

/// A bounded single-producer single-consumer ring of fixed-size messages in
/// words the caller owns: the FIFO hub.
///
/// `head` (next position to read, stored by the consumer only) and `tail`
/// (next position to write, stored by the producer only) run freely over
/// `u32` and wrap; `tail - head` is the number of messages. Each side keeps
/// its private place in a cursor ([`RingProducer`], [`RingConsumer`]), made
/// from the shared indices, so a process can attach to a ring another made.
/// The indices sit 128 bytes apart, each with the sleeper count its owner
/// writes. (The in-process typed ring is [`crate::sync::spsc`].)
///
/// The caller guarantees that at most one producer and one consumer are
/// attached at a time (`ictus-exec` claims the ends by name).
#[derive(Clone, Copy)]
pub struct Ring<'a> {
    region: &'a [AtomicU32],
    capacity: u32,
    bytes: usize,
    slot_words: usize,
}

impl<'a> Ring<'a> {
    /// Words of the region of a ring of `capacity` messages of `bytes` bytes.
    pub const fn words_for(capacity: u32, bytes: usize) -> usize {
        SLOTS + capacity as usize * words_for_bytes(bytes)
    }

    /// The ring kept at the start of `region` (zeros: empty).
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above `2^31`, or the region is shorter than
    /// [`words_for`](Self::words_for).
    pub fn new(region: &'a [AtomicU32], capacity: u32, bytes: usize) -> Self {
        assert!(
            (1..=1 << 31).contains(&capacity),
            "a ring holds 1 to 2^31 messages, not {capacity}"
        );
        let region = take_words(region, Self::words_for(capacity, bytes), "ring");
        Ring {
            region,
            capacity,
            bytes,
            slot_words: words_for_bytes(bytes),
        }
    }

    /// Messages the ring holds when full.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Bytes of one message.
    pub fn message_bytes(&self) -> usize {
        self.bytes
    }

    /// Messages in the ring now (a snapshot).
    pub fn len(&self) -> u32 {
        // Relaxed (both): a snapshot for counting only, pairs with nothing.
        let head = self.region[HEAD].load(Ordering::Relaxed);
        let tail = self.region[TAIL].load(Ordering::Relaxed);
        tail.wrapping_sub(head).min(self.capacity)
    }

    /// Whether the ring is empty now (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The producer's cursor, starting at the shared `tail`.
    pub fn producer(&self) -> RingProducer {
        // Acquire (both): pairs with the Release stores of a previous producer
        // (tail) and of the consumer (head).
        RingProducer {
            tail: self.region[TAIL].load(Ordering::Acquire),
            cached_head: self.region[HEAD].load(Ordering::Acquire),
        }
    }

    /// The consumer's cursor, starting at the shared `head`.
    pub fn consumer(&self) -> RingConsumer {
        // Acquire (both): as in `producer`.
        RingConsumer {
            head: self.region[HEAD].load(Ordering::Acquire),
            cached_tail: self.region[TAIL].load(Ordering::Acquire),
        }
    }

    /// The words of the slot of position `pos`.
    fn slot(&self, pos: u32) -> &'a [AtomicU32] {
        let start = SLOTS + (pos % self.capacity) as usize * self.slot_words;
        &self.region[start..start + self.slot_words]
    }

    /// Appends `message` unless the ring is full; wakes a sleeping consumer.
    ///
    /// # Panics
    ///
    /// If `message` is not exactly [`message_bytes`](Self::message_bytes) long.
    #[inline]
    pub fn try_push<P: Park + ?Sized>(
        &self,
        cursor: &mut RingProducer,
        message: &[u8],
        park: &P,
    ) -> bool {
        assert_eq!(message.len(), self.bytes, "a ring message has a fixed size");
        if cursor.tail.wrapping_sub(cursor.cached_head) >= self.capacity {
            // Acquire: pairs with the SeqCst (Release) store of head in
            // `try_pop`, so the consumer's copy out of the slot we reuse is done.
            cursor.cached_head = self.region[HEAD].load(Ordering::Acquire);
            if cursor.tail.wrapping_sub(cursor.cached_head) >= self.capacity {
                return false;
            }
        }
        store_bytes(self.slot(cursor.tail), message);
        cursor.tail = cursor.tail.wrapping_add(1);
        // SeqCst: Release pairs with the consumer's Acquire load of tail (the
        // message is visible); the total order is for `notify`.
        self.region[TAIL].store(cursor.tail, Ordering::SeqCst);
        notify(&self.region[TAIL], &self.region[CONSUMER_SLEEPERS], park, 1);
        true
    }

    /// Appends a message of `head` then `body` (together at most
    /// [`message_bytes`](Self::message_bytes); `head` a whole number of words)
    /// unless the ring is full, copying only those bytes, in one copy of
    /// memory each: the rest of the slot keeps what it held, so a short message
    /// in a ring of large slots costs its own length, and a large one a
    /// `memcpy`. The message's length is the caller's to carry (in
    /// `head`). Wakes a sleeping consumer.
    ///
    /// # Panics
    ///
    /// If the parts are longer than a message, or `head` is not a whole
    /// number of words.
    #[inline]
    pub fn try_push_parts<P: Park + ?Sized>(
        &self,
        cursor: &mut RingProducer,
        head: &[u8],
        body: &[u8],
        park: &P,
    ) -> bool {
        assert!(
            head.len() + body.len() <= self.bytes && head.len().is_multiple_of(WORD_BYTES),
            "a ring message has at most {} bytes, with a head of whole words",
            self.bytes
        );
        if cursor.tail.wrapping_sub(cursor.cached_head) >= self.capacity {
            // Acquire: as in `try_push`.
            cursor.cached_head = self.region[HEAD].load(Ordering::Acquire);
            if cursor.tail.wrapping_sub(cursor.cached_head) >= self.capacity {
                return false;
            }
        }
        let slot = self.slot(cursor.tail);
        let head_words = head.len() / WORD_BYTES;
        copy_into(&slot[..head_words], head);
        copy_into(&slot[head_words..], body);
        cursor.tail = cursor.tail.wrapping_add(1);
        // SeqCst: as in `try_push`.
        self.region[TAIL].store(cursor.tail, Ordering::SeqCst);
        notify(&self.region[TAIL], &self.region[CONSUMER_SLEEPERS], park, 1);
        true
    }

    /// Appends `message`, waiting while the ring is full; `false` if
    /// `deadline` passed first.
    pub fn push<P: Park + ?Sized>(
        &self,
        cursor: &mut RingProducer,
        message: &[u8],
        park: &P,
        deadline: Option<Instant>,
    ) -> bool {
        loop {
            if self.try_push(cursor, message, park) {
                return true;
            }
            let tail = cursor.tail;
            let room = wait_for(
                &self.region[HEAD],
                &self.region[PRODUCER_SLEEPERS],
                park,
                deadline,
                |head| tail.wrapping_sub(head) < self.capacity,
            );
            if !room {
                return false;
            }
        }
    }

    /// Takes the oldest message into `out` unless the ring is empty; wakes a
    /// sleeping producer.
    ///
    /// # Panics
    ///
    /// If `out` is not exactly [`message_bytes`](Self::message_bytes) long.
    #[inline]
    pub fn try_pop<P: Park + ?Sized>(
        &self,
        cursor: &mut RingConsumer,
        out: &mut [u8],
        park: &P,
    ) -> bool {
        assert_eq!(out.len(), self.bytes, "a ring message has a fixed size");
        if cursor.cached_tail == cursor.head {
            // Acquire: pairs with the SeqCst (Release) store of tail in
            // `try_push`, so the producer's copy into the slot is visible.
            cursor.cached_tail = self.region[TAIL].load(Ordering::Acquire);
            if cursor.cached_tail == cursor.head {
                return false;
            }
        }
        load_bytes(self.slot(cursor.head), out);
        cursor.head = cursor.head.wrapping_add(1);
        // SeqCst: Release pairs with the producer's Acquire load of head (our
        // copy is done before it reuses the slot); the total order is for
        // `notify`.
        self.region[HEAD].store(cursor.head, Ordering::SeqCst);
        notify(&self.region[HEAD], &self.region[PRODUCER_SLEEPERS], park, 1);
        true
    }

    /// Takes the oldest message into `out`, waiting while the ring is empty;
    /// `false` if `deadline` passed first.
    pub fn pop<P: Park + ?Sized>(
        &self,
        cursor: &mut RingConsumer,
        out: &mut [u8],
        park: &P,
        deadline: Option<Instant>,
    ) -> bool {
        loop {
            if self.try_pop(cursor, out, park) {
                return true;
            }
            let head = cursor.head;
            let some = wait_for(
                &self.region[TAIL],
                &self.region[CONSUMER_SLEEPERS],
                park,
                deadline,
                |tail| tail != head,
            );
            if !some {
                return false;
            }
        }
    }
}

impl fmt::Debug for Ring<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity)
            .field("message_bytes", &self.bytes)
            .field("len", &self.len())
            .finish()
    }
}

/// The producer's private place in a [`Ring`].
#[derive(Clone, Copy, Debug)]
pub struct RingProducer {
    /// Our position; equal to the shared tail after every push.
    tail: u32,
    /// The last head we loaded; the consumer may be ahead of it.
    cached_head: u32,
}

/// The consumer's private place in a [`Ring`].
#[derive(Clone, Copy, Debug)]
pub struct RingConsumer {
    /// Our position; equal to the shared head after every pop.
    head: u32,
    /// The last tail we loaded; the producer may be ahead of it.
    cached_tail: u32,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Yields the CPU while waiting: two spinning threads on a loaded machine
    /// with few CPUs would otherwise burn whole time slices waiting for each other.
    struct YieldPark;

    impl Park for YieldPark {
        fn spins(&self) -> u32 {
            10
        }

        fn park(&self, _word: &AtomicU32, _expected: u32, _deadline: Option<Instant>) {
            std::thread::yield_now();
        }

        fn unpark(&self, _word: &AtomicU32, _count: u32) {}
    }

    fn region(n: usize) -> Arc<[AtomicU32]> {
        (0..n).map(|_| AtomicU32::new(0)).collect()
    }

    #[test]
    fn a_semaphore_counts_tokens() {
        let words = region(SemaphoreWords::WORDS);
        let sut = SemaphoreWords::new(&words);
        sut.init(2);
        assert!(sut.try_take());
        assert!(sut.take(&SpinPark, None));
        assert!(!sut.try_take());
        let soon = Instant::now() + Duration::from_millis(1);
        assert!(!sut.take(&SpinPark, Some(soon)), "times out with no token");
        assert!(sut.give(&SpinPark));
        assert_eq!(sut.count(), 1);
        sut.init(u32::MAX);
        assert!(!sut.give(&SpinPark), "the count saturates");
        assert!(format!("{sut:?}").contains("count"));
    }

    #[test]
    fn an_event_releases_one_wait_per_raise() {
        let words = region(EventWords::WORDS);
        let sut = EventWords::new(&words);
        assert!(!sut.try_wait());
        sut.raise(&SpinPark);
        sut.raise(&SpinPark);
        assert!(sut.is_raised());
        assert!(sut.wait(&SpinPark, None));
        assert!(!sut.is_raised());
        let soon = Instant::now() + Duration::from_millis(1);
        assert!(!sut.wait(&SpinPark, Some(soon)));
    }

    #[test]
    fn a_semaphore_loop_between_two_threads_passes_every_token() {
        const ROUNDS: u32 = if cfg!(miri) { 20 } else { 2_000 };
        let words = region(2 * SemaphoreWords::WORDS);
        let other = Arc::clone(&words);
        let peer = std::thread::spawn(move || {
            let (ping, pong) = other.split_at(SemaphoreWords::WORDS);
            let (ping, pong) = (SemaphoreWords::new(ping), SemaphoreWords::new(pong));
            for _ in 0..ROUNDS {
                assert!(ping.take(&YieldPark, None));
                pong.give(&YieldPark);
            }
        });
        let (ping, pong) = words.split_at(SemaphoreWords::WORDS);
        let (ping, pong) = (SemaphoreWords::new(ping), SemaphoreWords::new(pong));
        for _ in 0..ROUNDS {
            ping.give(&YieldPark);
            assert!(pong.take(&YieldPark, None));
        }
        peer.join().unwrap();
        assert_eq!((ping.count(), pong.count()), (0, 0));
    }

    #[test]
    fn a_port_hands_each_message_to_one_receiver_and_waits_for_it() {
        const MESSAGES: u8 = if cfg!(miri) { 10 } else { 200 };
        let words = region(PortWords::words_for(7));
        let other = Arc::clone(&words);
        let sender = std::thread::spawn(move || {
            let sut = PortWords::new(&other, 7);
            for i in 0..MESSAGES {
                sut.send(&[i; 7], &YieldPark);
            }
        });
        let sut = PortWords::new(&words, 7);
        let mut out = [0; 7];
        for i in 0..MESSAGES {
            assert!(sut.receive(&mut out, &YieldPark, None));
            assert_eq!(out, [i; 7]);
        }
        sender.join().unwrap();
        assert!(!sut.try_receive(&mut out, &YieldPark));
        assert!(!sut.is_full());
        assert_eq!(sut.message_bytes(), 7);
    }

    #[test]
    fn a_ring_passes_messages_in_order_between_threads() {
        const MESSAGES: u32 = if cfg!(miri) { 50 } else { 20_000 };
        let words = region(Ring::words_for(4, 6));
        let other = Arc::clone(&words);
        let producer = std::thread::spawn(move || {
            let sut = Ring::new(&other, 4, 6);
            let mut cursor = sut.producer();
            for i in 0..MESSAGES {
                let mut msg = [0; 6];
                msg[..4].copy_from_slice(&i.to_le_bytes());
                assert!(sut.push(&mut cursor, &msg, &YieldPark, None));
            }
        });
        let sut = Ring::new(&words, 4, 6);
        let mut cursor = sut.consumer();
        let mut out = [0; 6];
        for i in 0..MESSAGES {
            assert!(sut.pop(&mut cursor, &mut out, &YieldPark, None));
            assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), i);
        }
        producer.join().unwrap();
        assert!(sut.is_empty());
    }

    #[test]
    fn a_ring_region_keeps_the_two_indices_128_bytes_apart() {
        assert_eq!((TAIL - HEAD) * WORD_BYTES, 128);
        assert_eq!((SLOTS - TAIL) * WORD_BYTES, 128);
        assert_eq!(Ring::words_for(3, 5), 64 + 3 * 2);
    }

    #[test]
    fn a_cursor_made_later_continues_where_the_ring_is() {
        let words = region(Ring::words_for(2, 1));
        let sut = Ring::new(&words, 2, 1);
        let mut p = sut.producer();
        assert!(sut.try_push(&mut p, &[1], &SpinPark));
        let mut p2 = sut.producer();
        assert!(sut.try_push(&mut p2, &[2], &SpinPark));
        assert!(!sut.try_push(&mut p2, &[3], &SpinPark));
        let mut c = sut.consumer();
        let mut out = [0];
        assert!(sut.try_pop(&mut c, &mut out, &SpinPark));
        assert_eq!(out, [1]);
        let mut c2 = sut.consumer();
        assert!(sut.try_pop(&mut c2, &mut out, &SpinPark));
        assert_eq!(out, [2]);
        let soon = Instant::now() + Duration::from_millis(1);
        assert!(!sut.pop(&mut c2, &mut out, &SpinPark, Some(soon)));
    }

    #[test]
    fn a_message_in_parts_stores_only_its_bytes_and_refuses_when_full() {
        let words = region(Ring::words_for(2, 16));
        let sut = Ring::new(&words, 2, 16);
        let mut p = sut.producer();
        // A full-length message first, so the slot holds bytes to keep.
        assert!(sut.try_push(&mut p, &[9; 16], &SpinPark));
        let mut c = sut.consumer();
        let mut out = [0; 16];
        assert!(sut.try_pop(&mut c, &mut out, &SpinPark));
        // Slot 1, then slot 0 again: a 4-byte head and a 3-byte body.
        assert!(sut.try_push_parts(&mut p, &[1, 2, 3, 4], &[5, 6, 7], &SpinPark));
        assert!(sut.try_push_parts(&mut p, &[1, 2, 3, 4], &[5, 6, 7], &SpinPark));
        assert!(!sut.try_push_parts(&mut p, &[1, 2, 3, 4], &[], &SpinPark));
        assert!(sut.try_pop(&mut c, &mut out, &SpinPark));
        assert_eq!(&out[..7], &[1, 2, 3, 4, 5, 6, 7]);
        assert!(sut.try_pop(&mut c, &mut out, &SpinPark));
        // The bytes past the message are what slot 0 held before.
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 9, 9, 9, 9, 9, 9, 9, 9, 9]);
    }
}
