//! The command line, declared with clap.

use clap::builder::ValueHint;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// ictus: can this machine keep my beat? Measure real-time latency, set the machine
/// up, run cyclic loops.
#[derive(Debug, Parser)]
#[command(name = "ictus", version = crate::VERSION, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Cli {
    /// Parses the process's arguments with the hardened command line ([`harden`]).
    pub(crate) fn try_parse_hardened() -> Result<Self, clap::Error> {
        Self::try_parse_hardened_from(std::env::args_os())
    }

    /// Parses `args` (the program name first) with the hardened command line.
    pub(crate) fn try_parse_hardened_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = command();
        let matches = cmd.try_get_matches_from_mut(args)?;
        Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
    }
}

/// The command line as the parser, the man pages, the completions and `docs/cli.md`
/// see it: hardened ([`harden`]), each command's examples after its help.
pub(crate) fn command() -> clap::Command {
    crate::help::with_examples(harden(Cli::command()), "")
}

/// The command line with one rule applied to every option of every subcommand: an
/// option's value may start with `-`, so `--loops -1`, `--duration -1s` or
/// `--sizes -4K` reach the option's own parser and are refused naming the option
/// and what it expects, instead of clap's "unexpected argument '-1'", which names
/// none. Exempt are options taking a path (a file named `--json` is a typo, not a
/// wish) and positionals (`ictus exec ... -- cmd -1` keeps its trailing words).
pub(crate) fn harden(cmd: clap::Command) -> clap::Command {
    let cmd = cmd.mut_args(|arg| {
        let path = matches!(
            arg.get_value_hint(),
            ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
        );
        if arg.is_positional() || path || !arg.get_action().takes_values() {
            arg
        } else {
            arg.allow_hyphen_values(true)
        }
    });
    cmd.mut_subcommands(harden)
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// The main job: audit, then every probe over the configurations and loads, then
    /// the verdict on a target loop; writes a results directory with a report.
    Survey(crate::survey::SurveyArgs),
    /// Audit this machine's real-time features: one check per feature, with advice.
    Doctor(DoctorArgs),
    /// Run one measurement.
    Probe(ProbeArgs),
    /// Turn another tool's results into an ictus record (cyclictest --json).
    Import(crate::import::ImportArgs),
    /// Run background loads (cpu, disk, net, syscall, cachemiss, membw) to measure under.
    Load(crate::load::LoadCommandArgs),
    /// Render a results directory (or one record) again: writes report.md and report.html.
    Report(crate::report::ReportArgs),
    /// Set two or more results directories or records side by side, with ratios.
    Compare(crate::report::CompareArgs),
    /// Partition the CPUs into RT and NRT sets (cpusets, tasks, IRQs), with exact undo.
    Shield(crate::shield::ShieldArgs),
    /// Test a load balancer: run a scenario's fake tasks under stock Linux placement or
    /// the ictus balancer (seed 002 §5.3); writes result.json, report.md, timeline.svg.
    Scenario(crate::scenario::ScenarioArgs),
    /// Run a command in a task class: rt0 (FIFO 99, one RT CPU), rt1 (FIFO/RR 1-98,
    /// RT and NRT CPUs) or normal.
    Exec(crate::exec::ExecArgs),
    /// Run a cyclic executive schedule (subsystems, cells, frames) with a live status
    /// line; writes a RunRecord with per-subsystem statistics.
    Run(crate::run_args::RunArgs),
    /// Be one host of a schedule that spans hosts: its local coordinator (seed 003).
    /// Runs this host's subsystems on the main host's beat (`ictus run` there),
    /// copies in the cells other hosts publish and publishes its own.
    Node(crate::run_args::NodeArgs),
    /// Command a running schedule: run, pause, off or a mode; status; stop.
    Ctl(crate::run_args::CtlArgs),
    /// Run one subsystem of a recording (`ictus run --record`) again against its
    /// recorded inputs and compare its outputs with the recorded ones, bit for bit.
    Replay(crate::replay::ReplayArgs),
    /// Make the keys of a run across hosts: its CA, and a certificate and key per host
    /// and per reader, for TLS with mutual authentication.
    Keys(crate::keys::KeysArgs),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the man page ictus(1), or write one page per command (--out DIR).
    Man(ManArgs),
    /// Hosts a built-in subsystem in a process of its own: what `ictus run` launches
    /// for `process = "own"` (not for direct use).
    #[command(hide = true)]
    Subsystem,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print the audit as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also check a run's keys (a keys folder or a host's bundle): when each
    /// certificate ends, warned 14 days before.
    #[arg(long, value_name = "FOLDER")]
    pub(crate) keys: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    #[command(subcommand)]
    pub(crate) command: ProbeCommand,
}

/// One subcommand per probe, generated from the registry
/// ([`ictus_probe::for_each_probe!`]): each is its folder's `cli::Args`, named as
/// the registry names it, its help its `Args`' doc comment. A new probe adds no line
/// here.
macro_rules! probe_commands {
    ($(($variant:ident, $module:ident, $name:literal)),* $(,)?) => {
        #[derive(Debug, Subcommand)]
        pub(crate) enum ProbeCommand {
            $(
                #[command(name = $name)]
                $variant(ictus_probe::$module::cli::Args),
            )*
        }
    };
}

ictus_probe::for_each_probe!(probe_commands);

/// `ictus completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// `ictus man`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write one page per command into DIR (ictus.1, ictus-survey.1,
    /// ictus-probe-timer.1, ...) instead of printing ictus(1) on stdout.
    #[arg(long, value_name = "DIR", value_hint = clap::builder::ValueHint::DirPath)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        harden(Cli::command()).debug_assert();
        command().debug_assert();
    }
}
