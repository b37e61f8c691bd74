//! Runs assembled in code: a schedule built without a file ([`ScheduleBuilder`]), the
//! subsystems given by type ([`Executive`]), and what the run leaves to read back
//! ([`Outcome`]: the report, the cells as they ended, each subsystem itself and its
//! first error).
//!
//! ```no_run
//! use ictus_core::Nanos;
//! use ictus_exec::program::{ElementDecl, Executive, SubsystemDecl};
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

use ictus_core::{CpuSet, Nanos};
use ictus_shield::class::{Class, RtPolicy};
use serde::Serialize;

use crate::cell::{CellError, CellTable, Cells, ElemShape, Element};
use crate::executive::Fault;
use crate::hub::HubDecl;
use crate::run::{self, RunError, RunOptions, RunReport};
use crate::schedule::{Process, Schedule, ScheduleError, WaitSpec};
use crate::subsystem::{Maker, OnError, Registry, Subsystem};

/// An element of a cell declared in code: its name and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementDecl<'a> {
    name: &'a str,
    shape: ElemShape,
}

impl<'a> ElementDecl<'a> {
    /// An element holding a `T` (a scalar, or an array `[T; N]`).
    pub fn of<T: Element>(name: &'a str) -> ElementDecl<'a> {
        ElementDecl {
            name,
            shape: ElemShape::of::<T>(),
        }
    }
}

/// One subsystem of a schedule built in code: the keys of a `[[subsystem]]` table.
#[derive(Clone, Debug, Default)]
pub struct SubsystemDecl {
    table: toml::Table,
    /// A config that is not a table (reported by [`ScheduleBuilder::build`]).
    bad_config: Option<String>,
}

impl SubsystemDecl {
    /// A subsystem called `name`: start 0, period 1, normal class, in-process.
    pub fn new(name: &str) -> SubsystemDecl {
        let mut d = SubsystemDecl::default();
        d.set("name", name);
        d
    }

    fn set(&mut self, key: &str, value: impl Into<toml::Value>) {
        self.table.insert(key.to_string(), value.into());
    }

    fn with(mut self, key: &str, value: impl Into<toml::Value>) -> SubsystemDecl {
        self.set(key, value);
        self
    }

    /// Its first frame (inside its period).
    pub fn start(self, frame: u64) -> SubsystemDecl {
        self.with("start", count(frame))
    }

    /// Its period in minor frames (it divides the major frame).
    pub fn period(self, frames: u64) -> SubsystemDecl {
        self.with("period", count(frames))
    }

    /// The CPU it is pinned to.
    pub fn cpu(self, cpu: usize) -> SubsystemDecl {
        self.with("cpu", count(cpu as u64))
    }

    /// Its task class (RT0's CPU is the subsystem's `cpu`).
    pub fn class(mut self, class: &Class) -> SubsystemDecl {
        match class {
            Class::Rt0 { cpu } => {
                self.set("class", "rt0");
                self.set("cpu", count(*cpu as u64));
            }
            Class::Rt1 { policy, priority } => {
                self.set("class", "rt1");
                self.set("priority", i64::from(*priority));
                let policy = match policy {
                    RtPolicy::Fifo => "fifo",
                    RtPolicy::Rr => "rr",
                };
                self.set("policy", policy);
            }
            Class::Normal => self.set("class", "normal"),
        }
        self
    }

    /// Class RT1+ with `SCHED_FIFO` at `priority` (1 to 98).
    pub fn fifo(self, priority: u8) -> SubsystemDecl {
        self.class(&Class::Rt1 {
            policy: RtPolicy::Fifo,
            priority,
        })
    }

    /// Runs it in `program` (launched with `args`) instead of a thread.
    pub fn program(mut self, program: &str, args: &[&str]) -> SubsystemDecl {
        self.set("process", program);
        let args: Vec<toml::Value> = args.iter().map(|a| toml::Value::from(*a)).collect();
        self.with("args", args)
    }

    /// The built-in subsystem `ictus run` hosts for it.
    pub fn builtin(self, name: &str) -> SubsystemDecl {
        self.with("builtin", name)
    }

    /// Its synchronous group.
    pub fn group(self, name: &str) -> SubsystemDecl {
        self.with("group", name)
    }

    /// Its host, one of the schedule's [`ScheduleBuilder::host`]s.
    pub fn host(self, name: &str) -> SubsystemDecl {
        self.with("host", name)
    }

    /// What the executive does when its `run` returns an error.
    pub fn on_error(self, on_error: OnError) -> SubsystemDecl {
        self.with("on_error", on_error.name())
    }

    /// Its settings: any value that serializes to a table (read back in `init`
    /// with [`Registry::settings`]).
    pub fn config(mut self, settings: &impl Serialize) -> SubsystemDecl {
        match toml::Table::try_from(settings) {
            Ok(t) => self.set("config", t),
            Err(e) => self.bad_config = Some(e.to_string()),
        }
        self
    }
}

/// A TOML integer of a count (saturated: the schedule's checks refuse what is too
/// large for its rules).
fn count(v: u64) -> toml::Value {
    toml::Value::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

/// A schedule built in code, checked by exactly the rules of a file: [`build`]
/// writes the TOML a person would and reads it with [`Schedule::parse`], so every
/// error names the rule and its place in that text ([`Schedule::text`]).
///
/// [`build`]: ScheduleBuilder::build
#[derive(Clone, Debug)]
pub struct ScheduleBuilder {
    root: toml::Table,
    cells: Vec<toml::Value>,
    subsystems: Vec<SubsystemDecl>,
    hubs: Vec<toml::Value>,
    hosts: Vec<toml::Value>,
}

impl ScheduleBuilder {
    /// A schedule called `name`: tick 1 ms, major frame 1, hybrid wait, state off.
    pub fn new(name: &str) -> ScheduleBuilder {
        let mut root = toml::Table::new();
        root.insert("name".into(), name.into());
        root.insert("tick".into(), "1ms".into());
        root.insert("major_frame".into(), count(1));
        ScheduleBuilder {
            root,
            cells: Vec::new(),
            subsystems: Vec::new(),
            hubs: Vec::new(),
            hosts: Vec::new(),
        }
    }

    fn with(mut self, key: &str, value: impl Into<toml::Value>) -> ScheduleBuilder {
        self.root.insert(key.to_string(), value.into());
        self
    }

    /// The minor frame.
    pub fn tick(self, tick: Nanos) -> ScheduleBuilder {
        self.with("tick", format!("{}ns", tick.as_u64()))
    }

    /// Minor frames per major frame.
    pub fn major_frame(self, frames: u64) -> ScheduleBuilder {
        self.with("major_frame", count(frames))
    }

    /// How each subsystem waits for its releases.
    pub fn wait(mut self, wait: WaitSpec) -> ScheduleBuilder {
        self.root.remove("margin");
        match wait {
            WaitSpec::Hybrid { margin } => {
                if let Some(m) = margin {
                    self.root
                        .insert("margin".into(), format!("{}ns", m.as_u64()).into());
                }
                self.with("wait", "hybrid")
            }
            WaitSpec::Spin => self.with("wait", "spin"),
            WaitSpec::Nanosleep => self.with("wait", "nanosleep"),
        }
    }

    /// User modes beside off, pause and run.
    pub fn modes(self, modes: &[&str]) -> ScheduleBuilder {
        let modes: Vec<toml::Value> = modes.iter().map(|m| toml::Value::from(*m)).collect();
        self.with("modes", modes)
    }

    /// The state the run starts in.
    pub fn initial_state(self, state: &str) -> ScheduleBuilder {
        self.with("initial_state", state)
    }

    /// A cell and its elements, in order.
    pub fn cell<'a>(
        mut self,
        name: &str,
        elements: impl IntoIterator<Item = ElementDecl<'a>>,
    ) -> ScheduleBuilder {
        let elements: Vec<toml::Value> = elements
            .into_iter()
            .map(|e| {
                let mut t = toml::Table::new();
                t.insert("name".into(), e.name.into());
                t.insert("type".into(), e.shape.ty.name().into());
                if e.shape.len != 1 {
                    t.insert("len".into(), count(e.shape.len as u64));
                }
                toml::Value::Table(t)
            })
            .collect();
        let mut cell = toml::Table::new();
        cell.insert("name".into(), name.into());
        cell.insert("elements".into(), elements.into());
        self.cells.push(toml::Value::Table(cell));
        self
    }

    /// A subsystem.
    pub fn subsystem(mut self, subsystem: SubsystemDecl) -> ScheduleBuilder {
        self.subsystems.push(subsystem);
        self
    }

    /// A hub the run owns.
    pub fn hub(mut self, hub: &HubDecl) -> ScheduleBuilder {
        if let Ok(v) = toml::Value::try_from(hub) {
            self.hubs.push(v);
        }
        self
    }

    /// A host of a run across machines (the first is the main coordinator's).
    pub fn host(mut self, name: &str, address: std::net::SocketAddr) -> ScheduleBuilder {
        let mut t = toml::Table::new();
        t.insert("name".into(), name.into());
        t.insert("address".into(), address.to_string().into());
        self.hosts.push(toml::Value::Table(t));
        self
    }

    /// The stress test's check: the ring's counters (`cell.element`).
    pub fn stress(self, counters: &[&str]) -> ScheduleBuilder {
        let counters: Vec<toml::Value> = counters.iter().map(|c| toml::Value::from(*c)).collect();
        let mut t = toml::Table::new();
        t.insert("counters".into(), counters.into());
        self.with("stress", t)
    }

    /// The schedule's TOML, as [`build`](Self::build) checks it.
    pub fn to_toml(&self) -> String {
        let mut root = self.root.clone();
        let tables = |v: &[toml::Value]| toml::Value::Array(v.to_vec());
        if !self.cells.is_empty() {
            root.insert("cell".into(), tables(&self.cells));
        }
        if !self.hubs.is_empty() {
            root.insert("hub".into(), tables(&self.hubs));
        }
        if !self.hosts.is_empty() {
            root.insert("host".into(), tables(&self.hosts));
        }
        if !self.subsystems.is_empty() {
            let subs: Vec<toml::Value> = self
                .subsystems
                .iter()
                .map(|s| toml::Value::Table(s.table.clone()))
                .collect();
            root.insert("subsystem".into(), subs.into());
        }
        toml::to_string(&root).unwrap_or_default()
    }

    /// Checks the schedule against the CPUs in `online`, by the rules of a file.
    /// The error's place is in [`to_toml`](Self::to_toml)'s text, called
    /// `<code: NAME>`.
    pub fn build(&self, online: &CpuSet) -> Result<Schedule, ScheduleError> {
        let name = self.root.get("name").and_then(|v| v.as_str()).unwrap_or("");
        let path = format!("<code: {name}>");
        if let Some((s, why)) = self
            .subsystems
            .iter()
            .find_map(|s| s.bad_config.as_ref().map(|b| (s, b)))
        {
            let sub = s.table.get("name").and_then(|v| v.as_str()).unwrap_or("");
            return Err(ScheduleError::Invalid {
                path: path.into(),
                location: Default::default(),
                rule: crate::schedule::Rule::Syntax(format!(
                    "subsystem '{sub}': its config is not a table ({why})"
                )),
            });
        }
        Schedule::parse(&self.to_toml(), path, online)
    }
}

/// The cells as a run left them, read back by element name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellValues {
    table: CellTable,
    /// Each cell's bytes (`None`: its writer died in the middle of a write).
    bytes: Vec<Option<Vec<u8>>>,
}

impl CellValues {
    /// A coherent copy of every cell of `cells` (a cell whose writer died half way
    /// through a write is left out, after a few tries).
    pub fn read(cells: &Cells) -> CellValues {
        let bytes = (0..cells.len())
            .map(|k| {
                let mut buf = vec![0u8; cells.cell_bytes(k)];
                (0..1000)
                    .find_map(|_| cells.try_read_cell(k, &mut buf))
                    .map(|_| buf)
            })
            .collect();
        CellValues {
            table: cells.table().clone(),
            bytes,
        }
    }

    /// The value of element `cell.element`, checked to hold a `T`.
    pub fn get<T: Element>(&self, element: &str) -> Result<T, CellError> {
        let at = self.table.locate_as(element, ElemShape::of::<T>())?;
        let bytes = self.bytes[at.cell]
            .as_deref()
            .ok_or_else(|| CellError::Torn {
                cell: self.table.cells()[at.cell].name().to_string(),
            })?;
        Ok(T::decode(&bytes[at.range()]))
    }

    /// The cell table.
    pub fn table(&self) -> &CellTable {
        &self.table
    }
}

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
