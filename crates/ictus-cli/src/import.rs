//! `ictus import cyclictest FILE`: another tool's results as a RunRecord.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::Failure;

/// `ictus import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    #[command(subcommand)]
    pub(crate) source: ImportSource,
}

/// The tools ictus reads.
#[derive(Debug, Subcommand)]
pub(crate) enum ImportSource {
    /// A `cyclictest --json=FILE` output, run with -h N so it has a histogram.
    Cyclictest {
        /// The cyclictest JSON file.
        file: PathBuf,
        /// Write the record here instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// Converts and writes the record (JSON) to stdout or `--output`.
pub(crate) fn run(args: &ImportArgs) -> Result<(), Failure> {
    match &args.source {
        ImportSource::Cyclictest { file, output } => {
            if let Some(path) = output {
                crate::common::check_output(path)?;
            }
            let record = ictus_probe::import::cyclictest(file).map_err(Failure::usage)?;
            let json = serde_json::to_string_pretty(&record)? + "\n";
            match output {
                Some(path) => crate::common::write_output(path, json)?,
                None => crate::say(&json)?,
            }
            Ok(())
        }
    }
}
