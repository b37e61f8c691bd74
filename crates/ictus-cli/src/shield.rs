//! `ictus shield`: the RT/NRT partition of the CPUs, with exact undo.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ictus_core::CpuSet;
use ictus_os::facts::ResumeLatency;
use ictus_shield::snapshot::RESUME_QOS_HELD;
use ictus_shield::watchdog::{self, LogEvent, ThrottleGuard, Watchdog};
use ictus_shield::{Request, ShieldError, WatchdogLaunch};

use crate::{Failure, say};
use ictus_probe::cli::positive_duration;

#[derive(Debug, Args)]
pub(crate) struct ShieldArgs {
    #[command(subcommand)]
    pub(crate) command: ShieldCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ShieldCommand {
    /// Keep everything else off the RT CPUs: cpusets, tasks, IRQs, workqueues; keep the RT
    /// CPUs out of idle states with an exit latency.
    Apply(ApplyArgs),
    /// What the partition is and what still disturbs each RT CPU.
    Status(StatusArgs),
    /// Undo the shield exactly, from its journal (also after a killed apply).
    Reset(JournalArg),
    /// The watchdog process that `apply --watchdog` starts (not for direct use).
    #[command(hide = true)]
    Watchdog(WatchdogArgs),
}

/// The kernel's RT throttle (`sched_rt_runtime_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Throttle {
    /// Leave it as it is (by default real-time tasks get 95 % of each second).
    On,
    /// Turn it off (`-1`) while the shield is applied; needs --watchdog.
    Off,
}

/// Each RT CPU's resume latency QoS (`pm_qos_resume_latency_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ResumeQos {
    /// Hold it at n/a while the shield is applied: no idle state with an exit latency.
    On,
    /// Leave it as it is.
    Off,
}

#[derive(Debug, Args)]
pub(crate) struct ApplyArgs {
    /// CPUs for the real-time work: a list like 2-3,6. At least one CPU stays NRT.
    #[arg(long, value_name = "LIST")]
    pub(crate) rt_cpus: String,
    /// IRQs serving the RT tasks (steered to the RT CPUs instead): a list like 24,31.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub(crate) irq_for: Vec<u32>,
    /// `off`: no RT throttling (a busy FIFO task is otherwise stalled about 50 ms every
    /// second); only together with --watchdog, and switched off after it runs.
    #[arg(long, value_name = "on|off", value_enum)]
    pub(crate) rt_throttle: Option<Throttle>,
    /// Start a watchdog on the NRT CPUs that demotes to SCHED_OTHER any real-time thread
    /// holding a CPU this long without sleeping (e.g. 1s).
    #[arg(long, value_name = "LIMIT", value_parser = positive_duration)]
    pub(crate) watchdog: Option<Duration>,
    /// `on`: each RT CPU's resume latency QoS is held at n/a, so it enters no idle state
    /// with an exit latency (power for latency, as cyclictest's /dev/cpu_dma_latency 0,
    /// but only on the RT CPUs); reset puts back each prior value.
    #[arg(long, value_name = "on|off", value_enum, default_value = "on")]
    pub(crate) resume_qos: ResumeQos,
    #[command(flatten)]
    pub(crate) journal: JournalArg,
}

#[derive(Debug, Args)]
pub(crate) struct WatchdogArgs {
    /// How long a real-time thread may hold its CPU without sleeping.
    #[arg(long, value_name = "LIMIT", value_parser = positive_duration)]
    pub(crate) limit: Duration,
    /// The RT CPUs; the watchdog runs on the others.
    #[arg(long, value_name = "LIST")]
    pub(crate) rt_cpus: String,
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
        | ShieldError::NoSuchIrq { .. }
        | ShieldError::ThrottleWithoutWatchdog
        | ShieldError::WatchdogTooShort { .. } => Failure::usage(e),
        other => Failure::from(other),
    }
}

pub(crate) fn run(args: &ShieldArgs) -> Result<(), Failure> {
    match &args.command {
        ShieldCommand::Apply(a) => apply(a),
        ShieldCommand::Status(a) => status(a),
        ShieldCommand::Reset(a) => reset(a),
        ShieldCommand::Watchdog(a) => run_watchdog(a),
    }
}

/// How `apply` starts the watchdog: this very executable, as `ictus shield watchdog`.
pub(crate) fn watchdog_launch(
    limit: Duration,
    rt_cpus: &CpuSet,
    journal: &Path,
) -> Result<WatchdogLaunch, Failure> {
    let program = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("finding the ictus executable for the watchdog: {e}"))?;
    // The watchdog works in `/`: it needs the journal's absolute path.
    let journal = std::path::absolute(journal)?;
    let journal = journal.to_str().ok_or_else(|| {
        Failure::usage(anyhow::anyhow!(
            "--journal {}: the watchdog needs a UTF-8 path",
            journal.display()
        ))
    })?;
    Ok(WatchdogLaunch {
        limit,
        program,
        args: [
            "shield",
            "watchdog",
            "--limit",
            &humantime::format_duration(limit).to_string(),
            "--rt-cpus",
            &rt_cpus.to_string(),
            "--journal",
            journal,
        ]
        .map(String::from)
        .to_vec(),
    })
}

fn apply(args: &ApplyArgs) -> Result<(), Failure> {
    let rt_cpus: CpuSet = args
        .rt_cpus
        .parse()
        .map_err(|e| Failure::usage(anyhow::anyhow!("--rt-cpus {}: {e}", args.rt_cpus)))?;
    let rt_throttle_off = args.rt_throttle == Some(Throttle::Off);
    if rt_throttle_off && args.watchdog.is_none() {
        return Err(failure(ShieldError::ThrottleWithoutWatchdog));
    }
    let watchdog = args
        .watchdog
        .map(|limit| watchdog_launch(limit, &rt_cpus, &args.journal.journal))
        .transpose()?;
    let request = Request {
        rt_throttle_off,
        watchdog,
        resume_qos: args.resume_qos == ResumeQos::On,
        ..Request::partition(rt_cpus, args.irq_for.clone())
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
    if let Some(w) = &applied.watchdog {
        let _ = writeln!(
            out,
            "watchdog: pid {}, demotes a real-time thread holding a CPU {} ms without sleeping; log {}",
            w.pid,
            w.limit_ms,
            w.log.display()
        );
    }
    let throttle_off = plan.steps.iter().any(|s| {
        matches!(s, ictus_shield::plan::Change::Write { path, value }
            if path == Path::new(ictus_shield::snapshot::RT_RUNTIME) && value == "-1")
    });
    if throttle_off {
        out.push_str(
            "RT throttling is off (sched_rt_runtime_us -1) while the watchdog runs; reset turns it back on\n",
        );
    }
    if !applied.resume_qos_held.is_empty() {
        let _ = writeln!(
            out,
            "resume latency QoS: {RESUME_QOS_HELD} on CPU(s) {} ({}); reset puts back each prior value",
            applied.resume_qos_held,
            ResumeLatency::NONE_ACCEPTED
        );
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
        write_cpu(&mut out, cpu, status.window_ms);
    }
    if let Some(w) = &status.watchdog {
        write_watchdog(&mut out, w);
    }
    if let Some(v) = &status.rt_runtime_us
        && (v == "-1" || status.watchdog.is_some())
    {
        let _ = writeln!(
            out,
            "RT throttle: sched_rt_runtime_us {v}{}",
            if v == "-1" { " (off)" } else { "" }
        );
    }
    for advice in &status.advice {
        let _ = writeln!(out, "advice: {advice}");
    }
    say(&out)
}

/// One CPU of the shield's status: its threads, interrupts and resume latency.
fn write_cpu(out: &mut String, cpu: &ictus_shield::status::CpuDisturbance, window_ms: u64) {
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
        window_ms,
        if irqs.is_empty() {
            "none".to_owned()
        } else {
            irqs.join(", ")
        }
    );
    if let Some(qos) = &cpu.resume_qos {
        let meaning = ResumeLatency::parse(qos).map_or_else(String::new, |m| format!(" ({m})"));
        let _ = writeln!(out, "  resume latency QoS: {qos}{meaning}");
    }
}

/// The watchdog of the shield's status: its state, refusals and demotions.
fn write_watchdog(out: &mut String, w: &ictus_shield::status::WatchdogStatus) {
    let _ = writeln!(
        out,
        "watchdog: pid {} {}, limit {} ms, watching {}{}, {} demotion(s); log {}",
        w.pid,
        if w.running { "running" } else { "NOT running" },
        w.limit_ms,
        w.watched_cpus
            .as_ref()
            .map_or_else(|| "all CPUs".to_owned(), |c| format!("CPUs {c}")),
        match (&w.policy, &w.pinned_to) {
            (Some(p), Some(c)) => format!(" at {p} on CPUs {c}"),
            (Some(p), None) => format!(" at {p}"),
            _ => String::new(),
        },
        w.demotions.len(),
        w.log.display()
    );
    for r in &w.refused {
        let _ = writeln!(out, "  refused: {r}");
    }
    for d in &w.demotions {
        let _ = writeln!(
            out,
            "  {} {} ({}, pid {}), {} on CPU {}, after {} ms{}",
            if d.refused.is_some() {
                "NOT demoted"
            } else {
                "demoted"
            },
            d.tid,
            d.comm,
            d.pid,
            d.policy_before,
            d.cpu,
            d.held_for.as_millis(),
            d.refused
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
}

/// `ictus shield watchdog`: the process `apply --watchdog` starts. It waits for the
/// shield's GO (end of file instead: the applying process died before journaling it,
/// so it exits having done nothing), watches until SIGTERM/SIGINT/SIGHUP or until the
/// journal is gone (the shield was reset), then writes the journaled RT throttle back
/// before it exits, so throttling never stays off without a watchdog. A `kill -9`
/// skips that last step; `ictus shield reset` restores the throttle anyway.
fn run_watchdog(args: &WatchdogArgs) -> Result<(), Failure> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if line.trim() != watchdog::GO {
        return Ok(());
    }
    let journal = &args.journal.journal;
    let rt: CpuSet = args
        .rt_cpus
        .parse()
        .map_err(|e| Failure::usage(anyhow::anyhow!("--rt-cpus {}: {e}", args.rt_cpus)))?;
    let nrt = CpuSet::from_cpus(
        ictus_os::facts::online_cpus()
            .cpus()
            .iter()
            .copied()
            .filter(|&c| !rt.contains(c)),
    );
    let (signalled, signal) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = signalled.send(());
    })?;
    let mut guard = ThrottleGuard::new(journal);
    let log = watchdog::log_path(journal);
    // Every CPU is watched: with throttling off, a runaway loop on an NRT CPU starves
    // the system as surely as one on an RT CPU. The RT CPUs only decide where the
    // watchdog itself runs.
    let config = watchdog::Config {
        run_on: (!nrt.is_empty()).then_some(nrt),
        exempt_pids: vec![std::process::id() as i32],
        log: Some(log.clone()),
        ..watchdog::Config::new(args.limit)
    };
    let interval = config.interval;
    let dog = Watchdog::start(config.clone())?;
    watchdog::append_log(
        &log,
        &LogEvent::Started {
            pid: std::process::id(),
            limit_ms: args.limit.as_millis() as u64,
            watched_cpus: config.cpus.clone(),
            placement: dog.placement().clone(),
            at_unix_ms: watchdog::unix_ms(),
        },
    )?;
    say(&format!("{}\n", watchdog::READY))?;
    let why = loop {
        guard.refresh();
        match signal.recv_timeout(interval) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break "signal",
            Err(RecvTimeoutError::Timeout) if !journal.exists() => break "journal removed",
            Err(RecvTimeoutError::Timeout) => {}
        }
    };
    dog.stop();
    let restored = guard.restore();
    let _ = watchdog::append_log(
        &log,
        &LogEvent::Stopped {
            why: why.into(),
            restored_rt_runtime_us: restored.as_ref().ok().cloned().flatten(),
            at_unix_ms: watchdog::unix_ms(),
        },
    );
    restored
        .map(|_| ())
        .map_err(|e| Failure::from(anyhow::anyhow!("writing the RT throttle back: {e}")))
}
