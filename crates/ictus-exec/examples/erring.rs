//! A subsystem in a process of its own whose `run` fails: from its own frame
//! `config.fail_from` on (default 10) every frame returns its own error, and what
//! the executive does then is the schedule's `on_error`. `tests/faults.rs` launches
//! it to check that the error crosses the process boundary into the run's report.

use std::process::ExitCode;

use ictus_exec::subsystem::{Flow, Frame, Registry, RegistryError, Subsystem};

/// The program's own error.
#[derive(Debug, thiserror::Error)]
enum Erring {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("sensor read failed at its frame {0}")]
    Sensor(u64),
}

/// `config.fail_from`.
#[derive(serde::Deserialize)]
struct Settings {
    #[serde(default = "ten")]
    fail_from: u64,
}

fn ten() -> u64 {
    10
}

struct Failing {
    fail_from: u64,
    frames: u64,
}

impl Subsystem for Failing {
    type Error = Erring;
    fn init(reg: &mut Registry) -> Result<Self, Erring> {
        let Settings { fail_from } = reg.settings()?;
        Ok(Failing {
            fail_from,
            frames: 0,
        })
    }
    fn run(&mut self, _frame: &mut Frame) -> Result<Flow, Erring> {
        self.frames += 1;
        if self.frames >= self.fail_from {
            return Err(Erring::Sensor(self.frames));
        }
        Ok(Flow::Continue)
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main::<Failing>("E")
}
