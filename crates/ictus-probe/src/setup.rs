//! Setting up measuring threads, the same way for every probe: pin, set the policy,
//! prefault the stack, and read back what was obtained. A refusal is a [`Warning`]
//! with its cause and fix; the thread goes on with what it has.
//!
//! ```no_run
//! use ictus_os::sched::Policy;
//! let (config, warnings) = ictus_probe::setup::prepare_thread(Some(1), Policy::Fifo { priority: 80 });
//! assert_eq!(config.pinned_cpu, Some(1));
//! for w in warnings {
//!     eprintln!("{}", w.message);
//! }
//! ```

use crate::record::WarningId;
use ictus_core::CpuSet;
use ictus_os::memory;
use ictus_os::sched::{self, Policy, SchedError};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::record::{ThreadConfig, Warning};

/// How long a probe measures (a run, or each of its points, after the warm-up): for
/// a wall-clock time, or a number of its rounds (the timer's periods, the hand-off
/// probe's round trips, throughput's messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Length {
    /// For this long (wall clock).
    Duration(ictus_core::Nanos),
    /// This many rounds.
    Count(u64),
}

/// One value of a probe's option, or every value in turn (`--primitive all`,
/// `--placement both`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice<T> {
    /// This value only.
    One(T),
    /// Every value, in the probe's order.
    All,
}

impl<T: Copy> Choice<T> {
    /// The values chosen: `all` (every value, in order) for [`Choice::All`].
    pub fn values(self, all: &[T]) -> Vec<T> {
        match self {
            Choice::One(v) => vec![v],
            Choice::All => all.to_vec(),
        }
    }
}

/// The command line's parser of a [`Choice`]: each value's name and help, then the
/// name and help of [`Choice::All`].
#[cfg(feature = "cli")]
pub fn choice_parser<T: Copy + Send + Sync + 'static>(
    values: &'static [(T, &'static str, &'static str)],
    all: (&'static str, &'static str),
) -> impl clap::builder::TypedValueParser<Value = Choice<T>> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let possible = values
        .iter()
        .map(|&(_, name, help)| PossibleValue::new(name).help(help))
        .chain(std::iter::once(PossibleValue::new(all.0).help(all.1)));
    PossibleValuesParser::new(possible).map(move |name: String| {
        values
            .iter()
            .find(|(_, n, _)| *n == name)
            .map_or(Choice::All, |&(v, _, _)| Choice::One(v))
    })
}

/// How a probe's threads are scheduled (the options every probe shares).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedSpec {
    /// CPUs to run on (one measuring thread each, where the probe says so).
    pub cpus: CpuSet,
    /// Pin each thread to its CPU.
    pub pin: bool,
    /// Scheduling policy of the measuring threads.
    pub policy: Policy,
    /// Lock all memory first.
    pub mlock: bool,
    /// The CPU latency QoS held for the run by the probes that measure a latency
    /// (0 us by default, as cyclictest; `off` measures the machine as it idles).
    #[serde(default)]
    pub pm_qos: ictus_os::pm_qos::PmQos,
    /// Explain every miss (a sampler off the measured CPUs), for the probes that
    /// count misses.
    #[serde(default = "explain_by_default")]
    pub explain: bool,
    /// The lateness from which a release is a miss to explain (default: the probe's
    /// period).
    #[serde(default)]
    pub explain_threshold: Option<ictus_core::Nanos>,
}

impl SchedSpec {
    /// Each thread pinned to its CPU of `cpus`, in `policy`; memory not locked, the CPU
    /// latency QoS at its default (0 us), every miss explained from the probe's
    /// period: what most probes run with by default.
    ///
    /// ```
    /// use ictus_os::sched::Policy;
    /// use ictus_probe::setup::SchedSpec;
    ///
    /// let sut = SchedSpec::pinned("1".parse().unwrap(), Policy::Fifo { priority: 95 });
    /// assert!(sut.pin && sut.explain && !sut.mlock);
    /// ```
    pub fn pinned(cpus: CpuSet, policy: Policy) -> SchedSpec {
        SchedSpec {
            cpus,
            pin: true,
            policy,
            mlock: false,
            pm_qos: Default::default(),
            explain: explain_by_default(),
            explain_threshold: None,
        }
    }
}

fn explain_by_default() -> bool {
    true
}

/// What refuses a probe's placement (in its `validate`, before anything runs) or
/// its measuring threads: the same for every probe that measures on chosen CPUs in
/// a chosen policy (each probe's error carries it as its `Setup` variant, with
/// these messages).
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// A CPU that is not online.
    #[error("CPU {cpu} is not online (online CPUs: {online})")]
    CpuOffline {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs that are online.
        online: CpuSet,
    },
    /// A policy the kernel can never accept (out of range).
    #[error(transparent)]
    Policy(SchedError),
    /// A measuring thread could not be started.
    #[error("starting measuring thread {thread} failed: {source}")]
    Spawn {
        /// Thread index.
        thread: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Refuses the first of `cpus` that is not online, naming the CPUs that are.
pub fn check_online(cpus: &[usize]) -> Result<(), PlacementError> {
    let online = ictus_os::facts::online_cpus();
    match cpus.iter().find(|&&c| !online.contains(c)) {
        Some(&cpu) => Err(PlacementError::CpuOffline { cpu, online }),
        None => Ok(()),
    }
}

/// [`check_online`], then refuses a policy the kernel can never accept.
pub fn check_placement(cpus: &[usize], policy: Policy) -> Result<(), PlacementError> {
    check_online(cpus)?;
    policy.check_range().map_err(PlacementError::Policy)
}

/// Prepares the calling thread: pins it to `cpu` (if given), sets `policy`, prefaults
/// its stack, then reads back the affinity and policy actually obtained.
pub fn prepare_thread(cpu: Option<usize>, policy: Policy) -> (ThreadConfig, Vec<Warning>) {
    let mut warnings = Vec::new();
    // Pin first, so the policy applies on the right CPU.
    if let Some(cpu) = cpu
        && let Err(e) = sched::set_affinity(&CpuSet::from_cpus([cpu]))
    {
        warnings.push(Warning {
            id: WarningId::AffinityRefused,
            message: format!("thread for CPU {cpu} runs unpinned: {e}"),
            advice: None,
        });
    }
    if let Err(e) = sched::set_policy(policy) {
        let (message, advice) = match &e {
            SchedError::Refused { source, advice, .. } => (
                format!(
                    "{policy} refused ({source}); measured with the policy the thread already had"
                ),
                Some(advice.clone()),
            ),
            other => (other.to_string(), None),
        };
        warnings.push(Warning {
            id: WarningId::PolicyRefused,
            message,
            advice,
        });
    }
    memory::prefault_stack();
    let config = ThreadConfig {
        tid: sched::thread_id(),
        pinned_cpu: cpu,
        affinity: sched::current_affinity().unwrap_or_default(),
        policy_requested: policy,
        policy: sched::current_policy().unwrap_or(policy),
        hybrid_margin_ns: None,
    };
    (config, warnings)
}

/// Returns the calling thread to SCHED_OTHER (teardown of a measuring thread).
pub fn release_thread() {
    let _ = sched::set_policy(Policy::Other { nice: 0 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normal_thread_is_prepared_without_warnings() {
        std::thread::spawn(|| {
            let cpu = ictus_os::facts::online_cpus().cpus()[0];
            let (sut, warnings) = prepare_thread(Some(cpu), Policy::Other { nice: 1 });
            assert!(warnings.is_empty(), "{warnings:?}");
            assert_eq!(sut.affinity, CpuSet::from_cpus([cpu]));
            assert_eq!(sut.policy, Policy::Other { nice: 1 });
        })
        .join()
        .unwrap();
    }
}

/// Where a probe's two threads run (the hand-off and the throughput probes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Both on the first CPU of the set (seed 004's SP).
    SameCpu,
    /// On the first two CPUs of the set (seed 004's MP).
    CrossCpu,
}

impl Placement {
    /// Both placements, in the order `both` runs them.
    pub const ALL: [Placement; 2] = [Placement::SameCpu, Placement::CrossCpu];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Placement::SameCpu => "same-cpu",
            Placement::CrossCpu => "cross-cpu",
        }
    }

    /// The CPUs of the two threads taken from `cpus`: both on the first, or on the
    /// first two (the set must be long enough: the probes' `validate` checks it).
    pub fn cpus(self, cpus: &CpuSet) -> (usize, usize) {
        let cpus = cpus.cpus();
        match self {
            Placement::SameCpu => (cpus[0], cpus[0]),
            Placement::CrossCpu => (cpus[0], cpus[1]),
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
