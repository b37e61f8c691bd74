//! A process's identity for the life of the machine ([`ProcessId`]: its pid and start
//! time, so a reused pid is another process) and whether it is alive; signals to
//! another process by its id (std has no `kill`): what the shield uses to stop the
//! watchdog process it started; and a child that dies with the thread that started
//! it.
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

/// A process, named for the life of the machine: its pid and its start time. A pid is
/// reused once its process is gone; the pair never is. The one identity of a process
/// in ictus: shared memory owners, journals and the executive's coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// Process id.
    pub pid: u32,
    /// Start time, in clock ticks after boot (field 22 of `/proc/<pid>/stat`).
    pub start_time: u64,
}

impl ProcessId {
    /// This process.
    pub fn current() -> io::Result<ProcessId> {
        ProcessId::of(std::process::id())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no start time"))
    }

    /// The process a kernel `pid_t` and a start time name (the shield's journal keeps
    /// pids as the kernel's signed type). A pid of 0 or below names no one process,
    /// so it is one that is never alive.
    pub fn from_pid_t(pid: libc::pid_t, start_time: u64) -> ProcessId {
        ProcessId {
            pid: u32::try_from(pid)
                .ok()
                .filter(|&p| p > 0)
                .unwrap_or(u32::MAX),
            start_time,
        }
    }

    /// The running (not exited) process `pid`, if there is one.
    pub fn of(pid: u32) -> Option<ProcessId> {
        let stat = crate::procstat::TaskStat::read(&format!("/proc/{pid}/stat"))?;
        (!stat.exited()).then_some(ProcessId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// Whether this very process still runs: `pid` exists (`kill(pid, 0)`; EPERM
    /// counts: it exists but is not ours to signal), has not exited (a zombie its
    /// parent has not reaped yet does not run) and started at `start_time` (not a
    /// reused pid). Where there is no `/proc` to ask, the signal's answer stands.
    /// Allocates nothing, so a real-time thread may ask.
    pub fn is_alive(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(id) = i32::try_from(self.pid) else {
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
            if write!(cursor, "/proc/{}/stat", self.pid).is_err() {
                return true;
            }
            32 - cursor.len()
        };
        let path = std::path::Path::new(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path[..len]),
        );
        // A stat line is 52 numbers at most after a command of 15 bytes.
        let mut stat = [0u8; 1536];
        let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut stat)) else {
            return true;
        };
        match crate::procstat::TaskStat::parse(&stat[..n]) {
            Some(t) => !t.exited() && t.start_time == self.start_time,
            None => true,
        }
    }

    /// The pair as file names carry it: `PID-START` (see [`ProcessId::parse_key`]).
    pub fn key(&self) -> String {
        format!("{}-{}", self.pid, self.start_time)
    }

    /// Reads back a [`key`](ProcessId::key): `PID-START`, both decimal.
    pub fn parse_key(key: &str) -> Option<ProcessId> {
        let (pid, start_time) = key.split_once('-')?;
        Some(ProcessId {
            pid: pid.parse().ok()?,
            start_time: start_time.parse().ok()?,
        })
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} (started at tick {})",
            self.pid, self.start_time
        )
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
        let me = ProcessId::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_alive());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let sut = ProcessId::of(child.id());
        // Not reaped yet: a zombie once it has exited.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while sut.is_some_and(|p| p.is_alive()) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if let Some(sut) = sut {
            assert!(!sut.is_alive(), "an exited, unreaped child is a zombie");
            assert_eq!(ProcessId::of(sut.pid), None);
        }
        child.wait().unwrap();
        if let Some(sut) = sut {
            assert!(!sut.is_alive());
        }
        let nobody = ProcessId {
            pid: u32::MAX,
            start_time: 1,
        };
        assert!(!nobody.is_alive());
    }

    #[test]
    fn a_reused_pid_with_another_start_time_is_dead() {
        let me = ProcessId::current().unwrap();
        let impostor = ProcessId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(!impostor.is_alive());
    }

    #[test]
    fn a_key_reads_back_and_a_malformed_one_does_not() {
        let sut = ProcessId {
            pid: 42,
            start_time: 7,
        };
        assert_eq!(sut.key(), "42-7");
        assert_eq!(ProcessId::parse_key("42-7"), Some(sut));
        for bad in ["", "42", "42-", "-7", "x-7", "42-7-1"] {
            assert_eq!(ProcessId::parse_key(bad), None, "{bad}");
        }
        assert_eq!(sut.to_string(), "process 42 (started at tick 7)");
    }
}
