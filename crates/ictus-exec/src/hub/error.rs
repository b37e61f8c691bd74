//! What goes wrong with a hub table or a hub.

use crate::cell::ElemShape;
use ictus_os::shm::ShmError;
use std::io;
use thiserror::Error;

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
    /// More than [`MAX_HUBS`](crate::hub::MAX_HUBS) hubs.
    #[error("{count} hubs; the limit is {limit}")]
    TooManyHubs {
        /// How many were declared.
        count: usize,
        /// The limit, [`MAX_HUBS`](crate::hub::MAX_HUBS).
        limit: usize,
    },
    /// Hubs whose storage is over [`MAX_HUBS_BYTES`](crate::hub::MAX_HUBS_BYTES) in all.
    #[error(
        "with hub `{name}` the hubs need more than the limit of {limit} bytes (256 MiB) of \
         storage in all"
    )]
    TableTooLarge {
        /// The hub that crosses the limit.
        name: String,
        /// The limit, [`MAX_HUBS_BYTES`](crate::hub::MAX_HUBS_BYTES).
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
    /// is exchanged with it (see [`HubReport::TableDiffers`](crate::hub::remote::HubReport::TableDiffers)).
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
