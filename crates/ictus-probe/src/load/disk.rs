//! The `disk` load: per CPU, write a block to a file, `fsync` it, read a block back,
//! in a loop, in a temporary directory removed when the load stops.
//!
//! The flushes are what matter: each `fsync` sends the written data and a cache flush
//! to the device. On a virtual machine that is work for the host's I/O threads, which
//! may share the vCPUs' CPU quota (on the reference machine, sync-heavy I/O together
//! with busy CPUs stalls the guest for 10 ms and more).

#![allow(
    clippy::disallowed_types,
    reason = "a process-wide counter that names temporary files: one fetch_add, no protocol"
)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use ictus_core::CpuSet;

use super::spec::*;
use super::worker::*;

/// Bytes written (then read) per step.
const BLOCK: usize = 256 << 10;
/// The file each worker cycles through: the writes land on new offsets until it wraps.
const FILE_BYTES: u64 = 16 << 20;

pub(super) fn plan(cpus: &CpuSet) -> Result<Plan, LoadError> {
    let scratch = ScratchDir::create()?;
    let mut plan = Plan::per_cpu("disk", cpus, |cpu| {
        let path = scratch.path().join(format!("worker-{cpu}.dat"));
        move |w| churn(w, &path)
    });
    plan.scratch = Some(scratch);
    Ok(plan)
}

fn churn(worker: &Worker<'_>, path: &Path) -> Result<Tally, LoadStartError> {
    let io_error = |what: &str, source| LoadStartError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io_error("creating", e))?;
    let block: Vec<u8> = (0..BLOCK).map(|i| i as u8).collect();
    let mut back = vec![0u8; BLOCK];
    worker.ready();
    let (mut fsyncs, mut written, mut read) = (0u64, 0u64, 0u64);
    let mut error = None;
    let mut offset = 0u64;
    // One step takes a flush (a millisecond or more on a virtual disk): look at the
    // flag each step.
    while worker.running() {
        if let Err(e) = step(&file, &block, &mut back, offset) {
            error = Some(format!("{}: {e}", path.display()));
            break;
        }
        fsyncs += 1;
        written += BLOCK as u64;
        read += BLOCK as u64;
        offset = (offset + BLOCK as u64) % FILE_BYTES;
    }
    Ok(Tally::default()
        .count("fsyncs", fsyncs)
        .count("write_bytes", written)
        .count("read_bytes", read)
        .count("bytes", written + read)
        .error(error))
}

/// Writes a block at `offset`, flushes the file, reads the block back.
fn step(file: &File, block: &[u8], back: &mut [u8], offset: u64) -> io::Result<()> {
    file.write_all_at(block, offset)?;
    file.sync_all()?;
    file.read_exact_at(back, offset)
}
