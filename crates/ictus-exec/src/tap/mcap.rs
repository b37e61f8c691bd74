//! The MCAP recording of a run (issue 24): [`McapSink`], a [`Sink`] that writes
//! every tapped cell, frame and event to an MCAP file that Foxglove and the
//! `mcap` Python package open, and that [`crate::replay`] reads back. The file
//! and its encodings are `ictus_capture::mcap`'s; this sink maps a run onto them.
//!
//! The file (docs/recording.md has the details):
//!
//! - `cells/NAME`, one channel per recorded cell: schema encoding `ros2msg` (the
//!   cell's elements in order, [`schema_text`]), message encoding `cdr`
//!   ([`CdrLayout`]). One message per publication: the cell as its writer left
//!   it (the writer's own elements copied over the image of the cell the
//!   previous publications built, from zeros), `sequence` the writer's slot,
//!   `log_time` and `publish_time` the frame's deadline on the realtime clock.
//! - `inputs/SUBSYSTEM/CELL`: what a subsystem pulled, when it changed since its
//!   last frame (the latest message at or before a frame is what it read).
//! - `frames` (JSON): one message per frame of each subsystem: its timing.
//! - `events` (JSON): the run's events (state changes, misses, crashes).
//! - metadata `ictus` (the run: schedule text, cell table, tick, epoch, what is
//!   recorded) and, at the end, `ictus.end` (the records dropped per slot).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ictus_capture::mcap::{
    CdrElement, CdrLayout, EVENT_SCHEMA, EventMessage, FORMAT, FRAME_SCHEMA, FrameMessage,
    McapWriter, ros2msg_schema,
};
use ictus_core::Nanos;

use crate::cell::{CellDecl, ElemType};
use crate::tap::{CellRecord, Direction, EventRecord, FrameRecord, Sink, TapEnd, TapRun, Written};

/// The ros2msg name of an element type. `char` (a Unicode scalar value in 4
/// bytes) is a `uint32`; `bool` is one byte.
pub fn ros2msg_type(ty: ElemType) -> &'static str {
    match ty {
        ElemType::I8 => "int8",
        ElemType::I16 => "int16",
        ElemType::I32 => "int32",
        ElemType::I64 => "int64",
        ElemType::U8 => "uint8",
        ElemType::U16 => "uint16",
        ElemType::U32 | ElemType::Char => "uint32",
        ElemType::U64 => "uint64",
        ElemType::F32 => "float32",
        ElemType::F64 => "float64",
        ElemType::Bool => "bool",
    }
}

/// The ros2msg schema of a cell ([`ros2msg_schema`]): one line per element, in
/// order, `TYPE NAME` for a scalar and `TYPE[LEN] NAME` for an array (`int32[12] int12`).
pub fn schema_text(cell: &CellDecl) -> String {
    ros2msg_schema(cell.elements().iter().map(|e| {
        let shape = e.shape();
        (ros2msg_type(shape.ty), shape.len, e.name())
    }))
}

/// A cell's CDR layout ([`CdrLayout`]): each element aligned to the size of
/// its values.
pub fn cdr_layout(cell: &CellDecl) -> CdrLayout {
    CdrLayout::new(cell.elements().iter().map(|e| CdrElement {
        packed: e.offset(),
        align: e.shape().ty.size(),
        len: e.range().len(),
    }))
}

/// A recorded cell: its channel, schema, layout, and the image its
/// publications build.
struct Recorded {
    schema: u16,
    channel: u16,
    layout: CdrLayout,
    /// The cell as its writers left it (packed), from zeros.
    image: Vec<u8>,
    /// Per element: its writer's slot and its bytes in the cell.
    writers: Vec<(Option<usize>, std::ops::Range<usize>)>,
}

/// What `begin` learnt of the run.
struct Begun {
    epoch: Nanos,
    epoch_unix: u64,
    tick: u64,
    names: Vec<String>,
    states: Vec<String>,
    /// Per cell (by index): its recording, `None` when left out.
    cells: Vec<Option<Recorded>>,
    /// Cell names, by index.
    cell_names: Vec<String>,
    /// The channel of each (slot, cell) input, made on its first message.
    inputs: HashMap<(usize, usize), u16>,
    frames: u16,
    events: u16,
}

impl Begun {
    /// The frame's deadline on the realtime clock, in ns since the Unix epoch.
    fn unix(&self, frame: u64) -> u64 {
        self.epoch_unix
            .saturating_add(frame.saturating_mul(self.tick))
    }
}

/// A [`Sink`] that writes an MCAP file (see the module's doc): chunked, zstd
/// compressed, on the recorder thread ([`McapWriter`]); buffers are reused, so a
/// record allocates nothing once every channel exists.
pub struct McapSink {
    path: PathBuf,
    writer: Option<McapWriter>,
    begun: Option<Begun>,
    /// The CDR message being written.
    cdr: Vec<u8>,
    /// The JSON message being written.
    json: Vec<u8>,
    /// Messages written.
    messages: u64,
    /// The file's size once finished.
    finished: Option<u64>,
}

impl std::fmt::Debug for McapSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McapSink")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl McapSink {
    /// Creates (or truncates) `path` and starts the file: a path that cannot be
    /// written is refused here, before the run starts.
    pub fn create(path: &Path) -> std::io::Result<McapSink> {
        let writer = McapWriter::create(path)?;
        Ok(McapSink {
            path: path.to_path_buf(),
            writer: Some(writer),
            begun: None,
            cdr: Vec::new(),
            json: Vec::new(),
            messages: 0,
            finished: None,
        })
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn parts(&mut self) -> std::io::Result<(&mut McapWriter, &mut Begun)> {
        match (self.writer.as_mut(), self.begun.as_mut()) {
            (Some(w), Some(b)) => Ok((w, b)),
            _ => Err(std::io::Error::other(
                "the recording is not begun, or already ended",
            )),
        }
    }
}

/// The `ictus` metadata of a run.
fn run_metadata(run: &TapRun<'_>) -> std::io::Result<BTreeMap<String, String>> {
    let json = |v: &dyn erased::Json| v.to_json();
    let recorded: Vec<&str> = run
        .table
        .cells()
        .iter()
        .zip(&run.cells)
        .filter(|(_, r)| **r)
        .map(|(c, _)| c.name())
        .collect();
    let names: Vec<&str> = run.schedule.subsystem_names().collect();
    let mut m = BTreeMap::new();
    m.insert("format".into(), FORMAT.into());
    m.insert("run".into(), run.schedule.name.clone());
    m.insert("host".into(), run.host.into());
    m.insert("tick_ns".into(), run.tick.as_u64().to_string());
    m.insert("epoch_unix".into(), run.epoch_unix.as_u64().to_string());
    m.insert(
        "schedule".into(),
        run.schedule_text.unwrap_or(&run.schedule.text).into(),
    );
    m.insert(
        "schedule_path".into(),
        run.schedule.path.display().to_string(),
    );
    m.insert("cells".into(), run.table.to_json());
    m.insert("every".into(), run.every.to_string());
    m.insert("recorded".into(), json(&recorded)?);
    m.insert("subsystems".into(), json(&names)?);
    m.insert("slots".into(), json(&run.slots)?);
    m.insert("states".into(), json(&run.states)?);
    m.insert("writers".into(), json(&run.writers)?);
    Ok(m)
}

/// Serialising a borrowed value of any type to a JSON string.
mod erased {
    pub(super) trait Json {
        fn to_json(&self) -> std::io::Result<String>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> std::io::Result<String> {
            serde_json::to_string(self).map_err(std::io::Error::other)
        }
    }
}

impl Sink for McapSink {
    fn begin(&mut self, run: &TapRun<'_>) -> std::io::Result<()> {
        let Some(writer) = self.writer.as_mut() else {
            return Err(std::io::Error::other("the recording already ended"));
        };
        writer.metadata("ictus", run_metadata(run)?)?;
        let mut cells = Vec::with_capacity(run.table.cells().len());
        for (i, cell) in run.table.cells().iter().enumerate() {
            if !run.cells.get(i).copied().unwrap_or(false) {
                cells.push(None);
                continue;
            }
            let schema = writer.schema(
                &format!("ictus/{}", cell.name()),
                "ros2msg",
                schema_text(cell).as_bytes(),
            )?;
            let channel = writer.channel(schema, &format!("cells/{}", cell.name()), "cdr")?;
            let writers = cell
                .elements()
                .iter()
                .enumerate()
                .map(|(e, decl)| {
                    let w = run.writers.get(i).and_then(|w| w.get(e)).copied().flatten();
                    (w, decl.range())
                })
                .collect();
            cells.push(Some(Recorded {
                schema,
                channel,
                layout: cdr_layout(cell),
                image: vec![0; cell.bytes()],
                writers,
            }));
        }
        let frames_schema = writer.schema("ictus/frame", "jsonschema", FRAME_SCHEMA.as_bytes())?;
        let frames = writer.channel(frames_schema, "frames", "json")?;
        let events_schema = writer.schema("ictus/event", "jsonschema", EVENT_SCHEMA.as_bytes())?;
        let events = writer.channel(events_schema, "events", "json")?;
        self.begun = Some(Begun {
            epoch: run.epoch,
            epoch_unix: run.epoch_unix.as_u64(),
            tick: run.tick.as_u64(),
            names: run
                .schedule
                .subsystems
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            states: run.states.clone(),
            cells,
            cell_names: run
                .table
                .cells()
                .iter()
                .map(|c| c.name().to_string())
                .collect(),
            inputs: HashMap::new(),
            frames,
            events,
        });
        Ok(())
    }

    fn frame(&mut self, record: &FrameRecord) -> std::io::Result<()> {
        let mut json = std::mem::take(&mut self.json);
        let (writer, b) = self.parts()?;
        let since = |t: Nanos| t.saturating_sub(b.epoch).as_u64();
        json.clear();
        serde_json::to_writer(
            &mut json,
            &FrameMessage {
                subsystem: b.names.get(record.slot).map_or("", String::as_str),
                slot: record.slot,
                frame: record.frame,
                state: b
                    .states
                    .get(usize::from(record.state))
                    .map_or("", String::as_str),
                deadline_ns: since(record.deadline),
                woke_ns: since(record.woke),
                agreed_ns: record.agreed.map(since),
                end_ns: since(record.end),
                lateness_ns: record.lateness().as_u64(),
                exec_ns: record.exec().as_u64(),
                budget_ns: record.budget.as_u64(),
                overrun: record.overrun(),
                skipped: record.skipped,
                cpu: record.cpu,
                error: record.error,
            },
        )
        .map_err(std::io::Error::other)?;
        let time = b.unix(record.frame);
        let result = writer.message(b.frames, record.slot as u32, time, &json);
        self.messages += u64::from(result.is_ok());
        self.json = json;
        result
    }

    fn cell(&mut self, record: &CellRecord<'_>) -> std::io::Result<()> {
        let mut cdr = std::mem::take(&mut self.cdr);
        let result = (|| {
            let (writer, b) = self.parts()?;
            // The tap sends only the recorded cells, every `every` frames of
            // each subsystem; a cell left out is passed over all the same.
            let Some(Some(cell)) = b.cells.get_mut(record.cell) else {
                return Ok(());
            };
            if record.bytes.len() != cell.image.len() {
                return Err(std::io::Error::other(format!(
                    "cell {} record of {} bytes, the table's is {}",
                    record.cell,
                    record.bytes.len(),
                    cell.image.len()
                )));
            }
            let channel = match record.direction {
                Direction::Output => {
                    for (w, range) in &cell.writers {
                        if *w == Some(record.slot) {
                            cell.image[range.clone()].copy_from_slice(&record.bytes[range.clone()]);
                        }
                    }
                    cell.layout.encode(&cell.image, &mut cdr);
                    cell.channel
                }
                Direction::Input => {
                    cell.layout.encode(record.bytes, &mut cdr);
                    match b.inputs.get(&(record.slot, record.cell)) {
                        Some(&c) => c,
                        None => {
                            let topic = format!(
                                "inputs/{}/{}",
                                b.names.get(record.slot).map_or("?", String::as_str),
                                b.cell_names[record.cell]
                            );
                            let c = writer.channel(cell.schema, &topic, "cdr")?;
                            b.inputs.insert((record.slot, record.cell), c);
                            c
                        }
                    }
                }
            };
            writer.message(channel, record.slot as u32, b.unix(record.frame), &cdr)
        })();
        self.cdr = cdr;
        self.messages += u64::from(result.is_ok());
        result
    }

    fn event(&mut self, event: &EventRecord) -> std::io::Result<()> {
        let mut json = std::mem::take(&mut self.json);
        let (writer, b) = self.parts()?;
        json.clear();
        serde_json::to_writer(
            &mut json,
            &EventMessage {
                kind: event.kind,
                frame: event.frame,
                subsystem: event.slot.and_then(|s| b.names.get(s)).map(String::as_str),
                message: &event.message,
            },
        )
        .map_err(std::io::Error::other)?;
        let time = b
            .epoch_unix
            .saturating_add(event.time.saturating_sub(b.epoch).as_u64());
        let sequence = event.slot.map_or(u32::MAX, |s| s as u32);
        let result = writer.message(b.events, sequence, time, &json);
        self.messages += u64::from(result.is_ok());
        self.json = json;
        result
    }

    fn end(&mut self, end: &TapEnd) -> std::io::Result<()> {
        let Some(mut writer) = self.writer.take() else {
            return Ok(());
        };
        let dropped: BTreeMap<String, u64> = end
            .dropped
            .iter()
            .map(|(slot, n)| (slot.to_string(), *n))
            .collect();
        let mut m = BTreeMap::new();
        m.insert(
            "dropped".into(),
            serde_json::to_string(&dropped).map_err(std::io::Error::other)?,
        );
        m.insert("records".into(), end.records.to_string());
        writer.metadata("ictus.end", m)?;
        writer.finish()?;
        self.finished = Some(std::fs::metadata(&self.path)?.len());
        Ok(())
    }

    fn written(&self) -> Option<Written> {
        let bytes = self.finished?;
        Some(Written {
            line: format!(
                "recording: {} ({} messages, {bytes} bytes)",
                self.path.display(),
                self.messages
            ),
            warning: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellTable, ElemType};

    fn table() -> CellTable {
        CellTable::builder()
            .cell("A")
            .element("flag", ElemType::Bool, 1)
            .element("int", ElemType::I32, 1)
            .element("short5", ElemType::I16, 5)
            .element("double", ElemType::F64, 1)
            .element("char4", ElemType::U8, 4)
            .element("letter", ElemType::Char, 1)
            .build()
            .unwrap()
    }

    #[test]
    fn the_schema_lists_each_element_in_order() {
        let t = table();
        assert_eq!(
            schema_text(&t.cells()[0]),
            "bool flag\nint32 int\nint16[5] short5\nfloat64 double\nuint8[4] char4\nuint32 letter\n"
        );
    }

    #[test]
    fn a_cell_s_cdr_layout_takes_each_element_s_packed_place_and_value_size() {
        // Packed: flag 0, int 1..5, short5 5..15, double 15..23, char4 23..27,
        // letter 27..31; a `char` is 4 bytes.
        let elements = [
            (0, 1, 1),
            (1, 4, 4),
            (5, 2, 10),
            (15, 8, 8),
            (23, 1, 4),
            (27, 4, 4),
        ]
        .map(|(packed, align, len)| CdrElement { packed, align, len });
        assert_eq!(cdr_layout(&table().cells()[0]), CdrLayout::new(elements));
    }
}
