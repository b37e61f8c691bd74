//! `irq`: interrupt latency, apart from thread latency (seed 001 §3.1, seed 002 §5.1
//! kernel against user latency, seed 004 Table 1).
//!
//! Where the kernel has the `timerlat` tracer, it arms a periodic timer per CPU and
//! reports, for each expiry, how late the timer IRQ ran and how late the woken kernel
//! thread ran: the IRQ latency and the thread latency, separately. ictus runs it for
//! the duration asked, restores every tracing setting it changed, and gives both
//! distributions per CPU. Where the kernel has no `timerlat`, or tracefs cannot be
//! reached, the record says so and why, with no figure: the `timer` probe's wake-up
//! latency is then the user-space upper bound of the two.
//!
//! ```no_run
//! use ictus_probe::{irq::{self, IrqParams}, progress::Progress};
//! let record = irq::run(&IrqParams::default(), vec![], &Progress::new()).unwrap();
//! println!("{}", record.headline.unwrap());
//! ```

#[cfg(feature = "cli")]
pub mod cli;
pub mod view;

use crate::record::WarningId;
use std::collections::BTreeMap;

use ictus_core::{CpuSet, LatencyHistogram, MissCounter, Nanos};
use ictus_os::{facts, tracefs};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::view::{Context, Timerlat, TimerlatLabels};
use crate::progress::Progress;
use crate::record::{LatencyResult, Measurement, RunRecord, Warning};
use crate::session::Session;
use crate::view::{AllOr, Empty, Point};

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Irq;

/// The irq probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IrqParams {
    /// CPUs whose timers are measured.
    pub cpus: CpuSet,
    /// Period of the timerlat timer.
    pub period: Nanos,
    /// How long to trace.
    pub duration: Nanos,
    /// The CPU latency QoS held for the run (0 us by default, as cyclictest).
    #[serde(default)]
    pub pm_qos: ictus_os::pm_qos::PmQos,
}

impl Default for IrqParams {
    /// Every online CPU, 1 ms, 10 s.
    fn default() -> Self {
        IrqParams {
            cpus: facts::online_cpus(),
            period: Nanos::from_millis(1),
            duration: Nanos::from_secs(10),
            pm_qos: Default::default(),
        }
    }
}

/// Parameters that cannot run, or a tracer that failed while set up.
#[derive(Debug, Error)]
pub enum IrqError {
    /// Bad period or duration.
    #[error("the period must be 100 us to 1 s and the duration at least one period")]
    Range,
    /// No CPU.
    #[error("no CPU selected")]
    NoCpu,
    /// The tracer could not be set up (after everything touched was restored).
    #[error("setting up the timerlat tracer failed: {0} (every setting it touched was restored)")]
    Tracer(#[source] std::io::Error),
}

/// Checks the parameters.
pub fn validate(p: &IrqParams) -> Result<(), IrqError> {
    if p.cpus.is_empty() {
        return Err(IrqError::NoCpu);
    }
    if p.period < Nanos::from_micros(100) || p.period > Nanos::from_secs(1) || p.duration < p.period
    {
        return Err(IrqError::Range);
    }
    Ok(())
}

/// Why the kernel's IRQ latency cannot be measured here, if it cannot.
pub fn unavailable_reason() -> Option<String> {
    let built = facts::kernel_config().map(|c| (c.enabled("CONFIG_TIMERLAT_TRACER"), c.source));
    match tracefs::find() {
        None if matches!(built, Some((false, _))) => Some(format!(
            "this kernel is built without the timerlat tracer (CONFIG_TIMERLAT_TRACER is not \
             set in {}), and tracefs is not mounted",
            built.map(|b| b.1).unwrap_or_default()
        )),
        None => Some(
            "tracefs is not mounted or not readable (/sys/kernel/tracing): the kernel's own \
             latency tracers cannot be reached"
                .into(),
        ),
        Some(t) if !t.has_tracer("timerlat") => Some(format!(
            "this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER; its tracers: {})",
            t.tracers().join(" ")
        )),
        Some(_) => None,
    }
}

/// Runs the probe. Without `timerlat` it returns a record that says why, and nothing
/// else; it never makes a figure up.
pub fn run(
    params: &IrqParams,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<RunRecord, IrqError> {
    validate(params)?;
    let mut session = Session::begin(argv, false);
    session.hold_pm_qos(params.pm_qos);
    if let Some(reason) = unavailable_reason() {
        session.warn(Warning {
            id: WarningId::IrqUnavailable,
            message: format!("IRQ latency cannot be measured here: {reason}"),
            advice: Some(
                "Use a kernel built with CONFIG_TIMERLAT_TRACER (most distribution kernels \
                 have it) and run as root with tracefs mounted. Meanwhile `ictus probe timer` \
                 measures the user-space wake-up latency, the upper bound of IRQ plus \
                 scheduling latency."
                    .into(),
            ),
        });
        let mut record = session.finish(PROBE.name(), params, progress);
        record.headline = Some(format!("IRQ latency not measured: {reason}"));
        progress.finish();
        return Ok(record);
    }
    let t = tracefs::find().expect("checked above");
    progress.set_total(params.duration.as_u64() / 1_000_000);
    let trace = {
        let tracing = t
            .start_timerlat(params.period.as_u64() / 1_000, &params.cpus.to_string())
            .map_err(IrqError::Tracer)?;
        let end = ictus_os::clock::monotonic_now() + params.duration;
        while ictus_os::clock::monotonic_now() < end && !progress.stop_requested() {
            std::thread::sleep(std::time::Duration::from_millis(50));
            progress.advance(50);
        }
        tracing.finish().map_err(IrqError::Tracer)?
    };
    let mut hists: BTreeMap<(usize, bool), LatencyHistogram> = BTreeMap::new();
    for s in trace.lines().filter_map(tracefs::parse_timerlat_line) {
        hists
            .entry((s.cpu, s.irq))
            .or_default()
            .record(Nanos::new(s.latency_ns));
    }
    let mut merged_irq = LatencyHistogram::new();
    let mut merged_thread = LatencyHistogram::new();
    let mut measurements = Vec::new();
    for ((cpu, irq), h) in &hists {
        if *irq {
            merged_irq.merge(h);
        } else {
            merged_thread.merge(h);
        }
        let context = if *irq { Context::Irq } else { Context::Thread };
        measurements.push(
            timerlat(AllOr::One(*cpu), context)
                .with_latency(LatencyResult::from_histogram(h, MissCounter::default())),
        );
    }
    let mut record = session.finish(PROBE.name(), params, progress);
    record.headline = Some(match (merged_irq.max(), merged_thread.max()) {
        (Some(i), Some(th)) => format!(
            "timer IRQ latency max {i} (p99 {}), kernel thread latency max {th} (p99 {}), over {} expiries",
            merged_irq
                .percentile(ictus_core::Percentile::P99)
                .unwrap_or_default(),
            merged_thread
                .percentile(ictus_core::Percentile::P99)
                .unwrap_or_default(),
            merged_irq.count()
        ),
        _ => "timerlat ran but recorded no sample (the trace buffer may have been reset)".into(),
    });
    for (context, h) in [
        (Context::Irq, &merged_irq),
        (Context::Thread, &merged_thread),
    ] {
        record.measurements.push(
            timerlat(AllOr::All, context)
                .with_latency(LatencyResult::from_histogram(h, MissCounter::default())),
        );
    }
    record.measurements.splice(0..0, measurements);
    progress.finish();
    Ok(record)
}

/// The `timerlat` measurement of `cpu` in `context`, without its latency.
fn timerlat(cpu: AllOr<usize>, context: Context) -> Measurement {
    Point::<Timerlat>::new(TimerlatLabels { cpu, context }, Empty {}).measurement()
}

// The names the registry's generated code ([`crate::probe`]) knows this probe by.
pub(crate) type ProbeParams = IrqParams;
pub(crate) type ProbeFailure = IrqError;
/// The registry's run of this probe ([`crate::probe::Probe`]).
pub(crate) use self::run as run_probe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_timerlat_the_record_says_why_and_has_no_figure() {
        if unavailable_reason().is_none() {
            return; // this kernel has timerlat: the other path is exercised by hand
        }
        let p = IrqParams {
            duration: Nanos::from_millis(10),
            ..IrqParams::default()
        };
        let sut = run(&p, vec![], &Progress::new()).unwrap();
        assert!(sut.measurements.is_empty());
        assert!(
            sut.headline
                .unwrap()
                .starts_with("IRQ latency not measured: ")
        );
        assert!(
            sut.warnings
                .iter()
                .any(|w| w.id == WarningId::IrqUnavailable)
        );
    }

    #[test]
    fn bad_parameters_are_refused() {
        let p = IrqParams {
            period: Nanos::from_micros(10),
            ..IrqParams::default()
        };
        assert!(matches!(validate(&p), Err(IrqError::Range)));
    }
}
