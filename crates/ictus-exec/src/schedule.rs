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
use std::fmt;
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

/// The shortest tick: 1 us.
pub const MIN_TICK: Nanos = Nanos::from_micros(1);

/// The longest tick: 1 s.
pub const MAX_TICK: Nanos = Nanos::from_secs(1);

/// The longest major frame (tick × `major_frame`): 10 s.
pub const MAX_MAJOR_PERIOD: Nanos = Nanos::from_secs(10);

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

/// A 1-based line and column in a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl Location {
    /// The line and column of byte `offset` in `text` (clamped to its end).
    ///
    /// One pass over `text` up to `offset`: for one error. To place many offsets
    /// of one text, index it once with [`LineIndex`].
    pub fn of(text: &str, offset: usize) -> Location {
        let place = ictus_os::json::place_of_offset(text, offset);
        Location {
            line: place.line,
            column: place.column,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
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

/// The most hosts a schedule names.
pub const MAX_HOSTS: usize = 64;

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

impl SubsystemSpec {
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

/// A schedule's `[security]` table (a run across hosts): the run's keys directory
/// (`ictus keys new`), or `insecure = true`; neither: `--keys` must say.
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

    /// Parses and checks `text`, read from `path` (used for messages and to resolve
    /// relative paths), against the CPUs in `online`. Reads no file: the builtins'
    /// cells and the stress counters are checked here against inline `[[cell]]`
    /// tables (or against no cells), and against a cell file by
    /// [`Schedule::cell_table`] (which [`Schedule::from_file`] calls).
    pub fn parse(
        text: &str,
        path: impl AsRef<Path>,
        online: &CpuSet,
    ) -> Result<Schedule, ScheduleError> {
        let path = path.as_ref();
        let r = Reader {
            text,
            path,
            lines: LineIndex::new(text),
        };
        let raw: RawSchedule = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            r.fail(span, Rule::Syntax(e.message().trim().to_string()))
        })?;
        let Timing {
            tick,
            major,
            wait,
            margin,
        } = r.timing(&raw)?;
        let mut places = Places {
            tick: r.loc(raw.tick.span()),
            major_frame: r.loc(raw.major_frame.span()),
            margin: margin.map(|span| r.loc(span)),
            ..Places::default()
        };
        let cells = r.cells(&raw, &mut places)?;
        let (modes, initial_state) = r.states(&raw)?;
        r.overrun_modes(&raw, &modes)?;
        let name = r.name(&raw)?;
        // Counted before anything is checked per subsystem, so that checking stays
        // bounded whatever the file holds.
        if let Some(over) = raw.subsystems.get(crate::control::MAX_SUBSYSTEMS) {
            return Err(r.fail(over.span(), Rule::TooManySubsystems(raw.subsystems.len())));
        }
        let hosts =
            hosts(&raw.hosts, &|span| r.loc(span)).map_err(|(span, rule)| r.fail(span, rule))?;
        let mut subsystems = r.subsystems(&raw, major, &hosts, online, &mut places)?;
        if let Some(w) = r.watchdog(raw.watchdog.as_ref())? {
            for s in subsystems.iter_mut().filter(|s| s.watchdog.is_none()) {
                s.watchdog = Some(w);
            }
        }
        let stress = r.stress(&raw, &mut places)?;
        let hubs = hubs(&raw, text, &hosts).map_err(|(span, rule)| r.fail(span, rule))?;
        let pm_qos = r.pm_qos(&raw)?;
        let explain_threshold = r.explain_threshold(&raw)?;
        let security = r.security(&raw, path)?;
        let record = r.record(&raw, &mut places)?;
        let silence = r.silence(&raw, tick)?;
        let safe_state = r.safe_state(&raw, &modes)?;
        let schedule = Schedule {
            name,
            path: path.to_path_buf(),
            tick,
            major_frame: major,
            wait,
            cells,
            modes,
            initial_state,
            stress,
            subsystems,
            hubs,
            hosts,
            pm_qos,
            explain_threshold,
            security,
            text: text.to_string(),
            record,
            silence,
            safe_state,
            places,
        };
        let empty = CellTable::default();
        match &schedule.cells {
            CellSource::None => schedule.check_against(Some(&empty))?,
            CellSource::Inline(table) => schedule.check_against(Some(table))?,
            // Checked against the file's table by cell_table.
            CellSource::File(_) => schedule.check_against(None)?,
        }
        Ok(schedule)
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
    /// and a major frame of at most [`MAX_MAJOR_PERIOD`]. The error points at the
    /// schedule's own `tick` (or `major_frame`, or `margin`) value; the schedule is
    /// left unchanged.
    pub fn with_tick(&mut self, tick: Nanos) -> Result<(), ScheduleError> {
        check_tick(tick, self.major_frame, &self.wait).map_err(|(part, rule)| {
            let at = match part {
                TickPart::Tick => self.places.tick,
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
}

impl ScheduleError {
    /// The rule broken, when the file could be read.
    pub fn rule(&self) -> Option<&Rule> {
        match self {
            ScheduleError::Invalid { rule, .. } => Some(rule),
            ScheduleError::Io { .. } => None,
        }
    }
}

/// A schedule rule, as broken.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Rule {
    /// Not TOML, or a key of the wrong type or unknown.
    #[error("{0}")]
    Syntax(String),
    /// A duration that humantime cannot read.
    #[error("'{0}' is not a duration (expected e.g. 1ms, 250us)")]
    BadDuration(String),
    /// A duration too long to count in nanoseconds.
    #[error("'{0}' is too long (expected e.g. 1ms, 250us)")]
    DurationTooLong(String),
    /// A tick of zero.
    #[error("the tick must be longer than zero")]
    ZeroTick,
    /// A tick outside [`MIN_TICK`] to [`MAX_TICK`].
    #[error("the tick {tick} is outside {} to {}", MIN_TICK, MAX_TICK)]
    TickOutOfRange {
        /// The tick.
        tick: Nanos,
    },
    /// A major frame longer than [`MAX_MAJOR_PERIOD`].
    #[error(
        "a major frame of {major_frame} ticks of {tick} is longer than {}",
        MAX_MAJOR_PERIOD
    )]
    MajorPeriodTooLong {
        /// The tick.
        tick: Nanos,
        /// Minor frames per major frame.
        major_frame: u64,
    },
    /// The file is not a regular file.
    #[error("not a regular file ({0}); a schedule is a TOML file")]
    NotAFile(&'static str),
    /// The file is larger than [`InputKind::Table`]'s limit.
    #[error("the file is larger than the limit of {limit} bytes (16 MiB)")]
    FileTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The file is not UTF-8 (placed at the first invalid byte).
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// The cell file named by `cells` cannot be read.
    #[error("cannot read the cell file {}: {reason}", file.display())]
    CellFile {
        /// The cell file.
        file: PathBuf,
        /// Why.
        reason: String,
    },
    /// A builtin unknown or configured wrongly.
    #[error("subsystem '{subsystem}': {message}")]
    Builtin {
        /// The subsystem.
        subsystem: String,
        /// What is wrong ([`crate::builtins::BuiltinError`]).
        message: String,
    },
    /// A stress counter that names no element of the cell table.
    #[error("stress counter '{counter}': {message}")]
    Counter {
        /// The counter, `cell.element`.
        counter: String,
        /// What is wrong.
        message: String,
    },
    /// A major frame of zero minor frames.
    #[error("the major frame must hold at least one minor frame")]
    ZeroMajorFrame,
    /// An unknown wait mode.
    #[error("unknown wait mode '{0}' (expected hybrid, spin or nanosleep)")]
    UnknownWait(String),
    /// An unknown `on_overrun`.
    #[error("unknown on_overrun '{0}' (expected count, warn, mode or stop-run)")]
    UnknownOnOverrun(String),
    /// `on_overrun = "mode"` without `overrun_mode`.
    #[error("on_overrun = \"mode\" needs overrun_mode, the state to move the run to")]
    OverrunModeMissing,
    /// `overrun_mode` with another action.
    #[error("overrun_mode applies only to on_overrun = \"mode\"")]
    OverrunModeWithoutMode,
    /// `overrun_after = 0`.
    #[error("overrun_after must be at least 1 (consecutive overruns before acting)")]
    ZeroOverrunAfter,
    /// `watchdog = "0s"`.
    #[error("watchdog must be longer than zero")]
    ZeroWatchdog,
    /// An unknown `on_error`.
    #[error("unknown on_error '{0}' (expected stop, continue or stop-run)")]
    UnknownOnError(String),
    /// `margin` with a mode that does not spin after sleeping.
    #[error("margin applies only to wait = \"hybrid\"")]
    MarginWithoutHybrid,
    /// A hybrid margin of a whole tick or more.
    #[error("margin {margin} is not shorter than the tick {tick}")]
    MarginTooLong {
        /// The margin.
        margin: Nanos,
        /// The tick.
        tick: Nanos,
    },
    /// A cell file and `[[cell]]` tables both.
    #[error(
        "give the cells either as a file (cells = \"...\") or as [[cell]] tables here, not both"
    )]
    CellsTwice,
    /// A `pm_qos` that is neither `"off"` nor a bound in microseconds.
    #[error(
        "pm_qos '{0}': expected \"off\" or a latency bound in microseconds (such as 0, 20 or \"20us\")"
    )]
    PmQos(String),
    /// An `explain_threshold` of zero.
    #[error("explain_threshold must be longer than zero (a release that late is a miss)")]
    ZeroExplainThreshold,
    /// A `silence` shorter than two ticks.
    #[error(
        "silence {silence} is shorter than two ticks ({tick} each): one late tick would stop the run"
    )]
    SilenceTooShort {
        /// The silence given.
        silence: Nanos,
        /// The tick.
        tick: Nanos,
    },
    /// An inline cell table broken.
    #[error("{0}")]
    Cell(String),
    /// A name with characters that cannot name a segment or a file.
    #[error("'{0}' is not a valid name (use letters, digits, '-' and '_', at most 32)")]
    BadName(String),
    /// A state or mode declared twice.
    #[error("state '{0}' is declared twice (off, pause and run always exist)")]
    DuplicateState(String),
    /// More user modes than the state word holds.
    #[error("{0} modes declared; at most {max} fit", max = crate::state::MAX_MODES)]
    TooManyModes(usize),
    /// `initial_state` names no state.
    #[error("unknown state '{0}' (off, pause, run or a declared mode)")]
    UnknownState(String),
    /// Two subsystems with one name.
    #[error("subsystem '{name}' is already declared at {first}")]
    DuplicateName {
        /// The name.
        name: String,
        /// Where it was first.
        first: Location,
    },
    /// A period of zero.
    #[error("the period must be at least one minor frame")]
    ZeroPeriod,
    /// A period longer than the major frame.
    #[error("period {period} is longer than the major frame of {major} minor frames")]
    PeriodTooLong {
        /// The period.
        period: u64,
        /// The major frame.
        major: u64,
    },
    /// A period that does not divide the major frame.
    #[error("period {period} does not divide the major frame of {major} minor frames")]
    PeriodDoesNotDivide {
        /// The period.
        period: u64,
        /// The major frame.
        major: u64,
    },
    /// A start frame outside the period.
    #[error("start frame {start} is outside the period (0 to {})", period - 1)]
    StartOutsidePeriod {
        /// The start frame.
        start: u64,
        /// The period.
        period: u64,
    },
    /// A CPU that is not online.
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuOffline {
        /// The CPU.
        cpu: usize,
        /// The online CPUs.
        online: CpuSet,
    },
    /// An unknown class.
    #[error("unknown class '{0}' (expected rt0, rt1 or normal)")]
    UnknownClass(String),
    /// RT0 without a CPU.
    #[error("class rt0 needs a cpu: RT0 runs alone on one CPU")]
    Rt0WithoutCpu,
    /// Two RT0 subsystems on one CPU.
    #[error("CPU {cpu} already runs RT0 subsystem '{first}': RT0 runs alone on its CPU")]
    TwoRt0 {
        /// The CPU.
        cpu: usize,
        /// The subsystem already there.
        first: String,
    },
    /// A priority on a class other than rt1.
    #[error("priority applies only to class rt1 (rt0 runs at 99, normal has none)")]
    PriorityWithoutRt1,
    /// A policy on a class other than rt1.
    #[error("policy applies only to class rt1")]
    PolicyWithoutRt1,
    /// An RT1 priority outside 1 to 98.
    #[error("priority {0} is out of range: use 1 to 98 (99 is RT0's)")]
    PriorityOutOfRange(u8),
    /// An unknown RT1 policy.
    #[error("unknown policy '{0}' (expected fifo or rr)")]
    UnknownPolicy(String),
    /// Arguments for an in-process subsystem.
    #[error("args apply only to a program (process = \"path/to/program\")")]
    ArgsWithoutProgram,
    /// An empty program name.
    #[error("process must be \"in-process\", \"own\" or a program")]
    EmptyProgram,
    /// A builtin named for a program.
    #[error("builtin applies only to in-process subsystems and to process = \"own\"")]
    BuiltinInProgram,
    /// A process of its own with no builtin to host.
    #[error(
        "process = \"own\" hosts a builtin in a process of its own: name it with builtin = \"...\""
    )]
    OwnWithoutBuiltin,
    /// A `host` on a subsystem of a schedule without `[[host]]` tables.
    #[error("host applies only to a run across hosts: declare them with [[host]] tables")]
    HostWithoutHosts,
    /// A `[security]` table in a schedule without `[[host]]` tables.
    #[error("[security] applies only to a run across hosts: declare them with [[host]] tables")]
    SecurityWithoutHosts,
    /// `[security]` with both keys and `insecure = true`.
    #[error(
        "insecure = true and keys contradict each other: give one (keys, made by `ictus keys new`)"
    )]
    KeysAndInsecure,
    /// A `host` that names no `[[host]]`.
    #[error("unknown host '{name}' (declared: {})", known.join(", "))]
    UnknownHost {
        /// The name given.
        name: String,
        /// The hosts declared.
        known: Vec<String>,
    },
    /// Two hosts with one name.
    #[error("host '{name}' is already declared at {first}")]
    DuplicateHost {
        /// The name.
        name: String,
        /// Where it was first.
        first: Location,
    },
    /// Two hosts at one address.
    #[error("address {address} is already host '{first}'s")]
    DuplicateAddress {
        /// The address.
        address: std::net::SocketAddr,
        /// The host that has it.
        first: String,
    },
    /// An address that is not `IP:PORT`.
    #[error("'{0}' is not an address and port (expected e.g. 10.77.0.2:7447 or [fd00::2]:7447)")]
    BadAddress(String),
    /// Port 0 (the local coordinator must be reachable at a known port).
    #[error("port 0 cannot be connected to: give the port the host listens on")]
    PortZero,
    /// More hosts than [`MAX_HOSTS`].
    #[error("{0} hosts declared; at most {MAX_HOSTS}")]
    TooManyHosts(usize),
    /// A synchronous group with members on two hosts.
    #[error(
        "group '{group}' meets at a spin rendezvous in one process: its members run on one host (as '{first}')"
    )]
    GroupAcrossHosts {
        /// The group.
        group: String,
        /// Its first member.
        first: String,
    },
    /// A synchronous group with a member in another process.
    #[error("a synchronous group meets at an in-process rendezvous: its members run in-process")]
    GroupAcrossProcesses,
    /// Group members with different start frames or periods.
    #[error("group '{group}' members share one start frame and period (as '{first}' has)")]
    GroupCadence {
        /// The group.
        group: String,
        /// Its first member.
        first: String,
    },
    /// A schedule without subsystems.
    #[error("the schedule has no [[subsystem]]")]
    NoSubsystem,
    /// More subsystems than the control block holds.
    #[error("{0} subsystems; at most {max} fit in one run", max = crate::control::MAX_SUBSYSTEMS)]
    TooManySubsystems(usize),
    /// A `[[hub]]` table that does not declare a hub.
    #[error("hub: {0}")]
    Hub(String),
    /// Two hubs with one name.
    #[error("hub '{name}' is already declared at {first}")]
    DuplicateHub {
        /// The name.
        name: String,
        /// Where it was first.
        first: Location,
    },
    /// More hubs than a table holds.
    #[error("{0} hubs; at most {max} fit in one run", max = crate::hub::MAX_HUBS)]
    TooManyHubs(usize),
    /// A stress check without counters.
    #[error("the stress check needs at least one counter (cell.element)")]
    NoCounters,
    /// `[record]` names a cell the table does not declare.
    #[error("[record] cells: there is no cell `{0}`")]
    UnknownRecordedCell(String),
    /// `[record]` with `every = 0`.
    #[error("[record] every must be at least 1 (1: every frame of each writer)")]
    ZeroRecordEvery,
}

/// A schedule's text as [`Schedule::parse`] checks it, one table or group of keys
/// at a time: where a value stands, and the error for a rule it breaks there.
struct Reader<'a> {
    text: &'a str,
    path: &'a Path,
    lines: LineIndex<'a>,
}

/// The tick, the major frame and the wait mode, checked together.
struct Timing {
    tick: Nanos,
    major: u64,
    wait: WaitSpec,
    /// Where the margin stands, when one is given.
    margin: Option<Range<usize>>,
}

/// What the subsystems checked so far leave for the next ones.
#[derive(Default)]
struct Seen {
    /// Each name, where it stands.
    names: BTreeMap<String, Location>,
    /// The CPUs an RT0 subsystem holds, and which.
    rt0_cpus: BTreeMap<usize, String>,
    /// Each group's start, period, host and first member.
    groups: BTreeMap<String, (u64, u64, usize, String)>,
}

impl Reader<'_> {
    fn loc(&self, span: Range<usize>) -> Location {
        let at = self.lines.locate(span.start);
        Location {
            line: at.line,
            column: at.column,
        }
    }

    fn fail(&self, span: Range<usize>, rule: Rule) -> ScheduleError {
        ScheduleError::Invalid {
            path: self.path.to_path_buf(),
            location: self.loc(span),
            rule,
        }
    }

    /// `pm_qos`: a bound in microseconds (a number, or a string such as `"20us"`) or
    /// `"off"`.
    fn pm_qos(&self, raw: &RawSchedule) -> Result<Option<PmQos>, ScheduleError> {
        let Some(v) = &raw.pm_qos else {
            return Ok(None);
        };
        let parsed = match v.get_ref() {
            toml::Value::Integer(us) => u32::try_from(*us)
                .map(PmQos::Bound)
                .map_err(|_| us.to_string()),
            toml::Value::String(s) => s.parse::<PmQos>().map_err(|_| s.clone()),
            other => Err(other.to_string()),
        };
        parsed
            .map(Some)
            .map_err(|found| self.fail(v.span(), Rule::PmQos(found)))
    }

    /// `[security]`: the keys directory (relative to the schedule's own) or
    /// `insecure = true`, for a run across hosts only.
    fn security(&self, raw: &RawSchedule, path: &Path) -> Result<SecuritySpec, ScheduleError> {
        let Some(sec) = &raw.security else {
            return Ok(SecuritySpec::default());
        };
        if raw.hosts.is_empty() {
            return Err(self.fail(sec.span(), Rule::SecurityWithoutHosts));
        }
        let s = sec.get_ref();
        let insecure = s.insecure.as_ref().is_some_and(|v| *v.get_ref());
        if let (Some(keys), true) = (&s.keys, insecure) {
            return Err(self.fail(keys.span(), Rule::KeysAndInsecure));
        }
        let keys = s.keys.as_ref().map(|k| {
            let dir = Path::new(k.get_ref().trim());
            match path.parent() {
                Some(parent) if dir.is_relative() => parent.join(dir),
                _ => dir.to_path_buf(),
            }
        });
        Ok(SecuritySpec { keys, insecure })
    }

    /// `explain_threshold`: a duration longer than zero.
    fn explain_threshold(&self, raw: &RawSchedule) -> Result<Option<Nanos>, ScheduleError> {
        let Some(v) = &raw.explain_threshold else {
            return Ok(None);
        };
        match duration(v) {
            Ok(t) if t == Nanos::ZERO => Err(self.fail(v.span(), Rule::ZeroExplainThreshold)),
            Ok(t) => Ok(Some(t)),
            Err(rule) => Err(self.fail(v.span(), rule)),
        }
    }

    /// `silence`: a duration of at least two ticks.
    fn silence(&self, raw: &RawSchedule, tick: Nanos) -> Result<Option<Nanos>, ScheduleError> {
        let Some(v) = &raw.silence else {
            return Ok(None);
        };
        match duration(v) {
            Ok(t) if t < tick * 2 => {
                Err(self.fail(v.span(), Rule::SilenceTooShort { silence: t, tick }))
            }
            Ok(t) => Ok(Some(t)),
            Err(rule) => Err(self.fail(v.span(), rule)),
        }
    }

    /// `safe_state`: off, pause, run or a declared mode (default off).
    fn safe_state(&self, raw: &RawSchedule, modes: &[String]) -> Result<String, ScheduleError> {
        let Some(v) = &raw.safe_state else {
            return Ok("off".to_string());
        };
        let name = v.get_ref().to_ascii_lowercase();
        let known = ["off", "pause", "run"].contains(&name.as_str())
            || modes.iter().any(|m| m.to_ascii_lowercase() == name);
        if !known {
            return Err(self.fail(v.span(), Rule::UnknownState(v.get_ref().clone())));
        }
        Ok(name)
    }

    /// The tick, the major frame and the wait mode, checked together, with where
    /// the margin stands when one is given.
    fn timing(&self, raw: &RawSchedule) -> Result<Timing, ScheduleError> {
        let tick = duration(&raw.tick).map_err(|r| self.fail(raw.tick.span(), r))?;
        let major = *raw.major_frame.get_ref();
        let margin = match &raw.margin {
            Some(m) => Some((duration(m).map_err(|r| self.fail(m.span(), r))?, m.span())),
            None => None,
        };
        let wait = match raw.wait.as_ref().map(|w| (w.get_ref().as_str(), w.span())) {
            None | Some(("hybrid", _)) => WaitSpec::Hybrid {
                margin: margin.as_ref().map(|m| m.0),
            },
            Some((other, span)) => {
                if let Some((_, mspan)) = &margin {
                    return Err(self.fail(mspan.clone(), Rule::MarginWithoutHybrid));
                }
                match other {
                    "spin" => WaitSpec::Spin,
                    "nanosleep" => WaitSpec::Nanosleep,
                    _ => return Err(self.fail(span, Rule::UnknownWait(other.to_string()))),
                }
            }
        };
        check_tick(tick, major, &wait).map_err(|(part, rule)| {
            let span = match (part, &margin) {
                (TickPart::Tick, _) | (TickPart::Margin, None) => raw.tick.span(),
                (TickPart::MajorFrame, _) => raw.major_frame.span(),
                (TickPart::Margin, Some((_, span))) => span.clone(),
            };
            self.fail(span, rule)
        })?;
        Ok(Timing {
            tick,
            major,
            wait,
            margin: margin.map(|(_, span)| span),
        })
    }

    /// Where the cells are declared: a file (its place noted), inline `[[cell]]`
    /// tables (checked here), or nowhere; not both.
    fn cells(&self, raw: &RawSchedule, places: &mut Places) -> Result<CellSource, ScheduleError> {
        Ok(match (&raw.cells, &raw.cell) {
            (Some(f), Some(_)) => return Err(self.fail(f.span(), Rule::CellsTwice)),
            (Some(f), None) => {
                places.cells = self.loc(f.span());
                let rel = PathBuf::from(f.get_ref());
                CellSource::File(if rel.is_absolute() {
                    rel
                } else {
                    self.path.parent().unwrap_or(Path::new("")).join(rel)
                })
            }
            (None, Some(specs)) => {
                let file = self.path.display().to_string();
                let table = CellTable::from_specs(specs, self.text, &file)
                    .map_err(|e| cell_file_error(e, self.path, places.cells))?;
                CellSource::Inline(table)
            }
            (None, None) => CellSource::None,
        })
    }

    /// The user modes (counted first, then each a plain name unlike every state
    /// before it) and the initial state, one of them or off, pause or run.
    fn states(&self, raw: &RawSchedule) -> Result<(Vec<String>, String), ScheduleError> {
        let raw_modes = raw.modes.as_deref().unwrap_or_default();
        if let Some(over) = raw_modes.get(crate::state::MAX_MODES) {
            return Err(self.fail(over.span(), Rule::TooManyModes(raw_modes.len())));
        }
        let mut modes = Vec::with_capacity(raw_modes.len());
        let mut seen_states: BTreeSet<String> = ["off", "pause", "run"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for m in raw_modes {
            let name = m.get_ref();
            if !valid_name(name) {
                return Err(self.fail(m.span(), Rule::BadName(name.clone())));
            }
            if !seen_states.insert(name.to_ascii_lowercase()) {
                return Err(self.fail(m.span(), Rule::DuplicateState(name.clone())));
            }
            modes.push(name.clone());
        }
        let initial_state = match &raw.initial_state {
            None => "off".to_string(),
            Some(s) => {
                if !seen_states.contains(&s.get_ref().to_ascii_lowercase()) {
                    return Err(self.fail(s.span(), Rule::UnknownState(s.get_ref().clone())));
                }
                s.get_ref().to_ascii_lowercase()
            }
        };
        Ok((modes, initial_state))
    }

    /// The run's name: as given (a plain name), else the file's stem with every
    /// other character made a `-` (`run` when nothing is left).
    fn name(&self, raw: &RawSchedule) -> Result<String, ScheduleError> {
        Ok(match &raw.name {
            Some(n) => {
                if !valid_name(n.get_ref()) {
                    return Err(self.fail(n.span(), Rule::BadName(n.get_ref().clone())));
                }
                n.get_ref().clone()
            }
            None => {
                let stem = self
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let cleaned: String = stem
                    .chars()
                    .map(|c| if valid_char(c) { c } else { '-' })
                    .collect();
                if cleaned.is_empty() {
                    "run".to_string()
                } else {
                    cleaned
                }
            }
        })
    }

    /// The `[[subsystem]]` tables, in file order (at least one), each builtin's
    /// places noted.
    fn subsystems(
        &self,
        raw: &RawSchedule,
        major: u64,
        hosts: &[HostSpec],
        online: &CpuSet,
        places: &mut Places,
    ) -> Result<Vec<SubsystemSpec>, ScheduleError> {
        let mut subsystems = Vec::with_capacity(raw.subsystems.len());
        let mut seen = Seen::default();
        for s in &raw.subsystems {
            let spec = self.subsystem(s, major, hosts, online, &mut seen)?;
            let s = s.get_ref();
            if let Some(b) = &s.builtin {
                places.builtins.push(BuiltinPlaces {
                    subsystem: subsystems.len(),
                    name: self.loc(b.span()),
                    config: s
                        .config
                        .as_ref()
                        .map_or_else(|| self.loc(s.name.span()), |c| self.loc(c.span())),
                    keys: s
                        .config
                        .as_ref()
                        .map(|c| {
                            c.get_ref()
                                .iter()
                                .map(|(k, v)| (k.clone(), self.loc(v.span())))
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
            subsystems.push(spec);
        }
        if subsystems.is_empty() {
            return Err(self.fail(0..0, Rule::NoSubsystem));
        }
        Ok(subsystems)
    }

    /// One `[[subsystem]]` table: its name, cadence, host, CPU, class, process and
    /// group, checked in that order against the tables before it (`seen`).
    fn subsystem(
        &self,
        table: &Spanned<RawSubsystem>,
        major: u64,
        hosts: &[HostSpec],
        online: &CpuSet,
        seen: &mut Seen,
    ) -> Result<SubsystemSpec, ScheduleError> {
        let span_all = table.span();
        let s = table.get_ref();
        let sname = s.name.get_ref();
        if !valid_name(sname) {
            return Err(self.fail(s.name.span(), Rule::BadName(sname.clone())));
        }
        if let Some(first) = seen.names.get(sname) {
            return Err(self.fail(
                s.name.span(),
                Rule::DuplicateName {
                    name: sname.clone(),
                    first: *first,
                },
            ));
        }
        seen.names.insert(sname.clone(), self.loc(s.name.span()));
        let (start, period) = self.cadence(s, &span_all, major)?;
        let host = self.host(s, hosts)?;
        let cpu = match &s.cpu {
            Some(c) => {
                let cpu = *c.get_ref();
                // Another host's CPUs are checked by its local coordinator.
                if host == 0 && !online.contains(cpu) {
                    return Err(self.fail(
                        c.span(),
                        Rule::CpuOffline {
                            cpu,
                            online: online.clone(),
                        },
                    ));
                }
                Some(cpu)
            }
            None => None,
        };
        let class = self.class(s, cpu, &span_all, &mut seen.rt0_cpus)?;
        let process = self.process(s)?;
        if let (Some(b), Process::Program { .. }) = (&s.builtin, &process) {
            return Err(self.fail(b.span(), Rule::BuiltinInProgram));
        }
        if let Some(g) = &s.group {
            self.group(g, &process, (start, period, host), sname, &mut seen.groups)?;
        }
        let config: toml::Table = s
            .config
            .as_ref()
            .map(|c| {
                c.get_ref()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                    .collect()
            })
            .unwrap_or_default();
        Ok(SubsystemSpec {
            name: sname.clone(),
            start,
            period,
            cpu,
            class,
            process,
            builtin: s.builtin.as_ref().map(|b| b.get_ref().clone()),
            group: s.group.as_ref().map(|g| g.get_ref().clone()),
            config,
            on_error: self.on_error(s)?,
            on_overrun: self.on_overrun(s)?,
            watchdog: self.watchdog(s.watchdog.as_ref())?,
            host,
            location: self.loc(s.name.span()),
        })
    }

    /// A subsystem's `on_error`: `stop` (the default), `continue` or `stop-run`.
    fn on_error(&self, s: &RawSubsystem) -> Result<crate::subsystem::OnError, ScheduleError> {
        use crate::subsystem::OnError;
        let Some(v) = &s.on_error else {
            return Ok(OnError::default());
        };
        [OnError::Stop, OnError::Continue, OnError::StopRun]
            .into_iter()
            .find(|o| o.name() == v.get_ref())
            .ok_or_else(|| self.fail(v.span(), Rule::UnknownOnError(v.get_ref().clone())))
    }

    /// A subsystem's `on_overrun` (`count` by default), `overrun_mode` (with `mode`
    /// only; the state is checked against the modes by [`Reader::overrun_modes`])
    /// and `overrun_after` (at least 1, default 1).
    fn on_overrun(&self, s: &RawSubsystem) -> Result<OnOverrun, ScheduleError> {
        let after = match &s.overrun_after {
            Some(a) if *a.get_ref() == 0 => return Err(self.fail(a.span(), Rule::ZeroOverrunAfter)),
            Some(a) => *a.get_ref(),
            None => 1,
        };
        let action = match (&s.on_overrun, &s.overrun_mode) {
            (None, Some(m)) => return Err(self.fail(m.span(), Rule::OverrunModeWithoutMode)),
            (None, None) => OverrunAction::Count,
            (Some(v), mode) => match (v.get_ref().as_str(), mode) {
                ("mode", Some(m)) => OverrunAction::Mode(m.get_ref().to_ascii_lowercase()),
                ("mode", None) => return Err(self.fail(v.span(), Rule::OverrunModeMissing)),
                ("count" | "warn" | "stop-run", Some(m)) => {
                    return Err(self.fail(m.span(), Rule::OverrunModeWithoutMode));
                }
                ("count", None) => OverrunAction::Count,
                ("warn", None) => OverrunAction::Warn,
                ("stop-run", None) => OverrunAction::StopRun,
                (other, _) => {
                    return Err(self.fail(v.span(), Rule::UnknownOnOverrun(other.to_string())));
                }
            },
        };
        Ok(OnOverrun { action, after })
    }

    /// Every `overrun_mode` names a state of the schedule (off, pause, run or a
    /// declared mode).
    fn overrun_modes(&self, raw: &RawSchedule, modes: &[String]) -> Result<(), ScheduleError> {
        for t in &raw.subsystems {
            if let Some(m) = &t.get_ref().overrun_mode {
                let name = m.get_ref().to_ascii_lowercase();
                let known = ["off", "pause", "run"].contains(&name.as_str())
                    || modes.iter().any(|x| x.to_ascii_lowercase() == name);
                if !known {
                    return Err(self.fail(m.span(), Rule::UnknownState(m.get_ref().clone())));
                }
            }
        }
        Ok(())
    }

    /// A `watchdog` (a subsystem's, or the run's for every subsystem without its
    /// own): a duration longer than zero, or none.
    fn watchdog(&self, w: Option<&Spanned<String>>) -> Result<Option<Nanos>, ScheduleError> {
        let Some(w) = w else {
            return Ok(None);
        };
        let d = duration(w).map_err(|rule| self.fail(w.span(), rule))?;
        if d == Nanos::ZERO {
            return Err(self.fail(w.span(), Rule::ZeroWatchdog));
        }
        Ok(Some(d))
    }

    /// A subsystem's start and period: the period divides the major frame, the
    /// start falls inside the period (each reported at the table without them).
    fn cadence(
        &self,
        s: &RawSubsystem,
        span_all: &Range<usize>,
        major: u64,
    ) -> Result<(u64, u64), ScheduleError> {
        let period = s.period.as_ref().map_or(1, |p| *p.get_ref());
        let period_span = s.period.as_ref().map_or(span_all.clone(), |p| p.span());
        if period == 0 {
            return Err(self.fail(period_span, Rule::ZeroPeriod));
        }
        if period > major {
            return Err(self.fail(period_span, Rule::PeriodTooLong { period, major }));
        }
        if !major.is_multiple_of(period) {
            return Err(self.fail(period_span, Rule::PeriodDoesNotDivide { period, major }));
        }
        let start = s.start.as_ref().map_or(0, |p| *p.get_ref());
        if start >= period {
            return Err(self.fail(
                s.start.as_ref().map_or(span_all.clone(), |p| p.span()),
                Rule::StartOutsidePeriod { start, period },
            ));
        }
        Ok((start, period))
    }

    /// A subsystem's host: the first (0) without `host`, else one of the `[[host]]`
    /// tables.
    fn host(&self, s: &RawSubsystem, hosts: &[HostSpec]) -> Result<usize, ScheduleError> {
        match &s.host {
            None => Ok(0),
            Some(h) if hosts.is_empty() => Err(self.fail(h.span(), Rule::HostWithoutHosts)),
            Some(h) => hosts
                .iter()
                .position(|x| x.name == *h.get_ref())
                .ok_or_else(|| {
                    self.fail(
                        h.span(),
                        Rule::UnknownHost {
                            name: h.get_ref().clone(),
                            known: hosts.iter().map(|x| x.name.clone()).collect(),
                        },
                    )
                }),
        }
    }

    /// A subsystem's class: `policy` and `priority` for RT1 only, one RT0 per CPU
    /// (noted in `rt0_cpus`), an RT1 priority of 1 to 98.
    fn class(
        &self,
        s: &RawSubsystem,
        cpu: Option<usize>,
        span_all: &Range<usize>,
        rt0_cpus: &mut BTreeMap<usize, String>,
    ) -> Result<Class, ScheduleError> {
        let class_name = s.class.as_ref().map_or("normal", |c| c.get_ref().as_str());
        let class_span = s.class.as_ref().map_or(span_all.clone(), |c| c.span());
        if let Some(p) = &s.policy
            && class_name != "rt1"
        {
            return Err(self.fail(p.span(), Rule::PolicyWithoutRt1));
        }
        if let Some(p) = &s.priority
            && class_name != "rt1"
        {
            return Err(self.fail(p.span(), Rule::PriorityWithoutRt1));
        }
        Ok(match class_name {
            "rt0" => {
                let Some(cpu) = cpu else {
                    return Err(self.fail(class_span, Rule::Rt0WithoutCpu));
                };
                if let Some(other) = rt0_cpus.get(&cpu) {
                    return Err(self.fail(
                        s.cpu.as_ref().map_or(class_span, |c| c.span()),
                        Rule::TwoRt0 {
                            cpu,
                            first: other.clone(),
                        },
                    ));
                }
                rt0_cpus.insert(cpu, s.name.get_ref().clone());
                Class::Rt0 { cpu }
            }
            "rt1" => {
                let priority = s.priority.as_ref().map_or(50, |p| *p.get_ref());
                if !(1..=98).contains(&priority) {
                    return Err(self.fail(
                        s.priority.as_ref().map_or(class_span, |p| p.span()),
                        Rule::PriorityOutOfRange(priority),
                    ));
                }
                let policy = match s.policy.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                    None | Some(("fifo", _)) => RtPolicy::Fifo,
                    Some(("rr", _)) => RtPolicy::Rr,
                    Some((other, span)) => {
                        return Err(self.fail(span, Rule::UnknownPolicy(other.to_string())));
                    }
                };
                Class::Rt1 { policy, priority }
            }
            "normal" => Class::Normal,
            other => return Err(self.fail(class_span, Rule::UnknownClass(other.to_string()))),
        })
    }

    /// A subsystem's process: in-process (no `args`), `own` (a builtin, no `args`),
    /// or a program (not empty) with its arguments.
    fn process(&self, s: &RawSubsystem) -> Result<Process, ScheduleError> {
        Ok(
            match s.process.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                None | Some(("in-process", _)) => {
                    if let Some(a) = &s.args {
                        return Err(self.fail(a.span(), Rule::ArgsWithoutProgram));
                    }
                    Process::InProcess
                }
                Some(("", span)) => return Err(self.fail(span, Rule::EmptyProgram)),
                Some(("own", span)) => {
                    if let Some(a) = &s.args {
                        return Err(self.fail(a.span(), Rule::ArgsWithoutProgram));
                    }
                    if s.builtin.is_none() {
                        return Err(self.fail(span, Rule::OwnWithoutBuiltin));
                    }
                    Process::Own
                }
                Some((program, _)) => Process::Program {
                    program: program.to_string(),
                    args: s
                        .args
                        .as_ref()
                        .map(|a| a.get_ref().clone())
                        .unwrap_or_default(),
                },
            },
        )
    }

    /// A subsystem's synchronous group: its members are threads of one process, on
    /// one host, with the cadence (`start`, `period`) of the first (noted in
    /// `groups`).
    fn group(
        &self,
        g: &Spanned<String>,
        process: &Process,
        (start, period, host): (u64, u64, usize),
        sname: &str,
        groups: &mut BTreeMap<String, (u64, u64, usize, String)>,
    ) -> Result<(), ScheduleError> {
        if !matches!(process, Process::InProcess) {
            return Err(self.fail(g.span(), Rule::GroupAcrossProcesses));
        }
        match groups.get(g.get_ref()) {
            Some((gstart, gperiod, _, first)) if (*gstart, *gperiod) != (start, period) => {
                Err(self.fail(
                    g.span(),
                    Rule::GroupCadence {
                        group: g.get_ref().clone(),
                        first: first.clone(),
                    },
                ))
            }
            Some((_, _, ghost, first)) if *ghost != host => Err(self.fail(
                g.span(),
                Rule::GroupAcrossHosts {
                    group: g.get_ref().clone(),
                    first: first.clone(),
                },
            )),
            Some(_) => Ok(()),
            None => {
                groups.insert(
                    g.get_ref().clone(),
                    (start, period, host, sname.to_string()),
                );
                Ok(())
            }
        }
    }

    /// `[record]`: the cells (each one's place noted, checked against the table
    /// with the builtins) and `every`, at least 1.
    fn record(&self, raw: &RawSchedule, places: &mut Places) -> Result<RecordSpec, ScheduleError> {
        let Some(rec) = &raw.record else {
            return Ok(RecordSpec::default());
        };
        let every = match &rec.every {
            None => 1,
            Some(v) if *v.get_ref() == 0 => return Err(self.fail(v.span(), Rule::ZeroRecordEvery)),
            Some(v) => *v.get_ref(),
        };
        let cells = rec.cells.as_ref().map(|cells| {
            places.recorded = cells.iter().map(|c| self.loc(c.span())).collect();
            cells.iter().map(|c| c.get_ref().clone()).collect()
        });
        Ok(RecordSpec { cells, every })
    }

    /// The stress check: at least one counter, each counter's place noted.
    fn stress(
        &self,
        raw: &RawSchedule,
        places: &mut Places,
    ) -> Result<Option<StressCheck>, ScheduleError> {
        let Some(st) = &raw.stress else {
            return Ok(None);
        };
        if st.counters.get_ref().is_empty() {
            return Err(self.fail(st.counters.span(), Rule::NoCounters));
        }
        places.counters = st
            .counters
            .get_ref()
            .iter()
            .map(|c| self.loc(c.span()))
            .collect();
        Ok(Some(StressCheck {
            counters: st
                .counters
                .get_ref()
                .iter()
                .map(|c| c.get_ref().clone())
                .collect(),
        }))
    }
}

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.chars().all(valid_char)
}

/// The `[[hub]]` declarations (each already checked by [`HubDecl`]'s own parsing),
/// with unique names; a duplicate is reported at its `name`, a `host` that names
/// no `[[host]]` at the `host`.
fn hubs(
    raw: &RawSchedule,
    text: &str,
    hosts: &[HostSpec],
) -> Result<Vec<HubDecl>, (Range<usize>, Rule)> {
    let Some(decls) = &raw.hub else {
        return Ok(Vec::new());
    };
    // The names again, with their spans (the declarations keep none).
    #[derive(Deserialize)]
    struct Named {
        name: Spanned<String>,
        #[serde(default)]
        host: Option<Spanned<String>>,
    }
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        hub: Vec<Named>,
    }
    if let Some(over) = decls.get(crate::hub::MAX_HUBS) {
        return Err((over.span(), Rule::TooManyHubs(decls.len())));
    }
    let names = toml::from_str::<Names>(text)
        .map(|n| n.hub)
        .unwrap_or_default();
    let mut seen: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut out = Vec::with_capacity(decls.len());
    for (k, table) in decls.iter().enumerate() {
        let name_span = names.get(k).map(|n| n.name.span());
        let decl = HubDecl::deserialize(toml::Value::Table(table.get_ref().clone())).map_err(
            |e: toml::de::Error| {
                (
                    name_span.clone().unwrap_or_else(|| table.span()),
                    Rule::Hub(e.message().trim().to_string()),
                )
            },
        )?;
        let span = name_span.unwrap_or_else(|| table.span());
        if let Some(host) = decl.host() {
            let at = names
                .get(k)
                .and_then(|n| n.host.as_ref())
                .map_or_else(|| span.clone(), Spanned::span);
            if hosts.is_empty() {
                return Err((at, Rule::HostWithoutHosts));
            }
            if !hosts.iter().any(|h| h.name == host) {
                return Err((
                    at,
                    Rule::UnknownHost {
                        name: host.to_string(),
                        known: hosts.iter().map(|x| x.name.clone()).collect(),
                    },
                ));
            }
        }
        if let Some(first) = seen.get(decl.name()) {
            return Err((
                span,
                Rule::DuplicateHub {
                    name: decl.name().to_string(),
                    first: Location::of(text, first.start),
                },
            ));
        }
        seen.insert(decl.name().to_string(), span);
        out.push(decl);
    }
    // The table as a whole (its total size): placed at the hub that crosses a limit.
    crate::hub::check_decls(&out).map_err(|(i, e)| {
        let span = names
            .get(i)
            .map_or_else(|| decls[i].span(), |n| n.name.span());
        (span, Rule::Hub(e.to_string()))
    })?;
    Ok(out)
}

fn duration(s: &Spanned<String>) -> Result<Nanos, Rule> {
    let d = humantime::parse_duration(s.get_ref().trim())
        .map_err(|_| Rule::BadDuration(s.get_ref().clone()))?;
    u64::try_from(d.as_nanos())
        .map(Nanos::new)
        .map_err(|_| Rule::DurationTooLong(s.get_ref().clone()))
}

/// The `[[host]]` tables: names plain and unique, addresses `IP:PORT` and unique.
fn hosts(
    raw: &[Spanned<RawHost>],
    loc: &dyn Fn(Range<usize>) -> Location,
) -> Result<Vec<HostSpec>, (Range<usize>, Rule)> {
    if let Some(over) = raw.get(MAX_HOSTS) {
        return Err((over.span(), Rule::TooManyHosts(raw.len())));
    }
    let mut out: Vec<HostSpec> = Vec::with_capacity(raw.len());
    for h in raw {
        let h = h.get_ref();
        let name = h.name.get_ref();
        if !valid_name(name) {
            return Err((h.name.span(), Rule::BadName(name.clone())));
        }
        if let Some(first) = out.iter().find(|o| o.name == *name) {
            return Err((
                h.name.span(),
                Rule::DuplicateHost {
                    name: name.clone(),
                    first: first.location,
                },
            ));
        }
        let text = h.address.get_ref();
        let address: std::net::SocketAddr = text
            .trim()
            .parse()
            .map_err(|_| (h.address.span(), Rule::BadAddress(text.clone())))?;
        if address.port() == 0 {
            return Err((h.address.span(), Rule::PortZero));
        }
        if let Some(first) = out.iter().find(|o| o.address == address) {
            return Err((
                h.address.span(),
                Rule::DuplicateAddress {
                    address,
                    first: first.name.clone(),
                },
            ));
        }
        out.push(HostSpec {
            name: name.clone(),
            address,
            location: loc(h.name.span()),
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    name: Option<Spanned<String>>,
    tick: Spanned<String>,
    major_frame: Spanned<u64>,
    wait: Option<Spanned<String>>,
    margin: Option<Spanned<String>>,
    cells: Option<Spanned<String>>,
    cell: Option<Vec<CellSpec>>,
    modes: Option<Vec<Spanned<String>>>,
    initial_state: Option<Spanned<String>>,
    pm_qos: Option<Spanned<toml::Value>>,
    explain_threshold: Option<Spanned<String>>,
    silence: Option<Spanned<String>>,
    safe_state: Option<Spanned<String>>,
    watchdog: Option<Spanned<String>>,
    stress: Option<RawStress>,
    record: Option<RawRecord>,
    #[serde(rename = "subsystem", default)]
    subsystems: Vec<Spanned<RawSubsystem>>,
    hub: Option<Vec<Spanned<toml::Table>>>,
    #[serde(rename = "host", default)]
    hosts: Vec<Spanned<RawHost>>,
    security: Option<Spanned<RawSecurity>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecurity {
    keys: Option<Spanned<String>>,
    insecure: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Spanned<String>,
    address: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecord {
    cells: Option<Vec<Spanned<String>>>,
    every: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStress {
    counters: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubsystem {
    name: Spanned<String>,
    start: Option<Spanned<u64>>,
    period: Option<Spanned<u64>>,
    cpu: Option<Spanned<usize>>,
    class: Option<Spanned<String>>,
    priority: Option<Spanned<u8>>,
    policy: Option<Spanned<String>>,
    process: Option<Spanned<String>>,
    args: Option<Spanned<Vec<String>>>,
    builtin: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    host: Option<Spanned<String>>,
    on_error: Option<Spanned<String>>,
    on_overrun: Option<Spanned<String>>,
    overrun_mode: Option<Spanned<String>>,
    overrun_after: Option<Spanned<u64>>,
    watchdog: Option<Spanned<String>>,
    config: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn online() -> CpuSet {
        CpuSet::from_cpus([0, 1])
    }

    fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        Schedule::parse(text, "sched.toml", &online())
    }

    fn rule_at(text: &str) -> (Rule, Location) {
        match parse(text).unwrap_err() {
            ScheduleError::Invalid { rule, location, .. } => (rule, location),
            e => panic!("{e}"),
        }
    }

    const FIG2: &str = r#"
tick = "5ms"
major_frame = 6
[[subsystem]]
name = "A"
start = 0
period = 3
cpu = 1
class = "rt0"
[[subsystem]]
name = "B"
period = 1
class = "rt1"
priority = 70
[[subsystem]]
name = "C"
start = 3
period = 6
process = "./c-program"
args = ["--fast"]
"#;

    #[test]
    fn figure_2_reads_with_its_rates() {
        let sut = parse(FIG2).unwrap();
        assert_eq!(sut.name, "sched");
        assert_eq!(sut.tick, Nanos::from_millis(5));
        assert_eq!(sut.wait, WaitSpec::Hybrid { margin: None });
        let [a, b, c] = &sut.subsystems[..] else {
            panic!()
        };
        assert!((a.frequency_hz(sut.tick) - 66.666).abs() < 0.01);
        assert!((b.frequency_hz(sut.tick) - 200.0).abs() < 0.01);
        assert!((c.frequency_hz(sut.tick) - 33.333).abs() < 0.01);
        assert_eq!(a.class, Class::Rt0 { cpu: 1 });
        assert_eq!(
            c.process,
            Process::Program {
                program: "./c-program".into(),
                args: vec!["--fast".into()]
            }
        );
        let at3: Vec<&str> = sut.released_at(3).map(|s| s.name.as_str()).collect();
        assert_eq!(at3, ["A", "B", "C"]);
        let at4: Vec<&str> = sut.released_at(4).map(|s| s.name.as_str()).collect();
        assert_eq!(at4, ["B"]);
        assert_eq!(c.releases_before(3), 0);
        assert_eq!(c.releases_before(4), 1);
        assert_eq!(a.releases_before(7), 3);
    }

    #[test]
    fn a_syntax_error_names_its_line_and_column() {
        let (rule, at) = rule_at("tick = \"1ms\"\nmajor_frame = = 3\n");
        assert!(matches!(rule, Rule::Syntax(_)), "{rule}");
        assert_eq!(at.line, 2);
    }

    #[test]
    fn an_unknown_key_is_refused_where_it_stands() {
        let (rule, at) =
            rule_at("tick = \"1ms\"\nmajor_frame = 3\n[[subsystem]]\nname = \"a\"\n  prio = 3\n");
        assert!(
            matches!(rule, Rule::Syntax(ref m) if m.contains("prio")),
            "{rule}"
        );
        assert_eq!(at, Location { line: 5, column: 3 });
    }

    #[test]
    fn pm_qos_reads_off_a_number_of_microseconds_or_a_bound_with_its_unit() {
        let with = |v: &str| {
            parse(&format!(
                "tick = \"1ms\"\nmajor_frame = 1\npm_qos = {v}\n[[subsystem]]\nname = \"a\"\n"
            ))
            .unwrap()
            .pm_qos
        };
        assert_eq!(with("\"off\""), Some(PmQos::Off));
        assert_eq!(with("20"), Some(PmQos::Bound(20)));
        assert_eq!(with("\"20us\""), Some(PmQos::Bound(20)));
        assert_eq!(parse(FIG2).unwrap().pm_qos, None);
    }

    #[test]
    fn a_pm_qos_that_is_not_off_nor_a_bound_is_refused_where_it_stands() {
        let text =
            "tick = \"1ms\"\nmajor_frame = 1\npm_qos = \"fast\"\n[[subsystem]]\nname = \"a\"\n";
        let (rule, at) = rule_at(text);
        assert_eq!(rule, Rule::PmQos("fast".into()));
        assert_eq!(
            at,
            Location {
                line: 3,
                column: 10
            }
        );
        let (rule, _) = rule_at(&text.replace("\"fast\"", "-5"));
        assert_eq!(rule, Rule::PmQos("-5".into()));
    }

    #[test]
    fn a_silence_is_two_ticks_or_more_and_the_safe_state_a_state() {
        let text = |extra: &str| {
            format!(
                "tick = \"4ms\"\nmajor_frame = 1\nmodes = [\"hold\"]\n{extra}[[subsystem]]\nname = \"a\"\n"
            )
        };
        let s = parse(&text("")).unwrap();
        assert_eq!(s.silence_bound(), Nanos::from_millis(200));
        assert_eq!(s.safe_state, "off");
        let s = parse(&text("silence = \"12ms\"\nsafe_state = \"HOLD\"\n")).unwrap();
        assert_eq!(s.silence_bound(), Nanos::from_millis(12));
        assert_eq!(s.safe_state, "hold");
        let (rule, at) = rule_at(&text("silence = \"5ms\"\n"));
        assert!(matches!(rule, Rule::SilenceTooShort { .. }), "{rule:?}");
        assert_eq!((at.line, at.column), (4, 11));
        let (rule, at) = rule_at(&text("safe_state = \"hover\"\n"));
        assert_eq!(rule, Rule::UnknownState("hover".into()));
        assert_eq!((at.line, at.column), (4, 14));
    }

    #[test]
    fn an_explain_threshold_is_a_duration_longer_than_zero() {
        let text = |v: &str| {
            format!(
                "tick = \"1ms\"\nmajor_frame = 1\nexplain_threshold = \"{v}\"\n[[subsystem]]\nname = \"a\"\n"
            )
        };
        assert_eq!(
            parse(&text("300us")).unwrap().explain_threshold,
            Some(Nanos::from_micros(300))
        );
        let (rule, at) = rule_at(&text("0s"));
        assert_eq!(rule, Rule::ZeroExplainThreshold);
        assert_eq!(
            at,
            Location {
                line: 3,
                column: 21
            }
        );
    }

    #[test]
    fn two_rt0_on_one_cpu_are_refused_at_the_second() {
        let text = "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ncpu = 1\nclass = \"rt0\"\n[[subsystem]]\nname = \"b\"\ncpu = 1\nclass = \"rt0\"\n";
        let (rule, at) = rule_at(text);
        assert_eq!(
            rule,
            Rule::TwoRt0 {
                cpu: 1,
                first: "a".into()
            }
        );
        assert_eq!(at, Location { line: 9, column: 7 });
    }

    #[test]
    fn an_offline_cpu_and_a_duplicate_name_are_refused() {
        let (rule, _) =
            rule_at("tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ncpu = 7\n");
        assert!(matches!(rule, Rule::CpuOffline { cpu: 7, .. }));
        let (rule, at) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\n[[subsystem]]\nname = \"a\"\n",
        );
        assert!(matches!(rule, Rule::DuplicateName { .. }), "{rule}");
        assert_eq!(at.line, 6);
    }

    #[test]
    fn bad_durations_and_wait_modes_are_refused() {
        let (rule, at) = rule_at("tick = \"fast\"\nmajor_frame = 2\n");
        assert_eq!(rule, Rule::BadDuration("fast".into()));
        assert_eq!(at, Location { line: 1, column: 8 });
        let (rule, _) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 2\nwait = \"spin\"\nmargin = \"10us\"\n[[subsystem]]\nname = \"a\"\n",
        );
        assert_eq!(rule, Rule::MarginWithoutHybrid);
        let (rule, _) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 2\nwait = \"poll\"\n[[subsystem]]\nname = \"a\"\n",
        );
        assert_eq!(rule, Rule::UnknownWait("poll".into()));
    }

    #[test]
    fn groups_share_their_cadence_and_stay_in_process() {
        let (rule, _) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ngroup = \"g\"\n[[subsystem]]\nname = \"b\"\nperiod = 2\ngroup = \"g\"\n",
        );
        assert!(matches!(rule, Rule::GroupCadence { .. }));
        let (rule, _) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\nprocess = \"x\"\ngroup = \"g\"\n",
        );
        assert_eq!(rule, Rule::GroupAcrossProcesses);
    }

    #[test]
    fn a_hub_homed_on_an_unknown_host_is_refused_at_its_host() {
        let lines = HOSTS.lines().count();
        let hub = "[[hub]]\nname = \"s\"\nkind = \"semaphore\"\nhost = \"h2\"\n";
        let ok = parse(&format!("{HOSTS}{hub}")).unwrap();
        assert_eq!(ok.hubs[0].host(), Some("h2"));
        let (rule, place) = rule_at(&format!("{HOSTS}{}", hub.replace("h2", "h9")));
        assert!(
            matches!(&rule, Rule::UnknownHost { name, known } if name == "h9" && known.join(",") == "main,h2"),
            "{rule:?}"
        );
        assert_eq!(
            place,
            Location {
                line: lines + 4,
                column: 8
            }
        );
        let (rule, _) = rule_at(&format!("{FIG2}\n{hub}"));
        assert_eq!(rule, Rule::HostWithoutHosts);
    }

    const HOSTS: &str = "tick = \"1ms\"\nmajor_frame = 3\n\
        [[host]]\nname = \"main\"\naddress = \"10.77.0.1:7447\"\n\
        [[host]]\nname = \"h2\"\naddress = \"10.77.0.2:7447\"\n\
        [[subsystem]]\nname = \"A\"\n\
        [[subsystem]]\nname = \"B\"\nhost = \"h2\"\ncpu = 15\n";

    #[test]
    fn a_host_table_places_each_subsystem_and_leaves_remote_cpus_to_their_host() {
        let sut = parse(HOSTS).unwrap();
        assert_eq!(sut.hosts.len(), 2);
        assert_eq!(sut.hosts[1].name, "h2");
        assert_eq!(sut.hosts[1].address, "10.77.0.2:7447".parse().unwrap());
        assert_eq!(sut.hosts[1].location, Location { line: 7, column: 8 });
        // A runs on the main host (no `host`), B on h2, whose CPU 15 is not ours.
        assert_eq!(
            sut.subsystems.iter().map(|s| s.host).collect::<Vec<_>>(),
            [0, 1]
        );
        let one_host =
            parse("tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n").unwrap();
        assert!(one_host.hosts.is_empty());
        assert_eq!(one_host.subsystems[0].host, 0);
    }

    #[test]
    fn on_error_is_read_and_an_unknown_one_is_refused_at_its_value() {
        use crate::subsystem::OnError;
        let base = "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n";
        assert_eq!(parse(base).unwrap().subsystems[0].on_error, OnError::Stop);
        for o in [OnError::Stop, OnError::Continue, OnError::StopRun] {
            let text = format!("{base}on_error = \"{}\"\n", o.name());
            assert_eq!(parse(&text).unwrap().subsystems[0].on_error, o);
        }
        let (rule, at) = rule_at(&format!("{base}on_error = \"retry\"\n"));
        assert_eq!(rule, Rule::UnknownOnError("retry".into()));
        assert_eq!((at.line, at.column), (5, 12));
    }

    #[test]
    fn on_overrun_and_watchdog_are_read() {
        let base =
            "tick = \"1ms\"\nmajor_frame = 1\nmodes = [\"safe\"]\n[[subsystem]]\nname = \"a\"\n";
        let a = &parse(base).unwrap().subsystems[0];
        assert_eq!(a.on_overrun, OnOverrun::default());
        assert_eq!(a.on_overrun.action, OverrunAction::Count);
        assert_eq!(a.watchdog, None);
        for (text, action) in [
            ("on_overrun = \"count\"\n", OverrunAction::Count),
            ("on_overrun = \"warn\"\n", OverrunAction::Warn),
            ("on_overrun = \"stop-run\"\n", OverrunAction::StopRun),
            (
                "on_overrun = \"mode\"\noverrun_mode = \"Safe\"\n",
                OverrunAction::Mode("safe".into()),
            ),
            (
                "on_overrun = \"mode\"\noverrun_mode = \"pause\"\n",
                OverrunAction::Mode("pause".into()),
            ),
        ] {
            let s = parse(&format!("{base}{text}")).unwrap();
            assert_eq!(s.subsystems[0].on_overrun.action, action, "{text}");
            assert_eq!(s.subsystems[0].on_overrun.after, 1, "{text}");
        }
        // The run's watchdog is every subsystem's, unless it sets its own.
        let run =
            format!("watchdog = \"1s\"\n{base}\n[[subsystem]]\nname = \"b\"\nwatchdog = \"5ms\"\n");
        let s = parse(&run).unwrap();
        assert_eq!(s.subsystems[0].watchdog, Some(Nanos::from_secs(1)));
        assert_eq!(s.subsystems[1].watchdog, Some(Nanos::from_millis(5)));
        let (rule, at) = rule_at(&format!("watchdog = \"0s\"\n{base}"));
        assert_eq!((rule, at.line, at.column), (Rule::ZeroWatchdog, 1, 12));
        let text = format!("{base}on_overrun = \"warn\"\noverrun_after = 3\nwatchdog = \"50ms\"\n");
        let a = &parse(&text).unwrap().subsystems[0];
        assert_eq!(a.on_overrun.after, 3);
        assert_eq!(a.watchdog, Some(Nanos::from_millis(50)));
    }

    #[test]
    fn a_bad_on_overrun_or_watchdog_is_refused_at_its_value() {
        let base =
            "tick = \"1ms\"\nmajor_frame = 1\nmodes = [\"safe\"]\n[[subsystem]]\nname = \"a\"\n";
        // (the keys added, the rule expected, its line and column)
        let cases: [(&str, Rule, (usize, usize)); 7] = [
            (
                "on_overrun = \"panic\"\n",
                Rule::UnknownOnOverrun("panic".into()),
                (6, 14),
            ),
            (
                "on_overrun = \"mode\"\noverrun_mode = \"hover\"\n",
                Rule::UnknownState("hover".into()),
                (7, 16),
            ),
            ("on_overrun = \"mode\"\n", Rule::OverrunModeMissing, (6, 14)),
            (
                "on_overrun = \"warn\"\noverrun_mode = \"safe\"\n",
                Rule::OverrunModeWithoutMode,
                (7, 16),
            ),
            (
                "overrun_mode = \"safe\"\n",
                Rule::OverrunModeWithoutMode,
                (6, 16),
            ),
            (
                "on_overrun = \"warn\"\noverrun_after = 0\n",
                Rule::ZeroOverrunAfter,
                (7, 17),
            ),
            ("watchdog = \"0ms\"\n", Rule::ZeroWatchdog, (6, 12)),
        ];
        for (keys, expected, (line, column)) in cases {
            let (rule, at) = rule_at(&format!("{base}{keys}"));
            assert_eq!(rule, expected, "{keys}");
            assert_eq!((at.line, at.column), (line, column), "{keys}");
        }
        let (rule, at) = rule_at(&format!("{base}watchdog = \"soon\"\n"));
        assert_eq!(rule, Rule::BadDuration("soon".into()));
        assert_eq!((at.line, at.column), (6, 12));
    }

    #[test]
    fn a_malformed_host_table_is_refused_at_its_place() {
        // (text replaced, its replacement, the rule expected, where)
        type Case = (&'static str, &'static str, fn(&Rule) -> bool, Location);
        let cases: [Case; 7] = [
            (
                "address = \"10.77.0.1:7447\"",
                "address = \"10.77.0.1\"",
                |r| matches!(r, Rule::BadAddress(_)),
                Location {
                    line: 5,
                    column: 11,
                },
            ),
            (
                "address = \"10.77.0.1:7447\"",
                "address = \"10.77.0.1:0\"",
                |r| *r == Rule::PortZero,
                Location {
                    line: 5,
                    column: 11,
                },
            ),
            (
                "address = \"10.77.0.2:7447\"",
                "address = \"10.77.0.1:7447\"",
                |r| matches!(r, Rule::DuplicateAddress { first, .. } if first == "main"),
                Location {
                    line: 8,
                    column: 11,
                },
            ),
            (
                "name = \"h2\"\naddress",
                "name = \"main\"\naddress",
                |r| matches!(r, Rule::DuplicateHost { name, .. } if name == "main"),
                Location { line: 7, column: 8 },
            ),
            (
                "name = \"h2\"\naddress",
                "name = \"h 2\"\naddress",
                |r| matches!(r, Rule::BadName(_)),
                Location { line: 7, column: 8 },
            ),
            (
                "host = \"h2\"",
                "host = \"h9\"",
                |r| matches!(r, Rule::UnknownHost { known, .. } if known.join(",") == "main,h2"),
                Location {
                    line: 13,
                    column: 8,
                },
            ),
            (
                "address = \"10.77.0.1:7447\"",
                "address = \"10.77.0.1:7447\"\nport = 1",
                |r| matches!(r, Rule::Syntax(m) if m.contains("port")),
                Location { line: 6, column: 1 },
            ),
        ];
        for (from, to, expected, at) in cases {
            let (rule, place) = rule_at(&HOSTS.replacen(from, to, 1));
            assert!(expected(&rule), "{to}: {rule:?}");
            assert_eq!(place, at, "{to}: {rule}");
        }
        // A group of A (main) and B (h2): one spin rendezvous cannot span hosts.
        let text = HOSTS
            .replacen("name = \"A\"", "name = \"A\"\ngroup = \"g\"", 1)
            .replace("cpu = 15", "cpu = 15\ngroup = \"g\"");
        let (rule, place) = rule_at(&text);
        assert!(matches!(rule, Rule::GroupAcrossHosts { .. }), "{rule:?}");
        assert_eq!(
            place,
            Location {
                line: 16,
                column: 9
            },
            "{text}"
        );
        // `host` without any [[host]] table.
        let (rule, place) = rule_at(
            "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\nhost = \"h2\"\n",
        );
        assert_eq!(rule, Rule::HostWithoutHosts);
        assert_eq!(place, Location { line: 5, column: 8 });
    }

    const HUBS: &str = "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\n[[hub]]\nname = \"ready\"\nkind = \"semaphore\"\n[[hub]]\nname = \"forces\"\nkind = \"fifo\"\ntype = \"f32\"\nlen = 3\ncapacity = 16\n";

    #[test]
    fn hub_tables_are_read_in_order() {
        let sut = parse(HUBS).unwrap();
        assert_eq!(
            sut.hubs,
            [
                HubDecl::semaphore("ready", 0),
                HubDecl::fifo::<[f32; 3]>("forces", 16)
            ]
        );
        assert!(parse(FIG2).unwrap().hubs.is_empty());
    }

    #[test]
    fn a_duplicate_or_broken_hub_is_refused_where_it_stands() {
        let text = format!("{HUBS}[[hub]]\nname = \"ready\"\nkind = \"event\"\n");
        let (rule, at) = rule_at(&text);
        assert_eq!(
            rule,
            Rule::DuplicateHub {
                name: "ready".into(),
                first: Location { line: 6, column: 8 }
            }
        );
        assert_eq!(
            at,
            Location {
                line: 15,
                column: 8
            }
        );
        let text = format!("{HUBS}[[hub]]\nname = \"q\"\nkind = \"fifo\"\ntype = \"f32\"\n");
        let (rule, at) = rule_at(&text);
        assert!(
            matches!(rule, Rule::Hub(ref m) if m.contains("capacity")),
            "{rule}"
        );
        assert_eq!(
            at,
            Location {
                line: 15,
                column: 8
            }
        );
        let (rule, _) = rule_at(&format!("{HUBS}[[hub]]\nname = \"x\"\nkind = \"pipe\"\n"));
        assert!(
            matches!(rule, Rule::Hub(ref m) if m.contains("pipe")),
            "{rule}"
        );
    }

    #[test]
    fn the_tick_and_the_major_frame_are_bounded() {
        let (rule, at) = rule_at("tick = \"2s\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
        assert_eq!(
            rule,
            Rule::TickOutOfRange {
                tick: Nanos::from_secs(2)
            }
        );
        assert_eq!(at, Location { line: 1, column: 8 });
        let (rule, _) = rule_at("tick = \"500ns\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
        assert!(matches!(rule, Rule::TickOutOfRange { .. }), "{rule}");
        let (rule, at) =
            rule_at("tick = \"1ms\"\nmajor_frame = 1000000\n[[subsystem]]\nname = \"a\"\n");
        assert_eq!(
            rule,
            Rule::MajorPeriodTooLong {
                tick: Nanos::from_millis(1),
                major_frame: 1_000_000
            }
        );
        assert_eq!(
            at,
            Location {
                line: 2,
                column: 15
            }
        );
        let (rule, _) = rule_at(&format!(
            "tick = \"1s\"\nmajor_frame = {}\n[[subsystem]]\nname = \"a\"\n",
            u64::MAX
        ));
        assert!(matches!(rule, Rule::MajorPeriodTooLong { .. }), "{rule}");
        let (rule, _) =
            rule_at("tick = \"1000years\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
        assert_eq!(rule, Rule::DurationTooLong("1000years".into()));
        assert!(
            parse("tick = \"1ms\"\nmajor_frame = 10000\n[[subsystem]]\nname = \"a\"\n").is_ok()
        );
    }

    #[test]
    fn a_replacement_tick_obeys_the_rules_of_the_file() {
        let text =
            "tick = \"5ms\"\nmajor_frame = 20\nmargin = \"200us\"\n[[subsystem]]\nname = \"a\"\n";
        let mut sut = parse(text).unwrap();
        let err = sut.with_tick(Nanos::from_micros(100)).unwrap_err();
        assert!(
            matches!(err.rule(), Some(Rule::MarginTooLong { .. })),
            "{err}"
        );
        assert!(err.to_string().starts_with("sched.toml:3:10: "), "{err}");
        let err = sut.with_tick(Nanos::from_secs(2)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("sched.toml:1:8: the tick 2.00 s is outside"),
            "{err}"
        );
        let err = sut.with_tick(Nanos::MAX).unwrap_err();
        assert!(
            matches!(err.rule(), Some(Rule::TickOutOfRange { .. })),
            "{err}"
        );
        let err = sut.with_tick(Nanos::from_secs(1)).unwrap_err();
        assert!(
            matches!(err.rule(), Some(Rule::MajorPeriodTooLong { .. })),
            "{err}"
        );
        assert_eq!(sut.tick, Nanos::from_millis(5), "unchanged on a refusal");
        sut.with_tick(Nanos::from_millis(1)).unwrap();
        assert_eq!(sut.major_period(), Nanos::from_millis(20));
    }

    const RING: &str = "tick = \"1ms\"\nmajor_frame = 1\n[stress]\ncounters = [\"A.x\", \"B.x\"]\n[[cell]]\nname = \"A\"\nelements = [ { name = \"x\", type = \"i32\" } ]\n[[cell]]\nname = \"B\"\nelements = [ { name = \"x\", type = \"i32\" } ]\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"A\", to = \"B\" }\n";

    #[test]
    fn builtins_and_counters_are_checked_against_the_cells_where_they_stand() {
        assert!(parse(RING).is_ok());
        let (rule, at) = rule_at(&RING.replace("to = \"B\"", "to = \"Z\""));
        assert_eq!(
            rule,
            Rule::Builtin {
                subsystem: "a".into(),
                message: "config.to: there is no cell `Z`".into()
            }
        );
        assert_eq!(
            at,
            Location {
                line: 14,
                column: 29
            }
        );
        let (rule, at) = rule_at(&RING.replace("\"increment\"", "\"incremnt\""));
        assert!(
            matches!(rule, Rule::Builtin { ref message, .. } if message.contains("unknown builtin 'incremnt'")),
            "{rule}"
        );
        assert_eq!(
            at,
            Location {
                line: 13,
                column: 11
            }
        );
        let (rule, at) = rule_at(&RING.replace("config = { from = \"A\", to = \"B\" }\n", ""));
        assert!(
            matches!(rule, Rule::Builtin { ref message, .. } if message.contains("config.from")),
            "{rule}"
        );
        assert_eq!(at.line, 12);
        let (rule, at) = rule_at(&RING.replace("\"B.x\"]", "\"Q.int\"]"));
        assert_eq!(
            rule,
            Rule::Counter {
                counter: "Q.int".into(),
                message: "there is no cell `Q`".into()
            }
        );
        assert_eq!(
            at,
            Location {
                line: 4,
                column: 20
            }
        );
    }

    #[test]
    fn the_record_table_names_known_cells_and_a_positive_every() {
        let sut = parse(RING).unwrap();
        assert_eq!(sut.record, RecordSpec::default());
        let text = format!("{RING}[record]\ncells = [\"B\", \"A\"]\nevery = 3\n");
        let sut = parse(&text).unwrap();
        assert_eq!(
            sut.record,
            RecordSpec {
                cells: Some(vec!["B".into(), "A".into()]),
                every: 3
            }
        );
        let (rule, at) = rule_at(&format!("{RING}[record]\ncells = [\"A\", \"Q\"]\n"));
        assert_eq!(rule, Rule::UnknownRecordedCell("Q".into()));
        assert_eq!(
            at,
            Location {
                line: 16,
                column: 15
            }
        );
        let (rule, at) = rule_at(&format!("{RING}[record]\nevery = 0\n"));
        assert_eq!(rule, Rule::ZeroRecordEvery);
        assert_eq!(
            at,
            Location {
                line: 16,
                column: 9
            }
        );
        let (rule, _) = rule_at(&format!("{RING}[record]\nevry = 2\n"));
        assert!(
            matches!(rule, Rule::Syntax(ref m) if m.contains("evry")),
            "{rule}"
        );
    }

    #[test]
    fn a_cell_file_is_checked_on_load_and_placed_when_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let cells: String = RING
            .split("[[subsystem]]")
            .next()
            .unwrap()
            .split("[[cell]]")
            .skip(1)
            .map(|c| format!("[[cell]]{c}"))
            .collect();
        std::fs::write(dir.path().join("cells.toml"), &cells).unwrap();
        let text = RING
            .replace("[[cell]]", "[[old]]")
            .split("[[old]]")
            .next()
            .unwrap()
            .to_string()
            + "cells = \"cells.toml\"\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"A\", to = \"Z\" }\n";
        let text = text.replace("[stress]\ncounters = [\"A.x\", \"B.x\"]\n", "");
        let path = dir.path().join("s.toml");
        std::fs::write(&path, &text).unwrap();
        let sut = Schedule::parse(&text, &path, &online()).unwrap();
        let err = sut.cell_table().unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "{}:7:29: subsystem 'a': config.to",
                path.display()
            )),
            "{err}"
        );
        let err = Schedule::from_file(&path, &online()).unwrap_err();
        assert!(matches!(err.rule(), Some(Rule::Builtin { .. })), "{err}");
        std::fs::remove_file(dir.path().join("cells.toml")).unwrap();
        let err = Schedule::from_file(&path, &online()).unwrap_err();
        assert!(matches!(err.rule(), Some(Rule::CellFile { .. })), "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "{}:3:9: cannot read the cell file",
                path.display()
            )),
            "{err}"
        );
        let cells = dir.path().join("cells.toml");
        std::fs::write(&cells, b"[[cell]]\nname = \"\xff\"\n").unwrap();
        let err = Schedule::from_file(&path, &online()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2:9: invalid UTF-8", cells.display())
        );
    }

    #[test]
    fn unreadable_schedule_files_are_refused_where_they_break() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, b"tick = \"1ms\"\nname = \"r\xffn\"\n").unwrap();
        let err = Schedule::from_file(&path, &online()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}:2:10: invalid UTF-8", path.display())
        );
        let err = Schedule::from_file(dir.path(), &online()).unwrap_err();
        assert_eq!(err.rule(), Some(&Rule::NotAFile("a directory")));
        let err = Schedule::from_file(&dir.path().join("none.toml"), &online()).unwrap_err();
        assert!(matches!(err, ScheduleError::Io { .. }));
        assert_eq!(
            err.to_string(),
            format!("cannot read {}", dir.path().join("none.toml").display())
        );
    }

    #[test]
    fn location_counts_characters_not_bytes() {
        assert_eq!(
            Location::of("é = 1\nab", 7),
            Location { line: 2, column: 1 }
        );
        assert_eq!(Location::of("éa", 2), Location { line: 1, column: 2 });
        assert_eq!(Location::of("x", 99), Location { line: 1, column: 2 });
    }

    /// One generated subsystem line: each field may be absent, valid or not.
    #[derive(Clone, Debug)]
    struct Gen {
        name: u8,
        start: u64,
        period: u64,
        cpu: Option<usize>,
        class: u8,
        priority: Option<u8>,
    }

    fn gen_subsystem() -> impl Strategy<Value = Gen> {
        (
            0u8..6,
            0u64..8,
            0u64..9,
            proptest::option::of(0usize..4),
            0u8..4,
            proptest::option::of(0u8..101),
        )
            .prop_map(|(name, start, period, cpu, class, priority)| Gen {
                name,
                start,
                period,
                cpu,
                class,
                priority,
            })
    }

    const CLASSES: [&str; 4] = ["rt0", "rt1", "normal", "rt2"];

    fn render(major: u64, subs: &[Gen]) -> String {
        let mut t = format!("tick = \"1ms\"\nmajor_frame = {major}\n");
        for s in subs {
            t += &format!(
                "[[subsystem]]\nname = \"s{}\"\nstart = {}\nperiod = {}\nclass = \"{}\"\n",
                s.name, s.start, s.period, CLASSES[s.class as usize]
            );
            if let Some(c) = s.cpu {
                t += &format!("cpu = {c}\n");
            }
            if let Some(p) = s.priority {
                t += &format!("priority = {p}\n");
            }
        }
        t
    }

    /// The rules, stated independently of the parser.
    fn oracle(major: u64, subs: &[Gen], online: &CpuSet) -> bool {
        if major == 0 || subs.is_empty() {
            return false;
        }
        let names: BTreeSet<u8> = subs.iter().map(|s| s.name).collect();
        if names.len() != subs.len() {
            return false;
        }
        let mut rt0 = BTreeSet::new();
        subs.iter().all(|s| {
            let class = CLASSES[s.class as usize];
            s.period >= 1
                && s.period <= major
                && major.is_multiple_of(s.period)
                && s.start < s.period
                && s.cpu.is_none_or(|c| online.contains(c))
                && class != "rt2"
                && (class == "rt1" || s.priority.is_none())
                && (class != "rt1" || s.priority.is_none_or(|p| (1..=98).contains(&p)))
                && (class != "rt0" || s.cpu.is_some_and(|c| rt0.insert(c)))
        })
    }

    proptest! {
        #[test]
        fn validation_accepts_exactly_the_valid_schedules(
            major in 0u64..13,
            subs in proptest::collection::vec(gen_subsystem(), 0..5),
        ) {
            let text = render(major, &subs);
            let got = parse(&text);
            prop_assert_eq!(got.is_ok(), oracle(major, &subs, &online()), "{}\n{:?}", text, got.err().map(|e| e.to_string()));
            if let Ok(s) = got {
                // Every frame of a major frame releases each subsystem exactly as its
                // period says, and the pattern repeats.
                for sub in &s.subsystems {
                    let n = (0..major).filter(|&f| sub.releases_at(f)).count() as u64;
                    prop_assert_eq!(n, major / sub.period);
                    prop_assert_eq!(sub.releases_before(3 * major), 3 * n);
                }
            }
        }

        #[test]
        fn a_broken_rule_always_points_inside_the_file(
            major in 0u64..13,
            subs in proptest::collection::vec(gen_subsystem(), 0..5),
        ) {
            let text = render(major, &subs);
            if let Err(ScheduleError::Invalid { location, .. }) = parse(&text) {
                let lines = text.lines().count().max(1);
                prop_assert!(location.line >= 1 && location.line <= lines + 1);
            }
        }
    }
}
