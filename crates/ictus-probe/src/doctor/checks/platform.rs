//! What the machine runs on and under: a hypervisor, the kernel's tracers.

use ictus_os::facts::StealTime;

use crate::doctor::audit::{Check, CheckId, Status, check};
use crate::doctor::facts::PlatformFacts;

fn steal_text(steal: Option<StealTime>) -> String {
    match steal {
        None => "steal time unknown".to_owned(),
        Some(s) => format!(
            "steal {:.1} s since boot ({:.2} % of CPU time)",
            s.steal_ns.as_secs_f64(),
            s.fraction() * 100.0
        ),
    }
}

pub(crate) fn check_virtualization(f: &PlatformFacts) -> Check {
    let title = "Bare metal (no hypervisor)";
    match &f.virtualization {
        None => check(
            CheckId::Virtualization,
            title,
            Status::Available,
            format!("bare metal; {}", steal_text(f.steal)),
            None,
        ),
        Some(h) => check(
            CheckId::Virtualization,
            title,
            Status::Missing,
            format!("virtual machine: {h}; {}", steal_text(f.steal)),
            Some("the host schedules these vCPUs: pin each vCPU to a dedicated, isolated host core (and give the guest no more vCPUs than that), or run on bare metal for hard real-time".into()),
        ),
    }
}

pub(crate) fn check_tracers(f: &PlatformFacts) -> Check {
    let title = "Latency tracers";
    const WANTED: [(&str, &str); 3] = [
        ("hwlat", "CONFIG_HWLAT_TRACER"),
        ("timerlat", "CONFIG_TIMERLAT_TRACER"),
        ("osnoise", "CONFIG_OSNOISE_TRACER"),
    ];
    let build_advice = "rebuild the kernel with CONFIG_HWLAT_TRACER, CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER (or use rtla from a distribution kernel that has them)";
    // None of the wanted tracers, whether tracefs or the kernel config says so.
    let none_built = |detail| {
        check(
            CheckId::Tracers,
            title,
            Status::Missing,
            detail,
            Some(build_advice.into()),
        )
    };
    if let Some(list) = &f.tracers {
        let have: Vec<&str> = WANTED
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| list.iter().any(|t| t == n))
            .collect();
        let detail = format!(
            "available_tracers: {}; wanted present: {}",
            list.join(" "),
            if have.is_empty() {
                "none".to_owned()
            } else {
                have.join(" ")
            }
        );
        return if have.is_empty() {
            none_built(detail)
        } else {
            let advice = (have.len() < WANTED.len()).then(|| build_advice.to_owned());
            check(CheckId::Tracers, title, Status::Available, detail, advice)
        };
    }
    let Some(config) = &f.config else {
        return check(
            CheckId::Tracers,
            title,
            Status::Unknown,
            "tracefs not readable and no kernel config to tell what is built".into(),
            Some("as root: mount -t tracefs nodev /sys/kernel/tracing; cat /sys/kernel/tracing/available_tracers".into()),
        );
    };
    let built: Vec<&str> = WANTED
        .iter()
        .filter(|(_, key)| config.enabled(key))
        .map(|(n, _)| *n)
        .collect();
    let detail = format!(
        "tracefs not mounted or not readable; {} built: {}",
        config.source,
        if built.is_empty() {
            "none of hwlat timerlat osnoise".to_owned()
        } else {
            built.join(" ")
        }
    );
    if built.is_empty() {
        none_built(detail)
    } else {
        check(
            CheckId::Tracers,
            title,
            Status::NeedsPrivilege,
            detail,
            Some("as root: mount -t tracefs nodev /sys/kernel/tracing".into()),
        )
    }
}
