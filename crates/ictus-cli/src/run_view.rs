//! What `ictus run` and `ictus node` print while they run: the live status line and
//! how the run ended (for the live page). The record's human view is the report's
//! (`ictus_report::probes::terminal`), beside the probes'.

use std::fmt::Write as _;

use ictus_exec::report::RunReport;
use ictus_exec::run::LiveStatus;

/// How a run ended, for the live page.
pub(crate) fn ended(report: &RunReport) -> String {
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    let mut line = format!(
        "the run ended at frame {} ({})",
        report.frames,
        if report.complete {
            "complete"
        } else {
            "stopped early or incomplete"
        }
    );
    if lost > 0 {
        let _ = write!(line, "; {lost} frame(s) lost");
    }
    if let Some(s) = &report.stress {
        let _ = write!(line, "; stress: {} missed frame(s)", s.missed_frames);
    }
    line
}

/// One line: the frame, the state, and per subsystem its frames and overruns.
pub(crate) fn status_line(s: &LiveStatus) -> String {
    let mut line = format!("{} frame {} {}", s.name, s.frame, s.state.to_uppercase());
    for sub in &s.subsystems {
        let _ = write!(
            line,
            " | {} {} ovr {}",
            sub.name, sub.frames_run, sub.overruns
        );
        if sub.status != "running" {
            let _ = write!(line, " ({})", sub.status);
        }
    }
    if !s.pending.is_empty() {
        let names: Vec<String> = s.pending.iter().map(|(n, f)| format!("{n} {f}f")).collect();
        let _ = write!(line, " | no ack: {}", names.join(", "));
    }
    line
}
