//! `ictus probe rendezvous`: spin rendezvous between cores (seed 000 Table 6).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::progress::Progress;
use ictus_probe::rendezvous::{self, RendezvousParams, Spacing};

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, SchedArgs};

/// Options of `ictus probe rendezvous`.
#[derive(Debug, Args)]
pub(crate) struct RendezvousArgs {
    /// Thread counts to measure, each from 2 to the number of CPUs (e.g. 2,3,4).
    #[arg(short = 't', long, value_delimiter = ',', default_value = "2", value_parser = ictus_probe::cli::count_in(2, ictus_probe::cli::MAX_THREADS, "threads"))]
    pub(crate) threads: Vec<usize>,
    /// Where the spin flags sit: same-line, adjacent, or a distance in bytes (e.g.
    /// same-line,adjacent,5000).
    #[arg(long, value_delimiter = ',', default_value = "same-line,adjacent,5000", value_parser = parse_spacing)]
    pub(crate) spacing: Vec<Spacing>,
    /// Bytes each thread sends to the others per rendezvous (e.g. 0,512).
    #[arg(long, value_delimiter = ',', default_value = "0,512", value_parser = ictus_probe::cli::bytes_in(0, rendezvous::MAX_PAYLOAD_BYTES))]
    pub(crate) payload: Vec<usize>,
    /// Untimed rendezvous per point (for the rate).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) steps: u64,
    /// Individually timed rendezvous per point (for the distribution).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) timed_steps: u64,
    /// Round trips of the bare cache-line measurement.
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..=ictus_probe::cli::MAX_COUNT))]
    pub(crate) round_trips: u64,
    #[command(flatten)]
    pub(crate) sched: SchedArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

fn parse_spacing(s: &str) -> Result<Spacing, String> {
    match s {
        "same-line" => Ok(Spacing::SameLine),
        "adjacent" => Ok(Spacing::Adjacent),
        n if n.trim() == "0" => Err("a spacing of 0 bytes puts every flag in the same byte".into()),
        n => ictus_probe::cli::bytes_in(1, rendezvous::MAX_SPACING_BYTES)(n)
            .map(Spacing::Bytes)
            .map_err(|e| format!("{e}; or same-line, adjacent")),
    }
}

/// The command line as probe parameters.
pub(crate) fn params(args: &RendezvousArgs) -> Result<RendezvousParams, Failure> {
    let params = RendezvousParams {
        sched: common::sched_spec(&args.sched, Nanos::from_millis(1))?,
        threads: args.threads.clone(),
        spacings: args.spacing.clone(),
        payloads: args.payload.clone(),
        steps: args.steps,
        timed_steps: args.timed_steps,
        round_trips: args.round_trips,
    };
    rendezvous::validate(&params).map_err(crate::refusal::refused)?;
    Ok(params)
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &RendezvousArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let params = params(args)?;
    let points = (params.threads.len() * params.spacings.len() * params.payloads.len()) as u64;
    // About 150 ns per rendezvous here.
    let expected = common::times(
        Duration::from_nanos(150),
        points.saturating_mul(params.steps.saturating_add(params.timed_steps)),
    );
    let probe = || rendezvous::run(&params, std::env::args().collect(), progress);
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
