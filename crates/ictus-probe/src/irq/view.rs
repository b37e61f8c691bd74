//! The `irq` probe's measurement: the timerlat latency per CPU and context, and over
//! all CPUs.

use serde::{Deserialize, Serialize};

use crate::view::{AllOr, Empty, Kind};

/// The timerlat latency of one CPU, or all, in one context (`timerlat`): its latency
/// is the distribution.
pub enum Timerlat {}

impl Kind for Timerlat {
    const NAMES: &'static [&'static str] = &["timerlat"];
    type Labels = TimerlatLabels;
    type Metrics = Empty;
}

/// Where the latency was taken.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerlatLabels {
    /// The CPU, or `all`.
    pub cpu: AllOr<usize>,
    /// The timer interrupt, or the kernel thread it wakes.
    pub context: Context,
}

/// Where timerlat takes a latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Context {
    /// The timer interrupt (`irq`).
    Irq,
    /// The kernel thread the interrupt wakes (`thread`).
    Thread,
}

impl Context {
    /// `irq` or `thread`.
    pub fn name(self) -> &'static str {
        match self {
            Context::Irq => "irq",
            Context::Thread => "thread",
        }
    }
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    #[test]
    fn timerlat_reads_back_for_one_cpu_and_for_all() {
        for cpu in [AllOr::One(3), AllOr::All] {
            let sut = Point::<Timerlat>::new(
                TimerlatLabels {
                    cpu,
                    context: Context::Irq,
                },
                Empty {},
            );
            let m = round_trip(&sut, "timerlat");
            assert_eq!(keys(&m), (vec!["context", "cpu"], vec![]));
            assert_eq!(m.labels["context"], "irq");
        }
    }
}
