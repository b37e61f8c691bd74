//! The frame schedule of seed 003 (Figure 2), read from TOML and checked on load.
//!
//! A schedule names the minor tick (one *frame*), the major frame in minor frames, how
//! to wait for each tick, where the cells are declared, and per subsystem its start
//! frame, its period in minor frames, its CPU, its task class and the process it runs
//! in. Subsystem `s` is released at every frame `f` with `f >= s.start` and
//! `(f - s.start) % s.period == 0`; since the period divides the major frame, the
//! pattern repeats every major frame.
//!
//! ```toml
//! name = "fig2"          # the run's name (default: the file's stem)
//! tick = "5ms"           # the minor frame
//! major_frame = 6        # minor frames per major frame
//! wait = "hybrid"        # hybrid (default) | spin | nanosleep
//! margin = "200us"       # hybrid only: spin this long before each tick (default: calibrated)
//! cells = "cells.toml"   # the cell table, relative to this file (or [[cell]] tables here)
//! modes = ["setup"]      # user modes beside off, pause and run
//! initial_state = "run"  # the state the run starts in (default: off)
//! pm_qos = 0             # the CPU latency QoS held for the run: a bound in us
//!                        # (default 0, as cyclictest) or "off"; `--pm-qos` wins
//! watchdog = "100ms"    # every subsystem's watchdog unless it sets its own
//!                        # (default: none)
//! explain_threshold = "1ms" # a release this late is a miss to explain (default:
//!                        # the tick); `--explain-threshold` wins
//! silence = "200ms"      # across hosts: a node that hears no tick this long, or a
//!                        # main host that hears nothing from a node, acts on it
//!                        # (default: 8 ticks, at least 200 ms; at least 2 ticks)
//! safe_state = "off"     # the state a node puts its subsystems in when the main
//!                        # host falls silent (default: off)
//!
//! [[subsystem]]
//! name = "A"
//! start = 0              # first frame, inside the period
//! period = 3             # in minor frames; at most the major frame and dividing it
//! cpu = 1
//! class = "rt1"          # rt0 | rt1 | normal
//! priority = 80          # rt1 only (1 to 98)
//! process = "in-process" # or "own" (the builtin in a process of its own), or a
//!                        # program to launch, with `args = [...]`
//! builtin = "increment"  # which built-in subsystem `ictus run` hosts
//! config = { from = "A", to = "B" }
//! on_error = "stop"      # when its run returns an error: stop (it stops, its frames
//!                        # are lost), continue (counted, released again) or stop-run
//! on_overrun = "mode"    # when it overruns: count (default), warn, mode or stop-run
//! overrun_mode = "setup" # on_overrun = "mode" only: the state the run moves to
//! overrun_after = 3      # act after this many consecutive overruns (default 1)
//! watchdog = "50ms"      # a frame running this long is named, and on_overrun acts
//!                        # (default: no watchdog)
//!
//! [record]               # what `--record` writes (issue 24; default: every cell,
//! cells = ["A", "B"]     # every frame): the cells recorded, by name
//! every = 1              # each writer's publications every this many of its frames
//!                        # (at least 1; replay needs 1)
//!
//! [[hub]]                # hubs (seed 004) the run owns, shared by name
//! name = "forces"
//! kind = "fifo"          # semaphore | event | fifo | port | resource
//! type = "f32"
//! len = 3
//! capacity = 16
//! ```
//!
//! `[[hub]]` tables are the declarations of [`crate::hub::HubDecl`] (the same keys as
//! a hub file read by [`crate::hub::decls_from_toml`]); hub names are unique. The run
//! creates them ([`crate::run::run`]) and every subsystem, in a thread or in a
//! launched program, gets handles by name in `init` ([`crate::subsystem::Registry::hubs`]).
//!
//! **Limits.** The tick is [`MIN_TICK`] (1 us) to [`MAX_TICK`] (1 s), and a major
//! frame (tick × `major_frame`) lasts at most [`MAX_MAJOR_PERIOD`] (10 s): a run
//! stops at the end of a major frame, so a longer one would make `--duration` and
//! `ictus ctl stop` wait that long. [`Schedule::with_tick`] checks a replacement
//! tick against the same rules. A schedule has at most
//! [`MAX_SUBSYSTEMS`](crate::control::MAX_SUBSYSTEMS) subsystems and
//! [`MAX_MODES`](crate::state::MAX_MODES) modes, counted before anything else is
//! checked; its file is a regular file of at most
//! [`InputKind::Table`]'s limit (16 MiB) of UTF-8. Inline
//! cells obey the limits of [`crate::cell`], hubs those of [`crate::hub`].
//! Checking takes time linear in the file's size.
//!
//! A subsystem's `builtin` is one of [`crate::builtins::NAMES`], and its `config`
//! is checked against the cell table ([`crate::builtins::check`]); each stress
//! counter names an element of the table. Both are checked on load: against
//! inline cells by [`Schedule::parse`], against a cell file by
//! [`Schedule::cell_table`] (called by [`Schedule::from_file`]).
//!
//! Every rule broken is reported with the file, line and column of the value that
//! breaks it:
//!
//! ```
//! use ictus_core::CpuSet;
//! use ictus_exec::schedule::Schedule;
//! let text = "tick = \"1ms\"\nmajor_frame = 4\n[[subsystem]]\nname = \"a\"\nperiod = 3\n";
//! let err = Schedule::parse(text, "s.toml", &CpuSet::from_cpus([0, 1])).unwrap_err();
//! assert_eq!(err.to_string(), "s.toml:5:10: period 3 does not divide the major frame of 4 minor frames");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use ictus_class::{Class, RtPolicy};
use ictus_core::{CpuSet, Nanos};
use ictus_os::pm_qos::PmQos;
use ictus_os::wait::WaitMode;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use toml::Spanned;

use crate::cell::{CellFileError, CellSpec, CellTable};
use crate::hub::HubDecl;
use ictus_os::fs::{InputError, InputKind};
use ictus_os::json::LineIndex;

mod read;
mod rule;
/// For tests: a schedule of two hosts, `main` and `h2`, with subsystem A on the main
/// host (CPU 1) and B on h2 (CPU 0).
#[cfg(test)]
pub(crate) fn two_hosts() -> Schedule {
    let text = "tick = \"1ms\"\nmajor_frame = 1\n\
        [[host]]\nname = \"main\"\naddress = \"10.77.0.1:7447\"\n\
        [[host]]\nname = \"h2\"\naddress = \"10.77.0.2:7447\"\n\
        [[subsystem]]\nname = \"A\"\ncpu = 1\n\
        [[subsystem]]\nname = \"B\"\nhost = \"h2\"\ncpu = 0\n";
    Schedule::parse(text, "sched.toml", &CpuSet::from_cpus([0, 1])).unwrap()
}

#[cfg(test)]
mod tests;

pub use rule::{Location, MAX_HOSTS, MAX_MAJOR_PERIOD, MAX_TICK, MIN_TICK, Rule};

/// Which value a tick rule is about.
#[derive(Clone, Copy, Debug)]
enum TickPart {
    Tick,
    MajorFrame,
    Margin,
}

/// The rules a tick obeys with the major frame and the wait mode.
fn check_tick(tick: Nanos, major: u64, wait: &WaitSpec) -> Result<(), (TickPart, Rule)> {
    if tick == Nanos::ZERO {
        return Err((TickPart::Tick, Rule::ZeroTick));
    }
    if !(MIN_TICK..=MAX_TICK).contains(&tick) {
        return Err((TickPart::Tick, Rule::TickOutOfRange { tick }));
    }
    if major == 0 {
        return Err((TickPart::MajorFrame, Rule::ZeroMajorFrame));
    }
    if let WaitSpec::Hybrid { margin: Some(m) } = *wait
        && m >= tick
    {
        return Err((TickPart::Margin, Rule::MarginTooLong { margin: m, tick }));
    }
    if tick
        .as_u64()
        .checked_mul(major)
        .is_none_or(|ns| ns > MAX_MAJOR_PERIOD.as_u64())
    {
        return Err((
            TickPart::MajorFrame,
            Rule::MajorPeriodTooLong {
                tick,
                major_frame: major,
            },
        ));
    }
    Ok(())
}

/// Where the values checked again after parsing stand in the file.
#[derive(Clone, Debug, Default, PartialEq)]
struct Places {
    tick: Location,
    major_frame: Location,
    margin: Option<Location>,
    /// The `cells = "..."` value (1:1 without one).
    cells: Location,
    builtins: Vec<BuiltinPlaces>,
    /// Each stress counter, in order.
    counters: Vec<Location>,
    /// Each cell named by `[record]`, in order.
    recorded: Vec<Location>,
    /// Each subsystem's `writes` entries (by index in the schedule's subsystems).
    writes: Vec<(usize, Vec<Location>)>,
}

/// Where a subsystem's builtin and its config stand.
#[derive(Clone, Debug, PartialEq)]
struct BuiltinPlaces {
    /// Index in the schedule's subsystems.
    subsystem: usize,
    /// The `builtin` value.
    name: Location,
    /// The `config` table (the subsystem's name without one).
    config: Location,
    /// Each config key's value.
    keys: BTreeMap<String, Location>,
}

/// A schedule file that cannot be read as text.
fn input_error(path: &Path, e: InputError) -> ScheduleError {
    let invalid = |line, column, rule| ScheduleError::Invalid {
        path: path.to_path_buf(),
        location: Location { line, column },
        rule,
    };
    match e {
        InputError::Io { source, .. } => ScheduleError::Io {
            path: path.to_path_buf(),
            source,
        },
        InputError::NotRegular { kind, .. } => invalid(1, 1, Rule::NotAFile(kind)),
        InputError::TooLarge { limit, at, .. } => {
            let at = at.unwrap_or(ictus_os::json::Place { line: 1, column: 1 });
            invalid(
                at.line,
                at.column,
                Rule::FileTooLarge {
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                },
            )
        }
        InputError::NotUtf8 { line, column, .. } => invalid(line, column, Rule::InvalidUtf8),
    }
}

/// A cell table error of schedule `path`: a mistake in the table is reported where
/// it stands (in the cell file, or in the schedule for inline cells), a file that
/// cannot be read at the schedule's `cells` value, `named_at`.
fn cell_file_error(e: CellFileError, path: &Path, named_at: Location) -> ScheduleError {
    let at = |file: String, line, column, message: String| ScheduleError::Invalid {
        path: PathBuf::from(file),
        location: Location { line, column },
        rule: Rule::Cell(message),
    };
    let unreadable = |file: String, reason: String| ScheduleError::Invalid {
        path: path.to_path_buf(),
        location: named_at,
        rule: Rule::CellFile {
            file: PathBuf::from(file),
            reason,
        },
    };
    match e {
        CellFileError::Syntax(l) => at(l.file, l.place.line, l.place.column, l.what),
        CellFileError::Invalid(l) => at(l.file, l.place.line, l.place.column, l.what.to_string()),
        CellFileError::Text {
            file,
            line,
            column,
            problem,
        } => at(file, line, column, crate::cell::content_problem(&problem)),
        CellFileError::Read { file, source } => unreadable(file, source.to_string()),
        CellFileError::NotAFile { file, kind } => {
            unreadable(file, format!("not a regular file ({kind})"))
        }
    }
}

/// The process a subsystem runs in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Process {
    /// A thread of the process that runs the schedule.
    InProcess,
    /// The subsystem's built-in in a process of its own (`process = "own"`): the
    /// executive launches the program that hosts built-ins (`ictus` itself), which
    /// joins the run through shared memory like any program.
    Own,
    /// A program the executive launches; it joins the run through shared memory.
    Program {
        /// The program: a path (relative to the schedule's folder) or a bare name looked
        /// up next to the `ictus` binary, in its `examples/` folder, then in `PATH`.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// How the beat is waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "mode")]
pub enum WaitSpec {
    /// Sleep, then spin the last `margin` (calibrated per thread when `None`).
    Hybrid {
        /// The spin before each release.
        margin: Option<Nanos>,
    },
    /// Spin on the clock.
    Spin,
    /// `clock_nanosleep` to each release.
    Nanosleep,
}

impl WaitSpec {
    /// The wait mode, with `calibrated` as the hybrid margin when none was given.
    pub fn mode(&self, calibrated: Nanos) -> WaitMode {
        match *self {
            WaitSpec::Hybrid { margin } => WaitMode::Hybrid {
                margin: margin.unwrap_or(calibrated),
            },
            WaitSpec::Spin => WaitMode::Spin,
            WaitSpec::Nanosleep => WaitMode::Nanosleep,
        }
    }

    /// Whether the hybrid margin has to be calibrated.
    pub fn needs_calibration(&self) -> bool {
        matches!(self, WaitSpec::Hybrid { margin: None })
    }
}

/// Where the cell table comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum CellSource {
    /// No cells: subsystems that only compute.
    None,
    /// A cell file (resolved against the schedule's folder).
    File(PathBuf),
    /// `[[cell]]` tables in the schedule itself, checked with it.
    Inline(CellTable),
}

/// One subsystem's line of the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct SubsystemSpec {
    /// Unique name.
    pub name: String,
    /// First frame it runs in (inside its period).
    pub start: u64,
    /// Its period in minor frames.
    pub period: u64,
    /// The CPU it is pinned to (`None`: free to run anywhere its class allows).
    pub cpu: Option<usize>,
    /// Its task class (an RT0 class carries the CPU).
    pub class: Class,
    /// The process it runs in.
    pub process: Process,
    /// The built-in subsystem `ictus run` hosts for it, when in-process.
    pub builtin: Option<String>,
    /// The synchronous group it belongs to: members meet at a spin rendezvous before
    /// every frame and may meet again inside it ([`crate::subsystem::Frame::rendezvous`]).
    pub group: Option<String>,
    /// Free-form settings for the subsystem (the built-ins read theirs here).
    pub config: toml::Table,
    /// What the executive does when its `run` returns an error (`on_error`).
    pub on_error: crate::subsystem::OnError,
    /// What the coordinator does when it overruns or its watchdog fires
    /// (`on_overrun`, `overrun_mode`, `overrun_after`).
    pub on_overrun: OnOverrun,
    /// The longest a frame of it may run before the coordinator names it
    /// (`watchdog`; `None`: never checked).
    pub watchdog: Option<Nanos>,
    /// The host it runs on: an index into [`Schedule::hosts`] (0, the coordinator's
    /// host, when the schedule names none).
    pub host: usize,
    /// What it writes, as the schedule says (`writes`: cells, or `cell.element`s; a
    /// built-in's follow from its config): its host's link refuses to start if its
    /// code claims more, and the other hosts refuse that host's claims beyond what
    /// the schedule gives its subsystems. `None`: not said (its claims are then its
    /// host's word).
    pub writes: Option<Vec<String>>,
    /// Where the subsystem's name stands in the schedule file.
    pub location: Location,
}

/// What the coordinator does about a subsystem's overruns (`on_overrun`); the
/// real-time thread only counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum OverrunAction {
    /// Count them (the default): the report and the status carry the counts.
    #[default]
    Count,
    /// Also warn, once: a warning and an event in the run's record and status.
    Warn,
    /// Move the run to this state (a declared mode, or off, pause or run), once.
    Mode(String),
    /// Stop the run at the next major frame it can announce (the run is then
    /// incomplete), naming the subsystem.
    StopRun,
}

impl OverrunAction {
    /// Its name in a schedule: `count`, `warn`, `mode`, `stop-run`.
    pub fn name(&self) -> &'static str {
        match self {
            OverrunAction::Count => "count",
            OverrunAction::Warn => "warn",
            OverrunAction::Mode(_) => "mode",
            OverrunAction::StopRun => "stop-run",
        }
    }
}

/// A subsystem's `on_overrun`: the action and after how many consecutive overruns
/// (releases skipped in a row, the overrun counter's streak) it is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnOverrun {
    /// What is done.
    pub action: OverrunAction,
    /// Consecutive overruns before it is done (at least 1).
    pub after: u64,
}

impl Default for OnOverrun {
    fn default() -> Self {
        OnOverrun {
            action: OverrunAction::Count,
            after: 1,
        }
    }
}

/// A host of a run across machines (`[[host]]`): seed 003's hosts, each with a
/// local coordinator. The first one is the main coordinator's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    /// Its name, as subsystems' `host` name it.
    pub name: String,
    /// The address and port its local coordinator listens on (Zenoh, tcp).
    pub address: std::net::SocketAddr,
    /// Where its name stands in the schedule file.
    pub location: Location,
}

/// The cell and byte ranges `name` (a cell, or `cell.element`) covers in `table`.
pub fn element_ranges(
    table: &CellTable,
    name: &str,
) -> Result<Vec<(usize, Range<usize>)>, crate::cell::CellError> {
    if name.contains('.') {
        let at = table.locate(name)?;
        return Ok(vec![(at.cell, at.range())]);
    }
    let cell = table.cell_index(name)?;
    Ok(table.cells()[cell]
        .elements()
        .iter()
        .map(|e| (cell, e.range()))
        .collect())
}

impl SubsystemSpec {
    /// Its `writes` in `table`: per element, its cell and bytes (`None`: not said,
    /// or a name the table does not have).
    pub fn writes_in(&self, table: &CellTable) -> Option<Vec<(usize, Range<usize>)>> {
        let mut out = Vec::new();
        for name in self.writes.as_ref()? {
            out.extend(element_ranges(table, name).ok()?);
        }
        Some(out)
    }

    /// Whether the subsystem is released at `frame`.
    pub fn releases_at(&self, frame: u64) -> bool {
        frame >= self.start && (frame - self.start).is_multiple_of(self.period)
    }

    /// How many releases fall in frames `0..end`.
    pub fn releases_before(&self, end: u64) -> u64 {
        if end <= self.start {
            0
        } else {
            (end - self.start).div_ceil(self.period)
        }
    }

    /// Its frequency for a given tick, in hertz.
    pub fn frequency_hz(&self, tick: Nanos) -> f64 {
        1e9 / (tick.as_u64() as f64 * self.period as f64)
    }
}

/// The seed 003 stress-test check: the counters whose largest final value is compared
/// with the number of frames spent in RUN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StressCheck {
    /// Cell elements (`cell.element`) holding the ring's counter, one per cell.
    pub counters: Vec<String>,
}

/// A schedule's `[security]` table (a run across hosts): the folder of this host's
/// keys (its bundle from `ictus keys new`; `{host}` in it stands for the host's name,
/// so one schedule serves every host: `keys = "keys/bundles/hosts/{host}"`), or
/// `insecure = true` (which `--insecure` must confirm); neither: `--keys` must say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecuritySpec {
    /// The keys directory, resolved against the schedule's own directory.
    pub keys: Option<PathBuf>,
    /// Plain links, no authentication.
    pub insecure: bool,
}

/// A checked schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The run's name (shared-memory segments and the control socket are named after it).
    pub name: String,
    /// The file it was read from, as given.
    pub path: PathBuf,
    /// The minor frame.
    pub tick: Nanos,
    /// Minor frames per major frame.
    pub major_frame: u64,
    /// How each thread waits for its releases.
    pub wait: WaitSpec,
    /// Where the cells are declared.
    pub cells: CellSource,
    /// User modes beside off, pause and run, in order.
    pub modes: Vec<String>,
    /// The state the run starts in.
    pub initial_state: String,
    /// The stress-test check, when the schedule asks for it.
    pub stress: Option<StressCheck>,
    /// The subsystems, in file order.
    pub subsystems: Vec<SubsystemSpec>,
    /// The hubs the run owns (`[[hub]]` tables), in file order.
    pub hubs: Vec<HubDecl>,
    /// The hosts of a run across machines (`[[host]]` tables), the main
    /// coordinator's first; empty for a run on one host.
    pub hosts: Vec<HostSpec>,
    /// The CPU latency QoS the run holds (`pm_qos`; `None`: not given, the run's
    /// default, 0 us).
    pub pm_qos: Option<PmQos>,
    /// `[security]`: how a run across hosts secures its links.
    pub security: SecuritySpec,
    /// The lateness from which a release is a miss to explain
    /// (`explain_threshold`; `None`: not given, the tick).
    pub explain_threshold: Option<Nanos>,
    /// The schedule's own text (an inline cell table is parsed from it).
    pub text: String,
    /// `[record]`: what `--record` records (default: every cell, every frame).
    pub record: RecordSpec,
    /// Across hosts, how long a silence is a lost host (`silence`; `None`: not
    /// given, [`Schedule::silence_bound`]'s default).
    pub silence: Option<Nanos>,
    /// The state a node puts its subsystems in once the main host fell silent
    /// (`safe_state`, default `off`), lower case.
    pub safe_state: String,
    /// Where the values checked after parsing stand.
    places: Places,
}

/// A schedule's `[record]` table: which cells a recording keeps, and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSpec {
    /// The cells recorded, by name (`None`: every cell).
    pub cells: Option<Vec<String>>,
    /// Each writer's publications are recorded every this many of its frames
    /// (1: all; replay needs 1).
    pub every: u64,
}

impl Default for RecordSpec {
    fn default() -> Self {
        RecordSpec {
            cells: None,
            every: 1,
        }
    }
}

impl Schedule {
    /// Reads and checks `path` against the CPUs in `online`. The file must be a
    /// regular file (a FIFO or a device is refused before it is opened) of at most
    /// [`InputKind::Table`]'s limit of UTF-8. A cell file it names (`cells = "..."`) is read
    /// and checked too, and the builtins' cells and the stress counters are checked
    /// against it ([`Schedule::cell_table`]).
    pub fn from_file(path: &Path, online: &CpuSet) -> Result<Schedule, ScheduleError> {
        let text = ictus_os::fs::read_text(path, InputKind::Table.max_bytes())
            .map_err(|e| input_error(path, e))?;
        let schedule = Schedule::parse(&text, path, online)?;
        if matches!(schedule.cells, CellSource::File(_)) {
            schedule.cell_table()?;
        }
        Ok(schedule)
    }

    /// The subsystems' names, by slot.
    pub fn subsystem_names(&self) -> impl Iterator<Item = &str> {
        self.subsystems.iter().map(|s| s.name.as_str())
    }

    /// The cell table the schedule names (empty when none), with every builtin's
    /// cells and every stress counter checked against it. A cell file that cannot
    /// be read is reported at the schedule's `cells` value; one that is malformed,
    /// at its own file, line and column.
    pub fn cell_table(&self) -> Result<CellTable, ScheduleError> {
        let table = match &self.cells {
            CellSource::None => CellTable::default(),
            CellSource::Inline(table) => table.clone(),
            CellSource::File(file) => CellTable::load(file)
                .map_err(|e| cell_file_error(e, &self.path, self.places.cells))?,
        };
        self.check_against(Some(&table))?;
        Ok(table)
    }

    /// Replaces the tick (as `ictus run --tick` does), checking every rule a tick
    /// obeys in a file: [`MIN_TICK`] to [`MAX_TICK`], longer than the hybrid margin,
    /// and a major frame of at most [`MAX_MAJOR_PERIOD`]. A tick out of range on its
    /// own is [`ScheduleError::Given`], no place in the file (the file's tick is not
    /// the one refused); one that clashes with the file's `major_frame` or `margin`
    /// points at that value. The schedule is left unchanged.
    pub fn with_tick(&mut self, tick: Nanos) -> Result<(), ScheduleError> {
        check_tick(tick, self.major_frame, &self.wait).map_err(|(part, rule)| {
            let at = match part {
                TickPart::Tick => return ScheduleError::Given { rule },
                TickPart::MajorFrame => self.places.major_frame,
                TickPart::Margin => self.places.margin.unwrap_or(self.places.tick),
            };
            self.invalid(at, rule)
        })?;
        self.tick = tick;
        Ok(())
    }

    /// Across hosts, how long a silence means a host is lost: a node that hears no
    /// tick for this long, or a main host that hears nothing from a node, acts on it.
    /// `silence` as given (at least two ticks, also after [`Schedule::with_tick`]),
    /// else 8 ticks and at least 200 ms: this machine's kind (a shared VM) stalls
    /// for 10 ms and more at times, and RT throttling stops a busy real-time task
    /// for 50 ms each second, neither of which is a lost host.
    pub fn silence_bound(&self) -> Nanos {
        match self.silence {
            Some(s) => s.max(self.tick * 2),
            None => (self.tick * 8).max(Nanos::from_millis(200)),
        }
    }

    /// Checks each builtin (its name, its config and, with `cells`, the cells it
    /// names) and, with `cells`, each stress counter.
    fn check_against(&self, cells: Option<&CellTable>) -> Result<(), ScheduleError> {
        for place in &self.places.builtins {
            let spec = &self.subsystems[place.subsystem];
            let Some(name) = &spec.builtin else {
                continue;
            };
            if let Err(e) = crate::builtins::check(name, &spec.config, cells) {
                let at = if e.is_about_the_name() {
                    place.name
                } else {
                    e.key()
                        .and_then(|k| place.keys.get(k))
                        .copied()
                        .unwrap_or(place.config)
                };
                return Err(self.invalid(
                    at,
                    Rule::Builtin {
                        subsystem: spec.name.clone(),
                        message: e.to_string(),
                    },
                ));
            }
        }
        if let (Some(table), Some(stress)) = (cells, &self.stress) {
            for (counter, at) in stress.counters.iter().zip(&self.places.counters) {
                crate::stress::check_counter(table, counter).map_err(|e| {
                    self.invalid(
                        *at,
                        Rule::Counter {
                            counter: counter.clone(),
                            message: e.to_string(),
                        },
                    )
                })?;
            }
        }
        if let Some(table) = cells {
            for (k, places) in &self.places.writes {
                let spec = &self.subsystems[*k];
                for (name, at) in spec.writes.iter().flatten().zip(places) {
                    if let Err(e) = element_ranges(table, name) {
                        return Err(self.invalid(
                            *at,
                            Rule::UnknownWrite {
                                subsystem: spec.name.clone(),
                                message: e.to_string(),
                            },
                        ));
                    }
                }
            }
        }
        if let (Some(table), Some(cells)) = (cells, &self.record.cells) {
            for (cell, at) in cells.iter().zip(&self.places.recorded) {
                if table.cell(cell).is_none() {
                    return Err(self.invalid(*at, Rule::UnknownRecordedCell(cell.clone())));
                }
            }
        }
        Ok(())
    }

    fn invalid(&self, location: Location, rule: Rule) -> ScheduleError {
        ScheduleError::Invalid {
            path: self.path.clone(),
            location,
            rule,
        }
    }

    /// What the schedule gives host `host`'s subsystems to write, per cell of
    /// `table` its byte ranges (merged): `None` when one of them does not say
    /// ([`SubsystemSpec::writes`]), or a name is not in the table.
    pub fn host_writes(&self, table: &CellTable, host: usize) -> Option<Vec<Vec<Range<usize>>>> {
        let mut out: Vec<Vec<Range<usize>>> = vec![Vec::new(); table.cells().len()];
        for spec in self.subsystems.iter().filter(|s| s.host == host) {
            for (cell, range) in spec.writes_in(table)? {
                out[cell].push(range);
            }
        }
        for ranges in &mut out {
            ranges.sort_by_key(|r| r.start);
            let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
            for r in ranges.drain(..) {
                match merged.last_mut() {
                    Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                    _ => merged.push(r),
                }
            }
            *ranges = merged;
        }
        Some(out)
    }

    /// The subsystem called `name`.
    pub fn subsystem(&self, name: &str) -> Option<&SubsystemSpec> {
        self.subsystems.iter().find(|s| s.name == name)
    }

    /// The length of a major frame (at most [`MAX_MAJOR_PERIOD`] once checked;
    /// saturating for a tick set by hand).
    pub fn major_period(&self) -> Nanos {
        Nanos::new(self.tick.as_u64().saturating_mul(self.major_frame))
    }

    /// The subsystems released at `frame`, in file order.
    pub fn released_at(&self, frame: u64) -> impl Iterator<Item = &SubsystemSpec> {
        self.subsystems.iter().filter(move |s| s.releases_at(frame))
    }

    /// The folder relative paths in the schedule are resolved against.
    pub fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new(""))
    }
}

/// Why a schedule was refused.
#[derive(Debug, Error)]
pub enum ScheduleError {
    /// The file could not be opened or read (the OS error follows in the chain of
    /// sources, not in this message).
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A rule is broken at `location`.
    #[error("{}:{location}: {rule}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where.
        location: Location,
        /// What.
        rule: Rule,
    },
    /// A value given in place of the file's ([`Schedule::with_tick`], `ictus run
    /// --tick`) breaks a rule on its own: the caller names where it came from.
    #[error("{rule}")]
    Given {
        /// What.
        rule: Rule,
    },
}

impl ScheduleError {
    /// The rule broken, when the file could be read.
    pub fn rule(&self) -> Option<&Rule> {
        match self {
            ScheduleError::Invalid { rule, .. } | ScheduleError::Given { rule } => Some(rule),
            ScheduleError::Io { .. } => None,
        }
    }
}
