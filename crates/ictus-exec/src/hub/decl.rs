//! What a hub table declares: the kinds, the declarations and their limits, their
//! TOML form, and where each hub is homed.

use crate::cell::{ElemShape, ElemType, Element};
use ictus_core::sync::hub::{self as words, Ring};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use toml::Spanned;

use super::error::HubError;

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
    pub(super) name: String,
    pub(super) kind: HubKind,
    pub(super) host: Option<String>,
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
    pub(super) fn check(&self) -> Result<(), HubError> {
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
    pub(super) fn storage_bytes(&self) -> usize {
        self.words().next_multiple_of(REGION_ALIGN_WORDS) * 4
    }

    /// 32-bit words of the hub's region: the proxy header, then the kind's.
    pub(super) fn words(&self) -> usize {
        PROXY_WORDS + self.kind_words()
    }

    /// 32-bit words of the kind's own state.
    pub(super) fn kind_words(&self) -> usize {
        match self.kind {
            HubKind::Semaphore { .. } => words::SemaphoreWords::WORDS,
            HubKind::Event => words::EventWords::WORDS,
            // Two ports: the hub's own (on a proxy: the outbound one, what this
            // host's senders offer), and a proxy's inbound one (what the home
            // hands this host's receivers).
            HubKind::Port { message } => 2 * words::PortWords::words_for(message_bytes(message)),
            HubKind::Fifo { message, capacity } => {
                FIFO_RING + Ring::words_for(capacity, message_bytes(message))
            }
            HubKind::Resource => 1,
        }
    }
}

/// The largest message of a FIFO or port.
pub(super) const MAX_MESSAGE_BYTES: usize = 1 << 20;

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

pub(super) fn check_message(message: ElemShape) -> Result<(), String> {
    match message.bytes() {
        Some(b) if message.len >= 1 && b <= MAX_MESSAGE_BYTES => Ok(()),
        _ => Err(format!(
            "message `{message}`: the length must be 1 or more and the size at most 1 MiB"
        )),
    }
}

/// Per hub, the name of its home for messages: its `host`, else the main
/// host's name when `hosts` are known.
pub(super) fn home_names(decls: &[HubDecl], hosts: &[String]) -> Vec<String> {
    decls
        .iter()
        .map(|d| match (d.host(), hosts.first()) {
            (Some(h), _) => h.to_owned(),
            (None, Some(main)) => main.clone(),
            (None, None) => "the main host".to_owned(),
        })
        .collect()
}

pub(super) fn message_bytes(message: ElemShape) -> usize {
    message.bytes().unwrap_or(0)
}

/// The flat TOML/JSON form of a [`HubDecl`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HubRepr {
    pub(super) name: String,
    pub(super) kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) initial: Option<u32>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub(super) ty: Option<ElemType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) capacity: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) host: Option<String>,
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

/// Word of a FIFO region holding the pid of the process whose sender is attached.
pub(super) const FIFO_SENDER: usize = 0;
/// Word holding the pid of the receiver's process.
pub(super) const FIFO_RECEIVER: usize = 1;
/// What a FIFO end's word holds while the link holds that end for another
/// host (never a pid: those are below 2^22).
pub(super) const LINK_END: u32 = u32::MAX - 1;
/// Where the ring starts in a FIFO region (128 bytes on).
pub(super) const FIFO_RING: usize = 32;
/// Hub regions start on multiples of this many words (128 bytes).
pub(super) const REGION_ALIGN_WORDS: usize = 32;
/// Words of a hub's proxy header, before the kind's own words (128 bytes, so
/// that a FIFO ring's indices keep their alignment).
pub(super) const PROXY_WORDS: usize = 32;
