//! Applying a [`Plan`] step by step behind the journal, and undoing it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::ShieldError;
use crate::journal::{self, Entry, Journal};
use crate::plan::{self, Change, Plan, Request, Skip};
use crate::snapshot::{self, CpusetRoot};
use crate::watchdog;

/// How long `apply` waits for the watchdog process to report ready.
const WATCHDOG_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `reset` waits for the watchdog process to end after SIGTERM (then SIGKILL).
const WATCHDOG_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What `apply` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Applied {
    /// The plan that was run.
    pub plan: Plan,
    /// Steps the kernel refused (managed IRQs, bound kernel threads), and why.
    pub refused: Vec<Skip>,
    /// Whether irqbalance was running and was stopped (reset starts it again).
    pub irqbalance_stopped: bool,
    /// The journal that `reset` will replay.
    pub journal: PathBuf,
    /// The watchdog process, when one was started.
    pub watchdog: Option<StartedWatchdog>,
    /// The RT CPUs whose resume latency QoS the shield holds at
    /// [`snapshot::RESUME_QOS_HELD`] (reset puts back each prior value).
    #[serde(default)]
    pub resume_qos_held: CpuSet,
}

/// The watchdog process `apply` started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedWatchdog {
    /// Its pid.
    pub pid: i32,
    /// Its start time (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// Its limit, in milliseconds.
    pub limit_ms: u64,
    /// Its log of demotions.
    pub log: PathBuf,
}

/// What `reset` did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResetOutcome {
    /// Whether a journal was found (a shield, perhaps partial, was applied).
    pub was_applied: bool,
    /// Values written back.
    pub restored: usize,
    /// Entries whose object is gone (exited threads, vanished IRQs): nothing to restore.
    pub vanished: usize,
    /// What could not be restored; the journal is kept so reset can be run again.
    pub problems: Vec<String>,
}

/// What the shield needs, when this process lacks it.
pub fn privilege_shortfall() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse::<u32>().ok());
    (euid != Some(0)).then(|| {
        "root (CAP_SYS_ADMIN to create cpusets and move tasks, write access to \
         /proc/irq/*/smp_affinity, CAP_SYS_NICE for other tasks' affinity)"
            .to_owned()
    })
}

/// Why a shield cannot be applied on this machine now, if it cannot: the privilege
/// this process lacks, no writable cpuset, fewer than two online CPUs, or a shield
/// already applied (its journal, or its `ictus-rt` group). For callers that would
/// rather skip than fail, such as the tests that apply a real shield.
pub fn machine_shortfall() -> Option<String> {
    if let Some(need) = privilege_shortfall() {
        return Some(format!("the shield needs {need}"));
    }
    if !ictus_os::facts::cgroups()
        .cpuset
        .is_some_and(|c| c.writable)
    {
        return Some("no writable cpuset".into());
    }
    if ictus_os::facts::online_cpus().len() < 2 {
        return Some("fewer than two online CPUs".into());
    }
    if Path::new(crate::DEFAULT_JOURNAL).exists()
        || snapshot::cpuset_root().is_some_and(|r| r.dir().join("ictus-rt").exists())
    {
        return Some("a shield is applied on this machine".into());
    }
    None
}

fn require_privilege() -> Result<(), ShieldError> {
    match privilege_shortfall() {
        Some(need) => Err(ShieldError::NotPrivileged { need }),
        None => Ok(()),
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// One `write(2)` of `value`, as kernel files want it.
fn write_value(path: &Path, value: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all(value.as_bytes())
}

fn write_error(path: &Path, value: &str, source: std::io::Error) -> ShieldError {
    ShieldError::Write {
        path: path.to_path_buf(),
        value: value.to_owned(),
        source,
    }
}

/// Applies a shield: `--rt-cpus` on the RT side, everything else on the NRT CPUs.
/// Refuses when a shield is already applied. On a failure it resets what it did.
pub fn apply(request: &Request, journal_path: &Path) -> Result<Applied, ShieldError> {
    apply_stopping_after(request, journal_path, None)
}

/// [`apply`], stopped as if killed at point `stop_at` (the fault-injection hook):
/// point `2k` is before step `k` is journaled, `2k + 1` after it is journaled and
/// before it is carried out. Nothing is undone; the journal stays.
#[doc(hidden)]
pub fn apply_stopping_after(
    request: &Request,
    journal_path: &Path,
    stop_at: Option<usize>,
) -> Result<Applied, ShieldError> {
    if journal_path.exists() {
        return Err(ShieldError::AlreadyApplied {
            journal: journal_path.to_path_buf(),
        });
    }
    let machine = snapshot::machine();
    let plan = plan::plan(&machine, request)?;
    require_privilege()?;
    let mut journal = Journal::create(journal_path)?;
    let root = machine
        .cpuset
        .as_ref()
        .map(CpusetRoot::dir)
        .unwrap_or(Path::new("/"));
    journal.append(&Entry::Header {
        path: root.to_path_buf(),
        prior_value: String::new(),
        rt_cpus: plan.rt_cpus.clone(),
        nrt_cpus: plan.nrt_cpus.clone(),
        cgroup_version: plan.cgroup_version,
        pid: std::process::id(),
    })?;
    let mut applied = Applied {
        plan,
        refused: Vec::new(),
        irqbalance_stopped: false,
        journal: journal_path.to_path_buf(),
        watchdog: None,
        resume_qos_held: CpuSet::default(),
    };
    match run_steps(&mut applied, &mut journal, stop_at) {
        Ok(()) => Ok(applied),
        Err(e @ ShieldError::Stopped { .. }) => Err(e),
        Err(e) => {
            // Leave the machine as it was; the error says what went wrong.
            let _ = reset(journal_path);
            Err(e)
        }
    }
}

/// The journal as one step sees it: every entry appended is followed by the step's
/// second stop point (`2 * done + 1`).
struct StepJournal<'a> {
    journal: &'a mut Journal,
    stop_at: Option<usize>,
    done: usize,
}

impl StepJournal<'_> {
    fn append(&mut self, entry: &Entry) -> Result<(), ShieldError> {
        self.journal.append(entry)?;
        if self.stop_at == Some(2 * self.done + 1) {
            return Err(ShieldError::Stopped {
                at: 2 * self.done + 1,
            });
        }
        Ok(())
    }
}

/// Carries out the plan's steps in order, each journaled before it changes anything.
fn run_steps(
    applied: &mut Applied,
    journal: &mut Journal,
    stop_at: Option<usize>,
) -> Result<(), ShieldError> {
    let mut created: Vec<PathBuf> = Vec::new();
    for (done, step) in applied.plan.steps.clone().iter().enumerate() {
        if stop_at == Some(2 * done) {
            return Err(ShieldError::Stopped { at: 2 * done });
        }
        // Every journal entry of this step is followed by the second stop point.
        let mut journal = StepJournal {
            journal: &mut *journal,
            stop_at,
            done,
        };
        match step {
            Change::Write { path, value } => {
                write_step(applied, &mut journal, &created, path, value)?;
            }
            Change::Mkdir { path } => {
                mkdir_step(&mut journal, path)?;
                created.push(path.clone());
            }
            Change::MoveTask {
                tid,
                start_time,
                from,
                to,
            } => move_task_step(applied, &mut journal, *tid, *start_time, from, to)?,
            Change::KeepAffinity { tid, start_time } => {
                keep_affinity_step(&mut journal, *tid, *start_time)?;
            }
            Change::StopIrqbalance { pid } => stop_irqbalance_step(applied, &mut journal, *pid)?,
            Change::StartWatchdog {
                limit_ms,
                program,
                args,
            } => start_watchdog_step(applied, &mut journal, *limit_ms, program, args)?,
        }
    }
    Ok(())
}

/// Writes `value` to `path`, its prior value journaled first unless the file is in a
/// group the shield `created`. A file that vanished is passed over; an IRQ the
/// kernel will not move, or a resume latency QoS it will not take, is recorded as
/// refused.
fn write_step(
    applied: &mut Applied,
    journal: &mut StepJournal<'_>,
    created: &[PathBuf],
    path: &Path,
    value: &str,
) -> Result<(), ShieldError> {
    // Files of a group the shield created go away with the group.
    let inside_new = path
        .parent()
        .is_some_and(|d| created.iter().any(|c| c == d));
    if !inside_new {
        let Some(prior_value) = read_trimmed(path) else {
            return Ok(()); // vanished (an IRQ freed meanwhile)
        };
        journal.append(&Entry::Write {
            path: path.to_path_buf(),
            prior_value,
        })?;
    }
    let mut result = write_value(path, value);
    if result.is_err() && value == "isolated" {
        // Kernels before 5.15 know only `root` partitions.
        result = write_value(path, "root");
    }
    match result {
        Ok(()) => {
            if let Some(cpu) = snapshot::resume_qos_cpu(path) {
                applied.resume_qos_held =
                    CpuSet::from_cpus(applied.resume_qos_held.cpus().iter().copied().chain([cpu]));
            }
            Ok(())
        }
        Err(e) => match tolerated_refusal(path, &e) {
            Some(skip) => {
                applied.refused.push(skip);
                Ok(())
            }
            None => Err(write_error(path, value, e)),
        },
    }
}

/// A write the kernel refused that leaves the shield whole, as what was left: a
/// managed IRQ stays where it is; a resume latency QoS that a kernel before 4.16
/// will not set to `n/a` leaves that CPU's idle states as they were. `None` for any
/// other refusal, which fails the apply.
fn tolerated_refusal(path: &Path, e: &std::io::Error) -> Option<Skip> {
    let what = path.display().to_string();
    if path.starts_with("/proc/irq") {
        return Some(Skip {
            what,
            why: format!("the kernel refused ({e}); a managed IRQ stays where it is"),
        });
    }
    snapshot::resume_qos_cpu(path).map(|cpu| Skip {
        what,
        why: format!(
            "the kernel refused ({e}; before Linux 4.16 it knows no n/a); CPU {cpu} may still enter idle states with an exit latency"
        ),
    })
}

/// Creates the cgroup directory `path`, journaled first.
fn mkdir_step(journal: &mut StepJournal<'_>, path: &Path) -> Result<(), ShieldError> {
    journal.append(&Entry::Mkdir {
        path: path.to_path_buf(),
        prior_value: "absent".into(),
    })?;
    std::fs::create_dir(path).map_err(|e| write_error(path, "(mkdir)", e))
}

/// Moves thread `tid` (with its start time) from the group of `from` into the group of
/// `to`, its affinity and group journaled first. A thread that exited is passed over;
/// one the kernel will not move is recorded as refused.
fn move_task_step(
    applied: &mut Applied,
    journal: &mut StepJournal<'_>,
    tid: i32,
    start_time: u64,
    from: &Path,
    to: &Path,
) -> Result<(), ShieldError> {
    let Some(task) = journal_task(journal, tid, start_time, from, false)? else {
        return Ok(());
    };
    if let Err(e) = write_value(to, &tid.to_string())
        && e.raw_os_error() != Some(3)
    {
        applied.refused.push(Skip {
            what: format!("task {tid} ({})", task.comm),
            why: format!("the kernel refused the move ({e}); kthreadd stays in the root cpuset"),
        });
    }
    Ok(())
}

/// Journals the affinity of thread `tid` (with its start time) without changing
/// anything; a thread that exited is passed over.
fn keep_affinity_step(
    journal: &mut StepJournal<'_>,
    tid: i32,
    start_time: u64,
) -> Result<(), ShieldError> {
    journal_task(journal, tid, start_time, Path::new(""), true).map(drop)
}

/// Journals thread `tid` (with its start time): its affinity and group, its group's
/// `tasks` file `path` (empty for `affinity_only`). A thread that exited, or whose
/// affinity cannot be read, is passed over: `None`.
fn journal_task(
    journal: &mut StepJournal<'_>,
    tid: i32,
    start_time: u64,
    path: &Path,
    affinity_only: bool,
) -> Result<Option<snapshot::Task>, ShieldError> {
    let Some(task) = snapshot::read_task(tid).filter(|t| t.start_time == start_time) else {
        return Ok(None); // exited
    };
    let Some(affinity) = task.affinity.clone() else {
        return Ok(None);
    };
    journal.append(&Entry::Task {
        path: path.to_path_buf(),
        prior_value: affinity,
        tid,
        start_time,
        cpuset: task.cpuset.clone(),
        affinity_only,
    })?;
    Ok(Some(task))
}

/// Stops irqbalance (`pid`), journaled first; when it cannot be stopped, says so.
fn stop_irqbalance_step(
    applied: &mut Applied,
    journal: &mut StepJournal<'_>,
    pid: i32,
) -> Result<(), ShieldError> {
    journal.append(&Entry::Irqbalance {
        path: PathBuf::from(format!("/proc/{pid}")),
        prior_value: "running".into(),
    })?;
    let stopped = run_quietly("systemctl", &["stop", "irqbalance"])
        || run_quietly("kill", &[&pid.to_string()]);
    applied.irqbalance_stopped = stopped;
    if !stopped {
        applied.refused.push(Skip {
            what: format!("irqbalance (pid {pid})"),
            why: "could not be stopped; it may undo the IRQ affinity".into(),
        });
    }
    Ok(())
}

/// Starts the watchdog process (`program args`, limit `limit_ms`) and waits until it
/// reports ready.
fn start_watchdog_step(
    applied: &mut Applied,
    journal: &mut StepJournal<'_>,
    limit_ms: u64,
    program: &Path,
    args: &[String],
) -> Result<(), ShieldError> {
    // The order keeps `reset` exact after a kill -9 at any point:
    // 1. spawn: the process starts but waits for GO on its stdin;
    // 2. journal its pid and start time (known only after the spawn);
    // 3. send GO, then wait for READY.
    // Killed before 2: nothing journaled, and the process reads end of
    // file instead of GO (the pipe closes with us) and exits having done
    // nothing. Killed between 2 and 3: same exit; reset finds it gone.
    // Killed after 3: reset stops it by pid, only if the start time still
    // matches. The RT throttle goes off in a later step, after READY, so
    // it is never off unless a watchdog was watching first. (Journaling an
    // intent before the spawn would not help: the pid is unknown then.)
    let start_error = |why: String| ShieldError::WatchdogStart {
        program: program.to_path_buf(),
        why,
    };
    let log = watchdog::log_path(&applied.journal);
    let log = std::path::absolute(&log).unwrap_or(log);
    let pending =
        watchdog::spawn_pending(program, args, &log).map_err(|e| start_error(e.to_string()))?;
    let (pid, start_time) = (pending.pid, pending.start_time);
    journal.append(&Entry::Watchdog {
        path: PathBuf::from(format!("/proc/{pid}")),
        prior_value: "absent".into(),
        pid,
        start_time,
        limit_ms,
        log: log.clone(),
    })?;
    pending
        .release(WATCHDOG_READY_TIMEOUT)
        .map_err(|e| start_error(e.to_string()))?;
    applied.watchdog = Some(StartedWatchdog {
        pid,
        start_time,
        limit_ms,
        log,
    });
    Ok(())
}

fn run_quietly(program: &str, args: &[&str]) -> bool {
    std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Undoes the shield recorded in the journal, newest change first, then removes the
/// journal. Without a journal it does nothing: reset is idempotent. Threads and IRQs
/// that vanished meanwhile are passed over.
pub fn reset(journal_path: &Path) -> Result<ResetOutcome, ShieldError> {
    let Some(entries) = journal::read(journal_path)? else {
        return Ok(ResetOutcome::default());
    };
    require_privilege()?;
    let root = entries
        .iter()
        .find_map(|e| match e {
            Entry::Header { path, .. } => Some(path.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let mut out = ResetOutcome {
        was_applied: true,
        ..ResetOutcome::default()
    };
    for entry in entries.iter().rev() {
        match entry {
            Entry::Header { .. } => {}
            Entry::Write { path, prior_value } => restore_write(path, prior_value, &mut out),
            Entry::Task {
                path,
                prior_value,
                tid,
                start_time,
                cpuset,
                affinity_only,
            } => {
                let Some(task) = snapshot::read_task(*tid).filter(|t| t.start_time == *start_time)
                else {
                    out.vanished += 1;
                    continue;
                };
                if *affinity_only {
                    restore_affinity(*tid, prior_value, task.affinity.as_ref(), &mut out);
                    continue;
                }
                let group = path
                    .parent()
                    .and_then(|d| d.strip_prefix(&root).ok())
                    .map(|g| format!("/{}", g.display()));
                let home = task.cpuset == *cpuset || Some(&task.cpuset) == group.as_ref();
                if let Err(e) = write_value(path, &tid.to_string())
                    && !home
                {
                    if e.raw_os_error() == Some(3) {
                        out.vanished += 1;
                        continue;
                    }
                    out.problems
                        .push(format!("moving task {tid} back to {}: {e}", path.display()));
                }
                // Joining a v1 cpuset resets the affinity to the cpuset's CPUs.
                let now = ictus_os::affinity_of::affinity_of(*tid)
                    .ok()
                    .or(task.affinity);
                restore_affinity(*tid, prior_value, now.as_ref(), &mut out);
            }
            Entry::Mkdir { path, .. } => remove_group(path, &mut out),
            Entry::Watchdog {
                pid, start_time, ..
            } => stop_watchdog(*pid, *start_time, &mut out),
            Entry::Irqbalance { .. } => {
                if !snapshot::irqbalance_running()
                    && !run_quietly("systemctl", &["start", "irqbalance"])
                    && !run_quietly("irqbalance", &[])
                {
                    out.problems
                        .push("irqbalance could not be started again".into());
                }
            }
        }
    }
    if out.problems.is_empty() {
        journal::remove(journal_path)?;
    }
    Ok(out)
}

/// Stops the watchdog process: SIGTERM (it writes the RT throttle back and exits),
/// SIGKILL if it has not ended in time. Replayed backwards, the journal has already
/// restored the throttle by then. Only the process with the journaled start time is
/// signalled, never a reused pid.
fn stop_watchdog(pid: i32, start_time: u64, out: &mut ResetOutcome) {
    let watchdog = ictus_os::process::ProcessId::from_pid_t(pid, start_time);
    let gone_within = |limit: Duration| {
        let begin = std::time::Instant::now();
        while watchdog.is_alive() {
            if begin.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    };
    if !watchdog.is_alive() {
        out.vanished += 1;
        return;
    }
    for (sig, wait) in [
        (ictus_os::process::SIGTERM, WATCHDOG_STOP_TIMEOUT),
        (ictus_os::process::SIGKILL, Duration::from_secs(1)),
    ] {
        match ictus_os::process::signal(pid, sig) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(3) => {
                out.vanished += 1;
                return;
            }
            Err(e) => {
                out.problems
                    .push(format!("stopping the watchdog (pid {pid}): {e}"));
                return;
            }
        }
        if gone_within(wait) {
            out.restored += 1;
            return;
        }
    }
    out.problems.push(format!(
        "the watchdog (pid {pid}) is still running after SIGKILL"
    ));
}

/// Sets thread `tid`'s affinity back to `prior`, unless it is there `now`; a thread
/// that exited meanwhile has vanished.
fn restore_affinity(tid: i32, prior: &CpuSet, now: Option<&CpuSet>, out: &mut ResetOutcome) {
    if now == Some(prior) {
        return;
    }
    match ictus_os::affinity_of::set_affinity_of(tid, prior) {
        Ok(()) => out.restored += 1,
        Err(e) if e.raw_os_error() == Some(3) => out.vanished += 1,
        Err(e) => out
            .problems
            .push(format!("affinity of task {tid} back to {prior}: {e}")),
    }
}

fn restore_write(path: &Path, prior: &str, out: &mut ResetOutcome) {
    let Some(current) = read_trimmed(path) else {
        out.vanished += 1;
        return;
    };
    if current == prior {
        return;
    }
    if path
        .file_name()
        .is_some_and(|n| n == "cgroup.subtree_control")
    {
        // Only what the shield added is taken away again.
        let before: Vec<&str> = prior.split_whitespace().collect();
        for added in current.split_whitespace().filter(|c| !before.contains(c)) {
            if let Err(e) = write_value(path, &format!("-{added}")) {
                out.problems
                    .push(format!("{}: -{added}: {e}", path.display()));
            }
        }
        out.restored += 1;
        return;
    }
    match write_value(path, prior) {
        Ok(()) => out.restored += 1,
        Err(e) => out
            .problems
            .push(format!("writing {prior:?} back to {}: {e}", path.display())),
    }
}

fn remove_group(dir: &Path, out: &mut ResetOutcome) {
    if !dir.is_dir() {
        return;
    }
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let members = if dir.join("tasks").exists() {
        "tasks"
    } else {
        "cgroup.procs"
    };
    // A v2 partition goes back to an ordinary member first.
    if dir.join("cpuset.cpus.partition").exists() {
        let _ = write_value(&dir.join("cpuset.cpus.partition"), "member");
    }
    for _ in 0..100 {
        let ids = read_trimmed(&dir.join(members)).unwrap_or_default();
        for id in ids.split_whitespace() {
            // Threads that exit meanwhile are fine.
            let _ = write_value(&parent.join(members), id);
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => {
                out.restored += 1;
                return;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        out.problems
            .push(format!("removing {}: {e}", dir.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_irq_or_resume_qos_is_left_in_place_and_any_other_refusal_fails() {
        let einval = || std::io::Error::from_raw_os_error(22);
        let irq = tolerated_refusal(Path::new("/proc/irq/9/smp_affinity_list"), &einval());
        assert_eq!(irq.unwrap().what, "/proc/irq/9/smp_affinity_list");
        let qos = snapshot::resume_qos_path(3);
        let sut = tolerated_refusal(&qos, &einval()).unwrap();
        assert_eq!(sut.what, qos.display().to_string());
        assert!(sut.why.contains("CPU 3"), "{}", sut.why);
        assert!(tolerated_refusal(Path::new(snapshot::RT_RUNTIME), &einval()).is_none());
        assert!(tolerated_refusal(Path::new("/cs/ictus-rt/cpuset.cpus"), &einval()).is_none());
    }
}
