//! The timing core of the executive: the release cadence of one subsystem on the
//! frame grid, and the frame loop every subsystem thread runs (a member of a
//! synchronous [`Group`] meets the others in it).
//!
//! Each subsystem waits for its own absolute deadlines `epoch + frame * tick` (the
//! beat is the clock; see [`crate::control`]). After a frame it moves to the first
//! release whose deadline has not passed: every release that passed while it was
//! still running (or before it woke) is an **overrun**, counted and skipped, and the
//! next release stays on the grid (never drift, never reset to now).
//!
//! The loop is written against a [`Beat`] (a clock and a way to wait), so tests drive
//! it with a [`MockBeat`] over [`ictus_core::MockClock`], deterministically:
//!
//! ```
//! use ictus_core::{MockClock, Nanos};
//! use ictus_exec::executive::Cadence;
//! let ms = Nanos::from_millis;
//! // Start frame 1, period 3, 1 ms ticks, epoch at 10 ms.
//! let mut sut = Cadence::new(ms(10), ms(1), 1, 3);
//! assert_eq!((sut.frame(), sut.deadline()), (1, ms(11)));
//! // Frame 1 ran until 17.5 ms: the releases of frames 4 and 7 passed meanwhile.
//! assert_eq!(sut.complete(ms(17) + Nanos::new(500_000), u64::MAX), 2);
//! assert_eq!((sut.frame(), sut.deadline()), (10, ms(20)));
//! ```

use ictus_core::{Clock, LatencyHistogram, MissCounter, MockClock, Nanos};
use ictus_explain::{MissEvent, MissKind, MissReporter};

use crate::tap::ring::FrameRecord;
use ictus_os::wait::{self, WaitMode};

use crate::control::{Control, Counters, Slot, Status, pack_window};
use crate::group::Group;
use crate::state::{Ack, StateId};
use crate::subsystem::{BoxError, Driven, Flow, Frame, OnError, Ports};

/// A clock and a way to wait for an absolute deadline on it.
pub trait Beat: Sync {
    /// The current reading.
    fn now(&self) -> Nanos;
    /// Waits until `deadline`; returns the first reading after the wait.
    fn wait_until(&self, deadline: Nanos) -> Nanos;
}

/// The real beat: `CLOCK_MONOTONIC` and one of the three ways to wait.
#[derive(Clone, Copy, Debug)]
pub struct OsBeat {
    /// How to wait.
    pub mode: WaitMode,
}

impl Beat for OsBeat {
    #[inline]
    fn now(&self) -> Nanos {
        ictus_os::clock::monotonic_now()
    }
    #[inline]
    fn wait_until(&self, deadline: Nanos) -> Nanos {
        wait::wait_until(deadline, self.mode)
    }
}

/// A beat over a [`MockClock`]: waiting moves the clock to the deadline (when it is
/// earlier), so a test advances time only by what its subsystems "execute".
#[derive(Clone, Copy, Debug)]
pub struct MockBeat<'a>(pub &'a MockClock);

impl Beat for MockBeat<'_> {
    fn now(&self) -> Nanos {
        self.0.now()
    }
    fn wait_until(&self, deadline: Nanos) -> Nanos {
        if self.0.now() < deadline {
            self.0.set(deadline);
        }
        self.0.now()
    }
}

/// The releases of one subsystem: frames `start + k * period`, due at
/// `epoch + frame * tick`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cadence {
    epoch: Nanos,
    tick: Nanos,
    start: u64,
    period: u64,
    index: u64,
}

impl Cadence {
    /// The cadence of a subsystem with `start` frame and `period` (in frames, at
    /// least one) on a grid of `tick` from `epoch`, at its first release.
    pub fn new(epoch: Nanos, tick: Nanos, start: u64, period: u64) -> Cadence {
        Cadence {
            epoch,
            tick,
            start,
            period: period.max(1),
            index: 0,
        }
    }

    /// The frame of the next release.
    #[inline]
    pub fn frame(&self) -> u64 {
        self.start + self.index * self.period
    }

    /// When the next release is due.
    #[inline]
    pub fn deadline(&self) -> Nanos {
        self.epoch + self.tick * self.frame()
    }

    /// The frame in progress at time `t` (the last whose deadline is at or before `t`),
    /// `None` before the epoch.
    #[inline]
    pub fn frame_at(&self, t: Nanos) -> Option<u64> {
        t.checked_sub(self.epoch)
            .map(|d| d.as_u64() / self.tick.as_u64())
    }

    /// Closes the current release, which finished at `end`, and moves to the first
    /// release whose deadline lies after `end`. Returns the releases skipped on the
    /// way (the overruns), counting only those before `stop_frame`.
    #[inline]
    pub fn complete(&mut self, end: Nanos, stop_frame: u64) -> u64 {
        let next = match self.frame_at(end) {
            // First release frame strictly after frame `f`.
            Some(f) if f >= self.start => (f - self.start) / self.period + 1,
            _ => 0,
        }
        .max(self.index + 1);
        let skipped = self.count_before_stop(self.index + 1, next, stop_frame);
        self.index = next;
        skipped
    }

    /// Moves to the release of `frame` (a release frame at or after the current
    /// one), as a synchronous group does to follow its latest member. Returns the
    /// releases skipped, counting only those before `stop_frame`.
    pub fn skip_to(&mut self, frame: u64, stop_frame: u64) -> u64 {
        let target = frame
            .saturating_sub(self.start)
            .div_ceil(self.period)
            .max(self.index);
        let skipped = self.count_before_stop(self.index, target, stop_frame);
        self.index = target;
        skipped
    }

    /// Releases with an index in `from..to` and a frame before `stop_frame`.
    fn count_before_stop(&self, from: u64, to: u64, stop_frame: u64) -> u64 {
        let before_stop = if stop_frame <= self.start {
            0
        } else {
            (stop_frame - self.start).div_ceil(self.period)
        };
        to.min(before_stop).saturating_sub(from.min(before_stop))
    }
}

/// What a subsystem thread measures, kept without allocation on the hot path.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Release jitter: wake-up time minus deadline.
    pub jitter: LatencyHistogram,
    /// Execution time: wake-up to the end of the output copy.
    pub exec: LatencyHistogram,
    /// Overruns: total and the longest run of consecutive ones.
    pub overruns: MissCounter,
    /// The live counters.
    pub counters: Counters,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            jitter: LatencyHistogram::new(),
            exec: LatencyHistogram::new(),
            overruns: MissCounter::default(),
            counters: Counters {
                last_frame: u64::MAX,
                ..Counters::default()
            },
        }
    }
}

/// Why a frame loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopEnd {
    /// Its next release was at or after the stop frame.
    Stopped,
    /// The run was abandoned before the epoch.
    Aborted,
    /// The coordinator's heartbeat stopped and its process is gone (a child whose
    /// `ictus run` died).
    CoordinatorGone,
    /// A member of its synchronous group left before the stop frame (it panicked,
    /// finished or failed).
    GroupBroken,
    /// The subsystem said it had finished ([`Flow::Finished`]).
    Finished,
    /// Its `run` returned an error and its `on_error` is `stop`.
    Failed,
}

impl LoopEnd {
    /// Its name in records: `stopped`, `aborted`, `coordinator-gone`, `group-broken`.
    pub fn name(self) -> &'static str {
        match self {
            LoopEnd::Stopped => "stopped",
            LoopEnd::Aborted => "aborted",
            LoopEnd::CoordinatorGone => "coordinator-gone",
            LoopEnd::GroupBroken => "group-broken",
            LoopEnd::Finished => "finished",
            LoopEnd::Failed => "failed",
        }
    }
}

/// Everything one subsystem thread needs to run its frames.
pub struct Runner<'a> {
    /// The shared control block.
    pub control: &'a Control,
    /// This subsystem's slot in it.
    pub slot: usize,
    /// Its start frame.
    pub start: u64,
    /// Its period in frames.
    pub period: u64,
    /// Its synchronous group, if any.
    pub group: Option<&'a Group>,
    /// How long the coordinator's heartbeat may be silent before a child leaves
    /// (`None`: never checked, as for threads of the coordinator's own process).
    pub heartbeat_timeout: Option<Nanos>,
    /// Whether the subsystem acknowledges states itself (else each frame does).
    pub explicit_ack: bool,
    /// What to do when its `run` returns an error.
    pub on_error: OnError,
}

/// An error a subsystem's `run` returned, with the frame it returned it in.
#[derive(Debug)]
pub struct Fault {
    /// The frame.
    pub frame: u64,
    /// The subsystem's own error.
    pub error: BoxError,
}

impl Fault {
    /// The error and its sources, `: `-separated, as reports print it.
    pub fn message(&self) -> String {
        error_chain(self.error.as_ref())
    }
}

/// `error` and its sources, `: `-separated.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out += ": ";
        out += &e.to_string();
        source = e.source();
    }
    out
}

/// How a frame loop ended, and the first error the subsystem returned (every
/// error is counted in [`Counters::errors`]).
#[derive(Debug)]
pub struct Ending {
    /// Why it ended.
    pub end: LoopEnd,
    /// The first error, kept whole.
    pub first_error: Option<Fault>,
}

impl Runner<'_> {
    /// Runs frames until the stop frame (or until the subsystem finishes, or fails
    /// with `on_error = "stop"`), on `beat`, once the epoch is published (call
    /// [`wait_for_epoch`] first). Allocates nothing, unless the subsystem returns an
    /// error (its box, and the first one kept).
    pub fn run(
        &self,
        beat: &dyn Beat,
        subsystem: &mut dyn Driven,
        ports: &mut Ports,
        stats: &mut Stats,
    ) -> Ending {
        self.run_explained(beat, subsystem, ports, stats, None)
    }

    /// [`run`](Self::run), reporting each miss to `reporter` (one push into its
    /// ring per miss, no allocation; see [`ictus_explain`]): a release woken
    /// [`MissReporter::threshold`] or more late, or followed by skipped releases,
    /// and an **overrun**, a frame whose own execution (wake-up to outputs
    /// published) ran past its period (the budget), with its execution time.
    pub fn run_explained(
        &self,
        beat: &dyn Beat,
        subsystem: &mut dyn Driven,
        ports: &mut Ports,
        stats: &mut Stats,
        reporter: Option<&mut MissReporter>,
    ) -> Ending {
        let mut first_error = None;
        let end = self.frames(beat, subsystem, ports, stats, &mut first_error, reporter);
        Ending { end, first_error }
    }

    fn frames(
        &self,
        beat: &dyn Beat,
        subsystem: &mut dyn Driven,
        ports: &mut Ports,
        stats: &mut Stats,
        first_error: &mut Option<Fault>,
        mut reporter: Option<&mut MissReporter>,
    ) -> LoopEnd {
        let Some(epoch) = self.control.epoch() else {
            return LoopEnd::Aborted;
        };
        let tick = self.control.tick();
        let slot = self.control.slot(self.slot);
        let period = tick * self.period;
        let window = crate::live::window_frames(tick);
        let mut cadence = Cadence::new(epoch, tick, self.start, self.period);
        let mut last_ack: Option<StateId> = None;
        slot.set_status(Status::Running);
        loop {
            // A group decides to stop together, after agreeing on the frame.
            if self.group.is_none() && cadence.frame() >= self.control.stop_frame() {
                return LoopEnd::Stopped;
            }
            let deadline = cadence.deadline();
            let woke = beat.wait_until(deadline);
            if self.coordinator_gone(woke) {
                return LoopEnd::CoordinatorGone;
            }
            stats.jitter.record(woke.saturating_sub(deadline));
            let agreed = match self.agree(beat, &mut cadence, ports, stats) {
                Ok(agreed) => agreed,
                Err(end) => return end,
            };
            let frame = agreed.frame;
            if frame >= self.control.stop_frame() {
                return LoopEnd::Stopped;
            }
            let state = self.control.state().at(frame);
            ports.begin_frame(frame);
            ports.pull();
            let mut ack = None;
            let flow = {
                let mut f = Frame {
                    number: frame,
                    state,
                    time: deadline.saturating_sub(epoch),
                    period,
                    ports,
                    ack: &mut ack,
                    group: self.group,
                };
                subsystem.run_frame(&mut f)
            };
            ports.push();
            let failed = flow.is_err();
            let ends = self.follow(flow, frame, stats, first_error);
            self.acknowledge(&slot, ack, state, frame, &mut last_ack);
            let end = beat.now();
            let exec = end.saturating_sub(woke);
            stats.exec.record(exec);
            let skipped = cadence.complete(end, self.control.stop_frame());
            note_overruns(stats, skipped);
            let release = Release {
                frame,
                deadline,
                woke,
                end,
                budget: period,
                missed: agreed.skipped + skipped,
            };
            if ports.is_tapped() {
                self.tap(ports, &release, state, agreed.at, failed);
            }
            if let Some(r) = reporter.as_deref_mut() {
                release.report(r);
            }
            count_frame(&mut stats.counters, &release, window, ports);
            slot.publish(&stats.counters);
            if let Some(end) = ends {
                return end;
            }
        }
    }

    /// Whether the coordinator is gone, on waking at `woke`. A silent heartbeat
    /// alone is not a reason to leave: a coordinator stalled (stopped, starved,
    /// swapped out) keeps its run, and the subsystems keep their beat. Only a
    /// coordinator that no longer exists ends the loop; the probe is one syscall,
    /// made only while it is silent.
    #[inline]
    fn coordinator_gone(&self, woke: Nanos) -> bool {
        if let Some(limit) = self.heartbeat_timeout
            && woke.saturating_sub(self.control.heartbeat()) > limit
            && !coordinator_alive(self.control)
        {
            return true;
        }
        false
    }

    /// The frame to run, agreed with the group (if any): releases the group is past
    /// are skipped (counted as overruns), or the loop ends if the group broke.
    #[inline]
    fn agree(
        &self,
        beat: &dyn Beat,
        cadence: &mut Cadence,
        ports: &Ports,
        stats: &mut Stats,
    ) -> Result<Agreed, LoopEnd> {
        let mut agreed = Agreed {
            frame: cadence.frame(),
            skipped: 0,
            at: None,
        };
        let Some(g) = self.group else {
            return Ok(agreed);
        };
        let frame = g.agree(agreed.frame);
        if ports.is_tapped() {
            agreed.at = Some(beat.now());
        }
        if g.is_broken() {
            return Err(if agreed.frame >= self.control.stop_frame() {
                LoopEnd::Stopped
            } else {
                LoopEnd::GroupBroken
            });
        }
        if frame > agreed.frame {
            let skipped = cadence.skip_to(frame, self.control.stop_frame());
            agreed.skipped = skipped;
            note_overruns(stats, skipped);
            agreed.frame = cadence.frame();
        }
        Ok(agreed)
    }

    /// Acknowledges the state the frame ran in (or the one the subsystem named,
    /// `ack`), when it is not the last acknowledged.
    #[inline]
    fn acknowledge(
        &self,
        slot: &Slot<'_>,
        ack: Option<StateId>,
        state: StateId,
        frame: u64,
        last_ack: &mut Option<StateId>,
    ) {
        let ack = match ack {
            Some(a) => Some(a),
            None if !self.explicit_ack => Some(state),
            None => None,
        };
        if let Some(a) = ack
            && *last_ack != Some(a)
        {
            slot.acknowledge(Ack { state: a, frame });
            *last_ack = Some(a);
        }
    }

    /// Hands the frame's record to the tap.
    #[inline]
    fn tap(
        &self,
        ports: &mut Ports,
        release: &Release,
        state: StateId,
        agreed: Option<Nanos>,
        error: bool,
    ) {
        ports.tap_frame(&FrameRecord {
            slot: self.slot,
            frame: release.frame,
            state: state.0,
            deadline: release.deadline,
            woke: release.woke,
            agreed,
            end: release.end,
            budget: release.budget,
            skipped: release.missed,
            cpu: ictus_os::sched::current_cpu().map(|c| c as u32),
            error,
        });
    }

    /// What the frame's status (or error) means: the loop's end, if it ends here.
    /// A stop of the run is asked through the slot; the coordinator announces it.
    #[inline]
    fn follow(
        &self,
        flow: Result<Flow, BoxError>,
        frame: u64,
        stats: &mut Stats,
        first_error: &mut Option<Fault>,
    ) -> Option<LoopEnd> {
        let slot = self.control.slot(self.slot);
        match flow {
            Ok(Flow::Continue) => None,
            Ok(Flow::Finished) => Some(LoopEnd::Finished),
            Ok(Flow::StopRun) => {
                slot.ask_stop(frame);
                None
            }
            Err(error) => {
                stats.counters.errors += 1;
                if first_error.is_none() {
                    *first_error = Some(Fault { frame, error });
                }
                match self.on_error {
                    OnError::Continue => None,
                    OnError::Stop => Some(LoopEnd::Failed),
                    OnError::StopRun => {
                        slot.ask_stop(frame);
                        None
                    }
                }
            }
        }
    }
}

/// One release as the miss reporter sees it, once its frame has ended.
#[derive(Clone, Copy, Debug)]
struct Release {
    frame: u64,
    deadline: Nanos,
    woke: Nanos,
    end: Nanos,
    /// The subsystem's period: its execution budget.
    budget: Nanos,
    /// Releases skipped (following its group, then after this frame).
    missed: u64,
}

impl Release {
    /// Reports an overrun (its execution past the budget: window from its wake-up
    /// to its end, late by how far its end passed the next release), else skipped
    /// releases (window from its deadline to its end: a late wake-up, or a
    /// preemption while it ran), else a release woken the threshold or more late
    /// (window from its deadline to its wake-up). Nothing otherwise.
    #[inline]
    fn report(self, reporter: &mut MissReporter) {
        let late = self.woke.saturating_sub(self.deadline);
        let exec = self.end.saturating_sub(self.woke);
        let (kind, start, end, lateness) = if exec > self.budget {
            let past = self.end.saturating_sub(self.deadline + self.budget);
            (MissKind::Overrun, self.woke, self.end, past)
        } else if self.missed > 0 {
            (MissKind::Missed, self.deadline, self.end, late)
        } else if late >= reporter.threshold() {
            (MissKind::Late, self.deadline, self.woke, late)
        } else {
            return;
        };
        let overrun = kind == MissKind::Overrun;
        reporter.report(MissEvent {
            kind,
            seq: self.frame,
            start,
            end,
            lateness,
            missed: self.missed,
            exec: if overrun { exec } else { Nanos::ZERO },
            budget: if overrun { self.budget } else { Nanos::ZERO },
        });
    }
}

/// Whether the process that published the control block still exists.
fn coordinator_alive(control: &Control) -> bool {
    control.coordinator().is_alive()
}

fn note_overruns(stats: &mut Stats, skipped: u64) {
    stats.overruns.missed += skipped;
    stats.overruns.longest_run = stats.overruns.longest_run.max(skipped);
    stats.counters.overruns = stats.overruns.missed;
    stats.counters.longest_streak = stats.overruns.longest_run;
}

/// The frame a release runs, once agreed with its group.
#[derive(Clone, Copy)]
struct Agreed {
    frame: u64,
    /// Releases skipped to follow the group: missed before this frame ran.
    skipped: u64,
    /// When the group agreed (only when tapped).
    at: Option<Nanos>,
}

/// Counts a frame run in `c`, with the live page's plot: the largest jitter of
/// each `window` of frames; and the cells' torn reads of `ports`.
#[inline]
fn count_frame(c: &mut Counters, release: &Release, window: u64, ports: &Ports) {
    let exec = release.end.saturating_sub(release.woke);
    c.frames_run += 1;
    c.last_frame = release.frame;
    c.last_exec = exec;
    c.max_exec = c.max_exec.max(exec);
    let late = release.woke.saturating_sub(release.deadline);
    c.max_jitter = c.max_jitter.max(late);
    // The live page's plot: the largest jitter of each window of frames.
    let w = release.frame / window;
    if w != c.window {
        if c.frames_run > 1 {
            c.window_done = pack_window(c.window, c.window_max);
        }
        c.window = w;
        c.window_max = Nanos::ZERO;
    }
    c.window_max = c.window_max.max(late);
    let torn = ports.torn();
    c.torn = torn.count;
    c.last_torn_cell = torn.last_cell.map_or(0, |i| i as u64);
}

/// Waits (sleeping, off the hot path) until the epoch is published or the run is
/// abandoned, or `give_up` says so. Returns whether the epoch came.
pub fn wait_for_epoch(control: &Control, mut give_up: impl FnMut() -> bool) -> bool {
    loop {
        if control.aborted() {
            return false;
        }
        if control.epoch().is_some() {
            return true;
        }
        if give_up() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
}

/// The first frame the coordinator may announce a change for, when it reads `now`:
/// the start of the first major frame at least `lead` after `now`. Announcing for
/// that frame leaves every subsystem time to see the change before the frame begins.
pub fn announce_frame(epoch: Nanos, tick: Nanos, major: u64, now: Nanos, lead: Nanos) -> u64 {
    let at = now.saturating_add(lead);
    let frames = at.saturating_sub(epoch).as_u64().div_ceil(tick.as_u64());
    frames.div_ceil(major.max(1)) * major.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellTable, Cells};
    use crate::state::{self, StateWord};

    fn ms(v: u64) -> Nanos {
        Nanos::from_millis(v)
    }

    fn us(v: u64) -> Nanos {
        Nanos::from_micros(v)
    }

    fn no_ports() -> Ports {
        Ports::new(Cells::in_process(&CellTable::default()))
    }

    /// Runs for `exec(frame)` of mock time, and notes each frame it ran.
    struct Busy<'a, F: Fn(u64) -> Nanos> {
        clock: &'a MockClock,
        exec: F,
        frames: Vec<u64>,
        ack_from: Option<u64>,
    }

    impl<F: Fn(u64) -> Nanos + Send> Driven for Busy<'_, F> {
        fn run_frame(&mut self, frame: &mut Frame) -> Result<Flow, BoxError> {
            self.frames.push(frame.number());
            if let Some(from) = self.ack_from
                && frame.number() >= from
            {
                frame.ack(frame.state());
            }
            self.clock.advance((self.exec)(frame.number()));
            Ok(Flow::Continue)
        }
        fn shut_down(&mut self) -> Result<(), BoxError> {
            Ok(())
        }
    }

    fn busy<F: Fn(u64) -> Nanos>(clock: &MockClock, exec: F) -> Busy<'_, F> {
        Busy {
            clock,
            exec,
            frames: Vec::new(),
            ack_from: None,
        }
    }

    fn runner(control: &Control, start: u64, period: u64) -> Runner<'_> {
        Runner {
            control,
            slot: 0,
            start,
            period,
            group: None,
            heartbeat_timeout: None,
            explicit_ack: false,
            on_error: OnError::Stop,
        }
    }

    /// A block of 1 ms frames that stops at `stop`, switching from OFF to `next` at
    /// frame `from_frame`.
    fn switching(stop: u64, next: StateId, from_frame: u64) -> Control {
        let control = block(ms(1), Nanos::ZERO, stop);
        control.set_state(StateWord {
            previous: StateId::OFF,
            next,
            from_frame,
        });
        control
    }

    fn block(tick: Nanos, epoch: Nanos, stop: u64) -> Control {
        let c = Control::in_process(1, tick.as_u64());
        c.set_stop_frame(stop);
        c.set_epoch(epoch);
        c
    }

    #[test]
    fn an_overrun_skips_the_releases_it_covers_and_keeps_phase() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 30);
        // Frame 6 runs 2.5 ms: the releases of frames 7 and 8 pass while it runs.
        let mut sut = busy(&clock, |f| if f == 6 { us(2_500) } else { us(200) });
        let mut stats = Stats::default();
        let ending =
            runner(&control, 0, 1).run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(ending.end, LoopEnd::Stopped);
        assert!(ending.first_error.is_none());
        let expected: Vec<u64> = (0..=6).chain(9..30).collect();
        assert_eq!(sut.frames, expected);
        assert_eq!(stats.overruns.missed, 2);
        assert_eq!(stats.overruns.longest_run, 2);
        assert_eq!(stats.counters.frames_run + stats.overruns.missed, 30);
        // Frame 9 was released on the grid (19 ms), not "end of frame 6 + period".
        assert_eq!(stats.jitter.max(), Some(Nanos::ZERO));
        assert_eq!(stats.exec.max(), Some(us(2_500)));
        assert_eq!(control.slot(0).view().overruns, 2);
    }

    #[test]
    fn a_frame_that_ends_exactly_on_the_next_release_overruns_it() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(1), 6);
        let mut sut = busy(&clock, |f| if f == 2 { ms(1) } else { us(10) });
        let mut stats = Stats::default();
        runner(&control, 0, 1).run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(sut.frames, [0, 1, 2, 4, 5]);
        assert_eq!(stats.overruns.missed, 1);
    }

    #[test]
    fn overruns_past_the_stop_frame_are_not_counted() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(1), 10);
        // Frame 8 runs 5 ms: releases 9 (before the stop) and 10..12 (after) pass.
        let mut sut = busy(&clock, |f| if f == 8 { ms(5) } else { us(10) });
        let mut stats = Stats::default();
        runner(&control, 0, 1).run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(stats.overruns.missed, 1);
        assert_eq!(stats.counters.frames_run + stats.overruns.missed, 10);
    }

    #[test]
    fn start_frames_and_periods_hold_over_several_major_frames() {
        // Figure 2: A (start 0, period 3), B (period 1), C (start 3, period 6); major 6.
        let majors = 4;
        for (start, period) in [(0, 3), (0, 1), (3, 6)] {
            let clock = MockClock::new(Nanos::ZERO);
            let control = block(ms(5), ms(5), 6 * majors);
            let mut sut = busy(&clock, |_| ms(1));
            let mut stats = Stats::default();
            runner(&control, start, period).run(
                &MockBeat(&clock),
                &mut sut,
                &mut no_ports(),
                &mut stats,
            );
            let expected: Vec<u64> = (start..6 * majors).step_by(period as usize).collect();
            assert_eq!(sut.frames, expected, "start {start} period {period}");
            assert_eq!(stats.overruns.missed, 0);
            let spec = crate::schedule::SubsystemSpec {
                name: "x".into(),
                start,
                period,
                cpu: None,
                class: ictus_class::Class::Normal,
                process: crate::schedule::Process::InProcess,
                builtin: None,
                group: None,
                config: toml::Table::new(),
                on_error: OnError::Stop,
                on_overrun: Default::default(),
                watchdog: None,
                host: 0,
                writes: None,
                location: Default::default(),
            };
            assert_eq!(spec.releases_before(6 * majors), stats.counters.frames_run);
        }
    }

    #[test]
    fn a_long_overrun_of_a_slow_subsystem_skips_whole_periods() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), Nanos::ZERO, 60);
        // Start 2, period 6: releases 2, 8, 14, ... Frame 14 runs 13 ms: 20 and 26 pass.
        let mut sut = busy(&clock, |f| if f == 14 { ms(13) } else { ms(1) });
        let mut stats = Stats::default();
        runner(&control, 2, 6).run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(sut.frames, [2, 8, 14, 32, 38, 44, 50, 56]);
        assert_eq!((stats.overruns.missed, stats.overruns.longest_run), (2, 2));
    }

    /// A beat that wakes late for some deadlines (a preempted thread).
    struct LateBeat<'a> {
        clock: &'a MockClock,
        late: fn(Nanos) -> Nanos,
    }

    impl<'a> LateBeat<'a> {
        /// With 1 ms frames from an epoch of 10 ms: the wake-up for frame 4 (at 14 ms)
        /// 2.3 ms late, every other on time.
        fn frame_4_late(clock: &'a MockClock) -> Self {
            LateBeat {
                clock,
                late: |d| if d == ms(14) { us(2_300) } else { Nanos::ZERO },
            }
        }
    }

    impl Beat for LateBeat<'_> {
        fn now(&self) -> Nanos {
            self.clock.now()
        }
        fn wait_until(&self, deadline: Nanos) -> Nanos {
            let at = deadline + (self.late)(deadline);
            if self.clock.now() < at {
                self.clock.set(at);
            }
            self.clock.now()
        }
    }

    #[test]
    fn a_late_wake_up_is_jitter_and_the_releases_it_passed_are_overruns() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 12);
        // The wake-up for frame 4 comes 2.3 ms late: frames 5 and 6 pass before it ends.
        let beat = LateBeat::frame_4_late(&clock);
        let mut sut = busy(&clock, |_| us(100));
        let mut stats = Stats::default();
        runner(&control, 0, 1).run(&beat, &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(sut.frames, [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]);
        assert_eq!(stats.jitter.max(), Some(us(2_300)));
        assert_eq!(stats.overruns.missed, 2);
    }

    #[test]
    fn acknowledgements_are_tracked_and_a_silent_subsystem_times_out() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = switching(20, StateId::RUN, 10);
        // Explicit acknowledgement, given only from frame 14 on.
        let mut sut = busy(&clock, |_| us(100));
        sut.ack_from = Some(14);
        let mut stats = Stats::default();
        let mut r = runner(&control, 0, 1);
        r.explicit_ack = true;
        // Frame by frame: run up to each frame, then ask who is pending.
        let mut pending_at = Vec::new();
        for stop in 1..=20 {
            let c = block(ms(1), Nanos::ZERO, stop);
            c.set_state(control.state());
            let clock = MockClock::new(Nanos::ZERO);
            let mut sut = busy(&clock, |_| us(100));
            sut.ack_from = Some(14);
            let mut rr = runner(&c, 0, 1);
            rr.explicit_ack = true;
            rr.run(
                &MockBeat(&clock),
                &mut sut,
                &mut no_ports(),
                &mut Stats::default(),
            );
            let p = state::pending(c.state(), stop - 1, [("a", c.slot(0).ack())]);
            pending_at.push(p.first().map(|p| p.frames));
        }
        // Nobody is pending before frame 10; frames 10..13 wait 0..3 frames; acked at 14.
        let expected: Vec<Option<u64>> = (0..20)
            .map(|f| (10..14).contains(&f).then(|| f - 10))
            .collect();
        assert_eq!(pending_at, expected);
        // A timeout of 3 frames is first reached at frame 13.
        let first_timeout = pending_at.iter().position(|p| p.is_some_and(|n| n >= 3));
        assert_eq!(first_timeout, Some(13));
        // The whole run: the last acknowledgement is RUN, made at frame 14.
        r.run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        assert_eq!(
            control.slot(0).ack(),
            Some(state::Ack {
                state: StateId::RUN,
                frame: 14
            })
        );
    }

    #[test]
    fn without_explicit_acknowledgement_a_frame_in_the_new_state_acknowledges_it() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = switching(8, StateId::PAUSE, 6);
        let mut sut = busy(&clock, |_| us(10));
        runner(&control, 0, 2).run(
            &MockBeat(&clock),
            &mut sut,
            &mut no_ports(),
            &mut Stats::default(),
        );
        assert_eq!(
            control.slot(0).ack(),
            Some(state::Ack {
                state: StateId::PAUSE,
                frame: 6
            })
        );
        assert!(state::pending(control.state(), 7, [("a", control.slot(0).ack())]).is_empty());
    }

    #[test]
    fn changes_are_announced_for_a_major_frame_boundary_after_the_lead() {
        // 1 ms ticks, major frame 3, epoch 0: at 10.2 ms with a 20 ms lead, the first
        // major boundary at or after 30.2 ms is frame 33.
        assert_eq!(
            announce_frame(Nanos::ZERO, ms(1), 3, us(10_200), ms(20)),
            33
        );
        assert_eq!(announce_frame(ms(5), ms(1), 1, ms(5), ms(2)), 2);
    }

    #[test]
    fn a_group_agrees_on_the_latest_frame_and_skips_together() {
        let group = Group::new(2);
        let (a, b) = std::thread::scope(|s| {
            let g = &group;
            let a = s.spawn(move || (g.agree(5), g.agree(9)));
            let b = s.spawn(move || (g.agree(7), g.agree(8)));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(a, (7, 9));
        assert_eq!(b, (7, 9));
        let mut sut = Cadence::new(Nanos::ZERO, ms(1), 1, 2);
        // At release 1 (index 0), the group runs frame 5: releases 1 and 3 are skipped.
        assert_eq!(sut.skip_to(5, u64::MAX), 2);
        assert_eq!(sut.frame(), 5);
    }

    /// Returns what `script` says for each frame, 100 us of mock time each.
    struct Scripted<'a, F: Fn(u64) -> Result<Flow, BoxError>> {
        clock: &'a MockClock,
        script: F,
        frames: Vec<u64>,
        shut: bool,
    }

    impl<F: Fn(u64) -> Result<Flow, BoxError> + Send> Driven for Scripted<'_, F> {
        fn run_frame(&mut self, frame: &mut Frame) -> Result<Flow, BoxError> {
            self.frames.push(frame.number());
            self.clock.advance(us(100));
            (self.script)(frame.number())
        }
        fn shut_down(&mut self) -> Result<(), BoxError> {
            self.shut = true;
            Ok(())
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("sensor {0} out of range")]
    struct SensorError(u64);

    /// Runs `script` for frames 0..20 with `on_error`; returns the loop's ending,
    /// the frames run, the counters and the slot's stop ask.
    fn scripted(
        on_error: OnError,
        script: impl Fn(u64) -> Result<Flow, BoxError> + Send,
    ) -> (Ending, Vec<u64>, Counters, Option<u64>) {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 20);
        let mut sut = Scripted {
            clock: &clock,
            script,
            frames: Vec::new(),
            shut: false,
        };
        let mut stats = Stats::default();
        let r = Runner {
            on_error,
            ..runner(&control, 0, 1)
        };
        let ending = r.run(&MockBeat(&clock), &mut sut, &mut no_ports(), &mut stats);
        (
            ending,
            sut.frames,
            stats.counters,
            control.slot(0).view().stop_asked,
        )
    }

    fn fails_at(at: &'static [u64]) -> impl Fn(u64) -> Result<Flow, BoxError> + Send {
        move |f| {
            if at.contains(&f) {
                Err(Box::new(SensorError(f)))
            } else {
                Ok(Flow::Continue)
            }
        }
    }

    #[test]
    fn an_error_with_on_error_stop_ends_the_loop_after_that_frame_and_keeps_the_error() {
        let (ending, frames, c, asked) = scripted(OnError::Stop, fails_at(&[5, 9]));
        assert_eq!(ending.end, LoopEnd::Failed);
        assert_eq!(frames, (0..=5).collect::<Vec<_>>());
        assert_eq!((c.errors, c.frames_run, c.last_frame), (1, 6, 5));
        let first = ending.first_error.expect("the error is kept");
        assert_eq!(first.frame, 5);
        // The subsystem's own error, whole: downcast to its type.
        assert_eq!(
            first.error.downcast_ref::<SensorError>().map(|e| e.0),
            Some(5)
        );
        assert_eq!(first.message(), "sensor 5 out of range");
        assert_eq!(asked, None);
    }

    #[test]
    fn an_error_with_on_error_continue_is_counted_and_the_loop_goes_on() {
        let (ending, frames, c, asked) = scripted(OnError::Continue, fails_at(&[5, 9, 12]));
        assert_eq!(ending.end, LoopEnd::Stopped);
        assert_eq!(frames, (0..20).collect::<Vec<_>>());
        assert_eq!(c.errors, 3);
        assert_eq!(
            ending.first_error.map(|f| f.frame),
            Some(5),
            "the first is kept"
        );
        assert_eq!(asked, None);
    }

    #[test]
    fn an_error_with_on_error_stop_run_asks_the_run_to_stop_and_goes_on_until_it_does() {
        let (ending, frames, c, asked) = scripted(OnError::StopRun, fails_at(&[7, 8]));
        // The coordinator announces the stop; this loop runs on to the stop frame.
        assert_eq!(ending.end, LoopEnd::Stopped);
        assert_eq!(frames.len(), 20);
        assert_eq!(c.errors, 2);
        assert_eq!(asked, Some(7), "the first ask stays");
    }

    #[test]
    fn flow_finished_ends_the_loop_and_flow_stop_run_asks_for_the_stop() {
        let (ending, frames, c, asked) = scripted(OnError::Stop, |f| {
            Ok(if f == 7 {
                Flow::Finished
            } else {
                Flow::Continue
            })
        });
        assert_eq!(ending.end, LoopEnd::Finished);
        assert_eq!(frames, (0..=7).collect::<Vec<_>>());
        assert_eq!((c.errors, c.last_frame), (0, 7));
        assert_eq!(asked, None);

        let (ending, frames, _, asked) = scripted(OnError::Stop, |f| {
            Ok(if f >= 3 {
                Flow::StopRun
            } else {
                Flow::Continue
            })
        });
        assert_eq!(ending.end, LoopEnd::Stopped);
        assert_eq!(frames.len(), 20);
        assert_eq!(asked, Some(3));
    }

    /// Runs `r` under `beat` with the reporter of a real sampler (threshold
    /// `threshold`), and returns the figures and what the sampler explained.
    fn explained(
        r: &Runner<'_>,
        beat: &dyn Beat,
        sut: &mut dyn Driven,
        threshold: Nanos,
    ) -> (Stats, ictus_explain::Explanation) {
        use ictus_explain::{ExplainConfig, Explainer};
        let config = ExplainConfig::new(ictus_os::facts::online_cpus(), threshold);
        let (explainer, mut reporters) =
            Explainer::start(config, &["x".to_string()], Nanos::ZERO).unwrap();
        let mut stats = Stats::default();
        r.run_explained(
            beat,
            sut,
            &mut no_ports(),
            &mut stats,
            reporters.first_mut(),
        );
        (stats, explainer.finish())
    }

    #[test]
    fn an_overrun_is_reported_with_its_execution_time_and_the_releases_it_skipped() {
        use ictus_explain::Cause;
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 30);
        // Frame 6 runs 2.5 ms of a 1 ms budget: the releases of 7 and 8 pass.
        let mut sut = busy(&clock, |f| if f == 6 { us(2_500) } else { us(200) });
        let (stats, e) = explained(&runner(&control, 0, 1), &MockBeat(&clock), &mut sut, ms(1));
        assert_eq!(stats.overruns.missed, 2);
        assert_eq!(e.breakdown.events, 1);
        let ev = &e.events[0];
        assert_eq!(
            (ev.thread.as_str(), ev.kind, ev.seq, ev.missed),
            ("x", MissKind::Overrun, 6, 2)
        );
        // It ended 1.5 ms past the next release (frame 7's, at 17 ms).
        assert_eq!(ev.lateness_ns, us(1_500).as_u64());
        assert!(ev.causes.iter().any(|c| c.cause
            == Cause::Overrun {
                exec_ns: us(2_500).as_u64(),
                budget_ns: ms(1).as_u64(),
            }));
    }

    #[test]
    fn a_late_wake_up_that_skips_releases_is_reported_as_missed_not_as_an_overrun() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 12);
        let beat = LateBeat::frame_4_late(&clock);
        let mut sut = busy(&clock, |_| us(100));
        let (_, e) = explained(&runner(&control, 0, 1), &beat, &mut sut, ms(1));
        let seen: Vec<_> = e
            .events
            .iter()
            .map(|ev| (ev.kind, ev.seq, ev.missed))
            .collect();
        assert_eq!(seen, [(MissKind::Missed, 4, 2)]);
        assert_eq!(e.events[0].lateness_ns, us(2_300).as_u64());
    }

    #[test]
    fn only_releases_at_or_past_the_threshold_are_reported_late() {
        let clock = MockClock::new(Nanos::ZERO);
        let control = block(ms(1), ms(10), 12);
        // Frame 3 wakes 400 us late (the threshold), frame 5 399 us: only 3 is a miss.
        let beat = LateBeat {
            clock: &clock,
            late: |d| match d.as_u64() / 1_000_000 {
                13 => us(400),
                15 => us(399),
                _ => Nanos::ZERO,
            },
        };
        let mut sut = busy(&clock, |_| us(100));
        let (stats, e) = explained(&runner(&control, 0, 1), &beat, &mut sut, us(400));
        assert_eq!(stats.overruns.missed, 0);
        let seen: Vec<_> = e.events.iter().map(|ev| (ev.kind, ev.seq)).collect();
        assert_eq!(seen, [(MissKind::Late, 3)]);
    }
}
