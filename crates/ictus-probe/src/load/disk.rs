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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_core::CpuSet;

use super::{LoadError, LoadStartError, Plan, Tally, Worker};

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

/// A directory of our own for the disk load's files, removed by [`ScratchDir::remove`]
/// or on drop.
#[derive(Debug)]
pub(super) struct ScratchDir {
    path: PathBuf,
    removed: bool,
}

impl ScratchDir {
    /// Creates `ictus-load-<pid>-<n>` under `$TMPDIR` if set, else `/var/tmp` (kept on
    /// disk by convention, where `/tmp` is often tmpfs and its `fsync` reaches no
    /// device), else the system's temporary directory.
    fn create() -> Result<ScratchDir, LoadError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base_dir();
        loop {
            // Relaxed: only uniqueness within the process matters, which the atomic
            // read-modify-write gives in any order.
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("ictus-load-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(ScratchDir {
                        path,
                        removed: false,
                    });
                }
                // Left over by an earlier process with the same pid: pick another.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(LoadError::TempDir { base, source }),
            }
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it.
    pub(super) fn remove(mut self) -> Result<(), String> {
        self.removed = true;
        std::fs::remove_dir_all(&self.path)
            .map_err(|e| format!("removing {} failed: {e}", self.path.display()))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.removed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn base_dir() -> PathBuf {
    if std::env::var_os("TMPDIR").is_some_and(|t| !t.is_empty()) {
        return std::env::temp_dir();
    }
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() {
        return var_tmp.to_path_buf();
    }
    std::env::temp_dir()
}
