//! One point of the sweep: the memcpy reference, the round-trip targets, a transfer
//! measured between a sender and a receiver thread.

use crate::view::Point;
use std::io;
use std::sync::mpsc;
use std::thread;

use ictus_core::{LatencyHistogram, MissCounter, Nanos, Percentile};
use ictus_os::clock::monotonic_now;
use ictus_os::sched::Policy;

use super::view::{
    Targets, TargetsLabels, TargetsMetrics, Transfer, TransferLabels, TransferMetrics,
};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, ThreadConfig, Warning};
use crate::setup;
use crate::setup::Placement;

use super::link::{LineBuf, Plan, ReceiverOutcome, SenderOutcome, link};
use super::params::{HEADER_BYTES, Pacing, ThroughputError, ThroughputParams, Transport};
use super::wire::pattern_byte;

/// Copies `n` bytes between two preallocated buffers on `cpu` for about `time`;
/// returns the copies made, the time they took, and the setup's warnings.
pub(super) fn memcpy_point(
    cpu: usize,
    policy: Policy,
    n: usize,
    time: Nanos,
) -> (u64, Nanos, Vec<Warning>) {
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
pub(super) fn targets(
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
    let sync = |v: Option<f64>| v.filter(|_| params.mode == Pacing::Sync);
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
pub(super) fn bytes_label(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// What one transfer point hands back.
pub(super) struct TransferPoint {
    /// The receiver's configuration, read back.
    pub(super) config: ThreadConfig,
    /// Both threads' setup warnings.
    pub(super) warnings: Vec<Warning>,
    pub(super) one_way: LatencyHistogram,
    pub(super) round_trip: LatencyHistogram,
    pub(super) sent: SenderOutcome,
    pub(super) received: ReceiverOutcome,
    pub(super) cpus: (usize, usize),
}

impl TransferPoint {
    /// The point as a [`Measurement`]; `None` when no message was measured (a stop
    /// request came first).
    pub(super) fn measurement(
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
        if params.mode == Pacing::Sync {
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
pub(super) struct SenderSide {
    pub(super) warnings: Vec<Warning>,
    pub(super) round_trip: LatencyHistogram,
    /// `None` when the receiver never started.
    pub(super) result: io::Result<Option<SenderOutcome>>,
}

/// The receiver thread's results.
pub(super) struct ReceiverSide {
    pub(super) config: ThreadConfig,
    pub(super) warnings: Vec<Warning>,
    pub(super) one_way: LatencyHistogram,
    pub(super) result: io::Result<ReceiverOutcome>,
}

/// Runs one point: creates the transport, starts the sender then the receiver,
/// joins them and checks the sums.
pub(super) fn transfer_point(
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
