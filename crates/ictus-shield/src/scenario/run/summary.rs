//! What the run's numbers add up to: group statistics, CPU idle, policies, warnings.

use ictus_core::CpuSet;
use ictus_os::procstat::{StatSnapshot, StealDelta};

use crate::class;
use crate::partition::Partition;
use crate::scenario::spec::{GroupClass, Scenario};

use super::result::{
    CpuIdleTime, CpuShare, GroupStats, MinAvgMax, PolicyOutcome, SamplerInfo, TaskResult,
};
use super::sampler::Sampled;
use super::task::{Plan, Ready};

/// Each CPU's idle time from the start to the end (and to the first task's end,
/// `first_end`, when one finished) and its steal time.
pub(super) fn cpu_idle(
    in_play: &CpuSet,
    partition: &Partition,
    first_end: Option<&StatSnapshot>,
    stat_start: &StatSnapshot,
    stat_end: &StatSnapshot,
    steal: &StealDelta,
) -> Vec<CpuIdleTime> {
    let tick_ns = |s: &StatSnapshot, ticks: u64| {
        ticks.saturating_mul(1_000_000_000) / s.ticks_per_second.max(1)
    };
    let idle_of = |s: &StatSnapshot, cpu: usize| {
        s.per_cpu
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(0, |(_, t)| t.idle + t.iowait)
    };
    in_play
        .cpus()
        .iter()
        .map(|&cpu| CpuIdleTime {
            cpu,
            rt: partition.is_rt(cpu),
            idle_until_first_end_ns: first_end
                .map(|s| tick_ns(s, idle_of(s, cpu).saturating_sub(idle_of(stat_start, cpu)))),
            idle_ns: tick_ns(
                stat_end,
                idle_of(stat_end, cpu).saturating_sub(idle_of(stat_start, cpu)),
            ),
            steal_ns: steal
                .per_cpu_ns
                .iter()
                .find(|(c, _)| *c == cpu)
                .map_or(0, |(_, v)| *v),
        })
        .collect()
}

/// The shortfalls a finished run found: refused policies, a sampler that was not
/// raised or came late, host steal over 1 % of the `cpus` CPUs' `wall` time, dropped
/// attempt reports.
pub(super) fn run_warnings(
    policies: &[PolicyOutcome],
    sampler: &SamplerInfo,
    steal_ns: u64,
    wall: u64,
    cpus: usize,
    tasks: &[TaskResult],
) -> Vec<String> {
    let mut warnings = Vec::new();
    for p in policies {
        if let Some(reason) = &p.reason {
            warnings.push(format!(
                "group {}: {} refused for {} task(s), ran {} instead: {reason}",
                p.group, p.asked, p.refused_tasks, p.obtained
            ));
        }
    }
    if !sampler.policy.starts_with("fifo") {
        warnings.push(format!(
            "the sampler runs {} (FIFO 99 was refused): real-time tasks filling the CPUs delay its samples",
            sampler.policy
        ));
    }
    if sampler.missed > sampler.samples / 10 {
        warnings.push(format!(
            "the sampler missed {} of {} periods: the timeline and CPU shares are coarser than asked",
            sampler.missed,
            sampler.missed + sampler.samples
        ));
    }
    let all_cpu = wall.saturating_mul(cpus as u64).max(1);
    if steal_ns * 100 > all_cpu {
        warnings.push(format!(
            "the host stole {:.1} % of the CPU time during the run (a virtual machine sharing its host): completion times include it",
            steal_ns as f64 * 100.0 / all_cpu as f64
        ));
    }
    let dropped: u64 = tasks.iter().map(|t| t.sections.dropped_reports).sum();
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} migration attempt report(s) were dropped: the balancer's rings were full"
        ));
    }
    warnings
}

/// Percentages of `counts` (in the order of `cpus`) over `total`; empty when no sample.
pub(super) fn shares(cpus: &CpuSet, counts: &[u64], total: u64) -> Vec<CpuShare> {
    if total == 0 {
        return Vec::new();
    }
    cpus.cpus()
        .iter()
        .zip(counts)
        .map(|(&cpu, &c)| CpuShare {
            cpu,
            percent: c as f64 * 100.0 / total as f64,
        })
        .collect()
}

pub(super) fn group_stats(
    scenario: &Scenario,
    tasks: &[TaskResult],
    sampled: &Sampled,
    in_play: &CpuSet,
) -> Vec<GroupStats> {
    scenario
        .groups
        .iter()
        .map(|g| {
            let mine: Vec<(usize, &TaskResult)> = tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| t.group == g.name)
                .collect();
            let mut per_cpu = vec![0u64; in_play.len()];
            for (k, _) in &mine {
                for (a, b) in per_cpu.iter_mut().zip(&sampled.per_task[*k].per_cpu) {
                    *a += b;
                }
            }
            let total = per_cpu.iter().sum();
            let finished: Vec<&TaskResult> = mine
                .iter()
                .map(|(_, t)| *t)
                .filter(|t| t.finished)
                .collect();
            let kernel = mine.iter().all(|(_, t)| t.migrations.is_some()) && !mine.is_empty();
            let stat = |f: &dyn Fn(&TaskResult) -> Option<u64>| {
                MinAvgMax::of(mine.iter().filter_map(|(_, t)| f(t)).map(|v| v as f64))
            };
            GroupStats {
                name: g.name.clone(),
                class: g.class,
                tasks: g.count,
                finished: finished.len() as u32,
                completion_ns: MinAvgMax::of(finished.iter().map(|t| t.completion_ns as f64)),
                cpu_time_ns: stat(&|t| Some(t.cpu_time_ns)),
                cpu_share: shares(in_play, &per_cpu, total),
                voluntary_ctxt_switches: stat(&|t| t.voluntary_ctxt_switches),
                involuntary_ctxt_switches: stat(&|t| t.involuntary_ctxt_switches),
                migrations: stat(&|t| Some(t.migrations_best())),
                migrations_source: if kernel { "kernel" } else { "sampled" }.to_string(),
                section_attempts: g.section.and_then(|_| stat(&|t| Some(t.sections.attempts))),
                section_moves: g.section.and_then(|_| stat(&|t| Some(t.sections.moves))),
            }
        })
        .collect()
}

pub(super) fn policy_outcomes(
    scenario: &Scenario,
    plans: &[Plan],
    ready: &[Ready],
) -> Vec<PolicyOutcome> {
    scenario
        .groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let mine: Vec<&Ready> = plans
                .iter()
                .zip(ready)
                .filter(|(p, _)| p.group == gi)
                .map(|(_, r)| r)
                .collect();
            let refused: Vec<&&Ready> = mine.iter().filter(|r| r.refused.is_some()).collect();
            let asked = match g.class {
                GroupClass::Normal => "other".to_string(),
                GroupClass::Rt0 => format!("fifo {}", class::RT0_PRIORITY),
                GroupClass::Rt1 { policy, priority } => policy.at(priority).to_string(),
            };
            PolicyOutcome {
                group: g.name.clone(),
                asked,
                obtained: refused
                    .first()
                    .map(|r| r.policy.clone())
                    .or_else(|| mine.first().map(|r| r.policy.clone()))
                    .unwrap_or_default(),
                refused_tasks: refused.len() as u32,
                reason: refused.first().and_then(|r| r.refused.clone()),
            }
        })
        .collect()
}
