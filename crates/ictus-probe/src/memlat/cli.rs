//! The memory-latency probe on the command line: its options, their parameters, and the
//! work a progress bar counts.

use std::time::Duration;

use ictus_core::Nanos;

use super::{MemlatError, MemlatParams, Mode, PageSize};
use crate::cli::{
    ArgsError, MAX_THREADS, OutputArgs, ProbeCommand, RunFn, SchedArgs, bytes_in, count_in,
    positive_duration, sched_spec, times,
};
use crate::setup::PlacementError;

/// Memory access latency by working set: a random pointer chase and strided reads
/// and writes, with the cache stages found (seed 000 Table 5).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Working sets, e.g. 4K,64K,1M,256M (binary units; at least 4K, whole 64-byte
    /// lines, at most 16G). Default: 4 KiB to 256 MiB by powers of 2.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = working_set)]
    pub sizes: Option<Vec<usize>>,
    /// Strides of the strided accesses, in bytes (1 to 1M) [default: 4,44,64,4096].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = bytes_in(1, super::MAX_STRIDE))]
    pub strides: Option<Vec<usize>>,
    /// Which measurements run.
    #[arg(long, value_enum, default_value = "all")]
    pub mode: Mode,
    /// Also measure with up to this many threads at once (2, 4, ... up to N), one per
    /// CPU of --cpus, each on its own buffer.
    #[arg(long, default_value_t = 1, value_parser = count_in(1, MAX_THREADS, "threads"))]
    pub threads: usize,
    /// Pages backing the buffers: 4k (MADV_NOHUGEPAGE) or thp (MADV_HUGEPAGE).
    #[arg(long, value_enum, default_value = "4k")]
    pub pages: PageSize,
    /// Timed repetitions per point.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=i64::from(super::MAX_REPEAT)))]
    pub repeat: u32,
    /// How long one repetition of a point runs (e.g. 20ms).
    #[arg(long, default_value = "20ms", value_parser = positive_duration)]
    pub point_time: Duration,
    /// A quick look: working sets 4K,32K,256K,2M,16M,64M, strides 4 and 64, 2
    /// repetitions of 5 ms (explicit --sizes and --strides still win).
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

const QUICK_SIZES: &str = "4K,32K,256K,2M,16M,64M";
const QUICK_STRIDES: &str = "4,64";
const DEFAULT_STRIDES: &str = "4,44,64,4096";

/// `--sizes`: one working set, from [`super::MIN_SIZE`] to [`super::MAX_SIZE`]
/// bytes, in whole cache lines.
fn working_set(s: &str) -> Result<usize, String> {
    let n = bytes_in(super::MIN_SIZE, super::MAX_SIZE)(s)?;
    if n % super::LINE_BYTES != 0 {
        return Err(format!(
            "{n} bytes is not a whole number of {}-byte cache lines",
            super::LINE_BYTES
        ));
    }
    Ok(n)
}

impl ProbeCommand for Args {
    type Params = MemlatParams;
    type Error = MemlatError;

    fn params(&self) -> Result<MemlatParams, ArgsError<MemlatError>> {
        let sched = sched_spec(&self.sched, Nanos::from_millis(1))?;
        let sizes = match (&self.sizes, self.quick) {
            (Some(list), _) => list.clone(),
            (None, true) => super::parse_byte_list(QUICK_SIZES).expect("constant list"),
            (None, false) => super::default_sizes(),
        };
        // --quick replaces the default strides, not ones given explicitly.
        let strides = match (&self.strides, self.quick) {
            (Some(list), _) => list.clone(),
            (None, true) => super::parse_byte_list(QUICK_STRIDES).expect("constant list"),
            (None, false) => super::parse_byte_list(DEFAULT_STRIDES).expect("constant list"),
        };
        let (repeat, point_time) = if self.quick {
            (
                self.repeat.min(2),
                Nanos::from(self.point_time).min(Nanos::from_millis(5)),
            )
        } else {
            (self.repeat, Nanos::from(self.point_time))
        };
        let params = MemlatParams {
            sizes,
            strides,
            mode: self.mode,
            threads: self.threads,
            pages: self.pages,
            repeat,
            point_time,
            sched,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &MemlatError) -> Option<&'static str> {
        match error {
            MemlatError::NoSize | MemlatError::BadSize { .. } => Some("--sizes"),
            MemlatError::NoStride | MemlatError::ZeroStride => Some("--strides"),
            MemlatError::Threads { .. } => Some("--threads"),
            MemlatError::ZeroRepeat => Some("--repeat"),
            MemlatError::ZeroPointTime => Some("--point-time"),
            MemlatError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &MemlatParams) -> (Duration, &'static str) {
        let points = params.points().len() * params.thread_counts().len();
        let expected = times(
            Duration::from(params.point_time),
            (points as u64).saturating_mul(u64::from(params.repeat)),
        );
        (expected, "points")
    }
}
