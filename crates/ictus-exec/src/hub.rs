//! Hubs (seed 004): the synchronisation and communication objects that
//! subsystems share by name, between threads or between processes, besides
//! the cells.
//!
//! | kind | what it does |
//! |---|---|
//! | [`Semaphore`] | counting: `give` adds a token, `take` waits for one |
//! | [`Event`] | binary: `raise` sets it, `wait` waits for it and clears it |
//! | FIFO ([`FifoSender`], [`FifoReceiver`]) | a bounded lock-free ring of fixed-size [`Element`] messages, one sender and one receiver |
//! | [`Port`] | synchronous hand-over with copy: `send` returns once a receiver has copied the message |
//! | [`Resource`] | a mutex with priority inheritance (the kernel's PI futex) |
//!
//! A hub table is a list of [`HubDecl`]s (in code, or `[[hub]]` tables in
//! TOML: `name`, `kind`, and `initial` for a semaphore, `type`, `len` and
//! `capacity` for a FIFO, `type` and `len` for a port). [`Hubs`] places them
//! in process memory ([`Hubs::in_process`]) or in a POSIX shared memory
//! segment ([`Hubs::create_shared`] / [`Hubs::open_shared`], with the same
//! stale-segment cleaning as the cells), each hub in its own 128 bytes.
//! Handles are looked up by name and checked against the declaration (kind,
//! and message type for FIFOs and ports).
//!
//! **Limits.** A message is at most 1 MiB, a FIFO holds 1 to 1048576 of them,
//! one hub's storage is at most [`MAX_HUB_BYTES`] (64 MiB), a table holds at
//! most [`MAX_HUBS`] hubs taking at most [`MAX_HUBS_BYTES`] (256 MiB) in all;
//! a declaration over one is refused ([`check_decls`]) before anything is
//! allocated, with the limit named.
//!
//! Waiting spins a little, then sleeps on a futex; the futex operations used
//! are the shared ones, so a hub in shared memory wakes threads of other
//! processes. The word-level protocols are in [`ictus_core::sync::hub`] (and
//! are checked with loom there). Nothing allocates after a handle is made.
//!
//! The two ends of a FIFO are claimed: a second sender (or receiver) is
//! refused while the first is alive, in any process, and the end is freed
//! when its handle is dropped or its process dies.
//!
//! **Across hosts** (seed 004's placement without source change). A hub may
//! name its home host (`host = "h2"`, [`HubDecl::at`]); without one it lives
//! on the main host (the run's first `[[host]]`), so a name is one hub in a
//! run. Each host's table ([`Hubs::in_process_at`], [`Hubs::create_shared_at`])
//! holds the hubs homed there and a *proxy* of every other one, in the same
//! memory (so the child processes of that host use it too), reached by the
//! same handles. On a proxy a real-time thread only changes words and rings
//! the table's doorbell (a futex word); the relay thread of
//! [`remote::HubNode`] carries the operation to the home and the answer back,
//! and a wait is the same bounded wait (spin, then sleep) on the proxy's
//! words, which the relay fills:
//!
//! - semaphore, event: `give`/`raise` counts a request sent home; `take`/`wait`
//!   takes a token already granted to this host, else asks the home for one
//!   and waits. The home's server takes one token from the real hub per
//!   demand, in arrival order across hosts, and grants it. A token granted
//!   after its waiter gave up (a timeout) stays with this host for its next
//!   take; `try_take` takes only granted tokens and asks nothing.
//! - FIFO: the home's ring is the FIFO and its order is exact. A remote
//!   sender's messages wait in its host's proxy ring (of the same capacity),
//!   from which the relay moves them home in order, at most `capacity` in
//!   flight; a remote receiver's host is sent messages from the home ring as
//!   room frees in its proxy ring. So `capacity` bounds each ring, and up to
//!   about three times it can be on the way between a remote sender and a
//!   remote receiver (its ring, the wire, the home ring). One sender and one
//!   receiver across hosts: the home claims the end for the first host that
//!   attaches; another host's end is refused
//!   ([`HubError::EndRefused`] on its operations, `Full` from `try_send`).
//!   On a host other than the home, one end at most: an end claimed there
//!   while the other is held there is refused ([`HubError::EndElsewhere`]),
//!   whether or not the relay has looked yet (of two claimed at once, at
//!   least one is refused), and the relay takes the other end of the proxy
//!   ring for the link: a FIFO whose two ends are on one host belongs on
//!   that host.
//! - port: exact synchronous hand-over. A remote send offers the message in
//!   this host's outbound port; the relay claims it (copy), the home offers
//!   it on the real port, and only when the real receiver, on any host, has
//!   copied it is it marked taken here: `send` returns then. A remote receive
//!   asks the home, which claims a message on the real port (claim and copy,
//!   [`ictus_core::sync::hub::Port::claim`]), sends it into this host's
//!   inbound port, and marks it taken only when this host's receiver copied
//!   it (or offers it again if this host left). A message delivered after its
//!   receiver gave up waits here for its next receive, and holds the port.
//! - resource: the home holds the real PI lock. A remote owner is
//!   represented there by a server thread that locks on its behalf and holds
//!   the lock until the owner's release arrives; the threads of the owner's
//!   host first contend on the proxy's own PI lock. Priority inheritance acts
//!   within each host, not across: a home waiter of higher priority boosts the
//!   server thread, a remote waiter boosts its own host's holder only. While
//!   the real lock is held at home, the server waits for it in the kernel
//!   ([`PiLock::lock_until`]), so the home's unlock hands it over at once.
//!   `try_lock` on a proxy does nothing (`Ok(None)`): the home cannot be asked
//!   without waiting.
//!
//! No home server polls: one waiting on the real hub for another host sleeps
//! on the hub's word and its command doorbell at once (`futex_waitv`), so a
//! command that arrives meanwhile is served at once (before Linux 5.16 it
//! looks every millisecond); see [`remote`].
//!
//! **Failure.** When a hub's home host leaves the run, its proxies fail: their
//! waiters return [`HubError::HomeLost`] (within [`FAIL_POLL`] of the link
//! learning it, which a Zenoh link does from the host's liveliness, within its
//! 2 s lease), later waiting operations return it too, and the non-waiting
//! ones do nothing (`give` returns `false`, `try_send` gives the message
//! back). At the home, what the host that left asked for is dropped, its
//! FIFO ends freed, a port message it had claimed offered again, and a
//! resource it held released and reported ([`remote::HubReport`]). A token
//! granted to a host as it leaves is lost with it.
//!
//! **Same table.** Messages name hubs by index: each host's first message to
//! another is its table's digests ([`remote::table_digests`]); a host whose
//! table differs is refused (nothing it sends is applied), reported
//! ([`remote::HubReport::TableDiffers`], naming it and the first hub that
//! differs), and the proxies of hubs homed there fail with
//! [`HubError::HomeDiffers`].
//!
//! ```
//! use ictus_exec::hub::{HubDecl, Hubs};
//!
//! let hubs = Hubs::in_process(&[
//!     HubDecl::semaphore("ready", 0),
//!     HubDecl::fifo::<[f32; 3]>("forces", 16),
//!     HubDecl::port::<u64>("setup"),
//!     HubDecl::resource("device"),
//! ])
//! .unwrap();
//!
//! let ready = hubs.semaphore("ready").unwrap();
//! ready.give();
//! ready.take().unwrap();
//!
//! let mut tx = hubs.fifo_sender::<[f32; 3]>("forces").unwrap();
//! let mut rx = hubs.fifo_receiver::<[f32; 3]>("forces").unwrap();
//! tx.try_send([1.0, 2.0, 3.0]).unwrap();
//! assert_eq!(rx.try_recv(), Some([1.0, 2.0, 3.0]));
//! assert!(hubs.fifo_sender::<[f32; 3]>("forces").is_err(), "one sender at a time");
//!
//! let device = hubs.resource("device").unwrap();
//! {
//!     let _guard = device.lock().unwrap();
//!     // ... use the device ...
//! }
//! assert!(hubs.port::<u32>("setup").is_err(), "declared as u64");
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the protocols on them are ictus_core::sync's (seqlock, hub), model-checked there, or this file's, tested across processes"
)]

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ictus_core::sync::hub::{self as words, Ring, RingConsumer, RingProducer};
use ictus_core::sync::spsc::Full;
use ictus_os::handoff::{FutexPark, PiLock};
use ictus_os::process::ProcessId;
use ictus_os::shm::{Segment, ShmError};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use toml::Spanned;

use crate::cell::{ElemShape, ElemType, Element};

pub mod remote;
use crate::shared::{read_described, write_described};

/// What a hub is, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HubKind {
    /// A counting semaphore holding `initial` tokens at the start.
    Semaphore {
        /// Tokens at the start.
        initial: u32,
    },
    /// A binary event, not raised at the start.
    Event,
    /// A ring of `capacity` messages of shape `message`.
    Fifo {
        /// The type of each message.
        message: ElemShape,
        /// Messages it holds when full.
        capacity: u32,
    },
    /// A synchronous hand-over of messages of shape `message`.
    Port {
        /// The type of each message.
        message: ElemShape,
    },
    /// A mutex with priority inheritance.
    Resource,
}

impl HubKind {
    /// The kind's name: `semaphore`, `event`, `fifo`, `port`, `resource`.
    pub fn name(&self) -> &'static str {
        match self {
            HubKind::Semaphore { .. } => "semaphore",
            HubKind::Event => "event",
            HubKind::Fifo { .. } => "fifo",
            HubKind::Port { .. } => "port",
            HubKind::Resource => "resource",
        }
    }
}

/// A hub's name and kind. In TOML, a `[[hub]]` table:
///
/// ```toml
/// [[hub]]
/// name = "forces"
/// kind = "fifo"
/// type = "f32"
/// len = 3          # default 1
/// capacity = 16
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "HubRepr", into = "HubRepr")]
pub struct HubDecl {
    name: String,
    kind: HubKind,
    host: Option<String>,
}

impl HubDecl {
    /// A hub of any kind.
    pub fn new(name: &str, kind: HubKind) -> Self {
        HubDecl {
            name: name.to_owned(),
            kind,
            host: None,
        }
    }

    /// The same hub, homed on host `host` (a `[[host]]` of the run): its state
    /// lives there, and the other hosts reach it through proxies. Without a
    /// host a hub lives on the main host (the first `[[host]]`).
    pub fn at(self, host: &str) -> HubDecl {
        HubDecl {
            host: Some(host.to_owned()),
            ..self
        }
    }

    /// The host it is homed on, if named (`None`: the main host).
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// A counting semaphore with `initial` tokens.
    pub fn semaphore(name: &str, initial: u32) -> Self {
        HubDecl::new(name, HubKind::Semaphore { initial })
    }

    /// A binary event.
    pub fn event(name: &str) -> Self {
        HubDecl::new(name, HubKind::Event)
    }

    /// A FIFO of `capacity` messages of type `T`.
    pub fn fifo<T: Element>(name: &str, capacity: u32) -> Self {
        HubDecl::new(
            name,
            HubKind::Fifo {
                message: ElemShape::of::<T>(),
                capacity,
            },
        )
    }

    /// A port for messages of type `T`.
    pub fn port<T: Element>(name: &str) -> Self {
        HubDecl::new(
            name,
            HubKind::Port {
                message: ElemShape::of::<T>(),
            },
        )
    }

    /// A resource (mutex with priority inheritance).
    pub fn resource(name: &str) -> Self {
        HubDecl::new(name, HubKind::Resource)
    }

    /// The hub's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its kind and parameters.
    pub fn kind(&self) -> HubKind {
        self.kind
    }

    /// Checks the name and the parameters.
    fn check(&self) -> Result<(), HubError> {
        let bad = |reason: String| HubError::BadDecl {
            name: self.name.clone(),
            reason,
        };
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(bad(
                "a hub name is ASCII letters, digits, `_`, `-` and `.`".into()
            ));
        }
        match self.kind {
            HubKind::Fifo { message, capacity } => {
                if !(1..=1 << 20).contains(&capacity) {
                    return Err(bad(format!(
                        "capacity {capacity}: a FIFO holds 1 to 1048576 messages"
                    )));
                }
                check_message(message).map_err(bad)?;
            }
            HubKind::Port { message } => check_message(message).map_err(bad)?,
            _ => {}
        }
        // Bounded by the checks above: at most 2^20 messages of 2^18 words.
        let bytes = self.storage_bytes();
        if bytes > MAX_HUB_BYTES {
            return Err(bad(format!(
                "its storage would be {bytes} bytes; the limit is {MAX_HUB_BYTES} (64 MiB) per hub"
            )));
        }
        Ok(())
    }

    /// The bytes of the hub's region in a table, once its parameters are
    /// checked (message at most 1 MiB, capacity at most 2^20).
    fn storage_bytes(&self) -> usize {
        self.words().next_multiple_of(REGION_ALIGN_WORDS) * 4
    }

    /// 32-bit words of the hub's region: the proxy header, then the kind's.
    fn words(&self) -> usize {
        PROXY_WORDS + self.kind_words()
    }

    /// 32-bit words of the kind's own state.
    fn kind_words(&self) -> usize {
        match self.kind {
            HubKind::Semaphore { .. } => words::Semaphore::WORDS,
            HubKind::Event => words::Event::WORDS,
            // Two ports: the hub's own (on a proxy: the outbound one, what this
            // host's senders offer), and a proxy's inbound one (what the home
            // hands this host's receivers).
            HubKind::Port { message } => 2 * words::Port::words_for(message_bytes(message)),
            HubKind::Fifo { message, capacity } => {
                FIFO_RING + Ring::words_for(capacity, message_bytes(message))
            }
            HubKind::Resource => 1,
        }
    }
}

/// The largest message of a FIFO or port.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The most storage one hub may take (a FIFO's ring, a port's buffer): 64 MiB.
pub const MAX_HUB_BYTES: usize = 64 << 20;

/// The most storage all the hubs of a table may take: 256 MiB.
pub const MAX_HUBS_BYTES: usize = 256 << 20;

/// The most hubs in a table.
pub const MAX_HUBS: usize = 4_096;

/// Checks a hub table: every declaration, unique names, at most [`MAX_HUBS`]
/// hubs and [`MAX_HUBS_BYTES`] of storage in all. On a mistake, the index of
/// the declaration that makes it (so that a caller can place it in a file).
/// Linear in the number of hubs.
pub fn check_decls(decls: &[HubDecl]) -> Result<(), (usize, HubError)> {
    let mut seen = HashSet::with_capacity(decls.len().min(MAX_HUBS + 1));
    let mut total = 0usize;
    for (i, d) in decls.iter().enumerate() {
        if i >= MAX_HUBS {
            return Err((
                i,
                HubError::TooManyHubs {
                    count: decls.len(),
                    limit: MAX_HUBS,
                },
            ));
        }
        d.check().map_err(|e| (i, e))?;
        if !seen.insert(d.name.as_str()) {
            return Err((
                i,
                HubError::DuplicateHub {
                    name: d.name.clone(),
                },
            ));
        }
        total = total
            .checked_add(d.storage_bytes())
            .filter(|&t| t <= MAX_HUBS_BYTES)
            .ok_or_else(|| {
                (
                    i,
                    HubError::TableTooLarge {
                        name: d.name.clone(),
                        limit: MAX_HUBS_BYTES,
                    },
                )
            })?;
    }
    Ok(())
}

fn check_message(message: ElemShape) -> Result<(), String> {
    match message.bytes() {
        Some(b) if message.len >= 1 && b <= MAX_MESSAGE_BYTES => Ok(()),
        _ => Err(format!(
            "message `{message}`: the length must be 1 or more and the size at most 1 MiB"
        )),
    }
}

/// Per hub, the name of its home for messages: its `host`, else the main
/// host's name when `hosts` are known.
fn home_names(decls: &[HubDecl], hosts: &[String]) -> Vec<String> {
    decls
        .iter()
        .map(|d| match (d.host(), hosts.first()) {
            (Some(h), _) => h.to_owned(),
            (None, Some(main)) => main.clone(),
            (None, None) => "the main host".to_owned(),
        })
        .collect()
}

fn message_bytes(message: ElemShape) -> usize {
    message.bytes().unwrap_or(0)
}

/// Word of a FIFO region holding the pid of the process whose sender is attached.
const FIFO_SENDER: usize = 0;
/// Word holding the pid of the receiver's process.
const FIFO_RECEIVER: usize = 1;
/// What a FIFO end's word holds while the link holds that end for another
/// host (never a pid: those are below 2^22).
const LINK_END: u32 = u32::MAX - 1;
/// Where the ring starts in a FIFO region (128 bytes on).
const FIFO_RING: usize = 32;
/// Hub regions start on multiples of this many words (128 bytes).
const REGION_ALIGN_WORDS: usize = 32;

/// The flat TOML/JSON form of a [`HubDecl`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HubRepr {
    name: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initial: Option<u32>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    ty: Option<ElemType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capacity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String>,
}

impl TryFrom<HubRepr> for HubDecl {
    type Error = String;

    fn try_from(r: HubRepr) -> Result<Self, String> {
        let only = |allowed: &[&str]| -> Result<(), String> {
            let given = [
                ("initial", r.initial.is_some()),
                ("type", r.ty.is_some()),
                ("len", r.len.is_some()),
                ("capacity", r.capacity.is_some()),
            ];
            match given
                .iter()
                .find(|(key, set)| *set && !allowed.contains(key))
            {
                Some((key, _)) => Err(format!("a {} hub has no `{key}`", r.kind)),
                None => Ok(()),
            }
        };
        let message = || -> Result<ElemShape, String> {
            let ty =
                r.ty.ok_or_else(|| format!("a {} hub needs the message `type`", r.kind))?;
            Ok(ElemShape::array(ty, r.len.unwrap_or(1)))
        };
        let kind = match r.kind.as_str() {
            "semaphore" => {
                only(&["initial"])?;
                HubKind::Semaphore {
                    initial: r.initial.unwrap_or(0),
                }
            }
            "event" => {
                only(&[])?;
                HubKind::Event
            }
            "resource" => {
                only(&[])?;
                HubKind::Resource
            }
            "port" => {
                only(&["type", "len"])?;
                HubKind::Port {
                    message: message()?,
                }
            }
            "fifo" => {
                only(&["type", "len", "capacity"])?;
                HubKind::Fifo {
                    message: message()?,
                    capacity: r
                        .capacity
                        .ok_or("a fifo hub needs a `capacity`".to_owned())?,
                }
            }
            other => {
                return Err(format!(
                    "unknown hub kind `{other}` (expected semaphore, event, fifo, port or resource)"
                ));
            }
        };
        let decl = HubDecl {
            name: r.name,
            kind,
            host: r.host,
        };
        decl.check().map_err(|e| e.to_string())?;
        Ok(decl)
    }
}

impl From<HubDecl> for HubRepr {
    fn from(d: HubDecl) -> Self {
        let mut r = HubRepr {
            name: d.name,
            kind: d.kind.name().to_owned(),
            initial: None,
            ty: None,
            len: None,
            capacity: None,
            host: d.host,
        };
        match d.kind {
            HubKind::Semaphore { initial } => r.initial = Some(initial),
            HubKind::Fifo { message, capacity } => {
                r.ty = Some(message.ty);
                r.len = Some(message.len);
                r.capacity = Some(capacity);
            }
            HubKind::Port { message } => {
                r.ty = Some(message.ty);
                r.len = Some(message.len);
            }
            HubKind::Event | HubKind::Resource => {}
        }
        r
    }
}

/// Parses a TOML file of `[[hub]]` tables (and nothing else); `file` labels
/// the errors, which carry line and column.
///
/// Every rule of [`check_decls`] is checked too (a duplicate name, a table
/// over the limits), placed at the `[[hub]]` table that breaks it.
pub fn decls_from_toml(text: &str, file: &str) -> Result<Vec<HubDecl>, HubError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct HubFile {
        #[serde(default)]
        hub: Vec<Spanned<toml::Table>>,
    }
    let at = |offset: usize, message: String| {
        HubError::File(ictus_os::fs::Located::at(file, text, offset, message))
    };
    let doc: HubFile = toml::from_str(text).map_err(|e| {
        at(
            e.span().map_or(0, |s| s.start),
            e.message().trim().to_owned(),
        )
    })?;
    let starts: Vec<usize> = doc.hub.iter().map(|h| h.span().start).collect();
    let decls = doc
        .hub
        .into_iter()
        .zip(&starts)
        .map(|(table, &start)| {
            HubDecl::deserialize(toml::Value::Table(table.into_inner()))
                .map_err(|e| at(start, e.message().trim().to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_decls(&decls).map_err(|(i, e)| at(starts[i], e.to_string()))?;
    Ok(decls)
}

/// What went wrong with a hub table or a hub.
#[derive(Debug, Error)]
pub enum HubError {
    /// No hub of that name.
    #[error("there is no hub `{name}`")]
    UnknownHub {
        /// The name asked for.
        name: String,
    },
    /// The hub is of another kind.
    #[error("hub `{name}` is a {declared}, not a {requested}")]
    WrongKind {
        /// The hub.
        name: String,
        /// Its declared kind.
        declared: &'static str,
        /// The kind asked for.
        requested: &'static str,
    },
    /// The hub's messages are of another type.
    #[error("hub `{name}` carries `{declared}` but was requested for `{requested}`")]
    TypeMismatch {
        /// The hub.
        name: String,
        /// The declared message type.
        declared: ElemShape,
        /// The type asked for.
        requested: ElemShape,
    },
    /// The FIFO end is attached elsewhere.
    #[error("the {end} of FIFO `{name}` is already attached, by process {pid}")]
    EndTaken {
        /// The FIFO.
        name: String,
        /// `sender` or `receiver`.
        end: &'static str,
        /// The process that holds it.
        pid: u32,
    },
    /// Two hubs of one name.
    #[error("hub `{name}` is declared twice")]
    DuplicateHub {
        /// The name.
        name: String,
    },
    /// More than [`MAX_HUBS`] hubs.
    #[error("{count} hubs; the limit is {limit}")]
    TooManyHubs {
        /// How many were declared.
        count: usize,
        /// The limit, [`MAX_HUBS`].
        limit: usize,
    },
    /// Hubs whose storage is over [`MAX_HUBS_BYTES`] in all.
    #[error(
        "with hub `{name}` the hubs need more than the limit of {limit} bytes (256 MiB) of \
         storage in all"
    )]
    TableTooLarge {
        /// The hub that crosses the limit.
        name: String,
        /// The limit, [`MAX_HUBS_BYTES`].
        limit: usize,
    },
    /// A declaration breaks a rule.
    #[error("hub `{name}`: {reason}")]
    BadDecl {
        /// The hub.
        name: String,
        /// The rule broken.
        reason: String,
    },
    /// A hub file that is not valid, with the place and what the parser expected.
    #[error(transparent)]
    File(ictus_os::fs::Located<String>),
    /// The shared table lacks a declared hub or has it otherwise.
    #[error("hub `{name}` differs from the shared hubs `{shared}`: {detail}")]
    TableMismatch {
        /// The shared hubs' name.
        shared: String,
        /// The hub that differs.
        name: String,
        /// How.
        detail: String,
    },
    /// The segment does not hold a usable hub table.
    #[error("shared memory `{name}` does not hold a usable hub table: {reason}")]
    NotHubs {
        /// The shared hubs' name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A resource's lock operation failed.
    #[error("resource `{name}`: {what}: {source}")]
    Lock {
        /// The resource.
        name: String,
        /// What failed, in words (`the owner died holding it`, ...).
        what: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Creating, finding or mapping the shared memory failed.
    #[error(transparent)]
    Shm(#[from] ShmError),
    /// The FIFO end is held by the link, for another host.
    #[error(
        "the {end} of FIFO `{name}` is held for another host (one sender and one receiver \
         across hosts; a FIFO whose two ends are on one host other than its home: home it there)"
    )]
    EndElsewhere {
        /// The FIFO.
        name: String,
        /// `sender` or `receiver`.
        end: &'static str,
    },
    /// A hub is homed on a host the run does not have.
    #[error("hub `{name}` is homed on host `{host}`, which the run does not have")]
    UnknownHost {
        /// The hub.
        name: String,
        /// The host it names.
        host: String,
    },
    /// The hub's home host left the run: this host's proxy of it is dead,
    /// its waiters and every later operation fail.
    #[error("hub `{name}`: its home host `{home}` left the run")]
    HomeLost {
        /// The hub.
        name: String,
        /// Its home host.
        home: String,
    },
    /// The hub's home host declares another hub table than this host: nothing
    /// is exchanged with it (see [`remote::HubReport::TableDiffers`]).
    #[error(
        "hub `{name}`: its home host `{home}` declares other hubs than this host; refused \
         (give every host the same [[hub]] tables)"
    )]
    HomeDiffers {
        /// The hub.
        name: String,
        /// Its home host.
        home: String,
    },
    /// The hub's home refused this host's end of a FIFO: another host (or the
    /// home) holds it.
    #[error(
        "the {end} of FIFO `{name}` is attached on another host; its home `{home}` refused this one"
    )]
    EndRefused {
        /// The FIFO.
        name: String,
        /// `sender` or `receiver`.
        end: &'static str,
        /// Its home host.
        home: String,
    },
}

/// "ictusHUB": the first word of a hubs segment's 64-bit area.
const HUBS_MAGIC: u64 = u64::from_le_bytes(*b"ictusHUB");
/// The version of the hubs layout.
const HUBS_VERSION: u64 = 2;
/// 64-bit words before the table JSON: magic, version, JSON length.
const HUBS_HEADER_WORDS: usize = 3;

/// Checks the declarations and lays them out: each hub's word range (its
/// proxy header first), and the words in all; the table's own words
/// ([`TABLE_WORDS`]) come first.
fn layout(decls: &[HubDecl]) -> Result<(Vec<Range<usize>>, usize), HubError> {
    check_decls(decls).map_err(|(_, e)| e)?;
    let mut at = TABLE_WORDS;
    let mut out = Vec::with_capacity(decls.len());
    for d in decls {
        let n = d.words();
        out.push(at..at + n);
        at = (at + n).next_multiple_of(REGION_ALIGN_WORDS);
    }
    Ok((out, at))
}

/// Sets the starting state of every hub (zeros are the rest): a proxy (`homes[i]`
/// not `here`) is marked so in its header and holds no token (the tokens are
/// its home's).
fn init(
    decls: &[HubDecl],
    regions: &[Range<usize>],
    w: &[AtomicU32],
    homes: &[usize],
    here: usize,
) {
    for (i, (d, r)) in decls.iter().zip(regions).enumerate() {
        let proxy = homes.get(i).is_some_and(|&h| h != here);
        let (header, own) = w[r.clone()].split_at(PROXY_WORDS);
        // Relaxed (both): set up before the table is shared.
        header[P_MODE].store(u32::from(proxy), Ordering::Relaxed);
        header[P_HOME].store(homes.get(i).map_or(0, |&h| h as u32), Ordering::Relaxed);
        if let HubKind::Semaphore { initial } = d.kind
            && !proxy
        {
            words::Semaphore::new(own).init(initial);
        }
    }
}

/// Each hub's home: its index in `hosts` (no host named: 0, the main host).
/// With no hosts (a run on one host) every hub is home (0) and a named host
/// is not checked.
pub fn homes(decls: &[HubDecl], hosts: &[String]) -> Result<Vec<usize>, HubError> {
    decls
        .iter()
        .map(|d| match (d.host(), hosts.is_empty()) {
            (None, _) | (Some(_), true) => Ok(0),
            (Some(h), false) => {
                hosts
                    .iter()
                    .position(|n| n == h)
                    .ok_or_else(|| HubError::UnknownHost {
                        name: d.name.clone(),
                        host: h.to_owned(),
                    })
            }
        })
        .collect()
}

/// Words at the start of a table: the relay's doorbell (an event: raised when
/// a proxy has something to send home).
const TABLE_WORDS: usize = 32;
/// Words of a hub's proxy header, before the kind's own words (128 bytes, so
/// that a FIFO ring's indices keep their alignment).
const PROXY_WORDS: usize = 32;
/// Header word: 1 when this table's hub is a proxy of a hub homed elsewhere.
const P_MODE: usize = 0;
/// Header word: why the proxy failed, set by the relay: 0 (it did not),
/// [`FAILED_LEFT`] or [`FAILED_DIFFERS`].
const P_FAILED: usize = 1;
/// `P_FAILED`: the home host left the run.
const FAILED_LEFT: u32 = 1;
/// `P_FAILED`: the home host's hub table differs from this host's.
const FAILED_DIFFERS: u32 = 2;
/// Header word: 1 once the home refused this host's FIFO end.
const P_REFUSED: usize = 2;
/// Header word: gives, raises or resource releases for the relay to send home.
const P_OUT: usize = 3;
/// Header word: takes, waits, port receives or resource locks to ask home for.
const P_DEMAND: usize = 4;
/// Header words 5 and 6: an event the relay raises when the home granted a
/// resource to this host.
const P_GRANTED: usize = 5;
/// Header word: the home host's index in the run's hosts.
const P_HOME: usize = 7;
/// How often a waiter on a proxy looks at `P_FAILED` (its wait is cut in
/// slices this long; the failure is seen within one).
pub const FAIL_POLL: Duration = Duration::from_millis(20);

/// Where the hub words live.
enum Memory {
    Owned(Box<[AtomicU32]>),
    Shared(Segment),
}

struct Inner {
    decls: Vec<HubDecl>,
    regions: Vec<Range<usize>>,
    memory: Memory,
    park: FutexPark,
    /// Per hub, its home's name (for [`HubError::HomeLost`]).
    home_names: Vec<String>,
}

impl Inner {
    fn words(&self) -> &[AtomicU32] {
        match &self.memory {
            Memory::Owned(w) => w,
            Memory::Shared(s) => s.words32(),
        }
    }
}

/// A table of hubs in process or shared memory; handles are looked up by
/// name. Cloning shares the same hubs (`Arc`).
#[derive(Clone)]
pub struct Hubs {
    inner: Arc<Inner>,
}

impl Hubs {
    /// The hubs `decls` in this process's memory (a run on one host: every
    /// hub is here).
    pub fn in_process(decls: &[HubDecl]) -> Result<Hubs, HubError> {
        Hubs::in_process_at(decls, &[], 0)
    }

    /// The hubs as host `here` (an index in `hosts`) sees them: hubs homed
    /// elsewhere are proxies, which a relay ([`remote::HubNode`]) connects to
    /// their homes. With no `hosts`, [`in_process`](Self::in_process).
    pub fn in_process_at(
        decls: &[HubDecl],
        hosts: &[String],
        here: usize,
    ) -> Result<Hubs, HubError> {
        let (regions, n) = layout(decls)?;
        let homes = homes(decls, hosts)?;
        let w: Box<[AtomicU32]> = (0..n).map(|_| AtomicU32::new(0)).collect();
        init(decls, &regions, &w, &homes, here);
        Ok(Hubs::new(
            decls.to_vec(),
            regions,
            Memory::Owned(w),
            home_names(decls, hosts),
        ))
    }

    /// Creates the shared memory `name` holding the hubs `decls` (stale
    /// segments of dead owners are removed, a live owner is refused; see
    /// [`ictus_os::shm::Segment::create`]). Removed when the last clone of the
    /// returned `Hubs` is dropped.
    pub fn create_shared(decls: &[HubDecl], name: &str) -> Result<Hubs, HubError> {
        Hubs::create_shared_at(decls, name, &[], 0)
    }

    /// [`create_shared`](Self::create_shared) as host `here` of `hosts` sees
    /// the hubs (see [`in_process_at`](Self::in_process_at)); the processes
    /// that open it see the same proxies.
    pub fn create_shared_at(
        decls: &[HubDecl],
        name: &str,
        hosts: &[String],
        here: usize,
    ) -> Result<Hubs, HubError> {
        let (regions, n) = layout(decls)?;
        let homes = homes(decls, hosts)?;
        let json = serde_json::to_vec(decls).expect("hub declarations always serialize");
        let json_words = json.len().div_ceil(8);
        let segment = Segment::create(name, HUBS_HEADER_WORDS + json_words, n, |w64, w32| {
            write_described(w64, HUBS_MAGIC, HUBS_VERSION, HUBS_HEADER_WORDS, &json);
            init(decls, &regions, w32, &homes, here);
        })?;
        Ok(Hubs::new(
            decls.to_vec(),
            regions,
            Memory::Shared(segment),
            home_names(decls, hosts),
        ))
    }

    /// Maps the shared hubs `name` of their live owner, with the declarations
    /// stored in them.
    pub fn open_shared(name: &str) -> Result<Hubs, HubError> {
        let segment = Segment::open(name)?;
        let not_hubs = |reason: String| HubError::NotHubs {
            name: name.to_owned(),
            reason,
        };
        let (json, _) = read_described(
            segment.words(),
            HUBS_MAGIC,
            HUBS_VERSION,
            HUBS_HEADER_WORDS,
            "hubs",
        )
        .map_err(not_hubs)?;
        let decls: Vec<HubDecl> =
            serde_json::from_slice(&json).map_err(|e| not_hubs(format!("table: {e}")))?;
        let (regions, n) = layout(&decls).map_err(|e| not_hubs(format!("table: {e}")))?;
        if n > segment.words32().len() {
            return Err(not_hubs(format!(
                "the hubs need {n} words, the segment has {}",
                segment.words32().len()
            )));
        }
        let names = home_names(&decls, &[]);
        Ok(Hubs::new(decls, regions, Memory::Shared(segment), names))
    }

    /// [`open_shared`](Self::open_shared), then checks that every hub of
    /// `expected` is there with the same kind and parameters.
    pub fn open_shared_matching(name: &str, expected: &[HubDecl]) -> Result<Hubs, HubError> {
        let hubs = Hubs::open_shared(name)?;
        for want in expected {
            let detail = match hubs.inner.decls.iter().find(|d| d.name == want.name) {
                None => Some("it is not in the shared table".to_owned()),
                Some(d) if d.kind != want.kind => Some(format!(
                    "declared {:?} here and {:?} in the shared table",
                    want.kind, d.kind
                )),
                Some(_) => None,
            };
            if let Some(detail) = detail {
                return Err(HubError::TableMismatch {
                    shared: name.to_owned(),
                    name: want.name.clone(),
                    detail,
                });
            }
        }
        Ok(hubs)
    }

    fn new(
        decls: Vec<HubDecl>,
        regions: Vec<Range<usize>>,
        memory: Memory,
        home_names: Vec<String>,
    ) -> Hubs {
        Hubs {
            inner: Arc::new(Inner {
                decls,
                regions,
                memory,
                park: FutexPark::default(),
                home_names,
            }),
        }
    }

    /// The declarations.
    pub fn decls(&self) -> &[HubDecl] {
        &self.inner.decls
    }

    /// The name of the shared memory, if shared.
    pub fn shared_name(&self) -> Option<&str> {
        self.segment().map(Segment::name)
    }

    /// The shared memory segment, if shared.
    pub fn segment(&self) -> Option<&Segment> {
        match &self.inner.memory {
            Memory::Owned(_) => None,
            Memory::Shared(s) => Some(s),
        }
    }

    /// The index and declaration of hub `name`, checked to be of kind
    /// `requested`.
    fn find(&self, name: &str, requested: &'static str) -> Result<(usize, HubKind), HubError> {
        let (index, decl) = self
            .inner
            .decls
            .iter()
            .enumerate()
            .find(|(_, d)| d.name == name)
            .ok_or_else(|| HubError::UnknownHub {
                name: name.to_owned(),
            })?;
        if decl.kind.name() != requested {
            return Err(HubError::WrongKind {
                name: name.to_owned(),
                declared: decl.kind.name(),
                requested,
            });
        }
        Ok((index, decl.kind))
    }

    /// Checks a message type against a declaration.
    fn check_message<T: Element>(name: &str, declared: ElemShape) -> Result<(), HubError> {
        let requested = ElemShape::of::<T>();
        if declared != requested {
            return Err(HubError::TypeMismatch {
                name: name.to_owned(),
                declared,
                requested,
            });
        }
        Ok(())
    }

    fn handle(&self, index: usize, name: &str) -> Handle {
        Handle {
            hubs: self.clone(),
            region: self.inner.regions[index].clone(),
            name: name.to_owned(),
            index,
        }
    }

    /// The semaphore `name`.
    pub fn semaphore(&self, name: &str) -> Result<Semaphore, HubError> {
        let (index, _) = self.find(name, "semaphore")?;
        Ok(Semaphore {
            h: self.handle(index, name),
        })
    }

    /// The event `name`.
    pub fn event(&self, name: &str) -> Result<Event, HubError> {
        let (index, _) = self.find(name, "event")?;
        Ok(Event {
            h: self.handle(index, name),
        })
    }

    /// The port `name`, for messages of type `T`. Any number of handles may
    /// send and receive.
    pub fn port<T: Element>(&self, name: &str) -> Result<Port<T>, HubError> {
        let (index, kind) = self.find(name, "port")?;
        let HubKind::Port { message } = kind else {
            unreachable!("find checked the kind")
        };
        Hubs::check_message::<T>(name, message)?;
        Ok(Port {
            h: self.handle(index, name),
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// The resource `name`.
    pub fn resource(&self, name: &str) -> Result<Resource, HubError> {
        let (index, _) = self.find(name, "resource")?;
        Ok(Resource {
            h: self.handle(index, name),
        })
    }

    /// Attaches as the sender of FIFO `name` (messages of type `T`); refused
    /// while another sender is attached in a live process.
    pub fn fifo_sender<T: Element>(&self, name: &str) -> Result<FifoSender<T>, HubError> {
        let (h, capacity) = self.fifo_end::<T>(name, FIFO_SENDER, "sender")?;
        let cursor = h.ring::<T>(capacity).producer();
        Ok(FifoSender {
            h,
            capacity,
            cursor,
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// Attaches as the receiver of FIFO `name` (messages of type `T`);
    /// refused while another receiver is attached in a live process.
    pub fn fifo_receiver<T: Element>(&self, name: &str) -> Result<FifoReceiver<T>, HubError> {
        let (h, capacity) = self.fifo_end::<T>(name, FIFO_RECEIVER, "receiver")?;
        let cursor = h.ring::<T>(capacity).consumer();
        Ok(FifoReceiver {
            h,
            capacity,
            cursor,
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// Claims one end of a FIFO.
    fn fifo_end<T: Element>(
        &self,
        name: &str,
        end_word: usize,
        end: &'static str,
    ) -> Result<(Handle, u32), HubError> {
        let (index, kind) = self.find(name, "fifo")?;
        let HubKind::Fifo { message, capacity } = kind else {
            unreachable!("find checked the kind")
        };
        Hubs::check_message::<T>(name, message)?;
        let h = self.handle(index, name);
        claim_end(&h.words()[end_word], name, end)?;
        if h.is_proxy() {
            // Both ends here would make a FIFO of this host alone, apart from its
            // home: whichever of two ends looks second sees the first and gives
            // up (SeqCst, the claim in `claim_end` and this load: of two
            // claims at once, at least one sees the other's), so at most one
            // end is here and the relay takes the other for the link.
            let other = if end_word == FIFO_SENDER {
                FIFO_RECEIVER
            } else {
                FIFO_SENDER
            };
            let holder = h.words()[other].load(Ordering::SeqCst);
            if holder != 0 && holder != LINK_END {
                // Release: pairs with the Acquire claim of a next end.
                h.words()[end_word].store(0, Ordering::Release);
                return Err(HubError::EndElsewhere {
                    name: name.to_owned(),
                    end,
                });
            }
            // The relay attaches it now.
            self.ring_bell();
        }
        Ok((h, capacity))
    }
}

/// Claims the FIFO end held in `word` for this process.
fn claim_end(claim: &AtomicU32, name: &str, end: &'static str) -> Result<(), HubError> {
    let me = std::process::id();
    loop {
        // Acquire (in SeqCst): pairs with the Release store of 0 when the
        // previous end was dropped, so its last ring operations happen before
        // ours; SeqCst: see `fifo_end`, on a proxy.
        match claim.compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(LINK_END) => {
                return Err(HubError::EndElsewhere {
                    name: name.to_owned(),
                    end,
                });
            }
            Err(holder) if holder == me || ProcessId::of(holder).is_some() => {
                return Err(HubError::EndTaken {
                    name: name.to_owned(),
                    end,
                    pid: holder,
                });
            }
            // The holder's process is gone: take the end over.
            Err(holder) => {
                // SeqCst: as above.
                if claim
                    .compare_exchange(holder, me, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
            }
        }
    }
}

impl fmt::Debug for Hubs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hubs")
            .field("hubs", &self.inner.decls.len())
            .field("shared", &self.shared_name())
            .finish()
    }
}

/// What every hub handle holds: the hubs and its region.
struct Handle {
    hubs: Hubs,
    region: Range<usize>,
    name: String,
    /// The hub's index in the table.
    index: usize,
}

impl Handle {
    /// The kind's own words (after the proxy header).
    fn words(&self) -> &[AtomicU32] {
        &self.hubs.inner.words()[self.region.start + PROXY_WORDS..self.region.end]
    }

    /// The proxy header.
    fn header(&self) -> &[AtomicU32] {
        &self.hubs.inner.words()[self.region.start..self.region.start + PROXY_WORDS]
    }

    fn park(&self) -> &FutexPark {
        &self.hubs.inner.park
    }

    fn ring<T: Element>(&self, capacity: u32) -> Ring<'_> {
        Ring::new(&self.words()[FIFO_RING..], capacity, T::SIZE)
    }

    /// Whether this is a proxy of a hub homed on another host.
    fn is_proxy(&self) -> bool {
        // Relaxed: set before the table was shared, never changed.
        self.header()[P_MODE].load(Ordering::Relaxed) != 0
    }

    /// Whether the home host left (a proxy only).
    fn failed(&self) -> bool {
        // Acquire: pairs with the relay's Release store in `fail_home`.
        self.header()[P_FAILED].load(Ordering::Acquire) != 0
    }

    fn home_lost(&self) -> HubError {
        let (name, home) = (
            self.name.clone(),
            self.hubs.inner.home_names[self.index].clone(),
        );
        // Acquire: as in `failed`.
        match self.header()[P_FAILED].load(Ordering::Acquire) {
            FAILED_DIFFERS => HubError::HomeDiffers { name, home },
            _ => HubError::HomeLost { name, home },
        }
    }

    /// Counts one more of `what` (`P_OUT` or `P_DEMAND`) for the relay and
    /// rings its doorbell: all a real-time thread does for a remote hub.
    fn tell_relay(&self, what: usize) {
        // Release: pairs with the relay's Acquire swap, so what this thread did
        // before (a message written, a lock released) is seen with the count.
        self.header()[what].fetch_add(1, Ordering::Release);
        self.hubs.ring_bell();
    }

    /// A wait on a proxy: `attempt(deadline)` (the word protocol's bounded
    /// wait) in slices of [`FAIL_POLL`], looking at `P_FAILED` between them;
    /// `Ok(false)` once `deadline` passed, `HomeLost` once the home left.
    fn proxy_wait(
        &self,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(Option<Instant>) -> bool,
    ) -> Result<bool, HubError> {
        loop {
            if self.failed() {
                return Err(self.home_lost());
            }
            let slice = Instant::now() + FAIL_POLL;
            let until = deadline.map_or(slice, |d| d.min(slice));
            if attempt(Some(until)) {
                return Ok(true);
            }
            if expired(deadline) {
                return Ok(false);
            }
        }
    }

    /// A wait on this hub: directly on the word protocol when the hub is here,
    /// as [`proxy_wait`](Self::proxy_wait) on a proxy.
    fn wait(
        &self,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(Option<Instant>) -> bool,
    ) -> Result<bool, HubError> {
        if self.is_proxy() {
            self.proxy_wait(deadline, attempt)
        } else {
            Ok(attempt(deadline))
        }
    }
}

impl Hubs {
    /// Rings the relay's doorbell (a raise of the table's event).
    fn ring_bell(&self) {
        self.bell().raise(&self.inner.park);
    }

    /// The relay's doorbell.
    fn bell(&self) -> words::Event<'_> {
        words::Event::new(&self.inner.words()[..TABLE_WORDS])
    }
}

/// Whether `deadline` has passed.
fn expired(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The deadline `timeout` from now.
fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// A counting semaphore hub.
///
/// On a proxy (the semaphore is homed on another host), `give` counts a
/// request the relay sends home, and `take` takes a token already granted to
/// this host, else asks the home for one and waits for it; a token granted
/// after its waiter gave up stays with this host for its next take.
#[derive(Debug)]
pub struct Semaphore {
    h: Handle,
}

impl Semaphore {
    fn words(&self) -> words::Semaphore<'_> {
        words::Semaphore::new(self.h.words())
    }

    /// Adds a token, waking a waiter; `false` when nothing was added: the
    /// count is at its maximum (`u32::MAX`), or (a proxy) its home left.
    pub fn give(&self) -> bool {
        if !self.h.is_proxy() {
            return self.words().give(self.h.park());
        }
        if self.h.failed() {
            return false;
        }
        self.h.tell_relay(P_OUT);
        true
    }

    /// Takes a token if there is one (on a proxy: one already granted to this
    /// host).
    pub fn try_take(&self) -> bool {
        self.words().try_take()
    }

    /// Waits for a token and takes it.
    pub fn take(&self) -> Result<(), HubError> {
        self.take_until(None).map(|_| ())
    }

    /// Waits at most `timeout` for a token; whether one was taken.
    pub fn take_timeout(&self, timeout: Duration) -> Result<bool, HubError> {
        self.take_until(deadline(timeout))
    }

    fn take_until(&self, deadline: Option<Instant>) -> Result<bool, HubError> {
        if self.h.is_proxy() {
            if self.words().try_take() {
                return Ok(true);
            }
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let sem = self.words();
        self.h.wait(deadline, |d| sem.take(self.h.park(), d))
    }

    /// Tokens now (on a proxy: granted to this host and not taken yet).
    pub fn count(&self) -> u32 {
        self.words().count()
    }
}

/// A binary event hub. On a proxy, as [`Semaphore`]: `raise` is sent home,
/// `wait` asks the home for a raise and waits for it.
#[derive(Debug)]
pub struct Event {
    h: Handle,
}

impl Event {
    fn words(&self) -> words::Event<'_> {
        words::Event::new(self.h.words())
    }

    /// Raises the event, waking a waiter (on a proxy whose home left:
    /// nothing done).
    pub fn raise(&self) {
        if !self.h.is_proxy() {
            self.words().raise(self.h.park());
        } else if !self.h.failed() {
            self.h.tell_relay(P_OUT);
        }
    }

    /// Clears the event if raised; whether it was (on a proxy: a raise
    /// already granted to this host).
    pub fn try_wait(&self) -> bool {
        self.words().try_wait()
    }

    /// Waits until the event is raised, and clears it.
    pub fn wait(&self) -> Result<(), HubError> {
        self.wait_until(None).map(|_| ())
    }

    /// Waits at most `timeout`; whether the event was raised (and is now
    /// cleared).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool, HubError> {
        self.wait_until(deadline(timeout))
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Result<bool, HubError> {
        if self.h.is_proxy() {
            if self.words().try_wait() {
                return Ok(true);
            }
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let ev = self.words();
        self.h.wait(deadline, |d| ev.wait(self.h.park(), d))
    }

    /// Whether the event is raised now.
    pub fn is_raised(&self) -> bool {
        self.words().is_raised()
    }
}

/// A port hub for messages of type `T`: synchronous hand-over with copy.
///
/// On a proxy, a send offers the message in this host's outbound port; the
/// relay claims it, sends it home, where it is sent on the real port, and
/// marks it taken only when the real receiver (on any host) has copied it:
/// `send` returns then, as on one host. A receive asks the home for a message;
/// the home claims one on the real port, sends it here into the inbound port,
/// and tells its sender only once this host's receiver copied it.
pub struct Port<T> {
    h: Handle,
    scratch: Box<[u8]>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Element> Port<T> {
    /// The port this host's receivers use (on a proxy: the inbound one).
    fn inbound(&self) -> words::Port<'_> {
        port_inbound(&self.h, T::SIZE)
    }

    /// Sends `message` and waits until a receiver has copied it.
    pub fn send(&mut self, message: &T) -> Result<(), HubError> {
        message.encode(&mut self.scratch);
        let port = words::Port::new(self.h.words(), T::SIZE);
        if !self.h.is_proxy() {
            port.send(&self.scratch, self.h.park());
            return Ok(());
        }
        let park = self.h.park();
        self.h
            .proxy_wait(None, |d| port.offer(&self.scratch, park, d))?;
        self.h.hubs.ring_bell();
        self.h.proxy_wait(None, |d| port.collect(park, d))?;
        Ok(())
    }

    /// Waits for a message.
    pub fn receive(&mut self) -> Result<T, HubError> {
        self.receive_until(None)
            .map(|m| m.expect("a wait without deadline ends with a message"))
    }

    /// Waits at most `timeout` for a message.
    pub fn receive_timeout(&mut self, timeout: Duration) -> Result<Option<T>, HubError> {
        self.receive_until(deadline(timeout))
    }

    fn receive_until(&mut self, deadline: Option<Instant>) -> Result<Option<T>, HubError> {
        if let Some(m) = self.try_receive() {
            return Ok(Some(m));
        }
        if self.h.is_proxy() {
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let port = port_inbound(&self.h, T::SIZE);
        let park = self.h.park();
        let scratch = &mut self.scratch;
        let got = self.h.wait(deadline, |d| port.receive(scratch, park, d))?;
        if got && self.h.is_proxy() {
            // As in `try_receive`.
            self.h.hubs.ring_bell();
        }
        Ok(got.then(|| T::decode(&self.scratch)))
    }

    /// A message if one waits now (on a proxy: one the home already sent
    /// here).
    pub fn try_receive(&mut self) -> Option<T> {
        let port = port_inbound(&self.h, T::SIZE);
        let got = port.try_receive(&mut self.scratch, self.h.park());
        if got && self.h.is_proxy() {
            // The relay tells the home this host copied it (the sender's
            // send returns then).
            self.h.hubs.ring_bell();
        }
        got.then(|| T::decode(&self.scratch))
    }

    /// Whether a message waits for a receiver now (on a proxy: in the
    /// inbound port).
    pub fn is_full(&self) -> bool {
        self.inbound().is_full()
    }
}

/// The port a hub's receivers use: on a proxy the inbound one (after the
/// outbound one), else the hub's own.
fn port_inbound(h: &Handle, bytes: usize) -> words::Port<'_> {
    let words = h.words();
    if h.is_proxy() {
        words::Port::new(&words[words::Port::words_for(bytes)..], bytes)
    } else {
        words::Port::new(words, bytes)
    }
}

impl<T> fmt::Debug for Port<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port").field("name", &self.h).finish()
    }
}

/// The sending end of a FIFO hub.
///
/// On a proxy the messages wait in this host's ring (of the FIFO's capacity),
/// from which the relay moves them home in order.
pub struct FifoSender<T> {
    h: Handle,
    capacity: u32,
    cursor: RingProducer,
    scratch: Box<[u8]>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Element> FifoSender<T> {
    /// Whether the end is dead: its home left, or refused it.
    fn dead(&self) -> Option<HubError> {
        fifo_dead(&self.h, "sender")
    }

    /// Appends `message`, or gives it back when the FIFO is full (or, on a
    /// proxy, when its home left or refused this end). Never blocks or
    /// allocates.
    pub fn try_send(&mut self, message: T) -> Result<(), Full<T>> {
        if self.h.is_proxy() && self.dead().is_some() {
            return Err(Full(message));
        }
        message.encode(&mut self.scratch);
        let ring = self.h.ring::<T>(self.capacity);
        if ring.try_push(&mut self.cursor, &self.scratch, self.h.park()) {
            if self.h.is_proxy() {
                self.h.hubs.ring_bell();
            }
            Ok(())
        } else {
            Err(Full(message))
        }
    }

    /// Appends `message`, waiting while the FIFO is full.
    pub fn send(&mut self, message: T) -> Result<(), HubError> {
        self.send_until(message, None).map(|_| ())
    }

    /// Appends `message`, waiting at most `timeout` while the FIFO is full;
    /// whether it was appended.
    pub fn send_timeout(&mut self, message: T, timeout: Duration) -> Result<bool, HubError> {
        self.send_until(message, deadline(timeout))
    }

    fn send_until(&mut self, message: T, deadline: Option<Instant>) -> Result<bool, HubError> {
        if self.h.is_proxy()
            && let Some(e) = self.dead()
        {
            return Err(e);
        }
        message.encode(&mut self.scratch);
        let ring = Ring::new(&self.h.words()[FIFO_RING..], self.capacity, T::SIZE);
        let (cursor, scratch, park) = (&mut self.cursor, &self.scratch, self.h.park());
        let sent = self
            .h
            .wait(deadline, |d| ring.push(cursor, scratch, park, d))?;
        if sent && self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
        Ok(sent)
    }

    /// Messages in the FIFO now (on a proxy: waiting in this host's ring).
    pub fn len(&self) -> u32 {
        self.h.ring::<T>(self.capacity).len()
    }

    /// Whether the FIFO is empty now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Messages the FIFO holds when full.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
}

/// The error that ends a proxy's FIFO end, if any.
fn fifo_dead(h: &Handle, end: &'static str) -> Option<HubError> {
    if h.failed() {
        return Some(h.home_lost());
    }
    // Acquire: pairs with the relay's Release store of the refusal.
    (h.header()[P_REFUSED].load(Ordering::Acquire) != 0).then(|| HubError::EndRefused {
        name: h.name.clone(),
        end,
        home: h.hubs.inner.home_names[h.index].clone(),
    })
}

impl<T> Drop for FifoSender<T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire claim of the next sender.
        self.h.words()[FIFO_SENDER].store(0, Ordering::Release);
        if self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
    }
}

impl<T> fmt::Debug for FifoSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoSender").field("name", &self.h).finish()
    }
}

/// The receiving end of a FIFO hub.
///
/// On a proxy the home moves messages into this host's ring (of the FIFO's
/// capacity) as room frees there, in order.
pub struct FifoReceiver<T> {
    h: Handle,
    capacity: u32,
    cursor: RingConsumer,
    scratch: Box<[u8]>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Element> FifoReceiver<T> {
    /// The oldest message, if any. Never blocks or allocates.
    pub fn try_recv(&mut self) -> Option<T> {
        let ring = self.h.ring::<T>(self.capacity);
        let got = ring.try_pop(&mut self.cursor, &mut self.scratch, self.h.park());
        if got && self.h.is_proxy() {
            // The relay returns the room to the home.
            self.h.hubs.ring_bell();
        }
        got.then(|| T::decode(&self.scratch))
    }

    /// The oldest message, waiting while the FIFO is empty.
    pub fn recv(&mut self) -> Result<T, HubError> {
        self.recv_until(None)
            .map(|m| m.expect("a wait without deadline ends with a message"))
    }

    /// The oldest message, waiting at most `timeout` while the FIFO is empty.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<T>, HubError> {
        self.recv_until(deadline(timeout))
    }

    fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<T>, HubError> {
        if let Some(m) = self.try_recv() {
            return Ok(Some(m));
        }
        if self.h.is_proxy()
            && let Some(e) = fifo_dead(&self.h, "receiver")
        {
            return Err(e);
        }
        let ring = Ring::new(&self.h.words()[FIFO_RING..], self.capacity, T::SIZE);
        let (cursor, scratch, park) = (&mut self.cursor, &mut self.scratch, self.h.park());
        let got = self
            .h
            .wait(deadline, |d| ring.pop(cursor, scratch, park, d))?;
        if got && self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
        Ok(got.then(|| T::decode(&self.scratch)))
    }

    /// Messages in the FIFO now (on a proxy: arrived in this host's ring).
    pub fn len(&self) -> u32 {
        self.h.ring::<T>(self.capacity).len()
    }

    /// Whether the FIFO is empty now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Drop for FifoReceiver<T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire claim of the next receiver.
        self.h.words()[FIFO_RECEIVER].store(0, Ordering::Release);
        if self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
    }
}

impl<T> fmt::Debug for FifoReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoReceiver")
            .field("name", &self.h)
            .finish()
    }
}

/// A resource hub: a mutex with priority inheritance. The owner is a thread:
/// a [`ResourceGuard`] unlocks when dropped, on the thread that locked.
///
/// On a proxy, a locker first takes this host's own PI lock (the threads of
/// this host contend there, with priority inheritance among them), then asks
/// the home, where a link worker thread locks the real PI lock on this host's
/// behalf and holds it until the release arrives. Priority inheritance acts
/// within each host, not across: a waiter on the home lends its priority to
/// the worker, not to the remote owner's thread.
#[derive(Debug)]
pub struct Resource {
    h: Handle,
}

impl Resource {
    fn lock_word(&self) -> PiLock<'_> {
        PiLock::new(&self.h.words()[0])
    }

    fn error(&self, source: io::Error) -> HubError {
        HubError::Lock {
            name: self.h.name.clone(),
            what: PiLock::meaning(&source),
            source,
        }
    }

    /// The event the relay raises when the home granted the lock here.
    fn granted(&self) -> words::Event<'_> {
        words::Event::new(&self.h.header()[P_GRANTED..])
    }

    /// Locks, sleeping while another thread holds it; a waiting thread of
    /// higher priority lends its priority to the holder (on its own host).
    pub fn lock(&self) -> Result<ResourceGuard<'_>, HubError> {
        if self.h.is_proxy() && self.h.failed() {
            return Err(self.h.home_lost());
        }
        self.lock_word().lock().map_err(|e| self.error(e))?;
        if self.h.is_proxy() {
            self.h.tell_relay(P_DEMAND);
            let granted = self.granted();
            if let Err(e) = self.h.proxy_wait(None, |d| granted.wait(self.h.park(), d)) {
                // Cannot fail: this thread holds the local lock.
                let _ = self.lock_word().unlock();
                return Err(e);
            }
        }
        Ok(ResourceGuard {
            resource: self,
            _not_send: PhantomData,
        })
    }

    /// Locks if free now. On a proxy nothing is done (`Ok(None)`): the home
    /// cannot be asked without waiting.
    pub fn try_lock(&self) -> Result<Option<ResourceGuard<'_>>, HubError> {
        if self.h.is_proxy() {
            return Ok(None);
        }
        let locked = self.lock_word().try_lock().map_err(|e| self.error(e))?;
        Ok(locked.then_some(ResourceGuard {
            resource: self,
            _not_send: PhantomData,
        }))
    }

    /// The thread id of the holder, if held (on a proxy: the holder of this
    /// host's lock).
    pub fn holder(&self) -> Option<u32> {
        self.lock_word().owner()
    }

    /// Frees the resource after its holder died (for the owner of the hubs,
    /// once it knows); returns the dead holder's thread id.
    pub fn force_release(&self) -> Option<u32> {
        self.lock_word().force_release()
    }
}

/// A held [`Resource`]; unlocks when dropped. Not `Send`: the kernel knows
/// the holder by its thread.
pub struct ResourceGuard<'a> {
    resource: &'a Resource,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ResourceGuard<'_> {
    fn drop(&mut self) {
        let h = &self.resource.h;
        if h.is_proxy() && !h.failed() {
            // The release goes home before another thread here can lock.
            h.tell_relay(P_OUT);
        }
        // Cannot fail: this thread holds the lock (the guard is not Send).
        let _ = self.resource.lock_word().unlock();
    }
}

impl fmt::Debug for ResourceGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceGuard")
            .field("resource", &self.resource.h)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn unique(tag: &str) -> String {
        format!("test-hubs-{tag}-{}", std::process::id())
    }

    fn all() -> Vec<HubDecl> {
        vec![
            HubDecl::semaphore("sem", 1),
            HubDecl::event("ev"),
            HubDecl::fifo::<[u16; 3]>("fifo", 4),
            HubDecl::port::<[f64; 2]>("port"),
            HubDecl::resource("res"),
        ]
    }

    #[test]
    fn handles_are_checked_by_name_kind_and_type() {
        let sut = Hubs::in_process(&all()).unwrap();
        assert!(matches!(
            sut.semaphore("nope"),
            Err(HubError::UnknownHub { .. })
        ));
        let err = sut.event("sem").unwrap_err();
        assert_eq!(err.to_string(), "hub `sem` is a semaphore, not a event");
        let err = sut.port::<[f32; 2]>("port").unwrap_err();
        assert_eq!(
            err.to_string(),
            "hub `port` carries `[f64; 2]` but was requested for `[f32; 2]`"
        );
        assert!(matches!(
            sut.fifo_sender::<u16>("fifo"),
            Err(HubError::TypeMismatch { .. })
        ));
    }

    #[test]
    fn bad_declarations_are_refused() {
        let dup = [HubDecl::event("a"), HubDecl::resource("a")];
        assert!(matches!(
            Hubs::in_process(&dup),
            Err(HubError::DuplicateHub { .. })
        ));
        let empty = [HubDecl::fifo::<u8>("f", 0)];
        assert!(matches!(
            Hubs::in_process(&empty),
            Err(HubError::BadDecl { .. })
        ));
        let name = [HubDecl::event("a b")];
        assert!(matches!(
            Hubs::in_process(&name),
            Err(HubError::BadDecl { .. })
        ));
    }

    #[test]
    fn a_hub_or_a_table_over_its_size_limit_is_refused_before_allocating() {
        // A FIFO of 2^20 messages of 1 MiB: 1 TiB.
        let text = "[[hub]]\nname = \"a\"\nkind = \"event\"\n\n[[hub]]\nname = \"big\"\nkind = \"fifo\"\ntype = \"u8\"\nlen = 1048576\ncapacity = 1048576\n";
        let err = decls_from_toml(text, "hubs.toml").unwrap_err().to_string();
        assert!(err.starts_with("hubs.toml:5:1: "), "{err}");
        assert!(
            err.contains("the limit is 67108864 (64 MiB) per hub"),
            "{err}"
        );
        let big = [HubDecl::new(
            "big",
            HubKind::Fifo {
                message: ElemShape::array(ElemType::U8, 1 << 20),
                capacity: 1 << 20,
            },
        )];
        assert!(matches!(
            Hubs::in_process(&big),
            Err(HubError::BadDecl { .. })
        ));
        // Five FIFOs of 63 MiB each: each fits, not all together.
        let text: String = (0..5)
            .map(|i| format!("[[hub]]\nname = \"f{i}\"\nkind = \"fifo\"\ntype = \"u8\"\nlen = 64512\ncapacity = 1024\n"))
            .collect();
        let err = decls_from_toml(&text, "hubs.toml").unwrap_err().to_string();
        assert!(err.starts_with("hubs.toml:25:1: with hub `f4`"), "{err}");
        let err = decls_from_toml(
            "[[hub]]\nname = \"a\"\nkind = \"event\"\n[[hub]]\nname = \"a\"\nkind = \"event\"\n",
            "h",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(err, "h:4:1: hub `a` is declared twice");
        let many: Vec<HubDecl> = (0..=MAX_HUBS)
            .map(|i| HubDecl::event(&format!("e{i}")))
            .collect();
        assert!(matches!(
            check_decls(&many),
            Err((MAX_HUBS, HubError::TooManyHubs { .. }))
        ));
    }

    #[test]
    fn every_hub_starts_in_its_declared_state() {
        let sut = Hubs::in_process(&all()).unwrap();
        assert_eq!(sut.semaphore("sem").unwrap().count(), 1);
        assert!(!sut.event("ev").unwrap().is_raised());
        assert!(sut.fifo_sender::<[u16; 3]>("fifo").unwrap().is_empty());
        assert!(!sut.port::<[f64; 2]>("port").unwrap().is_full());
        assert_eq!(sut.resource("res").unwrap().holder(), None);
    }

    #[test]
    fn a_semaphore_loop_between_threads_passes_every_token() {
        let sut = Hubs::in_process(&[HubDecl::semaphore("ping", 0), HubDecl::semaphore("pong", 0)])
            .unwrap();
        let other = sut.clone();
        let peer = std::thread::spawn(move || {
            let (ping, pong) = (
                other.semaphore("ping").unwrap(),
                other.semaphore("pong").unwrap(),
            );
            for _ in 0..10_000 {
                ping.take().unwrap();
                pong.give();
            }
        });
        let (ping, pong) = (
            sut.semaphore("ping").unwrap(),
            sut.semaphore("pong").unwrap(),
        );
        for _ in 0..10_000 {
            ping.give();
            pong.take().unwrap();
        }
        peer.join().unwrap();
        assert!(!pong.take_timeout(Duration::from_millis(1)).unwrap());
    }

    #[test]
    fn an_event_wakes_a_sleeping_waiter() {
        let sut = Hubs::in_process(&[HubDecl::event("go")]).unwrap();
        let other = sut.clone();
        let waiter = std::thread::spawn(move || {
            let ev = other.event("go").unwrap();
            ev.wait().unwrap();
            ev.is_raised()
        });
        std::thread::sleep(Duration::from_millis(20));
        sut.event("go").unwrap().raise();
        assert!(!waiter.join().unwrap(), "the wait cleared it");
        let ev = sut.event("go").unwrap();
        assert!(!ev.wait_timeout(Duration::from_millis(1)).unwrap());
        ev.raise();
        assert!(ev.try_wait());
    }

    #[test]
    fn a_fifo_carries_typed_messages_in_order_and_blocks_when_full() {
        let sut = Hubs::in_process(&[HubDecl::fifo::<[u16; 3]>("f", 4)]).unwrap();
        let mut tx = sut.fifo_sender::<[u16; 3]>("f").unwrap();
        let other = sut.clone();
        let consumer = std::thread::spawn(move || {
            let mut rx = other.fifo_receiver::<[u16; 3]>("f").unwrap();
            for i in 0..20_000u32 {
                let v = i as u16;
                assert_eq!(
                    rx.recv().unwrap(),
                    [v, v.wrapping_add(1), v.wrapping_add(2)]
                );
            }
            assert_eq!(rx.recv_timeout(Duration::from_millis(1)).unwrap(), None);
        });
        for i in 0..20_000u32 {
            let v = i as u16;
            tx.send([v, v.wrapping_add(1), v.wrapping_add(2)]).unwrap();
        }
        consumer.join().unwrap();
        assert_eq!(tx.capacity(), 4);
        for _ in 0..4 {
            tx.try_send([0; 3]).unwrap();
        }
        assert_eq!(tx.try_send([9; 3]).unwrap_err().into_inner(), [9; 3]);
        assert!(
            !tx.send_timeout([9; 3], Duration::from_millis(1)).unwrap(),
            "full, nobody reads"
        );
    }

    #[test]
    fn a_fifo_end_is_claimed_until_dropped() {
        let sut = Hubs::in_process(&[HubDecl::fifo::<u8>("f", 2)]).unwrap();
        let tx = sut.fifo_sender::<u8>("f").unwrap();
        let err = sut.fifo_sender::<u8>("f").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the sender of FIFO `f` is already attached, by process {}",
                std::process::id()
            )
        );
        let _rx = sut.fifo_receiver::<u8>("f").unwrap();
        drop(tx);
        let mut tx = sut.fifo_sender::<u8>("f").unwrap();
        tx.try_send(1).unwrap();
    }

    #[test]
    fn both_ends_of_a_proxied_fifo_on_one_host_are_never_both_attached() {
        let decls = [HubDecl::fifo::<u32>("f", 4).at("h2")];
        let hosts = ["h1".to_owned(), "h2".to_owned()];
        // No relay: the ends race only each other, as before the relay looks.
        let sut = Hubs::in_process_at(&decls, &hosts, 0).unwrap();
        {
            let _tx = sut.fifo_sender::<u32>("f").unwrap();
            assert!(matches!(
                sut.fifo_receiver::<u32>("f"),
                Err(HubError::EndElsewhere {
                    end: "receiver",
                    ..
                })
            ));
        }
        {
            let _rx = sut.fifo_receiver::<u32>("f").unwrap();
            assert!(matches!(
                sut.fifo_sender::<u32>("f"),
                Err(HubError::EndElsewhere { end: "sender", .. })
            ));
        }
        // Two ends claimed at once: at most one is had.
        for _ in 0..200 {
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let rx = {
                let (sut, barrier) = (sut.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    sut.fifo_receiver::<u32>("f").ok()
                })
            };
            barrier.wait();
            let tx = sut.fifo_sender::<u32>("f");
            let rx = rx.join().unwrap();
            assert!(
                !(tx.is_ok() && rx.is_some()),
                "a FIFO of this host alone formed"
            );
        }
        // At home both ends are local, as on one host.
        let home = Hubs::in_process_at(&decls, &hosts, 1).unwrap();
        let _tx = home.fifo_sender::<u32>("f").unwrap();
        let _rx = home.fifo_receiver::<u32>("f").unwrap();
    }

    #[test]
    fn a_fifo_end_of_a_dead_process_is_taken_over() {
        let sut = Hubs::in_process(&[HubDecl::fifo::<u8>("f", 2)]).unwrap();
        let tx = sut.fifo_sender::<u8>("f").unwrap();
        // A sender whose process died: its pid is no longer running.
        tx.h.words()[FIFO_SENDER].store(999_999, Ordering::Relaxed);
        std::mem::forget(tx);
        assert!(sut.fifo_sender::<u8>("f").is_ok());
    }

    #[test]
    fn a_port_send_returns_only_once_the_message_is_taken() {
        let sut = Hubs::in_process(&[HubDecl::port::<[f64; 2]>("p")]).unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let (other, seen) = (sut.clone(), Arc::clone(&received));
        let receiver = std::thread::spawn(move || {
            let mut port = other.port::<[f64; 2]>("p").unwrap();
            for i in 0..1_000 {
                let m = port.receive().unwrap();
                assert_eq!(m, [f64::from(i), -f64::from(i)]);
                // Release: the sender reads it after its next send returns.
                seen.store(u64::from(i as u32) + 1, Ordering::Release);
            }
        });
        let mut port = sut.port::<[f64; 2]>("p").unwrap();
        for i in 0..1_000 {
            port.send(&[f64::from(i), -f64::from(i)]).unwrap();
            if i > 0 {
                // Acquire: pairs with the receiver's Release store; message i - 1
                // was received before message i could be taken.
                assert!(received.load(Ordering::Acquire) >= u64::from(i as u32));
            }
        }
        receiver.join().unwrap();
        assert_eq!(port.try_receive(), None);
        assert_eq!(
            port.receive_timeout(Duration::from_millis(1)).unwrap(),
            None
        );
    }

    #[test]
    fn a_resource_excludes_and_reports_its_holder() {
        let sut = Hubs::in_process(&[HubDecl::resource("r")]).unwrap();
        let counter = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (hubs, counter) = (sut.clone(), Arc::clone(&counter));
                std::thread::spawn(move || {
                    let r = hubs.resource("r").unwrap();
                    for _ in 0..1_000 {
                        let _g = r.lock().unwrap();
                        // Relaxed: ordered by the resource.
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        // Relaxed: after join.
        assert_eq!(counter.load(Ordering::Relaxed), 3_000);
        let r = sut.resource("r").unwrap();
        let g = r.lock().unwrap();
        assert_eq!(r.holder(), Some(ictus_os::handoff::gettid()));
        let err = r.lock().unwrap_err();
        assert!(err.to_string().contains("already holds it"), "{err}");
        assert!(r.try_lock().unwrap().is_none());
        drop(g);
        assert!(r.try_lock().unwrap().is_some());
    }

    #[test]
    fn a_resource_held_by_a_dead_thread_is_reported_and_can_be_freed() {
        let sut = Hubs::in_process(&[HubDecl::resource("r")]).unwrap();
        let other = sut.clone();
        std::thread::spawn(move || {
            let r = other.resource("r").unwrap();
            std::mem::forget(r.lock().unwrap());
        })
        .join()
        .unwrap();
        let r = sut.resource("r").unwrap();
        let err = r.lock().unwrap_err();
        assert!(err.to_string().contains("the owner died"), "{err}");
        assert!(r.force_release().is_some());
        drop(r.lock().unwrap());
    }

    #[test]
    fn shared_hubs_work_across_two_mappings() {
        let name = unique("mappings");
        let owner = Hubs::create_shared(&all(), &name).unwrap();
        let other = Hubs::open_shared_matching(&name, &all()).unwrap();
        assert_eq!(other.decls(), owner.decls());
        let peer = std::thread::spawn(move || {
            let sem = other.semaphore("sem").unwrap();
            let mut rx = other.fifo_receiver::<[u16; 3]>("fifo").unwrap();
            let mut port = other.port::<[f64; 2]>("port").unwrap();
            // The initial token, and the one the owner gives.
            sem.take().unwrap();
            sem.take().unwrap();
            assert_eq!(rx.recv().unwrap(), [1, 2, 3]);
            assert_eq!(port.receive().unwrap(), [0.5, 1.5]);
            other.event("ev").unwrap().raise();
        });
        let sem = owner.semaphore("sem").unwrap();
        sem.give();
        owner
            .fifo_sender::<[u16; 3]>("fifo")
            .unwrap()
            .send([1, 2, 3])
            .unwrap();
        owner
            .port::<[f64; 2]>("port")
            .unwrap()
            .send(&[0.5, 1.5])
            .unwrap();
        owner.event("ev").unwrap().wait().unwrap();
        peer.join().unwrap();
        let path = owner.segment().unwrap().path();
        // Handles keep the hubs (and so the segment) alive.
        drop(owner);
        assert!(std::path::Path::new(&path).exists());
        drop(sem);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_declaration_that_differs_from_the_shared_hubs_names_the_hub() {
        let name = unique("mismatch");
        let _owner = Hubs::create_shared(&all(), &name).unwrap();
        let err =
            Hubs::open_shared_matching(&name, &[HubDecl::fifo::<[u16; 3]>("fifo", 8)]).unwrap_err();
        assert!(err.to_string().starts_with("hub `fifo` differs"), "{err}");
        let err = Hubs::open_shared_matching(&name, &[HubDecl::event("other")]).unwrap_err();
        assert!(err.to_string().contains("not in the shared table"), "{err}");
    }

    #[test]
    fn hub_declarations_parse_from_toml_with_places() {
        let text = r#"
[[hub]]
name = "ready"
kind = "semaphore"
initial = 2

[[hub]]
name = "forces"
kind = "fifo"
type = "f32"
len = 3
capacity = 16

[[hub]]
name = "setup"
kind = "port"
type = "u64"

[[hub]]
name = "device"
kind = "resource"

[[hub]]
name = "go"
kind = "event"
"#;
        let decls = decls_from_toml(text, "hubs.toml").unwrap();
        assert_eq!(
            decls,
            vec![
                HubDecl::semaphore("ready", 2),
                HubDecl::fifo::<[f32; 3]>("forces", 16),
                HubDecl::port::<u64>("setup"),
                HubDecl::resource("device"),
                HubDecl::event("go"),
            ]
        );
        let json = serde_json::to_string(&decls).unwrap();
        assert_eq!(serde_json::from_str::<Vec<HubDecl>>(&json).unwrap(), decls);
        let bad = "[[hub]]\nname = \"x\"\nkind = \"fifo\"\ntype = \"f32\"\n";
        let err = decls_from_toml(bad, "hubs.toml").unwrap_err().to_string();
        assert!(err.starts_with("hubs.toml:1:1:"), "{err}");
        assert!(err.contains("needs a `capacity`"), "{err}");
        let extra = "[[hub]]\nname = \"x\"\nkind = \"event\"\ncapacity = 3\n";
        let err = decls_from_toml(extra, "hubs.toml").unwrap_err().to_string();
        assert!(err.contains("a event hub has no `capacity`"), "{err}");
        let kind = "[[hub]]\nname = \"x\"\nkind = \"mailbox\"\n";
        let err = decls_from_toml(kind, "hubs.toml").unwrap_err().to_string();
        assert!(err.contains("unknown hub kind `mailbox`"), "{err}");
        let unknown = "[[hub]]\nname = \"x\"\nkind = \"event\"\ncolour = 1\n";
        let err = decls_from_toml(unknown, "hubs.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `colour`"), "{err}");
    }

    /// The environment variable that makes [`cross_process_child`] act.
    const CHILD_ENV: &str = "ICTUS_HUB_TEST_CHILD";

    /// The other process of [`hubs_work_between_processes`]: run by it as a
    /// copy of this test binary; does nothing when run on its own.
    #[test]
    #[ignore = "run by hubs_work_between_processes in a child process"]
    fn cross_process_child() {
        let Ok(name) = std::env::var(CHILD_ENV) else {
            return;
        };
        let hubs = Hubs::open_shared(&name).unwrap();
        let (ping, pong) = (
            hubs.semaphore("ping").unwrap(),
            hubs.semaphore("pong").unwrap(),
        );
        for _ in 0..1_000 {
            ping.take().unwrap();
            pong.give();
        }
        let mut rx = hubs.fifo_receiver::<u64>("numbers").unwrap();
        let sum: u64 = (0..1_000).map(|_| rx.recv().unwrap()).sum();
        let mut port = hubs.port::<u64>("answer").unwrap();
        port.send(&sum).unwrap();
        // Die holding the resource.
        std::mem::forget(hubs.resource("lock").unwrap().lock().unwrap());
    }

    #[test]
    fn hubs_work_between_processes() {
        let name = unique("xproc");
        let hubs = Hubs::create_shared(
            &[
                HubDecl::semaphore("ping", 0),
                HubDecl::semaphore("pong", 0),
                HubDecl::fifo::<u64>("numbers", 8),
                HubDecl::port::<u64>("answer"),
                HubDecl::resource("lock"),
            ],
            &name,
        )
        .unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "hub::tests::cross_process_child",
                "--exact",
                "--ignored",
                "--quiet",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &name)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let (ping, pong) = (
            hubs.semaphore("ping").unwrap(),
            hubs.semaphore("pong").unwrap(),
        );
        for _ in 0..1_000 {
            ping.give();
            assert!(
                pong.take_timeout(Duration::from_secs(10)).unwrap(),
                "the child stopped answering"
            );
        }
        let mut tx = hubs.fifo_sender::<u64>("numbers").unwrap();
        for i in 0..1_000 {
            assert!(
                tx.send_timeout(i, Duration::from_secs(10)).unwrap(),
                "the child stopped receiving"
            );
        }
        let answer = hubs
            .port::<u64>("answer")
            .unwrap()
            .receive_timeout(Duration::from_secs(10))
            .unwrap();
        assert_eq!(answer, Some((0..1_000).sum()));
        assert!(child.wait().unwrap().success());
        // The child exited holding the resource: its thread is gone.
        let lock = hubs.resource("lock").unwrap();
        assert!(lock.holder().is_some());
        assert!(lock.lock().is_err());
        lock.force_release();
        drop(lock.lock().unwrap());
    }
}
