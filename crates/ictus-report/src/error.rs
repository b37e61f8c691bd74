//! Why a report could not be made ([`ReportError`]).

use ictus_probe::record::RecordError;

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
