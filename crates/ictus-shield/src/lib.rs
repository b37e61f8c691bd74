//! The shield: an RT/NRT partition of the CPUs with exact undo.
//!
//! `apply` computes a [`plan::Plan`] from a [`snapshot::Machine`] (pure), then runs its
//! steps one by one, appending each prior value to a [`journal`] (fsync'd) *before* the
//! change. `reset` replays the journal backwards, so it restores the machine after an
//! `apply` killed at any point, and does nothing the second time.
//!
//! - cgroup v1: exclusive cpusets `ictus-rt` and `ictus-nrt` under the cpuset root;
//!   every movable thread of the root goes to `ictus-nrt`.
//! - cgroup v2: a child `ictus-rt` made a cpuset partition (`isolated` where the
//!   kernel offers it); the root partition loses those CPUs by itself.
//! - IRQs (and the default IRQ affinity) go to the NRT CPUs, except those named for the
//!   RT tasks, which go to the RT CPUs; the workqueue cpumask goes to the NRT CPUs.
//! - Each RT CPU's resume latency QoS (`pm_qos_resume_latency_us`) is held at `n/a`,
//!   so it enters no idle state with an exit latency (see
//!   [`snapshot::RESUME_QOS_HELD`]); unlike `/dev/cpu_dma_latency` it outlives the
//!   applying process, so it is journaled and reset like the rest.
//! - Optionally a [`watchdog`] process on the NRT CPUs that demotes a real-time thread
//!   which keeps its CPU longer than a limit; only with it may the RT throttle
//!   (`sched_rt_runtime_us`) be turned off, and only after it runs.
//!
//! Nothing here prints; everything returns data.
#![forbid(unsafe_code)]

pub mod apply;
pub mod balancer;
pub mod class;
mod error;
pub mod journal;
pub mod mask;
pub mod migrate;
pub mod partition;
pub mod plan;
pub mod scenario;
pub mod snapshot;
pub mod status;
pub mod survey;
pub mod watchdog;

pub use apply::{Applied, ResetOutcome, apply, reset};
pub use error::{DEFAULT_JOURNAL, ShieldError};
pub use plan::{Request, WatchdogLaunch};
pub use status::{ShieldStatus, status};
