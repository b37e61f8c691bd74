//! `compute`: computing power on a mass-interaction model (seed 000 §6.5, Table 7).
//!
//! First the model (a CORDIS-ANIMA chain, `ictus_core::mass`) grows from about ten
//! modules to a million on one thread: time per step and per module against N shows
//! the cache stages of §6.5 again. Then one model is split across 1 to K threads that
//! meet at a spin rendezvous twice every step (after the forces, after the
//! integration): step time and speed-up against one thread. With a reference record,
//! every figure is also given as a time reduction against it, as Table 7 does.
//!
//! ```no_run
//! use ictus_probe::{compute::{self, ComputeParams}, progress::Progress};
//! let record = compute::run(&ComputeParams::default(), vec![], None, &Progress::new()).unwrap();
//! println!("{}", record.headline.unwrap());
//! ```

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use std::thread;

use ictus_core::mass::{Model, Params};
use ictus_core::sync::SpinBarrier;
use ictus_core::{LatencyHistogram, MissCounter, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{MODEL_SIZE, SPLIT, Step, StepLabels, StepMetrics};
use crate::progress::Progress;
use crate::record::{LatencyResult, RunRecord, SCHEMA_NAME, Warning};
use crate::session::Session;
use crate::setup::{self, SchedSpec};
use crate::view::Point;

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Compute;

/// The compute probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputeParams {
    /// CPUs (the split uses the first K), policy, memory locking.
    pub sched: SchedSpec,
    /// Model sizes of the single-thread sweep, in modules (masses plus links).
    pub sizes: Vec<usize>,
    /// Model size of the split, in modules.
    pub split_modules: usize,
    /// Thread counts of the split (each at most the number of CPUs).
    pub threads: Vec<usize>,
    /// Time spent on each point.
    pub point_time: Nanos,
}

impl Default for ComputeParams {
    /// Sizes 10 to 1,000,000 by decades, a 100,000-module split over 1 to every CPU,
    /// 200 ms a point, SCHED_OTHER on every CPU.
    fn default() -> Self {
        let cpus = facts::online_cpus();
        ComputeParams {
            threads: (1..=cpus.len()).collect(),
            sched: SchedSpec::pinned(cpus, Policy::Other { nice: 0 }),
            sizes: vec![11, 101, 1_001, 10_001, 100_001, 1_000_001],
            split_modules: 100_001,
            point_time: Nanos::from_millis(200),
        }
    }
}

/// The largest model, in modules: ten times seed 000's largest (1,000,001), a few
/// hundred MiB.
pub const MAX_MODULES: usize = 10_000_001;

/// What cannot run, or a reference that does not fit.
#[derive(Debug, Error)]
pub enum ComputeError {
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
    /// A model too small to have a mass.
    #[error("a model needs at least 3 modules (2 links and a mass), got {0}")]
    TooSmall(usize),
    /// Bad thread count.
    #[error("thread counts go from 1 to the number of CPUs ({cpus}), got {threads}")]
    Threads {
        /// Asked for.
        threads: usize,
        /// Available.
        cpus: usize,
    },
    /// Nothing to do.
    #[error("no model size and no thread count given, or a point time of zero")]
    Empty,
    /// The reference record is not a compute record.
    #[error(
        "the reference is a '{found}' record of schema '{schema}'; a compute record of {SCHEMA_NAME} is needed"
    )]
    Reference {
        /// Its probe.
        found: String,
        /// Its schema.
        schema: String,
    },
}

/// Checks the parameters.
pub fn validate(p: &ComputeParams) -> Result<(), ComputeError> {
    if (p.sizes.is_empty() && p.threads.is_empty()) || p.point_time == Nanos::ZERO {
        return Err(ComputeError::Empty);
    }
    if let Some(&n) = p
        .sizes
        .iter()
        .chain([&p.split_modules])
        .find(|&&n| n > MAX_MODULES)
    {
        return Err(ComputeError::TooLarge {
            what: "a model (modules)",
            value: n as u64,
            limit: MAX_MODULES as u64,
        });
    }
    if let Some(&n) = p.sizes.iter().chain([&p.split_modules]).find(|&&n| n < 3) {
        return Err(ComputeError::TooSmall(n));
    }
    let cpus = p.sched.cpus.len();
    if let Some(&t) = p.threads.iter().find(|&&t| t == 0 || t > cpus) {
        return Err(ComputeError::Threads { threads: t, cpus });
    }
    Ok(())
}

/// Checks that `reference` is a compute record.
pub fn check_reference(reference: &RunRecord) -> Result<(), ComputeError> {
    if reference.probe != PROBE || reference.schema != SCHEMA_NAME {
        return Err(ComputeError::Reference {
            found: reference.probe.clone(),
            schema: reference.schema.clone(),
        });
    }
    Ok(())
}

/// A chain of about `modules` modules (a chain of n masses has 2n + 1).
fn chain(modules: usize) -> Model {
    let masses = (modules.saturating_sub(1) / 2).max(1);
    Model::chain(masses, &Params::default()).expect("default parameters build a chain")
}

/// One point measured, before it goes into the record.
struct Figures {
    /// [`MODEL_SIZE`] or [`SPLIT`].
    name: &'static str,
    point: Point<Step>,
    latency: LatencyResult,
}

/// A point of `modules` modules on `threads` threads taking `ns` per step.
fn step_point(
    modules: usize,
    threads: usize,
    ns: f64,
    speedup: Option<f64>,
    steps: u64,
) -> Point<Step> {
    Point::new(
        StepLabels {
            modules,
            threads,
            reference: None,
        },
        StepMetrics {
            ns_per_step: ns,
            ns_per_module_step: ns / modules as f64,
            speedup,
            steps: steps as f64,
            time_reduction_vs_reference: None,
        },
    )
}

/// Gives each point its time reduction against the reference's point of the same
/// sweep, model size and threads, or says the reference has no such point.
fn against_reference(measurements: &mut [Figures], reference: &RunRecord) {
    for f in measurements {
        let theirs = reference
            .measurements
            .iter()
            .filter(|o| o.name == f.name)
            .filter_map(|o| o.read::<Step>())
            .find(|o| {
                o.labels.modules == f.point.labels.modules
                    && o.labels.threads == f.point.labels.threads
            });
        match theirs {
            Some(t) => {
                f.point.metrics.time_reduction_vs_reference =
                    Some(t.metrics.ns_per_step / f.point.metrics.ns_per_step.max(1.0));
            }
            None => {
                f.point.labels.reference = Some("no point of this size in the reference".into());
            }
        }
    }
}

/// Runs the probe. `reference`, when given, must be a compute record: each figure is
/// then also given as a time reduction against its figure at the same point.
pub fn run(
    params: &ComputeParams,
    argv: Vec<String>,
    reference: Option<&RunRecord>,
    progress: &Progress,
) -> Result<RunRecord, ComputeError> {
    validate(params)?;
    if let Some(r) = reference {
        check_reference(r)?;
    }
    let mut session = Session::begin(argv, params.sched.mlock);
    progress.set_total((params.sizes.len() + params.threads.len()) as u64);
    let mut measurements = Vec::new();

    // The single-thread sweep, on the first CPU.
    let first = params.sched.cpus.cpus()[0];
    let (_, warnings) = thread::scope(|s| {
        s.spawn(|| {
            let prepared =
                setup::prepare_thread(params.sched.pin.then_some(first), params.sched.policy);
            for &n in &params.sizes {
                if progress.stop_requested() {
                    break;
                }
                let mut model = chain(n);
                let (hist, steps) = time_single(&mut model, params.point_time);
                let per_step = hist
                    .percentile(ictus_core::Percentile::P50)
                    .unwrap_or(Nanos::ZERO);
                let ns = per_step.as_u64() as f64;
                measurements.push(Figures {
                    name: MODEL_SIZE,
                    point: step_point(model.n_modules(), 1, ns, None, steps),
                    latency: LatencyResult::from_histogram(&hist, MissCounter::default()),
                });
                progress.advance(1);
            }
            setup::release_thread();
            prepared
        })
        .join()
        .expect("the sweep thread does not panic")
    });
    session.warn_all(warnings);

    // The split.
    let mut one_thread_ns = None;
    for &k in &params.threads {
        if progress.stop_requested() {
            break;
        }
        let model = chain(params.split_modules);
        let (hist, steps, warnings) = time_split(&model, k, params);
        session.warn_all(warnings);
        let per_step = hist
            .percentile(ictus_core::Percentile::P50)
            .unwrap_or(Nanos::ZERO);
        let ns = per_step.as_u64() as f64;
        let base = *one_thread_ns.get_or_insert(ns);
        measurements.push(Figures {
            name: SPLIT,
            point: step_point(model.n_modules(), k, ns, Some(base / ns.max(1.0)), steps),
            latency: LatencyResult::from_histogram(&hist, MissCounter::default()),
        });
        progress.advance(1);
    }

    if let Some(r) = reference {
        against_reference(&mut measurements, r);
        session.warn(reference_warning(r));
    }

    let mut record = session.finish(PROBE.name(), params, progress);
    record.headline = headline(&measurements);
    record.measurements = measurements
        .into_iter()
        .map(|f| f.point.measurement_named(f.name).with_latency(f.latency))
        .collect();
    progress.finish();
    Ok(record)
}

/// Which record the time reductions are against.
fn reference_warning(r: &RunRecord) -> Warning {
    Warning {
        id: WarningId::Reference,
        message: format!(
            "time reductions are against the record of {} ({}), measured {}",
            r.provenance.hostname,
            r.provenance.cpu_model.as_deref().unwrap_or("unknown CPU"),
            r.provenance.start_time
        ),
        advice: None,
    }
}

/// The headline: the split's time per step on one thread, and its best speed-up.
fn headline(measurements: &[Figures]) -> Option<String> {
    let splits = || measurements.iter().filter(|f| f.name == SPLIT);
    let speedup = |f: &Figures| f.point.metrics.speedup.unwrap_or(0.0);
    let best = splits().max_by(|a, b| speedup(a).total_cmp(&speedup(b)));
    best.map(|best| {
        format!(
            "{} modules: {} per step on 1 thread; best split {} threads, speed-up {:.2}",
            best.point.labels.modules,
            Nanos::new(splits().next().map_or(0.0, |x| x.point.metrics.ns_per_step) as u64),
            best.point.labels.threads,
            speedup(best)
        )
    })
}

/// Steps the model on this thread for about `point_time`, in batches of about 20 us,
/// recording the time per step of each batch.
fn time_single(model: &mut Model, point_time: Nanos) -> (LatencyHistogram, u64) {
    // Calibrate the batch: steps for about 20 us.
    let t0 = monotonic_now();
    model.step();
    let one = monotonic_now().saturating_sub(t0).as_u64().max(1);
    let batch = (20_000 / one).max(1);
    let mut hist = LatencyHistogram::new();
    let mut steps = 0u64;
    let end = monotonic_now() + point_time;
    while monotonic_now() < end {
        let a = monotonic_now();
        for _ in 0..batch {
            model.step();
        }
        let d = monotonic_now().saturating_sub(a);
        hist.record(Nanos::new(d.as_u64() / batch));
        steps += batch;
    }
    (hist, steps)
}

/// Steps `model` split over `k` threads on the first `k` CPUs, meeting at a spin
/// rendezvous after each phase, for about `point_time`. Thread 0 times every step.
fn time_split(
    model: &Model,
    k: usize,
    params: &ComputeParams,
) -> (LatencyHistogram, u64, Vec<Warning>) {
    let parts = model.partition(k);
    let barrier = SpinBarrier::new(k);
    let cpus: Vec<usize> = params.sched.cpus.cpus()[..k].to_vec();
    // Every thread runs the same number of steps: as many as one thread would fit in
    // the point time (a split step is never slower than that, barring a collapse).
    let mut probe = model.clone();
    let t0 = monotonic_now();
    probe.step();
    let one = monotonic_now().saturating_sub(t0).as_u64().max(1);
    let steps = (params.point_time.as_u64() / one).clamp(10, 1_000_000);
    thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .zip(&cpus)
            .enumerate()
            .map(|(i, (part, &cpu))| {
                let barrier = &barrier;
                s.spawn(move || {
                    let (_, warnings) =
                        setup::prepare_thread(params.sched.pin.then_some(cpu), params.sched.policy);
                    let mut hist = LatencyHistogram::new();
                    barrier.wait();
                    for _ in 0..steps {
                        let a = monotonic_now();
                        model.step_part(part, || {
                            barrier.wait();
                        });
                        if i == 0 {
                            hist.record(monotonic_now().saturating_sub(a));
                        }
                    }
                    setup::release_thread();
                    (hist, warnings)
                })
            })
            .collect();
        let mut first = LatencyHistogram::new();
        let mut warnings = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            let (hist, w) = h.join().expect("split threads do not panic");
            if i == 0 {
                first = hist;
            }
            warnings.extend(w);
        }
        (first, steps, warnings)
    })
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = ComputeParams;
pub(crate) type ProbeFailure = ComputeError;
/// The registry's run of this probe ([`crate::probe::Probe`]): with no reference
/// record.
pub(crate) fn run_probe(
    params: &ComputeParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, ComputeError> {
    run(params, argv, None, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::reads_back;

    fn quick() -> ComputeParams {
        let cpus = facts::online_cpus();
        ComputeParams {
            threads: (1..=cpus.len().min(2)).collect(),
            sched: SchedSpec::pinned(cpus, Policy::Other { nice: 0 }),
            sizes: vec![11, 1_001],
            split_modules: 2_001,
            point_time: Nanos::from_millis(5),
        }
    }

    #[test]
    fn every_size_and_split_is_measured() {
        let sut = run(&quick(), vec![], None, &Progress::new()).unwrap();
        let points = |name: &str| -> Vec<Point<Step>> {
            sut.measurements
                .iter()
                .filter(|m| m.name == name)
                .map(reads_back::<Step>)
                .collect()
        };
        let sizes = points(MODEL_SIZE);
        assert_eq!(sizes.len(), 2);
        assert_eq!(sizes[0].labels.modules, 11);
        assert!(sizes.iter().all(|p| p.metrics.speedup.is_none()));
        let splits = points(SPLIT);
        assert_eq!(splits.len(), quick().threads.len());
        assert_eq!(splits[0].metrics.speedup, Some(1.0));
        assert!(sizes.iter().all(|p| p.metrics.ns_per_step > 0.0));
        assert_eq!(sizes.len() + splits.len(), sut.measurements.len());
    }

    #[test]
    fn a_reference_gives_time_reductions_of_one_against_itself() {
        let first = run(&quick(), vec![], None, &Progress::new()).unwrap();
        let sut = run(&quick(), vec![], Some(&first), &Progress::new()).unwrap();
        for m in &sut.measurements {
            let p = reads_back::<Step>(m);
            assert!(p.metrics.time_reduction_vs_reference.is_some());
            assert_eq!(p.labels.reference, None);
        }
        let mut smaller = quick();
        smaller.sizes = vec![101];
        let sut = run(&smaller, vec![], Some(&first), &Progress::new()).unwrap();
        let size = reads_back::<Step>(&sut.measurements[0]);
        assert_eq!(
            size.labels.reference.as_deref(),
            Some("no point of this size in the reference")
        );
    }

    #[test]
    fn a_foreign_reference_is_refused() {
        let mut other = run(&quick(), vec![], None, &Progress::new()).unwrap();
        other.probe = crate::timer::PROBE.name().into();
        assert!(matches!(
            run(&quick(), vec![], Some(&other), &Progress::new()),
            Err(ComputeError::Reference { .. })
        ));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = quick();
        p.sizes = vec![2];
        assert!(matches!(validate(&p), Err(ComputeError::TooSmall(2))));
        let mut p = quick();
        p.threads = vec![0];
        assert!(matches!(validate(&p), Err(ComputeError::Threads { .. })));
    }
}
