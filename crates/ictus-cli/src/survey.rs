//! `ictus survey`: the main job, from one command to a results directory with a
//! report a person wants to read.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use ictus_probe::progress::Progress;
use ictus_probe::survey::{self, Manifest, Profile, StepStatus, SurveyOptions, Target};

use crate::Failure;
use crate::common::{self, Bar};

/// Survey lengths on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    /// About 3 minutes on 2 cores.
    Quick,
    /// About 5 times longer.
    Standard,
    /// Long runs for the tails (a million timer samples per configuration).
    Full,
    /// A tenth of quick, to check that everything runs (tests).
    #[value(hide = true)]
    Smoke,
}

/// Options of `ictus survey`.
#[derive(Debug, Args)]
pub(crate) struct SurveyArgs {
    /// How long the survey runs.
    #[arg(long, value_enum, default_value = "quick")]
    pub(crate) profile: ProfileArg,
    /// The loop the verdict is about: its frequency (seed 000's gesture loop: 10kHz).
    #[arg(long, default_value = "10kHz", value_parser = crate::loop_cmd::parse_frequency)]
    pub(crate) target: f64,
    /// The loop's cores.
    #[arg(long, default_value_t = 2)]
    pub(crate) cores: usize,
    /// Bytes the loop exchanges at each rendezvous (e.g. 512B).
    #[arg(long, default_value = "512B", value_parser = parse_bytes)]
    pub(crate) exchange: usize,
    /// CPUs to survey: a list like 0-3, or "all".
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) cpus: String,
    /// Where results directories go.
    #[arg(long, default_value = "ictus-results")]
    pub(crate) results: PathBuf,
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim().trim_end_matches(['B', 'b']);
    let (n, k) = match t.strip_suffix(['K', 'k']) {
        Some(n) => (n, 1024),
        None => (t, 1),
    };
    let limit = ictus_probe::r#loop::MAX_EXCHANGE_BYTES;
    n.trim()
        .parse::<usize>()
        .map_err(|_| format!("'{s}' is not a size (expected e.g. 512B, 4K)"))?
        .checked_mul(k)
        .filter(|&b| b <= limit)
        .ok_or_else(|| format!("{s} is over the limit of {limit} bytes"))
}

/// Plans, runs, writes the directory and the reports, and prints the summary.
pub(crate) fn run(args: &SurveyArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let opts = SurveyOptions {
        profile: match args.profile {
            ProfileArg::Quick => Profile::Quick,
            ProfileArg::Standard => Profile::Standard,
            ProfileArg::Full => Profile::Full,
            ProfileArg::Smoke => Profile::Smoke,
        },
        target: Target {
            frequency_hz: args.target,
            cores: args.cores,
            exchange_bytes: args.exchange,
        },
        cpus: common::cpus("--cpus", &args.cpus)?,
    };
    if args.cores == 0 {
        return Err(Failure::usage(anyhow::anyhow!(
            "--cores must be at least 1"
        )));
    }
    let steps = survey::plan(&opts).map_err(Failure::usage)?;
    let dir = survey::results_dir(&args.results);
    // A directory that cannot take the results is bad input, found before the run.
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::Error::new(e).context(format!("{}: cannot create", dir.display())))
        .map_err(Failure::usage)?;
    common::check_output(&dir.join(survey::MANIFEST_FILE))?;
    let expected = steps.iter().map(|s| s.estimate()).sum();
    let out = crate::args::OutputArgs {
        json: false,
        output: None,
    };
    let bar = Bar::start(progress, expected, &out, "of the survey");
    let manifest = survey::run(&opts, steps, &dir, std::env::args().collect(), progress);
    bar.done(progress);
    let manifest = manifest?;
    let reports = crate::report::write(&dir);
    crate::say(&summary(&manifest, &dir, reports))
}

/// The terminal's last words: the verdict, what ran, where the report is.
fn summary(m: &Manifest, dir: &std::path::Path, reports: Result<PathBuf, String>) -> String {
    let mut out = String::new();
    if !m.complete {
        let _ = writeln!(
            out,
            "INCOMPLETE: the survey was stopped; the results cover what ran."
        );
    }
    match &m.verdict {
        Some(v) => {
            let _ = writeln!(out, "{}", v.line);
            for e in &v.evidence {
                let _ = writeln!(out, "  - {e}");
            }
            if let Some(s) = &v.sound_line {
                let _ = writeln!(out, "{s}");
            }
        }
        None => {
            let _ = writeln!(out, "No verdict: the loop probe did not run.");
        }
    }
    let count = |s: StepStatus| m.steps.iter().filter(|x| x.status == s).count();
    let _ = writeln!(
        out,
        "{} steps done, {} skipped, {} failed, {} not run.",
        count(StepStatus::Done),
        count(StepStatus::Skipped),
        count(StepStatus::Failed),
        count(StepStatus::NotRun)
    );
    for s in m.steps.iter().filter(|s| s.status == StepStatus::Failed) {
        let _ = writeln!(
            out,
            "  failed: {}: {}",
            s.id,
            s.reason.as_deref().unwrap_or("?")
        );
    }
    match reports {
        Ok(path) => {
            let _ = writeln!(out, "Report: {}", path.display());
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "The report could not be written ({e}); the records are in {}",
                dir.display()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("512B"), Ok(512));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("64"), Ok(64));
        assert!(parse_bytes("lots").is_err());
    }
}
