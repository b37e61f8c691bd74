//! Running a schedule: the coordinator.
//!
//! [`run`] prepares everything first (the cells, the hubs, the control block, the in-process
//! subsystems, the control socket), so a bad schedule, cell table or subsystem starts
//! nothing. Then it starts one thread per in-process subsystem (pinned, in its class,
//! running `init`), launches the programs the schedule names (each joins through
//! shared memory with [`crate::child::run`]), waits until every subsystem is ready,
//! publishes the epoch, and coordinates: state commands, the heartbeat, crashed
//! children, acknowledgements, the live status, the stop. It ends with a
//! [`RunReport`], and leaves no segment, socket or process behind.
//!
//! ```no_run
//! use ictus_exec::{run, schedule::Schedule};
//! let schedule = Schedule::from_file("examples/stress/schedule.toml".as_ref(),
//!     &ictus_os::facts::online_cpus()).unwrap();
//! let report = run::run(&schedule, &mut run::builtin, run::RunOptions::default()).unwrap();
//! println!("{} frames", report.frames);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command as ProcessCommand;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use ictus_core::histogram::HistogramData;
use ictus_core::{LatencyHistogram, Nanos, Summary};
use ictus_os::clock::monotonic_now;
use ictus_os::sched;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cell::Cells;
use crate::control::{Control, Status};
use crate::ctl::{self, Command, CtlError};
use crate::executive;
use crate::link::{HostReport, Link, LinkEvent, Start};
use crate::live::Extras;
use crate::schedule::{Process, Schedule, ScheduleError, SubsystemSpec};
use crate::state::{self, Pending, StateId, StateLog, States};
use crate::subsystem::{Registry, RegistryError, SetupClient, Subsystem};

mod children;
mod prepare;
mod thread;

use prepare::{Launch, Local, Staged};

/// A distribution with its exact summary, as records carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Count, extremes, moments, percentiles.
    pub summary: Summary,
    /// 0-based index of the first max sample.
    pub max_index: Option<u64>,
    /// Non-empty buckets.
    pub histogram: HistogramData,
}

impl Distribution {
    /// The distribution of `h`.
    pub fn of(h: &LatencyHistogram) -> Distribution {
        Distribution {
            summary: h.summary(),
            max_index: h.max_index(),
            histogram: h.data(),
        }
    }
}

/// A shortfall with advice (a refused policy, an unlocked memory, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunWarning {
    /// Stable identifier: `policy-refused`, `mlock-refused`, `affinity-refused`,
    /// `late-announcement`, `ack-timeout`, `crash`.
    pub id: String,
    /// What happened.
    pub message: String,
    /// What to do about it.
    pub advice: Option<String>,
}

/// What one subsystem thread reports when it ends (a child sends it in a file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadOutcome {
    /// The subsystem.
    pub subsystem: String,
    /// Its process.
    pub pid: u32,
    /// Its thread.
    pub tid: u64,
    /// The class asked for, in words.
    pub class_requested: String,
    /// The class obtained, in words (differs when a policy was refused).
    pub class_obtained: String,
    /// The policy read back.
    pub policy: String,
    /// The CPUs it could run on, read back.
    pub affinity: String,
    /// Whether the process's memory was locked.
    pub memory_locked: bool,
    /// The hybrid wait's margin, when hybrid.
    pub hybrid_margin_ns: Option<u64>,
    /// Frames run.
    pub frames_run: u64,
    /// Releases skipped while still running (or waking late).
    pub overruns: u64,
    /// Longest run of consecutive skipped releases.
    pub longest_overrun_streak: u64,
    /// Release jitter (wake-up minus deadline).
    pub jitter: Distribution,
    /// Execution time (wake-up to outputs published).
    pub exec: Distribution,
    /// How its loop ended: `stopped`, `aborted`, `coordinator-gone`.
    pub end: String,
    /// Reads and writes it gave up on a cell whose writer was not progressing
    /// (it ran on with the last coherent copy; see [`crate::subsystem::Ports`]).
    #[serde(default)]
    pub torn: u64,
    /// Shortfalls met while setting it up.
    pub warnings: Vec<RunWarning>,
}

/// One subsystem's figures for the whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubsystemReport {
    /// Its name.
    pub name: String,
    /// `in-process` or the program's path.
    pub process: String,
    /// Start frame.
    pub start: u64,
    /// Period in frames.
    pub period: u64,
    /// Its CPU, if pinned.
    pub cpu: Option<usize>,
    /// Releases due before the stop frame.
    pub releases_due: u64,
    /// Frames it ran.
    pub frames_run: u64,
    /// Releases it skipped (overruns).
    pub overruns: u64,
    /// Longest run of consecutive overruns.
    pub longest_overrun_streak: u64,
    /// Releases lost otherwise: `due - run - overruns` (a crashed process's frames).
    pub lost: u64,
    /// Why it stopped early, if it did (`killed by signal 9 after frame 1234`).
    pub crashed: Option<String>,
    /// The thread's own report (absent when it crashed).
    pub outcome: Option<ThreadOutcome>,
}

/// The seed 003 stress-test result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StressReport {
    /// Frames spent in RUN.
    pub run_frames: u64,
    /// The final value of each counter.
    pub counters: Vec<(String, i64)>,
    /// The largest.
    pub final_value: i64,
    /// `run_frames - final_value`.
    pub missed_frames: i64,
    /// Cells whose elements do not all carry the counter's value (a torn or
    /// incoherent transfer; zero when every transfer was frame-coherent).
    pub incoherent_cells: u64,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run's name.
    pub name: String,
    /// The schedule file.
    pub schedule: PathBuf,
    /// The tick.
    pub tick_ns: u64,
    /// Minor frames per major frame.
    pub major_frame: u64,
    /// The wait mode.
    pub wait: String,
    /// Frames run: the stop frame.
    pub frames: u64,
    /// Frames spent in each state.
    pub state_frames: BTreeMap<String, u64>,
    /// Transitions: `(first frame, state)`.
    pub transitions: Vec<(u64, String)>,
    /// Per subsystem.
    pub subsystems: Vec<SubsystemReport>,
    /// The stress check, when the schedule has one.
    pub stress: Option<StressReport>,
    /// Shortfalls, each with advice.
    pub warnings: Vec<RunWarning>,
    /// What happened during the run, in order (crashes, late acknowledgements).
    pub events: Vec<String>,
    /// False when stopped by a signal rather than by the duration, or when a
    /// subsystem lost frames (it crashed, left, or never ran them).
    pub complete: bool,
    /// Each host's link figures, when the run spans hosts (this host's first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostReport>,
}

pub use crate::live::{LiveStatus, LiveSubsystem};
use children::{ChildProc, describe_exit, kill_all, wait_children};
pub(crate) use thread::Prepared;

/// A callback that receives the live status.
pub type StatusHook = Box<dyn FnMut(&LiveStatus) + Send>;

/// Makes the in-process subsystem of a schedule line, or says why it cannot.
pub type Factory<'a> = dyn FnMut(&SubsystemSpec) -> Result<Box<dyn Subsystem>, String> + 'a;

/// How to run.
pub struct RunOptions {
    /// Stop after this long (from the epoch); `None`: until stopped.
    pub duration: Option<Duration>,
    /// Set to stop the run (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Called with the live status every [`status_every`](Self::status_every).
    pub on_status: Option<StatusHook>,
    /// How often `on_status` is called.
    pub status_every: Duration,
    /// Serve the control socket (`ictus ctl`); always on when programs are launched.
    pub control_socket: bool,
    /// The folder of control sockets and run files.
    pub run_dir: PathBuf,
    /// More folders to look for programs in (before `PATH`).
    pub program_dirs: Vec<PathBuf>,
    /// Frames a subsystem may take to acknowledge a state before it is reported
    /// (`None`: one second's worth).
    pub ack_timeout_frames: Option<u64>,
    /// How long subsystems may take to become ready.
    pub ready_timeout: Duration,
    /// The program, and its arguments, that hosts a built-in subsystem in a
    /// process of its own (`process = "own"`): `ictus` sets itself and its hidden
    /// `subsystem` command; the program calls [`crate::child::main_builtin`].
    pub host: Option<(PathBuf, Vec<String>)>,
    /// The link to the run's other hosts, when its schedule spans several (see
    /// [`crate::link`]); `None`: every subsystem runs on this host.
    pub link: Option<Box<dyn Link>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: None,
            stop: Arc::new(AtomicBool::new(false)),
            on_status: None,
            status_every: Duration::from_millis(200),
            control_socket: true,
            run_dir: ctl::run_dir(),
            program_dirs: Vec::new(),
            ack_timeout_frames: None,
            ready_timeout: Duration::from_secs(10),
            host: None,
            link: None,
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("duration", &self.duration)
            .field("run_dir", &self.run_dir)
            .field("link", &self.link.as_ref().map(|l| l.host()))
            .finish_non_exhaustive()
    }
}

/// Why a run could not start or failed.
#[derive(Debug, Error)]
pub enum RunError {
    /// The cell table is malformed, or the schedule names cells it lacks
    /// (file, line, column).
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The cell storage could not be made.
    #[error("cells: {0}")]
    Storage(String),
    /// An in-process subsystem has no implementation here.
    #[error("{}:{}: subsystem '{name}': {message}", path.display(), location)]
    NoSubsystem {
        /// The schedule.
        path: PathBuf,
        /// Where the subsystem is declared.
        location: crate::schedule::Location,
        /// The subsystem.
        name: String,
        /// Why.
        message: String,
    },
    /// A program the schedule names is not found.
    #[error(
        "{}:{}: subsystem '{name}': program '{program}' not found (a bare name is looked up next to ictus, in its examples/ folder and in PATH; build examples with `cargo build --examples`)",
        path.display(), location
    )]
    NoProgram {
        /// The schedule.
        path: PathBuf,
        /// Where the subsystem is declared.
        location: crate::schedule::Location,
        /// The subsystem.
        name: String,
        /// The program.
        program: String,
    },
    /// A program the schedule names is a file no one may execute.
    #[error(
        "{}:{}: subsystem '{name}': program '{}' is not executable (chmod +x it, or name another)",
        path.display(), location, program.display()
    )]
    NotExecutable {
        /// The schedule.
        path: PathBuf,
        /// Where the subsystem is declared.
        location: crate::schedule::Location,
        /// The subsystem.
        name: String,
        /// The program found.
        program: PathBuf,
    },
    /// A subsystem on another host of a run across hosts.
    #[error(
        "{}:{}: subsystem '{name}' runs on host '{host}': a run across hosts needs a link to them (RunOptions::link; `ictus run` makes one, and `ictus node` runs the other hosts)",
        path.display(), location
    )]
    OtherHost {
        /// The schedule.
        path: PathBuf,
        /// Where the subsystem is declared.
        location: crate::schedule::Location,
        /// The subsystem.
        name: String,
        /// Its host.
        host: String,
    },
    /// A program could not be started.
    #[error(
        "{}:{}: subsystem '{name}': cannot start '{program}': {source}",
        path.display(), location
    )]
    Launch {
        /// The schedule.
        path: PathBuf,
        /// Where the subsystem is declared.
        location: crate::schedule::Location,
        /// The subsystem.
        name: String,
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A subsystem failed in `init` (or its process exited before it was ready).
    #[error("subsystem '{name}' did not start: {message}")]
    Init {
        /// The subsystem.
        name: String,
        /// Why.
        message: String,
    },
    /// The control socket.
    #[error(transparent)]
    Ctl(#[from] CtlError),
    /// The control block's shared memory.
    #[error("control block: {0}")]
    Control(String),
    /// The hubs could not be made.
    #[error("hubs: {0}")]
    Hubs(String),
}

impl RunError {
    /// Whether the error is in the schedule or the command line (the user can fix
    /// it, and nothing was started): the CLI's exit code 2.
    pub fn is_bad_input(&self) -> bool {
        match self {
            RunError::Schedule(_)
            | RunError::NoSubsystem { .. }
            | RunError::NoProgram { .. }
            | RunError::NotExecutable { .. } => true,
            // The program is not one the kernel can run (no #! line, a format it
            // does not know, no permission): the schedule names the wrong file.
            RunError::Launch { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
                    || ictus_os::process::is_exec_format_error(source)
            }
            RunError::Ctl(e) => matches!(
                e,
                CtlError::BadName { .. }
                    | CtlError::PathTooLong { .. }
                    | CtlError::NameTaken { .. }
            ),
            _ => false,
        }
    }
}

/// The built-in subsystems `ictus run` hosts in-process: `increment` (the stress
/// test's ring: copies cell `from` to cell `to`, adding one to every element) and
/// `idle` (does nothing; a placeholder).
pub fn builtin(spec: &SubsystemSpec) -> Result<Box<dyn Subsystem>, String> {
    match spec.builtin.as_deref() {
        Some("increment") => Ok(Box::new(crate::stress::Increment::new())),
        Some("idle") => Ok(Box::new(Idle)),
        Some(other) => Err(format!(
            "unknown builtin '{other}' (ictus run hosts increment and idle; link ictus-exec to host your own)"
        )),
        None => Err(
            "in-process subsystems under `ictus run` name a builtin (increment, idle); \
             run your own from a program that calls ictus_exec::run::run, or as a process"
                .to_string(),
        ),
    }
}

/// A subsystem that does nothing.
#[derive(Debug, Default)]
pub struct Idle;

impl Subsystem for Idle {
    fn init(&mut self, _reg: &mut Registry) -> Result<(), RegistryError> {
        Ok(())
    }
    fn run(&mut self, _frame: &mut crate::subsystem::Frame) {}
}

/// Name of the control block's segment of run `name`.
pub fn control_segment(name: &str) -> String {
    format!("{name}.ctl")
}

/// Name of the cells' segment of run `name`.
pub fn cells_segment(name: &str) -> String {
    format!("{name}.cells")
}

/// Name of the hubs' segment of run `name`.
pub fn hubs_segment(name: &str) -> String {
    format!("{name}.hubs")
}

/// The environment a launched program finds its run in.
pub(crate) mod env {
    /// The run's name.
    pub(crate) const RUN: &str = "ICTUS_RUN";
    /// The schedule file (absolute).
    pub(crate) const SCHEDULE: &str = "ICTUS_SCHEDULE";
    /// The subsystem the program is to run.
    pub(crate) const SUBSYSTEM: &str = "ICTUS_SUBSYSTEM";
    /// Its slot in the control block.
    pub(crate) const SLOT: &str = "ICTUS_SLOT";
    /// Where it writes its [`super::ThreadOutcome`].
    pub(crate) const OUTCOME: &str = "ICTUS_OUTCOME";
    /// The control socket (setup channel).
    pub(crate) const SOCKET: &str = "ICTUS_SOCKET";
}

/// The program a schedule names: a path with a slash is relative to the schedule's
/// folder; a bare name is looked up in `dirs`, next to the running executable, in its
/// `examples/` folder (and its parent's, for test binaries), then in `PATH`.
pub fn resolve_program(program: &str, schedule_dir: &Path, dirs: &[PathBuf]) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            schedule_dir.join(p)
        };
        return p.is_file().then_some(p);
    }
    let mut candidates: Vec<PathBuf> = dirs.to_vec();
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        candidates.push(dir.to_path_buf());
        candidates.push(dir.join("examples"));
        if let Some(up) = dir.parent() {
            candidates.push(up.to_path_buf());
            candidates.push(up.join("examples"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    // As execvp does: the first executable file of the name (a plain file without
    // an execute bit is passed over, and reported only if nothing else is found).
    let found: Vec<PathBuf> = candidates
        .into_iter()
        .map(|d| d.join(program))
        .filter(|p| p.is_file())
        .collect();
    found
        .iter()
        .find(|p| is_executable(p))
        .or(found.first())
        .cloned()
}

/// Whether `path` is a file with an execute bit (root may execute any file with
/// one; others need theirs, which `spawn` reports precisely if missing).
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `schedule` (see the module documentation). `factory` makes the in-process
/// subsystems ([`builtin`] is what `ictus run` uses).
pub fn run(
    schedule: &Schedule,
    factory: &mut Factory<'_>,
    mut options: RunOptions,
) -> Result<RunReport, RunError> {
    // 1. Everything that can be refused, before anything starts.
    let table = schedule.cell_table()?;
    let mut link = options.link.take();
    let here = link.as_ref().map_or(0, |l| l.host());
    let local = Local::resolve(schedule, factory, &options, link.is_some(), here)?;
    let staged = Staged::make(schedule, &table, &options, local, link.as_deref(), here)?;
    let Staged {
        here,
        local,
        mut in_process,
        programs,
        initial,
        commands: cmd_rx,
        store,
        names,
        states,
        hubs,
        control,
        cells,
        server,
        affinity_before,
    } = staged;
    let n = schedule.subsystems.len();
    let tick = schedule.tick;
    let mut log = StateLog::new(initial);

    // 2. Groups.
    let groups = prepare::groups(schedule);

    // 3. Start.
    control.beat(monotonic_now());
    let mut events = Vec::new();
    let mut warnings = Vec::new();
    let mut children: Vec<ChildProc> = Vec::new();
    let abort_flag = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| -> Result<RunReport, RunError> {
        let mut handles = Vec::new();
        for (k, mut sub) in in_process.drain(..) {
            let spec = &schedule.subsystems[k];
            let prepared = Prepared {
                schedule,
                spec,
                slot: k,
                control: &control,
                cells: cells.clone(),
                states: &states,
                names: &names,
                setup: SetupClient::local(store.clone()),
                hubs: hubs.clone(),
                group: spec.group.as_ref().and_then(|g| groups.get(g)),
                heartbeat_timeout: None,
            };
            let abort = &abort_flag;
            let h = std::thread::Builder::new()
                .name(format!("ictus-{}", spec.name))
                .spawn_scoped(scope, move || {
                    // Relaxed: a stop request, polled.
                    prepared.run(sub.as_mut(), &mut || abort.load(Ordering::Relaxed))
                })
                .map_err(|e| RunError::Init {
                    name: spec.name.clone(),
                    message: e.to_string(),
                })?;
            handles.push((k, h));
        }
        let socket = server.as_ref().map(|s| s.path().to_path_buf());
        let schedule_abs = std::fs::canonicalize(&schedule.path).unwrap_or(schedule.path.clone());
        for Launch {
            slot: k,
            path,
            args,
            program,
        } in &programs
        {
            let spec = &schedule.subsystems[*k];
            let outcome_file = options
                .run_dir
                .join(format!("{}.{}.outcome.json", schedule.name, spec.name));
            let _ = std::fs::remove_file(&outcome_file);
            let mut cmd = ProcessCommand::new(path);
            cmd.args(args)
                .env(env::RUN, &schedule.name)
                .env(env::SCHEDULE, &schedule_abs)
                .env(env::SUBSYSTEM, &spec.name)
                .env(env::SLOT, k.to_string())
                .env(env::OUTCOME, &outcome_file);
            if let Some(s) = &socket {
                cmd.env(env::SOCKET, s);
            }
            // A process group of its own: a terminal's Ctrl-C (sent to the whole
            // foreground group) reaches the coordinator, which stops every
            // subsystem at a major-frame boundary, never the child directly.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            // A run killed outright (kill -9) takes its programs with it, also
            // ones that never joined it (they cannot watch the heartbeat).
            ictus_os::process::die_with_parent(&mut cmd);
            match cmd.spawn() {
                Ok(child) => children.push(ChildProc {
                    slot: *k,
                    child,
                    program: program.clone(),
                    exited: None,
                    outcome_file,
                }),
                Err(e) => {
                    abort_flag.store(true, Ordering::Relaxed);
                    control.abort();
                    kill_all(&mut children);
                    return Err(RunError::Launch {
                        path: schedule.path.clone(),
                        location: spec.location,
                        name: spec.name.clone(),
                        program: program.clone(),
                        source: e,
                    });
                }
            }
        }

        // 4. Wait until every subsystem is ready.
        let ready_by = monotonic_now() + Nanos::from(options.ready_timeout);
        let mut linked = false;
        let mut start: Option<Start> = None;
        let failure = loop {
            control.beat(monotonic_now());
            let mut all_ready = true;
            let mut failed = None;
            for &k in &local {
                match control.slot(k).status() {
                    Status::Ready => {}
                    Status::Failed => failed = Some((k, "init failed".to_string())),
                    _ => all_ready = false,
                }
            }
            for c in &mut children {
                if let Ok(Some(status)) = c.child.try_wait() {
                    failed = Some((
                        c.slot,
                        format!("its process exited before it was ready ({status})"),
                    ));
                }
            }
            for (k, h) in &handles {
                if h.is_finished() && control.slot(*k).status() != Status::Ready {
                    failed = Some((*k, "its thread ended before it was ready".to_string()));
                }
            }
            if let Some(f) = failed {
                break Some(f);
            }
            // Across hosts: once this host is ready, the link forwards its cells
            // and tells the others; the main coordinator waits for every host, a
            // node for the start.
            let mut waiting_hosts = Vec::new();
            if all_ready && let Some(l) = link.as_mut() {
                if !linked {
                    linked = true;
                    let writes = local_writes(&cells, &control, &local);
                    if let Err(e) = l.ready(&cells, &writes) {
                        break Some((local.first().copied().unwrap_or(0), e));
                    }
                }
                if here == 0 {
                    waiting_hosts = l.waiting_for();
                } else {
                    start = l.start();
                    if start.is_none() {
                        waiting_hosts.push(0);
                    }
                }
            }
            if all_ready && waiting_hosts.is_empty() {
                break None;
            }
            if monotonic_now() > ready_by {
                let slow = local
                    .iter()
                    .copied()
                    .find(|&k| control.slot(k).status() != Status::Ready);
                let why = match slow {
                    Some(_) => format!("not ready after {:?}", options.ready_timeout),
                    None => {
                        let hosts: Vec<&str> = waiting_hosts
                            .iter()
                            .map(|&h| schedule.hosts[h].name.as_str())
                            .collect();
                        format!(
                            "ready, but host(s) {} not after {:?}",
                            hosts.join(", "),
                            options.ready_timeout
                        )
                    }
                };
                break Some((slow.or(local.first().copied()).unwrap_or(0), why));
            }
            // Commands and the status hook are served while waiting too, so
            // Ctrl-C and `ictus ctl stop` end a start-up that never completes.
            let snapshot = || {
                let extras = starting(link.as_deref(), &events);
                live_now(schedule, &control, &states, &cells, &log, 0, extras)
            };
            while let Ok(cmd) = cmd_rx.try_recv() {
                match cmd {
                    Command::State(_, reply) => {
                        let _ = reply.send(
                            "error the run is starting: its subsystems are not all ready yet"
                                .into(),
                        );
                    }
                    Command::Status(reply) => {
                        let s = snapshot();
                        let _ = reply.send(serde_json::to_string(&s).unwrap_or_default());
                    }
                    Command::Stop(reply) => {
                        options.stop.store(true, Ordering::Relaxed);
                        let _ = reply.send("ok stopping".into());
                    }
                }
            }
            if let Some(cb) = options.on_status.as_mut() {
                cb(&snapshot());
            }
            // Relaxed: a stop request, polled.
            if options.stop.load(Ordering::Relaxed) {
                let waiting = local
                    .iter()
                    .copied()
                    .find(|&k| control.slot(k).status() != Status::Ready)
                    .or(local.first().copied())
                    .unwrap_or(0);
                break Some((
                    waiting,
                    "stopped before the start, while it was not ready".to_string(),
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if let Some((k, why)) = failure {
            abort_flag.store(true, Ordering::Relaxed);
            control.abort();
            let mut message = why;
            for (hk, h) in handles {
                if let Ok(Err(e)) = h.join()
                    && hk == k
                {
                    message = e;
                }
            }
            wait_children(&mut children, Duration::from_secs(2));
            return Err(RunError::Init {
                name: names[k].clone(),
                message,
            });
        }

        // 5. The epoch.
        // Across hosts, changes are announced further ahead (they travel with the
        // tick) and the epoch leaves the start time to reach every host.
        let (lead, epoch_lead) = if link.is_some() {
            (Nanos::from_millis(100), Nanos::from_millis(300))
        } else {
            (Nanos::from_millis(20), Nanos::from_millis(30))
        };
        let lead = lead.max(tick * 2);
        let major = schedule.major_frame;
        let mut stop_frame = u64::MAX;
        let epoch = match start {
            // A node: the main coordinator's start, on this host's clock.
            Some(s) if s.tick != tick => {
                abort_flag.store(true, Ordering::Relaxed);
                control.abort();
                wait_children(&mut children, Duration::from_secs(2));
                return Err(RunError::Init {
                    name: names[local.first().copied().unwrap_or(0)].clone(),
                    message: format!(
                        "the main host runs a tick of {}, this host {}: give both the same \
                         schedule and --tick",
                        s.tick, tick
                    ),
                });
            }
            Some(s) => {
                let word = s.state;
                log.command(word.previous, 0);
                if word.next != word.previous {
                    log.command(word.next, word.from_frame);
                }
                control.set_state(word);
                stop_frame = s.stop_frame;
                control.set_stop_frame(stop_frame);
                s.epoch
            }
            None => {
                if let Some(d) = options.duration {
                    let frames = Nanos::from(d).as_u64().div_ceil(tick.as_u64());
                    stop_frame = frames.div_ceil(major) * major;
                    control.set_stop_frame(stop_frame);
                }
                let epoch = monotonic_now() + epoch_lead.max(tick * 4);
                if let Some(l) = link.as_mut() {
                    let s = Start {
                        epoch,
                        stop_frame,
                        state: control.state(),
                        tick,
                    };
                    if let Err(e) = l.begin(s) {
                        abort_flag.store(true, Ordering::Relaxed);
                        control.abort();
                        wait_children(&mut children, Duration::from_secs(2));
                        return Err(RunError::Init {
                            name: names[local.first().copied().unwrap_or(0)].clone(),
                            message: e,
                        });
                    }
                }
                epoch
            }
        };
        control.beat(monotonic_now());
        control.set_epoch(epoch);
        let frame_now = |now: Nanos| now.saturating_sub(epoch).as_u64() / tick.as_u64();
        let ack_timeout = options
            .ack_timeout_frames
            .unwrap_or_else(|| (1_000_000_000 / tick.as_u64()).max(1));
        let mut reported: Vec<bool> = vec![false; n];
        let mut queue: Vec<(StateId, String, mpsc::Sender<String>)> = Vec::new();
        let mut last_status = monotonic_now();
        let mut complete = true;
        let mut stop_requested = false;
        let mut killed = false;
        let mut torn_seen: Vec<u64> = vec![0; n];
        let mut thread_failed: Vec<bool> = vec![false; n];
        let mut hosts_left: BTreeSet<usize> = BTreeSet::new();
        let mut remote_failed: Vec<bool> = vec![false; n];

        // 6. Coordinate.
        loop {
            let now = monotonic_now();
            control.beat(now);
            let f = frame_now(now);
            // Children that died.
            for c in &mut children {
                if c.exited.is_none()
                    && let Ok(Some(status)) = c.child.try_wait()
                {
                    let view = control.slot(c.slot).view();
                    let clean = view.status == Status::Finished;
                    let what = describe_exit(status);
                    c.exited = Some(what.clone());
                    if !clean {
                        control.slot(c.slot).set_status(Status::Failed);
                        let recovered = recover_writer(&cells, &control, c.slot);
                        let msg = format!(
                            "{}: its process ({}) {what} after frame {}; its frames count as lost{}",
                            names[c.slot],
                            c.program,
                            view.last_frame.map_or("-".to_string(), |v| v.to_string()),
                            if recovered > 0 {
                                format!(", {recovered} cell(s) it was writing reopened")
                            } else {
                                String::new()
                            }
                        );
                        events.push(format!("frame {f}: {msg}"));
                        warnings.push(RunWarning {
                            id: "crash".into(),
                            message: msg,
                            advice: Some(
                                "the other subsystems kept their beat; rerun with `ictus run` \
                                 (no cleanup needed)"
                                    .into(),
                            ),
                        });
                    }
                }
            }
            // Subsystem threads that panicked (their guard marked the slot failed
            // and left their group, so its other members end too).
            for (k, h) in &handles {
                if !thread_failed[*k]
                    && h.is_finished()
                    && control.slot(*k).status() == Status::Failed
                {
                    thread_failed[*k] = true;
                    let view = control.slot(*k).view();
                    let msg = format!(
                        "{}: its thread panicked after frame {}; its frames count as lost",
                        names[*k],
                        view.last_frame.map_or("-".to_string(), |v| v.to_string()),
                    );
                    events.push(format!("frame {f}: {msg}"));
                    warnings.push(RunWarning {
                        id: "crash".into(),
                        message: msg,
                        advice: Some(
                            "the other subsystems kept their beat (a synchronous group ends \
                             with its member); its panic message is on stderr"
                                .into(),
                        ),
                    });
                }
            }
            // Cells whose writer stopped half way through a write.
            for (k, seen) in torn_seen.iter_mut().enumerate() {
                let view = control.slot(k).view();
                if view.torn > *seen {
                    let (msg, advice) = torn_message(&cells, &control, &names, k, &view);
                    *seen = view.torn;
                    events.push(format!("frame {f}: {msg}"));
                    warnings.push(RunWarning {
                        id: "cell-torn".into(),
                        message: msg,
                        advice: Some(advice),
                    });
                }
            }
            // The other hosts.
            if let Some(l) = link.as_mut() {
                for event in l.poll(&control, &local) {
                    let what = LinkTurn {
                        schedule,
                        control: &control,
                        here,
                        frame: f,
                        lead,
                        epoch,
                    };
                    match what.apply(event, &mut log, &mut hosts_left, &mut remote_failed) {
                        Turn::Nothing => {}
                        Turn::Event(e) => events.push(e),
                        Turn::Warning(e, w) => {
                            events.push(e);
                            warnings.push(w);
                        }
                    }
                }
                if here != 0 {
                    // The main coordinator's stop (and one a lost main set).
                    stop_frame = stop_frame.min(control.stop_frame());
                } else {
                    l.command(control.state(), stop_frame);
                }
            }
            // The live view (`ictus ctl status`, the status hook), when asked for.
            let snapshot = |log: &StateLog, events: &[String]| {
                let extras = running(
                    link.as_deref(),
                    &hosts_left,
                    events,
                    epoch,
                    stop_frame,
                    stop_requested,
                );
                live_now(schedule, &control, &states, &cells, log, f, extras)
            };
            // Commands.
            while let Ok(cmd) = cmd_rx.try_recv() {
                match cmd {
                    Command::State(_, reply) if here != 0 => {
                        let _ = reply.send(format!(
                            "error this host follows the main coordinator on host {}: \
                             command the run there",
                            schedule.hosts[0].name
                        ));
                    }
                    Command::State(name, reply) => match states.id(&name) {
                        Some(id) => queue.push((id, name, reply)),
                        None => {
                            let _ = reply.send(format!(
                                "error unknown state '{name}' (states: {})",
                                states.names().join(", ")
                            ));
                        }
                    },
                    Command::Status(reply) => {
                        let s = snapshot(&log, &events);
                        let _ = reply.send(serde_json::to_string(&s).unwrap_or_default());
                    }
                    Command::Stop(reply) => {
                        options.stop.store(true, Ordering::Relaxed);
                        let _ = reply.send("ok stopping".into());
                    }
                }
            }
            // One transition at a time: the next once the last is in force.
            if !queue.is_empty() && f >= log.since() {
                let (id, name, reply) = queue.remove(0);
                let at = executive::announce_frame(epoch, tick, major, now, lead);
                if at >= stop_frame {
                    let _ = reply.send(format!(
                        "error the run stops at frame {stop_frame}, before the change could take effect"
                    ));
                } else {
                    let word = log.command(id, at);
                    control.set_state(word);
                    check_announcement(&mut warnings, epoch, tick, at, "state change");
                    reported.iter_mut().for_each(|r| *r = false);
                    events.push(format!("frame {f}: state {name} commanded from frame {at}"));
                    let _ = reply.send(format!("ok {} from frame {at}", states.name(id)));
                }
            }
            // Acknowledgements.
            let word = control.state();
            let acks: Vec<(&str, Option<state::Ack>)> = (0..n)
                .filter(|&k| here == 0 || schedule.subsystems[k].host == here)
                .filter(|k| !hosts_left.contains(&schedule.subsystems[*k].host))
                .map(|k| (names[k].as_str(), control.slot(k).ack()))
                .collect();
            for p in state::pending(word, f.min(stop_frame), acks) {
                let k = names.iter().position(|x| *x == p.subsystem).unwrap_or(0);
                if p.frames >= ack_timeout
                    && !reported[k]
                    && control.slot(k).status() == Status::Running
                {
                    reported[k] = true;
                    let msg = ack_message(&p, &states);
                    events.push(format!("frame {f}: {msg}"));
                    warnings.push(RunWarning {
                        id: "ack-timeout".into(),
                        message: msg,
                        advice: Some("a subsystem that acknowledges explicitly calls frame.ack(state) once it has reached the state".into()),
                    });
                }
            }
            // Status.
            if let Some(cb) = options.on_status.as_mut()
                && now.saturating_sub(last_status) >= Nanos::from(options.status_every)
            {
                last_status = now;
                cb(&snapshot(&log, &events));
            }
            // Stop on request (Ctrl-C, `ictus ctl stop`), at the first major frame that
            // can still be announced, unless the duration ends the run before.
            // Relaxed: a stop request, polled.
            if !stop_requested && options.stop.load(Ordering::Relaxed) {
                stop_requested = true;
                let at = executive::announce_frame(epoch, tick, major, now, lead);
                if at < stop_frame {
                    stop_frame = at;
                    control.set_stop_frame(at);
                    check_announcement(&mut warnings, epoch, tick, at, "stop");
                    complete = options.duration.is_none();
                }
            }
            if stop_frame != u64::MAX {
                let stop_at = epoch + tick * stop_frame;
                let threads_done = handles.iter().all(|(_, h)| h.is_finished());
                let children_done = children
                    .iter_mut()
                    .all(|c| c.exited.is_some() || matches!(c.child.try_wait(), Ok(Some(_))));
                if threads_done && children_done && now >= stop_at {
                    break;
                }
                if !killed && now > stop_at + Nanos::from_secs(5) {
                    // A program that does not leave is ended.
                    killed = true;
                    kill_all(&mut children);
                    events.push(format!(
                        "frame {f}: programs still running 5 s after the stop were killed"
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for (_, reply) in queue.drain(..).map(|(_, n, r)| (n, r)) {
            let _ = reply.send("error the run ended".into());
        }

        // 7. Gather.
        let mut outcomes: BTreeMap<usize, ThreadOutcome> = BTreeMap::new();
        for (k, h) in handles {
            match h.join() {
                Ok(Ok(o)) => {
                    outcomes.insert(k, o);
                }
                Ok(Err(e)) => events.push(format!("{}: {e}", names[k])),
                Err(_) if thread_failed[k] => {}
                Err(_) => events.push(format!("{}: its thread panicked", names[k])),
            }
        }
        for c in &mut children {
            if let Ok(text) = std::fs::read_to_string(&c.outcome_file)
                && let Ok(o) = serde_json::from_str::<ThreadOutcome>(&text)
            {
                outcomes.insert(c.slot, o);
            }
            let _ = std::fs::remove_file(&c.outcome_file);
        }
        // Across hosts: the main coordinator collects the others' outcomes; a node
        // hands its own over.
        let mut hosts = Vec::new();
        if let Some(l) = link.as_mut() {
            let (theirs, reports) = l.finish(&outcomes, Duration::from_secs(10));
            hosts.push(l.report());
            hosts.extend(reports);
            for (k, o) in theirs {
                if schedule.subsystems.get(k).is_some_and(|s| s.host != here) {
                    outcomes.insert(k, o);
                }
            }
        }
        let mut subsystems = Vec::new();
        for (k, spec) in schedule.subsystems.iter().enumerate() {
            // A node reports its own subsystems; the main coordinator all of them.
            if here != 0 && spec.host != here {
                continue;
            }
            let view = control.slot(k).view();
            let outcome = outcomes.remove(&k);
            let (frames_run, overruns, streak) = match &outcome {
                Some(o) => (o.frames_run, o.overruns, o.longest_overrun_streak),
                None => (view.frames_run, view.overruns, view.longest_streak),
            };
            for w in outcome.iter().flat_map(|o| o.warnings.iter()) {
                warnings.push(w.clone());
            }
            let due = spec.releases_before(stop_frame);
            let crashed = children
                .iter()
                .find(|c| c.slot == k)
                .and_then(|c| c.exited.clone().filter(|_| outcome.is_none()));
            let lost = due.saturating_sub(frames_run + overruns);
            if lost > 0 {
                // Frames a subsystem was due and neither ran nor overran: it
                // crashed, left (a child that lost its coordinator), or never
                // started. The figures cover only part of the run.
                complete = false;
                let why = match (&crashed, outcome.as_ref().map(|o| o.end.as_str())) {
                    (Some(c), _) => format!("its process {c}"),
                    (None, None) if hosts_left.contains(&spec.host) => {
                        format!("its host {} left the run", schedule.hosts[spec.host].name)
                    }
                    (None, None) if spec.host != here => {
                        format!("its host {} sent no report", schedule.hosts[spec.host].name)
                    }
                    (None, Some("coordinator-gone")) => {
                        "it left the run: it found the coordinator gone".to_string()
                    }
                    (None, Some("group-broken")) => {
                        "a member of its synchronous group left the run".to_string()
                    }
                    (None, Some(end)) => format!("its loop ended early ({end})"),
                    (None, None) => "it sent no report".to_string(),
                };
                let msg = format!(
                    "{}: {lost} of its {due} frames were lost ({why})",
                    spec.name
                );
                events.push(msg.clone());
                warnings.push(RunWarning {
                    id: "frames-lost".into(),
                    message: msg,
                    advice: Some(
                        "the figures of this run cover only part of it; `ictus run` exits \
                         with code 3 when frames were lost"
                            .into(),
                    ),
                });
            }
            subsystems.push(SubsystemReport {
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
                crashed,
                outcome,
            });
        }
        // The stress check reads the counters in this host's table: the main one's
        // holds every host's cells.
        let stress = schedule.stress.as_ref().filter(|_| here == 0).map(|s| {
            crate::stress::check(&cells, &s.counters, log.frames_in(StateId::RUN, stop_frame))
        });
        let mut state_frames = BTreeMap::new();
        for (i, name) in states.names().iter().enumerate() {
            let frames = log.frames_in(StateId(i as u8), stop_frame);
            if frames > 0 {
                state_frames.insert(name.clone(), frames);
            }
        }
        Ok(RunReport {
            name: schedule.name.clone(),
            schedule: schedule.path.clone(),
            tick_ns: tick.as_u64(),
            major_frame: major,
            wait: schedule.wait.mode(Nanos::ZERO).name().to_string(),
            frames: stop_frame,
            state_frames,
            transitions: log
                .changes()
                .iter()
                .map(|&(f, s)| (f, states.name(s).to_string()))
                .collect(),
            subsystems,
            stress: stress
                .transpose()
                .map_err(|e| RunError::Storage(e.to_string()))?,
            warnings: dedup(warnings),
            events,
            complete,
            hosts,
        })
    });
    kill_all(&mut children);
    drop(server);
    if let Some(a) = affinity_before {
        let _ = sched::set_affinity(&a);
    }
    outcome
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

/// What the coordinator's loop makes of a [`LinkEvent`].
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
        remote_failed: &mut [bool],
    ) -> Turn {
        let f = self.frame;
        let host_name = |h: usize| self.schedule.hosts.get(h).map_or("?", |x| x.name.as_str());
        match event {
            LinkEvent::Joined(h) if hosts_left.remove(&h) => {
                Turn::Event(format!("frame {f}: host {} is back", host_name(h)))
            }
            LinkEvent::Joined(_) => Turn::Nothing,
            LinkEvent::Left(h) if hosts_left.contains(&h) => Turn::Nothing,
            LinkEvent::Left(h) => {
                hosts_left.insert(h);
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
                        host_name(0)
                    );
                    return Turn::Warning(
                        format!("frame {f}: {msg}"),
                        RunWarning {
                            id: "host-lost".into(),
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
                    return Turn::Event(format!("frame {f}: host {} left the run", host_name(h)));
                }
                let mut lost = Vec::new();
                for (k, spec) in self.schedule.subsystems.iter().enumerate() {
                    if spec.host == h && self.control.slot(k).status() != Status::Finished {
                        self.control.slot(k).set_status(Status::Failed);
                        lost.push(spec.name.as_str());
                    }
                }
                if lost.is_empty() {
                    return Turn::Event(format!("frame {f}: host {} left the run", host_name(h)));
                }
                let msg = format!(
                    "host {} left the run at frame {f}: the frames of {} count as lost from there",
                    host_name(h),
                    lost.join(", ")
                );
                Turn::Warning(
                    format!("frame {f}: {msg}"),
                    RunWarning {
                        id: "host-lost".into(),
                        message: msg,
                        advice: Some(
                            "the other hosts kept their beat; see why the host went (its \
                             `ictus node` output, its link)"
                                .into(),
                        ),
                    },
                )
            }
            LinkEvent::Control { state, stop_frame } => {
                if state != self.control.state() {
                    log.command(state.next, state.from_frame);
                    self.control.set_state(state);
                }
                self.control.set_stop_frame(stop_frame);
                Turn::Nothing
            }
            LinkEvent::Remote(r) => {
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
                });
                if let Some(a) = crate::state::Ack::unpack(r.ack) {
                    slot.acknowledge(a);
                }
                let status = r.status();
                if slot.status() != status {
                    slot.set_status(status);
                }
                if status == Status::Failed && !remote_failed[r.slot] {
                    remote_failed[r.slot] = true;
                    let msg = format!(
                        "{} on host {}: it failed after frame {} (reported by its host); its \
                         frames count as lost",
                        spec.name,
                        host_name(spec.host),
                        if r.last_frame == u64::MAX {
                            "-".to_string()
                        } else {
                            r.last_frame.to_string()
                        }
                    );
                    return Turn::Warning(
                        format!("frame {f}: {msg}"),
                        RunWarning {
                            id: "crash".into(),
                            message: msg,
                            advice: Some(
                                "the other subsystems kept their beat; its host's `ictus node` \
                                 output says why"
                                    .into(),
                            ),
                        },
                    );
                }
                Turn::Nothing
            }
        }
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

fn dedup(warnings: Vec<RunWarning>) -> Vec<RunWarning> {
    let mut out: Vec<RunWarning> = Vec::new();
    for w in warnings {
        if !out.iter().any(|o| o.id == w.id && o.message == w.message) {
            out.push(w);
        }
    }
    out
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
            id: "late-announcement".into(),
            message: format!(
                "the {what} for frame {frame} was announced only at frame {}; a subsystem may have missed it",
                now.saturating_sub(epoch).as_u64() / tick.as_u64()
            ),
            advice: Some("the coordinator was delayed: keep a CPU free of real-time work for it".into()),
        });
    }
}

/// The live snapshot now (see [`crate::live`]).
fn live_now(
    schedule: &Schedule,
    control: &Control,
    states: &States,
    cells: &Cells,
    log: &StateLog,
    frame: u64,
    extras: Extras<'_>,
) -> LiveStatus {
    crate::live::snapshot(schedule, control, states, log, frame, Some(cells), extras)
}

/// A live snapshot's extras while subsystems start.
fn starting<'a>(link: Option<&dyn Link>, events: &'a [String]) -> Extras<'a> {
    Extras {
        starting: true,
        ..link_extras(link, &BTreeSet::new(), events)
    }
}

/// A live snapshot's extras once the epoch is set.
fn running<'a>(
    link: Option<&dyn Link>,
    hosts_left: &BTreeSet<usize>,
    events: &'a [String],
    epoch: Nanos,
    stop_frame: u64,
    stopping: bool,
) -> Extras<'a> {
    Extras {
        epoch: Some(epoch),
        stop_frame: (stop_frame != u64::MAX).then_some(stop_frame),
        stopping,
        ..link_extras(link, hosts_left, events)
    }
}

/// What the link knows for a live snapshot: its hosts (those that left marked so)
/// and the cells' last copies.
fn link_extras<'a>(
    link: Option<&dyn Link>,
    hosts_left: &BTreeSet<usize>,
    events: &'a [String],
) -> Extras<'a> {
    let mut hosts = link.map_or_else(Vec::new, |l| l.live_hosts());
    for (h, host) in hosts.iter_mut().enumerate() {
        if hosts_left.contains(&h) {
            host.alive = false;
        }
    }
    Extras {
        events,
        hosts,
        arrivals: link.map_or_else(Vec::new, |l| l.cell_arrivals()),
        here: link.map_or(0, |l| l.host()),
        ..Extras::default()
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
