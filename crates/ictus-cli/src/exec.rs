//! `ictus exec`: runs a command in a task class (RT0, RT1+ or normal), as `chrt` and
//! `taskset` together, in the order seed 002 §4.3 requires (priority, then affinity),
//! and inside the shield's cpuset groups when a shield is applied.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use clap::{Args, ValueEnum};
use ictus_shield::class::{self, Class, ClassError, Options, RtPolicy};
use ictus_shield::partition;

use crate::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ClassArg {
    /// SCHED_FIFO 99 on one RT CPU (give --cpu).
    Rt0,
    /// SCHED_FIFO or SCHED_RR at --priority 1 to 98, on RT and NRT CPUs.
    Rt1,
    /// SCHED_OTHER, on the NRT CPUs when a shield is applied.
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyArg {
    Fifo,
    Rr,
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The task class.
    #[arg(long, value_enum)]
    pub(crate) class: ClassArg,
    /// The RT CPU of an RT0 task.
    #[arg(long, value_name = "N", value_parser = cpu_number)]
    pub(crate) cpu: Option<usize>,
    /// RT1+ priority, 1 to 98.
    #[arg(long, value_name = "N", value_parser = rt1_priority)]
    pub(crate) priority: Option<u8>,
    /// RT1+ policy.
    #[arg(long, value_enum, default_value = "fifo")]
    pub(crate) policy: PolicyArg,
    /// Say nothing before running the command.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// The shield's journal, to find its partition.
    #[arg(long, value_name = "PATH", default_value = ictus_shield::DEFAULT_JOURNAL)]
    pub(crate) journal: PathBuf,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// `--cpu`: a CPU number the kernel can address; whether it is online is checked when
/// the class is entered.
fn cpu_number(s: &str) -> Result<usize, String> {
    let max = ictus_core::cpulist::MAX_CPU;
    ictus_probe::cli::count_in(0, max, "")(s).map_err(|e| {
        if e.starts_with("over the limit") {
            format!(
                "CPU {} is not online (the largest CPU number is {max})",
                s.trim()
            )
        } else {
            format!("expected a CPU number from 0 to {max}")
        }
    })
}

/// `--priority`: an RT1+ priority, 1 to 98 (99 is RT0's).
fn rt1_priority(s: &str) -> Result<u8, String> {
    ictus_probe::cli::count_in(1, 98, "")(s)
        .map(|p| p as u8)
        .map_err(|_| "an RT1+ priority is 1 to 98 (99 is RT0's)".to_string())
}

/// Enters the class, then replaces this process with the command. Returns only on
/// failure.
pub(crate) fn run(args: &ExecArgs) -> Result<(), Failure> {
    let class = match args.class {
        ClassArg::Rt0 => {
            if args.priority.is_some() {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--priority is for --class rt1: RT0 always runs at FIFO 99"
                )));
            }
            let Some(cpu) = args.cpu else {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--class rt0 needs --cpu N (the RT CPU it owns)"
                )));
            };
            Class::Rt0 { cpu }
        }
        ClassArg::Rt1 => {
            if args.cpu.is_some() {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--cpu is for --class rt0: RT1+ tasks span the RT and NRT CPUs"
                )));
            }
            let Some(priority) = args.priority else {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--class rt1 needs --priority N (1 to 98)"
                )));
            };
            let policy = match args.policy {
                PolicyArg::Fifo => RtPolicy::Fifo,
                PolicyArg::Rr => RtPolicy::Rr,
            };
            Class::Rt1 { policy, priority }
        }
        ClassArg::Normal => {
            if args.cpu.is_some() || args.priority.is_some() {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--cpu and --priority do not apply to --class normal"
                )));
            }
            Class::Normal
        }
    };
    // A journal that is not one (garbage, a FIFO, a directory) is bad input.
    let shield = partition::applied(&args.journal).map_err(|e| match e {
        e @ (ictus_shield::ShieldError::JournalInput(_)
        | ictus_shield::ShieldError::BadJournal(_)) => Failure::usage(e),
        other => Failure::from(other),
    })?;
    // mlockall and a prefaulted stack do not survive execve: the program must lock its
    // own memory. Policy, affinity and cpuset membership do survive.
    let options = Options {
        lock_memory: false,
        prefault_stack: false,
    };
    let entered = class::enter(class, options, shield.as_ref()).map_err(|e| match e {
        ClassError::Priority(_) => Failure::usage(anyhow::Error::new(e).context("--priority")),
        ClassError::CpuOffline { .. } | ClassError::NotRtCpu { .. } => {
            Failure::usage(anyhow::Error::new(e).context("--cpu"))
        }
        other => Failure::from(other),
    })?;
    if !args.quiet {
        let mut lines = vec![format!(
            "ictus exec: {}, CPUs {}{}",
            entered.class,
            entered.affinity,
            match &shield {
                Some(p) => format!(", shield RT {} / NRT {}", p.rt, p.nrt),
                None => String::new(),
            }
        )];
        lines.extend(
            entered
                .notes
                .iter()
                .map(|n| format!("ictus exec: note: {n}")),
        );
        if matches!(entered.class, Class::Rt0 { .. }) {
            lines.push(
                "ictus exec: note: memory locking does not survive exec(2); the program must \
                 lock its own memory: mlockall(MCL_CURRENT|MCL_FUTURE), or in Rust \
                 ictus_shield::class::enter_rt0(cpu), which also prefaults the stack"
                    .to_string(),
            );
        }
        eprintln!("{}", lines.join("\n"));
    }
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::usage(anyhow::anyhow!("no command given after --")))?;
    let error = Command::new(program).args(rest).exec();
    Err(Failure {
        code: if error.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
        error: anyhow::anyhow!("cannot run {program}: {error}"),
    })
}
