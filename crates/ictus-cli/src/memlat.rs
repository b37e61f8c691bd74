//! `ictus probe memlat`: arguments to parameters, the run with its progress bar, and
//! its human view printed (`ictus_report::probes`: chase by working set, strided by
//! stride and size as in seed 000 Table 5, and the cache stages measured beside the
//! kernel's).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::memlat::{self, MemlatParams, Mode, PageSize};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs, positive_duration};

/// Memory access latency by working set: a random pointer chase and strided 64-bit
/// reads and writes, each point in a fresh buffer, with the cache stages found.
#[derive(Args, Debug)]
pub(crate) struct MemlatArgs {
    /// Working sets, e.g. 4K,64K,1M,256M (binary units; at least 4K, whole 64-byte
    /// lines, at most 16G). Default: 4 KiB to 256 MiB by powers of 2.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = working_set)]
    pub(crate) sizes: Option<Vec<usize>>,
    /// Strides of the strided accesses, in bytes (1 to 1M) [default: 4,44,64,4096].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = ictus_probe::cli::bytes_in(1, memlat::MAX_STRIDE))]
    pub(crate) strides: Option<Vec<usize>>,
    /// Which measurements run.
    #[arg(long, value_enum, default_value = "all")]
    pub(crate) mode: Mode,
    /// Also measure with up to this many threads at once (2, 4, ... up to N), one per
    /// CPU of --cpus, each on its own buffer.
    #[arg(long, default_value_t = 1, value_parser = ictus_probe::cli::count_in(1, ictus_probe::cli::MAX_THREADS, "threads"))]
    pub(crate) threads: usize,
    /// Pages backing the buffers: 4k (MADV_NOHUGEPAGE) or thp (MADV_HUGEPAGE).
    #[arg(long, value_enum, default_value = "4k")]
    pub(crate) pages: PageSize,
    /// Timed repetitions per point.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=i64::from(memlat::MAX_REPEAT)))]
    pub(crate) repeat: u32,
    /// How long one repetition of a point runs (e.g. 20ms).
    #[arg(long, default_value = "20ms", value_parser = positive_duration)]
    pub(crate) point_time: Duration,
    /// A quick look: working sets 4K,32K,256K,2M,16M,64M, strides 4 and 64, 2
    /// repetitions of 5 ms (explicit --sizes and --strides still win).
    #[arg(long)]
    pub(crate) quick: bool,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

const QUICK_SIZES: &str = "4K,32K,256K,2M,16M,64M";
const QUICK_STRIDES: &str = "4,64";
const DEFAULT_STRIDES: &str = "4,44,64,4096";

/// `--sizes`: one working set, from [`memlat::MIN_SIZE`] to [`memlat::MAX_SIZE`]
/// bytes, in whole cache lines.
fn working_set(s: &str) -> Result<usize, String> {
    let n = ictus_probe::cli::bytes_in(memlat::MIN_SIZE, memlat::MAX_SIZE)(s)?;
    if n % memlat::LINE_BYTES != 0 {
        return Err(format!(
            "{n} bytes is not a whole number of {}-byte cache lines",
            memlat::LINE_BYTES
        ));
    }
    Ok(n)
}

/// Turns the command line into probe parameters, refusing what can never run.
pub(crate) fn params(args: &MemlatArgs) -> Result<MemlatParams, Failure> {
    let sched = common::sched_spec(&args.sched, Nanos::from_millis(1))?;
    let sizes = match (&args.sizes, args.quick) {
        (Some(list), _) => list.clone(),
        (None, true) => memlat::parse_byte_list(QUICK_SIZES).expect("constant list"),
        (None, false) => memlat::default_sizes(),
    };
    // --quick replaces the default strides, not ones given explicitly.
    let strides = match (&args.strides, args.quick) {
        (Some(list), _) => list.clone(),
        (None, true) => memlat::parse_byte_list(QUICK_STRIDES).expect("constant list"),
        (None, false) => memlat::parse_byte_list(DEFAULT_STRIDES).expect("constant list"),
    };
    let (repeat, point_time) = if args.quick {
        (
            args.repeat.min(2),
            Nanos::from(args.point_time).min(Nanos::from_millis(5)),
        )
    } else {
        (args.repeat, Nanos::from(args.point_time))
    };
    let params = MemlatParams {
        sizes,
        strides,
        mode: args.mode,
        threads: args.threads,
        pages: args.pages,
        repeat,
        point_time,
        sched,
    };
    memlat::validate(&params).map_err(crate::refusal::refused)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &MemlatArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    let points = params.points().len() * params.thread_counts().len();
    let expected = common::times(
        Duration::from(params.point_time),
        (points as u64).saturating_mul(u64::from(params.repeat)),
    );
    let probe = || memlat::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, "points");
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
}
