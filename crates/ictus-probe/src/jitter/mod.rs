//! `jitter`: execution-time variation (seed 002 Table 2; seed 000 Figure 3).
//!
//! A fixed routine (by default one million integer divisions, as seed 002's) is timed
//! many times on each selected CPU. The record gives, per thread, Tmin, `max - Tmin`
//! and that as a percentage of Tmin (seed 002 Table 2's columns), the histogram of
//! durations, and the runs that took more than twice Tmin with the time they started,
//! so periodic stalls (RT throttling's 50 ms every second, a host's quota) show.
//!
//! With `synchronised` set, the threads instead run a representative arithmetic kernel
//! on large data (`y = a x + y` over their own arrays) and meet at a spin rendezvous
//! after every step (seed 000 Figure 3): the step time then includes waiting for the
//! slowest thread.
//!
//! ```no_run
//! use ictus_probe::{jitter::{self, JitterParams}, progress::Progress};
//! let params = JitterParams { runs: 100, ..JitterParams::default() };
//! let record = jitter::run(&params, vec![], &Progress::new()).unwrap();
//! println!("{}", record.headline.unwrap());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use crate::view::Point;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use ictus_core::sync::SpinBarrier;
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{Runs, RunsLabels, RunsMetrics, SlowRun, SlowRunLabels, SlowRunMetrics};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, ThreadResult, Warning};
use crate::session::Session;
use crate::setup::{self, SchedSpec};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Jitter;
/// The longest vector of the synchronised routine: 2^24 f64 per array (two 128 MiB
/// arrays per thread).
pub const MAX_ELEMENTS: usize = 1 << 24;

/// Synchronised threads agree on stopping every this many steps.
const STOP_CHECK_EVERY: u64 = 64;

/// How many slow runs are listed per thread, at most.
const MAX_OUTLIERS: usize = 200;

/// What each thread computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Routine {
    /// `divisions` dependent integer divisions (seed 002).
    Divisions {
        /// Number of divisions per run.
        divisions: u64,
    },
    /// `y = a x + y` over `elements` f64 per thread, then a spin rendezvous of all
    /// threads (seed 000 Figure 3).
    Synchronised {
        /// Array length per thread.
        elements: usize,
    },
}

/// The jitter probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JitterParams {
    /// Threads, CPUs, policy, memory locking.
    pub sched: SchedSpec,
    /// The routine.
    pub routine: Routine,
    /// Timed runs per thread.
    pub runs: u64,
    /// Untimed runs first.
    pub warmup_runs: u64,
}

impl Default for JitterParams {
    /// One thread on the last online CPU at FIFO 95, one million divisions, 2000 runs.
    fn default() -> Self {
        let online = facts::online_cpus();
        let last = online.cpus().last().copied().unwrap_or(0);
        JitterParams {
            sched: SchedSpec::pinned(CpuSet::from_cpus([last]), Policy::Fifo { priority: 95 }),
            routine: Routine::Divisions {
                divisions: 1_000_000,
            },
            runs: 2_000,
            warmup_runs: 10,
        }
    }
}

/// Parameters a run cannot start with.
#[derive(Debug, Error)]
pub enum JitterError {
    /// A size or count beyond what this probe allocates or can time (checked before
    /// anything is allocated).
    #[error("{what} {value} is over the limit of {limit}")]
    TooLarge {
        /// What (`exchange (bytes per thread and step)`).
        what: &'static str,
        /// Asked for.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// Nothing to time.
    #[error("runs and the amount of work must be greater than zero")]
    NoWork,
    /// No CPU selected.
    #[error("no CPU selected")]
    NoCpu,
    /// The synchronised routine needs two threads or more.
    #[error("--threads 2 or more is needed for the synchronised kernel (got {0} CPU)")]
    TooFewThreads(usize),
    /// A thread could not be started.
    #[error("starting thread {thread} failed: {source}")]
    Spawn {
        /// Thread index.
        thread: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks the parameters before anything runs.
pub fn validate(params: &JitterParams) -> Result<(), JitterError> {
    if params.sched.cpus.is_empty() {
        return Err(JitterError::NoCpu);
    }
    let work = match params.routine {
        Routine::Divisions { divisions } => divisions as usize,
        Routine::Synchronised { elements } => {
            if params.sched.cpus.len() < 2 {
                return Err(JitterError::TooFewThreads(params.sched.cpus.len()));
            }
            if elements > MAX_ELEMENTS {
                return Err(JitterError::TooLarge {
                    what: "a vector (f64 elements per thread)",
                    value: elements as u64,
                    limit: MAX_ELEMENTS as u64,
                });
            }
            elements
        }
    };
    if params.runs == 0 || work == 0 {
        return Err(JitterError::NoWork);
    }
    Ok(())
}

/// One thread's durations.
struct Outcome {
    config: crate::record::ThreadConfig,
    warnings: Vec<Warning>,
    durations: LatencyHistogram,
    /// (run index, start offset from the thread's first run, duration) of slow runs.
    outliers: Vec<(u64, Nanos, Nanos)>,
}

/// Runs the probe.
pub fn run(
    params: &JitterParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, JitterError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    session.hold_pm_qos(params.sched.pm_qos);
    let threads = params.sched.cpus.len();
    progress.set_total(params.runs * threads as u64);
    let outcomes = measure_all(params, progress)?;
    if params.sched.policy.is_realtime() && facts::rt_throttling().is_some_and(|b| b.throttles()) {
        session.warn(throttled_warning());
    }

    let mut merged = LatencyHistogram::new();
    let mut results = Vec::new();
    let mut measurements = Vec::new();
    let mut worst: Option<(f64, usize)> = None;
    for (index, mut o) in outcomes.into_iter().enumerate() {
        session.warn_all(std::mem::take(&mut o.warnings));
        merged.merge(&o.durations);
        let latency = LatencyResult::from_histogram(&o.durations, MissCounter::default());
        if let Some(percent) = thread_measurements(index, &o, &latency, &mut measurements)
            && worst.is_none_or(|(p, _)| percent > p)
        {
            worst = Some((percent, index));
        }
        results.push(ThreadResult {
            thread: index,
            config: o.config,
            latency,
        });
    }
    let mut record = session.finish(PROBE.name(), params, progress);
    record.headline = worst.and_then(|(percent, index)| {
        headline(&measurements, percent, index, params.runs, results.len())
    });
    record.threads = results;
    record.merged = Some(LatencyResult::from_histogram(
        &merged,
        MissCounter::default(),
    ));
    record.measurements = measurements;
    progress.finish();
    Ok(record)
}

/// Runs a measuring thread on each CPU, started together, and gives their outcomes.
fn measure_all(params: &JitterParams, progress: &Progress) -> Result<Vec<Outcome>, JitterError> {
    let threads = params.sched.cpus.len();
    let barrier = SpinBarrier::new(threads);
    let halt = &AtomicBool::new(false);
    thread::scope(|scope| {
        let mut handles = Vec::new();
        for (index, &cpu) in params.sched.cpus.cpus().iter().enumerate() {
            let barrier = &barrier;
            let h = thread::Builder::new()
                .name(format!("ictus-jitter-{index}"))
                .spawn_scoped(scope, move || {
                    measure(params, index, cpu, barrier, halt, progress)
                })
                .map_err(|source| JitterError::Spawn {
                    thread: index,
                    source,
                })?;
            handles.push(h);
        }
        Ok::<_, JitterError>(
            handles
                .into_iter()
                .map(|h| h.join().expect("jitter threads do not panic"))
                .collect::<Vec<_>>(),
        )
    })
}

/// What RT throttling does to these figures, and how to measure without it.
fn throttled_warning() -> Warning {
    Warning {
        id: WarningId::RtThrottled,
        message: "RT throttling is on: a busy real-time thread is stalled for the rest of \
                  each period once it used its runtime (about 50 ms every second with the \
                  default 950000 of 1000000 us); those stalls are in these figures"
            .into(),
        advice: Some(
            "Measure with `sysctl kernel.sched_rt_runtime_us=-1` (restore it afterwards, \
             and keep a watchdog: a runaway loop then owns its CPU)."
                .into(),
        ),
    }
}

/// Adds thread `index`'s measurements (its runs' spread, with `latency`, and each
/// slow run) to `measurements`; gives its variation in percent of Tmin, if it ran.
fn thread_measurements(
    index: usize,
    o: &Outcome,
    latency: &LatencyResult,
    measurements: &mut Vec<Measurement>,
) -> Option<f64> {
    let cpu = o.config.pinned_cpu;
    let mut variation = None;
    if let (Some(tmin), Some(max)) = (o.durations.min(), o.durations.max()) {
        let spread = max.saturating_sub(tmin);
        let percent = 100.0 * spread.as_u64() as f64 / tmin.as_u64().max(1) as f64;
        variation = Some(percent);
        let runs = Point::<Runs>::new(
            RunsLabels { thread: index, cpu },
            RunsMetrics {
                tmin_ns: tmin.as_u64() as f64,
                max_minus_tmin_ns: spread.as_u64() as f64,
                variation_percent: percent,
                slow_runs: o.outliers.len() as f64,
            },
        );
        measurements.push(runs.measurement().with_latency(latency.clone()));
    }
    for &(run, at, duration) in &o.outliers {
        let slow = Point::<SlowRun>::new(
            SlowRunLabels {
                thread: index,
                run,
                at_ns: at.as_u64(),
            },
            SlowRunMetrics {
                duration_ns: duration.as_u64() as f64,
            },
        );
        measurements.push(slow.measurement());
    }
    variation
}

/// The headline: the worst thread's (`index`, its variation `percent`) Tmin and
/// spread over `runs` runs, of `threads` threads.
fn headline(
    measurements: &[Measurement],
    percent: f64,
    index: usize,
    runs: u64,
    threads: usize,
) -> Option<String> {
    let m = measurements
        .iter()
        .filter_map(|m| m.read::<Runs>())
        .find(|p| p.labels.thread == index)?
        .metrics;
    Some(format!(
        "Tmin {}, max - Tmin {} ({percent:.1} % of Tmin) over {runs} runs{}",
        Nanos::new(m.tmin_ns as u64),
        Nanos::new(m.max_minus_tmin_ns as u64),
        if threads > 1 {
            format!(" (worst of {threads} threads)")
        } else {
            String::new()
        }
    ))
}

/// One thread: prepare, warm up, time each run.
fn measure(
    params: &JitterParams,
    index: usize,
    cpu: usize,
    barrier: &SpinBarrier,
    halt: &AtomicBool,
    progress: &Progress,
) -> Outcome {
    let (config, warnings) =
        setup::prepare_thread(params.sched.pin.then_some(cpu), params.sched.policy);
    let mut durations = LatencyHistogram::new();
    let mut outliers = Vec::with_capacity(MAX_OUTLIERS);
    let mut data = match params.routine {
        Routine::Synchronised { elements } => (vec![1.0f64; elements], vec![0.5f64; elements]),
        Routine::Divisions { .. } => (Vec::new(), Vec::new()),
    };
    let mut tmin = Nanos::MAX;
    let mut runs_started = Nanos::ZERO;
    let synchronised = matches!(params.routine, Routine::Synchronised { .. });
    let total = params.warmup_runs + params.runs;
    for i in 0..total {
        if synchronised && i % STOP_CHECK_EVERY == 0 {
            // All threads must stop at the same step or the rendezvous would wait
            // forever: thread 0 decides before an extra (untimed) rendezvous, whose
            // synchronisation makes its decision visible to every thread after it.
            if index == 0 {
                // Relaxed: ordered by the barrier that follows.
                halt.store(progress.stop_requested(), Ordering::Relaxed);
            }
            barrier.wait();
            // Relaxed: ordered by the barrier above.
            if halt.load(Ordering::Relaxed) {
                break;
            }
        } else if !synchronised && progress.stop_requested() {
            break;
        }
        let t0 = monotonic_now();
        match params.routine {
            Routine::Divisions { divisions } => divide(divisions),
            Routine::Synchronised { .. } => {
                axpy(&mut data.1, &data.0, 1.000_001);
                barrier.wait();
            }
        }
        let t1 = monotonic_now();
        if i < params.warmup_runs {
            runs_started = t1;
            continue;
        }
        let d = t1.saturating_sub(t0);
        durations.record(d);
        tmin = tmin.min(d);
        if d > tmin * 2 && outliers.len() < MAX_OUTLIERS {
            outliers.push((i - params.warmup_runs, t0.saturating_sub(runs_started), d));
        }
        progress.advance(1);
    }
    // Runs recorded as slow before Tmin was known are re-judged against the final Tmin.
    outliers.retain(|&(_, _, d)| d > tmin * 2);
    black_box(&data);
    setup::release_thread();
    Outcome {
        config,
        warnings,
        durations,
        outliers,
    }
}

/// `n` 64-bit integer divisions the compiler can neither remove nor fold: each reads
/// its operands and writes its result through an optimisation barrier, like the
/// `volatile` operands of the C routine this machine's baseline was measured with.
#[inline(never)]
fn divide(n: u64) {
    let dividend = u64::MAX - 12_345;
    let divisor = 7u64;
    for _ in 0..n {
        black_box(black_box(dividend) / black_box(divisor));
    }
}

/// `y = a x + y`.
#[inline(never)]
fn axpy(y: &mut [f64], x: &[f64], a: f64) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = a.mul_add(*x, *y) * 0.999_999;
    }
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = JitterParams;
pub(crate) type ProbeFailure = JitterError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::reads_back;

    fn quick(routine: Routine, cpus: &[usize]) -> JitterParams {
        JitterParams {
            sched: SchedSpec::pinned(
                CpuSet::from_cpus(cpus.iter().copied()),
                Policy::Other { nice: 0 },
            ),
            routine,
            runs: 50,
            warmup_runs: 2,
        }
    }

    #[test]
    fn every_run_is_timed_and_tmin_is_the_minimum() {
        let cpu = facts::online_cpus().cpus()[0];
        let sut = run(
            &quick(Routine::Divisions { divisions: 10_000 }, &[cpu]),
            vec![],
            &Progress::new(),
        )
        .unwrap();
        assert_eq!(sut.probe, "jitter");
        assert_eq!(sut.threads[0].latency.summary.count, 50);
        let runs = reads_back::<Runs>(&sut.measurements[0]);
        assert_eq!(
            runs.labels,
            RunsLabels {
                thread: 0,
                cpu: Some(cpu)
            }
        );
        assert_eq!(
            runs.metrics.tmin_ns as u64,
            sut.threads[0].latency.summary.min_ns.unwrap().as_u64()
        );
        for m in &sut.measurements[1..] {
            let slow = reads_back::<SlowRun>(m);
            assert!(slow.metrics.duration_ns > 2.0 * runs.metrics.tmin_ns);
        }
        assert!(sut.headline.unwrap().starts_with("Tmin "));
    }

    #[test]
    fn synchronised_threads_each_time_every_step() {
        let online = facts::online_cpus();
        if online.len() < 2 {
            return;
        }
        let cpus = &online.cpus()[..2];
        let sut = run(
            &quick(Routine::Synchronised { elements: 4_096 }, cpus),
            vec![],
            &Progress::new(),
        )
        .unwrap();
        assert_eq!(sut.threads.len(), 2);
        assert!(sut.threads.iter().all(|t| t.latency.summary.count == 50));
        assert_eq!(sut.merged.unwrap().summary.count, 100);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let p = quick(Routine::Divisions { divisions: 0 }, &[0]);
        assert!(matches!(validate(&p), Err(JitterError::NoWork)));
        let p = quick(Routine::Synchronised { elements: 8 }, &[0]);
        assert!(matches!(validate(&p), Err(JitterError::TooFewThreads(1))));
    }
}
