//! `ictus probe loop` on the command line: its options, their parameters, and the
//! work a progress bar counts.

use std::time::Duration;

use ictus_core::Nanos;

use super::{FindMax, LoopError, LoopParams};
use crate::cli::{
    ArgsError, MAX_COUNT, MAX_THREADS, OutputArgs, ProbeCommand, RunFn, SchedArgs, TraceArgs,
    bytes_in, check_span, count_in, positive_duration, sched_spec, times,
};

/// Can this machine hold a fully synchronous K-core loop? (seed 000 §3.1, Table 1)
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Loop frequency: 10kHz (seed 000's gesture loop), 50kHz (its sound loop), 1000Hz...
    #[arg(short = 'f', long, default_value = "10kHz", value_parser = parse_frequency)]
    pub frequency: f64,
    /// Threads in the loop, one per CPU (default: 2, or 1 on a one-CPU machine).
    #[arg(short = 'k', long, value_parser = count_in(1, MAX_THREADS, "threads"))]
    pub threads: Option<usize>,
    /// Size of the mass-interaction model, in modules.
    #[arg(long, default_value_t = 1_001, value_parser = count_in(3, crate::compute::MAX_MODULES, "modules"))]
    pub modules: usize,
    /// Bytes each thread sends at each of the two rendezvous per step.
    #[arg(long, default_value_t = 512, value_parser = bytes_in(0, super::MAX_EXCHANGE_BYTES))]
    pub exchange: usize,
    /// Steps to run (per trial with --find-max).
    #[arg(short = 'n', long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub steps: u64,
    /// Hybrid wait margin (default: calibrated from the measured wake-up latency).
    #[arg(long, value_parser = positive_duration)]
    pub margin: Option<Duration>,
    /// Search for the highest frequency with zero misses over --steps steps.
    #[arg(long)]
    pub find_max: bool,
    /// --find-max: the longest one trial may take (fewer steps at low frequencies).
    #[arg(long, default_value = "5s", value_parser = positive_duration)]
    pub max_trial: Duration,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    out: OutputArgs,
}

/// `10kHz`, `50 khz`, `500Hz`, `2000`.
pub fn parse_frequency(s: &str) -> Result<f64, String> {
    let t = s.trim().to_ascii_lowercase().replace(' ', "");
    let (num, scale) = if let Some(n) = t.strip_suffix("khz") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("hz") {
        (n, 1.0)
    } else {
        (t.as_str(), 1.0)
    };
    let (min, max) = (super::MIN_FREQUENCY_HZ, super::MAX_FREQUENCY_HZ);
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

/// The period of a loop at `frequency_hz`.
fn period(frequency_hz: f64) -> Nanos {
    Nanos::new((1e9 / frequency_hz.max(1.0)) as u64)
}

impl ProbeCommand for Args {
    type Params = LoopParams;
    type Error = LoopError;

    fn params(&self) -> Result<LoopParams, ArgsError<LoopError>> {
        let period = period(self.frequency);
        let mut sched = sched_spec(&self.sched, period)?;
        // The loop locks memory unless told otherwise by a refusal: a page fault in a
        // 100 us period is a miss.
        sched.mlock = true;
        let threads = self.threads.unwrap_or(sched.cpus.len().min(2));
        let params = LoopParams {
            sched,
            threads,
            frequency_hz: self.frequency,
            modules: self.modules,
            exchange_bytes: self.exchange,
            steps: self.steps,
            margin: self.margin.map(Nanos::from),
            find_max: self.find_max.then(|| FindMax {
                max_trial: Nanos::from(self.max_trial),
                ..FindMax::default()
            }),
            trace: self.trace.spec()?,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        check_span("--steps", self.steps, "a period", Duration::from(period))?;
        Ok(params)
    }

    fn refused_flag(error: &LoopError) -> Option<&'static str> {
        match error {
            LoopError::Threads { .. } => Some("--threads"),
            LoopError::Frequency(_) => Some("--frequency"),
            LoopError::Model { .. } => Some("--modules"),
            LoopError::NoSteps => Some("--steps"),
            LoopError::Unpinned => Some("--no-pin"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &LoopParams) -> (Duration, &'static str) {
        if params.find_max.is_some() {
            (Duration::from_secs(30), "trials")
        } else {
            let period = Duration::from(period(params.frequency_hz));
            (times(period, params.steps), "steps")
        }
    }
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
