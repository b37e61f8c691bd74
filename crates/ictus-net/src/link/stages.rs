//! Where a cell's time goes, stage by stage ([`LinkStage`]): the forwarder's sending
//! stages and the intake's receiving ones.

use ictus_core::{LatencyHistogram, Nanos};
use ictus_exec::report::{Distribution, LinkStage, StageFigure};

/// The delays of each [`LinkStage`] on one host, in the stages' order.
pub(super) struct Stages([LatencyHistogram; LinkStage::ALL.len()]);

impl Stages {
    pub(super) fn new() -> Stages {
        Stages(std::array::from_fn(|_| LatencyHistogram::new()))
    }

    fn at(stage: LinkStage) -> usize {
        LinkStage::ALL
            .iter()
            .position(|s| *s == stage)
            .unwrap_or_default()
    }

    pub(super) fn record(&mut self, stage: LinkStage, delay: Nanos) {
        self.0[Self::at(stage)].record(delay);
    }

    /// Takes the forwarder's sending stages (it keeps its own while it runs, off
    /// the lock the cell subscriber takes).
    pub(super) fn merge_sending(&mut self, sending: Stages) {
        for (stage, h) in LinkStage::ALL.into_iter().zip(sending.0) {
            if stage.on_sender() {
                self.0[Self::at(stage)] = h;
            }
        }
    }

    /// The stages with delays, in order.
    pub(super) fn figures(&self) -> Vec<StageFigure> {
        LinkStage::ALL
            .into_iter()
            .zip(&self.0)
            .filter(|(_, h)| h.count() > 0)
            .map(|(stage, h)| StageFigure {
                stage,
                delay: Distribution::of(h),
            })
            .collect()
    }
}
