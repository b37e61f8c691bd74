//! `ictus probe irq` on the command line: its options, their parameters, and the
//! work a progress bar counts. The tracer takes no scheduling options, so it runs
//! under no loads.

use std::time::Duration;

use ictus_core::Nanos;

use super::{IrqError, IrqParams};
use crate::cli::{
    ArgsError, OutputArgs, ProbeCommand, RunFn, SchedArgs, UsageError, cpus, interval, pm_qos,
    positive_duration,
};

/// Interrupt latency apart from thread latency, where the kernel has timerlat.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CPUs whose timer IRQs are measured: a list like 0-3, or "all".
    #[arg(short = 'a', long, default_value = "all")]
    pub cpus: String,
    /// Period of the tracer's timer.
    #[arg(short, long, default_value = "1ms", value_parser = interval)]
    pub interval: Duration,
    /// How long to trace.
    #[arg(short = 'D', long, default_value = "10s", value_parser = positive_duration)]
    pub duration: Duration,
    /// The CPU latency QoS held for the run: a bound in us (0, the default) or off.
    #[arg(long, value_name = "US|off", default_value = "0", value_parser = pm_qos)]
    pub pm_qos: ictus_os::pm_qos::PmQos,
    #[command(flatten)]
    out: OutputArgs,
}

impl ProbeCommand for Args {
    type Params = IrqParams;
    type Error = IrqError;

    fn params(&self) -> Result<IrqParams, ArgsError<IrqError>> {
        let (shortest, longest) = (Duration::from_micros(100), Duration::from_secs(1));
        if !(shortest..=longest).contains(&self.interval) {
            return Err(UsageError::new(format!(
                "--interval {}: the timerlat tracer's period is 100us to 1s",
                humantime::format_duration(self.interval)
            ))
            .into());
        }
        if self.duration < self.interval {
            return Err(UsageError::new(format!(
                "--duration {}: shorter than one --interval ({})",
                humantime::format_duration(self.duration),
                humantime::format_duration(self.interval)
            ))
            .into());
        }
        let params = IrqParams {
            cpus: cpus("--cpus", &self.cpus)?,
            period: Nanos::from(self.interval),
            duration: Nanos::from(self.duration),
            pm_qos: self.pm_qos,
        };
        super::validate(&params).map_err(ArgsError::Refused)?;
        Ok(params)
    }

    fn refused_flag(error: &IrqError) -> Option<&'static str> {
        match error {
            IrqError::NoCpu => Some("--cpus"),
            _ => None,
        }
    }

    fn options(&self) -> (Option<&SchedArgs>, &OutputArgs) {
        (None, &self.out)
    }

    const RUN: RunFn<Self::Params, Self::Error> = super::run;

    fn work(params: &IrqParams) -> (Duration, &'static str) {
        let expected = if super::unavailable_reason().is_some() {
            Duration::ZERO
        } else {
            Duration::from(params.duration)
        };
        (expected, "ms")
    }
}
