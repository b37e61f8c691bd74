//! The platform audit behind `ictus doctor`: which real-time features this machine
//! has, which this process may use, and what to do about the rest.
//!
//! The audit gathers [`PlatformFacts`] once (from [`ictus_os::facts`]), then builds one
//! [`Check`] per feature with a pure function of those facts, so every verdict can be
//! tested with invented machines. Missing features never make the audit fail.
//!
//! ```
//! let audit = ictus_probe::doctor::audit();
//! assert!(audit.checks.iter().any(|c| c.id == ictus_probe::doctor::CheckId::Preemption));
//! assert!(!audit.verdict.summary.is_empty());
//! ```

mod audit;
mod checks;
mod facts;
mod text;
mod verdict;

pub use audit::{Audit, Check, CheckId, Status, Verdict};
pub use checks::CHEAP_EXIT_LATENCY;
pub use facts::PlatformFacts;

use checks::{
    check_clocksource, check_cpu_shielding, check_cpus, check_hz, check_idle_states,
    check_irq_affinity, check_memory, check_power, check_preemption, check_rt_privileges,
    check_rt_throttling, check_sched_deadline, check_tracers, check_virtualization,
};
use verdict::verdict;

/// Audits the running machine.
pub fn audit() -> Audit {
    audit_from(&PlatformFacts::gather())
}

/// Audits the machine the facts describe.
pub fn audit_from(f: &PlatformFacts) -> Audit {
    let checks = vec![
        check_cpus(f),
        check_preemption(f),
        check_hz(f),
        check_clocksource(f),
        check_rt_privileges(f),
        check_rt_throttling(f),
        check_sched_deadline(f),
        check_cpu_shielding(f),
        check_irq_affinity(f),
        check_memory(f),
        check_power(f),
        check_idle_states(f),
        check_virtualization(f),
        check_tracers(f),
    ];
    let verdict = verdict(f, &checks);
    Audit {
        checks,
        verdict,
        idle: f.idle.clone(),
    }
}

#[cfg(test)]
mod tests;
