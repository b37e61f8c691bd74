//! Files ictus writes: whole or not at all.
//!
//! Every output (records, reports, scenario results, imports) goes through
//! [`write_atomic`]: the bytes are written to a temporary file in the same directory,
//! flushed to disk, then renamed over the target, so a reader (or a crash, or a full
//! disk) never leaves half a file where a complete one was expected. [`check_writable`]
//! answers, before a long measurement starts, whether its output could be written at
//! all, so a run is never lost to a typo in `-o`.
//!
//! Every input file is read by [`read_input`] (records, imports, scenarios, journals,
//! manifests: a file over its limit is refused before it is read) or [`read_text`]
//! (schedules, cell and hub tables: a file over its limit is refused at the place of
//! its first byte past it, for an editor to jump to): only a regular file, never more
//! than its kind's limit ([`InputKind`], the one table of them), and text that is not
//! UTF-8 is refused with the line and column of the first bad byte. A FIFO or a device
//! given as an input is refused before anything blocks on it. Both say why with one
//! error, [`InputError`].
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.json");
//! ictus_os::fs::check_writable(&path).unwrap();
//! ictus_os::fs::write_atomic(&path, "{}\n").unwrap();
//! let limit = ictus_os::fs::InputKind::Record.max_bytes();
//! assert_eq!(ictus_os::fs::read_input(&path, limit).unwrap(), "{}\n");
//! ```

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::json::Place;

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
    #[error("{}: cannot write", path.display())]
    Io {
        /// The target.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The directory an output file at `path` goes in (`.` for a bare file name), or why
/// no file can go there: `path` is a directory, or its directory does not exist.
pub fn output_directory(path: &Path) -> Result<PathBuf, OutputError> {
    if path.is_dir() {
        return Err(OutputError::IsDirectory {
            path: path.to_path_buf(),
        });
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(OutputError::NoDirectory {
            path: path.to_path_buf(),
            dir,
        });
    }
    Ok(dir)
}

/// Checks, without leaving anything behind, that `path` could be written by
/// [`write_atomic`]: it is not a directory, its directory exists, and a file can be
/// created there.
pub fn check_writable(path: &Path) -> Result<(), OutputError> {
    let dir = output_directory(path)?;
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
    let dir = output_directory(path)?;
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

/// The kinds of input file ictus reads, for the one table of their size limits
/// ([`InputKind::max_bytes`]). A limit keeps a wrong path (a disk image, a log) from
/// filling memory; each is far beyond what ictus itself writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A probe's run record (`ictus <probe> -o`): 64 MiB.
    Record,
    /// A survey's `survey.json` or `doctor.json`, a scenario's result: 64 MiB.
    Manifest,
    /// A cyclictest file to import: 64 MiB (a histogram of a million buckets for each
    /// of 64 threads is under that).
    Import,
    /// A shield's journal: 16 MiB (one line per change, a few thousand lines at most).
    Journal,
    /// An executive's schedule, cell table or hub table: 16 MiB (far smaller in
    /// practice).
    Table,
    /// A shield scenario: 1 MiB.
    Scenario,
}

impl InputKind {
    /// The largest file of this kind read, in bytes.
    pub const fn max_bytes(self) -> u64 {
        match self {
            InputKind::Record | InputKind::Manifest | InputKind::Import => 64 << 20,
            InputKind::Journal | InputKind::Table => 16 << 20,
            InputKind::Scenario => 1 << 20,
        }
    }
}

/// Why an input file was refused.
#[derive(Debug, Error)]
pub enum InputError {
    /// The OS refused (missing file, no permission).
    #[error("{}: cannot read", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A FIFO, a device, a socket or a directory: reading it could block forever or
    /// never end.
    #[error("{}: expected a regular file, found {kind}", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is (`a FIFO`, `a directory`...).
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("{}: larger than the {limit}-byte limit for this kind of file", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
        /// The place of the first byte past the limit, where it was read
        /// ([`read_text`]); `None` when the file was refused by its size alone.
        at: Option<Place>,
    },
    /// Not UTF-8 text.
    #[error("{}:{line}:{column}: expected UTF-8 text, found an invalid byte (byte offset {offset})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 1-based column (in characters) of the first invalid byte.
        column: usize,
        /// Its byte offset.
        offset: usize,
    },
}

/// A place in an input file and what is wrong there, said as `FILE:LINE:COLUMN: WHAT`:
/// the one shape of ictus's placed input errors (schedules, tables, scenarios,
/// journals), whatever `what` is (a message, a rule broken).
#[derive(Debug, Error)]
#[error("{file}:{place}: {what}")]
pub struct Located<E> {
    /// The file as its errors name it: a path as given, or a label (`<stdin>`, the
    /// schedule a table is inline in).
    pub file: String,
    /// Where in it.
    pub place: Place,
    /// What was expected, and what was found.
    pub what: E,
}

impl<E> Located<E> {
    /// `what` at `place` of `file`.
    pub fn new(file: impl Into<String>, place: Place, what: E) -> Located<E> {
        Located {
            file: file.into(),
            place,
            what,
        }
    }

    /// `what` at byte `offset` of `text`, the content of `file`.
    pub fn at(file: impl Into<String>, text: &str, offset: usize, what: E) -> Located<E> {
        Located {
            file: file.into(),
            place: crate::json::place_of_offset(text, offset),
            what,
        }
    }
}

impl Located<String> {
    /// A JSON reader's error about `file` ([`JsonError`](crate::json::JsonError)),
    /// placed as every input error is.
    pub fn json(file: impl Into<String>, e: crate::json::JsonError) -> Located<String> {
        Located::new(file, e.place, e.message)
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "something other than a file"
    }
}

pub use crate::json::line_column;

/// Opens `path` for reading if it is a regular file. A FIFO, device, socket or
/// directory is refused without blocking: the file is opened non-blocking (opening a
/// FIFO with no writer would otherwise wait forever) and its type checked on the open
/// file, so a path swapped in between cannot slip through.
pub fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(InputError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    Ok((file, meta))
}

/// Reads the regular file at `path` as UTF-8 text of at most `limit` bytes. A FIFO or
/// device is refused without blocking ([`open_regular`]).
pub fn read_input(path: &Path, limit: u64) -> Result<String, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (file, meta) = open_regular(path)?;
    let too_large = || InputError::TooLarge {
        path: path.to_path_buf(),
        limit,
        at: None,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow while read: never take more than the limit.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let (line, column) = line_column(e.as_bytes(), offset);
        InputError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            column,
            offset,
        }
    })
}

impl InputError {
    /// The place in the file the error is about, when it is about its content.
    pub fn place(&self) -> Option<Place> {
        match *self {
            InputError::TooLarge { at, .. } => at,
            InputError::NotUtf8 { line, column, .. } => Some(Place { line, column }),
            InputError::Io { .. } | InputError::NotRegular { .. } => None,
        }
    }
}

/// Reads the regular file at `path` as UTF-8 text of at most `limit` bytes, reading
/// up to the limit first: an invalid byte before the limit is refused as such, a file
/// over it at the place of the first byte past it ([`text_of`]). A FIFO or device is
/// refused without blocking ([`open_regular`]).
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputError> {
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    text_of(path, bytes, limit)
}

/// Checks that `bytes`, read from `path`, are UTF-8 text of at most `limit` bytes:
/// the first invalid byte within the limit is refused at its place, then a text over
/// the limit at the place of the first byte past it.
pub fn text_of(path: &Path, bytes: Vec<u8>, limit: u64) -> Result<String, InputError> {
    let limit_at = usize::try_from(limit).unwrap_or(usize::MAX);
    let within = bytes.len().min(limit_at);
    let not_utf8 = |bytes: &[u8], offset: usize| {
        let (line, column) = line_column(bytes, offset);
        InputError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            column,
            offset,
        }
    };
    if let Err(e) = std::str::from_utf8(&bytes[..within]) {
        // A character cut by the limit is not an invalid one.
        if e.error_len().is_some() || bytes.len() <= limit_at {
            return Err(not_utf8(&bytes, e.valid_up_to()));
        }
    }
    if bytes.len() > limit_at {
        let (line, column) = line_column(&bytes, limit_at);
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            limit,
            at: Some(Place { line, column }),
        });
    }
    String::from_utf8(bytes).map_err(|e| not_utf8(e.as_bytes(), e.utf8_error().valid_up_to()))
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
    fn read_input_refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        crate::testing::mkfifo(&fifo).unwrap();
        assert!(matches!(
            read_input(&fifo, 1024),
            Err(InputError::NotRegular { kind: "a FIFO", .. })
        ));
        assert!(matches!(
            read_input(dir.path(), 1024),
            Err(InputError::NotRegular { .. })
        ));
        assert!(matches!(
            read_input(Path::new("/dev/zero"), 1024),
            Err(InputError::NotRegular { .. })
        ));
    }

    #[test]
    fn read_input_refuses_more_than_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let sut = dir.path().join("big");
        std::fs::write(&sut, "0123456789").unwrap();
        assert!(matches!(
            read_input(&sut, 9),
            Err(InputError::TooLarge { limit: 9, .. })
        ));
        assert_eq!(read_input(&sut, 10).unwrap(), "0123456789");
    }

    #[test]
    fn invalid_utf8_is_named_once_with_its_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let sut = dir.path().join("bad");
        std::fs::write(&sut, b"ab\n\xc3\xa9c\xff\xfe\n").unwrap();
        let err = read_input(&sut, 1024).unwrap_err();
        assert!(
            matches!(
                err,
                InputError::NotUtf8 {
                    line: 2,
                    column: 3,
                    offset: 6,
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("bad:2:3:"), "{text}");
        assert_eq!(text.matches("invalid").count(), 1, "{text}");
    }

    #[test]
    fn an_os_error_is_not_repeated() {
        // The OS error is the source, printed once by whoever prints the chain.
        let err = read_input(Path::new("/nonexistent/x.json"), 1024).unwrap_err();
        assert!(!err.to_string().contains("No such file"), "{err}");
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(source.contains("No such file"), "{source}");
    }

    #[test]
    fn check_writable_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("out.json")).unwrap();
        assert!(entries(dir.path()).is_empty());
        assert!(check_writable(&dir.path().join("no/such/out.json")).is_err());
        assert!(check_writable(dir.path()).is_err());
    }

    #[test]
    fn text_of_places_invalid_utf8_at_its_first_byte() {
        let path = Path::new("t.toml");
        let err = text_of(path, b"a = 1\nb = \"\xff\"\n".to_vec(), 1024).unwrap_err();
        assert_eq!(err.place(), Some(Place { line: 2, column: 6 }));
        assert!(matches!(err, InputError::NotUtf8 { .. }));
        let err = text_of(path, b"\xc3\xa9\xc3".to_vec(), 1024).unwrap_err();
        assert_eq!(err.place(), Some(Place { line: 1, column: 2 }));
    }

    #[test]
    fn text_of_refuses_a_text_over_the_limit_at_the_first_byte_past_it() {
        let mut bytes = vec![b'#'; 110];
        bytes[9] = b'\n';
        let err = text_of(Path::new("t.toml"), bytes, 100).unwrap_err();
        assert!(
            matches!(
                err,
                InputError::TooLarge {
                    limit: 100,
                    at: Some(Place {
                        line: 2,
                        column: 91
                    }),
                    ..
                }
            ),
            "{err:?}"
        );
        // A character cut by the limit is not an invalid one.
        let err = text_of(Path::new("t.toml"), "aé".as_bytes().to_vec(), 2).unwrap_err();
        assert!(matches!(err, InputError::TooLarge { .. }), "{err:?}");
    }

    #[test]
    fn read_text_refuses_a_directory_and_a_device_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_text(dir.path(), 1024),
            Err(InputError::NotRegular {
                kind: "a directory",
                ..
            })
        ));
        assert!(matches!(
            read_text(Path::new("/dev/zero"), 1024),
            Err(InputError::NotRegular {
                kind: "a character device",
                ..
            })
        ));
    }

    #[test]
    fn a_located_error_says_file_line_column_then_what() {
        let sut = Located::at("s.toml", "a = 1\nbé = x\n", 11, "expected a number");
        assert_eq!(sut.place, Place { line: 2, column: 5 });
        assert_eq!(sut.to_string(), "s.toml:2:5: expected a number");
    }
}
