//! `ictus report DIR` and `ictus compare A B ...`: render results with ictus-report.

use std::path::PathBuf;

use anyhow::anyhow;

use crate::Failure;

#[derive(clap::Args, Debug)]
pub(crate) struct ReportArgs {
    /// A results directory (`ictus-results/HOST-TIMESTAMP/`) or a single record file.
    /// For a directory, report.md and report.html are written into it; for a file,
    /// beside it.
    dir: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct CompareArgs {
    /// Two or more results directories or record files.
    #[arg(num_args = 2.., required = true)]
    paths: Vec<PathBuf>,
    /// Which run the ratios are against, counting from 1 (default: the first).
    #[arg(long)]
    reference: Option<usize>,
    /// Also write the comparison as HTML, with overlaid latency tails, to this file.
    #[arg(long)]
    html: Option<PathBuf>,
}

pub(crate) fn report(args: &ReportArgs) -> Result<(), Failure> {
    let results = ictus_report::load(&args.dir).map_err(Failure::usage)?;
    let dir = if args.dir.is_dir() {
        args.dir.clone()
    } else {
        args.dir
            .parent()
            .map(|p| p.to_path_buf())
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."))
    };
    let (md, html) = ictus_report::write_reports(&dir, &results).map_err(|e| match e {
        // The directory cannot take the reports: the user can fix that.
        ictus_report::ReportError::Write(_) => Failure::usage(e),
        other => other.into(),
    })?;
    crate::say(&format!("{}\n{}\n", md.display(), html.display()))
}

pub(crate) fn compare(args: &CompareArgs) -> Result<(), Failure> {
    let reference = match args.reference {
        None => 0,
        Some(n) if (1..=args.paths.len()).contains(&n) => n - 1,
        Some(n) => {
            return Err(Failure::usage(anyhow!(
                "--reference {n}: there are {} runs, counted from 1",
                args.paths.len()
            )));
        }
    };
    if let Some(path) = &args.html {
        crate::common::check_output(path)?;
    }
    let runs = args
        .paths
        .iter()
        .map(|p| ictus_report::load(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::usage)?;
    if let Some(path) = &args.html {
        crate::common::write_output(path, ictus_report::compare_html(&runs, reference))?;
    }
    crate::say(&ictus_report::compare_markdown(&runs, reference))
}

/// Renders a results directory's reports (after a survey); returns the HTML report's
/// path, or what went wrong in one line.
pub(crate) fn write(dir: &std::path::Path) -> Result<PathBuf, String> {
    let results = ictus_report::load(dir).map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
    let (_, html) = ictus_report::write_reports(dir, &results)
        .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
    Ok(html)
}
