//! What the CPUs do when they have nothing to do: frequency and idle states.

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts::{CpuIdle, ResumeLatency};

use crate::doctor::audit::{Check, CheckId, Status, check};
use crate::doctor::facts::PlatformFacts;
use crate::doctor::text::{duration_text, duration_text_us};

pub(crate) fn check_power(f: &PlatformFacts) -> Check {
    let title = "CPU frequency";
    match &f.governor {
        None => check(
            CheckId::Power,
            title,
            Status::Available,
            "no cpufreq: the kernel does not change the clock speed (fixed, or set by the firmware or the host)".into(),
            None,
        ),
        Some(g) if g == "performance" => check(
            CheckId::Power,
            title,
            Status::Available,
            "governor performance".into(),
            None,
        ),
        Some(g) => check(
            CheckId::Power,
            title,
            Status::Available,
            format!("governor {g}: the clock speed follows the load, so a loop that just woke runs slower"),
            Some("set the performance governor: cpupower frequency-set -g performance".into()),
        ),
    }
}

/// An idle state whose exit latency is at most this is cheap to wake from: a timer
/// wake-up is late by no more than a few microseconds because of it.
pub const CHEAP_EXIT_LATENCY: Nanos = Nanos::from_micros(5);

/// One idle state over every CPU that has it: the largest exit latency a CPU
/// declares for it, its use summed.
#[derive(Debug, Clone, PartialEq)]
struct StateTotal {
    name: String,
    exit_latency: Nanos,
    /// Times entered, all CPUs together.
    usage: u64,
    /// Time spent in it, all CPUs together.
    time: Nanos,
    /// Whether some CPU may enter it (not disabled there).
    enabled: bool,
}

/// The idle states by their index (`stateK`), over every CPU.
fn state_totals(idle: &CpuIdle) -> Vec<StateTotal> {
    let mut totals: Vec<StateTotal> = Vec::new();
    for cpu in &idle.cpus {
        for (k, s) in cpu.states.iter().enumerate() {
            if k == totals.len() {
                totals.push(StateTotal {
                    name: s.name.clone(),
                    exit_latency: Nanos::ZERO,
                    usage: 0,
                    time: Nanos::ZERO,
                    enabled: false,
                });
            }
            let t = &mut totals[k];
            t.exit_latency = t.exit_latency.max(s.exit_latency_ns);
            t.usage = t.usage.saturating_add(s.usage);
            t.time = Nanos::new(t.time.as_u64().saturating_add(s.time_ns.as_u64()));
            t.enabled |= !s.disabled;
        }
    }
    totals
}

/// `392863 times for 55.1 s`.
fn usage_text(t: &StateTotal) -> String {
    let time = t.time.show(ictus_core::time::DurationStyle::Tenths);
    format!("{} times for {time}", t.usage)
}

/// The CPUs under each resume-latency limit: `none on CPUs 0-1`, `0 us on CPUs 2-3`.
fn resume_latency_text(idle: &CpuIdle) -> Option<String> {
    let mut groups: Vec<(Option<ResumeLatency>, Vec<usize>)> = Vec::new();
    for cpu in &idle.cpus {
        match groups.iter_mut().find(|(l, _)| *l == cpu.resume_latency) {
            Some((_, cpus)) => cpus.push(cpu.cpu),
            None => groups.push((cpu.resume_latency, vec![cpu.cpu])),
        }
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(limit, cpus)| {
            let limit = match limit {
                None => "unreadable".to_owned(),
                Some(ResumeLatency::NoConstraint) => "none".to_owned(),
                Some(ResumeLatency::Limit(l)) => duration_text(l),
            };
            format!("{limit} on CPUs {}", CpuSet::from_cpus(cpus))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// What ictus does about idle states, for the detail.
const ICTUS_IDLE_HANDLING: &str = "ictus: the probes, `ictus run` and `ictus node` hold /dev/cpu_dma_latency at 0 for their run unless --pm-qos off (as cyclictest does: idle CPUs then only poll); `ictus shield` sets the RT CPUs' resume-latency QoS";

/// The detail of the idle states check with a cpuidle `driver` and its states'
/// `totals` (`vm`: in a virtual machine; `dma`: the state of /dev/cpu_dma_latency),
/// and whether a state halts the vCPU.
fn idle_detail(
    idle: &CpuIdle,
    totals: &[StateTotal],
    driver: &str,
    vm: bool,
    dma: &str,
) -> (String, bool) {
    let governor = idle.governor.as_deref().unwrap_or("unknown");
    let mut parts = vec![format!("driver {driver}, governor {governor}")];
    let states: Vec<String> = totals
        .iter()
        .map(|t| {
            format!(
                "{} (exit {}{}) used {}",
                t.name,
                duration_text_us(t.exit_latency),
                if t.enabled { "" } else { ", disabled" },
                usage_text(t)
            )
        })
        .collect();
    parts.push(format!("states: {}", states.join("; ")));
    let deepest = totals
        .iter()
        .filter(|t| t.enabled)
        .max_by_key(|t| t.exit_latency);
    if let Some(d) = deepest {
        parts.push(format!(
            "a timer wake-up on a CPU idling in its deepest state ({}) is delayed by its exit latency, {}",
            d.name,
            duration_text_us(d.exit_latency)
        ));
    }
    // In a guest every state but polling halts the vCPU, and the host takes over.
    let halting: Vec<&str> = totals
        .iter()
        .filter(|t| t.enabled && t.name != "POLL")
        .map(|t| t.name.as_str())
        .collect();
    if vm && !halting.is_empty() {
        parts.push(format!(
            "in this VM {} halts the vCPU, which exits to the host: waking it also waits for the host to run the vCPU again",
            halting.join(", ")
        ));
    }
    if let Some(resume) = resume_latency_text(idle) {
        parts.push(format!("resume-latency QoS: {resume}"));
    }
    parts.push(dma.to_owned());
    parts.push(ICTUS_IDLE_HANDLING.to_owned());
    (parts.join("; "), !halting.is_empty())
}

pub(crate) fn check_idle_states(f: &PlatformFacts) -> Check {
    let title = "Idle states";
    let idle = &f.idle;
    let totals = state_totals(idle);
    let device = idle.cpu_dma_latency;
    let dma = match (device.present, device.writable) {
        (false, _) => "/dev/cpu_dma_latency absent",
        (true, true) => "/dev/cpu_dma_latency writable",
        (true, false) => "/dev/cpu_dma_latency present but not writable",
    };
    let vm = f.virtualization.is_some();
    let driver = idle.driver.as_deref().filter(|d| *d != "none");
    let (Some(driver), false) = (driver, totals.is_empty()) else {
        let mut detail =
            "no cpuidle driver: an idle CPU runs the architecture's default idle".to_owned();
        if vm {
            detail.push_str(" (HLT in this VM, which exits to the host: waking it also waits for the host to run the vCPU again)");
        }
        detail.push_str(&format!("; {dma}"));
        return check(CheckId::IdleStates, title, Status::Available, detail, None);
    };
    let (detail, halting) = idle_detail(idle, &totals, driver, vm, dma);

    let costly: Vec<String> = totals
        .iter()
        .filter(|t| t.enabled && t.exit_latency > CHEAP_EXIT_LATENCY)
        .map(|t| format!("{} {}", t.name, duration_text_us(t.exit_latency)))
        .collect();
    let halt_unheld = vm && halting && !device.writable;
    if costly.is_empty() {
        let advice = halt_unheld.then(|| {
            "to keep the vCPUs polling instead of exiting to the host, run as root or give the user write access to /dev/cpu_dma_latency (udev: KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\")".to_owned()
        });
        return check(
            CheckId::IdleStates,
            title,
            Status::Available,
            detail,
            advice,
        );
    }
    let costly = costly.join(", ");
    match (device.present, device.writable) {
        (true, true) => check(CheckId::IdleStates, title, Status::Available, detail, None),
        (true, false) => check(
            CheckId::IdleStates,
            title,
            Status::NeedsPrivilege,
            detail,
            Some(format!(
                "states with a larger exit latency ({costly}) stay open to idle CPUs: run as root or give the user write access to /dev/cpu_dma_latency (udev: KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\") so that ictus can hold it at 0"
            )),
        ),
        (false, _) => check(
            CheckId::IdleStates,
            title,
            Status::Missing,
            detail,
            Some(format!(
                "states with a larger exit latency ({costly}) and no /dev/cpu_dma_latency to hold them off: disable them (echo 1 > /sys/devices/system/cpu/cpu*/cpuidle/stateN/disable) or boot with processor.max_cstate=1 intel_idle.max_cstate=0"
            )),
        ),
    }
}
