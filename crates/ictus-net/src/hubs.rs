//! Hubs across hosts on the run's Zenoh session: the transport of
//! [`ictus_exec::hub::remote`]. A host's relay and home servers
//! ([`HubNode`]) send their operations as publications under
//! `ictus/<run>/hub/<from>/<to>` (each host publishes only under its own
//! name: the access rules of [`crate::security`] refuse any other), reliable,
//! blocking rather than dropping, in order per pair of hosts; each host
//! listens to `ictus/<run>/hub/*/<itself>`.
//!
//! Each host declares the liveliness token `ictus/<run>/hubs/<host>` once it
//! listens; what a host sends to another is held until that host's token is
//! seen (a publication nobody listens to yet would be lost), and the token's
//! disappearance (its session closed, its process killed, its link cut) is
//! the host leaving: the proxies of the hubs homed there fail
//! ([`ictus_exec::hub::HubError::HomeLost`]), the home's servers drop what it
//! asked for.
//!
//! Nothing here runs on a real-time thread: the relay and the servers are
//! threads of their own (`ictus-hub-relay`, `ictus-hub-home`), the messages
//! arrive on Zenoh's threads; all inherit the affinity of the thread that
//! calls [`HubLink::start`] (the coordinator, kept off the real-time CPUs, as
//! [`crate::link::ZenohLink::open`] keeps Zenoh's).
//!
//! A message is binary: the operation (1 byte), the hub's index in the table
//! (4 bytes, little-endian), then the count (4 bytes), the FIFO end (1 byte),
//! the message bytes, or (the table, the first message to each host) one
//! 8-byte digest per hub. A host whose table differs is refused: the link
//! reports it (a `LinkEvent::Hub` naming the host and the first hub that
//! differs) and exchanges no hub operation with it.

use std::sync::{Arc, Mutex};

use ictus_exec::hub::Hubs;
use ictus_exec::hub::remote::{End, HubMsg, HubNode, HubOp, HubReport, HubWire, Joining};
use zenoh::Wait;
use zenoh::pubsub::Publisher;
use zenoh::qos::{CongestionControl, Priority};
use zenoh::sample::SampleKind;

use crate::NetError;

/// The key of the hub messages from host `from` to host `to` in run `run`.
pub fn key(run: &str, from: &str, to: &str) -> String {
    format!("ictus/{run}/hub/{from}/{to}")
}

/// The liveliness key of host `host`'s hubs in run `run`.
pub fn presence_key(run: &str, host: &str) -> String {
    format!("ictus/{run}/hubs/{host}")
}

/// One host's hubs connected to the other hosts' over a Zenoh session: its
/// relay and home servers, the subscriber of what the others send, and the
/// watch of their presence. Stops on [`stop`](Self::stop) or drop.
pub struct HubLink {
    node: Arc<HubNode>,
    _presence: zenoh::liveliness::LivelinessToken,
    _subscriber: zenoh::pubsub::Subscriber<()>,
    _watch: zenoh::pubsub::Subscriber<()>,
}

impl HubLink {
    /// Connects `hubs` (host `here`'s table, made with
    /// [`Hubs::in_process_at`] or [`Hubs::create_shared_at`] for the same
    /// `hosts`) to the other hosts of run `run` over `session`. Call it from a
    /// thread off the real-time CPUs: the threads it starts inherit its
    /// affinity.
    pub fn start(
        session: &zenoh::Session,
        run: &str,
        hosts: &[String],
        here: usize,
        hubs: &Hubs,
    ) -> Result<HubLink, NetError> {
        let zerr = |e: zenoh::Error| NetError::Zenoh(e.to_string());
        let me = hosts
            .get(here)
            .ok_or_else(|| NetError::Zenoh(format!("host {here} is not in the run's hosts")))?;
        let publishers = hosts
            .iter()
            .map(|to| {
                session
                    .declare_publisher(key(run, me, to))
                    .congestion_control(CongestionControl::Block)
                    // Below the tick's RealTime: a FIFO's bulk never delays the beat.
                    .priority(Priority::InteractiveHigh)
                    .express(true)
                    .wait()
                    .map(Mutex::new)
                    .map_err(zerr)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let wire = Arc::new(ZenohWire { publishers });
        let node = Arc::new(
            HubNode::start(hubs, hosts, here, wire, Joining::Announced)
                .map_err(|e| NetError::Zenoh(format!("hubs: {e}")))?,
        );
        let subscriber = {
            let node = Arc::clone(&node);
            let hosts = hosts.to_vec();
            let prefix = format!("ictus/{run}/hub/");
            session
                .declare_subscriber(key(run, "*", me))
                .callback(move |sample| {
                    let Some(from) = sample
                        .key_expr()
                        .as_str()
                        .strip_prefix(&prefix)
                        .and_then(|rest| rest.split('/').next())
                        .and_then(|name| hosts.iter().position(|h| h == name))
                    else {
                        return;
                    };
                    if let Some(msg) = decode(&sample.payload().to_bytes()) {
                        node.deliver(from, msg);
                    }
                })
                .wait()
                .map_err(zerr)?
        };
        let watch = {
            let node = Arc::clone(&node);
            let hosts = hosts.to_vec();
            let prefix = presence_key(run, "");
            session
                .liveliness()
                .declare_subscriber(presence_key(run, "*"))
                .history(true)
                .callback(move |sample| {
                    let name = sample.key_expr().as_str().strip_prefix(&prefix);
                    let Some(host) = name.and_then(|n| hosts.iter().position(|h| h == n)) else {
                        return;
                    };
                    match sample.kind() {
                        SampleKind::Put => node.host_joined(host),
                        SampleKind::Delete => node.host_left(host),
                    }
                })
                .wait()
                .map_err(zerr)?
        };
        // Declared last: whoever sees it finds this host listening.
        let presence = session
            .liveliness()
            .declare_token(presence_key(run, me))
            .wait()
            .map_err(zerr)?;
        Ok(HubLink {
            node,
            _presence: presence,
            _subscriber: subscriber,
            _watch: watch,
        })
    }

    /// What the hubs did because hosts left, since the last call.
    pub fn reports(&self) -> Vec<HubReport> {
        self.node.reports()
    }

    /// Stops the relay and the servers and leaves the run's hubs.
    pub fn stop(self) {}
}

impl Drop for HubLink {
    fn drop(&mut self) {
        // The callbacks hold the node too: stop its threads here, whoever
        // drops last.
        self.node.halt();
    }
}

impl std::fmt::Debug for HubLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubLink").field("node", &self.node).finish()
    }
}

/// Sends hub messages as publications, one publisher per destination.
struct ZenohWire {
    publishers: Vec<Mutex<Publisher<'static>>>,
}

impl HubWire for ZenohWire {
    fn send(&self, to: usize, msg: HubMsg) {
        if let Some(p) = self.publishers.get(to) {
            let p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A failure is the session closing: the host's leaving says the rest.
            let _ = p.put(encode(&msg)).wait();
        }
    }
}

/// Operation codes on the wire.
mod code {
    pub(super) const GIVE: u8 = 1;
    pub(super) const DEMAND: u8 = 2;
    pub(super) const GRANT: u8 = 3;
    pub(super) const RELEASE: u8 = 4;
    pub(super) const ATTACH: u8 = 5;
    pub(super) const DETACH: u8 = 6;
    pub(super) const REFUSED: u8 = 7;
    pub(super) const PUSH: u8 = 8;
    pub(super) const ACK: u8 = 9;
    pub(super) const DELIVER: u8 = 10;
    pub(super) const CREDIT: u8 = 11;
    pub(super) const TAKEN: u8 = 12;
    pub(super) const TABLE: u8 = 13;
}

/// A message's bytes on the wire.
pub fn encode(msg: &HubMsg) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    let (op, tail): (u8, Tail<'_>) = match &msg.op {
        HubOp::Give(n) => (code::GIVE, Tail::Count(*n)),
        HubOp::Demand(n) => (code::DEMAND, Tail::Count(*n)),
        HubOp::Grant(n) => (code::GRANT, Tail::Count(*n)),
        HubOp::Release(n) => (code::RELEASE, Tail::Count(*n)),
        HubOp::Attach(e) => (code::ATTACH, Tail::End(*e)),
        HubOp::Detach(e) => (code::DETACH, Tail::End(*e)),
        HubOp::Refused(e) => (code::REFUSED, Tail::End(*e)),
        HubOp::Push(m) => (code::PUSH, Tail::Bytes(m)),
        HubOp::Ack(n) => (code::ACK, Tail::Count(*n)),
        HubOp::Deliver(m) => (code::DELIVER, Tail::Bytes(m)),
        HubOp::Credit(n) => (code::CREDIT, Tail::Count(*n)),
        HubOp::Taken => (code::TAKEN, Tail::Bytes(&[])),
        HubOp::Table(d) => (code::TABLE, Tail::Digests(d)),
    };
    out.push(op);
    out.extend_from_slice(&msg.hub.to_le_bytes());
    match tail {
        Tail::Count(n) => out.extend_from_slice(&n.to_le_bytes()),
        Tail::End(e) => out.push(u8::from(e == End::Receiver)),
        Tail::Bytes(b) => out.extend_from_slice(b),
        Tail::Digests(d) => d
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
    out
}

enum Tail<'a> {
    Count(u32),
    End(End),
    Bytes(&'a [u8]),
    Digests(&'a [u64]),
}

/// A message from its bytes; `None` for bytes that are not one.
pub fn decode(bytes: &[u8]) -> Option<HubMsg> {
    let (&op, rest) = bytes.split_first()?;
    let hub = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
    let tail = &rest[4..];
    let count = || Some(u32::from_le_bytes(tail.try_into().ok()?));
    let end = || match tail {
        [0] => Some(End::Sender),
        [1] => Some(End::Receiver),
        _ => None,
    };
    let op = match op {
        code::GIVE => HubOp::Give(count()?),
        code::DEMAND => HubOp::Demand(count()?),
        code::GRANT => HubOp::Grant(count()?),
        code::RELEASE => HubOp::Release(count()?),
        code::ATTACH => HubOp::Attach(end()?),
        code::DETACH => HubOp::Detach(end()?),
        code::REFUSED => HubOp::Refused(end()?),
        code::PUSH => HubOp::Push(tail.to_vec()),
        code::ACK => HubOp::Ack(count()?),
        code::DELIVER => HubOp::Deliver(tail.to_vec()),
        code::CREDIT => HubOp::Credit(count()?),
        code::TAKEN if tail.is_empty() => HubOp::Taken,
        code::TABLE if tail.len() % 8 == 0 => HubOp::Table(
            tail.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
                .collect(),
        ),
        _ => return None,
    };
    Some(HubMsg { hub, op })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_survives_the_wire_and_garbage_is_refused() {
        let ops = [
            HubOp::Give(3),
            HubOp::Demand(1),
            HubOp::Grant(2),
            HubOp::Release(1),
            HubOp::Attach(End::Sender),
            HubOp::Detach(End::Receiver),
            HubOp::Refused(End::Receiver),
            HubOp::Push(vec![1, 2, 3]),
            HubOp::Ack(4),
            HubOp::Deliver(vec![]),
            HubOp::Credit(9),
            HubOp::Taken,
            HubOp::Table(vec![]),
            HubOp::Table(vec![1, u64::MAX]),
        ];
        for op in ops {
            let msg = HubMsg { hub: 7, op };
            assert_eq!(decode(&encode(&msg)), Some(msg));
        }
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[code::GIVE, 0, 0, 0, 0, 1]), None);
        assert_eq!(decode(&[99, 0, 0, 0, 0]), None);
        assert_eq!(decode(&[code::ATTACH, 0, 0, 0, 0, 2]), None);
        assert_eq!(decode(&[code::TABLE, 0, 0, 0, 0, 1, 2, 3]), None);
    }
}
