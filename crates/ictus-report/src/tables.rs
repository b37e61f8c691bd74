//! The seeds' tables, reproduced for one machine, as data: [`tables`] builds them from
//! [`Results`]; the Markdown and HTML renderers and `compare` only lay them out.
//!
//! ```no_run
//! let results = ictus_report::load(std::path::Path::new("ictus-results/vm-20260101T000000Z")).unwrap();
//! for table in ictus_report::tables::tables(&results) {
//!     println!("{} ({}): {} rows", table.title, table.seed, table.rows.len());
//! }
//! ```

use ictus_probe::record::WarningId;
use std::collections::{BTreeMap, BTreeSet};

use ictus_core::Percentile;
use ictus_probe::doctor::{CheckId, Status};
use ictus_probe::jitter::{JitterParams, Routine};
use ictus_probe::r#loop::LoopParams;
use ictus_probe::record::{LatencyResult, Measurement};
use ictus_probe::survey::{Class, LoadCase};
use ictus_probe::throughput::Mode;
use ictus_probe::view::Point;
use ictus_probe::view::compute::Step;
use ictus_probe::view::r#loop::Trial;
use ictus_probe::view::memlat::{Access, CHASE, Cache, STRIDED_READ, STRIDED_WRITE, Strided};
use ictus_probe::view::pingpong::Handoff;
use ictus_probe::view::rendezvous::{CachelineRoundTrip, Rendezvous};
use ictus_probe::view::throughput::{Memcpy, Transfer};
use ictus_probe::{memlat, timer};

use crate::format;
use crate::results::{Config, Results, Run, class_name, load_name};

/// One table: what it shows, its columns and rows, and its notes.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Stable id, also the HTML anchor: `timer`, `memlat`, ...
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
    fn new(name: impl Into<String>) -> Self {
        Column {
            name: name.into(),
            compared: true,
        }
    }
    fn text(name: impl Into<String>) -> Self {
        Column {
            name: name.into(),
            compared: false,
        }
    }
}

/// A table as the Markdown and HTML renderers write it: the header row, which
/// columns hold numbers (right-aligned), and the rows, all as text.
pub(crate) struct Grid {
    pub(crate) header: Vec<String>,
    pub(crate) numeric: Vec<bool>,
    pub(crate) rows: Vec<Vec<String>>,
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
    fn text(text: impl Into<String>) -> Self {
        Cell {
            text: text.into(),
            value: None,
            thin: false,
        }
    }
    fn num(text: String, value: f64) -> Self {
        Cell {
            text,
            value: Some(value),
            thin: false,
        }
    }
    fn ns(v: f64) -> Self {
        Cell::num(format::ns(v), v)
    }
    fn empty() -> Self {
        Cell::text("—")
    }
}

/// The note every table with `~` cells carries.
pub const THIN_NOTE: &str = "~ marks a percentile that rests on fewer samples than it needs (p99.999 needs 100,000, p99.99 needs 10,000): it is shown, but it is the tail of a short run, not a measured p99.999.";

/// Every table, in the seeds' order.
pub fn tables(r: &Results) -> Vec<Table> {
    vec![
        features(r),
        memlat(r),
        rendezvous(r),
        compute(r),
        timer(r),
        jitter(r),
        pingpong(r),
        throughput(r),
        loop_trials(r),
    ]
}

fn table(id: &'static str, title: &str, seed: &'static str) -> Table {
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
fn absent_reason(r: &Results, probe: &str) -> String {
    match r.missing(probe).into_iter().next() {
        Some((_, why)) => why,
        None if r.manifest.is_some() => format!("not measured: the survey has no {probe} step"),
        None => format!("not measured: no {probe} record here"),
    }
}

/// `items` (runs, rows) for `probe`'s table `t`; `None`, with `t` marked absent and
/// why, when there are none.
fn present<T>(r: &Results, t: &mut Table, probe: &str, items: Vec<T>) -> Option<Vec<T>> {
    if items.is_empty() {
        t.absent = Some(absent_reason(r, probe));
        return None;
    }
    Some(items)
}

/// The runs of `probe` for its table `t` (see [`present`]).
fn runs_of<'a>(r: &'a Results, t: &mut Table, probe: &'a str) -> Option<Vec<&'a Run>> {
    present(r, t, probe, r.of(probe).collect())
}

/// Whether there are several `runs`: then `t` gets a first key column, the
/// configuration, and each row leads with its run's (see [`row_keys`]).
fn configuration_key(t: &mut Table, runs: &[&Run]) -> bool {
    let several = runs.len() > 1;
    if several {
        t.keys.push("configuration".into());
    }
    several
}

/// The start of a row's keys: its run's configuration, when there are `several`.
fn row_keys(several: bool, run: &Run) -> Vec<String> {
    if several {
        vec![run.config().to_string()]
    } else {
        Vec::new()
    }
}

/// How the record's threads were set up, in a few words.
fn setup_words(run: &Run) -> String {
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

fn refused_note(t: &mut Table, run: &Run) {
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

fn features(r: &Results) -> Table {
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

// --- seed 000 Table 5 -----------------------------------------------------------

/// The data caches a memlat record lists, smallest first (`L1d`, `L2`, `L3`).
pub(crate) fn caches(run: &Run) -> Vec<(String, u64)> {
    let mut c: Vec<(String, u64)> = run
        .record
        .measurements
        .iter()
        .filter_map(|m| m.read::<Cache>())
        .filter(|c| c.labels.cache != "L1i")
        .map(|c| (c.labels.cache, c.labels.cache_bytes))
        .collect();
    c.sort_by_key(|(_, size)| *size);
    c
}

fn memlat(r: &Results) -> Table {
    let mut t = table("memlat", "Memory access time by stride", "seed 000 Table 5");
    let Some(runs) = runs_of(r, &mut t, "memlat") else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys
        .extend(["working set".to_string(), "fits in".to_string()]);
    // Columns: the chase, then reads and writes by stride (the seed's "space").
    let mut strides = BTreeSet::new();
    for run in &runs {
        for m in &run.record.measurements {
            if let Some(s) = m.read::<Strided>().and_then(|p| p.labels.stride_bytes) {
                strides.insert(s);
            }
        }
    }
    let mut kinds = vec![(CHASE, None)];
    t.columns.push(Column::new("random chase, per load"));
    for (kind, verb) in [(STRIDED_READ, "read"), (STRIDED_WRITE, "write")] {
        for &s in &strides {
            kinds.push((kind, Some(s)));
            t.columns.push(Column::new(format!("{verb}, space {s} B")));
        }
    }
    let mut repeat = None;
    for run in &runs {
        repeat = run
            .record
            .parameters_as::<memlat::ParamsRecord>()
            .map(|p| p.repeat);
        let caches = caches(run);
        // The one-thread points: (name, labels, ns per access).
        let points: Vec<(&str, Access)> = run
            .record
            .measurements
            .iter()
            .filter_map(|m| Some((m.name.as_str(), Access::read(m)?)))
            .filter(|(_, a)| a.labels.threads == 1)
            .collect();
        let sizes: BTreeSet<usize> = points
            .iter()
            .map(|(_, a)| a.labels.working_set_bytes)
            .collect();
        for size in sizes {
            let fits = caches
                .iter()
                .find(|(_, c)| size as u64 <= *c)
                .map_or("memory".to_string(), |(n, _)| n.clone());
            let mut keys = row_keys(several, run);
            keys.extend([format::bytes(size as f64), fits]);
            let cells = kinds
                .iter()
                .map(|&(kind, stride)| {
                    let at = points.iter().find(|(name, a)| {
                        *name == kind
                            && a.labels.working_set_bytes == size
                            && a.labels.stride_bytes == stride
                    });
                    at.map_or(Cell::empty(), |(_, a)| Cell::ns(a.ns))
                })
                .collect();
            t.rows.push(Row { keys, cells });
        }
    }
    let cache_list: Vec<String> = runs
        .first()
        .map(|run| {
            caches(run)
                .iter()
                .map(|(n, s)| format!("{n} {}", format::bytes(*s as f64)))
                .collect()
        })
        .unwrap_or_default();
    t.caption = format!(
        "Average time per 64-bit access, one thread, no load ({}): reads and writes `space` bytes apart, as the seed's columns, and a dependent random chase, whose steps show the cache stages{}. Median of {} repetitions.",
        setup_words(runs[0]),
        if cache_list.is_empty() {
            String::new()
        } else {
            format!(" (the kernel reports {})", cache_list.join(", "))
        },
        repeat.map_or("the".to_string(), |n| n.to_string()),
    );
    t
}

// --- seed 000 Table 6 -----------------------------------------------------------

fn rendezvous(r: &Results) -> Table {
    let mut t = table(
        "rendezvous",
        "Rendezvous frequency by threads and spacing",
        "seed 000 Table 6",
    );
    let Some(runs) = runs_of(r, &mut t, "rendezvous") else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.extend([
        "threads".to_string(),
        "position of the flags".to_string(),
        "data".to_string(),
    ]);
    t.columns = vec![
        Column::new("frequency"),
        Column::new("per rendezvous"),
        Column::new("vs bare cache-line round trip"),
    ];
    let mut limit = None;
    for run in &runs {
        for m in &run.record.measurements {
            if let Some(c) = m.read::<CachelineRoundTrip>() {
                limit = Some(c.metrics.ns_per_round_trip);
            }
            let Some(p) = m.read::<Rendezvous>() else {
                continue;
            };
            let mut keys = row_keys(several, run);
            let payload = p.labels.payload_bytes;
            keys.extend([
                p.labels.threads.to_string(),
                p.labels.spacing,
                if payload == 0 {
                    "none".to_string()
                } else {
                    format!("{payload} B each way")
                },
            ]);
            let rate = p.metrics.rendezvous_per_s;
            let per = p.metrics.ns_per_rendezvous;
            let vs = p.metrics.vs_cacheline_limit;
            t.rows.push(Row {
                keys,
                cells: vec![
                    rate.map_or(Cell::empty(), |v| {
                        Cell::num(format!("{} kHz", format::sig3(v / 1e3)), v)
                    }),
                    per.map_or(Cell::empty(), Cell::ns),
                    vs.map_or(Cell::empty(), |v| Cell::num(format!("{v:.2}"), v)),
                ],
            });
        }
    }
    t.caption = format!(
        "Rendezvous per second by spinning on shared flags, without extra load ({}), by number of threads and the distance between their flags, as the seed measured; with and without 512 B exchanged each way (seed 000 Table 1a's payload).{}",
        setup_words(runs[0]),
        limit.map_or(String::new(), |l| format!(
            " The last column compares with the bare cache-line round trip between the two CPUs ({}), the hardware's limit.",
            format::ns(l)
        )),
    );
    t
}

// --- seed 000 Table 7 -----------------------------------------------------------

fn compute(r: &Results) -> Table {
    let mut t = table("compute", "Computing power", "seed 000 Table 7");
    let Some(runs) = runs_of(r, &mut t, "compute") else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.extend(["model".to_string(), "threads".to_string()]);
    t.columns = vec![
        Column::new("time per step"),
        Column::new("per module and step"),
        Column::new("speed-up"),
        Column::new("time reduction vs reference"),
    ];
    let mut reference = None;
    for run in &runs {
        if let Some(w) = run
            .record
            .warnings
            .iter()
            .find(|w| w.id == WarningId::Reference)
        {
            reference = Some(w.message.clone());
        }
        for p in run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Step>())
        {
            let mut keys = row_keys(several, run);
            keys.push(format!("{} modules", p.labels.modules));
            keys.push(p.labels.threads.to_string());
            let step = Some(p.metrics.ns_per_step);
            let module = Some(p.metrics.ns_per_module_step);
            let speedup = p.metrics.speedup;
            let reduction = match p.metrics.time_reduction_vs_reference {
                // The metric is reference time / our time; the seed's reduction is
                // 1 - our time / reference time.
                Some(x) if x > 0.0 => {
                    let red = 1.0 - 1.0 / x;
                    Cell::num(
                        format!("{:.0} % (speed ×{})", red * 100.0, format::sig3(x)),
                        red * 100.0,
                    )
                }
                _ => Cell::text(if p.labels.reference.is_some() {
                    "no such point in the reference"
                } else {
                    "no reference"
                }),
            };
            t.rows.push(Row {
                keys,
                cells: vec![
                    step.map_or(Cell::empty(), Cell::ns),
                    module.map_or(Cell::empty(), Cell::ns),
                    speedup.map_or(Cell::empty(), |v| Cell::num(format!("{v:.2}"), v)),
                    reduction,
                ],
            });
        }
    }
    t.caption = format!(
        "Time per step of a mass-interaction model (CORDIS-ANIMA chain) growing on one thread, then split over threads that meet twice a step ({}); the seed's measure is the time reduction against a reference machine.",
        setup_words(runs[0])
    );
    match reference {
        Some(msg) => t.notes.push(format!("Time reduction = 1 − this time / reference time, as the seed's; {msg}.")),
        None => t.notes.push("No reference record: `ictus compare REFERENCE THIS` sets another machine's survey beside this one, or `ictus probe compute --reference FILE` measures against a record.".to_string()),
    }
    t
}

// --- seed 002 Table 1 -----------------------------------------------------------

fn thin(l: &LatencyResult, p: Percentile) -> bool {
    l.thin_percentiles.contains(&p)
}

fn pct_cell(l: &LatencyResult, p: Percentile) -> Cell {
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
fn matrix<'a>(r: &'a Results, probe: &'a str) -> Vec<(Config, Result<&'a Run, String>)> {
    let mut rows: Vec<(Config, Result<&Run, String>)> =
        r.of(probe).map(|run| (run.config(), Ok(run))).collect();
    rows.extend(r.missing(probe).into_iter().map(|(c, why)| (c, Err(why))));
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

fn timer(r: &Results) -> Table {
    let mut t = table(
        "timer",
        "Wake-up latency by configuration and load",
        "seed 002 Table 1",
    );
    t.keys = vec!["configuration".into(), "load".into()];
    t.columns = vec![
        Column::new("samples"),
        Column::new("mean"),
        Column::new("99 %"),
        Column::new("99.999 %"),
        Column::new("max"),
        Column::new("missed periods"),
    ];
    let Some(rows) = present(r, &mut t, "timer", matrix(r, "timer")) else {
        return t;
    };
    let mut interval = None;
    for (config, run) in rows {
        let keys = vec![
            class_name(config.class).to_string(),
            load_name(&config.load),
        ];
        let cells = match run {
            Err(why) => why_cells(why, t.columns.len()),
            Ok(run) => {
                refused_note(&mut t, run);
                interval = interval.or(run
                    .record
                    .parameters_as::<timer::RecordedParams>()
                    .and_then(|p| p.interval_ns())
                    .map(|v| v as f64));
                match &run.record.merged {
                    None => why_cells("no latency in the record".into(), t.columns.len()),
                    Some(l) => {
                        let s = &l.summary;
                        vec![
                            Cell::num(format::count(s.count), s.count as f64),
                            s.mean_ns.map_or(Cell::empty(), Cell::ns),
                            pct_cell(l, Percentile::P99),
                            pct_cell(l, Percentile::P99999),
                            s.max_ns
                                .map_or(Cell::empty(), |v| Cell::ns(v.as_u64() as f64)),
                            Cell::num(format::count(l.missed), l.missed as f64),
                        ]
                    }
                }
            }
        };
        t.rows.push(Row { keys, cells });
    }
    t.caption = format!(
        "How late a thread wakes after its absolute deadline (`clock_nanosleep`, every {}), all measuring threads together, per scheduling class and background load: the seed's user latency, 99.999 % and max.",
        interval.map_or("period".to_string(), format::ns)
    );
    if t.rows.iter().any(|r| r.cells.iter().any(|c| c.thin)) {
        t.notes.push(THIN_NOTE.to_string());
    }
    t
}

fn why_cells(why: String, n: usize) -> Vec<Cell> {
    let mut cells = vec![Cell::text(why)];
    cells.extend((1..n).map(|_| Cell::empty()));
    cells
}

// --- seed 002 Table 2 -----------------------------------------------------------

fn jitter(r: &Results) -> Table {
    let mut t = table(
        "jitter",
        "Execution-time variation by priority and load",
        "seed 002 Table 2",
    );
    let Some(rows) = present(r, &mut t, "jitter", matrix(r, "jitter")) else {
        return t;
    };
    // Tmin: the shortest run among all configurations, as the seed defines it.
    let tmin = r
        .of("jitter")
        .filter_map(|run| run.record.merged.as_ref()?.summary.min_ns)
        .map(|v| v.as_u64() as f64)
        .fold(f64::INFINITY, f64::min);
    let classes: BTreeSet<Class> = rows.iter().map(|(c, _)| c.class).collect();
    let loads: BTreeSet<LoadCase> = rows.iter().map(|(c, _)| c.load.clone()).collect();
    t.keys = vec!["load".into()];
    t.columns = classes
        .iter()
        .map(|c| {
            Column::new(match c {
                Class::NormalUnpinned => "normal priority (unpinned)",
                Class::RtPinned => "real-time priority (pinned)",
                Class::Shielded => "shielded (RT0)",
            })
        })
        .collect();
    for load in &loads {
        let cells = classes
            .iter()
            .map(|class| {
                match rows
                    .iter()
                    .find(|(c, _)| c.class == *class && &c.load == load)
                {
                    None => Cell::text("not in the survey"),
                    Some((_, Err(why))) => Cell::text(why.clone()),
                    Some((_, Ok(run))) => {
                        refused_note(&mut t, run);
                        match run.record.merged.as_ref().and_then(|l| l.summary.max_ns) {
                            Some(max) => {
                                let spread = max.as_u64() as f64 - tmin;
                                Cell::num(
                                    format!(
                                        "{} ({} %)",
                                        format::ns(spread),
                                        format::sig3(100.0 * spread / tmin)
                                    ),
                                    spread,
                                )
                            }
                            None => Cell::empty(),
                        }
                    }
                }
            })
            .collect();
        t.rows.push(Row {
            keys: vec![load_name(load)],
            cells,
        });
    }
    let params = r
        .of("jitter")
        .next()
        .and_then(|run| run.record.parameters_as::<JitterParams>());
    let routine = match params.as_ref().map(|p| p.routine) {
        Some(Routine::Divisions { divisions }) => {
            format!("{} integer divisions", format::count(divisions))
        }
        Some(Routine::Synchronised { .. }) => "the synchronised routine".to_string(),
        None => "the routine".to_string(),
    };
    let runs = params.map_or(String::new(), |p| {
        format!(", {} runs per configuration", format::count(p.runs))
    });
    t.caption = format!(
        "The longest run of {routine} minus Tmin, and that as a share of Tmin, per scheduling priority and load{runs}. Tmin = {}, the shortest run of all configurations, as the seed defines it.",
        format::ns(tmin)
    );
    t
}

// --- seed 001 Table 3 -----------------------------------------------------------

fn pingpong(r: &Results) -> Table {
    let mut t = table(
        "pingpong",
        "Context switch time with and without CPU load",
        "seed 001 Table 3",
    );
    let missing = r.missing("pingpong");
    let Some(runs) = runs_of(r, &mut t, "pingpong") else {
        return t;
    };
    // Rows: class x primitive x placement; columns: loads.
    let mut cells: BTreeMap<(Class, String), BTreeMap<LoadCase, Cell>> = BTreeMap::new();
    let mut loads = BTreeSet::new();
    for run in &runs {
        refused_note(&mut t, run);
        for (m, p) in run
            .record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<Handoff>()?)))
        {
            let load = if p.labels.cpu_load {
                LoadCase::One(ictus_probe::load::LoadKind::Cpu)
            } else {
                run.load.clone()
            };
            loads.insert(load.clone());
            let what = format!("{}, {}", p.labels.primitive, p.labels.placement);
            let cell = match &m.latency {
                Some(l) => match (l.summary.mean_ns, l.summary.stddev_ns) {
                    (Some(mean), Some(sd)) => Cell::num(
                        format!("{} (SD={})", format::ns(mean), format::ns(sd)),
                        mean,
                    ),
                    _ => Cell::empty(),
                },
                None => Cell::empty(),
            };
            cells
                .entry((run.class, what))
                .or_default()
                .insert(load, cell);
        }
    }
    for (c, _) in &missing {
        loads.insert(c.load.clone());
    }
    t.keys = vec!["configuration".into(), "primitive, placement".into()];
    t.columns = loads
        .iter()
        .map(|l| {
            Column::new(match l {
                LoadCase::Idle => "no load".to_string(),
                other => load_name(other),
            })
        })
        .collect();
    for ((class, what), by_load) in &cells {
        t.rows.push(Row {
            keys: vec![class_name(*class).to_string(), what.clone()],
            cells: loads
                .iter()
                .map(|l| {
                    by_load.get(l).cloned().unwrap_or_else(|| {
                        missing
                            .iter()
                            .find(|(c, _)| c.class == *class && &c.load == l)
                            .map_or(Cell::text("not in the survey"), |(_, why)| {
                                Cell::text(why.clone())
                            })
                    })
                })
                .collect(),
        });
    }
    t.caption = "One-way hand-off time between two threads (one wakes the other and the kernel switches to it), mean and standard deviation, as the seed's context switch time; CPU load is a busy thread on each measured CPU. Futex hand-offs are what semaphores and mutexes use; same-cpu is a true context switch, cross-cpu a wake-up on another CPU.".to_string();
    t
}

// --- seed 004 Figures 6 and 7 ---------------------------------------------------

fn throughput(r: &Results) -> Table {
    let mut t = table(
        "throughput",
        "Port throughput by payload",
        "seed 004 Figures 6 and 7",
    );
    let Some(runs) = runs_of(r, &mut t, "throughput") else {
        return t;
    };
    let mut series: Vec<String> = Vec::new();
    let mut points: BTreeMap<usize, BTreeMap<String, f64>> = BTreeMap::new();
    let mut mode = None;
    for run in &runs {
        for m in &run.record.measurements {
            let Some((name, size, rate)) = rate_point(m) else {
                continue;
            };
            if let Some(p) = m.read::<Transfer>() {
                mode = mode.or(Some(p.labels.mode));
            }
            if !series.contains(&name) {
                series.push(name.clone());
            }
            points.entry(size).or_default().insert(name, rate);
        }
    }
    // memcpy last: it is the bound, not a transport.
    series.sort_by_key(|s| s.starts_with("memcpy"));
    t.keys = vec!["payload".into()];
    t.columns = series.iter().map(|s| Column::new(s.clone())).collect();
    for (size, by) in &points {
        t.rows.push(Row {
            keys: vec![format::bytes(*size as f64)],
            cells: series
                .iter()
                .map(|s| {
                    by.get(s)
                        .map_or(Cell::empty(), |&v| Cell::num(format::mb_per_s(v), v))
                })
                .collect(),
        });
    }
    t.caption = format!(
        "Payload bytes per second from one thread to another by payload size, as seed 004's port test ({} mode: {}), with a plain memcpy on one CPU as the bound; {}.",
        mode.map_or("sync", Mode::name),
        if mode == Some(Mode::Stream) {
            "the sender waits only when the transport is full"
        } else {
            "each message is acknowledged before the next is sent"
        },
        setup_words(runs[0])
    );
    t
}

/// A throughput record's transfer or memcpy point: its series (`spsc, cross-cpu`,
/// `memcpy (one CPU)`), payload and bytes per second.
pub(crate) fn rate_point(m: &Measurement) -> Option<(String, usize, f64)> {
    if let Some(p) = m.read::<Transfer>() {
        let name = format!("{}, {}", p.labels.transport, p.labels.placement);
        return Some((name, p.labels.payload_bytes, p.metrics.bytes_per_s));
    }
    let p = m.read::<Memcpy>()?;
    Some((
        "memcpy (one CPU)".to_string(),
        p.labels.payload_bytes,
        p.metrics.bytes_per_s,
    ))
}

// --- the loop (seed 000 §3.1) ---------------------------------------------------

fn loop_trials(r: &Results) -> Table {
    let mut t = table(
        "loop",
        "Fully synchronous loop: trials",
        "seed 000 §3.1 and Table 1",
    );
    let Some(runs) = runs_of(r, &mut t, "loop") else {
        return t;
    };
    let several = configuration_key(&mut t, &runs);
    t.keys.push("frequency".into());
    t.columns = vec![
        Column::new("period"),
        Column::new("steps"),
        Column::new("missed"),
        Column::new("worst step"),
        Column::new("least slack"),
        Column::text("outcome"),
    ];
    for run in &runs {
        let mut trials: Vec<Point<Trial>> = run
            .record
            .measurements
            .iter()
            .filter_map(|m| m.read::<Trial>())
            .collect();
        trials.sort_by(|a, b| a.labels.frequency_hz.total_cmp(&b.labels.frequency_hz));
        for p in trials {
            let mut keys = row_keys(several, run);
            keys.push(format::hz(p.labels.frequency_hz));
            let misses = p.metrics.misses;
            let steps = p.labels.steps;
            t.rows.push(Row {
                keys,
                cells: vec![
                    Cell::ns(p.labels.period_ns as f64),
                    Cell::num(format::count(steps), steps as f64),
                    Cell::num(format::count(misses as u64), misses),
                    p.metrics
                        .worst_completion_ns
                        .map_or(Cell::empty(), Cell::ns),
                    p.metrics.min_slack_ns.map_or(Cell::empty(), Cell::ns),
                    Cell::text(if p.metrics.held() { "held" } else { "missed" }),
                ],
            });
        }
    }
    let p = runs[0].record.parameters_as::<LoopParams>();
    t.caption = format!(
        "The loop of seed 000 Figure 1 (input, rendezvous, compute, rendezvous, output inside one period) on {} threads, a model of {} modules, {} B exchanged per rendezvous ({}), tried at rising frequencies until a step misses its deadline.",
        p.as_ref().map_or(0, |p| p.threads),
        p.as_ref().map_or(0, |p| p.modules),
        p.as_ref().map_or(0, |p| p.exchange_bytes),
        setup_words(runs[0]),
    );
    if let Some(h) = &runs[0].record.headline {
        t.notes.push(format!("The probe's conclusion: {h}."));
    }
    t
}
