//! Seed 003's setup channel across hosts: a subsystem's `init` on one host waits for
//! a value another host's `init` publishes, through the main coordinator's store (its
//! Zenoh queryable), whichever host publishes. Two hosts on loopback, each a `run`
//! with its own link, in threads of this test.

#[path = "../../ictus-exec/tests/common/setup.rs"]
mod setup;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ictus_exec::run::{self, RunOptions};
use ictus_exec::schedule::{Schedule, SubsystemSpec};
use ictus_exec::subsystem::{Flow, Frame, Maker, Registry, RegistryError, Subsystem};
use ictus_net::link::ZenohLink;
use ictus_os::testing::free_port;
use setup::{Producer, ROUTE};

/// Hands what it got from the setup channel to the test.
struct Consumer;
impl Consumer {
    fn init_into(reg: &mut Registry, got: &Mutex<Vec<u8>>) -> Result<Consumer, RegistryError> {
        let v = reg.setup().get("route", Duration::from_secs(20)).unwrap();
        *got.lock().unwrap() = v;
        Ok(Consumer)
    }
}
impl Subsystem for Consumer {
    type Error = RegistryError;
    fn init(_: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Consumer)
    }
    fn run(&mut self, _: &mut Frame) -> Result<Flow, RegistryError> {
        Ok(Flow::Continue)
    }
}

/// Runs a two-host schedule where `producer_host` publishes and the other host's
/// subsystem waits for it; returns what the consumer got.
fn across(producer_host: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("net-setup-{producer_host}-{}", std::process::id());
    let consumer_host = if producer_host == "h1" { "h2" } else { "h1" };
    let text = format!(
        "name = \"{name}\"\ntick = \"2ms\"\nmajor_frame = 1\n\
         [[host]]\nname = \"h1\"\naddress = \"127.0.0.1:{}\"\n\
         [[host]]\nname = \"h2\"\naddress = \"127.0.0.1:{}\"\n\
         [[subsystem]]\nname = \"p\"\nhost = \"{producer_host}\"\n\
         [[subsystem]]\nname = \"c\"\nhost = \"{consumer_host}\"\n",
        free_port(),
        free_port()
    );
    let schedule = Schedule::parse(
        &text,
        dir.path().join("s.toml"),
        &ictus_os::facts::online_cpus(),
    )
    .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let hosts: Vec<_> = (0..2)
        .map(|host| {
            let mut schedule = schedule.clone();
            let got = Arc::clone(&got);
            let run_dir = dir.path().join(format!("run{host}"));
            std::thread::spawn(move || {
                let run_name = schedule.name.clone();
                let link = ZenohLink::open(&schedule, host, &run_name).unwrap();
                if host != 0 {
                    schedule.name = format!("{run_name}.h2");
                }
                let mut factory = move |spec: &SubsystemSpec| -> Result<Maker, String> {
                    let got = Arc::clone(&got);
                    Ok(match spec.name.as_str() {
                        "p" => Maker::of::<Producer>(),
                        _ => Maker::with(move |reg| Consumer::init_into(reg, &got)),
                    })
                };
                let options = RunOptions {
                    duration: Some(Duration::from_millis(200)),
                    run_dir,
                    control_socket: false,
                    ready_timeout: Duration::from_secs(30),
                    link: Some(Box::new(link)),
                    ..RunOptions::default()
                };
                run::run(&schedule, &mut factory, options).map(|r| r.complete)
            })
        })
        .collect();
    for h in hosts {
        assert!(h.join().unwrap().unwrap(), "the run is complete");
    }
    got.lock().unwrap().clone()
}

#[test]
fn a_node_s_init_waits_for_a_value_the_main_host_publishes_and_the_other_way() {
    assert_eq!(across("h1"), ROUTE);
    assert_eq!(across("h2"), ROUTE);
}
