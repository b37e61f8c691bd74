//! Seed 003's setup channel across hosts: a subsystem's `init` on one host waits for
//! a value another host's `init` publishes, through the main coordinator's store (its
//! Zenoh queryable), whichever host publishes. Two hosts on loopback, each a `run`
//! with its own link, in threads of this test.

mod common;
#[path = "../../ictus-exec/tests/common/setup.rs"]
mod setup;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ictus_exec::subsystem::{Flow, Frame, Maker, Registry, RegistryError, Subsystem};
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
    let schedule = common::two_hosts(
        dir.path(),
        &name,
        "tick = \"2ms\"\nmajor_frame = 1",
        &format!(
            "[[subsystem]]\nname = \"p\"\nhost = \"{producer_host}\"\n\
             [[subsystem]]\nname = \"c\"\nhost = \"{consumer_host}\"\n"
        ),
    );
    let got = Arc::new(Mutex::new(Vec::new()));
    let reports = common::run_both(
        &schedule,
        dir.path(),
        Some(Duration::from_millis(200)),
        |_| {
            let got = Arc::clone(&got);
            vec![
                ("p", Maker::of::<Producer>()),
                ("c", Maker::with(move |reg| Consumer::init_into(reg, &got))),
            ]
        },
    );
    for r in reports {
        assert!(r.complete, "the run is complete: {r:#?}");
    }
    got.lock().unwrap().clone()
}

#[test]
fn a_node_s_init_waits_for_a_value_the_main_host_publishes_and_the_other_way() {
    assert_eq!(across("h1"), ROUTE);
    assert_eq!(across("h2"), ROUTE);
}
