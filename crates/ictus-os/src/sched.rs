//! Scheduling of the calling thread: policy, priority and CPU affinity, set and read
//! back. A refusal carries its cause and the fix.
//!
//! ```no_run
//! use ictus_os::sched::{self, Policy};
//! match sched::set_policy(Policy::Fifo { priority: 80 }) {
//!     Ok(()) => assert_eq!(sched::current_policy().unwrap(), Policy::Fifo { priority: 80 }),
//!     Err(e) => eprintln!("running without SCHED_FIFO: {e}"),
//! }
//! ```

use std::fmt;
use std::io;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::facts;
use crate::facts::Capabilities;

/// A Linux scheduling policy with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "lowercase")]
pub enum Policy {
    /// `SCHED_OTHER` (CFS/EEVDF) with a nice value (-20 to 19).
    Other {
        /// Nice value.
        nice: i32,
    },
    /// `SCHED_BATCH` with a nice value.
    Batch {
        /// Nice value.
        nice: i32,
    },
    /// `SCHED_IDLE`.
    Idle,
    /// `SCHED_FIFO` at a priority from 1 to 99.
    Fifo {
        /// Real-time priority.
        priority: u8,
    },
    /// `SCHED_RR` at a priority from 1 to 99.
    Rr {
        /// Real-time priority.
        priority: u8,
    },
    /// `SCHED_DEADLINE` with its reservation.
    Deadline {
        /// Runtime budget per period.
        runtime_ns: u64,
        /// Relative deadline.
        deadline_ns: u64,
        /// Period.
        period_ns: u64,
    },
}

/// Which policy, without its parameters: what `--policy` names on the command line
/// (the priority, nice value or reservation come from other options).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum PolicyKind {
    /// `SCHED_OTHER`.
    #[cfg_attr(feature = "cli", value(help = "SCHED_OTHER (with --nice)"))]
    Other,
    /// `SCHED_BATCH`.
    #[cfg_attr(feature = "cli", value(help = "SCHED_BATCH (with --nice)"))]
    Batch,
    /// `SCHED_IDLE`.
    #[cfg_attr(feature = "cli", value(help = "SCHED_IDLE"))]
    Idle,
    /// `SCHED_FIFO`.
    #[cfg_attr(feature = "cli", value(help = "SCHED_FIFO (with --priority)"))]
    Fifo,
    /// `SCHED_RR`.
    #[cfg_attr(feature = "cli", value(help = "SCHED_RR (with --priority)"))]
    Rr,
    /// `SCHED_DEADLINE`.
    #[cfg_attr(
        feature = "cli",
        value(help = "SCHED_DEADLINE (runtime --dl-runtime, deadline and period = --interval)")
    )]
    Deadline,
}

impl Policy {
    /// The policy's name: `other`, `batch`, `idle`, `fifo`, `rr`, `deadline`.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "other",
            Policy::Batch { .. } => "batch",
            Policy::Idle => "idle",
            Policy::Fifo { .. } => "fifo",
            Policy::Rr { .. } => "rr",
            Policy::Deadline { .. } => "deadline",
        }
    }

    /// Whether this is a real-time policy (FIFO, RR or DEADLINE).
    pub fn is_realtime(&self) -> bool {
        matches!(
            self,
            Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. }
        )
    }

    /// Refuses a priority or nice value the kernel never accepts, before any call.
    pub fn check_range(&self) -> Result<(), SchedError> {
        let ok = match *self {
            Policy::Fifo { priority } | Policy::Rr { priority } => (1..=99).contains(&priority),
            Policy::Other { nice } | Policy::Batch { nice } => (-20..=19).contains(&nice),
            Policy::Idle | Policy::Deadline { .. } => true,
        };
        if ok {
            Ok(())
        } else {
            Err(SchedError::OutOfRange { policy: *self })
        }
    }

    fn kernel_id(&self) -> u32 {
        (match self {
            Policy::Other { .. } => libc::SCHED_OTHER,
            Policy::Batch { .. } => libc::SCHED_BATCH,
            Policy::Idle => libc::SCHED_IDLE,
            Policy::Fifo { .. } => libc::SCHED_FIFO,
            Policy::Rr { .. } => libc::SCHED_RR,
            Policy::Deadline { .. } => SCHED_DEADLINE,
        }) as u32
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Other { nice: 0 } | Policy::Batch { nice: 0 } => f.write_str(self.name()),
            Policy::Other { nice } | Policy::Batch { nice } => {
                write!(f, "{} (nice {nice})", self.name())
            }
            Policy::Idle => f.write_str("idle"),
            Policy::Fifo { priority } | Policy::Rr { priority } => {
                write!(f, "{} {priority}", self.name())
            }
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
            } => write!(
                f,
                "deadline (runtime {runtime_ns} ns, deadline {deadline_ns} ns, period {period_ns} ns)"
            ),
        }
    }
}

const SCHED_DEADLINE: i32 = 6;

/// Why a scheduling request failed.
#[derive(Debug, Error)]
pub enum SchedError {
    /// The kernel refused the policy (usually EPERM).
    #[error("{policy} refused: {source}. {advice}")]
    Refused {
        /// What was asked for.
        policy: Policy,
        /// The kernel's answer.
        #[source]
        source: io::Error,
        /// The likely cause and the fix.
        advice: String,
    },
    /// A priority or nice value outside what the policy accepts.
    #[error("{policy}: value out of range (priorities 1 to 99, nice -20 to 19)")]
    OutOfRange {
        /// What was asked for.
        policy: Policy,
    },
    /// Pinning to CPUs that are not online.
    #[error("CPU {cpu} is not online (online CPUs: {online})")]
    CpuOffline {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs that are online.
        online: CpuSet,
    },
    /// The kernel refused the affinity (for example, outside this process's cpuset).
    #[error("pinning to CPUs {cpus} refused: {source}. {advice}")]
    Affinity {
        /// The CPUs asked for.
        cpus: CpuSet,
        /// The kernel's answer.
        #[source]
        source: io::Error,
        /// The likely cause and the fix.
        advice: String,
    },
    /// Reading the current setting back failed.
    #[error("reading the scheduling setting back failed: {0}")]
    Read(#[source] io::Error),
}

/// The kernel's `struct sched_attr` (first version, 48 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// Sets the calling thread's policy with `sched_setattr`.
pub fn set_policy(policy: Policy) -> Result<(), SchedError> {
    set_policy_of(0, policy)
}

/// Sets thread `tid`'s policy with `sched_setattr` (`tid` 0 is the calling thread).
/// Changing another user's thread, or raising any thread to a real-time policy, needs
/// `CAP_SYS_NICE` (or a large enough `RLIMIT_RTPRIO`).
pub fn set_policy_of(tid: i32, policy: Policy) -> Result<(), SchedError> {
    let mut attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: policy.kernel_id(),
        ..SchedAttr::default()
    };
    policy.check_range()?;
    match policy {
        Policy::Other { nice } | Policy::Batch { nice } => attr.sched_nice = nice,
        Policy::Idle => {}
        Policy::Fifo { priority } | Policy::Rr { priority } => {
            attr.sched_priority = u32::from(priority);
        }
        Policy::Deadline {
            runtime_ns,
            deadline_ns,
            period_ns,
        } => {
            attr.sched_runtime = runtime_ns;
            attr.sched_deadline = deadline_ns;
            attr.sched_period = period_ns;
        }
    }
    // SAFETY: `attr` is a fully initialised sched_attr whose `size` field matches its
    // layout; `tid` is a plain integer (0 names the calling thread); the kernel only
    // reads `attr`.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    let advice = refusal_advice(&policy, &source);
    Err(SchedError::Refused {
        policy,
        source,
        advice,
    })
}

/// Reads the calling thread's policy back with `sched_getattr`.
pub fn current_policy() -> Result<Policy, SchedError> {
    policy_of(0)
}

/// Reads thread `tid`'s policy with `sched_getattr` (`tid` 0 is the calling thread).
pub fn policy_of(tid: i32) -> Result<Policy, SchedError> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is writable and as large as the size passed; `tid` is a plain
    // integer; the kernel writes at most `size` bytes into `attr`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if rc != 0 {
        return Err(SchedError::Read(io::Error::last_os_error()));
    }
    // The kernel may report SCHED_RESET_ON_FORK in the policy word's high bit.
    let id = (attr.sched_policy & !0x4000_0000) as i32;
    Ok(match id {
        libc::SCHED_FIFO => Policy::Fifo {
            priority: attr.sched_priority as u8,
        },
        libc::SCHED_RR => Policy::Rr {
            priority: attr.sched_priority as u8,
        },
        libc::SCHED_BATCH => Policy::Batch {
            nice: attr.sched_nice,
        },
        libc::SCHED_IDLE => Policy::Idle,
        SCHED_DEADLINE => Policy::Deadline {
            runtime_ns: attr.sched_runtime,
            deadline_ns: attr.sched_deadline,
            period_ns: attr.sched_period,
        },
        _ => Policy::Other {
            nice: attr.sched_nice,
        },
    })
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): how much later than
/// asked the kernel may end its sleeps to group wake-ups (50 us by default for a
/// normal thread; real-time threads have none). 1 ns asks for none.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of
    // ours; the unused arguments are zero as prctl(2) asks.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pins the calling thread to `cpus`.
pub fn set_affinity(cpus: &CpuSet) -> Result<(), SchedError> {
    let online = facts::online_cpus();
    if let Some(&cpu) = cpus.cpus().iter().find(|&&c| !online.contains(c)) {
        return Err(SchedError::CpuOffline { cpu, online });
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.cpus() {
        // SAFETY: every cpu is below MAX_CPU (1023) < CPU_SETSIZE (1024), checked by CpuSet.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        return Ok(());
    }
    let source = io::Error::last_os_error();
    let advice = match source.raw_os_error() {
        Some(libc::EINVAL) => format!(
            "The CPUs are outside this process's cpuset ({}); run it in a cpuset that includes them.",
            current_affinity()
                .map(|c| c.to_string())
                .unwrap_or_default()
        ),
        Some(libc::EPERM) => {
            "Changing the affinity of another user's thread needs CAP_SYS_NICE.".to_string()
        }
        _ => String::new(),
    };
    Err(SchedError::Affinity {
        cpus: cpus.clone(),
        source,
        advice,
    })
}

/// The CPUs the calling thread may run on.
pub fn current_affinity() -> Result<CpuSet, SchedError> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(SchedError::Read(io::Error::last_os_error()));
    }
    Ok(CpuSet::from_cpus((0..libc::CPU_SETSIZE as usize).filter(
        |&c| {
            // SAFETY: c < CPU_SETSIZE, and `set` is initialised.
            unsafe { libc::CPU_ISSET(c, &set) }
        },
    )))
}

/// The CPU the calling thread runs on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// The kernel thread id of the calling thread.
pub fn thread_id() -> i64 {
    // SAFETY: gettid takes no arguments and cannot fail.
    i64::from(unsafe { libc::gettid() })
}

/// Why a real-time policy was refused, and what would fix it.
fn refusal_advice(policy: &Policy, err: &io::Error) -> String {
    if err.raw_os_error() == Some(libc::EBUSY) {
        return "SCHED_DEADLINE admission control refused the reservation: the CPUs' \
                deadline bandwidth is used up; ask for less runtime per period."
            .to_string();
    }
    if err.raw_os_error() != Some(libc::EPERM) || !policy.is_realtime() {
        if let Policy::Other { nice } | Policy::Batch { nice } = policy
            && *nice < 0
        {
            return format!(
                "A negative nice value needs CAP_SYS_NICE or an RLIMIT_NICE of at least {} \
                 (`ulimit -e {}`).",
                20 - nice,
                20 - nice
            );
        }
        return String::new();
    }
    let priority = match policy {
        Policy::Fifo { priority } | Policy::Rr { priority } => u64::from(*priority),
        _ => 0,
    };
    let mut causes = Vec::new();
    let cap_sys_nice = facts::capabilities().is_some_and(|c| c.has(Capabilities::SYS_NICE));
    if !cap_sys_nice {
        // `None` is unlimited.
        let limit = facts::rlimit_rtprio().map_or(Some(0), |l| l.soft);
        if matches!(policy, Policy::Deadline { .. }) {
            causes.push(
                "SCHED_DEADLINE needs CAP_SYS_NICE: run as root or `setcap cap_sys_nice+ep` on the binary"
                    .to_string(),
            );
        } else if let Some(limit) = limit.filter(|&l| l < priority) {
            causes.push(format!(
                "this process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO is {limit} (below {priority}): \
                 run as root, `setcap cap_sys_nice+ep` on the binary, or raise the limit \
                 (`ulimit -r {priority}`, or `@realtime - rtprio {priority}` in /etc/security/limits.conf)"
            ));
        }
    }
    let cgroups = facts::cgroups();
    if cgroups
        .cpu_rt_budget
        .is_some_and(|b| b.runtime_ns == Some(ictus_core::Nanos::ZERO))
    {
        let path = cgroups
            .memberships
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == "cpu"))
            .map_or("?", |m| m.path.as_str());
        causes.push(format!(
            "the process sits in cpu cgroup {path} whose cpu.rt_runtime_us is 0: give that cgroup \
             an RT budget or move the process to the root cpu cgroup"
        ));
    }
    if causes.is_empty() {
        causes.push(
            "the kernel refused without a visible cause: a container runtime or security module \
             (seccomp, SELinux) may forbid real-time policies here"
                .to_string(),
        );
    }
    format!("Cause: {}.", causes.join("; or "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_has_the_kernels_first_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48);
    }

    #[test]
    fn policy_of_own_tid_is_the_current_policy() {
        let tid = thread_id() as i32;
        assert_eq!(policy_of(tid).unwrap(), current_policy().unwrap());
        set_policy_of(tid, Policy::Other { nice: 0 }).unwrap();
    }

    #[test]
    fn out_of_range_priorities_are_refused_before_the_kernel() {
        assert!(matches!(
            set_policy(Policy::Fifo { priority: 0 }),
            Err(SchedError::OutOfRange { .. })
        ));
        assert!(matches!(
            set_policy(Policy::Other { nice: 40 }),
            Err(SchedError::OutOfRange { .. })
        ));
    }

    #[test]
    fn other_policy_reads_back_on_a_fresh_thread() {
        std::thread::spawn(|| {
            set_policy(Policy::Other { nice: 5 }).unwrap();
            assert_eq!(current_policy().unwrap(), Policy::Other { nice: 5 });
        })
        .join()
        .unwrap();
    }

    #[test]
    fn affinity_round_trips_on_a_fresh_thread() {
        std::thread::spawn(|| {
            let first = facts::online_cpus().cpus()[0];
            let sut = CpuSet::from_cpus([first]);
            set_affinity(&sut).unwrap();
            assert_eq!(current_affinity().unwrap(), sut);
            assert_eq!(current_cpu(), Some(first));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_offline_cpu_is_named() {
        let err = set_affinity(&CpuSet::from_cpus([1000])).unwrap_err();
        assert!(matches!(err, SchedError::CpuOffline { cpu: 1000, .. }));
    }
}
