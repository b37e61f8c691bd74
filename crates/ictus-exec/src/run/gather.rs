//! A run's end: the outcomes gathered (threads, programs, other hosts) and the
//! report made of them.

use std::collections::BTreeMap;
use std::time::Duration;

use ictus_core::Nanos;

use super::coordinate::Coordinator;
use super::coordinate::Made;
use super::error::RunError;
use crate::report::{HostReport, RunReport, RunWarning, SubsystemReport, ThreadOutcome, WarningId};
use crate::schedule::{Process, SubsystemSpec};
use crate::state::StateId;

impl Coordinator<'_, '_> {
    /// The report of the run: every subsystem's figures (its own outcome, or what its
    /// slot shows), the frames lost and why, the stress check, the states.
    pub(super) fn gather(mut self) -> Result<(RunReport, Made), RunError> {
        let mut outcomes = self.outcomes();
        let hosts = self.other_hosts_outcomes(&mut outcomes);
        let staged = self.staged;
        let schedule = staged.schedule;
        let mut subsystems = Vec::new();
        for (k, spec) in schedule.subsystems.iter().enumerate() {
            // A node reports its own subsystems; the main coordinator all of them.
            if staged.here != 0 && spec.host != staged.here {
                continue;
            }
            let outcome = outcomes.remove(&k);
            subsystems.push(self.subsystem_report(k, spec, outcome));
        }
        let stop_frame = self.stop_frame;
        // The stress check reads the counters in this host's table: the main one's
        // holds every host's cells.
        let stress = schedule
            .stress
            .as_ref()
            .filter(|_| staged.here == 0)
            .map(|s| {
                crate::stress::check(
                    &staged.cells,
                    &s.counters,
                    self.log.frames_in(StateId::RUN, stop_frame),
                )
            });
        let mut state_frames = BTreeMap::new();
        for (i, name) in staged.states.names().iter().enumerate() {
            let frames = self.log.frames_in(StateId(i as u8), stop_frame);
            if frames > 0 {
                state_frames.insert(name.clone(), frames);
            }
        }
        self.made.cells = Some(crate::cell::CellValues::read(&staged.cells));
        self.forward_to_tap();
        let report = RunReport {
            name: schedule.name.clone(),
            schedule: schedule.path.clone(),
            tick_ns: self.clock.tick.as_u64(),
            major_frame: self.clock.major,
            wait: schedule.wait.mode(Nanos::ZERO).name().to_string(),
            frames: stop_frame,
            state_frames,
            transitions: self
                .log
                .changes()
                .iter()
                .map(|&(f, s)| (f, staged.states.name(s).to_string()))
                .collect(),
            subsystems,
            stress: stress.transpose().map_err(RunError::Storage)?,
            warnings: dedup(self.journal.warnings),
            events: self.journal.events,
            complete: self.complete,
            stopped_by: self.overrun_stop.map(|k| staged.names[k].clone()),
            tap: None,
            hosts,
            pm_qos: None,
            explanation: None,
        };
        Ok((report, self.made))
    }

    /// This host's outcomes: each thread's, joined, and each program's, read from
    /// its file (then removed).
    fn outcomes(&mut self) -> BTreeMap<usize, ThreadOutcome> {
        let names = &self.staged.names;
        let mut outcomes: BTreeMap<usize, ThreadOutcome> = BTreeMap::new();
        for (k, h) in std::mem::take(&mut self.handles) {
            match h.join() {
                Ok(Ok(finish)) => {
                    outcomes.insert(k, finish.outcome);
                    let name = names[k].clone();
                    if let Some(f) = finish.first_error {
                        self.made.errors.insert(name.clone(), f);
                    }
                    if let Some(s) = finish.subsystem {
                        self.made.subsystems.insert(name, s);
                    }
                }
                Ok(Err(e)) => self.journal.events.push(format!("{}: {e}", names[k])),
                Err(_) if self.thread_failed[k] => {}
                Err(_) => self
                    .journal
                    .events
                    .push(format!("{}: its thread panicked", names[k])),
            }
        }
        for c in self.children.iter_mut() {
            if let Ok(text) = std::fs::read_to_string(&c.outcome_file)
                && let Ok(o) = serde_json::from_str::<ThreadOutcome>(&text)
            {
                outcomes.insert(c.slot, o);
            }
            let _ = std::fs::remove_file(&c.outcome_file);
        }
        outcomes
    }

    /// Across hosts: the main coordinator collects the others' outcomes; a node
    /// hands its own over. Returns each host's link figures (this host's first).
    fn other_hosts_outcomes(
        &mut self,
        outcomes: &mut BTreeMap<usize, ThreadOutcome>,
    ) -> Vec<HostReport> {
        let staged = self.staged;
        let mut hosts = Vec::new();
        if let Some(l) = self.link.as_mut() {
            let (theirs, reports) = l.finish(outcomes, Duration::from_secs(10));
            hosts.push(l.report());
            hosts.extend(reports);
            for (k, o) in theirs {
                if staged
                    .schedule
                    .subsystems
                    .get(k)
                    .is_some_and(|s| s.host != staged.here)
                {
                    outcomes.insert(k, o);
                }
            }
        }
        hosts
    }

    /// Subsystem `k`'s figures for the whole run; the frames it lost are reported
    /// (and make the run incomplete).
    fn subsystem_report(
        &mut self,
        k: usize,
        spec: &SubsystemSpec,
        outcome: Option<ThreadOutcome>,
    ) -> SubsystemReport {
        let view = self.staged.control.slot(k).view();
        let (frames_run, overruns, streak) = match &outcome {
            Some(o) => (o.frames_run, o.overruns, o.longest_overrun_streak),
            None => (view.frames_run, view.overruns, view.longest_streak),
        };
        for w in outcome.iter().flat_map(|o| o.warnings.iter()) {
            self.journal.warnings.push(w.clone());
        }
        let scheduled = spec.releases_before(self.stop_frame);
        // A subsystem that finished was due until the frame it finished in.
        let due = match outcome.as_ref() {
            Some(o) if o.end == "finished" => {
                spec.releases_before(o.last_frame.map_or(0, |f| f + 1).min(self.stop_frame))
            }
            _ => scheduled,
        };
        let crashed = self
            .children
            .iter()
            .find(|c| c.slot == k)
            .and_then(|c| c.exited.clone().filter(|_| outcome.is_none()));
        let mut lost = due.saturating_sub(frames_run + overruns);
        if let Some(from) = self.lost_from.or(self.silent_from.get(&spec.host).copied()) {
            // The main coordinator fell silent (on a node: what ran from there ran
            // without its beat, in the safe state), or this subsystem's host did (on
            // the main one: the run went on without it from there).
            lost = lost.max(due.saturating_sub(spec.releases_before(from)));
        }
        if lost > 0 {
            // Frames a subsystem was due and neither ran nor overran: it
            // crashed, left (a child that lost its coordinator), or never
            // started. The figures cover only part of the run.
            self.complete = false;
            let why = self.why_lost(spec, crashed.as_deref(), outcome.as_ref());
            let msg = format!(
                "{}: {lost} of its {due} frames were lost ({why})",
                spec.name
            );
            self.journal.events.push(msg.clone());
            self.journal.warnings.push(RunWarning {
                id: WarningId::FramesLost,
                message: msg,
                advice: Some(
                    "the figures of this run cover only part of it; `ictus run` exits \
                     with code 3 when frames were lost"
                        .into(),
                ),
            });
        }
        if let Some(o) = &outcome {
            self.errors(spec, o);
        }
        SubsystemReport {
            name: spec.name.clone(),
            process: match &spec.process {
                Process::InProcess => "in-process".to_string(),
                Process::Own => "own".to_string(),
                Process::Program { program, .. } => program.clone(),
            },
            start: spec.start,
            period: spec.period,
            cpu: spec.cpu,
            releases_due: due,
            frames_run,
            overruns,
            longest_overrun_streak: streak,
            lost,
            finished_early: scheduled - due,
            errors: outcome.as_ref().map_or(0, |o| o.errors),
            crashed,
            outcome,
        }
    }

    /// A subsystem's errors: each `run` error counted, the first one's frame and
    /// message, and its `shutdown` error. Any error makes the run incomplete.
    fn errors(&mut self, spec: &SubsystemSpec, o: &ThreadOutcome) {
        let mut report = |message: String| {
            self.complete = false;
            self.journal.events.push(message.clone());
            self.journal.warnings.push(RunWarning {
                id: WarningId::SubsystemError,
                message,
                advice: Some(format!(
                    "the subsystem's own error; on_error = \"{}\" decided what followed \
                     (stop, continue or stop-run); `ictus run` exits with code 3",
                    spec.on_error.name()
                )),
            });
        };
        if let Some((frame, message)) = &o.first_error {
            report(format!(
                "{}: its run returned {} error(s), the first at frame {frame}: {message}",
                spec.name, o.errors
            ));
        }
        if let Some(message) = &o.shutdown_error {
            report(format!(
                "{}: its shutdown returned an error: {message}",
                spec.name
            ));
        }
    }

    /// Why a subsystem lost frames: its process ended (`crashed`), its host left or
    /// sent no report, or its loop ended early (`outcome`'s end).
    fn why_lost(
        &self,
        spec: &SubsystemSpec,
        crashed: Option<&str>,
        outcome: Option<&ThreadOutcome>,
    ) -> String {
        let hosts = &self.staged.schedule.hosts;
        if let Some(from) = self.silent_from.get(&spec.host) {
            return format!(
                "its host {} fell silent at frame {from}: the run went on without it",
                hosts[spec.host].name
            );
        }
        if let Some(from) = self.lost_from {
            return format!(
                "the main coordinator {} fell silent: from frame {from} it ran in the safe \
                 state {} or not at all",
                hosts[0].name, self.staged.schedule.safe_state
            );
        }
        match (crashed, outcome.map(|o| o.end.as_str())) {
            (Some(c), _) => format!("its process {c}"),
            (None, None) if self.hosts_left.contains(&spec.host) => {
                format!("its host {} left the run", hosts[spec.host].name)
            }
            (None, None) if spec.host != self.staged.here => {
                format!("its host {} sent no report", hosts[spec.host].name)
            }
            (None, Some("coordinator-gone")) => {
                "it left the run: it found the coordinator gone".to_string()
            }
            (None, Some("group-broken")) => {
                "a member of its synchronous group left the run".to_string()
            }
            (None, Some("failed")) => format!(
                "its run returned an error and its on_error is \"{}\"",
                spec.on_error.name()
            ),
            (None, Some(end)) => format!("its loop ended early ({end})"),
            (None, None) => "it sent no report".to_string(),
        }
    }
}

/// The warnings without repeats (the same id and message), in order.
fn dedup(warnings: Vec<RunWarning>) -> Vec<RunWarning> {
    let mut out: Vec<RunWarning> = Vec::new();
    for w in warnings {
        if !out.iter().any(|o| o.id == w.id && o.message == w.message) {
            out.push(w);
        }
    }
    out
}
