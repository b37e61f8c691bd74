//! A subsystem in a process of its own that talks to the others through hubs, by
//! name: each frame it takes every number from FIFO hub `to_echo`, sends it back on
//! FIFO hub `from_echo` plus one million, and gives semaphore hub `echoed` once per
//! number. `tests/hubs.rs` launches it from a schedule's `process = "hub_echo"`.

use std::process::ExitCode;

use ictus_exec::hub::{FifoReceiver, FifoSender, Semaphore};
use ictus_exec::subsystem::{Frame, Registry, RegistryError, Subsystem};

/// What the echo adds to every number.
const OFFSET: u64 = 1_000_000;

#[derive(Default)]
struct Echo {
    rx: Option<FifoReceiver<u64>>,
    tx: Option<FifoSender<u64>>,
    echoed: Option<Semaphore>,
}

impl Subsystem for Echo {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        self.rx = Some(reg.fifo_receiver("to_echo")?);
        self.tx = Some(reg.fifo_sender("from_echo")?);
        self.echoed = Some(reg.semaphore("echoed")?);
        Ok(())
    }

    fn run(&mut self, _frame: &mut Frame) {
        let (Some(rx), Some(tx), Some(echoed)) = (&mut self.rx, &mut self.tx, &self.echoed) else {
            return;
        };
        while let Some(n) = rx.try_recv() {
            if tx.try_send(n + OFFSET).is_ok() {
                echoed.give();
            }
        }
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main("echo", Echo::default())
}
