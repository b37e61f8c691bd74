//! Runs assembled in code: the subsystems given by type ([`Executive`]) for a
//! schedule (from a file, or built without one by [`crate::builder::ScheduleBuilder`]),
//! and what the run leaves to read back ([`Outcome`]: the report, the cells as they
//! ended, each subsystem itself and its first error).
//!
//! ```no_run
//! use ictus_core::Nanos;
//! use ictus_exec::builder::{ElementDecl, SubsystemDecl};
//! use ictus_exec::program::Executive;
//! use ictus_exec::schedule::Schedule;
//! use ictus_exec::subsystem::{Flow, Frame, Input, Output, Registry, RegistryError, Subsystem};
//! use ictus_os::facts::online_cpus;
//!
//! /// Counts frames through cell `count.n`; finishes after 100.
//! struct Counter {
//!     n: Input<i64>,
//!     next: Output<i64>,
//! }
//!
//! impl Subsystem for Counter {
//!     type Error = RegistryError;
//!     fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
//!         Ok(Counter { n: reg.input("count.n")?, next: reg.output("count.n")? })
//!     }
//!     fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
//!         let n = frame.get(&self.n) + 1;
//!         frame.set(&self.next, n);
//!         Ok(if n == 100 { Flow::StopRun } else { Flow::Continue })
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schedule = Schedule::builder("count")
//!     .tick(Nanos::from_millis(1))
//!     .initial_state("run")
//!     .cell("count", [ElementDecl::of::<i64>("n")])
//!     .subsystem(SubsystemDecl::new("counter").cpu(0))
//!     .build(&online_cpus())?;
//! let outcome = Executive::new(schedule).subsystem::<Counter>("counter").run()?;
//! assert!(outcome.cell::<i64>("count.n")? >= 100);
//! # Ok(())
//! # }
//! ```

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::cell::{CellError, CellValues, Element};
use crate::executive::Fault;
use crate::report::RunReport;
use crate::run::{self, RunError, RunOptions};
use crate::schedule::{Process, Schedule};
use crate::subsystem::{Maker, Registry, Subsystem};

/// A run assembled in code: a schedule, the in-process subsystems by name, the
/// options.
pub struct Executive {
    schedule: Schedule,
    makers: BTreeMap<String, Maker>,
    builtins: bool,
    options: RunOptions,
}

impl fmt::Debug for Executive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executive")
            .field("schedule", &self.schedule.name)
            .field("subsystems", &self.makers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Executive {
    /// A run of `schedule`, without control socket (turn it on with
    /// [`options`](Self::options)).
    pub fn new(schedule: Schedule) -> Executive {
        Executive {
            schedule,
            makers: BTreeMap::new(),
            builtins: false,
            options: RunOptions {
                control_socket: false,
                ..RunOptions::default()
            },
        }
    }

    /// Subsystem `name` of the schedule is an `S`, made by its `init`.
    pub fn subsystem<S: Subsystem>(self, name: &str) -> Executive {
        self.subsystem_made(name, Maker::of::<S>())
    }

    /// Subsystem `name` is made by `make` (which calls the registry itself: a
    /// parameter, a channel, a shared counter passed in).
    pub fn subsystem_with<S, F>(self, name: &str, make: F) -> Executive
    where
        S: Subsystem,
        F: FnOnce(&mut Registry) -> Result<S, S::Error> + Send + 'static,
    {
        self.subsystem_made(name, Maker::with(make))
    }

    /// Subsystem `name` is made by `maker`.
    pub fn subsystem_made(mut self, name: &str, maker: Maker) -> Executive {
        self.makers.insert(name.to_string(), maker);
        self
    }

    /// In-process subsystems not given by name run the built-in their schedule line
    /// names (`builtin = "increment"`), as under `ictus run`.
    pub fn builtins(mut self) -> Executive {
        self.builtins = true;
        self
    }

    /// Stops the run after `duration` (from the epoch).
    pub fn duration(mut self, duration: Duration) -> Executive {
        self.options.duration = Some(duration);
        self
    }

    /// Every option of the run (replaces those set before).
    pub fn options(mut self, options: RunOptions) -> Executive {
        self.options = options;
        self
    }

    /// Runs the schedule. Refused before anything starts when a name given is not
    /// an in-process subsystem of this host, or an in-process subsystem has no
    /// implementation. Runs until the duration ends, a subsystem stops the run
    /// ([`crate::subsystem::Flow::StopRun`]), or the options' stop flag is set.
    pub fn run(self) -> Result<Outcome, RunError> {
        let Executive {
            schedule,
            mut makers,
            builtins,
            options,
        } = self;
        if let Some(name) = makers.keys().find(|n| {
            !schedule
                .subsystem(n)
                .is_some_and(|s| s.process == Process::InProcess)
        }) {
            return Err(RunError::NotInSchedule {
                name: name.clone(),
                path: schedule.path.clone(),
                in_process: schedule
                    .subsystems
                    .iter()
                    .filter(|s| s.process == Process::InProcess)
                    .map(|s| s.name.clone())
                    .collect(),
            });
        }
        let mut factory = |spec: &crate::schedule::SubsystemSpec| match makers.remove(&spec.name) {
            Some(m) => Ok(m),
            None if builtins => run::builtin(spec),
            None => Err(format!(
                "no implementation given (Executive::subsystem::<T>(\"{}\"), or \
                 Executive::builtins for the schedule's builtin)",
                spec.name
            )),
        };
        let (report, made) = run::run_made(&schedule, &mut factory, options)?;
        Ok(Outcome {
            report,
            cells: made.cells,
            subsystems: made.subsystems,
            errors: made.errors,
        })
    }
}

/// What a run assembled in code leaves: its report, the cells as they ended, each
/// in-process subsystem itself, and the first error each one's `run` returned.
pub struct Outcome {
    /// The run's figures (the same report `ictus run` records).
    pub report: RunReport,
    cells: Option<CellValues>,
    subsystems: BTreeMap<String, Box<dyn Any + Send>>,
    errors: BTreeMap<String, Fault>,
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outcome")
            .field("report", &self.report.name)
            .field("subsystems", &self.subsystems.keys().collect::<Vec<_>>())
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

impl Outcome {
    /// The value of element `cell.element` at the end of the run.
    pub fn cell<T: Element>(&self, element: &str) -> Result<T, CellError> {
        match &self.cells {
            Some(c) => c.get(element),
            None => Err(CellError::UnknownCell {
                name: element.to_string(),
            }),
        }
    }

    /// Every cell at the end of the run.
    pub fn cells(&self) -> Option<&CellValues> {
        self.cells.as_ref()
    }

    /// Subsystem `name` as it ended, if it is an `S` that ran in-process here (each
    /// can be taken once). It keeps what it holds: hub handles keep the run's hubs
    /// (their shared memory, when the run launched programs) until it is dropped.
    pub fn take<S: Subsystem>(&mut self, name: &str) -> Option<S> {
        let any = self.subsystems.remove(name)?;
        match any.downcast::<S>() {
            Ok(s) => Some(*s),
            Err(any) => {
                self.subsystems.insert(name.to_string(), any);
                None
            }
        }
    }

    /// The first error subsystem `name`'s `run` returned, whole (downcast its
    /// `error` to the subsystem's own type), with its frame.
    pub fn error(&self, name: &str) -> Option<&Fault> {
        self.errors.get(name)
    }

    /// Whether the run went as scheduled: no frame lost, no error, not stopped
    /// before its duration by a person.
    pub fn is_complete(&self) -> bool {
        self.report.complete
    }
}
