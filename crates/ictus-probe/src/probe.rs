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
use crate::registry::ProbeId;

/// A probe, ready to run: its parameters.
pub trait Probe: std::fmt::Debug + Send + Sync {
    /// Which probe it is; its name is what records and the command line say
    /// (`timer`, ...).
    fn name(&self) -> ProbeId;
    /// Runs it: `argv` goes into the record's provenance; `progress` counts its work
    /// and stops it early.
    fn run(&self, argv: Vec<String>, progress: &Progress) -> Result<RunRecord, ProbeError>;
}

// Generated from the registry: each probe's folder names its parameters
// (`ProbeParams`), its error (`ProbeFailure`) and its run (`run_probe`), so a new
// probe adds no line here.
macro_rules! define_probes {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        /// Why a probe failed: its own error, kept whole.
        #[derive(Debug, Error)]
        pub enum ProbeError {
            $(
                #[doc = concat!("The `", $name, "` probe's.")]
                #[error(transparent)]
                $variant(#[from] crate::$module::ProbeFailure),
            )*
        }

        $(
            impl Probe for crate::$module::ProbeParams {
                fn name(&self) -> ProbeId {
                    ProbeId::$variant
                }
                fn run(
                    &self,
                    argv: Vec<String>,
                    progress: &Progress,
                ) -> Result<RunRecord, ProbeError> {
                    Ok(crate::$module::run_probe(self, argv, progress)?)
                }
            }
        )*
    };
}

crate::for_each_probe!(define_probes);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jitter;

    #[test]
    fn a_probe_with_bad_parameters_gives_its_own_error_back() {
        let bad = jitter::JitterParams {
            runs: 0,
            ..jitter::JitterParams::default()
        };
        let sut: &dyn Probe = &bad;
        assert_eq!(sut.name(), ProbeId::Jitter);
        let err = sut.run(Vec::new(), &Progress::new()).unwrap_err();
        assert!(matches!(err, ProbeError::Jitter(_)), "{err:?}");
    }
}
