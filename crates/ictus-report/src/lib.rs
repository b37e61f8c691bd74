//! Reports of ictus results: the seeds' tables reproduced for one machine, in
//! Markdown and in a self-contained HTML page with plots, several runs compared
//! side by side, and one record's human view on a terminal.
//!
//! The report is organised by probe: [`probes`] holds one file per probe with all
//! the report says about it (terminal view, seed tables, plots, compare rules); the
//! backends ([`terminal`], [`mod@markdown`], [`mod@html`], [`mod@compare`]) lay that out and name
//! no probe.
//!
//! A results directory (what `ictus survey` writes) holds one record per step, the
//! survey's manifest (`survey.json`) and the platform audit (`doctor.json`); a single
//! record file works too. Nothing here prints: every function returns a `String` or
//! writes files.
//!
//! ```no_run
//! use std::path::Path;
//! let results = ictus_report::load(Path::new("ictus-results/vm-20260101T000000Z"))?;
//! let (md, html) = ictus_report::write_reports(Path::new("ictus-results/vm-20260101T000000Z"), &results)?;
//! let other = ictus_report::load(Path::new("ictus-results/other-host"))?;
//! let side_by_side = ictus_report::compare_markdown(&[results, other], 0);
//! # let _ = (md, html, side_by_side);
//! # Ok::<(), ictus_report::ReportError>(())
//! ```
#![forbid(unsafe_code)]

pub mod compare;
mod format;
pub mod html;
pub mod markdown;
mod plots;
pub mod probes;
pub mod results;
pub mod scenario;
pub mod tables;
pub mod terminal;

use std::path::{Path, PathBuf};

use ictus_probe::record::RecordError;

pub use compare::compare_markdown;
pub use html::{compare_html, html};
pub use markdown::markdown;
pub use results::{Results, Run, load};

/// The Markdown report's file name in a results directory.
pub const MARKDOWN_FILE: &str = "report.md";
/// The HTML report's file name in a results directory.
pub const HTML_FILE: &str = "report.html";

/// Why results could not be read or a report not written. Every message names the
/// file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A record file is unreadable, not JSON, foreign, or of another schema version.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// An input file could not be read: missing, not a regular file, too large, not
    /// UTF-8.
    #[error(transparent)]
    Input(#[from] ictus_os::fs::InputError),
    /// A field of `survey.json` of the wrong type.
    #[error("{path}:{line}:{column}: {field}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the value.
        line: usize,
        /// 1-based column of the value.
        column: usize,
        /// The field.
        field: ictus_os::json::JsonPath,
        /// What was expected, and what was found.
        message: String,
    },
    /// A directory could not be read.
    #[error("{path}: cannot read")]
    Io {
        /// The file or directory.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `survey.json`, `doctor.json` or a scenario's `result.json` is not valid JSON of
    /// its kind: a syntax error, or a value of the wrong type placed at its start.
    #[error("{path}:{line}:{column}: {message}")]
    Json {
        /// The file.
        path: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What was expected.
        message: String,
    },
    /// `survey.json` (or a scenario's `result.json`) of another schema, placed at its
    /// `schema` (or at the top when it has none).
    #[error("{path}:{line}:{column}: schema '{found}', expected '{expected}'")]
    Schema {
        /// The file.
        path: String,
        /// 1-based line of the `schema` value.
        line: usize,
        /// 1-based column of it.
        column: usize,
        /// Its schema field.
        found: String,
        /// The schema expected.
        expected: &'static str,
    },
    /// `survey.json` (or a scenario's `result.json`) of a version this ictus cannot
    /// read, placed at the version.
    #[error(
        "{path}:{line}:{column}: version {found} is not supported by this ictus (it reads version {supported}); use the ictus version that wrote it"
    )]
    Version {
        /// The file.
        path: String,
        /// 1-based line of the version value.
        line: usize,
        /// 1-based column of it.
        column: usize,
        /// Its version.
        found: u64,
        /// The version this ictus reads.
        supported: u32,
    },
    /// A directory without any ictus result in it.
    #[error("{path}: no ictus results here (no record, survey.json or doctor.json)")]
    Empty {
        /// The directory.
        path: String,
    },
    /// A report could not be written (the file names itself).
    #[error(transparent)]
    Write(#[from] ictus_os::fs::OutputError),
    /// A result could not be serialized (a number JSON cannot hold).
    #[error("{path}: cannot serialize the result: {message}")]
    Serialize {
        /// The file it was for.
        path: String,
        /// What serde said.
        message: String,
    },
}

/// Writes `report.md` and `report.html` into `dir` and returns their paths. Each is
/// written whole or not at all ([`ictus_os::fs::write_atomic`]); both paths are
/// checked before either is written.
pub fn write_reports(dir: &Path, r: &Results) -> Result<(PathBuf, PathBuf), ReportError> {
    let md = dir.join(MARKDOWN_FILE);
    let html_path = dir.join(HTML_FILE);
    ictus_os::fs::check_writable(&md)?;
    ictus_os::fs::check_writable(&html_path)?;
    for (path, text) in [(&md, markdown(r)), (&html_path, html(r))] {
        ictus_os::fs::write_atomic(path, text)?;
    }
    Ok((md, html_path))
}
