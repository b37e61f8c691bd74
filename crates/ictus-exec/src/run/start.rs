//! A run's start: its threads and programs started, every subsystem (and, across
//! hosts, every host) waited for until ready, then the epoch.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::collections::BTreeMap;
use std::ops::Range;
use std::process::Command as ProcessCommand;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use ictus_core::Nanos;
use ictus_explain::MissReporter;
use ictus_os::clock::monotonic_now;

use super::children::{ChildProc, kill_all, wait_children};
use super::clock::Clock;
use super::error::{RunError, StartError};
use super::journal::Journal;
use super::names::tap_segment;
use super::options::{RunOptions, env};
use super::prepare::{Launch, Staged};
use super::snapshot::{live_now, starting};
use super::thread::{Finish, Prepared};
use super::watch::threshold;
use crate::cell::Cells;
use crate::control::{Control, Status};
use crate::ctl::Command;
use crate::group::Group;
use crate::link::{Link, Start};
use crate::live::LiveStatus;
use crate::schedule::{Schedule, SubsystemSpec};
use crate::state::StateLog;
use crate::subsystem::{BoxError, Maker, SetupClient};

/// An in-process subsystem's thread: its outcome, or why `init` failed.
pub(super) type Handle<'scope> = ScopedJoinHandle<'scope, Result<Finish, BoxError>>;

/// Starts one thread per in-process subsystem: it places itself, runs `init` and
/// waits for the epoch (it gives up when `abort` is set).
pub(super) fn spawn<'scope, 'a: 'scope>(
    scope: &'scope Scope<'scope, '_>,
    staged: &'a Staged<'a>,
    groups: &'a BTreeMap<String, Group>,
    abort: &'a AtomicBool,
    in_process: Vec<(usize, Maker)>,
    mut reporters: BTreeMap<usize, MissReporter>,
) -> Result<Vec<(usize, Handle<'scope>)>, RunError> {
    let schedule = staged.schedule;
    let mut handles = Vec::new();
    for (k, maker) in in_process {
        let spec = &schedule.subsystems[k];
        let prepared = Prepared {
            schedule,
            spec,
            slot: k,
            control: &staged.control,
            cells: staged.cells.clone(),
            states: &staged.states,
            names: &staged.names,
            setup: SetupClient::local(staged.store.clone()),
            hubs: staged.hubs.clone(),
            group: spec.group.as_ref().and_then(|g| groups.get(g)),
            heartbeat_timeout: None,
            tap: staged.tap.clone(),
        };
        let reporter = reporters.remove(&k);
        let h = std::thread::Builder::new()
            .name(format!("ictus-{}", spec.name))
            .spawn_scoped(scope, move || {
                // Relaxed: a stop request, polled.
                prepared.run(maker, reporter, &mut || abort.load(Ordering::Relaxed))
            })
            .map_err(|e| RunError::Init {
                name: spec.name.clone(),
                source: StartError::Thread(e),
            })?;
        handles.push((k, h));
    }
    Ok(handles)
}

/// A run from the start of its subsystems to the epoch.
pub(super) struct Startup<'a, 'scope> {
    pub(super) staged: &'a Staged<'a>,
    pub(super) options: &'a mut RunOptions,
    pub(super) link: &'a mut Option<Box<dyn Link>>,
    /// The programs launched (they outlive the threads' scope: the run ends them).
    pub(super) children: &'a mut Vec<ChildProc>,
    /// Set to make the threads waiting for the epoch give up.
    abort_flag: &'a AtomicBool,
    /// The in-process subsystems' threads.
    pub(super) handles: Vec<(usize, Handle<'scope>)>,
    pub(super) log: StateLog,
    pub(super) journal: Journal,
    /// Whether this host checked its subsystems' writes against the schedule and
    /// told the link it is ready.
    linked: bool,
    /// A node's start, once the main coordinator sent it.
    start: Option<Start>,
}

impl<'a, 'scope> Startup<'a, 'scope> {
    /// The start of `staged`, its threads started (`handles`).
    pub(super) fn new(
        staged: &'a Staged<'a>,
        options: &'a mut RunOptions,
        link: &'a mut Option<Box<dyn Link>>,
        children: &'a mut Vec<ChildProc>,
        abort_flag: &'a AtomicBool,
        handles: Vec<(usize, Handle<'scope>)>,
    ) -> Self {
        Startup {
            staged,
            options,
            link,
            children,
            abort_flag,
            handles,
            log: StateLog::new(staged.initial),
            journal: Journal::default(),
            linked: false,
            start: None,
        }
    }

    /// Launches the programs of this host's subsystems (each joins the run through
    /// shared memory). When one cannot be started, the start is aborted and the
    /// programs already launched are ended.
    pub(super) fn launch(&mut self) -> Result<(), RunError> {
        let staged = self.staged;
        let schedule = staged.schedule;
        let socket = staged.server.as_ref().map(|s| s.path().to_path_buf());
        let schedule_abs = std::fs::canonicalize(&schedule.path).unwrap_or(schedule.path.clone());
        for launch in &staged.programs {
            let spec = &schedule.subsystems[launch.slot];
            let outcome_file = self
                .options
                .run_dir
                .join(format!("{}.{}.outcome.json", schedule.name, spec.name));
            let _ = std::fs::remove_file(&outcome_file);
            let mut cmd = ProcessCommand::new(&launch.path);
            cmd.args(&launch.args)
                .env(env::RUN, &schedule.name)
                .env(env::SCHEDULE, &schedule_abs)
                .env(env::SUBSYSTEM, &spec.name)
                .env(env::SLOT, launch.slot.to_string())
                .env(env::OUTCOME, &outcome_file)
                .env(
                    env::EXPLAIN,
                    threshold(schedule, self.options)
                        .map_or_else(|| "off".to_string(), |t| t.as_u64().to_string()),
                )
                .env(
                    env::EXPLAIN_BUDGET,
                    super::watch::sampler_budget(schedule, spec.host).to_string(),
                );
            if let Some(s) = &socket {
                cmd.env(env::SOCKET, s);
            }
            if staged.tap.is_some() {
                cmd.env(env::TAP, tap_segment(&schedule.name));
            }
            // A process group of its own: a terminal's Ctrl-C (sent to the whole
            // foreground group) reaches the coordinator, which stops every
            // subsystem at a major-frame boundary, never the child directly.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            // A run killed outright (kill -9) takes its programs with it, also
            // ones that never joined it (they cannot watch the heartbeat).
            ictus_os::process::die_with_parent(&mut cmd);
            match cmd.spawn() {
                Ok(child) => self.children.push(ChildProc {
                    slot: launch.slot,
                    child,
                    program: launch.program.clone(),
                    exited: None,
                    outcome_file,
                }),
                Err(e) => {
                    self.abort();
                    kill_all(self.children);
                    return Err(launch_error(schedule, spec, launch, e));
                }
            }
        }
        Ok(())
    }

    /// Waits until every subsystem of this host is ready (and, across hosts, every
    /// host, or for a node the main coordinator's start, which it returns). A
    /// failure, the ready timeout or a stop aborts the start.
    pub(super) fn wait_ready(&mut self) -> Result<Option<Start>, RunError> {
        let ready_by = monotonic_now() + Nanos::from(self.options.ready_timeout);
        let failure = loop {
            self.staged.control.beat(monotonic_now());
            let (all_ready, failed) = self.readiness();
            if let Some(f) = failed {
                break Some(f);
            }
            let waiting_hosts = if all_ready {
                match self.hosts_ready() {
                    Ok(waiting) => waiting,
                    Err(f) => break Some(f),
                }
            } else {
                Vec::new()
            };
            if all_ready && waiting_hosts.is_empty() {
                break None;
            }
            if monotonic_now() > ready_by {
                break Some(self.too_late(&waiting_hosts));
            }
            // Commands and the status hook are served while waiting too, so
            // Ctrl-C and `ictus ctl stop` end a start-up that never completes.
            self.serve();
            // Relaxed: a stop request, polled.
            if self.options.stop.load(Ordering::Relaxed) {
                let waiting = self.not_ready().or(self.first_local()).unwrap_or(0);
                break Some((
                    waiting,
                    "stopped before the start, while it was not ready".to_string(),
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        match failure {
            Some((k, why)) => Err(self.fail(k, why)),
            None => Ok(self.start.take()),
        }
    }

    /// Whether every subsystem of this host is ready, and what failed if anything
    /// did (`init`, or a process or thread that ended first; the last found).
    fn readiness(&mut self) -> (bool, Option<(usize, String)>) {
        let staged = self.staged;
        let mut all_ready = true;
        let mut failed = None;
        for &k in &staged.local {
            match staged.control.slot(k).status() {
                Status::Ready => {}
                Status::Failed => failed = Some((k, "init failed".to_string())),
                _ => all_ready = false,
            }
        }
        for c in self.children.iter_mut() {
            if let Ok(Some(status)) = c.child.try_wait() {
                failed = Some((
                    c.slot,
                    format!("its process exited before it was ready ({status})"),
                ));
            }
        }
        for (k, h) in &self.handles {
            if h.is_finished() && staged.control.slot(*k).status() != Status::Ready {
                failed = Some((*k, "its thread ended before it was ready".to_string()));
            }
        }
        (all_ready, failed)
    }

    /// Once this host is ready, across hosts: the link forwards its cells and tells
    /// the others; the main coordinator waits for every host, a node for the start.
    /// The hosts still waited for (none without a link), or what failed.
    fn hosts_ready(&mut self) -> Result<Vec<usize>, (usize, String)> {
        let staged = self.staged;
        let mut waiting_hosts = Vec::new();
        if !self.linked {
            self.linked = true;
            written_as_scheduled(staged)?;
            if let Some(l) = self.link.as_mut() {
                let writes = local_writes(&staged.cells, &staged.control, &staged.local);
                l.reads(&local_reads(&staged.cells, &staged.control));
                if let Err(e) = l.ready(&staged.cells, &writes) {
                    return Err((staged.local.first().copied().unwrap_or(0), e));
                }
            }
        }
        let Some(l) = self.link.as_mut() else {
            return Ok(waiting_hosts);
        };
        if staged.here == 0 {
            waiting_hosts = l.waiting_for();
        } else {
            self.start = l.start();
            if self.start.is_none() {
                waiting_hosts.push(0);
            }
        }
        Ok(waiting_hosts)
    }

    /// The first subsystem of this host not ready yet.
    fn not_ready(&self) -> Option<usize> {
        let control = &self.staged.control;
        self.staged
            .local
            .iter()
            .copied()
            .find(|&k| control.slot(k).status() != Status::Ready)
    }

    /// The first subsystem of this host.
    fn first_local(&self) -> Option<usize> {
        self.staged.local.first().copied()
    }

    /// Why the start-up ran past its time, and which subsystem it is reported by:
    /// one not ready, or (every one ready) the hosts still waited for.
    fn too_late(&self, waiting_hosts: &[usize]) -> (usize, String) {
        let slow = self.not_ready();
        let why = match slow {
            Some(_) => format!("not ready after {:?}", self.options.ready_timeout),
            None => {
                let hosts: Vec<&str> = waiting_hosts
                    .iter()
                    .map(|&h| self.staged.schedule.hosts[h].name.as_str())
                    .collect();
                format!(
                    "ready, but host(s) {} not after {:?}",
                    hosts.join(", "),
                    self.options.ready_timeout
                )
            }
        };
        (slow.or(self.first_local()).unwrap_or(0), why)
    }

    /// The live snapshot while subsystems start.
    fn snapshot(&self) -> LiveStatus {
        let s = self.staged;
        let extras = starting(self.link.as_deref(), &self.journal.events);
        live_now(
            s.schedule, &s.control, &s.states, &s.cells, &self.log, 0, extras,
        )
    }

    /// Answers the commands received (no state change before the start), then
    /// calls the status hook.
    fn serve(&mut self) {
        while let Ok(cmd) = self.staged.commands.try_recv() {
            match cmd {
                Command::State(_, reply) => {
                    let _ = reply.send(
                        "error the run is starting: its subsystems are not all ready yet".into(),
                    );
                }
                Command::Status(reply) => {
                    let s = self.snapshot();
                    let _ = reply.send(serde_json::to_string(&s).unwrap_or_default());
                }
                Command::Stop(reply) => {
                    self.options.stop.store(true, Ordering::Relaxed);
                    let _ = reply.send("ok stopping".into());
                }
            }
        }
        if self.options.on_status.is_some() {
            let s = self.snapshot();
            if let Some(cb) = self.options.on_status.as_mut() {
                cb(&s);
            }
        }
    }

    /// Makes the threads waiting for the epoch, and the programs, give up.
    fn abort(&self) {
        self.abort_flag.store(true, Ordering::Relaxed);
        self.staged.control.abort();
    }

    /// Aborts a start that failed at subsystem `k` for `why`: every thread is joined
    /// (`k`'s own `init` error, if it has one, replaces `why`), and the programs
    /// get a moment to leave before they are ended.
    fn fail(&mut self, k: usize, why: String) -> RunError {
        self.abort();
        let mut source = StartError::Start(why);
        for (hk, h) in std::mem::take(&mut self.handles) {
            if let Ok(Err(e)) = h.join()
                && hk == k
            {
                source = StartError::Subsystem(e);
            }
        }
        wait_children(self.children, Duration::from_secs(2));
        RunError::Init {
            name: self.staged.names[k].clone(),
            source,
        }
    }

    /// Aborts a start that failed at the epoch, with `message` (reported by this
    /// host's first subsystem).
    fn fail_epoch(&mut self, message: String) -> RunError {
        self.abort();
        wait_children(self.children, Duration::from_secs(2));
        RunError::Init {
            name: self.staged.names[self.first_local().unwrap_or(0)].clone(),
            source: StartError::Start(message),
        }
    }

    /// Publishes the epoch, and returns the run's clock and stop frame, for its
    /// coordinator to take the run over. A node takes the main coordinator's `start`
    /// (its epoch, stop frame and state); the main coordinator, or a run on one host,
    /// sets its own a little ahead and sends it to the other hosts.
    pub(super) fn epoch(&mut self, start: Option<Start>) -> Result<(Clock, u64), RunError> {
        let control = &self.staged.control;
        let tick = self.staged.schedule.tick;
        // Across hosts, changes are announced further ahead (they travel with the
        // tick) and the epoch leaves the start time to reach every host.
        let (lead, epoch_lead) = if self.link.is_some() {
            (Nanos::from_millis(100), Nanos::from_millis(300))
        } else {
            (Nanos::from_millis(20), Nanos::from_millis(30))
        };
        let lead = lead.max(tick * 2);
        let major = self.staged.schedule.major_frame;
        let mut stop_frame = u64::MAX;
        let epoch = match start {
            // A node: the main coordinator's start, on this host's clock.
            Some(s) if s.tick != tick => {
                return Err(self.fail_epoch(format!(
                    "the main host runs a tick of {}, this host {}: give both the same \
                     schedule and --tick",
                    s.tick, tick
                )));
            }
            Some(s) => {
                let word = s.state;
                self.log.command(word.previous, 0);
                if word.next != word.previous {
                    self.log.command(word.next, word.from_frame);
                }
                control.set_state(word);
                stop_frame = s.stop_frame;
                control.set_stop_frame(stop_frame);
                s.epoch
            }
            None => {
                if let Some(d) = self.options.duration {
                    let frames = Nanos::from(d).as_u64().div_ceil(tick.as_u64());
                    stop_frame = frames.div_ceil(major) * major;
                    control.set_stop_frame(stop_frame);
                }
                let epoch = monotonic_now() + epoch_lead.max(tick * 4);
                if let Some(l) = self.link.as_mut() {
                    let s = Start {
                        epoch,
                        stop_frame,
                        state: control.state(),
                        tick,
                    };
                    if let Err(e) = l.begin(s) {
                        return Err(self.fail_epoch(e));
                    }
                }
                epoch
            }
        };
        control.beat(monotonic_now());
        control.set_epoch(epoch);
        let clock = Clock {
            epoch,
            tick,
            major,
            lead,
        };
        Ok((clock, stop_frame))
    }
}

/// The error for a program that could not be started.
fn launch_error(
    schedule: &Schedule,
    spec: &SubsystemSpec,
    launch: &Launch,
    source: std::io::Error,
) -> RunError {
    RunError::Launch {
        path: schedule.path.clone(),
        location: spec.location,
        name: spec.name.clone(),
        program: launch.program.clone(),
        source,
    }
}

/// The cells this host's subsystems write, with the byte ranges of their elements
/// (from the writer claims they made in `init`).
fn local_writes(
    cells: &Cells,
    control: &Control,
    local: &[usize],
) -> Vec<(usize, Vec<Range<usize>>)> {
    let mut out = Vec::new();
    let mut index = 0;
    for (c, cell) in cells.table().cells().iter().enumerate() {
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for e in cell.elements() {
            if control.writer_of(index).is_some_and(|w| local.contains(&w)) {
                let r = e.range();
                match ranges.last_mut() {
                    Some(last) if last.end == r.start => last.end = r.end,
                    _ => ranges.push(r),
                }
            }
            index += 1;
        }
        if !ranges.is_empty() {
            out.push((c, ranges));
        }
    }
    out
}

/// The cells a subsystem of this host reads (any of their elements), by index.
fn local_reads(cells: &Cells, control: &Control) -> Vec<usize> {
    let mut out = Vec::new();
    let mut index = 0;
    for (c, cell) in cells.table().cells().iter().enumerate() {
        let n = cell.elements().len();
        if (index..index + n).any(|e| control.read_here(e)) {
            out.push(c);
        }
        index += n;
    }
    out
}

/// Refuses a subsystem of this host whose code claimed an element its `writes` in
/// the schedule does not list (the other hosts would refuse its publications).
fn written_as_scheduled(staged: &Staged<'_>) -> Result<(), (usize, String)> {
    let table = staged.cells.table();
    for &k in &staged.local {
        let spec = &staged.schedule.subsystems[k];
        let Some(allowed) = spec.writes_in(table) else {
            continue;
        };
        let mut index = 0;
        for (c, cell) in table.cells().iter().enumerate() {
            for e in cell.elements() {
                let r = e.range();
                let listed = allowed
                    .iter()
                    .any(|(ac, ar)| *ac == c && ar.start <= r.start && r.end <= ar.end);
                if staged.control.writer_of(index) == Some(k) && !listed {
                    return Err((
                        k,
                        format!(
                            "it writes {}.{}, which its writes in the schedule ({}:{}) do not \
                             list: add it there, or stop writing it",
                            cell.name(),
                            e.name(),
                            staged.schedule.path.display(),
                            spec.location
                        ),
                    ));
                }
                index += 1;
            }
        }
    }
    Ok(())
}
