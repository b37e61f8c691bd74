//! The main coordinator's tick as a publication (seed 003: the main coordinator
//! publishes the tick; each host's local coordinator releases its subsystems from it).
//!
//! A [`Tick`] carries its frame, the deadline it stands for and when it was sent, all
//! in `CLOCK_MONOTONIC` nanoseconds of the sender. Hosts that share that clock
//! (network namespaces of one machine) measure one-way delays directly; others
//! measure the jitter of arrivals. A subscriber's samples arrive on a Zenoh thread,
//! which stamps them and hands them over through a lock-free ring ([`subscribe`]):
//! the thread that releases subsystems never calls Zenoh and never waits on a lock.
//!
//! ```
//! use ictus_core::Nanos;
//! use ictus_net::tick::Tick;
//! let t = Tick { frame: 7, deadline: Nanos::new(1_000), sent: Nanos::new(1_020), state: 0, stop: u64::MAX };
//! assert_eq!(Tick::decode(&t.encode()), Some(t));
//! assert_eq!(Tick::decode(&[0u8; 3]), None);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "counters read for a report: relaxed increments, read once the writers are done"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::Nanos;
use ictus_core::sync::spsc::Consumer;
use zenoh::Wait;

use crate::{NetError, Session};

/// The size of an encoded tick.
pub const TICK_BYTES: usize = 40;

/// The frame that ends a stream of ticks.
pub const END_FRAME: u64 = u64::MAX;

/// One tick of the main coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The frame it releases.
    pub frame: u64,
    /// The frame's deadline on the sender's clock.
    pub deadline: Nanos,
    /// When it was sent, on the sender's clock.
    pub sent: Nanos,
    /// The run's state word in force (packed `ictus_exec::state::StateWord`).
    pub state: u64,
    /// The run's stop frame (`u64::MAX`: none yet).
    pub stop: u64,
}

impl Tick {
    /// Its 40 bytes: frame, deadline, sent, state, stop, little-endian.
    pub fn encode(&self) -> [u8; TICK_BYTES] {
        let mut b = [0u8; TICK_BYTES];
        let words = [
            self.frame,
            self.deadline.as_u64(),
            self.sent.as_u64(),
            self.state,
            self.stop,
        ];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads [`Tick::encode`]'s bytes; `None` for any other length.
    pub fn decode(bytes: &[u8]) -> Option<Tick> {
        let b: &[u8; TICK_BYTES] = bytes.try_into().ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Tick {
            frame: word(0),
            deadline: Nanos::new(word(8)),
            sent: Nanos::new(word(16)),
            state: word(24),
            stop: word(32),
        })
    }
}

/// A tick as it arrived here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The tick.
    pub tick: Tick,
    /// When Zenoh's thread handed it over, on this host's clock.
    pub arrived: Nanos,
}

/// The key the ticks of run `run` are published on.
pub fn key(run: &str) -> String {
    format!("ictus/{run}/tick")
}

/// Publishes a run's ticks: express (not batched), at real-time priority in Zenoh's
/// queues, dropped rather than waited for where a peer's queue is full: a tick
/// never waits on a slow reader or a stalled host (a put waits at most Zenoh's
/// `wait_before_drop` once per congestion, then drops at once until the queue
/// drains). Nothing is lost by that: every tick carries the state word and the
/// stop frame in force, so the next one that arrives says it again, and a host
/// whose ticks stop coming acts on the silence ([`crate::link`]).
pub struct TickPublisher {
    publisher: zenoh::pubsub::Publisher<'static>,
}

impl TickPublisher {
    /// Declares the publisher of run `run`'s ticks, with the default options.
    pub fn new(session: &Session, run: &str) -> Result<TickPublisher, NetError> {
        TickPublisher::with(session, run, &crate::options::LinkOptions::default())
    }

    /// Declares the publisher of run `run`'s ticks with `options` (its priority,
    /// express, congestion control).
    pub fn with(
        session: &Session,
        run: &str,
        options: &crate::options::LinkOptions,
    ) -> Result<TickPublisher, NetError> {
        let publisher = session
            .declare_publisher(key(run))
            .congestion_control(options.congestion)
            .priority(options.tick)
            .express(options.express)
            .wait()
            .map_err(|e| NetError::Zenoh(e.to_string()))?;
        Ok(TickPublisher { publisher })
    }

    /// Sends one tick (from a thread that may call Zenoh: not a real-time one).
    pub fn send(&self, tick: Tick) -> Result<(), NetError> {
        self.publisher
            .put(tick.encode().to_vec())
            .wait()
            .map_err(|e| NetError::Zenoh(e.to_string()))
    }
}

/// A subscription to a run's ticks. Dropping it ends the subscription.
pub struct TickSubscriber {
    _subscriber: zenoh::pubsub::Subscriber<()>,
    lost: Arc<AtomicU64>,
}

impl TickSubscriber {
    /// Ticks dropped because the ring was full (its reader fell behind) or that
    /// were not ticks (of another length).
    pub fn dropped(&self) -> u64 {
        // Relaxed: a counter, read for reports.
        self.lost.load(Ordering::Relaxed)
    }
}

/// Subscribes to run `run`'s ticks: each one is stamped on arrival and pushed into
/// a ring of `capacity` whose reading end is returned.
pub fn subscribe(
    session: &Session,
    run: &str,
    capacity: usize,
) -> Result<(TickSubscriber, Consumer<Arrival>), NetError> {
    let (ring, consumer) = crate::handoff::<Arrival>(capacity);
    let lost = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&lost);
    let subscriber = session
        .declare_subscriber(key(run))
        .callback(move |sample| {
            let arrived = ictus_os::clock::monotonic_now();
            let pushed = Tick::decode(&sample.payload().to_bytes())
                .is_some_and(|tick| ring.push(Arrival { tick, arrived }));
            if !pushed {
                // Relaxed: a counter.
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))?;
    Ok((
        TickSubscriber {
            _subscriber: subscriber,
            lost,
        },
        consumer,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Endpoints, open};
    use std::time::Duration;

    #[test]
    fn a_tick_is_40_bytes_and_nothing_else_reads_as_one() {
        let t = Tick {
            frame: u64::MAX - 1,
            deadline: Nanos::new(u64::MAX),
            sent: Nanos::ZERO,
            state: 0x0102_0000_0000_0007,
            stop: 9,
        };
        assert_eq!(Tick::decode(&t.encode()), Some(t));
        assert_eq!(Tick::decode(&[]), None);
        assert_eq!(Tick::decode(&[0u8; TICK_BYTES + 1]), None);
    }

    #[test]
    fn ticks_cross_from_one_peer_to_another_in_order_through_the_ring() {
        let at = crate::free_loopback();
        let mut listen = Endpoints::parse(&[&at], &[]).unwrap();
        listen.multicast = false;
        let a = open(&listen).unwrap();
        let b = open(&Endpoints::parse(&[], &[&at]).unwrap()).unwrap();
        let (sub, mut ring) = subscribe(&a, "t", 64).unwrap();
        let publisher = TickPublisher::new(&b, "t").unwrap();
        // Until the subscription has reached the publisher's peer (bounded).
        let mut first = None;
        for _ in 0..100 {
            publisher
                .send(Tick {
                    frame: 0,
                    deadline: Nanos::ZERO,
                    sent: Nanos::ZERO,
                    state: 0,
                    stop: u64::MAX,
                })
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            if let Some(a) = ring.pop() {
                first = Some(a);
                break;
            }
        }
        assert!(first.is_some(), "no tick crossed");
        while ring.pop().is_some() {}
        for frame in 1..=10 {
            let now = ictus_os::clock::monotonic_now();
            publisher
                .send(Tick {
                    frame,
                    deadline: now,
                    sent: now,
                    state: 0,
                    stop: u64::MAX,
                })
                .unwrap();
        }
        let mut frames = Vec::new();
        for _ in 0..200 {
            while let Some(a) = ring.pop() {
                assert!(a.arrived >= a.tick.sent, "one clock: arrival after sending");
                frames.push(a.tick.frame);
            }
            if frames.len() == 10 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(frames, (1..=10).collect::<Vec<_>>());
        assert_eq!(sub.dropped(), 0);
    }
}
