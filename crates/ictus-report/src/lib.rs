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
mod error;
mod format;
mod glance;
pub mod html;
pub mod markdown;
mod plots;
pub mod probes;
pub mod results;
pub mod scenario;
pub mod tables;
pub mod terminal;

use std::path::{Path, PathBuf};

pub use compare::compare_markdown;
pub use error::ReportError;
pub use glance::terminal as glance_table;
pub use html::{compare_html, html};
pub use markdown::markdown;
pub use results::{Results, Run, load};

/// The Markdown report's file name in a results directory.
pub const MARKDOWN_FILE: &str = "report.md";
/// The HTML report's file name in a results directory.
pub const HTML_FILE: &str = "report.html";

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
