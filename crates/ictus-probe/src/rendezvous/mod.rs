//! `rendezvous`: spin rendezvous between cores (seed 000 Table 6 and Table 1a).
//!
//! N threads, each pinned to its own CPU, meet every step by spinning: each posts the
//! step number in its flag and waits until every other flag shows it. The flags sit
//! in one cache line, in adjacent lines, or D bytes apart (seed 000 used 1 and 5000
//! bytes). With a payload, each thread also writes P bytes before posting and reads
//! every other thread's P bytes after the rendezvous (seed 000's target: 512 bytes,
//! 64 doubles, in under 1 us).
//!
//! Each point is measured twice: untimed steps give the rate (rendezvous per second,
//! as the seed reports it in kHz), and steps timed one by one give the latency
//! distribution (each sample includes one clock read, whose cost the record gives).
//! In the same run, the bare cache-line round trip between the first two CPUs is
//! measured: the physical limit the rendezvous is compared with.
//!
//! ```no_run
//! use ictus_probe::{progress::Progress, rendezvous::{self, RendezvousParams}};
//! let record = rendezvous::run(&RendezvousParams::default(), vec![], &Progress::new()).unwrap();
//! println!("{}", record.headline.unwrap());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "the probe measures exactly these raw flag and payload words between threads (cache-line traffic is what it times)"
)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use std::sync::Barrier;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::thread;

use ictus_core::{LatencyHistogram, MissCounter, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{
    CachelineLabels, CachelineRoundTrip, CpuPair, Rendezvous, RendezvousLabels, RendezvousMetrics,
    RoundTripMetrics,
};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, ThreadConfig, ThreadResult, Warning};
use crate::session::Session;
use crate::setup::{self, SchedSpec};
use crate::view::Point;

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Rendezvous;

/// Where the spin flags sit relative to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "spacing", content = "bytes")]
pub enum Spacing {
    /// All flags in one 64-byte cache line (one byte apart, as seed 000's "1 byte").
    SameLine,
    /// Each flag at the start of its own line, the lines adjacent.
    Adjacent,
    /// Flags this many bytes apart (seed 000's 5000).
    Bytes(usize),
}

impl Spacing {
    /// The distance between consecutive flags, in bytes.
    pub fn bytes(self) -> usize {
        match self {
            Spacing::SameLine => 1,
            Spacing::Adjacent => 64,
            Spacing::Bytes(d) => d,
        }
    }
    /// A short name for tables.
    pub fn name(self) -> String {
        match self {
            Spacing::SameLine => "same line".into(),
            Spacing::Adjacent => "adjacent lines".into(),
            Spacing::Bytes(d) => format!("{d} B apart"),
        }
    }
}

/// The rendezvous probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RendezvousParams {
    /// CPUs (the first N of them carry the N threads), policy, memory locking.
    pub sched: SchedSpec,
    /// Thread counts to measure (each at most the number of CPUs).
    pub threads: Vec<usize>,
    /// Flag placements to measure.
    pub spacings: Vec<Spacing>,
    /// Payloads per direction per rendezvous, in bytes (multiples of 8 are used).
    pub payloads: Vec<usize>,
    /// Untimed steps per point (for the rate).
    pub steps: u64,
    /// Individually timed steps per point (for the distribution).
    pub timed_steps: u64,
    /// Round trips of the bare cache-line measurement.
    pub round_trips: u64,
}

impl Default for RendezvousParams {
    /// Every online CPU at FIFO 95, 2 threads, the three spacings of seed 000 and a
    /// 512-byte payload and none, 1,000,000 steps per point.
    fn default() -> Self {
        RendezvousParams {
            sched: SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 }),
            threads: vec![2],
            spacings: vec![Spacing::SameLine, Spacing::Adjacent, Spacing::Bytes(5000)],
            payloads: vec![0, 512],
            steps: 1_000_000,
            timed_steps: 200_000,
            round_trips: 2_000_000,
        }
    }
}

/// The most bytes a thread may send per rendezvous: 1 MiB.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// The widest spacing between two flags: 1 MiB (seed 000 uses 5,000 bytes).
pub const MAX_SPACING_BYTES: usize = 1 << 20;

/// Parameters a run cannot start with.
#[derive(Debug, Error)]
pub enum RendezvousError {
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
    /// Fewer than two threads, or more threads than CPUs.
    #[error(
        "a rendezvous needs 2 to {cpus} threads here (one per CPU; a spinning thread that shares a CPU never lets the other progress), got {threads}"
    )]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// CPUs available.
        cpus: usize,
    },
    /// Nothing to measure.
    #[error(
        "steps, timed steps and round trips must be greater than zero, and a spacing and a payload given"
    )]
    Empty,
    /// A spacing of zero.
    #[error("a spacing of 0 bytes puts every flag in the same byte")]
    ZeroSpacing,
    /// Unpinned spinning threads make no sense.
    #[error("the rendezvous pins each thread to its own CPU; --no-pin is not supported")]
    Unpinned,
}

/// Checks the parameters.
pub fn validate(p: &RendezvousParams) -> Result<(), RendezvousError> {
    if !p.sched.pin {
        return Err(RendezvousError::Unpinned);
    }
    if p.threads.is_empty()
        || p.spacings.is_empty()
        || p.payloads.is_empty()
        || p.steps == 0
        || p.timed_steps == 0
        || p.round_trips == 0
    {
        return Err(RendezvousError::Empty);
    }
    let cpus = p.sched.cpus.len();
    if let Some(&t) = p.threads.iter().find(|&&t| t < 2 || t > cpus) {
        return Err(RendezvousError::Threads { threads: t, cpus });
    }
    if p.spacings.iter().any(|s| s.bytes() == 0) {
        return Err(RendezvousError::ZeroSpacing);
    }
    // Beyond these, `threads * spacing` wrapped and flags met in one line: a rate
    // above the physical limit.
    if let Some(s) = p.spacings.iter().find(|s| s.bytes() > MAX_SPACING_BYTES) {
        return Err(RendezvousError::TooLarge {
            what: "a spacing (bytes)",
            value: s.bytes() as u64,
            limit: MAX_SPACING_BYTES as u64,
        });
    }
    if let Some(&b) = p.payloads.iter().find(|&&b| b > MAX_PAYLOAD_BYTES) {
        return Err(RendezvousError::TooLarge {
            what: "a payload (bytes per thread and rendezvous)",
            value: b as u64,
            limit: MAX_PAYLOAD_BYTES as u64,
        });
    }
    Ok(())
}

/// A spin rendezvous with a payload: flags at the chosen spacing, and per thread two
/// payload slots (by step parity, so a thread one step ahead never overwrites what
/// another still reads). The `rendezvous` probe measures it; the `loop` probe runs
/// its steps on it.
///
/// ```
/// use ictus_probe::rendezvous::Exchange;
/// let ex = Exchange::new(1, 64, 16);
/// let mut seen = 0;
/// ex.exchange(0, 1, 1, |i| i as u64, |_, _, _| seen += 1);
/// assert_eq!(seen, 0, "alone, there is no one else's payload to read");
/// ```
#[derive(Debug)]
pub struct Exchange {
    flags: Vec<AtomicU8>,
    flag_base: usize,
    spacing: usize,
    /// `payload[thread][parity]`, each `words` u64.
    payload: Vec<[Vec<AtomicU64>; 2]>,
}

impl Exchange {
    /// Flags for `threads` threads `spacing` bytes apart, payloads of `payload_bytes`.
    pub fn new(threads: usize, spacing: usize, payload_bytes: usize) -> Self {
        // Room for the flags plus slack to start them on a 128-byte boundary.
        let flags: Vec<AtomicU8> = (0..threads * spacing + 256)
            .map(|_| AtomicU8::new(0))
            .collect();
        let addr = flags.as_ptr() as usize;
        let flag_base = (128 - addr % 128) % 128;
        let words = payload_bytes.div_ceil(8);
        let payload = (0..threads)
            .map(|_| {
                [
                    (0..words).map(|_| AtomicU64::new(0)).collect(),
                    (0..words).map(|_| AtomicU64::new(0)).collect(),
                ]
            })
            .collect();
        Exchange {
            flags,
            flag_base,
            spacing,
            payload,
        }
    }

    #[inline]
    fn flag(&self, thread: usize) -> &AtomicU8 {
        &self.flags[self.flag_base + thread * self.spacing]
    }

    /// One rendezvous of `me` at `step` with a synthetic payload; returns a checksum
    /// of what the others sent (so the reads cannot be optimised away).
    #[inline]
    fn meet(&self, me: usize, threads: usize, step: u64) -> u64 {
        let mut sum = 0u64;
        self.exchange(
            me,
            threads,
            step,
            |i| step ^ i as u64,
            |_, _, w| sum = sum.wrapping_add(w),
        );
        sum
    }

    /// One rendezvous of `me` at `step`: write word `i` of the payload as `write(i)`,
    /// post, wait for every other thread, then hand each of their words to
    /// `read(thread, i, word)`. Steps must go up by one each time.
    #[inline]
    pub fn exchange(
        &self,
        me: usize,
        threads: usize,
        step: u64,
        write: impl Fn(usize) -> u64,
        mut read: impl FnMut(usize, usize, u64),
    ) {
        let parity = (step & 1) as usize;
        for (i, w) in self.payload[me][parity].iter().enumerate() {
            // Relaxed: published by the Release store of the flag below.
            w.store(write(i), Ordering::Relaxed);
        }
        let tag = step as u8;
        // Release: pairs with the Acquire loads of this flag by the other threads, so
        // they see the payload written above.
        self.flag(me).store(tag, Ordering::Release);
        for other in (0..threads).filter(|&t| t != me) {
            // Another thread is at most one step ahead (it cannot pass the next
            // rendezvous without our flag), so its flag shows `tag` or `tag + 1`.
            loop {
                // Acquire: pairs with the Release store of the other thread's flag.
                let seen = self.flag(other).load(Ordering::Acquire);
                if seen == tag || seen == tag.wrapping_add(1) {
                    break;
                }
                std::hint::spin_loop();
            }
            for (i, w) in self.payload[other][parity].iter().enumerate() {
                // Relaxed: ordered after the Acquire load of its flag above.
                read(other, i, w.load(Ordering::Relaxed));
            }
        }
    }
}

/// What one thread measured at one point.
struct PointOutcome {
    histogram: LatencyHistogram,
    untimed: Nanos,
}

/// Runs the probe.
pub fn run(
    params: &RendezvousParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, RendezvousError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    session.hold_pm_qos(params.sched.pm_qos);
    let points = params.threads.len() * params.spacings.len() * params.payloads.len();
    progress.set_total(points as u64 + 1);
    session.warn_if_no_cpu_left(
        params.sched.policy,
        params.threads.iter().copied().max().unwrap_or(0),
        "real-time threads spin on every online CPU: the rest of the system only runs while \
         RT throttling stalls them (some steps then take ~50 ms)",
        "Give --cpus fewer CPUs than the machine has, or use --policy other.",
    );

    let cpus = params.sched.cpus.cpus();
    let (limit, configs) = cacheline_round_trip(params, cpus[0], cpus[1], &mut session);
    progress.advance(1);
    let limit_ns = limit.as_u64() as f64 / params.round_trips as f64;
    let mut measurements = vec![
        Point::<CachelineRoundTrip>::new(
            CachelineLabels {
                cpus: CpuPair::Dashed(format!("{}-{}", cpus[0], cpus[1])),
            },
            RoundTripMetrics {
                ns_per_round_trip: limit_ns,
                round_trips_per_s: Some(1e9 / limit_ns),
            },
        )
        .measurement(),
    ];
    // Each thread's samples over all points; `threads` lists the first two (the
    // round-trip pair, whose configuration was read back), the points hold them all.
    let max_threads = params.threads.iter().copied().max().unwrap_or(2);
    let mut per_thread: Vec<LatencyHistogram> =
        (0..max_threads).map(|_| LatencyHistogram::new()).collect();

    let mut merged_all = LatencyHistogram::new();
    let mut headline = None;
    'points: for &threads in &params.threads {
        for &spacing in &params.spacings {
            for &payload in &params.payloads {
                if progress.stop_requested() {
                    break 'points;
                }
                let (outcomes, warnings) = point(params, threads, spacing, payload, progress);
                session.warn_all(warnings);
                let mut merged = LatencyHistogram::new();
                for o in &outcomes {
                    merged.merge(&o.histogram);
                }
                merged_all.merge(&merged);
                let (m, ns) = point_measurement(
                    params, threads, spacing, payload, &outcomes, &merged, limit_ns,
                );
                if threads == 2 && payload == 0 && headline.is_none() {
                    headline = Some(pair_headline(cpus, spacing, ns, limit_ns));
                }
                measurements.push(m);
                for (t, o) in outcomes.iter().enumerate() {
                    per_thread[t].merge(&o.histogram);
                }
                progress.advance(1);
            }
        }
    }
    let mut record = session.finish(PROBE.name(), params, progress);
    record.headline = headline;
    record.threads = configs
        .into_iter()
        .zip(&per_thread)
        .enumerate()
        .map(|(thread, (config, h))| ThreadResult {
            thread,
            config,
            latency: LatencyResult::from_histogram(h, MissCounter::default()),
        })
        .collect();
    record.merged = Some(LatencyResult::from_histogram(
        &merged_all,
        MissCounter::default(),
    ));
    record.measurements = measurements;
    progress.finish();
    Ok(record)
}

/// The measurement of one point (its `outcomes`, `merged`), and its nanoseconds
/// per rendezvous: the rate is set by the slowest thread.
fn point_measurement(
    params: &RendezvousParams,
    threads: usize,
    spacing: Spacing,
    payload: usize,
    outcomes: &[PointOutcome],
    merged: &LatencyHistogram,
    limit_ns: f64,
) -> (Measurement, f64) {
    let untimed = outcomes
        .iter()
        .map(|o| o.untimed)
        .max()
        .unwrap_or(Nanos::ZERO);
    let ns = untimed.as_u64() as f64 / params.steps as f64;
    let rate = 1e9 / ns;
    let m = Point::<Rendezvous>::new(
        RendezvousLabels {
            threads,
            spacing_bytes: spacing.bytes(),
            spacing: spacing.name(),
            payload_bytes: payload.div_ceil(8) * 8,
        },
        RendezvousMetrics {
            rendezvous_per_s: Some(rate),
            ns_per_rendezvous: Some(ns),
            vs_cacheline_limit: Some(limit_ns / ns),
        },
    )
    .measurement()
    .with_latency(LatencyResult::from_histogram(
        merged,
        MissCounter::default(),
    ));
    (m, ns)
}

/// The headline: two threads on the first `cpus` with flags `spacing` apart, `ns`
/// per rendezvous, against the cache line's round trip (`limit_ns`).
fn pair_headline(cpus: &[usize], spacing: Spacing, ns: f64, limit_ns: f64) -> String {
    format!(
        "2 threads on CPUs {}-{}, flags {}: {:.0} kHz ({:.0} ns per rendezvous), \
         {:.2}x the rate a bare cache-line round trip allows ({:.0} ns)",
        cpus[0],
        cpus[1],
        spacing.name(),
        1e9 / ns / 1e3,
        ns,
        limit_ns / ns,
        limit_ns
    )
}

/// One point: `threads` threads on the first CPUs, `steps` untimed then `timed_steps`
/// timed rendezvous.
fn point(
    params: &RendezvousParams,
    threads: usize,
    spacing: Spacing,
    payload: usize,
    progress: &Progress,
) -> (Vec<PointOutcome>, Vec<Warning>) {
    let shared = Exchange::new(threads, spacing.bytes(), payload);
    let start = Barrier::new(threads);
    let cpus = params.sched.cpus.cpus();
    thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|me| {
                let (shared, start) = (&shared, &start);
                let cpu = cpus[me];
                scope.spawn(move || {
                    let (_, warnings) = setup::prepare_thread(Some(cpu), params.sched.policy);
                    let mut histogram = LatencyHistogram::new();
                    start.wait();
                    // Warm-up: the lines move into place.
                    let mut step = 1u64;
                    let mut sink = 0u64;
                    for _ in 0..1_000 {
                        sink ^= shared.meet(me, threads, step);
                        step += 1;
                    }
                    let t0 = monotonic_now();
                    for _ in 0..params.steps {
                        sink ^= shared.meet(me, threads, step);
                        step += 1;
                    }
                    let untimed = monotonic_now().saturating_sub(t0);
                    let _ = progress; // the stop flag is checked between points
                    for _ in 0..params.timed_steps {
                        let a = monotonic_now();
                        sink ^= shared.meet(me, threads, step);
                        histogram.record(monotonic_now().saturating_sub(a));
                        step += 1;
                    }
                    std::hint::black_box(sink);
                    setup::release_thread();
                    (PointOutcome { histogram, untimed }, warnings)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        let mut warnings = Vec::new();
        for h in handles {
            let (o, w) = h.join().expect("rendezvous threads do not panic");
            outcomes.push(o);
            warnings.extend(w);
        }
        (outcomes, warnings)
    })
}

/// The bare cache-line round trip between `a` and `b`: one thread writes a counter,
/// the other echoes it, `round_trips` times. Returns the total time and the two
/// threads' configurations.
pub(crate) fn cacheline_round_trip(
    params: &RendezvousParams,
    a: usize,
    b: usize,
    session: &mut Session,
) -> (Nanos, Vec<ThreadConfig>) {
    let ping = ictus_core::sync::CachePadded::new(AtomicU64::new(0));
    let pong = &ping; // one line: the seed's "one flag" case
    let start = Barrier::new(2);
    let n = params.round_trips;
    let (elapsed, configs, warnings) = thread::scope(|scope| {
        let echo = scope.spawn(|| {
            let (config, warnings) = setup::prepare_thread(Some(b), params.sched.policy);
            start.wait();
            for i in 1..=n {
                // Acquire: pairs with the Release store by the initiator.
                while pong.load(Ordering::Acquire) != 2 * i - 1 {
                    std::hint::spin_loop();
                }
                // Release: pairs with the initiator's Acquire load.
                pong.store(2 * i, Ordering::Release);
            }
            setup::release_thread();
            (config, warnings)
        });
        let (config, mut warnings) = setup::prepare_thread(Some(a), params.sched.policy);
        start.wait();
        let t0 = monotonic_now();
        for i in 1..=n {
            // Release: pairs with the echo thread's Acquire load.
            ping.store(2 * i - 1, Ordering::Release);
            // Acquire: pairs with the echo thread's Release store.
            while ping.load(Ordering::Acquire) != 2 * i {
                std::hint::spin_loop();
            }
        }
        let elapsed = monotonic_now().saturating_sub(t0);
        setup::release_thread();
        let (echo_config, echo_warnings) = echo.join().expect("echo thread does not panic");
        warnings.extend(echo_warnings);
        (elapsed, vec![config, echo_config], warnings)
    });
    session.warn_all(warnings);
    (elapsed, configs)
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = RendezvousParams;
pub(crate) type ProbeFailure = RendezvousError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_core::CpuSet;

    fn quick() -> Option<RendezvousParams> {
        let online = facts::online_cpus();
        (online.len() >= 2).then(|| RendezvousParams {
            sched: SchedSpec::pinned(
                CpuSet::from_cpus(online.cpus()[..2].iter().copied()),
                Policy::Other { nice: 0 },
            ),
            threads: vec![2],
            spacings: vec![Spacing::SameLine, Spacing::Bytes(5000)],
            payloads: vec![0, 64],
            steps: 2_000,
            timed_steps: 500,
            round_trips: 2_000,
        })
    }

    #[test]
    fn every_point_has_a_rate_and_a_distribution() {
        let Some(params) = quick() else { return };
        let sut = run(&params, vec![], &Progress::new()).unwrap();
        let points: Vec<_> = sut
            .measurements
            .iter()
            .filter(|m| m.is::<Rendezvous>())
            .collect();
        assert_eq!(points.len(), 4);
        for m in points {
            let p = m.read::<Rendezvous>().expect("the point reads as a view");
            assert!(p.metrics.rendezvous_per_s.unwrap() > 0.0);
            assert_eq!(p.labels.threads, 2);
            assert_eq!(m.latency.as_ref().unwrap().summary.count, 2 * 500);
        }
        let limit = sut.measurements[0].read::<CachelineRoundTrip>().unwrap();
        assert!(limit.metrics.ns_per_round_trip > 0.0);
        assert_eq!(sut.threads.len(), 2);
        assert!(sut.headline.is_some());
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = RendezvousParams {
            threads: vec![1],
            ..RendezvousParams::default()
        };
        assert!(matches!(validate(&p), Err(RendezvousError::Threads { .. })));
        p.threads = vec![p.sched.cpus.len() + 1];
        assert!(matches!(validate(&p), Err(RendezvousError::Threads { .. })));
        let p = RendezvousParams {
            spacings: vec![Spacing::Bytes(0)],
            ..RendezvousParams::default()
        };
        assert!(matches!(validate(&p), Err(RendezvousError::ZeroSpacing)));
    }

    #[test]
    fn flags_sit_at_the_requested_spacing() {
        let sut = Exchange::new(3, 5000, 0);
        let a = sut.flag(0) as *const AtomicU8 as usize;
        let b = sut.flag(1) as *const AtomicU8 as usize;
        let c = sut.flag(2) as *const AtomicU8 as usize;
        assert_eq!((b - a, c - b), (5000, 5000));
        assert_eq!(a % 128, 0);
    }
}
