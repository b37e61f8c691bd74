//! Fault injection for the executive's tests: subsystem `W` writes its frame number
//! to the element named by `config.to` (default `X.n`) every frame; at frame
//! `config.stall_at` (default 100) it claims its cell for a write and stops its own
//! process (SIGSTOP) before publishing, as a writer paused by a debugger or a
//! page-fault storm half way through a write. Readers must not spin on it, and the
//! coordinator must still end the run.

use std::process::ExitCode;

use ictus_exec::cell::Cells;
use ictus_exec::subsystem::{Frame, Output, Registry, RegistryError, Subsystem};

#[derive(Default)]
struct Stall {
    out: Option<Output<i32>>,
    cells: Option<(Cells, usize)>,
    stall_at: u64,
}

impl Subsystem for Stall {
    fn init(&mut self, reg: &mut Registry) -> Result<(), RegistryError> {
        let to = reg
            .config()
            .get("to")
            .and_then(|v| v.as_str())
            .unwrap_or("X.n")
            .to_string();
        self.stall_at = reg
            .config()
            .get("stall_at")
            .and_then(|v| v.as_integer())
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(100);
        self.out = Some(reg.output(&to)?);
        let cell = to.split('.').next().unwrap_or_default().to_string();
        let index = reg
            .cells()
            .cell_index(&cell)
            .map_err(|source| RegistryError::Cell {
                subsystem: "W".into(),
                source,
            })?;
        self.cells = Some((reg.cells().clone(), index));
        Ok(())
    }

    fn run(&mut self, frame: &mut Frame) {
        if let Some(out) = &self.out {
            frame.set(out, frame.number() as i32);
        }
        if frame.number() >= self.stall_at
            && let Some((cells, cell)) = &self.cells
        {
            // Half way through a write, and stopped there.
            cells.abandon_write(*cell);
            let _ =
                ictus_os::process::signal(std::process::id() as i32, ictus_os::process::SIGSTOP);
        }
    }
}

fn main() -> ExitCode {
    ictus_exec::child::main("W", Stall::default())
}
