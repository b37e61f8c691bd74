//! [`Session`]: what every probe run does around its measurement, in one place.
//! It locks memory if asked, measures the clock's read cost, reads steal time before
//! and after, collects warnings, and stamps the provenance; `finish` turns it all into
//! a [`RunRecord`].
//!
//! ```no_run
//! use ictus_record::{progress::Progress, session::Session};
//! let progress = Progress::new();
//! let session = Session::begin(std::env::args().collect(), false);
//! // ... measure ...
//! let record = session.finish(ictus_record::registry::ProbeId::Timer.name(), &serde_json::json!({}), &progress);
//! assert_eq!(record.probe, ictus_record::registry::ProbeId::Timer);
//! ```

use crate::record::WarningId;
use std::collections::BTreeSet;

use ictus_core::{CpuSet, Nanos};
use ictus_explain::{ExplainConfig, Explainer, MissReporter};
use ictus_os::clock::{self, monotonic_now};
use ictus_os::pm_qos::{self, PmQos, PmQosHold};
use ictus_os::procstat::{self, StatSnapshot};
use ictus_os::sched::Policy;
use ictus_os::{facts, memory};
use serde::Serialize;

use crate::progress::Progress;
use crate::provenance::Provenance;
use crate::record::{ClockCost, CpuSteal, Obtained, RunRecord, Steal, Warning};

/// Clock reads measured for the read-cost figure.
const CLOCK_COST_SAMPLES: u64 = 100_000;

/// The frame around one probe run.
#[derive(Debug)]
pub struct Session {
    provenance: Provenance,
    obtained: Obtained,
    warnings: Vec<Warning>,
    clock: ClockCost,
    stat_before: Option<StatSnapshot>,
    wall_before: Nanos,
    pm_qos: Option<PmQosHold>,
    explainer: Option<Explainer>,
}

impl Session {
    /// Starts a run: captures the provenance, locks memory if `mlock` (a refusal is a
    /// warning), measures the clock, reads steal time.
    pub fn begin(argv: Vec<String>, mlock: bool) -> Self {
        let provenance = Provenance::capture(argv);
        let mut warnings = Vec::new();
        let mut obtained = Obtained {
            mlock_requested: mlock,
            ..Obtained::default()
        };
        if mlock {
            match memory::lock_all() {
                Ok(()) => obtained.mlock = true,
                Err(e) => warnings.push(Warning {
                    id: WarningId::MlockRefused,
                    message: format!("memory is not locked: mlockall refused ({})", e.source),
                    advice: Some(e.advice),
                }),
            }
        }
        let read_cost = clock::measure_read_cost(CLOCK_COST_SAMPLES);
        let clock = ClockCost {
            clocksource: facts::clocksource().current,
            resolution_ns: clock::resolution().map(Nanos::as_u64),
            read_cost: read_cost.summary(),
        };
        Session {
            provenance,
            obtained,
            warnings,
            clock,
            stat_before: procstat::read().ok(),
            wall_before: monotonic_now(),
            pm_qos: None,
            explainer: None,
        }
    }

    /// Holds the CPU latency QoS `request` until the record is made (the kernel
    /// drops it at once if the process dies first). A refusal is a warning with the
    /// fix; the run goes on. The record's `obtained.pm_qos` says what was in force.
    pub fn hold_pm_qos(&mut self, request: PmQos) {
        let held = pm_qos::hold(request);
        if let Some(w) = held.state().warning() {
            self.warn(w);
        }
        self.obtained.pm_qos = Some(held.state().clone());
        self.pm_qos = Some(held);
    }

    /// Starts explaining the misses of the measuring threads named `threads` (on
    /// `cpus`): a sampler off those CPUs, and one reporter per thread, in order, for
    /// the threads to call [`MissReporter::attach`] on once placed and
    /// [`MissReporter::release`] on each release. `None` when `enabled` is false or
    /// the sampler could not start (a warning says so).
    pub fn explain(
        &mut self,
        enabled: bool,
        cpus: &CpuSet,
        threshold: Nanos,
        threads: &[String],
    ) -> Vec<Option<MissReporter>> {
        let none = || threads.iter().map(|_| None).collect();
        if !enabled {
            return none();
        }
        let config = ExplainConfig::new(cpus.clone(), threshold);
        match Explainer::start(config, threads, monotonic_now()) {
            Ok((explainer, reporters)) => {
                self.explainer = Some(explainer);
                reporters.into_iter().map(Some).collect()
            }
            Err(e) => {
                self.warn(ictus_explain::unavailable(&e));
                none()
            }
        }
    }

    /// Adds a warning; the same id and message twice (say, one per thread) is kept once.
    pub fn warn(&mut self, warning: Warning) {
        if !self
            .warnings
            .iter()
            .any(|w| w.id == warning.id && w.message == warning.message)
        {
            self.warnings.push(warning);
        }
    }

    /// Adds several warnings (see [`warn`](Self::warn)).
    pub fn warn_all(&mut self, warnings: impl IntoIterator<Item = Warning>) {
        for w in warnings {
            self.warn(w);
        }
    }

    /// Warns ([`WarningId::NoCpuLeft`]) when `threads` threads under `policy` are
    /// real-time and take every online CPU: `message` says what the rest of the
    /// system then gets, `advice` how to leave it a CPU.
    pub fn warn_if_no_cpu_left(
        &mut self,
        policy: Policy,
        threads: usize,
        message: &str,
        advice: &str,
    ) {
        if policy.is_realtime() && threads >= self.cpu_count() {
            self.warn(Warning {
                id: WarningId::NoCpuLeft,
                message: message.into(),
                advice: Some(advice.into()),
            });
        }
    }

    /// The number of online CPUs at the start.
    pub fn cpu_count(&self) -> usize {
        self.provenance.cpu_count
    }

    /// Ends the run: reads steal time, stamps the end, and builds the record (with
    /// `complete` false when `progress` was asked to stop). The caller fills in the
    /// probe's results.
    pub fn finish(
        mut self,
        probe: &str,
        parameters: &impl Serialize,
        progress: &Progress,
    ) -> RunRecord {
        let explanation = self.explainer.take().map(Explainer::finish);
        let wall = monotonic_now().saturating_sub(self.wall_before);
        let steal = match (self.stat_before.take(), procstat::read().ok()) {
            (Some(before), Some(after)) => Some(steal_over(&before, &after, wall)),
            _ => None,
        };
        if let Some(s) = steal.as_ref().filter(|s| s.total_ns > 0) {
            self.warn(Warning {
                id: WarningId::StealTime,
                message: format!(
                    "the hypervisor stole {} of CPU time during the run ({:.2} % of all CPUs)",
                    Nanos::new(s.total_ns),
                    s.share * 100.0
                ),
                advice: Some(
                    "This is a virtual machine whose host ran other work: latency spikes of \
                     that size come from the host, not the guest kernel. Measure on bare metal \
                     or with dedicated, pinned vCPUs for hard real-time figures."
                        .into(),
                ),
            });
        }
        self.provenance.finish();
        self.obtained.locked_bytes = memory::locked_bytes();
        let mut record = RunRecord::new(
            probe,
            self.provenance,
            serde_json::to_value(parameters).expect("parameters serialize to JSON"),
            self.obtained,
        );
        record.environment.steal = steal;
        record.environment.clock = Some(self.clock);
        record.warnings = dedup(self.warnings);
        record.complete = !progress.stop_requested();
        record.explanation = explanation;
        // The QoS is released only now, after the measurement and its record.
        drop(self.pm_qos.take());
        record
    }
}

fn dedup(warnings: Vec<Warning>) -> Vec<Warning> {
    let mut seen = BTreeSet::new();
    warnings
        .into_iter()
        .filter(|w| seen.insert((w.id, w.message.clone())))
        .collect()
}

fn steal_over(before: &StatSnapshot, after: &StatSnapshot, wall: Nanos) -> Steal {
    let delta = after.steal_since(before);
    let cpu_time = wall.as_u64() as f64 * after.per_cpu.len().max(1) as f64;
    Steal {
        share: delta.total_ns as f64 / cpu_time.max(1.0),
        total_ns: delta.total_ns,
        per_cpu: delta
            .per_cpu_ns
            .iter()
            .map(|&(cpu, steal_ns)| CpuSteal { cpu, steal_ns })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_gives_a_record_with_provenance_and_clock() {
        let sut = Session::begin(vec!["test".into()], false);
        let record = sut.finish(
            crate::registry::ProbeId::Timer.name(),
            &serde_json::json!({"x": 1}),
            &Progress::new(),
        );
        assert!(record.complete);
        assert_eq!(record.parameters["x"], 1);
        assert!(record.provenance.end_time.is_some());
        let clock = record.environment.clock.unwrap();
        assert_eq!(clock.read_cost.count, CLOCK_COST_SAMPLES);
    }

    #[test]
    fn the_same_warning_twice_is_kept_once() {
        let mut sut = Session::begin(vec![], false);
        let w = Warning {
            id: WarningId::PolicyRefused,
            message: "m".into(),
            advice: None,
        };
        sut.warn(w.clone());
        sut.warn_all([w.clone(), w]);
        let record = sut.finish(
            crate::registry::ProbeId::Timer.name(),
            &(),
            &Progress::new(),
        );
        assert_eq!(
            record
                .warnings
                .iter()
                .filter(|w| w.id == WarningId::PolicyRefused)
                .count(),
            1
        );
    }
}
