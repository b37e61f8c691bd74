//! Subsystem B of seed 003's stress test, in a process of its own: reads cell B, adds
//! one to every value, writes cell C. `ictus run examples/stress/schedule.toml`
//! launches it; it joins the run's frame beat through shared memory.

use std::process::ExitCode;

use ictus_exec::stress::Increment;

fn main() -> ExitCode {
    ictus_exec::child::main("B", Increment::between("B", "C"))
}
