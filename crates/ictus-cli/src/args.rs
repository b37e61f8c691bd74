//! The command line, declared with clap.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::ValueHint;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// ictus: can this machine keep my beat? Measure real-time latency, set the machine
/// up, run cyclic loops.
#[derive(Debug, Parser)]
#[command(name = "ictus", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// Parses the process's arguments with the hardened command line ([`harden`]).
    pub(crate) fn try_parse_hardened() -> Result<Self, clap::Error> {
        Self::try_parse_hardened_from(std::env::args_os())
    }

    /// Parses `args` (the program name first) with the hardened command line.
    pub(crate) fn try_parse_hardened_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = harden(Cli::command());
        let matches = cmd.try_get_matches_from_mut(args)?;
        Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
    }
}

/// The command line with one rule applied to every option of every subcommand: an
/// option's value may start with `-`, so `--loops -1`, `--duration -1s` or
/// `--sizes -4K` reach the option's own parser and are refused naming the option
/// and what it expects, instead of clap's "unexpected argument '-1'", which names
/// none. Exempt are options taking a path (a file named `--json` is a typo, not a
/// wish) and positionals (`ictus exec ... -- cmd -1` keeps its trailing words).
pub(crate) fn harden(cmd: clap::Command) -> clap::Command {
    let cmd = cmd.mut_args(|arg| {
        let path = matches!(
            arg.get_value_hint(),
            ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
        );
        if arg.is_positional() || path || !arg.get_action().takes_values() {
            arg
        } else {
            arg.allow_hyphen_values(true)
        }
    });
    cmd.mut_subcommands(harden)
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// The main job: audit, then every probe over the configurations and loads, then
    /// the verdict on a target loop; writes a results directory with a report.
    Survey(crate::survey::SurveyArgs),
    /// Audit this machine's real-time features: one check per feature, with advice.
    Doctor(DoctorArgs),
    /// Run one measurement.
    Probe(ProbeArgs),
    /// Turn another tool's results into an ictus record (cyclictest --json).
    Import(crate::import::ImportArgs),
    /// Run background loads (cpu, disk, net, syscall, cachemiss, membw) to measure under.
    Load(crate::load::LoadCommandArgs),
    /// Render a results directory (or one record) again: writes report.md and report.html.
    Report(crate::report::ReportArgs),
    /// Set two or more results directories or records side by side, with ratios.
    Compare(crate::report::CompareArgs),
    /// Partition the CPUs into RT and NRT sets (cpusets, tasks, IRQs), with exact undo.
    Shield(crate::shield::ShieldArgs),
    /// Test a load balancer: run a scenario's fake tasks under stock Linux placement or
    /// the ictus balancer (seed 002 §5.3); writes result.json, report.md, timeline.svg.
    Scenario(crate::scenario::ScenarioArgs),
    /// Run a command in a task class: rt0 (FIFO 99, one RT CPU), rt1 (FIFO/RR 1-98,
    /// RT and NRT CPUs) or normal.
    Exec(crate::exec::ExecArgs),
    /// Run a cyclic executive schedule (subsystems, cells, frames) with a live status
    /// line; writes a RunRecord with per-subsystem statistics.
    Run(crate::run::RunArgs),
    /// Be one host of a schedule that spans hosts: its local coordinator (seed 003).
    /// Runs this host's subsystems on the main host's beat (`ictus run` there),
    /// copies in the cells other hosts publish and publishes its own.
    Node(crate::run::NodeArgs),
    /// Command a running schedule: run, pause, off or a mode; status; stop.
    Ctl(crate::run::CtlArgs),
    /// Make the keys of a run across hosts: its CA, and a certificate and key per host
    /// and per reader, for TLS with mutual authentication.
    Keys(crate::keys::KeysArgs),
    /// Hosts a built-in subsystem in a process of its own: what `ictus run` launches
    /// for `process = "own"` (not for direct use).
    #[command(hide = true)]
    Subsystem,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print the audit as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    #[command(subcommand)]
    pub(crate) command: ProbeCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProbeCommand {
    /// Timer wake-up latency (what cyclictest measures), counting missed periods.
    Timer(TimerArgs),
    /// Context switch and hand-off latency between two threads (seed 001 Table 3, seed 004 Table 2).
    Pingpong(crate::pingpong::PingpongArgs),
    /// Execution-time variation of a fixed routine (seed 002 Table 2, seed 000 Fig. 3).
    Jitter(crate::jitter::JitterArgs),
    /// Can this machine hold a fully synchronous K-core loop? (seed 000 §3.1, Table 1)
    Loop(crate::loop_cmd::LoopArgs),
    /// Memory access latency by working set: a random pointer chase and strided reads
    /// and writes, with the cache stages found (seed 000 Table 5).
    Memlat(crate::memlat::MemlatArgs),
    /// Interrupt latency apart from thread latency, where the kernel has timerlat.
    Irq(crate::irq::IrqArgs),
    /// Computing power on a mass-interaction model, by size and split (seed 000 Table 7).
    Compute(crate::compute::ComputeArgs),
    /// Spin rendezvous between cores, against the bare cache-line round trip (seed 000 Table 6).
    Rendezvous(crate::rendezvous::RendezvousArgs),
    /// Data transfer between two threads by payload size, over an SPSC ring, a pipe, a
    /// Unix socket and buffer handover (seed 004 Figures 6 and 7).
    Throughput(crate::throughput::ThroughputArgs),
}

/// Where and how a probe's threads run: the options every probe shares.
#[derive(Debug, Args)]
pub(crate) struct SchedArgs {
    /// CPUs to measure on: a list like 0-3,6, or "all" (the default of most probes).
    #[arg(short = 'a', long)]
    pub(crate) cpus: Option<String>,
    /// Do not pin the threads to their CPUs.
    #[arg(long)]
    pub(crate) no_pin: bool,
    /// Scheduling policy of the measuring threads.
    #[arg(long, value_enum, default_value = "fifo")]
    pub(crate) policy: ictus_os::sched::PolicyKind,
    /// Real-time priority for fifo and rr (1 to 99).
    #[arg(short, long, default_value_t = 95, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub(crate) priority: u8,
    /// Nice value for other and batch (-20 to 19).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub(crate) nice: i32,
    /// Runtime per period for the deadline policy (default: a tenth of the period).
    #[arg(long, value_parser = positive_duration)]
    pub(crate) dl_runtime: Option<Duration>,
    /// Lock all memory (mlockall) before measuring.
    #[arg(short, long)]
    pub(crate) mlock: bool,
    /// Measure under a background load: cpu, disk, net, syscall, cachemiss, membw, or
    /// all (repeatable). What each load achieved goes into the record.
    #[arg(long = "load", value_name = "KIND", value_parser = crate::load::parse_kind)]
    pub(crate) loads: Vec<crate::load::KindArg>,
    /// CPUs the loads run on (default: every online CPU).
    #[arg(long, value_name = "LIST")]
    pub(crate) load_cpus: Option<String>,
    /// The CPU latency QoS held for the run (/dev/cpu_dma_latency): a bound in us (0,
    /// the default, as cyclictest) or off (the machine as it idles: cyclictest's
    /// --laptop).
    #[arg(long, value_name = "US|off", default_value = "0", value_parser = pm_qos)]
    pub(crate) pm_qos: ictus_os::pm_qos::PmQos,
    /// Explain every miss (a sampler on the other CPUs reads what moved in each
    /// miss's window); off measures without it.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) explain: Switch,
    /// The lateness from which a release is a miss to explain (default: the period).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub(crate) explain_threshold: Option<Duration>,
}

/// On or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

impl Switch {
    /// Whether on.
    pub(crate) fn on(self) -> bool {
        self == Switch::On
    }
}

/// Parses `--pm-qos`.
pub(crate) fn pm_qos(s: &str) -> Result<ictus_os::pm_qos::PmQos, String> {
    s.parse()
        .map_err(|e: ictus_os::pm_qos::ParsePmQosError| e.to_string())
}

/// Where the result record goes: the options every probe shares.
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Print only the RunRecord, as JSON, on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the RunRecord as JSON to this file.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct TimerArgs {
    /// Period between wake-ups (e.g. 1ms, 100us).
    #[arg(short, long, default_value = "1ms", value_parser = interval)]
    pub(crate) interval: Duration,
    /// How long to measure, after the warm-up (e.g. 10s, 2m).
    #[arg(short = 'D', long, default_value = "10s", value_parser = positive_duration, conflicts_with = "loops")]
    pub(crate) duration: Duration,
    /// Measure this many periods per thread instead of a duration.
    #[arg(short = 'l', long, value_parser = clap::value_parser!(u64).range(1..=crate::args::MAX_COUNT))]
    pub(crate) loops: Option<u64>,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    /// How to wait for each deadline.
    #[arg(long, value_enum, default_value = "nanosleep")]
    pub(crate) mode: ictus_probe::timer::ModeRequest,
    /// Hybrid mode: spin for this long before each deadline (default: calibrated from
    /// the measured wake-up latency).
    #[arg(long, value_parser = crate::args::any_duration)]
    pub(crate) margin: Option<Duration>,
    /// Warm-up before measuring, discarded.
    #[arg(long, default_value = "100ms", value_parser = crate::args::any_duration)]
    pub(crate) warmup: Duration,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// The longest duration a flag takes (`--duration`, `--point-time`, `--warmup`...):
/// one day. Every time derived from it fits in 64-bit nanoseconds many times over.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(24 * 3_600);
/// The longest period (`--interval`): one second, as the executive's longest tick. A
/// probe's threads see a Ctrl-C when their current sleep ends, so this bounds the
/// wait for it; longer periods would measure the same wake-up, far fewer times.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// The most iterations a count flag takes (`--loops`, `--steps`, `--round-trips`...):
/// 10^12, so a count times any per-iteration time in nanoseconds stays far from
/// overflow.
pub(crate) const MAX_COUNT: u64 = 1_000_000_000_000;

/// A humantime duration (`1ms`, `250us`, `10s`) of at most `limit`.
fn bounded_duration(s: &str, limit: Duration, what: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err("a duration cannot be negative (expected e.g. 1ms, 100us, 10s)".into());
    }
    let d =
        humantime::parse_duration(s).map_err(|e| format!("{e} (expected e.g. 1ms, 100us, 10s)"))?;
    if d > limit {
        return Err(format!(
            "{s} is longer than the {} limit for {what}",
            humantime::format_duration(limit)
        ));
    }
    Ok(d)
}

/// A duration greater than zero and at most [`MAX_DURATION`].
pub(crate) fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = bounded_duration(s, MAX_DURATION, "a duration")?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// A duration from zero to [`MAX_DURATION`] (a warm-up, a margin).
pub(crate) fn any_duration(s: &str) -> Result<Duration, String> {
    bounded_duration(s, MAX_DURATION, "a duration")
}

/// A period greater than zero and at most [`MAX_INTERVAL`].
pub(crate) fn interval(s: &str) -> Result<Duration, String> {
    let d = bounded_duration(s, MAX_INTERVAL, "an interval")?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// The largest number of threads a count flag takes (`--threads`): one per CPU the
/// kernel can address; how many CPUs there really are is checked after parsing.
pub(crate) const MAX_THREADS: usize = ictus_core::cpulist::MAX_CPU + 1;

/// A whole number of `unit` (`threads`, `modules`) from `min` to `max`: refuses
/// negatives, garbage and values over `max` naming the range.
pub(crate) fn count_in(
    min: usize,
    max: usize,
    unit: &'static str,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| {
        let t = s.trim();
        let range = || format!("expected a whole number of {unit} from {min} to {max}");
        let over = || format!("over the limit of {max} {unit}");
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            // All digits: a parse failure is an overflow, so over the limit too.
            return match t.parse::<usize>() {
                Ok(n) if n > max => Err(over()),
                Ok(n) if n < min => Err(format!("must be at least {min} {unit}")),
                Ok(n) => Ok(n),
                Err(_) => Err(over()),
            };
        }
        if t.starts_with('-') {
            return Err(format!("cannot be negative ({})", range()));
        }
        Err(range())
    }
}

/// A byte count as a number with an optional binary unit (`512`, `4K`, `64KiB`,
/// `1M`, `2G`), exactly; `None` when it is not one. Counts beyond `u128` saturate,
/// so every huge count reads as over a limit rather than as garbage.
fn byte_count(s: &str) -> Option<u128> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    let n = digits.parse::<u128>().unwrap_or(u128::MAX);
    Some(n.saturating_mul(1 << shift))
}

/// `n` bytes as a person reads a limit: `1 MiB (1048576 bytes)`.
pub(crate) fn byte_limit(n: usize) -> String {
    if n < 1024 {
        return format!("{n} bytes");
    }
    format!(
        "{} ({n} bytes)",
        ictus_probe::memlat::format_bytes(n as u64)
    )
}

/// A byte count (see [`byte_count`]) from `min` to `max`: refuses negatives,
/// garbage and sizes over `max` naming the limit.
pub(crate) fn bytes_in(
    min: usize,
    max: usize,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| {
        let expected = "expected a size such as 512, 4K, 64KiB or 1M";
        if s.trim_start().starts_with('-') {
            return Err(format!("a size cannot be negative ({expected})"));
        }
        if s.trim().is_empty() {
            return Err(format!("an empty item ({expected})"));
        }
        let n = byte_count(s).ok_or_else(|| expected.to_string())?;
        if n > max as u128 {
            return Err(format!("over the limit of {}", byte_limit(max)));
        }
        if n < min as u128 {
            return Err(format!("must be at least {}", byte_limit(min)));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        harden(Cli::command()).debug_assert();
    }

    #[test]
    fn absurd_durations_and_intervals_are_refused_naming_the_limit() {
        for s in [
            "1000years",
            "18446744073709551615ns",
            "2days",
            "99999999999999999999s",
        ] {
            assert!(positive_duration(s).is_err(), "{s}");
            assert!(any_duration(s).is_err(), "{s}");
        }
        assert!(positive_duration("1day").is_ok());
        let err = interval("2s").unwrap_err();
        assert!(err.contains("1s"), "{err}");
        assert!(interval("1s").is_ok());
        assert!(interval("1h").is_err());
        assert_eq!(any_duration("0s").unwrap(), Duration::ZERO);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_duration_text_never_panics_and_stays_bounded(s in ".{0,40}") {
            if let Ok(d) = positive_duration(&s) {
                proptest::prop_assert!(!d.is_zero() && d <= MAX_DURATION);
            }
            if let Ok(d) = interval(&s) {
                proptest::prop_assert!(!d.is_zero() && d <= MAX_INTERVAL);
            }
        }

        #[test]
        fn numbers_with_units_never_panic(n in proptest::prelude::any::<u64>(), unit in "(ns|us|ms|s|m|h|d|y|years|)") {
            let s = format!("{n}{unit}");
            let _ = positive_duration(&s);
            let _ = crate::common::cpus("--cpus", &s);
        }
    }

    #[test]
    fn counts_are_refused_outside_their_range_naming_it() {
        let sut = count_in(3, 1000, "modules");
        assert_eq!(sut("3"), Ok(3));
        assert_eq!(sut(" 1000 "), Ok(1000));
        for (s, words) in [
            ("0", "at least 3 modules"),
            ("1001", "limit of 1000 modules"),
            ("18446744073709551616", "limit of 1000"),
            ("-1", "negative"),
            ("", "from 3 to 1000"),
            ("1e3", "from 3 to 1000"),
        ] {
            let err = sut(s).unwrap_err();
            assert!(err.contains(words), "{s:?}: {err}");
        }
    }

    #[test]
    fn sizes_are_refused_outside_their_range_naming_the_limit() {
        let sut = bytes_in(64, 1 << 20);
        assert_eq!(sut("1M"), Ok(1 << 20));
        assert_eq!(sut("4KiB"), Ok(4096));
        for (s, words) in [
            ("1048577", "1 MiB (1048576 bytes)"),
            ("18446744073709551615K", "limit"),
            ("999999999999999999999999999999999999999999", "limit"),
            ("2M", "limit"),
            ("63", "at least 64 bytes"),
            ("-4K", "negative"),
            ("", "an empty item"),
            ("4X", "expected a size"),
        ] {
            let err = sut(s).unwrap_err();
            assert!(err.contains(words), "{s:?}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn a_bounded_parser_never_returns_a_value_out_of_bounds(s in ".{0,24}", n in 0usize..5000) {
            if let Ok(v) = count_in(3, n.max(3), "things")(&s) {
                proptest::prop_assert!((3..=n.max(3)).contains(&v));
            }
            if let Ok(v) = bytes_in(64, n.max(64))(&s) {
                proptest::prop_assert!((64..=n.max(64)).contains(&v));
            }
        }
    }

    #[test]
    fn zero_and_garbage_durations_are_refused() {
        assert!(positive_duration("0s").is_err());
        assert!(positive_duration("fast").is_err());
        assert_eq!(
            positive_duration("100us").unwrap(),
            Duration::from_micros(100)
        );
    }
}
