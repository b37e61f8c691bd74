//! Why a run could not start or failed: [`RunError`], and [`StartError`] for what a
//! subsystem's start-up reports.

use std::path::PathBuf;

use thiserror::Error;

use crate::ctl::CtlError;
use crate::schedule::ScheduleError;
use crate::subsystem::BoxError;

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
    /// The tap's rings (`--record`, `--trace`) could not be made.
    #[error("the rings of the recording: {0}")]
    Tap(#[source] ictus_os::shm::ShmError),
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
    /// The link could not connect the hubs to the other hosts.
    #[error("hubs across hosts: {0}")]
    HubLink(String),
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
