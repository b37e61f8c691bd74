//! Subsystem B of seed 003's stress test, in a process of its own: reads cell B, adds
//! one to every value, writes cell C. `ictus run examples/stress/schedule.toml`
//! launches it; it joins the run's frame beat through shared memory.

use std::process::ExitCode;

use ictus_exec::stress::Increment;
use ictus_exec::subsystem::Maker;

fn main() -> ExitCode {
    ictus_exec::child::main_with("B", Maker::with(|reg| Increment::between(reg, "B", "C")))
}
