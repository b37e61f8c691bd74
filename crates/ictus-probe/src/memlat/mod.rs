//! `memlat`: memory access latency by working set (seed 000 Table 5 and §6.5's cache
//! stages, extended).
//!
//! Three measurements, each swept over working sets (4 KiB to 256 MiB by default):
//!
//! - **chase**: a dependent random pointer chase, one random cycle (Sattolo's
//!   algorithm) over the 64-byte lines of the working set; each load's address comes
//!   from the previous load, so the time per load is the latency of the level the set
//!   lives in. Reported as `ns_per_load`.
//! - **strided-read** / **strided-write**: 64-bit reads (summed) or writes at a fixed
//!   distance `stride` (4 and 44 bytes as in the seed, 64 and 4096 added), wrapping
//!   around the working set; unaligned where the stride says so. Independent accesses,
//!   so this is the *average access time* of the seed's Table 5 (a throughput), reported
//!   as `ns_per_access`, `bytes_per_s` (8 bytes per access) and `line_bytes_per_s` (the
//!   cache-line traffic: `min(stride, 64)` new bytes per access).
//! - With `threads` > 1, every point is measured again with 2, 4, ... up to `threads`
//!   threads at once, each pinned to its own CPU and on its own buffer, started together
//!   at a barrier, so a collapse under concurrent access shows beside the 1-thread curve.
//!
//! **Method.** Each point (kind, working set, stride) gets a fresh [`Buffer`]: mapped
//! for that point, written once (which faults it in: no page fault is timed), then
//! warmed by one pass (at most [`WARM_CAP_BYTES`] of it: a larger set is larger than
//! any cache, and a longer warm-up would only miss again). Then `repeat` repetitions,
//! each *time-bounded*: accesses run in chunks until `point_time` has passed on
//! `CLOCK_MONOTONIC` (one clock read per chunk of at least 16 Ki accesses, under 0.2 %
//! of the time even at L1 speed), and the repetition's figure is elapsed / accesses.
//! Time-bounded repetitions need no calibration and keep concurrent threads
//! overlapping for the whole repetition. Each point carries the **median, min and max
//! over its repetitions** (`ns_per_load`, `ns_per_load_min`, `ns_per_load_max`): the
//! repetition is the unit of variation, and five of them support no percentile, so no
//! histogram is kept. The buffer of each point is unmapped before the next.
//!
//! **Cache stages.** [`find_knees`] marks every step between consecutive working sets
//! of the 1-thread chase curve where the median latency grows by more than
//! [`KNEE_RATIO`] (1.5x), and joins adjacent marked steps into one knee while it spans
//! at most a factor of [`MAX_KNEE_SPAN`] (4) in working set: a random
//! chase over a set twice a cache's size already misses about half the time, so the
//! first doubling past a level at least doubles the latency there, while noise within
//! a level (about 10 % at L1/L2, about 30 % in DRAM on this shared host) stays under
//! 1.5x. [`match_caches`] then pairs each data cache the kernel reports with the first
//! knee within a factor of 4 of its size, in order; unmatched knees are kept (TLB reach
//! makes some).
//!
//! ```no_run
//! use ictus_core::Nanos;
//! use ictus_probe::memlat::{self, MemlatParams, Mode};
//! use ictus_probe::progress::Progress;
//! use ictus_probe::memlat::view::Chase;
//! let params = MemlatParams {
//!     sizes: vec![4 << 10, 64 << 10, 1 << 20],
//!     mode: Mode::Chase,
//!     point_time: Nanos::from_millis(5),
//!     ..MemlatParams::default()
//! };
//! let record = memlat::run(&params, vec!["example".into()], &Progress::new()).unwrap();
//! for chase in record.measurements.iter().filter_map(|m| m.read::<Chase>()) {
//!     println!("{} {}", chase.labels.working_set_bytes, chase.metrics.ns_per_load);
//! }
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Condvar, Mutex};
use std::thread;

use ictus_core::{CpuSet, Nanos};
use ictus_os::buffer::{self, Buffer, BufferError, ChaseRing};
use ictus_os::clock::monotonic_now;
use ictus_os::sched::Policy;
use ictus_os::{facts, memory};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{
    AccessLabels, CHASE, Cache, CacheLabels, Chase, ChaseMetrics, Knee as KneePoint, KneeLabels,
    KneeMetrics, STRIDED_READ, STRIDED_WRITE, Strided, StridedMetrics,
};
use crate::progress::Progress;
use crate::record::{Measurement, RunRecord, ThreadConfig, Warning};
use crate::session::Session;
use crate::setup::{self, SchedSpec};
use crate::view::{AllOr, Empty};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Memlat;
/// The cache line the chase walks over (one load per line).
pub const LINE_BYTES: usize = 64;
/// The smallest working set accepted (one base page).
pub const MIN_SIZE: usize = 4096;
/// The largest working set: 16 GiB (the default sweep stops at 256 MiB).
pub const MAX_SIZE: usize = 16 << 30;
/// The largest stride: 1 MiB.
pub const MAX_STRIDE: usize = 1 << 20;
/// The most repetitions of a point.
pub const MAX_REPEAT: u32 = 1_000;
/// The warm-up pass covers at most this much of a working set.
pub const WARM_CAP_BYTES: usize = 64 << 20;
/// A step between consecutive working sets whose chase latency grows by more than
/// this factor is (part of) a knee.
pub const KNEE_RATIO: f64 = 1.5;
/// Adjacent steep steps join into one knee while it spans at most this factor in
/// working set.
pub const MAX_KNEE_SPAN: usize = 4;
/// A knee matches a cache whose size is within this factor of the knee's interval.
pub const MATCH_FACTOR: f64 = 4.0;

/// Chase loads between clock reads.
const CHASE_CHUNK: u64 = 1 << 14;
/// Strided accesses between clock reads (they run about 4x faster than chase loads).
const STRIDED_CHUNK: u64 = 1 << 16;
const WORDS_PER_LINE: usize = LINE_BYTES / 8;

/// Which measurements run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Mode {
    /// The dependent pointer chase only.
    #[cfg_attr(feature = "cli", value(help = "The dependent random pointer chase"))]
    Chase,
    /// Strided reads and writes only.
    #[cfg_attr(feature = "cli", value(help = "Strided 64-bit reads and writes"))]
    Strided,
    /// Both.
    All,
}

impl Mode {
    fn chase(self) -> bool {
        matches!(self, Mode::Chase | Mode::All)
    }
    fn strided(self) -> bool {
        matches!(self, Mode::Strided | Mode::All)
    }
}

/// The pages backing each buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum PageSize {
    /// 4 KiB pages (`MADV_NOHUGEPAGE`).
    #[serde(rename = "4k")]
    #[cfg_attr(feature = "cli", value(name = "4k", help = "4 KiB base pages"))]
    Base,
    /// Transparent huge pages (`MADV_HUGEPAGE`, 2 MiB aligned).
    #[serde(rename = "thp")]
    #[cfg_attr(feature = "cli", value(name = "thp", help = "Transparent huge pages"))]
    Transparent,
}

impl PageSize {
    fn os(self) -> buffer::Pages {
        match self {
            PageSize::Base => buffer::Pages::Base,
            PageSize::Transparent => buffer::Pages::Transparent,
        }
    }
    /// `4k` or `thp`, as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PageSize::Base => "4k",
            PageSize::Transparent => "thp",
        }
    }
}

/// The memlat probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemlatParams {
    /// Working sets in bytes (each at least [`MIN_SIZE`], a multiple of [`LINE_BYTES`]).
    pub sizes: Vec<usize>,
    /// Strides of the strided measurements, in bytes.
    pub strides: Vec<usize>,
    /// Which measurements run.
    pub mode: Mode,
    /// The most threads measuring at once (1 to the number of CPUs in `sched.cpus`).
    pub threads: usize,
    /// The pages backing each buffer.
    pub pages: PageSize,
    /// Timed repetitions per point.
    pub repeat: u32,
    /// How long one repetition runs.
    pub point_time: Nanos,
    /// Where and how the measuring threads run (thread `i` on the `i`-th CPU).
    pub sched: SchedSpec,
}

impl Default for MemlatParams {
    /// Working sets 4 KiB to 256 MiB by powers of 2, strides 4, 44, 64 and 4096, both
    /// modes, 1 thread on the first online CPU at SCHED_FIFO 95, 4 KiB pages, 5
    /// repetitions of 20 ms.
    fn default() -> Self {
        MemlatParams {
            sizes: default_sizes(),
            strides: vec![4, 44, 64, 4096],
            mode: Mode::All,
            threads: 1,
            pages: PageSize::Base,
            repeat: 5,
            point_time: Nanos::from_millis(20),
            sched: SchedSpec {
                cpus: facts::online_cpus(),
                pin: true,
                policy: Policy::Fifo { priority: 95 },
                mlock: false,
                pm_qos: Default::default(),
                explain: true,
                explain_threshold: None,
            },
        }
    }
}

/// 4 KiB to 256 MiB by powers of 2.
pub fn default_sizes() -> Vec<usize> {
    (12..=28).map(|p| 1usize << p).collect()
}

impl MemlatParams {
    /// The thread counts swept: 1, 2, 4, ... below `threads`, then `threads`.
    pub fn thread_counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |&k| Some(k * 2))
            .take_while(|&k| k < self.threads)
            .collect();
        counts.push(self.threads.max(1));
        counts
    }

    /// The points of one sweep, in the order they run: by working set, then chase,
    /// strided reads, strided writes.
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for &size in &self.sizes {
            if self.mode.chase() {
                points.push(Point {
                    kind: Kind::Chase,
                    size,
                    stride: LINE_BYTES,
                });
            }
            if self.mode.strided() {
                for kind in [Kind::Read, Kind::Write] {
                    for &stride in &self.strides {
                        points.push(Point { kind, size, stride });
                    }
                }
            }
        }
        points
    }
}

/// What a point measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The dependent pointer chase.
    Chase,
    /// Strided 64-bit reads.
    Read,
    /// Strided 64-bit writes.
    Write,
}

impl Kind {
    /// The measurement name: `chase`, `strided-read`, `strided-write`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chase => CHASE,
            Kind::Read => STRIDED_READ,
            Kind::Write => STRIDED_WRITE,
        }
    }
}

/// One point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// What it measures.
    pub kind: Kind,
    /// Working set in bytes.
    pub size: usize,
    /// Distance between accesses in bytes ([`LINE_BYTES`] for the chase).
    pub stride: usize,
}

/// Parameters a run cannot start with, and failures while running.
#[derive(Debug, Error)]
pub enum MemlatError {
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
    /// No working set.
    #[error("no working set given")]
    NoSize,
    /// A working set under [`MIN_SIZE`] or not a whole number of cache lines.
    #[error(
        "working set {size} bytes: must be at least {MIN_SIZE} bytes and a multiple of {LINE_BYTES}"
    )]
    BadSize {
        /// The size asked for.
        size: usize,
    },
    /// Strided mode without a stride.
    #[error("no stride given")]
    NoStride,
    /// A stride of zero.
    #[error("a stride must be at least 1 byte")]
    ZeroStride,
    /// Zero threads, or more than CPUs to put them on.
    #[error("--threads {threads}: must be 1 to {cpus} (one thread per selected CPU)")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// CPUs selected.
        cpus: usize,
    },
    /// Zero repetitions.
    #[error("at least one repetition is needed")]
    ZeroRepeat,
    /// A repetition time of zero.
    #[error("the point time must be greater than zero")]
    ZeroPointTime,
    /// A CPU not online, or a policy the kernel can never accept.
    #[error(transparent)]
    Setup(#[from] crate::setup::PlacementError),
    /// A point's buffer could not be made (usually: not enough memory).
    #[error("buffer for the {size}-byte working set: {source}")]
    Buffer {
        /// The working set.
        size: usize,
        /// Why.
        #[source]
        source: BufferError,
    },
}

/// Checks the parameters before anything runs.
pub fn validate(params: &MemlatParams) -> Result<(), MemlatError> {
    if params.sizes.is_empty() {
        return Err(MemlatError::NoSize);
    }
    if let Some(&size) = params
        .sizes
        .iter()
        .find(|&&s| s < MIN_SIZE || s % LINE_BYTES != 0)
    {
        return Err(MemlatError::BadSize { size });
    }
    let too_large = |what, value: usize, limit: usize| MemlatError::TooLarge {
        what,
        value: value as u64,
        limit: limit as u64,
    };
    if let Some(&size) = params.sizes.iter().find(|&&s| s > MAX_SIZE) {
        return Err(too_large("a working set (bytes)", size, MAX_SIZE));
    }
    if let Some(&stride) = params.strides.iter().find(|&&s| s > MAX_STRIDE) {
        return Err(too_large("a stride (bytes)", stride, MAX_STRIDE));
    }
    if params.repeat > MAX_REPEAT {
        return Err(too_large(
            "a repetition count",
            params.repeat as usize,
            MAX_REPEAT as usize,
        ));
    }
    if params.mode.strided() && params.strides.is_empty() {
        return Err(MemlatError::NoStride);
    }
    if params.strides.contains(&0) {
        return Err(MemlatError::ZeroStride);
    }
    let cpus = params.sched.cpus.len();
    if params.threads == 0 || params.threads > cpus {
        return Err(MemlatError::Threads {
            threads: params.threads,
            cpus,
        });
    }
    if params.repeat == 0 {
        return Err(MemlatError::ZeroRepeat);
    }
    if params.point_time == Nanos::ZERO {
        return Err(MemlatError::ZeroPointTime);
    }
    Ok(setup::check_placement(
        params.sched.cpus.cpus(),
        params.sched.policy,
    )?)
}

/// Runs the probe. Blocks until done or until `progress` asks to stop (checked between
/// points); progress counts points.
pub fn run(
    params: &MemlatParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, MemlatError> {
    validate(params)?;
    let mut session = Session::begin(argv, params.sched.mlock);
    let points = params.points();
    let counts = params.thread_counts();
    progress.set_total((points.len() * counts.len()) as u64);

    if params.pages == PageSize::Transparent
        && !matches!(facts::thp_mode().as_deref(), Some("always" | "madvise"))
    {
        session.warn(Warning {
            id: WarningId::ThpUnavailable,
            message: format!(
                "--pages thp asked for, but transparent huge pages are {}: the buffers are on 4 KiB pages",
                facts::thp_mode().unwrap_or_else(|| "not built in".into())
            ),
            advice: Some(
                "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (as root).".into(),
            ),
        });
    }
    session.warn_if_no_cpu_left(
        params.sched.policy,
        params.threads,
        "real-time threads run on every online CPU: the rest of the system only runs while \
         RT throttling stalls them",
        "Use fewer --threads than CPUs, or --policy other.",
    );

    let mut measurements = Vec::new();
    let mut curves: Vec<(usize, f64)> = Vec::new();
    for &k in &counts {
        if progress.stop_requested() {
            break;
        }
        let mut outcomes = sweep(params, &points, k, progress)?;
        let mut configs = Vec::new();
        for o in &outcomes {
            session.warn_all(o.warnings.iter().cloned());
            configs.push(o.config.clone());
        }
        if let Some((size, source)) = outcomes.iter_mut().find_map(|o| o.error.take()) {
            return Err(MemlatError::Buffer { size, source });
        }
        let done = outcomes.iter().map(|o| o.results.len()).min().unwrap_or(0);
        for (index, point) in points.iter().enumerate().take(done) {
            let per_thread: Vec<&PointResult> =
                outcomes.iter().map(|o| &o.results[index]).collect();
            let ms = point_measurements(point, k, &configs, &per_thread, params.pages);
            if k == 1
                && let Some(chase) = ms[0].read::<Chase>()
            {
                curves.push((point.size, chase.metrics.ns_per_load));
            }
            measurements.extend(ms);
        }
        if params.pages == PageSize::Transparent
            && let Some(share) = huge_share_of_large_sets(&outcomes, &points)
            && share < 0.5
        {
            session.warn(Warning {
                id: WarningId::ThpNotObtained,
                message: format!(
                    "--pages thp: only {:.0} % of the working sets of 4 MiB and more were on huge pages",
                    share * 100.0
                ),
                advice: Some(
                    "The kernel had no free 2 MiB pages: compact memory \
                     (echo 1 > /proc/sys/vm/compact_memory) or reserve huge pages at boot."
                        .into(),
                ),
            });
        }
    }

    let caches = kernel_caches();
    let knees = find_knees(&curves, KNEE_RATIO);
    let pairs = match_caches(&caches, &knees);
    let headline = headline(&curves, &caches, &knees, &pairs);
    measurements.extend(stage_measurements(&caches, &knees, &pairs));

    let mut record = session.finish(PROBE.name(), &ParamsRecord::from(params), progress);
    record.measurements = measurements;
    record.headline = headline;
    progress.finish();
    Ok(record)
}

/// The parameters as the probe records them (units in the key names), and as
/// readers read them back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    /// The working sets swept.
    pub sizes_bytes: Vec<usize>,
    /// The strides of the strided points.
    pub strides_bytes: Vec<usize>,
    /// Which access patterns ran.
    pub mode: Mode,
    /// The most threads measuring at once.
    pub threads: usize,
    /// The thread counts measured (1, 2, 4, ... up to `threads`).
    pub thread_counts: Vec<usize>,
    /// The page size of the buffers.
    pub pages: PageSize,
    /// Repetitions per point.
    pub repeat: u32,
    /// Time per repetition.
    pub point_time_ns: u64,
    /// The cache line the chase steps over.
    pub line_bytes: usize,
    /// The largest buffer warmed before a point.
    pub warm_cap_bytes: usize,
    /// The rise between working sets that makes a knee.
    pub knee_ratio: f64,
    /// What a point's figure is, in words.
    pub statistic: String,
    /// The CPUs the threads ran on.
    pub cpus: CpuSet,
    /// Each thread pinned to its CPU.
    pub pin: bool,
    /// The policy asked for.
    pub policy: Policy,
    /// All memory locked.
    pub mlock: bool,
}

impl From<&MemlatParams> for ParamsRecord {
    fn from(p: &MemlatParams) -> Self {
        ParamsRecord {
            sizes_bytes: p.sizes.clone(),
            strides_bytes: p.strides.clone(),
            mode: p.mode,
            threads: p.threads,
            thread_counts: p.thread_counts(),
            pages: p.pages,
            repeat: p.repeat,
            point_time_ns: p.point_time.as_u64(),
            line_bytes: LINE_BYTES,
            warm_cap_bytes: WARM_CAP_BYTES,
            knee_ratio: KNEE_RATIO,
            statistic: "median of the repetitions (min and max beside it)".into(),
            cpus: p.sched.cpus.clone(),
            pin: p.sched.pin,
            policy: p.sched.policy,
            mlock: p.sched.mlock,
        }
    }
}

// ---------------------------------------------------------------------------------
// Sweeps and threads

/// One thread's figures at one point.
#[derive(Clone, Debug)]
struct PointResult {
    /// Nanoseconds per access of each repetition.
    ns: Vec<f64>,
    /// Share of the buffer on huge pages, when asked for.
    huge_share: Option<f64>,
}

/// What one measuring thread hands back from a sweep.
struct Outcome {
    config: ThreadConfig,
    warnings: Vec<Warning>,
    /// One per point run, in order.
    results: Vec<PointResult>,
    /// The working set of a buffer that could not be made, and why.
    error: Option<(usize, BufferError)>,
}

/// What the threads of one sweep share.
struct Shared<'a> {
    params: &'a MemlatParams,
    points: &'a [Point],
    progress: &'a Progress,
    barrier: Barrier,
    /// Whether the next point runs: written by thread 0 before the point's first
    /// barrier, read by all after it.
    go: AtomicBool,
    /// Set by a thread whose buffer could not be made; the sweep stops after the point.
    failed: AtomicBool,
}

/// Runs every point with `k` threads at once.
fn sweep(
    params: &MemlatParams,
    points: &[Point],
    k: usize,
    progress: &Progress,
) -> Result<Vec<Outcome>, MemlatError> {
    let shared = Shared {
        params,
        points,
        progress,
        barrier: Barrier::new(k),
        go: AtomicBool::new(true),
        failed: AtomicBool::new(false),
    };
    let gate = Gate::default();
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(k);
        for (index, &cpu) in params.sched.cpus.cpus().iter().take(k).enumerate() {
            let (shared, gate) = (&shared, &gate);
            let spawned = thread::Builder::new()
                .name(format!("ictus-memlat-{index}"))
                .stack_size(2 * memory::PREFAULT_STACK_BYTES)
                .spawn_scoped(scope, move || {
                    measure(shared, gate, index, params.sched.pin.then_some(cpu))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // Release the threads already started before they reach a barrier.
                    gate.set(false);
                    return Err(MemlatError::Setup(setup::PlacementError::Spawn {
                        thread: index,
                        source,
                    }));
                }
            }
        }
        gate.set(true);
        Ok(handles
            .into_iter()
            .map(|h| h.join().expect("measuring threads do not panic"))
            .collect())
    })
}

/// Where started threads wait until all of a sweep's threads exist (`true`) or one
/// could not be started (`false`).
#[derive(Default)]
struct Gate {
    state: Mutex<Option<bool>>,
    changed: Condvar,
}

impl Gate {
    fn set(&self, go: bool) {
        *self.state.lock().expect("gate lock is never poisoned") = Some(go);
        self.changed.notify_all();
    }
    fn wait(&self) -> bool {
        let mut state = self.state.lock().expect("gate lock is never poisoned");
        loop {
            match *state {
                Some(go) => return go,
                None => {
                    state = self
                        .changed
                        .wait(state)
                        .expect("gate lock is never poisoned")
                }
            }
        }
    }
}

/// One measuring thread: prepare once, then per point: build and warm its own buffer,
/// and run the repetitions in step with the other threads.
fn measure(shared: &Shared<'_>, gate: &Gate, index: usize, cpu: Option<usize>) -> Outcome {
    let params = shared.params;
    let (config, warnings) = setup::prepare_thread(cpu, params.sched.policy);
    let mut outcome = Outcome {
        config,
        warnings,
        results: Vec::with_capacity(shared.points.len()),
        error: None,
    };
    if !gate.wait() {
        setup::release_thread();
        return outcome;
    }
    for point in shared.points {
        if index == 0 {
            let go = !shared.progress.stop_requested()
                // Relaxed: the barrier below orders this load after every thread's
                // store of `failed` in the previous point.
                && !shared.failed.load(Ordering::Relaxed);
            // Relaxed: the barrier below (a mutex inside) publishes the store to the
            // loads after it; the next store comes after all threads passed the
            // point's repetition barriers, so after their loads.
            shared.go.store(go, Ordering::Relaxed);
        }
        shared.barrier.wait();
        // Relaxed: see the store above.
        if !shared.go.load(Ordering::Relaxed) {
            break;
        }
        let seed = 0x9e37_79b9_7f4a_7c15 ^ (point.size as u64) ^ ((index as u64) << 48);
        let mut prepared = match Prepared::new(point, params.pages, seed) {
            Ok(p) => Some(p),
            Err(e) => {
                // Relaxed: read by thread 0 after the next barrier (see above).
                shared.failed.store(true, Ordering::Relaxed);
                outcome.error = Some((point.size, e));
                None
            }
        };
        let huge_share = match (&prepared, params.pages) {
            (Some(p), PageSize::Transparent) => p.huge_share(),
            _ => None,
        };
        let mut ns = Vec::with_capacity(params.repeat as usize);
        for _ in 0..params.repeat {
            // Every thread takes part in every barrier, even without a buffer, so that
            // none waits forever.
            shared.barrier.wait();
            if let Some(p) = prepared.as_mut() {
                ns.push(p.repetition(params.point_time));
            }
        }
        drop(prepared);
        if outcome.error.is_none() {
            outcome.results.push(PointResult { ns, huge_share });
        }
        if index == 0 {
            shared.progress.advance(1);
        }
    }
    setup::release_thread();
    outcome
}

/// A point's buffer, built, faulted in and warmed, with where its walk stands.
enum Prepared {
    /// The pointer chase (the ring remembers where it stands).
    Chase(ChaseRing),
    /// Strided reads or writes.
    Strided {
        buffer: Buffer,
        write: bool,
        stride: usize,
        /// Byte offset of the next access.
        at: usize,
    },
}

impl Prepared {
    fn new(point: &Point, pages: PageSize, seed: u64) -> Result<Self, BufferError> {
        let mut buffer = Buffer::new(point.size, pages.os())?;
        let mut sut = match point.kind {
            Kind::Chase => {
                // Writes one word per line: every page is faulted in.
                build_cycle(buffer.words_mut(), seed);
                Prepared::Chase(
                    ChaseRing::from_links(buffer, WORDS_PER_LINE)
                        .expect("a Sattolo cycle links line starts only"),
                )
            }
            Kind::Read | Kind::Write => {
                buffer.bytes_mut().fill(0x5a);
                Prepared::Strided {
                    buffer,
                    write: point.kind == Kind::Write,
                    stride: point.stride,
                    at: 0,
                }
            }
        };
        let pass = point.size.min(WARM_CAP_BYTES);
        let warm = match point.kind {
            Kind::Chase => (pass / LINE_BYTES) as u64,
            _ => (pass.saturating_sub(8) / point.stride) as u64 + 1,
        };
        sut.accesses(warm);
        Ok(sut)
    }

    fn buffer(&self) -> &Buffer {
        match self {
            Prepared::Chase(ring) => ring.buffer(),
            Prepared::Strided { buffer, .. } => buffer,
        }
    }

    fn huge_share(&self) -> Option<f64> {
        let buffer = self.buffer();
        buffer
            .huge_bytes()
            .map(|b| (b as f64 / buffer.len() as f64).min(1.0))
    }

    /// Runs `n` accesses from where the walk stands.
    fn accesses(&mut self, n: u64) {
        match self {
            Prepared::Chase(ring) => ring.chase(n),
            Prepared::Strided {
                buffer,
                write: false,
                stride,
                at,
            } => {
                black_box(read_strided(buffer.bytes(), *stride, at, n));
            }
            Prepared::Strided {
                buffer,
                write: true,
                stride,
                at,
            } => {
                write_strided(buffer.bytes_mut(), *stride, at, n);
                black_box(buffer.bytes().as_ptr());
            }
        }
    }

    /// One time-bounded repetition: nanoseconds per access.
    fn repetition(&mut self, length: Nanos) -> f64 {
        let chunk = match self {
            Prepared::Chase(_) => CHASE_CHUNK,
            Prepared::Strided { .. } => STRIDED_CHUNK,
        };
        let start = monotonic_now();
        let end = start.saturating_add(length);
        let mut done = 0u64;
        loop {
            self.accesses(chunk);
            done += chunk;
            let now = monotonic_now();
            if now >= end {
                return now.saturating_sub(start).as_u64() as f64 / done as f64;
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The kernels' set-up and walks (the loops themselves are in ictus_os::buffer)

/// A small deterministic PRNG (SplitMix64): enough to shuffle, no dependency.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n` > 0; multiply-shift, bias under 2^-32 for n < 2^32).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Builds one random cycle over the 64-byte lines of `words` with Sattolo's algorithm:
/// the first word of line `i` holds the word index of the next line's first word, and
/// following them from any line visits every line once before returning. Writes every
/// line (so every page) once.
pub fn build_cycle(words: &mut [u64], seed: u64) {
    let lines = words.len() / WORDS_PER_LINE;
    for line in 0..lines {
        words[line * WORDS_PER_LINE] = (line * WORDS_PER_LINE) as u64;
    }
    let mut rng = SplitMix64::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        words.swap(i * WORDS_PER_LINE, j * WORDS_PER_LINE);
    }
}

/// `accesses` 64-bit reads `stride` bytes apart from byte `*pos`, wrapping to the start
/// when the next read would pass the end; returns their sum and moves `*pos` on.
#[inline(never)]
pub fn read_strided(bytes: &[u8], stride: usize, pos: &mut usize, accesses: u64) -> u64 {
    let mut sum = 0u64;
    walk(bytes.len(), stride, pos, accesses, |start, count| {
        sum = sum.wrapping_add(buffer::read_strided(bytes, start, stride, count));
    });
    sum
}

/// `accesses` 64-bit writes `stride` bytes apart from byte `*pos` (see [`read_strided`]).
#[inline(never)]
pub fn write_strided(bytes: &mut [u8], stride: usize, pos: &mut usize, accesses: u64) {
    walk(bytes.len(), stride, pos, accesses, |start, count| {
        buffer::write_strided(bytes, start, stride, count);
    });
}

/// Splits `accesses` strided accesses from `*pos` into runs that end before `len`,
/// wrapping to 0 after each run that reaches the end; `run(start, count)` does them.
/// Only finishing the pass in progress costs a division (whole passes are counted
/// once), so a short pass costs a few cycles more than its accesses; a stride at least
/// as large as the working set degenerates to one word read over and over.
#[inline]
fn walk(
    len: usize,
    stride: usize,
    pos: &mut usize,
    accesses: u64,
    mut run: impl FnMut(usize, usize),
) {
    let last = len - 8;
    let per_pass = last / stride + 1;
    let mut left = usize::try_from(accesses).unwrap_or(usize::MAX);
    // Finish the pass in progress.
    if *pos != 0 {
        let count = ((last - *pos) / stride + 1).min(left);
        run(*pos, count);
        left -= count;
        *pos += count * stride;
        if *pos > last {
            *pos = 0;
        }
    }
    // Whole passes from the start.
    while left >= per_pass {
        run(0, per_pass);
        left -= per_pass;
    }
    // Part of one more.
    if left > 0 {
        run(0, left);
        *pos = left * stride;
    }
}

// ---------------------------------------------------------------------------------
// Figures

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// The measurements of one point run by `k` threads: the aggregate (label
/// `thread: "all"`; for one thread, that thread) and, with several, one per thread.
fn point_measurements(
    point: &Point,
    k: usize,
    configs: &[ThreadConfig],
    per_thread: &[&PointResult],
    pages: PageSize,
) -> Vec<Measurement> {
    let labels = |thread: AllOr<usize>, cpu: Option<usize>| AccessLabels {
        working_set_bytes: point.size,
        threads: k,
        thread,
        stride_bytes: (point.kind != Kind::Chase).then_some(point.stride),
        cpu,
    };
    let reps = per_thread.iter().map(|r| r.ns.len()).min().unwrap_or(0);
    // Per repetition: the mean time per access over the threads, and their summed rate.
    let mean_ns: Vec<f64> = (0..reps)
        .map(|r| per_thread.iter().map(|t| t.ns[r]).sum::<f64>() / per_thread.len() as f64)
        .collect();
    let rate: Vec<f64> = (0..reps)
        .map(|r| per_thread.iter().map(|t| 1e9 / t.ns[r]).sum::<f64>())
        .collect();
    let huge = (pages == PageSize::Transparent).then(|| {
        per_thread
            .iter()
            .map(|t| t.huge_share.unwrap_or(0.0))
            .sum::<f64>()
            / per_thread.len() as f64
    });
    let mut out = vec![figures(
        labels(AllOr::All, None),
        point,
        &mean_ns,
        median(&rate),
        huge,
    )];
    if k > 1 {
        for (i, t) in per_thread.iter().enumerate() {
            let cpu = configs.get(i).and_then(|c| c.pinned_cpu);
            let rate = t.ns.iter().map(|ns| 1e9 / ns).collect::<Vec<_>>();
            out.push(figures(
                labels(AllOr::One(i), cpu),
                point,
                &t.ns,
                median(&rate),
                t.huge_share,
            ));
        }
    }
    out
}

/// The measurement of a point at `labels` from a series of repetitions (`ns` per
/// access, `per_s` accesses per second).
fn figures(
    labels: AccessLabels,
    point: &Point,
    ns: &[f64],
    per_s: f64,
    huge_page_share: Option<f64>,
) -> Measurement {
    let (lo, hi) = min_max(ns);
    match point.kind {
        Kind::Chase => crate::view::Point::<Chase>::new(
            labels,
            ChaseMetrics {
                ns_per_load: median(ns),
                ns_per_load_min: lo,
                ns_per_load_max: hi,
                loads_per_s: per_s,
                huge_page_share,
            },
        )
        .measurement(),
        Kind::Read | Kind::Write => crate::view::Point::<Strided>::new(
            labels,
            StridedMetrics {
                ns_per_access: median(ns),
                ns_per_access_min: lo,
                ns_per_access_max: hi,
                bytes_per_s: per_s * 8.0,
                line_bytes_per_s: per_s * point.stride.min(LINE_BYTES) as f64,
                huge_page_share,
            },
        )
        .measurement_named(point.kind.name()),
    }
}

/// The mean huge-page share of the buffers of 4 MiB and more (None when there are none).
fn huge_share_of_large_sets(outcomes: &[Outcome], points: &[Point]) -> Option<f64> {
    let shares: Vec<f64> = outcomes
        .iter()
        .flat_map(|o| o.results.iter().zip(points))
        .filter(|(_, p)| p.size >= 4 << 20)
        .filter_map(|(r, _)| r.huge_share)
        .collect();
    (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
}

// ---------------------------------------------------------------------------------
// Cache stages

/// A rise of the chase curve between two working sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knee {
    /// The last working set before the rise.
    pub lower_bytes: usize,
    /// The first working set after it.
    pub upper_bytes: usize,
    /// Latency at `lower_bytes`.
    pub ns_below: f64,
    /// Latency at `upper_bytes`.
    pub ns_above: f64,
}

/// A cache the kernel reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCache {
    /// `L1d`, `L2`, `L3`.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The CPUs sharing it.
    pub shared_cpus: CpuSet,
}

/// The data and unified caches of the online CPUs, smallest first.
pub fn kernel_caches() -> Vec<KernelCache> {
    let mut caches: Vec<KernelCache> = facts::caches()
        .into_iter()
        .filter(|c| c.kind != "Instruction")
        .filter_map(|c| {
            Some(KernelCache {
                name: c.name(),
                size_bytes: c.size_bytes?,
                shared_cpus: c.shared_cpus.clone(),
            })
        })
        .collect();
    caches.sort_by_key(|c| c.size_bytes);
    caches.dedup_by(|a, b| a.name == b.name && a.size_bytes == b.size_bytes);
    caches
}

/// The knees of a latency curve (`(working set, ns)`, any order). Every step between
/// consecutive working sets whose latency grows by more than `ratio` is a knee; a steep
/// step right after another joins it while the joined knee spans at most
/// [`MAX_KNEE_SPAN`] in working set (a transition spread over two doublings, as a
/// shared L3 gives, is one stage; with coarser sizes each steep step is its own).
pub fn find_knees(curve: &[(usize, f64)], ratio: f64) -> Vec<Knee> {
    let mut pts = curve.to_vec();
    pts.sort_by_key(|&(size, _)| size);
    let mut knees: Vec<Knee> = Vec::new();
    let mut open = false;
    for w in pts.windows(2) {
        let ((s0, n0), (s1, n1)) = (w[0], w[1]);
        let steep = n0 > 0.0 && n1 / n0 > ratio;
        match knees.last_mut() {
            Some(k) if steep && open && s1 <= k.lower_bytes.saturating_mul(MAX_KNEE_SPAN) => {
                k.upper_bytes = s1;
                k.ns_above = n1;
            }
            _ if steep => knees.push(Knee {
                lower_bytes: s0,
                upper_bytes: s1,
                ns_below: n0,
                ns_above: n1,
            }),
            _ => {}
        }
        open = steep;
    }
    knees
}

/// How far (in factors of 2) `size` lies outside the interval of `knee` (0 inside).
fn octaves_off(size: u64, knee: &Knee) -> f64 {
    let s = size as f64;
    let (lo, hi) = (knee.lower_bytes as f64, knee.upper_bytes as f64);
    if s < lo {
        (lo / s).log2()
    } else if s > hi {
        (s / hi).log2()
    } else {
        0.0
    }
}

/// Pairs each cache (smallest first) with the first knee, after the previous cache's,
/// whose interval lies within [`MATCH_FACTOR`] of the cache's size: `result[i]` is the
/// index in `knees` of the knee of `caches[i]`. A cache leaves a knee it only lies near
/// to the next cache when that one lies inside it (coarse working sets make knees that
/// span two levels).
pub fn match_caches(caches: &[KernelCache], knees: &[Knee]) -> Vec<Option<usize>> {
    let limit = MATCH_FACTOR.log2();
    let mut next = 0;
    let mut pairs = Vec::with_capacity(caches.len());
    for (c, cache) in caches.iter().enumerate() {
        let found = (next..knees.len())
            .find(|&i| octaves_off(cache.size_bytes, &knees[i]) <= limit)
            .filter(|&i| {
                let near_only = octaves_off(cache.size_bytes, &knees[i]) > 0.0;
                let next_inside = caches
                    .get(c + 1)
                    .is_some_and(|n| octaves_off(n.size_bytes, &knees[i]) == 0.0);
                !(near_only && next_inside)
            });
        if let Some(i) = found {
            next = i + 1;
        }
        pairs.push(found);
    }
    pairs
}

/// `4 KiB`, `1 MiB`, `1.5 GiB`, `100 B`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A byte count such as `4096`, `4K`, `64KiB`, `1M`, `2GiB` (binary multiples,
/// case-insensitive).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let num: usize = num
        .parse()
        .map_err(|_| format!("{text:?}: expected a size such as 4096, 64K or 256M"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?}: unknown unit (use K, M or G)")),
    };
    num.checked_mul(1usize << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

/// A comma-separated list of byte counts (see [`parse_bytes`]). An empty text is
/// the empty list; an empty item inside a list (`4K,,8K`, `4K,`) is refused, as a
/// typo that would silently drop a point.
pub fn parse_byte_list(text: &str) -> Result<Vec<usize>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|item| {
            if item.trim().is_empty() {
                Err(format!(
                    "{text:?}: an empty item in the list (expected sizes such as 4K between the commas)"
                ))
            } else {
                parse_bytes(item)
            }
        })
        .collect()
}

fn stage_measurements(
    caches: &[KernelCache],
    knees: &[Knee],
    pairs: &[Option<usize>],
) -> Vec<Measurement> {
    let mut out = Vec::new();
    for c in caches {
        let labels = CacheLabels {
            cache: c.name.clone(),
            cache_bytes: c.size_bytes,
            shared_cpus: c.shared_cpus.to_string(),
        };
        out.push(crate::view::Point::<Cache>::new(labels, Empty {}).measurement());
    }
    for (i, k) in knees.iter().enumerate() {
        let cache = pairs.iter().position(|&p| p == Some(i)).map(|c| &caches[c]);
        let labels = KneeLabels {
            lower_bytes: k.lower_bytes,
            upper_bytes: k.upper_bytes,
            threads: 1,
            cache: cache.map(|c| c.name.clone()),
            cache_bytes: cache.map(|c| c.size_bytes),
        };
        let metrics = KneeMetrics {
            ns_below: k.ns_below,
            ns_above: k.ns_above,
            ratio: Some(k.ns_above / k.ns_below),
        };
        out.push(crate::view::Point::<KneePoint>::new(labels, metrics).measurement());
    }
    out
}

fn headline(
    curve: &[(usize, f64)],
    caches: &[KernelCache],
    knees: &[Knee],
    pairs: &[Option<usize>],
) -> Option<String> {
    let first = curve.first()?;
    let last = curve.last()?;
    let mut text = format!(
        "chase {:.1} ns/load at {} to {:.1} ns at {}",
        first.1,
        format_bytes(first.0 as u64),
        last.1,
        format_bytes(last.0 as u64)
    );
    let stages: Vec<String> = caches
        .iter()
        .zip(pairs)
        .filter_map(|(c, p)| {
            let k = knees[(*p)?];
            Some(format!(
                "{} {} ~ knee {}-{}",
                c.name,
                format_bytes(c.size_bytes),
                format_bytes(k.lower_bytes as u64),
                format_bytes(k.upper_bytes as u64)
            ))
        })
        .collect();
    if !stages.is_empty() {
        text.push_str("; ");
        text.push_str(&stages.join(", "));
    }
    Some(text)
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = MemlatParams;
pub(crate) type ProbeFailure = MemlatError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::PlacementError;
    use crate::view::tests::reads_back;

    fn cycle_of(lines: usize, seed: u64) -> Vec<u64> {
        let mut words = vec![0u64; lines * WORDS_PER_LINE];
        build_cycle(&mut words, seed);
        words
    }

    #[test]
    fn sattolo_gives_one_cycle_through_every_line() {
        for (lines, seed) in [(1, 1), (2, 7), (64, 3), (1000, 42), (4096, 9)] {
            let words = cycle_of(lines, seed);
            let mut seen = vec![false; lines];
            let mut at = 0usize;
            for _ in 0..lines {
                assert_eq!(at % WORDS_PER_LINE, 0, "every link points to a line start");
                let line = at / WORDS_PER_LINE;
                assert!(!seen[line], "line {line} visited twice in {lines}");
                seen[line] = true;
                at = words[at] as usize;
            }
            assert_eq!(at, 0, "the walk returns to the start after every line");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn the_cycle_is_deterministic_and_depends_on_the_seed() {
        assert_eq!(cycle_of(512, 5), cycle_of(512, 5));
        assert_ne!(cycle_of(512, 5), cycle_of(512, 6));
    }

    #[test]
    fn the_ring_made_from_a_cycle_follows_its_links() {
        let words = cycle_of(128, 11);
        let mut b = Buffer::new(128 * LINE_BYTES, buffer::Pages::Base).unwrap();
        b.words_mut().copy_from_slice(&words);
        let mut sut = ChaseRing::from_links(b, WORDS_PER_LINE).unwrap();
        sut.chase(2);
        assert_eq!(sut.position(), words[words[0] as usize] as usize);
        sut.chase(126);
        assert_eq!(sut.position(), 0);
    }

    #[test]
    fn strided_reads_wrap_at_the_end_and_keep_their_place() {
        let bytes: Vec<u8> = (0..64u8).collect();
        let mut pos = 0;
        // Reads at 0, 20, 40 (the last start is 56), then wraps to 0.
        let sum = read_strided(&bytes, 20, &mut pos, 4);
        let at = |p: usize| u64::from_ne_bytes(bytes[p..p + 8].try_into().unwrap());
        assert_eq!(
            sum,
            at(0)
                .wrapping_add(at(20))
                .wrapping_add(at(40))
                .wrapping_add(at(0))
        );
        assert_eq!(pos, 20);
    }

    #[test]
    fn strided_writes_touch_the_strided_words() {
        let mut bytes = vec![0u8; 64];
        let mut pos = 0;
        write_strided(&mut bytes, 44, &mut pos, 3);
        assert_eq!(u64::from_ne_bytes(bytes[44..52].try_into().unwrap()), 44);
        assert_eq!(pos, 44, "0, 44, wrap, 0: next is 44");
    }

    /// Each knee as (the last working set before the rise, the first after it).
    fn spans(knees: &[Knee]) -> Vec<(usize, usize)> {
        knees
            .iter()
            .map(|k| (k.lower_bytes, k.upper_bytes))
            .collect()
    }

    #[test]
    fn knees_are_found_on_a_synthetic_three_level_curve() {
        // L1 32 KiB (1.3 ns), L2 512 KiB (4.8 ns), L3 that ends in two steep steps
        // (8 -> 32 MiB), then DRAM with 20 % noise that is no knee.
        let ns = [
            1.3, 1.3, 1.3, 1.35, 3.8, 4.6, 4.8, 4.9, 14.0, 15.0, 16.0, 17.0, 40.0, 130.0, 140.0,
            165.0, 150.0,
        ];
        let curve: Vec<(usize, f64)> = ns
            .iter()
            .enumerate()
            .map(|(i, &n)| (4096 << i, n))
            .collect();
        let sut = find_knees(&curve, KNEE_RATIO);
        assert_eq!(
            spans(&sut),
            [
                (32 << 10, 64 << 10),
                (512 << 10, 1 << 20),
                (8 << 20, 32 << 20)
            ]
        );
        assert_eq!(sut[2].ns_below, 17.0);
        assert_eq!(sut[2].ns_above, 130.0);
    }

    #[test]
    fn coarse_sizes_keep_one_knee_per_steep_step() {
        let curve = [
            (4 << 10, 1.3),
            (32 << 10, 1.3),
            (256 << 10, 4.6),
            (2 << 20, 17.0),
            (16 << 20, 147.0),
            (64 << 20, 151.0),
        ];
        let sut = find_knees(&curve, KNEE_RATIO);
        assert_eq!(
            spans(&sut),
            [
                (32 << 10, 256 << 10),
                (256 << 10, 2 << 20),
                (2 << 20, 16 << 20)
            ]
        );
    }

    #[test]
    fn a_flat_or_falling_curve_has_no_knee() {
        let curve = [(4096, 2.0), (8192, 2.9), (16384, 2.0), (32768, 1.0)];
        assert!(find_knees(&curve, KNEE_RATIO).is_empty());
        assert!(find_knees(&[], KNEE_RATIO).is_empty());
    }

    #[test]
    fn caches_pair_with_knees_near_their_size_in_order() {
        let cache = |name: &str, size: u64| KernelCache {
            name: name.into(),
            size_bytes: size,
            shared_cpus: CpuSet::from_cpus([0]),
        };
        let knee = |lo: usize, hi: usize| Knee {
            lower_bytes: lo,
            upper_bytes: hi,
            ns_below: 1.0,
            ns_above: 2.0,
        };
        let caches = [
            cache("L1d", 32 << 10),
            cache("L2", 512 << 10),
            cache("L3", 32 << 20),
        ];
        // A TLB knee at 2-4 MiB is too far from the L2 (4x above 512 KiB is 2 MiB: it
        // is within reach of nothing but sits before the L3's knee).
        let knees = [
            knee(32 << 10, 64 << 10),
            knee(512 << 10, 1 << 20),
            knee(4 << 20, 16 << 20),
        ];
        assert_eq!(match_caches(&caches, &knees), [Some(0), Some(1), Some(2)]);
        // Without an L2 knee, the L2 stays unpaired and the L3 still finds its own.
        let knees = [knee(32 << 10, 64 << 10), knee(8 << 20, 16 << 20)];
        assert_eq!(match_caches(&caches, &knees), [Some(0), None, Some(1)]);
        // Coarse sizes: a knee that holds both the L1d and the L2 goes to the L1d, and
        // the next one, which holds the L3 but lies only near the L2, to the L3.
        let knees = [knee(16 << 10, 1 << 20), knee(1 << 20, 64 << 20)];
        assert_eq!(match_caches(&caches, &knees), [Some(0), None, Some(1)]);
    }

    #[test]
    fn sizes_parse_with_binary_units_and_print_back() {
        assert_eq!(
            parse_byte_list("4K, 64KiB,1M,256M,4096").unwrap(),
            [4096, 65536, 1 << 20, 256 << 20, 4096]
        );
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-4K").is_err());
        assert_eq!(format_bytes(32 << 10), "32 KiB");
        assert_eq!(format_bytes(3 << 19), "1.5 MiB");
        assert_eq!(format_bytes(100), "100 B");
    }

    #[test]
    fn a_size_list_with_an_empty_item_is_refused() {
        for text in ["4K,,8K", "4K,", ",4K", " , "] {
            let err = parse_byte_list(text).unwrap_err();
            assert!(err.contains("empty item"), "{text:?}: {err}");
        }
        assert_eq!(parse_byte_list("").unwrap(), Vec::<usize>::new());
    }

    proptest::proptest! {
        #[test]
        fn a_size_list_parses_only_without_empty_items(
            items in proptest::collection::vec("(|[0-9]{1,6}(|K|M))", 1..6),
        ) {
            let text = items.join(",");
            let parsed = parse_byte_list(&text);
            if items.iter().any(String::is_empty) && !text.trim().is_empty() {
                proptest::prop_assert!(parsed.is_err(), "{text:?}");
            }
            if let Ok(sizes) = parsed {
                proptest::prop_assert!(text.trim().is_empty() || sizes.len() == items.len());
            }
        }
    }

    fn tiny() -> MemlatParams {
        MemlatParams {
            sizes: vec![4096, 16384],
            strides: vec![4, 64],
            threads: 1,
            repeat: 2,
            point_time: Nanos::from_micros(500),
            sched: SchedSpec {
                cpus: CpuSet::from_cpus([facts::online_cpus().cpus()[0]]),
                pin: true,
                policy: Policy::Other { nice: 0 },
                mlock: false,
                pm_qos: Default::default(),
                explain: true,
                explain_threshold: None,
            },
            ..MemlatParams::default()
        }
    }

    #[test]
    fn bad_parameters_are_refused_before_anything_runs() {
        let bad = |f: fn(&mut MemlatParams)| {
            let mut p = tiny();
            f(&mut p);
            validate(&p).unwrap_err()
        };
        assert!(matches!(
            bad(|p| p.sizes = vec![0]),
            MemlatError::BadSize { size: 0 }
        ));
        assert!(matches!(
            bad(|p| p.sizes = vec![4100]),
            MemlatError::BadSize { .. }
        ));
        assert!(matches!(bad(|p| p.sizes.clear()), MemlatError::NoSize));
        assert!(matches!(
            bad(|p| p.strides = vec![0]),
            MemlatError::ZeroStride
        ));
        assert!(matches!(
            bad(|p| p.threads = 99),
            MemlatError::Threads { threads: 99, .. }
        ));
        assert!(matches!(
            bad(|p| p.threads = 0),
            MemlatError::Threads { .. }
        ));
        assert!(matches!(bad(|p| p.repeat = 0), MemlatError::ZeroRepeat));
        assert!(matches!(
            bad(|p| p.point_time = Nanos::ZERO),
            MemlatError::ZeroPointTime
        ));
        assert!(matches!(
            bad(|p| p.sched.cpus = CpuSet::from_cpus([999])),
            MemlatError::Setup(PlacementError::CpuOffline { cpu: 999, .. })
        ));
        validate(&tiny()).unwrap();
    }

    #[test]
    fn thread_counts_double_up_to_the_threads_asked_for() {
        let with = |threads| MemlatParams { threads, ..tiny() }.thread_counts();
        assert_eq!(with(1), [1]);
        assert_eq!(with(2), [1, 2]);
        assert_eq!(with(6), [1, 2, 4, 6]);
    }

    #[test]
    fn a_tiny_run_gives_every_point_with_its_figures() {
        let progress = Progress::new();
        let sut = run(&tiny(), vec![], &progress).unwrap();
        assert!(sut.complete);
        assert_eq!(sut.probe, PROBE);
        assert!(sut.threads.is_empty() && sut.merged.is_none());
        assert_eq!(progress.done(), progress.total());
        assert_eq!(progress.total(), 2 * (1 + 2 * 2));
        for m in &sut.measurements {
            match m.name.as_str() {
                CHASE => drop(reads_back::<Chase>(m)),
                STRIDED_READ | STRIDED_WRITE => drop(reads_back::<Strided>(m)),
                "cache" => drop(reads_back::<Cache>(m)),
                "knee" => drop(reads_back::<KneePoint>(m)),
                other => panic!("unexpected measurement {other}"),
            }
        }
        for size in [4096, 16384] {
            let chase: Vec<_> = sut
                .measurements
                .iter()
                .filter_map(|m| m.read::<Chase>())
                .filter(|p| p.labels.working_set_bytes == size)
                .collect();
            assert_eq!(chase.len(), 1);
            assert_eq!(chase[0].labels.thread, AllOr::All);
            let c = &chase[0].metrics;
            assert!(c.ns_per_load > 0.0 && c.ns_per_load_min <= c.ns_per_load);
            assert!(c.ns_per_load <= c.ns_per_load_max);
            for name in [STRIDED_READ, STRIDED_WRITE] {
                let m: Vec<_> = sut
                    .measurements
                    .iter()
                    .filter(|m| m.name == name)
                    .filter_map(|m| m.read::<Strided>())
                    .filter(|p| p.labels.working_set_bytes == size)
                    .collect();
                assert_eq!(m.len(), 2, "{name} at strides 4 and 64");
                assert!(
                    m.iter()
                        .all(|m| m.metrics.ns_per_access > 0.0 && m.metrics.bytes_per_s > 0.0)
                );
            }
        }
        let p = sut.parameters_as::<ParamsRecord>().unwrap();
        assert_eq!((p.point_time_ns, p.pages), (500_000, PageSize::Base));
        assert_eq!(sut.parameters["pages"], "4k");
        assert!(sut.headline.is_some());
    }

    #[test]
    fn two_threads_give_per_thread_and_aggregate_points() {
        let cpus = facts::online_cpus();
        if cpus.len() < 2 {
            return;
        }
        let params = MemlatParams {
            sizes: vec![4096],
            mode: Mode::Chase,
            threads: 2,
            sched: SchedSpec {
                cpus: CpuSet::from_cpus(cpus.cpus().iter().copied().take(2)),
                ..tiny().sched
            },
            ..tiny()
        };
        let sut = run(&params, vec![], &Progress::new()).unwrap();
        let chase: Vec<_> = sut
            .measurements
            .iter()
            .filter(|m| m.is::<Chase>())
            .map(reads_back::<Chase>)
            .collect();
        // 1 thread: the aggregate; 2 threads: the aggregate and each thread.
        assert_eq!(chase.len(), 1 + 3);
        let two: Vec<_> = chase.iter().filter(|p| p.labels.threads == 2).collect();
        let all: Vec<_> = two
            .iter()
            .filter(|p| p.labels.thread == AllOr::All)
            .collect();
        assert_eq!(all.len(), 1);
        let sum: f64 = two
            .iter()
            .filter(|p| p.labels.thread != AllOr::All)
            .map(|p| p.metrics.loads_per_s)
            .sum();
        assert!(all[0].metrics.loads_per_s > 0.0 && sum > 0.0);
    }

    #[test]
    fn a_stop_request_gives_an_incomplete_record_without_points() {
        let progress = Progress::new();
        progress.request_stop();
        let sut = run(&tiny(), vec![], &progress).unwrap();
        assert!(!sut.complete);
        assert!(sut.measurements.iter().all(|m| m.name == "cache"));
    }
}
