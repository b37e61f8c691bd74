//! What a load is asked for and what it reports: its specs and errors; its kinds and
//! reports are the record's ([`ictus_record::load`]).

use ictus_core::CpuSet;
use ictus_os::facts;
use ictus_os::sched::SchedError;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;
use thiserror::Error;

pub use ictus_record::load::{LoadKind, LoadReport, UnknownLoadKind};

/// One load to run: a kind on a set of CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// What to run.
    pub kind: LoadKind,
    /// Where: one worker per CPU (pairs for [`LoadKind::Net`]).
    pub cpus: CpuSet,
}

/// Why loads could not start.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A load with no CPU.
    #[error("load {kind}: no CPU selected")]
    NoCpu {
        /// The load.
        kind: LoadKind,
    },
    /// A CPU that is not online.
    #[error("load {kind}: CPU {cpu} is not online (online CPUs: {online})")]
    CpuOffline {
        /// The load.
        kind: LoadKind,
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs that are online.
        online: CpuSet,
    },
    /// The disk load's temporary directory could not be created.
    #[error("load disk: creating a temporary directory in {} failed: {source}", base.display())]
    TempDir {
        /// Where it was to be created.
        base: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The net load's loopback sockets could not be set up.
    #[error("load net: {what} failed: {source}")]
    Socket {
        /// The step that failed.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A worker thread could not be created.
    #[error("load {kind}: starting a worker thread for CPU {cpu} failed: {source}")]
    Spawn {
        /// The load.
        kind: LoadKind,
        /// The worker's CPU.
        cpu: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A worker failed while preparing.
    #[error("load {kind}: preparing the worker on CPU {cpu} failed: {source}")]
    Setup {
        /// The load.
        kind: LoadKind,
        /// The worker's CPU.
        cpu: usize,
        /// What failed.
        #[source]
        source: LoadStartError,
    },
}

/// Why a load worker could not prepare, so the load could not start.
#[derive(Debug, Error)]
pub enum LoadStartError {
    /// Pinning to its CPU was refused.
    #[error(transparent)]
    Pin(SchedError),
    /// The worker inherited a real-time policy and could not return to `SCHED_OTHER`.
    #[error("returning to SCHED_OTHER from the inherited real-time policy: {0}")]
    Policy(SchedError),
    /// A buffer could not be allocated.
    #[error("allocating {bytes} bytes failed")]
    Memory {
        /// The size asked for.
        bytes: u64,
    },
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// The step that failed.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The worker panicked before it was ready.
    #[error("the worker panicked")]
    Panicked,
}

/// Checks specs before anything starts: each load has CPUs, and they are online.
pub fn validate(specs: &[LoadSpec]) -> Result<(), LoadError> {
    let online = facts::online_cpus();
    for spec in specs {
        if spec.cpus.is_empty() {
            return Err(LoadError::NoCpu { kind: spec.kind });
        }
        if let Some(&cpu) = spec.cpus.cpus().iter().find(|&&c| !online.contains(c)) {
            return Err(LoadError::CpuOffline {
                kind: spec.kind,
                cpu,
                online,
            });
        }
    }
    Ok(())
}
