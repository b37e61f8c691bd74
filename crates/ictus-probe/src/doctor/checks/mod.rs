//! One pure function per feature: the facts in, a [`Check`](super::Check) out, with
//! advice a person can act on.

mod isolation;
mod kernel;
mod platform;
mod power;
mod privileges;

pub(super) use isolation::{check_cpu_shielding, check_irq_affinity, check_memory};
pub(super) use kernel::{check_clocksource, check_cpus, check_hz, check_preemption};
pub(super) use platform::{check_tracers, check_virtualization};
pub use power::CHEAP_EXIT_LATENCY;
pub(super) use power::{check_idle_states, check_power};
pub(super) use privileges::{check_rt_privileges, check_rt_throttling, check_sched_deadline};
