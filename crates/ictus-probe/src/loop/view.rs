//! The `loop` probe's measurement: one trial per frequency tried.

use serde::{Deserialize, Serialize};

use crate::view::Kind;

/// A trial of the loop at one frequency (`trial`): its latency is the step
/// completion (deadline to the end of the output phase).
pub enum Trial {}

impl Kind for Trial {
    const NAMES: &'static [&'static str] = &["trial"];
    type Labels = TrialLabels;
    type Metrics = TrialMetrics;
}

/// What a trial ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialLabels {
    /// The loop's frequency.
    pub frequency_hz: f64,
    /// Its period.
    pub period_ns: u64,
    /// Threads sharing a step.
    pub threads: usize,
    /// Modules of the model.
    pub modules: usize,
    /// Bytes exchanged per rendezvous.
    pub exchange_bytes: usize,
    /// Steps tried.
    pub steps: u64,
}

/// How a trial went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialMetrics {
    /// Steps that missed their deadline: late, or skipped.
    pub misses: f64,
    /// Steps that ended after their period.
    pub late_steps: f64,
    /// Releases skipped because an earlier step ran past them.
    pub skipped_releases: f64,
    /// Longest run of consecutive misses.
    pub longest_miss_run: f64,
    /// The hybrid wait's margin.
    pub hybrid_margin_ns: f64,
    /// The longest step (deadline to end of output).
    pub worst_completion_ns: Option<f64>,
    /// The least slack (period minus completion) of the steps that made it.
    pub min_slack_ns: Option<f64>,
    /// 99th percentile release lateness.
    pub release_p99_ns: Option<f64>,
    /// Longest release lateness.
    pub release_max_ns: Option<f64>,
}

impl TrialMetrics {
    /// Whether every step of the trial made its deadline.
    pub fn held(&self) -> bool {
        self.misses == 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn a_trial_reads_back_with_the_keys_the_report_knows() {
        let sut = Point::<Trial>::new(
            TrialLabels {
                frequency_hz: 10_000.0,
                period_ns: 100_000,
                threads: 2,
                modules: 101,
                exchange_bytes: 512,
                steps: 1000,
            },
            TrialMetrics {
                misses: 0.0,
                late_steps: 0.0,
                skipped_releases: 0.0,
                longest_miss_run: 0.0,
                hybrid_margin_ns: 20_000.0,
                worst_completion_ns: Some(40_000.0),
                min_slack_ns: Some(60_000.0),
                release_p99_ns: Some(3_000.0),
                release_max_ns: Some(5_000.0),
            },
        );
        let m = round_trip(&sut, "trial");
        assert!(sut.metrics.held());
        assert_eq!(
            keys(&m),
            (
                vec![
                    "exchange_bytes",
                    "frequency_hz",
                    "modules",
                    "period_ns",
                    "steps",
                    "threads"
                ],
                vec![
                    "hybrid_margin_ns",
                    "late_steps",
                    "longest_miss_run",
                    "min_slack_ns",
                    "misses",
                    "release_max_ns",
                    "release_p99_ns",
                    "skipped_releases",
                    "worst_completion_ns"
                ]
            )
        );
    }
}
