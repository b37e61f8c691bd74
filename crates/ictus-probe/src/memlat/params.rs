//! What a memory-latency run is asked for: the working sets, strides, threads and pages, and
//! how they are checked and recorded.

use ictus_core::{CpuSet, Nanos};
use ictus_os::buffer::{self, BufferError};
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::view::{CHASE, STRIDED_READ, STRIDED_WRITE};
use crate::setup::{self, SchedSpec};

use super::knees::KNEE_RATIO;

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
    pub(super) fn chase(self) -> bool {
        matches!(self, Mode::Chase | Mode::All)
    }
    pub(super) fn strided(self) -> bool {
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
    pub(super) fn os(self) -> buffer::Pages {
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

/// The memory-latency probe's parameters.
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
            sched: SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 }),
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
    pub fn points(&self) -> Vec<SweepPoint> {
        let mut points = Vec::new();
        for &size in &self.sizes {
            if self.mode.chase() {
                points.push(SweepPoint {
                    kind: AccessKind::Chase,
                    size,
                    stride: LINE_BYTES,
                });
            }
            if self.mode.strided() {
                for kind in [AccessKind::Read, AccessKind::Write] {
                    for &stride in &self.strides {
                        points.push(SweepPoint { kind, size, stride });
                    }
                }
            }
        }
        points
    }
}

/// What a point measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// The dependent pointer chase.
    Chase,
    /// Strided 64-bit reads.
    Read,
    /// Strided 64-bit writes.
    Write,
}

impl AccessKind {
    /// The measurement name: `chase`, `strided-read`, `strided-write`.
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::Chase => CHASE,
            AccessKind::Read => STRIDED_READ,
            AccessKind::Write => STRIDED_WRITE,
        }
    }
}

/// One point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepPoint {
    /// What it measures.
    pub kind: AccessKind,
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
