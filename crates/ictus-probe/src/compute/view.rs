//! The `compute` probe's measurements: the time per step of the model growing on one
//! thread, then split over threads.

use serde::{Deserialize, Serialize};

use crate::view::Kind;

/// The name of a point of the one-thread sweep over model sizes.
pub const MODEL_SIZE: &str = "model-size";
/// The name of a point of the split over threads.
pub const SPLIT: &str = "split";

/// A point of either sweep (`model-size`, `split`).
pub enum Step {}

impl Kind for Step {
    const NAMES: &'static [&'static str] = &[MODEL_SIZE, SPLIT];
    type Labels = StepLabels;
    type Metrics = StepMetrics;
}

/// Where a compute point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepLabels {
    /// Modules of the model.
    pub modules: usize,
    /// Threads sharing a step.
    pub threads: usize,
    /// Why there is no time reduction, when the reference has no such point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// What a compute point measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMetrics {
    /// Time per step (median).
    pub ns_per_step: f64,
    /// Time per module and step.
    pub ns_per_module_step: f64,
    /// The one-thread time over this time (`split` only).
    pub speedup: Option<f64>,
    /// Steps timed.
    pub steps: f64,
    /// The reference's time over this time, against a reference record.
    pub time_reduction_vs_reference: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn both_sweeps_read_back_with_the_keys_the_report_knows() {
        let mut sut = Point::<Step>::new(
            StepLabels {
                modules: 1001,
                threads: 2,
                reference: None,
            },
            StepMetrics {
                ns_per_step: 5000.0,
                ns_per_module_step: 5.0,
                speedup: Some(1.8),
                steps: 100.0,
                time_reduction_vs_reference: Some(1.2),
            },
        );
        let m = round_trip(&sut, SPLIT);
        assert_eq!(
            keys(&m),
            (
                vec!["modules", "threads"],
                vec![
                    "ns_per_module_step",
                    "ns_per_step",
                    "speedup",
                    "steps",
                    "time_reduction_vs_reference"
                ]
            )
        );
        sut.metrics.speedup = None;
        sut.metrics.time_reduction_vs_reference = None;
        sut.labels.reference = Some("no point of this size in the reference".into());
        let m = round_trip(&sut, MODEL_SIZE);
        assert_eq!(
            keys(&m),
            (
                vec!["modules", "reference", "threads"],
                vec!["ns_per_module_step", "ns_per_step", "steps"]
            )
        );
    }
}
