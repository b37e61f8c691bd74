//! `timer`: timer wake-up latency, what cyclictest measures (seed 002 §5.1 user
//! latency; seed 003 tick generation).
//!
//! One measuring thread per selected CPU waits for absolute deadlines on a common
//! grid; lateness is `now - deadline` in integer nanoseconds. Unlike cyclictest,
//! periods missed entirely are counted (and the longest run of them), never silently
//! skipped, so `count + missed` is always the number of periods of the run.
//!
//! Each thread is prepared first (pinned, policy set and read back, stack prefaulted,
//! hybrid margin calibrated, histogram allocated), then all meet at a start barrier,
//! run a discarded warm-up, and measure. The hot loop only reads the clock and records.
//!
//! ```no_run
//! use ictus_probe::{progress::Progress, setup::Length, timer::{self, TimerParams}};
//! use ictus_core::Nanos;
//! let params = TimerParams {
//!     length: Length::Count(1_000),
//!     ..TimerParams::default()
//! };
//! let record = timer::run(&params, vec!["example".into()], &Progress::new()).unwrap();
//! println!("{:?}", record.merged.map(|m| m.summary.max_ns));
//! ```

#[cfg(feature = "cli")]
pub mod cli;
use std::sync::{Condvar, Mutex};
use std::thread;

use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos, PeriodicDeadlines};
use ictus_explain::MissReporter;
use ictus_os::clock::monotonic_now;
use ictus_os::pm_qos::PmQos;
use ictus_os::sched::Policy;
use ictus_os::wait::{self, WaitMode};
use ictus_os::{facts, memory};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::progress::Progress;
use crate::record::{LatencyResult, RunRecord, ThreadConfig, ThreadResult, Warning};
use crate::session::Session;
use crate::setup::{self, Length, SchedSpec};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Timer;

/// How the measuring threads wait, as asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "mode")]
pub enum ModeRequest {
    /// `clock_nanosleep(TIMER_ABSTIME)`.
    Nanosleep,
    /// Sleep then spin; without a margin, it is calibrated per thread from the
    /// measured wake-up latency.
    Hybrid {
        /// The margin, or `None` to calibrate.
        margin: Option<Nanos>,
    },
    /// Busy wait.
    Spin,
}

/// `--mode` on the command line: the mode's name; a hybrid margin comes from
/// `--margin` (none parsed here: calibrated).
#[cfg(feature = "cli")]
impl clap::ValueEnum for ModeRequest {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            ModeRequest::Nanosleep,
            ModeRequest::Hybrid { margin: None },
            ModeRequest::Spin,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            ModeRequest::Nanosleep => PossibleValue::new("nanosleep")
                .help("clock_nanosleep with TIMER_ABSTIME (as cyclictest)"),
            ModeRequest::Hybrid { .. } => {
                PossibleValue::new("hybrid").help("Sleep until deadline minus a margin, then spin")
            }
            ModeRequest::Spin => PossibleValue::new("spin").help("Busy-wait on the clock"),
        })
    }
}

/// The timer probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerParams {
    /// Period between deadlines.
    pub interval: Nanos,
    /// How long to measure (after the warm-up).
    pub length: Length,
    /// One measuring thread per CPU of `sched.cpus`, pinned to it unless `sched.pin`
    /// is off; their policy, memory locking, the CPU latency QoS held for the run (0 us
    /// as cyclictest; `off`: as the machine idles, cyclictest's `--laptop`), and
    /// whether every release later than the threshold (default: the interval), and
    /// every missed period, is explained.
    pub sched: SchedSpec,
    /// How to wait for each deadline.
    pub mode: ModeRequest,
    /// Warm-up before measuring, discarded.
    pub warmup: Nanos,
}

impl Default for TimerParams {
    /// 1 ms interval for 10 s, on every online CPU, SCHED_FIFO 95, nanosleep, 100 ms
    /// warm-up, the CPU latency QoS held at 0 us, misses explained.
    fn default() -> Self {
        TimerParams {
            interval: Nanos::from_millis(1),
            length: Length::Duration(Nanos::from_secs(10)),
            sched: SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 }),
            mode: ModeRequest::Nanosleep,
            warmup: Nanos::from_millis(100),
        }
    }
}

impl TimerParams {
    /// Periods each thread measures.
    pub fn loops(&self) -> u64 {
        match self.length {
            Length::Count(n) => n,
            Length::Duration(d) => d.as_u64() / self.interval.as_u64().max(1),
        }
    }

    /// Periods of warm-up each thread runs first.
    pub fn warmup_loops(&self) -> u64 {
        self.warmup.as_u64() / self.interval.as_u64().max(1)
    }
}

/// Parameters a run cannot start with.
#[derive(Debug, Error)]
pub enum TimerError {
    /// Interval of zero.
    #[error("the interval must be greater than zero")]
    ZeroInterval,
    /// No CPU selected.
    #[error("no CPU selected")]
    NoCpu,
    /// Too short to measure anything.
    #[error("the run is shorter than one interval ({interval}): nothing would be measured")]
    TooShort {
        /// The interval.
        interval: Nanos,
    },
    /// A hybrid margin not shorter than the interval: every wait would be all spin,
    /// which is spin mode under another name.
    #[error("the hybrid margin {margin} must be shorter than the interval {interval}")]
    Margin {
        /// The margin asked for.
        margin: Nanos,
        /// The interval.
        interval: Nanos,
    },
    /// A CPU not online, or a policy the kernel can never accept.
    #[error(transparent)]
    Setup(#[from] crate::setup::PlacementError),
}

/// Checks the parameters before anything is changed on the machine.
pub fn validate(params: &TimerParams) -> Result<(), TimerError> {
    if params.interval == Nanos::ZERO {
        return Err(TimerError::ZeroInterval);
    }
    if params.sched.cpus.is_empty() {
        return Err(TimerError::NoCpu);
    }
    if let ModeRequest::Hybrid {
        margin: Some(margin),
    } = params.mode
        && margin >= params.interval
    {
        return Err(TimerError::Margin {
            margin,
            interval: params.interval,
        });
    }
    if params.loops() == 0 {
        return Err(TimerError::TooShort {
            interval: params.interval,
        });
    }
    Ok(setup::check_placement(
        params.sched.cpus.cpus(),
        params.sched.policy,
    )?)
}

/// What one measuring thread hands back.
struct ThreadOutcome {
    config: ThreadConfig,
    histogram: LatencyHistogram,
    misses: MissCounter,
    warnings: Vec<Warning>,
}

/// How many progress units a thread accumulates before publishing them.
const PROGRESS_BATCH: u64 = 256;

/// Runs the timer probe. Blocks until done or until `progress` asks to stop.
pub fn run(
    params: &TimerParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, TimerError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    session.hold_pm_qos(params.sched.pm_qos);
    let loops = params.loops();
    let warmup = params.warmup_loops();
    let threads = params.sched.cpus.len();
    progress.set_total(loops * threads as u64);
    let names: Vec<String> = (0..threads).map(|i| format!("timer-{i}")).collect();
    let threshold = params.sched.explain_threshold.unwrap_or(params.interval);
    let reporters = session.explain(params.sched.explain, &params.sched.cpus, threshold, &names);

    let gate = StartGate::default();
    let outcomes = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for ((index, &cpu), reporter) in params.sched.cpus.cpus().iter().enumerate().zip(reporters)
        {
            let gate = &gate;
            let spawned = thread::Builder::new()
                .name(format!("ictus-timer-{index}"))
                .stack_size(2 * memory::PREFAULT_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    measure(params, cpu, loops, warmup, progress, gate, reporter)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // Release the threads already waiting at the gate, then report.
                    gate.abort();
                    return Err(TimerError::Setup(setup::PlacementError::Spawn {
                        thread: index,
                        source,
                    }));
                }
            }
        }
        gate.wait_for(threads);
        // Every thread is prepared; the first deadline leaves time for all to arm it.
        gate.open(monotonic_now() + params.interval.max(Nanos::from_millis(1)));
        Ok(handles
            .into_iter()
            .map(|h| h.join().expect("measuring threads do not panic"))
            .collect::<Vec<_>>())
    })?;

    if matches!(params.mode, ModeRequest::Spin | ModeRequest::Hybrid { .. }) {
        session.warn_if_no_cpu_left(
            params.sched.policy,
            params.sched.cpus.len(),
            "real-time threads spin on every online CPU: the rest of the system only runs \
             while RT throttling stalls them",
            "Leave at least one CPU out of --cpus for the system.",
        );
    }
    let mut merged = LatencyHistogram::new();
    let mut merged_misses = MissCounter::default();
    let mut results = Vec::with_capacity(outcomes.len());
    for (index, outcome) in outcomes.into_iter().enumerate() {
        merged.merge(&outcome.histogram);
        merged_misses.merge(&outcome.misses);
        session.warn_all(outcome.warnings);
        results.push(ThreadResult {
            thread: index,
            config: outcome.config,
            latency: LatencyResult::from_histogram(&outcome.histogram, outcome.misses),
        });
    }
    let mut record = session.finish(PROBE.name(), &ParamsRecord::from(params), progress);
    record.threads = results;
    record.merged = Some(LatencyResult::from_histogram(&merged, merged_misses));
    progress.finish();
    Ok(record)
}

/// The parameters as the probe records them (units in the key names), and as
/// readers read them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    /// Period between deadlines.
    pub interval_ns: u64,
    /// How long each thread measured, when asked for as a duration.
    pub duration_ns: Option<u64>,
    /// Periods each thread measured.
    pub loops: u64,
    /// Warm-up before measuring.
    pub warmup_ns: u64,
    /// Periods of warm-up.
    pub warmup_loops: u64,
    /// One measuring thread per CPU of this set.
    pub cpus: CpuSet,
    /// Each thread pinned to its CPU.
    pub pin: bool,
    /// The policy asked for.
    pub policy: Policy,
    /// All memory locked.
    pub mlock: bool,
    /// How each deadline was waited for: `nanosleep`, `hybrid` or `spin`.
    pub mode: String,
    /// The hybrid wait's margin, when given (otherwise calibrated per thread).
    pub hybrid_margin_ns: Option<u64>,
    /// The CPU latency QoS asked for (what was in force: `obtained.pm_qos`).
    #[serde(default)]
    pub pm_qos: Option<PmQos>,
    /// Whether misses were explained.
    #[serde(default)]
    pub explain: bool,
    /// The lateness from which a release was a miss to explain.
    #[serde(default)]
    pub explain_threshold_ns: Option<u64>,
}

/// A timer record's parameters, whichever wrote them: this probe, or the import of a
/// cyclictest run.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RecordedParams {
    /// Written by [`run`].
    Probe(ParamsRecord),
    /// Written by [`crate::import::cyclictest`].
    Imported(CyclictestParams),
}

/// The parameters of a timer record imported from cyclictest (units in the key
/// names; [`crate::import::cyclictest`] writes them); [`RecordedParams`] reads them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CyclictestParams {
    /// Always `cyclictest`.
    pub imported_from: String,
    /// cyclictest's command line.
    pub cmdline: String,
    /// Its interval (`-i`), when given.
    pub interval_ns: Option<u64>,
    /// Its duration (`-D`), when given.
    pub duration_ns: Option<u64>,
    /// How it waited: `nanosleep`.
    pub mode: String,
    /// The policy its priority (`-p`) gives.
    pub policy: Policy,
}

impl RecordedParams {
    /// The period between deadlines, when known.
    pub fn interval_ns(&self) -> Option<u64> {
        match self {
            RecordedParams::Probe(p) => Some(p.interval_ns),
            RecordedParams::Imported(p) => p.interval_ns,
        }
    }

    /// The periods each thread measured, when known.
    pub fn loops(&self) -> Option<u64> {
        match self {
            RecordedParams::Probe(p) => Some(p.loops),
            RecordedParams::Imported(_) => None,
        }
    }

    /// How each deadline was waited for.
    pub fn mode(&self) -> &str {
        match self {
            RecordedParams::Probe(p) => &p.mode,
            RecordedParams::Imported(p) => &p.mode,
        }
    }
}

impl From<&TimerParams> for ParamsRecord {
    fn from(p: &TimerParams) -> Self {
        ParamsRecord {
            interval_ns: p.interval.as_u64(),
            duration_ns: match p.length {
                Length::Duration(d) => Some(d.as_u64()),
                Length::Count(_) => None,
            },
            loops: p.loops(),
            warmup_ns: p.warmup.as_u64(),
            warmup_loops: p.warmup_loops(),
            cpus: p.sched.cpus.clone(),
            pin: p.sched.pin,
            policy: p.sched.policy,
            mlock: p.sched.mlock,
            mode: match p.mode {
                ModeRequest::Nanosleep => "nanosleep",
                ModeRequest::Hybrid { .. } => "hybrid",
                ModeRequest::Spin => "spin",
            }
            .to_string(),
            hybrid_margin_ns: match p.mode {
                ModeRequest::Hybrid { margin } => margin.map(Nanos::as_u64),
                _ => None,
            },
            pm_qos: Some(p.sched.pm_qos),
            explain: p.sched.explain,
            explain_threshold_ns: Some(p.sched.explain_threshold.unwrap_or(p.interval).as_u64()),
        }
    }
}

/// The hot loop: wait for each deadline of `grid`, record the lateness, count and skip
/// missed periods, report each miss to `reporter` (one push into its ring), until the
/// grid ends or a stop is requested. Reads the clock, writes preallocated memory and
/// one relaxed atomic per batch; never allocates, locks or makes a system call other
/// than the wait.
pub fn measure_grid(
    grid: &mut PeriodicDeadlines,
    mode: WaitMode,
    histogram: &mut LatencyHistogram,
    misses: &mut MissCounter,
    progress: &Progress,
    mut reporter: Option<&mut MissReporter>,
) {
    let mut unpublished = 0u64;
    while let Some(deadline) = grid.next_deadline() {
        if progress.stop_requested() {
            break;
        }
        let seq = grid.index();
        let woke = wait::wait_until(deadline, mode);
        let release = grid.complete(woke);
        histogram.record(release.lateness);
        misses.add(&release);
        if let Some(r) = reporter.as_deref_mut() {
            r.release(seq, deadline, release.lateness, release.missed);
        }
        unpublished += 1 + release.missed;
        if unpublished >= PROGRESS_BATCH {
            progress.advance(unpublished);
            unpublished = 0;
        }
    }
    progress.advance(unpublished);
}

/// Where prepared threads wait for a common start (or an abort).
struct StartGate {
    state: Mutex<Gate>,
    changed: Condvar,
}

impl Default for StartGate {
    fn default() -> Self {
        StartGate {
            state: Mutex::new(Gate::Arrived(0)),
            changed: Condvar::new(),
        }
    }
}

#[derive(Clone, Copy)]
enum Gate {
    /// This many threads are prepared and waiting.
    Arrived(usize),
    /// Start: the first deadline.
    Open(Nanos),
    /// Give up without measuring.
    Aborted,
}

impl StartGate {
    /// A prepared thread arrives; returns the start time, or `None` on abort.
    fn arrive_and_wait(&self) -> Option<Nanos> {
        let mut state = self.state.lock().expect("gate lock is never poisoned");
        if let Gate::Arrived(n) = *state {
            *state = Gate::Arrived(n + 1);
        }
        self.changed.notify_all();
        loop {
            match *state {
                Gate::Open(t0) => return Some(t0),
                Gate::Aborted => return None,
                _ => {
                    state = self
                        .changed
                        .wait(state)
                        .expect("gate lock is never poisoned")
                }
            }
        }
    }
    /// Waits until `n` threads have arrived.
    fn wait_for(&self, n: usize) {
        let mut state = self.state.lock().expect("gate lock is never poisoned");
        while !matches!(*state, Gate::Arrived(k) if k >= n) {
            state = self
                .changed
                .wait(state)
                .expect("gate lock is never poisoned");
        }
    }
    fn open(&self, t0: Nanos) {
        *self.state.lock().expect("gate lock is never poisoned") = Gate::Open(t0);
        self.changed.notify_all();
    }
    fn abort(&self) {
        *self.state.lock().expect("gate lock is never poisoned") = Gate::Aborted;
        self.changed.notify_all();
    }
}

/// One measuring thread: prepare, meet, warm up, measure.
fn measure(
    params: &TimerParams,
    cpu: usize,
    loops: u64,
    warmup: u64,
    progress: &Progress,
    gate: &StartGate,
    mut reporter: Option<MissReporter>,
) -> ThreadOutcome {
    let (mut config, warnings) =
        setup::prepare_thread(params.sched.pin.then_some(cpu), params.sched.policy);
    if let Some(r) = &reporter {
        r.attach();
    }
    let mode = match params.mode {
        ModeRequest::Nanosleep => WaitMode::Nanosleep,
        ModeRequest::Spin => WaitMode::Spin,
        ModeRequest::Hybrid { margin: Some(m) } => WaitMode::Hybrid { margin: m },
        ModeRequest::Hybrid { margin: None } => {
            let samples =
                (Nanos::from_millis(300).as_u64() / params.interval.as_u64()).clamp(100, 2_000);
            let cal = wait::calibrate_margin(params.interval, samples);
            WaitMode::Hybrid {
                margin: cal.margin_ns,
            }
        }
    };
    if let WaitMode::Hybrid { margin } = mode {
        config.hybrid_margin_ns = Some(margin.as_u64());
    }
    let mut histogram = LatencyHistogram::new();
    let mut misses = MissCounter::default();

    let Some(t0) = gate.arrive_and_wait() else {
        return ThreadOutcome {
            config,
            histogram,
            misses,
            warnings,
        };
    };

    // Warm-up on the same grid, discarded.
    let interval = params.interval;
    let mut grid = PeriodicDeadlines::new(t0, interval, Some(warmup)).expect("interval > 0");
    while let Some(deadline) = grid.next_deadline() {
        if progress.stop_requested() {
            break;
        }
        let woke = wait::wait_until(deadline, mode);
        grid.complete(woke);
    }
    // Measure: the grid continues where the warm-up ended, so phase is kept.
    let first = t0 + interval * grid.index();
    let mut grid = PeriodicDeadlines::new(first, interval, Some(loops)).expect("interval > 0");
    measure_grid(
        &mut grid,
        mode,
        &mut histogram,
        &mut misses,
        progress,
        reporter.as_mut(),
    );

    // Teardown: leave the thread as an ordinary one (it ends right after).
    setup::release_thread();
    ThreadOutcome {
        config,
        histogram,
        misses,
        warnings,
    }
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = TimerParams;
pub(crate) type ProbeFailure = TimerError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::PlacementError;

    fn quick() -> TimerParams {
        TimerParams {
            interval: Nanos::from_micros(500),
            length: Length::Count(200),
            sched: SchedSpec {
                cpus: CpuSet::from_cpus([facts::online_cpus().cpus()[0]]),
                policy: Policy::Other { nice: 0 },
                ..TimerParams::default().sched
            },
            warmup: Nanos::from_millis(5),
            ..TimerParams::default()
        }
    }

    #[test]
    fn count_plus_missed_is_the_number_of_periods() {
        let sut = run(&quick(), vec![], &Progress::new()).unwrap();
        assert!(sut.complete);
        assert_eq!(sut.threads.len(), 1);
        let m = sut.merged.as_ref().unwrap();
        assert_eq!(m.summary.count + m.missed, 200);
        assert!(m.longest_miss_run <= m.missed);
    }

    #[test]
    fn a_stop_request_gives_an_incomplete_record() {
        let progress = Progress::new();
        progress.request_stop();
        let sut = run(&quick(), vec![], &progress).unwrap();
        assert!(!sut.complete);
        assert!(sut.merged.unwrap().summary.count < 200);
    }

    #[test]
    fn bad_parameters_are_refused_before_anything_runs() {
        let zero = TimerParams {
            interval: Nanos::ZERO,
            ..quick()
        };
        assert!(matches!(validate(&zero), Err(TimerError::ZeroInterval)));
        let mut offline = quick();
        offline.sched.cpus = CpuSet::from_cpus([999]);
        assert!(matches!(
            validate(&offline),
            Err(TimerError::Setup(PlacementError::CpuOffline {
                cpu: 999,
                ..
            }))
        ));
        let mut prio = quick();
        prio.sched.policy = Policy::Fifo { priority: 200 };
        assert!(matches!(
            validate(&prio),
            Err(TimerError::Setup(PlacementError::Policy(_)))
        ));
        let short = TimerParams {
            length: Length::Duration(Nanos::from_micros(100)),
            ..quick()
        };
        assert!(matches!(validate(&short), Err(TimerError::TooShort { .. })));
    }

    #[test]
    fn a_hybrid_margin_not_shorter_than_the_interval_is_refused() {
        for margin in [Nanos::from_micros(500), Nanos::from_millis(2)] {
            let sut = TimerParams {
                mode: ModeRequest::Hybrid {
                    margin: Some(margin),
                },
                ..quick()
            };
            assert!(matches!(validate(&sut), Err(TimerError::Margin { .. })));
        }
        let shorter = TimerParams {
            mode: ModeRequest::Hybrid {
                margin: Some(Nanos::from_micros(499)),
            },
            ..quick()
        };
        assert!(validate(&shorter).is_ok());
    }

    #[test]
    fn every_mode_measures() {
        for mode in [
            ModeRequest::Nanosleep,
            ModeRequest::Hybrid { margin: None },
            ModeRequest::Spin,
        ] {
            let params = TimerParams {
                mode,
                length: Length::Count(50),
                ..quick()
            };
            let sut = run(&params, vec![], &Progress::new()).unwrap();
            let m = sut.merged.unwrap();
            assert_eq!(m.summary.count + m.missed, 50);
            let margin = sut.threads[0].config.hybrid_margin_ns;
            assert_eq!(margin.is_some(), matches!(mode, ModeRequest::Hybrid { .. }));
        }
    }
}
