//! The survey's verdict: its fixed-frequency loop runs read back, what held and what
//! missed, and why, in words.

use std::path::Path;

use ictus_core::Nanos;
use ictus_os::pm_qos::PmQos;

use super::manifest::{Class, LoadCase, Manifest, Step, StepStatus, Verdict};
use crate::r#loop::view::Trial;
use crate::record::RunRecord;
use crate::registry::ProbeId;
use crate::view::Point;
use ictus_os::facts;

/// The loop records of a finished survey, with their steps.
fn loop_records<'a>(manifest: &'a Manifest, dir: &Path) -> Vec<(&'a Step, RunRecord)> {
    manifest
        .steps
        .iter()
        .filter(|s| s.probe == ProbeId::Loop && s.status == StepStatus::Done)
        .filter_map(|s| {
            let file = s.file.as_ref()?;
            RunRecord::load(&dir.join(file)).ok().map(|r| (s, r))
        })
        .collect()
}

/// The first trial of a loop record.
fn first_trial(record: &RunRecord) -> Option<Point<Trial>> {
    record
        .measurements
        .iter()
        .find(|m| m.is::<Trial>())
        .and_then(|m| m.read::<Trial>())
}

/// What sets a step apart from its twin measured with the CPU latency QoS held.
fn qos_note(step: &Step) -> &'static str {
    if step.pm_qos == Some(PmQos::Off) {
        ", CPU latency QoS off"
    } else {
        ""
    }
}

/// One fixed-frequency loop run of the survey, read back.
struct LoopRun<'a> {
    step: &'a Step,
    record: RunRecord,
    misses: f64,
    worst: Option<Nanos>,
    /// `class (what the threads ran as), load`.
    place: String,
}

impl<'a> LoopRun<'a> {
    fn of(step: &'a Step, record: RunRecord) -> LoopRun<'a> {
        // Say what the threads really ran as (the loop pins even in the normal class).
        let obtained = record.threads.first().map_or_else(
            || step.class.describe().to_string(),
            |t| {
                format!(
                    "{}{}{}",
                    t.config.policy,
                    if t.config.pinned_cpu.is_some() {
                        ", pinned"
                    } else {
                        ""
                    },
                    if record.obtained.mlock {
                        ", memory locked"
                    } else {
                        ""
                    }
                )
            },
        );
        let trial = first_trial(&record);
        LoopRun {
            step,
            misses: trial.as_ref().map_or(f64::NAN, |t| t.metrics.misses),
            worst: trial
                .and_then(|t| t.metrics.worst_completion_ns)
                .map(|v| Nanos::new(v as u64)),
            place: format!(
                "{} ({obtained}), {}{}",
                step.class.name(),
                step.load.name(),
                qos_note(step)
            ),
            record,
        }
    }

    /// What may explain its misses, measured in the same run or configuration.
    fn causes(&self, manifest: &Manifest, dir: &Path, period: Nanos) -> Vec<String> {
        let mut out = Vec::new();
        if self.misses == 0.0 {
            return out;
        }
        if let Some(e) = self
            .record
            .explanation
            .as_ref()
            .filter(|e| e.breakdown.events > 0)
        {
            out.push(format!("why: {}", e.breakdown.summary()));
        }
        if let Some(w) = self.worst
            && (Nanos::from_millis(40)..=Nanos::from_millis(60)).contains(&w)
            && self.step.class != Class::NormalUnpinned
            && facts::rt_throttling().is_some_and(|b| b.throttles())
        {
            out.push(
                "about 50 ms: RT throttling stalled the busy real-time threads for the rest of \
                 a second (sched_rt_runtime_us in the audit; `--rt-throttle off` tries without)"
                    .into(),
            );
        }
        if let Some(steal) = self
            .record
            .environment
            .steal
            .as_ref()
            .filter(|s| s.total_ns > 0)
        {
            out.push(format!(
                "the hypervisor stole {} of CPU time during the run",
                Nanos::new(steal.total_ns)
            ));
        }
        if let (Some(n), Some(cpus)) = (self.step.irqs.filter(|&n| n > 0), &self.step.cpus) {
            out.push(format!(
                "{n} interrupts on CPU(s) {cpus} during the run, the local timer's aside"
            ));
        }
        let timer = manifest.steps.iter().find(|s| {
            s.probe == ProbeId::Timer
                && s.class == self.step.class
                && s.load == self.step.load
                && s.status == StepStatus::Done
        });
        let late = timer
            .and_then(|s| RunRecord::load(&dir.join(s.file.as_ref()?)).ok())
            .and_then(|r| {
                r.measurements
                    .iter()
                    .filter_map(|m| m.latency.as_ref()?.summary.max_ns)
                    .max()
            })
            .filter(|&max| max > period);
        if let Some(max) = late {
            out.push(format!(
                "the timer probe in the same configuration woke up to {} late (stalls of the \
                 host or the kernel, beyond the loop's period)",
                max
            ));
        }
        out
    }
}

/// What holding the CPU latency QoS gained on this machine: the timer's p50 and max
/// and the loop's misses, held against off, in the same class, idle.
fn pm_qos_gain(manifest: &Manifest, dir: &Path, loops: &[LoopRun<'_>]) -> Option<String> {
    let timer_of = |off: bool| {
        manifest.steps.iter().find_map(|s| {
            let wanted = s.probe == ProbeId::Timer
                && s.class == Class::RtPinned
                && s.load == LoadCase::Idle
                && s.status == StepStatus::Done
                && (s.pm_qos == Some(PmQos::Off)) == off;
            if !wanted {
                return None;
            }
            let merged = RunRecord::load(&dir.join(s.file.as_ref()?)).ok()?.merged?;
            Some((merged.summary.p50_ns?, merged.summary.max_ns?))
        })
    };
    let (held, off) = (timer_of(false)?, timer_of(true)?);
    let mut line = format!(
        "CPU latency QoS (/dev/cpu_dma_latency held at 0 us, as cyclictest): the timer \
         (rt-pinned, idle) woke with p50 {} and max {} held, against p50 {} and max {} off \
         (p50 {:.2}x)",
        held.0,
        held.1,
        off.0,
        off.1,
        off.0.as_u64() as f64 / held.0.as_u64().max(1) as f64
    );
    for class in [Class::RtPinned, Class::Shielded] {
        let of = |qos_off: bool| {
            loops.iter().find(|r| {
                r.step.class == class
                    && r.step.load == LoadCase::Idle
                    && (r.step.pm_qos == Some(PmQos::Off)) == qos_off
            })
        };
        if let (Some(h), Some(o)) = (of(false), of(true)) {
            line.push_str(&format!(
                "; the loop ({}, idle) missed {} steps held, {} off",
                class.name(),
                h.misses,
                o.misses
            ));
        }
    }
    line.push('.');
    Some(line)
}

/// Plain words first: does the target hold, where, and what breaks it.
pub fn verdict(manifest: &Manifest, dir: &Path) -> Option<Verdict> {
    let t = manifest.target;
    let loops = loop_records(manifest, dir);
    let fixed: Vec<LoopRun<'_>> = loops
        .iter()
        .filter(|(s, _)| !s.id.starts_with("loop-find-max"))
        .map(|(s, r)| LoopRun::of(s, r.clone()))
        .collect();
    if fixed.is_empty() {
        return None;
    }
    let what = format!(
        "a {} loop on {} core{} (model 1001 modules, {} B exchanged twice a step)",
        khz(t.frequency_hz),
        t.cores,
        if t.cores == 1 { "" } else { "s" },
        t.exchange_bytes
    );
    let period = Nanos::new((1e9 / t.frequency_hz) as u64);
    let mut evidence = Vec::new();
    for run in &fixed {
        let steps = run
            .record
            .measurements
            .first()
            .and_then(|m| m.read::<Trial>())
            .map_or(0, |t| t.labels.steps);
        let causes = run.causes(manifest, dir, period);
        evidence.push(format!(
            "{}: {} misses in {steps} steps, worst step {} against the {period} period{}",
            run.place,
            run.misses,
            run.worst.map_or("-".into(), |w| w.to_string()),
            if causes.is_empty() {
                String::new()
            } else {
                format!(" ({})", causes.join("; "))
            }
        ));
    }
    if let Some(gain) = pm_qos_gain(manifest, dir, &fixed) {
        evidence.push(gain);
    }
    let holding: Vec<&str> = fixed
        .iter()
        .filter(|r| r.misses == 0.0)
        .map(|r| r.place.as_str())
        .collect();
    // The configuration that held best: fewest misses, then the shortest worst step.
    let best = fixed
        .iter()
        .filter(|r| !r.misses.is_nan())
        .min_by(|a, b| {
            a.misses.total_cmp(&b.misses).then(
                a.worst
                    .unwrap_or(Nanos::MAX)
                    .cmp(&b.worst.unwrap_or(Nanos::MAX)),
            )
        })
        .map(|r| {
            format!(
                "The configuration that held best: {} ({} misses, worst step {}).",
                r.place,
                r.misses,
                r.worst.map_or("-".into(), |w| w.to_string())
            )
        });
    let max_held = loops
        .iter()
        .find(|(s, _)| s.id.starts_with("loop-find-max"))
        .and_then(|(_, r)| {
            r.measurements
                .iter()
                .filter_map(|m| m.read::<Trial>())
                .filter(|t| t.metrics.held())
                .map(|t| t.labels.frequency_hz)
                .reduce(f64::max)
        });
    let holds = !holding.is_empty();
    let line = if holds {
        let broken: Vec<String> = fixed
            .iter()
            .filter(|r| r.misses > 0.0)
            .map(|r| {
                // In a list of its own commas, the QoS-off twin's mark in brackets.
                let qos = qos_note(r.step).trim_start_matches(", ");
                format!(
                    "{} under {}{}",
                    r.step.class.name(),
                    r.step.load.name(),
                    if qos.is_empty() {
                        String::new()
                    } else {
                        format!(" ({qos})")
                    }
                )
            })
            .collect();
        format!(
            "Yes: this machine holds {what} in {}.{}",
            holding.join(" and in "),
            if broken.is_empty() {
                String::new()
            } else {
                format!(" It misses deadlines in: {}.", broken.join(", "))
            }
        )
    } else {
        format!(
            "No: this machine does not hold {what} in any configuration tried.{}",
            match max_held {
                Some(f) => format!(
                    " The highest frequency it held with zero misses: {}.",
                    khz(f)
                ),
                None => " It held no frequency tried with zero misses.".into(),
            }
        )
    };
    let sound_line = max_held.map(|f| {
        if f >= 50_000.0 {
            format!("The 50 kHz sound loop of seed 000 also holds (zero misses up to {}).", khz(f))
        } else {
            format!(
                "The 50 kHz sound loop of seed 000 does not hold: the highest frequency with zero misses was {}.",
                khz(f)
            )
        }
    });
    Some(Verdict {
        line,
        holds,
        evidence,
        sound_line,
        best,
    })
}

fn khz(f: f64) -> String {
    if f >= 1_000.0 {
        let v = format!("{:.2}", f / 1e3);
        format!("{} kHz", v.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{f:.0} Hz")
    }
}
