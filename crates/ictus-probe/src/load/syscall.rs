//! The `syscall` load: system calls that take kernel locks, in a tight loop per CPU.
//!
//! One operation creates a pipe (`pipe2`), writes one byte into it, reads it back and
//! closes both ends. Allocating and freeing descriptors takes the file-table spinlock
//! of this process, shared by the workers of every CPU (so they contend for it); the
//! pipe adds its mutex, an inode and two `struct file`s from the slab, a wake-up check,
//! and RCU-deferred frees on close. This stands in for ARTiS's `ioctl()` under the big
//! kernel lock, which Linux no longer has.

use std::io::{self, Read, Write};

use ictus_core::CpuSet;

use super::worker::*;

/// System calls per operation: `pipe2`, `write`, `read`, `close`, `close`.
pub(super) const SYSCALLS_PER_OP: u64 = 5;

pub(super) fn plan(cpus: &CpuSet) -> Plan {
    Plan::per_cpu("syscall", cpus, |_| |w| Ok(cycle_pipes(w)))
}

fn one_pipe() -> io::Result<()> {
    let (mut reader, mut writer) = io::pipe()?;
    writer.write_all(&[1])?;
    let mut byte = [0u8];
    reader.read_exact(&mut byte)?;
    Ok(())
    // Both ends close here.
}

fn cycle_pipes(worker: &Worker<'_>) -> Tally {
    worker.ready();
    let mut ops = 0u64;
    let mut error = None;
    // One operation takes a few microseconds: look at the flag each time.
    while worker.running() {
        if let Err(e) = one_pipe() {
            error = Some(format!("pipe, write, read, close: {e}"));
            break;
        }
        ops += 1;
    }
    Tally::default()
        .count("ops", ops)
        .count("syscalls", ops * SYSCALLS_PER_OP)
        .error(error)
}
