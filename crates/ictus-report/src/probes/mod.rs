//! The report, probe by probe: one file per probe (`probes/<probe>.rs`, named like its
//! folder in `ictus_probe`) holds everything the report says about it, in one
//! [`ProbeReport`]: its terminal view, its seed table(s), its plots and its compare
//! rules. The backends (the terminal's [`crate::terminal`], Markdown, HTML) lay out
//! what these return and know no probe.
//!
//! The files and the dispatch over [`ProbeId`] are generated from the registry
//! ([`ictus_probe::for_each_probe!`]): a new probe adds its file here and no other
//! line to this crate.
//!
//! ```no_run
//! let text = std::fs::read_to_string("timer.json")?;
//! let record: ictus_probe::record::RunRecord = serde_json::from_str(&text)?;
//! print!("{}", ictus_report::probes::terminal(&record));
//! print!("{}", ictus_report::terminal::footer(&record));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;

/// What the report says about one probe: each probe's file states one, `REPORT`.
pub(crate) struct ProbeReport {
    /// Which probe.
    pub(crate) id: ProbeId,
    /// The human view of one of its records, without the footer every view shares
    /// ([`crate::terminal::footer`]).
    pub(crate) terminal: fn(&RunRecord) -> String,
}

macro_rules! probe_reports {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        $(mod $module;)*

        /// The report of probe `id`.
        pub(crate) fn of(id: ProbeId) -> &'static ProbeReport {
            match id {
                $(ProbeId::$variant => &$module::REPORT,)*
            }
        }
    };
}

ictus_probe::for_each_probe!(probe_reports);

/// The human view of `record` as `ictus probe <probe>` prints it before the footer
/// ([`crate::terminal::footer`]): its probe's view, or only the headline for a record
/// of no probe this ictus knows.
pub fn terminal(record: &RunRecord) -> String {
    match record.probe.parse::<ProbeId>() {
        Ok(id) => terminal_of(id, record),
        Err(_) => crate::terminal::headline(record),
    }
}

/// The human view of `record` as probe `id`'s (see [`terminal`]).
pub fn terminal_of(id: ProbeId, record: &RunRecord) -> String {
    (of(id).terminal)(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_states_its_own_report() {
        for &id in ProbeId::ALL {
            assert_eq!(of(id).id, id);
        }
    }
}
