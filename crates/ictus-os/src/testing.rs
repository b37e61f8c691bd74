//! Test support: a test that cannot run on this machine (no root, one CPU, no
//! Chromium...) says so where a person and CI see it, instead of passing in silence.
//!
//! ```
//! // In a test: when the machine lacks what it needs, skip it, visibly.
//! if ictus_os::facts::online_cpus().len() < 2 {
//!     ictus_os::testing::skipped("a_two_cpu_test", "needs two online CPUs");
//! }
//! ```

use std::io::Write as _;

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
}
