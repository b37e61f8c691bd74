//! What a run holds around its subsystems to measure them as the reference tools do
//! and to say why a frame was missed: the CPU latency QoS (`/dev/cpu_dma_latency`,
//! held for the whole run) and the sampler that explains the misses of this host's
//! in-process subsystems ([`ictus_explain`]), off their CPUs; a program runs a
//! sampler of its own ([`explain_program`]) whose explanation the run takes in.

use std::collections::BTreeMap;

use ictus_class::Class;
use ictus_core::{CpuSet, Nanos};
use ictus_explain::{ExplainConfig, Explainer, HOST_BUDGET, MissReporter, RecentMisses};
use ictus_os::clock::monotonic_now;
use ictus_os::pm_qos::{self, PmQosHold};

use super::options::RunOptions;
use crate::report::{RunReport, RunWarning};
use crate::schedule::{Process, Schedule};

/// The QoS held and the sampler running, from before the subsystems start to the
/// report.
pub(super) struct Watch {
    pm_qos: PmQosHold,
    explainer: Option<Explainer>,
    warnings: Vec<RunWarning>,
}

impl Watch {
    /// Holds the CPU latency QoS (the option's, else the schedule's, else 0 us) and,
    /// unless off, starts the sampler for the in-process subsystems in `slots`: one
    /// reporter each, by slot. A refusal of either is a warning; the run goes on.
    pub(super) fn begin(
        schedule: &Schedule,
        options: &RunOptions,
        slots: &[usize],
        here: usize,
    ) -> (Watch, BTreeMap<usize, MissReporter>) {
        let request = options.pm_qos.or(schedule.pm_qos).unwrap_or_default();
        let held = pm_qos::hold(request);
        let warnings: Vec<RunWarning> = held.state().warning().into_iter().collect();
        let mut watch = Watch {
            pm_qos: held,
            explainer: None,
            warnings,
        };
        let mut reporters = BTreeMap::new();
        if slots.is_empty() {
            return (watch, reporters);
        }
        let Some(threshold) = threshold(schedule, options) else {
            return (watch, reporters);
        };
        let names: Vec<String> = slots
            .iter()
            .map(|&k| schedule.subsystems[k].name.clone())
            .collect();
        let mut config = ExplainConfig::new(watched_cpus(schedule, slots), threshold);
        config.yield_cpu = spans_hosts(schedule);
        config.budget = sampler_budget(schedule, here);
        match Explainer::start(config, &names, monotonic_now()) {
            Ok((explainer, r)) => {
                watch.explainer = Some(explainer);
                reporters = slots.iter().copied().zip(r).collect();
            }
            Err(e) => watch.warnings.push(ictus_explain::unavailable(&e)),
        }
        (watch, reporters)
    }

    /// The last explained misses, for the live view (`None` when not explaining).
    pub(super) fn recent(&self) -> Option<RecentMisses> {
        self.explainer.as_ref().map(Explainer::recent_handle)
    }

    /// Stops the sampler (once the subsystems' loops have ended) and puts what was
    /// in force and every miss explained into `report`, with those the own samplers
    /// of the programs of host `here` explained (taken from their outcomes; another
    /// host's misses are its own report's); the QoS is released.
    pub(super) fn end(self, report: &mut RunReport, schedule: &Schedule, here: usize) {
        report.pm_qos = Some(self.pm_qos.state().clone());
        let mut explanation = self.explainer.map(Explainer::finish);
        for s in &mut report.subsystems {
            let theirs = s.outcome.as_mut().and_then(|o| o.explanation.take());
            let local = schedule
                .subsystem(&s.name)
                .is_some_and(|spec| spec.host == here);
            let Some(theirs) = theirs.filter(|_| local) else {
                continue;
            };
            match &mut explanation {
                Some(e) => e.absorb(theirs),
                None => explanation = Some(theirs),
            }
        }
        report.explanation = explanation;
        report.warnings.extend(self.warnings);
    }
}

/// The lateness from which a release is a miss to explain: the options', else the
/// schedule's, else the tick; `None` when explaining is off.
pub(super) fn threshold(schedule: &Schedule, options: &RunOptions) -> Option<Nanos> {
    options.explain.then(|| {
        options
            .explain_threshold
            .or(schedule.explain_threshold)
            .unwrap_or(schedule.tick)
    })
}

/// A program's own sampler for its one subsystem (slot `slot`), when the run that
/// launched it explains misses (its threshold in the environment): the sampler and
/// the subsystem's reporter. `None` when not asked or when the sampler cannot start
/// (the program's misses are then counted, not explained).
pub(crate) fn explain_program(
    schedule: &Schedule,
    slot: usize,
) -> Option<(Explainer, MissReporter)> {
    let ns: u64 = std::env::var(super::options::env::EXPLAIN)
        .ok()?
        .parse()
        .ok()?;
    let mut config = ExplainConfig::new(watched_cpus(schedule, &[slot]), Nanos::new(ns));
    config.yield_cpu = spans_hosts(schedule);
    if let Some(b) = std::env::var(super::options::env::EXPLAIN_BUDGET)
        .ok()
        .and_then(|b| b.parse::<f64>().ok())
        .filter(|b| b.is_finite() && *b >= 0.0)
    {
        config.budget = b;
    }
    let name = schedule.subsystems[slot].name.clone();
    let (explainer, mut reporters) = Explainer::start(config, &[name], monotonic_now()).ok()?;
    Some((explainer, reporters.pop()?))
}

/// Each sampler's part of host `here`'s budget ([`HOST_BUDGET`]): the run's own
/// (for its in-process subsystems, when it has any) and one in each program it
/// launches share it, so that the host's samplers together cost at most that, however
/// its subsystems are spread over processes.
pub(super) fn sampler_budget(schedule: &Schedule, here: usize) -> f64 {
    let local = || schedule.subsystems.iter().filter(|s| s.host == here);
    let programs = local()
        .filter(|s| !matches!(s.process, Process::InProcess))
        .count();
    let in_process = local().any(|s| matches!(s.process, Process::InProcess));
    HOST_BUDGET / (programs + usize::from(in_process)).max(1) as f64
}

/// Whether the run spans hosts: then its sampler yields the CPU to every normal
/// thread ([`ExplainConfig::yield_cpu`]), the link's among them.
fn spans_hosts(schedule: &Schedule) -> bool {
    schedule.hosts.len() > 1
}

/// The CPUs the sampler reads and keeps off: those the watched subsystems are pinned
/// to (all online CPUs when none is pinned, or when one is not: it may run anywhere).
fn watched_cpus(schedule: &Schedule, slots: &[usize]) -> CpuSet {
    let specs = slots.iter().map(|&k| &schedule.subsystems[k]);
    let mut pinned = Vec::new();
    for s in specs {
        match (s.cpu, &s.class) {
            (Some(cpu), _) | (None, &Class::Rt0 { cpu }) => pinned.push(cpu),
            (None, _) => return ictus_os::facts::online_cpus(),
        }
    }
    CpuSet::from_cpus(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(subsystems: &str) -> Schedule {
        let text = format!("tick = \"1ms\"\nmajor_frame = 1\n{subsystems}");
        Schedule::parse(&text, "s.toml", &CpuSet::from_cpus([0, 1, 2])).unwrap()
    }

    #[test]
    fn the_sampler_watches_the_cpus_the_subsystems_are_pinned_to() {
        let sut = schedule(
            "[[subsystem]]\nname = \"a\"\ncpu = 1\n[[subsystem]]\nname = \"b\"\ncpu = 2\n",
        );
        assert_eq!(watched_cpus(&sut, &[0, 1]), CpuSet::from_cpus([1, 2]));
        assert_eq!(watched_cpus(&sut, &[1]), CpuSet::from_cpus([2]));
    }

    #[test]
    fn an_unpinned_subsystem_makes_the_sampler_watch_every_cpu() {
        let sut = schedule("[[subsystem]]\nname = \"a\"\ncpu = 1\n[[subsystem]]\nname = \"b\"\n");
        assert_eq!(watched_cpus(&sut, &[0, 1]), ictus_os::facts::online_cpus());
    }

    #[test]
    fn explain_off_starts_no_sampler_and_hands_out_no_reporter() {
        let sut = schedule("[[subsystem]]\nname = \"a\"\ncpu = 1\n");
        let options = RunOptions {
            explain: false,
            pm_qos: Some(ictus_os::pm_qos::PmQos::Off),
            ..RunOptions::default()
        };
        let (watch, reporters) = Watch::begin(&sut, &options, &[0], 0);
        assert!(reporters.is_empty() && watch.recent().is_none());
        assert_eq!(watch.pm_qos.state().requested, ictus_os::pm_qos::PmQos::Off);
    }
}
