//! MCAP files (Foxglove's format; Foxglove and the `mcap` Python package open them):
//! [`McapWriter`] writes one chunked and zstd compressed, [`read`] reads one back,
//! and the encodings of an ictus recording's messages: a cell in CDR
//! ([`CdrLayout`], with its ros2msg schema, [`ros2msg_schema`]), a frame's timing
//! and a run's event in JSON ([`FrameMessage`], [`EventMessage`]).
//!
//! Which channels a run's recording has, and what its `ictus` metadata holds, is
//! the executive's (`ictus_exec::tap::mcap`, docs/recording.md): it knows the run.
//! This module knows the file.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ::mcap::records::{MessageHeader, Metadata, Record};
use ::mcap::{WriteOptions, Writer};
use serde::Serialize;

/// The version of the file's layout, in the `ictus` metadata's `format`.
pub const FORMAT: &str = "1";

/// The 4-byte CDR encapsulation header: little-endian plain CDR.
pub const CDR_HEADER: [u8; 4] = [0, 1, 0, 0];

/// The ros2msg schema of a cell: one line per element, in order, `TYPE NAME` for
/// a scalar and `TYPE[LEN] NAME` for an array (`int32[12] int12`). Each element is
/// given as (its ros2msg type, its count of values, its name).
pub fn ros2msg_schema<'a>(elements: impl IntoIterator<Item = (&'a str, usize, &'a str)>) -> String {
    let mut out = String::new();
    for (ty, len, name) in elements {
        out.push_str(ty);
        if len != 1 {
            out.push_str(&format!("[{len}]"));
        }
        out.push(' ');
        out.push_str(name);
        out.push('\n');
    }
    out
}

/// One element of a packed cell, as its CDR layout needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CdrElement {
    /// First byte in the packed cell.
    pub packed: usize,
    /// The size of one of its values (CDR aligns the element to it).
    pub align: usize,
    /// Bytes of the whole element.
    pub len: usize,
}

/// One element's bytes: where they lie in the packed cell and in the CDR
/// message (counted from the message's first byte, header included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CdrCopy {
    /// First byte in the packed cell.
    pub packed: usize,
    /// First byte in the CDR message.
    pub cdr: usize,
    /// Bytes.
    pub len: usize,
}

/// A cell's CDR layout: the packed table layout (offsets the running sum of the
/// sizes) converted to CDR's, where each value is aligned to its own size
/// counted from the byte after the encapsulation header, and fixed arrays carry
/// no length. Computed once per cell; converting allocates nothing once the
/// output buffer has grown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdrLayout {
    copies: Vec<CdrCopy>,
    size: usize,
}

impl CdrLayout {
    /// The layout of a cell of `elements`, in order.
    pub fn new(elements: impl IntoIterator<Item = CdrElement>) -> CdrLayout {
        let mut copies = Vec::new();
        let mut body = 0usize;
        for e in elements {
            body = body.next_multiple_of(e.align);
            copies.push(CdrCopy {
                packed: e.packed,
                cdr: CDR_HEADER.len() + body,
                len: e.len,
            });
            body += e.len;
        }
        CdrLayout {
            copies,
            size: CDR_HEADER.len() + body,
        }
    }

    /// The copies, one per element, in order.
    pub fn copies(&self) -> &[CdrCopy] {
        &self.copies
    }

    /// Bytes of a message, header included.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Writes the CDR message of the packed cell `packed` into `out` (cleared
    /// first; padding bytes are zeros).
    pub fn encode(&self, packed: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.size, 0);
        out[..CDR_HEADER.len()].copy_from_slice(&CDR_HEADER);
        for c in &self.copies {
            out[c.cdr..c.cdr + c.len].copy_from_slice(&packed[c.packed..c.packed + c.len]);
        }
    }

    /// Reads a CDR message back into the packed cell `packed`; `false` when the
    /// message is not one of this layout (its size or its header).
    pub fn decode(&self, cdr: &[u8], packed: &mut [u8]) -> bool {
        if cdr.len() != self.size || cdr[..CDR_HEADER.len()] != CDR_HEADER {
            return false;
        }
        for c in &self.copies {
            packed[c.packed..c.packed + c.len].copy_from_slice(&cdr[c.cdr..c.cdr + c.len]);
        }
        true
    }
}

/// The JSON Schema of the `frames` channel's messages ([`FrameMessage`]).
pub const FRAME_SCHEMA: &str = r#"{"type":"object","title":"ictus frame","properties":{"subsystem":{"type":"string"},"slot":{"type":"integer"},"frame":{"type":"integer"},"state":{"type":"string"},"deadline_ns":{"type":"integer","description":"release, ns since the run's epoch"},"woke_ns":{"type":"integer"},"agreed_ns":{"type":["integer","null"]},"end_ns":{"type":"integer"},"lateness_ns":{"type":"integer"},"exec_ns":{"type":"integer"},"budget_ns":{"type":"integer"},"overrun":{"type":"boolean"},"skipped":{"type":"integer"},"cpu":{"type":["integer","null"]},"error":{"type":"boolean"}}}"#;

/// The JSON Schema of the `events` channel's messages ([`EventMessage`]).
pub const EVENT_SCHEMA: &str = r#"{"type":"object","title":"ictus event","properties":{"kind":{"type":"string"},"frame":{"type":["integer","null"]},"subsystem":{"type":["string","null"]},"message":{"type":"string"}}}"#;

/// One message of the `frames` channel: a subsystem's frame, its times in ns
/// since the run's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct FrameMessage<'a> {
    /// The subsystem's name.
    pub subsystem: &'a str,
    /// Its slot.
    pub slot: usize,
    /// The frame.
    pub frame: u64,
    /// The run's state in that frame.
    pub state: &'a str,
    /// The release.
    pub deadline_ns: u64,
    /// When the subsystem woke.
    pub woke_ns: u64,
    /// When its rendezvous with its synchronous group ended (`None`: no group).
    pub agreed_ns: Option<u64>,
    /// When its outputs were published and the frame ended.
    pub end_ns: u64,
    /// Release lateness: wake-up minus deadline.
    pub lateness_ns: u64,
    /// Execution time: wake-up to the end.
    pub exec_ns: u64,
    /// Its execution budget: its period.
    pub budget_ns: u64,
    /// Whether it ran past its budget.
    pub overrun: bool,
    /// Releases skipped around it: the misses.
    pub skipped: u64,
    /// The CPU it ended on, if known.
    pub cpu: Option<u32>,
    /// Whether its frame returned an error.
    pub error: bool,
}

/// One message of the `events` channel: something that happened to the run.
#[derive(Clone, Debug, Serialize)]
pub struct EventMessage<'a> {
    /// `state`, `miss`, `overrun`, `crash`, `warning`, `event`.
    pub kind: &'a str,
    /// The frame it is about, when known.
    pub frame: Option<u64>,
    /// The subsystem it is about, when one.
    pub subsystem: Option<&'a str>,
    /// What happened, in words.
    pub message: &'a str,
}

fn io(e: ::mcap::McapError) -> std::io::Error {
    std::io::Error::other(e)
}

/// An MCAP file being written: chunked, zstd compressed, on the calling thread.
/// Its buffers are reused, so a message allocates nothing once every channel exists
/// (the `mcap` writer's own chunk buffer grows to a chunk and stays).
pub struct McapWriter {
    writer: Writer<BufWriter<File>>,
}

impl std::fmt::Debug for McapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McapWriter").finish_non_exhaustive()
    }
}

impl McapWriter {
    /// Creates (or truncates) `path` and starts the file: a path that cannot be
    /// written is refused here.
    pub fn create(path: &Path) -> std::io::Result<McapWriter> {
        let file = File::create(path)?;
        let writer = WriteOptions::new()
            .compression(Some(::mcap::Compression::Zstd))
            // Compressed on the calling thread itself (the crate's default
            // starts a zstd worker per physical CPU): the recorder, one thread
            // off the real-time CPUs, does all of the recording's work.
            .compression_threads(0)
            .profile("")
            .library(concat!("ictus ", env!("CARGO_PKG_VERSION")))
            .create(BufWriter::with_capacity(1 << 20, file))
            .map_err(io)?;
        Ok(McapWriter { writer })
    }

    /// Writes a metadata record `name`.
    pub fn metadata(
        &mut self,
        name: &str,
        metadata: BTreeMap<String, String>,
    ) -> std::io::Result<()> {
        self.writer
            .write_metadata(&Metadata {
                name: name.into(),
                metadata,
            })
            .map_err(io)
    }

    /// Adds a schema `name` of `encoding` (`ros2msg`, `jsonschema`); its id.
    pub fn schema(&mut self, name: &str, encoding: &str, data: &[u8]) -> std::io::Result<u16> {
        self.writer.add_schema(name, encoding, data).map_err(io)
    }

    /// Adds a channel on `topic` of the schema `schema`, its messages in
    /// `encoding` (`cdr`, `json`); its id.
    pub fn channel(&mut self, schema: u16, topic: &str, encoding: &str) -> std::io::Result<u16> {
        self.writer
            .add_channel(schema, topic, encoding, &BTreeMap::new())
            .map_err(io)
    }

    /// Writes `data` on `channel`, logged and published at `time`, with `sequence`.
    pub fn message(
        &mut self,
        channel: u16,
        sequence: u32,
        time: u64,
        data: &[u8],
    ) -> std::io::Result<()> {
        let header = MessageHeader {
            channel_id: channel,
            sequence,
            log_time: time,
            publish_time: time,
        };
        self.writer
            .write_to_known_channel(&header, data)
            .map_err(io)
    }

    /// Ends the file (its summary and footer) and flushes it.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.writer.finish().map_err(io)?;
        self.writer.into_inner().flush()
    }
}

/// Why bytes do not read as an MCAP file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// They do not start with MCAP's magic bytes.
    NotMcap,
    /// They start as MCAP but are cut short or broken (the reason, in words).
    Truncated(String),
}

/// What [`read`] yields of a file, in order: what replay and checks need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McapItem<'a> {
    /// A metadata record.
    Metadata {
        /// Its name (`ictus`, `ictus.end`).
        name: String,
        /// Its keys and values.
        metadata: BTreeMap<String, String>,
    },
    /// A channel declared.
    Channel {
        /// Its id, which messages name.
        id: u16,
        /// Its topic.
        topic: String,
    },
    /// A message.
    Message {
        /// Its channel's id.
        channel: u16,
        /// Its sequence number.
        sequence: u32,
        /// When it was logged (ns).
        log_time: u64,
        /// Its bytes.
        data: Cow<'a, [u8]>,
    },
    /// Any other record (schemas, indexes, statistics, ...).
    Other,
}

/// The records of the MCAP file `bytes`, chunks opened, in file order; refused
/// when the bytes are not MCAP, or cut short (no magic at the end). A record that
/// does not read ends the iteration with its error, as a [`Unreadable::Truncated`]
/// reason.
pub fn read(
    bytes: &[u8],
) -> Result<impl Iterator<Item = Result<McapItem<'_>, String>>, Unreadable> {
    if !bytes.starts_with(::mcap::MAGIC) {
        return Err(Unreadable::NotMcap);
    }
    if !bytes.ends_with(::mcap::MAGIC) || bytes.len() < 2 * ::mcap::MAGIC.len() {
        return Err(Unreadable::Truncated(
            "it does not end with MCAP's magic bytes".into(),
        ));
    }
    let records = ::mcap::read::ChunkFlattener::new(bytes)
        .map_err(|e| Unreadable::Truncated(e.to_string()))?;
    Ok(records.map(|r| {
        r.map(|record| match record {
            Record::Metadata(m) => McapItem::Metadata {
                name: m.name,
                metadata: m.metadata,
            },
            Record::Channel(c) => McapItem::Channel {
                id: c.id,
                topic: c.topic,
            },
            Record::Message { header, data } => McapItem::Message {
                channel: header.channel_id,
                sequence: header.sequence,
                log_time: header.log_time,
                data,
            },
            _ => McapItem::Other,
        })
        .map_err(|e| e.to_string())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bool, i32, 5 x i16, f64, 4 x u8, char (4 bytes), packed.
    fn elements() -> Vec<CdrElement> {
        let mut at = 0;
        [(1, 1), (4, 1), (2, 5), (8, 1), (1, 4), (4, 1)]
            .into_iter()
            .map(|(size, count)| {
                let e = CdrElement {
                    packed: at,
                    align: size,
                    len: size * count,
                };
                at += size * count;
                e
            })
            .collect()
    }

    #[test]
    fn the_schema_lists_each_element_in_order() {
        let schema = ros2msg_schema([
            ("bool", 1, "flag"),
            ("int32", 1, "int"),
            ("int16", 5, "short5"),
        ]);
        assert_eq!(schema, "bool flag\nint32 int\nint16[5] short5\n");
    }

    #[test]
    fn cdr_aligns_each_value_to_its_size_after_the_header() {
        let layout = CdrLayout::new(elements());
        // Packed: flag 0, int 1..5, short5 5..15, double 15..23, char4 23..27, letter 27..31.
        // CDR body (after the 4-byte header): flag 0, int 4..8, short5 8..18,
        // double 24..32, char4 32..36, letter 36..40.
        let at: Vec<(usize, usize, usize)> = layout
            .copies()
            .iter()
            .map(|c| (c.packed, c.cdr - 4, c.len))
            .collect();
        assert_eq!(
            at,
            vec![
                (0, 0, 1),
                (1, 4, 4),
                (5, 8, 10),
                (15, 24, 8),
                (23, 32, 4),
                (27, 36, 4)
            ]
        );
        assert_eq!(layout.size(), 44);
        let packed: Vec<u8> = (1..=31).collect();
        let mut cdr = Vec::new();
        layout.encode(&packed, &mut cdr);
        assert_eq!(&cdr[..4], &CDR_HEADER);
        assert_eq!(cdr[4], 1);
        assert_eq!(&cdr[5..8], &[0, 0, 0], "padding is zeros");
        assert_eq!(&cdr[8..12], &[2, 3, 4, 5]);
        assert_eq!(&cdr[28..36], &packed[15..23]);
        let mut back = vec![0; 31];
        assert!(layout.decode(&cdr, &mut back));
        assert_eq!(back, packed);
        assert!(!layout.decode(&cdr[..40], &mut back), "a short message");
    }

    #[test]
    fn a_file_written_reads_back_and_a_cut_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.mcap");
        let mut w = McapWriter::create(&path).unwrap();
        let mut m = BTreeMap::new();
        m.insert("format".to_string(), FORMAT.to_string());
        w.metadata("ictus", m.clone()).unwrap();
        let s = w
            .schema("ictus/event", "jsonschema", EVENT_SCHEMA.as_bytes())
            .unwrap();
        let c = w.channel(s, "events", "json").unwrap();
        w.message(c, 7, 1_000, b"{}").unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let items: Vec<McapItem<'_>> = read(&bytes).unwrap().map(Result::unwrap).collect();
        assert!(items.contains(&McapItem::Metadata {
            name: "ictus".into(),
            metadata: m
        }));
        assert!(items.contains(&McapItem::Channel {
            id: c,
            topic: "events".into()
        }));
        assert!(items.contains(&McapItem::Message {
            channel: c,
            sequence: 7,
            log_time: 1_000,
            data: Cow::Borrowed(b"{}"),
        }));
        assert_eq!(read(b"not mcap").err(), Some(Unreadable::NotMcap));
        assert!(matches!(
            read(&bytes[..bytes.len() - 1]).err(),
            Some(Unreadable::Truncated(_))
        ));
    }
}
