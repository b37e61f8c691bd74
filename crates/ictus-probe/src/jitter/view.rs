//! The `jitter` probe's measurements: per thread, Tmin and the spread of the run
//! durations, and the slow runs with the time they happened.

use serde::{Deserialize, Serialize};

use crate::view::Kind;

/// One thread's runs (`runs`): its latency is the run duration.
pub enum Runs {}

impl Kind for Runs {
    const NAMES: &'static [&'static str] = &["runs"];
    type Labels = RunsLabels;
    type Metrics = RunsMetrics;
}

/// Which thread ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunsLabels {
    /// Index of the thread.
    pub thread: usize,
    /// The CPU it was pinned to; written as `null` when it floated.
    pub cpu: Option<usize>,
}

/// The spread of one thread's runs (seed 002 Table 2's columns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunsMetrics {
    /// The shortest run.
    pub tmin_ns: f64,
    /// The longest run minus Tmin.
    pub max_minus_tmin_ns: f64,
    /// That as a share of Tmin, in percent.
    pub variation_percent: f64,
    /// Runs longer than twice Tmin.
    pub slow_runs: f64,
}

/// A run longer than twice Tmin (`slow-run`).
pub enum SlowRun {}

impl Kind for SlowRun {
    const NAMES: &'static [&'static str] = &["slow-run"];
    type Labels = SlowRunLabels;
    type Metrics = SlowRunMetrics;
}

/// Which run, and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowRunLabels {
    /// Index of the thread.
    pub thread: usize,
    /// Index of the run in the thread.
    pub run: u64,
    /// When it started, from the start of the measurement.
    pub at_ns: u64,
}

/// How long it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowRunMetrics {
    /// Its duration.
    pub duration_ns: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn runs_read_back_and_a_floating_thread_writes_a_null_cpu() {
        let sut = Point::<Runs>::new(
            RunsLabels {
                thread: 0,
                cpu: None,
            },
            RunsMetrics {
                tmin_ns: 1e6,
                max_minus_tmin_ns: 2e5,
                variation_percent: 20.0,
                slow_runs: 0.0,
            },
        );
        let m = round_trip(&sut, "runs");
        assert_eq!(m.labels["cpu"], serde_json::Value::Null);
        assert_eq!(
            keys(&m),
            (
                vec!["cpu", "thread"],
                vec![
                    "max_minus_tmin_ns",
                    "slow_runs",
                    "tmin_ns",
                    "variation_percent"
                ]
            )
        );
    }

    #[test]
    fn a_slow_run_reads_back() {
        let sut = Point::<SlowRun>::new(
            SlowRunLabels {
                thread: 1,
                run: 198,
                at_ns: 235_613_058,
            },
            SlowRunMetrics { duration_ns: 3e6 },
        );
        let m = round_trip(&sut, "slow-run");
        assert_eq!(
            keys(&m),
            (vec!["at_ns", "run", "thread"], vec!["duration_ns"])
        );
    }
}
