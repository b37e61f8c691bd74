//! Records from other tools, turned into [`RunRecord`]s so they can be compared with
//! ictus's own: `cyclictest --json` (with `-h`, so a histogram exists).
//!
//! cyclictest's JSON has keys with a stray colon (`"cmdline:"`, `"rt_test_version:"`)
//! and histograms in whole microseconds (bucket `u` holds latencies from `u` to `u + 1`
//! us); both are handled, and the record says what was lost: values are the bucket's
//! lower bound, samples beyond the histogram's range sit at the reported max, and
//! periods cyclictest skipped were never counted.
//!
//! ```no_run
//! let record = ictus_probe::import::cyclictest(std::path::Path::new("ct.json")).unwrap();
//! assert_eq!(record.probe, ictus_probe::registry::ProbeId::Timer);
//! ```

use crate::record::WarningId;
use std::collections::BTreeMap;
use std::path::Path;

use ictus_core::cpulist::MAX_CPU;
use ictus_core::histogram::HIGHEST_NS;
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos};
use ictus_os::facts::{PreemptModel, Preemption};
use ictus_os::fs::{InputError, InputKind, Located};
use ictus_os::json::{self, JsonError, JsonPath, Place};
use ictus_os::sched::Policy;
use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;
use thiserror::Error;

use crate::provenance::Provenance;
use crate::record::{LatencyResult, Obtained, RunRecord, ThreadConfig, ThreadResult, Warning};

/// The largest latency a bucket, `max` or `avg` may hold: one hour in microseconds,
/// the top of ictus's histograms. Beyond it a value could only be clamped, a false
/// figure.
pub const MAX_LATENCY_US: u64 = HIGHEST_NS / 1_000;

/// Why a file could not be imported. Every error about the content names the file
/// and the line and column (in characters, from 1) of the value that is wrong.
#[derive(Debug, Error)]
pub enum ImportError {
    /// Unreadable, not a regular file, too large, or not UTF-8.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Not JSON, or a value of the wrong type (a negative, fractional or quoted count),
    /// placed at its start.
    #[error(transparent)]
    Json(Located<String>),
    /// JSON, but not what cyclictest writes: placed at the value of the wrong kind, or
    /// at the object that lacks a key ("not a cyclictest --json file: ...").
    #[error(transparent)]
    Shape(Located<String>),
    /// A value ictus cannot represent without a false figure, or a key that is not a
    /// plain number: placed, its message starting with `at`.
    #[error("{refused}")]
    Value {
        /// Where, and what.
        refused: Located<String>,
        /// Where in the JSON (`thread.0.avg`, `cmdline`).
        at: JsonPath,
    },
}

impl ImportError {
    /// Where in the file, for an error about its content.
    pub fn place(&self) -> Option<Place> {
        match self {
            ImportError::Json(l) | ImportError::Shape(l) => Some(l.place),
            ImportError::Value { refused, .. } => Some(refused.place),
            ImportError::Input(_) => None,
        }
    }
}

/// Reads a `cyclictest --json` file (run with `-h N`) as a timer record.
pub fn cyclictest(path: &Path) -> Result<RunRecord, ImportError> {
    let name = path.display().to_string();
    let text = ictus_os::fs::read_input(path, InputKind::Import.max_bytes())?;
    cyclictest_text(&text, &name)
}

/// A JSON error as [`ImportError::Json`], its place kept.
fn json_error(name: &str, e: JsonError) -> ImportError {
    ImportError::Json(Located::json(name, e))
}

/// The text of a `cyclictest --json` file as a timer record; `name` names it in errors.
pub fn cyclictest_text(text: &str, name: &str) -> Result<RunRecord, ImportError> {
    let v: Value = json::from_str(text).map_err(|e| json_error(name, e))?;
    let file = Source { text, name };
    check_shape(&v, &file)?;
    // The numbers, typed: a count that is negative, fractional or a string is refused
    // at its line and column.
    let numbers: File = json::from_str(text).map_err(|e| json_error(name, e))?;
    cyclictest_value(&v, numbers, &file)
}

/// The file being imported, to place what is refused in it.
struct Source<'a> {
    text: &'a str,
    name: &'a str,
}

impl Source<'_> {
    /// `what` is missing or wrong at `at` (the object lacking a key is placed).
    fn shape(&self, at: &JsonPath, what: &str) -> ImportError {
        ImportError::Shape(Located::new(
            self.name,
            json::place(self.text, at),
            format!("not a cyclictest --json file: {what}"),
        ))
    }
    /// The value at `at` is refused.
    fn value(&self, at: JsonPath, message: String) -> ImportError {
        self.refuse(json::place(self.text, &at), at, message)
    }
    /// The key that ends `at` is refused.
    fn key(&self, at: JsonPath, message: String) -> ImportError {
        self.refuse(json::key_place(self.text, &at), at, message)
    }
    fn refuse(&self, p: Place, at: JsonPath, message: String) -> ImportError {
        ImportError::Value {
            refused: Located::new(self.name, p, format!("{at}: {message}")),
            at,
        }
    }
}

/// What cyclictest's JSON must have, in words.
fn check_shape(v: &Value, file: &Source<'_>) -> Result<(), ImportError> {
    let top = JsonPath::root();
    if !v.is_object() {
        return Err(file.shape(&top, "expected an object at the top"));
    }
    let at = top.key("thread");
    let threads = v
        .get("thread")
        .and_then(Value::as_object)
        .ok_or_else(|| file.shape(&at, "no \"thread\" object"))?;
    if threads.is_empty() {
        return Err(file.shape(&at, "no thread results"));
    }
    for (k, t) in threads {
        let at = at.key(k.as_str());
        if !t.get("histogram").is_some_and(Value::is_object) {
            return Err(file.shape(
                &at.key("histogram"),
                "a thread without a \"histogram\" object (run cyclictest with -h N)",
            ));
        }
        if t.get("cycles").is_none() {
            return Err(file.shape(&at.key("cycles"), "a thread without \"cycles\""));
        }
    }
    Ok(())
}

/// The numeric part of a cyclictest file. Keys stay as written until checked
/// ([`plain_number`]), so a refused key is placed and named as written.
#[derive(Deserialize)]
struct File {
    thread: BTreeMap<String, Thread>,
}

/// One thread's numbers. Latencies in whole microseconds.
#[derive(Deserialize)]
struct Thread {
    histogram: BTreeMap<String, u64>,
    cycles: u64,
    #[serde(default)]
    max: Option<Micros>,
    #[serde(default)]
    avg: Option<f64>,
    #[serde(default)]
    cpu: Option<Cpu>,
}

/// A latency in microseconds, at most [`MAX_LATENCY_US`]: a JSON number, never a
/// string.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Micros(u64);

/// A CPU number, at most [`MAX_CPU`].
#[derive(Clone, Copy)]
struct Cpu(usize);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let us = u64::deserialize(d)?;
        if us > MAX_LATENCY_US {
            return Err(de::Error::custom(format!(
                "expected a latency of at most {MAX_LATENCY_US} us (one hour), found {us}"
            )));
        }
        Ok(Micros(us))
    }
}

impl<'de> Deserialize<'de> for Cpu {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cpu = u64::deserialize(d)?;
        usize::try_from(cpu)
            .ok()
            .filter(|&c| c <= MAX_CPU)
            .map(Cpu)
            .ok_or_else(|| {
                de::Error::custom(format!(
                    "expected a CPU number from 0 to {MAX_CPU}, found {cpu}"
                ))
            })
    }
}

/// A key that is a plain non-negative integer as cyclictest writes it: digits only,
/// no sign, no leading zero (so `"05"` cannot stand for a second bucket 5), fitting in
/// 64 bits.
fn plain_number(key: &str) -> Option<u64> {
    let digits = !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit());
    if !digits || (key.len() > 1 && key.starts_with('0')) {
        return None;
    }
    key.parse().ok()
}

/// A key that cyclictest may spell with a stray trailing colon.
fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).or_else(|| v.get(format!("{key}:")))
}

/// The key [`get`] finds, as spelled in `v`.
fn spelled(v: &Value, key: &str) -> String {
    if v.get(key).is_some() {
        key.to_string()
    } else {
        format!("{key}:")
    }
}

/// The value of option `short` (`-i`) or `long` (`--interval`) on a command line.
fn option(argv: &[String], short: &str, long: &str) -> Option<String> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == short || a == long {
            argv.get(i + 1).cloned()
        } else if let Some(v) = a.strip_prefix(&format!("{long}=")) {
            Some(v.to_string())
        } else if a.len() > short.len() && a.starts_with(short) && !a.starts_with("--") {
            Some(a[short.len()..].to_string())
        } else {
            None
        }
    })
}

/// `Sun, 22 Nov 2026 08:49:36 +0000` as RFC 3339 (`2026-11-22T08:49:36Z`); other
/// offsets and forms are kept as written.
fn rfc3339(date: &str) -> String {
    let parts: Vec<&str> = date.split_whitespace().collect();
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    match parts.as_slice() {
        [_, day, month, year, time, "+0000"] => match MONTHS.iter().position(|m| m == month) {
            Some(m) => format!("{year}-{:02}-{:0>2}T{time}Z", m + 1, day),
            None => date.to_string(),
        },
        _ => date.to_string(),
    }
}

/// The record of a cyclictest file: `v` as parsed, `numbers` as typed.
fn cyclictest_value(v: &Value, numbers: File, file: &Source<'_>) -> Result<RunRecord, ImportError> {
    let cmdline = get(v, "cmdline").and_then(Value::as_str).unwrap_or("");
    let argv: Vec<String> = cmdline.split_whitespace().map(str::to_string).collect();
    let options = command_line(v, &argv, file)?;
    let provenance = provenance(v, &argv);
    let mut warnings = vec![Warning {
        id: WarningId::Imported,
        message: format!(
            "imported from {}: cyclictest {} histograms have 1 us buckets, so values are \
             truncated to the microsecond (the mean is cyclictest's own); host facts other than \
             uname were not recorded",
            file.name, provenance.tool_version
        ),
        advice: None,
    }];
    let mut merged = LatencyHistogram::new();
    let mut results = Vec::new();
    for (index, at, t) in numbered_threads(numbers.thread, file)? {
        let (result, overflow) = import_thread(index, &at, t, options.policy, &mut merged, file)?;
        warnings.extend(overflow);
        results.push(result);
    }
    if let (Some(i), Some(d)) = (options.interval_us, options.duration_s) {
        warnings.push(missed_unknown(i, d, &results));
    }
    let parameters = CyclictestParams {
        imported_from: "cyclictest".into(),
        cmdline: cmdline.to_string(),
        interval_ns: options.interval_ns,
        duration_ns: options.duration_ns,
        mode: "nanosleep".into(),
        policy: options.policy,
    };
    let parameters = serde_json::to_value(parameters).expect("the parameters serialize");
    let mut record = RunRecord::new(
        crate::timer::PROBE.name(),
        provenance,
        parameters,
        Obtained::default(),
    );
    record.complete = v.get("return_code").and_then(Value::as_i64).unwrap_or(0) == 0;
    record.threads = results;
    record.merged = Some(LatencyResult::from_histogram(
        &merged,
        MissCounter::default(),
    ));
    record.warnings = warnings;
    Ok(record)
}

pub use crate::timer::CyclictestParams;

/// What cyclictest's command line says about the run.
struct CommandLine {
    /// `-i`, in microseconds.
    interval_us: Option<u64>,
    /// `-D`, in seconds.
    duration_s: Option<u64>,
    interval_ns: Option<u64>,
    duration_ns: Option<u64>,
    /// FIFO at `-p` when above 0, else `SCHED_OTHER`.
    policy: Policy,
}

/// The interval, duration and policy of `argv`, the command line of `v`; an interval
/// or a duration too large for nanoseconds is refused at the command line.
fn command_line(v: &Value, argv: &[String], file: &Source<'_>) -> Result<CommandLine, ImportError> {
    let cmdline_at = JsonPath::root().key(spelled(v, "cmdline"));
    let interval_us: Option<u64> = option(argv, "-i", "--interval").and_then(|s| s.parse().ok());
    let duration_s: Option<u64> = option(argv, "-D", "--duration").and_then(|s| s.parse().ok());
    let interval_ns = in_ns(
        file,
        &cmdline_at,
        interval_us,
        (1_000, "us"),
        "an interval (-i)",
    )?;
    let duration_ns = in_ns(
        file,
        &cmdline_at,
        duration_s,
        (1_000_000_000, "s"),
        "a duration (-D)",
    )?;
    let priority: Option<u8> = option(argv, "-p", "--priority").and_then(|s| s.parse().ok());
    let policy = match priority {
        Some(p) if p > 0 => Policy::Fifo { priority: p },
        _ => Policy::Other { nice: 0 },
    };
    Ok(CommandLine {
        interval_us,
        duration_s,
        interval_ns,
        duration_ns,
        policy,
    })
}

/// `value`, counted in `unit`s of `ns` nanoseconds each, in nanoseconds; one that does
/// not fit is refused at `at` as `what`.
fn in_ns(
    file: &Source<'_>,
    at: &JsonPath,
    value: Option<u64>,
    (ns, unit): (u64, &str),
    what: &str,
) -> Result<Option<u64>, ImportError> {
    let Some(v) = value else {
        return Ok(None);
    };
    v.checked_mul(ns).map(Some).ok_or_else(|| {
        file.value(
            at.clone(),
            format!("expected {what} that fits in nanoseconds, found {v} {unit}"),
        )
    })
}

/// Where the record comes from: cyclictest's version, `argv`, its times and the
/// uname part of its sysinfo; the host facts cyclictest does not record are left
/// empty.
fn provenance(v: &Value, argv: &[String]) -> Provenance {
    let sys = v.get("sysinfo").cloned().unwrap_or(Value::Null);
    let text = |val: &Value, key: &str| {
        val.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Provenance {
        tool: "cyclictest".into(),
        tool_version: get(v, "rt_test_version")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        argv: argv.to_vec(),
        start_time: rfc3339(&text(v, "start_time")),
        end_time: Some(rfc3339(&text(v, "end_time"))),
        hostname: text(&sys, "nodename"),
        kernel_release: text(&sys, "release"),
        kernel_version: text(&sys, "version"),
        preemption: Preemption {
            model: if sys.get("realtime").and_then(Value::as_u64) == Some(1) {
                PreemptModel::Rt
            } else {
                PreemptModel::Unknown
            },
            dynamic: text(&sys, "version").contains("PREEMPT_DYNAMIC"),
            source: "imported from cyclictest's sysinfo".into(),
        },
        cmdline: String::new(),
        cpu_model: None,
        cpu_count: 0,
        online_cpus: CpuSet::default(),
        smt: None,
        isolated_cpus: CpuSet::default(),
        governor: None,
        virtualization: None,
    }
}

/// The threads in number order, each with its place; every key is checked first, so
/// the first key that is not a thread number is refused before any thread is read.
fn numbered_threads(
    threads: BTreeMap<String, Thread>,
    file: &Source<'_>,
) -> Result<Vec<(usize, JsonPath, Thread)>, ImportError> {
    let mut numbered = Vec::with_capacity(threads.len());
    for (key, t) in threads {
        let at = JsonPath::root().key("thread").key(key.as_str());
        let index = plain_number(&key)
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| {
                file.key(
                    at.clone(),
                    format!("expected a thread number like \"0\", found \"{key}\""),
                )
            })?;
        numbered.push((index, at, t));
    }
    numbered.sort_by_key(|(index, ..)| *index);
    Ok(numbered)
}

/// Thread `index` (at `at`) as a result with `policy`, its samples also recorded
/// into `merged`; with a warning when samples lay beyond its histogram.
fn import_thread(
    index: usize,
    at: &JsonPath,
    t: Thread,
    policy: Policy,
    merged: &mut LatencyHistogram,
    file: &Source<'_>,
) -> Result<(ThreadResult, Option<Warning>), ImportError> {
    let too_many = |at: JsonPath| {
        file.value(
            at,
            "expected counts whose total fits in 64 bits, found more".to_string(),
        )
    };
    let max_us = t.max.map_or(0, |Micros(m)| m);
    let mut h = LatencyHistogram::new();
    let mut counted = 0u64;
    // In bulk: a bucket of 10^18 samples costs what a bucket of one does.
    for (us, count, bucket) in histogram_buckets(at, t.histogram, file)? {
        let value = Nanos::from_micros(us);
        h.record_n(value, count)
            .map_err(|_| too_many(bucket.clone()))?;
        merged
            .record_n(value, count)
            .map_err(|_| too_many(bucket.clone()))?;
        counted = counted
            .checked_add(count)
            .ok_or_else(|| too_many(bucket.clone()))?;
    }
    let overflow = t.cycles.saturating_sub(counted);
    let value = Nanos::from_micros(max_us);
    h.record_n(value, overflow)
        .map_err(|_| too_many(at.key("cycles")))?;
    merged
        .record_n(value, overflow)
        .map_err(|_| too_many(at.key("cycles")))?;
    let warning = (overflow > 0).then(|| Warning {
        id: WarningId::HistogramOverflow,
        message: format!(
            "thread {index}: {overflow} samples lay beyond cyclictest's histogram and are \
             placed at its max ({max_us} us)"
        ),
        advice: Some("Rerun cyclictest with a larger -h.".into()),
    });
    let mut latency = LatencyResult::from_histogram(&h, MissCounter::default());
    if let Some(avg) = t.avg {
        if !(0.0..=MAX_LATENCY_US as f64).contains(&avg) {
            return Err(file.value(
                at.key("avg"),
                format!("expected a mean latency from 0 to {MAX_LATENCY_US} us, found {avg}"),
            ));
        }
        latency.summary.mean_ns = Some(avg * 1_000.0);
    }
    let cpu = t.cpu.map(|Cpu(c)| c);
    let result = ThreadResult {
        thread: index,
        config: ThreadConfig {
            tid: 0,
            pinned_cpu: cpu,
            affinity: CpuSet::from_cpus(cpu),
            policy_requested: policy,
            policy,
            hybrid_margin_ns: None,
        },
        latency,
    };
    Ok((result, warning))
}

/// The buckets of the histogram of the thread at `at`, in latency order: (latency in
/// us, count, place); every key is checked first.
fn histogram_buckets(
    at: &JsonPath,
    histogram: BTreeMap<String, u64>,
    file: &Source<'_>,
) -> Result<Vec<(u64, u64, JsonPath)>, ImportError> {
    let mut buckets = Vec::with_capacity(histogram.len());
    for (key, count) in histogram {
        let bucket = at.key("histogram").key(key.as_str());
        let us = match plain_number(&key) {
            Some(us) if us <= MAX_LATENCY_US => us,
            Some(us) => {
                return Err(file.key(
                    bucket,
                    format!(
                        "expected a latency of at most {MAX_LATENCY_US} us (one hour), found {us}"
                    ),
                ));
            }
            None => {
                return Err(file.key(
                    bucket,
                    format!("expected a bucket in whole microseconds like \"12\", found \"{key}\""),
                ));
            }
        };
        buckets.push((us, count, bucket));
    }
    buckets.sort_by_key(|(us, ..)| *us);
    Ok(buckets)
}

/// cyclictest does not count the periods it missed: what was due in `duration_s`
/// at `interval_us` against what its threads measured.
fn missed_unknown(interval_us: u64, duration_s: u64, results: &[ThreadResult]) -> Warning {
    // No overflow: the duration fits in nanoseconds (checked by `command_line`), so
    // duration_s * 10^6 does.
    let expected = duration_s * 1_000_000 / interval_us.max(1);
    let worst = results
        .iter()
        .map(|r| r.latency.summary.count)
        .min()
        .unwrap_or(0);
    Warning {
        id: WarningId::MissedUnknown,
        message: format!(
            "cyclictest skips missed periods without counting them: {expected} periods were \
             due per thread and it measured {worst} (the fewest of its threads); the \
             difference was missed or not started"
        ),
        advice: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cyclictest-2threads.json")
    }

    #[test]
    fn a_cyclictest_file_becomes_a_timer_record() {
        let sut = cyclictest(&fixture()).unwrap();
        assert_eq!(sut.probe, crate::timer::PROBE);
        assert_eq!(sut.provenance.tool, "cyclictest");
        assert_eq!(sut.threads.len(), 2);
        let raw: Value =
            serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
        for t in &sut.threads {
            let orig = &raw["thread"][t.thread.to_string()];
            let s = &t.latency.summary;
            assert_eq!(s.count, orig["cycles"].as_u64().unwrap());
            assert_eq!(
                s.min_ns.unwrap().as_u64(),
                orig["min"].as_u64().unwrap() * 1_000
            );
            assert_eq!(
                s.max_ns.unwrap().as_u64(),
                orig["max"].as_u64().unwrap() * 1_000
            );
            assert_eq!(t.config.policy, Policy::Fifo { priority: 90 });
        }
        assert_eq!(sut.parameters["interval_ns"], 1_000_000);
        assert!(sut.provenance.start_time.ends_with('Z'));
    }

    #[test]
    fn foreign_and_broken_files_are_named() {
        let dir = std::env::temp_dir().join(format!("ictus-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let broken = dir.join("broken.json");
        std::fs::write(&broken, "{\"thread\": {\"0\": {").unwrap();
        let err = cyclictest(&broken).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:1:", broken.display())),
            "{err}"
        );
        let foreign = dir.join("foreign.json");
        std::fs::write(&foreign, "{\"schema\": \"ictus.run-record\"}").unwrap();
        assert!(matches!(
            cyclictest(&foreign),
            Err(ImportError::Shape { .. })
        ));
        let no_hist = dir.join("nohist.json");
        std::fs::write(&no_hist, "{\"thread\": {\"0\": {\"cycles\": 5}}}").unwrap();
        let err = cyclictest(&no_hist).unwrap_err().to_string();
        assert!(err.contains("-h N"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A one-thread cyclictest file with `histogram` and `extra` spliced into thread 0.
    fn file_with(histogram: &str, extra: &str) -> String {
        format!(
            "{{\n  \"cmdline:\": \"cyclictest -i 1000 -D 10\",\n  \"thread\": {{\n    \"0\": {{\n      \"histogram\": {histogram},\n      \"cycles\": 3{extra}\n    }}\n  }}\n}}\n"
        )
    }

    #[test]
    fn huge_bucket_counts_are_recorded_in_bulk() {
        let text = file_with(r#"{"5": 1000000000000000000}"#, "");
        let sut = cyclictest_text(&text, "ct.json").unwrap();
        assert_eq!(
            sut.threads[0].latency.summary.count,
            1_000_000_000_000_000_000
        );
        assert_eq!(
            sut.merged.unwrap().summary.max_ns,
            Some(Nanos::from_micros(5))
        );
    }

    #[test]
    fn counts_that_are_negative_fractional_or_text_are_refused_at_their_line_and_column() {
        for bad in ["-1", "1.5", "\"7\"", "1e3", "null"] {
            let text = file_with(&format!("{{\"5\": {bad}}}"), "");
            match cyclictest_text(&text, "ct.json") {
                Err(ImportError::Json(l)) if l.place.line == 5 => assert!(l.place.column > 20),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn values_beyond_what_a_record_holds_are_refused_with_their_place() {
        let bucket = file_with(r#"{"18446744073709551615": 1}"#, "");
        let err = cyclictest_text(&bucket, "ct.json").unwrap_err().to_string();
        assert!(
            err.starts_with("ct.json:5:") && err.contains("one hour"),
            "{err}"
        );
        let key = file_with(r#"{"x": 1}"#, "");
        assert!(matches!(
            cyclictest_text(&key, "ct.json"),
            Err(ImportError::Value { refused, .. }) if refused.place == Place { line: 5, column: 21 }
        ));
        let sum = file_with(
            r#"{"1": 18446744073709551615, "2": 18446744073709551615}"#,
            "",
        );
        let err = cyclictest_text(&sum, "ct.json").unwrap_err();
        assert!(
            matches!(&err, ImportError::Value { at, .. } if at.to_string() == "thread.0.histogram.2"),
            "{err}"
        );
        let avg = file_with(r#"{"1": 1}"#, ", \"avg\": 1e300");
        let err = cyclictest_text(&avg, "ct.json").unwrap_err();
        assert!(
            matches!(&err, ImportError::Value { at, .. } if at.to_string() == "thread.0.avg"),
            "{err}"
        );
        let cpu = file_with(r#"{"1": 1}"#, ", \"cpu\": 99999999999");
        let err = cyclictest_text(&cpu, "ct.json").unwrap_err();
        // Placed at the value, not where serde noticed (the end of its object).
        assert!(
            matches!(&err, ImportError::Json(l) if l.place == Place { line: 6, column: 27 }
                && l.what.contains("thread.0.cpu: expected a CPU number") && l.what.contains("99999999999")),
            "{err:?}"
        );
        let cmdline = file_with(r#"{"1": 1}"#, "").replace("-D 10", "-D 18446744073709551615");
        let err = cyclictest_text(&cmdline, "ct.json").unwrap_err();
        assert!(
            matches!(&err, ImportError::Value { at, refused } if refused.place == Place { line: 2, column: 15 } && at.to_string() == r#""cmdline:""#),
            "{err}"
        );
        assert!(
            err.to_string().contains(
                "expected a duration (-D) that fits in nanoseconds, found 18446744073709551615 s"
            ),
            "{err}"
        );
        let interval = file_with(r#"{"1": 1}"#, "").replace("-i 1000", "-i 18446744073709551615");
        let err = cyclictest_text(&interval, "ct.json").unwrap_err();
        assert!(
            err.to_string().contains(
                "expected an interval (-i) that fits in nanoseconds, found 18446744073709551615 us"
            ),
            "{err}"
        );
    }

    /// The JSON value (or key) that starts at `line`:`column` of `text`.
    fn value_at(text: &str, line: usize, column: usize) -> Option<Value> {
        json::value_at(text, Place { line, column })
    }

    /// The place of a refusal of JSON text.
    fn place_of(err: &ImportError) -> Option<(usize, usize)> {
        err.place().map(|p| (p.line, p.column))
    }

    #[test]
    fn a_bucket_or_thread_key_that_is_not_a_plain_number_is_refused_at_the_key() {
        for bad in ["+5", "05", "-1", " 5", "5.0", "", "5us", "0x5"] {
            let key = serde_json::to_string(bad).unwrap();
            let text = file_with(&format!("{{{key}: 1}}"), "");
            let err = cyclictest_text(&text, "ct.json").unwrap_err();
            assert!(
                matches!(
                    &err,
                    ImportError::Value { refused, .. } if refused.place == Place { line: 5, column: 21 }
                ),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("expected a bucket"), "{err}");
            let text = file_with("{\"5\": 1}", "").replace("\"0\": {", &format!("{key}: {{"));
            let err = cyclictest_text(&text, "ct.json").unwrap_err();
            assert!(
                matches!(
                    &err,
                    ImportError::Value { refused, .. } if refused.place == Place { line: 4, column: 5 }
                ),
                "{bad}: {err}"
            );
            assert!(
                err.to_string().contains("expected a thread number"),
                "{err}"
            );
        }
        // "0" is a plain number.
        cyclictest_text(&file_with(r#"{"0": 1, "10": 2}"#, ""), "ct.json").unwrap();
    }

    #[test]
    fn a_max_or_avg_of_the_wrong_type_is_refused_at_its_value() {
        for bad in [r#""7""#, r#""string""#, "-1", "1.5", "true", "[]"] {
            let text = file_with(r#"{"1": 1}"#, &format!(", \"max\": {bad}"));
            let err = cyclictest_text(&text, "ct.json").unwrap_err();
            assert!(
                matches!(&err, ImportError::Json(l) if l.place == Place { line: 6, column: 27 } && l.what.starts_with("thread.0.max: ")),
                "{bad}: {err}"
            );
        }
        let text = file_with(r#"{"1": 1}"#, ", \"avg\": \"3\"");
        let err = cyclictest_text(&text, "ct.json").unwrap_err();
        assert!(
            matches!(
                &err,
                ImportError::Json(l) if l.place == Place { line: 6, column: 27 }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_file_of_another_shape_is_refused_where_the_shape_differs() {
        // (text, line, column, words)
        let cases: &[(&str, usize, usize, &str)] = &[
            ("[1]", 1, 1, "object at the top"),
            ("\n  5", 2, 3, "object at the top"),
            ("{\n \"x\": 1}", 1, 1, "\"thread\""),
            ("{\"thread\": [1]}", 1, 12, "\"thread\""),
            ("{\"thread\": {}}", 1, 12, "no thread results"),
            ("{\"thread\": {\"0\": {\"cycles\": 1}}}", 1, 18, "-h N"),
            ("{\"thread\": {\"0\": 7}}", 1, 18, "-h N"),
            (
                "{\"thread\": {\"0\": {\"histogram\": [], \"cycles\": 1}}}",
                1,
                32,
                "-h N",
            ),
            (
                "{\"thread\": {\"0\": {\"histogram\": {}}}}",
                1,
                18,
                "\"cycles\"",
            ),
        ];
        for &(text, line, column, words) in cases {
            let err = cyclictest_text(text, "ct.json").unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("ct.json:{line}:{column}: "))
                    && err.to_string().contains(words),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("ct.json");
        ictus_os::testing::mkfifo(&fifo).unwrap();
        assert!(matches!(
            cyclictest(&fifo),
            Err(ImportError::Input(InputError::NotRegular { .. }))
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_text_never_panics_and_syntax_errors_have_a_place(text in ".{0,200}") {
            if let Err(ImportError::Json(l)) = cyclictest_text(&text, "f") {
                proptest::prop_assert!(l.place.line >= 1 && l.place.column >= 1);
            }
        }

        #[test]
        fn a_refused_value_anywhere_is_placed_at_its_start(
            at in proptest::sample::select(vec![
                "", "/thread", "/thread/0", "/thread/0/histogram", "/thread/0/histogram/5",
                "/thread/0/cycles", "/thread/0/max", "/thread/0/avg", "/thread/0/cpu", "/cmdline:",
            ]),
            value in proptest::prop_oneof![
                proptest::strategy::Just(Value::Null),
                proptest::prelude::any::<bool>().prop_map(Value::from),
                proptest::prelude::any::<i64>().prop_map(Value::from),
                proptest::prelude::any::<u64>().prop_map(Value::from),
                proptest::prelude::any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
                ".{0,8}".prop_map(Value::from),
                "-[iD] [0-9]{1,22}".prop_map(Value::from),
                proptest::collection::vec(proptest::prelude::any::<u64>(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[-+0-9a-z]{0,4}", proptest::prelude::any::<u64>(), 0..3)
                    .prop_map(|m| serde_json::json!(m)),
            ],
            pretty in proptest::prelude::any::<bool>(),
        ) {
            let mut v: Value = serde_json::from_str(&file_with(r#"{"5": 1}"#, r#", "max": 5, "avg": 5.0, "cpu": 0"#)).unwrap();
            *v.pointer_mut(at).unwrap() = value.clone();
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            if let Err(err) = cyclictest_text(&text, "f") {
                let (line, column) = place_of(&err).unwrap();
                // Valid JSON: every refusal points at the start of a value or a key.
                proptest::prop_assert!(value_at(&text, line, column).is_some(), "{}={}: {} points at nothing", at, value, err);
                proptest::prop_assert!(err.to_string().starts_with(&format!("f:{line}:{column}: ")), "{}", err);
            }
        }

        #[test]
        fn arbitrary_counts_and_buckets_never_panic(
            buckets in proptest::collection::vec((proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..8),
            cycles in proptest::prelude::any::<u64>(),
            max in proptest::prelude::any::<u64>(),
        ) {
            let histogram: Vec<String> = buckets.iter().map(|(k, c)| format!("\"{k}\": {c}")).collect();
            let text = file_with(&format!("{{{}}}", histogram.join(", ")), &format!(", \"max\": {max}"))
                .replace("\"cycles\": 3", &format!("\"cycles\": {cycles}"));
            let _ = cyclictest_text(&text, "f");
        }

        #[test]
        fn arbitrary_bytes_in_a_file_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ct.json");
            std::fs::write(&path, &bytes).unwrap();
            if let Err(ImportError::Input(InputError::NotUtf8 { line, column, .. })) = cyclictest(&path) {
                proptest::prop_assert!(line >= 1 && column >= 1);
            }
        }
    }

    #[test]
    fn rfc2822_dates_in_utc_become_rfc3339() {
        assert_eq!(
            rfc3339("Sun, 22 Nov 2026 08:49:36 +0000"),
            "2026-11-22T08:49:36Z"
        );
        assert_eq!(
            rfc3339("Sun, 2 Nov 2026 08:49:36 +0000"),
            "2026-11-02T08:49:36Z"
        );
        assert_eq!(rfc3339("yesterday"), "yesterday");
    }

    #[test]
    fn options_are_found_in_every_spelling() {
        let argv: Vec<String> = "cyclictest -q -D 20 -i1000 --priority=95"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(option(&argv, "-D", "--duration").as_deref(), Some("20"));
        assert_eq!(option(&argv, "-i", "--interval").as_deref(), Some("1000"));
        assert_eq!(option(&argv, "-p", "--priority").as_deref(), Some("95"));
    }
}
