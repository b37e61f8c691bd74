//! Test support: a test that cannot run on this machine (no root, one CPU, no
//! Chromium...) says so where a person and CI see it, instead of passing in silence;
//! and the few fixtures the tests of several crates need (a free loopback port, a
//! FIFO, the Chromium on `PATH`), written once here.
//!
//! ```
//! // In a test: when the machine lacks what it needs, skip it, visibly.
//! if ictus_os::facts::online_cpus().len() < 2 {
//!     ictus_os::testing::skipped("a_two_cpu_test", "needs two online CPUs");
//! }
//! // A FIFO given where a file is expected must be refused without blocking.
//! let dir = tempfile::tempdir().unwrap();
//! let fifo = dir.path().join("in.json");
//! ictus_os::testing::mkfifo(&fifo).unwrap();
//! assert!(ictus_os::fs::read_input(&fifo, 1024).is_err());
//! ```

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// The variable naming the file where skipped tests are listed (one line each);
/// `.ci/run` sets it and prints the count and the list after the tests.
pub const SKIPPED_FILE_VAR: &str = "ICTUS_SKIPPED";

/// Says that `test` was skipped and why: `SKIPPED test: why` on stderr (shown with
/// `--nocapture`), and appended to the file `$ICTUS_SKIPPED` names, if set.
pub fn skipped(test: &str, why: &str) {
    let line = format!("SKIPPED {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(SKIPPED_FILE_VAR) {
        append(std::path::Path::new(&path), &line);
    }
}

/// Why this machine refuses `SCHED_FIFO` to this process, if it does: tried on a
/// scratch thread (priority 1), so the caller's own policy is untouched. Some
/// machines refuse real-time policies even to root with `CAP_SYS_NICE` (a container
/// runtime or security module); a test that needs them says so and skips.
pub fn realtime_refused() -> Option<String> {
    std::thread::spawn(|| {
        crate::sched::set_policy(crate::sched::Policy::Fifo { priority: 1 })
            .err()
            .map(|e| e.to_string())
    })
    .join()
    .unwrap_or_else(|_| Some("the trial thread panicked".into()))
}

/// A TCP port on loopback that was free a moment ago (the kernel picked it), for
/// tests that open peers side by side.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on loopback")
        .port()
}

/// Makes a FIFO (mode 0600) at `path`: an input that would block a plain read for
/// ever, which every reader of files must refuse.
pub fn mkfifo(path: &Path) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The first of `chromium`, `chromium-browser`, `google-chrome` and
/// `google-chrome-stable` found on `PATH`, for the tests that render pages. Where
/// there is none, says that `test` was skipped (as [`skipped`] does) and returns
/// `None`.
pub fn chromium(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        skipped(test, "no chromium on PATH (apt-get install chromium)");
    }
    found
}

/// One write of one line in append mode: the lines of parallel tests never mix.
fn append(path: &std::path::Path, line: &str) {
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn skips_are_listed_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("skipped");
        super::append(&file, "SKIPPED a: needs root\n");
        super::append(&file, "SKIPPED b: needs two CPUs\n");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "SKIPPED a: needs root\nSKIPPED b: needs two CPUs\n"
        );
    }

    #[test]
    fn a_free_port_is_a_real_one() {
        assert_ne!(super::free_port(), 0);
    }

    #[test]
    fn mkfifo_makes_a_fifo_once() {
        use std::os::unix::fs::FileTypeExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        super::mkfifo(&fifo).unwrap();
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let again = super::mkfifo(&fifo).unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
    }
}
