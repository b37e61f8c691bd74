//! The shield of a survey's shielded configuration (seed 000's principle): a survey
//! applies its own shield, apart from `ictus shield`'s, with a journal named after
//! the survey's process (its pid and start time), so a survey never takes another's
//! journal for one that a killed survey left; and the reset of the shields whose
//! survey is gone.
//!
//! ```no_run
//! use ictus_core::CpuSet;
//! use ictus_shield::survey::{self, SurveyShield};
//! // Before applying a shield of its own: finish what killed surveys left.
//! survey::reset_stale(&survey::dir(), |journal, outcome| {
//!     eprintln!("reset {}: {} value(s) restored", journal.display(), outcome.restored);
//! })?;
//! let shield = SurveyShield { journal: survey::of_this_process(), throttle_off: false };
//! let said = shield.apply(&CpuSet::from_cpus([1]), &CpuSet::from_cpus([0]), None);
//! let said = shield.reset();
//! # Ok::<(), survey::StaleReset>(())
//! ```

use std::path::{Path, PathBuf};

use ictus_core::CpuSet;
use thiserror::Error;

use crate::{DEFAULT_JOURNAL, ResetOutcome, ShieldError, WatchdogLaunch};
use ictus_os::process::ProcessId;

/// The start of a survey journal's file name; the pid, the start time and
/// `.journal` follow.
const PREFIX: &str = "survey-shield-";

/// A shield that a stopped survey left could not be reset.
#[derive(Debug, Error)]
#[error("resetting the shield a stopped survey left ({})", journal.display())]
pub struct StaleReset {
    /// The stopped survey's journal (kept, for `ictus shield reset --journal`).
    pub journal: PathBuf,
    /// Why the reset failed.
    #[source]
    pub source: ShieldError,
}

/// The folder of survey journals: beside the default journal (`/run/ictus`).
pub fn dir() -> PathBuf {
    Path::new(DEFAULT_JOURNAL)
        .parent()
        .map_or_else(|| PathBuf::from("/run/ictus"), Path::to_path_buf)
}

/// The journal of this process's survey shield, in [`dir`].
pub fn of_this_process() -> PathBuf {
    let me = ProcessId::current().unwrap_or(ProcessId {
        pid: std::process::id(),
        start_time: 0,
    });
    dir().join(journal_name(&me))
}

/// The file name of the journal of the survey in process `owner`.
fn journal_name(owner: &ProcessId) -> String {
    format!("{PREFIX}{}.journal", owner.key())
}

/// The survey process that a journal's file name names; `None` for any other file.
pub fn owner(journal: &Path) -> Option<ProcessId> {
    journal
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(PREFIX)?.strip_suffix(".journal"))
        .and_then(ProcessId::parse_key)
}

/// Resets the shields of the surveys in `dir` whose process is gone, telling
/// `on_reset` each one reset; stops at the first that cannot be. A folder that cannot
/// be read holds none.
pub fn reset_stale(
    dir: &Path,
    mut on_reset: impl FnMut(&Path, &ResetOutcome),
) -> Result<(), StaleReset> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        let Some(survey) = owner(&path) else {
            continue;
        };
        if survey.is_alive() {
            continue;
        }
        let outcome = crate::reset(&path).map_err(|source| StaleReset {
            journal: path.clone(),
            source,
        })?;
        on_reset(&path, &outcome);
    }
    Ok(())
}

/// A survey's shield, with its own journal: `ictus shield reset --journal FILE`
/// finishes what a killed survey could not. What it says is for the survey's
/// manifest (`Ok`: what was done; `Err`: why not).
#[derive(Debug)]
pub struct SurveyShield {
    /// Its journal ([`of_this_process`]).
    pub journal: PathBuf,
    /// Whether the RT throttle goes off (behind a watchdog) while it is applied.
    pub throttle_off: bool,
}

impl SurveyShield {
    /// Applies the shield: `rt` shielded, `system` for everything else; with
    /// `watchdog` (launched first) the RT throttle goes off. This process's own
    /// threads go back to the root group, so the survey places its probes on the RT
    /// CPUs and its loads on the system CPU by affinity.
    pub fn apply(
        &self,
        rt: &CpuSet,
        system: &CpuSet,
        watchdog: Option<WatchdogLaunch>,
    ) -> Result<String, String> {
        let request = crate::Request {
            rt_cpus: rt.clone(),
            irq_for: Vec::new(),
            rt_throttle_off: watchdog.is_some(),
            watchdog,
            // A step's record must say which power-management settings were in force;
            // the shield's resume latency QoS would keep the RT CPUs out of idle states
            // without the record saying so, so the survey's shield leaves it alone.
            resume_qos: false,
        };
        let applied = crate::apply(&request, &self.journal).map_err(|e| e.to_string())?;
        // The shield put this process in the NRT group too; back in the root group,
        // its probes place their threads on the RT CPUs and its loads on the system
        // CPU by affinity, while every other task stays shielded off the RT CPUs.
        let admitted = crate::partition::applied(&self.journal)
            .map_err(|e| e.to_string())
            .and_then(|p| p.ok_or_else(|| "the shield's journal has no partition".to_string()))
            .and_then(|p| {
                let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| e.to_string())?;
                for t in tasks.filter_map(|e| e.ok()) {
                    if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) {
                        p.admit(tid, false).map_err(|e| e.to_string())?;
                    }
                }
                Ok(())
            });
        if let Err(e) = admitted {
            let _ = crate::reset(&self.journal);
            return Err(format!(
                "placing the survey's threads: {e} (the shield was reset)"
            ));
        }
        Ok(format!(
            "RT CPUs {}, system CPU {}{}{} (journal {})",
            rt,
            system,
            if applied.refused.is_empty() {
                String::new()
            } else {
                format!(", {} step(s) refused by the kernel", applied.refused.len())
            },
            if applied.watchdog.is_some() {
                ", RT throttle off behind a watchdog"
            } else {
                ""
            },
            self.journal.display()
        ))
    }

    /// Resets the shield, and says what the watchdog did when the RT throttle was
    /// off (its log goes with the shield).
    pub fn reset(&self) -> Result<String, String> {
        let o = crate::reset(&self.journal).map_err(|e| e.to_string())?;
        // The watchdog's log (when the throttle was off): its demotions are said here,
        // and the file goes with the shield.
        let log = crate::watchdog::log_path(&self.journal);
        let demotions = crate::watchdog::read_log(&log)
            .iter()
            .filter(|e| matches!(e, crate::watchdog::LogEvent::Demotion(_)))
            .count();
        let _ = std::fs::remove_file(&log);
        let watched = if self.throttle_off {
            format!(", the RT throttle back on; the watchdog demoted {demotions} thread(s)")
        } else {
            String::new()
        };
        if o.problems.is_empty() {
            Ok(format!(
                "{} value(s) restored, {} gone with their task{watched}",
                o.restored, o.vanished
            ))
        } else {
            Err(format!(
                "{} (journal kept: `ictus shield reset --journal {}`)",
                o.problems.join("; "),
                self.journal.display()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_name_reads_back_as_its_owner() {
        let survey = ProcessId {
            pid: 4242,
            start_time: 987_654,
        };
        let sut = dir().join(journal_name(&survey));
        assert_eq!(owner(&sut), Some(survey));
        assert_eq!(
            sut.file_name().unwrap().to_str(),
            Some("survey-shield-4242-987654.journal")
        );
    }

    #[test]
    fn other_files_have_no_owner() {
        for name in [
            "shield.journal",
            "survey-shield-x-1.journal",
            "survey-shield-1-2.log",
            "survey-shield-12.journal",
        ] {
            assert_eq!(owner(Path::new(name)), None, "{name}");
        }
    }

    #[test]
    fn this_process_journal_is_named_after_it() {
        let sut = of_this_process();
        let survey = owner(&sut).unwrap();
        assert_eq!(survey.pid, std::process::id());
        assert!(survey.is_alive());
    }

    #[test]
    fn a_journal_whose_survey_lives_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mine = of_this_process().file_name().unwrap().to_owned();
        std::fs::write(dir.path().join(&mine), b"").unwrap();
        let mut reset = Vec::new();
        reset_stale(dir.path(), |p, _| reset.push(p.to_path_buf())).unwrap();
        assert!(reset.is_empty());
        assert!(dir.path().join(mine).exists());
    }
}
