//! Fault injection for the executive's tests: subsystem `W` writes its frame number
//! to the element named by `config.to` (default `X.n`) every frame; at frame
//! `config.stall_at` (default 100) it claims its cell for a write and stops its own
//! process (SIGSTOP) before publishing, as a writer paused by a debugger or a
//! page-fault storm half way through a write. Readers must not spin on it, and the
//! coordinator must still end the run.

use std::process::ExitCode;

use ictus_exec::cell::Cells;
use ictus_exec::subsystem::{Flow, Frame, Output, Registry, RegistryError, Subsystem};

struct Stall {
    out: Output<i32>,
    cells: Cells,
    cell: usize,
    stall_at: u64,
}

/// `config.to` and `config.stall_at`.
#[derive(serde::Deserialize)]
struct Settings {
    #[serde(default = "x_n")]
    to: String,
    #[serde(default = "hundred")]
    stall_at: u64,
}

fn x_n() -> String {
    "X.n".into()
}

fn hundred() -> u64 {
    100
}

impl Subsystem for Stall {
    type Error = RegistryError;
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        let Settings { to, stall_at } = reg.settings()?;
        let out = reg.output(&to)?;
        let cell = to.split('.').next().unwrap_or_default().to_string();
        let cell = reg
            .cells()
            .cell_index(&cell)
            .map_err(|source| RegistryError::Cell {
                subsystem: "W".into(),
                source,
            })?;
        Ok(Stall {
            out,
            cells: reg.cells().clone(),
            cell,
            stall_at,
        })
    }

    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        frame.set(&self.out, frame.number() as i32);
        if frame.number() >= self.stall_at {
            // Half way through a write, and stopped there.
            self.cells.abandon_write(self.cell);
            let _ =
                ictus_os::process::signal(std::process::id() as i32, ictus_os::process::SIGSTOP);
        }
        Ok(Flow::Continue)
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main::<Stall>("W")
}
