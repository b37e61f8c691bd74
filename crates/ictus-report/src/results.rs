//! Loading a results directory (or one record file) into [`Results`].
//!
//! A directory holds `survey.json` (the survey's [`Manifest`], optional), `doctor.json`
//! (the [`Audit`], optional) and one [`RunRecord`] per other `*.json` file. Every file
//! is checked: a broken, truncated or foreign file is an error naming it, never a
//! half-read report.
//!
//! ```no_run
//! let results = ictus_report::load(std::path::Path::new("ictus-results/vm-20260101T000000Z")).unwrap();
//! for run in &results.runs {
//!     println!("{}: {} in {}", run.file, run.record.probe, run.config());
//! }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use ictus_core::Nanos;
use ictus_core::time::DurationStyle;
use ictus_os::fs::{InputKind, Located};
use ictus_os::json::{self, JsonPath};
use ictus_os::sched::Policy;
use ictus_probe::doctor::Audit;
use ictus_probe::load::LoadKind;
use ictus_probe::provenance::Provenance;
use ictus_probe::record::RunRecord;
use ictus_probe::registry::ProbeId;
use ictus_probe::survey::{
    Class, DOCTOR_FILE, LoadCase, MANIFEST_FILE, MANIFEST_SCHEMA, MANIFEST_VERSION, Manifest, Step,
    StepStatus,
};

use crate::ReportError;

/// Everything one survey (or one record) holds, ready to render.
#[derive(Clone, Debug)]
pub struct Results {
    /// The directory or file it was read from.
    pub source: PathBuf,
    /// The survey's manifest, when the directory has one.
    pub manifest: Option<Manifest>,
    /// The platform audit, when the directory has one.
    pub audit: Option<Audit>,
    /// Every record, in file-name order.
    pub runs: Vec<Run>,
}

/// One record with the configuration it ran in.
#[derive(Clone, Debug)]
pub struct Run {
    /// The file name within the directory (`timer-rt-pinned-idle.json`).
    pub file: String,
    /// The step id: the manifest's, or the file stem.
    pub id: String,
    /// Scheduling class: the manifest's, or read from the record.
    pub class: Class,
    /// Load: the manifest's, or read from the record.
    pub load: LoadCase,
    /// The record.
    pub record: RunRecord,
}

impl Run {
    /// The configuration, for people: `real-time pinned, idle`.
    pub fn config(&self) -> Config {
        Config {
            class: self.class,
            load: self.load.clone(),
        }
    }
}

/// A cell of the survey matrix: scheduling class and load.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Config {
    /// Scheduling class.
    pub class: Class,
    /// Load.
    pub load: LoadCase,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", class_name(self.class), load_name(&self.load))
    }
}

/// `normal, unpinned`, `real-time, pinned`, `shielded`.
pub fn class_name(class: Class) -> &'static str {
    match class {
        Class::NormalUnpinned => "normal, unpinned",
        Class::RtPinned => "real-time, pinned",
        Class::Shielded => "shielded",
    }
}

/// `idle`, `cpu load`, `all loads`.
pub fn load_name(load: &LoadCase) -> String {
    match load {
        LoadCase::Idle => "idle".to_string(),
        LoadCase::One(kind) => format!("{kind} load"),
        LoadCase::All => "all loads".to_string(),
    }
}

impl Results {
    /// The provenance of the whole: the manifest's, else the first record's.
    pub fn provenance(&self) -> Option<&Provenance> {
        self.manifest
            .as_ref()
            .map(|m| &m.provenance)
            .or_else(|| self.runs.first().map(|r| &r.record.provenance))
    }

    /// False when the survey or any record was stopped early.
    pub fn complete(&self) -> bool {
        self.manifest.as_ref().is_none_or(|m| m.complete)
            && self.runs.iter().all(|r| r.record.complete)
    }

    /// The records of one probe.
    pub fn of(&self, probe: ProbeId) -> impl Iterator<Item = &Run> + '_ {
        self.runs.iter().filter(move |r| r.record.probe == probe)
    }

    /// The manifest's steps of one probe that have no record here, with why.
    pub fn missing(&self, probe: ProbeId) -> Vec<(Config, String)> {
        let Some(m) = &self.manifest else {
            return Vec::new();
        };
        m.steps
            .iter()
            .filter(|s| s.probe == probe)
            .filter(|s| !self.runs.iter().any(|r| r.id == s.id))
            .map(|s| {
                (
                    Config {
                        class: s.class,
                        load: s.load.clone(),
                    },
                    step_reason(s),
                )
            })
            .collect()
    }

    /// A short name for this run in comparisons: host and start time.
    pub fn label(&self) -> String {
        match self.provenance() {
            Some(p) => format!("{} {}", p.hostname, short_time(&p.start_time)),
            None => self.source.display().to_string(),
        }
    }
}

/// `2026-11-22 18:34` from an RFC 3339 time.
pub(crate) fn short_time(t: &str) -> String {
    let t = t.replace('T', " ");
    t.chars().take(16).collect()
}

/// The two lines a report prints of a record's provenance: the host (name, kernel and
/// preemption model, CPUs, virtualisation), then when and with which ictus it was
/// measured, left open so that a caller may add to it before the closing period.
pub(crate) fn provenance_lines(p: &Provenance) -> [String; 2] {
    let preempt = format!(
        "preemption {}{}",
        p.preemption.model,
        if p.preemption.dynamic {
            " (dynamic)"
        } else {
            ""
        }
    );
    let machine = format!(
        "{} · Linux {} ({preempt}) · {}, {} CPUs{} · {}",
        p.hostname,
        p.kernel_release,
        p.cpu_model.as_deref().unwrap_or("unknown CPU"),
        p.cpu_count,
        match p.smt {
            Some(true) => ", SMT on",
            Some(false) => ", SMT off",
            None => "",
        },
        p.virtualization
            .as_deref()
            .map_or("bare metal".to_string(), |v| format!(
                "virtual machine: {v}"
            )),
    );
    let when = format!(
        "Measured {} to {} UTC with ictus {}",
        short_time(&p.start_time),
        p.end_time.as_deref().map_or("?".to_string(), short_time),
        p.tool_version
    );
    [machine, when]
}

/// Why a step has no record: `skipped: shield not available`.
pub(crate) fn step_reason(s: &Step) -> String {
    let why = s.reason.as_deref().unwrap_or("no reason given");
    match s.status {
        StepStatus::Done => format!(
            "missing: {} not found",
            s.file.as_deref().unwrap_or("record")
        ),
        StepStatus::Skipped => format!("skipped: {why}"),
        StepStatus::Failed => format!("failed: {why}"),
        StepStatus::NotRun => "not run: the survey was stopped".to_string(),
    }
}

/// Reads a results directory, or a single record file.
pub fn load(path: &Path) -> Result<Results, ReportError> {
    let meta = std::fs::metadata(path).map_err(|source| ReportError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if !meta.is_dir() {
        let record = RunRecord::load(path)?;
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Results {
            source: path.to_path_buf(),
            manifest: None,
            audit: None,
            runs: vec![run_of(file, record, None)],
        });
    }
    let entries = std::fs::read_dir(path).map_err(|source| ReportError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ReportError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && entry.path().is_file() {
            files.push(name);
        }
    }
    files.sort();
    let manifest = if files.iter().any(|f| f == MANIFEST_FILE) {
        Some(load_manifest(&path.join(MANIFEST_FILE))?)
    } else {
        None
    };
    let audit = if files.iter().any(|f| f == DOCTOR_FILE) {
        Some(load_json::<Audit>(&path.join(DOCTOR_FILE))?)
    } else {
        None
    };
    let mut runs = Vec::new();
    for name in files
        .iter()
        .filter(|f| *f != MANIFEST_FILE && *f != DOCTOR_FILE)
    {
        let record = RunRecord::load(&path.join(name))?;
        let step = manifest.as_ref().and_then(|m| {
            m.steps
                .iter()
                .find(|s| s.file.as_deref() == Some(name.as_str()))
        });
        runs.push(run_of(name.clone(), record, step));
    }
    if runs.is_empty() && manifest.is_none() && audit.is_none() {
        return Err(ReportError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(Results {
        source: path.to_path_buf(),
        manifest,
        audit,
        runs,
    })
}

fn run_of(file: String, record: RunRecord, step: Option<&Step>) -> Run {
    match step {
        Some(s) => Run {
            file,
            id: s.id.clone(),
            class: s.class,
            load: s.load.clone(),
            record,
        },
        None => Run {
            id: file.trim_end_matches(".json").to_string(),
            class: class_of(&record),
            load: load_of(&record),
            file,
            record,
        },
    }
}

/// The class a record ran in, read from its threads or parameters.
fn class_of(r: &RunRecord) -> Class {
    let policy: Option<Policy> = r
        .threads
        .first()
        .map(|t| t.config.policy)
        .or_else(|| r.policy_requested());
    match policy {
        Some(Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. }) => Class::RtPinned,
        _ => Class::NormalUnpinned,
    }
}

/// The load a record ran under, read from its environment.
fn load_of(r: &RunRecord) -> LoadCase {
    let mut kinds: Vec<LoadKind> = r.environment.loads.iter().map(|l| l.kind).collect();
    kinds.sort();
    kinds.dedup();
    // A probe may load the CPUs it measures itself (a probe's --cpu-load).
    let own = ictus_probe::own_load::own_load(r);
    match kinds.as_slice() {
        [] => own.map_or(LoadCase::Idle, LoadCase::One),
        [k] => LoadCase::One(*k),
        _ => LoadCase::All,
    }
}

fn load_manifest(path: &Path) -> Result<Manifest, ReportError> {
    let name = path.display().to_string();
    let text = ictus_os::fs::read_input(path, InputKind::Manifest.max_bytes())?;
    let value: serde_json::Value = parse_json(&text, &name)?;
    check_schema(&text, &name, &value, "schema", MANIFEST_SCHEMA)?;
    let Some(version) = value.get("schema_version").and_then(|v| v.as_u64()) else {
        let field = JsonPath::root().key("schema_version");
        let message = format!(
            "{field}: expected the whole number {MANIFEST_VERSION}, found {}",
            value
                .get("schema_version")
                .map_or("nothing".to_string(), |v| v.to_string())
        );
        return Err(ReportError::Invalid {
            at: Located::new(name, json::place(&text, &field), message),
            field,
        });
    };
    check_version(&text, &name, "schema_version", version, MANIFEST_VERSION)?;
    parse_json(&text, &name)
}

/// Refuses `found`, the version at `key`, unless it is `supported`, placed at that
/// key's value.
pub(crate) fn check_version(
    text: &str,
    name: &str,
    key: &str,
    found: u64,
    supported: u32,
) -> Result<(), ReportError> {
    if found == u64::from(supported) {
        return Ok(());
    }
    Err(ReportError::Version {
        at: Located::new(
            name,
            json::place(text, &JsonPath::root().key(key)),
            format!(
                "version {found} is not supported by this ictus (it reads version \
                 {supported}); use the ictus version that wrote it"
            ),
        ),
        found,
        supported,
    })
}

/// Refuses `value` unless its `key` is `expected`, placed at that key's value (or at
/// the top when it has none).
pub(crate) fn check_schema(
    text: &str,
    name: &str,
    value: &serde_json::Value,
    key: &str,
    expected: &'static str,
) -> Result<(), ReportError> {
    let found = value.get(key).and_then(|s| s.as_str()).unwrap_or("");
    if found == expected {
        return Ok(());
    }
    Err(ReportError::Schema {
        at: Located::new(
            name,
            json::place(text, &JsonPath::root().key(key)),
            format!("schema '{found}', expected '{expected}'"),
        ),
        found: found.to_string(),
        expected,
    })
}

fn load_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ReportError> {
    let text = ictus_os::fs::read_input(path, InputKind::Manifest.max_bytes())?;
    parse_json(&text, &path.display().to_string())
}

/// `text` (of the file `name`) as a `T`: a syntax error at serde_json's place, a value
/// of the wrong type at its start with its path.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    name: &str,
) -> Result<T, ReportError> {
    json::from_str(text).map_err(|e| ReportError::Json(Located::json(name, e)))
}

/// The header of the table of survey steps.
pub(crate) const STEP_HEADER: [&str; 5] = ["step", "probe", "class", "load", "outcome"];

/// The columns of the "why the misses" table.
pub(crate) const WHY_HEADER: [&str; 5] = [
    "step",
    "configuration",
    "CPU latency QoS",
    "misses explained",
    "by the cause that accounts for most",
];

/// How to read the "why the misses" section (both reports).
pub(crate) const WHY_NOTE: &str = "Each miss (a timer release one period or more late, a loop \
    step completing after its period, periods missed entirely) is explained from what moved \
    on its CPU in its window, read by a sampler on another CPU: interrupts and softirqs on \
    that CPU, another thread that ran while the measuring thread waited to run (named), RT \
    throttling, the hypervisor's steal, page faults, an exit from a deep idle state, each \
    with the time it accounts for of the lateness; the rest, which nothing in the guest \
    accounts for, is a cause of its own (on a virtual machine a host stall: the vCPU did \
    not run). Only a cause that accounts for a fifth of a miss is named as its reason. \
    Each miss counts once, under the cause that accounts for most of it, with the total \
    time each cause cost where it was a reason (\"unexplained\", in older records, means \
    nothing visible moved on that CPU). The records hold every explained miss with all \
    its causes, their times and sources.";

/// One row per run that explained its misses: step, configuration, QoS, count and
/// the breakdown (`None`: no run explained any).
pub(crate) fn why_rows(r: &Results) -> Option<Vec<Vec<String>>> {
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .filter_map(|run| {
            let e = run.record.explanation.as_ref()?;
            let breakdown = if e.breakdown.by_cause.is_empty() {
                "-".to_string()
            } else {
                let mut b = e
                    .breakdown
                    .by_cause
                    .iter()
                    .map(|(phrase, n)| match e.breakdown.time_of(phrase) {
                        Some(t) if t > 0 => format!(
                            "{n} {phrase} ({})",
                            Nanos::new(t).show(DurationStyle::Significant)
                        ),
                        _ => format!("{n} {phrase}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                if e.breakdown.lateness_ns > 0 && !e.breakdown.time_by_cause.is_empty() {
                    b.push_str(&format!(
                        "; counters here account for {:.0} % of {}",
                        100.0 * e.breakdown.accounted_ns as f64 / e.breakdown.lateness_ns as f64,
                        Nanos::new(e.breakdown.lateness_ns).show(DurationStyle::Significant)
                    ));
                }
                b
            };
            Some(vec![
                run.id.clone(),
                run.config().to_string(),
                run.record
                    .obtained
                    .pm_qos
                    .as_ref()
                    .map_or("-".into(), |q| q.phrase()),
                format!(
                    "{}{}{}",
                    e.breakdown.events,
                    if e.breakdown.periods > e.breakdown.events {
                        format!(" ({} periods)", e.breakdown.periods)
                    } else {
                        String::new()
                    },
                    if e.breakdown.dropped > 0 {
                        format!(" (+{} not explained: ring full)", e.breakdown.dropped)
                    } else {
                        String::new()
                    }
                ),
                breakdown,
            ])
        })
        .collect();
    (!rows.is_empty()).then_some(rows)
}

/// One row per survey step (Markdown and HTML show the same): a step is "done" only
/// when the manifest says so and its record was loaded; otherwise the reason.
pub(crate) fn step_rows(r: &Results) -> Option<Vec<Vec<String>>> {
    let m = r.manifest.as_ref()?;
    Some(
        m.steps
            .iter()
            .map(|s| {
                let outcome = match s.status {
                    ictus_probe::survey::StepStatus::Done
                        if r.runs.iter().any(|x| x.id == s.id) =>
                    {
                        format!("done: {}", s.file.as_deref().unwrap_or(""))
                    }
                    _ => step_reason(s),
                };
                vec![
                    s.id.clone(),
                    s.probe.clone(),
                    class_name(s.class).to_string(),
                    load_name(&s.load),
                    outcome,
                ]
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_os::fs::InputError;
    use proptest::strategy::Strategy as _;

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("r.json");
        ictus_os::testing::mkfifo(&fifo).unwrap();
        for sut in [fifo.as_path(), Path::new("/dev/zero")] {
            let err = load(sut).unwrap_err();
            assert!(
                matches!(
                    err,
                    ReportError::Record(ictus_probe::record::RecordError::Input(
                        InputError::NotRegular { .. }
                    ))
                ),
                "{err:?}"
            );
        }
    }

    #[test]
    fn a_manifest_version_of_another_type_is_refused_with_the_expected_type() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            format!(r#"{{"schema": "{MANIFEST_SCHEMA}", "schema_version": "1"}}"#),
        )
        .unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(
                "survey.json:1:46: schema_version: expected the whole number 1, found \"1\""
            ),
            "{err}"
        );
    }

    /// The place of a refusal of a file's content.
    fn place_of(err: &ReportError) -> Option<(usize, usize)> {
        err.place().map(|p| (p.line, p.column))
    }

    /// The JSON value that starts at `line`:`column` of `text`.
    fn value_at(text: &str, line: usize, column: usize) -> Option<serde_json::Value> {
        json::value_at(text, json::Place { line, column })
    }

    fn fixture(name: &str) -> serde_json::Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/survey-a")
            .join(name);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_huge_cpu_list_in_a_record_is_refused_at_the_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = fixture("loop-rt-pinned-idle.json");
        v["provenance"]["online_cpus"] = serde_json::json!([0, 1, 18446744073709551615u64]);
        let path = dir.path().join("r.json");
        let text = serde_json::to_string_pretty(&v).unwrap();
        std::fs::write(&path, &text).unwrap();
        let err = load(&path).unwrap_err();
        let (line, column) = place_of(&err).unwrap();
        assert_eq!(
            value_at(&text, line, column),
            Some(serde_json::json!(18446744073709551615u64))
        );
        assert!(
            err.to_string()
                .contains("provenance.online_cpus[2]: expected a CPU number"),
            "{err}"
        );
    }

    #[test]
    fn a_manifest_or_audit_value_of_the_wrong_type_is_placed_at_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = fixture(MANIFEST_FILE);
        m["steps"][0]["probe"] = serde_json::json!(5);
        let text = serde_json::to_string_pretty(&m).unwrap();
        std::fs::write(dir.path().join(MANIFEST_FILE), &text).unwrap();
        let err = load(dir.path()).unwrap_err();
        let (line, column) = place_of(&err).unwrap();
        assert_eq!(
            value_at(&text, line, column),
            Some(serde_json::json!(5)),
            "{err}"
        );
        assert!(
            err.to_string().contains("steps[0].probe: invalid type"),
            "{err}"
        );
    }

    /// Pointers into the record fixture where a value of another kind may be refused.
    const POINTERS: &[&str] = &[
        "",
        "/schema",
        "/schema_version",
        "/probe",
        "/complete",
        "/provenance/cpu_count",
        "/provenance/online_cpus",
        "/measurements/0/metrics",
        "/measurements/0/labels",
        "/measurements/0/latency/summary/mean_ns",
        "/measurements/0/latency/summary/stddev_ns",
        "/environment",
        "/threads",
        "/merged",
        "/obtained",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_as_a_record_never_panic_and_errors_have_a_place(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.json");
            std::fs::write(&path, &bytes).unwrap();
            use ictus_probe::record::RecordError;
            match load(&path) {
                Err(ReportError::Record(RecordError::Input(InputError::NotUtf8 { line, column, .. }))) => {
                    proptest::prop_assert!(line >= 1 && column >= 1);
                }
                Err(err) => {
                    // Text: every refusal of its content is placed inside it.
                    let text = String::from_utf8(bytes).unwrap();
                    let (line, column) = place_of(&err).unwrap();
                    proptest::prop_assert!(json::offset_of(&text, json::Place { line, column }).is_some(), "{}", err);
                    if serde_json::from_str::<serde_json::Value>(&text).is_ok() {
                        proptest::prop_assert!(value_at(&text, line, column).is_some(), "{}", err);
                    }
                }
                Ok(_) => {}
            }
        }

        #[test]
        fn every_refusal_of_a_record_in_a_file_points_at_a_value(
            at in proptest::sample::select(POINTERS),
            value in proptest::prop_oneof![
                proptest::strategy::Just(serde_json::Value::Null),
                proptest::prelude::any::<i64>().prop_map(serde_json::Value::from),
                proptest::prelude::any::<u64>().prop_map(serde_json::Value::from),
                proptest::prelude::any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
                ".{0,6}".prop_map(serde_json::Value::from),
                proptest::collection::vec(proptest::prelude::any::<u64>(), 0..3).prop_map(serde_json::Value::from),
            ],
        ) {
            let mut v = fixture("loop-rt-pinned-idle.json");
            *v.pointer_mut(at).unwrap() = value.clone();
            let text = serde_json::to_string_pretty(&v).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.json");
            std::fs::write(&path, &text).unwrap();
            if let Err(err) = load(&path) {
                let (line, column) = place_of(&err).unwrap();
                proptest::prop_assert!(value_at(&text, line, column).is_some(), "{}={}: {}", at, value, err);
                proptest::prop_assert!(err.to_string().contains(&format!("r.json:{line}:{column}: ")), "{}", err);
            }
        }
    }
}
