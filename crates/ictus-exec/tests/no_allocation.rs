//! The steady-state frame loop allocates nothing: copying the input cells in, the
//! subsystem's typed and untyped reads and writes, publishing the outputs, the early
//! flush, the histograms and the live counters. A counting global allocator watches
//! the thread that runs the loop.

use ictus_core::alloc_count::{self, Counting};

use ictus_core::{MockClock, Nanos};
use ictus_exec::cell::{CellTable, Cells, ElemType};
use ictus_exec::control::Control;
use ictus_exec::executive::{Beat, MockBeat, OsBeat, Runner, Stats};
use ictus_exec::state::{StateId, StateWord};
use ictus_exec::stress::increment;
use ictus_exec::subsystem::{
    Flow, Frame, Input, OnError, Output, Ports, RawPort, Registry, RegistryError, Subsystem,
};
use ictus_explain::{ExplainConfig, Explainer, MissKind, MissReporter};
use ictus_os::wait::WaitMode;

/// Counts what watched code allocates (see `ictus_core::alloc_count`).
#[global_allocator]
static GLOBAL: Counting = Counting;

fn table() -> CellTable {
    let mut b = CellTable::builder();
    for c in ["A", "B"] {
        b.cell(c)
            .element("int", ElemType::I32, 1)
            .element("v", ElemType::F32, 64)
            .element("d", ElemType::F64, 256)
            .element("c", ElemType::U8, 8);
    }
    b.cell("audio").element("level", ElemType::F64, 1);
    b.build().unwrap()
}

/// Reads cell A whole and writes cell B incremented, reads a typed array and writes
/// a typed scalar, flushing it early.
struct Worker {
    from: RawPort,
    to: RawPort,
    v: Input<[f32; 64]>,
    level: Output<f64>,
    layout: ictus_exec::cell::CellDecl,
    clock: Option<&'static MockClock>,
    /// Every this many frames, one runs 2.5 ticks (an overrun); 0: never.
    overrun_every: u64,
}

impl Subsystem for Worker {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Worker {
            from: reg.input_cell("A")?,
            to: reg.output_cell("B")?,
            v: reg.input("A.v")?,
            level: reg.output("audio.level")?,
            layout: reg.cells().table().cell("A").cloned().unwrap(),
            clock: None,
            overrun_every: 0,
        })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        let sum: f32 = frame.get(&self.v).iter().sum();
        frame.set(&self.level, f64::from(sum));
        frame.flush(&self.level);
        let (input, output) = frame.raw_pair(&self.from, &self.to);
        increment(&self.layout, input, output);
        frame.ack(StateId::RUN);
        if let Some(c) = self.clock {
            let n = frame.number();
            let slow = self.overrun_every > 0 && n % self.overrun_every == self.overrun_every - 1;
            c.advance(Nanos::from_micros(if slow { 2_500 } else { 30 }));
        }
        Ok(Flow::Continue)
    }
}

fn prepared(control: &Control, cells: &Cells) -> (Worker, Ports, bool) {
    let names = vec!["w".to_string()];
    let config = toml::Table::new();
    let states = ictus_exec::state::States::new(&[]);
    let mut reg = Registry::standalone(0, &names, &config, &states, cells.clone(), control);
    let w = Worker::init(&mut reg).unwrap();
    let (ports, explicit) = reg.into_parts();
    (w, ports, explicit)
}

fn run_watched(
    beat: &dyn Beat,
    control: &Control,
    w: &mut Worker,
    ports: &mut Ports,
) -> (u64, Stats) {
    run_reporting(beat, control, w, ports, None)
}

fn run_reporting(
    beat: &dyn Beat,
    control: &Control,
    w: &mut Worker,
    ports: &mut Ports,
    reporter: Option<&mut MissReporter>,
) -> (u64, Stats) {
    let mut stats = Stats::default();
    let runner = Runner {
        control,
        slot: 0,
        start: 0,
        period: 1,
        group: None,
        heartbeat_timeout: None,
        explicit_ack: true,
        on_error: OnError::Stop,
    };
    let n = alloc_count::allocations_of(|| {
        runner.run_explained(beat, w, ports, &mut stats, reporter);
    });
    (n, stats)
}

/// A block of one subsystem in RUN, ticking every `tick_ns`, from `epoch` to frame
/// `stop`.
fn running(tick_ns: u64, stop: u64, epoch: Nanos) -> Control {
    let control = Control::in_process_with_claims(1, tick_ns, 9);
    control.set_state(StateWord::constant(StateId::RUN));
    control.set_stop_frame(stop);
    control.set_epoch(epoch);
    control
}

#[test]
fn the_frame_loop_allocates_nothing_under_a_mock_clock() {
    let _turn = alloc_count::one_at_a_time();
    let clock: &'static MockClock = Box::leak(Box::new(MockClock::new(Nanos::ZERO)));
    let cells = Cells::in_process(&table());
    let control = running(100_000, 5_000, Nanos::from_millis(1));
    let (mut w, mut ports, _) = prepared(&control, &cells);
    w.clock = Some(clock);
    let (n, stats) = run_watched(&MockBeat(clock), &control, &mut w, &mut ports);
    assert_eq!(stats.counters.frames_run, 5_000);
    assert_eq!(n, 0, "allocations in 5,000 frames");
}

#[test]
fn the_frame_loop_allocates_nothing_on_the_real_clock() {
    let _turn = alloc_count::one_at_a_time();
    let cells = Cells::in_process(&table());
    let control = running(
        200_000,
        200,
        ictus_os::clock::monotonic_now() + Nanos::from_millis(1),
    );
    let (mut w, mut ports, _) = prepared(&control, &cells);
    let beat = OsBeat {
        mode: WaitMode::Hybrid {
            margin: Nanos::from_micros(50),
        },
    };
    let (n, stats) = run_watched(&beat, &control, &mut w, &mut ports);
    assert_eq!(stats.counters.frames_run + stats.overruns.missed, 200);
    assert_eq!(n, 0, "allocations in 200 real frames");
}

#[test]
fn the_frame_loop_allocates_nothing_when_a_forwarder_listens() {
    // A run across hosts: each frame end and early flush also stamps the cells'
    // notice and wakes the forwarder (a thread of the link), still without an
    // allocation on the subsystem's thread.
    let _turn = alloc_count::one_at_a_time();
    let clock: &'static MockClock = Box::leak(Box::new(MockClock::new(Nanos::ZERO)));
    let cells = Cells::in_process(&table());
    cells.listen();
    let control = running(100_000, 1_000, Nanos::from_millis(1));
    let (mut w, mut ports, _) = prepared(&control, &cells);
    w.clock = Some(clock);
    let before = cells.notice().0;
    let (n, stats) = run_watched(&MockBeat(clock), &control, &mut w, &mut ports);
    assert_eq!(stats.counters.frames_run, 1_000);
    assert_eq!(n, 0, "allocations in 1,000 frames");
    // Two publications a frame (the flush, then the frame's end), 2 counts each.
    assert_eq!(cells.notice().0 - before, 4 * 1_000);
    assert!(
        cells.notice().1 > Nanos::ZERO,
        "the last publication is stamped"
    );
}

#[test]
fn the_frame_loop_allocates_nothing_while_it_reports_its_misses() {
    // A sampler explains the misses (its own thread allocates; the loop's does not):
    // every 100th frame overruns, and each overrun is pushed into the reporter's ring.
    let _turn = alloc_count::one_at_a_time();
    let clock: &'static MockClock = Box::leak(Box::new(MockClock::new(Nanos::ZERO)));
    let cells = Cells::in_process(&table());
    let control = running(1_000_000, 2_000, Nanos::from_millis(1));
    let (mut w, mut ports, _) = prepared(&control, &cells);
    w.clock = Some(clock);
    w.overrun_every = 100;
    let config = ExplainConfig::new(ictus_os::facts::online_cpus(), Nanos::from_millis(1));
    let (explainer, mut reporters) =
        Explainer::start(config, &["w".to_string()], Nanos::ZERO).unwrap();
    reporters[0].attach();
    let (n, stats) = run_reporting(
        &MockBeat(clock),
        &control,
        &mut w,
        &mut ports,
        Some(&mut reporters[0]),
    );
    let explanation = explainer.finish();
    assert_eq!(n, 0, "allocations in 2,000 frames with a reporter");
    // The 20th (frame 1,999) overruns past the stop frame: reported, not counted.
    assert_eq!(stats.overruns.missed, 19 * 2);
    assert_eq!(explanation.breakdown.events, 20);
    assert!(
        explanation
            .events
            .iter()
            .all(|e| e.kind == MissKind::Overrun)
    );
}

#[test]
#[allow(
    clippy::disallowed_types,
    reason = "the test's stop flag for its drain thread: one store, polled"
)]
fn the_frame_loop_allocates_nothing_while_it_is_tapped() {
    // Recording and tracing (issue 24): each frame pushes its input (when it
    // changed), its outputs and its timing into the tap's ring, drained by a
    // recorder thread (which allocates; the loop does not). A second run fills
    // a ring no one drains: the pushes are dropped and counted, still without
    // an allocation, and the loop never waits.
    use ictus_exec::tap::recorder::TapSetup;
    use ictus_exec::tap::ring::TapRings;
    let _turn = alloc_count::one_at_a_time();
    let clock: &'static MockClock = Box::leak(Box::new(MockClock::new(Nanos::ZERO)));
    let table = table();
    let cells = Cells::in_process(&table);
    let control = running(100_000, 5_000, Nanos::from_millis(1));
    let (mut w, mut ports, _) = prepared(&control, &cells);
    w.clock = Some(clock);
    let rings = TapRings::in_process(1, TapSetup::max_cell(&table));
    let recorded = vec![true; table.cells().len()];
    ports.set_tap(rings.writer(0), recorded.clone(), 1);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drain = {
        let (rings, done) = (rings.clone(), std::sync::Arc::clone(&done));
        std::thread::spawn(move || {
            let mut r = rings.reader(0);
            let mut taken = 0u64;
            loop {
                let last = done.load(std::sync::atomic::Ordering::Acquire);
                while r.take().is_some() {
                    taken += 1;
                }
                if last {
                    return taken;
                }
                std::thread::yield_now();
            }
        })
    };
    let (n, stats) = run_watched(&MockBeat(clock), &control, &mut w, &mut ports);
    done.store(true, std::sync::atomic::Ordering::Release);
    let taken = drain.join().unwrap();
    assert_eq!(stats.counters.frames_run, 5_000);
    assert_eq!(n, 0, "allocations in 5,000 tapped frames");
    // A frame, two outputs (B and audio) and, on the first frame only, the
    // input A (it never changes after the warm-up), less what was dropped.
    assert_eq!(taken + ports.tap_drops(), 3 * 5_000 + 1);

    // Nobody drains: the ring fills, the rest is dropped and counted.
    let clock: &'static MockClock = Box::leak(Box::new(MockClock::new(Nanos::ZERO)));
    let control = running(100_000, 10_000, Nanos::from_millis(1));
    let (mut w, mut ports, _) = prepared(&control, &cells);
    w.clock = Some(clock);
    let full = TapRings::in_process(1, TapSetup::max_cell(&table));
    ports.set_tap(full.writer(0), recorded, 1);
    let (n, stats) = run_watched(&MockBeat(clock), &control, &mut w, &mut ports);
    assert_eq!(stats.counters.frames_run, 10_000);
    assert_eq!(n, 0, "allocations with a full ring");
    assert!(ports.tap_drops() > 0 && full.dropped(0) == ports.tap_drops());
}
