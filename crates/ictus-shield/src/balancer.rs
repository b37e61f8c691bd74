//! The asymmetric balancer (seed 002 §2.3, §3.2). SKELETON: the API is fixed, the
//! bodies are being written.
//!
//! A supervisor thread on the NRT CPUs periodically places the RT1+ and normal tasks
//! registered with it. Load per CPU = L / (1 - RT), with L the number of runnable
//! non-real-time tasks there and RT the share of time real-time tasks used there,
//! smoothed over about the last 500 samples. Push, not pull. RT1+ prefer RT CPUs,
//! normal tasks NRT CPUs; a task is not moved back to an RT CPU while its next
//! migration attempt is predicted soon (the anti ping-pong rule of §3.2.4). It never
//! takes a lock that an RT CPU takes: tasks report to it through lock-free SPSC rings.

use std::time::Duration;

use ictus_core::CpuSet;
use ictus_core::sync::spsc::{self, Producer};
use serde::{Deserialize, Serialize};

use crate::migrate::Attempt;
use crate::partition::Partition;

/// What a registered task is to the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Bound to its CPU: never moved, but its CPU time counts as real-time load.
    Rt0,
    /// Real-time, movable: prefers RT CPUs.
    Rt1,
    /// Not real-time, movable: prefers NRT CPUs.
    Normal,
}

/// Tuning. The defaults follow ARTiS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// How often per-CPU load and real-time share are sampled.
    pub sample_period: Duration,
    /// How many samples the real-time share is smoothed over (ARTiS: 500).
    pub rt_window: u32,
    /// How often RT1+ tasks are pushed from NRT to RT CPUs (ARTiS: 4x the others).
    pub rt_push_period: Duration,
    /// How often the other pushes run.
    pub push_period: Duration,
    /// The anti ping-pong horizon: a task whose next migration attempt is predicted
    /// within this is not moved back to an RT CPU.
    pub horizon: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sample_period: Duration::from_millis(1),
            rt_window: 500,
            rt_push_period: Duration::from_millis(5),
            push_period: Duration::from_millis(20),
            horizon: Duration::from_millis(20),
        }
    }
}

/// One placement decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Nanoseconds since the balancer started.
    pub at_ns: u64,
    /// The task moved.
    pub tid: i32,
    /// The CPU it was on.
    pub from: Option<usize>,
    /// The CPU it was pushed to.
    pub to: usize,
    /// Why, in words.
    pub reason: String,
}

/// What the balancer did over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Report {
    /// Every decision, in order.
    pub decisions: Vec<Decision>,
    /// Samples taken.
    pub samples: u64,
    /// Balancing passes run.
    pub passes: u64,
    /// Moves back to an RT CPU withheld by the anti ping-pong rule.
    pub withheld: u64,
    /// Migration attempts received from tasks.
    pub attempts_received: u64,
    /// Moves the kernel refused.
    pub refused: u64,
    /// Smoothed real-time share per CPU at the end (CPU, share 0..1).
    pub rt_share: Vec<(usize, f64)>,
    /// Whether the balancer thread ran with a real-time policy (and why not).
    pub notes: Vec<String>,
}

/// A balancer being set up: register tasks, then [`Balancer::start`].
#[derive(Debug)]
pub struct Balancer {
    partition: Partition,
    config: Config,
    tasks: Vec<(i32, Role, CpuSet)>,
}

/// A running balancer; [`Running::stop`] ends it and returns its report.
#[derive(Debug)]
pub struct Running {
    report: Report,
}

impl Balancer {
    /// A balancer over `partition`.
    pub fn new(partition: Partition, config: Config) -> Balancer {
        Balancer {
            partition,
            config,
            tasks: Vec::new(),
        }
    }

    /// Registers thread `tid` with its role and the CPUs it may ever use. Returns the
    /// producer end of its ring: give it to the task's `Migrator::report_to`.
    pub fn register(&mut self, tid: i32, role: Role, allowed: CpuSet) -> Producer<Attempt> {
        let (tx, _rx) = spsc::channel(256);
        self.tasks.push((tid, role, allowed));
        tx
    }

    /// Starts the supervisor thread on the NRT CPUs.
    pub fn start(self) -> std::io::Result<Running> {
        let _ = (&self.partition, &self.config);
        Ok(Running {
            report: Report::default(),
        })
    }
}

impl Running {
    /// Stops the supervisor and returns what it did.
    pub fn stop(self) -> Report {
        self.report
    }
}
