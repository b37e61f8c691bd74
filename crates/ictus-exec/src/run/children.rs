//! The programs a run launched: reaping them, with a bound on every wait.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use ictus_core::Nanos;
use ictus_os::clock::monotonic_now;

/// A program launched for a subsystem of this host.
pub(super) struct ChildProc {
    /// The subsystem's slot.
    pub(super) slot: usize,
    pub(super) child: Child,
    /// The name it is reported by (the schedule's program, or `own`).
    pub(super) program: String,
    /// How it ended, once it did.
    pub(super) exited: Option<String>,
    /// Where it writes its [`super::ThreadOutcome`].
    pub(super) outcome_file: PathBuf,
}

pub(super) fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".to_string(),
    }
}

/// How long the coordinator waits for a killed child to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);

/// Kills every child still running and reaps it, waiting at most
/// [`REAP_TIMEOUT`] in all: the coordinator never blocks without a bound (a
/// process can take long to die, for example when a real-time thread keeps it off
/// its CPU). A child not reaped in time is named in its `exited`.
pub(super) fn kill_all(children: &mut [ChildProc]) {
    for c in children.iter_mut() {
        if c.exited.is_none() {
            match c.child.try_wait() {
                Ok(Some(status)) => c.exited = Some(describe_exit(status)),
                _ => {
                    let _ = c.child.kill();
                }
            }
        }
    }
    let until = monotonic_now() + Nanos::from(REAP_TIMEOUT);
    loop {
        let mut pending = false;
        for c in children.iter_mut().filter(|c| c.exited.is_none()) {
            match c.child.try_wait() {
                Ok(Some(status)) => c.exited = Some(describe_exit(status)),
                Ok(None) => pending = true,
                Err(e) => c.exited = Some(format!("could not be reaped ({e})")),
            }
        }
        if !pending {
            return;
        }
        if monotonic_now() >= until {
            for c in children.iter_mut().filter(|c| c.exited.is_none()) {
                c.exited = Some(format!(
                    "was killed but had not exited {} s later (pid {})",
                    REAP_TIMEOUT.as_secs(),
                    c.child.id()
                ));
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(super) fn wait_children(children: &mut [ChildProc], timeout: Duration) {
    let until = monotonic_now() + Nanos::from(timeout);
    while monotonic_now() < until
        && children
            .iter_mut()
            .any(|c| matches!(c.child.try_wait(), Ok(None)))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_all(children);
}
