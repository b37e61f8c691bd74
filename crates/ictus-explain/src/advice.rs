//! A run's misses as time by cause ([`TimeByCause`], what a chart draws: the survey's
//! report, the live page, a probe's footer) and the advice that follows from the cause
//! that cost most ([`advice`]).

use ictus_core::Nanos;
use serde::{Deserialize, Serialize};

use super::cause::{Cause, CauseKind, TaskRan};
use super::explained::{Breakdown, Explained, Explanation};

/// One cause's part of a run's misses: each cause that was a reason, in the words
/// of the breakdown (`preempted by kworker/1:2`, `host stall (the vCPU did not run)`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CauseTime {
    /// As the breakdown words it.
    pub phrase: String,
    /// Its kind (one colour per kind in a chart); `None` for the misses the sampler
    /// did not read around.
    pub kind: Option<CauseKind>,
    /// Misses it accounts for most of.
    pub misses: u64,
    /// The time it accounted for where it was a reason (ns).
    pub ns: u64,
}

/// A run's misses as time by cause, for a chart: each cause's time where it was a
/// reason, the time too small to name (causes only seen), the lateness in all and
/// what the counters in the guest account for of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeByCause {
    /// Misses explained.
    pub misses: u64,
    /// Their lateness added (ns).
    pub lateness_ns: u64,
    /// What the counters in the guest accounted for of it (ns); the rest is inferred
    /// (a host stall on a virtual machine, "unaccounted" on bare metal).
    pub accounted_ns: u64,
    /// Each cause that was a reason, the most time first (then the most misses).
    pub causes: Vec<CauseTime>,
    /// Lateness that no reason holds: causes that moved but were too small to name,
    /// or (in records written before the accounting) lateness not accounted (ns).
    pub rest_ns: u64,
    /// What to do about the cause that cost most ([`advice`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advice: Option<String>,
}

impl TimeByCause {
    /// The chart of a run's explained misses.
    pub fn of(e: &Explanation) -> TimeByCause {
        TimeByCause::of_misses(&e.breakdown, &e.events)
    }

    /// The chart of a breakdown, with the advice drawn from the misses kept of it.
    pub fn of_misses(b: &Breakdown, events: &[Explained]) -> TimeByCause {
        let mut t = TimeByCause::from_breakdown(b);
        t.advice = advice_of(b, events);
        t
    }

    /// The chart of a breakdown (no advice: that needs the misses themselves).
    pub fn from_breakdown(b: &Breakdown) -> TimeByCause {
        let mut causes: Vec<CauseTime> = b
            .by_cause
            .iter()
            .map(|(phrase, n)| CauseTime {
                phrase: phrase.clone(),
                kind: CauseKind::of_phrase(phrase),
                misses: *n,
                ns: b.time_of(phrase).unwrap_or(0),
            })
            .collect();
        // A cause that was a reason in some misses but never the largest.
        for (phrase, ns) in &b.time_by_cause {
            if !causes.iter().any(|c| &c.phrase == phrase) {
                causes.push(CauseTime {
                    phrase: phrase.clone(),
                    kind: CauseKind::of_phrase(phrase),
                    misses: 0,
                    ns: *ns,
                });
            }
        }
        causes.sort_by(|a, b| {
            b.ns.cmp(&a.ns)
                .then(b.misses.cmp(&a.misses))
                .then(a.phrase.cmp(&b.phrase))
        });
        let named: u64 = causes.iter().map(|c| c.ns).sum();
        TimeByCause {
            misses: b.events,
            lateness_ns: b.lateness_ns,
            accounted_ns: b.accounted_ns,
            causes,
            rest_ns: b.lateness_ns.saturating_sub(named),
            advice: None,
        }
    }

    /// The share of the lateness the counters in the guest account for, 0 to 1
    /// (`None`: no lateness kept, records written before the accounting).
    pub fn accounted_share(&self) -> Option<f64> {
        (self.lateness_ns > 0).then(|| self.accounted_ns as f64 / self.lateness_ns as f64)
    }

    /// The cause that cost most: the most time, else (records without times) the
    /// most misses.
    pub fn leading(&self) -> Option<&CauseTime> {
        self.causes.first()
    }

    /// What a bar draws: the causes' times and the rest, all of it (ns; the
    /// lateness, or more where the causes' times overlap).
    pub fn drawn_ns(&self) -> u64 {
        self.causes.iter().map(|c| c.ns).sum::<u64>() + self.rest_ns
    }
}

impl CauseKind {
    /// The kind of a cause as the breakdown words it (`preempted by kworker/1:2`,
    /// `with softirqs`); `None` for the misses the sampler did not read around.
    pub fn of_phrase(phrase: &str) -> Option<CauseKind> {
        if phrase.starts_with("preempted") {
            return Some(CauseKind::Preempted);
        }
        ALL_KINDS.into_iter().find(|k| k.phrase() == phrase)
    }

    /// A short name, for a chart's legend: `host stall`, `preempted`, `interrupts`.
    pub fn label(self) -> &'static str {
        match self {
            CauseKind::RtThrottling => "RT throttling",
            CauseKind::Steal => "steal",
            CauseKind::Preempted => "preempted",
            CauseKind::Overrun => "overrun",
            CauseKind::PageFaults => "page faults",
            CauseKind::Interrupts => "interrupts",
            CauseKind::Softirqs => "softirqs",
            CauseKind::IdleExit => "idle exit",
            CauseKind::HostStall => "host stall",
            CauseKind::Unaccounted => "unaccounted",
            CauseKind::Unexplained => "unexplained",
        }
    }
}

/// Every cause kind, in the order a legend lists them.
pub const ALL_KINDS: [CauseKind; 11] = [
    CauseKind::HostStall,
    CauseKind::Steal,
    CauseKind::Preempted,
    CauseKind::RtThrottling,
    CauseKind::Interrupts,
    CauseKind::Softirqs,
    CauseKind::IdleExit,
    CauseKind::PageFaults,
    CauseKind::Overrun,
    CauseKind::Unaccounted,
    CauseKind::Unexplained,
];

/// What to do about a run's misses, from the cause that cost most (the most time
/// where it was a reason): a host stall or steal (pinned, dedicated vCPUs or bare
/// metal), a thread (which one, its class, how to move it), interrupts (which line,
/// how to steer it), softirqs, RT throttling, an idle state, page faults, an overrun,
/// time nothing accounts for on bare metal. `None` without misses, or where nothing
/// was read.
pub fn advice(e: &Explanation) -> Option<String> {
    advice_of(&e.breakdown, &e.events)
}

/// [`advice`] from a breakdown and the misses kept of it (the details: the thread,
/// the interrupt line, the CPU).
pub fn advice_of(b: &Breakdown, events: &[Explained]) -> Option<String> {
    let chart = TimeByCause::from_breakdown(b);
    let lead = chart.leading()?;
    let kind = lead.kind?;
    // The miss that shows the leading cause best: the one where it accounts for most.
    let example = events
        .iter()
        .filter_map(|ev| {
            let c = ev.causes.iter().find(|c| c.cause.phrase() == lead.phrase)?;
            Some((ev, &c.cause, c.accounts_ns))
        })
        .max_by_key(|(_, _, ns)| *ns);
    let cpu = example
        .and_then(|(ev, _, _)| ev.cpu)
        .map_or_else(|| "the measured CPU".to_string(), |c| format!("CPU {c}"));
    // `interrupts`, `host stall`, but a thread by name (`preempted by burner`).
    let subject = match kind {
        CauseKind::Preempted => lead.phrase.as_str(),
        k => k.label(),
    };
    let cost = if lead.ns > 0 {
        format!(
            "{subject} cost most ({} of {} late, the largest part of {} of {} misses)",
            Nanos::new(lead.ns),
            Nanos::new(chart.lateness_ns),
            lead.misses,
            chart.misses
        )
    } else {
        format!(
            "{subject} accounts for most of {} of {} misses",
            lead.misses, chart.misses
        )
    };
    let what = match (kind, example.map(|(_, c, _)| c)) {
        (CauseKind::HostStall, Some(Cause::HostStall { hypervisor, .. })) => format!(
            "the host did not run this vCPU ({hypervisor}): ask for pinned, dedicated vCPUs \
             (not shared with other guests, the host's own threads kept off their cores), \
             or run on bare metal; the host's view of this vCPU (steal, or hwlat/timerlat \
             on the host) confirms it"
        ),
        (CauseKind::HostStall | CauseKind::Steal, _) => "the host ran something else on \
             this vCPU: ask for pinned, dedicated vCPUs (not shared with other guests), or \
             run on bare metal"
            .to_string(),
        (CauseKind::Preempted, Some(Cause::Preempted { by: Some(t), .. })) => thread(t, &cpu),
        (CauseKind::Preempted, _) => format!(
            "another thread ran on {cpu} while the measured one waited, not seen by the \
             scans: keep other threads off it (`ictus shield apply --rt-cpus ...`), or run \
             the measured thread at a higher real-time priority"
        ),
        (CauseKind::Interrupts, Some(Cause::Interrupts { lines })) => {
            interrupts(lines.first().map(|(l, _)| l.as_str()), &cpu)
        }
        (CauseKind::Interrupts, _) => interrupts(None, &cpu),
        (CauseKind::Softirqs, Some(Cause::Softirqs { kinds })) => format!(
            "softirqs ({}) ran on {cpu}: they follow the interrupts that raise them \
             (NET_RX a network queue's, BLOCK a disk's): steer those lines off it \
             (`/proc/irq/N/smp_affinity_list`, or `ictus shield apply --rt-cpus ...`)",
            kinds
                .iter()
                .take(3)
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (CauseKind::Softirqs, _) => format!(
            "softirqs ran on {cpu}: steer the interrupts that raise them off it \
             (`ictus shield apply --rt-cpus ...`)"
        ),
        (CauseKind::RtThrottling, _) => "RT throttling held the real-time threads back \
             once they used the budget (`sched_rt_runtime_us`): let them run without it \
             (`ictus shield apply --rt-cpus ... --rt-throttle off --watchdog 1s`, with a \
             watchdog against a runaway thread), or give the loop less to do each period"
            .to_string(),
        (CauseKind::IdleExit, Some(Cause::IdleExit { state, .. })) => format!(
            "{cpu} woke from idle state {state}: hold the CPU latency QoS (`--pm-qos 0`, \
             the default) or keep it out of deep states (`cpupower idle-set -D 10`)"
        ),
        (CauseKind::IdleExit, _) => {
            format!("{cpu} woke from a deep idle state: hold the CPU latency QoS (`--pm-qos 0`)")
        }
        (CauseKind::PageFaults, _) => "the thread faulted pages in: lock its memory \
             (`--mlock`) and touch what it uses before the loop starts"
            .to_string(),
        (CauseKind::Overrun, _) => "the work itself took longer than its budget: less \
             work per period, a longer period, or a faster CPU"
            .to_string(),
        (CauseKind::Unaccounted, _) => "nothing on this CPU accounts for the time \
             (system management interrupts, firmware): confirm with the hwlat tracer or \
             `rtla hwnoise`, then look at the firmware's power and management settings, or \
             another machine"
            .to_string(),
        (CauseKind::Unexplained, _) => return None,
    };
    Some(format!("{cost}: {what}."))
}

/// The advice for a thread that preempted the measured one.
fn thread(t: &TaskRan, cpu: &str) -> String {
    let who = format!("{} (pid {}, {})", t.comm, t.tid, t.policy);
    // A per-CPU kernel thread (`kworker/1:2`, `ksoftirqd/1`) cannot be moved.
    let bound = t.comm.split_once('/').is_some_and(|(_, rest)| {
        rest.starts_with(|c: char| c.is_ascii_digit()) || rest.starts_with('u')
    });
    if bound {
        return format!(
            "{who}, a kernel thread bound to {cpu}, ran while the measured thread waited: \
             it cannot be moved; move the work that wakes it (interrupts, timers, \
             workqueues) off the CPU (`ictus shield apply --rt-cpus ...`)"
        );
    }
    let realtime = t.policy.starts_with("FIFO") || t.policy.starts_with("RR");
    let class = if realtime {
        "a real-time thread at least as urgent as the measured one: lower its priority \
         (`chrt -p`) or"
    } else {
        "an ordinary thread the measured one could not preempt in time:"
    };
    format!(
        "{who} ran on {cpu} while the measured thread waited; it is {class} move it off \
         that CPU (`taskset -pc OTHER_CPUS {}`), or shield the CPU (`ictus shield apply \
         --rt-cpus ...`)",
        t.tid
    )
}

/// The advice for interrupts on the measured CPU (`line`: `36:virtio1-req.0`).
fn interrupts(line: Option<&str>, cpu: &str) -> String {
    match line.and_then(|l| l.split_once(':')) {
        Some((irq, name)) if irq.chars().all(|c| c.is_ascii_digit()) => format!(
            "IRQ {irq} ({name}) was served on {cpu}: steer it off that CPU (`echo \
             OTHER_CPUS > /proc/irq/{irq}/smp_affinity_list`, irqbalance stopped or told \
             to leave it), or shield the CPU (`ictus shield apply --rt-cpus ...`)"
        ),
        Some((irq, name)) => format!(
            "{irq} interrupts ({name}) were served on {cpu}: they are per-CPU and cannot \
             be steered; move the work that raises them"
        ),
        None => format!(
            "interrupts were served on {cpu}: steer them off it \
             (`/proc/irq/N/smp_affinity_list`, or `ictus shield apply --rt-cpus ...`)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WindowDeltas;
    use crate::fixtures::window;

    fn miss(w: WindowDeltas) -> Explained {
        crate::fixtures::judged_miss("loop-0", &w)
    }

    fn explanation(misses: Vec<Explained>) -> Explanation {
        crate::fixtures::explanation_of(100_000, misses)
    }

    fn preempted_by(comm: &str, policy: &str, lateness_us: u64) -> Explained {
        let ran = lateness_us * 1_000;
        miss(WindowDeltas {
            run_delay_ns: ran,
            others_ran_ns: ran,
            top_other: Some(TaskRan {
                pid: 40,
                tid: 41,
                comm: comm.into(),
                policy: policy.into(),
                ran_ns: ran,
                over_ns: 2 * ran,
            }),
            ..window(lateness_us, true)
        })
    }

    #[test]
    fn the_chart_adds_up_to_the_lateness_with_the_costliest_cause_first() {
        let sut = TimeByCause::of(&explanation(vec![
            miss(WindowDeltas {
                softirqs: vec![("SCHED".into(), 1)],
                ..window(4_000, true)
            }),
            preempted_by("burner", "OTHER", 1_000),
            preempted_by("burner", "OTHER", 1_000),
        ]));
        assert_eq!(sut.misses, 3);
        assert_eq!(sut.lateness_ns, 6_000_000);
        let lead = sut.leading().unwrap();
        assert_eq!(lead.kind, Some(CauseKind::HostStall));
        assert_eq!((lead.misses, lead.ns), (1, 3_994_000));
        assert_eq!(sut.causes[1].phrase, "preempted by burner");
        assert_eq!(sut.causes[1].kind, Some(CauseKind::Preempted));
        // The softirq, only seen, is the rest: every nanosecond of lateness is drawn.
        assert_eq!(sut.rest_ns, 6_000);
        assert_eq!(sut.drawn_ns(), sut.lateness_ns);
        let share = sut.accounted_share().unwrap();
        assert!((share - 2_006_000.0 / 6_000_000.0).abs() < 1e-9, "{share}");
        assert!(sut.advice.unwrap().contains("dedicated vCPUs"));
    }

    #[test]
    fn advice_names_the_thread_its_class_and_how_to_move_it() {
        let e = explanation(vec![preempted_by("burner", "FIFO 99", 800)]);
        let sut = advice(&e).unwrap();
        assert!(
            sut.starts_with("preempted by burner cost most (800.0 us of 800.0 us"),
            "{sut}"
        );
        assert!(
            sut.contains("burner (pid 41, FIFO 99) ran on CPU 1"),
            "{sut}"
        );
        assert!(sut.contains("lower its priority"), "{sut}");
        assert!(sut.contains("taskset -pc OTHER_CPUS 41"), "{sut}");
        let kworker = advice(&explanation(vec![preempted_by(
            "kworker/1:2",
            "OTHER",
            800,
        )]));
        assert!(kworker.unwrap().contains("cannot be moved"));
    }

    #[test]
    fn advice_names_the_interrupt_line_and_how_to_steer_it() {
        let e = explanation(vec![miss(WindowDeltas {
            interrupts: vec![("36:virtio1-req.0".into(), 40)],
            irq_time: Some(crate::IrqTime {
                irq_ns: 400_000,
                softirq_ns: 0,
            }),
            ..window(300, false)
        })]);
        let sut = advice(&e).unwrap();
        assert!(
            sut.contains("IRQ 36 (virtio1-req.0) was served on CPU 1"),
            "{sut}"
        );
        assert!(sut.contains("/proc/irq/36/smp_affinity_list"), "{sut}");
    }

    #[test]
    fn old_records_chart_their_counts_and_phrases_map_to_their_kinds() {
        let old = Breakdown {
            events: 3,
            by_cause: vec![("with softirqs".into(), 2), ("unexplained".into(), 1)],
            ..Breakdown::default()
        };
        let sut = TimeByCause::from_breakdown(&old);
        assert_eq!(sut.accounted_share(), None);
        assert_eq!(sut.leading().unwrap().kind, Some(CauseKind::Softirqs));
        for k in ALL_KINDS {
            assert_eq!(CauseKind::of_phrase(k.phrase()), Some(k));
        }
        assert_eq!(CauseKind::of_phrase("not read by the sampler"), None);
        assert!(advice(&explanation(Vec::new())).is_none());
    }
}
