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
    let mut blockers: Vec<String> = Vec::new();
    // (short label for the summary, full note)
    let mut notes: Vec<(String, String)> = Vec::new();
    let is = |id: CheckId, s: Status| status_of(checks, id).is_some_and(|c| c.status == s);

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
    if is(CheckId::Hz, Status::Missing) {
        blockers.push("no high-resolution timers: wake-ups are quantised to the tick".into());
    }
    if f.online.len() < 2 {
        blockers.push("a single CPU: nothing can be shielded".into());
    }

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

    if is(CheckId::IdleStates, Status::NeedsPrivilege) || is(CheckId::IdleStates, Status::Missing) {
        notes.push((
            "deep idle states".into(),
            "idle CPUs may enter states whose exit latency delays every wake-up, and this process cannot hold the CPU latency QoS that keeps them out".into(),
        ));
    }
    let summary = if !blockers.is_empty() {
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
    };
    Verdict {
        summary,
        blockers,
        notes: notes.into_iter().map(|(_, n)| n).collect(),
    }
}
