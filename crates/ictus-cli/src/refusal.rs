//! Which option each probe's refusal of its parameters concerns: one place that maps
//! a library's typed error to the flag a person typed, so every refusal after parsing
//! names its flag as clap's own do (issue "Hardening": exit 2, the flag, the limit).
//!
//! Limits known before parsing (sizes, counts, frequencies) are checked by the
//! options' value parsers in [`crate::args`]; what is left here depends on several
//! options or on the machine (threads against the CPUs given, a margin against the
//! interval, offline CPUs).

use ictus_probe::compute::ComputeError;
use ictus_probe::irq::IrqError;
use ictus_probe::jitter::JitterError;
use ictus_probe::r#loop::LoopError;
use ictus_probe::memlat::MemlatError;
use ictus_probe::pingpong::PingpongError;
use ictus_probe::rendezvous::RendezvousError;
use ictus_probe::setup::PlacementError;
use ictus_probe::throughput::ThroughputError;
use ictus_probe::timer::TimerError;

use crate::Failure;

/// A probe's refusal of its parameters, and the option that set the refused one.
pub(crate) trait Refusal: std::error::Error + Send + Sync + Sized + 'static {
    /// The option whose value is refused, when one option is to blame.
    fn flag(&self) -> Option<&'static str>;
}

/// `error` as bad input (exit 2), led by the option it concerns unless its message
/// already names it.
pub(crate) fn refused<E: Refusal>(error: E) -> Failure {
    match error.flag() {
        Some(flag) if !error.to_string().contains(flag) => {
            Failure::usage(anyhow::Error::new(error).context(flag))
        }
        _ => Failure::usage(error),
    }
}

impl Refusal for TimerError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            TimerError::ZeroInterval => Some("--interval"),
            TimerError::NoCpu | TimerError::Setup(PlacementError::CpuOffline { .. }) => {
                Some("--cpus")
            }
            TimerError::TooShort { .. } => Some("--duration"),
            TimerError::Margin { .. } => Some("--margin"),
            _ => None,
        }
    }
}

impl Refusal for MemlatError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            MemlatError::NoSize | MemlatError::BadSize { .. } => Some("--sizes"),
            MemlatError::NoStride | MemlatError::ZeroStride => Some("--strides"),
            MemlatError::Threads { .. } => Some("--threads"),
            MemlatError::ZeroRepeat => Some("--repeat"),
            MemlatError::ZeroPointTime => Some("--point-time"),
            MemlatError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            _ => None,
        }
    }
}

impl Refusal for LoopError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            LoopError::Threads { .. } => Some("--threads"),
            LoopError::Frequency(_) => Some("--frequency"),
            LoopError::Model { .. } => Some("--modules"),
            LoopError::NoSteps => Some("--steps"),
            LoopError::Unpinned => Some("--no-pin"),
            _ => None,
        }
    }
}

impl Refusal for RendezvousError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            RendezvousError::Threads { .. } => Some("--threads"),
            RendezvousError::ZeroSpacing => Some("--spacing"),
            RendezvousError::Unpinned => Some("--no-pin"),
            _ => None,
        }
    }
}

impl Refusal for ComputeError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            ComputeError::Threads { .. } => Some("--threads"),
            ComputeError::Reference { .. } => Some("--reference"),
            _ => None,
        }
    }
}

impl Refusal for JitterError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            JitterError::TooLarge { .. } => Some("--elements"),
            JitterError::NoCpu => Some("--cpus"),
            JitterError::TooFewThreads(_) => Some("--threads"),
            _ => None,
        }
    }
}

impl Refusal for PingpongError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            PingpongError::NoCpu
            | PingpongError::TooFewCpus { .. }
            | PingpongError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            PingpongError::ZeroLoops => Some("--loops"),
            PingpongError::ZeroDuration => Some("--duration"),
            _ => None,
        }
    }
}

impl Refusal for ThroughputError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            ThroughputError::NoCpu
            | ThroughputError::TooFewCpus { .. }
            | ThroughputError::Setup(PlacementError::CpuOffline { .. }) => Some("--cpus"),
            ThroughputError::Unpinned => Some("--no-pin"),
            ThroughputError::ZeroRoundTrips => Some("--round-trips"),
            _ => None,
        }
    }
}

impl Refusal for IrqError {
    fn flag(&self) -> Option<&'static str> {
        match self {
            IrqError::NoCpu => Some("--cpus"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_core::Nanos;

    #[test]
    fn a_refusal_names_its_flag_once() {
        let sut = refused(TimerError::Margin {
            margin: Nanos::from_millis(2),
            interval: Nanos::from_millis(1),
        });
        let line = crate::one_line(&sut.error);
        assert!(line.starts_with("--margin: "), "{line}");
        assert_eq!(sut.code, 2);
        let sut = refused(MemlatError::Threads {
            threads: 3,
            cpus: 2,
        });
        assert_eq!(crate::one_line(&sut.error).matches("--threads").count(), 1);
    }
}
