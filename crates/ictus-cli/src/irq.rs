//! `ictus probe irq`: interrupt latency where the kernel's timerlat tracer exists.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use ictus_core::Nanos;
use ictus_probe::irq::{self, IrqParams};
use ictus_probe::progress::Progress;

use crate::Failure;
use crate::common::{self, Bar};
use ictus_probe::cli::{OutputArgs, positive_duration};

/// Options of `ictus probe irq`.
#[derive(Debug, Args)]
pub(crate) struct IrqArgs {
    /// CPUs whose timer IRQs are measured: a list like 0-3, or "all".
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) cpus: String,
    /// Period of the tracer's timer.
    #[arg(short, long, default_value = "1ms", value_parser = ictus_probe::cli::interval)]
    pub(crate) interval: Duration,
    /// How long to trace.
    #[arg(short = 'D', long, default_value = "10s", value_parser = positive_duration)]
    pub(crate) duration: Duration,
    /// The CPU latency QoS held for the run: a bound in us (0, the default) or off.
    #[arg(long, value_name = "US|off", default_value = "0", value_parser = ictus_probe::cli::pm_qos)]
    pub(crate) pm_qos: ictus_os::pm_qos::PmQos,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// Runs the probe and prints the record.
pub(crate) fn run(args: &IrqArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    common::check_outputs(&args.out)?;
    let (shortest, longest) = (Duration::from_micros(100), Duration::from_secs(1));
    if !(shortest..=longest).contains(&args.interval) {
        return Err(Failure::usage(anyhow::anyhow!(
            "--interval {}: the timerlat tracer's period is 100us to 1s",
            humantime::format_duration(args.interval)
        )));
    }
    if args.duration < args.interval {
        return Err(Failure::usage(anyhow::anyhow!(
            "--duration {}: shorter than one --interval ({})",
            humantime::format_duration(args.duration),
            humantime::format_duration(args.interval)
        )));
    }
    let params = IrqParams {
        cpus: common::cpus("--cpus", &args.cpus)?,
        period: Nanos::from(args.interval),
        duration: Nanos::from(args.duration),
        pm_qos: args.pm_qos,
    };
    irq::validate(&params).map_err(crate::refusal::refused)?;
    let expected = if irq::unavailable_reason().is_some() {
        Duration::ZERO
    } else {
        args.duration
    };
    let bar = Bar::start(progress, expected, &args.out, "ms");
    let record = irq::run(&params, std::env::args().collect(), progress);
    bar.done(progress);
    let record = record.map_err(anyhow::Error::new)?;
    common::emit(&record, &args.out, ictus_report::probes::terminal)
}
