//! Loads around something: a probe run under loads, the one place where loads are
//! composed around a measurement (`ictus probe ... --load` and the survey's steps
//! both come here), and loads held for a while on their own (`ictus load`).

use std::fmt;
use std::time::{Duration, Instant};

use super::running::{RunningLoads, start};
use super::spec::{LoadError, LoadReport, LoadSpec};
use crate::progress::Progress;
use crate::record::RunRecord;

/// Why a measurement under loads has no record.
#[derive(Debug)]
pub enum UnderLoadsError<E> {
    /// A load could not start: nothing was measured.
    Start(LoadError),
    /// The measurement failed (the loads were stopped all the same).
    Probe(E),
}

impl<E: fmt::Display> fmt::Display for UnderLoadsError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnderLoadsError::Start(e) => write!(f, "starting the loads: {e}"),
            UnderLoadsError::Probe(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for UnderLoadsError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UnderLoadsError::Start(e) => Some(e),
            UnderLoadsError::Probe(e) => e.source(),
        }
    }
}

/// Runs `probe` under the loads `specs` (none: just runs it, and its record is left
/// as it is), then stops them and puts what each achieved into the record's
/// `environment.loads`. A load that cannot start stops the ones started before it and
/// nothing is measured; the loads stop on every path ([`RunningLoads`]' `Drop` joins
/// them).
///
/// ```
/// use ictus_core::CpuSet;
/// use ictus_probe::load::{LoadKind, LoadSpec, under_loads};
/// use ictus_probe::provenance::Provenance;
/// use ictus_probe::record::{Obtained, RunRecord};
/// let first = ictus_os::facts::online_cpus().cpus()[0];
/// let specs = [LoadSpec { kind: LoadKind::Cpu, cpus: CpuSet::from_cpus([first]) }];
/// let record = under_loads(&specs, || {
///     std::thread::sleep(std::time::Duration::from_millis(20));
///     let p = Provenance::capture(Vec::new());
///     Ok::<_, std::io::Error>(RunRecord::new("example", p, serde_json::json!({}), Obtained::default()))
/// })
/// .unwrap();
/// assert_eq!(record.environment.loads.len(), 1);
/// ```
pub fn under_loads<E>(
    specs: &[LoadSpec],
    probe: impl FnOnce() -> Result<RunRecord, E>,
) -> Result<RunRecord, UnderLoadsError<E>> {
    if specs.is_empty() {
        return probe().map_err(UnderLoadsError::Probe);
    }
    let running = start(specs).map_err(UnderLoadsError::Start)?;
    let result = probe();
    let reports = RunningLoads::stop(running);
    let mut record = result.map_err(UnderLoadsError::Probe)?;
    record.environment.loads = reports;
    Ok(record)
}

/// How often [`hold`] looks at the stop flag and the clock.
const POLL: Duration = Duration::from_millis(10);

/// Runs the loads `specs` for `duration` (`None`: until a stop is requested on
/// `stop`, which also ends a timed run early), then stops them and returns what each
/// achieved (`ictus load`).
///
/// ```
/// use std::time::Duration;
/// use ictus_core::CpuSet;
/// use ictus_probe::load::{LoadKind, LoadSpec, hold};
/// use ictus_probe::progress::Progress;
/// let first = ictus_os::facts::online_cpus().cpus()[0];
/// let specs = [LoadSpec { kind: LoadKind::Cpu, cpus: CpuSet::from_cpus([first]) }];
/// let reports = hold(&specs, Some(Duration::from_millis(30)), &Progress::new())?;
/// assert!(reports[0].metrics["ops_per_s"] > 0.0);
/// # Ok::<(), ictus_probe::load::LoadError>(())
/// ```
pub fn hold(
    specs: &[LoadSpec],
    duration: Option<Duration>,
    stop: &Progress,
) -> Result<Vec<LoadReport>, LoadError> {
    let running = start(specs)?;
    let deadline = duration.map(|d| Instant::now() + d);
    while !stop.stop_requested() {
        let nap = match deadline {
            Some(end) => {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                left.min(POLL)
            }
            None => POLL,
        };
        std::thread::sleep(nap);
    }
    Ok(running.stop())
}
