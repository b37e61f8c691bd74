//! The recorder: one thread of the coordinator, off the real-time CPUs, that
//! drains the subsystems' rings every couple of milliseconds and hands each
//! record, and each event of the run, to every sink.

#![allow(
    clippy::disallowed_types,
    reason = "a stop flag between two threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::ring::{Taken, TapRings};
use super::{CellRecord, EventRecord, FrameRecord, Sink, TapEnd, TapRun, Written};
use crate::cell::CellTable;
use crate::schedule::Schedule;

/// How long the recorder sleeps between drains.
const DRAIN_EVERY: Duration = Duration::from_millis(2);

/// What a run taps, made before anything starts: the rings, and which cells
/// its subsystems push, how often.
#[derive(Clone, Debug)]
pub struct TapSetup {
    /// The rings.
    pub rings: TapRings,
    /// Per cell of the table: whether it is recorded.
    pub recorded: Vec<bool>,
    /// Cells are recorded every this many frames of their subsystem.
    pub every: u64,
}

impl TapSetup {
    /// The cells the schedule's `[record]` table chooses (all when it names
    /// none; a name the table lacks is ignored, as the schedule's parser has
    /// refused it already) and its `every`, over `rings`; none when the rings
    /// carry no cells (no sink takes them: a timeline alone).
    pub fn new(schedule: &Schedule, table: &CellTable, rings: TapRings) -> TapSetup {
        let recorded = match &schedule.record.cells {
            _ if !rings.cells_tapped() => vec![false; table.cells().len()],
            None => vec![true; table.cells().len()],
            Some(names) => table
                .cells()
                .iter()
                .map(|c| names.iter().any(|n| n == c.name()))
                .collect(),
        };
        TapSetup {
            rings,
            recorded,
            every: schedule.record.every.max(1),
        }
    }

    /// The largest cell of `table`, in bytes.
    pub fn max_cell(table: &CellTable) -> usize {
        table.cells().iter().map(|c| c.bytes()).max().unwrap_or(0)
    }

    /// The largest cell the rings of a run with `sinks` carry: `table`'s
    /// largest, or 0 when no sink takes cells.
    pub fn max_cell_for(table: &CellTable, sinks: &[Box<dyn Sink>]) -> usize {
        if sinks.iter().any(|s| s.takes_cells()) {
            Self::max_cell(table)
        } else {
            0
        }
    }
}

/// What the recorder found.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Records dropped per slot, and records handed on.
    pub end: TapEnd,
    /// Each sink's first error (the sink was stopped there): its index and the
    /// error.
    pub errors: Vec<(usize, String)>,
    /// What each sink that ended well wrote.
    pub written: Vec<Written>,
}

/// Hands records to the sinks, stopping a sink at its first error.
struct Fanout {
    sinks: Vec<Option<Box<dyn Sink>>>,
    errors: Vec<(usize, String)>,
    records: u64,
}

impl Fanout {
    fn each(&mut self, mut f: impl FnMut(&mut dyn Sink) -> std::io::Result<()>) {
        for (i, s) in self.sinks.iter_mut().enumerate() {
            if let Some(sink) = s
                && let Err(e) = f(sink.as_mut())
            {
                self.errors.push((i, e.to_string()));
                *s = None;
            }
        }
    }
}

/// The misses a frame record shows, as an event: an overrun (its execution
/// past its budget) or releases skipped.
fn miss_event(r: &FrameRecord, name: &str) -> Option<EventRecord> {
    let exec = r.exec();
    let message = if r.overrun() {
        format!(
            "{name}: frame {} overran its budget: executed {} of {}, {} release(s) skipped",
            r.frame, exec, r.budget, r.skipped
        )
    } else if r.skipped > 0 {
        format!(
            "{name}: {} release(s) missed after frame {} (woke {} late, executed {})",
            r.skipped,
            r.frame,
            r.lateness(),
            exec
        )
    } else {
        return None;
    };
    Some(EventRecord {
        time: r.end,
        frame: Some(r.frame),
        slot: Some(r.slot),
        kind: if r.overrun() { "overrun" } else { "miss" },
        message,
    })
}

/// Runs the recorder on the calling thread until `stop` is set and the rings
/// are empty: `begin` on every sink, then every record of the rings of `slots`
/// and every event from `events`, then `end`.
pub fn record(
    run: &TapRun<'_>,
    rings: &TapRings,
    sinks: Vec<Box<dyn Sink>>,
    events: &mpsc::Receiver<EventRecord>,
    stop: &AtomicBool,
) -> Recorded {
    let mut out = Fanout {
        sinks: sinks.into_iter().map(Some).collect(),
        errors: Vec::new(),
        records: 0,
    };
    out.each(|s| s.begin(run));
    let mut readers: Vec<_> = run.slots.iter().map(|&k| rings.reader(k)).collect();
    let names: Vec<&str> = run.schedule.subsystem_names().collect();
    loop {
        // Acquire: pairs with the run's Release store once every loop ended, so
        // the drain that follows takes every record pushed before it.
        let last = stop.load(Ordering::Acquire);
        let mut took = 0u64;
        for reader in &mut readers {
            let slot = reader.slot();
            while let Some(taken) = reader.take() {
                took += 1;
                match taken {
                    Taken::Frame(r) => {
                        out.each(|s| s.frame(&r));
                        if let Some(e) = miss_event(&r, names.get(slot).copied().unwrap_or("?")) {
                            out.each(|s| s.event(&e));
                        }
                    }
                    Taken::Cell {
                        direction,
                        frame,
                        cell,
                        bytes,
                    } => {
                        let r = CellRecord {
                            slot,
                            frame,
                            cell,
                            direction,
                            bytes,
                        };
                        out.each(|s| s.cell(&r));
                    }
                }
            }
        }
        while let Ok(e) = events.try_recv() {
            took += 1;
            out.each(|s| s.event(&e));
        }
        out.records += took;
        if last {
            break;
        }
        if took == 0 {
            std::thread::sleep(DRAIN_EVERY);
        }
    }
    let end = TapEnd {
        dropped: run.slots.iter().map(|&k| (k, rings.dropped(k))).collect(),
        records: out.records,
    };
    out.each(|s| s.end(&end));
    let written = out
        .sinks
        .iter()
        .flatten()
        .filter_map(|s| s.written())
        .collect();
    Recorded {
        end,
        errors: out.errors,
        written,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::Direction;
    use ictus_core::Nanos;
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Sink for Log {
        fn begin(&mut self, run: &TapRun<'_>) -> std::io::Result<()> {
            self.0
                .lock()
                .unwrap()
                .push(format!("begin {}", run.slots.len()));
            Ok(())
        }
        fn frame(&mut self, r: &FrameRecord) -> std::io::Result<()> {
            self.0
                .lock()
                .unwrap()
                .push(format!("frame {} {}", r.slot, r.frame));
            Ok(())
        }
        fn cell(&mut self, r: &CellRecord<'_>) -> std::io::Result<()> {
            self.0.lock().unwrap().push(format!(
                "cell {} {} {:?} {}",
                r.slot,
                r.frame,
                r.direction,
                r.bytes.len()
            ));
            Ok(())
        }
        fn event(&mut self, e: &EventRecord) -> std::io::Result<()> {
            self.0.lock().unwrap().push(format!("event {}", e.kind));
            Ok(())
        }
        fn end(&mut self, end: &TapEnd) -> std::io::Result<()> {
            self.0.lock().unwrap().push(format!("end {}", end.records));
            Ok(())
        }
    }

    /// A sink that keeps nothing: every frame fails to be written when `fails`, and
    /// it takes cells when `takes_cells`.
    struct Stub {
        fails: bool,
        takes_cells: bool,
    }

    const FAILING: Stub = Stub {
        fails: true,
        takes_cells: true,
    };

    /// As a timeline: frames only.
    const TIMELINE: Stub = Stub {
        fails: false,
        takes_cells: false,
    };

    impl Sink for Stub {
        fn begin(&mut self, _: &TapRun<'_>) -> std::io::Result<()> {
            Ok(())
        }
        fn frame(&mut self, _: &FrameRecord) -> std::io::Result<()> {
            if self.fails {
                return Err(std::io::Error::other("disk full"));
            }
            Ok(())
        }
        fn cell(&mut self, _: &CellRecord<'_>) -> std::io::Result<()> {
            Ok(())
        }
        fn event(&mut self, _: &EventRecord) -> std::io::Result<()> {
            Ok(())
        }
        fn end(&mut self, _: &TapEnd) -> std::io::Result<()> {
            Ok(())
        }
        fn takes_cells(&self) -> bool {
            self.takes_cells
        }
    }

    #[test]
    fn every_record_reaches_every_sink_in_order_and_a_failing_sink_is_stopped() {
        let schedule = crate::schedule::Schedule::parse(
            "name = \"t\"\ntick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"A\"\nbuiltin = \"idle\"\n",
            std::path::Path::new("t.toml"),
            &ictus_core::CpuSet::from_cpus([0, 1]),
        )
        .unwrap();
        let table = CellTable::default();
        let rings = TapRings::in_process(1, 16);
        let run = TapRun {
            schedule: &schedule,
            schedule_text: None,
            table: &table,
            host: "here",
            slots: &[0],
            epoch: Nanos::ZERO,
            epoch_unix: Nanos::ZERO,
            tick: Nanos::from_millis(1),
            writers: Vec::new(),
            states: Vec::new(),
            cells: Vec::new(),
            every: 1,
        };
        let mut w = rings.writer(0);
        for f in 0..3 {
            w.cell(Direction::Input, f, 0, &[1; 16]);
            w.frame(&FrameRecord {
                slot: 0,
                frame: f,
                state: 0,
                deadline: Nanos::from_millis(f),
                woke: Nanos::from_millis(f),
                agreed: None,
                // Frame 2 overruns.
                end: Nanos::from_millis(f) + Nanos::from_micros(if f == 2 { 1500 } else { 10 }),
                budget: Nanos::from_millis(1),
                skipped: u64::from(f == 2),
                cpu: Some(1),
                error: false,
            });
        }
        let (tx, rx) = mpsc::channel();
        tx.send(EventRecord {
            time: Nanos::ZERO,
            frame: Some(0),
            slot: None,
            kind: "state",
            message: "run".into(),
        })
        .unwrap();
        let log = Log::default();
        let seen = Arc::clone(&log.0);
        let stop = AtomicBool::new(true);
        let got = record(
            &run,
            &rings,
            vec![Box::new(FAILING), Box::new(log)],
            &rx,
            &stop,
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                "begin 1",
                "cell 0 0 Input 16",
                "frame 0 0",
                "cell 0 1 Input 16",
                "frame 0 1",
                "cell 0 2 Input 16",
                "frame 0 2",
                "event overrun",
                "event state",
                "end 7"
            ]
        );
        assert_eq!(got.errors, [(0, "disk full".to_string())]);
        assert_eq!(got.end.dropped, [(0, 0)]);
    }

    #[test]
    fn without_a_sink_that_takes_cells_no_cell_is_pushed() {
        let schedule = crate::schedule::Schedule::parse(
            "name = \"t\"\ntick = \"1ms\"\nmajor_frame = 1\n[[cell]]\nname = \"A\"\n\
             elements = [{ name = \"v\", type = \"f64\", len = 100 }]\n\
             [[subsystem]]\nname = \"A\"\nbuiltin = \"idle\"\n",
            std::path::Path::new("t.toml"),
            &ictus_core::CpuSet::from_cpus([0, 1]),
        )
        .unwrap();
        let crate::schedule::CellSource::Inline(table) = &schedule.cells else {
            panic!("an inline table");
        };
        let timeline: Vec<Box<dyn Sink>> = vec![Box::new(TIMELINE)];
        assert_eq!(TapSetup::max_cell_for(table, &timeline), 0);
        let frames_only = TapSetup::new(&schedule, table, TapRings::in_process(1, 0));
        assert_eq!(frames_only.recorded, [false]);
        assert!(!frames_only.rings.cells_tapped());
        let both: Vec<Box<dyn Sink>> = vec![Box::new(TIMELINE), Box::new(Log::default())];
        assert_eq!(TapSetup::max_cell_for(table, &both), 800);
        let all = TapSetup::new(&schedule, table, TapRings::in_process(1, 800));
        assert_eq!(all.recorded, [true]);
    }
}
