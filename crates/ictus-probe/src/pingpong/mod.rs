//! `pingpong`: context switch and hand-off latency between two threads (seed 001
//! §3.3, context switching time with and without CPU load; seed 004 Table 2, the
//! semaphore loop on one core, SP, and across cores, MP).
//!
//! Two threads, A and B, signal each other in turn through one kernel primitive
//! (futex, pipe, eventfd, condition variable, POSIX message queue, or `sched_yield`
//! on a shared flag): A wakes B, B wakes A. One round trip is two hand-offs. Each
//! sender reads the clock just before signalling and passes the reading along; the
//! receiver reads the clock right after waking, and the difference is one one-way
//! hand-off latency. Each thread records the hand-offs it received into its own
//! preallocated histogram; A also records every round trip. The two hand-off
//! histograms are merged per point, so a point's hand-off count is twice its round
//! trips.
//!
//! Both threads run on the first CPU of the set (`same-cpu`: every hand-off is a
//! context switch) or on the first two (`cross-cpu`: every hand-off wakes the other
//! CPU). With `cpu_load`, a SCHED_OTHER thread spins on each measured CPU, so a run
//! at a normal policy can be compared with one at a real-time policy, as in seed 001
//! Table 3.
//!
//! The record has one [`Measurement`] named `handoff` per point (labels `primitive`,
//! `placement`, `cpus`, `threads`, `cpu_load`; figures `round_trips`,
//! `round_trips_per_s`, `round_trip_mean_ns`, `round_trip_stddev_ns` and the round
//! trip's min, p50, p99 and max; the merged hand-off distribution as its latency),
//! and two [`ThreadResult`]s per point, A then B, each with the hand-offs that thread
//! received. `merged` is the hand-off distribution when there is a single point.
//!
//! Each point is prepared first (primitive created, threads pinned, policy set and
//! read back, stacks prefaulted, histograms allocated), then both threads meet at a
//! start barrier, run a discarded warm-up, and measure. The hot loop only reads the
//! clock, signals, waits and records; it never allocates.
//!
//! ```no_run
//! use ictus_probe::pingpong::{self, PingpongParams, Placement, Primitive};
//! use ictus_probe::setup::Length;
//! use ictus_probe::progress::Progress;
//! use ictus_probe::pingpong::view::Handoff;
//! let params = PingpongParams {
//!     primitives: vec![Primitive::Futex, Primitive::Pipe],
//!     placements: vec![Placement::SameCpu],
//!     length: Length::Count(10_000),
//!     ..PingpongParams::default()
//! };
//! let record = pingpong::run(&params, vec!["example".into()], &Progress::new()).unwrap();
//! for point in record.measurements.iter().filter_map(|m| m.read::<Handoff>()) {
//!     println!("{} {}", point.labels.primitive, point.metrics.round_trips_per_s);
//! }
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "the clock reading a sender passes along with its hand-off (one word, ordered by the kernel primitive measured) and the load threads' stop flag; no protocol for loom to explore"
)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread;

use ictus_core::sync::CachePadded;
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos, Percentile};
use ictus_os::clock::monotonic_now;
use ictus_os::handoff::{self, EventFd, Futex, HandoffError, MessageQueue, PipeReader, PipeWriter};
use ictus_os::sched::Policy;
use ictus_os::{facts, memory};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{Handoff, HandoffLabels, HandoffMetrics};
pub use self::view::{MEASUREMENT, Primitive};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, ThreadConfig, ThreadResult, Warning};
use crate::session::Session;
pub use crate::setup::Placement;
use crate::setup::{self, Length, SchedSpec};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Pingpong;

/// `--primitive` on the command line: one primitive, or `all`.
#[cfg(feature = "cli")]
pub fn primitive_parser() -> impl clap::builder::TypedValueParser<Value = setup::Choice<Primitive>>
{
    setup::choice_parser(
        &[
            (
                Primitive::Futex,
                "futex",
                "Futex wait and wake on a flag word (what semaphores and mutexes use)",
            ),
            (
                Primitive::Pipe,
                "pipe",
                "A pipe per direction, one u64 each way (as perf bench sched pipe)",
            ),
            (Primitive::Eventfd, "eventfd", "An eventfd per direction"),
            (
                Primitive::Condvar,
                "condvar",
                "Mutex and condition variable (std)",
            ),
            (
                Primitive::Mq,
                "mq",
                "A POSIX message queue per direction (as pmqtest)",
            ),
            (
                Primitive::Yield,
                "yield",
                "Poll a flag with sched_yield between checks (same CPU only)",
            ),
        ],
        ("all", "Every primitive in turn"),
    )
}

/// `--placement` on the command line: one placement, or `both`.
#[cfg(feature = "cli")]
pub fn placement_parser() -> impl clap::builder::TypedValueParser<Value = setup::Choice<Placement>>
{
    setup::choice_parser(
        &[
            (
                Placement::SameCpu,
                "same-cpu",
                "Both threads on the first CPU of --cpus",
            ),
            (
                Placement::CrossCpu,
                "cross-cpu",
                "The threads on the first two CPUs of --cpus",
            ),
        ],
        ("both", "Same CPU, then across CPUs"),
    )
}

/// The pingpong probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PingpongParams {
    /// The primitives to measure, in turn.
    pub primitives: Vec<Primitive>,
    /// The placements to measure each primitive in (`yield` only on one CPU).
    pub placements: Vec<Placement>,
    /// How long each point measures.
    pub length: Length,
    /// Warm-up before each point, discarded.
    pub warmup: Nanos,
    /// The threads run on the first CPU of `sched.cpus` (same-cpu) or the first two
    /// (cross-cpu), always pinned (`sched.pin` is not read), both in `sched.policy`;
    /// memory locking and the CPU latency QoS held for the run (0 us by default, as
    /// cyclictest). Misses are not explained: pingpong has no periods.
    pub sched: SchedSpec,
    /// A SCHED_OTHER thread spins on each measured CPU while a point runs.
    pub cpu_load: bool,
}

impl Default for PingpongParams {
    /// futex on one CPU (the first online), SCHED_FIFO 95, 2 s after a 100 ms warm-up.
    fn default() -> Self {
        PingpongParams {
            primitives: vec![Primitive::Futex],
            placements: vec![Placement::SameCpu],
            length: Length::Duration(Nanos::from_secs(2)),
            warmup: Nanos::from_millis(100),
            sched: SchedSpec {
                explain: false,
                ..SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 })
            },
            cpu_load: false,
        }
    }
}

impl PingpongParams {
    /// The points to run, primitive by primitive, each in every placement asked for;
    /// `yield` across CPUs is left out (see [`skipped`](Self::skipped)).
    pub fn points(&self) -> Vec<(Primitive, Placement)> {
        self.all_points()
            .filter(|(p, pl)| p.works_across_cpus() || *pl == Placement::SameCpu)
            .collect()
    }

    /// The points asked for but left out because they mean nothing (`yield` across CPUs).
    pub fn skipped(&self) -> Vec<(Primitive, Placement)> {
        self.all_points()
            .filter(|(p, pl)| !p.works_across_cpus() && *pl == Placement::CrossCpu)
            .collect()
    }

    fn all_points(&self) -> impl Iterator<Item = (Primitive, Placement)> + '_ {
        self.primitives
            .iter()
            .flat_map(|&p| self.placements.iter().map(move |&pl| (p, pl)))
    }

    /// The CPUs of A and B for `placement` (the set must be long enough: see [`validate`]).
    pub fn cpus_for(&self, placement: Placement) -> (usize, usize) {
        placement.cpus(&self.sched.cpus)
    }
}

/// Parameters a run cannot start with, and failures while running.
#[derive(Debug, Error)]
pub enum PingpongError {
    /// No primitive or no placement.
    #[error("nothing to measure: no primitive or no placement selected")]
    NothingToRun,
    /// No CPU selected.
    #[error("no CPU selected")]
    NoCpu,
    /// Cross-CPU placement with a single CPU.
    #[error("cross-cpu placement needs two CPUs, but --cpus selects only {cpus}")]
    TooFewCpus {
        /// The CPUs selected.
        cpus: CpuSet,
    },
    /// `yield` across CPUs (and nothing else).
    #[error(
        "yield works only with both threads on one CPU (each would spin alone on its own \
         CPU): use --placement same-cpu"
    )]
    YieldCrossCpu,
    /// Zero round trips.
    #[error("the number of round trips (--loops) must be at least 1")]
    ZeroLoops,
    /// A duration of zero.
    #[error("the duration must be greater than zero")]
    ZeroDuration,
    /// A CPU not online, or a policy the kernel can never accept.
    #[error(transparent)]
    Setup(#[from] crate::setup::PlacementError),
    /// The primitive could not be created or failed during the run.
    #[error("{primitive} {placement}: {source}")]
    Handoff {
        /// The primitive.
        primitive: Primitive,
        /// The placement.
        placement: Placement,
        /// What failed.
        #[source]
        source: HandoffError,
    },
    /// A thread could not be started.
    #[error("starting thread {name} failed: {source}")]
    Spawn {
        /// The thread's name.
        name: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks the parameters before anything is changed on the machine.
pub fn validate(params: &PingpongParams) -> Result<(), PingpongError> {
    if params.primitives.is_empty() || params.placements.is_empty() {
        return Err(PingpongError::NothingToRun);
    }
    if params.sched.cpus.is_empty() {
        return Err(PingpongError::NoCpu);
    }
    if params.points().is_empty() {
        return Err(PingpongError::YieldCrossCpu);
    }
    if params.placements.contains(&Placement::CrossCpu) && params.sched.cpus.len() < 2 {
        return Err(PingpongError::TooFewCpus {
            cpus: params.sched.cpus.clone(),
        });
    }
    match params.length {
        Length::Count(0) => return Err(PingpongError::ZeroLoops),
        Length::Duration(d) if d == Nanos::ZERO => return Err(PingpongError::ZeroDuration),
        _ => {}
    }
    let used = &params.sched.cpus.cpus()[..params.sched.cpus.len().min(2)];
    Ok(setup::check_placement(used, params.sched.policy)?)
}

/// Runs the probe: every point in turn. Blocks until done or until `progress` asks
/// to stop (the points not started are left out, and the record is incomplete).
///
/// Progress counts round trips with [`Length::Count`], milliseconds of measurement
/// with [`Length::Duration`].
pub fn run(
    params: &PingpongParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, PingpongError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    session.hold_pm_qos(params.sched.pm_qos);
    let points = params.points();
    let per_point = match params.length {
        Length::Count(n) => n,
        Length::Duration(d) => d.as_u64() / 1_000_000,
    };
    progress.set_total(per_point.saturating_mul(points.len() as u64));

    let mut measurements = Vec::with_capacity(points.len());
    let mut threads = Vec::with_capacity(2 * points.len());
    let mut merged_all = None;
    for &(primitive, placement) in &points {
        if progress.stop_requested() {
            break;
        }
        let point = run_point(params, primitive, placement, progress)?;
        let index = threads.len();
        let mut merged = LatencyHistogram::new();
        for side in [&point.a, &point.b] {
            merged.merge(&side.handoff);
        }
        for (offset, side) in [point.a, point.b].into_iter().enumerate() {
            session.warn_all(side.warnings);
            threads.push(ThreadResult {
                thread: index + offset,
                config: side.config,
                latency: LatencyResult::from_histogram(&side.handoff, MissCounter::default()),
            });
        }
        let handoff = LatencyResult::from_histogram(&merged, MissCounter::default());
        measurements.push(measurement(
            params,
            primitive,
            placement,
            [index, index + 1],
            &point.round_trip,
            point.elapsed,
            handoff.clone(),
        ));
        merged_all = Some(handoff);
    }

    let same_cpu_ran = measurements
        .iter()
        .filter_map(|m| m.read::<Handoff>())
        .any(|p| p.labels.placement == Placement::SameCpu);
    if let Some(throttle) = facts::rt_throttling().filter(|t| t.throttles())
        && params.sched.policy.is_realtime()
        && same_cpu_ran
    {
        let stall = throttle.stall_per_period().unwrap_or_default();
        session.warn(Warning {
            id: WarningId::RtThrottled,
            message: format!(
                "on one CPU the two real-time threads keep it busy without a pause, so the \
                 kernel's real-time throttle may stall them for up to {stall} every {}: \
                 a same-cpu max of that size is the throttle, not the hand-off",
                throttle.period_ns
            ),
            advice: Some(
                "Compare the percentiles, or measure --placement same-cpu for less than a \
                 second; lifting the throttle (sysctl kernel.sched_rt_runtime_us=-1) is safe \
                 only with another CPU left to the system."
                    .into(),
            ),
        });
    }
    let mut record = session.finish(PROBE.name(), &ParamsRecord::from(params), progress);
    record.threads = threads;
    // One point: its merged hand-off distribution; several: no single merge means anything.
    record.merged = if measurements.len() == 1 {
        merged_all
    } else {
        None
    };
    record.measurements = measurements;
    progress.finish();
    Ok(record)
}

/// One point as a [`Measurement`].
fn measurement(
    params: &PingpongParams,
    primitive: Primitive,
    placement: Placement,
    threads: [usize; 2],
    round_trip: &LatencyHistogram,
    elapsed: Nanos,
    handoff: LatencyResult,
) -> Measurement {
    let (a, b) = params.cpus_for(placement);
    let rt = round_trip.summary();
    let count = rt.count;
    let rate = if elapsed > Nanos::ZERO {
        count as f64 / elapsed.as_secs_f64()
    } else {
        0.0
    };
    let ns = |v: Option<Nanos>| v.map(|n| n.as_u64() as f64);
    let labels = HandoffLabels {
        primitive,
        placement,
        cpus: [a, b],
        threads,
        cpu_load: params.cpu_load,
    };
    let metrics = HandoffMetrics {
        round_trips: count as f64,
        elapsed_ns: elapsed.as_u64() as f64,
        round_trips_per_s: rate,
        round_trip_mean_ns: rt.mean_ns,
        round_trip_stddev_ns: rt.stddev_ns,
        round_trip_min_ns: ns(rt.min_ns),
        round_trip_p50_ns: ns(rt.percentile(Percentile::P50)),
        round_trip_p99_ns: ns(rt.percentile(Percentile::P99)),
        round_trip_max_ns: ns(rt.max_ns),
    };
    crate::view::Point::<Handoff>::new(labels, metrics)
        .measurement()
        .with_latency(handoff)
}

/// The parameters as the probe records them (units in the key names), and as
/// readers read them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    /// The primitives asked for.
    pub primitives: Vec<Primitive>,
    /// The placements asked for.
    pub placements: Vec<Placement>,
    /// How long each point measured, when asked for as a duration.
    pub duration_ns: Option<u64>,
    /// Round trips each point measured, when asked for as a count.
    pub loops: Option<u64>,
    /// Warm-up before each point.
    pub warmup_ns: u64,
    /// The CPUs the threads ran on.
    pub cpus: CpuSet,
    /// The policy asked for.
    pub policy: Policy,
    /// All memory locked.
    pub mlock: bool,
    /// A SCHED_OTHER thread spun on each measured CPU.
    pub cpu_load: bool,
    /// Points asked for but not run (`yield/cross-cpu`).
    pub skipped: Vec<String>,
}

impl From<&PingpongParams> for ParamsRecord {
    fn from(p: &PingpongParams) -> Self {
        ParamsRecord {
            primitives: p.primitives.clone(),
            placements: p.placements.clone(),
            duration_ns: match p.length {
                Length::Duration(d) => Some(d.as_u64()),
                Length::Count(_) => None,
            },
            loops: match p.length {
                Length::Count(n) => Some(n),
                Length::Duration(_) => None,
            },
            warmup_ns: p.warmup.as_u64(),
            cpus: p.sched.cpus.clone(),
            policy: p.sched.policy,
            mlock: p.sched.mlock,
            cpu_load: p.cpu_load,
            skipped: p
                .skipped()
                .iter()
                .map(|(p, pl)| format!("{p}/{pl}"))
                .collect(),
        }
    }
}

/// The word a sender passes: its clock reading, with flags in the top bits.
mod word {
    /// The round trip belongs to the warm-up: the receiver does not record it.
    pub(super) const WARMUP: u64 = 1 << 63;
    /// The last word: the receiver ends without replying. From B to A: B failed.
    pub(super) const STOP: u64 = 1 << 62;
    /// The clock reading (CLOCK_MONOTONIC stays below 2^62 ns, 146 years).
    pub(super) const STAMP: u64 = STOP - 1;
}

/// A flag word and the stamp it announces, written by one sender.
#[derive(Debug, Default)]
struct FlagSlot {
    flag: Futex,
    stamp: AtomicU64,
}

impl FlagSlot {
    #[inline]
    fn post(&self, w: u64) {
        // Relaxed: published by the Release store of the flag just below.
        self.stamp.store(w, Ordering::Relaxed);
        // Release: pairs with the Acquire load of the flag in `take`, so the receiver
        // that sees the flag also sees the stamp.
        self.flag.word().store(1, Ordering::Release);
    }

    /// Whether the flag is up (a word is waiting).
    #[inline]
    fn is_up(&self) -> bool {
        // Acquire: pairs with the Release store in `post`.
        self.flag.word().load(Ordering::Acquire) != 0
    }

    /// Takes the word once the flag is up.
    #[inline]
    fn take(&self) -> u64 {
        // Relaxed: ordered after the Acquire load in `is_up` that saw the flag.
        let w = self.stamp.load(Ordering::Relaxed);
        // Relaxed: the sender posts again only after our reply, which it receives
        // through the other slot's Release/Acquire pair, so it cannot race this store.
        self.flag.word().store(0, Ordering::Relaxed);
        w
    }
}

/// The two directions (0: A to B, 1: B to A) of one primitive.
enum Link {
    Futex([CachePadded<FlagSlot>; 2]),
    Yield([CachePadded<FlagSlot>; 2]),
    Pipe([(PipeReader, PipeWriter); 2]),
    Eventfd([EventFd; 2]),
    Condvar {
        slots: Mutex<[Option<u64>; 2]>,
        ready: [Condvar; 2],
    },
    Mq([MessageQueue; 2]),
}

/// Direction A to B.
const TO_B: usize = 0;
/// Direction B to A.
const TO_A: usize = 1;

impl Link {
    fn new(primitive: Primitive) -> Result<Self, HandoffError> {
        Ok(match primitive {
            Primitive::Futex => Link::Futex(Default::default()),
            Primitive::Yield => Link::Yield(Default::default()),
            Primitive::Pipe => Link::Pipe([handoff::pipe()?, handoff::pipe()?]),
            Primitive::Eventfd => Link::Eventfd([EventFd::new()?, EventFd::new()?]),
            Primitive::Condvar => Link::Condvar {
                slots: Mutex::new([None, None]),
                ready: [Condvar::new(), Condvar::new()],
            },
            Primitive::Mq => Link::Mq([MessageQueue::new(1)?, MessageQueue::new(1)?]),
        })
    }

    /// Passes `w` in direction `dir`, waking the receiver.
    #[inline]
    fn send(&self, dir: usize, w: u64) -> Result<(), HandoffError> {
        match self {
            Link::Futex(slots) => {
                slots[dir].post(w);
                slots[dir].flag.wake(1);
                Ok(())
            }
            Link::Yield(slots) => {
                slots[dir].post(w);
                Ok(())
            }
            Link::Pipe(pipes) => pipes[dir].1.write_u64(w),
            Link::Eventfd(fds) => fds[dir].write(w),
            Link::Condvar { slots, ready } => {
                slots.lock().expect("no thread panics holding the lock")[dir] = Some(w);
                ready[dir].notify_one();
                Ok(())
            }
            Link::Mq(queues) => queues[dir].send(w),
        }
    }

    /// Waits for the word in direction `dir`.
    #[inline]
    fn recv(&self, dir: usize) -> Result<u64, HandoffError> {
        match self {
            Link::Futex(slots) => {
                let slot = &slots[dir];
                while !slot.is_up() {
                    slot.flag.wait(0);
                }
                Ok(slot.take())
            }
            Link::Yield(slots) => {
                let slot = &slots[dir];
                while !slot.is_up() {
                    handoff::yield_now();
                }
                Ok(slot.take())
            }
            Link::Pipe(pipes) => pipes[dir].0.read_u64(),
            Link::Eventfd(fds) => fds[dir].read(),
            Link::Condvar { slots, ready } => {
                let mut guard = slots.lock().expect("no thread panics holding the lock");
                loop {
                    if let Some(w) = guard[dir].take() {
                        return Ok(w);
                    }
                    guard = ready[dir]
                        .wait(guard)
                        .expect("no thread panics holding the lock");
                }
            }
            Link::Mq(queues) => queues[dir].receive(),
        }
    }
}

/// What one side of a point hands back.
struct Side {
    config: ThreadConfig,
    warnings: Vec<Warning>,
    /// The hand-offs this side received.
    handoff: LatencyHistogram,
    /// How the side's loop ended.
    result: Result<(), HandoffError>,
}

/// What A hands back besides its side.
struct Initiator {
    side: Side,
    round_trip: LatencyHistogram,
    /// From the start of measurement to the end of the last round trip.
    elapsed: Nanos,
}

/// What one point hands back.
struct Point {
    a: Side,
    b: Side,
    round_trip: LatencyHistogram,
    elapsed: Nanos,
}

/// How many round trips A runs between progress updates.
const PROGRESS_BATCH: u64 = 256;

/// Where a point's prepared threads wait for a common start, or an abort when one of
/// them could not be started.
struct StartGate {
    /// Threads arrived, and whether the start was called off.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
    parties: usize,
}

impl StartGate {
    fn new(parties: usize) -> Self {
        StartGate {
            state: Mutex::new((0, false)),
            changed: Condvar::new(),
            parties,
        }
    }

    /// Arrives and waits for everyone; false when the start was called off.
    fn arrive_and_wait(&self) -> bool {
        let mut state = self.state.lock().expect("gate lock is never poisoned");
        state.0 += 1;
        self.changed.notify_all();
        while state.0 < self.parties && !state.1 {
            state = self
                .changed
                .wait(state)
                .expect("gate lock is never poisoned");
        }
        !state.1
    }

    /// Calls the start off: every waiting thread returns without measuring.
    fn abort(&self) {
        self.state.lock().expect("gate lock is never poisoned").1 = true;
        self.changed.notify_all();
    }
}

/// Spawns a named scoped thread with room for the prefaulted stack.
fn spawn<'scope, T: Send + 'scope>(
    scope: &'scope thread::Scope<'scope, '_>,
    name: &'static str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<thread::ScopedJoinHandle<'scope, T>, PingpongError> {
    thread::Builder::new()
        .name(name.into())
        .stack_size(2 * memory::PREFAULT_STACK_BYTES)
        .spawn_scoped(scope, f)
        .map_err(|source| PingpongError::Spawn { name, source })
}

/// Runs one point: creates the primitive, starts the load, B and A, joins them.
fn run_point(
    params: &PingpongParams,
    primitive: Primitive,
    placement: Placement,
    progress: &Progress,
) -> Result<Point, PingpongError> {
    let fail = |source| PingpongError::Handoff {
        primitive,
        placement,
        source,
    };
    let link = Link::new(primitive).map_err(fail)?;
    let (cpu_a, cpu_b) = params.cpus_for(placement);
    let load_cpus: &[usize] = match (params.cpu_load, placement) {
        (false, _) => &[],
        (true, Placement::SameCpu) => &[cpu_a],
        (true, Placement::CrossCpu) => &[cpu_a, cpu_b],
    };
    let gate = StartGate::new(2 + load_cpus.len());
    let load_stop = AtomicBool::new(false);
    let policy = params.sched.policy;
    let (link, gate, load_stop) = (&link, &gate, &load_stop);

    thread::scope(|scope| {
        let spawned = (|| {
            let mut loads = Vec::with_capacity(load_cpus.len());
            for &cpu in load_cpus {
                loads.push(spawn(scope, "ictus-load", move || {
                    spin_load(cpu, gate, load_stop)
                })?);
            }
            let b = spawn(scope, "ictus-pingpong-b", move || {
                respond(link, cpu_b, policy, gate)
            })?;
            let a = spawn(scope, "ictus-pingpong-a", move || {
                initiate(link, cpu_a, policy, params, progress, gate)
            })?;
            Ok((loads, a, b))
        })();
        let (loads, a, b) = match spawned {
            Ok(handles) => handles,
            Err(e) => {
                // Release the threads already at the gate; the scope joins them.
                gate.abort();
                // Relaxed: see the store below.
                load_stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        let a = a.join().expect("pingpong threads do not panic");
        let b = b.join().expect("pingpong threads do not panic");
        // Relaxed: the flag carries no data; the load threads stop within a spin.
        load_stop.store(true, Ordering::Relaxed);
        for l in loads {
            l.join().expect("load threads do not panic");
        }
        let Initiator {
            side: mut a,
            round_trip,
            elapsed,
        } = a;
        let mut b = b;
        std::mem::replace(&mut a.result, Ok(())).map_err(fail)?;
        std::mem::replace(&mut b.result, Ok(())).map_err(fail)?;
        Ok(Point {
            a,
            b,
            round_trip,
            elapsed,
        })
    })
}

/// A background SCHED_OTHER thread spinning on `cpu` until told to stop.
fn spin_load(cpu: usize, gate: &StartGate, stop: &AtomicBool) {
    let _ = setup::prepare_thread(Some(cpu), Policy::Other { nice: 0 });
    if gate.arrive_and_wait() {
        // Relaxed: see the store in `run_point`.
        while !stop.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    }
}

/// Thread A: prepare, meet, warm up, run the round trips and time them, then tell B
/// to end.
fn initiate(
    link: &Link,
    cpu: usize,
    policy: Policy,
    params: &PingpongParams,
    progress: &Progress,
    gate: &StartGate,
) -> Initiator {
    let (config, warnings) = setup::prepare_thread(Some(cpu), policy);
    let mut handoff = LatencyHistogram::new();
    let mut round_trip = LatencyHistogram::new();
    let mut elapsed = Nanos::ZERO;
    let mut result = Ok(());
    if gate.arrive_and_wait() {
        result = initiator_loop(
            link,
            params,
            progress,
            &mut handoff,
            &mut round_trip,
            &mut elapsed,
        );
        // Tell B to end, also after a failure (B may be waiting for a word).
        let stopped = link.send(TO_B, word::STOP);
        result = result.and(stopped);
    }
    setup::release_thread();
    Initiator {
        side: Side {
            config,
            warnings,
            handoff,
            result,
        },
        round_trip,
        elapsed,
    }
}

/// A's hot loop: warm-up round trips (flagged, so B does not record them), then
/// measured ones until the length is reached or a stop is requested. Progress goes
/// up in batches; it reaches the point's full share when the point completes.
fn initiator_loop(
    link: &Link,
    params: &PingpongParams,
    progress: &Progress,
    handoff: &mut LatencyHistogram,
    round_trip: &mut LatencyHistogram,
    elapsed: &mut Nanos,
) -> Result<(), HandoffError> {
    let warm_end = monotonic_now() + params.warmup;
    while monotonic_now() < warm_end && !progress.stop_requested() {
        link.send(TO_B, monotonic_now().as_u64() | word::WARMUP)?;
        if link.recv(TO_A)? & word::STOP != 0 {
            return Ok(()); // B failed; its result says why.
        }
    }
    let (limit, end) = match params.length {
        Length::Count(n) => (n, Nanos::MAX),
        Length::Duration(d) => (u64::MAX, monotonic_now().saturating_add(d)),
    };
    let units = |done: u64, elapsed: Nanos| match params.length {
        Length::Count(_) => done,
        Length::Duration(_) => elapsed.as_u64() / 1_000_000,
    };
    let begin = monotonic_now();
    let mut done = 0u64;
    let mut published = 0u64;
    while done < limit && !progress.stop_requested() {
        let t0 = monotonic_now();
        link.send(TO_B, t0.as_u64())?;
        let w = link.recv(TO_A)?;
        let t1 = monotonic_now();
        if w & word::STOP != 0 {
            break; // B failed; its result says why.
        }
        handoff.record(t1.saturating_sub(Nanos::new(w & word::STAMP)));
        round_trip.record(t1.saturating_sub(t0));
        done += 1;
        *elapsed = t1.saturating_sub(begin);
        if done.is_multiple_of(PROGRESS_BATCH) {
            let now = units(done, *elapsed);
            progress.advance(now.saturating_sub(published));
            published = now;
        }
        if t1 >= end {
            break;
        }
    }
    let last = match params.length {
        Length::Duration(d) if !progress.stop_requested() => d.as_u64() / 1_000_000,
        _ => units(done, *elapsed),
    };
    progress.advance(last.saturating_sub(published));
    Ok(())
}

/// Thread B: prepare, meet, then answer every word until told to stop.
fn respond(link: &Link, cpu: usize, policy: Policy, gate: &StartGate) -> Side {
    let (config, warnings) = setup::prepare_thread(Some(cpu), policy);
    let mut handoff = LatencyHistogram::new();
    let mut result = Ok(());
    if gate.arrive_and_wait() {
        result = responder_loop(link, &mut handoff);
        if result.is_err() {
            // A may be waiting for a reply: tell it to end (if the link still works).
            let _ = link.send(TO_A, word::STOP);
        }
    }
    setup::release_thread();
    Side {
        config,
        warnings,
        handoff,
        result,
    }
}

/// B's hot loop: receive, record (unless warm-up), reply with a fresh stamp.
fn responder_loop(link: &Link, handoff: &mut LatencyHistogram) -> Result<(), HandoffError> {
    loop {
        let w = link.recv(TO_B)?;
        let t = monotonic_now();
        if w & word::STOP != 0 {
            return Ok(());
        }
        if w & word::WARMUP == 0 {
            handoff.record(t.saturating_sub(Nanos::new(w & word::STAMP)));
        }
        link.send(TO_A, monotonic_now().as_u64())?;
    }
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = PingpongParams;
pub(crate) type ProbeFailure = PingpongError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_parameters_read_back_with_their_policy() {
        let fifo = ictus_os::sched::Policy::Fifo { priority: 42 };
        let mut p = PingpongParams::default();
        p.sched.policy = fifo;
        crate::view::tests::params_read_back(
            crate::registry::ProbeId::Pingpong.name(),
            &ParamsRecord::from(&p),
            fifo,
        );
    }
    use crate::setup::PlacementError;
    use crate::view::tests::reads_back;

    fn quick(primitives: Vec<Primitive>, placements: Vec<Placement>, loops: u64) -> PingpongParams {
        PingpongParams {
            primitives,
            placements,
            length: Length::Count(loops),
            warmup: Nanos::from_millis(1),
            sched: SchedSpec {
                policy: Policy::Other { nice: 0 },
                ..PingpongParams::default().sched
            },
            ..PingpongParams::default()
        }
    }

    fn placements() -> Vec<Placement> {
        if facts::online_cpus().len() >= 2 {
            Placement::ALL.to_vec()
        } else {
            vec![Placement::SameCpu]
        }
    }

    #[test]
    fn every_primitive_completes_its_round_trips_and_counts_two_handoffs_each() {
        let params = quick(Primitive::ALL.to_vec(), placements(), 100);
        let sut = run(&params, vec![], &Progress::new()).unwrap();
        assert!(sut.complete);
        assert_eq!(sut.measurements.len(), params.points().len());
        assert_eq!(sut.threads.len(), 2 * sut.measurements.len());
        for m in &sut.measurements {
            assert_eq!(m.name, MEASUREMENT);
            let p = reads_back::<Handoff>(m);
            assert_eq!(p.metrics.round_trips, 100.0, "{:?}", m.labels);
            let handoff = m.latency.as_ref().unwrap();
            assert_eq!(handoff.summary.count, 200, "{:?}", m.labels);
            assert!(p.metrics.round_trips_per_s > 0.0);
            let (cpu_a, cpu_b) = params.cpus_for(p.labels.placement);
            assert_eq!(p.labels.cpus, [cpu_a, cpu_b]);
            let [a, b] = p.labels.threads;
            assert_eq!(sut.threads[a].latency.summary.count, 100);
            assert_eq!(sut.threads[b].latency.summary.count, 100);
        }
        assert!(sut.merged.is_none());
    }

    #[test]
    fn the_two_directions_sit_in_separate_cache_line_pairs() {
        let slots: [CachePadded<FlagSlot>; 2] = Default::default();
        assert_eq!(std::mem::size_of_val(&slots), 256);
        let gap = std::ptr::from_ref(&*slots[1]) as usize - std::ptr::from_ref(&*slots[0]) as usize;
        assert_eq!(gap, 128);
    }

    #[test]
    fn yield_across_cpus_is_left_out_of_all_and_refused_alone() {
        let all = quick(Primitive::ALL.to_vec(), Placement::ALL.to_vec(), 1);
        assert_eq!(all.skipped(), vec![(Primitive::Yield, Placement::CrossCpu)]);
        assert_eq!(all.points().len(), 11);
        let mut alone = quick(vec![Primitive::Yield], vec![Placement::CrossCpu], 1);
        alone.sched.cpus = CpuSet::from_cpus([0, 1]);
        assert!(matches!(
            validate(&alone),
            Err(PingpongError::YieldCrossCpu)
        ));
    }

    #[test]
    fn one_point_gives_the_merged_distribution_and_thread_configs() {
        let params = quick(vec![Primitive::Futex], vec![Placement::SameCpu], 50);
        let sut = run(&params, vec![], &Progress::new()).unwrap();
        let merged = sut.merged.as_ref().unwrap();
        assert_eq!(merged.summary.count, 100);
        let cpu = params.sched.cpus.cpus()[0];
        for t in &sut.threads {
            assert_eq!(t.config.pinned_cpu, Some(cpu));
            assert_eq!(t.config.policy, Policy::Other { nice: 0 });
        }
    }

    #[test]
    fn a_duration_run_measures_and_the_load_does_not_block_it() {
        let params = PingpongParams {
            length: Length::Duration(Nanos::from_millis(20)),
            cpu_load: true,
            ..quick(vec![Primitive::Pipe], vec![Placement::SameCpu], 1)
        };
        let progress = Progress::new();
        let sut = run(&params, vec![], &progress).unwrap();
        let m = &sut.measurements[0];
        let p = reads_back::<Handoff>(m);
        assert!(p.metrics.round_trips >= 1.0);
        assert!(p.labels.cpu_load);
        assert_eq!(
            m.latency.as_ref().unwrap().summary.count as f64,
            2.0 * p.metrics.round_trips
        );
        assert_eq!(progress.done(), progress.total());
    }

    #[test]
    fn a_stop_request_gives_an_incomplete_record() {
        let progress = Progress::new();
        progress.request_stop();
        let params = quick(vec![Primitive::Futex], vec![Placement::SameCpu], 100);
        let sut = run(&params, vec![], &progress).unwrap();
        assert!(!sut.complete);
        assert!(sut.measurements.is_empty());
    }

    #[test]
    fn bad_parameters_are_refused_before_anything_runs() {
        let base = quick(vec![Primitive::Futex], vec![Placement::SameCpu], 10);
        let zero = PingpongParams {
            length: Length::Count(0),
            ..base.clone()
        };
        assert!(matches!(validate(&zero), Err(PingpongError::ZeroLoops)));
        let mut one_cpu = PingpongParams {
            placements: vec![Placement::CrossCpu],
            ..base.clone()
        };
        one_cpu.sched.cpus = CpuSet::from_cpus([0]);
        assert!(matches!(
            validate(&one_cpu),
            Err(PingpongError::TooFewCpus { .. })
        ));
        let mut offline = base.clone();
        offline.sched.cpus = CpuSet::from_cpus([999]);
        assert!(matches!(
            validate(&offline),
            Err(PingpongError::Setup(PlacementError::CpuOffline {
                cpu: 999,
                ..
            }))
        ));
        let mut prio = base;
        prio.sched.policy = Policy::Fifo { priority: 0 };
        assert!(matches!(
            validate(&prio),
            Err(PingpongError::Setup(PlacementError::Policy(_)))
        ));
    }
}
