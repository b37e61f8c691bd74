//! The subsystem API as a program uses it: a schedule built in code, subsystems given
//! by type, their statuses and their own errors, and the results read back after the
//! run. Structure only, never timings.

mod common;

use std::time::Duration;

use common::{subsystem, warning};
use ictus_core::{CpuSet, Nanos};
use ictus_exec::builder::{ElementDecl, SubsystemDecl};
use ictus_exec::program::{Executive, Outcome};
use ictus_exec::report::WarningId;
use ictus_exec::run::RunError;
use ictus_exec::schedule::{Schedule, ScheduleError};
use ictus_exec::subsystem::{
    Flow, Frame, Input, OnError, Output, Registry, RegistryError, Subsystem,
};

fn online() -> CpuSet {
    ictus_os::facts::online_cpus()
}

/// What a counter can meet: a registration, or a count it refuses.
#[derive(Debug, thiserror::Error)]
enum CountError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("count {0} is past the limit")]
    PastLimit(i64),
    #[error("the limit must be positive, not {0}")]
    BadLimit(i64),
}

/// Its settings: the count where it acts, and how (`fail`, `finish`, `stop`).
#[derive(serde::Deserialize, serde::Serialize)]
struct Settings {
    limit: i64,
    at_limit: String,
}

/// Counts frames through cell `count.n`; at its limit it fails, finishes or stops
/// the run, as its settings say.
struct Counter {
    n: Input<i64>,
    next: Output<i64>,
    settings: Settings,
    last: i64,
}

impl Subsystem for Counter {
    type Error = CountError;
    fn init(reg: &mut Registry) -> Result<Self, CountError> {
        let settings: Settings = reg.settings()?;
        if settings.limit <= 0 {
            return Err(CountError::BadLimit(settings.limit));
        }
        Ok(Counter {
            n: reg.input("count.n")?,
            next: reg.output("count.n")?,
            settings,
            last: 0,
        })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, CountError> {
        let n = frame.get(&self.n) + 1;
        frame.set(&self.next, n);
        self.last = n;
        if n < self.settings.limit {
            return Ok(Flow::Continue);
        }
        match self.settings.at_limit.as_str() {
            "fail" => Err(CountError::PastLimit(n)),
            "finish" => Ok(Flow::Finished),
            "stop" => Ok(Flow::StopRun),
            _ => Ok(Flow::Continue),
        }
    }
}

/// Another subsystem that only counts its frames in `other.n`.
struct Beat {
    n: Input<i64>,
    next: Output<i64>,
}

impl Subsystem for Beat {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Beat {
            n: reg.input("other.n")?,
            next: reg.output("other.n")?,
        })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        let n = frame.get(&self.n) + 1;
        frame.set(&self.next, n);
        Ok(Flow::Continue)
    }
}

fn schedule(name: &str, limit: i64, at_limit: &str, on_error: OnError) -> Schedule {
    Schedule::builder(&format!("{name}-{}", std::process::id()))
        .tick(Nanos::from_millis(1))
        .major_frame(2)
        .initial_state("run")
        .cell("count", [ElementDecl::of::<i64>("n")])
        .cell("other", [ElementDecl::of::<i64>("n")])
        .subsystem(
            SubsystemDecl::new("counter")
                .config(&Settings {
                    limit,
                    at_limit: at_limit.into(),
                })
                .on_error(on_error),
        )
        .subsystem(SubsystemDecl::new("beat"))
        .build(&online())
        .unwrap()
}

fn executive(s: Schedule, duration: Option<Duration>) -> Executive {
    let mut e = Executive::new(s)
        .subsystem::<Counter>("counter")
        .subsystem::<Beat>("beat");
    if let Some(d) = duration {
        e = e.duration(d);
    }
    e
}

/// Runs the counter and the beat of [`schedule`] for `ms` milliseconds, or with
/// `None` until a subsystem ends the run.
fn run_counter(
    name: &str,
    limit: i64,
    at_limit: &str,
    on_error: OnError,
    ms: Option<u64>,
) -> Outcome {
    let s = schedule(name, limit, at_limit, on_error);
    executive(s, ms.map(Duration::from_millis)).run().unwrap()
}

#[test]
fn a_schedule_built_in_code_is_the_one_its_toml_makes() {
    let built = Schedule::builder("same")
        .tick(Nanos::from_micros(500))
        .major_frame(4)
        .modes(&["setup"])
        .initial_state("setup")
        .cell(
            "a",
            [
                ElementDecl::of::<f32>("x"),
                ElementDecl::of::<[f64; 3]>("v"),
            ],
        )
        .subsystem(SubsystemDecl::new("s").period(2).start(1).cpu(0).fifo(70))
        .subsystem(
            SubsystemDecl::new("t")
                .period(4)
                .on_error(OnError::Continue)
                .config(&Settings {
                    limit: 3,
                    at_limit: "stop".into(),
                }),
        );
    let schedule = built.build(&online()).unwrap();
    let text = r#"
name = "same"
tick = "500us"
major_frame = 4
modes = ["setup"]
initial_state = "setup"
[[cell]]
name = "a"
elements = [{ name = "x", type = "f32" }, { name = "v", type = "f64", len = 3 }]
[[subsystem]]
name = "s"
period = 2
start = 1
cpu = 0
class = "rt1"
priority = 70
policy = "fifo"
[[subsystem]]
name = "t"
period = 4
on_error = "continue"
config = { limit = 3, at_limit = "stop" }
"#;
    let parsed = Schedule::parse(text, "same.toml", &online()).unwrap();
    assert_eq!(schedule.name, parsed.name);
    assert_eq!(schedule.tick, parsed.tick);
    assert_eq!(schedule.major_frame, parsed.major_frame);
    assert_eq!(schedule.modes, parsed.modes);
    assert_eq!(schedule.initial_state, parsed.initial_state);
    assert_eq!(schedule.cell_table().unwrap(), parsed.cell_table().unwrap());
    for (a, b) in schedule.subsystems.iter().zip(&parsed.subsystems) {
        assert_eq!(
            (
                &a.name, a.start, a.period, a.cpu, &a.class, &a.config, a.on_error
            ),
            (
                &b.name, b.start, b.period, b.cpu, &b.class, &b.config, b.on_error
            )
        );
    }
    // Its TOML is there to read, as a file's would be.
    assert_eq!(schedule.text, built.to_toml());
}

#[test]
fn a_schedule_built_in_code_is_checked_by_the_rules_of_a_file() {
    let err = Schedule::builder("bad")
        .major_frame(4)
        .subsystem(SubsystemDecl::new("s").period(3))
        .build(&online())
        .unwrap_err();
    let ScheduleError::Invalid { path, rule, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(path.to_string_lossy(), "<code: bad>");
    assert!(
        err.to_string()
            .contains("period 3 does not divide the major frame of 4 minor frames"),
        "{err}"
    );
    assert!(matches!(
        rule,
        ictus_exec::schedule::Rule::PeriodDoesNotDivide { .. }
    ));
    let err = Schedule::builder("bad")
        .subsystem(SubsystemDecl::new("s").config(&3))
        .build(&online())
        .unwrap_err();
    assert!(
        err.to_string().contains("its config is not a table"),
        "{err}"
    );
}

#[test]
fn the_cells_and_the_subsystems_are_read_back_after_the_run() {
    let mut outcome = run_counter("prog-back", i64::MAX, "none", OnError::Stop, Some(40));
    assert!(outcome.is_complete(), "{:#?}", outcome.report);
    let runs = |name: &str| subsystem(&outcome.report, name).frames_run;
    let (counter_runs, beat_runs) = (runs("counter"), runs("beat"));
    assert!(counter_runs > 0);
    // Each frame published one more: the cells end at the frames run.
    assert_eq!(outcome.cell::<i64>("count.n").unwrap(), counter_runs as i64);
    assert_eq!(outcome.cell::<i64>("other.n").unwrap(), beat_runs as i64);
    // A wrong type or name is an error, not a guess.
    assert!(outcome.cell::<f64>("count.n").is_err());
    assert!(outcome.cell::<i64>("count.m").is_err());
    // The subsystem itself, as it ended.
    assert!(
        outcome.take::<Beat>("counter").is_none(),
        "counter is no Beat"
    );
    let counter: Counter = outcome.take("counter").unwrap();
    assert_eq!(counter.last, counter_runs as i64);
    assert!(outcome.take::<Counter>("counter").is_none(), "taken once");
}

#[test]
fn an_init_error_is_the_subsystems_own_and_nothing_runs() {
    let s = schedule("prog-init", -1, "none", OnError::Stop);
    let err = executive(s, Some(Duration::from_millis(40)))
        .run()
        .unwrap_err();
    assert!(
        matches!(err, RunError::Init { ref name, .. } if name == "counter"),
        "{err}"
    );
    let own = err
        .subsystem_error()
        .and_then(|e| e.downcast_ref::<CountError>());
    assert!(matches!(own, Some(CountError::BadLimit(-1))), "{err:?}");
    assert!(
        err.to_string()
            .contains("subsystem 'counter' did not start: the limit must be positive, not -1"),
        "{err}"
    );
    // A missing setting is named, and comes through the same way.
    let s = Schedule::builder(&format!("prog-noset-{}", std::process::id()))
        .cell("count", [ElementDecl::of::<i64>("n")])
        .subsystem(SubsystemDecl::new("counter"))
        .build(&online())
        .unwrap();
    let err = Executive::new(s)
        .subsystem::<Counter>("counter")
        .duration(Duration::from_millis(20))
        .run()
        .unwrap_err();
    let own = err
        .subsystem_error()
        .and_then(|e| e.downcast_ref::<CountError>());
    assert!(matches!(own, Some(CountError::Registry(_))), "{err:?}");
    assert!(err.to_string().contains("missing field `limit`"), "{err}");
}

#[test]
fn a_run_error_with_on_error_stop_stops_that_subsystem_only_and_is_kept_whole() {
    let outcome = run_counter("prog-stop", 10, "fail", OnError::Stop, Some(60));
    let r = &outcome.report;
    let counter = subsystem(r, "counter");
    let beat = subsystem(r, "beat");
    assert_eq!((counter.errors, counter.frames_run), (1, 10), "{counter:?}");
    assert!(
        counter.lost > 0,
        "its remaining frames are lost: {counter:?}"
    );
    assert_eq!(counter.outcome.as_ref().unwrap().end, "failed");
    assert_eq!((beat.errors, beat.lost), (0, 0), "the other kept its beat");
    assert!(!r.complete);
    let w = warning(r, WarningId::SubsystemError);
    assert!(
        w.message.contains("count 10 is past the limit"),
        "{}",
        w.message
    );
    let fault = outcome.error("counter").expect("the first error, whole");
    assert!(matches!(
        fault.error.downcast_ref::<CountError>(),
        Some(CountError::PastLimit(10))
    ));
    assert_eq!(
        Some(fault.frame),
        counter.outcome.as_ref().unwrap().last_frame
    );
    assert_eq!(outcome.cell::<i64>("count.n").unwrap(), 10);
}

#[test]
fn a_run_error_with_on_error_continue_is_counted_and_the_subsystem_goes_on() {
    let outcome = run_counter("prog-cont", 5, "fail", OnError::Continue, Some(40));
    let r = &outcome.report;
    let counter = subsystem(r, "counter");
    assert_eq!(counter.lost, 0, "{counter:?}");
    // Every frame from its fifth on fails (a release it overran is not one).
    assert_eq!(counter.errors, counter.frames_run - 4, "{counter:?}");
    assert!(!r.complete, "errors make the run incomplete");
    let first = outcome.error("counter").expect("the first error is kept");
    assert!(
        matches!(
            first.error.downcast_ref::<CountError>(),
            Some(CountError::PastLimit(5))
        ),
        "{first:?}"
    );
    assert!(first.frame >= 4, "{first:?}");
}

#[test]
fn a_subsystem_stops_the_run_with_its_status_or_its_error() {
    // No duration: the run ends because the counter asks, at a major frame.
    let outcome = run_counter("prog-ask", 10, "stop", OnError::Stop, None);
    let r = &outcome.report;
    assert!(r.complete, "{r:#?}");
    assert!(r.frames >= 10 && r.frames.is_multiple_of(2), "{}", r.frames);
    assert!(
        r.events
            .iter()
            .any(|e| e.contains("counter asked the run to stop")),
        "{:?}",
        r.events
    );
    // With on_error = "stop-run", an error ends the run the same way, incomplete.
    let outcome = run_counter("prog-errstop", 10, "fail", OnError::StopRun, None);
    let r = &outcome.report;
    assert!(!r.complete);
    assert!(r.subsystems.iter().all(|s| s.lost == 0), "{r:#?}");
    assert!(outcome.error("counter").is_some());
}

#[test]
fn a_finished_subsystem_is_not_due_afterwards_and_nothing_is_lost() {
    let outcome = run_counter("prog-fin", 10, "finish", OnError::Stop, Some(60));
    let r = &outcome.report;
    let counter = subsystem(r, "counter");
    assert_eq!(counter.outcome.as_ref().unwrap().end, "finished");
    // Due until the frame it finished in (a release it overran is due too).
    assert_eq!((counter.frames_run, counter.lost), (10, 0), "{counter:?}");
    assert_eq!(
        counter.releases_due,
        counter.frames_run + counter.overruns,
        "{counter:?}"
    );
    assert!(counter.finished_early > 0);
    assert!(r.complete, "{r:#?}");
    assert_eq!(outcome.cell::<i64>("count.n").unwrap(), 10);
}

#[test]
fn names_given_that_are_not_in_the_schedule_or_missing_ones_refuse_the_run() {
    let s = schedule("prog-names", 10, "none", OnError::Stop);
    let err = executive(s.clone(), None)
        .subsystem::<Beat>("nobody")
        .run()
        .unwrap_err();
    assert!(err.is_bad_input());
    assert!(
        err.to_string().contains(
            "no in-process subsystem 'nobody' (the schedule's in-process subsystems: counter, beat)"
        ),
        "{err}"
    );
    let err = Executive::new(s)
        .subsystem::<Counter>("counter")
        .run()
        .unwrap_err();
    assert!(err.is_bad_input());
    assert!(err.to_string().contains("subsystem 'beat'"), "{err}");
    assert!(err.to_string().contains("no implementation given"), "{err}");
}

/// Sleeps 4 ticks in the first frame it runs from frame 10 on: an overrun on purpose.
#[derive(Default)]
struct Sleeper {
    slept_in: Option<u64>,
}

impl Subsystem for Sleeper {
    type Error = RegistryError;
    fn init(_reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Sleeper::default())
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        if self.slept_in.is_none() && frame.number() >= 10 {
            self.slept_in = Some(frame.number());
            std::thread::sleep(Duration::from_millis(4));
        }
        Ok(Flow::Continue)
    }
}

#[test]
fn a_subsystem_that_overruns_on_purpose_has_its_overrun_explained_by_its_execution_time() {
    use ictus_explain::{Cause, MissKind};
    let s = Schedule::builder(&format!("prog-overrun-{}", std::process::id()))
        .tick(Nanos::from_millis(1))
        .major_frame(1)
        .initial_state("run")
        .subsystem(SubsystemDecl::new("sleeper"))
        .build(&online())
        .unwrap();
    let mut outcome = Executive::new(s)
        .subsystem::<Sleeper>("sleeper")
        .duration(Duration::from_millis(300))
        .run()
        .unwrap();
    let slept_in = outcome
        .take::<Sleeper>("sleeper")
        .unwrap()
        .slept_in
        .unwrap();
    let r = &outcome.report;
    assert!(r.pm_qos.is_some(), "the QoS in force is reported");
    let e = r
        .explanation
        .as_ref()
        .expect("misses are explained by default");
    let overrun = e
        .events
        .iter()
        .find(|ev| ev.kind == MissKind::Overrun && ev.seq == slept_in)
        .unwrap_or_else(|| panic!("no overrun at frame {slept_in}: {e:#?}"));
    assert_eq!(overrun.thread, "sleeper");
    assert!(overrun.missed >= 3, "{overrun:?}");
    let ran = overrun.causes.iter().find_map(|c| match c.cause {
        Cause::Overrun { exec_ns, budget_ns } => Some((exec_ns, budget_ns)),
        _ => None,
    });
    let (exec_ns, budget_ns) = ran.unwrap_or_else(|| panic!("{overrun:?}"));
    assert_eq!(budget_ns, 1_000_000);
    assert!(exec_ns >= 4_000_000, "it slept 4 ms: {exec_ns} ns");
}
