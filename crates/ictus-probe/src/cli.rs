//! The command line of the probes (the `cli` feature): what every probe's arguments
//! share (the scheduling and output options, the value parsers and their limits),
//! and [`ProbeCommand`], which each probe's `cli::Args` implements so the command
//! line runs every probe the same way.
//!
//! Only argument parsing lives here: printing, progress bars, output files and exit
//! codes are the binary's. A refusal is returned as an [`ArgsError`]: bad input the
//! person can fix ([`UsageError`]), or the probe's own validation error.

use std::path::PathBuf;
use std::time::Duration;

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;
use ictus_os::sched::{Policy, PolicyKind};

use crate::load::LoadKind;
use crate::progress::Progress;
use crate::record::RunRecord;
use crate::setup::{Choice, SchedSpec};

/// A probe's command line: its clap arguments, turned into the probe's parameters,
/// an estimate of the work for a progress bar, and the run.
pub trait ProbeCommand: clap::Args {
    /// What the arguments become (the probe's parameters, and what else its run needs).
    type Params;
    /// The probe's error: its refusal of the parameters, and its failure to run.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The arguments as parameters, refusing what can never run.
    fn params(&self) -> Result<Self::Params, ArgsError<Self::Error>>;

    /// The option a refusal of the parameters concerns, when one option is to blame,
    /// so the refusal names the flag a person typed (as clap's own refusals do).
    fn refused_flag(error: &Self::Error) -> Option<&'static str>;

    /// How long the run is expected to take, and the unit the progress bar counts.
    fn work(params: &Self::Params) -> (Duration, &'static str);

    /// The options every probe shares: the scheduling options (with the loads to
    /// measure under), when the probe has them, and where the record goes.
    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs);

    /// The scheduling options (with the loads to measure under), when the probe has them.
    fn sched(&self) -> Option<&SchedArgs> {
        self.options().0
    }

    /// Where the record goes.
    fn out(&self) -> &OutputArgs {
        self.options().1
    }

    /// The probe's run (its `run` function, given the parameters).
    const RUN: RunFn<Self::Params, Self::Error>;

    /// Runs the probe.
    fn run(
        params: &Self::Params,
        argv: Vec<String>,
        progress: &Progress,
    ) -> Result<RunRecord, Self::Error> {
        (Self::RUN)(params, argv, progress)
    }
}

/// A probe's run: its parameters, the command line to record, the progress to
/// report to.
pub type RunFn<P, E> = fn(&P, Vec<String>, &Progress) -> Result<RunRecord, E>;

/// Why the arguments cannot become parameters.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError<E> {
    /// Bad input the person can fix, outside the probe's own validation.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The probe's validation refused the parameters.
    #[error(transparent)]
    Refused(E),
}

/// Bad input on the command line: a message naming the option, and its cause if any.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl UsageError {
    /// Bad input said by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        UsageError {
            message: message.into(),
            source: None,
        }
    }

    /// Bad input said by `message`, caused by `source`.
    pub fn caused(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        UsageError {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Where and how a probe's threads run: the options every probe shares.
#[derive(Debug, clap::Args)]
pub struct SchedArgs {
    /// CPUs to measure on: a list like 0-3,6, or "all" (the default of most probes).
    #[arg(short = 'a', long)]
    pub cpus: Option<String>,
    /// Do not pin the threads to their CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Scheduling policy of the measuring threads.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: PolicyKind,
    /// Real-time priority for fifo and rr (1 to 99).
    #[arg(short, long, default_value_t = 95, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// Nice value for other and batch (-20 to 19).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: i32,
    /// Runtime per period for the deadline policy (default: a tenth of the period).
    #[arg(long, value_parser = positive_duration)]
    pub dl_runtime: Option<Duration>,
    /// Lock all memory (mlockall) before measuring.
    #[arg(short, long)]
    pub mlock: bool,
    /// Measure under a background load: cpu, disk, net, syscall, cachemiss, membw, or
    /// all (repeatable). What each load achieved goes into the record.
    #[arg(long = "load", value_name = "KIND", value_parser = parse_kind)]
    pub loads: Vec<Choice<LoadKind>>,
    /// CPUs the loads run on (default: every online CPU).
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<String>,
    /// The CPU latency QoS held for the run (/dev/cpu_dma_latency): a bound in us (0,
    /// the default, as cyclictest) or off (the machine as it idles: cyclictest's
    /// --laptop).
    #[arg(long, value_name = "US|off", default_value = "0", value_parser = pm_qos)]
    pub pm_qos: ictus_os::pm_qos::PmQos,
    /// Explain every miss (a sampler on the other CPUs reads what moved in each
    /// miss's window); off measures without it.
    #[arg(long, value_enum, default_value = "on")]
    pub explain: Switch,
    /// The lateness from which a release is a miss to explain (default: the period).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub explain_threshold: Option<Duration>,
}

/// On or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

impl Switch {
    /// Whether on.
    pub fn on(self) -> bool {
        self == Switch::On
    }
}

/// Parses `--pm-qos`.
pub fn pm_qos(s: &str) -> Result<ictus_os::pm_qos::PmQos, String> {
    s.parse()
        .map_err(|e: ictus_os::pm_qos::ParsePmQosError| e.to_string())
}

/// A load kind's name, or `all`: the one "a value, or all" type ([`Choice`]).
pub fn parse_kind(s: &str) -> Result<Choice<LoadKind>, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Choice::All);
    }
    s.parse::<LoadKind>()
        .map(Choice::One)
        .map_err(|e| format!("{e}, or all"))
}

/// Where the result record goes: the options every probe shares.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Print only the RunRecord, as JSON, on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also write the RunRecord as JSON to this file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `--trace FILE.json [--trace-cap BYTES]`: a timeline in the Chrome/Perfetto
/// trace-event format (`ictus probe loop`, `ictus run`, `ictus node`).
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Write a timeline of the run to this file (Chrome/Perfetto trace-event JSON:
    /// open it in ui.perfetto.dev or chrome://tracing, offline).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// The most bytes the trace file may take (e.g. 64MiB, 1G): past it events are
    /// counted, not written, and the file ends with a note saying how many.
    #[arg(long, value_name = "BYTES", requires = "trace", default_value = "256MiB",
          value_parser = bytes_in(ictus_capture::timeline::MIN_CAP_BYTES as usize, MAX_TRACE_CAP))]
    pub trace_cap: usize,
}

/// The largest `--trace-cap`: 64 GiB (Perfetto's UI opens far less; its trace
/// processor reads more).
pub const MAX_TRACE_CAP: usize = 64 << 30;

impl TraceArgs {
    /// The trace asked for, checked writable (before anything runs).
    pub fn spec(&self) -> Result<Option<ictus_capture::timeline::TraceSpec>, UsageError> {
        let Some(path) = &self.trace else {
            return Ok(None);
        };
        ictus_os::fs::check_writable(path).map_err(|e| UsageError::caused("--trace", e))?;
        Ok(Some(ictus_capture::timeline::TraceSpec {
            path: path.clone(),
            cap_bytes: self.trace_cap as u64,
        }))
    }
}

/// Parses a CPU list option (`flag` is `--cpus`, `--load-cpus`...): `all`, or a list
/// of online CPUs, at least one. Every refusal names the flag and its value.
pub fn cpus(flag: &str, text: &str) -> Result<CpuSet, UsageError> {
    let refuse = |why: String| UsageError::new(format!("{flag} '{text}': {why}"));
    let online = facts::online_cpus();
    if text.trim() == "all" {
        return Ok(online);
    }
    let set = text.parse::<CpuSet>().map_err(|e| refuse(e.to_string()))?;
    if set.is_empty() {
        return Err(refuse(
            "no CPU given (expected a list like 0-3,6, or all)".into(),
        ));
    }
    if let Some(cpu) = set.cpus().iter().find(|&&c| !online.contains(c)) {
        return Err(refuse(format!(
            "CPU {cpu} is not online (online CPUs: {online})"
        )));
    }
    Ok(set)
}

/// The scheduling options as a [`SchedSpec`], every online CPU when `--cpus` is not
/// given. `period` sizes a deadline reservation (deadline and period equal it; runtime
/// `--dl-runtime`, by default a tenth).
pub fn sched_spec(args: &SchedArgs, period: Nanos) -> Result<SchedSpec, UsageError> {
    sched_spec_or(args, period, facts::online_cpus)
}

/// [`sched_spec`] with the probe's own default CPUs when `--cpus` is not given.
pub fn sched_spec_or(
    args: &SchedArgs,
    period: Nanos,
    default_cpus: impl FnOnce() -> CpuSet,
) -> Result<SchedSpec, UsageError> {
    let policy = match args.policy {
        PolicyKind::Other => Policy::Other { nice: args.nice },
        PolicyKind::Batch => Policy::Batch { nice: args.nice },
        PolicyKind::Idle => Policy::Idle,
        PolicyKind::Fifo => Policy::Fifo {
            priority: args.priority,
        },
        PolicyKind::Rr => Policy::Rr {
            priority: args.priority,
        },
        PolicyKind::Deadline => {
            let runtime = args
                .dl_runtime
                .map(Nanos::from)
                .unwrap_or(Nanos::new(period.as_u64() / 10));
            if runtime > period {
                return Err(UsageError::new(format!(
                    "--dl-runtime {runtime} is longer than the period {period}"
                )));
            }
            Policy::Deadline {
                runtime_ns: runtime.as_u64(),
                deadline_ns: period.as_u64(),
                period_ns: period.as_u64(),
            }
        }
    };
    let cpus = match &args.cpus {
        Some(text) => cpus("--cpus", text)?,
        None => default_cpus(),
    };
    Ok(SchedSpec {
        cpus,
        pin: !args.no_pin,
        policy,
        mlock: args.mlock,
        pm_qos: args.pm_qos,
        explain: args.explain.on(),
        explain_threshold: args.explain_threshold.map(Nanos::from),
    })
}

/// Refuses `count` periods of `period` lasting over [`MAX_DURATION`]: deadlines that far
/// out would overflow the clock arithmetic.
pub fn check_span(
    count_flag: &str,
    count: u64,
    period_flag: &str,
    period: Duration,
) -> Result<(), UsageError> {
    if period.as_nanos() * u128::from(count) > MAX_DURATION.as_nanos() {
        return Err(UsageError::new(format!(
            "{count_flag} {count} times {period_flag} of {} is longer than the {} limit of a run",
            humantime::format_duration(period),
            humantime::format_duration(MAX_DURATION)
        )));
    }
    Ok(())
}

/// `d` times `n`, saturating: for estimates of how long a run takes (the progress
/// bar), which must never overflow whatever the counts.
pub fn times(d: Duration, n: u64) -> Duration {
    Duration::from_nanos(
        u64::try_from(d.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_mul(n),
    )
}

/// The longest duration a flag takes (`--duration`, `--point-time`, `--warmup`...):
/// one day. Every time derived from it fits in 64-bit nanoseconds many times over.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3_600);
/// The longest period (`--interval`): one second, as the executive's longest tick. A
/// probe's threads see a Ctrl-C when their current sleep ends, so this bounds the
/// wait for it; longer periods would measure the same wake-up, far fewer times.
pub const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// The most iterations a count flag takes (`--loops`, `--steps`, `--round-trips`...):
/// 10^12, so a count times any per-iteration time in nanoseconds stays far from
/// overflow.
pub const MAX_COUNT: u64 = 1_000_000_000_000;

/// A humantime duration (`1ms`, `250us`, `10s`) of at most `limit`.
fn bounded_duration(s: &str, limit: Duration, what: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err("a duration cannot be negative (expected e.g. 1ms, 100us, 10s)".into());
    }
    let d = humantime::parse_duration(s).map_err(|e| duration_error(s, &e))?;
    if d > limit {
        return Err(format!(
            "{s} is longer than the {} limit for {what}",
            humantime::format_duration(limit)
        ));
    }
    Ok(d)
}

/// Why `text` is not a duration, in words: what was expected and where (humantime's
/// own say "expected number at 0", a byte offset).
fn duration_error(text: &str, e: &humantime::DurationError) -> String {
    use humantime::DurationError as E;
    // The character at a byte offset, and its place counted from 1.
    let at = |offset: usize| {
        let c = text.get(offset..).and_then(|t| t.chars().next());
        let place = text.get(..offset).map_or(offset, |t| t.chars().count()) + 1;
        match c {
            Some(c) => format!("'{c}' at character {place}"),
            None => "the end".to_string(),
        }
    };
    let what = match e {
        E::NumberExpected(offset) => format!("expected a number, found {}", at(*offset)),
        E::InvalidCharacter(offset) => {
            format!("expected a number and a unit, found {}", at(*offset))
        }
        E::UnknownUnit { unit, value, .. } if unit.is_empty() => {
            format!("{value} needs a unit (ns, us, ms, s, min, h): e.g. {value}ms")
        }
        E::UnknownUnit { unit, .. } => {
            format!("unknown unit '{unit}' (expected ns, us, ms, s, min or h)")
        }
        E::NumberOverflow => "too large, or finer than a nanosecond".to_string(),
        E::Empty => "empty".to_string(),
    };
    format!("not a duration: {what} (e.g. 1ms, 100us, 10s)")
}

/// A duration greater than zero and at most [`MAX_DURATION`].
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = bounded_duration(s, MAX_DURATION, "a duration")?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// A duration from zero to [`MAX_DURATION`] (a warm-up, a margin).
pub fn any_duration(s: &str) -> Result<Duration, String> {
    bounded_duration(s, MAX_DURATION, "a duration")
}

/// A period greater than zero and at most [`MAX_INTERVAL`].
pub fn interval(s: &str) -> Result<Duration, String> {
    let d = bounded_duration(s, MAX_INTERVAL, "an interval")?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

/// The largest number of threads a count flag takes (`--threads`): one per CPU the
/// kernel can address; how many CPUs there really are is checked after parsing.
pub const MAX_THREADS: usize = ictus_core::cpulist::MAX_CPU + 1;

/// A whole number of `unit` (`threads`, `modules`) from `min` to `max`: refuses
/// negatives, garbage and values over `max` naming the range.
pub fn count_in(
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
pub fn byte_limit(n: usize) -> String {
    if n < 1024 {
        return format!("{n} bytes");
    }
    format!("{} ({n} bytes)", crate::memlat::format_bytes(n as u64))
}

/// A byte count (a number with an optional binary unit: `512`, `4K`, `64KiB`,
/// `1M`) from `min` to `max`: refuses negatives, garbage and sizes over `max`
/// naming the limit.
pub fn bytes_in(
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

    #[test]
    fn a_bad_duration_says_what_was_expected_and_where() {
        let sut = positive_duration("fast").unwrap_err();
        assert_eq!(
            sut,
            "not a duration: expected a number, found 'f' at character 1 \
             (e.g. 1ms, 100us, 10s)"
        );
        let sut = positive_duration("10").unwrap_err();
        assert!(sut.contains("10 needs a unit"), "{sut}");
        let sut = positive_duration("5parsecs").unwrap_err();
        assert!(sut.contains("unknown unit 'parsecs'"), "{sut}");
        let sut = positive_duration("1ms!").unwrap_err();
        assert!(sut.contains("'!' at character 4"), "{sut}");
        assert!(!positive_duration("").unwrap_err().contains(" at 0"));
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
            let _ = cpus("--cpus", &s);
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
