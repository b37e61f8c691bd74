//! What every command shares with the front: the failure it returns with the exit
//! code it deserves, its printing to stdout, and the version it says.

use std::io::Write;

/// `ictus --version`: the version and the commit it was built from (`unknown` where
/// the build had no git; see build.rs).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ICTUS_COMMIT"),
    ")"
);

/// Exit code for bad input (as clap uses for usage errors).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code for a failure while running.
pub(crate) const EXIT_FAILURE: u8 = 1;

/// An error with the exit code it deserves.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl Failure {
    /// Bad input: the user can fix the command line.
    pub(crate) fn usage(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: EXIT_USAGE,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            code: EXIT_FAILURE,
            error: error.into(),
        }
    }
}

/// Writes `text` to stdout. A reader that went away (`ictus ... | head`) is not an
/// error: the output is simply cut, as with every Unix tool.
pub(crate) fn say(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
