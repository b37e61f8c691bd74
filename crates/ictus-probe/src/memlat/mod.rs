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
//! **Method.** Each point (kind, working set, stride) gets a fresh
//! [`Buffer`](ictus_os::buffer::Buffer): mapped for that point, written once (which
//! faults it in: no page fault is timed), then warmed by one pass (at most
//! [`WARM_CAP_BYTES`] of it: a larger set is larger than any cache, and a longer
//! warm-up would only miss again). Then `repeat` repetitions,
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

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

mod figures;
mod knees;
mod params;
mod sweep;
mod units;
mod walk;

pub use knees::{
    KNEE_RATIO, KernelCache, Knee, MATCH_FACTOR, MAX_KNEE_SPAN, find_knees, kernel_caches,
    match_caches,
};
pub use params::{
    AccessKind, LINE_BYTES, MAX_REPEAT, MAX_SIZE, MAX_STRIDE, MIN_SIZE, MemlatError, MemlatParams,
    Mode, PageSize, ParamsRecord, SweepPoint, WARM_CAP_BYTES, default_sizes, validate,
};
pub use units::{format_bytes, parse_byte_list, parse_bytes};
pub use walk::{SplitMix64, build_cycle, read_strided, write_strided};

use ictus_os::facts;

use self::view::Chase;
use crate::progress::Progress;
use crate::record::{RunRecord, Warning, WarningId};
use crate::session::Session;

use figures::{headline, huge_share_of_large_sets, point_measurements, stage_measurements};
use sweep::{PointResult, sweep};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Memlat;

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

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = MemlatParams;
pub(crate) type ProbeFailure = MemlatError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests;
