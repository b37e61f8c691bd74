//! What a run is asked for (the balancer, the limits) and what it tells its watcher.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ShieldError;
use crate::balancer;

/// Where the tasks are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BalancerMode {
    /// Stock Linux placement: tasks keep their group's CPUs; sections run in place
    /// (the attempts are still counted).
    None,
    /// The ictus balancer places the movable tasks; sections move to the NRT CPUs.
    Ictus,
}

impl BalancerMode {
    /// `none` or `ictus`.
    pub fn name(self) -> &'static str {
        match self {
            BalancerMode::None => "none",
            BalancerMode::Ictus => "ictus",
        }
    }
}

impl fmt::Display for BalancerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct ScenarioOptions {
    /// The placement.
    pub balancer: BalancerMode,
    /// The balancer's tuning (with [`BalancerMode::Ictus`]).
    pub balancer_config: balancer::Config,
    /// The file the scenario came from, recorded in the result.
    pub source: Option<PathBuf>,
    /// The command line, recorded in the result's provenance.
    pub argv: Vec<String>,
}

impl ScenarioOptions {
    /// Default options with `balancer`.
    pub fn new(balancer: BalancerMode) -> ScenarioOptions {
        ScenarioOptions {
            balancer,
            balancer_config: balancer::Config::default(),
            source: None,
            argv: Vec::new(),
        }
    }
}

/// Where a run stands, for a progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScenarioProgress {
    /// Since the common start.
    pub elapsed: Duration,
    /// Tasks finished.
    pub finished: usize,
    /// Tasks in all.
    pub tasks: usize,
}

/// What the watcher wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFlow {
    /// Go on.
    Continue,
    /// Stop every task now; the result is marked incomplete.
    Stop,
}

/// Why a scenario could not run. Nothing is left running.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The partition does not fit the CPUs this run may use.
    #[error("the scenario's partition: {0}")]
    Partition(#[from] ShieldError),
    /// A thread could not be started.
    #[error("starting a thread: {0}")]
    Spawn(#[source] io::Error),
    /// A task could not be set up (its affinity refused, ...).
    #[error("task {index} of group {group}: {what}")]
    Task {
        /// Its group.
        group: String,
        /// Its index in the group.
        index: u32,
        /// What failed.
        what: String,
    },
    /// The balancer did not start.
    #[error("starting the balancer: {0}")]
    Balancer(#[source] io::Error),
    /// `/proc/stat` could not be read.
    #[error("reading /proc/stat: {0}")]
    ProcStat(#[source] io::Error),
}
