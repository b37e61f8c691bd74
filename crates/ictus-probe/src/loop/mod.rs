//! `loop`: can this machine hold a fully synchronous loop? (seed 000 §3.1, Table 1:
//! the headline question.)
//!
//! K threads on K CPUs run, every period T: input (the leader reads 64 samples of 16
//! bits and moves the model's input point), a rendezvous exchanging 512 bytes
//! (positions), each thread's share of the mass-interaction model's forces, a
//! rendezvous exchanging 512 bytes (forces), each thread's share of the integration,
//! output (the leader writes 64 samples of 16 bits). The leader is released by
//! absolute deadline with the hybrid wait; the others sleep until just before the
//! same deadline and are released by the first rendezvous, which also carries the
//! leader's release number, so all threads always run the same step.
//!
//! A step misses when it completes after its period, or when its release was skipped
//! because an earlier step ran past it. The record gives the completion time and slack
//! distributions, the misses and their longest run; with `find_max`, the highest
//! frequency with zero misses over the given number of steps.
//!
//! ```no_run
//! use ictus_probe::{r#loop::{self, LoopParams}, progress::Progress};
//! let record = r#loop::run(&LoopParams::default(), vec![], &Progress::new()).unwrap();
//! println!("{}", record.headline.unwrap());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "words a measured loop publishes to its partner thread: the probe measures exactly these raw stores and loads"
)]

#[cfg(feature = "cli")]
pub mod cli;
mod params;
pub mod trace;
pub mod view;

use crate::view::Point;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use ictus_core::mass::{Model, Params, Part};
use ictus_core::{
    CpuSet, LatencyHistogram, MissCounter, Nanos, Percentile, PeriodicDeadlines, Release,
};
use ictus_explain::{MissEvent, MissKind, MissReporter};
use ictus_os::clock::monotonic_now;
use ictus_os::fs::OutputError;
use ictus_os::wait::{self, WaitMode};
use thiserror::Error;

pub use self::params::{
    FindMax, LoopParams, MAX_FREQUENCY_HZ, MIN_FREQUENCY_HZ, PROBE, SAMPLES_PER_STEP,
};
use self::params::{khz, period_of};
use self::trace::{Marks, StepMarks, Trial};
use self::view::{TrialLabels, TrialMetrics};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, ThreadConfig, ThreadResult};
use crate::rendezvous::Exchange;
use crate::session::Session;
use crate::setup::{self};
use ictus_core::warning::Warning;

/// The most bytes a thread may send at each rendezvous of a step: 1 MiB (seed 000's
/// loops exchange hundreds of bytes).
pub const MAX_EXCHANGE_BYTES: usize = 1 << 20;

/// Parameters a run cannot start with.
#[derive(Debug, Error)]
pub enum LoopError {
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
    /// Threads out of range.
    #[error("the loop runs 1 to {cpus} threads here (one per CPU), got {threads}")]
    Threads {
        /// Asked for.
        threads: usize,
        /// CPUs given.
        cpus: usize,
    },
    /// Frequency out of range.
    #[error(
        "the frequency must be between {MIN_FREQUENCY_HZ} Hz and {MAX_FREQUENCY_HZ} Hz, got {0} Hz"
    )]
    Frequency(f64),
    /// Model too small.
    #[error("the model needs at least 3 modules per thread ({needed}), got {got}")]
    Model {
        /// Needed.
        needed: usize,
        /// Given.
        got: usize,
    },
    /// Nothing to run.
    #[error("steps must be greater than zero")]
    NoSteps,
    /// Unpinned threads.
    #[error("the loop pins each thread to its own CPU; --no-pin is not supported")]
    Unpinned,
    /// The trace file could not be written.
    #[error("writing the trace")]
    Trace(#[from] OutputError),
}

/// Checks the parameters.
pub fn validate(p: &LoopParams) -> Result<(), LoopError> {
    if !p.sched.pin {
        return Err(LoopError::Unpinned);
    }
    let cpus = p.sched.cpus.len();
    if p.threads == 0 || p.threads > cpus {
        return Err(LoopError::Threads {
            threads: p.threads,
            cpus,
        });
    }
    if !(MIN_FREQUENCY_HZ..=MAX_FREQUENCY_HZ).contains(&p.frequency_hz) {
        return Err(LoopError::Frequency(p.frequency_hz));
    }
    if p.modules > crate::compute::MAX_MODULES {
        return Err(LoopError::TooLarge {
            what: "a model (modules)",
            value: p.modules as u64,
            limit: crate::compute::MAX_MODULES as u64,
        });
    }
    if p.exchange_bytes > MAX_EXCHANGE_BYTES {
        return Err(LoopError::TooLarge {
            what: "an exchange (bytes per thread and rendezvous)",
            value: p.exchange_bytes as u64,
            limit: MAX_EXCHANGE_BYTES as u64,
        });
    }
    if p.modules < 3 * p.threads {
        return Err(LoopError::Model {
            needed: 3 * p.threads,
            got: p.modules,
        });
    }
    if p.steps == 0 {
        return Err(LoopError::NoSteps);
    }
    Ok(())
}

/// Runs the probe.
pub fn run(
    params: &LoopParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, LoopError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    session.hold_pm_qos(params.sched.pm_qos);
    session.warn_if_no_cpu_left(
        params.sched.policy,
        params.threads,
        "the loop's real-time threads take every online CPU: the rest of the system only \
         runs in their idle time and while RT throttling stalls them",
        "On a machine with more CPUs, leave one for the system.",
    );
    let mut reporter = leader_reporter(&mut session, params);
    let mut timeline = params
        .trace
        .as_ref()
        .map(|spec| trace::Timeline::create(spec, params))
        .transpose()?;
    let mut trials = Vec::new();
    match params.find_max {
        None => {
            progress.set_total(params.steps);
            let mut t = trial(
                params,
                params.frequency_hz,
                params.steps,
                progress,
                reporter.as_mut(),
                timeline
                    .as_ref()
                    .map_or(0, |w| w.steps_room(params.threads)),
            );
            if let Some(w) = timeline.as_mut() {
                w.add(&mut t, &params.sched.cpus.cpus()[..params.threads])?;
            }
            trials.push(t);
        }
        Some(fm) => {
            progress.set_total(12);
            search(
                params,
                fm,
                progress,
                reporter.as_mut(),
                &mut timeline,
                &mut trials,
            )?;
        }
    }

    let mut measurements = Vec::new();
    for t in &trials {
        measurements.push(trial_measurement(params, t));
    }
    let best = trials
        .iter()
        .filter(|t| t.misses() == 0 && !t.stopped)
        .max_by(|a, b| a.frequency_hz.total_cmp(&b.frequency_hz));
    let headline = headline(params, &trials, best);
    let shown = best.or(trials.first());
    let mut threads = Vec::new();
    let mut merged = None;
    if let Some(t) = shown {
        session.warn_all(t.warnings.clone());
        threads = thread_results(t);
        merged = Some(completion_result(t));
    }
    if let Some(w) = timeline
        && let Some(warning) = w.finish()?
    {
        session.warn(warning);
    }
    let mut record = session.finish(PROBE.name(), params, progress);
    record.headline = Some(headline);
    record.threads = threads;
    record.merged = merged;
    record.measurements = measurements;
    progress.finish();
    Ok(record)
}

/// The reporter of the leader's misses (the rendezvous make a follower's delay the
/// leader's too; the window is read on the leader's CPU). The threshold is the
/// longest period tried: a step completing later than its period is a miss.
fn leader_reporter(session: &mut Session, params: &LoopParams) -> Option<MissReporter> {
    let longest_period = period_of(
        params.frequency_hz.min(
            params
                .find_max
                .map_or(params.frequency_hz, |f| f.floor_hz.max(MIN_FREQUENCY_HZ)),
        ),
    );
    let leader_cpu = CpuSet::from_cpus([params.sched.cpus.cpus()[0]]);
    session
        .explain(
            params.sched.explain,
            &leader_cpu,
            params.sched.explain_threshold.unwrap_or(longest_period),
            &["loop-leader".to_string()],
        )
        .pop()
        .flatten()
}

/// The search of `find_max`: trials at a frequency doubled while they pass and
/// halved while they fail, then bisected between the highest pass and the lowest
/// fail to the resolution (16 trials at most), each added to `trials` (and to the
/// `timeline`).
fn search(
    params: &LoopParams,
    fm: FindMax,
    progress: &Progress,
    mut reporter: Option<&mut MissReporter>,
    timeline: &mut Option<trace::Timeline>,
    trials: &mut Vec<Trial>,
) -> Result<(), LoopError> {
    let mut pass: Option<f64> = None;
    let mut fail: Option<f64> = None;
    let mut f = params.frequency_hz;
    loop {
        if progress.stop_requested() {
            break;
        }
        let steps = trial_steps(params.steps, f, fm.max_trial);
        let room = timeline
            .as_ref()
            .map_or(0, |w| w.steps_room(params.threads));
        let mut t = trial(
            params,
            f,
            steps,
            &Progress::new(),
            reporter.as_deref_mut(),
            room,
        );
        if let Some(w) = timeline.as_mut() {
            w.add(&mut t, &params.sched.cpus.cpus()[..params.threads])?;
        }
        progress.advance(1);
        let ok = t.misses() == 0 && !t.stopped;
        trials.push(t);
        if ok {
            pass = Some(pass.map_or(f, |p: f64| p.max(f)));
        } else {
            fail = Some(fail.map_or(f, |x: f64| x.min(f)));
        }
        f = match (pass, fail) {
            (Some(p), None) if p * 2.0 <= MAX_FREQUENCY_HZ => p * 2.0,
            (Some(_), None) => break,
            (None, Some(x)) if x / 2.0 >= fm.floor_hz.max(MIN_FREQUENCY_HZ) => x / 2.0,
            (None, Some(_)) => break,
            (Some(p), Some(x)) if x / p > 1.0 + fm.resolution => (p * x).sqrt(),
            _ => break,
        };
        if trials.len() >= 16 {
            break;
        }
    }
    Ok(())
}

/// The threads of trial `t` as the record shows them: the leader with the steps'
/// completion times, the others with none.
fn thread_results(t: &Trial) -> Vec<ThreadResult> {
    t.configs
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, config)| ThreadResult {
            thread: i,
            config,
            latency: if i == 0 {
                completion_result(t)
            } else {
                LatencyResult::from_histogram(&LatencyHistogram::new(), MissCounter::default())
            },
        })
        .collect()
}

fn completion_result(t: &Trial) -> LatencyResult {
    let mut r = LatencyResult::from_histogram(&t.completion, t.skipped);
    r.longest_miss_run = t.longest_run;
    r
}

/// Steps of one search trial: the requested count, fewer when that would take longer
/// than `max_trial`, never fewer than 1,000.
fn trial_steps(steps: u64, frequency_hz: f64, max_trial: Nanos) -> u64 {
    let fit = (max_trial.as_secs_f64() * frequency_hz) as u64;
    steps.min(fit).max(1_000)
}

fn trial_measurement(params: &LoopParams, t: &Trial) -> Measurement {
    let ns = |v: Option<Nanos>| v.map(|n| n.as_u64() as f64);
    let labels = TrialLabels {
        frequency_hz: t.frequency_hz,
        period_ns: period_of(t.frequency_hz).as_u64(),
        threads: params.threads,
        modules: params.modules,
        exchange_bytes: params.exchange_bytes,
        steps: t.steps,
    };
    let metrics = TrialMetrics {
        misses: t.misses() as f64,
        late_steps: t.late as f64,
        skipped_releases: t.skipped.missed as f64,
        longest_miss_run: t.longest_run as f64,
        hybrid_margin_ns: t.margin.as_u64() as f64,
        worst_completion_ns: ns(t.completion.summary().max_ns),
        min_slack_ns: ns(t.slack.min()),
        release_p99_ns: ns(t.release.percentile(Percentile::P99)),
        release_max_ns: ns(t.release.max()),
    };
    Point::<view::Trial>::new(labels, metrics)
        .measurement()
        .with_latency(completion_result(t))
}

fn headline(params: &LoopParams, trials: &[Trial], best: Option<&Trial>) -> String {
    let what = format!(
        "on {} core{}, model {} modules, exchange {} B",
        params.threads,
        if params.threads == 1 { "" } else { "s" },
        params.modules,
        params.exchange_bytes
    );
    let describe = |t: &Trial| {
        format!(
            "{} of {} steps missed (longest run {}), worst step {} against a {} period",
            t.misses(),
            t.steps,
            t.longest_run,
            t.completion.max().unwrap_or(Nanos::ZERO),
            period_of(t.frequency_hz)
        )
    };
    match (params.find_max, best) {
        (None, Some(t)) => format!(
            "sustains {} {what}: 0 misses in {} steps, worst step {} of its {} period",
            khz(t.frequency_hz),
            t.steps,
            t.completion.max().unwrap_or(Nanos::ZERO),
            period_of(t.frequency_hz)
        ),
        (None, None) => match trials.first() {
            Some(t) => format!(
                "does not sustain {} {what}: {}",
                khz(t.frequency_hz),
                describe(t)
            ),
            None => format!("no trial ran {what}"),
        },
        (Some(_), Some(t)) => {
            let next_fail = trials
                .iter()
                .filter(|x| x.frequency_hz > t.frequency_hz && x.misses() > 0)
                .min_by(|a, b| a.frequency_hz.total_cmp(&b.frequency_hz));
            format!(
                "sustains {} {what}: the highest frequency with 0 misses over {} steps{}",
                khz(t.frequency_hz),
                t.steps,
                next_fail.map_or(String::new(), |x| format!(
                    "; at {}: {}",
                    khz(x.frequency_hz),
                    describe(x)
                ))
            )
        }
        (Some(_), None) => match trials
            .iter()
            .min_by(|a, b| a.frequency_hz.total_cmp(&b.frequency_hz))
        {
            Some(t) => format!(
                "does not sustain even {} {what}: {}",
                khz(t.frequency_hz),
                describe(t)
            ),
            None => format!("no trial ran {what}"),
        },
    }
}

/// What the leader tells the others at the first rendezvous of a step.
const CONTROL_STOP: u64 = u64::MAX;

/// One trial at `frequency_hz` for `steps` steps.
fn trial(
    params: &LoopParams,
    frequency_hz: f64,
    steps: u64,
    progress: &Progress,
    reporter: Option<&mut MissReporter>,
    traced_steps: usize,
) -> Trial {
    let period = period_of(frequency_hz);
    let k = params.threads;
    let masses = (params.modules.saturating_sub(1) / 2).max(k);
    let model = Model::chain(masses, &Params::default()).expect("default parameters build a chain");
    let parts = model.partition(k);
    let exchange = Exchange::new(k, 128, params.exchange_bytes.max(16));
    let cpus: Vec<usize> = params.sched.cpus.cpus()[..k].to_vec();
    // The leader publishes the start of the grid and the margin here before the first
    // rendezvous; the others read them after it.
    let start = AtomicU64::new(0);
    let margin_shared = AtomicU64::new(0);
    let ready = std::sync::Barrier::new(k);
    let mut reporter = reporter;
    // Allocated here, filled on the measuring threads without allocating.
    let traced_steps = traced_steps.min(usize::try_from(steps).unwrap_or(usize::MAX));
    let marks: Vec<Marks> = (0..k).map(|_| Marks::with_capacity(traced_steps)).collect();

    thread::scope(|s| {
        let handles: Vec<_> = marks
            .into_iter()
            .enumerate()
            .map(|(me, mut marks)| {
                let (model, part, exchange) = (&model, &parts[me], &exchange);
                let (start, margin_shared, ready) = (&start, &margin_shared, &ready);
                let cpu = cpus[me];
                let reporter = if me == 0 { reporter.take() } else { None };
                s.spawn(move || {
                    let (config, warnings) = setup::prepare_thread(Some(cpu), params.sched.policy);
                    if let Some(r) = &reporter {
                        r.attach();
                    }
                    let margin = if me == 0 {
                        let m = leader_margin(params, period);
                        // Relaxed: published by the `ready` barrier below.
                        margin_shared.store(m.as_u64(), Ordering::Relaxed);
                        start.store(
                            (monotonic_now() + Nanos::from_millis(2)).as_u64(),
                            Ordering::Relaxed,
                        );
                        m
                    } else {
                        Nanos::ZERO
                    };
                    ready.wait();
                    // Relaxed: ordered by the barrier above.
                    let margin = if me == 0 {
                        margin
                    } else {
                        Nanos::new(margin_shared.load(Ordering::Relaxed))
                    };
                    let t0 = Nanos::new(start.load(Ordering::Relaxed));
                    let mut out = if me == 0 {
                        Some(lead(
                            model, part, exchange, k, t0, period, steps, margin, progress,
                            reporter, &mut marks,
                        ))
                    } else {
                        follow(model, part, exchange, me, k, t0, period, margin, &mut marks);
                        None
                    };
                    setup::release_thread();
                    if let Some(o) = out.as_mut() {
                        o.margin = margin;
                    }
                    (config, warnings, out, marks)
                })
            })
            .collect();
        gather(
            handles
                .into_iter()
                .map(|h| h.join().expect("loop threads do not panic")),
            frequency_hz,
        )
    })
}

/// The leader's hybrid margin at `period`: the one given, else calibrated.
fn leader_margin(params: &LoopParams, period: Nanos) -> Nanos {
    params.margin.unwrap_or_else(|| {
        let samples = (Nanos::from_millis(200).as_u64() / period.as_u64()).clamp(100, 2_000);
        wait::calibrate_margin(period, samples).margin_ns
    })
}

/// What one thread of a trial hands back: its configuration, warnings, the
/// leader's figures (the leader only) and its marks.
type ThreadEnd = (ThreadConfig, Vec<Warning>, Option<Trial>, Marks);

/// The trial at `frequency_hz` the leader's figures make, with every thread's
/// configuration, warnings and marks.
fn gather(ends: impl Iterator<Item = ThreadEnd>, frequency_hz: f64) -> Trial {
    let mut configs = Vec::new();
    let mut warnings = Vec::new();
    let mut leader = None;
    let mut marks = Vec::new();
    for (c, w, o, m) in ends {
        configs.push(c);
        warnings.extend(w);
        marks.push(m);
        if o.is_some() {
            leader = o;
        }
    }
    let mut t = leader.expect("the leader always returns");
    t.frequency_hz = frequency_hz;
    t.configs = configs;
    t.warnings = warnings;
    t.marks = marks;
    t
}

/// The leader: released by the deadline, tells the others which step it is.
#[allow(clippy::too_many_arguments)]
fn lead(
    model: &Model,
    part: &Part,
    exchange: &Exchange,
    k: usize,
    t0: Nanos,
    period: Nanos,
    steps: u64,
    margin: Nanos,
    progress: &Progress,
    mut reporter: Option<&mut MissReporter>,
    marks: &mut Marks,
) -> Trial {
    let mode = WaitMode::Hybrid { margin };
    let traced = marks.on();
    let now = || if traced { monotonic_now() } else { Nanos::ZERO };
    let input: Vec<i16> = (0..SAMPLES_PER_STEP * 64)
        .map(|i| ((i as f64 * 0.05).sin() * 1000.0) as i16)
        .collect();
    let mut output = vec![0i16; SAMPLES_PER_STEP * 64];
    let mut grid = PeriodicDeadlines::new(t0, period, Some(steps)).expect("period > 0");
    let mut tally = Tally::default();
    let mut rv = 0u64;
    let mut stopped = false;
    let mut sink = 0u64;
    let mut done = 0u64;
    trace::hot_loop(true);
    while let Some(deadline) = grid.next_deadline() {
        if progress.stop_requested() {
            stopped = true;
            break;
        }
        let woke = wait::wait_until(deadline, mode);
        let release = grid.complete(woke);
        tally.release.record(release.lateness);
        // Input: 64 samples of 16 bits; the first moves the model's input point.
        let at = (release.index as usize % 64) * SAMPLES_PER_STEP;
        let acc: i64 = input[at..at + SAMPLES_PER_STEP]
            .iter()
            .map(|&x| i64::from(x))
            .sum();
        model.set_position(0, acc as f64 * 1e-6);
        let input_done = now();
        let [met, forces_done, met_again, integrated] = lead_exchange(
            model,
            part,
            exchange,
            k,
            &mut rv,
            release.index,
            &mut sink,
            &now,
        );
        // Output: 64 samples of 16 bits from the first mass.
        output[at..at + SAMPLES_PER_STEP].fill((model.position(1) * 1e6) as i16);
        let end = monotonic_now();
        let took = end.saturating_sub(deadline);
        if traced {
            marks.push(StepMarks {
                step: release.index,
                missed: release.missed,
                at: [
                    deadline,
                    woke,
                    input_done,
                    met,
                    forces_done,
                    met_again,
                    integrated,
                    end,
                ],
            });
        }
        tally.completion.record(took);
        if let Some(r) = reporter.as_deref_mut() {
            report_miss(r, &release, took, period);
        }
        tally.step(&release, took, period);
        done += 1 + release.missed;
        if done >= 256 {
            progress.advance(done);
            done = 0;
        }
    }
    trace::hot_loop(false);
    progress.advance(done);
    // Tell the others to stop.
    rv += 1;
    exchange.exchange(0, k, rv, |_| CONTROL_STOP, |_, _, _| {});
    black_box((sink, &output));
    tally.into_trial(grid.index(), margin, stopped)
}

/// The leader's part of a step once its input is read: rendezvous 1 (positions,
/// with the release number `index` in word 0), its share of the forces, rendezvous 2
/// (forces), its share of the integration. Each rendezvous is `rv` one more, the
/// words received go to `sink`; gives the times `now` read after each part.
#[inline]
#[allow(clippy::too_many_arguments)]
fn lead_exchange(
    model: &Model,
    part: &Part,
    exchange: &Exchange,
    k: usize,
    rv: &mut u64,
    index: u64,
    sink: &mut u64,
    now: &impl Fn() -> Nanos,
) -> [Nanos; 4] {
    *rv += 1;
    exchange.exchange(
        0,
        k,
        *rv,
        |i| {
            if i == 0 {
                index
            } else {
                model.position((i + 1) % model.n_points()).to_bits()
            }
        },
        |_, _, w| *sink ^= w,
    );
    let met = now();
    model.forces(part);
    let forces_done = now();
    *rv += 1;
    exchange.exchange(
        0,
        k,
        *rv,
        |i| model.force_on(i % model.n_points()).to_bits(),
        |_, _, w| *sink ^= w,
    );
    let met_again = now();
    model.integrate(part);
    [met, forces_done, met_again, now()]
}

/// What the leader counts of its steps.
#[derive(Default)]
struct Tally {
    /// Deadline to end of step, serviced steps.
    completion: LatencyHistogram,
    /// Period minus completion, steps that made it.
    slack: LatencyHistogram,
    /// Deadline to leader wake-up.
    release: LatencyHistogram,
    /// Releases skipped.
    skipped: MissCounter,
    /// Steps completed after their period.
    late: u64,
    /// The current run of consecutive missed steps, and the longest.
    run: u64,
    longest: u64,
}

impl Tally {
    /// Counts a step of `release` that took `took` from its deadline, against
    /// `period`: late or its slack, then its skipped releases, in the run of misses.
    #[inline]
    fn step(&mut self, release: &Release, took: Nanos, period: Nanos) {
        if took > period {
            self.late += 1;
            self.run += 1;
        } else {
            self.slack.record(period - took);
            self.run = 0;
        }
        self.skipped.add(release);
        if release.missed > 0 {
            self.run += release.missed;
        }
        self.longest = self.longest.max(self.run);
    }

    /// The trial these counts make, of `steps` steps with `margin`.
    fn into_trial(self, steps: u64, margin: Nanos, stopped: bool) -> Trial {
        Trial {
            frequency_hz: 0.0,
            steps,
            completion: self.completion,
            slack: self.slack,
            release: self.release,
            late: self.late,
            skipped: self.skipped,
            longest_run: self.longest,
            margin,
            configs: Vec::new(),
            warnings: Vec::new(),
            stopped,
            marks: Vec::new(),
        }
    }
}

/// Reports the step of `release` to `reporter` when it missed: completed `took`
/// after its deadline, past its `period`, or with releases skipped.
#[inline]
fn report_miss(reporter: &mut MissReporter, release: &Release, took: Nanos, period: Nanos) {
    if took <= period && release.missed == 0 {
        return;
    }
    reporter.report(MissEvent {
        kind: if release.missed > 0 {
            MissKind::Missed
        } else {
            MissKind::Late
        },
        seq: release.index,
        start: release.deadline,
        end: release.deadline + took,
        lateness: took.saturating_sub(period),
        missed: release.missed,
        exec: Nanos::ZERO,
        budget: Nanos::ZERO,
    });
}

/// A follower: sleeps until just before the expected deadline, then is released by
/// the first rendezvous, which tells it the step (or to stop).
#[allow(clippy::too_many_arguments)]
fn follow(
    model: &Model,
    part: &Part,
    exchange: &Exchange,
    me: usize,
    k: usize,
    t0: Nanos,
    period: Nanos,
    margin: Nanos,
    marks: &mut Marks,
) {
    let traced = marks.on();
    let now = || if traced { monotonic_now() } else { Nanos::ZERO };
    let mut next = 0u64;
    let mut rv = 0u64;
    let mut sink = 0u64;
    trace::hot_loop(true);
    loop {
        let expected = t0 + period * next;
        let wake = expected.saturating_sub(margin);
        if monotonic_now() < wake {
            wait::sleep_until(wake);
        }
        let arrived = now();
        rv += 1;
        let mut control = 0u64;
        exchange.exchange(
            me,
            k,
            rv,
            |i| model.position(i % model.n_points()).to_bits(),
            |from, i, w| {
                if from == 0 && i == 0 {
                    control = w;
                }
                sink ^= w;
            },
        );
        if control == CONTROL_STOP {
            break;
        }
        next = control + 1;
        let met = now();
        model.forces(part);
        let forces_done = now();
        rv += 1;
        exchange.exchange(
            me,
            k,
            rv,
            |i| model.force_on(i % model.n_points()).to_bits(),
            |_, _, w| sink ^= w,
        );
        let met_again = now();
        model.integrate(part);
        if traced {
            let integrated = now();
            // No release wait, input or output on a follower: those phases are
            // empty.
            marks.push(StepMarks {
                step: control,
                missed: 0,
                at: [
                    arrived,
                    arrived,
                    arrived,
                    met,
                    forces_done,
                    met_again,
                    integrated,
                    integrated,
                ],
            });
        }
    }
    trace::hot_loop(false);
    black_box(sink);
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = LoopParams;
pub(crate) type ProbeFailure = LoopError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::SchedSpec;
    use crate::view::tests::reads_back;
    use ictus_capture::timeline::TraceSpec;
    use ictus_os::facts;
    use ictus_os::sched::Policy;

    fn quick(threads: usize) -> LoopParams {
        LoopParams {
            sched: SchedSpec::pinned(facts::online_cpus(), Policy::Other { nice: 0 }),
            threads,
            frequency_hz: 1_000.0,
            modules: 101,
            exchange_bytes: 512,
            steps: 200,
            margin: Some(Nanos::from_micros(50)),
            find_max: None,
            trace: None,
        }
    }

    #[test]
    fn every_step_is_completed_or_counted_missed() {
        for k in 1..=facts::online_cpus().len().min(2) {
            let sut = run(&quick(k), vec![], &Progress::new()).unwrap();
            let m = &sut.measurements[0];
            let merged = sut.merged.as_ref().unwrap();
            assert_eq!(
                merged.summary.count + merged.missed,
                200,
                "{k} threads: serviced + skipped = steps"
            );
            let trial = reads_back::<view::Trial>(m);
            assert_eq!(trial.labels.steps, 200);
            assert_eq!(trial.labels.threads, k);
            assert_eq!(trial.labels.period_ns, 1_000_000);
            assert_eq!(
                trial.metrics.misses,
                trial.metrics.late_steps + trial.metrics.skipped_releases
            );
            assert_eq!(sut.threads.len(), k);
            let h = sut.headline.unwrap();
            assert!(
                h.starts_with("sustains 1 kHz") || h.starts_with("does not sustain 1 kHz"),
                "{h}"
            );
        }
    }

    /// `quick(threads)` traced to `trace.json` in a new folder.
    fn traced(threads: usize) -> (LoopParams, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut p = quick(threads);
        p.trace = Some(TraceSpec {
            path: dir.path().join("trace.json"),
            cap_bytes: ictus_capture::timeline::DEFAULT_CAP_BYTES,
        });
        (p, dir)
    }

    fn events(dir: &tempfile::TempDir) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["traceEvents"].as_array().unwrap().clone()
    }

    #[test]
    fn a_traced_loop_writes_every_step_of_every_thread_with_its_phases() {
        let k = facts::online_cpus().len().min(2);
        let (p, dir) = traced(k);
        let sut = run(&p, vec![], &Progress::new()).unwrap();
        let serviced = sut.merged.as_ref().unwrap().summary.count;
        let events = events(&dir);
        let named = |me: usize| {
            events
                .iter()
                .find(|e| e["name"] == "thread_name" && e["tid"] == trace::tid(1, me))
                .and_then(|e| e["args"]["name"].as_str())
                .unwrap_or_else(|| panic!("thread {me} named"))
                .to_string()
        };
        assert!(named(0).starts_with("leader 0, CPU "));
        let count = |me: usize, name: &str| {
            events
                .iter()
                .filter(|e| e["ph"] == "X" && e["tid"] == trace::tid(1, me) && e["name"] == name)
                .count() as u64
        };
        for tid in 0..k {
            assert_eq!(
                count(tid, "step"),
                serviced,
                "thread {tid}: one step per step run"
            );
            for phase in ["rendezvous 1", "forces", "rendezvous 2", "integrate"] {
                assert_eq!(count(tid, phase), serviced, "thread {tid}: {phase}");
            }
        }
        assert_eq!(count(0, "input"), serviced);
        let process = events.iter().find(|e| e["name"] == "process_name").unwrap();
        assert_eq!(process["args"]["name"], "loop at 1 kHz");
    }

    #[test]
    fn the_hot_loops_allocate_nothing_traced_or_not() {
        use ictus_core::alloc_count;
        let _turn = alloc_count::one_at_a_time();
        let k = facts::online_cpus().len().min(2);
        let (p, _dir) = traced(k);
        for p in [p.clone(), quick(k)] {
            alloc_count::reset();
            run(&p, vec![], &Progress::new()).unwrap();
            assert_eq!(alloc_count::count(), 0, "traced: {}", p.trace.is_some());
        }
    }

    #[test]
    fn find_max_runs_several_trials_and_names_the_result() {
        let mut p = quick(1);
        p.steps = 1_000;
        p.frequency_hz = 2_000.0;
        p.find_max = Some(FindMax {
            resolution: 0.5,
            max_trial: Nanos::from_millis(100),
            floor_hz: 1_000.0,
        });
        let sut = run(&p, vec![], &Progress::new()).unwrap();
        assert!(sut.measurements.len() >= 2);
        assert!(sut.headline.unwrap().contains("sustain"));
    }

    #[test]
    fn trial_steps_fit_the_time_but_never_drop_below_a_thousand() {
        assert_eq!(trial_steps(50_000, 10_000.0, Nanos::from_secs(5)), 50_000);
        assert_eq!(trial_steps(50_000, 100.0, Nanos::from_secs(5)), 1_000);
        assert_eq!(trial_steps(50_000, 2_000.0, Nanos::from_secs(5)), 10_000);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = quick(1);
        p.threads = 99;
        assert!(matches!(validate(&p), Err(LoopError::Threads { .. })));
        let mut p = quick(1);
        p.frequency_hz = 1e9;
        assert!(matches!(validate(&p), Err(LoopError::Frequency(_))));
        let mut p = quick(2);
        p.modules = 4;
        assert!(matches!(validate(&p), Err(LoopError::Model { .. })));
    }

    #[test]
    fn frequencies_read_as_people_write_them() {
        assert_eq!(khz(10_000.0), "10 kHz");
        assert_eq!(khz(12_500.0), "12.5 kHz");
        assert_eq!(khz(500.0), "500 Hz");
    }
}
