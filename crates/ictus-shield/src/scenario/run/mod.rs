//! The runner: one thread per fake task, all released together; a sampler reading
//! each task's state and CPU every period; the balancer (or none) placing them; a
//! [`ScenarioResult`] at the end.
//!
//! Setup is done before the start: every task enters its class (a refused real-time
//! policy falls back to `SCHED_OTHER` and is recorded, with the kernel's reason), sets
//! its affinity, gets its migration guard and waits at the start gate. The work loop
//! only computes, sleeps and enters sections; the `/proc` files are read by the
//! sampler, and by each task once, after its last loop.
//!
//! A stop (the watcher's [`WatchFlow::Stop`], the duration limit) reaches every thread
//! within the watcher's 50 ms poll: tasks sleep and sections spin on the run's stop
//! [`Latch`](ictus_os::handoff::Latch), and the sampler sleeps on a latch of its own, so
//! a task asked to sleep for years ends as soon as the run stops, and so does a sampler
//! with a long period.
//!
//! ```no_run
//! use ictus_shield::scenario::{self, BalancerMode, WatchFlow, ScenarioOptions};
//! let s = scenario::spec::load(std::path::Path::new("table5-2cpu.toml"))?;
//! let r = scenario::run(&s, &ScenarioOptions::new(BalancerMode::None), |_| WatchFlow::Continue)?;
//! for g in &r.groups {
//!     println!("{}: {:?}", g.name, g.completion_ns);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod options;
mod result;
mod sampler;
mod setting;
mod shared;
mod summary;
mod task;
mod timeline;

pub use options::{BalancerMode, ScenarioError, ScenarioOptions, ScenarioProgress, WatchFlow};
pub use result::{
    CpuIdleTime, CpuShare, GroupStats, MinAvgMax, PolicyOutcome, RESULT_SCHEMA, RESULT_VERSION,
    SamplerInfo, ScenarioResult, SectionCounts, TaskResult, Timeline, TimelineBucket,
};
pub use task::{LOOP_DIVISIONS, calibrate, one_loop};
pub use timeline::{MAX_BUCKETS, coarsen};

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ictus_os::facts;
use ictus_os::provenance::Provenance;

use crate::partition;
use crate::scenario::spec::{self, Scenario};

use setting::{Setting, Tasks};
use shared::Shared;
use summary::{cpu_idle, group_stats, policy_outcomes, run_warnings};
use task::plans;

/// Runs `scenario` and returns what it measured. `watch` is called about every 50 ms
/// with the progress, from the calling thread; [`WatchFlow::Stop`] stops the tasks.
pub fn run(
    scenario: &Scenario,
    opts: &ScenarioOptions,
    mut watch: impl FnMut(&ScenarioProgress) -> WatchFlow,
) -> Result<ScenarioResult, ScenarioError> {
    let mut provenance = Provenance::capture(opts.argv.clone());
    let online = facts::online_cpus();
    let in_play = spec::machine_cpus();
    let partition = partition::logical(scenario.rt_cpus.clone(), &in_play)?;
    let mut warnings = Vec::new();
    if let Ok(Some(applied)) = partition::applied(std::path::Path::new(crate::DEFAULT_JOURNAL)) {
        warnings.push(format!(
            "a shield is applied (RT CPUs {}); the scenario uses its own logical partition (RT CPUs {})",
            applied.rt, partition.rt
        ));
    }
    let loop_ns = calibrate();
    let plans = plans(scenario, &in_play, &mut warnings);
    let shared = Arc::new(Shared::new(plans.len()));
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let setting = Setting {
        scenario,
        opts,
        plans: &plans,
        in_play: &in_play,
        partition: &partition,
        shared: &shared,
    };

    // Set up every task; each waits at the gate.
    let Tasks {
        handles,
        feeds,
        ready,
    } = setting.start_tasks()?;
    // The balancer, then the sampler; then the start.
    let started = setting.release(handles, &feeds, &ready)?;
    // Watch.
    let ended = setting.watch_to_end(started, &mut watch)?;

    // Assemble.
    let tasks = setting.task_results(&ready, &ended);
    let groups = group_stats(scenario, &tasks, &ended.sampled, &in_play);
    let first_end = shared.first_end.get().cloned();
    let steal = ended.stat_end.steal_since(&ended.stat_start);
    let cpus = cpu_idle(
        &in_play,
        &partition,
        first_end.as_ref().map(|(_, s)| s),
        &ended.stat_start,
        &ended.stat_end,
        &steal,
    );
    let policies = policy_outcomes(scenario, &plans, &ready);
    let wall = ended.end.saturating_sub(ended.start);
    warnings.extend(run_warnings(
        &policies,
        &ended.sampled.info,
        steal.total_ns,
        wall,
        in_play.len(),
        &tasks,
    ));
    provenance.finish();
    Ok(ScenarioResult {
        schema: RESULT_SCHEMA.to_string(),
        version: RESULT_VERSION,
        tool_version: provenance.tool_version.clone(),
        hostname: provenance.hostname.clone(),
        kernel: provenance.kernel_release.clone(),
        started_unix_ms,
        provenance: Some(provenance),
        source: opts.source.as_ref().map(|p| p.display().to_string()),
        scenario: scenario.clone(),
        balancer: opts.balancer,
        cpus_online: online,
        cpus_in_play: in_play,
        partition,
        loop_ns,
        complete: ended.stopped.is_none() && tasks.iter().all(|t| t.finished),
        stopped: ended.stopped,
        wall_ns: wall,
        first_end_ns: first_end.map(|(t, _)| t.saturating_sub(ended.start)),
        sampler: ended.sampled.info,
        groups,
        tasks,
        cpus,
        timeline: ended.sampled.timeline,
        policies,
        balancer_report: ended.balancer_report,
        steal_ns: steal.total_ns,
        warnings,
    })
}

#[cfg(test)]
mod tests;
