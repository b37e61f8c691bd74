//! Running a schedule: the coordinator.
//!
//! [`run`] prepares everything first (the cells, the hubs, the control block, the in-process
//! subsystems, the control socket), so a bad schedule, cell table or subsystem starts
//! nothing. Then it starts one thread per in-process subsystem (pinned, in its class,
//! running `init`), launches the programs the schedule names (each joins through
//! shared memory with [`crate::child::run`]), waits until every subsystem is ready,
//! publishes the epoch, and coordinates: state commands, the heartbeat, crashed
//! children, acknowledgements, the live status, the stop. It ends with a
//! [`RunReport`], and leaves no segment, socket or process behind.
//!
//! ```no_run
//! use ictus_exec::{run, schedule::Schedule};
//! let schedule = Schedule::from_file("examples/stress/schedule.toml".as_ref(),
//!     &ictus_os::facts::online_cpus()).unwrap();
//! let report = run::run(&schedule, &mut run::builtin, run::RunOptions::default()).unwrap();
//! println!("{} frames", report.frames);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::sync::atomic::AtomicBool;

use ictus_os::clock::monotonic_now;
use ictus_os::sched;

use crate::report::RunReport;
use crate::schedule::{Schedule, SubsystemSpec};
use crate::subsystem::{Flow, Frame, Maker, Registry, RegistryError, Subsystem};
use crate::tap::recorder::{self, Recorded, TapSetup};
use crate::tap::{EventRecord, TapRun};
use coordinate::TapEvents;

// The phases of `run`, a file each: prepare (what can refuse a run, made before
// anything starts; the groups), start (threads, programs, the wait until ready,
// the epoch), coordinate (the loop, one method per concern), gather (the report).
// Beside them: thread (a subsystem's own side, also a launched program's),
// children (reaping programs with a bound), snapshot (the live view), watch (the
// misses explained). What the phases share is in siblings they import, never in
// this file (which imports them): options (how to run, the environment of a
// launched program), error, names (segments, programs), clock (the time base the
// start hands the coordinator), journal (events and warnings, start to gather).
// The report's types are the crate's `report` module.
mod children;
mod clock;
mod coordinate;
mod error;
mod gather;
mod journal;
mod names;
mod options;
mod prepare;
mod snapshot;
mod start;
mod thread;
mod watch;

use children::{ChildProc, kill_all};
use coordinate::Coordinator;
use prepare::{Local, Staged};
use start::Startup;
use watch::Watch;

pub use crate::live::{LiveStatus, LiveSubsystem};
pub(crate) use coordinate::Made;
pub use error::{RunError, StartError};
pub use names::{cells_segment, control_segment, hubs_segment, resolve_program, tap_segment};
pub(crate) use options::env;
pub use options::{Factory, RunOptions, StatusHook};
pub(crate) use thread::Prepared;
pub(crate) use watch::explain_program;

/// What the tap's sinks are told of the run before its first record.
fn tap_run<'s>(
    staged: &'s Staged<'s>,
    table: &'s crate::cell::CellTable,
    setup: &TapSetup,
    epoch: ictus_core::Nanos,
) -> TapRun<'s> {
    let schedule = staged.schedule;
    let now_mono = monotonic_now();
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let epoch_unix =
        ictus_core::Nanos::new(now_unix.saturating_sub(now_mono.saturating_sub(epoch).as_u64()));
    // Every `init` has run: the writers' claims are all made.
    let writers = table
        .cells()
        .iter()
        .enumerate()
        .map(|(c, cell)| {
            (0..cell.elements().len())
                .map(|e| {
                    let index = crate::subsystem::first_element_index(table, c) + e;
                    staged.control.writer_of(index)
                })
                .collect()
        })
        .collect();
    let host = schedule
        .hosts
        .get(staged.here)
        .map_or("here", |h| h.name.as_str());
    TapRun {
        schedule,
        schedule_text: Some(&schedule.text),
        table,
        host,
        slots: &staged.local,
        epoch,
        epoch_unix,
        tick: schedule.tick,
        writers,
        states: staged.states.names().to_vec(),
        cells: setup.recorded.clone(),
        every: setup.every,
    }
}

/// What the recorder found, into the report: records its rings dropped, and a
/// sink that failed.
fn tap_findings(
    report: &mut RunReport,
    staged: &Staged<'_>,
    recorded: std::thread::Result<Recorded>,
) {
    use crate::report::{RunWarning, WarningId};
    match recorded {
        Ok(r) => {
            report.tap = Some(crate::report::TapReport {
                records: r.end.records,
                dropped: r
                    .end
                    .dropped
                    .iter()
                    .map(|&(k, n)| (staged.names[k].clone(), n))
                    .collect(),
                written: r.written.iter().map(|w| w.line.clone()).collect(),
            });
            report
                .warnings
                .extend(r.written.into_iter().filter_map(|w| w.warning));
            for (k, dropped) in r.end.dropped {
                if dropped > 0 {
                    report.warnings.push(RunWarning {
                        id: WarningId::TapDropped,
                        message: format!(
                            "{}: {dropped} record(s) of its frames and cells were dropped: its ring was full (the recorder, off the real-time CPUs, fell behind)",
                            staged.names[k]
                        ),
                        advice: Some("record fewer cells or every Nth frame (the schedule's [record] table), or leave a CPU free for the recorder".into()),
                    });
                }
            }
            for (i, e) in r.errors {
                report.warnings.push(RunWarning {
                    id: WarningId::TapSink,
                    message: format!("output {} of the recording stopped: {e}", i + 1),
                    advice: Some("check the file's disk and path; the run itself went on".into()),
                });
            }
        }
        Err(_) => report.warnings.push(RunWarning {
            id: WarningId::TapSink,
            message: "the recorder thread panicked: the recording is incomplete".into(),
            advice: None,
        }),
    }
}

/// The built-in subsystems `ictus run` hosts in-process: `increment` (the stress
/// test's ring: copies cell `from` to cell `to`, adding one to every element) and
/// `idle` (does nothing; a placeholder).
pub fn builtin(spec: &SubsystemSpec) -> Result<Maker, String> {
    match spec.builtin.as_deref() {
        Some("increment") => Ok(Maker::of::<crate::stress::Increment>()),
        Some("idle") => Ok(Maker::of::<Idle>()),
        Some(other) => Err(format!(
            "unknown builtin '{other}' (ictus run hosts increment and idle; link ictus-exec to host your own)"
        )),
        None => Err(
            "in-process subsystems under `ictus run` name a builtin (increment, idle); \
             run your own from a program that calls ictus_exec::run::run, or as a process"
                .to_string(),
        ),
    }
}

/// A subsystem that does nothing.
#[derive(Debug, Default)]
pub struct Idle;

impl Subsystem for Idle {
    type Error = RegistryError;
    fn init(_reg: &mut Registry) -> Result<Idle, RegistryError> {
        Ok(Idle)
    }
    fn run(&mut self, _frame: &mut Frame) -> Result<Flow, RegistryError> {
        Ok(Flow::Continue)
    }
}

/// Runs `schedule` (see the module documentation). `factory` says how to make the
/// in-process subsystems ([`builtin`] is what `ictus run` uses;
/// [`crate::program::Executive`] makes one from the subsystems given by name).
pub fn run(
    schedule: &Schedule,
    factory: &mut Factory<'_>,
    options: RunOptions,
) -> Result<RunReport, RunError> {
    run_made(schedule, factory, options).map(|(report, _)| report)
}

/// [`run`], with what the run made.
pub(crate) fn run_made(
    schedule: &Schedule,
    factory: &mut Factory<'_>,
    mut options: RunOptions,
) -> Result<(RunReport, Made), RunError> {
    // 1. Everything that can be refused, before anything starts.
    let table = schedule.cell_table()?;
    let mut link = options.link.take();
    let here = link.as_ref().map_or(0, |l| l.host());
    let local = Local::resolve(schedule, factory, &options, link.is_some(), here)?;
    let mut staged = Staged::make(schedule, &table, &options, local, link.as_deref(), here)?;
    // Across hosts, the link connects this host's hub proxies to their homes
    // before any subsystem's `init` can use them.
    if let Some(l) = link.as_mut() {
        l.hubs(&staged.hubs).map_err(RunError::HubLink)?;
    }
    let in_process = std::mem::take(&mut staged.in_process);

    // 2. Groups; the CPU latency QoS and the sampler that explains misses, from the
    // coordinator's thread (already off the real-time CPUs).
    let groups = prepare::groups(schedule);
    let slots: Vec<usize> = in_process.iter().map(|(k, _)| *k).collect();
    let (watch, reporters) = Watch::begin(schedule, &options, &slots, here);
    staged.recent_misses = watch.recent();

    // The tap's recorder (when the run has sinks): its thread starts once the
    // epoch is set, and stops once every loop has ended and the report is
    // gathered, so it takes in every frame and every event.
    let sinks = std::mem::take(&mut options.sinks);
    let tap_stop = AtomicBool::new(false);
    let (tap_tx, tap_rx) = std::sync::mpsc::channel::<EventRecord>();

    // 3. Start.
    staged.control.beat(monotonic_now());
    let mut children: Vec<ChildProc> = Vec::new();
    let abort_flag = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| -> Result<(RunReport, Made), RunError> {
        let handles = start::spawn(scope, &staged, &groups, &abort_flag, in_process, reporters)?;
        let mut startup = Startup::new(
            &staged,
            &mut options,
            &mut link,
            &mut children,
            &abort_flag,
            handles,
        );
        startup.launch()?;
        // 4. Wait until every subsystem is ready.
        let start = startup.wait_ready()?;
        // 5. The epoch.
        let (clock, stop_frame) = startup.epoch(start)?;
        let recorder = match &staged.tap {
            Some(setup) if !sinks.is_empty() => {
                let run = tap_run(&staged, &table, setup, clock.epoch);
                let stop = &tap_stop;
                let spawned = std::thread::Builder::new()
                    .name("ictus-recorder".into())
                    .spawn_scoped(scope, move || {
                        recorder::record(&run, &setup.rings, sinks, &tap_rx, stop)
                    });
                spawned.ok()
            }
            _ => None,
        };
        let mut coordinator = Coordinator::new(startup, clock, stop_frame);
        coordinator.tap = recorder
            .is_some()
            .then(|| TapEvents::new(tap_tx, clock.epoch));
        // 6. Coordinate.
        coordinator.coordinate();
        // 7. Gather.
        let gathered = coordinator.gather();
        // The recorder's last drain, then what it found into the report.
        tap_stop.store(true, std::sync::atomic::Ordering::Release);
        let recorded = recorder.map(|h| h.join());
        gathered.map(|(mut report, made)| {
            if let Some(r) = recorded {
                tap_findings(&mut report, &staged, r);
            }
            (report, made)
        })
    });
    kill_all(&mut children);
    drop(staged.server.take());
    if let Some(a) = &staged.affinity_before {
        let _ = sched::set_affinity(a);
    }
    // 8. What was in force, and every miss explained (the loops have all ended).
    outcome.map(|(mut report, made)| {
        watch.end(&mut report, schedule, here);
        (report, made)
    })
}
