//! Task classes (seed 002 §2.1 and §4.3): the libartis API in Rust shape.
//!
//! - **RT0**: `SCHED_FIFO` at the highest priority, bound to one RT CPU, memory locked,
//!   stack prefaulted. The hard real-time task: alone on its shielded CPU.
//! - **RT1+**: `SCHED_FIFO` or `SCHED_RR` at priority 1 to 98, affinity spanning RT and
//!   NRT CPUs. Soft real-time work that may migrate.
//! - **Normal**: `SCHED_OTHER`: the "Linux tasks" of ARTiS.
//!
//! Every call acts on the calling thread and applies the priority **before** the
//! affinity, as seed 002 §4.3 requires. A call that fails part-way puts back what it had
//! changed, so a refusal changes nothing. Given a shield's [`Partition`] (its RT and
//! NRT CPUs and, once applied, its cpuset groups), the thread also joins the cpuset
//! group its class needs.
//!
//! This crate sits below the executive and the shield: it knows the partition a shield
//! makes, not how a shield is applied or journaled. `ictus-shield` reads the applied
//! shield's partition from its journal (`ictus_shield::partition::applied`) and
//! re-exports this crate as `ictus_shield::class`, with `enter_rt0` and `enter_rt1`
//! entering against the applied shield.
//!
//! ```no_run
//! use ictus_class::{Class, Options, enter, leave};
//! match enter(Class::Rt0 { cpu: 1 }, Options::default(), None) {
//!     Ok(entered) => {
//!         // ... the real-time loop ...
//!         leave(&entered).unwrap();
//!     }
//!     Err(e) => eprintln!("not RT0: {e}"),
//! }
//! ```
#![forbid(unsafe_code)]

pub mod partition;

use std::fmt;
use std::fs;
use std::path::PathBuf;

use ictus_core::CpuSet;
use ictus_os::facts;
use ictus_os::memory::{self, LockError};
use ictus_os::sched::{self, Policy, SchedError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use partition::{CpusetError, Groups, Partition};

/// The highest `SCHED_FIFO` priority: RT0's.
pub const RT0_PRIORITY: u8 = 99;

/// A real-time policy for RT1+ tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtPolicy {
    /// `SCHED_FIFO`.
    Fifo,
    /// `SCHED_RR`.
    Rr,
}

impl RtPolicy {
    /// The policy at `priority`.
    pub fn at(self, priority: u8) -> Policy {
        match self {
            RtPolicy::Fifo => Policy::Fifo { priority },
            RtPolicy::Rr => Policy::Rr { priority },
        }
    }
}

/// A task class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "lowercase")]
pub enum Class {
    /// Hard real-time, alone on RT CPU `cpu`.
    Rt0 {
        /// The RT CPU.
        cpu: usize,
    },
    /// Soft real-time, spanning RT and NRT CPUs.
    Rt1 {
        /// FIFO or RR.
        policy: RtPolicy,
        /// 1 to 98 (99 is RT0's).
        priority: u8,
    },
    /// `SCHED_OTHER`.
    Normal,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Class::Rt0 { cpu } => write!(f, "RT0 (fifo {RT0_PRIORITY}) on CPU {cpu}"),
            Class::Rt1 { policy, priority } => write!(f, "RT1+ ({})", policy.at(*priority)),
            Class::Normal => f.write_str("normal (other)"),
        }
    }
}

/// Why a class could not be entered. Nothing was left changed.
#[derive(Debug, Error)]
pub enum ClassError {
    /// The scheduling policy was refused (the advice names the missing privilege).
    #[error(transparent)]
    Policy(SchedError),
    /// The affinity was refused.
    #[error(transparent)]
    Affinity(SchedError),
    /// Memory could not be locked (RT0 needs it).
    #[error("RT0 needs its memory locked: {0}")]
    Memory(#[source] LockError),
    /// RT1+ priorities are 1 to 98.
    #[error("RT1+ priority {0} is out of range: use 1 to 98 (99 is RT0's)")]
    Priority(u8),
    /// The CPU is not online.
    #[error("CPU {cpu} is not online (online: {online})")]
    CpuOffline {
        /// The CPU asked for.
        cpu: usize,
        /// The online CPUs.
        online: CpuSet,
    },
    /// A shield is applied and the CPU is not one of its RT CPUs.
    #[error(
        "CPU {cpu} is not an RT CPU of the applied shield (RT CPUs: {rt}); RT0 runs on an RT CPU"
    )]
    NotRtCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The shield's RT CPUs.
        rt: CpuSet,
    },
    /// Joining the shield's cpuset group failed.
    #[error(transparent)]
    Cpuset(CpusetError),
}

/// What a class entry changed, to put back with [`leave`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entered {
    /// The class entered.
    pub class: Class,
    /// The thread.
    pub tid: i32,
    /// Its policy before.
    pub policy_before: Policy,
    /// Its affinity before.
    pub affinity_before: CpuSet,
    /// The cgroup file it was in before, when a shield made it move.
    pub cpuset_before: Option<PathBuf>,
    /// The CPUs it may run on now.
    pub affinity: CpuSet,
    /// Whether all of the process's memory is locked (RT0 only; a process-wide lock
    /// that `leave` does not undo: other threads may rely on it).
    pub memory_locked: bool,
    /// Things worth knowing (no shield applied, ...).
    pub notes: Vec<String>,
}

/// What to do beyond policy and affinity; `exec` turns off what does not survive exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Lock memory (RT0). `mlockall` does not survive `execve`.
    pub lock_memory: bool,
    /// Prefault the stack (RT0). Meaningless across `execve`.
    pub prefault_stack: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lock_memory: true,
            prefault_stack: true,
        }
    }
}

/// Enters `class` with `options`, against `shield` (the applied shield's partition, or
/// `None` for none). `ictus_shield::class::enter_rt0` and `enter_rt1` call this with
/// the applied shield, read from its journal.
pub fn enter(
    class: Class,
    options: Options,
    shield: Option<&Partition>,
) -> Result<Entered, ClassError> {
    let (policy, affinity, rt_group) = target(&class, shield, facts::online_cpus())?;
    let tid = sched::thread_id() as i32;
    let policy_before = sched::current_policy().map_err(ClassError::Policy)?;
    let affinity_before = sched::current_affinity().map_err(ClassError::Affinity)?;
    let mut notes = Vec::new();
    if shield.is_none() && matches!(class, Class::Rt0 { .. }) {
        notes.push(
            "no shield is applied: the RT0 CPU is shared with every other task and IRQ; \
             `ictus shield apply --rt-cpus LIST` keeps them off"
                .to_string(),
        );
    }

    // Priority first (seed 002 §4.3), then the cpuset, then the affinity.
    sched::set_policy(policy).map_err(ClassError::Policy)?;
    let undo_policy = || {
        let _ = sched::set_policy(policy_before);
    };
    let mut cpuset_before = None;
    if let (Some(rt), Some(p)) = (rt_group, shield) {
        cpuset_before = current_cgroup_file(p);
        if let Err(e) = p.admit(tid, rt) {
            undo_policy();
            return Err(ClassError::Cpuset(e));
        }
    }
    let undo_cpuset = |before: &Option<PathBuf>| {
        if let Some(file) = before {
            let _ = fs::write(file, tid.to_string());
        }
    };
    if let Err(e) = sched::set_affinity(&affinity) {
        undo_cpuset(&cpuset_before);
        let _ = sched::set_affinity(&affinity_before);
        undo_policy();
        return Err(ClassError::Affinity(e));
    }
    let mut memory_locked = false;
    if matches!(class, Class::Rt0 { .. }) {
        if options.lock_memory {
            if let Err(e) = memory::lock_all() {
                undo_cpuset(&cpuset_before);
                let _ = sched::set_affinity(&affinity_before);
                undo_policy();
                return Err(ClassError::Memory(e));
            }
            memory_locked = true;
        }
        if options.prefault_stack {
            memory::prefault_stack();
        }
    }
    Ok(Entered {
        class,
        tid,
        policy_before,
        affinity_before,
        cpuset_before,
        affinity,
        memory_locked,
        notes,
    })
}

/// What entering `class` sets, against `shield` with the `online` CPUs: the policy,
/// the affinity and the cpuset group (`Some(true)`: the RT group, `Some(false)`: the
/// NRT group, `None`: left as it is); or why it cannot be entered.
fn target(
    class: &Class,
    shield: Option<&Partition>,
    online: CpuSet,
) -> Result<(Policy, CpuSet, Option<bool>), ClassError> {
    Ok(match class {
        Class::Rt0 { cpu } => {
            if !online.contains(*cpu) {
                return Err(ClassError::CpuOffline { cpu: *cpu, online });
            }
            if let Some(p) = shield
                && !p.is_rt(*cpu)
            {
                return Err(ClassError::NotRtCpu {
                    cpu: *cpu,
                    rt: p.rt.clone(),
                });
            }
            (
                Policy::Fifo {
                    priority: RT0_PRIORITY,
                },
                CpuSet::from_cpus([*cpu]),
                Some(true),
            )
        }
        Class::Rt1 { policy, priority } => {
            if !(1..=98).contains(priority) {
                return Err(ClassError::Priority(*priority));
            }
            let span = match shield {
                Some(p) if p.groups.as_ref().is_some_and(|g| g.cgroup_version == 2) => {
                    p.nrt.clone()
                }
                Some(p) => p.all(),
                None => online.clone(),
            };
            (policy.at(*priority), span, Some(false))
        }
        Class::Normal => (
            Policy::Other { nice: 0 },
            shield.map_or_else(|| online.clone(), |p| p.nrt.clone()),
            None,
        ),
    })
}

/// Leaves the class (`artis_leave_rt0` / `artis_leave_rt1plus`): the affinity and cpuset
/// group first, then the policy, as they were before `entered`.
pub fn leave(entered: &Entered) -> Result<(), ClassError> {
    if let Some(file) = &entered.cpuset_before {
        let id = entered.tid.to_string();
        fs::write(file, &id).map_err(|source| {
            ClassError::Cpuset(CpusetError {
                path: file.clone(),
                value: id,
                source,
            })
        })?;
    }
    sched::set_affinity(&entered.affinity_before).map_err(ClassError::Affinity)?;
    sched::set_policy(entered.policy_before).map_err(ClassError::Policy)
}

/// The cgroup join file of the calling thread's current cpuset group, under the shield's
/// root (from `/proc/thread-self/cgroup`).
fn current_cgroup_file(p: &Partition) -> Option<PathBuf> {
    let groups = p.groups.as_ref()?;
    let text = fs::read_to_string("/proc/thread-self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = if groups.cgroup_version == 1 {
            controllers.split(',').any(|c| c == "cpuset")
        } else {
            controllers.is_empty()
        };
        wanted.then(|| path.trim_start_matches('/').to_string())
    })?;
    let dir = if rel.is_empty() {
        groups.root.clone()
    } else {
        groups.root.join(rel)
    };
    Some(if groups.cgroup_version == 1 {
        dir.join("tasks")
    } else {
        dir.join("cgroup.procs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn rt1_priority_99_is_refused_before_any_change() {
        let got = in_thread(|| {
            let before = sched::current_policy().unwrap();
            let r = enter(
                Class::Rt1 {
                    policy: RtPolicy::Fifo,
                    priority: 99,
                },
                Options::default(),
                None,
            );
            (r.map(|_| ()), before, sched::current_policy().unwrap())
        });
        assert!(matches!(got.0, Err(ClassError::Priority(99))));
        assert_eq!(got.1, got.2);
    }

    #[test]
    fn rt0_on_an_offline_cpu_is_refused() {
        let r = in_thread(|| enter(Class::Rt0 { cpu: 1000 }, Options::default(), None));
        assert!(matches!(r, Err(ClassError::CpuOffline { cpu: 1000, .. })));
    }

    #[test]
    fn rt0_on_an_nrt_cpu_of_a_shield_is_refused() {
        let online = facts::online_cpus();
        let Some(&last) = online.cpus().last().filter(|_| online.len() >= 2) else {
            ictus_os::testing::skipped(
                "rt0_on_an_nrt_cpu_of_a_shield_is_refused",
                "needs two online CPUs",
            );
            return;
        };
        let shield = Partition {
            rt: CpuSet::from_cpus([last]),
            nrt: CpuSet::from_cpus(online.cpus().iter().copied().filter(|&c| c != last)),
            groups: None,
        };
        let nrt = shield.nrt.cpus()[0];
        let r =
            in_thread(move || enter(Class::Rt0 { cpu: nrt }, Options::default(), Some(&shield)));
        assert!(matches!(r, Err(ClassError::NotRtCpu { .. })));
    }

    #[test]
    fn normal_class_enters_and_leaves() {
        let (entered, after) = in_thread(|| {
            let e = enter(Class::Normal, Options::default(), None).unwrap();
            leave(&e).unwrap();
            (e, sched::current_affinity().unwrap())
        });
        assert_eq!(entered.affinity, facts::online_cpus());
        assert_eq!(after, entered.affinity_before);
    }

    #[test]
    fn rt_classes_apply_policy_and_affinity_or_name_the_privilege() {
        let privileged =
            facts::capabilities().is_some_and(|c| c.has(facts::Capabilities::SYS_NICE));
        if let Some(why) = ictus_os::testing::realtime_refused().filter(|_| privileged) {
            ictus_os::testing::skipped(
                "rt_classes_apply_policy_and_affinity_or_name_the_privilege",
                &format!("SCHED_FIFO is refused here even with CAP_SYS_NICE: {why}"),
            );
            return;
        }
        let online = facts::online_cpus();
        let cpu = *online.cpus().last().unwrap();
        let got = in_thread(move || {
            let r = enter(
                Class::Rt0 { cpu },
                Options {
                    lock_memory: false,
                    prefault_stack: true,
                },
                None,
            );
            let now = (sched::current_policy(), sched::current_affinity());
            if let Ok(e) = &r {
                leave(e).unwrap();
            }
            (r, now, sched::current_policy().unwrap())
        });
        match got.0 {
            Ok(e) => {
                assert_eq!(got.1.0.unwrap(), Policy::Fifo { priority: 99 });
                assert_eq!(got.1.1.unwrap(), CpuSet::from_cpus([cpu]));
                assert_eq!(got.2, e.policy_before);
                assert!(!e.notes.is_empty(), "no shield: a note says so");
            }
            Err(ClassError::Policy(e)) => {
                assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}");
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
}
