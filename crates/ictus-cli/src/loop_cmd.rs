//! `ictus probe loop`: can this machine hold a fully synchronous loop (seed 000 §3.1)?

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::r#loop::{self, FindMax, LoopParams};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs, positive_duration};

/// Options of `ictus probe loop`.
#[derive(Debug, Args)]
pub(crate) struct LoopArgs {
    /// Loop frequency: 10kHz (seed 000's gesture loop), 50kHz (its sound loop), 1000Hz...
    #[arg(short = 'f', long, default_value = "10kHz", value_parser = parse_frequency)]
    pub(crate) frequency: f64,
    /// Threads in the loop, one per CPU (default: 2, or 1 on a one-CPU machine).
    #[arg(short = 'k', long, value_parser = ictus_probe::cli::count_in(1, ictus_probe::cli::MAX_THREADS, "threads"))]
    pub(crate) threads: Option<usize>,
    /// Size of the mass-interaction model, in modules.
    #[arg(long, default_value_t = 1_001, value_parser = ictus_probe::cli::count_in(3, ictus_probe::compute::MAX_MODULES, "modules"))]
    pub(crate) modules: usize,
    /// Bytes each thread sends at each of the two rendezvous per step.
    #[arg(long, default_value_t = 512, value_parser = ictus_probe::cli::bytes_in(0, r#loop::MAX_EXCHANGE_BYTES))]
    pub(crate) exchange: usize,
    /// Steps to run (per trial with --find-max).
    #[arg(short = 'n', long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) steps: u64,
    /// Hybrid wait margin (default: calibrated from the measured wake-up latency).
    #[arg(long, value_parser = positive_duration)]
    pub(crate) margin: Option<Duration>,
    /// Search for the highest frequency with zero misses over --steps steps.
    #[arg(long)]
    pub(crate) find_max: bool,
    /// --find-max: the longest one trial may take (fewer steps at low frequencies).
    #[arg(long, default_value = "5s", value_parser = positive_duration)]
    pub(crate) max_trial: Duration,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// `10kHz`, `50 khz`, `500Hz`, `2000`.
pub(crate) fn parse_frequency(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase().replace(' ', "");
    let (num, scale) = if let Some(n) = t.strip_suffix("khz") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("hz") {
        (n, 1.0)
    } else {
        (t.as_str(), 1.0)
    };
    let (min, max) = (r#loop::MIN_FREQUENCY_HZ, r#loop::MAX_FREQUENCY_HZ);
    match num.parse::<f64>() {
        Ok(v) if (min..=max).contains(&(v * scale)) => Ok(v * scale),
        Ok(v) if v.is_finite() => Err(format!(
            "{} Hz is outside {min} Hz to {max} Hz (the loop's range)",
            v * scale
        )),
        _ => Err(format!(
            "not a frequency (expected e.g. 10kHz, 500Hz, from {min} Hz to {max} Hz)"
        )),
    }
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &LoopArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let period = Nanos::new((1e9 / args.frequency.max(1.0)) as u64);
    let mut sched = common::sched_spec(&args.sched, period)?;
    // The loop locks memory unless told otherwise by a refusal: a page fault in a
    // 100 us period is a miss.
    sched.mlock = true;
    let threads = args.threads.unwrap_or(sched.cpus.len().min(2));
    let params = LoopParams {
        sched,
        threads,
        frequency_hz: args.frequency,
        modules: args.modules,
        exchange_bytes: args.exchange,
        steps: args.steps,
        margin: args.margin.map(Nanos::from),
        find_max: args.find_max.then(|| FindMax {
            max_trial: Nanos::from(args.max_trial),
            ..FindMax::default()
        }),
    };
    r#loop::validate(&params).map_err(crate::refusal::refused)?;
    common::check_span("--steps", args.steps, "a period", Duration::from(period))?;
    let expected = if args.find_max {
        Duration::from_secs(30)
    } else {
        common::times(Duration::from(period), args.steps)
    };
    let unit = if args.find_max { "trials" } else { "steps" };
    let probe = || r#loop::run(&params, std::env::args().collect(), progress);
    let bar = Bar::start(progress, expected, &args.out, unit);
    common::measure(
        bar,
        progress,
        &args.sched,
        &args.out,
        probe,
        ictus_report::probes::terminal,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_parse_with_or_without_units() {
        assert_eq!(parse_frequency("10kHz"), Ok(10_000.0));
        assert_eq!(parse_frequency("50 khz"), Ok(50_000.0));
        assert_eq!(parse_frequency("500Hz"), Ok(500.0));
        assert_eq!(parse_frequency("2000"), Ok(2_000.0));
        assert!(parse_frequency("0Hz").is_err());
        assert!(parse_frequency("fast").is_err());
    }
}
