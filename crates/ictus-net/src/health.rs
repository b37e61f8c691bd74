//! Who is alive in a run across hosts (seed 003: the coordinator monitors the health
//! of every host), on Zenoh's liveliness: each host's local coordinator holds a token
//! ([`announce`]) for as long as its session lives; the main coordinator watches the
//! tokens ([`watch`]) and learns of a host that joins, and of one that leaves or dies
//! (its session closed, its process killed, its link cut: Zenoh drops its tokens).
//!
//! Events arrive on a Zenoh thread and are handed over through an SPSC ring, as the
//! ticks are ([`crate::tick`]).

use ictus_core::sync::spsc::Consumer;
use zenoh::Wait;
use zenoh::sample::SampleKind;

use crate::{NetError, Session};

/// The liveliness key of host `host` in run `run`.
pub fn key(run: &str, host: &str) -> String {
    format!("ictus/{run}/host/{host}")
}

/// A host joining or leaving a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthEvent {
    /// The host's token appeared (also for hosts alive when the watch began).
    Joined(String),
    /// The host's token disappeared: it left, or died, or its link is cut.
    Left(String),
}

/// A host's presence in a run: alive while this value lives.
pub struct Presence {
    _token: zenoh::liveliness::LivelinessToken,
}

/// Declares host `host` alive in run `run` until the returned value is dropped (or
/// the process ends).
pub fn announce(session: &Session, run: &str, host: &str) -> Result<Presence, NetError> {
    let token = session
        .liveliness()
        .declare_token(key(run, host))
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))?;
    Ok(Presence { _token: token })
}

/// A watch on a run's hosts. Dropping it ends the watch.
pub struct Watch {
    _subscriber: zenoh::pubsub::Subscriber<()>,
}

/// Watches run `run`'s hosts: every join and leave, the hosts already alive first,
/// pushed into a ring of `capacity` whose reading end is returned (events that find
/// it full are dropped: size it for the run's hosts).
pub fn watch(
    session: &Session,
    run: &str,
    capacity: usize,
) -> Result<(Watch, Consumer<HealthEvent>), NetError> {
    let (ring, consumer) = crate::handoff::<HealthEvent>(capacity);
    let prefix = key(run, "");
    let subscriber = session
        .liveliness()
        .declare_subscriber(key(run, "*"))
        .history(true)
        .callback(move |sample| {
            let name = sample
                .key_expr()
                .as_str()
                .strip_prefix(&prefix)
                .unwrap_or_default()
                .to_string();
            let event = match sample.kind() {
                SampleKind::Put => HealthEvent::Joined(name),
                SampleKind::Delete => HealthEvent::Left(name),
            };
            // Full: dropped, as documented (the ring is sized for the run's hosts).
            let _ = ring.push(event);
        })
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))?;
    Ok((
        Watch {
            _subscriber: subscriber,
        },
        consumer,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Endpoints, open};
    use std::time::Duration;

    /// Waits (bounded) for the next event of the ring.
    fn next(ring: &mut Consumer<HealthEvent>) -> Option<HealthEvent> {
        for _ in 0..400 {
            if let Some(e) = ring.pop() {
                return Some(e);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    }

    #[test]
    fn a_host_that_joins_and_one_whose_session_ends_are_both_seen() {
        let at = crate::free_loopback();
        let mut listen = Endpoints::parse(&[&at], &[]).unwrap();
        listen.multicast = false;
        let main = open(&listen).unwrap();
        // A host alive before the watch begins is reported too.
        let _me = announce(&main, "w", "main").unwrap();
        let (_watch, mut ring) = watch(&main, "w", 16).unwrap();
        assert_eq!(next(&mut ring), Some(HealthEvent::Joined("main".into())));

        let h2 = open(&Endpoints::parse(&[], &[&at]).unwrap()).unwrap();
        let _presence = announce(&h2, "w", "h2").unwrap();
        assert_eq!(next(&mut ring), Some(HealthEvent::Joined("h2".into())));
        // Another run's hosts are not this run's.
        let _other = announce(&h2, "other", "h3").unwrap();
        // Its session ends with the token still held (as when its process dies):
        // the token goes with it.
        h2.close().wait().unwrap();
        assert_eq!(next(&mut ring), Some(HealthEvent::Left("h2".into())));
        assert_eq!(ring.pop(), None);
    }
}
