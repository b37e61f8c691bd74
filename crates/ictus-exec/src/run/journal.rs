//! What happened during a run, in order, and the shortfalls met: written from the
//! start to the gathering of the report.

use crate::report::{RunWarning, WarningId};

/// What happened during the run, in order, and the shortfalls met.
#[derive(Default)]
pub(super) struct Journal {
    pub(super) events: Vec<String>,
    pub(super) warnings: Vec<RunWarning>,
}

impl Journal {
    /// `message` as an event of frame `frame`, and as a warning with its advice.
    pub(super) fn warn(&mut self, frame: u64, id: WarningId, message: String, advice: String) {
        self.events.push(format!("frame {frame}: {message}"));
        self.warnings.push(RunWarning {
            id,
            message,
            advice: Some(advice),
        });
    }
}
