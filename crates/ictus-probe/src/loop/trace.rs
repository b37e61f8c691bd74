//! `ictus probe loop --trace FILE.json`: each step's phases on a timeline, one
//! track per loop thread (and so per CPU), in the Chrome/Perfetto trace-event
//! format ([`ictus_capture::timeline`]).
//!
//! The measuring threads never allocate or write for it: each stamps its phases
//! into a buffer of `Marks` allocated before its hot loop, sized by the room
//! left under the trace's cap (steps past it are counted, not stamped); the
//! trial's marks are written once its threads have ended. On a thread's track a
//! step is a complete event (the leader's from the release deadline, a
//! follower's from its arrival at the first rendezvous, to the end of its work)
//! holding one complete event per phase: `release` (deadline to wake-up),
//! `input`, `rendezvous 1`, `forces`, `rendezvous 2`, `integrate`, `output`
//! (a follower has no release, input or output). A missed step (completed after
//! its period, or releases skipped) is an instant event on the leader's track.
//! With `--find-max` each trial is a group of tracks of its own (pid = the
//! trial, from 1; a thread's tid is 10,000 times the trial plus 1 plus the
//! thread: unique in the file, as Perfetto's importer needs).
//!
//! The stamps are four more clock reads per step and thread (a few tens of
//! nanoseconds on a vDSO clock): the loop is measured with them.

use std::path::PathBuf;

use ictus_capture::timeline::{NoArgs, Scope, TraceSpec, TraceWriter, Track};
use ictus_core::Nanos;
use ictus_core::warning::Warning;
use ictus_os::clock::monotonic_now;
use ictus_os::fs::OutputError;
use serde::Serialize;

use super::params::{LoopParams, khz, period_of};
use crate::record::ThreadConfig;
use ictus_core::{LatencyHistogram, MissCounter};

/// The marks of a step: the release deadline (a follower: its arrival), then the
/// end of each phase.
pub(super) const MARKS: usize = 8;

/// The phase between mark `i` and mark `i + 1`.
const PHASES: [&str; MARKS - 1] = [
    "release",
    "input",
    "rendezvous 1",
    "forces",
    "rendezvous 2",
    "integrate",
    "output",
];

/// The least bytes a complete event takes in the file (about 100 in practice):
/// a trial's buffers hold the steps that the room left under the cap could take
/// at this size, so the cap, not the buffers, is what leaves steps out.
const EVENT_BYTES: u64 = 85;

/// The phases a thread's step has: all on the leader; on a follower, the
/// rendezvous, forces and integration.
fn phases_of(thread: usize) -> u64 {
    if thread == 0 { PHASES.len() as u64 } else { 4 }
}

/// One step's marks on one thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct StepMarks {
    /// The step (the leader's release number).
    pub(super) step: u64,
    /// Releases skipped before it (the leader's).
    pub(super) missed: u64,
    /// See [`MARKS`].
    pub(super) at: [Nanos; MARKS],
}

/// One thread's marks, in a buffer allocated before its hot loop: pushing never
/// allocates; past its capacity, steps are counted.
#[derive(Debug, Default)]
pub(super) struct Marks {
    steps: Vec<StepMarks>,
    left_out: u64,
}

impl Marks {
    /// A buffer for `steps` steps (0: not traced).
    pub(super) fn with_capacity(steps: usize) -> Marks {
        Marks {
            steps: Vec::with_capacity(steps),
            left_out: 0,
        }
    }

    /// Whether this thread stamps its steps.
    pub(super) fn on(&self) -> bool {
        self.steps.capacity() > 0
    }

    /// Keeps a step's marks, or counts it when the buffer is full.
    #[inline]
    pub(super) fn push(&mut self, marks: StepMarks) {
        if self.steps.len() < self.steps.capacity() {
            self.steps.push(marks);
        } else {
            self.left_out += 1;
        }
    }
}

/// Where a measuring thread's hot loop begins (`true`) and ends: this crate's
/// tests count the allocations made between (none are allowed, traced or not).
#[inline]
pub(super) fn hot_loop(on: bool) {
    #[cfg(test)]
    ictus_core::alloc_count::watch(on);
    #[cfg(not(test))]
    let _ = on;
}

/// The tid of thread `me`'s track in trial `pid`: unique in the file and never 0
/// (Perfetto's importer knows a thread by its tid alone, and tid 0 is its idle
/// thread).
pub(super) fn tid(pid: u32, me: usize) -> u32 {
    pid * 10_000 + 1 + me as u32
}

/// The file's `metadata.run`.
#[derive(Serialize)]
struct RunMeta {
    tool: &'static str,
    version: &'static str,
    probe: &'static str,
    threads: usize,
    modules: usize,
    exchange_bytes: usize,
}

#[derive(Serialize)]
struct Step {
    step: u64,
}

#[derive(Serialize)]
struct Miss {
    step: u64,
    completion_ns: u64,
    period_ns: u64,
    skipped: u64,
}

/// The trace of one run of the probe: its trials as they end.
pub(super) struct Timeline {
    writer: TraceWriter,
    path: PathBuf,
    search: bool,
    trials: u32,
}

impl Timeline {
    /// Starts the file; its 0 is now (the probe's start: calibration comes
    /// before the first step).
    pub(super) fn create(spec: &TraceSpec, params: &LoopParams) -> Result<Timeline, OutputError> {
        let meta = RunMeta {
            tool: "ictus",
            version: env!("CARGO_PKG_VERSION"),
            probe: super::params::PROBE.name(),
            threads: params.threads,
            modules: params.modules,
            exchange_bytes: params.exchange_bytes,
        };
        let writer = TraceWriter::create(&spec.path, spec.cap_bytes, monotonic_now(), &meta)?;
        Ok(Timeline {
            writer,
            path: spec.path.clone(),
            search: params.find_max.is_some(),
            trials: 0,
        })
    }

    /// How many steps each of `threads` threads may stamp in the next trial.
    pub(super) fn steps_room(&self, threads: usize) -> usize {
        let events: u64 = (0..threads.max(1)).map(|me| 1 + phases_of(me)).sum();
        let steps = self.writer.room() / (EVENT_BYTES * events);
        usize::try_from(steps).unwrap_or(usize::MAX)
    }

    /// Writes trial `t`'s marks (then frees them) on the tracks of its threads,
    /// pinned to `cpus`.
    pub(super) fn add(&mut self, t: &mut Trial, cpus: &[usize]) -> Result<(), OutputError> {
        self.trials += 1;
        let marks = std::mem::take(&mut t.marks);
        self.write(t, &marks, cpus)
            .map_err(|source| OutputError::Io {
                path: self.path.clone(),
                source,
            })
    }

    fn write(&mut self, t: &Trial, marks: &[Marks], cpus: &[usize]) -> std::io::Result<()> {
        let pid = self.trials;
        let w = &mut self.writer;
        let name = if self.search {
            format!("trial {pid}: loop at {}", khz(t.frequency_hz))
        } else {
            format!("loop at {}", khz(t.frequency_hz))
        };
        w.process_name(pid, &name)?;
        let period = period_of(t.frequency_hz);
        let track = |me: usize| Track {
            pid,
            tid: tid(pid, me),
        };
        for me in 0..marks.len() {
            let cpu = cpus.get(me).copied().unwrap_or(me);
            let who = if me == 0 { "leader" } else { "follower" };
            w.thread_name(track(me), &format!("{who} {me}, CPU {cpu}"))?;
            w.thread_sort_index(track(me), me as i64)?;
        }
        // Step by step across the threads, so that a cap cuts every track at
        // about the same time.
        let longest = marks.iter().map(|m| m.steps.len()).max().unwrap_or(0);
        for j in 0..longest {
            for (me, m) in marks.iter().enumerate() {
                let Some(s) = m.steps.get(j) else { continue };
                let (start, end) = (s.at[0], s.at[MARKS - 1]);
                let track = track(me);
                w.complete(track, "step", "loop", start, end, &Step { step: s.step })?;
                for (i, phase) in PHASES.iter().enumerate() {
                    if s.at[i + 1] > s.at[i] {
                        w.complete(track, phase, "loop", s.at[i], s.at[i + 1], &NoArgs {})?;
                    }
                }
                let completion = end.saturating_sub(start);
                if me == 0 && (completion > period || s.missed > 0) {
                    let miss = Miss {
                        step: s.step,
                        completion_ns: completion.as_u64(),
                        period_ns: period.as_u64(),
                        skipped: s.missed,
                    };
                    w.instant(track, "miss", "loop", end, Scope::Thread, &miss)?;
                }
            }
        }
        // A step not stamped is its step and phases left out.
        for (me, m) in marks.iter().enumerate() {
            w.leave_out(m.left_out * (1 + phases_of(me)));
        }
        Ok(())
    }

    /// Ends the file; a capped trace's warning for the record.
    pub(super) fn finish(self) -> Result<Option<Warning>, OutputError> {
        let summary = self.writer.finish()?;
        Ok(summary.warning(&self.path))
    }
}

/// One trial's outcome.
pub(super) struct Trial {
    pub(super) frequency_hz: f64,
    pub(super) steps: u64,
    /// Deadline to end of step, serviced steps.
    pub(super) completion: LatencyHistogram,
    /// Period minus completion, steps that made it.
    pub(super) slack: LatencyHistogram,
    /// Deadline to leader wake-up.
    pub(super) release: LatencyHistogram,
    /// Steps completed after their period.
    pub(super) late: u64,
    /// Releases skipped.
    pub(super) skipped: MissCounter,
    /// Longest run of consecutive missed steps (late or skipped).
    pub(super) longest_run: u64,
    pub(super) margin: Nanos,
    pub(super) configs: Vec<ThreadConfig>,
    pub(super) warnings: Vec<Warning>,
    pub(super) stopped: bool,
    /// Each thread's marks, for the trace (empty when not traced).
    pub(super) marks: Vec<Marks>,
}

impl Trial {
    pub(super) fn misses(&self) -> u64 {
        self.late + self.skipped.missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_counts_the_steps_it_could_not_keep() {
        let mut sut = Marks::with_capacity(2);
        assert!(sut.on());
        for step in 0..5 {
            sut.push(StepMarks {
                step,
                ..StepMarks::default()
            });
        }
        assert_eq!(sut.steps.len(), 2);
        assert_eq!(sut.left_out, 3);
        assert!(!Marks::with_capacity(0).on(), "no room, no stamps");
    }
}
