//! [`RunRecord`]: the one result record every probe returns, versioned and written
//! with serde. The schema is documented in `docs/result-schema.md`.
//!
//! ```
//! use ictus_record::record::{LatencyResult, SCHEMA_VERSION};
//! use ictus_core::{LatencyHistogram, MissCounter, Nanos};
//! let mut h = LatencyHistogram::new();
//! h.record(Nanos::new(21_000));
//! let r = LatencyResult::from_histogram(&h, MissCounter::default());
//! assert_eq!(r.summary.count, 1);
//! assert_eq!(SCHEMA_VERSION, 1);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a test's counter that names temporary files"
)]

use std::collections::BTreeMap;

use ictus_core::cpulist::MAX_CPU;
use ictus_core::histogram::HistogramData;
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Percentile, Summary};
use ictus_os::fs::Located;
use ictus_os::json::{self, JsonError, JsonPath};
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;
use crate::registry::{ProbeId, RUN_RECORD};

/// The value of the `schema` field.
pub const SCHEMA_NAME: &str = "ictus.run-record";
/// The current schema version; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;
// From the registry, so a new probe is known to the records with no line here.
macro_rules! known_probes {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        /// Every `probe` a record may name: the probes (the registry's order), and
        /// `run` (a cyclic executive's).
        pub const KNOWN_PROBES: [&str; ProbeId::ALL.len() + 1] = [$($name,)* RUN_RECORD];
    };
}
crate::for_each_probe!(known_probes);
/// The largest figure a record may hold: every count, time, rate and size ictus
/// measures fits in 64 bits.
pub const MAX_FIGURE: f64 = u64::MAX as f64;

/// The result of one probe run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] at the time of writing.
    pub schema_version: u32,
    /// The probe's name: `timer`, ...
    pub probe: String,
    /// False when the run was stopped early (Ctrl-C): the figures cover what ran.
    pub complete: bool,
    /// Tool, host and time.
    pub provenance: Provenance,
    /// The parameters as asked for (probe-specific keys).
    pub parameters: serde_json::Value,
    /// The process-wide configuration obtained.
    pub obtained: Obtained,
    /// Environment shortfalls and refusals, each with advice.
    pub warnings: Vec<Warning>,
    /// What the machine did besides the probe during the run.
    pub environment: Environment,
    /// The answer in one line, for probes that give one (`loop`: "sustains 10 kHz
    /// on 2 cores ..."), else absent.
    pub headline: Option<String>,
    /// One result per measuring thread (probes that measure one latency per thread).
    pub threads: Vec<ThreadResult>,
    /// All threads' latencies merged, where the probe has per-thread latencies.
    pub merged: Option<LatencyResult>,
    /// The points of probes that sweep a parameter (working set, payload, model size,
    /// placement...): one entry per point.
    pub measurements: Vec<Measurement>,
    /// Every miss of the run explained (late releases beyond the threshold, missed
    /// periods), where the probe watched for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<ictus_explain::Explanation>,
}

/// One point of a probe's sweep: its coordinates, its scalar figures, and its latency
/// distribution where it has one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// What was measured at this point (`chase`, `strided-read`, `pipe`, ...).
    pub name: String,
    /// The point's coordinates, units in the key names (`working_set_bytes`,
    /// `payload_bytes`, `placement`, `threads`).
    pub labels: BTreeMap<String, serde_json::Value>,
    /// Scalar figures, units in the key names (`ns_per_access`, `bytes_per_s`,
    /// `messages_per_s`, `rendezvous_per_s`).
    pub metrics: BTreeMap<String, f64>,
    /// The latency (or duration) distribution of this point, where it has one.
    pub latency: Option<LatencyResult>,
}

impl Measurement {
    /// A point named `name` with no labels or figures yet.
    pub fn new(name: &str) -> Self {
        Measurement {
            name: name.to_string(),
            labels: BTreeMap::new(),
            metrics: BTreeMap::new(),
            latency: None,
        }
    }
    /// Adds a coordinate.
    pub fn label(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.labels.insert(key.to_string(), value.into());
        self
    }
    /// Adds a figure. A value that is not finite (a mean of no samples) is left out:
    /// an absent figure reads as "not measured", and JSON has no NaN.
    pub fn metric(mut self, key: &str, value: f64) -> Self {
        if value.is_finite() {
            self.metrics.insert(key.to_string(), value);
        }
        self
    }
    /// Sets the distribution.
    pub fn with_latency(mut self, latency: LatencyResult) -> Self {
        self.latency = Some(latency);
        self
    }
}

impl RunRecord {
    /// A record with the schema fields filled in.
    pub fn new(
        probe: &str,
        provenance: Provenance,
        parameters: serde_json::Value,
        obtained: Obtained,
    ) -> Self {
        RunRecord {
            schema: SCHEMA_NAME.to_string(),
            schema_version: SCHEMA_VERSION,
            probe: probe.to_string(),
            complete: false,
            provenance,
            parameters,
            obtained,
            warnings: Vec::new(),
            environment: Environment::default(),
            headline: None,
            threads: Vec::new(),
            merged: None,
            measurements: Vec::new(),
            explanation: None,
        }
    }
}

/// A shortfall or refusal, with what to do about it: one type for every crate.
pub use ictus_core::warning::{Warning, WarningId};

/// Process-wide settings obtained.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Obtained {
    /// Whether memory locking was asked for.
    pub mlock_requested: bool,
    /// Whether all memory is locked.
    pub mlock: bool,
    /// Bytes locked after setup (`VmLck`).
    pub locked_bytes: Option<u64>,
    /// The CPU latency QoS in force for the run (absent: a probe that does not hold
    /// it, or a record written before ictus held it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm_qos: Option<ictus_os::pm_qos::PmQosState>,
}

/// How one measuring thread was set up, read back after setup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadConfig {
    /// Kernel thread id.
    pub tid: i64,
    /// The CPU the thread was to be pinned to (absent when unpinned).
    pub pinned_cpu: Option<usize>,
    /// The affinity read back.
    pub affinity: CpuSet,
    /// The policy asked for.
    pub policy_requested: Policy,
    /// The policy read back.
    pub policy: Policy,
    /// The hybrid wait's margin, when that mode is used.
    pub hybrid_margin_ns: Option<u64>,
}

/// One thread's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadResult {
    /// Index of the thread (0-based).
    pub thread: usize,
    /// Its configuration.
    pub config: ThreadConfig,
    /// Its latency distribution.
    pub latency: LatencyResult,
}

/// A latency distribution with its miss accounting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyResult {
    /// Count, extremes, moments and percentiles.
    pub summary: Summary,
    /// 0-based index of the (first) max sample in its thread.
    pub max_index: Option<u64>,
    /// Periods missed entirely (skipped, not measured).
    pub missed: u64,
    /// Longest run of consecutive missed periods.
    pub longest_miss_run: u64,
    /// Percentiles that too few samples support (shown, but not to be trusted).
    pub thin_percentiles: Vec<Percentile>,
    /// Non-empty histogram buckets.
    pub histogram: HistogramData,
}

impl LatencyResult {
    /// Summarises a histogram and its misses.
    pub fn from_histogram(h: &LatencyHistogram, misses: MissCounter) -> Self {
        let summary = h.summary();
        LatencyResult {
            thin_percentiles: summary.thin_percentiles(),
            summary,
            max_index: h.max_index(),
            missed: misses.missed,
            longest_miss_run: misses.longest_run,
            histogram: h.data(),
        }
    }
}

/// What the machine did besides the probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Steal time during the run (hypervisor preemption of this guest).
    pub steal: Option<Steal>,
    /// The clock used and what a read of it costs.
    pub clock: Option<ClockCost>,
    /// The background loads that ran during the measurement, with what each achieved.
    pub loads: Vec<crate::load::LoadReport>,
}

/// Steal time over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Steal {
    /// All CPUs together.
    pub total_ns: u64,
    /// Per CPU.
    pub per_cpu: Vec<CpuSteal>,
    /// Share of the CPU time of all online CPUs over the run, 0 to 1.
    pub share: f64,
}

/// Steal time of one CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuSteal {
    /// CPU number.
    pub cpu: usize,
    /// Stolen time.
    pub steal_ns: u64,
}

/// The measured cost of a `CLOCK_MONOTONIC` read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockCost {
    /// The current clocksource (`tsc`, `kvm-clock`, ...).
    pub clocksource: Option<String>,
    /// `clock_getres(CLOCK_MONOTONIC)`.
    pub resolution_ns: Option<u64>,
    /// Back-to-back read differences.
    pub read_cost: Summary,
}

/// Why a record file could not be read. Every error about the content names the file,
/// and the line and column (in characters, from 1) of the value that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read: missing, not a regular file, too large, not UTF-8.
    #[error(transparent)]
    Input(#[from] ictus_os::fs::InputError),
    /// A field holds what no ictus writes: a figure not finite, negative or beyond
    /// 64 bits, an unknown probe, a version that is not a number, a CPU beyond
    /// [`MAX_CPU`]. Its message starts with the field.
    #[error("{at}")]
    Invalid {
        /// Where, and what (`measurements[2].labels.frequency_hz: ...`).
        at: Located<String>,
        /// The field.
        field: JsonPath,
    },
    /// Not JSON, or not a RunRecord (a value of the wrong type is placed at its start,
    /// its path in the message).
    #[error(transparent)]
    Parse(Located<String>),
    /// JSON of another schema (placed at its `schema`, or at the top when it has none).
    #[error("{at}")]
    Schema {
        /// Where, and what.
        at: Located<String>,
        /// Its schema field.
        found: String,
    },
    /// A record of a schema version this ictus cannot read.
    #[error("{at}")]
    Version {
        /// Where (its `schema_version`), and what.
        at: Located<String>,
        /// Its version.
        found: u64,
    },
}

impl RecordError {
    /// Where in the file, for an error about its content (none for one that kept the
    /// file from being read).
    pub fn place(&self) -> Option<ictus_os::json::Place> {
        match self {
            RecordError::Invalid { at, .. }
            | RecordError::Parse(at)
            | RecordError::Schema { at, .. }
            | RecordError::Version { at, .. } => Some(at.place),
            RecordError::Input(_) => None,
        }
    }
}

/// A field [`RunRecord::validate`] refused: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRefusal {
    /// The field (`measurements[2].latency.summary.mean_ns`).
    pub field: JsonPath,
    /// What was expected, and what was found.
    pub message: String,
}

impl FieldRefusal {
    fn new(field: JsonPath, message: String) -> Self {
        FieldRefusal { field, message }
    }
}

impl RunRecord {
    /// Reads a record from a JSON file, refusing other schemas and versions with the
    /// file, line and column of what is wrong.
    pub fn load(path: &std::path::Path) -> Result<RunRecord, RecordError> {
        let text = ictus_os::fs::read_input(path, ictus_os::fs::InputKind::Record.max_bytes())?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Reads a record from JSON `text` (`name` names it in errors): the checks of
    /// [`RunRecord::load`], then [`RunRecord::validate`]. Every refusal carries the line
    /// and column of the value that is wrong.
    pub fn from_json(text: &str, name: &str) -> Result<RunRecord, RecordError> {
        let parse_error = |e: JsonError| RecordError::Parse(Located::json(name, e));
        let value: serde_json::Value = json::from_str(text).map_err(parse_error)?;
        let at = |field: &JsonPath, message: String| {
            Located::new(name, json::place(text, field), message)
        };
        let schema_field = JsonPath::root().key("schema");
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA_NAME {
            return Err(RecordError::Schema {
                at: at(
                    &schema_field,
                    format!(
                        "not an ictus result record (schema '{schema}', expected '{SCHEMA_NAME}')"
                    ),
                ),
                found: schema.to_string(),
            });
        }
        let version_field = JsonPath::root().key("schema_version");
        let version = match value.get("schema_version") {
            Some(serde_json::Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            other => {
                return Err(RecordError::Invalid {
                    at: at(
                        &version_field,
                        format!(
                            "{version_field}: expected the whole number {SCHEMA_VERSION}, found {}",
                            json_kind(other)
                        ),
                    ),
                    field: version_field,
                });
            }
        };
        if let Some(found) = version.filter(|&v| v != u64::from(SCHEMA_VERSION)) {
            return Err(RecordError::Version {
                at: at(
                    &version_field,
                    format!(
                        "schema version {found} is not supported by this ictus (it reads version \
                         {SCHEMA_VERSION}); use the ictus version that wrote it"
                    ),
                ),
                found,
            });
        }
        let record: RunRecord = json::from_str(text).map_err(parse_error)?;
        record.validate().map_err(|r| RecordError::Invalid {
            at: at(&r.field, format!("{}: {}", r.field, r.message)),
            field: r.field,
        })?;
        Ok(record)
    }

    /// Checks what serde cannot: a known probe, every figure finite, not negative and
    /// within 64 bits ([`MAX_FIGURE`]), every CPU number at most [`MAX_CPU`] and the CPU
    /// count at most one more. On refusal, the field and what was wrong.
    pub fn validate(&self) -> Result<(), FieldRefusal> {
        let top = JsonPath::root();
        if !KNOWN_PROBES.contains(&self.probe.as_str()) {
            return Err(FieldRefusal::new(
                top.key("probe"),
                format!(
                    "expected one of {}, found '{}'",
                    KNOWN_PROBES.join(", "),
                    self.probe
                ),
            ));
        }
        let provenance = top.key("provenance");
        if self.provenance.cpu_count > MAX_CPU + 1 {
            return Err(FieldRefusal::new(
                provenance.key("cpu_count"),
                format!(
                    "expected a CPU count from 0 to {}, found {}",
                    MAX_CPU + 1,
                    self.provenance.cpu_count
                ),
            ));
        }
        let measurements = top.key("measurements");
        for (i, m) in self.measurements.iter().enumerate() {
            let at = measurements.index(i);
            for (k, v) in &m.metrics {
                figure(at.key("metrics").key(k.as_str()), *v)?;
            }
            for (k, v) in &m.labels {
                if let Some(x) = v.as_f64() {
                    figure(at.key("labels").key(k.as_str()), x)?;
                }
            }
            if let Some(l) = &m.latency {
                latency(at.key("latency"), l)?;
            }
        }
        let threads = top.key("threads");
        for (i, t) in self.threads.iter().enumerate() {
            let at = threads.index(i);
            if let Some(cpu) = t.config.pinned_cpu {
                cpu_number(at.key("config").key("pinned_cpu"), cpu)?;
            }
            latency(at.key("latency"), &t.latency)?;
        }
        if let Some(l) = &self.merged {
            latency(top.key("merged"), l)?;
        }
        let environment = top.key("environment");
        if let Some(s) = &self.environment.steal {
            let steal = environment.key("steal");
            if !(0.0..=1.0).contains(&s.share) {
                return Err(FieldRefusal::new(
                    steal.key("share"),
                    format!("expected a share from 0 to 1, found {}", s.share),
                ));
            }
            for (i, c) in s.per_cpu.iter().enumerate() {
                cpu_number(steal.key("per_cpu").index(i).key("cpu"), c.cpu)?;
            }
        }
        for (i, l) in self.environment.loads.iter().enumerate() {
            for (k, v) in &l.metrics {
                figure(
                    environment
                        .key("loads")
                        .index(i)
                        .key("metrics")
                        .key(k.as_str()),
                    *v,
                )?;
            }
        }
        Ok(())
    }
}

/// A CPU number: at most [`MAX_CPU`].
fn cpu_number(field: JsonPath, cpu: usize) -> Result<(), FieldRefusal> {
    if cpu <= MAX_CPU {
        Ok(())
    } else {
        Err(FieldRefusal::new(
            field,
            format!("expected a CPU number from 0 to {MAX_CPU}, found {cpu}"),
        ))
    }
}

/// A figure: finite, not negative, within [`MAX_FIGURE`].
fn figure(field: JsonPath, v: f64) -> Result<(), FieldRefusal> {
    if v.is_finite() && (0.0..=MAX_FIGURE).contains(&v) {
        Ok(())
    } else {
        Err(FieldRefusal::new(
            field,
            format!(
                "expected a figure from 0 to {MAX_FIGURE:e}, found {}",
                // 1e308 as written, not as 309 digits.
                if v.abs() >= 1e16 {
                    format!("{v:e}")
                } else {
                    format!("{v}")
                }
            ),
        ))
    }
}

/// A latency's floating figures, and its extremes in order.
fn latency(field: JsonPath, l: &LatencyResult) -> Result<(), FieldRefusal> {
    let s = field.key("summary");
    if let Some(m) = l.summary.mean_ns {
        figure(s.key("mean_ns"), m)?;
    }
    if let Some(d) = l.summary.stddev_ns {
        figure(s.key("stddev_ns"), d)?;
    }
    if let (Some(min), Some(max)) = (l.summary.min_ns, l.summary.max_ns)
        && min > max
    {
        return Err(FieldRefusal::new(
            s.key("min_ns"),
            format!("expected at most max_ns ({max}), found {min}"),
        ));
    }
    Ok(())
}

/// `a string "1"`, `nothing`: what a JSON value is, for a message.
fn json_kind(v: Option<&serde_json::Value>) -> String {
    match v {
        None => "nothing".into(),
        Some(serde_json::Value::String(s)) => format!("a string \"{s}\""),
        Some(serde_json::Value::Number(n)) => format!("the number {n}"),
        Some(serde_json::Value::Bool(b)) => format!("{b}"),
        Some(serde_json::Value::Null) => "null".into(),
        Some(serde_json::Value::Array(_)) => "an array".into(),
        Some(serde_json::Value::Object(_)) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy as _;

    fn write(text: &str) -> (tempdir::Dir, std::path::PathBuf) {
        let dir = tempdir::Dir::new();
        let path = dir.path().join("r.json");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// A temporary directory removed on drop (std only).
    mod tempdir {
        pub(super) struct Dir(std::path::PathBuf);
        impl Dir {
            pub(super) fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "ictus-record-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub(super) fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn truncated_json_names_the_file_line_and_column() {
        let (_d, path) = write("{\n  \"schema\": \"ictus.run-record\",\n  \"schema_ver");
        let err = RunRecord::load(&path).unwrap_err();
        assert!(
            matches!(&err, RecordError::Parse(at) if at.place.line == 3),
            "{err}"
        );
        assert!(err.to_string().contains("r.json:3:"), "{err}");
    }

    #[test]
    fn foreign_json_and_other_versions_are_refused() {
        let (_d, path) = write(r#"{"file_version": 1, "thread": {}}"#);
        assert!(matches!(
            RunRecord::load(&path),
            Err(RecordError::Schema { .. })
        ));
        let (_d, path) = write(r#"{"schema": "ictus.run-record", "schema_version": 99}"#);
        assert!(matches!(
            RunRecord::load(&path),
            Err(RecordError::Version { found: 99, .. })
        ));
    }

    #[test]
    fn a_missing_file_is_an_io_error_with_its_name() {
        let err = RunRecord::load(std::path::Path::new("/nonexistent/x.json")).unwrap_err();
        assert!(err.to_string().starts_with("/nonexistent/x.json: "));
    }

    /// A valid record's JSON, to be spoiled by each test.
    fn good() -> serde_json::Value {
        let mut h = LatencyHistogram::new();
        h.record(ictus_core::Nanos::new(21_000));
        let mut r = RunRecord::new(
            crate::registry::ProbeId::Loop.name(),
            crate::provenance::Provenance::capture(Vec::new()),
            serde_json::json!({}),
            Obtained::default(),
        );
        r.measurements.push(
            Measurement::new("trial")
                .label("frequency_hz", 10_000.0)
                .metric("ns_per_step", 50.0)
                .with_latency(LatencyResult::from_histogram(&h, MissCounter::default())),
        );
        serde_json::to_value(r).unwrap()
    }

    fn refused_field(v: &serde_json::Value) -> String {
        match RunRecord::from_json(&v.to_string(), "r.json") {
            Err(RecordError::Invalid { field, .. }) => field.to_string(),
            other => panic!("{other:?}"),
        }
    }

    /// The line and column of a refusal of JSON text, if it has one.
    fn place_of(err: &RecordError) -> Option<(usize, usize)> {
        err.place().map(|p| (p.line, p.column))
    }

    /// The JSON value that starts at `line`:`column` of `text`.
    fn value_at(text: &str, line: usize, column: usize) -> Option<serde_json::Value> {
        json::value_at(text, json::Place { line, column })
    }

    /// `good()` with the value at JSON pointer `at` replaced by `value` ("" replaces
    /// the whole), as compact or pretty text; None when `at` is not in the record.
    fn spoiled(at: &str, value: &serde_json::Value, pretty: bool) -> Option<String> {
        let mut v = good();
        *v.pointer_mut(at)? = value.clone();
        Some(if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            v.to_string()
        })
    }

    #[test]
    fn a_good_record_passes_validation() {
        RunRecord::from_json(&good().to_string(), "r.json").unwrap();
    }

    #[test]
    fn figures_out_of_range_are_refused_naming_the_field() {
        let mut v = good();
        v["measurements"][0]["labels"]["frequency_hz"] = serde_json::json!(1e308);
        assert_eq!(refused_field(&v), "measurements[0].labels.frequency_hz");
        let mut v = good();
        v["measurements"][0]["metrics"]["ns_per_step"] = serde_json::json!(-1.0);
        assert_eq!(refused_field(&v), "measurements[0].metrics.ns_per_step");
        let mut v = good();
        v["measurements"][0]["latency"]["summary"]["mean_ns"] = serde_json::json!(-5.0);
        assert_eq!(refused_field(&v), "measurements[0].latency.summary.mean_ns");
    }

    #[test]
    fn an_unknown_probe_and_a_version_of_another_type_are_refused() {
        let mut v = good();
        v["probe"] = serde_json::json!("warp-drive");
        assert_eq!(refused_field(&v), "probe");
        let mut v = good();
        v["schema_version"] = serde_json::json!("1");
        let err = RunRecord::from_json(&v.to_string(), "r.json").unwrap_err();
        assert!(
            err.to_string()
                .contains("schema_version: expected the whole number 1, found a string"),
            "{err}"
        );
    }

    /// What the corpus found refused without a place, each at its value.
    const SPOILS: &[(&str, &str)] = &[
        ("/probe", r#""warp-drive""#),
        ("/probe", r#""""#),
        ("/schema_version", r#""1""#),
        ("/schema_version", "-1"),
        ("/schema_version", "1.5"),
        ("/schema_version", "1e300"),
        ("/schema_version", "99999999999"),
        ("/schema", r#""ictus.other""#),
        ("/measurements/0/latency/summary/mean_ns", "1e308"),
        ("/measurements/0/latency/summary/mean_ns", "-5"),
        ("/measurements/0/latency/summary/stddev_ns", "-0.5"),
        ("/measurements/0/latency/summary/count", r#""3""#),
        ("/measurements/0/metrics/ns_per_step", "1e308"),
        ("/measurements/0/labels/frequency_hz", "-1"),
        ("/provenance/cpu_count", "99999999999"),
        ("/provenance/online_cpus", "[0, 99999999999]"),
        ("/provenance/isolated_cpus", "[4096]"),
        (
            "/environment/steal",
            r#"{"total_ns": 0, "per_cpu": [], "share": 2.0}"#,
        ),
        (
            "/environment/steal",
            r#"{"total_ns": 0, "per_cpu": [{"cpu": 5000, "steal_ns": 0}], "share": 0.5}"#,
        ),
        ("", "[1, 2]"),
        (
            "",
            r#"{"thread": {"0": {"histogram": {"1": 1}, "cycles": 1}}}"#,
        ),
    ];

    #[test]
    fn every_refusal_is_placed_at_the_value_it_refuses() {
        for &(at, bad) in SPOILS {
            let bad: serde_json::Value = serde_json::from_str(bad).unwrap();
            for pretty in [false, true] {
                let text = spoiled(at, &bad, pretty).unwrap();
                let err = RunRecord::from_json(&text, "r.json").unwrap_err();
                let (line, column) = place_of(&err).unwrap();
                assert!(
                    err.to_string()
                        .starts_with(&format!("r.json:{line}:{column}: ")),
                    "{err}"
                );
                let found = value_at(&text, line, column)
                    .unwrap_or_else(|| panic!("{at}: {err}: no value at {line}:{column}"));
                // The value itself, or (a schema refused) the record's `schema`, or
                // (a CPU in a list) an element of the list.
                let whole = serde_json::from_str::<serde_json::Value>(&text).unwrap();
                let expected_somewhere = found == bad
                    || Some(&found) == whole.get("schema")
                    || bad.as_array().is_some_and(|a| a.contains(&found))
                    || bad.get("share") == Some(&found)
                    || bad.pointer("/per_cpu/0/cpu") == Some(&found);
                assert!(expected_somewhere, "{at}={bad}: {err}: found {found}");
            }
        }
    }

    #[test]
    fn a_huge_cpu_count_or_cpu_number_is_refused_naming_the_field() {
        let mut v = good();
        v["provenance"]["cpu_count"] = serde_json::json!(99_999_999_999u64);
        assert_eq!(refused_field(&v), "provenance.cpu_count");
        let mut v = good();
        v["provenance"]["online_cpus"] = serde_json::json!([0, 99_999_999_999u64]);
        let err = RunRecord::from_json(&v.to_string(), "r.json").unwrap_err();
        assert!(
            err.to_string()
                .contains("provenance.online_cpus[1]: expected a CPU number from 0 to 1023"),
            "{err}"
        );
    }

    /// Values of every JSON kind, the troublesome ones among them.
    fn any_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("JSON has no NaN", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,8}".prop_map(serde_json::Value::from),
            proptest::collection::vec(any::<u64>(), 0..3).prop_map(serde_json::Value::from),
            Just(serde_json::json!({})),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn a_refused_value_anywhere_is_placed_at_its_start(
            at in proptest::sample::select(vec![
                "", "/schema", "/probe", "/schema_version", "/complete", "/threads", "/merged",
                "/measurements", "/measurements/0", "/measurements/0/latency/summary/mean_ns",
                "/measurements/0/latency/summary/stddev_ns", "/measurements/0/latency/summary/count",
                "/measurements/0/latency/summary/min_ns", "/measurements/0/latency/histogram",
                "/measurements/0/metrics/ns_per_step", "/measurements/0/labels/frequency_hz",
                "/provenance/cpu_count", "/provenance/online_cpus", "/provenance/argv",
                "/environment", "/environment/steal", "/environment/loads", "/obtained/locked_bytes",
            ]),
            value in any_json(),
            pretty in proptest::prelude::any::<bool>(),
        ) {
            let text = spoiled(at, &value, pretty).unwrap();
            if let Err(err) = RunRecord::from_json(&text, "f") {
                let (line, column) = place_of(&err).unwrap();
                // Syntactically valid JSON: every refusal points at the start of a value.
                let found = value_at(&text, line, column);
                proptest::prop_assert!(found.is_some(), "{}={}: {} points at no value", at, value, err);
                if let RecordError::Invalid { field, .. } = &err {
                    let whole: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let pointer: String = field.segments().iter().map(|s| match s {
                        ictus_os::json::PathStep::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                        ictus_os::json::PathStep::Index(i) => format!("/{i}"),
                    }).collect();
                    proptest::prop_assert_eq!(found.as_ref(), whole.pointer(&pointer), "{}", err);
                }
            }
        }

        #[test]
        fn arbitrary_text_never_panics_and_parse_errors_have_a_place(text in ".{0,300}") {
            if let Err(RecordError::Parse(at)) = RunRecord::from_json(&text, "f") {
                proptest::prop_assert!(at.place.line >= 1 && at.place.column >= 1);
            }
        }

        #[test]
        fn arbitrary_values_in_a_record_never_panic(
            path in proptest::sample::select(vec!["probe", "schema_version", "complete", "measurements", "threads", "merged", "environment"]),
            value in proptest::prelude::any::<f64>().prop_map(|f| serde_json::json!(f)),
        ) {
            let mut v = good();
            v[path] = value;
            let _ = RunRecord::from_json(&v.to_string(), "f");
        }
    }
}
