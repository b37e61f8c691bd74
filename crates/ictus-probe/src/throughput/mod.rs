//! `throughput`: data transfer between two threads by payload size (seed 004,
//! "Data communication", Figures 6 and 7; seed 001 §3.2, data transfer speed).
//!
//! A sender thread sends messages of one payload size to a receiver thread, and the
//! sizes go 0, 1, 2, 4 ... up to 32 KiB (seed 004's sweep). Four transports carry
//! them:
//!
//! - `spsc`: ictus's lock-free byte ring (seed 002 §3.1.3's one-reader one-writer
//!   FIFO): the sender copies the message into a slot, the receiver reads it in
//!   place. In sync mode the ring has one slot and the sender waits until it is
//!   empty again: the receiver hands the slot back, in the slot's own first line,
//!   once it has read the message, and that is the acknowledgement (so a small
//!   message's round trip is one cache line going there and back, as in the bare
//!   round trip it is compared with).
//! - `pipe`: a pipe (and, in sync mode, a second one for the acknowledgements).
//! - `unix`: a Unix stream socket pair (acknowledgements on the same socket).
//! - `handover`: seed 004's "virtual core": the sender fills a preallocated
//!   buffer and hands over only its ownership (a `Box`, so a pointer and a length)
//!   through a small SPSC ring; the receiver reads it in place and gives it back
//!   through a second ring, which is also the acknowledgement.
//!
//! Mode `sync` is seed 004's port semantics: the sender waits until the receiver
//! has taken each message before sending the next. Mode `stream` lets the sender
//! run ahead until the transport is full (about [`STREAM_BUFFER_BYTES`] in flight
//! for the rings; the kernel's buffer for pipe and unix), to show the pipelined
//! rate.
//!
//! Placement `same-cpu` runs both threads on the first CPU of the set, `cross-cpu`
//! on the first two. The ring transports wait by spinning; on one CPU a spinning
//! thread would only burn the time slice the other needs, so there the waiting
//! side spins [`SPINS_BEFORE_YIELD`] times and then calls `sched_yield` between
//! checks (pipe and unix block in the kernel either way).
//!
//! Every message carries an 8-byte header: the sender's clock reading taken before
//! it starts sending (before waiting for room), and flags (warm-up, untimed, stop). The
//! receiver reads the clock once the whole message is read, and the difference is
//! the one-way latency (in stream mode it includes the time the message queued).
//! The receiver really reads every byte: it sums each payload into a checksum, the
//! sender computes what that sum must be, and a point whose sums differ fails the
//! run. The rate is the payload bytes received from the first measured message's
//! send stamp to the last one's arrival. In sync mode the sender also times each
//! round trip (send to acknowledgement), and before the measured messages it sends
//! an untimed batch ([`BATCH_SHARE`] of the point's time, or as many messages as
//! the point measures): neither side reads the clock per message, and the batch's
//! mean round trip is timed as a whole.
//!
//! In the same run two reference figures are measured: the bare cache-line round
//! trip between the first two CPUs (as the `rendezvous` probe does it), and a
//! single thread's `memcpy` bandwidth at every payload size. The record's
//! `targets` measurement and headline compare the SPSC ring with them: its
//! cross-CPU one-way time at the smallest size, taken as half the mean round trip
//! of the untimed batch, against half the bare round trip (target: at most 1.5
//! times; sync mode only, as a streamed message mostly waits in the queue). Both
//! are means over many round trips with no clock read inside, so they compare
//! like with like; the timestamped one-way p50 is given beside it, as is, and
//! without the one clock read it holds. Its rate at the largest size is compared
//! against `memcpy` (target: at least half). In sync mode that rate cannot reach
//! half on a machine where a core-to-core copy is slower than a local one: the
//! sender's copy into the slot and the receiver's read of it follow each other,
//! and each alone takes about as long as the whole `memcpy`; stream mode
//! overlaps them.
//!
//! With the default policy (SCHED_FIFO 95) the spinning sides are real-time on every
//! CPU they use; on a two-CPU machine the rest of the system then runs only while
//! the kernel's real-time throttle stalls them (about 50 ms each second), which
//! shows as max latencies of that size (the record warns about it). Use
//! `Policy::Other` (`--policy other`) for a quick look.
//!
//! Each point is prepared first (transport created, buffers allocated and written,
//! threads pinned, policy set and read back, stacks prefaulted, histograms
//! allocated); the loops then only read the clock, copy, sum and record: they never
//! allocate (see `tests/throughput_no_allocation.rs`).
//!
//! ```no_run
//! use ictus_probe::progress::Progress;
//! use ictus_probe::throughput::{self, Transport, ThroughputParams};
//! use ictus_probe::throughput::view::Transfer;
//! let params = ThroughputParams {
//!     transports: vec![Transport::Spsc, Transport::Pipe],
//!     sizes: vec![0, 64, 4096],
//!     ..ThroughputParams::default()
//! };
//! let record = throughput::run(&params, vec!["example".into()], &Progress::new()).unwrap();
//! for p in record.measurements.iter().filter_map(|m| m.read::<Transfer>()) {
//!     println!("{} {} {}", p.labels.transport, p.labels.payload_bytes, p.metrics.bytes_per_s);
//! }
//! ```

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use crate::setup::Length;
use crate::view::Point;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread;

use ictus_core::sync::spsc::{self, Full, bytes};
use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos, Percentile};
use ictus_os::clock::monotonic_now;
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{
    Memcpy, MemcpyLabels, MemcpyMetrics, Targets, TargetsLabels, TargetsMetrics, Transfer,
    TransferLabels, TransferMetrics,
};
pub use crate::pingpong::Placement;
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, ThreadConfig, Warning};
use crate::rendezvous::view::{CachelineLabels, CachelineRoundTrip, CpuPair, RoundTripMetrics};
use crate::rendezvous::{self, RendezvousParams};
use crate::session::Session;
use crate::setup::{self, SchedSpec};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Throughput;

/// The name of every transfer point's measurement in `record.measurements`.
pub const MEASUREMENT: &str = "transfer";

/// Bytes of the header every message carries before its payload.
pub const HEADER_BYTES: usize = 8;

/// On one CPU, how often a waiting ring side spins before it yields the CPU.
pub const SPINS_BEFORE_YIELD: u32 = 8;

/// Sync mode: messages of the untimed batch between two clock reads.
pub const BATCH_CHUNK: u64 = 1024;

/// Sync mode with a duration per point: the untimed batch lasts this fraction
/// (1/`BATCH_SHARE`) of the point's duration.
pub const BATCH_SHARE: u64 = 4;

/// In stream mode, about how many bytes the ring transports hold in flight.
///
/// Twice the L2 cache of one core of the Zen 3 this was tuned on (512 KiB), so
/// that a slot has left both cores' L2 caches by the time the ring comes back
/// to it: the producer then claims the slot's lines from the shared L3 and the
/// consumer finds them there, instead of every line being snatched from the
/// other core's L2 (an invalidation per line for the writer). At 32 KiB per
/// message that doubles the rate: about 35 GB/s with 1 MiB in flight against
/// 13-20 GB/s with 128 KiB.
pub const STREAM_BUFFER_BYTES: usize = 1024 * 1024;

/// The largest payload a point may use.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024 * 1024;

/// How the messages travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// ictus's lock-free byte ring, messages written and read in place.
    Spsc,
    /// A pipe.
    Pipe,
    /// A Unix stream socket pair.
    Unix,
    /// Ownership of a filled buffer handed over through an SPSC ring (seed 004's
    /// "virtual core").
    Handover,
}

impl Transport {
    /// Every transport, in the order a run measures them.
    pub const ALL: [Transport; 4] = [
        Transport::Spsc,
        Transport::Pipe,
        Transport::Unix,
        Transport::Handover,
    ];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Spsc => "spsc",
            Transport::Pipe => "pipe",
            Transport::Unix => "unix",
            Transport::Handover => "handover",
        }
    }

    /// The transport called `name`, if any.
    pub fn from_name(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the sender waits for each message to be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Mode {
    /// Seed 004's port semantics: each message is acknowledged before the next is
    /// sent.
    #[cfg_attr(
        feature = "cli",
        value(help = "Each message is acknowledged before the next is sent (seed 004's port)")
    )]
    Sync,
    /// The sender waits only when the transport is full.
    Stream,
}

impl Mode {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Stream => "stream",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--placement` on the command line: one placement, or `both`.
#[cfg(feature = "cli")]
pub fn placement_parser()
-> impl clap::builder::TypedValueParser<Value = crate::setup::Choice<Placement>> {
    crate::setup::choice_parser(
        &[
            (
                Placement::SameCpu,
                "same-cpu",
                "Both threads on the first CPU of --cpus (ring sides yield between checks)",
            ),
            (
                Placement::CrossCpu,
                "cross-cpu",
                "Sender on the first CPU of --cpus, receiver on the second",
            ),
        ],
        ("both", "Same CPU, then across CPUs"),
    )
}

/// The throughput probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputParams {
    /// CPUs (the first one, or the first two), policy of both threads, memory locking.
    pub sched: SchedSpec,
    /// The transports to measure, in turn.
    pub transports: Vec<Transport>,
    /// The placements to measure each transport in.
    pub placements: Vec<Placement>,
    /// Sync (acknowledged) or stream.
    pub mode: Mode,
    /// Payload sizes in bytes, in the order measured.
    pub sizes: Vec<usize>,
    /// How long each point measures.
    pub length: Length,
    /// Warm-up before each point, discarded.
    pub warmup: Nanos,
    /// Round trips of the bare cache-line reference.
    pub round_trips: u64,
}

impl Default for ThroughputParams {
    /// Every transport on one CPU and across two, sync mode, sizes 0 to 32 KiB,
    /// 100 ms per point after 10 ms of warm-up, SCHED_FIFO 95 on every online CPU.
    fn default() -> Self {
        ThroughputParams {
            sched: SchedSpec {
                cpus: facts::online_cpus(),
                pin: true,
                policy: Policy::Fifo { priority: 95 },
                mlock: false,
                pm_qos: Default::default(),
                explain: true,
                explain_threshold: None,
            },
            transports: Transport::ALL.to_vec(),
            placements: Placement::ALL.to_vec(),
            mode: Mode::Sync,
            sizes: sizes_up_to(32 * 1024),
            length: Length::Duration(Nanos::from_millis(100)),
            warmup: Nanos::from_millis(10),
            round_trips: 1_000_000,
        }
    }
}

impl ThroughputParams {
    /// The transfer points, transport by transport, placement by placement, size by
    /// size.
    pub fn points(&self) -> Vec<(Transport, Placement, usize)> {
        let mut points = Vec::new();
        for &t in &self.transports {
            for &pl in &self.placements {
                for &n in &self.sizes {
                    points.push((t, pl, n));
                }
            }
        }
        points
    }

    /// The CPUs of the sender and the receiver for `placement` (the set must be long
    /// enough: see [`validate`]).
    pub fn cpus_for(&self, placement: Placement) -> (usize, usize) {
        placement.cpus(&self.sched.cpus)
    }
}

/// Seed 004's sweep: 0, then the powers of two up to `max` (and `max` itself when it
/// is not one).
pub fn sizes_up_to(max: usize) -> Vec<usize> {
    let mut sizes = vec![0];
    let mut n = 1;
    while n <= max {
        sizes.push(n);
        n = match n.checked_mul(2) {
            Some(next) => next,
            None => break,
        };
    }
    if max > 0 && sizes.last() != Some(&max) {
        sizes.push(max);
    }
    sizes
}

/// Parameters a run cannot start with, and failures while running.
#[derive(Debug, Error)]
pub enum ThroughputError {
    /// No transport, placement or size.
    #[error("nothing to measure: no transport, placement or payload size selected")]
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
    /// A CPU not online, or a policy the kernel can never accept.
    #[error(transparent)]
    Setup(#[from] crate::setup::PlacementError),
    /// A payload larger than [`MAX_PAYLOAD_BYTES`].
    #[error("a payload of {bytes} bytes is larger than the {MAX_PAYLOAD_BYTES}-byte limit")]
    PayloadTooLarge {
        /// The size asked for.
        bytes: usize,
    },
    /// Zero messages or a duration of zero per point.
    #[error("each point must measure at least one message for longer than zero")]
    ZeroLength,
    /// Zero round trips for the reference.
    #[error("the cache-line reference needs at least one round trip")]
    ZeroRoundTrips,
    /// Unpinned threads: the placement would mean nothing.
    #[error("throughput pins its two threads (--placement says where): drop --no-pin")]
    Unpinned,
    /// A transport could not be created or failed during the run.
    #[error("{transport} {placement} {payload} B: {source}")]
    Transport {
        /// The transport.
        transport: Transport,
        /// The placement.
        placement: Placement,
        /// The payload size.
        payload: usize,
        /// What failed.
        #[source]
        source: io::Error,
    },
    /// The receiver's checksum differs from what the sender sent: the transport lost
    /// or damaged data (or the probe has a bug); the figures would be false.
    #[error(
        "{transport} {placement} {payload} B: the receiver summed {received:#x} over \
         {received_messages} messages, the sender sent {sent:#x} over {sent_messages}"
    )]
    Corrupted {
        /// The transport.
        transport: Transport,
        /// The placement.
        placement: Placement,
        /// The payload size.
        payload: usize,
        /// The sender's sum.
        sent: u64,
        /// The receiver's sum.
        received: u64,
        /// Messages the sender sent (warm-up and untimed batch included).
        sent_messages: u64,
        /// Messages the receiver took (warm-up and untimed batch included).
        received_messages: u64,
    },
    /// A thread could not be started.
    #[error("starting a throughput thread failed: {source}")]
    Spawn {
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Checks the parameters before anything is changed on the machine.
pub fn validate(params: &ThroughputParams) -> Result<(), ThroughputError> {
    if params.transports.is_empty() || params.placements.is_empty() || params.sizes.is_empty() {
        return Err(ThroughputError::NothingToRun);
    }
    if params.sched.cpus.is_empty() {
        return Err(ThroughputError::NoCpu);
    }
    if !params.sched.pin {
        return Err(ThroughputError::Unpinned);
    }
    if params.placements.contains(&Placement::CrossCpu) && params.sched.cpus.len() < 2 {
        return Err(ThroughputError::TooFewCpus {
            cpus: params.sched.cpus.clone(),
        });
    }
    if let Some(&bytes) = params.sizes.iter().find(|&&n| n > MAX_PAYLOAD_BYTES) {
        return Err(ThroughputError::PayloadTooLarge { bytes });
    }
    match params.length {
        Length::Count(0) => return Err(ThroughputError::ZeroLength),
        Length::Duration(d) if d == Nanos::ZERO => return Err(ThroughputError::ZeroLength),
        _ => {}
    }
    if params.round_trips == 0 {
        return Err(ThroughputError::ZeroRoundTrips);
    }
    let used = &params.sched.cpus.cpus()[..params.sched.cpus.len().min(2)];
    Ok(setup::check_online(used)?)
}

/// Runs the probe: the two references, then every transfer point in turn. Blocks
/// until done or until `progress` asks to stop (what ran is kept, and the record is
/// incomplete).
///
/// Progress counts points: the round trip, one memcpy point per size, and the
/// transfer points.
pub fn run(
    params: &ThroughputParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, ThroughputError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    let points = params.points();
    let cpus = params.sched.cpus.cpus();
    let two_cpus = cpus.len() >= 2;
    progress.set_total((points.len() + params.sizes.len() + usize::from(two_cpus)) as u64);
    warn_about_throttling(params, &mut session);

    let mut measurements = Vec::with_capacity(points.len() + params.sizes.len() + 2);
    // Reference (a): the bare cache-line round trip between the first two CPUs.
    let mut half_round_trip_ns = None;
    if two_cpus && !progress.stop_requested() {
        let reference = RendezvousParams {
            sched: params.sched.clone(),
            round_trips: params.round_trips,
            ..RendezvousParams::default()
        };
        let (total, _) =
            rendezvous::cacheline_round_trip(&reference, cpus[0], cpus[1], &mut session);
        let ns = total.as_u64() as f64 / params.round_trips as f64;
        half_round_trip_ns = Some(ns / 2.0);
        let metrics = RoundTripMetrics {
            ns_per_round_trip: ns,
            round_trips_per_s: Some(1e9 / ns),
        };
        let labels = CachelineLabels {
            cpus: CpuPair::Pair([cpus[0], cpus[1]]),
        };
        measurements.push(Point::<CachelineRoundTrip>::new(labels, metrics).measurement());
        progress.advance(1);
    }
    // Reference (b): one thread's memcpy at every size.
    let memcpy_time = match params.length {
        Length::Duration(d) => d,
        Length::Count(_) => Nanos::from_millis(10),
    };
    let mut memcpy_rates = Vec::with_capacity(params.sizes.len());
    for &n in &params.sizes {
        if progress.stop_requested() {
            break;
        }
        let (copies, elapsed, warnings) =
            memcpy_point(cpus[0], params.sched.policy, n, memcpy_time);
        session.warn_all(warnings);
        let secs = elapsed.as_secs_f64().max(1e-9);
        let rate = copies as f64 * n as f64 / secs;
        memcpy_rates.push((n, rate));
        let labels = MemcpyLabels {
            payload_bytes: n,
            cpu: cpus[0],
        };
        let metrics = MemcpyMetrics {
            copies: copies as f64,
            bytes_per_s: rate,
            copies_per_s: copies as f64 / secs,
            ns_per_copy: elapsed.as_u64() as f64 / copies.max(1) as f64,
        };
        measurements.push(Point::<Memcpy>::new(labels, metrics).measurement());
        progress.advance(1);
    }
    // The transfers.
    for &(transport, placement, n) in &points {
        if progress.stop_requested() {
            break;
        }
        let point = transfer_point(params, transport, placement, n, progress)?;
        session.warn_all(point.warnings.iter().cloned());
        if let Some(m) = point.measurement(params, transport, placement, n) {
            measurements.push(m);
        }
        progress.advance(1);
    }
    let mut record = session.finish(PROBE.name(), &ParamsRecord::from(params), progress);
    let clock_read_ns = record
        .environment
        .clock
        .as_ref()
        .and_then(|c| c.read_cost.p50_ns)
        .map(|n| n.as_u64() as f64);
    let targets = targets(
        params,
        &measurements,
        half_round_trip_ns,
        clock_read_ns,
        &memcpy_rates,
    );
    if let Some((m, headline)) = targets {
        measurements.push(m);
        record.headline = Some(headline);
    }
    record.measurements = measurements;
    progress.finish();
    Ok(record)
}

/// Warns that spinning or turn-taking real-time threads meet the kernel's throttle.
fn warn_about_throttling(params: &ThroughputParams, session: &mut Session) {
    if !params.sched.policy.is_realtime() {
        return;
    }
    let Some(throttle) = facts::rt_throttling().filter(|t| t.throttles()) else {
        return;
    };
    let stall = throttle.stall_per_period().unwrap_or_default();
    let all_cpus = params.placements.contains(&Placement::CrossCpu)
        && params.sched.cpus.len().min(2) >= session.cpu_count();
    let busy = if all_cpus {
        "the spinning sides (spsc, handover, the cache-line reference) keep every online \
         CPU busy, so the rest of the system runs only while the throttle stalls them"
    } else {
        "the spinning or yielding sides keep their CPUs busy without a pause"
    };
    session.warn(Warning {
        id: WarningId::RtThrottled,
        message: format!(
            "real-time threads: {busy}; the kernel's real-time throttle stalls them for up \
             to {stall} every {}, and a max latency of that size is the throttle, not the \
             transport",
            throttle.period_ns
        ),
        advice: Some(
            "Compare the percentiles, or run with --policy other for figures without the \
             stalls; give --cpus CPUs that leave one to the system; lifting the throttle \
             (sysctl kernel.sched_rt_runtime_us=-1) is safe only with a CPU left to the \
             system."
                .into(),
        ),
    });
}

/// Copies `n` bytes between two preallocated buffers on `cpu` for about `time`;
/// returns the copies made, the time they took, and the setup's warnings.
fn memcpy_point(cpu: usize, policy: Policy, n: usize, time: Nanos) -> (u64, Nanos, Vec<Warning>) {
    /// Copies between clock reads.
    const BATCH: u64 = 64;
    thread::scope(|scope| {
        scope
            .spawn(move || {
                let (_, warnings) = setup::prepare_thread(Some(cpu), policy);
                let src = LineBuf::new(n, 0, |i| pattern_byte(i + HEADER_BYTES));
                let mut dst = LineBuf::new(n, 0, |_| 0);
                // Warm-up: both buffers into the cache.
                for _ in 0..BATCH {
                    dst.copy_from_slice(std::hint::black_box(&*src));
                    std::hint::black_box(&mut *dst);
                }
                let start = monotonic_now();
                let end = start.saturating_add(time);
                let mut copies = 0u64;
                let mut now = start;
                while now < end {
                    for _ in 0..BATCH {
                        dst.copy_from_slice(std::hint::black_box(&*src));
                        std::hint::black_box(&mut *dst);
                    }
                    copies += BATCH;
                    now = monotonic_now();
                }
                setup::release_thread();
                (copies, now.saturating_sub(start), warnings)
            })
            .join()
            .expect("the memcpy thread does not panic")
    })
}

/// The `targets` measurement and the headline, when the run has the figures.
fn targets(
    params: &ThroughputParams,
    measurements: &[Measurement],
    half_round_trip_ns: Option<f64>,
    clock_read_ns: Option<f64>,
    memcpy_rates: &[(usize, f64)],
) -> Option<(Measurement, String)> {
    let spsc_cross: Vec<Point<Transfer>> = measurements
        .iter()
        .filter_map(|m| m.read::<Transfer>())
        .filter(|p| {
            p.labels.transport == Transport::Spsc && p.labels.placement == Placement::CrossCpu
        })
        .collect();
    let smallest = spsc_cross.iter().min_by_key(|p| p.labels.payload_bytes)?;
    let largest = spsc_cross.iter().max_by_key(|p| p.labels.payload_bytes)?;
    let labels = TargetsLabels {
        mode: params.mode,
        one_way_payload_bytes: smallest.labels.payload_bytes as u64,
        bandwidth_payload_bytes: largest.labels.payload_bytes as u64,
    };
    let mut t = TargetsMetrics {
        one_way_target_max: 1.5,
        bandwidth_target_min: 0.5,
        ..TargetsMetrics::default()
    };
    let mut parts = Vec::new();
    // In stream mode a message's one-way time is mostly its wait in the queue: the
    // latency target is judged in sync mode only, on half the mean round trip of
    // the untimed batch (no clock read inside it, like the bare round trip it is
    // compared with).
    let sync = |v: Option<f64>| v.filter(|_| params.mode == Mode::Sync);
    if let (Some(one_way), Some(half)) = (
        sync(smallest.metrics.one_way_half_round_trip_ns),
        half_round_trip_ns,
    ) {
        let ratio = one_way / half;
        t.half_round_trip_ns = Some(half);
        t.spsc_one_way_ns = Some(one_way);
        t.spsc_one_way_vs_half_round_trip = Some(ratio);
        let mut part = format!(
            "spsc one-way at {} B (half its round trip) {:.0} ns = {:.2}x half the bare \
             cache-line round trip ({:.0} ns; target <= 1.5: {})",
            smallest.labels.payload_bytes,
            one_way,
            ratio,
            half,
            if ratio <= 1.5 { "met" } else { "missed" }
        );
        // The timestamped one-way time, for its distribution: it holds one clock
        // read (half the sender's, half the receiver's).
        if let Some(p50) = sync(smallest.metrics.one_way_p50_ns) {
            t.spsc_one_way_p50_ns = Some(p50);
            t.spsc_one_way_p50_vs_half_round_trip = Some(p50 / half);
            part += &format!("; timestamped one-way p50 {p50:.0} ns = {:.2}x", p50 / half);
            if let Some(clock) = clock_read_ns {
                let net = (p50 - clock).max(0.0) / half;
                t.clock_read_ns = Some(clock);
                t.spsc_one_way_p50_net_vs_half_round_trip = Some(net);
                part += &format!(", {net:.2}x without its clock read ({clock:.0} ns)");
            }
        }
        parts.push(part);
    }
    let big = largest.labels.payload_bytes;
    let memcpy = memcpy_rates
        .iter()
        .find(|(n, _)| *n == big)
        .map(|&(_, r)| r);
    if let Some(memcpy) = memcpy
        && big > 0
        && memcpy > 0.0
    {
        let rate = largest.metrics.bytes_per_s;
        let ratio = rate / memcpy;
        t.spsc_bytes_per_s = Some(rate);
        t.memcpy_bytes_per_s = Some(memcpy);
        t.spsc_vs_memcpy = Some(ratio);
        parts.push(format!(
            "spsc at {} {:.0} MB/s = {:.2}x memcpy ({:.0} MB/s; target >= 0.5: {})",
            bytes_label(big),
            rate / 1e6,
            ratio,
            memcpy / 1e6,
            if ratio >= 0.5 { "met" } else { "missed" }
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let headline = format!(
        "{} mode, cross-cpu: {}",
        params.mode.name(),
        parts.join("; ")
    );
    Some((Point::<Targets>::new(labels, t).measurement(), headline))
}

/// `32 KiB`, `4 KiB`, or `100 B`.
fn bytes_label(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// What one transfer point hands back.
struct TransferPoint {
    /// The receiver's configuration, read back.
    config: ThreadConfig,
    /// Both threads' setup warnings.
    warnings: Vec<Warning>,
    one_way: LatencyHistogram,
    round_trip: LatencyHistogram,
    sent: SenderOutcome,
    received: ReceiverOutcome,
    cpus: (usize, usize),
}

impl TransferPoint {
    /// The point as a [`Measurement`]; `None` when no message was measured (a stop
    /// request came first).
    fn measurement(
        &self,
        params: &ThroughputParams,
        transport: Transport,
        placement: Placement,
        n: usize,
    ) -> Option<Measurement> {
        let rx = &self.received;
        if rx.measured == 0 {
            return None;
        }
        let elapsed = match (rx.first_stamp, rx.last_arrival) {
            (Some(first), Some(last)) => last.saturating_sub(first),
            _ => Nanos::ZERO,
        };
        let secs = elapsed.as_secs_f64().max(1e-9);
        let one_way = self.one_way.summary();
        let ns = |v: Option<Nanos>| v.map(|n| n.as_u64() as f64);
        let labels = TransferLabels {
            transport,
            placement,
            payload_bytes: n,
            mode: params.mode,
            cpus: [self.cpus.0, self.cpus.1],
            policy: self.config.policy.to_string(),
        };
        let mut metrics = TransferMetrics {
            messages: rx.measured as f64,
            elapsed_ns: elapsed.as_u64() as f64,
            bytes_per_s: rx.measured as f64 * n as f64 / secs,
            messages_per_s: rx.measured as f64 / secs,
            one_way_mean_ns: one_way.mean_ns,
            one_way_p50_ns: ns(one_way.percentile(Percentile::P50)),
            one_way_p99_ns: ns(one_way.percentile(Percentile::P99)),
            one_way_max_ns: ns(one_way.max_ns),
            ..TransferMetrics::default()
        };
        if params.mode == Mode::Sync {
            let rt = self.round_trip.summary();
            metrics.round_trip_mean_ns = rt.mean_ns;
            metrics.round_trip_p50_ns = ns(rt.percentile(Percentile::P50));
            metrics.round_trip_p99_ns = ns(rt.percentile(Percentile::P99));
            metrics.round_trip_max_ns = ns(rt.max_ns);
            let batch = self.sent.batch_messages;
            if batch > 0 {
                let mean = self.sent.batch_elapsed.as_u64() as f64 / batch as f64;
                metrics.batch_messages = Some(batch as f64);
                metrics.batch_round_trip_ns = Some(mean);
                metrics.one_way_half_round_trip_ns = Some(mean / 2.0);
            }
        }
        let m = Point::<Transfer>::new(labels, metrics).measurement();
        Some(m.with_latency(LatencyResult::from_histogram(
            &self.one_way,
            MissCounter::default(),
        )))
    }
}

/// The sender thread's results.
struct SenderSide {
    warnings: Vec<Warning>,
    round_trip: LatencyHistogram,
    /// `None` when the receiver never started.
    result: io::Result<Option<SenderOutcome>>,
}

/// The receiver thread's results.
struct ReceiverSide {
    config: ThreadConfig,
    warnings: Vec<Warning>,
    one_way: LatencyHistogram,
    result: io::Result<ReceiverOutcome>,
}

/// Runs one point: creates the transport, starts the sender then the receiver,
/// joins them and checks the sums.
fn transfer_point(
    params: &ThroughputParams,
    transport: Transport,
    placement: Placement,
    n: usize,
    progress: &Progress,
) -> Result<TransferPoint, ThroughputError> {
    let fail = |source| ThroughputError::Transport {
        transport,
        placement,
        payload: n,
        source,
    };
    let (mut tx, mut rx) = link(transport, params.mode, n, placement).map_err(fail)?;
    let (cpu_tx, cpu_rx) = params.cpus_for(placement);
    let policy = params.sched.policy;
    let plan = Plan {
        warmup: params.warmup,
        length: params.length,
    };
    let (sender, receiver) = thread::scope(|scope| {
        // The receiver says when it is prepared; if it never starts, the channel
        // closes and the sender sends nothing.
        let (ready_tx, ready_rx) = mpsc::sync_channel::<()>(1);
        let sender = thread::Builder::new()
            .name("ictus-tput-tx".into())
            .spawn_scoped(scope, move || {
                let (_, warnings) = setup::prepare_thread(Some(cpu_tx), policy);
                let mut round_trip = LatencyHistogram::new();
                let result = match ready_rx.recv() {
                    Ok(()) => tx.send_messages(&plan, &mut round_trip, progress).map(Some),
                    Err(_) => Ok(None),
                };
                setup::release_thread();
                SenderSide {
                    warnings,
                    round_trip,
                    result,
                }
            })
            .map_err(|source| ThroughputError::Spawn { source })?;
        let receiver = thread::Builder::new()
            .name("ictus-tput-rx".into())
            .spawn_scoped(scope, move || {
                let (config, warnings) = setup::prepare_thread(Some(cpu_rx), policy);
                let mut one_way = LatencyHistogram::new();
                let _ = ready_tx.send(());
                let result = rx.receive_messages(&mut one_way);
                setup::release_thread();
                ReceiverSide {
                    config,
                    warnings,
                    one_way,
                    result,
                }
            });
        let receiver = match receiver {
            Ok(handle) => handle,
            Err(source) => {
                // The closure, and with it `ready_tx`, is gone: the sender returns.
                let _ = sender.join();
                return Err(ThroughputError::Spawn { source });
            }
        };
        let sender = sender.join().expect("the sender thread does not panic");
        let receiver = receiver.join().expect("the receiver thread does not panic");
        Ok((sender, receiver))
    })?;
    // A failing side makes the other fail too (a closed pipe or socket); the
    // receiver's error comes first, as it usually names the cause.
    let received = receiver.result.map_err(fail)?;
    let sent = sender.result.map_err(fail)?.unwrap_or_default();
    if sent.checksum != received.checksum
        || sent.messages != received.messages
        || sent.batch_messages != received.batch_messages
    {
        return Err(ThroughputError::Corrupted {
            transport,
            placement,
            payload: n,
            sent: sent.checksum,
            received: received.checksum,
            sent_messages: sent.messages + sent.batch_messages,
            received_messages: received.messages + received.batch_messages,
        });
    }
    let mut warnings = sender.warnings;
    warnings.extend(receiver.warnings);
    Ok(TransferPoint {
        config: receiver.config,
        warnings,
        one_way: receiver.one_way,
        round_trip: sender.round_trip,
        sent,
        received,
        cpus: (cpu_tx, cpu_rx),
    })
}

/// The parameters as the probe records them (units in the key names), and as
/// readers read them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    /// The transports asked for.
    pub transports: Vec<Transport>,
    /// The placements asked for.
    pub placements: Vec<Placement>,
    /// Acknowledged messages or a stream.
    pub mode: Mode,
    /// The payloads swept.
    pub payload_bytes: Vec<usize>,
    /// How long each point measured, when asked for as a time.
    pub point_time_ns: Option<u64>,
    /// Messages each point measured, when asked for as a count.
    pub messages: Option<u64>,
    /// Warm-up before each point.
    pub warmup_ns: u64,
    /// Round trips of the cache-line reference.
    pub round_trips: u64,
    /// The buffer of the stream transports.
    pub stream_buffer_bytes: usize,
    /// Spins before a waiting side yields.
    pub spins_before_yield: u32,
    /// The CPUs of the sender and the receiver.
    pub cpus: CpuSet,
    /// The policy asked for.
    pub policy: Policy,
    /// All memory locked.
    pub mlock: bool,
}

impl From<&ThroughputParams> for ParamsRecord {
    fn from(p: &ThroughputParams) -> Self {
        ParamsRecord {
            transports: p.transports.clone(),
            placements: p.placements.clone(),
            mode: p.mode,
            payload_bytes: p.sizes.clone(),
            point_time_ns: match p.length {
                Length::Duration(d) => Some(d.as_u64()),
                Length::Count(_) => None,
            },
            messages: match p.length {
                Length::Count(n) => Some(n),
                Length::Duration(_) => None,
            },
            warmup_ns: p.warmup.as_u64(),
            round_trips: p.round_trips,
            stream_buffer_bytes: STREAM_BUFFER_BYTES,
            spins_before_yield: SPINS_BEFORE_YIELD,
            cpus: p.sched.cpus.clone(),
            policy: p.sched.policy,
            mlock: p.sched.mlock,
        }
    }
}

/// The header word: the sender's clock reading, with flags in the top bits.
mod header {
    /// The message belongs to the warm-up: the receiver does not time it.
    pub(super) const WARMUP: u64 = 1 << 63;
    /// The last message: the receiver ends without summing or acknowledging it.
    pub(super) const STOP: u64 = 1 << 62;
    /// A message of the untimed batch: it carries no clock reading, and the
    /// receiver sums and acknowledges it without reading the clock.
    pub(super) const UNTIMED: u64 = 1 << 61;
    /// The clock reading (CLOCK_MONOTONIC stays below 2^61 ns, 73 years).
    pub(super) const STAMP: u64 = UNTIMED - 1;
}

/// Byte `i` of every message's fixed pattern (`i` counts from the header's start).
#[inline]
fn pattern_byte(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

/// The receiver's sum of one payload: its 8-byte little-endian words, then its
/// trailing bytes, added with wraparound. Reads every byte.
///
/// Whole 64-byte blocks go into eight independent sums (word `k` of every block
/// into sum `k`), which the compiler keeps in vector registers: no addition
/// waits for the one before, so the loop runs at the speed the bytes arrive
/// (about 90 GB/s from L1 on the Zen 3 this was written on, twice a single
/// chain's), and the receiver is never what limits a transfer.
#[inline]
pub fn checksum(payload: &[u8]) -> u64 {
    let (blocks, tail) = payload.as_chunks::<64>();
    let mut sums = [0u64; 8];
    for block in blocks {
        let (words, _) = block.as_chunks::<8>();
        for (sum, w) in sums.iter_mut().zip(words) {
            *sum = sum.wrapping_add(u64::from_le_bytes(*w));
        }
    }
    let mut sum = sums.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let (words, rest) = tail.as_chunks::<8>();
    for w in words {
        sum = sum.wrapping_add(u64::from_le_bytes(*w));
    }
    for &b in rest {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum
}

/// What the first `min(8, n)` payload bytes, which carry the message's sequence
/// number, add to its [`checksum`].
#[inline]
fn head_sum(seq: u64, n: usize) -> u64 {
    if n >= 8 {
        seq
    } else {
        seq.to_le_bytes()[..n].iter().map(|&b| u64::from(b)).sum()
    }
}

/// How a ring side waits for the other.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    /// Spins before each `sched_yield`; `u32::MAX`: spin only.
    spins: u32,
}

impl Backoff {
    fn for_placement(placement: Placement) -> Self {
        match placement {
            Placement::SameCpu => Backoff {
                spins: SPINS_BEFORE_YIELD,
            },
            Placement::CrossCpu => Backoff { spins: u32::MAX },
        }
    }

    /// One wait step; `spun` counts the steps of this wait.
    #[inline]
    fn pause(self, spun: &mut u32) {
        if *spun < self.spins {
            *spun += 1;
            std::hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// A byte buffer that starts `skew` bytes past a 64-byte line boundary, its memory
/// written (so faulted in) at construction.
///
/// Where a copy's source and destination lie relative to each other matters: on the
/// AMD Zen 3 this probe was written on, a copy of 4 KiB or more whose destination
/// lies 8 to 31 bytes past its source modulo 4096 runs about 20 times slower (2 GB/s
/// instead of 40; `rep movsb` and 4K aliasing). Buffers placed by chance make the
/// figures depend on where the allocator put them, so every buffer the probe copies
/// between is placed: the sender's message (and the pipe and unix receive buffer)
/// [`bytes::PAYLOAD_OFFSET`] bytes into a line, as a ring slot's payload is;
/// handover buffers and the memcpy reference's on a line.
struct LineBuf {
    storage: Box<[u8]>,
    start: usize,
    len: usize,
}

impl LineBuf {
    /// `len` bytes starting `skew` (< 64) bytes past a line, byte `i` set to `fill(i)`.
    fn new(len: usize, skew: usize, fill: impl Fn(usize) -> u8) -> Self {
        // Not zeroes: a zeroed allocation may be left unwritten (so not faulted in).
        let mut storage = vec![0x5Au8; len + 64 + skew].into_boxed_slice();
        let start = storage.as_ptr().align_offset(64) + skew;
        for (i, b) in storage[start..start + len].iter_mut().enumerate() {
            *b = fill(i);
        }
        LineBuf {
            storage,
            start,
            len,
        }
    }
}

impl std::ops::Deref for LineBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for LineBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// A filled buffer on its way to the receiver (`handover`).
struct Parcel {
    buf: LineBuf,
    len: usize,
    header: u64,
}

/// The sender's end of one transport.
enum SendPort {
    Spsc {
        ring: bytes::ByteProducer,
        /// Sync mode: wait until the ring is empty again after each message.
        sync: bool,
    },
    Pipe {
        data: io::PipeWriter,
        ack: Option<io::PipeReader>,
    },
    Unix(UnixStream),
    Handover {
        parcels: spsc::Producer<Parcel>,
        free: spsc::Consumer<LineBuf>,
        /// In sync mode, the buffer that came back with the last acknowledgement.
        held: Option<LineBuf>,
    },
}

/// The receiver's end of one transport.
enum ReceivePort {
    Spsc(bytes::ByteConsumer),
    Pipe {
        data: io::PipeReader,
        ack: Option<io::PipeWriter>,
    },
    Unix(UnixStream),
    Handover {
        parcels: spsc::Consumer<Parcel>,
        free: spsc::Producer<LineBuf>,
        /// The buffer just read, returned by `done`.
        held: Option<LineBuf>,
    },
}

/// How long a sender runs: warm-up, then the point's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Messages sent for this long first are flagged as warm-up and not measured.
    pub warmup: Nanos,
    /// How long the measured part lasts.
    pub length: Length,
}

/// What a sender sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderOutcome {
    /// Messages sent, warm-up included, the untimed batch and the final stop
    /// message not.
    pub messages: u64,
    /// Measured messages sent.
    pub measured: u64,
    /// Sync mode: messages of the untimed batch, sent after the warm-up and before
    /// the measured messages, each acknowledged before the next, with no clock read
    /// on either side (the sender reads it once per [`BATCH_CHUNK`]). Their mean
    /// round trip, `batch_elapsed / batch_messages`, is comparable with the bare
    /// cache-line round trip, which is also a mean over many with no clock read
    /// in between.
    pub batch_messages: u64,
    /// Sync mode: how long the untimed batch took.
    pub batch_elapsed: Nanos,
    /// The sum the receiver must find over all `messages` and `batch_messages`.
    pub checksum: u64,
}

/// What a receiver received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverOutcome {
    /// Messages received, warm-up included, the untimed batch and the final stop
    /// message not.
    pub messages: u64,
    /// Measured messages received (each one timed).
    pub measured: u64,
    /// Messages of the sender's untimed batch received (not timed).
    pub batch_messages: u64,
    /// The sum of the payloads of all `messages` and `batch_messages`.
    pub checksum: u64,
    /// The send stamp of the first measured message.
    pub first_stamp: Option<Nanos>,
    /// When the last measured message had been read.
    pub last_arrival: Option<Nanos>,
}

/// The sending end of a transport made by [`link`].
pub struct Sender {
    port: SendPort,
    mode: Mode,
    backoff: Backoff,
    payload: usize,
    /// The outgoing message: header, then the payload (fixed pattern, sequence
    /// number in its first bytes).
    msg: LineBuf,
}

/// The receiving end of a transport made by [`link`].
pub struct Receiver {
    port: ReceivePort,
    mode: Mode,
    backoff: Backoff,
    payload: usize,
    /// Where `pipe` and `unix` messages are read to.
    buf: LineBuf,
}

/// A transport end as `Debug` shows it: its mode and payload (the port is opaque).
fn debug_end(f: &mut fmt::Formatter<'_>, name: &str, mode: Mode, payload: usize) -> fmt::Result {
    f.debug_struct(name)
        .field("mode", &mode)
        .field("payload", &payload)
        .finish_non_exhaustive()
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_end(f, "Sender", self.mode, self.payload)
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_end(f, "Receiver", self.mode, self.payload)
    }
}

/// Creates a `transport` for messages of `payload` bytes in `mode`, returning its
/// two ends. Everything is allocated and written here; the sending and receiving
/// loops allocate nothing. `placement` says how the ring transports wait: spinning
/// across CPUs, spinning briefly then yielding on one.
pub fn link(
    transport: Transport,
    mode: Mode,
    payload: usize,
    placement: Placement,
) -> io::Result<(Sender, Receiver)> {
    let len = HEADER_BYTES + payload;
    // Stream: about STREAM_BUFFER_BYTES in flight; sync: one message at a time.
    let depth = match mode {
        Mode::Sync => 1,
        Mode::Stream => (STREAM_BUFFER_BYTES / len.next_multiple_of(64)).clamp(4, 256),
    };
    let sync = mode == Mode::Sync;
    let (send, receive) = match transport {
        Transport::Spsc => {
            let (ring, ring_rx) = bytes::channel(len, depth);
            (SendPort::Spsc { ring, sync }, ReceivePort::Spsc(ring_rx))
        }
        Transport::Pipe => {
            let (data_rx, data_tx) = io::pipe()?;
            let (ack_rx, ack_tx) = if sync {
                let (r, w) = io::pipe()?;
                (Some(r), Some(w))
            } else {
                (None, None)
            };
            (
                SendPort::Pipe {
                    data: data_tx,
                    ack: ack_rx,
                },
                ReceivePort::Pipe {
                    data: data_rx,
                    ack: ack_tx,
                },
            )
        }
        Transport::Unix => {
            let (a, b) = UnixStream::pair()?;
            (SendPort::Unix(a), ReceivePort::Unix(b))
        }
        Transport::Handover => {
            let (parcels_tx, parcels_rx) = spsc::channel::<Parcel>(depth);
            let (mut free_tx, free_rx) = spsc::channel::<LineBuf>(depth);
            for _ in 0..depth {
                let buf = LineBuf::new(payload, 0, |i| pattern_byte(!i));
                assert!(
                    free_tx.push(buf).is_ok(),
                    "the free ring holds every buffer"
                );
            }
            (
                SendPort::Handover {
                    parcels: parcels_tx,
                    free: free_rx,
                    held: None,
                },
                ReceivePort::Handover {
                    parcels: parcels_rx,
                    free: free_tx,
                    held: None,
                },
            )
        }
    };
    // The message starts where a ring slot's payload does, relative to a line.
    let msg = LineBuf::new(len, bytes::PAYLOAD_OFFSET, pattern_byte);
    let backoff = Backoff::for_placement(placement);
    let buf = match transport {
        Transport::Pipe | Transport::Unix => LineBuf::new(len, bytes::PAYLOAD_OFFSET, |_| 0),
        Transport::Spsc | Transport::Handover => LineBuf::new(0, 0, |_| 0),
    };
    Ok((
        Sender {
            port: send,
            mode,
            backoff,
            payload,
            msg,
        },
        Receiver {
            port: receive,
            mode,
            backoff,
            payload,
            buf,
        },
    ))
}

impl Sender {
    /// Sends messages per `plan`: warm-up messages; in sync mode an untimed
    /// batch (see [`SenderOutcome::batch_messages`]); then measured ones until the
    /// length is reached or a stop is requested; then a stop message. In sync mode
    /// each message is acknowledged before the next is sent, and each measured
    /// round trip goes into `round_trip`. Allocates nothing.
    pub fn send_messages(
        &mut self,
        plan: &Plan,
        round_trip: &mut LatencyHistogram,
        progress: &Progress,
    ) -> io::Result<SenderOutcome> {
        let n = self.payload;
        let h = n.min(8);
        self.msg[HEADER_BYTES..HEADER_BYTES + h].fill(0);
        let base = checksum(&self.msg[HEADER_BYTES..HEADER_BYTES + n]);
        let mut out = SenderOutcome::default();
        // Every message so far, of every kind: the next one's sequence number is
        // `seq + 1`, which is also the count the receiver acknowledges it with.
        let mut seq = 0u64;
        let mut checksum = 0u64;
        let mut exchange = |this: &mut Self, header: u64| -> io::Result<()> {
            seq += 1;
            this.msg[HEADER_BYTES..HEADER_BYTES + h].copy_from_slice(&seq.to_le_bytes()[..h]);
            this.send(header)?;
            checksum = checksum.wrapping_add(base).wrapping_add(head_sum(seq, n));
            if this.mode == Mode::Sync {
                this.wait_ack(seq)?;
            }
            Ok(())
        };
        // Warm-up.
        let warm_end = monotonic_now().saturating_add(plan.warmup);
        while !progress.stop_requested() {
            let t0 = monotonic_now();
            if t0 >= warm_end {
                break;
            }
            exchange(self, t0.as_u64() & header::STAMP | header::WARMUP)?;
            out.messages += 1;
        }
        // Sync mode: the untimed batch, clock read once per BATCH_CHUNK messages.
        if self.mode == Mode::Sync {
            let (count, time) = match plan.length {
                Length::Count(k) => (k, Nanos::MAX),
                Length::Duration(d) => (u64::MAX, Nanos::new(d.as_u64() / BATCH_SHARE)),
            };
            let start = monotonic_now();
            let end = start.saturating_add(time);
            let mut now = start;
            while out.batch_messages < count && now < end && !progress.stop_requested() {
                let chunk = BATCH_CHUNK.min(count - out.batch_messages);
                for _ in 0..chunk {
                    exchange(self, header::UNTIMED)?;
                }
                out.batch_messages += chunk;
                now = monotonic_now();
            }
            out.batch_elapsed = now.saturating_sub(start);
        }
        // The measured messages.
        let limit = match plan.length {
            Length::Count(k) => k,
            Length::Duration(_) => u64::MAX,
        };
        // With `Length::Duration`, set when the first measured message goes out.
        let mut end = Nanos::MAX;
        while out.measured < limit && !progress.stop_requested() {
            let t0 = monotonic_now();
            if out.measured == 0
                && let Length::Duration(d) = plan.length
            {
                end = t0.saturating_add(d);
            }
            if t0 >= end {
                break;
            }
            exchange(self, t0.as_u64() & header::STAMP)?;
            if self.mode == Mode::Sync {
                round_trip.record(monotonic_now().saturating_sub(t0));
            }
            out.messages += 1;
            out.measured += 1;
        }
        out.checksum = checksum;
        self.send(monotonic_now().as_u64() & header::STAMP | header::STOP)?;
        Ok(out)
    }

    /// Sends the message in `msg` with `header` in front, waiting while the
    /// transport is full.
    #[inline]
    fn send(&mut self, header: u64) -> io::Result<()> {
        let Sender {
            port,
            backoff,
            payload,
            msg,
            ..
        } = self;
        msg[..HEADER_BYTES].copy_from_slice(&header.to_le_bytes());
        let msg = &msg[..HEADER_BYTES + *payload];
        let mut spun = 0;
        match port {
            SendPort::Spsc { ring, .. } => {
                while !ring.try_write(|slot| {
                    slot[..msg.len()].copy_from_slice(msg);
                    msg.len()
                }) {
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
            SendPort::Pipe { data, .. } => data.write_all(msg),
            SendPort::Unix(stream) => stream.write_all(msg),
            SendPort::Handover {
                parcels,
                free,
                held,
            } => {
                let mut buf = match held.take() {
                    Some(buf) => buf,
                    None => loop {
                        if let Some(buf) = free.pop() {
                            break buf;
                        }
                        backoff.pause(&mut spun);
                    },
                };
                buf.copy_from_slice(&msg[HEADER_BYTES..]);
                let mut parcel = Parcel {
                    buf,
                    len: *payload,
                    header,
                };
                spun = 0;
                while let Err(Full(back)) = parcels.push(parcel) {
                    parcel = back;
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
        }
    }

    /// Sync mode: waits until the receiver has taken message `seq`.
    #[inline]
    fn wait_ack(&mut self, seq: u64) -> io::Result<()> {
        let mut spun = 0;
        let backoff = self.backoff;
        match &mut self.port {
            SendPort::Spsc { ring, sync: true } => {
                // The receiver hands the slot back once it has read the message:
                // that hand-back, in the slot's own first line, is the
                // acknowledgement (one message is in flight, so `seq` is the one
                // taken).
                while !ring.is_empty() {
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
            SendPort::Spsc { sync: false, .. } => Ok(()),
            SendPort::Pipe { ack: Some(ack), .. } => expect_ack(ack, seq),
            SendPort::Pipe { ack: None, .. } => Ok(()),
            SendPort::Unix(stream) => expect_ack(stream, seq),
            SendPort::Handover { free, held, .. } => {
                // The buffer coming back is the acknowledgement.
                *held = Some(loop {
                    if let Some(buf) = free.pop() {
                        break buf;
                    }
                    backoff.pause(&mut spun);
                });
                Ok(())
            }
        }
    }
}

/// Reads one acknowledgement and checks that it is for message `seq`.
fn expect_ack(from: &mut impl Read, seq: u64) -> io::Result<()> {
    let mut word = [0u8; 8];
    from.read_exact(&mut word)?;
    if u64::from_le_bytes(word) == seq {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "an acknowledgement arrived out of order",
        ))
    }
}

impl Receiver {
    /// Receives messages until the stop message: sums every payload, times every
    /// measured message into `one_way`, and in sync mode acknowledges each one.
    /// Allocates nothing.
    pub fn receive_messages(
        &mut self,
        one_way: &mut LatencyHistogram,
    ) -> io::Result<ReceiverOutcome> {
        let mut out = ReceiverOutcome::default();
        // Every message so far, of every kind: what the sender waits for.
        let mut count = 0u64;
        loop {
            let (word, sum) = self.receive()?;
            if word & header::UNTIMED != 0 {
                count += 1;
                out.batch_messages += 1;
                out.checksum = out.checksum.wrapping_add(sum);
                self.done(count)?;
                continue;
            }
            let t1 = monotonic_now();
            if word & header::STOP != 0 {
                // Not acknowledged: the sender may already have closed its end.
                return Ok(out);
            }
            count += 1;
            out.messages += 1;
            out.checksum = out.checksum.wrapping_add(sum);
            self.done(count)?;
            if word & header::WARMUP == 0 {
                let stamp = Nanos::new(word & header::STAMP);
                one_way.record(t1.saturating_sub(stamp));
                out.first_stamp.get_or_insert(stamp);
                out.last_arrival = Some(t1);
                out.measured += 1;
            }
        }
    }

    /// Waits for the next message and reads it whole: its header and its payload's
    /// checksum.
    #[inline]
    fn receive(&mut self) -> io::Result<(u64, u64)> {
        let len = HEADER_BYTES + self.payload;
        let backoff = self.backoff;
        let mut spun = 0;
        match &mut self.port {
            ReceivePort::Spsc(ring) => loop {
                if let Some(got) = ring.try_read(split) {
                    return Ok(got);
                }
                backoff.pause(&mut spun);
            },
            ReceivePort::Pipe { data, .. } => {
                data.read_exact(&mut self.buf[..len])?;
                Ok(split(&self.buf[..len]))
            }
            ReceivePort::Unix(stream) => {
                stream.read_exact(&mut self.buf[..len])?;
                Ok(split(&self.buf[..len]))
            }
            ReceivePort::Handover { parcels, held, .. } => {
                let parcel = loop {
                    if let Some(p) = parcels.pop() {
                        break p;
                    }
                    backoff.pause(&mut spun);
                };
                let sum = checksum(&parcel.buf[..parcel.len]);
                *held = Some(parcel.buf);
                Ok((parcel.header, sum))
            }
        }
    }

    /// After a message was read and timed: gives a `handover` buffer back, and in
    /// sync mode acknowledges message `count`.
    #[inline]
    fn done(&mut self, count: u64) -> io::Result<()> {
        let sync = self.mode == Mode::Sync;
        match &mut self.port {
            // The slot went back to the sender in `receive`.
            ReceivePort::Spsc(_) => Ok(()),
            ReceivePort::Pipe { ack: Some(ack), .. } => ack.write_all(&count.to_le_bytes()),
            ReceivePort::Pipe { ack: None, .. } => Ok(()),
            ReceivePort::Unix(stream) if sync => stream.write_all(&count.to_le_bytes()),
            ReceivePort::Unix(_) => Ok(()),
            ReceivePort::Handover { free, held, .. } => {
                if let Some(buf) = held.take() {
                    // The free ring has room for every buffer, so this never fails;
                    // the sender only takes a buffer out of it before giving it back.
                    assert!(free.push(buf).is_ok(), "the free ring holds every buffer");
                }
                Ok(())
            }
        }
    }
}

/// A message's header word and its payload's checksum.
#[inline]
fn split(msg: &[u8]) -> (u64, u64) {
    let (word, payload) = msg
        .split_first_chunk::<HEADER_BYTES>()
        .expect("every message carries its header");
    (u64::from_le_bytes(*word), checksum(payload))
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = ThroughputParams;
pub(crate) type ProbeFailure = ThroughputError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::reads_back;

    fn two_cpus() -> bool {
        facts::online_cpus().len() >= 2
    }

    /// Moves `messages` messages of `n` bytes over `transport` between two unpinned
    /// threads (waiting as on one CPU, so a shared CPU cannot stall them).
    fn transfer(
        transport: Transport,
        mode: Mode,
        n: usize,
        messages: u64,
    ) -> (SenderOutcome, ReceiverOutcome) {
        let (mut tx, mut rx) = link(transport, mode, n, Placement::SameCpu).unwrap();
        let receiver = thread::spawn(move || {
            let mut one_way = LatencyHistogram::new();
            let out = rx.receive_messages(&mut one_way).unwrap();
            assert_eq!(one_way.count(), out.measured);
            out
        });
        let plan = Plan {
            warmup: Nanos::ZERO,
            length: Length::Count(messages),
        };
        let mut round_trip = LatencyHistogram::new();
        let sent = tx
            .send_messages(&plan, &mut round_trip, &Progress::new())
            .unwrap();
        let expected_rt = if mode == Mode::Sync { messages } else { 0 };
        assert_eq!(round_trip.count(), expected_rt);
        (sent, receiver.join().unwrap())
    }

    #[test]
    fn every_transport_moves_messages_of_every_size_intact() {
        for transport in Transport::ALL {
            for mode in [Mode::Sync, Mode::Stream] {
                for n in [0, 1, 7, 8, 9, 64, 100, 4096, 40_000] {
                    let (sent, received) = transfer(transport, mode, n, 300);
                    let at = format!("{transport} {mode} {n} B");
                    assert_eq!(sent.messages, 300, "{at}");
                    assert_eq!(sent.measured, 300, "{at}");
                    assert_eq!(received.messages, 300, "{at}");
                    assert_eq!(received.measured, 300, "{at}");
                    assert_eq!(sent.checksum, received.checksum, "{at}");
                    assert!(received.first_stamp <= received.last_arrival, "{at}");
                    let batch = if mode == Mode::Sync { 300 } else { 0 };
                    assert_eq!(sent.batch_messages, batch, "{at}");
                    assert_eq!(received.batch_messages, batch, "{at}");
                }
            }
        }
    }

    #[test]
    fn the_senders_sum_matches_the_bytes_it_sends() {
        for n in 0..40 {
            let msg: Vec<u8> = (0..HEADER_BYTES + n).map(pattern_byte).collect();
            let mut zeroed = msg[HEADER_BYTES..].to_vec();
            zeroed[..n.min(8)].fill(0);
            let base = checksum(&zeroed);
            for seq in [1u64, 255, 256, 0x0102_0304_0506_0708, u64::MAX] {
                let mut sut = zeroed.clone();
                sut[..n.min(8)].copy_from_slice(&seq.to_le_bytes()[..n.min(8)]);
                assert_eq!(
                    checksum(&sut),
                    base.wrapping_add(head_sum(seq, n)),
                    "{n} B, seq {seq}"
                );
            }
        }
    }

    #[test]
    fn the_checksum_is_the_sum_of_the_words_then_the_trailing_bytes() {
        let bytes: Vec<u8> = (0..300).map(pattern_byte).collect();
        for n in 0..bytes.len() {
            let payload = &bytes[..n];
            let words = payload.chunks_exact(8);
            let rest = words.remainder().iter().map(|&b| u64::from(b));
            let expected = words
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
                .chain(rest)
                .fold(0u64, u64::wrapping_add);
            assert_eq!(checksum(payload), expected, "{n} B");
        }
    }

    #[test]
    fn the_checksum_reads_every_byte() {
        let mut sut = vec![0u8; 137];
        assert_eq!(checksum(&sut), 0);
        for i in 0..sut.len() {
            sut[i] = 1;
            assert_ne!(checksum(&sut), 0, "byte {i} not read");
            sut[i] = 0;
        }
    }

    #[test]
    fn the_sweep_is_zero_then_powers_of_two() {
        let sut = sizes_up_to(32 * 1024);
        assert_eq!(sut.len(), 17);
        assert_eq!(&sut[..4], &[0, 1, 2, 4]);
        assert_eq!(sut.last(), Some(&32_768));
        assert_eq!(sizes_up_to(100), vec![0, 1, 2, 4, 8, 16, 32, 64, 100]);
        assert_eq!(sizes_up_to(0), vec![0]);
    }

    #[test]
    fn the_record_has_one_point_per_transport_placement_and_size() {
        let placements = if two_cpus() {
            Placement::ALL.to_vec()
        } else {
            vec![Placement::SameCpu]
        };
        let params = ThroughputParams {
            sched: SchedSpec {
                policy: Policy::Other { nice: 0 },
                ..ThroughputParams::default().sched
            },
            placements: placements.clone(),
            sizes: vec![0, 64, 4096],
            length: Length::Count(50),
            warmup: Nanos::from_micros(100),
            round_trips: 1_000,
            ..ThroughputParams::default()
        };
        let progress = Progress::new();
        let sut = run(&params, vec![], &progress).unwrap();
        assert!(sut.complete);
        assert_eq!(progress.done(), progress.total());
        let transfers: Vec<_> = sut
            .measurements
            .iter()
            .filter(|m| m.is::<Transfer>())
            .collect();
        assert_eq!(transfers.len(), 4 * placements.len() * 3);
        for m in &transfers {
            let p = reads_back::<Transfer>(m);
            assert_eq!(p.metrics.messages, 50.0, "{:?}", m.labels);
            assert_eq!(m.latency.as_ref().unwrap().summary.count, 50);
            assert!(p.metrics.round_trip_p50_ns.is_some());
            assert_eq!(p.metrics.batch_messages, Some(50.0), "{:?}", m.labels);
            assert!(p.metrics.one_way_half_round_trip_ns.unwrap() > 0.0);
            assert_eq!(p.labels.mode, Mode::Sync);
            assert_eq!(m.labels["mode"], "sync");
        }
        let memcpy = sut.measurements.iter().filter(|m| m.is::<Memcpy>());
        assert_eq!(memcpy.map(reads_back::<Memcpy>).count(), 3);
        if two_cpus() {
            let rt = sut
                .measurements
                .iter()
                .find(|m| m.is::<CachelineRoundTrip>());
            reads_back::<CachelineRoundTrip>(rt.unwrap());
            let targets = sut.measurements.iter().find(|m| m.is::<Targets>());
            let t = reads_back::<Targets>(targets.unwrap()).metrics;
            assert!(t.spsc_one_way_vs_half_round_trip.unwrap() > 0.0);
            assert!(t.spsc_one_way_p50_vs_half_round_trip.unwrap() > 0.0);
            assert!(t.spsc_vs_memcpy.unwrap() > 0.0);
            assert!(sut.headline.unwrap().contains("spsc"));
        }
        // The record survives a JSON round trip (no NaN among the figures).
        let json = serde_json::to_string(&sut.measurements).unwrap();
        let back: Vec<Measurement> = serde_json::from_str(&json).unwrap();
        assert_eq!(back.len(), sut.measurements.len());
    }

    #[test]
    fn a_stop_request_gives_an_incomplete_record() {
        let progress = Progress::new();
        progress.request_stop();
        let params = ThroughputParams {
            placements: vec![Placement::SameCpu],
            sizes: vec![8],
            ..ThroughputParams::default()
        };
        let sut = run(&params, vec![], &progress).unwrap();
        assert!(!sut.complete);
        assert!(sut.measurements.iter().all(|m| m.name != MEASUREMENT));
    }

    #[test]
    fn bad_parameters_are_refused_before_anything_runs() {
        let base = ThroughputParams::default();
        let none = ThroughputParams {
            transports: vec![],
            ..base.clone()
        };
        assert!(matches!(
            validate(&none),
            Err(ThroughputError::NothingToRun)
        ));
        let huge = ThroughputParams {
            sizes: vec![MAX_PAYLOAD_BYTES + 1],
            ..base.clone()
        };
        assert!(matches!(
            validate(&huge),
            Err(ThroughputError::PayloadTooLarge { .. })
        ));
        let zero = ThroughputParams {
            length: Length::Count(0),
            ..base.clone()
        };
        assert!(matches!(validate(&zero), Err(ThroughputError::ZeroLength)));
        let one_cpu = ThroughputParams {
            sched: SchedSpec {
                cpus: CpuSet::from_cpus([0]),
                ..base.sched.clone()
            },
            ..base.clone()
        };
        assert!(matches!(
            validate(&one_cpu),
            Err(ThroughputError::TooFewCpus { .. })
        ));
        let unpinned = ThroughputParams {
            sched: SchedSpec {
                pin: false,
                ..base.sched.clone()
            },
            ..base
        };
        assert!(matches!(
            validate(&unpinned),
            Err(ThroughputError::Unpinned)
        ));
    }
}
