//! Memory locking and stack prefaulting: no page fault on a real-time path.
//!
//! ```no_run
//! if let Err(e) = ictus_os::memory::lock_all() {
//!     eprintln!("memory not locked: {e}");
//! }
//! ictus_os::memory::prefault_stack();
//! ```

use std::io;

use thiserror::Error;

use crate::facts::{self, Capabilities};

/// How much stack [`prefault_stack`] touches.
pub const PREFAULT_STACK_BYTES: usize = 256 * 1024;

/// Why memory could not be locked.
#[derive(Debug, Error)]
#[error("mlockall refused: {source}. {advice}")]
pub struct LockError {
    /// The kernel's answer.
    #[source]
    pub source: io::Error,
    /// The likely cause and the fix.
    pub advice: String,
}

/// Locks every current and future page of the process (`mlockall(MCL_CURRENT | MCL_FUTURE)`).
pub fn lock_all() -> Result<(), LockError> {
    // SAFETY: mlockall takes flags only and affects no Rust-visible memory.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    let limit = match facts::rlimit_memlock() {
        Some(l) => l
            .soft
            .map_or_else(|| "unlimited".to_string(), |b| format!("{} KiB", b / 1024)),
        None => "unknown".to_string(),
    };
    let cap_ipc_lock = facts::capabilities().is_some_and(|c| c.has(Capabilities::IPC_LOCK));
    let advice = if cap_ipc_lock {
        format!(
            "The process has CAP_IPC_LOCK; the kernel ran out of lockable memory (RLIMIT_MEMLOCK {limit})."
        )
    } else {
        format!(
            "This process lacks CAP_IPC_LOCK and its RLIMIT_MEMLOCK is {limit}: run as root, \
             `setcap cap_ipc_lock+ep` on the binary, or raise the limit (`ulimit -l unlimited`, \
             or `@realtime - memlock unlimited` in /etc/security/limits.conf)."
        )
    };
    Err(LockError { source, advice })
}

/// Bytes of memory currently locked by this process (`VmLck` of /proc/self/status).
pub fn locked_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// Touches [`PREFAULT_STACK_BYTES`] of the calling thread's stack so that later calls
/// to that depth take no page fault. Call it after [`lock_all`], on the thread that
/// will run the real-time loop.
#[inline(never)]
pub fn prefault_stack() {
    let mut buf = [0u8; PREFAULT_STACK_BYTES];
    for page in buf.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(&mut buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefaulting_the_stack_on_a_thread_returns() {
        std::thread::Builder::new()
            .stack_size(2 * PREFAULT_STACK_BYTES)
            .spawn(prefault_stack)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn locked_bytes_is_readable() {
        assert!(locked_bytes().is_some());
    }
}
