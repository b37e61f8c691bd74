//! The seeds' tables, reproduced for one machine, as data: [`tables`](crate::probes::tables) gathers them
//! from [`Results`] (the OS features here, each probe's in its report file,
//! `probes/<probe>.rs`, with the helpers below); the Markdown and HTML renderers and
//! `compare` only lay them out.
//!
//! ```no_run
//! let results = ictus_report::load(std::path::Path::new("ictus-results/vm-20260101T000000Z")).unwrap();
//! for table in ictus_report::probes::tables(&results) {
//!     println!("{} ({}): {} rows", table.title, table.seed, table.rows.len());
//! }
//! ```

use ictus_probe::record::WarningId;

use ictus_core::Percentile;
use ictus_probe::doctor::{CheckId, Status};
use ictus_probe::record::LatencyResult;
use ictus_probe::registry::ProbeId;

use crate::doc::Grid;
use crate::format;
use crate::results::{Config, Results, Run};

/// One table: what it shows, its columns and rows, and its notes.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Stable id, also the HTML anchor: `features`, or the name of the probe whose
    /// table it is (`timer`, ...).
    pub id: &'static str,
    /// The title: `Latency by configuration and load`.
    pub title: String,
    /// Where the table comes from: `seed 002 Table 1`.
    pub seed: &'static str,
    /// One or two sentences: what the table shows and how it was measured.
    pub caption: String,
    /// Names of the key columns (the row headers).
    pub keys: Vec<String>,
    /// Names of the value columns.
    pub columns: Vec<Column>,
    /// The rows.
    pub rows: Vec<Row>,
    /// Footnotes (thin percentiles, refused policies, what is missing).
    pub notes: Vec<String>,
    /// Why the table is empty, when it is.
    pub absent: Option<String>,
}

/// A value column.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Its header, with the unit where all cells share one.
    pub name: String,
    /// Whether `compare` sets this column side by side (long text columns are left out).
    pub compared: bool,
}

impl Column {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Column {
            name: name.into(),
            compared: true,
        }
    }
    pub(crate) fn text(name: impl Into<String>) -> Self {
        Column {
            name: name.into(),
            compared: false,
        }
    }
}

impl Table {
    /// The key columns, then the value columns (numbers where compared).
    pub(crate) fn grid(&self) -> Grid {
        Grid {
            header: self
                .keys
                .iter()
                .cloned()
                .chain(self.columns.iter().map(|c| c.name.clone()))
                .collect(),
            numeric: self
                .keys
                .iter()
                .map(|_| false)
                .chain(self.columns.iter().map(|c| c.compared))
                .collect(),
            rows: self
                .rows
                .iter()
                .map(|r| {
                    r.keys
                        .iter()
                        .cloned()
                        .chain(r.cells.iter().map(|c| c.text.clone()))
                        .collect()
                })
                .collect(),
        }
    }
}

/// One row: its keys, then one cell per value column.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The row headers, one per key column.
    pub keys: Vec<String>,
    /// The values, one per value column.
    pub cells: Vec<Cell>,
}

/// One value: its text, the number behind it (for ratios), and whether too few
/// samples support it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// What is shown, units included (`~` before a thin percentile).
    pub text: String,
    /// The number compared across runs.
    pub value: Option<f64>,
    /// A percentile the sample count does not support.
    pub thin: bool,
}

impl Cell {
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            value: None,
            thin: false,
        }
    }
    pub(crate) fn num(text: String, value: f64) -> Self {
        Cell {
            text,
            value: Some(value),
            thin: false,
        }
    }
    pub(crate) fn ns(v: f64) -> Self {
        Cell::num(format::ns(v), v)
    }
    pub(crate) fn empty() -> Self {
        Cell::text("—")
    }
}

/// The note every table with `~` cells carries.
pub const THIN_NOTE: &str = "~ marks a percentile that rests on fewer samples than it needs (p99.999 needs 100,000, p99.99 needs 10,000): it is shown, but it is the tail of a short run, not a measured p99.999.";

/// An empty table `id` (a probe's name for a probe's table) titled `title`, from
/// `seed`.
pub(crate) fn table(id: &'static str, title: &str, seed: &'static str) -> Table {
    Table {
        id,
        title: title.to_string(),
        seed,
        caption: String::new(),
        keys: Vec::new(),
        columns: Vec::new(),
        rows: Vec::new(),
        notes: Vec::new(),
        absent: None,
    }
}

/// Why a probe's table is empty: the manifest's reason, or that nothing ran.
pub(crate) fn absent_reason(r: &Results, probe: ProbeId) -> String {
    match r.missing(probe).into_iter().next() {
        Some((_, why)) => why,
        None if r.manifest.is_some() => format!("not measured: the survey has no {probe} step"),
        None => format!("not measured: no {probe} record here"),
    }
}

/// `items` (runs, rows) for `probe`'s table `t`; `None`, with `t` marked absent and
/// why, when there are none.
pub(crate) fn present<T>(
    r: &Results,
    t: &mut Table,
    probe: ProbeId,
    items: Vec<T>,
) -> Option<Vec<T>> {
    if items.is_empty() {
        t.absent = Some(absent_reason(r, probe));
        return None;
    }
    Some(items)
}

/// The runs of `probe` for its table `t` (see [`present`]).
pub(crate) fn runs_of<'a>(r: &'a Results, t: &mut Table, probe: ProbeId) -> Option<Vec<&'a Run>> {
    present(r, t, probe, r.of(probe).collect())
}

/// Whether there are several `runs`: then `t` gets a first key column, the
/// configuration, and each row leads with its run's (see [`row_keys`]).
pub(crate) fn configuration_key(t: &mut Table, runs: &[&Run]) -> bool {
    let several = runs.len() > 1;
    if several {
        t.keys.push("configuration".into());
    }
    several
}

/// The start of a row's keys: its run's configuration, when there are `several`.
pub(crate) fn row_keys(several: bool, run: &Run) -> Vec<String> {
    if several {
        vec![run.config().to_string()]
    } else {
        Vec::new()
    }
}

/// How the record's threads were set up, in a few words.
pub(crate) fn setup_words(run: &Run) -> String {
    let r = &run.record;
    let policy = r
        .threads
        .first()
        .map(|t| t.config.policy.to_string())
        .or_else(|| r.policy_requested().map(|p| p.to_string()))
        .unwrap_or_else(|| "policy unknown".to_string());
    let mlock = if r.obtained.mlock {
        ", memory locked"
    } else {
        ""
    };
    format!("{policy}{mlock}")
}

pub(crate) fn refused_note(t: &mut Table, run: &Run) {
    for w in &run.record.warnings {
        if matches!(w.id, WarningId::PolicyRefused | WarningId::MlockRefused) {
            let note = format!("{}: {}", run.id, w.message);
            if !t.notes.contains(&note) {
                t.notes.push(note);
            }
        }
    }
}

// --- seed 000 Table 3 -----------------------------------------------------------

pub(crate) fn features(r: &Results) -> Table {
    let mut t = table("features", "OS real-time features", "seed 000 Table 3");
    t.caption = "The real-time features of this machine's OS, as `ictus doctor` found them, in the seed's letters: O available, N not available, R root (privilege) only, empty unknown.".to_string();
    t.keys = vec!["feature".into(), "seed 000 column".into()];
    t.columns = vec![Column::new("status"), Column::text("detail")];
    let Some(audit) = &r.audit else {
        t.absent = Some("not measured: no doctor.json here".to_string());
        return t;
    };
    for c in &audit.checks {
        let seed = match c.id {
            CheckId::Cpus => "Multi-processor; Processor affinity management",
            CheckId::RtPrivileges => "Process priority management; Access rights management",
            CheckId::RtThrottling => "Deactivation of the scheduler",
            CheckId::SchedDeadline => "Synchronization means/scheduling",
            CheckId::CpuShielding => "Shielding against processes",
            CheckId::IrqAffinity => "Shielding against interruptions",
            CheckId::Memory => "Protection against memory swap",
            _ => "—",
        };
        let status = match c.status {
            Status::Available => "O (available)",
            Status::Missing => "N (missing)",
            Status::NeedsPrivilege => "R (needs privilege)",
            Status::Unknown => "(unknown)",
        };
        t.rows.push(Row {
            keys: vec![c.title.clone(), seed.to_string()],
            cells: vec![Cell::text(status), Cell::text(c.detail.clone())],
        });
    }
    t.notes
        .push(format!("Audit verdict: {}", audit.verdict.summary));
    t
}

// --- seed 002 Table 1 -----------------------------------------------------------

pub(crate) fn thin(l: &LatencyResult, p: Percentile) -> bool {
    l.thin_percentiles.contains(&p)
}

pub(crate) fn pct_cell(l: &LatencyResult, p: Percentile) -> Cell {
    match l.summary.percentile(p) {
        Some(v) => {
            let v = v.as_u64() as f64;
            if thin(l, p) {
                Cell {
                    text: format!("~{}", format::ns(v)),
                    value: Some(v),
                    thin: true,
                }
            } else {
                Cell::ns(v)
            }
        }
        None => Cell::empty(),
    }
}

/// Rows in matrix order: class, then load (idle, each load, all).
pub(crate) fn matrix(r: &Results, probe: ProbeId) -> Vec<(Config, Result<&Run, String>)> {
    let mut rows: Vec<(Config, Result<&Run, String>)> =
        r.of(probe).map(|run| (run.config(), Ok(run))).collect();
    rows.extend(r.missing(probe).into_iter().map(|(c, why)| (c, Err(why))));
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

pub(crate) fn why_cells(why: String, n: usize) -> Vec<Cell> {
    let mut cells = vec![Cell::text(why)];
    cells.extend((1..n).map(|_| Cell::empty()));
    cells
}
