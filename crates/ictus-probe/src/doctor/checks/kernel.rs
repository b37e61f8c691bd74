//! The CPUs, the kernel's preemption model, its tick and its clocks.

use ictus_core::Nanos;
use ictus_os::facts::{KernelConfig, PreemptModel};

use crate::doctor::audit::{Check, CheckId, Status, check};
use crate::doctor::facts::PlatformFacts;
use crate::doctor::text::bytes;

pub(crate) fn check_cpus(f: &PlatformFacts) -> Check {
    let mut parts = vec![format!("{} online ({})", f.online.len(), f.online)];
    if let Some(model) = &f.cpu_model {
        parts.push(model.clone());
    }
    let siblings = if f.sibling_groups.is_empty() {
        "siblings unknown".to_owned()
    } else if f.sibling_groups.iter().all(|g| g.len() == 1) {
        "1 thread per core".to_owned()
    } else {
        let groups: Vec<String> = f.sibling_groups.iter().map(|g| g.to_string()).collect();
        format!("thread siblings {}", groups.join(" "))
    };
    parts.push(match f.smt {
        Some(true) => format!("SMT on ({siblings})"),
        Some(false) => format!("SMT off ({siblings})"),
        None => format!("SMT unknown ({siblings})"),
    });
    if !f.caches.is_empty() {
        let caches: Vec<String> = f
            .caches
            .iter()
            .filter(|c| {
                c.shared_cpus
                    .contains(f.online.cpus().first().copied().unwrap_or(0))
            })
            .map(|c| match c.size_bytes {
                Some(s) => format!("{} {}", c.name(), bytes(s)),
                None => c.name(),
            })
            .collect();
        parts.push(caches.join(", "));
    }
    let nodes = f.numa_nodes.len().max(1);
    parts.push(format!(
        "{nodes} NUMA node{}",
        if nodes == 1 { "" } else { "s" }
    ));
    let detail = parts.join("; ");
    if f.online.len() < 2 {
        return check(
            CheckId::Cpus,
            "CPUs and topology",
            Status::Missing,
            detail,
            Some(
                "one CPU leaves no room for a shielded real-time CPU: use a machine (or VM) with at least 2 CPUs"
                    .into(),
            ),
        );
    }
    let advice = (f.smt == Some(true)).then(|| {
        "SMT shares a core between threads: keep the sibling of each real-time CPU idle, or boot with nosmt (echo off > /sys/devices/system/cpu/smt/control)".to_owned()
    });
    check(
        CheckId::Cpus,
        "CPUs and topology",
        Status::Available,
        detail,
        advice,
    )
}

pub(crate) fn check_preemption(f: &PlatformFacts) -> Check {
    let p = &f.preemption;
    let dynamic = if p.dynamic { ", PREEMPT_DYNAMIC" } else { "" };
    let detail = format!("{}{dynamic} (from {})", p.model, p.source);
    let title = "Kernel preemption";
    let switch = if p.dynamic {
        "boot with preempt=full (this kernel is PREEMPT_DYNAMIC) or use a PREEMPT_RT kernel"
    } else {
        "use a PREEMPT_RT kernel (or one built with CONFIG_PREEMPT)"
    };
    match p.model {
        PreemptModel::Rt => check(CheckId::Preemption, title, Status::Available, detail, None),
        PreemptModel::Full | PreemptModel::Lazy => check(
            CheckId::Preemption,
            title,
            Status::Available,
            detail,
            Some("for the lowest worst-case latency use a PREEMPT_RT kernel".into()),
        ),
        PreemptModel::None | PreemptModel::Voluntary => check(
            CheckId::Preemption,
            title,
            Status::Missing,
            format!(
                "{detail}: kernel code is not preempted, so wake-up latency follows the longest kernel path"
            ),
            Some(switch.into()),
        ),
        PreemptModel::Unknown => check(
            CheckId::Preemption,
            title,
            Status::Unknown,
            format!(
                "{detail}: no readable source names the model (kernel log needs CAP_SYSLOG, no /proc/config.gz)"
            ),
            Some("run as root, or check `dmesg | grep 'Dynamic Preempt'` and `uname -v`".into()),
        ),
    }
}

fn tick_mode(config: Option<&KernelConfig>) -> Option<&'static str> {
    let c = config?;
    Some(if c.enabled("CONFIG_NO_HZ_FULL") {
        "NO_HZ_FULL"
    } else if c.enabled("CONFIG_NO_HZ_IDLE") {
        "NO_HZ_IDLE"
    } else if c.enabled("CONFIG_HZ_PERIODIC") {
        "periodic tick"
    } else {
        "tick mode unknown"
    })
}

pub(crate) fn check_hz(f: &PlatformFacts) -> Check {
    let title = "Tick and timer resolution";
    let hz = f.config.as_ref().and_then(KernelConfig::hz);
    let hz_text = match hz {
        Some(hz) if hz > 0 => format!(
            "HZ={hz} (tick {})",
            Nanos::new(1_000_000_000 / u64::from(hz))
        ),
        _ => "HZ unknown (no kernel config)".to_owned(),
    };
    let mut parts = vec![hz_text];
    if let Some(mode) = tick_mode(f.config.as_ref()) {
        parts.push(mode.to_owned());
    }
    match f.clock_resolution {
        None => {
            parts.push("clock_getres(CLOCK_MONOTONIC) failed".into());
            check(CheckId::Hz, title, Status::Unknown, parts.join(", "), None)
        }
        Some(res) if res.as_u64() <= 1_000 => {
            parts.push(format!(
                "clock_getres(CLOCK_MONOTONIC) = {res} (high-resolution timers)"
            ));
            check(
                CheckId::Hz,
                title,
                Status::Available,
                parts.join(", "),
                None,
            )
        }
        Some(res) => {
            parts.push(format!(
                "clock_getres(CLOCK_MONOTONIC) = {res}: timers fire only on ticks"
            ));
            check(
                CheckId::Hz,
                title,
                Status::Missing,
                parts.join(", "),
                Some("enable high-resolution timers: a kernel with CONFIG_HIGH_RES_TIMERS=y, booted without highres=off".into()),
            )
        }
    }
}

pub(crate) fn check_clocksource(f: &PlatformFacts) -> Check {
    let title = "Clocksource";
    let available = if f.clocksource.available.is_empty() {
        "none listed".to_owned()
    } else {
        f.clocksource.available.join(" ")
    };
    let Some(current) = &f.clocksource.current else {
        return check(
            CheckId::Clocksource,
            title,
            Status::Unknown,
            "/sys/devices/system/clocksource/clocksource0 not readable".into(),
            None,
        );
    };
    let detail = format!("{current} (available: {available})");
    let slow = ["hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"].contains(&current.as_str());
    let advice = slow.then(|| {
        let mut a = format!("{current} makes every clock read a slow device access (microseconds)");
        if f.clocksource.available.iter().any(|s| s == "tsc") {
            a.push_str(": echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource");
        } else {
            a.push_str(": check `dmesg | grep -i tsc` for why the TSC was rejected (tsc=reliable if it is trustworthy)");
        }
        a
    });
    check(
        CheckId::Clocksource,
        title,
        Status::Available,
        detail,
        advice,
    )
}
