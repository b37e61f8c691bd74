//! The rules a schedule can break, each with the words it is reported in.

use std::fmt;
use std::path::PathBuf;

use ictus_core::{CpuSet, Nanos};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The shortest tick: 1 us.
pub const MIN_TICK: Nanos = Nanos::from_micros(1);

/// The longest tick: 1 s.
pub const MAX_TICK: Nanos = Nanos::from_secs(1);

/// The longest major frame (tick × `major_frame`): 10 s.
pub const MAX_MAJOR_PERIOD: Nanos = Nanos::from_secs(10);

/// The most hosts a schedule names.
pub const MAX_HOSTS: usize = 64;

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
    /// of one text, index it once with [`LineIndex`](ictus_os::json::LineIndex).
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
    /// The file is larger than [`InputKind::Table`](ictus_os::fs::InputKind::Table)'s limit.
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
    /// A subsystem's `writes` names a cell or element the table does not declare.
    #[error("subsystem {subsystem}: writes: {message} (a cell, or cell.element)")]
    UnknownWrite {
        /// The subsystem.
        subsystem: String,
        /// What the table says.
        message: String,
    },
}
