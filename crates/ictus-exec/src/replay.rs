//! Replay (issue 24): one subsystem run again against the inputs a recording
//! ([`crate::tap::mcap`], read with [`ictus_capture::mcap::read`]) holds, frame by frame, its outputs compared with the
//! recorded ones bit for bit.
//!
//! [`Recording::open`] reads the file's `ictus` metadata (the schedule's text,
//! the cell table, the tick, what was recorded) and refuses a file that is not
//! MCAP, or truncated. [`Recording::replay`] makes the subsystem (its
//! [`Maker`]) over in-process cells made from the recorded table, then, for
//! each of its recorded frames in order (the `frames` channel): writes the
//! latest recorded input of each cell it reads at or before that frame, runs
//! the frame as the executive does (pull, run, push), and compares each
//! element the subsystem writes with the recorded publication of its slot at
//! that frame (the `cells/NAME` message whose `sequence` is the slot). The
//! first difference ends the replay ([`Difference`]: the frame, cell, element,
//! index in the array, both values).
//!
//! A replay is refused ([`ReplayError`]) when the subsystem is not in the
//! recording, when a cell it reads or writes was left out by the schedule's
//! `[record]` table or recorded every Nth frame only, or when the recording
//! dropped records of its slot (the `ictus.end` metadata).
//!
//! A subsystem that runs as a program is replayed in its own process:
//! `ictus replay` launches it with `ICTUS_REPLAY` set to the file, and
//! [`crate::child::run`] calls [`replay_program`], which writes the
//! [`ProgramVerdict`] as JSON to `ICTUS_OUTCOME`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ictus_capture::mcap::{CdrLayout, McapItem, Unreadable};
use ictus_core::{CpuSet, Nanos};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cell::{CellTable, Cells, ElemType};
use crate::control::Control;
use crate::hub::Hubs;
use crate::schedule::Schedule;
use crate::state::States;
use crate::subsystem::{Flow, Frame, Maker, Registry, element_count};
use crate::tap::mcap::cdr_layout;

/// The environment variable that puts a program in replay mode: the recording.
pub const REPLAY_ENV: &str = "ICTUS_REPLAY";

/// The environment variable that sets a program's replay beat (`recorded` or
/// `fast`, the default).
pub const REPLAY_BEAT_ENV: &str = "ICTUS_REPLAY_BEAT";

/// How fast frames are replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// As fast as they run.
    #[default]
    Fast,
    /// Each frame at its recorded deadline's offset from the first's, on a local
    /// epoch.
    Recorded,
}

impl std::str::FromStr for Pace {
    type Err = String;
    fn from_str(s: &str) -> Result<Pace, String> {
        match s {
            "fast" => Ok(Pace::Fast),
            "recorded" => Ok(Pace::Recorded),
            other => Err(format!(
                "unknown beat '{other}' (expected recorded or fast)"
            )),
        }
    }
}

/// Why a replay could not be made.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start as an MCAP file does.
    #[error("{} is not an MCAP file (it does not start with MCAP's magic bytes)", path.display())]
    NotMcap {
        /// The file.
        path: PathBuf,
    },
    /// The file starts as MCAP but does not end as one, or breaks off.
    #[error(
        "{} is truncated: {reason} (its recording did not end: a run killed, or a copy cut short)",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// What the reader found.
        reason: String,
    },
    /// An MCAP file that is not an ictus recording, or one that does not read.
    #[error("{}: {reason}", path.display())]
    NotARecording {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// The subsystem is not in the recording.
    #[error("subsystem '{name}' is not in the recording (its subsystems: {})", known.join(", "))]
    NoSubsystem {
        /// The name asked for.
        name: String,
        /// The recording's subsystems.
        known: Vec<String>,
    },
    /// A replay that cannot be bit for bit.
    #[error("cannot replay '{subsystem}': {reason}")]
    Refused {
        /// The subsystem.
        subsystem: String,
        /// Why.
        reason: String,
    },
    /// The subsystem could not be made.
    #[error("making '{subsystem}': {message}")]
    Init {
        /// The subsystem.
        subsystem: String,
        /// Its `init`'s error.
        message: String,
    },
}

/// The first difference between a recorded publication and the replayed one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difference {
    /// The frame.
    pub frame: u64,
    /// The cell.
    pub cell: String,
    /// The element.
    pub element: String,
    /// The index of the value within the element (0 for a scalar).
    pub index: usize,
    /// The recorded value, as its type prints it.
    pub recorded: String,
    /// The replayed value.
    pub replayed: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "frame {}, cell {}, element {}[{}]: recorded {}, replayed {}",
            self.frame, self.cell, self.element, self.index, self.recorded, self.replayed
        )
    }
}

/// What a replay found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The subsystem.
    pub subsystem: String,
    /// Frames replayed (up to and including a differing one).
    pub frames: u64,
    /// Cell publications compared.
    pub cells: u64,
    /// The first difference, if any.
    pub difference: Option<Difference>,
    /// The first error the subsystem's `run` returned where the recorded frame
    /// had none, or none where it had one: `(frame, message)`.
    pub error: Option<(u64, String)>,
}

impl Verdict {
    /// Whether the replay matched the recording bit for bit.
    pub fn matched(&self) -> bool {
        self.difference.is_none() && self.error.is_none()
    }

    /// Keeps the first frame whose `flow` failed where recorded `row` did not, or
    /// the reverse.
    fn note_error(&mut self, row: &FrameRow, flow: &Result<Flow, crate::subsystem::BoxError>) {
        if self.error.is_some() {
            return;
        }
        match (flow, row.error) {
            (Err(e), false) => {
                self.error = Some((
                    row.frame,
                    format!(
                        "its run returned an error the recorded frame did not: {}",
                        crate::executive::error_chain(e.as_ref())
                    ),
                ));
            }
            (Ok(_), true) => {
                self.error = Some((
                    row.frame,
                    "the recorded frame returned an error, the replayed one did not".into(),
                ));
            }
            _ => {}
        }
    }
}

/// Sleeps until `at`, if it is still to come.
fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// What a program in replay mode writes to `ICTUS_OUTCOME`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProgramVerdict {
    /// The replay ran.
    Verdict(Verdict),
    /// It was refused, or failed; the message says why.
    Error(String),
}

/// One frame of the `frames` channel, as replay reads it.
#[derive(Deserialize)]
struct FrameRow {
    slot: usize,
    frame: u64,
    state: String,
    deadline_ns: u64,
    #[serde(default)]
    error: bool,
}

/// A recording, its metadata read.
#[derive(Debug)]
pub struct Recording {
    path: PathBuf,
    bytes: Vec<u8>,
    /// The run's schedule, as recorded.
    pub schedule: Schedule,
    /// The run's cell table.
    pub table: CellTable,
    /// The tick.
    pub tick: Nanos,
    /// Frame 0's release on the realtime clock (ns since the Unix epoch).
    pub epoch_unix: u64,
    /// Every how many frames each writer's publications were recorded.
    pub every: u64,
    /// The recorded cells, by name.
    pub recorded: Vec<String>,
    /// The slots this recording tapped.
    pub slots: Vec<usize>,
    /// Per cell, per element: its writer's slot.
    pub writers: Vec<Vec<Option<usize>>>,
    /// Per slot: the records dropped (`None`: the recording has no end).
    pub dropped: Option<BTreeMap<usize, u64>>,
}

fn meta<'m>(
    m: &'m BTreeMap<String, String>,
    key: &str,
    bad: &dyn Fn(String) -> ReplayError,
) -> Result<&'m str, ReplayError> {
    m.get(key)
        .map(String::as_str)
        .ok_or_else(|| bad(format!("its `ictus` metadata has no `{key}`")))
}

fn parsed<T: serde::de::DeserializeOwned>(
    m: &BTreeMap<String, String>,
    key: &str,
    bad: &dyn Fn(String) -> ReplayError,
) -> Result<T, ReplayError> {
    serde_json::from_str(meta(m, key, bad)?)
        .map_err(|e| bad(format!("its `ictus` metadata's `{key}` does not read: {e}")))
}

impl Recording {
    /// Reads `path` and its metadata.
    pub fn open(path: &Path) -> Result<Recording, ReplayError> {
        let bytes = std::fs::read(path).map_err(|source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let path = path.to_path_buf();
        let truncated = |reason: String| ReplayError::Truncated {
            path: path.clone(),
            reason,
        };
        let items = match ictus_capture::mcap::read(&bytes) {
            Ok(items) => items,
            Err(Unreadable::NotMcap) => return Err(ReplayError::NotMcap { path }),
            Err(Unreadable::Truncated(reason)) => return Err(truncated(reason)),
        };
        let bad = |reason: String| ReplayError::NotARecording {
            path: path.clone(),
            reason,
        };
        let mut run = None;
        let mut end = None;
        for item in items {
            match item.map_err(&truncated)? {
                McapItem::Metadata { name, metadata } if name == "ictus" => run = Some(metadata),
                McapItem::Metadata { name, metadata } if name == "ictus.end" => {
                    end = Some(metadata)
                }
                _ => {}
            }
        }
        let m = run.ok_or_else(|| bad("not an ictus recording (no `ictus` metadata)".into()))?;
        let text = meta(&m, "schedule", &bad)?;
        let schedule_path = PathBuf::from(meta(&m, "schedule_path", &bad)?);
        let every_cpu = CpuSet::from_cpus(0..=ictus_core::cpulist::MAX_CPU);
        let schedule = Schedule::parse(text, &schedule_path, &every_cpu)
            .map_err(|e| bad(format!("its schedule does not read: {e}")))?;
        let table = CellTable::from_json(meta(&m, "cells", &bad)?)
            .map_err(|e| bad(format!("its cell table does not read: {e}")))?;
        let number = |key: &str| -> Result<u64, ReplayError> {
            meta(&m, key, &bad)?
                .parse()
                .map_err(|e| bad(format!("its `ictus` metadata's `{key}`: {e}")))
        };
        let tick = Nanos::new(number("tick_ns")?);
        let epoch_unix = number("epoch_unix")?;
        let every = number("every")?;
        let recorded: Vec<String> = parsed(&m, "recorded", &bad)?;
        let slots: Vec<usize> = parsed(&m, "slots", &bad)?;
        let writers: Vec<Vec<Option<usize>>> = parsed(&m, "writers", &bad)?;
        let dropped = match end {
            None => None,
            Some(e) => {
                let by_slot: BTreeMap<String, u64> = parsed(&e, "dropped", &bad)?;
                Some(
                    by_slot
                        .into_iter()
                        .filter_map(|(k, v)| k.parse().ok().map(|k| (k, v)))
                        .collect(),
                )
            }
        };
        if tick == Nanos::ZERO {
            return Err(bad("its tick is zero".into()));
        }
        Ok(Recording {
            path,
            bytes,
            schedule,
            table,
            tick,
            epoch_unix,
            every,
            recorded,
            slots,
            writers,
            dropped,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The slot of subsystem `name`, checked to be replayable from this
    /// recording (tapped, nothing of it dropped, every frame recorded).
    pub fn slot_of(&self, name: &str) -> Result<usize, ReplayError> {
        let refused = |reason: String| ReplayError::Refused {
            subsystem: name.to_string(),
            reason,
        };
        let slot = self
            .schedule
            .subsystems
            .iter()
            .position(|s| s.name == name)
            .filter(|s| self.slots.contains(s))
            .ok_or_else(|| ReplayError::NoSubsystem {
                name: name.to_string(),
                known: self
                    .slots
                    .iter()
                    .filter_map(|&s| self.schedule.subsystems.get(s))
                    .map(|s| s.name.clone())
                    .collect(),
            })?;
        if self.every != 1 {
            return Err(refused(format!(
                "the recording kept every {}th publication only ([record] every = {}); replay needs every = 1",
                self.every, self.every
            )));
        }
        match &self.dropped {
            None => {
                return Err(refused(
                    "the recording has no end record (`ictus.end`): its drops are unknown".into(),
                ));
            }
            Some(d) => {
                if let Some(&n) = d.get(&slot).filter(|&&n| n > 0) {
                    return Err(refused(format!(
                        "the recording dropped {n} of its records (its ring was full): its frames are not all there"
                    )));
                }
            }
        }
        Ok(slot)
    }

    /// Replays subsystem `name`, made by `maker`, on `beat`.
    pub fn replay(&self, name: &str, maker: Maker, beat: Pace) -> Result<Verdict, ReplayError> {
        let slot = self.slot_of(name)?;
        let spec = &self.schedule.subsystems[slot];
        let refused = |reason: String| ReplayError::Refused {
            subsystem: name.to_string(),
            reason,
        };
        let bad = |reason: String| ReplayError::NotARecording {
            path: self.path.clone(),
            reason,
        };
        let cells = Cells::in_process(&self.table);
        let control = self.fresh_control();
        let states = States::new(&self.schedule.modes);
        let names: Vec<String> = self.schedule.subsystem_names().map(String::from).collect();
        let hubs = Hubs::in_process(&self.schedule.hubs).map_err(|e| ReplayError::Init {
            subsystem: name.to_string(),
            message: format!("hubs: {e}"),
        })?;
        let mut reg =
            Registry::standalone(slot, &names, &spec.config, &states, cells.clone(), &control)
                .with_hubs(hubs);
        let mut driven = maker.make(&mut reg).map_err(|e| ReplayError::Init {
            subsystem: name.to_string(),
            message: crate::executive::error_chain(e.as_ref()),
        })?;
        let (mut ports, _) = reg.into_parts();
        let inputs: Vec<usize> = ports.input_cells().collect();
        let outputs: Vec<usize> = ports.output_cells().collect();
        self.check_recorded(&inputs, &outputs).map_err(refused)?;
        let data = self.messages(slot, name)?;
        if data.frames.is_empty() {
            return Err(refused(
                "the recording holds no frame of it (it never ran, or its frames were not tapped)"
                    .into(),
            ));
        }
        let mut verdict = Verdict {
            subsystem: name.to_string(),
            frames: 0,
            cells: 0,
            difference: None,
            error: None,
        };
        let mut next_input = 0;
        let mut replayed: Vec<Vec<u8>> = outputs.iter().map(|&c| cells.new_buffer(c)).collect();
        let period = self.tick * spec.period;
        let local = Instant::now();
        let first = data.frames.first().map_or(0, |f| f.deadline_ns);
        for row in &data.frames {
            if beat == Pace::Recorded {
                sleep_until(local + Duration::from_nanos(row.deadline_ns.saturating_sub(first)));
            }
            while let Some((frame, cell, bytes)) = data.inputs.get(next_input)
                && *frame <= row.frame
            {
                cells.write_cell(*cell, bytes);
                next_input += 1;
            }
            let state = states.id(&row.state).ok_or_else(|| {
                bad(format!(
                    "frame {}: unknown state '{}'",
                    row.frame, row.state
                ))
            })?;
            ports.pull();
            let mut ack = None;
            let flow = {
                let mut f = Frame {
                    number: row.frame,
                    state,
                    time: Nanos::new(row.deadline_ns),
                    period,
                    ports: &mut ports,
                    ack: &mut ack,
                    group: None,
                };
                driven.run_frame(&mut f)
            };
            ports.push();
            verdict.frames += 1;
            verdict.note_error(row, &flow);
            let outputs = outputs.iter().copied().zip(replayed.iter_mut());
            if self
                .compare_outputs(slot, row.frame, outputs, &cells, &data, &mut verdict)
                .map_err(refused)?
            {
                let _ = driven.shut_down();
                return Ok(verdict);
            }
            if verdict.error.is_some() || matches!(flow, Ok(Flow::Finished | Flow::StopRun)) {
                break;
            }
        }
        let _ = driven.shut_down();
        Ok(verdict)
    }

    /// Whether every cell the subsystem reads (`inputs`) and writes (`outputs`) was
    /// recorded; else why not.
    fn check_recorded(&self, inputs: &[usize], outputs: &[usize]) -> Result<(), String> {
        for (&cell, what) in inputs
            .iter()
            .map(|c| (c, "reads"))
            .chain(outputs.iter().map(|c| (c, "writes")))
        {
            let cell_name = self.table.cells()[cell].name();
            if !self.recorded.iter().any(|r| r == cell_name) {
                return Err(format!(
                    "it {what} cell {cell_name}, which the recording left out (the schedule's [record] cells)"
                ));
            }
        }
        Ok(())
    }

    /// A control block for the recorded run's subsystems and cells, in this process.
    fn fresh_control(&self) -> Control {
        Control::in_process_with_claims(
            self.schedule.subsystems.len(),
            self.tick.as_u64(),
            element_count(&self.table),
        )
    }

    /// Compares the publications of frame `frame` of `slot` in its `outputs` (each
    /// cell with a buffer to read it into) with the recording's `data`, counted in
    /// `verdict`: whether one differed (kept in `verdict`), or why they cannot be
    /// compared.
    fn compare_outputs<'b>(
        &self,
        slot: usize,
        frame: u64,
        outputs: impl Iterator<Item = (usize, &'b mut Vec<u8>)>,
        cells: &Cells,
        data: &Messages,
        verdict: &mut Verdict,
    ) -> Result<bool, String> {
        for (cell, replayed) in outputs {
            let recorded = data.outputs.get(&(frame, cell)).ok_or_else(|| {
                format!(
                    "frame {frame}: the recording has no publication of cell {} by it",
                    self.table.cells()[cell].name()
                )
            })?;
            cells.read_cell(cell, replayed);
            verdict.cells += 1;
            if let Some(d) = self.compare(slot, cell, frame, recorded, replayed) {
                verdict.difference = Some(d);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The first element of `slot`'s own in `cell` that differs.
    fn compare(
        &self,
        slot: usize,
        cell: usize,
        frame: u64,
        recorded: &[u8],
        replayed: &[u8],
    ) -> Option<Difference> {
        let decl = &self.table.cells()[cell];
        for (e, element) in decl.elements().iter().enumerate() {
            let own = self
                .writers
                .get(cell)
                .and_then(|w| w.get(e))
                .copied()
                .flatten();
            if own != Some(slot) {
                continue;
            }
            let range = element.range();
            let (a, b) = (&recorded[range.clone()], &replayed[range]);
            if a == b {
                continue;
            }
            let size = element.shape().ty.size();
            let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0) / size;
            let value =
                |bytes: &[u8]| value(element.shape().ty, &bytes[at * size..(at + 1) * size]);
            return Some(Difference {
                frame,
                cell: decl.name().to_string(),
                element: element.name().to_string(),
                index: at,
                recorded: value(a),
                replayed: value(b),
            });
        }
        None
    }

    /// One pass over the messages: `slot`'s frames, its inputs, and its
    /// publications.
    fn messages(&self, slot: usize, name: &str) -> Result<Messages, ReplayError> {
        let truncated = |reason: String| ReplayError::Truncated {
            path: self.path.clone(),
            reason,
        };
        let bad = |reason: String| ReplayError::NotARecording {
            path: self.path.clone(),
            reason,
        };
        enum Topic {
            Frames,
            Input(usize),
            Output(usize),
            Other,
        }
        let input_prefix = format!("inputs/{name}/");
        let mut topics: HashMap<u16, Topic> = HashMap::new();
        let mut out = Messages::default();
        let layouts: Vec<CdrLayout> = self.table.cells().iter().map(cdr_layout).collect();
        let cell_of = |topic: &str| self.table.cell_index(topic).ok();
        let frame_of =
            |log_time: u64| log_time.saturating_sub(self.epoch_unix) / self.tick.as_u64();
        let items = ictus_capture::mcap::read(&self.bytes).map_err(|e| match e {
            Unreadable::NotMcap => truncated("it is no longer MCAP".into()),
            Unreadable::Truncated(reason) => truncated(reason),
        })?;
        for item in items {
            match item.map_err(&truncated)? {
                McapItem::Channel { id, topic: name } => {
                    let topic = if name == "frames" {
                        Topic::Frames
                    } else if let Some(cell) = name.strip_prefix(&input_prefix).and_then(cell_of) {
                        Topic::Input(cell)
                    } else if let Some(cell) = name.strip_prefix("cells/").and_then(cell_of) {
                        Topic::Output(cell)
                    } else {
                        Topic::Other
                    };
                    topics.insert(id, topic);
                }
                McapItem::Message {
                    channel,
                    sequence,
                    log_time,
                    data,
                } => match topics.get(&channel) {
                    Some(Topic::Frames) if sequence as usize == slot => {
                        let row: FrameRow = serde_json::from_slice(&data)
                            .map_err(|e| bad(format!("a `frames` message does not read: {e}")))?;
                        if row.slot == slot {
                            out.frames.push(row);
                        }
                    }
                    Some(&Topic::Input(cell)) => {
                        let mut packed = vec![0; self.table.cells()[cell].bytes()];
                        if !layouts[cell].decode(&data, &mut packed) {
                            return Err(bad(format!(
                                "an input of cell {cell} is not its CDR layout"
                            )));
                        }
                        out.inputs.push((frame_of(log_time), cell, packed));
                    }
                    Some(&Topic::Output(cell)) if sequence as usize == slot => {
                        let mut packed = vec![0; self.table.cells()[cell].bytes()];
                        if !layouts[cell].decode(&data, &mut packed) {
                            return Err(bad(format!(
                                "a publication of cell {cell} is not its CDR layout"
                            )));
                        }
                        out.outputs.insert((frame_of(log_time), cell), packed);
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        out.frames.sort_by_key(|f| f.frame);
        out.inputs.sort_by_key(|i| i.0);
        Ok(out)
    }
}

/// What replay needs of one subsystem's messages.
#[derive(Default)]
struct Messages {
    frames: Vec<FrameRow>,
    /// (frame, cell, packed bytes), by frame.
    inputs: Vec<(u64, usize, Vec<u8>)>,
    /// (frame, cell) to the packed publication.
    outputs: HashMap<(u64, usize), Vec<u8>>,
}

/// One little-endian value of `ty`, printed.
fn value(ty: ElemType, b: &[u8]) -> String {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    match ty {
        ElemType::I8 => (b[0] as i8).to_string(),
        ElemType::U8 => b[0].to_string(),
        ElemType::Bool => (b[0] != 0).to_string(),
        ElemType::I16 => i16::from_le_bytes(arr(b)).to_string(),
        ElemType::U16 => u16::from_le_bytes(arr(b)).to_string(),
        ElemType::I32 => i32::from_le_bytes(arr(b)).to_string(),
        ElemType::U32 => u32::from_le_bytes(arr(b)).to_string(),
        ElemType::Char => {
            let v = u32::from_le_bytes(arr(b));
            char::from_u32(v).map_or_else(|| format!("U+{v:04X}"), |c| format!("{c:?}"))
        }
        ElemType::I64 => i64::from_le_bytes(arr(b)).to_string(),
        ElemType::U64 => u64::from_le_bytes(arr(b)).to_string(),
        ElemType::F32 => {
            let v = f32::from_le_bytes(arr(b));
            format!("{v:?} (0x{:08x})", v.to_bits())
        }
        ElemType::F64 => {
            let v = f64::from_le_bytes(arr(b));
            format!("{v:?} (0x{:016x})", v.to_bits())
        }
    }
}

/// The replay of a program's own subsystem (`ICTUS_REPLAY` set): opens the
/// recording, replays subsystem `name` made by `maker` on the beat
/// `ICTUS_REPLAY_BEAT` says, and writes the [`ProgramVerdict`] to
/// `ICTUS_OUTCOME` (when set). Returns the verdict, or the error in words.
pub fn replay_program(file: &Path, name: &str, maker: Maker) -> Result<Verdict, String> {
    let beat = match std::env::var(REPLAY_BEAT_ENV) {
        Ok(b) if !b.is_empty() => b.parse::<Pace>()?,
        _ => Pace::Fast,
    };
    let result = Recording::open(file)
        .and_then(|r| r.replay(name, maker, beat))
        .map_err(|e| e.to_string());
    if let Some(out) = std::env::var_os(crate::run::env::OUTCOME) {
        let verdict = match &result {
            Ok(v) => ProgramVerdict::Verdict(v.clone()),
            Err(e) => ProgramVerdict::Error(e.clone()),
        };
        let json = serde_json::to_string(&verdict).map_err(|e| e.to_string())?;
        ictus_os::fs::write_atomic(Path::new(&out), json).map_err(|e| e.to_string())?;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::mcap::McapSink;
    use crate::tap::{CellRecord, Direction, EventRecord, FrameRecord, Sink, TapEnd, TapRun};

    const SCHEDULE: &str = "name = \"ring\"\ntick = \"1ms\"\nmajor_frame = 1\ninitial_state = \"run\"\n[[cell]]\nname = \"A\"\nelements = [ { name = \"x\", type = \"i32\" }, { name = \"f\", type = \"f64\", len = 3 } ]\n[[cell]]\nname = \"B\"\nelements = [ { name = \"x\", type = \"i32\" }, { name = \"f\", type = \"f64\", len = 3 } ]\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"A\", to = \"B\" }\n";

    /// Records `frames` frames of subsystem `a` (A to B, plus one), with
    /// `tamper` changing a publication's bytes before it is recorded.
    fn record(path: &Path, text: &str, frames: u64, tamper: impl Fn(u64, &mut [u8])) {
        record_dropping(path, text, frames, tamper, 0);
    }

    /// [`record`], its end counting `dropped` records of slot 0.
    fn record_dropping(
        path: &Path,
        text: &str,
        frames: u64,
        tamper: impl Fn(u64, &mut [u8]),
        dropped: u64,
    ) {
        let schedule = Schedule::parse(text, "ring.toml", &CpuSet::from_cpus([0, 1])).unwrap();
        let table = schedule.cell_table().unwrap();
        let recorded: Vec<bool> = table
            .cells()
            .iter()
            .map(|c| {
                schedule
                    .record
                    .cells
                    .as_ref()
                    .is_none_or(|r| r.iter().any(|n| n == c.name()))
            })
            .collect();
        let writers = vec![vec![None, None], vec![Some(0), Some(0)]];
        let mut sink = McapSink::create(path).unwrap();
        let epoch = Nanos::from_secs(100);
        sink.begin(&TapRun {
            schedule: &schedule,
            schedule_text: Some(text),
            table: &table,
            host: "here",
            slots: &[0],
            epoch,
            epoch_unix: Nanos::from_secs(1_700_000_000),
            tick: schedule.tick,
            writers,
            states: vec!["off".into(), "pause".into(), "run".into()],
            cells: recorded,
            every: schedule.record.every,
        })
        .unwrap();
        let decl = &table.cells()[0];
        let mut a = vec![0u8; decl.bytes()];
        let mut b = vec![0u8; decl.bytes()];
        for f in 0..frames {
            // A changes every other frame (an input is sent when it changed).
            if f % 2 == 0 {
                a[..4].copy_from_slice(&(f as i32 * 10).to_le_bytes());
                a[4..12].copy_from_slice(&(f as f64 / 3.0).to_le_bytes());
                sink.cell(&CellRecord {
                    slot: 0,
                    frame: f,
                    cell: 0,
                    direction: Direction::Input,
                    bytes: &a,
                })
                .unwrap();
            }
            crate::stress::increment(decl, &a, &mut b);
            tamper(f, &mut b);
            sink.cell(&CellRecord {
                slot: 0,
                frame: f,
                cell: 1,
                direction: Direction::Output,
                bytes: &b,
            })
            .unwrap();
            let deadline = epoch + schedule.tick * f;
            sink.frame(&FrameRecord {
                slot: 0,
                frame: f,
                state: 2,
                deadline,
                woke: deadline + Nanos::from_micros(3),
                agreed: None,
                end: deadline + Nanos::from_micros(9),
                budget: schedule.tick,
                skipped: 0,
                cpu: Some(1),
                error: false,
            })
            .unwrap();
        }
        sink.event(&EventRecord {
            time: epoch,
            frame: Some(0),
            slot: None,
            kind: "state",
            message: "run".into(),
        })
        .unwrap();
        sink.end(&TapEnd {
            dropped: vec![(0, dropped)],
            records: frames * 3,
        })
        .unwrap();
    }

    fn replay(path: &Path, name: &str) -> Result<Verdict, ReplayError> {
        let rec = Recording::open(path)?;
        let spec = rec.schedule.subsystem(name).cloned();
        let maker = match spec {
            Some(s) => crate::run::builtin(&s).unwrap(),
            None => Maker::of::<crate::run::Idle>(),
        };
        rec.replay(name, maker, Pace::Fast)
    }

    #[test]
    fn a_recorded_increment_replays_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mcap");
        record(&path, SCHEDULE, 7, |_, _| {});
        let v = replay(&path, "a").unwrap();
        assert!(v.matched(), "{v:?}");
        assert_eq!((v.frames, v.cells), (7, 7));
        let v = Recording::open(&path)
            .unwrap()
            .replay(
                "a",
                crate::run::builtin(&Recording::open(&path).unwrap().schedule.subsystems[0])
                    .unwrap(),
                Pace::Recorded,
            )
            .unwrap();
        assert!(v.matched(), "{v:?}");
    }

    #[test]
    fn the_first_difference_names_its_frame_cell_element_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mcap");
        record(&path, SCHEDULE, 7, |f, b| {
            if f >= 4 {
                b[12..20].copy_from_slice(&0.5f64.to_le_bytes());
            }
        });
        let v = replay(&path, "a").unwrap();
        assert_eq!(v.frames, 5);
        let d = v.difference.unwrap();
        assert_eq!(
            (d.frame, d.cell.as_str(), d.element.as_str(), d.index),
            (4, "B", "f", 1)
        );
        assert!(d.recorded.starts_with("0.5 "), "{d}");
        assert!(d.replayed.starts_with("1.0 "), "{d}");
    }

    #[test]
    fn replays_that_cannot_be_exact_are_refused_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mcap");
        record(
            &path,
            &format!("{SCHEDULE}[record]\ncells = [\"B\"]\n"),
            3,
            |_, _| {},
        );
        let err = replay(&path, "a").unwrap_err();
        assert!(
            err.to_string()
                .contains("it reads cell A, which the recording left out"),
            "{err}"
        );
        let err = replay(&path, "zz").unwrap_err();
        assert!(matches!(err, ReplayError::NoSubsystem { .. }), "{err}");
        record(
            &path,
            &format!("{SCHEDULE}[record]\nevery = 2\n"),
            3,
            |_, _| {},
        );
        let err = replay(&path, "a").unwrap_err();
        assert!(err.to_string().contains("every = 2"), "{err}");
        record_dropping(&path, SCHEDULE, 3, |_, _| {}, 5);
        let err = replay(&path, "a").unwrap_err();
        assert!(
            err.to_string().contains("dropped 5 of its records"),
            "{err}"
        );
        record(&path, SCHEDULE, 3, |_, _| {});
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.mcap");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let err = replay(&cut, "a").unwrap_err();
        assert!(matches!(err, ReplayError::Truncated { .. }), "{err}");
        std::fs::write(&cut, "not mcap").unwrap();
        let err = replay(&cut, "a").unwrap_err();
        assert!(matches!(err, ReplayError::NotMcap { .. }), "{err}");
    }
}
