//! The report, probe by probe: one file per probe (`probes/<probe>.rs`, named like its
//! folder in `ictus_probe`) holds everything the report says about it, in one
//! `ProbeReport`: its terminal view, its seed table(s), its plots and its compare
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

use ictus_probe::load::LoadKind;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;

use crate::plots::Plot;
use crate::results::Results;
use crate::tables::Table;

/// What the report says about one probe: each probe's file states one, `REPORT`.
pub(crate) struct ProbeReport {
    /// Which probe.
    pub(crate) id: ProbeId,
    /// The human view of one of its records, without the footer every view shares
    /// ([`crate::terminal::footer`]).
    pub(crate) terminal: fn(&RunRecord) -> String,
    /// Where its tables stand among the seeds' tables (the report lists them in this
    /// order, after the OS features).
    pub(crate) table_order: u32,
    /// Its seed table(s), from all its records in the results.
    pub(crate) tables: fn(&Results) -> Vec<Table>,
    /// The plots under its table in the HTML report, from all its records.
    pub(crate) plots: fn(&Results) -> Vec<Plot>,
    /// The plots under its table when runs are compared (`headers` names the runs,
    /// one per run); `None` for no plots section there.
    pub(crate) compare_plots: fn(runs: &[Results], headers: &[String]) -> Option<Vec<Plot>>,
    /// Whether it measures latencies, which the CPU latency QoS setting changes: a
    /// comparison says when runs measured them at different settings.
    pub(crate) latency: bool,
    /// The note a comparison sets under its table, if any.
    pub(crate) compare_note: Option<&'static str>,
    /// Whether its record's headline stands in for a survey's verdict where there is
    /// no survey.
    pub(crate) verdict: bool,
    /// The load its record says it put on the CPUs it measured itself, beside the
    /// loads around it (pingpong's `--cpu-load`).
    pub(crate) own_load: fn(&RunRecord) -> Option<LoadKind>,
}

impl ProbeReport {
    /// Every probe's report, in the registry's order.
    pub(crate) fn all() -> impl Iterator<Item = &'static ProbeReport> {
        ProbeId::ALL.iter().map(|&id| of(id))
    }

    /// The probe whose record's headline stands in for a survey's verdict.
    pub(crate) fn verdict_probe() -> ProbeId {
        Self::all()
            .find(|p| p.verdict)
            .map(|p| p.id)
            .expect("one probe's headline is the verdict (a test checks it)")
    }

    /// The report of the probe whose table is `table_id`, if any (a probe's table
    /// has its name as id).
    pub(crate) fn of_table(table_id: &str) -> Option<&'static ProbeReport> {
        table_id.parse().ok().map(of)
    }
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

    #[test]
    fn exactly_one_probe_gives_the_verdict() {
        assert_eq!(ProbeReport::all().filter(|p| p.verdict).count(), 1);
        let _ = ProbeReport::verdict_probe();
    }

    #[test]
    fn every_table_of_a_probe_is_named_for_it() {
        let r = crate::Results {
            source: std::path::PathBuf::from("nowhere"),
            manifest: None,
            audit: None,
            runs: Vec::new(),
        };
        for p in ProbeReport::all() {
            for t in (p.tables)(&r) {
                assert_eq!(ProbeReport::of_table(t.id).map(|q| q.id), Some(p.id));
            }
        }
    }
}
