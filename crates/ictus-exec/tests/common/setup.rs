//! Seed 003's SETUP1/SETUP2 problem, the producing half: a subsystem whose `init`
//! publishes [`ROUTE`] on the setup channel a moment after it starts, so that the
//! subsystem waiting for it asks first. Shared by the executive's stress test (both
//! in one run) and ictus-net's setup test (across hosts), which includes this file
//! by `#[path]`.

use std::time::Duration;

use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};

/// What the producer publishes, under the key `route`.
pub(crate) const ROUTE: &[u8] = b"loop-3";

/// Publishes `route` = [`ROUTE`] 100 ms into its `init`; runs doing nothing.
pub(crate) struct Producer;

impl Subsystem for Producer {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        std::thread::sleep(Duration::from_millis(100));
        reg.setup().put("route", ROUTE).unwrap();
        Ok(Producer)
    }
    fn run(&mut self, _: &mut Frame) -> Result<Flow, RegistryError> {
        Ok(Flow::Continue)
    }
}
