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
//! assert_eq!(record.probe, "timer");
//! ```

use std::path::Path;

use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos};
use ictus_os::facts::{PreemptModel, Preemption};
use ictus_os::sched::Policy;
use serde_json::Value;
use thiserror::Error;

use crate::provenance::Provenance;
use crate::record::{LatencyResult, Obtained, RunRecord, ThreadConfig, ThreadResult, Warning};

/// Why a file could not be imported.
#[derive(Debug, Error)]
pub enum ImportError {
    /// Unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON.
    #[error("{path}:{line}:{column}: not JSON: {message}")]
    Json {
        /// The file.
        path: String,
        /// Line.
        line: usize,
        /// Column.
        column: usize,
        /// What was wrong.
        message: String,
    },
    /// JSON, but not what cyclictest writes.
    #[error("{path}: not a cyclictest --json file: {what}")]
    Shape {
        /// The file.
        path: String,
        /// What was expected and missing.
        what: String,
    },
}

/// Reads a `cyclictest --json` file (run with `-h N`) as a timer record.
pub fn cyclictest(path: &Path) -> Result<RunRecord, ImportError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
        path: name.clone(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| ImportError::Json {
        path: name.clone(),
        line: e.line(),
        column: e.column(),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or("")
            .to_string(),
    })?;
    cyclictest_value(&v, &name)
}

/// A key that cyclictest may spell with a stray trailing colon.
fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).or_else(|| v.get(format!("{key}:")))
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

fn cyclictest_value(v: &Value, name: &str) -> Result<RunRecord, ImportError> {
    let shape = |what: &str| ImportError::Shape {
        path: name.to_string(),
        what: what.to_string(),
    };
    let threads = v
        .get("thread")
        .and_then(Value::as_object)
        .ok_or_else(|| shape("no \"thread\" object"))?;
    let cmdline = get(v, "cmdline").and_then(Value::as_str).unwrap_or("");
    let argv: Vec<String> = cmdline.split_whitespace().map(str::to_string).collect();
    let interval_us: Option<u64> = option(&argv, "-i", "--interval").and_then(|s| s.parse().ok());
    let duration_s: Option<u64> = option(&argv, "-D", "--duration").and_then(|s| s.parse().ok());
    let priority: Option<u8> = option(&argv, "-p", "--priority").and_then(|s| s.parse().ok());
    let policy = match priority {
        Some(p) if p > 0 => Policy::Fifo { priority: p },
        _ => Policy::Other { nice: 0 },
    };
    let sys = v.get("sysinfo").cloned().unwrap_or(Value::Null);
    let text = |val: &Value, key: &str| {
        val.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let provenance = Provenance {
        tool: "cyclictest".into(),
        tool_version: get(v, "rt_test_version")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        argv: argv.clone(),
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
    };
    let mut warnings = vec![Warning {
        id: "imported".into(),
        message: format!(
            "imported from {name}: cyclictest {} histograms have 1 us buckets, so values are \
             truncated to the microsecond (the mean is cyclictest's own); host facts other than \
             uname were not recorded",
            provenance.tool_version
        ),
        advice: None,
    }];
    let mut merged = LatencyHistogram::new();
    let mut results = Vec::new();
    let mut ids: Vec<(usize, &Value)> = threads
        .iter()
        .filter_map(|(k, t)| k.parse().ok().map(|i| (i, t)))
        .collect();
    ids.sort_by_key(|(i, _)| *i);
    if ids.is_empty() {
        return Err(shape("no thread results"));
    }
    for (index, t) in ids {
        let hist = t
            .get("histogram")
            .and_then(Value::as_object)
            .ok_or_else(|| shape("a thread without \"histogram\" (run cyclictest with -h N)"))?;
        let cycles = t
            .get("cycles")
            .and_then(Value::as_u64)
            .ok_or_else(|| shape("a thread without \"cycles\""))?;
        let max_us = t.get("max").and_then(Value::as_u64).unwrap_or(0);
        let mut h = LatencyHistogram::new();
        let mut counted = 0u64;
        let mut buckets: Vec<(u64, u64)> = hist
            .iter()
            .filter_map(|(k, c)| Some((k.parse().ok()?, c.as_u64()?)))
            .collect();
        buckets.sort_unstable();
        for (us, count) in buckets {
            for _ in 0..count {
                h.record(Nanos::from_micros(us));
            }
            counted += count;
        }
        let overflow = cycles.saturating_sub(counted);
        for _ in 0..overflow {
            h.record(Nanos::from_micros(max_us));
        }
        if overflow > 0 {
            warnings.push(Warning {
                id: "histogram-overflow".into(),
                message: format!(
                    "thread {index}: {overflow} samples lay beyond cyclictest's histogram and are \
                     placed at its max ({max_us} us)"
                ),
                advice: Some("Rerun cyclictest with a larger -h.".into()),
            });
        }
        merged.merge(&h);
        let mut latency = LatencyResult::from_histogram(&h, MissCounter::default());
        if let Some(avg) = t.get("avg").and_then(Value::as_f64) {
            latency.summary.mean_ns = Some(avg * 1_000.0);
        }
        let cpu = t.get("cpu").and_then(Value::as_u64).map(|c| c as usize);
        results.push(ThreadResult {
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
        });
    }
    if let (Some(i), Some(d)) = (interval_us, duration_s) {
        let expected = d * 1_000_000 / i.max(1);
        let worst = results
            .iter()
            .map(|r| r.latency.summary.count)
            .min()
            .unwrap_or(0);
        warnings.push(Warning {
            id: "missed-unknown".into(),
            message: format!(
                "cyclictest skips missed periods without counting them: {expected} periods were \
                 due per thread and it measured {worst} (the fewest of its threads); the \
                 difference was missed or not started"
            ),
            advice: None,
        });
    }
    let parameters = serde_json::json!({
        "imported_from": "cyclictest",
        "cmdline": cmdline,
        "interval_ns": interval_us.map(|i| i * 1_000),
        "duration_ns": duration_s.map(|d| d * 1_000_000_000),
        "mode": "nanosleep",
        "policy": policy,
    });
    let mut record = RunRecord::new("timer", provenance, parameters, Obtained::default());
    record.complete = v.get("return_code").and_then(Value::as_i64).unwrap_or(0) == 0;
    record.threads = results;
    record.merged = Some(LatencyResult::from_histogram(
        &merged,
        MissCounter::default(),
    ));
    record.warnings = warnings;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cyclictest-2threads.json")
    }

    #[test]
    fn a_cyclictest_file_becomes_a_timer_record() {
        let sut = cyclictest(&fixture()).unwrap();
        assert_eq!(sut.probe, "timer");
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
