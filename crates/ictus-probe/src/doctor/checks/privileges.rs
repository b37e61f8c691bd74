//! What this process may do: real-time scheduling, its throttling, SCHED_DEADLINE.

use ictus_core::Nanos;
use ictus_os::facts::{Attempt, Capabilities};

use crate::doctor::audit::{Check, CheckId, Status, check};
use crate::doctor::facts::PlatformFacts;
use crate::doctor::text::{attempt_text, duration_text, errno_name, rlimit_text};

fn caps_text(caps: Option<Capabilities>) -> String {
    match caps {
        None => "capabilities unknown".to_owned(),
        Some(c) => {
            let names = c.rt_names();
            let missing: Vec<&str> = [
                (Capabilities::SYS_NICE, "CAP_SYS_NICE"),
                (Capabilities::IPC_LOCK, "CAP_IPC_LOCK"),
                (Capabilities::SYS_RESOURCE, "CAP_SYS_RESOURCE"),
            ]
            .into_iter()
            .filter(|(cap, _)| !c.has(*cap))
            .map(|(_, n)| n)
            .collect();
            let have = if names.is_empty() {
                "none of CAP_SYS_NICE, CAP_IPC_LOCK, CAP_SYS_RESOURCE, CAP_SYS_ADMIN".to_owned()
            } else {
                names.join(" ")
            };
            if missing.is_empty() || names.is_empty() {
                format!("capabilities: {have}")
            } else {
                format!("capabilities: {have} (no {})", missing.join(" "))
            }
        }
    }
}

/// The cgroup `cpu` budget of this process when it is zero (FIFO is refused there).
fn zero_cgroup_budget(f: &PlatformFacts) -> Option<String> {
    let budget = f.cgroups.cpu_rt_budget?;
    if budget.runtime_ns != Some(Nanos::ZERO) {
        return None;
    }
    let member = f
        .cgroups
        .memberships
        .iter()
        .find(|m| m.controllers.iter().any(|c| c == "cpu"))?;
    Some(member.path.clone())
}

pub(crate) fn check_rt_privileges(f: &PlatformFacts) -> Check {
    let title = "Real-time priority (FIFO)";
    let detail = format!(
        "SCHED_FIFO {}; RLIMIT_RTPRIO {}; RLIMIT_MEMLOCK {}; {}",
        attempt_text(&f.fifo),
        rlimit_text(f.rtprio, false),
        rlimit_text(f.memlock, true),
        caps_text(f.capabilities)
    );
    let via_cap = f.rtprio.is_some_and(|r| r.soft == Some(0))
        && f.capabilities
            .is_some_and(|c| c.has(Capabilities::SYS_NICE));
    match &f.fifo {
        Attempt::Succeeded if via_cap => check(
            CheckId::RtPrivileges,
            title,
            Status::Available,
            format!("{detail}; FIFO works through CAP_SYS_NICE"),
            None,
        ),
        Attempt::Succeeded => check(
            CheckId::RtPrivileges,
            title,
            Status::Available,
            detail,
            None,
        ),
        Attempt::Failed { errno: 1, .. } => {
            let advice = match zero_cgroup_budget(f) {
                Some(path) => format!(
                    "this process's cpu cgroup {path} has cpu.rt_runtime_us = 0: give it an RT budget (echo 100000 > /sys/fs/cgroup/cpu{path}/cpu.rt_runtime_us) or run in the root cpu cgroup"
                ),
                None => "grant real-time priority: sudo setcap cap_sys_nice,cap_ipc_lock+ep $(which ictus), or `ulimit -r 95` (limits.conf: `@realtime - rtprio 95`), or run as root".to_owned(),
            };
            check(
                CheckId::RtPrivileges,
                title,
                Status::NeedsPrivilege,
                detail,
                Some(advice),
            )
        }
        Attempt::Failed { errno, .. } => check(
            CheckId::RtPrivileges,
            title,
            Status::Unknown,
            format!("{detail}; unexpected {}", errno_name(*errno)),
            Some("check `chrt -f 1 true` and the kernel log".into()),
        ),
    }
}

pub(crate) fn check_rt_throttling(f: &PlatformFacts) -> Check {
    let title = "RT throttling";
    let Some(budget) = f.rt_throttle else {
        return check(
            CheckId::RtThrottling,
            title,
            Status::Unknown,
            "/proc/sys/kernel/sched_rt_runtime_us not readable".into(),
            None,
        );
    };
    let us = |n: Nanos| n.as_u64() / 1_000;
    let runtime = budget
        .runtime_ns
        .map_or("-1".to_owned(), |r| us(r).to_string());
    let mut detail = format!(
        "sched_rt_runtime_us {runtime} of sched_rt_period_us {}",
        us(budget.period_ns)
    );
    match budget.stall_per_period() {
        Some(stall) if stall.as_u64() > 0 => {
            let per_second = stall.as_u64() as f64 * 1e9 / budget.period_ns.as_u64().max(1) as f64;
            detail.push_str(&format!(
                ": a busy SCHED_FIFO task is stalled about {} every second",
                duration_text(Nanos::new(per_second as u64))
            ));
        }
        _ => detail.push_str(": no throttling (a runaway SCHED_FIFO task can hang its CPU)"),
    }
    if let Some(cg) = f.cgroups.cpu_rt_budget {
        let cg_runtime = cg.runtime_ns.map_or("-1".to_owned(), |r| us(r).to_string());
        detail.push_str(&format!(
            "; cpu cgroup rt_runtime_us {cg_runtime}/{}",
            us(cg.period_ns)
        ));
    }
    let status = if f.rt_throttle_writable {
        Status::Available
    } else {
        Status::NeedsPrivilege
    };
    let advice = if budget.throttles() {
        let prefix = if f.rt_throttle_writable {
            ""
        } else {
            "as root: "
        };
        Some(format!(
            "{prefix}sysctl kernel.sched_rt_runtime_us=-1 lifts the stall, but only together with a watchdog (a lower-priority FIFO task or an external monitor) since a runaway loop then owns its CPU"
        ))
    } else if !f.rt_throttle_writable {
        Some("changing the throttle needs root (sysctl kernel.sched_rt_runtime_us)".into())
    } else {
        None
    };
    check(CheckId::RtThrottling, title, status, detail, advice)
}

pub(crate) fn check_sched_deadline(f: &PlatformFacts) -> Check {
    let title = "SCHED_DEADLINE";
    let detail = format!(
        "sched_setattr(SCHED_DEADLINE, runtime 1 ms, period 10 ms) {}",
        attempt_text(&f.deadline)
    );
    match &f.deadline {
        Attempt::Succeeded => check(CheckId::SchedDeadline, title, Status::Available, detail, None),
        Attempt::Failed { errno: 1, .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::NeedsPrivilege,
            detail,
            Some("needs CAP_SYS_NICE (sudo setcap cap_sys_nice+ep $(which ictus)) and an affinity that spans the whole root domain: restrict CPUs with an exclusive cpuset, not with sched_setaffinity".into()),
        ),
        Attempt::Failed { errno: 16, .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::Unknown,
            format!("{detail}: admission control found no free bandwidth"),
            Some("other deadline tasks hold the bandwidth; check kernel.sched_rt_runtime_us".into()),
        ),
        Attempt::Failed { .. } => check(
            CheckId::SchedDeadline,
            title,
            Status::Missing,
            detail,
            Some("this kernel does not offer SCHED_DEADLINE (Linux 3.14 or later with SMP)".into()),
        ),
    }
}
