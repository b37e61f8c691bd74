//! A run's timeline (`ictus run --trace FILE.json`): a [`Sink`] of the tap that
//! writes the Chrome/Perfetto trace-event format ([`ictus_capture::timeline`]), for
//! `ui.perfetto.dev` or `chrome://tracing`, offline.
//!
//! Two groups of tracks ("processes" in the format):
//!
//! - the host (pid 1, named after it): one track per subsystem (tid = 1 + its
//!   slot, named after it), with per frame a complete event from wake-up to end (args:
//!   frame, state, lateness, execution time, budget), the release as an instant at
//!   the deadline, for a subsystem of a synchronous group a `rendezvous` complete
//!   event from wake-up to the group's agreement, and instants for an overrun
//!   (execution past the budget) and a miss (releases skipped), with their figures;
//! - `CPUs` (pid 2): one track per CPU (tid = 1000 + the CPU, named `CPU n`), the
//!   same executions placed on the CPU each ended on.
//!
//! Every track's tid is unique in the file, and none is 0: Perfetto's importer
//! knows a thread by its tid alone (a tid seen under two pids would be split
//! into many threads), and tid 0 is its idle thread.
//!
//! The run's events (state changes, crashes, warnings) are global instants.
//! Timestamps are relative to the run's epoch (frame 0's release, the trace's 0).
//! Cells are not traced: the timeline is timing; their values are the recording's
//! (`--record`).
//!
//! The file is capped ([`ictus_capture::timeline::DEFAULT_CAP_BYTES`] unless told): past
//! the cap events are counted, not written, and a last note says how many.
//! Once ended, the sink says what the file holds ([`Sink::written`], in the run's
//! report).

use std::path::{Path, PathBuf};

use ictus_capture::timeline::{Scope, TraceSummary, TraceWriter, Track};
use ictus_os::fs::OutputError;
use serde::Serialize;

use crate::tap::{CellRecord, EventRecord, FrameRecord, Sink, TapEnd, TapRun, Written};

/// The subsystems' group of tracks.
const HOST_PID: u32 = 1;
/// The CPUs' group of tracks.
const CPUS_PID: u32 = 2;

/// The tid of CPU 0's track (a CPU's is this plus its number; subsystems' are
/// 1 to [`crate::control::MAX_SUBSYSTEMS`]).
const CPU_TID_BASE: u32 = 1000;

/// The track of the subsystem in `slot`.
fn subsystem_track(slot: usize) -> Track {
    Track {
        pid: HOST_PID,
        tid: 1 + slot as u32,
    }
}

/// A synchronous group's wait for its members (its name on the timeline).
const RENDEZVOUS: &str = "rendezvous";

/// Writes a run's timeline (see the [module](self) docs).
#[derive(Debug)]
pub struct TraceSink {
    path: PathBuf,
    cap_bytes: u64,
    /// What the file holds, once ended.
    summary: Option<TraceSummary>,
    open: Option<Open>,
}

/// A trace begun: its writer and what names its tracks.
#[derive(Debug)]
struct Open {
    writer: TraceWriter,
    /// Subsystem names by slot.
    names: Vec<String>,
    /// State names by id.
    states: Vec<String>,
    /// CPUs whose track is named.
    cpus: Vec<bool>,
}

/// The file's `metadata.run`.
#[derive(Serialize)]
struct RunMeta<'a> {
    tool: &'static str,
    version: &'static str,
    schedule: &'a str,
    host: &'a str,
    tick_ns: u64,
    epoch_unix_ns: u64,
}

/// The arguments of an execution.
#[derive(Serialize)]
struct Exec<'a> {
    frame: u64,
    state: &'a str,
    lateness_ns: u64,
    exec_ns: u64,
    budget_ns: u64,
    skipped: u64,
    error: bool,
}

#[derive(Serialize)]
struct Frame {
    frame: u64,
}

#[derive(Serialize)]
struct Rendezvous {
    frame: u64,
    wait_ns: u64,
}

#[derive(Serialize)]
struct Overrun {
    frame: u64,
    exec_ns: u64,
    budget_ns: u64,
    over_ns: u64,
}

#[derive(Serialize)]
struct Miss {
    frame: u64,
    skipped: u64,
}

#[derive(Serialize)]
struct Event<'a> {
    kind: &'a str,
    frame: Option<u64>,
    subsystem: Option<&'a str>,
}

impl TraceSink {
    /// A sink that will write `path` (at most `cap_bytes`); refused when `path`
    /// cannot be written, before the run.
    pub fn new(path: &Path, cap_bytes: u64) -> Result<TraceSink, OutputError> {
        ictus_os::fs::check_writable(path)?;
        Ok(TraceSink {
            path: path.to_path_buf(),
            cap_bytes,
            summary: None,
            open: None,
        })
    }

    /// What the file holds (`None` until the run's tap ended the sink).
    pub fn summary(&self) -> Option<TraceSummary> {
        self.summary
    }

    fn open(&mut self) -> std::io::Result<&mut Open> {
        self.open
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the trace was not begun"))
    }
}

fn to_io(e: OutputError) -> std::io::Error {
    std::io::Error::other(e)
}

impl Open {
    fn name(&self, slot: usize) -> &str {
        self.names.get(slot).map_or("?", String::as_str)
    }

    /// Names CPU `cpu`'s track the first time it is seen.
    fn cpu_track(&mut self, cpu: u32) -> std::io::Result<Track> {
        let track = Track {
            pid: CPUS_PID,
            tid: CPU_TID_BASE + cpu,
        };
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.cpus.resize(i + 1, false);
        }
        if !self.cpus[i] {
            self.cpus[i] = true;
            self.writer.thread_name(track, &format!("CPU {cpu}"))?;
            self.writer.thread_sort_index(track, i64::from(cpu))?;
        }
        Ok(track)
    }
}

impl Sink for TraceSink {
    fn begin(&mut self, run: &TapRun<'_>) -> std::io::Result<()> {
        let meta = RunMeta {
            tool: "ictus",
            version: env!("CARGO_PKG_VERSION"),
            schedule: &run.schedule.name,
            host: run.host,
            tick_ns: run.tick.as_u64(),
            epoch_unix_ns: run.epoch_unix.as_u64(),
        };
        let writer =
            TraceWriter::create(&self.path, self.cap_bytes, run.epoch, &meta).map_err(to_io)?;
        let names = run.schedule.subsystem_names().map(String::from).collect();
        let open = self.open.insert(Open {
            writer,
            names,
            states: run.states.clone(),
            cpus: Vec::new(),
        });
        let w = &mut open.writer;
        w.process_name(HOST_PID, run.host)?;
        w.process_name(CPUS_PID, "CPUs")?;
        for &slot in run.slots {
            let track = subsystem_track(slot);
            let name = open.names.get(slot).map_or("?", String::as_str);
            w.thread_name(track, name)?;
            w.thread_sort_index(track, slot as i64)?;
        }
        Ok(())
    }

    fn frame(&mut self, r: &FrameRecord) -> std::io::Result<()> {
        let open = self.open()?;
        let cpu_track = r.cpu.map(|cpu| open.cpu_track(cpu)).transpose()?;
        let Open {
            writer: w,
            names,
            states,
            ..
        } = open;
        let track = subsystem_track(r.slot);
        let name = names.get(r.slot).map_or("?", String::as_str);
        let exec = Exec {
            frame: r.frame,
            state: states.get(usize::from(r.state)).map_or("?", String::as_str),
            lateness_ns: r.lateness().as_u64(),
            exec_ns: r.exec().as_u64(),
            budget_ns: r.budget.as_u64(),
            skipped: r.skipped,
            error: r.error,
        };
        let frame = r.frame;
        w.instant(
            track,
            "release",
            "release",
            r.deadline,
            Scope::Thread,
            &Frame { frame },
        )?;
        if let Some(agreed) = r.agreed {
            let wait_ns = agreed.saturating_sub(r.woke).as_u64();
            let args = Rendezvous { frame, wait_ns };
            w.complete(track, RENDEZVOUS, RENDEZVOUS, r.woke, agreed, &args)?;
        }
        w.complete(track, name, "exec", r.woke, r.end, &exec)?;
        if r.overrun() {
            let args = Overrun {
                frame,
                exec_ns: exec.exec_ns,
                budget_ns: exec.budget_ns,
                over_ns: exec.exec_ns - exec.budget_ns,
            };
            w.instant(track, "overrun", "overrun", r.end, Scope::Thread, &args)?;
        }
        if r.skipped > 0 {
            let args = Miss {
                frame,
                skipped: r.skipped,
            };
            w.instant(track, "miss", "miss", r.end, Scope::Thread, &args)?;
        }
        if let Some(track) = cpu_track {
            w.complete(track, name, "exec", r.woke, r.end, &exec)?;
        }
        Ok(())
    }

    fn cell(&mut self, _record: &CellRecord<'_>) -> std::io::Result<()> {
        // The timeline is timing; cells are the recording's.
        Ok(())
    }

    fn event(&mut self, e: &EventRecord) -> std::io::Result<()> {
        let open = self.open()?;
        let subsystem = e.slot.map(|s| open.name(s).to_owned());
        let args = Event {
            kind: e.kind,
            frame: e.frame,
            subsystem: subsystem.as_deref(),
        };
        // Global: on every track; named after its subsystem's (else the first).
        let track = subsystem_track(e.slot.unwrap_or(0));
        open.writer
            .instant(track, &e.message, e.kind, e.time, Scope::Global, &args)
    }

    fn end(&mut self, _end: &TapEnd) -> std::io::Result<()> {
        let open = self
            .open
            .take()
            .ok_or_else(|| std::io::Error::other("the trace was not begun"))?;
        self.summary = Some(open.writer.finish().map_err(to_io)?);
        Ok(())
    }

    fn takes_cells(&self) -> bool {
        false
    }

    fn written(&self) -> Option<Written> {
        let s = self.summary?;
        Some(Written {
            line: format!(
                "trace: {} ({} events, {} bytes)",
                self.path.display(),
                s.events,
                s.bytes
            ),
            warning: s.warning(&self.path),
        })
    }
}

#[cfg(test)]
mod tests {
    use ictus_core::{CpuSet, Nanos};
    use serde_json::Value;

    use super::*;
    use crate::cell::CellTable;
    use crate::schedule::Schedule;

    const SCHEDULE: &str = r#"
name = "trio"
tick = "1ms"
major_frame = 1
initial_state = "run"

[[subsystem]]
name = "A"
start = 0
period = 1
cpu = 0

[[subsystem]]
name = "B"
start = 0
period = 1
cpu = 1
"#;

    fn schedule() -> Schedule {
        Schedule::parse(SCHEDULE, "trio.toml", &CpuSet::from_cpus([0, 1])).unwrap()
    }

    const EPOCH: Nanos = Nanos::from_secs(1_000);

    fn run<'a>(schedule: &'a Schedule, table: &'a CellTable) -> TapRun<'a> {
        TapRun {
            schedule,
            schedule_text: None,
            table,
            host: "here",
            slots: &[0, 1],
            epoch: EPOCH,
            epoch_unix: Nanos::from_secs(1_800_000_000),
            tick: Nanos::from_millis(1),
            writers: Vec::new(),
            states: vec!["init".into(), "run".into()],
            cells: Vec::new(),
            every: 1,
        }
    }

    /// Frame `frame` of `slot`: woke 10 us late, ran `exec`, on CPU `slot`.
    fn frame(slot: usize, frame: u64, exec: Nanos) -> FrameRecord {
        let deadline = EPOCH + Nanos::from_millis(frame);
        let woke = deadline + Nanos::from_micros(10);
        FrameRecord {
            slot,
            frame,
            state: 1,
            deadline,
            woke,
            agreed: (slot == 1).then(|| woke + Nanos::from_micros(5)),
            end: woke + exec,
            budget: Nanos::from_millis(1),
            skipped: 0,
            cpu: Some(slot as u32),
            error: false,
        }
    }

    /// Runs the sink over `frames` frames of both subsystems (frame 3 of A
    /// overruns and skips one release) and a state change; the file as JSON.
    fn traced(cap: u64, frames: u64) -> (Value, TraceSummary) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        let (schedule, table) = (schedule(), CellTable::default());
        let mut sut = TraceSink::new(&path, cap).unwrap();
        sut.begin(&run(&schedule, &table)).unwrap();
        for f in 0..frames {
            for slot in 0..2 {
                let mut r = frame(slot, f, Nanos::from_micros(200));
                if slot == 0 && f == 3 {
                    r.end = r.woke + Nanos::from_micros(1_500);
                    r.skipped = 1;
                }
                sut.frame(&r).unwrap();
            }
        }
        sut.event(&EventRecord {
            time: EPOCH + Nanos::from_millis(2),
            frame: Some(2),
            slot: None,
            kind: "state",
            message: "state run".into(),
        })
        .unwrap();
        sut.end(&TapEnd::default()).unwrap();
        let summary = sut.summary().unwrap();
        assert!(sut.written().unwrap().line.starts_with("trace: "));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len() as u64, summary.bytes);
        (serde_json::from_str(&text).unwrap(), summary)
    }

    fn events(json: &Value) -> &Vec<Value> {
        json["traceEvents"].as_array().unwrap()
    }

    fn named(json: &Value, pid: u64, tid: u64) -> Option<&str> {
        events(json)
            .iter()
            .find(|e| {
                e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid && e["tid"] == tid
            })
            .and_then(|e| e["args"]["name"].as_str())
    }

    #[test]
    fn every_subsystem_and_cpu_has_a_named_track() {
        let (json, _) = traced(ictus_capture::timeline::DEFAULT_CAP_BYTES, 5);
        assert_eq!(named(&json, 1, 1), Some("A"));
        assert_eq!(named(&json, 1, 2), Some("B"));
        assert_eq!(named(&json, 2, 1000), Some("CPU 0"));
        assert_eq!(named(&json, 2, 1001), Some("CPU 1"));
        let processes: Vec<&str> = events(&json)
            .iter()
            .filter(|e| e["name"] == "process_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert_eq!(processes, ["here", "CPUs"]);
        assert_eq!(json["metadata"]["run"]["schedule"], "trio");
    }

    #[test]
    fn each_frame_is_one_execution_on_its_subsystem_and_its_cpu() {
        let (json, _) = traced(ictus_capture::timeline::DEFAULT_CAP_BYTES, 5);
        for (slot, name) in [(0u64, "A"), (1, "B")] {
            for (pid, tid) in [(1u64, 1 + slot), (2, 1000 + slot)] {
                let frames: Vec<u64> = events(&json)
                    .iter()
                    .filter(|e| e["ph"] == "X" && e["cat"] == "exec")
                    .filter(|e| e["pid"] == pid && e["tid"] == tid)
                    .map(|e| {
                        assert_eq!(e["name"], name);
                        assert_eq!(e["args"]["state"], "run");
                        assert_eq!(e["args"]["lateness_ns"], 10_000);
                        e["args"]["frame"].as_u64().unwrap()
                    })
                    .collect();
                assert_eq!(frames, [0, 1, 2, 3, 4], "{name} on pid {pid}");
            }
        }
        let first = events(&json)
            .iter()
            .find(|e| e["ph"] == "X" && e["cat"] == "exec")
            .unwrap();
        assert_eq!(first["ts"], 10.0, "relative to the epoch, in us");
        assert_eq!(first["dur"], 200.0);
        let releases = events(&json)
            .iter()
            .filter(|e| e["name"] == "release" && e["ph"] == "i")
            .count();
        assert_eq!(releases, 10);
    }

    #[test]
    fn only_a_synchronous_group_has_rendezvous() {
        let (json, _) = traced(ictus_capture::timeline::DEFAULT_CAP_BYTES, 5);
        let tids: Vec<u64> = events(&json)
            .iter()
            .filter(|e| e["name"] == RENDEZVOUS)
            .map(|e| {
                assert_eq!(e["ph"], "X");
                assert_eq!(e["dur"], 5.0);
                e["tid"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(tids, [2; 5], "B's track");
    }

    #[test]
    fn overruns_misses_and_events_are_instants_with_their_figures() {
        let (json, _) = traced(ictus_capture::timeline::DEFAULT_CAP_BYTES, 5);
        let find = |name: &str| {
            let found: Vec<&Value> = events(&json).iter().filter(|e| e["name"] == name).collect();
            assert_eq!(found.len(), 1, "{name}");
            assert_eq!(found[0]["ph"], "i");
            found[0].clone()
        };
        let overrun = find("overrun");
        assert_eq!(overrun["args"]["frame"], 3);
        assert_eq!(overrun["args"]["exec_ns"], 1_500_000);
        assert_eq!(overrun["args"]["over_ns"], 500_000);
        assert_eq!(overrun["tid"], 1, "A's track");
        let miss = find("miss");
        assert_eq!(miss["args"]["skipped"], 1);
        let state = find("state run");
        assert_eq!(state["s"], "g");
        assert_eq!(state["cat"], "state");
        assert_eq!(state["ts"], 2_000.0);
    }

    #[test]
    fn the_cap_is_respected_and_said() {
        let cap = ictus_capture::timeline::MIN_CAP_BYTES;
        let (json, summary) = traced(cap, 2_000);
        assert!(summary.bytes <= cap);
        assert!(summary.capped());
        let note = events(&json).last().unwrap();
        let name = note["name"].as_str().unwrap();
        assert!(name.starts_with("trace cap reached: "), "{name}");
        assert_eq!(json["metadata"]["left_out"], summary.left_out);
    }

    #[test]
    fn an_unwritable_path_is_refused_before_the_run() {
        let err = TraceSink::new(Path::new("/nonexistent-dir/t.json"), 1 << 20).unwrap_err();
        assert!(matches!(err, OutputError::NoDirectory { .. }), "{err}");
    }
}
