//! Input files (schedules, cell tables, hub tables) read safely, and places in
//! them found fast.
//!
//! [`read_text`] refuses what is not a regular file before opening it (a FIFO
//! would block forever, `/dev/zero` would never end, a directory has no text),
//! reads at most [`MAX_INPUT_BYTES`], and checks that the bytes are UTF-8,
//! reporting the line and column of the first byte past the limit or of the
//! first invalid byte. [`LineIndex`] turns byte offsets into 1-based lines and
//! columns (in characters) in `O(log lines + line length)`, after one pass over
//! the text, so that checking every element of a large file stays linear.
//!
//! ```
//! use ictus_exec::text::LineIndex;
//! let index = LineIndex::new("a = 1\nbé = 2\n");
//! assert_eq!(index.locate(9), (2, 3), "é is one character");
//! ```

use std::io::{self, Read};
use std::path::Path;

use thiserror::Error;

/// The largest input file read: 16 MiB (a schedule or a cell table is far
/// smaller; the limit keeps a wrong path from filling memory).
pub const MAX_INPUT_BYTES: usize = 16 << 20;

/// The start of every line of a text, for locating byte offsets.
#[derive(Clone, Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset of the first character of each line (the first is 0).
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the lines of `text` (one pass).
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The 1-based line and column (in characters) of byte `offset`, clamped
    /// to the end of the text and down to a character boundary.
    pub fn locate(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        // The last line starting at or before `offset` (starts[0] = 0 <= offset).
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        let column = self.text[start..offset].chars().count() + 1;
        (line, column)
    }
}

/// Why an input file could not be read as text.
#[derive(Debug, Error)]
pub enum InputError {
    /// Not a regular file: a directory, a FIFO, a device or a socket.
    #[error("not a regular file ({kind})")]
    NotRegular {
        /// What it is, in words (`a directory`, `a FIFO`, ...).
        kind: &'static str,
    },
    /// Larger than [`MAX_INPUT_BYTES`]; the place is that of the first byte past it.
    #[error("the file is larger than {} MiB", MAX_INPUT_BYTES >> 20)]
    TooLarge {
        /// 1-based line of the first byte past the limit.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
    },
    /// Not UTF-8; the place is that of the first invalid byte.
    #[error("invalid UTF-8")]
    InvalidUtf8 {
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
    },
    /// The file could not be opened or read.
    #[error("cannot read it")]
    Io(#[source] io::Error),
}

impl InputError {
    /// The place in the file the error is about, when it is about its content.
    pub fn place(&self) -> Option<(usize, usize)> {
        match *self {
            InputError::TooLarge { line, column } | InputError::InvalidUtf8 { line, column } => {
                Some((line, column))
            }
            InputError::NotRegular { .. } | InputError::Io(_) => None,
        }
    }
}

/// Reads `path` as UTF-8 text: a regular file of at most [`MAX_INPUT_BYTES`]. The
/// file is opened by [`ictus_os::fs::open_regular`], so a FIFO or a device is refused
/// without blocking.
pub fn read_text(path: &Path) -> Result<String, InputError> {
    let (file, _) = ictus_os::fs::open_regular(path).map_err(|e| match e {
        ictus_os::fs::InputError::NotRegular { kind, .. } => InputError::NotRegular { kind },
        ictus_os::fs::InputError::Io { source, .. } => InputError::Io(source),
        other => InputError::Io(io::Error::other(other.to_string())),
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(InputError::Io)?;
    text_of(bytes)
}

/// Checks that `bytes` are UTF-8 text of at most [`MAX_INPUT_BYTES`].
pub fn text_of(bytes: Vec<u8>) -> Result<String, InputError> {
    let limit = bytes.len().min(MAX_INPUT_BYTES);
    if let Err(e) = std::str::from_utf8(&bytes[..limit]) {
        // A character cut by the limit is not an invalid one.
        if e.error_len().is_some() || bytes.len() <= MAX_INPUT_BYTES {
            let (line, column) = ictus_os::fs::line_column(&bytes, e.valid_up_to());
            return Err(InputError::InvalidUtf8 { line, column });
        }
    }
    if bytes.len() > MAX_INPUT_BYTES {
        let (line, column) = ictus_os::fs::line_column(&bytes, MAX_INPUT_BYTES);
        return Err(InputError::TooLarge { line, column });
    }
    String::from_utf8(bytes).map_err(|e| {
        let (line, column) = ictus_os::fs::line_column(e.as_bytes(), e.utf8_error().valid_up_to());
        InputError::InvalidUtf8 { line, column }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters() {
        let sut = LineIndex::new("ab\ncé\nxyz");
        assert_eq!(sut.locate(0), (1, 1));
        assert_eq!(sut.locate(2), (1, 3));
        assert_eq!(sut.locate(3), (2, 1));
        assert_eq!(sut.locate(6), (2, 3));
        assert_eq!(sut.locate(5), (2, 2), "inside é: its start");
        assert_eq!(sut.locate(99), (3, 4));
        assert_eq!(LineIndex::new("").locate(5), (1, 1));
    }

    #[test]
    fn invalid_utf8_is_placed_at_its_first_byte() {
        let err = text_of(b"a = 1\nb = \"\xff\"\n".to_vec()).unwrap_err();
        assert!(matches!(
            err,
            InputError::InvalidUtf8 { line: 2, column: 6 }
        ));
        assert_eq!(err.to_string(), "invalid UTF-8");
        let err = text_of(b"\xc3\xa9\xc3".to_vec()).unwrap_err();
        assert!(matches!(
            err,
            InputError::InvalidUtf8 { line: 1, column: 2 }
        ));
    }

    #[test]
    fn a_file_over_the_limit_is_refused_at_the_first_byte_past_it() {
        let mut bytes = vec![b'#'; MAX_INPUT_BYTES + 10];
        bytes[9] = b'\n';
        let err = text_of(bytes).unwrap_err();
        assert!(
            matches!(err, InputError::TooLarge { line: 2, column } if column == MAX_INPUT_BYTES - 9),
            "{err:?}"
        );
    }

    #[test]
    fn a_directory_and_a_fifo_are_refused_before_opening() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_text(dir.path()).unwrap_err();
        assert!(matches!(
            err,
            InputError::NotRegular {
                kind: "a directory"
            }
        ));
        let err = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(
            err,
            InputError::NotRegular {
                kind: "a character device"
            }
        ));
        let fifo = dir.path().join("fifo");
        if ictus_os::testing::mkfifo(&fifo).is_ok() {
            let err = read_text(&fifo).unwrap_err();
            assert!(matches!(err, InputError::NotRegular { kind: "a FIFO" }));
        }
    }
}
