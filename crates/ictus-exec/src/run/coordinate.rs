//! A run's coordinator, from the epoch to the stop: every 2 ms it beats, watches
//! the children, the threads, the cells and the other hosts, serves the commands,
//! puts the state changes in force, checks the acknowledgements, calls the status
//! hook and stops the run. Each concern is one method, called in that order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use ictus_core::Nanos;
use ictus_os::clock::monotonic_now;

use super::children::{ChildProc, describe_exit, kill_all};
use super::clock::Clock;
use super::journal::Journal;
use super::options::RunOptions;
use super::prepare::Staged;
use super::snapshot::{live_now, running};
use super::start::{Handle, Startup};
use crate::cell::Cells;
use crate::control::{Control, Status};
use crate::ctl::Command;
use crate::executive;
use crate::link::{Link, LinkEvent, RemoteSlot};
use crate::live::{LiveMiss, LiveStatus};
use crate::report::{RunWarning, WarningId};
use crate::schedule::{OverrunAction, Schedule};
use crate::state::{self, Pending, StateId, StateLog, States};
use crate::tap::EventRecord;

/// A state command waiting for the one before it to be in force.
type Queued = (StateId, String, mpsc::Sender<String>);

/// The coordinator of a run, from the epoch on.
pub(super) struct Coordinator<'a, 'scope> {
    pub(super) staged: &'a Staged<'a>,
    pub(super) options: &'a mut RunOptions,
    pub(super) link: &'a mut Option<Box<dyn Link>>,
    pub(super) children: &'a mut Vec<ChildProc>,
    pub(super) handles: Vec<(usize, Handle<'scope>)>,
    pub(super) log: StateLog,
    pub(super) journal: Journal,
    pub(super) clock: Clock,
    /// The first frame no subsystem runs (`u64::MAX`: until stopped).
    pub(super) stop_frame: u64,
    /// False once stopped by request before the duration's end.
    pub(super) complete: bool,
    /// Subsystems that panicked (reported once).
    pub(super) thread_failed: Vec<bool>,
    /// Hosts that left the run.
    pub(super) hosts_left: BTreeSet<usize>,
    /// On a node whose main coordinator fell silent: the first frame that counts as
    /// lost (its subsystems in the safe state from there).
    pub(super) lost_from: Option<u64>,
    /// On the main coordinator: the nodes that fell silent, and the frame from which
    /// their subsystems' frames count as lost (also if the node comes back and
    /// hands its outcomes over: the run went on without it).
    pub(super) silent_from: BTreeMap<usize, u64>,
    /// Frames after which a missing acknowledgement is reported.
    ack_timeout: u64,
    /// Subsystems whose missing acknowledgement of the state in force was reported.
    reported: Vec<bool>,
    queue: Vec<Queued>,
    last_status: Nanos,
    stop_requested: bool,
    /// Whether programs still running after the stop were killed.
    killed: bool,
    /// The torn reads and writes of each subsystem already reported.
    torn_seen: Vec<u64>,
    /// What was reported of other hosts' subsystems.
    remote_seen: Vec<RemoteSeen>,
    /// When a node last handed its explained misses to the link.
    explained_at: std::time::Instant,
    /// The run's explained misses so far, for the live view's chart (filled from the
    /// sampler's last misses at each snapshot).
    tally: std::cell::RefCell<crate::live::MissTally>,
    /// What the threads handed back: each subsystem, and its first error.
    pub(super) made: Made,
    /// Subsystems whose `on_overrun` acted (it acts once per run).
    overrun_acted: Vec<bool>,
    /// Per subsystem, the frames its watchdog named, and the last one.
    watchdog_named: Vec<(u64, Option<u64>)>,
    /// The subsystem whose `on_overrun = "stop-run"` asked the run to stop.
    pub(super) overrun_stop: Option<usize>,
    /// The events sent on to the tap's recorder, when the run is recorded or
    /// traced.
    pub(super) tap: Option<TapEvents>,
}

/// The run's events on their way to the tap's recorder: what the journal and
/// the state log hold, sent as they come (each once).
pub(crate) struct TapEvents {
    to: mpsc::Sender<EventRecord>,
    epoch: Nanos,
    events: usize,
    warnings: usize,
    states: usize,
}

impl TapEvents {
    /// Events for the recorder of a run whose epoch is `epoch`.
    pub(crate) fn new(to: mpsc::Sender<EventRecord>, epoch: Nanos) -> TapEvents {
        TapEvents {
            to,
            epoch,
            events: 0,
            warnings: 0,
            states: 0,
        }
    }

    /// Sends what `journal` and `log` gained since the last call. A warning's
    /// event (the journal keeps both) goes once, as the warning: `crash` for a
    /// crash, else `warning`.
    pub(super) fn forward(
        &mut self,
        journal: &Journal,
        log: &StateLog,
        states: &States,
        tick: Nanos,
    ) {
        let now = monotonic_now();
        let send = |frame: Option<u64>, kind: &'static str, message: String| {
            let time = frame.map_or(now, |f| self.epoch + tick * f);
            let _ = self.to.send(EventRecord {
                time,
                frame,
                slot: None,
                kind,
                message,
            });
        };
        for &(frame, state) in log.changes().iter().skip(self.states) {
            send(
                Some(frame),
                "state",
                format!("state {}", states.name(state)),
            );
        }
        self.states = log.changes().len();
        let fresh_warnings = &journal.warnings[self.warnings.min(journal.warnings.len())..];
        for w in fresh_warnings {
            let kind = if w.id == WarningId::Crash {
                "crash"
            } else {
                "warning"
            };
            send(None, kind, w.message.clone());
        }
        for e in journal.events.iter().skip(self.events) {
            if fresh_warnings.iter().any(|w| e.ends_with(&w.message)) {
                continue;
            }
            let frame = e
                .strip_prefix("frame ")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok());
            send(frame, "event", e.clone());
        }
        self.warnings = journal.warnings.len();
        self.events = journal.events.len();
    }
}

/// The stuck frames a subsystem's watchdog names (as a warning and an event) before
/// it names no more: a subsystem stuck again and again would fill the record.
const WATCHDOG_NAMED: u64 = 8;

impl<'a, 'scope> Coordinator<'a, 'scope> {
    /// The coordinator of the run `startup` started, from its epoch on.
    pub(super) fn new(startup: Startup<'a, 'scope>, clock: Clock, stop_frame: u64) -> Self {
        let Startup {
            staged,
            options,
            link,
            children,
            handles,
            log,
            journal,
            ..
        } = startup;
        let n = staged.schedule.subsystems.len();
        let ack_timeout = options
            .ack_timeout_frames
            .unwrap_or_else(|| (1_000_000_000 / clock.tick.as_u64()).max(1));
        Coordinator {
            staged,
            options,
            link,
            children,
            handles,
            log,
            journal,
            clock,
            stop_frame,
            complete: true,
            thread_failed: vec![false; n],
            hosts_left: BTreeSet::new(),
            lost_from: None,
            silent_from: BTreeMap::new(),
            ack_timeout,
            reported: vec![false; n],
            queue: Vec::new(),
            last_status: monotonic_now(),
            stop_requested: false,
            killed: false,
            torn_seen: vec![0; n],
            remote_seen: vec![RemoteSeen::default(); n],
            explained_at: std::time::Instant::now(),
            tally: Default::default(),
            made: Made::default(),
            overrun_acted: vec![false; n],
            watchdog_named: vec![(0, None); n],
            overrun_stop: None,
            tap: None,
        }
    }

    /// Sends the tap's recorder the events and state changes since the last
    /// call, when the run is recorded or traced.
    pub(super) fn forward_to_tap(&mut self) {
        if let Some(t) = &mut self.tap {
            t.forward(
                &self.journal,
                &self.log,
                &self.staged.states,
                self.clock.tick,
            );
        }
    }

    /// Coordinates until every subsystem has stopped; the state commands still
    /// queued are then refused.
    pub(super) fn coordinate(&mut self) {
        loop {
            let now = monotonic_now();
            self.staged.control.beat(now);
            let f = self.clock.frame(now);
            self.children_that_died(f);
            self.threads_that_panicked(f);
            self.torn_cells(f);
            self.other_hosts(f);
            self.commands(f);
            self.transition(f, now);
            self.acknowledgements(f);
            self.overruns(f);
            self.watchdogs(f, now);
            self.status(f, now);
            self.stop_on_request(now);
            self.forward_to_tap();
            if self.stopped(f, now) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for (_, _, reply) in self.queue.drain(..) {
            let _ = reply.send("error the run ended".into());
        }
    }

    /// Children that died: a child that ended before it finished is failed, the
    /// cells it was writing are reopened, and its frames count as lost.
    fn children_that_died(&mut self, f: u64) {
        let staged = self.staged;
        let control = &staged.control;
        for c in self.children.iter_mut() {
            if c.exited.is_none()
                && let Ok(Some(status)) = c.child.try_wait()
            {
                let view = control.slot(c.slot).view();
                let clean = view.status == Status::Finished;
                let what = describe_exit(status);
                c.exited = Some(what.clone());
                if !clean {
                    control.slot(c.slot).set_status(Status::Failed);
                    let recovered = recover_writer(&staged.cells, control, c.slot);
                    let msg = format!(
                        "{}: its process ({}) {what} after frame {}; its frames count as lost{}",
                        staged.names[c.slot],
                        c.program,
                        view.last_frame.map_or("-".to_string(), |v| v.to_string()),
                        if recovered > 0 {
                            format!(", {recovered} cell(s) it was writing reopened")
                        } else {
                            String::new()
                        }
                    );
                    self.journal.warn(
                        f,
                        WarningId::Crash,
                        msg,
                        "the other subsystems kept their beat; rerun with `ictus run` \
                         (no cleanup needed)"
                            .into(),
                    );
                }
            }
        }
    }

    /// Subsystem threads that panicked (their guard marked the slot failed and left
    /// their group, so its other members end too).
    fn threads_that_panicked(&mut self, f: u64) {
        let staged = self.staged;
        for (k, h) in &self.handles {
            if !self.thread_failed[*k]
                && h.is_finished()
                && staged.control.slot(*k).status() == Status::Failed
            {
                self.thread_failed[*k] = true;
                let view = staged.control.slot(*k).view();
                let msg = format!(
                    "{}: its thread panicked after frame {}; its frames count as lost",
                    staged.names[*k],
                    view.last_frame.map_or("-".to_string(), |v| v.to_string()),
                );
                self.journal.warn(
                    f,
                    WarningId::Crash,
                    msg,
                    "the other subsystems kept their beat (a synchronous group ends \
                     with its member); its panic message is on stderr"
                        .into(),
                );
            }
        }
    }

    /// Cells whose writer stopped half way through a write.
    fn torn_cells(&mut self, f: u64) {
        let staged = self.staged;
        for (k, seen) in self.torn_seen.iter_mut().enumerate() {
            let view = staged.control.slot(k).view();
            if view.torn > *seen {
                let (msg, advice) =
                    torn_message(&staged.cells, &staged.control, &staged.names, k, &view);
                *seen = view.torn;
                self.journal.warn(f, WarningId::CellTorn, msg, advice);
            }
        }
    }

    /// The other hosts: their events, then the state and stop the main coordinator
    /// sends (or, on a node, the stop it received).
    fn other_hosts(&mut self, f: u64) {
        let staged = self.staged;
        let Some(l) = self.link.as_mut() else {
            return;
        };
        // A node's explanations of its own misses go to the main host as they come.
        if staged.here != 0
            && let Some(recent) = &staged.recent_misses
            && self.explained_at.elapsed() >= crate::link::EXPLAINED_EVERY
        {
            self.explained_at = std::time::Instant::now();
            let misses: Vec<LiveMiss> = recent.get().iter().map(LiveMiss::from).collect();
            l.explained(&misses);
        }
        let events = l.poll(&staged.control, &staged.local);
        for event in events {
            let event = match event {
                // Once the main coordinator fell silent, a node is out of the run:
                // a late tick changes neither its safe state nor its stop.
                LinkEvent::Control { .. } if staged.here != 0 && self.lost_from.is_some() => {
                    continue;
                }
                LinkEvent::Silent { host, for_ns } if staged.here != 0 && host == 0 => {
                    self.main_silent(f, Nanos::new(for_ns));
                    continue;
                }
                LinkEvent::Silent { host, for_ns } => {
                    if !self.hosts_left.contains(&host) {
                        self.silent_from.entry(host).or_insert(f);
                        self.journal.events.push(format!(
                            "frame {f}: nothing from host {} for {} (the silence bound is {})",
                            staged.schedule.hosts[host].name,
                            Nanos::new(for_ns),
                            staged.schedule.silence_bound()
                        ));
                    }
                    LinkEvent::Left(host)
                }
                other => other,
            };
            let what = LinkTurn {
                schedule: staged.schedule,
                control: &staged.control,
                here: staged.here,
                frame: f,
                lead: self.clock.lead,
                epoch: self.clock.epoch,
            };
            match what.apply(
                event,
                &mut self.log,
                &mut self.hosts_left,
                &mut self.remote_seen,
            ) {
                Turn::Nothing => {}
                Turn::Event(e) => self.journal.events.push(e),
                Turn::Warning(e, w) => {
                    self.journal.events.push(e);
                    self.journal.warnings.push(w);
                }
            }
        }
        if staged.here != 0 {
            // The main coordinator's stop (and one a lost main set).
            self.stop_frame = self.stop_frame.min(staged.control.stop_frame());
        } else if let Some(l) = self.link.as_mut() {
            l.command(staged.control.state(), self.stop_frame);
        }
    }

    /// A node whose main coordinator fell silent for `silent` (no tick): its
    /// subsystems go to the schedule's safe state from the next frame, the frames
    /// from there count as lost, and it stops at the first major frame it can
    /// still announce.
    fn main_silent(&mut self, f: u64, silent: Nanos) {
        let staged = self.staged;
        if !self.hosts_left.insert(0) {
            return;
        }
        let schedule = staged.schedule;
        let from = f + 1;
        let safe = staged
            .states
            .id(&schedule.safe_state)
            .unwrap_or(crate::state::StateId::OFF);
        if staged.control.state().at(from) != safe {
            let word = self.log.command(safe, from);
            staged.control.set_state(word);
        }
        let at = self.clock.announce(monotonic_now()).max(from);
        if at < self.stop_frame {
            self.stop_frame = at;
            staged.control.set_stop_frame(at);
        }
        self.lost_from = Some(self.lost_from.map_or(from, |l| l.min(from)));
        self.complete = false;
        let msg = format!(
            "no tick from the main coordinator (host {}) for {silent}, past the silence \
             bound of {}: from frame {from} this host's subsystems are in state {}, the \
             frames from there count as lost, and it stops at frame {}",
            schedule.hosts[0].name,
            schedule.silence_bound(),
            staged.states.name(safe),
            self.stop_frame
        );
        self.journal.warn(
            f,
            WarningId::HostLost,
            msg,
            "the main host died, stalled or its link was cut; see its output and the \
             link, then start the run again from the main host (`silence` in the \
             schedule sets the bound)"
                .into(),
        );
    }

    /// The live view (`ictus ctl status`, the status hook) at frame `f`.
    fn snapshot(&self, f: u64) -> LiveStatus {
        let s = self.staged;
        let mut extras = running(
            self.link.as_deref(),
            &self.hosts_left,
            &self.journal.events,
            self.clock.epoch,
            self.stop_frame,
            self.stop_requested,
        );
        if let Some(recent) = &s.recent_misses {
            let recent = recent.get();
            let mut tally = self.tally.borrow_mut();
            tally.update(&recent);
            extras.causes = tally.chart();
            extras.misses = recent.iter().map(LiveMiss::from).collect();
        }
        live_now(
            s.schedule, &s.control, &s.states, &s.cells, &self.log, f, extras,
        )
    }

    /// Commands: a state is queued (on the main host only), the status answered,
    /// a stop requested.
    fn commands(&mut self, f: u64) {
        let staged = self.staged;
        while let Ok(cmd) = staged.commands.try_recv() {
            match cmd {
                Command::State(_, reply) if staged.here != 0 => {
                    let _ = reply.send(format!(
                        "error this host follows the main coordinator on host {}: \
                         command the run there",
                        staged.schedule.hosts[0].name
                    ));
                }
                Command::State(name, reply) => match staged.states.id(&name) {
                    Some(id) => self.queue.push((id, name, reply)),
                    None => {
                        let _ = reply.send(format!(
                            "error unknown state '{name}' (states: {})",
                            staged.states.names().join(", ")
                        ));
                    }
                },
                Command::Status(reply) => {
                    let s = self.snapshot(f);
                    let _ = reply.send(serde_json::to_string(&s).unwrap_or_default());
                }
                Command::Stop(reply) => {
                    self.options.stop.store(true, Ordering::Relaxed);
                    let _ = reply.send("ok stopping".into());
                }
            }
        }
    }

    /// One transition at a time: the next once the last is in force.
    fn transition(&mut self, f: u64, now: Nanos) {
        if self.queue.is_empty() || f < self.log.since() {
            return;
        }
        let staged = self.staged;
        let (id, name, reply) = self.queue.remove(0);
        let at = self.clock.announce(now);
        if at >= self.stop_frame {
            let _ = reply.send(format!(
                "error the run stops at frame {}, before the change could take effect",
                self.stop_frame
            ));
        } else {
            let word = self.log.command(id, at);
            staged.control.set_state(word);
            let Clock { epoch, tick, .. } = self.clock;
            check_announcement(&mut self.journal.warnings, epoch, tick, at, "state change");
            self.reported.iter_mut().for_each(|r| *r = false);
            self.journal
                .events
                .push(format!("frame {f}: state {name} commanded from frame {at}"));
            let _ = reply.send(format!("ok {} from frame {at}", staged.states.name(id)));
        }
    }

    /// Acknowledgements: a subsystem still running that has not acknowledged the
    /// state in force after the timeout is reported, once per state.
    fn acknowledgements(&mut self, f: u64) {
        let staged = self.staged;
        let (schedule, control, names, here) =
            (staged.schedule, &staged.control, &staged.names, staged.here);
        let word = control.state();
        let acks: Vec<(&str, Option<state::Ack>)> = (0..schedule.subsystems.len())
            .filter(|&k| here == 0 || schedule.subsystems[k].host == here)
            .filter(|k| !self.hosts_left.contains(&schedule.subsystems[*k].host))
            .map(|k| (names[k].as_str(), control.slot(k).ack()))
            .collect();
        for p in state::pending(word, f.min(self.stop_frame), acks) {
            let k = names.iter().position(|x| *x == p.subsystem).unwrap_or(0);
            if p.frames >= self.ack_timeout
                && !self.reported[k]
                && control.slot(k).status() == Status::Running
            {
                self.reported[k] = true;
                let msg = ack_message(&p, &staged.states);
                self.journal.warn(
                    f,
                    WarningId::AckTimeout,
                    msg,
                    "a subsystem that acknowledges explicitly calls frame.ack(state) once it has reached the state".into(),
                );
            }
        }
    }

    /// Overruns: a subsystem whose longest run of consecutive overruns (releases
    /// skipped in a row) reached its `overrun_after` gets its `on_overrun` action,
    /// once. Only the main coordinator acts (its control block mirrors the other
    /// hosts' subsystems); the threads only count.
    fn overruns(&mut self, f: u64) {
        let staged = self.staged;
        if staged.here != 0 {
            return;
        }
        for (k, spec) in staged.schedule.subsystems.iter().enumerate() {
            let on = &spec.on_overrun;
            if self.overrun_acted[k] || on.action == OverrunAction::Count {
                continue;
            }
            let view = staged.control.slot(k).view();
            if view.longest_streak < on.after {
                continue;
            }
            self.overrun_acted[k] = true;
            let cause = format!(
                "{}: {} consecutive overrun(s) (releases skipped in a row; {} in all by \
                 frame {})",
                staged.names[k],
                view.longest_streak,
                view.overruns,
                view.last_frame.map_or("-".to_string(), |v| v.to_string()),
            );
            self.act(k, f, cause);
        }
    }

    /// The watchdogs: a subsystem still in a frame longer than its `watchdog` after
    /// that frame's release is named with the frame and how long it has run (a
    /// warning and an event, for the first [`WATCHDOG_NAMED`] such frames), and its
    /// `on_overrun` acts (once per run, as for overruns; `count` only names it).
    fn watchdogs(&mut self, f: u64, now: Nanos) {
        let staged = self.staged;
        let Some(epoch) = staged.control.epoch() else {
            return;
        };
        let tick = staged.control.tick();
        for (k, spec) in staged.schedule.subsystems.iter().enumerate() {
            let Some(limit) = spec.watchdog else {
                continue;
            };
            if staged.here != 0 && spec.host != staged.here {
                continue;
            }
            let view = staged.control.slot(k).view();
            if view.status != Status::Running {
                continue;
            }
            let frame = frame_in_progress(epoch, tick, spec, &view);
            let released = epoch + tick * frame;
            let ran = now.saturating_sub(released);
            if frame >= self.stop_frame || ran <= limit {
                continue;
            }
            let (named, last) = &mut self.watchdog_named[k];
            if *last == Some(frame) || *named >= WATCHDOG_NAMED {
                continue;
            }
            *named += 1;
            *last = Some(frame);
            let more = if *named == WATCHDOG_NAMED {
                " (the last frame its watchdog names)"
            } else {
                ""
            };
            let cause = format!(
                "{}: frame {frame} has run {ran} since its release and has not ended \
                 (watchdog {limit}){more}",
                staged.names[k],
            );
            self.journal.warn(
                f,
                WarningId::Watchdog,
                cause.clone(),
                "a subsystem stuck in its frame (a blocking call, a lock, a loop): its \
                 releases meanwhile count as overruns"
                    .into(),
            );
            if !self.overrun_acted[k] && staged.here == 0 {
                self.overrun_acted[k] = true;
                if spec.on_overrun.action != OverrunAction::Warn {
                    self.act(k, f, cause);
                }
            }
        }
    }

    /// Subsystem `k`'s `on_overrun` action, for `cause`: a warning and an event
    /// naming it and what was done; `mode` queues the state change as `ictus ctl
    /// MODE` would, `stop-run` stops the run (incomplete).
    fn act(&mut self, k: usize, f: u64, cause: String) {
        let staged = self.staged;
        let spec = &staged.schedule.subsystems[k];
        let (done, advice) = match &spec.on_overrun.action {
            OverrunAction::Count => return,
            OverrunAction::Warn => (
                "on_overrun = warn: further overruns are counted".to_string(),
                "its frames take longer than its period: see the misses explained, its \
                 execution time, or give it a longer period",
            ),
            OverrunAction::Mode(m) => {
                if let Some(id) = staged.states.id(m) {
                    // Nobody waits for the answer: the event says what happened.
                    let (reply, _) = mpsc::channel();
                    self.queue.push((id, m.clone(), reply));
                }
                (
                    format!("on_overrun = mode: the run moves to state {m}"),
                    "the run continues in that state; `ictus ctl NAME` moves it on",
                )
            }
            OverrunAction::StopRun => {
                self.overrun_stop.get_or_insert(k);
                (
                    "on_overrun = stop-run: the run stops (incomplete)".to_string(),
                    "its frames take longer than its period: see the misses explained, its \
                     execution time, or give it a longer period",
                )
            }
        };
        self.journal.warn(
            f,
            WarningId::Overrun,
            format!("{cause}; {done}"),
            advice.into(),
        );
    }

    /// The status hook, every `status_every`.
    fn status(&mut self, f: u64, now: Nanos) {
        if self.options.on_status.is_none()
            || now.saturating_sub(self.last_status) < Nanos::from(self.options.status_every)
        {
            return;
        }
        self.last_status = now;
        let s = self.snapshot(f);
        if let Some(cb) = self.options.on_status.as_mut() {
            cb(&s);
        }
    }

    /// Stop on request (Ctrl-C, `ictus ctl stop`, a subsystem's `Flow::StopRun`
    /// or its error with `on_error = "stop-run"`), at the first major frame that can
    /// still be announced, unless the duration ends the run before.
    fn stop_on_request(&mut self, now: Nanos) {
        if self.stop_requested {
            return;
        }
        let asked_by = self.stop_asked();
        // Relaxed: a stop request, polled.
        if asked_by.is_none()
            && self.overrun_stop.is_none()
            && !self.options.stop.load(Ordering::Relaxed)
        {
            return;
        }
        self.stop_requested = true;
        if let Some((k, frame)) = asked_by {
            self.journal.events.push(format!(
                "frame {frame}: {} asked the run to stop",
                self.staged.names[k]
            ));
        }
        let at = self.clock.announce(now);
        if at < self.stop_frame {
            self.stop_frame = at;
            self.staged.control.set_stop_frame(at);
            let Clock { epoch, tick, .. } = self.clock;
            check_announcement(&mut self.journal.warnings, epoch, tick, at, "stop");
            // Stopped by a person before the duration's end: the figures cover
            // part of the run. A subsystem that stops the run ends it as planned.
            if self.overrun_stop.is_some() {
                // Stopped for a fault, before its duration's end or a stop asked.
                self.complete = false;
            } else if asked_by.is_none() {
                self.complete &= self.options.duration.is_none();
            }
        }
    }

    /// The first subsystem that asked the run to stop, and the frame. Only the main
    /// coordinator decides (its control block mirrors the other hosts' subsystems);
    /// a node stops when the main coordinator's stop frame reaches it.
    fn stop_asked(&self) -> Option<(usize, u64)> {
        if self.staged.here != 0 {
            return None;
        }
        let control = &self.staged.control;
        (0..self.staged.schedule.subsystems.len())
            .filter_map(|k| control.slot(k).view().stop_asked.map(|f| (k, f)))
            .min_by_key(|&(_, f)| f)
    }

    /// Whether the run is over: past its stop frame, every thread and program
    /// ended. A program still running 5 s after the stop is killed.
    fn stopped(&mut self, f: u64, now: Nanos) -> bool {
        if self.stop_frame == u64::MAX {
            return false;
        }
        let stop_at = self.clock.epoch + self.clock.tick * self.stop_frame;
        let threads_done = self.handles.iter().all(|(_, h)| h.is_finished());
        let children_done = self
            .children
            .iter_mut()
            .all(|c| c.exited.is_some() || matches!(c.child.try_wait(), Ok(Some(_))));
        if threads_done && children_done && now >= stop_at {
            return true;
        }
        if !self.killed && now > stop_at + Nanos::from_secs(5) {
            // A program that does not leave is ended.
            self.killed = true;
            kill_all(self.children);
            self.journal.events.push(format!(
                "frame {f}: programs still running 5 s after the stop were killed"
            ));
        }
        false
    }
}

/// The frame subsystem `spec` runs (or is released for) as its slot reads: the
/// first of its releases after its last frame ended. That end is taken as the last
/// frame's release plus its execution (a lower bound: its wake-up was later), so
/// an overrun before it is seen as it was.
fn frame_in_progress(
    epoch: Nanos,
    tick: Nanos,
    spec: &crate::schedule::SubsystemSpec,
    view: &crate::control::SlotView,
) -> u64 {
    let Some(last) = view.last_frame else {
        return spec.start;
    };
    let mut c = executive::Cadence::new(epoch, tick, spec.start, spec.period);
    c.skip_to(last, u64::MAX);
    c.complete(epoch + tick * last + view.last_exec, u64::MAX);
    c.frame()
}

/// What the coordinator's loop makes of a [`LinkEvent`].
/// What the main host reported of another host's subsystem.
#[derive(Clone, Copy, Debug, Default)]
struct RemoteSeen {
    /// Its failure.
    failed: bool,
    /// Its overruns, up to this many; last named at this frame.
    overruns_named: u64,
    named_at: Option<u64>,
}

enum Turn {
    Nothing,
    Event(String),
    Warning(String, RunWarning),
}

/// The coordinator's loop, as a [`LinkEvent`] meets it.
struct LinkTurn<'a> {
    schedule: &'a Schedule,
    control: &'a Control,
    here: usize,
    frame: u64,
    lead: Nanos,
    epoch: Nanos,
}

impl LinkTurn<'_> {
    fn apply(
        &self,
        event: LinkEvent,
        log: &mut StateLog,
        hosts_left: &mut BTreeSet<usize>,
        remote_seen: &mut [RemoteSeen],
    ) -> Turn {
        let f = self.frame;
        match event {
            LinkEvent::Joined(h) if hosts_left.remove(&h) => {
                Turn::Event(format!("frame {f}: host {} is back", self.host_name(h)))
            }
            LinkEvent::Joined(_) => Turn::Nothing,
            LinkEvent::Left(h) if hosts_left.contains(&h) => Turn::Nothing,
            LinkEvent::Left(h) => {
                hosts_left.insert(h);
                self.left(h)
            }
            LinkEvent::Control { state, stop_frame } => {
                if state != self.control.state() {
                    log.command(state.next, state.from_frame);
                    self.control.set_state(state);
                }
                self.control.set_stop_frame(stop_frame);
                Turn::Nothing
            }
            LinkEvent::Remote(r) => self.remote(r, hosts_left, remote_seen),
            LinkEvent::Hub(what) => Turn::Event(format!("frame {f}: {what}")),
            // The coordinator acts on a silence itself (Coordinator::other_hosts).
            LinkEvent::Silent { .. } => Turn::Nothing,
            LinkEvent::Late(what) | LinkEvent::Note(what) => {
                Turn::Event(format!("frame {f}: {what}"))
            }
            LinkEvent::Dropped { from, total } => {
                let msg = format!(
                    "cell publications from host {from} were dropped on the way ({total} \
                     so far): this host computed on the values before them"
                );
                Turn::Warning(
                    format!("frame {f}: {msg}"),
                    RunWarning {
                        id: WarningId::LinkDropped,
                        message: format!(
                            "cell publications from host {from} were dropped on the way: \
                             this host computed on the values before them"
                        ),
                        advice: Some(
                            "a queue on the way was full: that host's link, or this \
                             host, could not keep up for a while; the count per sender is \
                             in the host's cell figures (`dropped`)"
                                .into(),
                        ),
                    },
                )
            }
            LinkEvent::Reader {
                name,
                from,
                connected: true,
            } => Turn::Event(format!(
                "frame {f}: reader {name} linked to this host from {from} (it gets what it \
                 can take: nothing of the run waits on it)"
            )),
            LinkEvent::Reader { name, from, .. } => {
                Turn::Event(format!("frame {f}: reader {name} (from {from}) left"))
            }
            LinkEvent::Refused { from, what } => {
                let msg = format!("refused from host {from}: {what}");
                Turn::Warning(
                    format!("frame {f}: {msg}"),
                    RunWarning {
                        id: WarningId::LinkRefused,
                        message: msg,
                        advice: Some(
                            "nothing of it was copied; a host sent what is not its to send \
                             (its certificate's access rules, or elements it does not \
                             write): see who holds that host's key"
                                .into(),
                        ),
                    },
                )
            }
        }
    }

    fn host_name(&self, h: usize) -> &str {
        self.schedule.hosts.get(h).map_or("?", |x| x.name.as_str())
    }

    /// Host `h` left the run (it was not known to have left).
    fn left(&self, h: usize) -> Turn {
        let f = self.frame;
        if self.here != 0 && h == 0 {
            // The main coordinator is gone: this host stops at the next
            // major frame it can still announce to its subsystems.
            let at = executive::announce_frame(
                self.epoch,
                self.control.tick(),
                self.schedule.major_frame,
                monotonic_now(),
                self.lead,
            );
            self.control.set_stop_frame(at);
            let msg = format!(
                "the main coordinator (host {}) left the run at frame {f}; this host \
                 stops at frame {at}",
                self.host_name(0)
            );
            return Turn::Warning(
                format!("frame {f}: {msg}"),
                RunWarning {
                    id: WarningId::HostLost,
                    message: msg,
                    advice: Some(
                        "the frames after it count as lost; start the run again \
                         from the main host"
                            .into(),
                    ),
                },
            );
        }
        if self.here != 0 {
            return Turn::Event(format!(
                "frame {f}: host {} left the run",
                self.host_name(h)
            ));
        }
        let mut lost = Vec::new();
        for (k, spec) in self.schedule.subsystems.iter().enumerate() {
            if spec.host == h && self.control.slot(k).status() != Status::Finished {
                self.control.slot(k).set_status(Status::Failed);
                lost.push(spec.name.as_str());
            }
        }
        if lost.is_empty() {
            return Turn::Event(format!(
                "frame {f}: host {} left the run",
                self.host_name(h)
            ));
        }
        let msg = format!(
            "host {} left the run at frame {f}: the frames of {} count as lost from there",
            self.host_name(h),
            lost.join(", ")
        );
        Turn::Warning(
            format!("frame {f}: {msg}"),
            RunWarning {
                id: WarningId::HostLost,
                message: msg,
                advice: Some(
                    "the other hosts kept their beat; see why the host went (its \
                     `ictus node` output, its link)"
                        .into(),
                ),
            },
        )
    }

    /// A subsystem of another host as its host reported it: its figures and its
    /// acknowledgement in its slot, its failure reported once.
    /// A node's subsystem that overran since it was last named, named (its host's
    /// own explanations of those misses are in its outcome at the end): at most
    /// once a second for each subsystem, with the overruns since.
    fn remote_overran(
        &self,
        spec: &crate::schedule::SubsystemSpec,
        seen: &mut RemoteSeen,
        r: &RemoteSlot,
    ) -> Option<Turn> {
        let more = r.overruns.saturating_sub(seen.overruns_named);
        let second = (Nanos::from_secs(1).as_u64() / self.control.tick().as_u64().max(1)).max(1);
        if more == 0 || seen.named_at.is_some_and(|at| self.frame < at + second) {
            return None;
        }
        seen.overruns_named = r.overruns;
        seen.named_at = Some(self.frame);
        Some(Turn::Event(format!(
            "frame {}: {} overran on {}: {more} overrun(s) since it was last named, {} \
             in all, longest execution {}, longest streak {}",
            self.frame,
            spec.name,
            self.host_name(spec.host),
            r.overruns,
            Nanos::new(r.max_exec_ns),
            r.longest_streak
        )))
    }

    fn remote(
        &self,
        r: RemoteSlot,
        hosts_left: &BTreeSet<usize>,
        remote_seen: &mut [RemoteSeen],
    ) -> Turn {
        let f = self.frame;
        let Some(spec) = self.schedule.subsystems.get(r.slot) else {
            return Turn::Nothing;
        };
        if spec.host == self.here || hosts_left.contains(&spec.host) {
            return Turn::Nothing;
        }
        let slot = self.control.slot(r.slot);
        slot.publish(&crate::control::Counters {
            frames_run: r.frames_run,
            overruns: r.overruns,
            longest_streak: r.longest_streak,
            last_frame: r.last_frame,
            last_exec: Nanos::ZERO,
            max_jitter: Nanos::new(r.max_jitter_ns),
            max_exec: Nanos::new(r.max_exec_ns),
            torn: 0,
            last_torn_cell: 0,
            window: 0,
            window_max: Nanos::ZERO,
            window_done: r.window_done,
            errors: r.errors,
        });
        // The main coordinator stops the run for a node's subsystem as for its own.
        if let Some(frame) = r.stop_asked.checked_sub(1) {
            slot.ask_stop(frame);
        }
        if let Some(a) = crate::state::Ack::unpack(r.ack) {
            slot.acknowledge(a);
        }
        let status = r.status();
        if slot.status() != status {
            slot.set_status(status);
        }
        let seen = &mut remote_seen[r.slot];
        if status == Status::Failed && !seen.failed {
            seen.failed = true;
            let msg = format!(
                "{} on host {}: it failed after frame {} (reported by its host); its \
                 frames count as lost",
                spec.name,
                self.host_name(spec.host),
                if r.last_frame == u64::MAX {
                    "-".to_string()
                } else {
                    r.last_frame.to_string()
                }
            );
            return Turn::Warning(
                format!("frame {f}: {msg}"),
                RunWarning {
                    id: WarningId::Crash,
                    message: msg,
                    advice: Some(
                        "the other subsystems kept their beat; its host's `ictus node` \
                         output says why"
                            .into(),
                    ),
                },
            );
        }
        self.remote_overran(spec, seen, &r).unwrap_or(Turn::Nothing)
    }
}

/// Reopens every cell the subsystem in `slot` writes and that its death left in
/// the middle of a write; returns how many were.
fn recover_writer(cells: &Cells, control: &Control, slot: usize) -> usize {
    let table = cells.table();
    let mut index = 0;
    let mut recovered = 0;
    for (c, cell) in table.cells().iter().enumerate() {
        let n = cell.elements().len();
        if (index..index + n).any(|e| control.writer_of(e) == Some(slot)) && cells.recover_cell(c) {
            recovered += 1;
        }
        index += n;
    }
    recovered
}

fn ack_message(p: &Pending, states: &States) -> String {
    format!(
        "{} has not acknowledged state {} {} frames after it took effect (last acknowledged: {})",
        p.subsystem,
        states.name(p.commanded),
        p.frames,
        p.acknowledged.map_or("nothing", |a| states.name(a))
    )
}

/// Warns when a change was announced so late that a subsystem may already have
/// started the frame it applies to.
fn check_announcement(
    warnings: &mut Vec<RunWarning>,
    epoch: Nanos,
    tick: Nanos,
    frame: u64,
    what: &str,
) {
    let now = monotonic_now();
    if now >= epoch + tick * frame.saturating_sub(1) {
        warnings.push(RunWarning {
            id: WarningId::LateAnnouncement,
            message: format!(
                "the {what} for frame {frame} was announced only at frame {}; a subsystem may have missed it",
                now.saturating_sub(epoch).as_u64() / tick.as_u64()
            ),
            advice: Some("the coordinator was delayed: keep a CPU free of real-time work for it".into()),
        });
    }
}

/// The event for subsystem `k` having given up on a cell: which cell, and who
/// writes it.
fn torn_message(
    cells: &Cells,
    control: &Control,
    names: &[String],
    k: usize,
    view: &crate::control::SlotView,
) -> (String, String) {
    let table = cells.table();
    let Some(cell) = view.last_torn_cell.filter(|&c| c < table.cells().len()) else {
        return (
            format!("{}: a cell was held by a writer not progressing", names[k]),
            "a writer stopped half way through a write".to_string(),
        );
    };
    let first = crate::subsystem::first_element_index(table, cell);
    let mut writers: Vec<&str> = (first..first + table.cells()[cell].elements().len())
        .filter_map(|e| control.writer_of(e))
        .filter_map(|w| names.get(w).map(String::as_str))
        .collect();
    writers.dedup();
    let writer = if writers.is_empty() {
        "(none registered)".to_string()
    } else {
        writers.join(", ")
    };
    (
        format!(
            "cell {} torn: writer {writer} not progressing ({} gave up on it {} time(s) and ran on with its last coherent copy)",
            table.cells()[cell].name(),
            names[k],
            view.torn
        ),
        "a writer was stopped half way through a write (a debugger, SIGSTOP, a page-fault \
         storm); it holds the cell until it runs again or its process ends"
            .to_string(),
    )
}

/// What a run hands back beside its report, for [`crate::program::Outcome`].
#[derive(Default)]
pub(crate) struct Made {
    /// Each in-process subsystem that ended its loop, by name.
    pub(crate) subsystems: BTreeMap<String, Box<dyn std::any::Any + Send>>,
    /// The first error each one's `run` returned, by name.
    pub(crate) errors: BTreeMap<String, crate::executive::Fault>,
    /// The cells as the run left them.
    pub(crate) cells: Option<crate::cell::CellValues>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_subsystem_that_overran_is_named_with_its_host_at_most_once_a_second() {
        let schedule = crate::schedule::two_hosts();
        let control = Control::in_process(2, 1_000_000);
        let mut seen = vec![RemoteSeen::default(); 2];
        let status = |overruns: u64| {
            LinkEvent::Remote(RemoteSlot {
                overruns,
                longest_streak: 2,
                max_exec_ns: 1_500_000,
                status: Status::Running as u64,
                ..RemoteSlot::of(&control, 1)
            })
        };
        let mut turn = |frame: u64, overruns: u64| {
            let what = LinkTurn {
                schedule: &schedule,
                control: &control,
                here: 0,
                frame,
                lead: Nanos::ZERO,
                epoch: Nanos::ZERO,
            };
            match what.apply(
                status(overruns),
                &mut StateLog::new(StateId::RUN),
                &mut BTreeSet::new(),
                &mut seen,
            ) {
                Turn::Event(e) => Some(e),
                Turn::Nothing => None,
                Turn::Warning(e, _) => panic!("a warning: {e}"),
            }
        };
        assert_eq!(turn(10, 0), None);
        let first = turn(20, 3).expect("named");
        assert!(
            first.starts_with("frame 20: B overran on h2: 3 overrun(s)")
                && first.contains("3 in all, longest execution 1.50 ms, longest streak 2"),
            "{first}"
        );
        // The same second: counted, not named again.
        assert_eq!(turn(500, 5), None);
        let next = turn(1_020, 7).expect("named a second later");
        assert!(
            next.contains("4 overrun(s) since it was last named, 7 in all"),
            "{next}"
        );
        // No more overruns: nothing.
        assert_eq!(turn(3_000, 7), None);
    }
}
