//! Signals to another process by its id (std has no `kill`): what the shield uses to
//! stop the watchdog process it started.
//!
//! ```no_run
//! use ictus_os::process::{SIGTERM, signal};
//! let pid = 12345;
//! if let Err(e) = signal(pid, SIGTERM) {
//!     eprintln!("process {pid} not signalled: {e}");
//! }
//! ```

use std::io;

/// `SIGTERM`: asks a process to end cleanly.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGINT`: what Ctrl-C sends.
pub const SIGINT: i32 = libc::SIGINT;
/// `SIGKILL`: ends a process at once; it cannot clean up.
pub const SIGKILL: i32 = libc::SIGKILL;

/// Sends signal `sig` to the one process `pid` (`kill(2)`). A `pid` of 0 or below
/// would name a process group or every process, so it is refused (`InvalidInput`)
/// before any call. ESRCH (no such process) and EPERM come back as the OS error.
pub fn signal(pid: i32, sig: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("pid {pid} names a group of processes, not one"),
        ));
    }
    // SAFETY: kill takes two plain integers and touches no memory of this process;
    // `pid` is positive, so it names exactly one process (never a group or all).
    let rc = unsafe { libc::kill(pid, sig) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_are_refused_before_any_call() {
        for pid in [0, -1, -42] {
            let sut = signal(pid, SIGTERM).unwrap_err();
            assert_eq!(sut.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn signal_zero_probes_a_live_process() {
        let own = std::process::id() as i32;
        signal(own, 0).unwrap();
    }
}
