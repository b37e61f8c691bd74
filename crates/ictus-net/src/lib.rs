//! The many-host link of ictus (issue 11): Zenoh sessions in peer mode, no router.
//!
//! Seed 003's framework spans hosts: a main coordinator publishes the tick, a local
//! coordinator on each host releases its subsystems and copies in the cells that
//! other hosts publish, a client/server channel serves setup, and the coordinator
//! watches every host's health. ictus builds that on Zenoh (publish/subscribe,
//! queryables, liveliness) rather than on a protocol of its own. Zenoh runs its own
//! threads (a tokio runtime); it is never called from a real-time thread: those hand
//! off through the lock-free rings of `ictus-core`.
//!
//! This crate holds what every host shares: how a session is opened
//! ([`Endpoints`], [`open`]), the tick as a publication ([`tick`]), who is alive
//! ([`health`]) and the hubs across hosts ([`hubs`]). So far it
//! serves the measurement of the Zenoh path against a bare UDP round trip over the
//! same links (`examples/zping.rs`) and of tick arrivals per host
//! (`examples/ztick.rs`), both run by `bench/validate-netns.sh`.
//!
//! ```no_run
//! use ictus_net::{Endpoints, open};
//! let endpoints = Endpoints::parse(&["tcp/10.77.0.1:7447"], &["tcp/10.77.0.2:7447"])?;
//! let session = open(&endpoints)?;
//! # Ok::<(), ictus_net::NetError>(())
//! ```

use std::net::SocketAddr;

mod error;
pub mod gaps;
pub mod guard;
pub mod health;
pub mod hubs;
pub mod join;
pub mod keys;
pub mod late;
pub mod link;
pub mod options;
pub mod readers;
pub mod security;
pub mod silence;
pub mod tick;
pub mod trust;
pub mod view;

/// The Zenoh side of a hand-over ring: what a subscriber's callback pushes into,
/// for a thread that never calls Zenoh to pop. Zenoh may call back from more than
/// one of its threads and the ring has one producer, so they take turns (an
/// uncontended lock, on Zenoh's side only).
pub(crate) struct Handoff<T> {
    producer: std::sync::Mutex<ictus_core::sync::spsc::Producer<T>>,
}

impl<T: Send> Handoff<T> {
    /// Pushes `value`; `false` when the ring is full (the reader fell behind).
    pub(crate) fn push(&self, value: T) -> bool {
        let mut p = self.producer.lock().unwrap_or_else(|e| e.into_inner());
        p.push(value).is_ok()
    }
}

/// A hand-over ring of `capacity`: its Zenoh side and its reading end.
pub(crate) fn handoff<T: Send>(
    capacity: usize,
) -> (Handoff<T>, ictus_core::sync::spsc::Consumer<T>) {
    let (producer, consumer) = ictus_core::sync::spsc::channel(capacity);
    (
        Handoff {
            producer: std::sync::Mutex::new(producer),
        },
        consumer,
    )
}

/// A loopback endpoint on a port free a moment ago (the kernel picks it), for tests
/// that open peers side by side.
#[cfg(test)]
pub(crate) fn free_loopback() -> String {
    format!("tcp/127.0.0.1:{}", ictus_os::testing::free_port())
}
use zenoh::Wait;

pub use error::NetError;
pub use zenoh::Session;

/// A link protocol Zenoh is built with here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// TCP: reliable, ordered; what the executive's cells use.
    Tcp,
    /// UDP: datagrams, best effort.
    Udp,
    /// TLS over TCP, with mutual authentication ([`security`]).
    Tls,
    /// QUIC (TLS 1.3 inside, over UDP), with mutual authentication ([`security`]):
    /// what a run's hosts use.
    Quic,
}

/// One endpoint: a protocol and a socket address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The link protocol.
    pub protocol: Protocol,
    /// The address and port.
    pub address: SocketAddr,
    /// Zenoh's endpoint metadata (after `?`: `mixed_rel=1`), empty for none.
    pub metadata: String,
}

impl Endpoint {
    /// Reads `tcp/`, `udp/`, `tls/` or `quic/` and `ADDRESS:PORT` (IPv4 or
    /// `[IPv6]`).
    pub fn parse(text: &str) -> Result<Endpoint, NetError> {
        let bad = || NetError::BadEndpoint {
            text: text.to_string(),
        };
        let (protocol, rest) = match text.split_once('/') {
            Some(("tcp", rest)) => (Protocol::Tcp, rest),
            Some(("udp", rest)) => (Protocol::Udp, rest),
            Some(("tls", rest)) => (Protocol::Tls, rest),
            Some(("quic", rest)) => (Protocol::Quic, rest),
            _ => return Err(bad()),
        };
        let address = rest.parse::<SocketAddr>().map_err(|_| bad())?;
        Ok(Endpoint {
            protocol,
            address,
            metadata: String::new(),
        })
    }

    /// Zenoh's locator string for it.
    pub fn locator(&self) -> String {
        let p = match self.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Tls => "tls",
            Protocol::Quic => "quic",
        };
        if self.metadata.is_empty() {
            format!("{p}/{}", self.address)
        } else {
            format!("{p}/{}?{}", self.address, self.metadata)
        }
    }
}

/// Where a session listens and which peers it connects to. With no peer to connect
/// to, peers are found by Zenoh's multicast scouting (where the network has it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Addresses to listen on.
    pub listen: Vec<Endpoint>,
    /// Peers to connect to.
    pub connect: Vec<Endpoint>,
    /// Whether to find peers by UDP multicast scouting too.
    pub multicast: bool,
}

impl Endpoints {
    /// Reads listen and connect endpoints; multicast scouting is on only when no
    /// peer is named.
    pub fn parse(listen: &[&str], connect: &[&str]) -> Result<Endpoints, NetError> {
        let listen = listen
            .iter()
            .map(|t| Endpoint::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        let connect = connect
            .iter()
            .map(|t| Endpoint::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        let multicast = connect.is_empty();
        Ok(Endpoints {
            listen,
            connect,
            multicast,
        })
    }
}

fn list(endpoints: &[Endpoint]) -> String {
    let quoted: Vec<String> = endpoints
        .iter()
        .map(|e| format!("\"{}\"", e.locator()))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// How long a silent peer is still counted as there, in milliseconds (four
/// keep-alives in it).
pub const LEASE_MS: u64 = 2000;

/// The Zenoh configuration of a peer with these endpoints.
pub fn config(endpoints: &Endpoints) -> Result<zenoh::Config, NetError> {
    let z = |e: zenoh::Error| NetError::Zenoh(e.to_string());
    let mut c = zenoh::Config::default();
    c.insert_json5("mode", "\"peer\"").map_err(z)?;
    c.insert_json5("listen/endpoints", &list(&endpoints.listen))
        .map_err(z)?;
    c.insert_json5("connect/endpoints", &list(&endpoints.connect))
        .map_err(z)?;
    c.insert_json5(
        "scouting/multicast/enabled",
        if endpoints.multicast { "true" } else { "false" },
    )
    .map_err(z)?;
    // A peer not up yet is asked again soon: hosts start in any order (Zenoh's
    // default waits 1 s, then 2 and 4).
    c.insert_json5(
        "connect/retry",
        "{ period_init_ms: 100, period_max_ms: 500, period_increase_factor: 2 }",
    )
    .map_err(z)?;
    // A peer silent this long has left (Zenoh's default: 10 s): a run's coordinator
    // learns a host is gone within it, also where the link's close never arrives.
    c.insert_json5("transport/link/tx/lease", &LEASE_MS.to_string())
        .map_err(z)?;
    Ok(c)
}

/// The largest message a peer may send this one, at least: Zenoh's own default is
/// 1 GiB, which a peer could make it reassemble. A run's link sets
/// [`bound_messages`] from its schedule (`link::message_bound`).
pub const MIN_MESSAGE_BOUND: usize = 1 << 20;

/// Bounds the messages this session takes to `bytes` (Zenoh's
/// `transport/link/rx/max_message_size`): a larger one is dropped by Zenoh on
/// arrival, before it is reassembled, and never reaches ictus.
pub fn bound_messages(c: &mut zenoh::Config, bytes: usize) -> Result<(), NetError> {
    c.insert_json5(
        "transport/link/rx/max_message_size",
        &bytes.max(MIN_MESSAGE_BOUND).to_string(),
    )
    .map_err(|e| NetError::Zenoh(e.to_string()))
}

/// Opens a peer session (blocking until Zenoh has started; call it off the
/// real-time threads).
pub fn open(endpoints: &Endpoints) -> Result<Session, NetError> {
    open_bounded(endpoints, MIN_MESSAGE_BOUND)
}

/// Opens a peer session that takes messages of at most `max_message` bytes
/// ([`bound_messages`]).
pub fn open_bounded(endpoints: &Endpoints, max_message: usize) -> Result<Session, NetError> {
    let mut c = config(endpoints)?;
    bound_messages(&mut c, max_message)?;
    open_config(c)
}

/// Opens a peer session with TLS `credentials` (for `tls/` endpoints) and, when
/// given, Zenoh's access `rules` ([`security::access_rules`]).
pub fn open_secure(
    endpoints: &Endpoints,
    credentials: &security::Credentials,
    rules: Option<&serde_json::Value>,
) -> Result<Session, NetError> {
    open_secure_bounded(endpoints, credentials, rules, MIN_MESSAGE_BOUND)
}

/// [`open_secure`] taking messages of at most `max_message` bytes
/// ([`bound_messages`]).
pub fn open_secure_bounded(
    endpoints: &Endpoints,
    credentials: &security::Credentials,
    rules: Option<&serde_json::Value>,
    max_message: usize,
) -> Result<Session, NetError> {
    let mut c = config(endpoints)?;
    bound_messages(&mut c, max_message)?;
    credentials.apply(&mut c)?;
    if let Some(rules) = rules {
        c.insert_json5("access_control", &rules.to_string())
            .map_err(|e| NetError::Zenoh(e.to_string()))?;
    }
    open_config(c)
}

fn open_config(c: zenoh::Config) -> Result<Session, NetError> {
    zenoh::open(c)
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn endpoints_are_tcp_or_udp_with_an_address_and_a_port() {
        let e = Endpoint::parse("tcp/10.77.0.1:7447").unwrap();
        assert_eq!(e.protocol, Protocol::Tcp);
        assert_eq!(e.locator(), "tcp/10.77.0.1:7447");
        assert_eq!(
            Endpoint::parse("udp/[::1]:9").unwrap().locator(),
            "udp/[::1]:9"
        );
        for bad in [
            "",
            "tcp",
            "tcp/",
            "sctp/10.0.0.1:7447",
            "tls/10.0.0.1",
            "tcp/10.0.0.1",
            "tcp/10.0.0.1:99999",
            "tcp/host.example:7447",
            "tcp/10.0.0.1:7447/extra",
        ] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("'{bad}'")), "{err}");
        }
        let both = Endpoints::parse(&["tcp/127.0.0.1:1"], &[]).unwrap();
        assert!(both.multicast, "no peer named: scouting finds them");
        let named = Endpoints::parse(&[], &["tcp/127.0.0.1:1"]).unwrap();
        assert!(!named.multicast);
    }

    #[test]
    fn two_peers_on_loopback_exchange_a_sample() {
        let at = free_loopback();
        let a = open(
            &Endpoints::parse(&[&at], &[])
                .map(|mut e| {
                    e.multicast = false;
                    e
                })
                .unwrap(),
        )
        .unwrap();
        let b = open(&Endpoints::parse(&[], &[&at]).unwrap()).unwrap();
        let (tx, rx) = mpsc::channel();
        let _sub = a
            .declare_subscriber("ictus/test/cell")
            .callback(move |s| {
                let _ = tx.send(s.payload().to_bytes().into_owned());
            })
            .wait()
            .unwrap();
        // The subscription reaches the other peer asynchronously: publish until
        // one arrives (bounded).
        let mut got = None;
        for _ in 0..100 {
            b.put("ictus/test/cell", vec![1u8, 2, 3]).wait().unwrap();
            if let Ok(v) = rx.recv_timeout(Duration::from_millis(50)) {
                got = Some(v);
                break;
            }
        }
        assert_eq!(got, Some(vec![1, 2, 3]));
    }
}
