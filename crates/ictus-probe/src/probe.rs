//! One face for the nine probes: a probe's parameters run into a record. The survey
//! (and any program that plans measurements) holds `Box<dyn Probe>` instead of
//! matching on each kind, and gets the probe's own error back, typed.
//!
//! ```no_run
//! use ictus_probe::probe::Probe;
//! use ictus_probe::progress::Progress;
//! fn measure(probe: &dyn Probe) -> Result<(), ictus_probe::probe::ProbeError> {
//!     let record = probe.run(vec!["my-tool".into()], &Progress::new())?;
//!     println!("{}: {:?}", probe.name(), record.headline);
//!     Ok(())
//! }
//! ```

use thiserror::Error;

use crate::progress::Progress;
use crate::record::RunRecord;
use crate::{compute, irq, jitter, r#loop, memlat, pingpong, rendezvous, throughput, timer};

/// A probe, ready to run: its parameters.
pub trait Probe: std::fmt::Debug + Send + Sync {
    /// Its name, as records and the command line say it (`timer`, `pingpong`, ...).
    fn name(&self) -> &'static str;
    /// Runs it: `argv` goes into the record's provenance; `progress` counts its work
    /// and stops it early.
    fn run(&self, argv: Vec<String>, progress: &Progress) -> Result<RunRecord, ProbeError>;
}

/// Why a probe failed: its own error, kept whole.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The timer probe's.
    #[error(transparent)]
    Timer(#[from] timer::TimerError),
    /// The ping-pong probe's.
    #[error(transparent)]
    Pingpong(#[from] pingpong::PingpongError),
    /// The jitter probe's.
    #[error(transparent)]
    Jitter(#[from] jitter::JitterError),
    /// The memory latency probe's.
    #[error(transparent)]
    Memlat(#[from] memlat::MemlatError),
    /// The compute probe's.
    #[error(transparent)]
    Compute(#[from] compute::ComputeError),
    /// The throughput probe's.
    #[error(transparent)]
    Throughput(#[from] throughput::ThroughputError),
    /// The rendezvous probe's.
    #[error(transparent)]
    Rendezvous(#[from] rendezvous::RendezvousError),
    /// The loop probe's.
    #[error(transparent)]
    Loop(#[from] r#loop::LoopError),
    /// The IRQ probe's.
    #[error(transparent)]
    Irq(#[from] irq::IrqError),
}

macro_rules! probe {
    ($params:ty, $name:literal, |$p:ident, $argv:ident, $progress:ident| $call:expr) => {
        impl Probe for $params {
            fn name(&self) -> &'static str {
                $name
            }
            fn run(
                &self,
                $argv: Vec<String>,
                $progress: &Progress,
            ) -> Result<RunRecord, ProbeError> {
                let $p = self;
                Ok($call?)
            }
        }
    };
}

probe!(timer::TimerParams, "timer", |p, argv, progress| timer::run(
    p, argv, progress
));
probe!(pingpong::PingpongParams, "pingpong", |p, argv, progress| {
    pingpong::run(p, argv, progress)
});
probe!(jitter::JitterParams, "jitter", |p, argv, progress| {
    jitter::run(p, argv, progress)
});
probe!(memlat::MemlatParams, "memlat", |p, argv, progress| {
    memlat::run(p, argv, progress)
});
probe!(compute::ComputeParams, "compute", |p, argv, progress| {
    compute::run(p, argv, None, progress)
});
probe!(
    throughput::ThroughputParams,
    "throughput",
    |p, argv, progress| throughput::run(p, argv, progress)
);
probe!(
    rendezvous::RendezvousParams,
    "rendezvous",
    |p, argv, progress| rendezvous::run(p, argv, progress)
);
probe!(r#loop::LoopParams, "loop", |p, argv, progress| r#loop::run(
    p, argv, progress
));
probe!(irq::IrqParams, "irq", |p, argv, progress| irq::run(
    p, argv, progress
));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_with_bad_parameters_gives_its_own_error_back() {
        let bad = jitter::JitterParams {
            runs: 0,
            ..jitter::JitterParams::default()
        };
        let sut: &dyn Probe = &bad;
        assert_eq!(sut.name(), "jitter");
        let err = sut.run(Vec::new(), &Progress::new()).unwrap_err();
        assert!(matches!(err, ProbeError::Jitter(_)), "{err:?}");
    }
}
