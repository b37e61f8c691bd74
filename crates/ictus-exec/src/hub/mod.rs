//! Hubs (seed 004): the synchronisation and communication objects that
//! subsystems share by name, between threads or between processes, besides
//! the cells.
//!
//! | kind | what it does |
//! |---|---|
//! | [`Semaphore`] | counting: `give` adds a token, `take` waits for one |
//! | [`Event`] | binary: `raise` sets it, `wait` waits for it and clears it |
//! | FIFO ([`FifoSender`], [`FifoReceiver`]) | a bounded lock-free ring of fixed-size [`Element`](crate::cell::Element) messages, one sender and one receiver |
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
//!   [`ictus_core::sync::hub::PortWords::claim`]), sends it into this host's
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
//!   ([`PiLock::lock_until`](ictus_os::handoff::PiLock::lock_until)), so the home's unlock hands it over at once.
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

mod decl;
mod error;
mod handles;
pub mod remote;
mod store;
#[cfg(test)]
mod tests;

pub use decl::{
    HubDecl, HubKind, MAX_HUB_BYTES, MAX_HUBS, MAX_HUBS_BYTES, check_decls, decls_from_toml, homes,
};
pub use error::HubError;
pub use handles::{Event, FifoReceiver, FifoSender, Port, Resource, ResourceGuard, Semaphore};
pub use store::{FAIL_POLL, Hubs};

// What the relay (remote) takes from the table's words.
use decl::{
    FIFO_RECEIVER, FIFO_RING, FIFO_SENDER, LINK_END, PROXY_WORDS, home_names, message_bytes,
};
use store::{FAILED_DIFFERS, FAILED_LEFT, Handle, P_DEMAND, P_FAILED, P_GRANTED, P_OUT, P_REFUSED};
