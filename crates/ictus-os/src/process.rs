//! Signals to another process by its id (std has no `kill`): what the shield uses to
//! stop the watchdog process it started; whether a process is alive; and a child
//! that dies with the thread that started it.
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
/// `SIGSTOP`: pauses a process (as a debugger or Ctrl-Z does); it cannot refuse.
pub const SIGSTOP: i32 = libc::SIGSTOP;
/// `SIGCONT`: resumes a paused process.
pub const SIGCONT: i32 = libc::SIGCONT;

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

/// Makes the process that `command` starts receive `SIGKILL` when the thread that
/// starts it ends (`PR_SET_PDEATHSIG`), so a program started by a run that is
/// itself killed (`kill -9`, a crash) never outlives it. If this process is
/// already gone by the time the child is set up, the child ends at once. The
/// thread that spawns must outlive the child (the kernel ties the signal to it).
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: prctl, getppid and _exit are; it
    // allocates nothing and touches only the copied `parent` integer.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the prctl: the signal will never come.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Whether starting a program failed because the kernel cannot run that file
/// (`ENOEXEC`: a script without a `#!` line, a binary of another format).
pub fn is_exec_format_error(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOEXEC)
}

/// Whether process `pid` exists and has not exited: `kill(pid, 0)` finds it
/// (EPERM counts: it exists but is not ours to signal) and `/proc/PID/stat` does
/// not show a zombie (an exited process its parent has not reaped yet). Allocates
/// nothing, so a real-time thread may ask.
pub fn is_alive(pid: u32) -> bool {
    use std::io::{Read, Write};
    let Ok(id) = i32::try_from(pid) else {
        return false;
    };
    match signal(id, 0) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
        Err(_) => return false,
    }
    let mut path = [0u8; 32];
    let len = {
        let mut cursor = &mut path[..];
        if write!(cursor, "/proc/{pid}/stat").is_err() {
            return true;
        }
        32 - cursor.len()
    };
    let path = std::path::Path::new(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path[..len]),
    );
    let mut stat = [0u8; 512];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut stat)) else {
        // No /proc to ask: the signal's answer stands.
        return true;
    };
    // The state is the first field after the command's closing parenthesis.
    let text = &stat[..n];
    match text.iter().rposition(|&b| b == b')') {
        Some(i) => text.get(i + 2) != Some(&b'Z'),
        None => true,
    }
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

    #[test]
    fn is_alive_sees_a_live_process_and_not_a_zombie_or_a_reaped_one() {
        assert!(is_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: a zombie once it has exited.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_alive(pid) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_alive(pid), "an exited, unreaped child is a zombie");
        child.wait().unwrap();
        assert!(!is_alive(pid));
        assert!(!is_alive(u32::MAX));
    }
}
