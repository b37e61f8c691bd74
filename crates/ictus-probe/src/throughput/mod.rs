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

mod link;
mod params;
mod point;
mod receiver;
mod sender;
mod wire;

pub use link::{Plan, Receiver, ReceiverOutcome, Sender, SenderOutcome, link};
#[cfg(feature = "cli")]
pub use params::placement_parser;
pub use params::{
    BATCH_CHUNK, BATCH_SHARE, HEADER_BYTES, MAX_PAYLOAD_BYTES, MEASUREMENT, Pacing, ParamsRecord,
    SPINS_BEFORE_YIELD, STREAM_BUFFER_BYTES, ThroughputError, ThroughputParams, Transport,
    sizes_up_to, validate,
};
pub use wire::checksum;

pub use crate::setup::Placement;

use ictus_core::Nanos;
use ictus_os::facts;

use self::view::{Memcpy, MemcpyLabels, MemcpyMetrics};
use crate::progress::Progress;
use crate::record::{RunRecord, Warning, WarningId};
use crate::rendezvous::view::{CachelineLabels, CachelineRoundTrip, CpuPair, RoundTripMetrics};
use crate::rendezvous::{self, RendezvousParams};
use crate::session::Session;
use crate::setup::Length;
use crate::view::Point;

use point::{memcpy_point, targets, transfer_point};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Throughput;

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

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = ThroughputParams;
pub(crate) type ProbeFailure = ThroughputError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests;
