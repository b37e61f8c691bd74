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
    /// A field of `survey.json` of the wrong type: placed, its message starting with
    /// the field.
    #[error("{at}")]
    Invalid {
        /// Where, and what.
        at: ictus_os::fs::Located<String>,
        /// The field.
        field: ictus_os::json::JsonPath,
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
    #[error(transparent)]
    Json(ictus_os::fs::Located<String>),
    /// `survey.json` (or a scenario's `result.json`) of another schema, placed at its
    /// `schema` (or at the top when it has none).
    #[error("{at}")]
    Schema {
        /// Where, and what.
        at: ictus_os::fs::Located<String>,
        /// Its schema field.
        found: String,
        /// The schema expected.
        expected: &'static str,
    },
    /// `survey.json` (or a scenario's `result.json`) of a version this ictus cannot
    /// read, placed at the version.
    #[error("{at}")]
    Version {
        /// Where, and what.
        at: ictus_os::fs::Located<String>,
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

impl ReportError {
    /// Where in the file, for an error about its content.
    pub fn place(&self) -> Option<ictus_os::json::Place> {
        match self {
            ReportError::Record(r) => r.place(),
            ReportError::Json(at)
            | ReportError::Invalid { at, .. }
            | ReportError::Schema { at, .. }
            | ReportError::Version { at, .. } => Some(at.place),
            _ => None,
        }
    }
}
