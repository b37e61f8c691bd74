//! What moved in a miss's window ([`Cause`]) and the time each accounts for of its
//! lateness ([`Timed`]), with where that time came from ([`Source`]).

use std::fmt;

use ictus_core::Nanos;
use serde::{Deserialize, Serialize};

/// A thread that ran on the CPU in the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRan {
    /// Its process id.
    pub pid: i64,
    /// Its thread id.
    pub tid: i64,
    /// Its name (`comm`).
    pub comm: String,
    /// Its policy and priority as `chrt` writes them (`FIFO 99`, `OTHER`).
    pub policy: String,
    /// How long it ran around the window (`schedstat`, ns): between the readings
    /// around it where they followed the thread (the sampler follows the 2 threads
    /// that ran most on the watched CPUs over the last second of scans), else between
    /// the scans around it.
    pub ran_ns: u64,
    /// The span `ran_ns` was read over (0 in records written before it was kept):
    /// the readings' (about the window) or the scans' (a second or less), so
    /// `ran_ns` may hold run time from outside the window; what it accounts for is
    /// bounded by the watched thread's run delay.
    #[serde(default)]
    pub over_ns: u64,
}

/// One thing that moved on the CPU in a miss's window, or the time nothing in it
/// accounts for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum Cause {
    /// Real-time threads ran the CPU's whole RT budget just before: the kernel
    /// throttled them all.
    RtThrottling {
        /// RT threads' run time on the CPU in the last RT period.
        rt_ns: u64,
        /// The period (`sched_rt_period_us`).
        period_ns: u64,
        /// The budget (`sched_rt_runtime_us`).
        runtime_ns: u64,
    },
    /// The hypervisor ran something else (steal time on the CPU, at the tick's grain).
    Steal {
        /// Stolen time in the window.
        ns: u64,
    },
    /// The thread was ready but another ran: its run delay or involuntary switches
    /// moved.
    Preempted {
        /// Time the thread waited ready to run in the window (`schedstat`).
        run_delay_ns: u64,
        /// Involuntary context switches in the window.
        involuntary: u64,
        /// The thread that ran most on the CPU in the window, where one was seen.
        by: Option<TaskRan>,
    },
    /// The thread's own execution ran past its budget.
    Overrun {
        /// Its execution time.
        exec_ns: u64,
        /// Its budget.
        budget_ns: u64,
    },
    /// Page faults of the thread.
    PageFaults {
        /// Minor faults.
        minor: u64,
        /// Major faults (a disk read).
        major: u64,
    },
    /// Interrupts served by the CPU (all but the local timer's).
    Interrupts {
        /// Lines with their count, most first.
        lines: Vec<(String, u64)>,
    },
    /// Softirqs run on the CPU (but the timer's, which every timed wake-up raises).
    Softirqs {
        /// Kinds with their count, most first.
        kinds: Vec<(String, u64)>,
    },
    /// The CPU woke from an idle state with an exit latency.
    IdleExit {
        /// The state's name.
        state: String,
        /// Its exit latency.
        exit_latency_us: u64,
        /// Entries into it in the window.
        entries: u64,
        /// Time the CPU spent idle in the window (cpuidle's `time`, every state;
        /// 0 in records written before it was kept).
        #[serde(default)]
        idle_us: u64,
    },
    /// On a virtual machine: lateness that nothing in this guest accounts for, most
    /// likely the host not running the vCPU (the guest sees only the time pass).
    HostStall {
        /// The time nothing accounts for.
        ns: u64,
        /// The hypervisor (`KVM (Firecracker)`, ...).
        hypervisor: String,
    },
    /// On bare metal: lateness that nothing on the CPU accounts for (system
    /// management interrupts, firmware).
    Unaccounted {
        /// The time nothing accounts for.
        ns: u64,
    },
}

/// A cause's kind, for the breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// [`Cause::RtThrottling`].
    RtThrottling,
    /// [`Cause::Steal`].
    Steal,
    /// [`Cause::Preempted`].
    Preempted,
    /// [`Cause::Overrun`].
    Overrun,
    /// [`Cause::PageFaults`].
    PageFaults,
    /// [`Cause::Interrupts`].
    Interrupts,
    /// [`Cause::Softirqs`].
    Softirqs,
    /// [`Cause::IdleExit`].
    IdleExit,
    /// [`Cause::HostStall`].
    HostStall,
    /// [`Cause::Unaccounted`].
    Unaccounted,
    /// Nothing visible on the CPU (records written before misses were accounted in
    /// time; now [`HostStall`](Self::HostStall) or [`Unaccounted`](Self::Unaccounted)).
    Unexplained,
}

impl CauseKind {
    /// Words for the breakdown: "30 misses: 21 with the hypervisor's steal, ...".
    pub fn phrase(self) -> &'static str {
        match self {
            CauseKind::RtThrottling => "in RT throttling",
            CauseKind::Steal => "with the hypervisor's steal",
            CauseKind::Preempted => "preempted",
            CauseKind::Overrun => "by the thread's own overrun",
            CauseKind::PageFaults => "with page faults",
            CauseKind::Interrupts => "with interrupts",
            CauseKind::Softirqs => "with softirqs",
            CauseKind::IdleExit => "waking from idle",
            CauseKind::HostStall => "host stall (the vCPU did not run)",
            CauseKind::Unaccounted => "unaccounted (SMIs, firmware)",
            CauseKind::Unexplained => "unexplained",
        }
    }

    /// Whether it is the time nothing in the guest accounts for (inferred, not read).
    pub fn is_leftover(self) -> bool {
        matches!(
            self,
            CauseKind::HostStall | CauseKind::Unaccounted | CauseKind::Unexplained
        )
    }
}

impl Cause {
    /// Its kind.
    pub fn kind(&self) -> CauseKind {
        match self {
            Cause::RtThrottling { .. } => CauseKind::RtThrottling,
            Cause::Steal { .. } => CauseKind::Steal,
            Cause::Preempted { .. } => CauseKind::Preempted,
            Cause::Overrun { .. } => CauseKind::Overrun,
            Cause::PageFaults { .. } => CauseKind::PageFaults,
            Cause::Interrupts { .. } => CauseKind::Interrupts,
            Cause::Softirqs { .. } => CauseKind::Softirqs,
            Cause::IdleExit { .. } => CauseKind::IdleExit,
            Cause::HostStall { .. } => CauseKind::HostStall,
            Cause::Unaccounted { .. } => CauseKind::Unaccounted,
        }
    }

    /// As the breakdown groups it: `preempted by kworker/1:2`, `with softirqs`, ...
    pub fn phrase(&self) -> String {
        match self {
            Cause::Preempted { by: Some(t), .. } => format!("preempted by {}", t.comm),
            c => c.kind().phrase().to_string(),
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::RtThrottling {
                rt_ns,
                period_ns,
                runtime_ns,
            } => write!(
                f,
                "RT throttling (real-time threads ran {} of the last {}, budget {})",
                Nanos::new(*rt_ns),
                Nanos::new(*period_ns),
                Nanos::new(*runtime_ns)
            ),
            Cause::Steal { ns } => write!(f, "the hypervisor stole {}", Nanos::new(*ns)),
            Cause::Preempted {
                run_delay_ns,
                involuntary,
                by,
            } => {
                match by {
                    Some(t) => {
                        write!(
                            f,
                            "preempted by {} (pid {}, {}, ran {}",
                            t.comm,
                            t.tid,
                            t.policy,
                            Nanos::new(t.ran_ns)
                        )?;
                        if t.over_ns > 0 {
                            write!(f, " in {}", Nanos::new(t.over_ns))?;
                        }
                        f.write_str(")")?;
                    }
                    None => f.write_str("preempted by a thread not seen")?,
                }
                write!(f, ": waited {} ready to run", Nanos::new(*run_delay_ns))?;
                if *involuntary > 0 {
                    write!(f, ", {involuntary} involuntary switch(es)")?;
                }
                Ok(())
            }
            Cause::Overrun { exec_ns, budget_ns } => write!(
                f,
                "its own execution took {} of a {} budget",
                Nanos::new(*exec_ns),
                Nanos::new(*budget_ns)
            ),
            Cause::PageFaults { minor, major } => {
                write!(f, "page faults: {minor} minor, {major} major")
            }
            Cause::Interrupts { lines } => {
                f.write_str("interrupts: ")?;
                list(f, lines)
            }
            Cause::Softirqs { kinds } => {
                f.write_str("softirqs: ")?;
                list(f, kinds)
            }
            Cause::IdleExit {
                state,
                exit_latency_us,
                entries,
                idle_us,
            } => {
                write!(
                    f,
                    "woke from idle state {state} (exit latency {exit_latency_us} us, {entries} entries"
                )?;
                if *idle_us > 0 {
                    write!(f, ", idle {}", Nanos::from_micros(*idle_us))?;
                }
                f.write_str(")")
            }
            Cause::HostStall { ns, hypervisor } => write!(
                f,
                "host stall: the vCPU did not run: {} that nothing in this guest accounts for \
                 ({hypervisor}; confirm with the host's view of this vCPU, or hwlat/timerlat \
                 on the host)",
                Nanos::new(*ns)
            ),
            Cause::Unaccounted { ns } => write!(
                f,
                "unaccounted: {} that nothing on this CPU accounts for (SMIs, firmware; \
                 confirm with the hwlat tracer or rtla timerlat)",
                Nanos::new(*ns)
            ),
        }
    }
}

fn list(f: &mut fmt::Formatter<'_>, items: &[(String, u64)]) -> fmt::Result {
    for (i, (name, n)) in items.iter().take(4).enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{name} {n}")?;
    }
    if items.len() > 4 {
        write!(f, " and {} more", items.len() - 4)?;
    }
    Ok(())
}

/// Where a cause's time came from, and how fine it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Not accounted (records written before misses were accounted in time).
    #[default]
    None,
    /// A thread's `schedstat` (run time, run delay): nanoseconds.
    Schedstat,
    /// `/proc/stat` per CPU (steal; IRQ and softirq time where the kernel accounts
    /// it): whole ticks of `USER_HZ` (10 ms at 100), one tick less counted.
    ProcStatTicks,
    /// A count times a measured per-event cost (interrupts and softirqs where the
    /// kernel does not account IRQ time, page faults): an estimate, at most the
    /// lateness.
    CountTimesCost,
    /// cpuidle: the exit latency of the deepest state entered (us), a bound.
    Cpuidle,
    /// The RT budget: the throttled thread's run delay, at most the period less
    /// the budget.
    RtBudget,
    /// The thread's own execution time less its budget (measured by the loop).
    Execution,
    /// The lateness less the time every other source accounts for (inferred).
    Inferred,
}

impl Source {
    /// In words, for the text of a miss.
    pub fn words(self) -> &'static str {
        match self {
            Source::None => "not accounted",
            Source::Schedstat => "schedstat, ns",
            Source::ProcStatTicks => "/proc/stat ticks, a tick less",
            Source::CountTimesCost => "count x measured per-event cost, estimate",
            Source::Cpuidle => "cpuidle exit latency",
            Source::RtBudget => "run delay under the RT budget",
            Source::Execution => "execution less budget",
            Source::Inferred => "lateness less all the above",
        }
    }
}

/// A cause with the time it accounts for of a miss's lateness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// What moved.
    #[serde(flatten)]
    pub cause: Cause,
    /// The time it accounts for, at most the lateness (0 in records written before
    /// misses were accounted in time).
    #[serde(default)]
    pub accounts_ns: u64,
    /// `accounts_ns` over the lateness, 0 to 1.
    #[serde(default)]
    pub share: f64,
    /// Where `accounts_ns` came from.
    #[serde(default)]
    pub source: Source,
}

impl Timed {
    /// A cause not accounted in time (as records before the accounting held them).
    pub fn untimed(cause: Cause) -> Timed {
        Timed {
            cause,
            accounts_ns: 0,
            share: 0.0,
            source: Source::None,
        }
    }

    /// Its kind.
    pub fn kind(&self) -> CauseKind {
        self.cause.kind()
    }
}

impl From<Cause> for Timed {
    fn from(cause: Cause) -> Timed {
        Timed::untimed(cause)
    }
}

impl fmt::Display for Timed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cause)?;
        if self.source != Source::None && !self.kind().is_leftover() {
            write!(
                f,
                " [{}, {:.0} %: {}]",
                Nanos::new(self.accounts_ns),
                self.share * 100.0,
                self.source.words()
            )?;
        } else if self.source != Source::None {
            write!(f, " [{:.0} %]", self.share * 100.0)?;
        }
        Ok(())
    }
}
