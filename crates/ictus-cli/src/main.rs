//! `ictus`: the command-line face of the ictus toolkit. Parses arguments, calls the
//! libraries, prints. Nothing else lives here.
#![forbid(unsafe_code)]
// The binary is where printing belongs.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod built;
mod common;
mod doctor;
mod exec;
mod help;
#[cfg(feature = "hosts")]
mod hosts;
mod import;
#[cfg(feature = "hosts")]
mod keys;
mod load;
mod manual;
mod outcome;
#[cfg(feature = "page")]
mod page;
mod probe_cmd;
mod refusal;
#[cfg(feature = "record")]
mod replay;
mod report;
mod run;
mod run_args;
mod run_view;
mod scenario;
mod shield;
mod survey;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use ictus_probe::progress::Progress;

use crate::args::{Cli, Command};
pub(crate) use crate::outcome::{EXIT_USAGE, Failure, VERSION, say};
// A feature left out of this build: what needs it, refused (see `built`).
#[cfg(not(feature = "page"))]
use crate::built::page;
#[cfg(not(feature = "record"))]
use crate::built::replay;
#[cfg(not(feature = "hosts"))]
use crate::built::{hosts, keys};

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

/// clap's message in one line, without the usage block: its first paragraph (so
/// "the following required arguments were not provided:" keeps the names that follow
/// it), then its tips ("a similar argument exists: '--interval'"), then the help to
/// read, named after the command the usage block is about.
fn usage_line(rendered: &str) -> String {
    let lines: Vec<&str> = rendered.lines().map(str::trim).collect();
    let first: Vec<&str> = lines
        .iter()
        .copied()
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    let mut out = match first.join(" ") {
        w if w.is_empty() => "invalid arguments".to_string(),
        w => w.trim_start_matches("error: ").to_string(),
    };
    for tip in lines.iter().filter(|l| l.starts_with("tip: ")) {
        out += "; ";
        out += tip;
    }
    let command: Vec<&str> = lines
        .iter()
        .find_map(|l| l.strip_prefix("Usage:"))
        .unwrap_or_default()
        .split_whitespace()
        .take_while(|w| {
            w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !w.starts_with('-')
        })
        .collect();
    if !command.is_empty() {
        out += &format!("; see '{} --help'", command.join(" "));
    }
    out
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
        Command::Completions(args) => manual::completions(&args),
        Command::Man(args) => manual::man(&args),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The one line ictus prints for `args` refused by the command line.
    fn refusal(args: &[&str]) -> String {
        let e = Cli::try_parse_hardened_from(std::iter::once("ictus").chain(args.iter().copied()))
            .unwrap_err();
        usage_line(&e.render().to_string())
    }

    #[test]
    fn a_typo_keeps_clap_s_suggestion_on_the_one_line() {
        let timer = ictus_probe::registry::ProbeId::Timer.name();
        let sut = refusal(&["probe", timer, "--intervall", "1ms"]);
        assert!(
            sut.starts_with("unexpected argument '--intervall' found"),
            "{sut}"
        );
        assert!(
            sut.contains("tip: a similar argument exists: '--interval'"),
            "{sut}"
        );
        assert!(sut.ends_with("; see 'ictus probe timer --help'"), "{sut}");
        assert!(!sut.contains('\n'));
        let sut = refusal(&["surveyy"]);
        assert!(
            sut.contains("tip: a similar subcommand exists: 'survey'"),
            "{sut}"
        );
        assert!(sut.ends_with("see 'ictus --help'"), "{sut}");
    }

    #[test]
    fn missing_arguments_are_named() {
        let sut = refusal(&["replay", "run.mcap"]);
        assert!(sut.contains("--subsystem"), "{sut}");
        assert!(sut.ends_with("see 'ictus replay --help'"), "{sut}");
    }
}
