//! States and modes (seed 003): OFF, PAUSE and RUN, plus the modes a schedule
//! declares; transitions the coordinator commands at a frame boundary; the
//! acknowledgements subsystems give; and the non-real-time setup channel that
//! serialises setup data between subsystems (seed 003's SETUP1/SETUP2 problem).
//!
//! A transition is one 64-bit word, `(previous, next, from_frame)`: every subsystem
//! reads it at each release and computes the state *of its frame*, so a subsystem
//! running late still sees the state its frame was in, and all subsystems switch at
//! the same frame, whichever process they run in.
//!
//! ```
//! use ictus_exec::state::{StateId, StateWord};
//! let w = StateWord { previous: StateId::OFF, next: StateId::RUN, from_frame: 120 };
//! let back = StateWord::unpack(w.pack());
//! assert_eq!(back.at(119), StateId::OFF);
//! assert_eq!(back.at(120), StateId::RUN);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;

/// The most user modes a schedule may declare (the state fits in a byte).
pub const MAX_MODES: usize = 200;

/// Frames encodable in a state word (48 bits: 2,200 years of 250 us frames).
const FRAME_BITS: u32 = 48;
const FRAME_MASK: u64 = (1 << FRAME_BITS) - 1;

/// A state or mode, by index in the run's [`States`]: 0 OFF, 1 PAUSE, 2 RUN, then the
/// schedule's modes in order. `Copy`, so the hot path passes it freely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateId(pub u8);

impl StateId {
    /// OFF: subsystems idle.
    pub const OFF: StateId = StateId(0);
    /// PAUSE: the simulation holds still.
    pub const PAUSE: StateId = StateId(1);
    /// RUN: the simulation runs.
    pub const RUN: StateId = StateId(2);
}

/// The states of a run: OFF, PAUSE, RUN and the schedule's modes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct States {
    names: Vec<String>,
}

impl States {
    /// OFF, PAUSE, RUN and `modes` (at most [`MAX_MODES`], checked by the schedule).
    pub fn new(modes: &[String]) -> States {
        let mut names: Vec<String> = ["off", "pause", "run"].map(String::from).to_vec();
        names.extend(modes.iter().take(MAX_MODES).map(|m| m.to_ascii_lowercase()));
        States { names }
    }

    /// The state called `name` (case-insensitive).
    pub fn id(&self, name: &str) -> Option<StateId> {
        let lower = name.to_ascii_lowercase();
        self.names
            .iter()
            .position(|n| *n == lower)
            .map(|i| StateId(i as u8))
    }

    /// The name of `id`, or `?` for an index the run does not have.
    pub fn name(&self, id: StateId) -> &str {
        self.names.get(id.0 as usize).map_or("?", String::as_str)
    }

    /// Every state's name, OFF first.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// A commanded transition: frames before `from_frame` are in `previous`, the others
/// in `next`. Packed into one atomic word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateWord {
    /// The state before the transition.
    pub previous: StateId,
    /// The state from `from_frame` on.
    pub next: StateId,
    /// The first frame in `next` (below 2^48).
    pub from_frame: u64,
}

impl StateWord {
    /// A run that is in `state` from frame 0.
    pub fn constant(state: StateId) -> StateWord {
        StateWord {
            previous: state,
            next: state,
            from_frame: 0,
        }
    }

    /// The state of `frame`.
    #[inline]
    pub fn at(&self, frame: u64) -> StateId {
        if frame >= self.from_frame {
            self.next
        } else {
            self.previous
        }
    }

    /// The word: previous in the top byte, next below it, the frame in the low 48 bits.
    pub fn pack(&self) -> u64 {
        (u64::from(self.previous.0) << 56)
            | (u64::from(self.next.0) << FRAME_BITS)
            | (self.from_frame & FRAME_MASK)
    }

    /// The inverse of [`pack`](Self::pack).
    #[inline]
    pub fn unpack(word: u64) -> StateWord {
        StateWord {
            previous: StateId((word >> 56) as u8),
            next: StateId((word >> FRAME_BITS) as u8),
            from_frame: word & FRAME_MASK,
        }
    }
}

/// An acknowledgement: the state a subsystem says it has reached, and the frame in
/// which it said so. Packed like a [`StateWord`] (state in the top byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The state acknowledged.
    pub state: StateId,
    /// The frame of the acknowledgement.
    pub frame: u64,
}

impl Ack {
    /// The packed word; `u64::MAX` is reserved for "nothing acknowledged yet".
    pub fn pack(&self) -> u64 {
        (u64::from(self.state.0) << 56) | (self.frame & FRAME_MASK)
    }

    /// The inverse of [`pack`](Self::pack); `None` for the "nothing yet" word.
    pub fn unpack(word: u64) -> Option<Ack> {
        (word != u64::MAX).then_some(Ack {
            state: StateId((word >> 56) as u8),
            frame: word & FRAME_MASK,
        })
    }

    /// The word of "nothing acknowledged yet".
    pub const NONE: u64 = u64::MAX;
}

/// The coordinator's record of the transitions it commanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLog {
    /// `(first frame, state)`, in increasing frame order; the first entry is frame 0.
    changes: Vec<(u64, StateId)>,
}

impl StateLog {
    /// A run that starts in `initial` at frame 0.
    pub fn new(initial: StateId) -> StateLog {
        StateLog {
            changes: vec![(0, initial)],
        }
    }

    /// The state commanded last.
    pub fn current(&self) -> StateId {
        self.changes.last().map_or(StateId::OFF, |c| c.1)
    }

    /// The frame from which [`current`](Self::current) holds.
    pub fn since(&self) -> u64 {
        self.changes.last().map_or(0, |c| c.0)
    }

    /// Records a transition to `next` from `frame` and returns the word that
    /// announces it. A frame earlier than the last transition is moved up to it.
    pub fn command(&mut self, next: StateId, frame: u64) -> StateWord {
        let frame = frame.max(self.since()).min(FRAME_MASK);
        while self.changes.last().is_some_and(|c| c.0 >= frame) {
            self.changes.pop();
        }
        let previous = if frame == 0 { next } else { self.at(frame - 1) };
        if previous != next || self.changes.is_empty() {
            self.changes.push((frame, next));
        }
        StateWord {
            previous,
            next,
            from_frame: frame,
        }
    }

    /// The state of `frame`.
    pub fn at(&self, frame: u64) -> StateId {
        self.changes
            .iter()
            .rev()
            .find(|c| c.0 <= frame)
            .map_or(StateId::OFF, |c| c.1)
    }

    /// How many of the frames `0..end` were in `state`.
    pub fn frames_in(&self, state: StateId, end: u64) -> u64 {
        let mut total = 0;
        for (i, &(from, s)) in self.changes.iter().enumerate() {
            let to = self.changes.get(i + 1).map_or(end, |c| c.0).min(end);
            if s == state && to > from {
                total += to - from;
            }
        }
        total
    }

    /// Every transition, as `(first frame, state)`.
    pub fn changes(&self) -> &[(u64, StateId)] {
        &self.changes
    }
}

/// A subsystem that has not acknowledged the state commanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The subsystem.
    pub subsystem: String,
    /// The state commanded.
    pub commanded: StateId,
    /// The last state it acknowledged, if any.
    pub acknowledged: Option<StateId>,
    /// Frames since the transition took effect.
    pub frames: u64,
}

/// Who has not acknowledged `word` by `now_frame`: every subsystem whose last
/// acknowledgement is not `word.next` made at or after `word.from_frame`. Nobody is
/// pending before the transition takes effect.
pub fn pending<'a>(
    word: StateWord,
    now_frame: u64,
    acks: impl IntoIterator<Item = (&'a str, Option<Ack>)>,
) -> Vec<Pending> {
    if now_frame < word.from_frame {
        return Vec::new();
    }
    acks.into_iter()
        .filter(|(_, ack)| !ack.is_some_and(|a| a.state == word.next && a.frame >= word.from_frame))
        .map(|(name, ack)| Pending {
            subsystem: name.to_string(),
            commanded: word.next,
            acknowledged: ack.map(|a| a.state),
            frames: now_frame - word.from_frame,
        })
        .collect()
}

impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} has not acknowledged state #{} for {} frames",
            self.subsystem, self.commanded.0, self.frames
        )
    }
}

/// Why a request on the setup channel (the setup keys store) failed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SetupChannelError {
    /// Nobody published the key within the time asked.
    #[error("setup key '{key}' was not published within {waited:?}")]
    Timeout {
        /// The key.
        key: String,
        /// How long the request waited.
        waited: Duration,
    },
    /// The coordinator could not be reached (a child whose run ended).
    #[error("the setup channel is closed: {0}")]
    Closed(String),
    /// A put of a new key into a store that holds [`SetupLimits::max_keys`] keys.
    /// Across hosts this text is the answer the asking host receives.
    #[error("setup store full: {limit} keys (the limit); key '{}' refused", .key.escape_debug())]
    TooManyKeys {
        /// The key refused.
        key: String,
        /// The most keys the store holds.
        limit: usize,
    },
    /// A value larger than [`SetupLimits::max_value_bytes`].
    #[error(
        "value of '{}' is {bytes} bytes, over the {limit}-byte limit",
        .key.escape_debug()
    )]
    ValueTooLarge {
        /// The key refused.
        key: String,
        /// The size of the value refused.
        bytes: usize,
        /// The largest value the store takes.
        limit: usize,
    },
    /// A value that would take the store's values past
    /// [`SetupLimits::max_total_bytes`] all together.
    #[error(
        "setup store holds {held} bytes; '{}' ({bytes} bytes{}) would pass the {limit}-byte limit",
        .key.escape_debug(),
        replacing_note(*.replacing)
    )]
    TooManyBytes {
        /// The key refused.
        key: String,
        /// The bytes the store holds now, every value together.
        held: usize,
        /// The size of the value refused.
        bytes: usize,
        /// The size of the value under `key` that the put would have replaced (0
        /// for a new key).
        replacing: usize,
        /// The most bytes the store holds, every value together.
        limit: usize,
    },
}

/// ", replacing N" when a refused put would have replaced an N-byte value.
fn replacing_note(replacing: usize) -> String {
    if replacing == 0 {
        String::new()
    } else {
        format!(", replacing {replacing}")
    }
}

/// The most keys a [`SetupStore`] holds unless built with other [`SetupLimits`].
pub const SETUP_MAX_KEYS: usize = 4096;

/// The largest value a [`SetupStore`] takes (1 MiB) unless built with other
/// [`SetupLimits`].
pub const SETUP_MAX_VALUE_BYTES: usize = 1 << 20;

/// The most bytes a [`SetupStore`] holds, every value together (64 MiB), unless built
/// with other [`SetupLimits`]. Keys are not counted.
pub const SETUP_MAX_TOTAL_BYTES: usize = 64 << 20;

/// How much a [`SetupStore`] holds at most. Across hosts any peer of the run can put
/// values in the main host's store, so each dimension it can grow is bounded; a put
/// that would pass a limit is refused and changes nothing.
///
/// ```
/// use ictus_exec::state::{SetupChannelError, SetupLimits, SetupStore};
/// let sut = SetupStore::with_limits(SetupLimits { max_keys: 1, ..SetupLimits::DEFAULT });
/// sut.put("a", b"1".to_vec()).unwrap();
/// assert!(matches!(sut.put("b", b"2".to_vec()), Err(SetupChannelError::TooManyKeys { .. })));
/// assert_eq!((sut.len(), sut.bytes(), sut.refused()), (1, 1, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupLimits {
    /// The most keys.
    pub max_keys: usize,
    /// The largest value, in bytes.
    pub max_value_bytes: usize,
    /// The most bytes, every value together (keys not counted).
    pub max_total_bytes: usize,
}

impl SetupLimits {
    /// [`SETUP_MAX_KEYS`], [`SETUP_MAX_VALUE_BYTES`] and [`SETUP_MAX_TOTAL_BYTES`].
    pub const DEFAULT: SetupLimits = SetupLimits {
        max_keys: SETUP_MAX_KEYS,
        max_value_bytes: SETUP_MAX_VALUE_BYTES,
        max_total_bytes: SETUP_MAX_TOTAL_BYTES,
    };
}

impl Default for SetupLimits {
    fn default() -> SetupLimits {
        SetupLimits::DEFAULT
    }
}

/// Published setup values by key, with their total size and the puts refused.
#[derive(Debug, Default)]
struct Shelf {
    blobs: BTreeMap<String, Vec<u8>>,
    /// The sum of the values' lengths.
    bytes: usize,
    /// Puts refused for passing a limit.
    refused: u64,
}

impl Shelf {
    /// Whether `len` bytes under `key` stay within `limits`; a refusal is counted.
    fn admit(
        &mut self,
        limits: &SetupLimits,
        key: &str,
        len: usize,
    ) -> Result<(), SetupChannelError> {
        let verdict = self.within(limits, key, len);
        if verdict.is_err() {
            self.refused += 1;
        }
        verdict
    }

    /// Whether `len` bytes under `key` stay within `limits`: the value's own size,
    /// then a new key against the key count, then the total with the new value in
    /// place of the old one (so an overwrite of the same size always stays within).
    fn within(&self, limits: &SetupLimits, key: &str, len: usize) -> Result<(), SetupChannelError> {
        if len > limits.max_value_bytes {
            return Err(SetupChannelError::ValueTooLarge {
                key: key.to_string(),
                bytes: len,
                limit: limits.max_value_bytes,
            });
        }
        let replacing = self.blobs.get(key).map(Vec::len);
        if replacing.is_none() && self.blobs.len() >= limits.max_keys {
            return Err(SetupChannelError::TooManyKeys {
                key: key.to_string(),
                limit: limits.max_keys,
            });
        }
        let replacing = replacing.unwrap_or(0);
        if (self.bytes - replacing).saturating_add(len) > limits.max_total_bytes {
            return Err(SetupChannelError::TooManyBytes {
                key: key.to_string(),
                held: self.bytes,
                bytes: len,
                replacing,
                limit: limits.max_total_bytes,
            });
        }
        Ok(())
    }

    /// Stores `value` under `key` (admitted first), keeping the total.
    fn insert(&mut self, key: &str, value: Vec<u8>) {
        self.bytes += value.len();
        if let Some(old) = self.blobs.insert(key.to_string(), value) {
            self.bytes -= old.len();
        }
    }
}

/// The setup store: keyed blobs that subsystems publish and fetch outside the real-time
/// path. A fetch waits until the key is published, so "A produces, B consumes" needs
/// no SETUP1/SETUP2 states and no sub-state variables: the store serialises them.
/// The coordinator owns it and serves it to child processes over the control socket.
///
/// Across hosts, a node's store has an *upstream*: the main coordinator's store, which
/// every host's subsystems share (seed 003's client/server setup channel). A put goes
/// there; a get asks there (every 20 ms) until the value is published or it times out.
///
/// A store holds at most its [`SetupLimits`] ([`SetupLimits::DEFAULT`] unless built
/// with [`with_limits`](Self::with_limits)): the main host's store takes puts from
/// every peer of the run, and a peer must not be able to fill its memory.
#[derive(Clone, Debug, Default)]
pub struct SetupStore {
    inner: Arc<(Mutex<Shelf>, Condvar)>,
    limits: SetupLimits,
    upstream: Option<Arc<dyn SetupUpstream>>,
}

/// The store a node's setup requests go to: the main coordinator's, on another host.
pub trait SetupUpstream: Send + Sync + std::fmt::Debug {
    /// Publishes `value` under `key` there.
    fn put(&self, key: &str, value: &[u8]) -> Result<(), SetupChannelError>;
    /// The value under `key` there now, if published (a short request, never a wait
    /// for the value).
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, SetupChannelError>;
}

/// How often a get asks the upstream again while the value is not published.
const UPSTREAM_POLL: Duration = Duration::from_millis(20);

impl SetupStore {
    /// An empty store with the default limits ([`SetupLimits::DEFAULT`]).
    pub fn new() -> SetupStore {
        SetupStore::default()
    }

    /// An empty store that holds at most `limits`.
    pub fn with_limits(limits: SetupLimits) -> SetupStore {
        SetupStore {
            limits,
            ..SetupStore::default()
        }
    }

    /// A store whose requests go to `upstream` (a node's, across hosts), with the
    /// default limits.
    pub fn with_upstream(upstream: Arc<dyn SetupUpstream>) -> SetupStore {
        SetupStore {
            upstream: Some(upstream),
            ..SetupStore::default()
        }
    }

    fn shelf(&self) -> std::sync::MutexGuard<'_, Shelf> {
        self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `value` under `key` (replacing an earlier value) and wakes the
    /// waiters; with an upstream, publishes it there first (and fails if that fails).
    ///
    /// A put that would pass one of the store's [`SetupLimits`] is refused with
    /// [`SetupChannelError::ValueTooLarge`], [`SetupChannelError::TooManyKeys`] or
    /// [`SetupChannelError::TooManyBytes`], counted in [`refused`](Self::refused), and
    /// changes nothing. A replaced value's bytes are freed, so an overwrite of the
    /// same size is never refused. With an upstream, the limits are checked before
    /// the value crosses the network; the upstream checks its own.
    pub fn put(&self, key: &str, value: Vec<u8>) -> Result<(), SetupChannelError> {
        if let Some(up) = &self.upstream {
            self.shelf().admit(&self.limits, key, value.len())?;
            up.put(key, &value)?;
        }
        let mut shelf = self.shelf();
        // Checked again under the same lock as the insert: another put may have
        // come in while the upstream answered.
        shelf.admit(&self.limits, key, value.len())?;
        shelf.insert(key, value);
        drop(shelf);
        self.inner.1.notify_all();
        Ok(())
    }

    /// The limits the store holds to.
    pub fn limits(&self) -> SetupLimits {
        self.limits
    }

    /// How many keys are published here.
    pub fn len(&self) -> usize {
        self.shelf().blobs.len()
    }

    /// Whether nothing is published here.
    pub fn is_empty(&self) -> bool {
        self.shelf().blobs.is_empty()
    }

    /// The bytes of every value published here, together (keys not counted).
    pub fn bytes(&self) -> usize {
        self.shelf().bytes
    }

    /// How many puts this store refused for passing a limit (a refusal by the
    /// upstream is not counted here).
    pub fn refused(&self) -> u64 {
        self.shelf().refused
    }

    /// The value under `key`, waiting up to `timeout` for it to be published (here,
    /// or upstream when there is one).
    pub fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, SetupChannelError> {
        let (map, cv) = &*self.inner;
        let deadline = Instant::now() + timeout;
        let mut guard = map.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = guard.blobs.get(key) {
                return Ok(v.clone());
            }
            if let Some(up) = &self.upstream {
                drop(guard);
                if let Some(v) = up.try_get(key)? {
                    return Ok(v);
                }
                guard = map.lock().unwrap_or_else(|e| e.into_inner());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SetupChannelError::Timeout {
                    key: key.to_string(),
                    waited: timeout,
                });
            }
            let nap = if self.upstream.is_some() {
                left.min(UPSTREAM_POLL)
            } else {
                left
            };
            guard = cv
                .wait_timeout(guard, nap)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The value under `key` now, if published.
    pub fn try_get(&self, key: &str) -> Option<Vec<u8>> {
        self.shelf().blobs.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn states_are_named_case_insensitively() {
        let sut = States::new(&["Setup".to_string()]);
        assert_eq!(sut.id("RUN"), Some(StateId::RUN));
        assert_eq!(sut.id("setup"), Some(StateId(3)));
        assert_eq!(sut.name(StateId(3)), "setup");
        assert_eq!(sut.id("replay"), None);
    }

    #[test]
    fn the_log_counts_frames_per_state() {
        let mut sut = StateLog::new(StateId::OFF);
        sut.command(StateId::RUN, 10);
        sut.command(StateId::PAUSE, 25);
        sut.command(StateId::RUN, 30);
        assert_eq!(sut.frames_in(StateId::RUN, 40), 15 + 10);
        assert_eq!(sut.frames_in(StateId::OFF, 40), 10);
        assert_eq!(sut.frames_in(StateId::PAUSE, 27), 2);
        assert_eq!(sut.at(29), StateId::PAUSE);
    }

    #[test]
    fn a_command_at_frame_zero_replaces_the_initial_state() {
        let mut sut = StateLog::new(StateId::OFF);
        let w = sut.command(StateId::RUN, 0);
        assert_eq!(w, StateWord::constant(StateId::RUN));
        assert_eq!(sut.frames_in(StateId::RUN, 9), 9);
    }

    #[test]
    fn pending_names_who_has_not_acknowledged_and_for_how_long() {
        let w = StateWord {
            previous: StateId::OFF,
            next: StateId::RUN,
            from_frame: 100,
        };
        let acks = [
            (
                "a",
                Some(Ack {
                    state: StateId::RUN,
                    frame: 100,
                }),
            ),
            (
                "b",
                Some(Ack {
                    state: StateId::OFF,
                    frame: 3,
                }),
            ),
            ("c", None),
        ];
        assert!(pending(w, 99, acks).is_empty());
        let got = pending(w, 107, acks);
        let names: Vec<&str> = got.iter().map(|p| p.subsystem.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(got[0].frames, 7);
        assert_eq!(got[0].acknowledged, Some(StateId::OFF));
    }

    #[test]
    fn a_fetch_waits_for_the_publisher() {
        let sut = SetupStore::new();
        let producer = sut.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            producer.put("route", b"loop-3".to_vec()).unwrap();
        });
        assert_eq!(sut.get("route", Duration::from_secs(5)).unwrap(), b"loop-3");
        t.join().unwrap();
        assert!(matches!(
            sut.get("missing", Duration::from_millis(1)),
            Err(SetupChannelError::Timeout { .. })
        ));
    }

    /// A store with small limits: 3 keys, values up to 10 bytes, 20 bytes in all.
    fn small() -> SetupStore {
        SetupStore::with_limits(SetupLimits {
            max_keys: 3,
            max_value_bytes: 10,
            max_total_bytes: 20,
        })
    }

    /// Every key and value, the count of keys and the total: what a refused put
    /// must leave as it was.
    fn snapshot(sut: &SetupStore) -> (BTreeMap<String, Vec<u8>>, usize, usize) {
        let blobs = sut.shelf().blobs.clone();
        (blobs, sut.len(), sut.bytes())
    }

    #[test]
    fn the_defaults_are_the_documented_limits() {
        let sut = SetupStore::new();
        assert_eq!(sut.limits(), SetupLimits::DEFAULT);
        assert_eq!(
            SetupLimits::default(),
            SetupLimits {
                max_keys: 4096,
                max_value_bytes: 1_048_576,
                max_total_bytes: 67_108_864,
            }
        );
        assert!(sut.is_empty());
        assert_eq!((sut.len(), sut.bytes(), sut.refused()), (0, 0, 0));
    }

    #[test]
    fn a_value_over_the_limit_is_refused_and_changes_nothing() {
        let sut = SetupStore::new();
        sut.put("x", b"kept".to_vec()).unwrap();
        let before = snapshot(&sut);
        let err = sut.put("x", vec![0; 2_000_000]).unwrap_err();
        assert_eq!(
            err,
            SetupChannelError::ValueTooLarge {
                key: "x".into(),
                bytes: 2_000_000,
                limit: SETUP_MAX_VALUE_BYTES,
            }
        );
        assert_eq!(
            err.to_string(),
            "value of 'x' is 2000000 bytes, over the 1048576-byte limit"
        );
        assert_eq!(snapshot(&sut), before);
        assert_eq!(sut.try_get("x").unwrap(), b"kept");
        sut.put("y", vec![0; SETUP_MAX_VALUE_BYTES]).unwrap();
    }

    #[test]
    fn a_new_key_past_the_key_limit_is_refused_and_changes_nothing() {
        let sut = SetupStore::new();
        for i in 0..SETUP_MAX_KEYS {
            sut.put(&format!("k{i}"), Vec::new()).unwrap();
        }
        let before = snapshot(&sut);
        let err = sut.put("x", b"1".to_vec()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "setup store full: 4096 keys (the limit); key 'x' refused"
        );
        assert_eq!(snapshot(&sut), before);
        assert_eq!(sut.try_get("x"), None);
        // A key already there may still be replaced.
        sut.put("k7", b"new".to_vec()).unwrap();
        assert_eq!(sut.len(), SETUP_MAX_KEYS);
    }

    #[test]
    fn a_put_past_the_total_is_refused_and_changes_nothing() {
        let sut = small();
        sut.put("a", vec![1; 10]).unwrap();
        sut.put("b", vec![2; 8]).unwrap();
        let before = snapshot(&sut);
        let err = sut.put("x", vec![3; 3]).unwrap_err();
        assert_eq!(
            err,
            SetupChannelError::TooManyBytes {
                key: "x".into(),
                held: 18,
                bytes: 3,
                replacing: 0,
                limit: 20,
            }
        );
        assert_eq!(
            err.to_string(),
            "setup store holds 18 bytes; 'x' (3 bytes) would pass the 20-byte limit"
        );
        assert_eq!(snapshot(&sut), before);
        // Exactly at the limit is within: 18 - 8 + 10 = 20.
        sut.put("b", vec![2; 10]).unwrap();
        assert_eq!(sut.bytes(), 20);
        let before_full = snapshot(&sut);
        let err = sut.put("c", vec![4; 1]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "setup store holds 20 bytes; 'c' (1 bytes) would pass the 20-byte limit"
        );
        assert_eq!(snapshot(&sut), before_full);
        assert_ne!(before, before_full);
    }

    #[test]
    fn an_overwrite_counts_the_new_size_against_the_old() {
        let sut = small();
        sut.put("a", vec![1; 10]).unwrap();
        sut.put("b", vec![2; 10]).unwrap();
        // Full: the same size again is never refused, a smaller value frees bytes.
        sut.put("a", vec![9; 10]).unwrap();
        assert_eq!(sut.bytes(), 20);
        sut.put("a", vec![9; 4]).unwrap();
        sut.put("c", vec![3; 5]).unwrap();
        assert_eq!(sut.bytes(), 19);
        // 19 - 4 + 6 = 21: one byte too many.
        let before = snapshot(&sut);
        let err = sut.put("a", vec![9; 6]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "setup store holds 19 bytes; 'a' (6 bytes, replacing 4) would pass the 20-byte limit"
        );
        assert_eq!(snapshot(&sut), before);
        sut.put("a", vec![9; 5]).unwrap();
        assert_eq!((sut.len(), sut.bytes()), (3, 20));
    }

    #[test]
    fn refusals_are_counted() {
        let sut = small();
        sut.put("a", vec![0; 10]).unwrap();
        let _ = sut.put("a", vec![0; 11]).unwrap_err();
        sut.put("b", vec![0; 10]).unwrap();
        let _ = sut.put("c", vec![0; 1]).unwrap_err();
        sut.put("c", Vec::new()).unwrap();
        let _ = sut.put("d", Vec::new()).unwrap_err();
        assert_eq!(sut.refused(), 3);
        let clone = sut.clone();
        let _ = clone.put("e", Vec::new()).unwrap_err();
        assert_eq!(sut.refused(), 4, "clones share the store and its count");
    }

    #[test]
    fn a_key_in_a_refusal_is_escaped_to_one_line() {
        // The control socket answers one line; a key from a peer may hold anything.
        let sut = small();
        let err = sut.put("a\nb", vec![0; 11]).unwrap_err().to_string();
        assert_eq!(err, "value of 'a\\nb' is 11 bytes, over the 10-byte limit");
        let err = sut.put("a\nb", vec![0; 11]).unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
    }

    /// An upstream that records what reached it.
    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl SetupUpstream for Recorder {
        fn put(&self, key: &str, _value: &[u8]) -> Result<(), SetupChannelError> {
            self.0.lock().unwrap().push(key.to_string());
            Ok(())
        }
        fn try_get(&self, _key: &str) -> Result<Option<Vec<u8>>, SetupChannelError> {
            Ok(None)
        }
    }

    #[test]
    fn a_node_refuses_a_value_over_the_limit_before_it_crosses_the_network() {
        let up = Arc::new(Recorder::default());
        let sut = SetupStore::with_upstream(up.clone());
        assert!(matches!(
            sut.put("big", vec![0; SETUP_MAX_VALUE_BYTES + 1]),
            Err(SetupChannelError::ValueTooLarge { .. })
        ));
        sut.put("small", b"ok".to_vec()).unwrap();
        assert_eq!(*up.0.lock().unwrap(), ["small"]);
        assert_eq!((sut.len(), sut.bytes(), sut.refused()), (1, 2, 1));
    }

    proptest! {
        #[test]
        fn state_words_round_trip(p in any::<u8>(), n in any::<u8>(), f in 0u64..(1 << 48)) {
            let w = StateWord { previous: StateId(p), next: StateId(n), from_frame: f };
            prop_assert_eq!(StateWord::unpack(w.pack()), w);
            let a = Ack { state: StateId(n), frame: f };
            prop_assert_eq!(Ack::unpack(a.pack()), Some(a));
        }

        /// Against a map as the model: an accepted put is stored, a refused one
        /// changes nothing and is refused rightly (storing it would have passed a
        /// limit), the limits always hold, and `bytes()` is the sum of the values.
        #[test]
        fn random_puts_never_pass_the_limits(
            puts in prop::collection::vec((0u8..8, 0usize..16), 0..64),
        ) {
            let limits = SetupLimits { max_keys: 5, max_value_bytes: 12, max_total_bytes: 40 };
            let sut = SetupStore::with_limits(limits);
            let mut model = BTreeMap::<String, Vec<u8>>::new();
            let mut refusals = 0;
            for (i, (k, len)) in puts.into_iter().enumerate() {
                let key = format!("k{k}");
                let value = vec![i as u8; len];
                let mut after = model.clone();
                after.insert(key.clone(), value.clone());
                let after_bytes: usize = after.values().map(Vec::len).sum();
                let passes = len > limits.max_value_bytes
                    || after.len() > limits.max_keys
                    || after_bytes > limits.max_total_bytes;
                match sut.put(&key, value) {
                    Ok(()) => model = after,
                    Err(e) => {
                        prop_assert!(passes, "refused within the limits: {}", e);
                        refusals += 1;
                    }
                }
                prop_assert_eq!(&sut.shelf().blobs, &model);
                prop_assert!(sut.len() <= limits.max_keys);
                prop_assert!(sut.bytes() <= limits.max_total_bytes);
                prop_assert!(model.values().all(|v| v.len() <= limits.max_value_bytes));
                prop_assert_eq!(sut.bytes(), model.values().map(Vec::len).sum::<usize>());
                prop_assert_eq!(sut.refused(), refusals);
            }
        }
    }
}
