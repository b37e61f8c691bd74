//! `ictus shield`: the RT/NRT partition of the CPUs, with exact undo.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use ictus_core::CpuSet;
use ictus_shield::{Request, ShieldError};

use crate::{Failure, say};

#[derive(Debug, Args)]
pub(crate) struct ShieldArgs {
    #[command(subcommand)]
    pub(crate) command: ShieldCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ShieldCommand {
    /// Keep everything else off the RT CPUs: cpusets, tasks, IRQs, workqueues.
    Apply(ApplyArgs),
    /// What the partition is and what still disturbs each RT CPU.
    Status(StatusArgs),
    /// Undo the shield exactly, from its journal (also after a killed apply).
    Reset(JournalArg),
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// CPUs for the real-time work: a list like 2-3,6. At least one CPU stays NRT.
    #[arg(long, value_name = "LIST")]
    pub(crate) rt_cpus: String,
    /// IRQs serving the RT tasks (steered to the RT CPUs instead): a list like 24,31.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub(crate) irq_for: Vec<u32>,
    #[command(flatten)]
    pub(crate) journal: JournalArg,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Print the status as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) journal: JournalArg,
}

#[derive(Debug, Args)]
pub(crate) struct JournalArg {
    /// The undo journal.
    #[arg(long, value_name = "PATH", default_value = ictus_shield::DEFAULT_JOURNAL)]
    pub(crate) journal: PathBuf,
}

fn failure(e: ShieldError) -> Failure {
    match e {
        ShieldError::NoNrtCpu { .. }
        | ShieldError::CpuOffline { .. }
        | ShieldError::NoRtCpu
        | ShieldError::NoSuchIrq { .. } => Failure::usage(e),
        other => Failure::from(other),
    }
}

pub(crate) fn run(args: &ShieldArgs) -> Result<(), Failure> {
    match &args.command {
        ShieldCommand::Apply(a) => apply(a),
        ShieldCommand::Status(a) => status(a),
        ShieldCommand::Reset(a) => reset(a),
    }
}

fn apply(args: &ApplyArgs) -> Result<(), Failure> {
    let rt_cpus: CpuSet = args
        .rt_cpus
        .parse()
        .map_err(|e| Failure::usage(anyhow::anyhow!("--rt-cpus {}: {e}", args.rt_cpus)))?;
    let request = Request {
        rt_cpus,
        irq_for: args.irq_for.clone(),
    };
    let applied = ictus_shield::apply(&request, &args.journal.journal).map_err(failure)?;
    let plan = &applied.plan;
    let mut out = format!(
        "shield applied: RT CPUs {}, NRT CPUs {} (cgroup v{}), {} change(s); undo with `ictus shield reset`\n",
        plan.rt_cpus,
        plan.nrt_cpus,
        plan.cgroup_version,
        plan.steps.len()
    );
    let _ = writeln!(out, "journal: {}", applied.journal.display());
    if applied.irqbalance_stopped {
        out.push_str("irqbalance was running and is stopped; reset starts it again\n");
    }
    let left = plan.skipped.len() + applied.refused.len();
    if left > 0 {
        let _ = writeln!(out, "left in place ({left}):");
        for skip in plan.skipped.iter().chain(&applied.refused) {
            let _ = writeln!(out, "  {}: {}", skip.what, skip.why);
        }
    }
    say(&out)
}

fn reset(args: &JournalArg) -> Result<(), Failure> {
    let outcome = ictus_shield::reset(&args.journal).map_err(failure)?;
    if !outcome.was_applied {
        return say("no shield applied; nothing to reset\n");
    }
    if !outcome.problems.is_empty() {
        return Err(Failure::from(anyhow::anyhow!(
            "reset left {} problem(s), journal kept at {}: {}",
            outcome.problems.len(),
            args.journal.display(),
            outcome.problems.join("; ")
        )));
    }
    say(&format!(
        "shield reset: {} value(s) restored, {} gone meanwhile\n",
        outcome.restored, outcome.vanished
    ))
}

fn status(args: &StatusArgs) -> Result<(), Failure> {
    let status =
        ictus_shield::status(&args.journal.journal, Duration::from_secs(1)).map_err(failure)?;
    if args.json {
        return say(&(serde_json::to_string_pretty(&status)? + "\n"));
    }
    let mut out = String::new();
    match (&status.rt_cpus, &status.nrt_cpus) {
        (Some(rt), Some(nrt)) => {
            let _ = writeln!(
                out,
                "shield applied: RT CPUs {rt}, NRT CPUs {nrt} (cgroup v{}), journal {}",
                status.cgroup_version.unwrap_or(0),
                status.journal.display()
            );
        }
        _ if status.applied => {
            let _ = writeln!(
                out,
                "a partial shield is applied (journal {}); run `ictus shield reset`",
                status.journal.display()
            );
        }
        _ => out.push_str("no shield applied\n"),
    }
    for cpu in &status.cpus {
        let kthreads = cpu.tasks.iter().filter(|t| t.kernel_thread).count();
        let others: Vec<String> = cpu
            .tasks
            .iter()
            .filter(|t| !t.kernel_thread)
            .map(|t| format!("{} ({})", t.tid, t.comm))
            .collect();
        let _ = writeln!(
            out,
            "CPU {}: {} kernel thread(s), {} user thread(s){}{}",
            cpu.cpu,
            kthreads,
            others.len(),
            if others.is_empty() { "" } else { ": " },
            others.join(", ")
        );
        let irqs: Vec<String> = cpu
            .irqs
            .iter()
            .map(|i| format!("{} {}", i.irq, i.count))
            .collect();
        let _ = writeln!(
            out,
            "  interrupts in {} ms: {}",
            status.window_ms,
            if irqs.is_empty() {
                "none".to_owned()
            } else {
                irqs.join(", ")
            }
        );
    }
    for advice in &status.advice {
        let _ = writeln!(out, "advice: {advice}");
    }
    say(&out)
}
