//! A subsystem in a process of its own that talks to the others through hubs, by
//! name: each frame it takes every number from FIFO hub `to_echo`, sends it back on
//! FIFO hub `from_echo` plus one million, and gives semaphore hub `echoed` once per
//! number. `tests/hubs.rs` launches it from a schedule's `process = "hub_echo"`, and
//! runs the same subsystem in-process too.

use std::process::ExitCode;

use ictus_exec::hub::{FifoReceiver, FifoSender, Semaphore};
use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};

/// What the echo adds to every number.
pub(crate) const OFFSET: u64 = 1_000_000;

/// Echoes every number it takes from `to_echo` on `from_echo`, plus [`OFFSET`].
pub(crate) struct Echo {
    rx: FifoReceiver<u64>,
    tx: FifoSender<u64>,
    echoed: Semaphore,
}

impl Subsystem for Echo {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Echo {
            rx: reg.fifo_receiver("to_echo")?,
            tx: reg.fifo_sender("from_echo")?,
            echoed: reg.semaphore("echoed")?,
        })
    }

    fn run(&mut self, _frame: &mut Frame) -> Result<Flow, RegistryError> {
        while let Some(n) = self.rx.try_recv() {
            if self.tx.try_send(n + OFFSET).is_ok() {
                self.echoed.give();
            }
        }
        Ok(Flow::Continue)
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main::<Echo>("echo")
}
