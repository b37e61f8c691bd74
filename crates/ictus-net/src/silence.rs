//! A lost host, noticed from the run's own traffic (issue 30): a node that hears no
//! tick for the schedule's silence bound
//! ([`silence_bound`](ictus_exec::schedule::Schedule::silence_bound), a few ticks),
//! or a main host that hears nothing from a node for as long, reports it
//! ([`LinkEvent::Silent`]) and the coordinator acts at once: a node puts its
//! subsystems in the schedule's safe state and stops, the main host counts the
//! silent node's frames as lost. Zenoh's liveliness says the same, but only once
//! its lease runs out (2 s, [`crate::LEASE_MS`]), and a stalled process or a link
//! that drops everything keeps its lease for longer.
//!
//! Each node tells the main host it is there with a beat (`ictus/R/beat/H`: the
//! last tick frame it heard, 8 bytes, u64 little-endian, `u64::MAX` before the
//! first), a quarter of the bound apart, dropped rather than waited for like every
//! publication of a frame's data. A main host that ended sends a last tick
//! ([`crate::tick::END_FRAME`]); a node that heard it, or whose stop frame passed,
//! is not silent.

#![allow(
    clippy::disallowed_types,
    reason = "one word per host, written by Zenoh's callback (the beat's arrival), read by the coordinator; a relaxed store and load, no ordering with other data"
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::Nanos;
use ictus_exec::link::LinkEvent;
use ictus_os::clock::monotonic_now;
use zenoh::Wait;
use zenoh::qos::{CongestionControl, Priority};

use crate::Session;

/// The key of node `host`'s beats in run `run`.
pub fn key(run: &str, host: &str) -> String {
    format!("ictus/{run}/beat/{host}")
}

/// What a host knows of the others' silence.
pub(crate) struct Silence {
    bound: Nanos,
    /// The hosts reported silent (once each).
    reported: BTreeSet<usize>,
    /// From when a silence counts: the epoch (nothing comes before it), and the tick.
    epoch: Option<(Nanos, Nanos)>,
    /// The run's stop, once known: no silence counts after it.
    stop_at: Option<Nanos>,
    // A node.
    beat: Option<zenoh::pubsub::Publisher<'static>>,
    next_beat: Nanos,
    last_tick: Option<(u64, Nanos)>,
    main_ended: bool,
    // The main host: per host, when its last beat arrived (0: none yet).
    beats: Option<(Arc<Vec<AtomicU64>>, zenoh::pubsub::Subscriber<()>)>,
}

impl Silence {
    /// No silence counted yet, with the run's bound.
    pub(crate) fn new(bound: Nanos) -> Silence {
        Silence {
            bound,
            reported: BTreeSet::new(),
            epoch: None,
            stop_at: None,
            beat: None,
            next_beat: Nanos::ZERO,
            last_tick: None,
            main_ended: false,
            beats: None,
        }
    }

    /// The bound.
    pub(crate) fn bound(&self) -> Nanos {
        self.bound
    }

    /// A node: declares its beat's publisher.
    pub(crate) fn node_ready(
        &mut self,
        session: &Session,
        run: &str,
        host: &str,
        priority: Priority,
    ) -> Result<(), String> {
        let p = session
            .declare_publisher(key(run, host))
            .congestion_control(CongestionControl::Drop)
            // With the tick (by default with the cells too): a host whose link is
            // busy with its cells still beats.
            .priority(priority)
            .express(true)
            .wait()
            .map_err(|e| e.to_string())?;
        self.beat = Some(p);
        Ok(())
    }

    /// The main host: listens to the nodes' beats.
    pub(crate) fn main_ready(
        &mut self,
        session: &Session,
        run: &str,
        hosts: &[String],
    ) -> Result<(), String> {
        let last: Arc<Vec<AtomicU64>> = Arc::new(hosts.iter().map(|_| AtomicU64::new(0)).collect());
        let seen = Arc::clone(&last);
        let prefix = key(run, "");
        let hosts = hosts.to_vec();
        let subscriber = session
            .declare_subscriber(key(run, "*"))
            .callback(move |sample| {
                let now = monotonic_now().as_u64();
                let Some(h) = sample
                    .key_expr()
                    .as_str()
                    .strip_prefix(&prefix)
                    .and_then(|name| hosts.iter().position(|x| x == name))
                else {
                    return;
                };
                // Relaxed: one word, read on its own by the coordinator.
                seen[h].store(now, Ordering::Relaxed);
            })
            .wait()
            .map_err(|e| e.to_string())?;
        self.beats = Some((last, subscriber));
        Ok(())
    }

    /// The run's epoch (this host's clock) and, once known, its stop.
    pub(crate) fn timing(&mut self, epoch: Nanos, tick: Nanos, stop_frame: u64) {
        self.epoch = Some((epoch, tick));
        self.stop(stop_frame);
    }

    /// The run's stop frame, as it now stands.
    pub(crate) fn stop(&mut self, stop_frame: u64) {
        if let Some((epoch, tick)) = self.epoch {
            self.stop_at = (stop_frame != u64::MAX).then(|| epoch + tick * stop_frame);
        }
    }

    /// A node: tick `frame` arrived at `at`, or (`frame` is
    /// [`END_FRAME`](crate::tick::END_FRAME)) the main host ended.
    pub(crate) fn tick(&mut self, frame: u64, at: Nanos) {
        if frame == crate::tick::END_FRAME {
            self.main_ended = true;
        } else {
            self.last_tick = Some((frame, at));
        }
    }

    /// Whether the main host was reported silent (a node).
    pub(crate) fn main_silent(&self) -> bool {
        self.reported.contains(&0)
    }

    /// A node, every poll: its beat when due, and the main host's silence.
    pub(crate) fn node_poll(&mut self, events: &mut Vec<LinkEvent>) {
        let now = monotonic_now();
        if now >= self.next_beat
            && let Some(p) = &self.beat
        {
            self.next_beat = now + Nanos::new(self.bound.as_u64() / 4);
            let frame = self.last_tick.map_or(u64::MAX, |(f, _)| f);
            // Dropped, never waited for: a missing beat is what the main host counts.
            let _ = p.put(frame.to_le_bytes().to_vec()).wait();
        }
        let Some((epoch, _)) = self.epoch else {
            return;
        };
        if self.main_ended || self.reported.contains(&0) || self.stop_at.is_some_and(|s| now >= s) {
            return;
        }
        let since = self.last_tick.map_or(epoch, |(_, at)| at.max(epoch));
        let silent = now.saturating_sub(since);
        if now > epoch && silent > self.bound {
            self.reported.insert(0);
            events.push(LinkEvent::Silent {
                host: 0,
                for_ns: silent.as_u64(),
            });
        }
    }

    /// The main host, every poll: the nodes of `watched` silent past the bound.
    pub(crate) fn main_poll(
        &mut self,
        watched: impl Iterator<Item = usize>,
        events: &mut Vec<LinkEvent>,
    ) {
        let (Some((epoch, _)), Some((last, _))) = (self.epoch, &self.beats) else {
            return;
        };
        let now = monotonic_now();
        if now <= epoch || self.stop_at.is_some_and(|s| now >= s) {
            return;
        }
        for h in watched {
            if self.reported.contains(&h) {
                continue;
            }
            // Relaxed: see main_ready.
            let beat = Nanos::new(last.get(h).map_or(0, |b| b.load(Ordering::Relaxed)));
            let silent = now.saturating_sub(beat.max(epoch));
            if silent > self.bound {
                self.reported.insert(h);
                events.push(LinkEvent::Silent {
                    host: h,
                    for_ns: silent.as_u64(),
                });
            }
        }
    }
}
