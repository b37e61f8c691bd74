//! A subsystem on a node stops the whole run with `Flow::StopRun`, and its errors
//! reach the main coordinator's report: two hosts on loopback, each a run with its
//! own link, in threads of this test, and no duration. Structure only.

mod common;

use ictus_exec::subsystem::{Flow, Frame, Maker, OnError, Registry, RegistryError, Subsystem};

/// Runs until its own frame count reaches 30, fails every frame from its 10th on
/// (`on_error = "continue"`), and asks the run to stop at its 30th.
struct Stopper {
    frames: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("frame {0} fails on purpose")]
struct OnPurpose(u64);

impl From<RegistryError> for OnPurpose {
    fn from(_: RegistryError) -> OnPurpose {
        OnPurpose(0)
    }
}

impl Subsystem for Stopper {
    type Error = OnPurpose;
    fn init(_: &mut Registry) -> Result<Self, OnPurpose> {
        Ok(Stopper { frames: 0 })
    }
    fn run(&mut self, frame: &mut Frame) -> Result<Flow, OnPurpose> {
        self.frames += 1;
        if self.frames >= 30 {
            Ok(Flow::StopRun)
        } else if self.frames >= 10 {
            Err(OnPurpose(frame.number()))
        } else {
            Ok(Flow::Continue)
        }
    }
}

/// Keeps its beat.
struct Steady;

impl Subsystem for Steady {
    type Error = RegistryError;
    fn init(_: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Steady)
    }
    fn run(&mut self, _: &mut Frame) -> Result<Flow, RegistryError> {
        Ok(Flow::Continue)
    }
}

#[test]
fn a_node_s_subsystem_stops_the_run_and_its_errors_reach_the_main_report() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("net-stop-{}", std::process::id());
    let schedule = common::two_hosts(
        dir.path(),
        &name,
        "tick = \"2ms\"\nmajor_frame = 2\ninitial_state = \"run\"",
        "[[subsystem]]\nname = \"steady\"\nhost = \"h1\"\n\
         [[subsystem]]\nname = \"stopper\"\nhost = \"h2\"\non_error = \"continue\"\n",
    );
    assert_eq!(schedule.subsystems[1].on_error, OnError::Continue);
    // No duration: only the node's subsystem can end the run.
    let reports = common::run_both(&schedule, dir.path(), None, |_| {
        vec![
            ("steady", Maker::of::<Steady>()),
            ("stopper", Maker::of::<Stopper>()),
        ]
    });
    let main = &reports[0];
    // The run ended without a duration: the node's subsystem stopped it.
    assert!(
        main.events
            .iter()
            .any(|e| e.contains("stopper asked the run to stop")),
        "{:?}",
        main.events
    );
    assert!(main.frames.is_multiple_of(2));
    let stopper = main
        .subsystems
        .iter()
        .find(|s| s.name == "stopper")
        .unwrap();
    assert_eq!(stopper.lost, 0, "{stopper:?}");
    assert_eq!(
        stopper.errors,
        stopper.frames_run.min(29) - 9,
        "frames 10 to 29 of its own failed: {stopper:?}"
    );
    assert!(
        main.warnings
            .iter()
            .any(|w| w.message.contains("fails on purpose")),
        "{:?}",
        main.warnings
    );
    assert!(!main.complete, "errors make the run incomplete");
}
