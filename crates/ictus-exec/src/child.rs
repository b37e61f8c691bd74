//! The entry point of a subsystem in its own process.
//!
//! `ictus run` launches the programs a schedule names with the run's coordinates in
//! the environment (`ICTUS_RUN`, `ICTUS_SCHEDULE`, `ICTUS_SUBSYSTEM`, `ICTUS_SLOT`,
//! `ICTUS_OUTCOME`, `ICTUS_SOCKET`). The program calls [`run`] with its subsystem:
//! it reads the schedule, opens the run's cells, hubs and control block by name, enters
//! the subsystem's class, runs `init`, and joins the frame beat: it waits for the
//! coordinator's epoch, then for its own releases, exactly as a thread of the
//! coordinator would. It leaves at the stop frame, or when the coordinator's
//! heartbeat stops (an `ictus run` that died), and writes its figures for the
//! coordinator's report.
//!
//! ```no_run
//! use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};
//! struct Nothing;
//! impl Subsystem for Nothing {
//!     type Error = RegistryError;
//!     fn init(_: &mut Registry) -> Result<Self, RegistryError> { Ok(Nothing) }
//!     fn run(&mut self, _: &mut Frame) -> Result<Flow, RegistryError> { Ok(Flow::Continue) }
//! }
//! fn main() -> std::process::ExitCode {
//!     ictus_exec::child::main::<Nothing>("B")
//! }
//! ```
//!
//! A program whose subsystem needs more than its `init` (a parameter, a channel)
//! passes a [`Maker`] to [`main_with`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ictus_core::Nanos;
use thiserror::Error;

use crate::cell::Cells;
use crate::control::Control;
use crate::hub::Hubs;
use crate::report::ThreadOutcome;
use crate::run::{cells_segment, control_segment, env, hubs_segment};
use crate::schedule::{Schedule, ScheduleError};
use crate::state::States;
use crate::subsystem::{BoxError, Maker, SetupClient, Subsystem};
use crate::tap::recorder::TapSetup;
use crate::tap::ring::TapRings;

/// How long the coordinator's heartbeat may be silent before a child leaves.
pub const HEARTBEAT_TIMEOUT: Nanos = Nanos::from_secs(2);

/// Why a child could not join its run.
#[derive(Debug, Error)]
pub enum ChildError {
    /// The program was not started by `ictus run`.
    #[error(
        "{0} is not set: this program runs a subsystem of a schedule; start it with `ictus run SCHEDULE`"
    )]
    NotLaunched(&'static str),
    /// The schedule no longer reads.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The program was asked to run another subsystem than it implements.
    #[error("this program runs subsystem '{ours}', but the schedule launched it as '{asked}'")]
    WrongSubsystem {
        /// What the program implements.
        ours: String,
        /// What the schedule asked for.
        asked: String,
    },
    /// The schedule has no subsystem of the name the run launched this program for.
    #[error("joining run '{run}': the schedule has no subsystem '{name}'")]
    NoSubsystem {
        /// The run.
        run: String,
        /// The name asked for.
        name: String,
    },
    /// The run's cells, hubs or control block could not be opened.
    #[error("joining run '{run}': {source}")]
    Join {
        /// The run.
        run: String,
        /// Which part, and why.
        #[source]
        source: JoinError,
    },
    /// `init` failed (the subsystem's own error).
    #[error("{0}")]
    Init(BoxError),
    /// The figures could not be written.
    #[error("writing its figures: {0}")]
    Outcome(#[source] ictus_os::fs::OutputError),
    /// A replay (`ICTUS_REPLAY`) that was refused, failed or differed.
    #[error("replay: {0}")]
    Replay(String),
}

/// What a child could not open of its run.
#[derive(Debug, Error)]
pub enum JoinError {
    /// The cells' segment.
    #[error("cells: {0}")]
    Cells(#[source] crate::cell::CellError),
    /// The hubs' segment.
    #[error("hubs: {0}")]
    Hubs(#[source] crate::hub::HubError),
    /// The control block.
    #[error("control block: {0}")]
    Control(#[source] crate::control::ControlError),
    /// The tap's rings of a recorded or traced run.
    #[error("the rings of the recording: {0}")]
    Tap(#[source] ictus_os::shm::ShmError),
}

fn var(name: &'static str) -> Result<String, ChildError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ChildError::NotLaunched(name))
}

/// Runs the subsystem `maker` makes, named `name` in the schedule, as a child of
/// `ictus run`; or, when `ictus replay` launched the program (`ICTUS_REPLAY`
/// names a recording), replays it against the recording in this process
/// (`replay::replay_program`, with the `mcap` feature): the verdict goes to `ICTUS_OUTCOME`, a
/// difference is an error, and the outcome returned carries only the frames
/// replayed (`end` is `replayed`).
pub fn run(name: &str, maker: Maker) -> Result<ThreadOutcome, ChildError> {
    match replay_file() {
        Some(file) => replayed(name, maker, &file),
        None => run_made(name, maker),
    }
}

/// The recording to replay, when `ictus replay` launched this program.
fn replay_file() -> Option<PathBuf> {
    #[cfg(feature = "mcap")]
    let var = crate::replay::REPLAY_ENV;
    // The same variable, for a program built without replay to say so.
    #[cfg(not(feature = "mcap"))]
    let var = "ICTUS_REPLAY";
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Without ictus-exec's `mcap` feature a program cannot read a recording.
#[cfg(not(feature = "mcap"))]
fn replayed(name: &str, maker: Maker, file: &std::path::Path) -> Result<ThreadOutcome, ChildError> {
    let _ = (name, maker);
    Err(ChildError::Replay(format!(
        "cannot replay {}: this program was built without ictus-exec's `mcap` feature \
         (default-features = false); build it with the feature to replay it",
        file.display()
    )))
}

/// Replays subsystem `name` (see [`run`]).
#[cfg(feature = "mcap")]
fn replayed(name: &str, maker: Maker, file: &std::path::Path) -> Result<ThreadOutcome, ChildError> {
    let asked = var(env::SUBSYSTEM)?;
    if asked != name {
        return Err(ChildError::WrongSubsystem {
            ours: name.to_string(),
            asked,
        });
    }
    let verdict = crate::replay::replay_program(file, name, maker).map_err(ChildError::Replay)?;
    if let Some(d) = &verdict.difference {
        return Err(ChildError::Replay(format!("differs at {d}")));
    }
    if let Some((frame, e)) = &verdict.error {
        return Err(ChildError::Replay(format!("frame {frame}: {e}")));
    }
    let none = ictus_core::LatencyHistogram::new();
    Ok(ThreadOutcome {
        subsystem: name.to_string(),
        pid: std::process::id(),
        tid: 0,
        class_requested: "replay".into(),
        class_obtained: "replay".into(),
        policy: String::new(),
        affinity: String::new(),
        memory_locked: false,
        hybrid_margin_ns: None,
        frames_run: verdict.frames,
        overruns: 0,
        longest_overrun_streak: 0,
        jitter: crate::report::Distribution::of(&none),
        exec: crate::report::Distribution::of(&none),
        end: "replayed".into(),
        torn: 0,
        warnings: Vec::new(),
        last_frame: None,
        errors: 0,
        first_error: None,
        shutdown_error: None,
        explanation: None,
    })
}

/// Hosts a built-in subsystem in a process of its own (`process = "own"`): reads
/// which subsystem the run launched this process for, makes it with `factory`
/// (the same one the coordinator uses in-process), and runs it as [`run`] does.
pub fn run_builtin(factory: &mut crate::run::Factory<'_>) -> Result<ThreadOutcome, ChildError> {
    let asked = var(env::SUBSYSTEM)?;
    let schedule_path = PathBuf::from(var(env::SCHEDULE)?);
    let schedule = Schedule::from_file(&schedule_path, &ictus_os::facts::online_cpus())?;
    let spec = schedule
        .subsystem(&asked)
        .ok_or_else(|| ChildError::NoSubsystem {
            run: var(env::RUN).unwrap_or_default(),
            name: asked.clone(),
        })?;
    let maker = factory(spec).map_err(|m| ChildError::Init(m.into()))?;
    match replay_file() {
        Some(file) => replayed(&asked, maker, &file),
        None => run_made(&asked, maker),
    }
}

/// [`run_builtin`] for a program's `main`: an error is one line on stderr and exit
/// code 1.
pub fn main_builtin(factory: &mut crate::run::Factory<'_>) -> ExitCode {
    match run_builtin(factory) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let name = std::env::var(env::SUBSYSTEM).unwrap_or_else(|_| "subsystem".into());
            let _ = writeln!(std::io::stderr(), "{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_made(name: &str, maker: Maker) -> Result<ThreadOutcome, ChildError> {
    let run_name = var(env::RUN)?;
    let schedule_path = PathBuf::from(var(env::SCHEDULE)?);
    let asked = var(env::SUBSYSTEM)?;
    let outcome_path = PathBuf::from(var(env::OUTCOME)?);
    if asked != name {
        return Err(ChildError::WrongSubsystem {
            ours: name.to_string(),
            asked,
        });
    }
    let schedule = Schedule::from_file(&schedule_path, &ictus_os::facts::online_cpus())?;
    let join = |source: JoinError| ChildError::Join {
        run: run_name.clone(),
        source,
    };
    let slot = schedule
        .subsystems
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| ChildError::NoSubsystem {
            run: run_name.clone(),
            name: name.to_string(),
        })?;
    let spec = &schedule.subsystems[slot];
    let cells =
        Cells::open_shared(&cells_segment(&run_name)).map_err(|e| join(JoinError::Cells(e)))?;
    let hubs = if schedule.hubs.is_empty() {
        Hubs::in_process(&[])
    } else {
        Hubs::open_shared_matching(&hubs_segment(&run_name), &schedule.hubs)
    }
    .map_err(|e| join(JoinError::Hubs(e)))?;
    let control = Control::open_shared_named(&control_segment(&run_name))
        .map_err(|e| join(JoinError::Control(e)))?;
    let coordinator = control.coordinator();
    // A recorded or traced run: this program pushes its frames and cells into
    // its slot's ring of the run's tap.
    let tap = match std::env::var(env::TAP) {
        Ok(segment) if !segment.is_empty() => {
            let rings = TapRings::open_shared(&segment).map_err(|e| join(JoinError::Tap(e)))?;
            Some(TapSetup::new(&schedule, cells.table(), rings))
        }
        _ => None,
    };
    let states = States::new(&schedule.modes);
    let names: Vec<String> = schedule.subsystem_names().map(String::from).collect();
    let setup = match std::env::var_os(env::SOCKET) {
        Some(s) => SetupClient::remote(PathBuf::from(s)),
        None => SetupClient::local(crate::state::SetupStore::new()),
    };
    let prepared = crate::run::Prepared {
        schedule: &schedule,
        spec,
        slot,
        control: &control,
        cells,
        states: &states,
        names: &names,
        setup,
        hubs,
        group: None,
        heartbeat_timeout: Some(HEARTBEAT_TIMEOUT),
        tap,
    };
    let mut give_up = || {
        // Before the epoch: leave when the coordinator is gone (not when it is
        // only slow: it bounds its own start-up wait and aborts the run then).
        !coordinator.is_alive()
    };
    // The run's sampler watches only its own process's threads: this one's misses
    // are explained by a sampler of its own, off its CPU, into its outcome.
    let (explainer, reporter) = crate::run::explain_program(&schedule, slot).unzip();
    let mut outcome = prepared
        .run(maker, reporter, &mut give_up)
        .map_err(ChildError::Init)?
        .outcome;
    outcome.explanation = explainer.map(ictus_explain::Explainer::finish);
    let json = serde_json::to_string(&outcome).unwrap_or_default();
    ictus_os::fs::write_atomic(&outcome_path, json).map_err(ChildError::Outcome)?;
    Ok(outcome)
}

/// [`run`] of `S` (made by its `init`) for a program's `main`: an error is one line
/// on stderr and exit code 1.
pub fn main<S: Subsystem>(name: &str) -> ExitCode {
    main_with(name, Maker::of::<S>())
}

/// [`run`] for a program's `main`: an error is one line on stderr and exit code 1.
pub fn main_with(name: &str, maker: Maker) -> ExitCode {
    match run(name, maker) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
