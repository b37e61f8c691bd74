//! End to end: the tap (issue 24). Seed 003's stress ring with A and C as threads
//! and B as a program of its own, tapped: every frame each subsystem ran reaches
//! the sink with its timing, its input and its output, in frame order, from the
//! threads and from the program alike; the run's state change comes as an event.
//! Structure only, never timings.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{options, schedule_file};
use ictus_exec::run;
use ictus_exec::tap::{CellRecord, Direction, EventRecord, FrameRecord, Sink, TapEnd, TapRun};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// What the sink saw.
#[derive(Default)]
struct Seen {
    begun: Option<(Vec<usize>, u64, usize)>,
    frames: Vec<FrameRecord>,
    /// (slot, frame, cell, direction, the cell's `int`, its length).
    cells: Vec<(usize, u64, usize, Direction, i32, usize)>,
    events: Vec<EventRecord>,
    end: Option<TapEnd>,
}

struct Collect(Arc<Mutex<Seen>>);

impl Sink for Collect {
    fn begin(&mut self, run: &TapRun<'_>) -> std::io::Result<()> {
        let writers_of_b = run.writers[1].iter().filter(|w| **w == Some(0)).count();
        self.0.lock().unwrap().begun = Some((run.slots.to_vec(), run.every, writers_of_b));
        Ok(())
    }
    fn frame(&mut self, r: &FrameRecord) -> std::io::Result<()> {
        self.0.lock().unwrap().frames.push(*r);
        Ok(())
    }
    fn cell(&mut self, r: &CellRecord<'_>) -> std::io::Result<()> {
        let int = i32::from_ne_bytes(r.bytes[..4].try_into().unwrap());
        self.0.lock().unwrap().cells.push((
            r.slot,
            r.frame,
            r.cell,
            r.direction,
            int,
            r.bytes.len(),
        ));
        Ok(())
    }
    fn event(&mut self, e: &EventRecord) -> std::io::Result<()> {
        self.0.lock().unwrap().events.push(e.clone());
        Ok(())
    }
    fn end(&mut self, end: &TapEnd) -> std::io::Result<()> {
        self.0.lock().unwrap().end = Some(end.clone());
        Ok(())
    }
}

#[test]
fn every_frame_of_threads_and_of_a_program_reaches_the_sink_with_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("t-tap-{}", std::process::id());
    let text = std::fs::read_to_string(examples().join("stress/schedule.toml"))
        .unwrap()
        .replace("name = \"stress\"", &format!("name = \"{name}\""))
        .replace(
            "process = \"own\"\nbuiltin = \"increment\"\nconfig = { from = \"B\", to = \"C\" }",
            "process = \"stress_b\"",
        );
    std::fs::copy(
        examples().join("stress/cells.toml"),
        dir.path().join("cells.toml"),
    )
    .unwrap();
    let s = schedule_file(dir.path(), "schedule.toml", &text);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut o = options(dir.path(), Duration::from_millis(600));
    o.sinks.push(Box::new(Collect(Arc::clone(&seen))));
    let r = run::run(&s, &mut run::builtin, o).unwrap();
    assert!(r.complete, "{r:#?}");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.begun,
        Some((vec![0, 1, 2], 1, 14)),
        "A writes B's 14 elements"
    );
    let end = seen.end.clone().expect("the sinks were ended");
    assert_eq!(end.dropped, [(0, 0), (1, 0), (2, 0)]);
    // Every frame each subsystem ran, in order, once: threads and the program.
    let mut by_slot: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for f in &seen.frames {
        by_slot.entry(f.slot).or_default().push(f.frame);
        assert!(f.woke >= f.deadline && f.end >= f.woke, "{f:?}");
        assert_eq!(f.budget.as_u64(), 3_000_000);
    }
    for (k, sub) in r.subsystems.iter().enumerate() {
        let frames = &by_slot[&k];
        assert_eq!(
            frames.len() as u64,
            sub.frames_run,
            "{}: one record per frame",
            sub.name
        );
        assert!(
            frames.windows(2).all(|w| w[0] < w[1]),
            "{}: in order",
            sub.name
        );
        assert!(
            frames.iter().all(|f| f % 3 == k as u64),
            "{}: its own frames",
            sub.name
        );
        // Its output each frame; its input whenever it changed, the first frame too.
        let outs: Vec<_> = seen
            .cells
            .iter()
            .filter(|c| c.0 == k && c.3 == Direction::Output)
            .collect();
        assert_eq!(
            outs.len(),
            frames.len(),
            "{}: an output per frame",
            sub.name
        );
        assert!(outs.iter().all(|c| c.2 == (k + 1) % 3 && c.5 == 4872));
        let ins: Vec<_> = seen
            .cells
            .iter()
            .filter(|c| c.0 == k && c.3 == Direction::Input)
            .collect();
        assert!(!ins.is_empty() && ins.len() <= frames.len());
        assert_eq!(ins[0].1, frames[0]);
        // The increment: what it published is one more than what it last read.
        for out in &outs {
            let read = ins
                .iter()
                .rev()
                .find(|i| i.1 <= out.1)
                .expect("an input first");
            assert_eq!(out.4, read.4 + 1, "{}: frame {}", sub.name, out.1);
        }
    }
    assert!(
        seen.events
            .iter()
            .any(|e| e.kind == "state" && e.message == "state run"),
        "{:?}",
        seen.events
    );
}
