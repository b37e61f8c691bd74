//! `status`: what the partition is, and what still disturbs each RT CPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use ictus_os::process::ProcessId;

use crate::ShieldError;
use crate::journal::{self, Entry};
use crate::plan::RT_GROUP;
use ictus_os::facts::ResumeLatency;

use crate::snapshot::{self, RESUME_QOS_HELD, RT_RUNTIME};
use crate::watchdog::{self, Demotion, LogEvent};

/// A thread that may run on an RT CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intruder {
    /// Thread id.
    pub tid: i32,
    /// Command name.
    pub comm: String,
    /// Whether it is a kernel thread (most cannot be moved; per-CPU ones are normal
    /// and mostly idle).
    pub kernel_thread: bool,
    /// Whether it last ran on this CPU.
    pub last_ran_here: bool,
}

/// Interrupts taken on an RT CPU during the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqCount {
    /// The `/proc/interrupts` row: a number, or a name like `LOC`, `RES`.
    pub irq: String,
    /// Its description.
    pub name: String,
    /// How many in the window.
    pub count: u64,
}

/// What disturbs one RT CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuDisturbance {
    /// The CPU.
    pub cpu: usize,
    /// Threads outside the shield's RT group allowed to run there.
    pub tasks: Vec<Intruder>,
    /// Interrupts on it during the window, most first.
    pub irqs: Vec<IrqCount>,
    /// Its resume latency QoS now (`pm_qos_resume_latency_us` as read, see
    /// [`ResumeLatency`]; `n/a` while the shield holds it), where the kernel has the file.
    #[serde(default)]
    pub resume_qos: Option<String>,
}

/// The watchdog process the shield started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogStatus {
    /// Its pid.
    pub pid: i32,
    /// Whether it runs (the pid is alive and its start time matches the journal's).
    pub running: bool,
    /// Its limit, in milliseconds.
    pub limit_ms: u64,
    /// Its log.
    pub log: PathBuf,
    /// The CPUs it watches; `None`: all.
    pub watched_cpus: Option<CpuSet>,
    /// Its thread's policy as obtained (`fifo 99`), once it reported.
    pub policy: Option<String>,
    /// The CPUs its thread is pinned to, once it reported.
    pub pinned_to: Option<CpuSet>,
    /// What it was refused (FIFO, pinning), with the fix.
    pub refused: Vec<String>,
    /// Its demotions so far.
    pub demotions: Vec<Demotion>,
}

/// The shield's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShieldStatus {
    /// The journal consulted.
    pub journal: PathBuf,
    /// Whether a shield is applied (its journal exists).
    pub applied: bool,
    /// RT CPUs, when applied.
    pub rt_cpus: Option<CpuSet>,
    /// NRT CPUs, when applied.
    pub nrt_cpus: Option<CpuSet>,
    /// cgroup version used, when applied.
    pub cgroup_version: Option<u8>,
    /// The IRQ counting window, in milliseconds.
    pub window_ms: u64,
    /// Per RT CPU.
    pub cpus: Vec<CpuDisturbance>,
    /// The RT throttle now (`sched_rt_runtime_us`; `-1` is off).
    pub rt_runtime_us: Option<String>,
    /// The watchdog, when the shield started one.
    pub watchdog: Option<WatchdogStatus>,
    /// What a person can do.
    pub advice: Vec<String>,
}

/// One `/proc/interrupts` row: name, per-CPU counts, description.
pub type InterruptRow = (String, Vec<u64>, String);

/// Parses `/proc/interrupts`.
pub fn parse_interrupts(text: &str) -> Vec<InterruptRow> {
    let mut lines = text.lines();
    let ncpu = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let mut fields = rest.split_whitespace();
            let mut counts = Vec::new();
            let mut desc = Vec::new();
            for f in fields.by_ref() {
                match f.parse::<u64>() {
                    Ok(n) if counts.len() < ncpu => counts.push(n),
                    _ => {
                        desc.push(f);
                        break;
                    }
                }
            }
            desc.extend(fields);
            Some((name.trim().to_owned(), counts, desc.join(" ")))
        })
        .collect()
}

/// Interrupts per CPU between two readings, for `cpus`.
pub fn interrupt_deltas(
    before: &[InterruptRow],
    after: &[InterruptRow],
    cpus: &CpuSet,
) -> BTreeMap<usize, Vec<IrqCount>> {
    let old: BTreeMap<&str, &Vec<u64>> = before.iter().map(|(n, c, _)| (n.as_str(), c)).collect();
    let mut out: BTreeMap<usize, Vec<IrqCount>> = BTreeMap::new();
    for &cpu in cpus.cpus() {
        let mut counts: Vec<IrqCount> = after
            .iter()
            .filter_map(|(name, counts, desc)| {
                let now = *counts.get(cpu)?;
                let then = old
                    .get(name.as_str())
                    .and_then(|c| c.get(cpu))
                    .copied()
                    .unwrap_or(0);
                (now > then).then(|| IrqCount {
                    irq: name.clone(),
                    name: desc.clone(),
                    count: now - then,
                })
            })
            .collect();
        counts.sort_by_key(|c| std::cmp::Reverse(c.count));
        out.insert(cpu, counts);
    }
    out
}

/// The watchdog's state from the journal (its pid) and its log (what it did).
fn watchdog_status(entries: &[Entry]) -> Option<WatchdogStatus> {
    let (pid, start_time, limit_ms, log) = entries.iter().find_map(|e| match e {
        Entry::Watchdog {
            pid,
            start_time,
            limit_ms,
            log,
            ..
        } => Some((*pid, *start_time, *limit_ms, log.clone())),
        _ => None,
    })?;
    let mut out = WatchdogStatus {
        pid,
        running: ProcessId::from_pid_t(pid, start_time).is_alive(),
        limit_ms,
        watched_cpus: None,
        policy: None,
        pinned_to: None,
        refused: Vec::new(),
        demotions: Vec::new(),
        log,
    };
    for event in watchdog::read_log(&out.log) {
        match event {
            LogEvent::Started {
                watched_cpus,
                placement,
                ..
            } => {
                out.watched_cpus = watched_cpus;
                out.policy = Some(placement.policy);
                out.pinned_to = placement.pinned_to;
                out.refused = placement.refused;
            }
            LogEvent::Demotion(d) => out.demotions.push(d),
            LogEvent::Stopped { .. } => {}
        }
    }
    Some(out)
}

/// Reads the shield's state; counts interrupts over `window`.
pub fn status(journal_path: &Path, window: Duration) -> Result<ShieldStatus, ShieldError> {
    let entries = journal::read(journal_path)?;
    let header = entries.as_ref().and_then(|e| {
        e.iter().find_map(|e| match e {
            Entry::Header {
                rt_cpus,
                nrt_cpus,
                cgroup_version,
                ..
            } => Some((rt_cpus.clone(), nrt_cpus.clone(), *cgroup_version)),
            _ => None,
        })
    });
    let mut status = ShieldStatus {
        journal: journal_path.to_path_buf(),
        applied: entries.is_some(),
        rt_cpus: header.as_ref().map(|h| h.0.clone()),
        nrt_cpus: header.as_ref().map(|h| h.1.clone()),
        cgroup_version: header.as_ref().map(|h| h.2),
        window_ms: window.as_millis() as u64,
        cpus: Vec::new(),
        rt_runtime_us: std::fs::read_to_string(RT_RUNTIME)
            .ok()
            .map(|v| v.trim().to_owned()),
        watchdog: entries.as_deref().and_then(watchdog_status),
        advice: Vec::new(),
    };
    if let Some(w) = &status.watchdog {
        status.advice = watchdog_advice(w, status.rt_runtime_us.as_deref());
    }
    let Some((rt, _, _)) = header else {
        status.advice.push(
            "No shield is applied: `ictus shield apply --rt-cpus LIST` keeps other work off those CPUs."
                .into(),
        );
        return Ok(status);
    };
    let before = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    std::thread::sleep(window);
    let after = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    let mut deltas = interrupt_deltas(&parse_interrupts(&before), &parse_interrupts(&after), &rt);
    let threads = snapshot::threads();
    let rt_group = format!("/{RT_GROUP}");
    for &cpu in rt.cpus() {
        let tasks: Vec<Intruder> = threads
            .iter()
            .filter(|t| {
                t.cpuset != rt_group && t.affinity.as_ref().is_some_and(|a| a.contains(cpu))
            })
            .map(|t| Intruder {
                tid: t.tid,
                comm: t.comm.clone(),
                kernel_thread: t.is_kernel_thread(),
                last_ran_here: t.last_cpu == Some(cpu),
            })
            .collect();
        let movable = tasks.iter().filter(|t| !t.kernel_thread).count();
        if movable > 0 {
            status.advice.push(format!(
                "CPU {cpu}: {movable} user thread(s) may still run here (started in another cgroup, or with an explicit affinity); move them or reset and apply again."
            ));
        }
        let irqs = deltas.remove(&cpu).unwrap_or_default();
        if let Some(top) = irqs.iter().find(|i| i.irq.parse::<u32>().is_ok()) {
            status.advice.push(format!(
                "CPU {cpu}: device IRQ {} ({}) fired {} time(s); if it is not for your RT task, steer it away (it may be a managed IRQ the kernel keeps per CPU).",
                top.irq, top.name, top.count
            ));
        }
        if let Some(loc) = irqs.iter().find(|i| i.irq == "LOC" && i.count > 100) {
            status.advice.push(format!(
                "CPU {cpu}: {} local timer interrupts in the window; a nohz_full=… boot parameter stops the tick on an RT CPU running one task.",
                loc.count
            ));
        }
        let resume_qos = snapshot::resume_qos(cpu).map(|q| q.value);
        if let Some(advice) = resume_qos_advice(cpu, resume_qos.as_deref(), entries.as_deref()) {
            status.advice.push(advice);
        }
        status.cpus.push(CpuDisturbance {
            cpu,
            tasks,
            irqs,
            resume_qos,
        });
    }
    Ok(status)
}

/// Advice on watchdog `w` (with the RT throttle's `rt_runtime_us`): when it is not
/// running, and the threads it demoted.
fn watchdog_advice(w: &WatchdogStatus, rt_runtime_us: Option<&str>) -> Vec<String> {
    let mut advice = Vec::new();
    if !w.running && rt_runtime_us == Some("-1") {
        advice.push(format!(
            "RT throttling is off and the watchdog (pid {}) is not running: a runaway real-time loop can freeze the machine; run `ictus shield reset`.",
            w.pid
        ));
    } else if !w.running {
        advice.push(format!(
            "The watchdog (pid {}) is not running (see {}); `ictus shield reset` and apply again to restart it.",
            w.pid,
            w.log.display()
        ));
    }
    let done = w.demotions.iter().filter(|d| d.refused.is_none()).count();
    if done > 0 {
        advice.push(format!(
            "The watchdog demoted {done} real-time thread(s) that held a CPU for {} ms or more without sleeping; each now runs SCHED_OTHER (details in {}).",
            w.limit_ms,
            w.log.display()
        ));
    }
    advice
}

/// Advice when the shield held CPU `cpu`'s resume latency QoS (its journal has the
/// write) but the file reads something else `now`: another program wrote it since.
fn resume_qos_advice(cpu: usize, now: Option<&str>, entries: Option<&[Entry]>) -> Option<String> {
    let path = snapshot::resume_qos_path(cpu);
    let held = entries?
        .iter()
        .any(|e| matches!(e, Entry::Write { path: p, .. } if *p == path));
    let now = now.filter(|&v| held && v != RESUME_QOS_HELD)?;
    let meaning = ResumeLatency::parse(now).map_or_else(String::new, |m| format!(" ({m})"));
    Some(format!(
        "CPU {cpu}: the shield held its resume latency QoS at {RESUME_QOS_HELD}, but it reads {now}{meaning} now: another program wrote {}; `ictus shield reset` and apply again.",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "           CPU0       CPU1       \n  24:         10          5   PCI-MSI 1-edge      virtio0\nLOC:       100        200   Local timer interrupts\nERR:          0\n";
    const AFTER: &str = "           CPU0       CPU1       \n  24:         12          9   PCI-MSI 1-edge      virtio0\nLOC:       150        210   Local timer interrupts\nERR:          0\n";

    #[test]
    fn interrupts_rows_split_counts_from_description() {
        let sut = parse_interrupts(BEFORE);
        assert_eq!(
            sut[0],
            ("24".into(), vec![10, 5], "PCI-MSI 1-edge virtio0".into())
        );
        assert_eq!(sut[2], ("ERR".into(), vec![0], String::new()));
    }

    #[test]
    fn deltas_are_per_cpu_and_most_first() {
        let cpus: CpuSet = "1".parse().unwrap();
        let sut = interrupt_deltas(&parse_interrupts(BEFORE), &parse_interrupts(AFTER), &cpus);
        let cpu1 = &sut[&1];
        assert_eq!(cpu1[0].irq, "LOC");
        assert_eq!(cpu1[0].count, 10);
        assert_eq!(cpu1[1].irq, "24");
        assert_eq!(cpu1[1].count, 4);
    }

    #[test]
    fn a_held_resume_qos_changed_by_another_program_gets_advice_and_an_unheld_one_none() {
        let held = [Entry::Write {
            path: snapshot::resume_qos_path(1),
            prior_value: "0".into(),
        }];
        let sut = resume_qos_advice(1, Some("0"), Some(&held)).unwrap();
        assert!(sut.contains("reads 0 (no constraint)"), "{sut}");
        assert_eq!(
            resume_qos_advice(1, Some(RESUME_QOS_HELD), Some(&held)),
            None
        );
        assert_eq!(resume_qos_advice(2, Some("0"), Some(&held)), None);
        assert_eq!(resume_qos_advice(1, Some("0"), None), None);
    }
}
