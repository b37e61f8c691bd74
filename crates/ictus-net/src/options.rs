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
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            express: true,
            cells: Priority::RealTime,
            tick: Priority::RealTime,
            congestion: CongestionControl::Drop,
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
                _ => {
                    return Err(format!(
                        "unknown option '{key}' (expected express, cells, tick or congestion)"
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
            "express={},cells={},tick={},congestion={}",
            if self.express { "on" } else { "off" },
            priority_name(self.cells),
            priority_name(self.tick),
            match self.congestion {
                CongestionControl::Block => "block",
                _ => "drop",
            }
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
        let o =
            LinkOptions::parse("express=off, cells=data,tick=interactive-high,congestion=block")
                .unwrap();
        assert_eq!(
            o.words(),
            "express=off,cells=data,tick=interactive-high,congestion=block"
        );
        assert_eq!(LinkOptions::parse(&o.words()).unwrap(), o);
        assert!(LinkOptions::parse("").unwrap().is_default());
        for (bad, says) in [
            ("express", "expected key=value"),
            ("speed=fast", "unknown option 'speed'"),
            ("cells=urgent", "cells=urgent: expected real-time"),
            ("congestion=wait", "expected drop or block"),
        ] {
            let e = LinkOptions::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
