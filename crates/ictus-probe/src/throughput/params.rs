//! What a throughput run is asked for: transports, modes, payloads and placement, the
//! limits, how they are checked and recorded.

use crate::setup::Length;
use std::fmt;
use std::io;

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::setup::Placement;
use crate::setup::{self, SchedSpec};

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
pub enum Pacing {
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

impl Pacing {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Pacing::Sync => "sync",
            Pacing::Stream => "stream",
        }
    }
}

impl fmt::Display for Pacing {
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
    pub mode: Pacing,
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
            sched: SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 }),
            transports: Transport::ALL.to_vec(),
            placements: Placement::ALL.to_vec(),
            mode: Pacing::Sync,
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

/// The parameters as the probe records them (units in the key names), and as
/// readers read them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    /// The transports asked for.
    pub transports: Vec<Transport>,
    /// The placements asked for.
    pub placements: Vec<Placement>,
    /// Acknowledged messages or a stream.
    pub mode: Pacing,
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
