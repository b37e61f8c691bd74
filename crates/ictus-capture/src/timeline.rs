//! Timelines in the Chrome trace-event format ("JSON Object Format"), which
//! `ui.perfetto.dev` and `chrome://tracing` open offline: [`TraceWriter`].
//!
//! The file is streamed: each event is written through a buffered writer as it
//! comes, never held in memory, into a temporary file beside the target that is
//! renamed over it by [`TraceWriter::finish`] (like every output of ictus, see
//! [`ictus_os::fs`]: whole or not at all). Its shape:
//!
//! ```text
//! {"displayTimeUnit":"ns","traceEvents":[
//! {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"host"}},
//! {"name":"step","cat":"steps","ph":"X","ts":12.345,"dur":0.500,"pid":1,"tid":0,"args":{...}},
//! ...
//! ],"metadata":{"events":N,"left_out":0,"cap_bytes":C,"capped":false,"bytes":B,"run":{...}}}
//! ```
//!
//! Timestamps (`ts`, `dur`) are microseconds with three decimals (whole
//! nanoseconds, written exactly), relative to the writer's epoch (the trace's 0).
//! Events: complete (`X`), instant (`i`, with its scope), counter (`C`) and the
//! metadata that names tracks (`M`: `process_name`, `thread_name`,
//! `thread_sort_index`).
//!
//! **Size bound.** The file never grows past its cap (in bytes, [`DEFAULT_CAP_BYTES`]
//! unless told): once an event would not fit, no more are written, one last instant
//! event says `trace cap reached: N events left out`, the metadata counts them, and
//! the JSON is still closed validly.
//!
//! ```
//! use ictus_core::Nanos;
//! use ictus_capture::timeline::{NoArgs, Scope, TraceWriter, Track};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.json");
//! let epoch = Nanos::from_secs(100);
//! let mut sut = TraceWriter::create(&path, 1 << 20, epoch, &NoArgs {}).unwrap();
//! let track = Track { pid: 1, tid: 0 };
//! sut.process_name(1, "demo").unwrap();
//! sut.thread_name(track, "cpu 0").unwrap();
//! sut.complete(track, "step", "steps", epoch, epoch + Nanos::new(1_500), &NoArgs {}).unwrap();
//! sut.instant(track, "miss", "steps", epoch, Scope::Thread, &NoArgs {}).unwrap();
//! let summary = sut.finish().unwrap();
//! assert_eq!(summary.events, 4);
//! let text = std::fs::read_to_string(&path).unwrap();
//! let json: serde_json::Value = serde_json::from_str(&text).unwrap();
//! assert_eq!(json["traceEvents"][2]["dur"], 1.5);
//! ```

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ictus_core::Nanos;
use ictus_core::warning::{Warning, WarningId};
use serde::{Deserialize, Serialize};

use ictus_os::fs::OutputError;

/// The cap of a trace file unless told otherwise: 256 MiB (Perfetto's UI opens a
/// JSON trace of this size; larger ones need its trace processor).
pub const DEFAULT_CAP_BYTES: u64 = 256 << 20;

/// The smallest cap a trace may be given: 64 KiB (room for the tracks' names and
/// the closing note).
pub const MIN_CAP_BYTES: u64 = 64 << 10;

/// Where a trace goes and how large it may grow (`--trace FILE --trace-cap BYTES`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSpec {
    /// The file.
    pub path: PathBuf,
    /// Its cap in bytes.
    pub cap_bytes: u64,
}

impl TraceSummary {
    /// The warning a capped trace leaves in its run's record (`None`: not capped).
    pub fn warning(&self, path: &Path) -> Option<Warning> {
        self.capped().then(|| {
            Warning::new(
                WarningId::TraceCapped,
                format!(
                    "the trace {} reached its cap of {} bytes: {} events left out (the \
                     file ends with a note saying so)",
                    path.display(),
                    self.cap_bytes,
                    self.left_out
                ),
                Some("raise --trace-cap, or trace a shorter run"),
            )
        })
    }
}

/// Bytes kept free below the cap for the closing note and the metadata counts
/// (the caller's own metadata is added to it).
const TAIL_BYTES: u64 = 512;

/// A track of the timeline: a thread (`tid`) of a process (`pid`), as the format
/// names them; what they stand for (a subsystem, a CPU, a loop thread) is the
/// caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Track {
    /// The process (a group of tracks).
    pub pid: u32,
    /// The thread (one track of the group).
    pub tid: u32,
}

/// What an instant event marks: its own track, its process's tracks, or all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole timeline (`"s":"g"`).
    Global,
    /// Its process (`"s":"p"`).
    Process,
    /// Its own track (`"s":"t"`).
    Thread,
}

impl Scope {
    fn code(self) -> &'static str {
        match self {
            Scope::Global => "g",
            Scope::Process => "p",
            Scope::Thread => "t",
        }
    }
}

/// An event without arguments (`"args":{}`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct NoArgs {}

/// What a finished trace holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// Events written (the closing note included).
    pub events: u64,
    /// Events left out because the cap was reached.
    pub left_out: u64,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The cap it was written under.
    pub cap_bytes: u64,
}

impl TraceSummary {
    /// Whether the cap was reached (events were left out).
    pub fn capped(&self) -> bool {
        self.left_out > 0
    }
}

/// The counts closing the file (the caller's metadata follows them as `run`).
#[derive(Serialize)]
struct Metadata {
    events: u64,
    left_out: u64,
    cap_bytes: u64,
    capped: bool,
    bytes: u64,
}

/// Writes one trace file as it goes (see the [module](self) docs).
pub struct TraceWriter {
    path: PathBuf,
    out: BufWriter<tempfile::NamedTempFile>,
    epoch: Nanos,
    cap: u64,
    /// The caller's metadata, serialized at creation (its size is reserved).
    run: Vec<u8>,
    /// Bytes written so far.
    bytes: u64,
    events: u64,
    left_out: u64,
    /// The latest timestamp of an event written or left out (where the note goes).
    last: Nanos,
    /// One event's text, reused: an event is measured before it is written.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("path", &self.path)
            .field("cap", &self.cap)
            .field("bytes", &self.bytes)
            .field("events", &self.events)
            .field("left_out", &self.left_out)
            .finish_non_exhaustive()
    }
}

/// The header, before the first event.
const HEAD: &[u8] = b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";

impl TraceWriter {
    /// Starts the trace file `path` (a temporary file beside it until
    /// [`finish`](Self::finish)), at most `cap_bytes` long (raised to
    /// [`MIN_CAP_BYTES`]), with timestamps relative to `epoch` and `metadata` (any
    /// JSON value: the tool, the run) under the file's `metadata.run`.
    pub fn create(
        path: &Path,
        cap_bytes: u64,
        epoch: Nanos,
        metadata: &impl Serialize,
    ) -> Result<TraceWriter, OutputError> {
        let io = |source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = ictus_os::fs::output_directory(path)?;
        let tmp = tempfile::Builder::new()
            .prefix(".ictus-")
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(io)?;
        let run = serde_json::to_vec(metadata).map_err(|e| io(std::io::Error::other(e)))?;
        let mut sut = TraceWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 16, tmp),
            epoch,
            cap: cap_bytes.max(MIN_CAP_BYTES),
            run,
            bytes: 0,
            events: 0,
            left_out: 0,
            last: epoch,
            scratch: Vec::with_capacity(512),
        };
        sut.out.write_all(HEAD).map_err(io)?;
        sut.bytes = HEAD.len() as u64;
        Ok(sut)
    }

    /// The file this writer ends in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the cap has been reached (later events are counted, not written).
    pub fn capped(&self) -> bool {
        self.left_out > 0
    }

    /// Bytes left for events under the cap (0 once it is reached): a caller that
    /// stamps into a buffer first sizes the buffer by it.
    pub fn room(&self) -> u64 {
        if self.capped() {
            return 0;
        }
        self.cap.saturating_sub(self.bytes + self.tail())
    }

    /// Counts `events` left out that were never offered (a caller's buffer, sized
    /// by [`room`](Self::room), was full): the closing note counts them too.
    pub fn leave_out(&mut self, events: u64) {
        self.left_out += events;
    }

    /// Names process `pid` (a group of tracks).
    pub fn process_name(&mut self, pid: u32, name: &str) -> std::io::Result<()> {
        self.metadata(Track { pid, tid: 0 }, "process_name", &Named { name })
    }

    /// Names a track.
    pub fn thread_name(&mut self, track: Track, name: &str) -> std::io::Result<()> {
        self.metadata(track, "thread_name", &Named { name })
    }

    /// Orders a track among its process's (lower first).
    pub fn thread_sort_index(&mut self, track: Track, index: i64) -> std::io::Result<()> {
        self.metadata(track, "thread_sort_index", &SortIndex { sort_index: index })
    }

    fn metadata(&mut self, track: Track, what: &str, args: &impl Serialize) -> std::io::Result<()> {
        let at = self.last;
        self.event(at, |e| {
            e.extend_from_slice(b"{\"name\":");
            serde_json::to_writer(&mut *e, what)?;
            e.extend_from_slice(b",\"ph\":\"M\"");
            track_of(e, track);
            args_of(e, args)
        })
    }

    /// A complete event (`X`): `name` on `track` from `start` to `end` (an `end`
    /// before `start` is a zero duration).
    pub fn complete(
        &mut self,
        track: Track,
        name: &str,
        category: &str,
        start: Nanos,
        end: Nanos,
        args: &impl Serialize,
    ) -> std::io::Result<()> {
        let epoch = self.epoch;
        self.event(start, |e| {
            named(e, name, category, "X")?;
            e.extend_from_slice(b",\"ts\":");
            micros(e, start, epoch);
            e.extend_from_slice(b",\"dur\":");
            micros(e, end.max(start), start);
            track_of(e, track);
            args_of(e, args)
        })
    }

    /// An instant event (`i`) at `at`, marking `scope`.
    pub fn instant(
        &mut self,
        track: Track,
        name: &str,
        category: &str,
        at: Nanos,
        scope: Scope,
        args: &impl Serialize,
    ) -> std::io::Result<()> {
        let epoch = self.epoch;
        self.event(at, |e| {
            instant(e, track, name, category, at, epoch, scope, args)
        })
    }

    /// A counter event (`C`): the values of counter `name` (one series per field
    /// of `values`, numbers) of process `pid` from `at` on.
    pub fn counter(
        &mut self,
        pid: u32,
        name: &str,
        at: Nanos,
        values: &impl Serialize,
    ) -> std::io::Result<()> {
        let epoch = self.epoch;
        self.event(at, |e| {
            named(e, name, "counter", "C")?;
            e.extend_from_slice(b",\"ts\":");
            micros(e, at, epoch);
            track_of(e, Track { pid, tid: 0 });
            args_of(e, values)
        })
    }

    /// Writes the event `build` makes in the scratch buffer, if it fits under the
    /// cap (less the tail); else counts it left out.
    fn event(
        &mut self,
        at: Nanos,
        build: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> std::io::Result<()> {
        self.last = self.last.max(at);
        if self.capped() {
            self.left_out += 1;
            return Ok(());
        }
        let mut e = std::mem::take(&mut self.scratch);
        e.clear();
        if self.events > 0 {
            e.extend_from_slice(b",\n");
        }
        let built = build(&mut e);
        let result = match built {
            Err(err) => Err(std::io::Error::other(err)),
            Ok(()) if self.bytes + e.len() as u64 + self.tail() > self.cap => {
                self.left_out += 1;
                Ok(())
            }
            Ok(()) => {
                self.bytes += e.len() as u64;
                self.events += 1;
                self.out.write_all(&e)
            }
        };
        self.scratch = e;
        result
    }

    /// The bytes reserved for the closing note and the metadata.
    fn tail(&self) -> u64 {
        TAIL_BYTES + self.run.len() as u64
    }

    /// Ends the trace: the note if the cap was reached, the metadata counts, the
    /// closing brackets; flushed to disk and renamed over the target.
    pub fn finish(mut self) -> Result<TraceSummary, OutputError> {
        let path = self.path.clone();
        let io = |source| OutputError::Io {
            path: path.clone(),
            source,
        };
        if self.capped() {
            let mut note = Vec::with_capacity(128);
            if self.events > 0 {
                note.extend_from_slice(b",\n");
            }
            let (at, epoch, left_out) = (self.last, self.epoch, self.left_out);
            let text = format!("trace cap reached: {left_out} events left out");
            let args = CapNote {
                left_out,
                cap_bytes: self.cap,
            };
            instant(
                &mut note,
                Track { pid: 0, tid: 0 },
                &text,
                "trace",
                at,
                epoch,
                Scope::Global,
                &args,
            )
            .map_err(|e| io(std::io::Error::other(e)))?;
            self.out.write_all(&note).map_err(io)?;
            self.bytes += note.len() as u64;
            self.events += 1;
        }
        let mut tail = b"\n],\"metadata\":".to_vec();
        let close = b"}\n";
        // The size the file will have: the metadata says it, so its own digits
        // count (found by writing it until the figure holds still).
        let mut bytes = self.bytes;
        let mut meta = Vec::new();
        for _ in 0..4 {
            meta.clear();
            serde_json::to_writer(
                &mut meta,
                &Metadata {
                    events: self.events,
                    left_out: self.left_out,
                    cap_bytes: self.cap,
                    capped: self.capped(),
                    bytes,
                },
            )
            .map_err(|e| io(std::io::Error::other(e)))?;
            // `{...counts}` becomes `{...counts,"run":RUN}`.
            meta.pop();
            meta.extend_from_slice(b",\"run\":");
            meta.extend_from_slice(&self.run);
            meta.push(b'}');
            let total = self.bytes + (tail.len() + meta.len() + close.len()) as u64;
            if total == bytes {
                break;
            }
            bytes = total;
        }
        tail.extend_from_slice(&meta);
        tail.extend_from_slice(close);
        self.out.write_all(&tail).map_err(io)?;
        self.bytes += tail.len() as u64;
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.as_file().sync_all().map_err(io)?;
        file.persist(&path).map_err(|e| io(e.error))?;
        Ok(TraceSummary {
            events: self.events,
            left_out: self.left_out,
            bytes: self.bytes,
            cap_bytes: self.cap,
        })
    }
}

#[derive(Serialize)]
struct Named<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct SortIndex {
    sort_index: i64,
}

#[derive(Serialize)]
struct CapNote {
    left_out: u64,
    cap_bytes: u64,
}

/// `{"name":NAME,"cat":CATEGORY,"ph":PHASE`
fn named(e: &mut Vec<u8>, name: &str, category: &str, phase: &str) -> serde_json::Result<()> {
    e.extend_from_slice(b"{\"name\":");
    serde_json::to_writer(&mut *e, name)?;
    e.extend_from_slice(b",\"cat\":");
    serde_json::to_writer(&mut *e, category)?;
    e.extend_from_slice(b",\"ph\":\"");
    e.extend_from_slice(phase.as_bytes());
    e.push(b'"');
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn instant(
    e: &mut Vec<u8>,
    track: Track,
    name: &str,
    category: &str,
    at: Nanos,
    epoch: Nanos,
    scope: Scope,
    args: &impl Serialize,
) -> serde_json::Result<()> {
    named(e, name, category, "i")?;
    e.extend_from_slice(b",\"s\":\"");
    e.extend_from_slice(scope.code().as_bytes());
    e.extend_from_slice(b"\",\"ts\":");
    micros(e, at, epoch);
    track_of(e, track);
    args_of(e, args)
}

/// `,"pid":P,"tid":T`
fn track_of(e: &mut Vec<u8>, track: Track) {
    // Writing into a Vec cannot fail.
    let _ = write!(e, ",\"pid\":{},\"tid\":{}", track.pid, track.tid);
}

/// `,"args":ARGS}`: the end of an event.
fn args_of(e: &mut Vec<u8>, args: &impl Serialize) -> serde_json::Result<()> {
    e.extend_from_slice(b",\"args\":");
    serde_json::to_writer(&mut *e, args)?;
    e.push(b'}');
    Ok(())
}

/// `at - from` in microseconds with three decimals, exactly (negative before it).
fn micros(e: &mut Vec<u8>, at: Nanos, from: Nanos) {
    let (sign, ns) = if at >= from {
        ("", (at - from).as_u64())
    } else {
        ("-", (from - at).as_u64())
    };
    // Writing into a Vec cannot fail.
    let _ = write!(e, "{sign}{}.{:03}", ns / 1_000, ns % 1_000);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(path).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[derive(Serialize)]
    struct Frame {
        frame: u64,
    }

    #[test]
    fn every_kind_of_event_reads_back_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let epoch = Nanos::from_secs(5);
        let mut sut =
            TraceWriter::create(&path, DEFAULT_CAP_BYTES, epoch, &Named { name: "r" }).unwrap();
        let track = Track { pid: 2, tid: 3 };
        sut.process_name(2, "CPUs").unwrap();
        sut.thread_name(track, "cpu \"3\"").unwrap();
        sut.thread_sort_index(track, 3).unwrap();
        let at = epoch + Nanos::new(1_234_567);
        sut.complete(
            track,
            "run",
            "exec",
            at,
            at + Nanos::new(2_001),
            &Frame { frame: 7 },
        )
        .unwrap();
        sut.instant(track, "overrun", "exec", at, Scope::Thread, &NoArgs {})
            .unwrap();
        sut.counter(2, "lateness", at, &Frame { frame: 1 }).unwrap();
        sut.instant(
            track,
            "before",
            "exec",
            epoch - Nanos::new(500),
            Scope::Global,
            &NoArgs {},
        )
        .unwrap();
        let summary = sut.finish().unwrap();
        assert_eq!(summary.events, 7);
        assert!(!summary.capped());
        assert_eq!(summary.bytes, std::fs::metadata(&path).unwrap().len());
        let json = parse(&path);
        assert_eq!(json["displayTimeUnit"], "ns");
        let events = json["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 7);
        assert_eq!(events[0]["ph"], "M");
        assert_eq!(events[0]["args"]["name"], "CPUs");
        assert_eq!(events[1]["args"]["name"], "cpu \"3\"");
        assert_eq!(events[2]["args"]["sort_index"], 3);
        assert_eq!(events[3]["ph"], "X");
        assert_eq!(events[3]["ts"], 1234.567);
        assert_eq!(events[3]["dur"], 2.001);
        assert_eq!(events[3]["args"]["frame"], 7);
        assert_eq!(events[4]["ph"], "i");
        assert_eq!(events[4]["s"], "t");
        assert_eq!(events[5]["ph"], "C");
        assert_eq!(events[6]["ts"], -0.5);
        assert_eq!(events[6]["s"], "g");
        let meta = &json["metadata"];
        assert_eq!(meta["events"], 7);
        assert_eq!(meta["left_out"], 0);
        assert_eq!(meta["bytes"], summary.bytes);
        assert_eq!(meta["run"]["name"], "r");
    }

    #[test]
    fn the_cap_holds_and_the_note_says_how_many_were_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let epoch = Nanos::ZERO;
        let mut sut = TraceWriter::create(&path, MIN_CAP_BYTES, epoch, &NoArgs {}).unwrap();
        let track = Track { pid: 1, tid: 0 };
        let n = 10_000u64;
        for i in 0..n {
            let at = Nanos::from_micros(i);
            sut.complete(
                track,
                "step",
                "steps",
                at,
                at + Nanos::new(700),
                &Frame { frame: i },
            )
            .unwrap();
        }
        assert!(sut.capped());
        let summary = sut.finish().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= MIN_CAP_BYTES, "{size} bytes over the cap");
        assert_eq!(summary.bytes, size);
        assert!(summary.capped());
        let json = parse(&path);
        let events = json["traceEvents"].as_array().unwrap();
        let written = events.len() as u64 - 1;
        assert_eq!(
            written + summary.left_out,
            n,
            "every event written or counted"
        );
        let note = events.last().unwrap();
        assert_eq!(
            note["name"],
            format!("trace cap reached: {} events left out", summary.left_out)
        );
        assert_eq!(note["ph"], "i");
        assert_eq!(note["s"], "g");
        assert_eq!(json["metadata"]["left_out"], summary.left_out);
        assert_eq!(json["metadata"]["capped"], true);
    }

    #[test]
    fn an_empty_trace_is_valid_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let sut = TraceWriter::create(&path, 0, Nanos::ZERO, &NoArgs {}).unwrap();
        let summary = sut.finish().unwrap();
        assert_eq!(summary.cap_bytes, MIN_CAP_BYTES, "raised to the least cap");
        let json = parse(&path);
        assert_eq!(json["traceEvents"].as_array().unwrap().len(), 0);
    }

    #[test]
    fn nothing_is_left_at_the_target_until_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let sut = TraceWriter::create(&path, 0, Nanos::ZERO, &NoArgs {}).unwrap();
        assert!(!path.exists());
        drop(sut);
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_unwritable_target_is_refused_at_creation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("t.json");
        let err = TraceWriter::create(&path, 0, Nanos::ZERO, &NoArgs {}).unwrap_err();
        assert!(matches!(err, OutputError::NoDirectory { .. }), "{err}");
    }
}
