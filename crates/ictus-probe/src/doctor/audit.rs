//! What an audit yields: one [`Check`] per feature, each with its [`Status`], and the
//! [`Verdict`] drawn from them.

use ictus_os::facts::CpuIdle;
use serde::{Deserialize, Serialize};

/// How a feature stands on this machine, for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The feature is there and this process can use it.
    Available,
    /// The machine (kernel, hardware, configuration) lacks it.
    Missing,
    /// It exists, but this process may not use it.
    NeedsPrivilege,
    /// It could not be determined; the detail says why.
    Unknown,
}

impl Status {
    /// The kebab-case name, as serialized.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Missing => "missing",
            Status::NeedsPrivilege => "needs-privilege",
            Status::Unknown => "unknown",
        }
    }
}

/// One audited feature.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// Its stable identifier.
    pub id: CheckId,
    /// Short human title (at most 26 characters), such as `Real-time priority (FIFO)`.
    pub title: String,
    /// How the feature stands.
    pub status: Status,
    /// One line of facts, with numbers.
    pub detail: String,
    /// What a person can do (a command, a boot parameter), when the status is not
    /// `available` or the setting hurts real-time work.
    pub advice: Option<String>,
}

/// The whole audit: every check and the verdict drawn from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Audit {
    /// The checks, in a stable order.
    pub checks: Vec<Check>,
    /// The conclusion.
    pub verdict: Verdict,
    /// The idle facts behind the `idle-states` check, per CPU and per state (absent
    /// from audits written before ictus read them).
    #[serde(default)]
    pub idle: CpuIdle,
}

/// The conclusion of the audit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// One or two plain sentences.
    pub summary: String,
    /// What makes hard real-time impossible here (for this process).
    pub blockers: Vec<String>,
    /// What degrades real-time behaviour without preventing it.
    pub notes: Vec<String>,
}

/// The stable identifier of a check: its kebab-case name in `doctor.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    /// CPUs, topology, SMT, caches, NUMA.
    Cpus,
    /// The kernel's preemption model.
    Preemption,
    /// The tick and the timers' resolution.
    Hz,
    /// The clocksource.
    Clocksource,
    /// Whether this process may use `SCHED_FIFO`.
    RtPrivileges,
    /// The global RT throttle.
    RtThrottling,
    /// Whether this process may use `SCHED_DEADLINE`.
    SchedDeadline,
    /// cpusets and isolated CPUs.
    CpuShielding,
    /// Steering interrupts off CPUs.
    IrqAffinity,
    /// Memory locking, swap, transparent huge pages.
    Memory,
    /// The CPU frequency governor.
    Power,
    /// The idle states, what waking from them costs, and the PM QoS that keeps CPUs
    /// out of them.
    IdleStates,
    /// Whether a hypervisor runs this machine, and its steal time.
    Virtualization,
    /// The run's keys (`ictus doctor --keys FOLDER` only, after the others): when
    /// each certificate ends.
    Keys,
    /// The kernel's latency tracers.
    Tracers,
    /// A check this version does not know (an audit written by a later one).
    #[serde(other)]
    Other,
}

impl CheckId {
    /// Every check of the machine, in the order the audit lists them ([`CheckId::Keys`]
    /// follows them when asked for).
    pub const ALL: [CheckId; 14] = [
        CheckId::Cpus,
        CheckId::Preemption,
        CheckId::Hz,
        CheckId::Clocksource,
        CheckId::RtPrivileges,
        CheckId::RtThrottling,
        CheckId::SchedDeadline,
        CheckId::CpuShielding,
        CheckId::IrqAffinity,
        CheckId::Memory,
        CheckId::Power,
        CheckId::IdleStates,
        CheckId::Virtualization,
        CheckId::Tracers,
    ];

    /// Its name in `doctor.json` (`rt-privileges`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CheckId::Cpus => "cpus",
            CheckId::Preemption => "preemption",
            CheckId::Hz => "hz",
            CheckId::Clocksource => "clocksource",
            CheckId::RtPrivileges => "rt-privileges",
            CheckId::RtThrottling => "rt-throttling",
            CheckId::SchedDeadline => "sched-deadline",
            CheckId::CpuShielding => "cpu-shielding",
            CheckId::IrqAffinity => "irq-affinity",
            CheckId::Memory => "memory",
            CheckId::Power => "power",
            CheckId::IdleStates => "idle-states",
            CheckId::Virtualization => "virtualization",
            CheckId::Tracers => "tracers",
            CheckId::Keys => "keys",
            CheckId::Other => "other",
        }
    }
}

impl std::fmt::Display for CheckId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

pub(super) fn check(
    id: CheckId,
    title: &str,
    status: Status,
    detail: String,
    advice: Option<String>,
) -> Check {
    Check {
        id,
        title: title.to_owned(),
        status,
        detail,
        advice,
    }
}
