//! Reports of ictus results: the seeds' tables reproduced for one machine, in
//! Markdown and in a self-contained HTML page with plots, several runs compared
//! side by side, and one record's human view on a terminal.
//!
//! The report is organised by probe: [`probes`] holds one file per probe with all
//! the report says about it (terminal view, seed tables, plots, compare rules). What a
//! report says is built once as a document (title and blocks: the front, the verdict
//! and its glance, the sections with their figures, the warnings), from results, from
//! a comparison ([`mod@compare`]) or from a scenario ([`scenario`]); the backends
//! (Markdown, HTML, the [`terminal`]) lay the document out, and import neither each
//! other nor the content (`tests/backends.rs`).
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
mod content;
mod doc;
mod error;
mod format;
mod glance;
mod html;
mod markdown;
mod plots;
pub mod probes;
pub mod results;
pub mod scenario;
pub mod tables;
pub mod terminal;

use std::path::{Path, PathBuf};

pub use error::ReportError;
pub use results::{Results, Run, load};

/// The Markdown report's file name in a results directory.
pub const MARKDOWN_FILE: &str = "report.md";
/// The HTML report's file name in a results directory.
pub const HTML_FILE: &str = "report.html";

/// The Markdown report: title and host, the verdict, contents, then the seeds'
/// tables in order, why the misses, warnings and the survey's steps (the plots are in
/// the HTML report).
pub fn markdown(r: &Results) -> String {
    markdown::layout(&content::report(r))
}

/// The HTML report: the Markdown report's content with inline SVG plots, in one
/// self-contained file (no script, no network).
pub fn html(r: &Results) -> String {
    html::layout(&content::report(r))
}

/// The comparison in Markdown: one column per run, ratios against `reference` (an
/// index into `runs`; out of range means the first).
pub fn compare_markdown(runs: &[Results], reference: usize) -> String {
    markdown::layout(&compare::document(runs, reference))
}

/// The comparison as HTML: the same tables as [`compare_markdown`], and the wake-up
/// latency tails of every run overlaid per configuration.
pub fn compare_html(runs: &[Results], reference: usize) -> String {
    html::layout(&compare::document(runs, reference))
}

/// The verdict at a glance, for a terminal (`ictus survey`'s end): per configuration
/// of the loop, whether it held, its misses, its worst step, the cause that cost most,
/// its misses as time by cause and the share the counters account for; then the
/// advice that follows from each configuration's costliest cause. `None` without a
/// configuration.
pub fn glance_table(r: &Results) -> Option<String> {
    glance::model(r).map(|g| terminal::glance(&g))
}

/// Writes `report.md` and `report.html` into `dir` and returns their paths. Each is
/// written whole or not at all ([`ictus_os::fs::write_atomic`]); both paths are
/// checked before either is written. The report is built once and laid out twice.
pub fn write_reports(dir: &Path, r: &Results) -> Result<(PathBuf, PathBuf), ReportError> {
    let md = dir.join(MARKDOWN_FILE);
    let html_path = dir.join(HTML_FILE);
    ictus_os::fs::check_writable(&md)?;
    ictus_os::fs::check_writable(&html_path)?;
    let doc = content::report(r);
    for (path, text) in [
        (&md, markdown::layout(&doc)),
        (&html_path, html::layout(&doc)),
    ] {
        ictus_os::fs::write_atomic(path, text)?;
    }
    Ok((md, html_path))
}
