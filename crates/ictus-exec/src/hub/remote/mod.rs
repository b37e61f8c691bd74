//! Hubs across hosts: the relay that connects this host's proxies to their
//! homes, and the home's servers that act on the real hubs for other hosts,
//! over a transport given as a [`HubWire`] (`ictus-net` carries it on the
//! run's Zenoh session; the tests here on channels).
//!
//! A real-time thread never calls the wire: on a proxy it only changes words
//! of the proxy and rings the table's doorbell (see [`super`]). The relay
//! thread (`ictus-hub-relay`) wakes on the doorbell (or every few
//! milliseconds), sends what the proxies counted, moves FIFO messages and
//! port hand-overs, and applies what the homes answer. Each hub homed here
//! that other hosts use gets a server thread (`ictus-hub-home`) that waits on
//! the real hub on their behalf:
//!
//! | kind | proxy → home | home → proxy |
//! |---|---|---|
//! | semaphore, event | `Give(n)` (gives, raises), `Demand(n)` (takes, waits) | `Grant(n)`: one taken from the real hub per demand, in arrival order across hosts |
//! | FIFO | `Attach`/`Detach` of an end, `Push` (a message), `Credit(n)` (room freed here) | `Refused` (the end is held elsewhere), `Ack(n)` (pushed into the real ring), `Deliver` (a message for this host's receiver) |
//! | port | `Push` (a message offered here), `Demand`, `Taken` (this host's receiver copied) | `Ack` (the real receiver copied), `Deliver` (a message claimed for a receiver here) |
//! | resource | `Demand` (lock), `Release` | `Grant` (the home's worker holds the real lock for this host) |
//!
//! Before any of these, each host sends every other its table (`Table`: one
//! digest per hub, [`table_digests`]); nothing from a host is applied until
//! its table arrived the same as this host's, and a host whose table differs
//! is refused for good ([`HubReport::TableDiffers`]). A server sleeps until
//! the real hub or a command wakes it, never in slices ([`HubNode::server_wakes`]
//! counts its wake-ups).
//!
//! A host that leaves (the transport calls [`HubNode::host_left`]) fails every
//! proxy homed there ([`HubError::HomeLost`] for its waiters and later
//! operations), and at home its demands are dropped, its FIFO ends freed, a
//! port message it claimed is offered again, and a resource it held is
//! released and reported ([`HubReport`]).

#![allow(
    clippy::disallowed_types,
    reason = "the hub words are std atomics (see the parent module); the stop flag is one more, read by the relay and server threads only"
)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ictus_core::sync::hub::{self as words, Park, Ring, RingConsumer, RingProducer};
use ictus_os::handoff::{PiLock, futex_wait_either_shared, futex_wait_shared, futex_wake_shared};

use super::{
    FAILED_DIFFERS, FAILED_LEFT, FIFO_RECEIVER, FIFO_RING, FIFO_SENDER, HubDecl, HubError, HubKind,
    Hubs, LINK_END, P_DEMAND, P_FAILED, P_GRANTED, P_OUT, P_REFUSED, PROXY_WORDS, homes,
    message_bytes,
};

#[cfg(test)]
mod tests;

/// A FIFO's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The sending end.
    Sender,
    /// The receiving end.
    Receiver,
}

/// One hub operation between hosts (see the module's table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubOp {
    /// Gives (semaphore) or raises (event), to the home.
    Give(u32),
    /// Takes, waits, port receives or resource locks, to the home.
    Demand(u32),
    /// Tokens, raises or a resource lock granted, to a proxy.
    Grant(u32),
    /// Resource releases, to the home.
    Release(u32),
    /// A FIFO end attached on the sending host, to the home.
    Attach(End),
    /// A FIFO end detached on the sending host, to the home.
    Detach(End),
    /// The home refused an end: another host holds it. To a proxy.
    Refused(End),
    /// A FIFO message or a port message offered on the proxy, to the home.
    Push(Vec<u8>),
    /// FIFO messages now in the real ring, or (port) the real receiver
    /// copied the message. To a proxy.
    Ack(u32),
    /// A message for the proxy's receiver (FIFO or port). To a proxy.
    Deliver(Vec<u8>),
    /// FIFO messages the proxy's receiver took (room freed there), to the home.
    Credit(u32),
    /// The proxy's receiver copied the delivered port message, to the home.
    Taken,
    /// The sender's hub table, one digest per hub in order
    /// ([`table_digests`]): the first message to every host, whose answer is
    /// to refuse the sender if it differs from its own (the message's `hub`
    /// is not used).
    Table(Vec<u64>),
}

impl HubOp {
    /// The operation's name and count, for those whose count the receiver acts
    /// on once per unit (checked against [`MAX_COUNT`]).
    pub fn count(&self) -> Option<(&'static str, u32)> {
        match *self {
            HubOp::Give(n) => Some(("Give", n)),
            HubOp::Demand(n) => Some(("Demand", n)),
            HubOp::Grant(n) => Some(("Grant", n)),
            HubOp::Release(n) => Some(("Release", n)),
            _ => None,
        }
    }
}

/// A [`HubOp`] on hub `hub` (its index in the run's hub table, the same on
/// every host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubMsg {
    /// The hub's index in the table.
    pub hub: u32,
    /// The operation.
    pub op: HubOp,
}

/// How hub messages travel between hosts. Called from the relay and server
/// threads only, never from a real-time thread; messages from one host to
/// another must arrive in the order sent.
pub trait HubWire: Send + Sync + 'static {
    /// Sends `msg` to host `to` (an index in the run's hosts).
    fn send(&self, to: usize, msg: HubMsg);
}

/// Whether the other hosts are there from the start, or announce themselves
/// ([`HubNode::host_joined`]). Messages for a host not there yet are held,
/// in order, and sent when it joins: a transport that drops what nobody
/// listens to yet (Zenoh's publications) then loses nothing at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Joining {
    /// Every host listens from the start (an in-process wire).
    AllPresent,
    /// Each host is held until the transport says it joined.
    Announced,
}

/// Something the hubs did because a host left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubReport {
    /// The proxies of hubs homed on `home` failed: its hubs are gone here.
    HomeLost {
        /// The hub.
        hub: String,
        /// Its home.
        home: String,
    },
    /// Host `host` declares another hub table than this host (its digests
    /// differ from hub `hub` on, or it has `there` hubs against `here`):
    /// refused, nothing is exchanged with it, and the proxies of hubs homed
    /// there fail ([`HubError::HomeDiffers`]).
    TableDiffers {
        /// The host.
        host: String,
        /// This host's first hub that differs there (`None`: this host's
        /// table is the first part of that host's).
        hub: Option<String>,
        /// Hubs this host declares.
        here: usize,
        /// Hubs that host declares.
        there: usize,
    },
    /// A resource homed here was held by host `host`, which left: released.
    Released {
        /// The resource.
        hub: String,
        /// The host that held it.
        host: String,
    },
    /// Host `host` sent what no host of a run sends (`what`, in words: a count
    /// past [`MAX_COUNT`], a push past what its proxy may have in flight):
    /// refused, nothing of it applied. Reported once per host and operation.
    Refused {
        /// The host.
        host: String,
        /// What it sent.
        what: String,
    },
}

/// The largest count a hub operation across hosts may carry, and the most
/// demands one host may have waiting at a home: a `Give`, `Demand`, `Grant` or
/// `Release` of more is refused ([`HubReport::Refused`]), never looped over or
/// queued. A proxy sends a count of the waits (one per waiting thread) or gives
/// (since its relay's last pass) of one hub on its host: far below it.
pub const MAX_COUNT: u32 = 1 << 16;

impl std::fmt::Display for HubReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubReport::HomeLost { hub, home } => {
                write!(f, "hub `{hub}` failed here: its home host `{home}` left")
            }
            HubReport::TableDiffers {
                host,
                hub,
                here,
                there,
            } => {
                write!(f, "host `{host}` declares other hubs than this host (")?;
                match hub {
                    Some(hub) => write!(f, "from hub `{hub}` on")?,
                    None => write!(f, "{there} hubs there, {here} here")?,
                }
                write!(
                    f,
                    "): refused, no hub operation is exchanged with it; give every host the \
                     same [[hub]] tables"
                )
            }
            HubReport::Released { hub, host } => write!(
                f,
                "resource `{hub}` was held by host `{host}`, which left: released"
            ),
            HubReport::Refused { host, what } => write!(
                f,
                "host `{host}` sent {what}: refused, nothing of it applied"
            ),
        }
    }
}

/// How long the relay sleeps on its doorbell before looking anyway.
const RELAY_POLL: Duration = Duration::from_millis(5);
/// On a kernel without `futex_waitv` (before Linux 5.16) only: how long a
/// server waits on a real hub before looking at its commands.
const SERVER_SLICE: Duration = Duration::from_millis(1);
/// How long a resource's server waits for the real lock before it looks
/// whether the node stops (a PI lock cannot also wait on the server's
/// doorbell; nothing else waits on this: see `serve_resource`).
const SERVER_LOCK_SLICE: Duration = Duration::from_millis(50);

/// One digest per hub of a table as host list `hosts` places it: of its
/// name, kind, parameters and home host's name (FNV-1a, 64 bits), so that
/// two hosts can tell whether they index the same hubs alike. Messages name
/// hubs by index: a host whose digests differ is refused
/// ([`HubReport::TableDiffers`]).
pub fn table_digests(decls: &[HubDecl], hosts: &[String]) -> Vec<u64> {
    let names = super::home_names(decls, hosts);
    decls
        .iter()
        .zip(names)
        .map(|(d, home)| {
            let json = serde_json::to_vec(d).expect("hub declarations always serialize");
            fnv1a(json.iter().chain(&[0]).chain(home.as_bytes()))
        })
        .collect()
}

/// FNV-1a, 64 bits: small, stable across builds and platforms.
fn fnv1a<'a>(bytes: impl IntoIterator<Item = &'a u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What this host knows of another's hub table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    /// Its table has not arrived: what it sends is dropped.
    Unknown,
    /// Its table is this host's.
    Same,
    /// Its table differs: refused.
    Differs,
}

/// What a server thread is told.
enum Cmd {
    /// An operation from host `from`.
    Op(usize, HubOp),
    /// Host `host` left the run.
    Left(usize),
}

/// What the relay and the servers share with the transport's callbacks.
struct Shared {
    hubs: Hubs,
    hosts: Vec<String>,
    here: usize,
    homes: Vec<usize>,
    wire: Arc<dyn HubWire>,
    stop: AtomicBool,
    /// Messages for the relay (to proxies), from the transport.
    inbox: Mutex<VecDeque<HubMsg>>,
    /// Homes that left or were refused, for the relay to fail their proxies,
    /// with the `P_FAILED` code.
    lost: Mutex<Vec<(usize, u32)>>,
    /// This host's [`table_digests`].
    digests: Vec<u64>,
    /// Per host: what its table is.
    peers: Mutex<Vec<Peer>>,
    /// Per hub homed here that other hosts use: its server.
    servers: Vec<Option<Server>>,
    reports: Mutex<Vec<HubReport>>,
    /// What was refused, by host and kind (reported once each).
    refused: Mutex<std::collections::BTreeSet<(usize, String)>>,
    /// Per host: `None` once it joined (send at once), else what waits for it.
    held: Mutex<Vec<Option<Vec<HubMsg>>>>,
}

/// What the transport's callbacks share with one home server.
struct Server {
    /// Its commands.
    tx: Mutex<Sender<Cmd>>,
    /// Its doorbell: bumped and woken after every command (and at stop). The
    /// server sleeps on it and, while it waits on the real hub, on it and on
    /// the hub's word at once (`futex_waitv`), so a command is heard at once.
    bell: AtomicU32,
    /// Its wake-ups (returns from a sleep), for [`HubNode::server_wakes`].
    wakes: AtomicU64,
}

impl Server {
    /// Hands the server a command and wakes it.
    fn send(&self, cmd: Cmd) {
        let _ = lock(&self.tx).send(cmd);
        self.ring();
    }

    /// Wakes the server: it looks at its commands and the node's stop.
    fn ring(&self) {
        // Release: pairs with the Acquire load in `Server::seen`, so a server
        // that sees the new value finds the command sent before it.
        self.bell.fetch_add(1, Ordering::Release);
        futex_wake_shared(&self.bell, 1);
    }

    /// The doorbell now: read before the server looks at its commands, so
    /// that any command sent after the look changes it.
    fn seen(&self) -> u32 {
        // Acquire: pairs with the Release add in `ring`.
        self.bell.load(Ordering::Acquire)
    }

    /// Sleeps until the doorbell differs from `seen` (a command, or stop).
    fn idle(&self, seen: u32) {
        futex_wait_shared(&self.bell, seen, None);
        self.woke();
    }

    fn woke(&self) {
        // Relaxed: a counter read for a report.
        self.wakes.fetch_add(1, Ordering::Relaxed);
    }

    /// The park a server waits on the real hub with: it also wakes, and the
    /// wait gives up, when the doorbell moves past `seen`.
    fn park(&self, seen: u32) -> ServerPark<'_> {
        ServerPark { server: self, seen }
    }
}

/// A wait on a real hub that also ends on a command (see [`Server::bell`]).
struct ServerPark<'a> {
    server: &'a Server,
    seen: u32,
}

impl Park for ServerPark<'_> {
    fn park(&self, word: &AtomicU32, expected: u32, deadline: Option<Instant>) {
        let bell = &self.server.bell;
        if !futex_wait_either_shared(word, expected, bell, self.seen, deadline) {
            // No futex_waitv: the hub's word alone, a slice at a time.
            let slice = Instant::now() + SERVER_SLICE;
            let until = deadline.map_or(slice, |d| d.min(slice));
            futex_wait_shared(word, expected, Some(until - Instant::now().min(until)));
        }
        self.server.woke();
    }

    fn unpark(&self, word: &AtomicU32, count: u32) {
        futex_wake_shared(word, count);
    }

    fn interrupted(&self) -> bool {
        self.server.seen() != self.seen
    }
}

/// The hub threads of one host: its relay and its home servers. Stops (and
/// joins them) on [`stop`](Self::stop) or drop.
pub struct HubNode {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl HubNode {
    /// Starts the relay and the servers of host `here` (an index in `hosts`)
    /// for `hubs` (made with [`Hubs::in_process_at`] or
    /// [`Hubs::create_shared_at`] for the same `hosts` and `here`), sending
    /// through `wire`. The threads inherit the caller's CPU affinity: call it
    /// from a thread off the real-time CPUs.
    pub fn start(
        hubs: &Hubs,
        hosts: &[String],
        here: usize,
        wire: Arc<dyn HubWire>,
        joining: Joining,
    ) -> Result<HubNode, HubError> {
        let decls = hubs.decls();
        let homes = homes(decls, hosts)?;
        let mut receivers = Vec::new();
        let servers = homes
            .iter()
            .enumerate()
            .map(|(i, &home)| {
                (home == here && hosts.len() > 1).then(|| {
                    let (tx, rx) = mpsc::channel();
                    receivers.push((i, rx));
                    Server {
                        tx: Mutex::new(tx),
                        bell: AtomicU32::new(0),
                        wakes: AtomicU64::new(0),
                    }
                })
            })
            .collect();
        let shared = Arc::new(Shared {
            hubs: hubs.clone(),
            hosts: hosts.to_vec(),
            here,
            homes,
            wire,
            stop: AtomicBool::new(false),
            inbox: Mutex::new(VecDeque::new()),
            lost: Mutex::new(Vec::new()),
            digests: table_digests(decls, hosts),
            peers: Mutex::new(
                (0..hosts.len())
                    .map(|h| if h == here { Peer::Same } else { Peer::Unknown })
                    .collect(),
            ),
            servers,
            reports: Mutex::new(Vec::new()),
            refused: Mutex::new(std::collections::BTreeSet::new()),
            held: Mutex::new(
                (0..hosts.len())
                    .map(|_| (joining == Joining::Announced).then(Vec::new))
                    .collect(),
            ),
        });
        // The first message to every host: before the threads send anything.
        for to in (0..hosts.len()).filter(|&h| h != here) {
            shared.send(to, 0, HubOp::Table(shared.digests.clone()));
        }
        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| HubError::Lock {
                    name: name.to_owned(),
                    what: "starting its thread",
                    source: e,
                })
        };
        if shared.homes.iter().any(|&h| h != here) {
            let s = Arc::clone(&shared);
            threads.push(spawn("ictus-hub-relay", Box::new(move || relay(&s)))?);
        }
        for (i, rx) in receivers {
            let s = Arc::clone(&shared);
            threads.push(spawn(
                "ictus-hub-home",
                Box::new(move || serve(&s, i, &rx)),
            )?);
        }
        Ok(HubNode {
            shared,
            threads: Mutex::new(threads),
        })
    }

    /// A message from host `from`, from the transport (any thread but a
    /// real-time one). Messages for hubs that are not there, or not what
    /// that side takes, are dropped.
    pub fn deliver(&self, from: usize, msg: HubMsg) {
        let s = &self.shared;
        if from == s.here || from >= s.hosts.len() {
            return;
        }
        if let HubOp::Table(digests) = &msg.op {
            self.check_table(from, digests);
            return;
        }
        if lock(&s.peers)[from] != Peer::Same {
            return;
        }
        if let Some((name, n)) = msg.op.count()
            && n > MAX_COUNT
        {
            s.refuse(from, format!("a {name} of {n} (at most {MAX_COUNT})"));
            return;
        }
        let i = msg.hub as usize;
        let (Some(&home), true) = (s.homes.get(i), from < s.hosts.len() && from != s.here) else {
            return;
        };
        if home == s.here {
            let h = s.hubs.handle(i, s.hubs.decls()[i].name());
            match (s.hubs.decls()[i].kind(), &msg.op) {
                // Applied at once: a give needs no waiting.
                (HubKind::Semaphore { .. }, HubOp::Give(n)) => give(&h, *n),
                (HubKind::Event, HubOp::Give(_)) => {
                    words::EventWords::new(h.words()).raise(h.park())
                }
                _ => {
                    if let Some(Some(server)) = s.servers.get(i) {
                        server.send(Cmd::Op(from, msg.op));
                    }
                }
            }
        } else if home == from {
            let h = s.hubs.handle(i, s.hubs.decls()[i].name());
            match (s.hubs.decls()[i].kind(), &msg.op) {
                // Applied at once: the waiter wakes without the relay.
                (HubKind::Semaphore { .. }, HubOp::Grant(n)) => give(&h, *n),
                (HubKind::Event, HubOp::Grant(_)) => {
                    words::EventWords::new(h.words()).raise(h.park())
                }
                (HubKind::Resource, HubOp::Grant(_)) => {
                    words::EventWords::new(&h.header()[P_GRANTED..]).raise(h.park());
                }
                _ => {
                    lock(&s.inbox).push_back(msg);
                    s.hubs.ring_bell();
                }
            }
        }
    }

    /// Host `from`'s table arrived: the same, or `from` is refused (reported,
    /// its proxies here failed, nothing more taken from it).
    fn check_table(&self, from: usize, digests: &[u64]) {
        let s = &self.shared;
        let same = digests == s.digests.as_slice();
        {
            let mut peers = lock(&s.peers);
            if peers[from] != Peer::Unknown {
                return;
            }
            peers[from] = if same { Peer::Same } else { Peer::Differs };
        }
        if same {
            return;
        }
        let first = s.digests.iter().zip(digests).position(|(a, b)| a != b);
        let hub = first
            .or((s.digests.len() > digests.len()).then_some(digests.len()))
            .map(|i| s.hubs.decls()[i].name().to_owned());
        s.report(HubReport::TableDiffers {
            host: s.hosts[from].clone(),
            hub,
            here: s.digests.len(),
            there: digests.len(),
        });
        lock(&s.lost).push((from, FAILED_DIFFERS));
        s.hubs.ring_bell();
    }

    /// Host `host` left the run: its proxies here fail, its demands and
    /// holds on hubs homed here end.
    pub fn host_left(&self, host: usize) {
        let s = &self.shared;
        if host == s.here || host >= s.hosts.len() {
            return;
        }
        lock(&s.lost).push((host, FAILED_LEFT));
        // Nothing more is held for it: what is sent now is lost with it.
        lock(&s.held)[host] = None;
        s.hubs.ring_bell();
        for server in s.servers.iter().flatten() {
            server.send(Cmd::Left(host));
        }
    }

    /// Host `host` is there (its transport listens): what was held for it is
    /// sent, in order, and later messages go at once.
    pub fn host_joined(&self, host: usize) {
        let s = &self.shared;
        let mut held = lock(&s.held);
        if let Some(slot) = held.get_mut(host)
            && let Some(waiting) = slot.take()
        {
            for msg in waiting {
                s.wire.send(host, msg);
            }
        }
    }

    /// What the hubs did because hosts left, since the last call.
    pub fn reports(&self) -> Vec<HubReport> {
        std::mem::take(&mut *lock(&self.shared.reports))
    }

    /// How many times the home server of hub `hub` (its index in the table)
    /// woke from a sleep so far; `None` for a hub without one (homed
    /// elsewhere, or a run on one host). A server sleeps until a command or
    /// the real hub wakes it, never in slices (but on a kernel without
    /// `futex_waitv`, before Linux 5.16, where it looks at its commands every
    /// millisecond while it waits on the hub): for diagnostics and tests.
    pub fn server_wakes(&self, hub: usize) -> Option<u64> {
        let server = self.shared.servers.get(hub)?.as_ref()?;
        // Relaxed: a counter read for a report.
        Some(server.wakes.load(Ordering::Relaxed))
    }

    /// Stops the threads and waits for them.
    pub fn stop(self) {
        self.halt();
    }

    /// Stops the threads and waits for them, for a node shared with the
    /// transport's callbacks (which may still deliver: nothing is done then).
    pub fn halt(&self) {
        // Relaxed: the threads look at it every few milliseconds; nothing is
        // published with it.
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.hubs.ring_bell();
        for server in self.shared.servers.iter().flatten() {
            server.ring();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for HubNode {
    fn drop(&mut self) {
        self.halt();
    }
}

impl std::fmt::Debug for HubNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubNode")
            .field("here", &self.shared.here)
            .field("threads", &lock(&self.threads).len())
            .finish()
    }
}

/// Locks a mutex, taking over one poisoned by a panicking thread (the state
/// it guards stays usable: queues and flags).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn stopped(&self) -> bool {
        // Relaxed: see `HubNode::halt`.
        self.stop.load(Ordering::Relaxed)
    }

    fn send(&self, to: usize, hub: usize, op: HubOp) {
        let msg = HubMsg {
            hub: hub as u32,
            op,
        };
        // Sent under the lock, so that nothing overtakes what `host_joined`
        // flushes.
        let mut held = lock(&self.held);
        match held.get_mut(to) {
            Some(Some(waiting)) => waiting.push(msg),
            _ => self.wire.send(to, msg),
        }
    }

    /// Refuses what host `from` sent (`what`), reported once per host and kind
    /// (the words before " of").
    fn refuse(&self, from: usize, what: String) {
        let kind = what.split(" of ").next().unwrap_or_default().to_string();
        if lock(&self.refused).insert((from, kind)) {
            self.report(HubReport::Refused {
                host: self.hosts[from].clone(),
                what,
            });
        }
    }

    /// Queues host `from`'s `n` demands at the end of `queue`, where it may have at
    /// most [`MAX_COUNT`] waiting in all; more are refused and reported, none queued.
    fn queue_demand(&self, queue: &mut VecDeque<usize>, from: usize, n: u32) {
        let waiting = queue.iter().filter(|&&q| q == from).count();
        if waiting + n as usize <= MAX_COUNT as usize {
            queue.extend((0..n).map(|_| from));
        } else {
            self.refuse(
                from,
                format!("a Demand of {n} with {waiting} waiting (at most {MAX_COUNT})"),
            );
        }
    }

    fn report(&self, r: HubReport) {
        lock(&self.reports).push(r);
    }
}

/// The relay's state of one proxy.
#[derive(Default)]
struct ProxyState {
    /// Its home left: nothing more is done for it.
    dead: bool,
    /// FIFO, sender here: the relay is the proxy ring's consumer.
    out: Option<(RingConsumer, u32)>,
    /// FIFO, receiver here: the relay is the proxy ring's producer; messages
    /// delivered so far, credits returned so far, and arrivals without room.
    inb: Option<Inbound>,
    /// Port: an outbound message claimed and sent home, waiting for its ack.
    port_out: bool,
    /// Port: a message offered in the inbound port, waiting for its copy;
    /// and those that arrived while one was.
    port_in: bool,
    port_pending: VecDeque<Vec<u8>>,
}

struct Inbound {
    producer: RingProducer,
    delivered: u32,
    credited: u32,
    pending: VecDeque<Vec<u8>>,
}

/// The relay thread: sends what the proxies counted and moves their messages.
fn relay(s: &Shared) {
    let decls = s.hubs.decls();
    let mut state: Vec<ProxyState> = decls.iter().map(|_| ProxyState::default()).collect();
    // Made once: the loop allocates nothing but the messages it sends.
    let handles: Vec<super::Handle> = decls
        .iter()
        .enumerate()
        .map(|(i, d)| s.hubs.handle(i, d.name()))
        .collect();
    let bell = s.hubs.bell();
    let park = &s.hubs.inner.park;
    let mut buf = Vec::new();
    while !s.stopped() {
        for (home, why) in std::mem::take(&mut *lock(&s.lost)) {
            for (i, st) in state.iter_mut().enumerate() {
                if s.homes[i] == home && home != s.here && !st.dead {
                    st.dead = true;
                    let h = &handles[i];
                    // Release: pairs with the Acquire load in `Handle::failed`.
                    h.header()[P_FAILED].store(why, Ordering::Release);
                    // A refused home was reported once, as the table's.
                    if why == FAILED_LEFT {
                        s.report(HubReport::HomeLost {
                            hub: decls[i].name().to_owned(),
                            home: s.hosts[home].clone(),
                        });
                    }
                }
            }
        }
        let inbox = std::mem::take(&mut *lock(&s.inbox));
        for msg in inbox {
            let i = msg.hub as usize;
            if !state[i].dead {
                proxy_answer(s, i, &mut state[i], msg.op);
            }
        }
        for (i, d) in decls.iter().enumerate() {
            let home = s.homes[i];
            if home == s.here || state[i].dead {
                continue;
            }
            let h = &handles[i];
            // Acquire (both): pairs with the Release add in `tell_relay`.
            let out = h.header()[P_OUT].swap(0, Ordering::Acquire);
            if out > 0 {
                let op = match d.kind() {
                    HubKind::Resource => HubOp::Release(out),
                    _ => HubOp::Give(out),
                };
                s.send(home, i, op);
            }
            let demand = h.header()[P_DEMAND].swap(0, Ordering::Acquire);
            if demand > 0 {
                s.send(home, i, HubOp::Demand(demand));
            }
            match d.kind() {
                HubKind::Fifo { message, capacity } => {
                    let bytes = message_bytes(message);
                    buf.resize(bytes, 0);
                    relay_fifo(s, i, h, &mut state[i], capacity, &mut buf);
                }
                HubKind::Port { message } => {
                    let bytes = message_bytes(message);
                    buf.resize(bytes, 0);
                    let st = &mut state[i];
                    let outbound = words::PortWords::new(h.words(), bytes);
                    if !st.port_out && outbound.try_claim(&mut buf) {
                        st.port_out = true;
                        s.send(home, i, HubOp::Push(buf.clone()));
                    }
                    let inbound = words::PortWords::new(
                        &h.words()[words::PortWords::words_for(bytes)..],
                        bytes,
                    );
                    if st.port_in && inbound.collect(park, Some(Instant::now())) {
                        st.port_in = false;
                        s.send(home, i, HubOp::Taken);
                    }
                    if !st.port_in
                        && let Some(m) = st.port_pending.pop_front()
                    {
                        // The inbound port is this relay's alone to offer on:
                        // free once the last offer was collected.
                        st.port_in = inbound.offer(&m, park, Some(Instant::now()));
                    }
                }
                _ => {}
            }
        }
        bell.wait(park, Instant::now().checked_add(RELAY_POLL));
    }
}

/// Applies a home's answer to proxy `i`.
fn proxy_answer(s: &Shared, i: usize, st: &mut ProxyState, op: HubOp) {
    let d = &s.hubs.decls()[i];
    let h = s.hubs.handle(i, d.name());
    let park = &s.hubs.inner.park;
    match (d.kind(), op) {
        (HubKind::Fifo { .. }, HubOp::Refused(end)) => {
            // Release: pairs with the Acquire load in `fifo_dead`.
            h.header()[P_REFUSED].store(1, Ordering::Release);
            // The relay's claim of the other end here goes.
            let word = match end {
                End::Sender => FIFO_RECEIVER,
                End::Receiver => FIFO_SENDER,
            };
            // Release: pairs with the Acquire claim of a next end.
            h.words()[word].store(0, Ordering::Release);
            st.out = None;
            st.inb = None;
        }
        (HubKind::Fifo { .. }, HubOp::Ack(n)) => {
            if let Some((_, in_flight)) = &mut st.out {
                *in_flight = in_flight.saturating_sub(n);
            }
        }
        (HubKind::Fifo { .. }, HubOp::Deliver(m)) => {
            if let Some(inb) = &mut st.inb {
                inb.pending.push_back(m);
            }
        }
        (HubKind::Port { message }, HubOp::Ack(_)) if st.port_out => {
            st.port_out = false;
            words::PortWords::new(h.words(), message_bytes(message)).taken(park);
        }
        (HubKind::Port { message }, HubOp::Deliver(m)) => {
            let bytes = message_bytes(message);
            let inbound =
                words::PortWords::new(&h.words()[words::PortWords::words_for(bytes)..], bytes);
            if !st.port_in && st.port_pending.is_empty() {
                st.port_in = inbound.offer(&m, park, Some(Instant::now()));
                if !st.port_in {
                    st.port_pending.push_back(m);
                }
            } else {
                st.port_pending.push_back(m);
            }
        }
        _ => {}
    }
}

/// The relay's work for a proxied FIFO: attach and detach the ends used
/// here, move this host's sender's messages home, put delivered messages in
/// this host's ring and return the room its receiver freed.
fn relay_fifo(
    s: &Shared,
    i: usize,
    h: &super::Handle,
    st: &mut ProxyState,
    capacity: u32,
    buf: &mut [u8],
) {
    let home = s.homes[i];
    let park = &s.hubs.inner.park;
    let ring = Ring::new(&h.words()[FIFO_RING..], capacity, buf.len());
    let (sender, receiver) = (&h.words()[FIFO_SENDER], &h.words()[FIFO_RECEIVER]);
    // Acquire (loads and claims): pairs with the Release stores of the ends'
    // claims and drops (see `Hubs::fifo_end`).
    let claim = |w: &AtomicU32| {
        w.compare_exchange(0, LINK_END, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    };
    // Acquire: as above.
    if h.header()[P_REFUSED].load(Ordering::Acquire) != 0 {
        return;
    }
    if st.out.is_none() && st.inb.is_none() {
        if sender.load(Ordering::Acquire) != 0 && claim(receiver) {
            st.out = Some((ring.consumer(), 0));
            s.send(home, i, HubOp::Attach(End::Sender));
        } else if receiver.load(Ordering::Acquire) != 0 && claim(sender) {
            st.inb = Some(Inbound {
                producer: ring.producer(),
                delivered: 0,
                credited: 0,
                pending: VecDeque::new(),
            });
            s.send(home, i, HubOp::Attach(End::Receiver));
        }
    }
    if let Some((consumer, in_flight)) = &mut st.out {
        while *in_flight < capacity && ring.try_pop(consumer, buf, park) {
            *in_flight += 1;
            s.send(home, i, HubOp::Push(buf.to_vec()));
        }
        // Acquire: as above.
        if sender.load(Ordering::Acquire) == 0 && ring.is_empty() {
            // Release: pairs with the Acquire claim of a next receiver here.
            receiver.store(0, Ordering::Release);
            st.out = None;
            s.send(home, i, HubOp::Detach(End::Sender));
        }
    }
    if let Some(inb) = &mut st.inb {
        while let Some(m) = inb.pending.front() {
            if !ring.try_push(&mut inb.producer, m, park) {
                break;
            }
            inb.pending.pop_front();
            inb.delivered = inb.delivered.wrapping_add(1);
        }
        let taken = inb.delivered.wrapping_sub(ring.len());
        let new = taken.wrapping_sub(inb.credited);
        if new > 0 {
            inb.credited = taken;
            s.send(home, i, HubOp::Credit(new));
        }
        // Acquire: as above.
        if receiver.load(Ordering::Acquire) == 0 {
            // Release: pairs with the Acquire claim of a next sender here.
            sender.store(0, Ordering::Release);
            st.inb = None;
            s.send(home, i, HubOp::Detach(End::Receiver));
        }
    }
}

/// A home server: acts on hub `i`'s real words for the other hosts.
///
/// Each server has the same round: read its doorbell ([`Server::seen`]),
/// take every command there, do what can be done without waiting, then
/// sleep, on the real hub with a [`ServerPark`] of that doorbell value (so a
/// command arriving meanwhile ends the wait at once) or on the doorbell alone.
fn serve(s: &Shared, i: usize, rx: &Receiver<Cmd>) {
    let Some(Some(server)) = s.servers.get(i) else {
        return;
    };
    match s.hubs.decls()[i].kind() {
        HubKind::Semaphore { .. } | HubKind::Event => serve_tokens(s, server, i, rx),
        HubKind::Fifo { message, capacity } => {
            serve_fifo(s, server, i, rx, message_bytes(message), capacity);
        }
        HubKind::Port { message } => serve_port(s, server, i, rx, message_bytes(message)),
        HubKind::Resource => serve_resource(s, server, i, rx),
    }
}

/// Semaphore and event: one token (or raise) taken from the real hub per
/// demand, granted in the order the demands arrived. A token taken for a
/// host that left meanwhile, with no other demand, goes back to the hub.
fn serve_tokens(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let is_event = matches!(s.hubs.decls()[i].kind(), HubKind::Event);
    let mut queue: VecDeque<usize> = VecDeque::new();
    // A token (or raise) taken from the real hub, not yet granted.
    let mut token = false;
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Demand(n)) => s.queue_demand(&mut queue, from, n),
                Cmd::Left(host) => queue.retain(|&q| q != host),
                Cmd::Op(..) => {}
            }
        }
        if std::mem::take(&mut token) {
            if let Some(to) = queue.pop_front() {
                s.send(to, i, HubOp::Grant(1));
            } else if is_event {
                words::EventWords::new(h.words()).raise(h.park());
            } else {
                words::SemaphoreWords::new(h.words()).give(h.park());
            }
        }
        if queue.is_empty() {
            server.idle(seen);
            continue;
        }
        let park = server.park(seen);
        token = if is_event {
            words::EventWords::new(h.words()).wait(&park, None)
        } else {
            words::SemaphoreWords::new(h.words()).take(&park, None)
        };
    }
}

/// Gives `n` to semaphore `h`, waking its waiters.
fn give(h: &super::Handle, n: u32) {
    let sem = words::SemaphoreWords::new(h.words());
    for _ in 0..n {
        sem.give(h.park());
    }
}

/// FIFO: the home end of a remote sender (its messages pushed into the real
/// ring, in order, acknowledged) and of a remote receiver (messages popped
/// from the real ring while its host has room).
fn serve_fifo(
    s: &Shared,
    server: &Server,
    i: usize,
    rx: &Receiver<Cmd>,
    bytes: usize,
    capacity: u32,
) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let mut home = FifoHome {
        s,
        i,
        words: h.words(),
        ring: Ring::new(&h.words()[FIFO_RING..], capacity, bytes),
        park: h.park(),
        capacity,
        bytes,
        sender: None,
        pending: VecDeque::new(),
        receiver: None,
        buf: vec![0; bytes],
    };
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            home.command(cmd);
        }
        if home.move_messages() {
            continue;
        }
        home.wait(server, seen);
    }
}

/// The home end of a FIFO hub: the real ring, and the remote sender and receiver
/// attached to it.
struct FifoHome<'a> {
    s: &'a Shared,
    i: usize,
    words: &'a [AtomicU32],
    ring: Ring<'a>,
    park: &'a ictus_os::handoff::FutexPark,
    capacity: u32,
    bytes: usize,
    /// The remote sender's host and the ring's producer end.
    sender: Option<(usize, RingProducer)>,
    /// The remote sender's messages not yet in the ring.
    pending: VecDeque<Vec<u8>>,
    /// The remote receiver's host, the ring's consumer end and the credits (the
    /// messages its host has room for).
    receiver: Option<(usize, RingConsumer, u32)>,
    buf: Vec<u8>,
}

impl FifoHome<'_> {
    fn end_word(&self, end: End) -> &AtomicU32 {
        match end {
            End::Sender => &self.words[FIFO_SENDER],
            End::Receiver => &self.words[FIFO_RECEIVER],
        }
    }

    /// Applies one command of a remote host.
    fn command(&mut self, cmd: Cmd) {
        let (s, capacity) = (self.s, self.capacity);
        match cmd {
            Cmd::Op(from, HubOp::Attach(end)) => self.attach(from, end),
            Cmd::Op(from, HubOp::Detach(end)) => {
                let ours = match end {
                    End::Sender => self.sender.as_ref().is_some_and(|x| x.0 == from),
                    End::Receiver => self.receiver.as_ref().is_some_and(|x| x.0 == from),
                };
                if ours && (end == End::Receiver || self.pending.is_empty()) {
                    // Release: pairs with the Acquire claim of a next end.
                    self.end_word(end).store(0, Ordering::Release);
                    match end {
                        End::Sender => self.sender = None,
                        End::Receiver => self.receiver = None,
                    }
                }
            }
            Cmd::Op(from, HubOp::Push(m)) => {
                if self.sender.as_ref().is_some_and(|x| x.0 == from) && m.len() == self.bytes {
                    // A sender's proxy has at most the capacity in flight (it
                    // waits for acks): more is not its to send.
                    if self.pending.len() < capacity as usize {
                        self.pending.push_back(m);
                    } else {
                        s.refuse(
                            from,
                            format!("a Push past the FIFO's capacity of {capacity}"),
                        );
                    }
                }
            }
            Cmd::Op(from, HubOp::Credit(n)) => {
                if let Some((host, _, credits)) = &mut self.receiver
                    && *host == from
                {
                    *credits = credits.saturating_add(n).min(capacity);
                }
            }
            Cmd::Left(host) => {
                if self.receiver.as_ref().is_some_and(|x| x.0 == host) {
                    // Release: as above.
                    self.end_word(End::Receiver).store(0, Ordering::Release);
                    self.receiver = None;
                }
                if self.sender.as_ref().is_some_and(|x| x.0 == host) && self.pending.is_empty() {
                    // Release: as above.
                    self.end_word(End::Sender).store(0, Ordering::Release);
                    self.sender = None;
                }
            }
            Cmd::Op(..) => {}
        }
    }

    /// Host `from` attaches as the FIFO's `end`, if no one holds it here or there.
    fn attach(&mut self, from: usize, end: End) {
        // Acquire: pairs with the Release store of a dropped end.
        let free = self
            .end_word(end)
            .compare_exchange(0, LINK_END, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        let taken_remotely = match end {
            End::Sender => self.sender.is_some(),
            End::Receiver => self.receiver.is_some(),
        };
        if !free || taken_remotely {
            self.s.send(from, self.i, HubOp::Refused(end));
        } else if end == End::Sender {
            self.sender = Some((from, self.ring.producer()));
        } else {
            self.receiver = Some((from, self.ring.consumer(), self.capacity));
        }
    }

    /// Moves what it can without waiting: the pending messages into the ring
    /// (acknowledged), the ring's messages to the receiver while it has credits.
    /// Whether anything moved.
    fn move_messages(&mut self) -> bool {
        let mut progress = false;
        if let Some((host, producer)) = &mut self.sender {
            let mut acked = 0;
            while let Some(m) = self.pending.front() {
                if !self.ring.try_push(producer, m, self.park) {
                    break;
                }
                self.pending.pop_front();
                acked += 1;
            }
            if acked > 0 {
                progress = true;
                self.s.send(*host, self.i, HubOp::Ack(acked));
            }
        }
        if let Some((host, consumer, credits)) = &mut self.receiver {
            while *credits > 0 && self.ring.try_pop(consumer, &mut self.buf, self.park) {
                *credits -= 1;
                progress = true;
                self.s.send(*host, self.i, HubOp::Deliver(self.buf.clone()));
            }
        }
        progress
    }

    /// Waits for the ring to move, or for a command (`seen`: the server's count).
    fn wait(&mut self, server: &Server, seen: u32) {
        let wait = server.park(seen);
        match (&mut self.sender, &mut self.receiver) {
            // Empty (nothing popped, nothing pending): wait for a local
            // sender's push, or a command (a remote sender's push among them).
            (_, Some((host, consumer, credits))) if *credits > 0 && self.pending.is_empty() => {
                if self.ring.pop(consumer, &mut self.buf, &wait, None) {
                    *credits -= 1;
                    self.s.send(*host, self.i, HubOp::Deliver(self.buf.clone()));
                }
            }
            // Full: wait for the receiver to make room, or a command.
            (Some((host, producer)), _) if !self.pending.is_empty() => {
                if let Some(m) = self.pending.front()
                    && self.ring.push(producer, m, &wait, None)
                {
                    self.pending.pop_front();
                    self.s.send(*host, self.i, HubOp::Ack(1));
                }
            }
            _ => server.idle(seen),
        }
    }
}

/// Port: remote senders' messages are offered on the real port one at a time
/// and acknowledged once the real receiver took them; remote receivers'
/// demands claim messages on the real port, delivered to them, and marked
/// taken once their receiver has copied (or offered again if it left).
fn serve_port(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>, bytes: usize) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let port = words::PortWords::new(h.words(), bytes);
    let park = h.park();
    let mut outbound: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
    let mut offered: Option<usize> = None;
    let mut demands: VecDeque<usize> = VecDeque::new();
    let mut claimed: Option<usize> = None;
    let mut buf = vec![0; bytes];
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Push(m)) if m.len() == bytes => {
                    // A host's proxy offers one message at a time (it waits for
                    // the ack): a second waiting is not its to send.
                    if offered == Some(from) || outbound.iter().any(|(f, _)| *f == from) {
                        s.refuse(from, "a Push of a port before its last was taken".into());
                    } else {
                        outbound.push_back((from, m));
                    }
                }
                Cmd::Op(from, HubOp::Demand(n)) => s.queue_demand(&mut demands, from, n),
                Cmd::Op(from, HubOp::Taken) if claimed == Some(from) => {
                    port.taken(park);
                    claimed = None;
                }
                Cmd::Left(host) => {
                    outbound.retain(|(f, _)| *f != host);
                    demands.retain(|&d| d != host);
                    if claimed == Some(host) {
                        port.unclaim(park);
                        claimed = None;
                    }
                }
                Cmd::Op(..) => {}
            }
        }
        let now = Some(Instant::now());
        if offered.is_none()
            && let Some((from, m)) = outbound.front()
            && port.offer(m, park, now)
        {
            offered = Some(*from);
            outbound.pop_front();
        }
        if claimed.is_none()
            && let Some(&to) = demands.front()
            && port.try_claim(&mut buf)
        {
            demands.pop_front();
            claimed = Some(to);
            s.send(to, i, HubOp::Deliver(buf.clone()));
        }
        if claimed.is_some() {
            // The port is ours until that host's `Taken`: nothing to wait for
            // but commands.
            server.idle(seen);
            continue;
        }
        let wait = server.park(seen);
        if let Some(from) = offered {
            if port.collect(&wait, None) {
                offered = None;
                s.send(from, i, HubOp::Ack(1));
            }
        } else if !demands.is_empty() {
            if port.claim(&mut buf, &wait, None)
                && let Some(to) = demands.pop_front()
            {
                claimed = Some(to);
                s.send(to, i, HubOp::Deliver(buf.clone()));
            }
        } else if let Some((from, m)) = outbound.front() {
            if port.offer(m, &wait, None) {
                offered = Some(*from);
                outbound.pop_front();
            }
        } else {
            server.idle(seen);
        }
    }
    // A message still claimed for a host goes back to the port.
    if claimed.is_some() {
        port.unclaim(park);
    }
}

/// Resource: this thread locks the real PI lock for a remote host, in the
/// order the demands arrived, and holds it until that host's release.
///
/// The lock is waited for in the kernel (`FUTEX_LOCK_PI2`), so the home's
/// unlock hands it over at once; the wait is cut every
/// [`SERVER_LOCK_SLICE`] only to look whether the node stops. Commands that
/// arrive meanwhile need nothing until the lock is had: more demands queue,
/// and a release can only come from a holder, which there is not while this
/// thread waits. A lock had for a host that left meanwhile goes to the next
/// demand, or back.
fn serve_resource(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let pi = PiLock::new(&h.words()[0]);
    let mut queue: VecDeque<usize> = VecDeque::new();
    // This thread holds the real lock; for `holder` once granted.
    let mut locked = false;
    let mut holder: Option<usize> = None;
    let release = |pi: &PiLock<'_>| {
        // Cannot fail: this thread holds it.
        let _ = pi.unlock();
    };
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Demand(n)) => s.queue_demand(&mut queue, from, n),
                // One release per grant: a host holds the resource once at a
                // time (its own lock orders its threads).
                Cmd::Op(from, HubOp::Release(_)) if holder == Some(from) => {
                    release(&pi);
                    (locked, holder) = (false, None);
                }
                Cmd::Left(host) => {
                    queue.retain(|&q| q != host);
                    if holder == Some(host) {
                        release(&pi);
                        (locked, holder) = (false, None);
                        s.report(HubReport::Released {
                            hub: s.hubs.decls()[i].name().to_owned(),
                            host: s.hosts[host].clone(),
                        });
                    }
                }
                Cmd::Op(..) => {}
            }
        }
        if locked && holder.is_none() {
            if let Some(to) = queue.pop_front() {
                holder = Some(to);
                s.send(to, i, HubOp::Grant(1));
            } else {
                release(&pi);
                locked = false;
            }
        }
        if locked || queue.is_empty() {
            server.idle(seen);
            continue;
        }
        match pi.lock_until(Instant::now() + SERVER_LOCK_SLICE) {
            Ok(got) => locked = got,
            // A home thread died holding it (the home's own users see the same
            // error): look again after a slice, hearing commands meanwhile.
            Err(_) => {
                futex_wait_shared(&server.bell, seen, Some(SERVER_LOCK_SLICE));
                server.woke();
            }
        }
    }
    if locked {
        release(&pi);
    }
}

/// Hosts of a run in one process, their hub messages carried by channels (a
/// thread per host hands what arrives to its node): hubs across hosts without
/// a network, for tests, examples and measurements (the `hub_hops` example).
///
/// ```
/// use ictus_exec::hub::remote::InProcessHosts;
/// use ictus_exec::hub::{HubDecl, Hubs};
///
/// let hosts = ["h1".to_owned(), "h2".to_owned()];
/// let decls = [HubDecl::semaphore("s", 1).at("h2")];
/// let tables = (0..2)
///     .map(|here| Hubs::in_process_at(&decls, &hosts, here).unwrap())
///     .collect();
/// let sut = InProcessHosts::start(&hosts, tables).unwrap();
/// assert!(sut.hubs[0].semaphore("s").unwrap().take().is_ok(), "h2's token, taken on h1");
/// ```
pub struct InProcessHosts {
    /// Each host's table, in the order of the hosts.
    pub hubs: Vec<Hubs>,
    /// Each host's node.
    pub nodes: Vec<Arc<HubNode>>,
    /// Set: the pumps drop every message (the network gone).
    cut: Arc<AtomicBool>,
}

impl InProcessHosts {
    /// Starts the node of each of `tables` (host `i`'s made for `hosts` and
    /// `i`, with [`Hubs::in_process_at`] or [`Hubs::create_shared_at`]) and
    /// the threads that carry their messages.
    pub fn start(hosts: &[String], tables: Vec<Hubs>) -> Result<InProcessHosts, HubError> {
        let (txs, rxs): (Vec<_>, Vec<_>) = tables.iter().map(|_| mpsc::channel()).unzip();
        let cut = Arc::new(AtomicBool::new(false));
        let mut nodes = Vec::new();
        for (here, table) in tables.iter().enumerate() {
            let wire = ChanWire {
                from: here,
                to: txs.iter().map(|t| Mutex::new(t.clone())).collect(),
            };
            let node = HubNode::start(table, hosts, here, Arc::new(wire), Joining::AllPresent)?;
            nodes.push(Arc::new(node));
        }
        for (here, rx) in rxs.into_iter().enumerate() {
            let node = Arc::downgrade(&nodes[here]);
            let cut = Arc::clone(&cut);
            let pump = move || {
                while let Ok((from, msg)) = rx.recv() {
                    // Relaxed: a switch, ordered with nothing else.
                    if cut.load(Ordering::Relaxed) {
                        continue;
                    }
                    let Some(node) = node.upgrade() else { return };
                    node.deliver(from, msg);
                }
            };
            std::thread::Builder::new()
                .name("ictus-hub-pump".into())
                .spawn(pump)
                .map_err(|e| HubError::Lock {
                    name: hosts.get(here).cloned().unwrap_or_default(),
                    what: "starting its thread",
                    source: e,
                })?;
        }
        Ok(InProcessHosts {
            hubs: tables,
            nodes,
            cut,
        })
    }

    /// From now on every message is dropped, as if the network were gone
    /// (the nodes learn that a host left only from
    /// [`HubNode::host_left`]).
    pub fn cut(&self) {
        // Relaxed: see the pumps.
        self.cut.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for InProcessHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessHosts")
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// The wire of [`InProcessHosts`]: one channel per host.
struct ChanWire {
    from: usize,
    to: Vec<Mutex<Sender<(usize, HubMsg)>>>,
}

impl HubWire for ChanWire {
    fn send(&self, to: usize, msg: HubMsg) {
        let _ = lock(&self.to[to]).send((self.from, msg));
    }
}

// The header words used here fit the proxy header.
const _: () = assert!(P_GRANTED + 2 <= PROXY_WORDS);
