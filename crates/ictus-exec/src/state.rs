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

/// Why a setup request failed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SetupError {
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
}

/// Published setup values by key.
type Blobs = BTreeMap<String, Vec<u8>>;

/// The setup store: keyed blobs that subsystems publish and fetch outside the real-time
/// path. A fetch waits until the key is published, so "A produces, B consumes" needs
/// no SETUP1/SETUP2 states and no sub-state variables: the store serialises them.
/// The coordinator owns it and serves it to child processes over the control socket.
///
/// Across hosts, a node's store has an *upstream*: the main coordinator's store, which
/// every host's subsystems share (seed 003's client/server setup channel). A put goes
/// there; a get asks there (every 20 ms) until the value is published or it times out.
#[derive(Clone, Debug, Default)]
pub struct SetupStore {
    inner: Arc<(Mutex<Blobs>, Condvar)>,
    upstream: Option<Arc<dyn SetupUpstream>>,
}

/// The store a node's setup requests go to: the main coordinator's, on another host.
pub trait SetupUpstream: Send + Sync + std::fmt::Debug {
    /// Publishes `value` under `key` there.
    fn put(&self, key: &str, value: &[u8]) -> Result<(), SetupError>;
    /// The value under `key` there now, if published (a short request, never a wait
    /// for the value).
    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, SetupError>;
}

/// How often a get asks the upstream again while the value is not published.
const UPSTREAM_POLL: Duration = Duration::from_millis(20);

impl SetupStore {
    /// An empty store.
    pub fn new() -> SetupStore {
        SetupStore::default()
    }

    /// A store whose requests go to `upstream` (a node's, across hosts).
    pub fn with_upstream(upstream: Arc<dyn SetupUpstream>) -> SetupStore {
        SetupStore {
            inner: Arc::default(),
            upstream: Some(upstream),
        }
    }

    /// Publishes `value` under `key` (replacing an earlier value) and wakes the
    /// waiters; with an upstream, publishes it there first (and fails if that fails).
    pub fn put(&self, key: &str, value: Vec<u8>) -> Result<(), SetupError> {
        if let Some(up) = &self.upstream {
            up.put(key, &value)?;
        }
        let (map, cv) = &*self.inner;
        map.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), value);
        cv.notify_all();
        Ok(())
    }

    /// The value under `key`, waiting up to `timeout` for it to be published (here,
    /// or upstream when there is one).
    pub fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, SetupError> {
        let (map, cv) = &*self.inner;
        let deadline = Instant::now() + timeout;
        let mut guard = map.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = guard.get(key) {
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
                return Err(SetupError::Timeout {
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
        let (map, _) = &*self.inner;
        map.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
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
            Err(SetupError::Timeout { .. })
        ));
    }

    proptest! {
        #[test]
        fn state_words_round_trip(p in any::<u8>(), n in any::<u8>(), f in 0u64..(1 << 48)) {
            let w = StateWord { previous: StateId(p), next: StateId(n), from_frame: f };
            prop_assert_eq!(StateWord::unpack(w.pack()), w);
            let a = Ack { state: StateId(n), frame: f };
            prop_assert_eq!(Ack::unpack(a.pack()), Some(a));
        }
    }
}
