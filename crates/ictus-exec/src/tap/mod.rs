//! The tap: what a run's subsystems did, frame by frame, carried off their
//! real-time threads to the sinks that write it out (issue 24): the MCAP
//! recording ([`mcap`], the `mcap` feature), the Chrome/Perfetto timeline
//! ([`timeline`]). Each sink maps a run onto a writer of `ictus-capture`, which
//! knows the files.
//!
//! Each subsystem thread (or program) pushes, with no allocation and no system
//! call, into a bounded ring of its own ([`ring`]): the inputs it pulled when
//! they changed, the outputs it published, and one timing record per frame. A
//! full ring drops the record and counts the drop; it never blocks a subsystem.
//! The rings are in the run's shared memory when programs take part (they push
//! the same way), else in the coordinator's memory. One recorder thread of the
//! coordinator ([`recorder`]), off the real-time CPUs, drains them every couple
//! of milliseconds and hands each record to every [`Sink`], with the run's
//! events (state changes, misses, crashes, warnings).
//!
//! Across hosts each host taps its own subsystems: `ictus run --record` records
//! the main host's, `ictus node --record` a node's.

#[cfg(feature = "mcap")]
pub mod mcap;
pub mod recorder;
pub mod ring;
pub mod timeline;

pub use ring::{Direction, FrameRecord};

use ictus_core::Nanos;

use crate::cell::CellTable;
use crate::schedule::Schedule;

/// One cell as a subsystem read or published it in one frame.
#[derive(Clone, Copy, Debug)]
pub struct CellRecord<'a> {
    /// The subsystem's slot.
    pub slot: usize,
    /// The frame.
    pub frame: u64,
    /// The cell's index in the table.
    pub cell: usize,
    /// Read or published.
    pub direction: Direction,
    /// The cell's bytes in the table's layout (packed, native endianness), as
    /// the subsystem's copy held them. For an output whose elements are shared
    /// with other writers, only the subsystem's own elements
    /// ([`TapRun::writers`]) are its publication.
    pub bytes: &'a [u8],
}

/// Something that happened to the run, not to one frame of one subsystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    /// When (monotonic clock).
    pub time: Nanos,
    /// The frame it is about, when known.
    pub frame: Option<u64>,
    /// The subsystem it is about, when one.
    pub slot: Option<usize>,
    /// What kind: `state`, `miss`, `overrun`, `crash`, `warning`, `event`.
    pub kind: &'static str,
    /// What happened, in words.
    pub message: String,
}

/// What every sink is told before the first record.
#[derive(Clone, Debug)]
pub struct TapRun<'a> {
    /// The schedule (its subsystems, tick, states, hosts).
    pub schedule: &'a Schedule,
    /// The schedule's text, as read (for replay), when read from a file.
    pub schedule_text: Option<&'a str>,
    /// The cell table.
    pub table: &'a CellTable,
    /// The host that records (its name; the only one's name on one host).
    pub host: &'a str,
    /// The slots this host taps.
    pub slots: &'a [usize],
    /// The epoch (frame 0's release), monotonic clock.
    pub epoch: Nanos,
    /// The epoch on the realtime clock (ns since the Unix epoch), so that
    /// timelines show the time of day.
    pub epoch_unix: Nanos,
    /// The tick.
    pub tick: Nanos,
    /// Per cell, per element: the slot of the subsystem that writes it, if any.
    pub writers: Vec<Vec<Option<usize>>>,
    /// The states' names, by id.
    pub states: Vec<String>,
    /// Cells recorded (by index): the schedule's `record` table's choice.
    pub cells: Vec<bool>,
    /// Cells are recorded every this many frames of their writer (1: all).
    pub every: u64,
}

/// What every sink is told after the last record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TapEnd {
    /// Per tapped slot: records its ring was full for and dropped.
    pub dropped: Vec<(usize, u64)>,
    /// Records handed to the sinks.
    pub records: u64,
}

/// Where tapped records go. Called on the recorder thread only, in order:
/// `begin`, then records and events as they come (per slot in frame order;
/// across slots interleaved by the drain), then `end`. An error stops that
/// sink (the run goes on; the error is reported).
pub trait Sink: Send {
    /// The run begins (its epoch is set).
    fn begin(&mut self, run: &TapRun<'_>) -> std::io::Result<()>;
    /// A frame's timing.
    fn frame(&mut self, record: &FrameRecord) -> std::io::Result<()>;
    /// A cell read or published.
    fn cell(&mut self, record: &CellRecord<'_>) -> std::io::Result<()>;
    /// Whether it takes cells (a timeline does not). When no sink of a run
    /// does, the subsystems push none: only their frames' timing, 80 bytes a
    /// frame, whatever the cells' size.
    fn takes_cells(&self) -> bool {
        true
    }
    /// An event of the run.
    fn event(&mut self, event: &EventRecord) -> std::io::Result<()>;
    /// The run ended: flush and close.
    fn end(&mut self, end: &TapEnd) -> std::io::Result<()>;
    /// What it wrote, once ended, for the run's report: one line (`trace:
    /// PATH (N events, B bytes)`), and a shortfall to warn of (a cap reached).
    /// `None` when it wrote nothing to speak of.
    fn written(&self) -> Option<Written> {
        None
    }
}

/// What a sink wrote, in the run's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// One line: what, where, how much.
    pub line: String,
    /// A shortfall of what it wrote, if any.
    pub warning: Option<ictus_core::warning::Warning>,
}
