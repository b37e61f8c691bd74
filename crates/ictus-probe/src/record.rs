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
    /// One result per measuring thread.
    pub threads: Vec<ThreadResult>,
    /// All threads merged.
    pub merged: LatencyResult,
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
            threads: Vec::new(),
            merged: LatencyResult::from_histogram(&LatencyHistogram::new(), MissCounter::default()),
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
