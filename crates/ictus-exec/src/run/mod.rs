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

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use ictus_core::histogram::HistogramData;
use ictus_core::{LatencyHistogram, Summary};
use ictus_os::clock::monotonic_now;
use ictus_os::sched;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ctl::{self, CtlError};
use crate::link::{HostReport, Link};
use crate::schedule::{Schedule, ScheduleError, SubsystemSpec};
use crate::subsystem::{BoxError, Flow, Frame, Maker, Registry, RegistryError, Subsystem};

// The phases of `run`, a file each: prepare (what can refuse a run, made before
// anything starts; the groups), start (threads, programs, the wait until ready,
// the epoch), coordinate (the loop, one method per concern), gather (the report).
// Beside them: thread (a subsystem's own side, also a launched program's),
// children (reaping programs with a bound), snapshot (the live view).
mod children;
mod coordinate;
mod gather;
mod prepare;
mod snapshot;
mod start;
mod thread;
mod watch;

use children::{ChildProc, kill_all};
use prepare::{Local, Staged};
use start::Startup;
use watch::Watch;

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

/// A shortfall with advice (a refused policy, an unlocked memory, ...): the same type
/// as a probe record's warnings.
pub type RunWarning = ictus_core::warning::Warning;
pub use ictus_core::warning::WarningId;

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
    /// The last frame it ran.
    #[serde(default)]
    pub last_frame: Option<u64>,
    /// Frames whose `run` returned an error.
    #[serde(default)]
    pub errors: u64,
    /// The first of those errors (its frame, and its message with its sources).
    #[serde(default)]
    pub first_error: Option<(u64, String)>,
    /// The error its `shutdown` returned, if it did.
    #[serde(default)]
    pub shutdown_error: Option<String>,
    /// The misses of a subsystem in a process of its own, explained by that
    /// process's sampler (the run takes them into [`RunReport::explanation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<ictus_os::explain::Explanation>,
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
    /// Releases after it said it had finished ([`crate::subsystem::Flow::Finished`]):
    /// not due, not lost.
    #[serde(default)]
    pub finished_early: u64,
    /// Frames whose `run` returned an error.
    #[serde(default)]
    pub errors: u64,
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
    /// The CPU latency QoS in force for the whole run (asked for, held, or
    /// refused with why).
    #[serde(default)]
    pub pm_qos: Option<ictus_os::pm_qos::PmQosState>,
    /// Every miss of this host's subsystems explained (late releases past the
    /// threshold, skipped releases, overruns; a program's by its own sampler);
    /// absent with [`RunOptions::explain`] off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<ictus_os::explain::Explanation>,
}

pub use crate::live::{LiveStatus, LiveSubsystem};
pub(crate) use thread::{Finish, Prepared};
pub(crate) use watch::explain_program;

/// A callback that receives the live status.
pub type StatusHook = Box<dyn FnMut(&LiveStatus) + Send>;

/// Says how to make the in-process subsystem of a schedule line, or why it cannot
/// be made here.
pub type Factory<'a> = dyn FnMut(&SubsystemSpec) -> Result<Maker, String> + 'a;

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
    /// The CPU latency QoS held for the whole run, over the schedule's `pm_qos`
    /// (`None`: the schedule's, else 0 us, as cyclictest holds).
    pub pm_qos: Option<ictus_os::pm_qos::PmQos>,
    /// Explain every miss of this host's subsystems, from sampler threads off their
    /// CPUs (default on; off to measure what it costs).
    pub explain: bool,
    /// The lateness from which a release is a miss to explain, over the
    /// schedule's `explain_threshold` (`None`: the schedule's, else the tick).
    pub explain_threshold: Option<ictus_core::Nanos>,
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
            pm_qos: None,
            explain: true,
            explain_threshold: None,
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
    Storage(#[source] crate::cell::CellError),
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
    /// A subsystem given by name ([`crate::program::Executive::subsystem`]) that is
    /// not an in-process subsystem of the schedule.
    #[error(
        "{}: no in-process subsystem '{name}' (the schedule's in-process subsystems: {})",
        path.display(),
        if in_process.is_empty() { "none".to_string() } else { in_process.join(", ") }
    )]
    NotInSchedule {
        /// The schedule.
        path: PathBuf,
        /// The name given.
        name: String,
        /// The schedule's in-process subsystems.
        in_process: Vec<String>,
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
    /// A subsystem did not start: its `init` failed (its own error, kept whole), or
    /// its thread could not be made, or its process ended or was late.
    #[error("subsystem '{name}' did not start: {source}")]
    Init {
        /// The subsystem.
        name: String,
        /// Why.
        #[source]
        source: StartError,
    },
    /// The control socket.
    #[error(transparent)]
    Ctl(#[from] CtlError),
    /// The control block's shared memory.
    #[error("control block: {0}")]
    Control(#[source] crate::control::ControlError),
    /// The hubs could not be made.
    #[error("hubs: {0}")]
    Hubs(#[source] crate::hub::HubError),
}

/// Why a subsystem did not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// Its `init` returned an error: the subsystem's own (downcast it to its type;
    /// for a program, its message).
    #[error("{0}")]
    Subsystem(BoxError),
    /// Its thread could not be made.
    #[error("cannot make its thread: {0}")]
    Thread(#[source] std::io::Error),
    /// What the coordinator saw: its process ended before it was ready, it was not
    /// ready in time, the start-up of the hosts failed.
    #[error("{0}")]
    Start(String),
}

impl RunError {
    /// The error a subsystem's `init` returned, when that is why the run did not
    /// start: `run_error.subsystem_error()?.downcast_ref::<MyError>()`.
    pub fn subsystem_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            RunError::Init {
                source: StartError::Subsystem(e),
                ..
            } => Some(e.as_ref()),
            _ => None,
        }
    }

    /// Whether the error is in the schedule or the command line (the user can fix
    /// it, and nothing was started): the CLI's exit code 2.
    pub fn is_bad_input(&self) -> bool {
        match self {
            RunError::Schedule(_)
            | RunError::NoSubsystem { .. }
            | RunError::NotInSchedule { .. }
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
pub fn builtin(spec: &SubsystemSpec) -> Result<Maker, String> {
    match spec.builtin.as_deref() {
        Some("increment") => Ok(Maker::of::<crate::stress::Increment>()),
        Some("idle") => Ok(Maker::of::<Idle>()),
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
    type Error = RegistryError;
    fn init(_reg: &mut Registry) -> Result<Idle, RegistryError> {
        Ok(Idle)
    }
    fn run(&mut self, _frame: &mut Frame) -> Result<Flow, RegistryError> {
        Ok(Flow::Continue)
    }
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
    /// The lateness in nanoseconds from which a release is a miss to explain, or
    /// `off` (absent: not explained).
    pub(crate) const EXPLAIN: &str = "ICTUS_EXPLAIN";
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

/// What a run hands back beside its report, for [`crate::program::Outcome`].
#[derive(Default)]
pub(crate) struct Made {
    /// Each in-process subsystem that ended its loop, by name.
    pub(crate) subsystems: BTreeMap<String, Box<dyn std::any::Any + Send>>,
    /// The first error each one's `run` returned, by name.
    pub(crate) errors: BTreeMap<String, crate::executive::Fault>,
    /// The cells as the run left them.
    pub(crate) cells: Option<crate::program::CellValues>,
}

/// Runs `schedule` (see the module documentation). `factory` says how to make the
/// in-process subsystems ([`builtin`] is what `ictus run` uses;
/// [`crate::program::Executive`] makes one from the subsystems given by name).
pub fn run(
    schedule: &Schedule,
    factory: &mut Factory<'_>,
    options: RunOptions,
) -> Result<RunReport, RunError> {
    run_made(schedule, factory, options).map(|(report, _)| report)
}

/// [`run`], with what the run made.
pub(crate) fn run_made(
    schedule: &Schedule,
    factory: &mut Factory<'_>,
    mut options: RunOptions,
) -> Result<(RunReport, Made), RunError> {
    // 1. Everything that can be refused, before anything starts.
    let table = schedule.cell_table()?;
    let mut link = options.link.take();
    let here = link.as_ref().map_or(0, |l| l.host());
    let local = Local::resolve(schedule, factory, &options, link.is_some(), here)?;
    let mut staged = Staged::make(schedule, &table, &options, local, link.as_deref(), here)?;
    let in_process = std::mem::take(&mut staged.in_process);

    // 2. Groups; the CPU latency QoS and the sampler that explains misses, from the
    // coordinator's thread (already off the real-time CPUs).
    let groups = prepare::groups(schedule);
    let slots: Vec<usize> = in_process.iter().map(|(k, _)| *k).collect();
    let (watch, reporters) = Watch::begin(schedule, &options, &slots);
    staged.recent_misses = watch.recent();

    // 3. Start.
    staged.control.beat(monotonic_now());
    let mut children: Vec<ChildProc> = Vec::new();
    let abort_flag = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| -> Result<(RunReport, Made), RunError> {
        let handles = start::spawn(scope, &staged, &groups, &abort_flag, in_process, reporters)?;
        let mut startup = Startup::new(
            &staged,
            &mut options,
            &mut link,
            &mut children,
            &abort_flag,
            handles,
        );
        startup.launch()?;
        // 4. Wait until every subsystem is ready.
        let start = startup.wait_ready()?;
        // 5. The epoch.
        let mut coordinator = startup.epoch(start)?;
        // 6. Coordinate.
        coordinator.coordinate();
        // 7. Gather.
        coordinator.gather()
    });
    kill_all(&mut children);
    drop(staged.server.take());
    if let Some(a) = &staged.affinity_before {
        let _ = sched::set_affinity(a);
    }
    // 8. What was in force, and every miss explained (the loops have all ended).
    outcome.map(|(mut report, made)| {
        watch.end(&mut report, schedule, here);
        (report, made)
    })
}
