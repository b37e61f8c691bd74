//! Acting on misses: a subsystem that overruns on purpose (it sleeps past its
//! period), under each `on_overrun` action, and one whose frame sleeps past its
//! watchdog. Structure only: a sleep of 3.5 periods skips at least 3 releases
//! whatever the machine, and the assertions rest on that bound, never on timings.

mod common;

use std::time::Duration;

use common::subsystem;
use ictus_core::{CpuSet, Nanos};
use ictus_exec::builder::{ElementDecl, SubsystemDecl};
use ictus_exec::live::LiveStatus;
use ictus_exec::program::{Executive, Outcome};
use ictus_exec::report::{RunReport, WarningId};
use ictus_exec::schedule::{OverrunAction, Schedule};
use ictus_exec::subsystem::{Flow, Frame, Input, Output, Registry, RegistryError, Subsystem};

fn online() -> CpuSet {
    ictus_os::facts::online_cpus()
}

/// How the slow subsystem sleeps: `sleep_us` in every frame from `from` on, or
/// only in the first such frame when `once`.
#[derive(serde::Deserialize, serde::Serialize)]
struct Slow {
    sleep_us: u64,
    from: u64,
    once: bool,
}

/// Counts its frames in `count.n` and sleeps as its settings say; notes the frame
/// it first slept in.
struct Sleeper {
    n: Input<i64>,
    next: Output<i64>,
    slow: Slow,
    slept_in: Option<u64>,
}

impl Subsystem for Sleeper {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Sleeper {
            n: reg.input("count.n")?,
            next: reg.output("count.n")?,
            slow: reg.settings()?,
            slept_in: None,
        })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        let n = frame.get(&self.n) + 1;
        frame.set(&self.next, n);
        let due = frame.number() >= self.slow.from && !(self.slow.once && self.slept_in.is_some());
        if due {
            self.slept_in.get_or_insert(frame.number());
            std::thread::sleep(Duration::from_micros(self.slow.sleep_us));
        }
        Ok(Flow::Continue)
    }
}

/// A 1 ms schedule in state run, with mode `safe`, and the subsystem `slow` as
/// `decl` makes it.
fn schedule(
    name: &str,
    slow: &Slow,
    decl: impl FnOnce(SubsystemDecl) -> SubsystemDecl,
) -> Schedule {
    Schedule::builder(&format!("{name}-{}", std::process::id()))
        .tick(Nanos::from_millis(1))
        .major_frame(2)
        .modes(&["safe"])
        .initial_state("run")
        .cell("count", [ElementDecl::of::<i64>("n")])
        .subsystem(decl(SubsystemDecl::new("slow").config(slow)))
        .build(&online())
        .unwrap()
}

fn run(s: Schedule, ms: u64) -> Outcome {
    Executive::new(s)
        .subsystem::<Sleeper>("slow")
        .duration(Duration::from_millis(ms))
        .run()
        .unwrap()
}

/// Sleeps 3.5 periods in every frame from frame 5: each such frame skips at least
/// 3 releases in a row.
const OVERRUNS: Slow = Slow {
    sleep_us: 3_500,
    from: 5,
    once: false,
};

fn warnings(r: &RunReport, id: WarningId) -> Vec<&str> {
    r.warnings
        .iter()
        .filter(|w| w.id == id)
        .map(|w| w.message.as_str())
        .collect()
}

#[test]
fn count_changes_nothing_but_the_counts() {
    let s = schedule("ov-count", &OVERRUNS, |d| {
        d.on_overrun(&OverrunAction::Count, 1)
    });
    let r = run(s, 200).report;
    assert!(subsystem(&r, "slow").longest_overrun_streak >= 3, "{r:#?}");
    assert!(warnings(&r, WarningId::Overrun).is_empty(), "{r:#?}");
    assert!(r.transitions.iter().all(|(_, s)| s != "safe"), "{r:#?}");
    assert!(r.complete, "{r:#?}");
}

#[test]
fn warn_warns_once_and_counts_the_rest() {
    let s = schedule("ov-warn", &OVERRUNS, |d| {
        d.on_overrun(&OverrunAction::Warn, 1)
    });
    let r = run(s, 200).report;
    let w = warnings(&r, WarningId::Overrun);
    assert_eq!(w.len(), 1, "{r:#?}");
    assert!(w[0].starts_with("slow: "), "{}", w[0]);
    assert!(w[0].contains("on_overrun = warn"), "{}", w[0]);
    assert!(
        r.events.iter().any(|e| e.contains("on_overrun = warn")),
        "{r:#?}"
    );
    // Several frames overran, one warning: the rest were counted.
    assert!(subsystem(&r, "slow").overruns >= 6, "{r:#?}");
    assert!(r.transitions.iter().all(|(_, s)| s != "safe"), "{r:#?}");
    assert!(r.complete, "{r:#?}");
}

#[test]
fn the_status_carries_the_warning_as_an_event() {
    let s = schedule("ov-status", &OVERRUNS, |d| {
        d.on_overrun(&OverrunAction::Warn, 1)
    });
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let keep = seen.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut options = common::options_without_socket(dir.path(), Duration::from_millis(400));
    options.status_every = Duration::from_millis(20);
    options.on_status = Some(Box::new(move |st: &LiveStatus| {
        let mut k = keep.lock().unwrap();
        k.extend(st.events.iter().map(|e| e.text.clone()));
    }));
    let r = Executive::new(s)
        .subsystem::<Sleeper>("slow")
        .options(options)
        .run()
        .unwrap()
        .report;
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter()
            .any(|e| e.contains("slow: ") && e.contains("on_overrun = warn")),
        "{seen:?} {r:#?}"
    );
}

#[test]
fn mode_moves_the_run_to_its_state_after_n_consecutive_overruns() {
    let mode = OverrunAction::Mode("safe".into());
    let s = schedule("ov-mode", &OVERRUNS, |d| d.on_overrun(&mode, 3));
    let r = run(s, 400).report;
    assert!(r.transitions.iter().any(|(_, s)| s == "safe"), "{r:#?}");
    assert!(
        r.state_frames.get("safe").copied().unwrap_or(0) > 0,
        "{r:#?}"
    );
    let w = warnings(&r, WarningId::Overrun);
    assert_eq!(w.len(), 1, "{r:#?}");
    assert!(w[0].contains("the run moves to state safe"), "{}", w[0]);
    assert!(r.complete, "{r:#?}");
}

#[test]
fn mode_waits_for_its_n_consecutive_overruns() {
    // A 3.5-period sleep never skips 1000 releases in a row.
    let mode = OverrunAction::Mode("safe".into());
    let s = schedule("ov-mode-not", &OVERRUNS, |d| d.on_overrun(&mode, 1_000));
    let r = run(s, 200).report;
    assert!(subsystem(&r, "slow").overruns >= 3, "{r:#?}");
    assert!(r.transitions.iter().all(|(_, s)| s != "safe"), "{r:#?}");
    assert!(warnings(&r, WarningId::Overrun).is_empty(), "{r:#?}");
}

#[test]
fn stop_run_ends_the_run_early_and_names_the_subsystem() {
    let s = schedule("ov-stop", &OVERRUNS, |d| {
        d.on_overrun(&OverrunAction::StopRun, 3)
    });
    // Ten seconds asked for; the overruns from frame 5 end it long before.
    let r = run(s, 10_000).report;
    assert!(!r.complete, "{r:#?}");
    assert!(r.frames < 10_000, "{r:#?}");
    let w = warnings(&r, WarningId::Overrun);
    assert_eq!(w.len(), 1, "{r:#?}");
    assert!(w[0].starts_with("slow: "), "{}", w[0]);
    assert!(w[0].contains("the run stops"), "{}", w[0]);
}

#[test]
fn the_watchdog_names_a_subsystem_that_sleeps_past_its_limit() {
    // One frame sleeps 300 ms against a 50 ms watchdog.
    let slow = Slow {
        sleep_us: 300_000,
        from: 10,
        once: true,
    };
    let s = schedule("ov-watchdog", &slow, |d| d.watchdog(Nanos::from_millis(50)));
    let mut out = run(s, 600);
    let slept_in = out.take::<Sleeper>("slow").unwrap().slept_in.unwrap();
    let r = &out.report;
    let w = warnings(r, WarningId::Watchdog);
    assert_eq!(w.len(), 1, "{r:#?}");
    assert!(
        w[0].starts_with(&format!("slow: frame {slept_in} has run ")),
        "{} (slept in frame {slept_in})",
        w[0]
    );
    assert!(w[0].contains("watchdog 50"), "{}", w[0]);
    assert!(r.events.iter().any(|e| e.contains(w[0])), "{r:#?}");
    // Its action is count: the run goes on to its end.
    assert!(warnings(r, WarningId::Overrun).is_empty(), "{r:#?}");
    assert!(r.complete, "{r:#?}");
}

#[test]
fn the_watchdog_applies_the_action() {
    let slow = Slow {
        sleep_us: 300_000,
        from: 10,
        once: true,
    };
    let mode = OverrunAction::Mode("safe".into());
    // After 1000 overruns in a row: only the watchdog can move it.
    let s = schedule("ov-watchdog-mode", &slow, |d| {
        d.watchdog(Nanos::from_millis(50)).on_overrun(&mode, 1_000)
    });
    let r = run(s, 800).report;
    assert_eq!(warnings(&r, WarningId::Watchdog).len(), 1, "{r:#?}");
    assert!(r.transitions.iter().any(|(_, s)| s == "safe"), "{r:#?}");
}
