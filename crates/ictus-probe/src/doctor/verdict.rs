//! The verdict: what blocks real-time work here, and what only needs a note.

use ictus_core::Nanos;
use ictus_os::facts::PreemptModel;

use crate::doctor::audit::{Check, CheckId, Status, Verdict};
use crate::doctor::facts::PlatformFacts;
use crate::doctor::text::{attempt_text, duration_text};

pub(super) fn status_of(checks: &[Check], id: CheckId) -> Option<&Check> {
    checks.iter().find(|c| c.id == id)
}

pub(super) fn verdict(f: &PlatformFacts, checks: &[Check]) -> Verdict {
    let blockers = blockers(f, checks);
    let mut notes = kernel_notes(f);
    notes.extend(host_notes(f, checks));
    Verdict {
        summary: summary(&blockers, &notes),
        blockers,
        notes: notes.into_iter().map(|(_, n)| n).collect(),
    }
}

/// Whether check `id` of `checks` has status `s`.
fn is(checks: &[Check], id: CheckId, s: Status) -> bool {
    status_of(checks, id).is_some_and(|c| c.status == s)
}

/// What makes real-time work impossible here for this process.
fn blockers(f: &PlatformFacts, checks: &[Check]) -> Vec<String> {
    let mut blockers: Vec<String> = Vec::new();
    if !f.fifo.is_ok() {
        blockers.push(format!(
            "no permission to use SCHED_FIFO: {}",
            attempt_text(&f.fifo)
        ));
    }
    if !f.mlock.is_ok() {
        blockers.push(format!(
            "memory cannot be locked, so page faults can strike the loop: mlock {}",
            attempt_text(&f.mlock)
        ));
    }
    if is(checks, CheckId::Hz, Status::Missing) {
        blockers.push("no high-resolution timers: wake-ups are quantised to the tick".into());
    }
    if f.online.len() < 2 {
        blockers.push("a single CPU: nothing can be shielded".into());
    }
    blockers
}

/// The notes on the kernel (preemption, virtual machine, RT throttling): each a
/// short label for the summary and the full note.
fn kernel_notes(f: &PlatformFacts) -> Vec<(String, String)> {
    let mut notes: Vec<(String, String)> = Vec::new();
    match f.preemption.model {
        PreemptModel::None | PreemptModel::Voluntary => notes.push((
            format!("preemption model {}", f.preemption.model),
            format!(
                "kernel preemption is {}: a real-time task waits for the kernel to reach a preemption point (milliseconds under I/O load)",
                f.preemption.model
            ),
        )),
        PreemptModel::Unknown => notes.push((
            "preemption model unknown".into(),
            "the preemption model could not be determined".into(),
        )),
        _ => {}
    }
    if let Some(h) = &f.virtualization {
        let steal = f
            .steal
            .map(|s| format!(", {:.2} % steal so far", s.fraction() * 100.0))
            .unwrap_or_default();
        notes.push((
            format!("virtual machine ({h})"),
            format!("virtual machine ({h}{steal}): the host can preempt a vCPU at any moment"),
        ));
    }
    if f.rt_throttle.is_some_and(|b| b.throttles()) {
        let stall = f
            .rt_throttle
            .and_then(|b| b.stall_per_period())
            .unwrap_or(Nanos::ZERO);
        let period = f.rt_throttle.map_or(Nanos::ZERO, |b| b.period_ns);
        notes.push((
            "RT throttling on".into(),
            format!(
                "RT throttling is on: a busy SCHED_FIFO task is stalled {} of every {}",
                duration_text(stall),
                duration_text(period)
            ),
        ));
    }
    notes
}

/// The notes on how the machine is set up (isolation, SMT, interrupts, swap,
/// frequency, idle states): each a short label for the summary and the full note.
fn host_notes(f: &PlatformFacts, checks: &[Check]) -> Vec<(String, String)> {
    let mut notes: Vec<(String, String)> = Vec::new();
    if f.isolated.is_empty() && f.online.len() >= 2 {
        notes.push((
            "no isolated CPUs".into(),
            "no isolated CPUs: real-time CPUs must be shielded at run time".into(),
        ));
    }
    if f.smt == Some(true) {
        notes.push((
            "SMT on".into(),
            "SMT is on: a sibling thread shares the core of a real-time CPU".into(),
        ));
    }
    if f.irqbalance {
        notes.push((
            "irqbalance running".into(),
            "irqbalance is running and will move interrupts onto real-time CPUs".into(),
        ));
    }
    if !f.swaps.is_empty() {
        notes.push((
            "swap on".into(),
            "swap is on: unlocked memory of real-time processes may be paged out".into(),
        ));
    }
    if let Some(g) = &f.governor
        && g != "performance"
    {
        notes.push((
            format!("governor {g}"),
            format!("CPU frequency governor is {g}: clock speed changes with load"),
        ));
    }

    if is(checks, CheckId::IdleStates, Status::NeedsPrivilege)
        || is(checks, CheckId::IdleStates, Status::Missing)
    {
        notes.push((
            "deep idle states".into(),
            "idle CPUs may enter states whose exit latency delays every wake-up, and this process cannot hold the CPU latency QoS that keeps them out".into(),
        ));
    }
    notes
}

/// The one-line summary: the blockers, else the notes' labels.
fn summary(blockers: &[String], notes: &[(String, String)]) -> String {
    if !blockers.is_empty() {
        format!(
            "This machine cannot run hard real-time loops for this process: {}.",
            blockers.join("; ")
        )
    } else if notes.is_empty() {
        "This machine can run hard real-time loops: every check passed.".to_owned()
    } else {
        let labels: Vec<&str> = notes.iter().map(|(s, _)| s.as_str()).collect();
        format!(
            "This machine can run real-time loops with caveats: {}.",
            labels.join(", ")
        )
    }
}
