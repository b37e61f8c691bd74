//! The link's publication options, for measuring them against each other
//! (issue 30: "cells at the wire's pace", `bench/link-options.sh`). The defaults are
//! what the measurements kept; `ICTUS_LINK_OPTIONS` changes them for one process,
//! comma-separated `key=value`:
//!
//! | key | values | default |
//! |---|---|---|
//! | `express` | `on` (each publication its own batch), `off` (Zenoh batches) | `on` |
//! | `cells` | the cells' priority: `real-time`, `interactive-high`, `data` | `real-time` |
//! | `tick` | the tick's and the beats' priority, as `cells` | `real-time` |
//! | `congestion` | the cells' and the tick's: `drop` (latest value wins), `block` | `drop` |
//! | `quic` | the trusted links' QUIC: `stream` (one stream), `mixed` (cells best effort, in QUIC datagrams; the rest on the stream), `multistream` (a stream per priority), `mixed-multistream` | `stream` |
//!
//! Zenoh's own threads are set the same way with Zenoh's `ZENOH_RUNTIME` (its number
//! of threads per runtime). A run says the options it used in its events.
//!
//! ```
//! use ictus_net::options::LinkOptions;
//! let o = LinkOptions::parse("express=off,cells=data").unwrap();
//! assert!(!o.express);
//! assert!(LinkOptions::parse("express=maybe").unwrap_err().contains("express"));
//! ```

use zenoh::qos::{CongestionControl, Priority};

/// The environment variable that changes the options.
pub const VAR: &str = "ICTUS_LINK_OPTIONS";

/// How the link publishes a frame's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkOptions {
    /// Each publication sent at once, unbatched.
    pub express: bool,
    /// The cells' priority in Zenoh's queues.
    pub cells: Priority,
    /// The tick's and the beats' priority.
    pub tick: Priority,
    /// What a publication does on a full queue.
    pub congestion: CongestionControl,
    /// How the trusted links use QUIC.
    pub quic: QuicMode,
}

/// How the trusted links use QUIC (Zenoh's endpoint metadata `mixed_rel` and
/// `multistream`). Both ends of a link must agree: every host of a run reads the same
/// `ICTUS_LINK_OPTIONS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuicMode {
    /// One QUIC stream for everything (Zenoh's default).
    Stream,
    /// Cells published best effort, carried in QUIC datagrams (unreliable, never
    /// retransmitted: a lost one is a gap its receiver counts, the next frame's copy
    /// follows); everything else on the reliable stream of the same connection.
    Mixed,
    /// A QUIC stream per Zenoh priority: a retransmission of a low-priority message
    /// holds back only its own stream.
    MultiStream,
    /// Both.
    MixedMultiStream,
}

impl QuicMode {
    /// Zenoh's endpoint metadata for it (after the locator's `?`), if any.
    pub fn metadata(self) -> Option<&'static str> {
        match self {
            QuicMode::Stream => None,
            QuicMode::Mixed => Some("mixed_rel=1"),
            QuicMode::MultiStream => Some("multistream=1"),
            QuicMode::MixedMultiStream => Some("mixed_rel=1;multistream=1"),
        }
    }

    /// Whether cells go best effort (in datagrams).
    pub fn best_effort_cells(self) -> bool {
        matches!(self, QuicMode::Mixed | QuicMode::MixedMultiStream)
    }

    fn name(self) -> &'static str {
        match self {
            QuicMode::Stream => "stream",
            QuicMode::Mixed => "mixed",
            QuicMode::MultiStream => "multistream",
            QuicMode::MixedMultiStream => "mixed-multistream",
        }
    }
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            express: true,
            cells: Priority::RealTime,
            tick: Priority::RealTime,
            congestion: CongestionControl::Drop,
            quic: QuicMode::Stream,
        }
    }
}

impl LinkOptions {
    /// The defaults, changed by `ICTUS_LINK_OPTIONS` where it is set.
    pub fn from_env() -> Result<LinkOptions, String> {
        match std::env::var(VAR) {
            Ok(text) => LinkOptions::parse(&text).map_err(|e| format!("{VAR}: {e}")),
            Err(_) => Ok(LinkOptions::default()),
        }
    }

    /// The defaults changed by `text` (`key=value,...`; empty: the defaults).
    pub fn parse(text: &str) -> Result<LinkOptions, String> {
        let mut o = LinkOptions::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected key=value"))?;
            let bad = |expected: &str| format!("{key}={value}: expected {expected}");
            match key {
                "express" => {
                    o.express = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(bad("on or off")),
                    }
                }
                "cells" | "tick" => {
                    let p = priority(value)
                        .ok_or_else(|| bad("real-time, interactive-high or data"))?;
                    if key == "cells" {
                        o.cells = p;
                    } else {
                        o.tick = p;
                    }
                }
                "congestion" => {
                    o.congestion = match value {
                        "drop" => CongestionControl::Drop,
                        "block" => CongestionControl::Block,
                        _ => return Err(bad("drop or block")),
                    }
                }
                "quic" => {
                    o.quic = [
                        QuicMode::Stream,
                        QuicMode::Mixed,
                        QuicMode::MultiStream,
                        QuicMode::MixedMultiStream,
                    ]
                    .into_iter()
                    .find(|m| m.name() == value)
                    .ok_or_else(|| bad("stream, mixed, multistream or mixed-multistream"))?;
                }
                _ => {
                    return Err(format!(
                        "unknown option '{key}' (expected express, cells, tick, congestion or quic)"
                    ));
                }
            }
        }
        Ok(o)
    }

    /// Whether these are the defaults.
    pub fn is_default(&self) -> bool {
        *self == LinkOptions::default()
    }

    /// In words, as `parse` reads them.
    pub fn words(&self) -> String {
        format!(
            "express={},cells={},tick={},congestion={},quic={}",
            if self.express { "on" } else { "off" },
            priority_name(self.cells),
            priority_name(self.tick),
            match self.congestion {
                CongestionControl::Block => "block",
                _ => "drop",
            },
            self.quic.name()
        )
    }
}

fn priority(name: &str) -> Option<Priority> {
    match name {
        "real-time" => Some(Priority::RealTime),
        "interactive-high" => Some(Priority::InteractiveHigh),
        "data" => Some(Priority::Data),
        _ => None,
    }
}

fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::RealTime => "real-time",
        Priority::InteractiveHigh => "interactive-high",
        _ => "data",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_back_in_words_and_a_bad_one_is_named() {
        let o = LinkOptions::parse(
            "express=off, cells=data,tick=interactive-high,congestion=block,quic=mixed",
        )
        .unwrap();
        assert_eq!(
            o.words(),
            "express=off,cells=data,tick=interactive-high,congestion=block,quic=mixed"
        );
        assert!(o.quic.best_effort_cells());
        assert_eq!(o.quic.metadata(), Some("mixed_rel=1"));
        assert_eq!(LinkOptions::parse(&o.words()).unwrap(), o);
        assert!(LinkOptions::parse("").unwrap().is_default());
        for (bad, says) in [
            ("express", "expected key=value"),
            ("speed=fast", "unknown option 'speed'"),
            ("cells=urgent", "cells=urgent: expected real-time"),
            ("congestion=wait", "expected drop or block"),
            ("quic=datagrams", "expected stream, mixed"),
        ] {
            let e = LinkOptions::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
