//! The load a probe put on the CPUs it measured by itself (a probe's `--cpu-load`,
//! recorded as `cpu_load: true` in its parameters): the report sets it beside the
//! loads ictus started around a probe (`environment.loads`). A fact of the record, so
//! it lives with the records rather than in each report.

use crate::load::LoadKind;
use crate::record::RunRecord;

/// The load `record`'s probe put on its own CPUs, if any.
pub fn own_load(record: &RunRecord) -> Option<LoadKind> {
    record
        .parameters
        .get("cpu_load")
        .and_then(serde_json::Value::as_bool)
        .filter(|&loaded| loaded)
        .map(|_| LoadKind::Cpu)
}
