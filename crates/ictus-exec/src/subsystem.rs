//! Subsystems (seed 003 "The API", in Rust shape): a [`Subsystem`] is made by its
//! `init`, which registers its inputs and outputs by cell element name and keeps the
//! typed handles it gets as plain fields; each frame the executive copies every
//! input cell into the subsystem's own buffers, calls [`Subsystem::run`] with a
//! [`Frame`], and publishes every output after it. Reads and writes through the
//! frame touch only those buffers, so a frame sees one coherent snapshot of its
//! inputs however long it runs. `run` returns a [`Flow`] (go on, finished, stop the
//! run) or the subsystem's own error, which the schedule's `on_error` ([`OnError`])
//! handles and the run's report carries.
//!
//! ```
//! use ictus_exec::subsystem::{Flow, Frame, Input, Output, Registry, RegistryError, Subsystem};
//! use ictus_exec::state::StateId;
//!
//! /// Audio reads the velocity and the engine speed (it does not know who makes them).
//! struct Audio {
//!     velocity: Input<[f32; 3]>,
//!     rpm: Input<i32>,
//!     level: Output<f32>,
//!     gain: f32,
//! }
//!
//! /// Its settings: the schedule's `config = { gain = 0.01 }`.
//! #[derive(serde::Deserialize)]
//! struct Settings {
//!     gain: f32,
//! }
//!
//! /// What can go wrong: a registration, or a speed no engine makes.
//! #[derive(Debug, thiserror::Error)]
//! enum AudioError {
//!     #[error(transparent)]
//!     Registry(#[from] RegistryError),
//!     #[error("engine speed {0} rpm is negative")]
//!     NegativeRpm(i32),
//! }
//!
//! impl Subsystem for Audio {
//!     type Error = AudioError;
//!     fn init(reg: &mut Registry) -> Result<Self, AudioError> {
//!         let Settings { gain } = reg.settings()?;
//!         Ok(Audio {
//!             velocity: reg.input("dynamics.velocity")?,
//!             rpm: reg.input("engine.rpm")?,
//!             level: reg.output("audio.level")?,
//!             gain,
//!         })
//!     }
//!     fn run(&mut self, frame: &mut Frame) -> Result<Flow, AudioError> {
//!         if frame.state() != StateId::RUN {
//!             return Ok(Flow::Continue);
//!         }
//!         let rpm = frame.get(&self.rpm);
//!         if rpm < 0 {
//!             return Err(AudioError::NegativeRpm(rpm));
//!         }
//!         let speed = frame.get(&self.velocity).iter().map(|c| c * c).sum::<f32>().sqrt();
//!         frame.set(&self.level, self.gain * speed + rpm as f32 * 1e-4);
//!         Ok(Flow::Continue)
//!     }
//! }
//! ```
//!
//! Besides cells, a subsystem gets handles to the run's hubs (the schedule's
//! `[[hub]]` tables) by name in `init`: [`Registry::semaphore`], [`Registry::event`],
//! [`Registry::fifo_sender`], [`Registry::fifo_receiver`], [`Registry::port`],
//! [`Registry::resource`] (or [`Registry::hubs`] for the table). The hubs live in
//! the run's shared memory when the run launches programs, so a thread and a child
//! process that ask for the same name share one hub. Make the handles in `init`:
//! using them in `run` allocates nothing.
//!
//! ```
//! use ictus_exec::hub::{FifoSender, HubDecl, Hubs};
//! use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};
//!
//! struct Producer {
//!     tx: FifoSender<u64>,
//! }
//!
//! impl Subsystem for Producer {
//!     type Error = RegistryError;
//!     fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
//!         Ok(Producer { tx: reg.fifo_sender("numbers")? })
//!     }
//!     fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
//!         let _ = self.tx.try_send(frame.number());
//!         Ok(Flow::Continue)
//!     }
//! }
//! # let _ = (HubDecl::fifo::<u64>("numbers", 8), Hubs::in_process(&[]));
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use ictus_core::Nanos;
use thiserror::Error;

use crate::cell::{CellError, CellTable, Cells, Element, ElementSlot};
use crate::control::Control;
use crate::group::Group;
use crate::hub::{
    Event, FifoReceiver, FifoSender, HubError, Hubs, Port as HubPort, Resource, Semaphore,
};
use crate::state::{SetupStore, StateId, States};
use crate::tap::ring::{Direction, FrameRecord, TapWriter};

/// Any error a subsystem returns, as the executive keeps it: boxed, its chain of
/// sources intact, downcastable to the subsystem's own type
/// (`error.downcast_ref::<MyError>()`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a frame tells the executive (the status [`Subsystem::run`] returns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flow {
    /// Release it again at its next frame.
    #[default]
    Continue,
    /// It has done its work: it is not released again and shuts down; its later
    /// releases count as finished, not lost. (A member of a synchronous group that
    /// finishes ends its group: the others' remaining frames count as lost.)
    Finished,
    /// Ask the run to stop, as `ictus ctl stop` does: at the first major frame the
    /// coordinator can still announce. It keeps being released until then.
    StopRun,
}

/// What the executive does when [`Subsystem::run`] returns an error (the schedule's
/// `on_error`, per subsystem). Every error is counted and reported with its frame;
/// the first is kept whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// The subsystem stops (`stop`, the default): it is not released again, its
    /// remaining frames count as lost (the run is incomplete, `ictus run` exits 3),
    /// the others keep their beat, as when its process crashes.
    #[default]
    Stop,
    /// The frame counts as failed and the subsystem is released again
    /// (`continue`): for a subsystem that can recover at its next frame.
    Continue,
    /// The whole run stops at the first major frame it can still announce
    /// (`stop-run`): for a fault that makes the others' work meaningless.
    StopRun,
}

impl OnError {
    /// Its name in a schedule: `stop`, `continue`, `stop-run`.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Stop => "stop",
            OnError::Continue => "continue",
            OnError::StopRun => "stop-run",
        }
    }
}

/// A subsystem of the cyclic executive (seed 003's `SubsysBase`, with copper-rs's
/// typed tasks): made by `init` on its own thread, in its class, from what it
/// registers; released by `run` each frame; `shutdown` once after its last frame.
///
/// Its handles are plain fields (made in `init`, no `Option` to unpack each frame),
/// its settings its own serde type ([`Registry::settings`]), and its errors its own
/// type, carried through to the run's report and, in-process, to the caller
/// ([`crate::program::Outcome::error`]).
pub trait Subsystem: Send + Sized + 'static {
    /// Its own error (any `std::error::Error + Send + Sync`, or a `BoxError`).
    /// [`RegistryError`] must convert into it, so that `?` works in `init`.
    type Error: Into<BoxError> + From<RegistryError>;

    /// Registers inputs and outputs (and reads its settings) and makes the
    /// subsystem; runs once, on the subsystem's own thread, in its class, before the
    /// first frame. An error stops the run before it starts
    /// ([`crate::run::RunError::Init`] carries it).
    fn init(reg: &mut Registry) -> Result<Self, Self::Error>;

    /// One frame: inputs are fresh, outputs are published when it returns. The
    /// status says whether to go on; an error is handled by the schedule's
    /// `on_error` ([`OnError`]). The error path may allocate (boxing the error); the
    /// `Ok` path adds nothing to the frame.
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, Self::Error>;

    /// Once, after the last frame (also after `Finished` or an error). An error is
    /// reported with the subsystem's figures.
    fn shutdown(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A made subsystem as the executive drives it: the object-safe form of
/// [`Subsystem`], implemented for every one (errors boxed).
pub trait Driven: Send {
    /// [`Subsystem::run`].
    fn run_frame(&mut self, frame: &mut Frame) -> Result<Flow, BoxError>;
    /// [`Subsystem::shutdown`].
    fn shut_down(&mut self) -> Result<(), BoxError>;
    /// The subsystem itself, for [`crate::program::Outcome::take`] (`None` for a
    /// driven type that is not a [`Subsystem`], as a test's mock).
    fn into_any(self: Box<Self>) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }
}

impl<S: Subsystem> Driven for S {
    #[inline]
    fn run_frame(&mut self, frame: &mut Frame) -> Result<Flow, BoxError> {
        self.run(frame).map_err(Into::into)
    }
    fn shut_down(&mut self) -> Result<(), BoxError> {
        self.shutdown().map_err(Into::into)
    }
    fn into_any(self: Box<Self>) -> Option<Box<dyn std::any::Any + Send>> {
        Some(self)
    }
}

/// How to make one subsystem on its own thread: its type's `init`, or a closure
/// that calls it with more (a channel, a shared counter, a parameter).
pub struct Maker {
    make: MakeFn,
}

/// A maker's closure: registers, and returns the subsystem or its `init` error.
type MakeFn = Box<dyn FnOnce(&mut Registry) -> Result<Box<dyn Driven>, BoxError> + Send>;

impl fmt::Debug for Maker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Maker")
    }
}

impl Maker {
    /// Made by `S::init`.
    pub fn of<S: Subsystem>() -> Maker {
        Maker::with(S::init)
    }

    /// Made by `make`, which registers and returns the subsystem.
    pub fn with<S, F>(make: F) -> Maker
    where
        S: Subsystem,
        F: FnOnce(&mut Registry) -> Result<S, S::Error> + Send + 'static,
    {
        Maker {
            make: Box::new(move |reg| match make(reg) {
                Ok(s) => Ok(Box::new(s) as Box<dyn Driven>),
                Err(e) => Err(e.into()),
            }),
        }
    }

    /// Runs the maker: the subsystem, or the error of its `init`.
    pub fn make(self, reg: &mut Registry) -> Result<Box<dyn Driven>, BoxError> {
        (self.make)(reg)
    }
}

/// Why a registration failed.
#[derive(Debug, Error)]
pub enum RegistryError {
    /// The element does not exist, or has another type or length than asked for.
    #[error("subsystem {subsystem}: {source}")]
    Cell {
        /// The subsystem registering.
        subsystem: String,
        /// The cell table's answer (names the element, declared and requested type).
        #[source]
        source: CellError,
    },
    /// The hub does not exist, is of another kind or type, or its end is taken.
    #[error("subsystem {subsystem}: {source}")]
    Hub {
        /// The subsystem asking.
        subsystem: String,
        /// The hub table's answer.
        #[source]
        source: HubError,
    },
    /// Another subsystem already writes the element.
    #[error(
        "subsystem {subsystem}: element {element} is already written by {writer}: one writer per element"
    )]
    TwoWriters {
        /// The subsystem registering.
        subsystem: String,
        /// The element.
        element: String,
        /// The subsystem that writes it.
        writer: String,
    },
    /// A setting the subsystem needs is missing or wrong.
    #[error("subsystem {subsystem}: {message}")]
    Config {
        /// The subsystem.
        subsystem: String,
        /// What is wrong.
        message: String,
    },
}

/// A typed handle on an input element.
pub struct Input<T> {
    port: usize,
    offset: usize,
    _type: PhantomData<fn() -> T>,
}

/// A typed handle on an output element.
pub struct Output<T> {
    port: usize,
    offset: usize,
    _type: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Input<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Input(port {}, offset {})", self.port, self.offset)
    }
}

impl<T> fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Output(port {}, offset {})", self.port, self.offset)
    }
}

impl<T> Clone for Input<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Input<T> {}
impl<T> Clone for Output<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Output<T> {}

/// Untyped handles, for subsystems that work on whole cells whatever their layout
/// (the stress test's ring): the element's bytes in the frame's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPort {
    port: usize,
    offset: usize,
    len: usize,
}

/// One cell a subsystem reads or writes: the subsystem's own copy of it and, for an
/// output, the byte ranges it owns.
#[derive(Debug)]
struct Port {
    cell: usize,
    /// The subsystem's copy of the whole cell.
    buf: Vec<u8>,
    /// For inputs: where the next snapshot is copied; swapped with `buf` once it is
    /// coherent, so a read that gives up leaves the last coherent copy in `buf`.
    spare: Vec<u8>,
    /// For outputs: the byte ranges this subsystem owns, merged when adjacent.
    ranges: Vec<(usize, usize)>,
    /// For outputs: whether it owns the whole cell (published in one whole write).
    whole: bool,
}

impl Port {
    fn own(&mut self, offset: usize, len: usize) {
        self.ranges.push((offset, offset + len));
        self.ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.ranges.len());
        for &(a, b) in &self.ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.whole = merged.len() == 1 && merged[0] == (0, self.buf.len());
        self.ranges = merged;
    }
}

/// How long a read or write waits for a cell held by another writer before it
/// gives up, by default (see [`Ports::set_patience`]).
pub const DEFAULT_PATIENCE: Nanos = Nanos::from_micros(500);

/// Attempts made spinning before a held cell is waited for by sleeping.
const SPIN_ATTEMPTS: u32 = 64;

/// Sleep between attempts on a held cell: long enough to let a writer preempted on
/// this CPU (at a lower priority) finish its copy.
const HELD_SLEEP: Duration = Duration::from_micros(20);

/// Reads and writes that gave up on a cell because its writer was not progressing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Torn {
    /// How many gave up, in all.
    pub count: u64,
    /// The cell of the last one.
    pub last_cell: Option<usize>,
}

/// Makes `attempt` until it succeeds: a few spins, then sleeping between attempts,
/// for at most `patience`. Never spins unboundedly on a writer that is stopped,
/// dead or preempted on this CPU. Allocates nothing.
#[inline]
fn persist(patience: Nanos, mut attempt: impl FnMut() -> bool) -> bool {
    for _ in 0..SPIN_ATTEMPTS {
        if attempt() {
            return true;
        }
        std::hint::spin_loop();
    }
    let start = ictus_os::clock::monotonic_now();
    loop {
        std::thread::sleep(HELD_SLEEP);
        if attempt() {
            return true;
        }
        if ictus_os::clock::monotonic_now().saturating_sub(start) >= patience {
            return false;
        }
    }
}

/// A subsystem's inputs and outputs: its copies of the cells it uses, and the cell
/// storage they are copied from and published to.
///
/// A cell whose writer stops half way through a write (a paused or dead process,
/// a page-fault storm) is waited for at most the *patience*; then the read keeps
/// the last coherent copy (a write is skipped) and the give-up is counted in
/// [`Ports::torn`], for the coordinator to report. A reader never spins for ever on
/// a writer it may be keeping off its CPU.
pub struct Ports {
    cells: Cells,
    inputs: Vec<Port>,
    outputs: Vec<Port>,
    patience: Nanos,
    torn: Torn,
    tap: Option<PortsTap>,
}

/// What a tapped subsystem pushes of its cells (see [`crate::tap`]).
#[derive(Debug)]
struct PortsTap {
    writer: TapWriter,
    /// Per cell of the table: whether it is recorded.
    recorded: Vec<bool>,
    /// Cells are recorded every this many frames of the subsystem.
    every: u64,
    /// Frames begun.
    count: u64,
    /// The frame being run.
    frame: u64,
    /// Whether this frame's cells are recorded.
    now: bool,
    /// Per input: the sequence of the publication last recorded (`u64::MAX`:
    /// none yet).
    seen: Vec<u64>,
}

impl fmt::Debug for Ports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ports")
            .field("inputs", &self.inputs.len())
            .field("outputs", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Ports {
    /// No inputs or outputs yet, over `cells`.
    pub fn new(cells: Cells) -> Ports {
        Ports {
            cells,
            inputs: Vec::new(),
            outputs: Vec::new(),
            patience: DEFAULT_PATIENCE,
            torn: Torn::default(),
            tap: None,
        }
    }

    /// Taps this subsystem's cells into `writer` (see [`crate::tap`]): from the
    /// next [`begin_frame`](Self::begin_frame) on, each input that changed since
    /// the last recorded frame and each output are pushed, for the cells
    /// `recorded` marks (by index in the table), every `every` frames. Allocates
    /// (here, once); the pushes do not.
    pub fn set_tap(&mut self, writer: TapWriter, recorded: Vec<bool>, every: u64) {
        self.tap = Some(PortsTap {
            writer,
            recorded,
            every: every.max(1),
            count: 0,
            frame: 0,
            now: false,
            seen: vec![u64::MAX; self.inputs.len()],
        });
    }

    /// Whether the cells are tapped.
    pub fn is_tapped(&self) -> bool {
        self.tap.is_some()
    }

    /// Records the tap dropped because its ring was full (0 untapped).
    pub fn tap_drops(&self) -> u64 {
        self.tap.as_ref().map_or(0, |t| t.writer.drops())
    }

    /// Says which frame the next [`pull`](Self::pull) and [`push`](Self::push)
    /// belong to (for the tap; nothing otherwise).
    #[inline]
    pub fn begin_frame(&mut self, frame: u64) {
        if let Some(t) = &mut self.tap {
            t.now = t.count.is_multiple_of(t.every);
            t.count += 1;
            t.frame = frame;
        }
    }

    /// Pushes a frame's timing into the tap, if tapped; no allocation.
    #[inline]
    pub fn tap_frame(&mut self, record: &FrameRecord) {
        if let Some(t) = &mut self.tap {
            t.writer.frame(record);
        }
    }

    /// How long a read or write waits for a cell another writer holds before it
    /// gives up (default [`DEFAULT_PATIENCE`]; the executive uses half the tick, at
    /// most 1 ms).
    pub fn set_patience(&mut self, patience: Nanos) {
        self.patience = patience;
    }

    /// The reads and writes that gave up so far.
    pub fn torn(&self) -> Torn {
        self.torn
    }

    fn port(list: &mut Vec<Port>, cells: &Cells, cell: usize) -> usize {
        if let Some(i) = list.iter().position(|p| p.cell == cell) {
            return i;
        }
        list.push(Port {
            cell,
            buf: cells.new_buffer(cell),
            spare: cells.new_buffer(cell),
            ranges: Vec::new(),
            whole: false,
        });
        list.len() - 1
    }

    /// Copies every input cell in, one coherent snapshot per cell. A cell held by a
    /// writer for longer than the patience keeps its last coherent copy (counted in
    /// [`torn`](Self::torn)). No allocation.
    #[inline]
    pub fn pull(&mut self) {
        for (i, p) in self.inputs.iter_mut().enumerate() {
            let cells = &self.cells;
            let spare = &mut p.spare;
            let mut seq = 0;
            if persist(self.patience, || {
                cells
                    .try_read_cell(p.cell, spare)
                    .map(|s| seq = s)
                    .is_some()
            }) {
                std::mem::swap(&mut p.buf, &mut p.spare);
                if let Some(t) = &mut self.tap
                    && t.now
                    && t.recorded[p.cell]
                    && t.seen[i] != seq
                {
                    t.seen[i] = seq;
                    t.writer.cell(Direction::Input, t.frame, p.cell, &p.buf);
                }
            } else {
                self.torn.count += 1;
                self.torn.last_cell = Some(p.cell);
            }
        }
    }

    /// Publishes every output cell: one write per cell when the subsystem owns the
    /// whole cell or adjacent elements of it, else one per run of adjacent elements
    /// (each element is always whole; other writers' elements are kept).
    #[inline]
    pub fn push(&mut self) {
        for i in 0..self.outputs.len() {
            self.publish(i);
        }
        if !self.outputs.is_empty() {
            self.cells.notify_published();
        }
        if let Some(t) = &mut self.tap
            && t.now
        {
            for p in &self.outputs {
                if t.recorded[p.cell] {
                    t.writer.cell(Direction::Output, t.frame, p.cell, &p.buf);
                }
            }
        }
    }

    /// Publishes output `i` before the frame ends (an early flush).
    #[inline]
    fn flush(&mut self, i: usize) {
        self.publish(i);
        self.cells.notify_published();
    }

    #[inline]
    fn publish(&mut self, i: usize) {
        let p = &self.outputs[i];
        let cells = &self.cells;
        let written = if p.whole {
            persist(self.patience, || cells.try_write_cell(p.cell, &p.buf))
        } else {
            p.ranges.iter().all(|&(a, b)| {
                persist(self.patience, || {
                    cells.try_write_cell_range(p.cell, a, &p.buf[a..b])
                })
            })
        };
        if !written {
            self.torn.count += 1;
            self.torn.last_cell = Some(p.cell);
        }
    }

    /// Touches every cell once before the first frame, changing nothing: reads the
    /// inputs, and rewrites each output cell with what it holds. Maps the shared
    /// pages and warms the copy paths, so the first frames do not pay for it.
    pub fn warm_up(&mut self) {
        self.pull();
        for p in &mut self.outputs {
            let cells = &self.cells;
            let spare = &mut p.spare;
            if persist(self.patience, || {
                cells.try_read_cell(p.cell, spare).is_some()
            }) {
                p.buf.copy_from_slice(&p.spare);
            }
        }
        self.push();
    }

    /// Number of input cells and output cells.
    pub fn counts(&self) -> (usize, usize) {
        (self.inputs.len(), self.outputs.len())
    }

    /// The cells it reads, by index in the table, in registration order.
    pub fn input_cells(&self) -> impl Iterator<Item = usize> + '_ {
        self.inputs.iter().map(|p| p.cell)
    }

    /// The cells it writes, by index in the table, in registration order.
    pub fn output_cells(&self) -> impl Iterator<Item = usize> + '_ {
        self.outputs.iter().map(|p| p.cell)
    }
}

/// Claims of the elements subsystems write: one writer per element.
pub trait WriterClaims {
    /// Claims element `element` (by its index in the cell table) for subsystem `slot`;
    /// returns the slot of the subsystem already writing it, if another.
    fn claim(&self, element: usize, slot: usize) -> Result<(), usize>;

    /// Notes that a subsystem here reads element `element` (what the link judges a
    /// late copy by); nothing by default.
    fn read(&self, element: usize) {
        let _ = element;
    }
}

impl WriterClaims for Control {
    fn claim(&self, element: usize, slot: usize) -> Result<(), usize> {
        self.claim_writer(element, slot)
    }

    fn read(&self, element: usize) {
        self.mark_read(element);
    }
}

/// The index of the first element of cell `cell` among all the table's elements.
pub fn first_element_index(table: &CellTable, cell: usize) -> usize {
    table.cells()[..cell]
        .iter()
        .map(|c| c.elements().len())
        .sum()
}

/// The index, among all the table's elements, of the element at `offset` of `cell`.
pub fn element_index(table: &CellTable, cell: usize, offset: usize) -> usize {
    let pos = table.cells()[cell]
        .elements()
        .iter()
        .position(|e| e.offset() == offset)
        .unwrap_or(0);
    first_element_index(table, cell) + pos
}

/// The number of elements in the table.
pub fn element_count(table: &CellTable) -> usize {
    table.cells().iter().map(|c| c.elements().len()).sum()
}

/// What a subsystem registers with in [`Subsystem::init`].
pub struct Registry<'a> {
    name: &'a str,
    slot: usize,
    names: &'a [String],
    config: &'a toml::Table,
    states: &'a States,
    claims: &'a dyn WriterClaims,
    ports: Ports,
    explicit_ack: bool,
    setup: SetupClient,
    hubs: Hubs,
}

impl fmt::Debug for Registry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("subsystem", &self.name)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// Parts of a finished registration.
pub(crate) struct Registered {
    pub(crate) ports: Ports,
    pub(crate) explicit_ack: bool,
}

impl<'a> Registry<'a> {
    /// A registry for subsystem `names[slot]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        slot: usize,
        names: &'a [String],
        config: &'a toml::Table,
        states: &'a States,
        cells: Cells,
        claims: &'a dyn WriterClaims,
        setup: SetupClient,
        hubs: Hubs,
    ) -> Registry<'a> {
        Registry {
            name: &names[slot],
            slot,
            names,
            config,
            states,
            claims,
            ports: Ports::new(cells),
            explicit_ack: false,
            setup,
            hubs,
        }
    }

    /// A registry for driving a subsystem without [`crate::run::run`] (tests, or an
    /// executive of one's own): subsystem `names[slot]`, writers claimed in `control`,
    /// a setup channel of its own. Finish with [`into_parts`](Self::into_parts).
    pub fn standalone(
        slot: usize,
        names: &'a [String],
        config: &'a toml::Table,
        states: &'a States,
        cells: Cells,
        control: &'a Control,
    ) -> Registry<'a> {
        Registry::new(
            slot,
            names,
            config,
            states,
            cells,
            control,
            SetupClient::local(SetupStore::new()),
            Hubs::in_process(&[]).expect("an empty hub table is valid"),
        )
    }

    /// The same registry with the hubs `hubs` (a standalone registry has none).
    pub fn with_hubs(mut self, hubs: Hubs) -> Registry<'a> {
        self.hubs = hubs;
        self
    }

    /// The ports registered, for [`crate::executive::Runner::run`], and whether the
    /// subsystem acknowledges states explicitly.
    pub fn into_parts(self) -> (Ports, bool) {
        (self.ports, self.explicit_ack)
    }

    pub(crate) fn finish(self) -> Registered {
        Registered {
            ports: self.ports,
            explicit_ack: self.explicit_ack,
        }
    }

    fn cell_error(&self, source: CellError) -> RegistryError {
        RegistryError::Cell {
            subsystem: self.name.to_string(),
            source,
        }
    }

    /// Where element `cell.element` of type `T` lies, checked against the cell table.
    fn slot<T: Element>(&self, element: &str) -> Result<ElementSlot<T>, RegistryError> {
        self.ports
            .cells
            .table()
            .slot::<T>(element)
            .map_err(|e| self.cell_error(e))
    }

    /// Registers an input element (`cell.element`) of type `T`, checked against the
    /// cell table: the error names the element, the declared and the requested type.
    pub fn input<T: Element>(&mut self, element: &str) -> Result<Input<T>, RegistryError> {
        let slot = self.slot::<T>(element)?;
        self.claims.read(element_index(
            self.ports.cells.table(),
            slot.cell(),
            slot.offset(),
        ));
        let port = Ports::port(&mut self.ports.inputs, &self.ports.cells, slot.cell());
        Ok(Input {
            port,
            offset: slot.offset(),
            _type: PhantomData,
        })
    }

    /// Registers an output element of type `T` (see [`input`](Self::input)); refuses
    /// an element another subsystem already writes.
    pub fn output<T: Element>(&mut self, element: &str) -> Result<Output<T>, RegistryError> {
        let slot = self.slot::<T>(element)?;
        let index = element_index(self.ports.cells.table(), slot.cell(), slot.offset());
        self.claim(element, index)?;
        let port = Ports::port(&mut self.ports.outputs, &self.ports.cells, slot.cell());
        self.ports.outputs[port].own(slot.offset(), T::SIZE);
        Ok(Output {
            port,
            offset: slot.offset(),
            _type: PhantomData,
        })
    }

    fn claim(&self, element: &str, index: usize) -> Result<(), RegistryError> {
        self.claims
            .claim(index, self.slot)
            .map_err(|other| RegistryError::TwoWriters {
                subsystem: self.name.to_string(),
                element: element.to_string(),
                writer: self
                    .names
                    .get(other)
                    .cloned()
                    .unwrap_or_else(|| format!("#{other}")),
            })
    }

    /// Registers every element of cell `cell` as one untyped input.
    pub fn input_cell(&mut self, cell: &str) -> Result<RawPort, RegistryError> {
        let id = self.cell_id(cell)?;
        let table = self.ports.cells.table();
        let base = first_element_index(table, id);
        for i in 0..table.cells()[id].elements().len() {
            self.claims.read(base + i);
        }
        let port = Ports::port(&mut self.ports.inputs, &self.ports.cells, id);
        Ok(RawPort {
            port,
            offset: 0,
            len: self.ports.cells.cell_bytes(id),
        })
    }

    /// Registers every element of cell `cell` as one untyped output (claiming each).
    pub fn output_cell(&mut self, cell: &str) -> Result<RawPort, RegistryError> {
        let id = self.cell_id(cell)?;
        let table = self.ports.cells.table().clone();
        let base = first_element_index(&table, id);
        for (i, e) in table.cells()[id].elements().iter().enumerate() {
            self.claim(&format!("{cell}.{}", e.name()), base + i)?;
        }
        let len = self.ports.cells.cell_bytes(id);
        let port = Ports::port(&mut self.ports.outputs, &self.ports.cells, id);
        self.ports.outputs[port].own(0, len);
        Ok(RawPort {
            port,
            offset: 0,
            len,
        })
    }

    fn cell_id(&self, cell: &str) -> Result<usize, RegistryError> {
        self.ports
            .cells
            .cell_index(cell)
            .map_err(|e| self.cell_error(e))
    }

    /// The cell table.
    pub fn cells(&self) -> &Cells {
        &self.ports.cells
    }

    /// The subsystem acknowledges state changes itself with [`Frame::ack`] (as on
    /// the NADS). Without this, a frame run in a new state acknowledges it (as on the
    /// IDS, where calling the blocking function was the acknowledgement).
    pub fn acknowledge_explicitly(&mut self) {
        self.explicit_ack = true;
    }

    /// The subsystem's name.
    pub fn name(&self) -> &str {
        self.name
    }

    /// Its settings from the schedule (`config = { ... }`).
    pub fn config(&self) -> &toml::Table {
        self.config
    }

    /// Its settings from the schedule (`config = { ... }`) as the subsystem's own type
    /// (serde): a missing or mistyped key is an error naming `config.KEY` and what was
    /// expected, before the run starts.
    ///
    /// ```
    /// # use ictus_exec::subsystem::Registry;
    /// #[derive(serde::Deserialize)]
    /// struct Gains { kp: f64, #[serde(default)] ki: f64 }
    /// # fn init(reg: &mut Registry) -> Result<(), ictus_exec::subsystem::RegistryError> {
    /// let gains: Gains = reg.settings()?;
    /// # let _ = gains.kp + gains.ki; Ok(()) }
    /// ```
    pub fn settings<T: serde::de::DeserializeOwned>(&self) -> Result<T, RegistryError> {
        let value = toml::Value::Table(self.config.clone());
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            RegistryError::Config {
                subsystem: self.name.to_string(),
                message: if path == "." {
                    format!("config: {}", e.inner())
                } else {
                    format!("config.{path}: {}", e.inner())
                },
            }
        })
    }

    /// The state called `name` (off, pause, run or a schedule mode).
    pub fn state(&self, name: &str) -> Option<StateId> {
        self.states.id(name)
    }

    /// The non-real-time setup channel (keep a clone for later use off the RT path).
    pub fn setup(&self) -> &SetupClient {
        &self.setup
    }

    /// The run's hubs (the schedule's `[[hub]]` tables): in process memory, or in
    /// the run's shared memory when it launches programs. Keep a clone to make
    /// handles later, off the real-time path.
    pub fn hubs(&self) -> &Hubs {
        &self.hubs
    }

    fn hub_error(&self, source: HubError) -> RegistryError {
        RegistryError::Hub {
            subsystem: self.name.to_string(),
            source,
        }
    }

    /// The semaphore hub `name`.
    pub fn semaphore(&self, name: &str) -> Result<Semaphore, RegistryError> {
        self.hubs.semaphore(name).map_err(|e| self.hub_error(e))
    }

    /// The event hub `name`.
    pub fn event(&self, name: &str) -> Result<Event, RegistryError> {
        self.hubs.event(name).map_err(|e| self.hub_error(e))
    }

    /// The sending end of FIFO hub `name`, for messages of type `T` (one sender
    /// at a time, in any process).
    pub fn fifo_sender<T: Element>(&self, name: &str) -> Result<FifoSender<T>, RegistryError> {
        self.hubs.fifo_sender(name).map_err(|e| self.hub_error(e))
    }

    /// The receiving end of FIFO hub `name` (one receiver at a time).
    pub fn fifo_receiver<T: Element>(&self, name: &str) -> Result<FifoReceiver<T>, RegistryError> {
        self.hubs.fifo_receiver(name).map_err(|e| self.hub_error(e))
    }

    /// The port hub `name`, for messages of type `T`.
    pub fn port<T: Element>(&self, name: &str) -> Result<HubPort<T>, RegistryError> {
        self.hubs.port(name).map_err(|e| self.hub_error(e))
    }

    /// The resource hub `name`.
    pub fn resource(&self, name: &str) -> Result<Resource, RegistryError> {
        self.hubs.resource(name).map_err(|e| self.hub_error(e))
    }
}

/// The subsystem side of the setup channel: publish and fetch keyed blobs, served by
/// the coordinator outside the real-time CPUs. Blocking: never call it from `run` on
/// a real-time thread.
#[derive(Clone, Debug)]
pub struct SetupClient {
    inner: SetupInner,
}

#[derive(Clone, Debug)]
enum SetupInner {
    Local(SetupStore),
    Remote(std::path::PathBuf),
}

impl SetupClient {
    /// A client of an in-process store.
    pub fn local(store: SetupStore) -> SetupClient {
        SetupClient {
            inner: SetupInner::Local(store),
        }
    }

    /// A client of the coordinator's control socket at `socket`.
    pub fn remote(socket: std::path::PathBuf) -> SetupClient {
        SetupClient {
            inner: SetupInner::Remote(socket),
        }
    }

    /// Publishes `value` under `key`.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), crate::state::SetupChannelError> {
        match &self.inner {
            SetupInner::Local(s) => s.put(key, value.to_vec()),
            SetupInner::Remote(path) => crate::ctl::setup_put(path, key, value),
        }
    }

    /// The value under `key`, waiting up to `timeout` until somebody publishes it.
    pub fn get(
        &self,
        key: &str,
        timeout: std::time::Duration,
    ) -> Result<Vec<u8>, crate::state::SetupChannelError> {
        match &self.inner {
            SetupInner::Local(s) => s.get(key, timeout),
            SetupInner::Remote(path) => crate::ctl::setup_get(path, key, timeout),
        }
    }
}

/// One frame of one subsystem: its number, state and time, and access to the
/// subsystem's inputs and outputs.
pub struct Frame<'a> {
    /// Minor frames since the epoch.
    pub(crate) number: u64,
    /// The state the frame runs in.
    pub(crate) state: StateId,
    /// Its release time since the run's epoch.
    pub(crate) time: Nanos,
    /// The subsystem's period.
    pub(crate) period: Nanos,
    /// The subsystem's inputs and outputs.
    pub(crate) ports: &'a mut Ports,
    /// Where the subsystem acknowledges a state change.
    pub(crate) ack: &'a mut Option<StateId>,
    /// Its synchronous group, if any.
    pub(crate) group: Option<&'a Group>,
}

impl fmt::Debug for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("number", &self.number)
            .field("state", &self.state)
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

impl<'a> Frame<'a> {
    /// The frame number (minor frames since the epoch).
    #[inline]
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The state of this frame.
    #[inline]
    pub fn state(&self) -> StateId {
        self.state
    }

    /// The frame's release time since the run's epoch (`number * tick`).
    #[inline]
    pub fn time(&self) -> Nanos {
        self.time
    }

    /// The subsystem's period.
    #[inline]
    pub fn period(&self) -> Nanos {
        self.period
    }

    /// The subsystem's frequency in hertz.
    pub fn frequency_hz(&self) -> f64 {
        1e9 / self.period.as_u64() as f64
    }

    /// The value of an input, as copied in at the start of the frame.
    #[inline]
    pub fn get<T: Element>(&self, input: &Input<T>) -> T {
        let p = &self.ports.inputs[input.port];
        T::decode(&p.buf[input.offset..input.offset + T::SIZE])
    }

    /// Sets an output; it is published when the frame ends (or at [`flush`](Self::flush)).
    #[inline]
    pub fn set<T: Element>(&mut self, output: &Output<T>, value: T) {
        let p = &mut self.ports.outputs[output.port];
        value.encode(&mut p.buf[output.offset..output.offset + T::SIZE]);
    }

    /// The value an output holds in this subsystem (what it last set).
    #[inline]
    pub fn output<T: Element>(&self, output: &Output<T>) -> T {
        let p = &self.ports.outputs[output.port];
        T::decode(&p.buf[output.offset..output.offset + T::SIZE])
    }

    /// Publishes the cell of `output` now (seed 003's early flush, Figure 4): every
    /// output element of this subsystem in that cell goes out, and again at the end
    /// of the frame.
    #[inline]
    pub fn flush<T>(&mut self, output: &Output<T>) {
        self.ports.flush(output.port);
    }

    /// The bytes of an untyped input.
    #[inline]
    pub fn raw_input(&self, port: &RawPort) -> &[u8] {
        &self.ports.inputs[port.port].buf[port.offset..port.offset + port.len]
    }

    /// The bytes of an untyped output, to change in place.
    #[inline]
    pub fn raw_output(&mut self, port: &RawPort) -> &mut [u8] {
        &mut self.ports.outputs[port.port].buf[port.offset..port.offset + port.len]
    }

    /// An untyped input and an untyped output at once (to transform one into the other).
    #[inline]
    pub fn raw_pair(&mut self, input: &RawPort, output: &RawPort) -> (&[u8], &mut [u8]) {
        let ports = &mut *self.ports;
        let i = &ports.inputs[input.port].buf[input.offset..input.offset + input.len];
        let o = &mut ports.outputs[output.port].buf[output.offset..output.offset + output.len];
        (i, o)
    }

    /// Publishes the cell of an untyped output now.
    #[inline]
    pub fn flush_raw(&mut self, output: &RawPort) {
        self.ports.flush(output.port);
    }

    /// Acknowledges that the subsystem has reached `state`.
    #[inline]
    pub fn ack(&mut self, state: StateId) {
        *self.ack = Some(state);
    }

    /// Meets the other members of the subsystem's synchronous group (returns at once
    /// outside a group). Every member must call it the same number of times per frame.
    #[inline]
    pub fn rendezvous(&self) {
        if let Some(g) = self.group {
            g.rendezvous();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellTable, ElemType};
    use crate::control::Control;

    fn table() -> CellTable {
        let mut b = CellTable::builder();
        b.cell("dynamics")
            .element("velocity", ElemType::F32, 64)
            .element("gear", ElemType::I32, 1);
        b.cell("engine").element("rpm", ElemType::I32, 1);
        b.build().unwrap()
    }

    struct Fixture {
        names: Vec<String>,
        config: toml::Table,
        states: States,
        cells: Cells,
        control: Control,
    }

    fn fixture() -> Fixture {
        let t = table();
        Fixture {
            names: vec!["dynamics".into(), "audio".into()],
            config: toml::Table::new(),
            states: States::new(&[]),
            cells: Cells::in_process(&t),
            control: Control::in_process_with_claims(2, 1_000_000, element_count(&t)),
        }
    }

    impl Fixture {
        fn registry(&self, slot: usize) -> Registry<'_> {
            Registry::standalone(
                slot,
                &self.names,
                &self.config,
                &self.states,
                self.cells.clone(),
                &self.control,
            )
        }
    }

    #[test]
    fn settings_come_as_the_subsystems_own_type_and_a_wrong_key_is_named() {
        #[derive(Debug, serde::Deserialize, PartialEq)]
        struct Gains {
            kp: f64,
            #[serde(default)]
            ki: f64,
        }
        let mut f = fixture();
        f.config = toml::from_str("kp = 2.5").unwrap();
        assert_eq!(
            f.registry(0).settings::<Gains>().unwrap(),
            Gains { kp: 2.5, ki: 0.0 }
        );
        f.config = toml::from_str("kp = \"fast\"").unwrap();
        let err = f.registry(0).settings::<Gains>().unwrap_err().to_string();
        assert!(err.starts_with("subsystem dynamics: config.kp: "), "{err}");
        f.config = toml::Table::new();
        let err = f.registry(1).settings::<Gains>().unwrap_err().to_string();
        assert!(err.contains("missing field `kp`"), "{err}");
    }

    #[test]
    fn a_wrong_type_names_the_element_the_declared_and_the_requested_type() {
        let f = fixture();
        let mut sut = f.registry(1);
        let err = sut.input::<[f64; 64]>("dynamics.velocity").unwrap_err();
        assert_eq!(
            err.to_string(),
            "subsystem audio: element `dynamics.velocity` is declared `[f32; 64]` but was requested as `[f64; 64]`"
        );
        assert!(sut.input::<[f32; 64]>("dynamics.velocity").is_ok());
        assert!(matches!(
            sut.input::<i32>("engine.torque"),
            Err(RegistryError::Cell { .. })
        ));
    }

    #[test]
    fn a_second_writer_of_an_element_is_refused_with_the_first_named() {
        let f = fixture();
        let mut first = f.registry(0);
        first.output::<i32>("engine.rpm").unwrap();
        let mut second = f.registry(1);
        let err = second.output::<i32>("engine.rpm").unwrap_err();
        assert_eq!(
            err.to_string(),
            "subsystem audio: element engine.rpm is already written by dynamics: one writer per element"
        );
        // Other elements of a cell may have other writers; a whole cell may not.
        second.output::<i32>("dynamics.gear").unwrap();
        assert!(matches!(
            first.output_cell("dynamics"),
            Err(RegistryError::TwoWriters { .. })
        ));
        // Reading is never exclusive.
        second.input::<i32>("engine.rpm").unwrap();
    }

    #[test]
    fn a_frame_reads_its_snapshot_and_publishes_at_the_end_or_on_flush() {
        let f = fixture();
        let mut reg = f.registry(0);
        let gear = reg.output::<i32>("dynamics.gear").unwrap();
        let velocity = reg.output::<[f32; 64]>("dynamics.velocity").unwrap();
        let rpm_in = reg.input::<i32>("engine.rpm").unwrap();
        let (mut ports, _) = reg.into_parts();
        let mut rpm = f.cells.element::<i32>("engine.rpm").unwrap();
        let mut seen_gear = f.cells.element::<i32>("dynamics.gear").unwrap();
        rpm.write(&900);
        ports.pull();
        rpm.write(&1_200); // after the copy-in: not seen by this frame
        let mut ack = None;
        let mut sut = Frame {
            number: 7,
            state: StateId::RUN,
            time: Nanos::new(7_000),
            period: Nanos::new(1_000),
            ports: &mut ports,
            ack: &mut ack,
            group: None,
        };
        assert_eq!(sut.get(&rpm_in), 900);
        sut.set(&gear, 3);
        sut.set(&velocity, [2.0; 64]);
        assert_eq!(seen_gear.read(), 0, "not published before the frame ends");
        sut.flush(&gear);
        assert_eq!(seen_gear.read(), 3, "early flush");
        assert_eq!(sut.output(&velocity), [2.0; 64]);
        sut.ack(StateId::PAUSE);
        assert_eq!(ack, Some(StateId::PAUSE));
        ports.push();
        assert_eq!(
            f.cells
                .element::<[f32; 64]>("dynamics.velocity")
                .unwrap()
                .read(),
            [2.0; 64]
        );
    }
}
