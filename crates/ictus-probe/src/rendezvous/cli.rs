//! `ictus probe rendezvous` on the command line: its options, their parameters, and
//! the work a progress bar counts.

use std::time::Duration;

use ictus_core::Nanos;

use super::{RendezvousError, RendezvousParams, Spacing};
use crate::cli::{
    ArgsError, MAX_COUNT, MAX_THREADS, OutputArgs, ProbeCommand, RunFn, SchedArgs, bytes_in,
    count_in, sched_spec, times,
};

/// Spin rendezvous between cores, against the bare cache-line round trip (seed 000 Table 6).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Thread counts to measure, each from 2 to the number of CPUs (e.g. 2,3,4).
    #[arg(short = 't', long, value_delimiter = ',', default_value = "2", value_parser = count_in(2, MAX_THREADS, "threads"))]
    pub threads: Vec<usize>,
    /// Where the spin flags sit: same-line, adjacent, or a distance in bytes (e.g.
    /// same-line,adjacent,5000).
    #[arg(long, value_delimiter = ',', default_value = "same-line,adjacent,5000", value_parser = parse_spacing)]
    pub spacing: Vec<Spacing>,
    /// Bytes each thread sends to the others per rendezvous (e.g. 0,512).
    #[arg(long, value_delimiter = ',', default_value = "0,512", value_parser = bytes_in(0, super::MAX_PAYLOAD_BYTES))]
    pub payload: Vec<usize>,
    /// Untimed rendezvous per point (for the rate).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub steps: u64,
    /// Individually timed rendezvous per point (for the distribution).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub timed_steps: u64,
    /// Round trips of the bare cache-line measurement.
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub round_trips: u64,
    #[command(flatten)]
    sched: SchedArgs,
    #[command(flatten)]
    out: OutputArgs,
}

fn parse_spacing(s: &str) -> Result<Spacing, String> {
    match s {
        "same-line" => Ok(Spacing::SameLine),
        "adjacent" => Ok(Spacing::Adjacent),
        n if n.trim() == "0" => Err("a spacing of 0 bytes puts every flag in the same byte".into()),
        n => bytes_in(1, super::MAX_SPACING_BYTES)(n)
            .map(Spacing::Bytes)
            .map_err(|e| format!("{e}; or same-line, adjacent")),
    }
}

impl ProbeCommand for Args {
    type Params = RendezvousParams;
    type Error = RendezvousError;

    fn params(&self) -> Result<RendezvousParams, ArgsError<RendezvousError>> {
        let params = RendezvousParams {
            sched: sched_spec(&self.sched, Nanos::from_millis(1))?,
            threads: self.threads.clone(),
            spacings: self.spacing.clone(),
            payloads: self.payload.clone(),
            steps: self.steps,
            timed_steps: self.timed_steps,
            round_trips: self.round_trips,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &RendezvousError) -> Option<&'static str> {
        match error {
            RendezvousError::Threads { .. } => Some("--threads"),
            RendezvousError::ZeroSpacing => Some("--spacing"),
            RendezvousError::Unpinned => Some("--no-pin"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (Some(&self.sched), &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &RendezvousParams) -> (Duration, &'static str) {
        let points = (params.threads.len() * params.spacings.len() * params.payloads.len()) as u64;
        // About 150 ns per rendezvous here.
        let expected = times(
            Duration::from_nanos(150),
            points.saturating_mul(params.steps.saturating_add(params.timed_steps)),
        );
        (expected, "points")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacings_parse_by_name_or_bytes() {
        assert_eq!(parse_spacing("same-line"), Ok(Spacing::SameLine));
        assert_eq!(parse_spacing("5000"), Ok(Spacing::Bytes(5000)));
        assert!(parse_spacing("0").is_err());
        assert!(parse_spacing("far").is_err());
    }
}
