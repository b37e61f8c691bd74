//! Reading the small files the facts come from, and whether one may be written.

use std::path::Path;

/// The contents of a small text file, trimmed; `None` when it is absent or unreadable.
pub(super) fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Whether this process may write `path` (`access(W_OK)`: its privileges, the file's
/// mode, a read-only mount); nothing is written.
pub fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; access only
    // reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}
