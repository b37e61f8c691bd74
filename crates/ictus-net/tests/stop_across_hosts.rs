//! A subsystem on a node stops the whole run with `Flow::StopRun`, and its errors
//! reach the main coordinator's report: two hosts on loopback, each a run with its
//! own link, in threads of this test, and no duration. Structure only.

use std::time::Duration;

use ictus_exec::program::Executive;
use ictus_exec::run::{RunOptions, RunReport};
use ictus_exec::schedule::Schedule;
use ictus_exec::subsystem::{Flow, Frame, OnError, Registry, RegistryError, Subsystem};
use ictus_net::link::ZenohLink;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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
    let text = format!(
        "name = \"{name}\"\ntick = \"2ms\"\nmajor_frame = 2\ninitial_state = \"run\"\n\
         [[host]]\nname = \"h1\"\naddress = \"127.0.0.1:{}\"\n\
         [[host]]\nname = \"h2\"\naddress = \"127.0.0.1:{}\"\n\
         [[subsystem]]\nname = \"steady\"\nhost = \"h1\"\n\
         [[subsystem]]\nname = \"stopper\"\nhost = \"h2\"\non_error = \"continue\"\n",
        free_port(),
        free_port()
    );
    let schedule = Schedule::parse(
        &text,
        dir.path().join("s.toml"),
        &ictus_os::facts::online_cpus(),
    )
    .unwrap();
    assert_eq!(schedule.subsystems[1].on_error, OnError::Continue);
    let hosts: Vec<_> = (0..2)
        .map(|host| {
            let mut schedule = schedule.clone();
            let run_dir = dir.path().join(format!("run{host}"));
            std::thread::spawn(move || -> RunReport {
                let run_name = schedule.name.clone();
                let link = ZenohLink::open(&schedule, host, &run_name).unwrap();
                if host != 0 {
                    schedule.name = format!("{run_name}.h2");
                }
                let options = RunOptions {
                    duration: None,
                    run_dir,
                    control_socket: false,
                    ready_timeout: Duration::from_secs(30),
                    link: Some(Box::new(link)),
                    ..RunOptions::default()
                };
                let executive = Executive::new(schedule).options(options);
                let executive = if host == 0 {
                    executive.subsystem::<Steady>("steady")
                } else {
                    executive.subsystem::<Stopper>("stopper")
                };
                executive.run().unwrap().report
            })
        })
        .collect();
    let reports: Vec<RunReport> = hosts.into_iter().map(|h| h.join().unwrap()).collect();
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
