//! What a node tells the main host while the run goes (its status, every
//! [`STATUS_EVERY`]) and at its end (its hand-over), and how the main host takes
//! another host's words: about its own subsystems only, bounded, without control
//! characters.

use std::collections::BTreeMap;
use std::time::Duration;

use ictus_core::Nanos;
use ictus_exec::link::{LinkEvent, RemoteSlot};
use ictus_exec::report::{HostReport, ThreadOutcome};
use serde::{Deserialize, Serialize};

/// How often a node reports its subsystems.
pub(super) const STATUS_EVERY: Duration = Duration::from_millis(100);
/// Words (late arrivals, explained misses) a node's status may carry of each kind
/// (it names at most [`crate::late::NAMED_PER_SECOND`] late ones and a count a
/// second, a status every 100 ms), and the characters of each shown.
pub(super) const LATE_PER_STATUS: usize = 32;
const LATE_WORDS_MAX: usize = 400;

/// What a node tells the main host every [`STATUS_EVERY`]: its subsystems' counters
/// and the lateness of the ticks that reached it.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct NodeStatus {
    pub(super) slots: Vec<RemoteSlot>,
    pub(super) tick: TickFigures,
    /// What came late on the node since its last status, in words.
    #[serde(default)]
    pub(super) late: Vec<String>,
    /// The node's misses explained since its last status, in words.
    #[serde(default)]
    pub(super) explained: Vec<String>,
}

/// A node's tick lateness, for the live view.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(super) struct TickFigures {
    pub(super) ticks: u64,
    pub(super) missing: u64,
    pub(super) p50_ns: Option<u64>,
    pub(super) max_ns: Option<u64>,
    /// The largest since the previous status.
    pub(super) recent_ns: Option<u64>,
}

impl NodeStatus {
    /// The main host's events of this status from host `from`: the slots `own` says
    /// are the sender's (by the schedule), its explained misses and late arrivals,
    /// [`shown`]. False when it also spoke of another host's subsystems (those are
    /// left out).
    pub(super) fn into_events(
        self,
        from: &str,
        own: impl Fn(usize) -> bool,
        events: &mut Vec<LinkEvent>,
    ) -> bool {
        let all = self.slots.len();
        let before = events.len();
        events.extend(
            self.slots
                .into_iter()
                .filter(|s| own(s.slot))
                .map(LinkEvent::Remote),
        );
        let only_its_own = events.len() - before == all;
        events.extend(
            self.explained
                .iter()
                .take(LATE_PER_STATUS)
                .map(|w| LinkEvent::Note(format!("on {from}: {}", shown(w)))),
        );
        events.extend(
            self.late
                .iter()
                .take(LATE_PER_STATUS)
                .map(|w| LinkEvent::Late(shown(w))),
        );
        only_its_own
    }
}

/// Another host's words as this host shows them: without control characters, at
/// most [`LATE_WORDS_MAX`] characters.
fn shown(words: &str) -> String {
    words
        .chars()
        .filter(|c| !c.is_control())
        .take(LATE_WORDS_MAX)
        .collect()
}

/// A node's hand-over at the end.
#[derive(Serialize, Deserialize)]
pub(super) struct Handover {
    pub(super) outcomes: BTreeMap<usize, ThreadOutcome>,
    pub(super) report: HostReport,
}

/// `v` with every control character taken out of its strings (through its JSON
/// form): what another host wrote, before this host's terminal or record shows it.
pub(super) fn without_control<T: Serialize + serde::de::DeserializeOwned>(v: T) -> T {
    fn clean(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.chars().any(char::is_control) => {
                s.retain(|c| !c.is_control());
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(clean),
            serde_json::Value::Object(o) => o.values_mut().for_each(clean),
            _ => {}
        }
    }
    let Ok(mut json) = serde_json::to_value(&v) else {
        return v;
    };
    clean(&mut json);
    serde_json::from_value(json).unwrap_or(v)
}

/// Of the last few explained misses `now` (newest last), those after the last one
/// of `seen`, the previous hand-over: all of them when it is no longer among them.
pub(super) fn new_since<'a>(
    seen: &[ictus_exec::live::LiveMiss],
    now: &'a [ictus_exec::live::LiveMiss],
) -> &'a [ictus_exec::live::LiveMiss] {
    let from = seen
        .last()
        .and_then(|last| now.iter().rposition(|m| m == last))
        .map_or(0, |i| i + 1);
    &now[from..]
}

/// One explained miss in words, as the main host's events name it.
pub(super) fn miss_words(m: &ictus_exec::live::LiveMiss) -> String {
    let late = Nanos::new(m.lateness_ns);
    let what = match m.kind {
        ictus_explain::MissKind::Overrun => {
            format!(
                "{} overran at frame {}, {late} past the next release",
                m.subsystem, m.frame
            )
        }
        _ => format!("{} released {late} late at frame {}", m.subsystem, m.frame),
    };
    let skipped = if m.missed > 0 {
        format!(", {} release(s) skipped", m.missed)
    } else {
        String::new()
    };
    format!("{what}{skipped}: {}", m.cause)
}
