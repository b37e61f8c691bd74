//! Files ictus writes: whole or not at all.
//!
//! Every output (records, reports, scenario results, imports) goes through
//! [`write_atomic`]: the bytes are written to a temporary file in the same directory,
//! flushed to disk, then renamed over the target, so a reader (or a crash, or a full
//! disk) never leaves half a file where a complete one was expected. [`check_writable`]
//! answers, before a long measurement starts, whether its output could be written at
//! all, so a run is never lost to a typo in `-o`.

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why an output file could not be written (or would not be).
#[derive(Debug, Error)]
pub enum OutputError {
    /// The target is a directory.
    #[error("{}: is a directory; give a file name", path.display())]
    IsDirectory {
        /// The target.
        path: PathBuf,
    },
    /// The directory the file would go in does not exist.
    #[error("{}: directory {} does not exist", path.display(), dir.display())]
    NoDirectory {
        /// The target.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The OS refused.
    #[error("{}: cannot write: {source}", path.display())]
    Io {
        /// The target.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks, without leaving anything behind, that `path` could be written by
/// [`write_atomic`]: it is not a directory, its directory exists, and a file can be
/// created there.
pub fn check_writable(path: &Path) -> Result<(), OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: path.to_path_buf(),
            dir,
        });
    }
    // A probe file in the same directory, removed when dropped.
    tempfile::Builder::new()
        .prefix(".ictus-check-")
        .tempfile_in(&dir)
        .map(drop)
        .map_err(|source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory,
/// flushed to disk, then renamed over `path`. On any failure `path` is untouched and
/// the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: path.to_path_buf(),
            dir,
        });
    }
    let io = |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".ictus-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(io)?;
    tmp.write_all(bytes.as_ref()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn write_atomic_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let sut = dir.path().join("out.json");
        std::fs::write(&sut, "old").unwrap();
        write_atomic(&sut, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&sut).unwrap(), "new");
        assert_eq!(entries(dir.path()), vec!["out.json"]);
    }

    #[test]
    fn write_atomic_refuses_a_directory_and_a_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            write_atomic(dir.path(), "x"),
            Err(OutputError::IsDirectory { .. })
        ));
        let missing = dir.path().join("nope/out.json");
        assert!(matches!(
            write_atomic(&missing, "x"),
            Err(OutputError::NoDirectory { .. })
        ));
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn check_writable_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("out.json")).unwrap();
        assert!(entries(dir.path()).is_empty());
        assert!(check_writable(&dir.path().join("no/such/out.json")).is_err());
        assert!(check_writable(dir.path()).is_err());
    }
}
