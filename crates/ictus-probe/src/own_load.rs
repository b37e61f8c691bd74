//! The load a probe put on the CPUs it measured by itself (pingpong's `--cpu-load`),
//! read from its record's parameters: the report sets it beside the loads ictus
//! started around a probe (`environment.loads`). A fact of the record, so it lives
//! with the records rather than in each report.

use crate::load::LoadKind;
use crate::record::RunRecord;
use crate::registry::ProbeId;

/// The load `record`'s probe put on its own CPUs, if any.
pub fn own_load(record: &RunRecord) -> Option<LoadKind> {
    match record.probe.parse().ok()? {
        ProbeId::Pingpong => record
            .parameters_as::<crate::pingpong::ParamsRecord>()
            .is_some_and(|p| p.cpu_load)
            .then_some(LoadKind::Cpu),
        _ => None,
    }
}
