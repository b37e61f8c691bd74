//! A schedule built in code ([`ScheduleBuilder`], from [`Schedule::builder`]): the
//! cells, subsystems, hubs and hosts a `schedule.toml` would declare, checked by
//! exactly the rules of a file.
//!
//! The builder sits above the data model ([`crate::schedule`]), which knows nothing
//! of it: [`Schedule::builder`] is defined here.

use ictus_class::{Class, RtPolicy};
use ictus_core::{CpuSet, Nanos};
use serde::Serialize;

use crate::cell::{ElemShape, Element};
use crate::hub::HubDecl;
use crate::schedule::{Schedule, ScheduleError, WaitSpec};
use crate::subsystem::OnError;

impl Schedule {
    /// A schedule built in code, checked by the rules of a file when built
    /// ([`ScheduleBuilder`]).
    pub fn builder(name: &str) -> ScheduleBuilder {
        ScheduleBuilder::new(name)
    }
}

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

    /// What the coordinator does when it overruns `after` times in a row (or its
    /// watchdog fires): `on_overrun`, `overrun_mode` and `overrun_after`.
    pub fn on_overrun(
        mut self,
        action: &crate::schedule::OverrunAction,
        after: u64,
    ) -> SubsystemDecl {
        self.set("on_overrun", action.name());
        if let crate::schedule::OverrunAction::Mode(m) = action {
            self.set("overrun_mode", m.as_str());
        }
        self.set("overrun_after", count(after));
        self
    }

    /// The longest one of its frames may run before the coordinator names it.
    pub fn watchdog(self, limit: Nanos) -> SubsystemDecl {
        self.with("watchdog", format!("{}ns", limit.as_u64()))
    }

    /// Its settings: any value that serializes to a table (read back in `init`
    /// with [`crate::subsystem::Registry::settings`]).
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
