//! A subsystem in a process of its own that feeds the `hub_echo` program through
//! hubs, by name, wherever they live: each frame it sends its frame number on FIFO
//! hub `to_echo` and reads what FIFO hub `from_echo` brings back. It counts in cell
//! element `S.n` the echoes that came back right (a number it sent, plus the echo's
//! offset, in the order sent), and writes -1 there for good once one does not, so
//! that the run's record (its `[stress]` counter) says whether the hubs carried
//! every message right. `crates/ictus-cli/tests/hosts/` runs it on the main host
//! with the echo on another host, the hubs homed there.

use std::process::ExitCode;

use ictus_exec::hub::{FifoReceiver, FifoSender};
use ictus_exec::subsystem::{Flow, Frame, Output, Registry, RegistryError, Subsystem};

// The echo's offset, from the echo itself.
#[allow(dead_code)] // its `main`, which only the echo program runs
#[path = "hub_echo.rs"]
mod hub_echo;
use hub_echo::OFFSET;

/// Sends frame numbers to the echo and checks what comes back.
struct Source {
    tx: FifoSender<u64>,
    rx: FifoReceiver<u64>,
    count: Output<i32>,
    /// The last number sent.
    sent: Option<u64>,
    /// The last echo taken.
    back: Option<u64>,
    /// Right echoes so far; -1 once one was wrong.
    good: i32,
}

impl Subsystem for Source {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Ok(Source {
            tx: reg.fifo_sender("to_echo")?,
            rx: reg.fifo_receiver("from_echo")?,
            count: reg.output("S.n")?,
            sent: None,
            back: None,
            good: 0,
        })
    }

    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        if self.tx.try_send(frame.number()).is_ok() {
            self.sent = Some(frame.number());
        }
        while let Some(n) = self.rx.try_recv() {
            // An echo of a number sent (a full FIFO may drop some), after the last.
            let right = n >= OFFSET
                && self.sent.is_some_and(|s| n - OFFSET <= s)
                && self.back.is_none_or(|b| n > b);
            self.good = if right && self.good >= 0 {
                self.good.saturating_add(1)
            } else {
                -1
            };
            self.back = Some(n);
        }
        frame.set(&self.count, self.good);
        Ok(Flow::Continue)
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main::<Source>("source")
}
