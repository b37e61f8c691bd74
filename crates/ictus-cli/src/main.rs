//! `ictus`: the command-line face of the ictus toolkit. Parses arguments, calls the
//! libraries, prints. Nothing else lives here.
#![forbid(unsafe_code)]
// The binary is where printing belongs.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod common;
mod doctor;
mod exec;
mod import;
mod keys;
mod load;
mod probe_cmd;
mod refusal;
mod replay;
mod report;
mod run;
mod run_view;
mod scenario;
mod shield;
mod survey;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use ictus_probe::progress::Progress;

use crate::args::{Cli, Command};

/// Exit code for bad input (as clap uses for usage errors).
const EXIT_USAGE: u8 = 2;
/// Exit code for a failure while running.
const EXIT_FAILURE: u8 = 1;

/// An error with the exit code it deserves.
pub(crate) struct Failure {
    code: u8,
    error: anyhow::Error,
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse_hardened() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
            }
            eprintln!("ictus: {}", usage_line(&e.render().to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("ictus: {}", one_line(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// clap's message in one line, without the usage block: the lines up to the first
/// blank one or `Usage:` (so "the following required arguments were not provided:"
/// keeps the names that follow it).
fn usage_line(rendered: &str) -> String {
    let words: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    match words.join(" ") {
        w if w.is_empty() => "invalid arguments".to_string(),
        w => w.trim_start_matches("error: ").to_string(),
    }
}

/// An error and its causes in one line, each said once: a cause whose words are
/// already in the line (an OS error a message quoted) is not repeated.
fn one_line(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Doctor(args) => {
            let mut audit = ictus_probe::doctor::audit();
            if let Some(dir) = &args.keys {
                doctor::check_keys(&mut audit, dir)
                    .map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
            }
            if args.json {
                say(&(serde_json::to_string_pretty(&audit)? + "\n"))?;
            } else {
                say(&doctor::render(&audit))?;
            }
            Ok(())
        }
        Command::Import(args) => import::run(&args),
        Command::Survey(args) => {
            let progress = stoppable_progress()?;
            survey::run(&args, &progress)
        }
        Command::Report(args) => report::report(&args),
        Command::Compare(args) => report::compare(&args),
        Command::Shield(args) => shield::run(&args),
        Command::Scenario(args) => {
            let progress = stoppable_progress()?;
            scenario::run(&args, &progress)
        }
        Command::Exec(args) => exec::run(&args),
        Command::Run(args) => {
            let progress = stoppable_progress()?;
            run::run(&args, &progress)
        }
        Command::Node(args) => {
            let progress = stoppable_progress()?;
            run::node(&args, &progress)
        }
        Command::Ctl(args) => run::ctl(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Keys(args) => keys::run(&args),
        Command::Subsystem => run::host(),
        Command::Load(args) => {
            let progress = stoppable_progress()?;
            load::run(&args, &progress)
        }
        Command::Probe(probe) => {
            let progress = stoppable_progress()?;
            probe_cmd::dispatch(&probe.command, &progress)
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

/// The progress of a command that Ctrl-C (and SIGTERM) asks to stop: it returns what
/// it has, marked incomplete. A second Ctrl-C ends the process at once.
fn stoppable_progress() -> anyhow::Result<Arc<Progress>> {
    let progress = Arc::new(Progress::new());
    let handler = progress.clone();
    ctrlc::set_handler(move || {
        if handler.stop_requested() {
            let _ = std::io::stderr().write_all(b"\nictus: stopped\n");
            std::process::exit(130);
        }
        handler.request_stop();
    })?;
    Ok(progress)
}
