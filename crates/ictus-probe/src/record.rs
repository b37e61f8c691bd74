//! [`RunRecord`]: the one result record every probe returns, versioned and written
//! with serde. The schema is documented in `docs/result-schema.md`.
//!
//! ```
//! use ictus_probe::record::{LatencyResult, SCHEMA_VERSION};
//! use ictus_core::{LatencyHistogram, MissCounter, Nanos};
//! let mut h = LatencyHistogram::new();
//! h.record(Nanos::new(21_000));
//! let r = LatencyResult::from_histogram(&h, MissCounter::default());
//! assert_eq!(r.summary.count, 1);
//! assert_eq!(SCHEMA_VERSION, 1);
//! ```

use std::collections::BTreeMap;

use ictus_core::histogram::HistogramData;
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Percentile, Summary};
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;

/// The value of the `schema` field.
pub const SCHEMA_NAME: &str = "ictus.run-record";
/// The current schema version; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

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
        }
    }
}

/// A shortfall or refusal, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// A stable identifier (`policy-refused`, `mlock-refused`, `steal-time`, ...).
    pub id: String,
    /// What happened.
    pub message: String,
    /// What a person can do, if anything.
    pub advice: Option<String>,
}

/// Process-wide settings obtained.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Obtained {
    /// Whether memory locking was asked for.
    pub mlock_requested: bool,
    /// Whether all memory is locked.
    pub mlock: bool,
    /// Bytes locked after setup (`VmLck`).
    pub locked_bytes: Option<u64>,
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

/// Why a record file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON, or not a RunRecord.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// JSON of another schema.
    #[error("{path}: not an ictus result record (schema '{found}', expected '{SCHEMA_NAME}')")]
    Schema {
        /// The file.
        path: String,
        /// Its schema field.
        found: String,
    },
    /// A record of a schema version this ictus cannot read.
    #[error(
        "{path}: schema version {found} is not supported by this ictus (it reads version {SCHEMA_VERSION}); use the ictus version that wrote it"
    )]
    Version {
        /// The file.
        path: String,
        /// Its version.
        found: u32,
    },
}

impl RunRecord {
    /// Reads a record from a JSON file, refusing other schemas and versions with the
    /// file, line and column of what is wrong.
    pub fn load(path: &std::path::Path) -> Result<RunRecord, RecordError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io {
            path: name.clone(),
            source,
        })?;
        let parse_error = |e: serde_json::Error| RecordError::Parse {
            path: name.clone(),
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or("")
                .to_string(),
        };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(parse_error)?;
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA_NAME {
            return Err(RecordError::Schema {
                path: name,
                found: schema.to_string(),
            });
        }
        let version = value
            .get("schema_version")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if version != u64::from(SCHEMA_VERSION) {
            return Err(RecordError::Version {
                path: name,
                found: u32::try_from(version).unwrap_or(u32::MAX),
            });
        }
        serde_json::from_str(&text).map_err(parse_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(err, RecordError::Parse { line: 3, .. }), "{err}");
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
}
