//! The fake tasks: one plan each, one thread each, its work loop.

use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use ictus_core::CpuSet;
use ictus_core::sync::spsc::Producer;
use ictus_os::handoff::Latch;
use ictus_os::procstat;
use ictus_os::sched;
use ictus_os::{clock, thread_time};

use crate::class::{self, Class, ClassError, Options};
use crate::migrate::{Migrator, Return, SectionStart};
use crate::partition::Partition;
use crate::scenario::spec::{GroupClass, Scenario};

use super::result::SectionCounts;
use super::shared::Shared;

/// Integer divisions in one loop.
pub const LOOP_DIVISIONS: u32 = 32;

/// One loop: a chain of [`LOOP_DIVISIONS`] dependent 64-bit integer divisions (a few
/// hundred nanoseconds; the run calibrates and reports it).
#[inline(never)]
pub fn one_loop(x: u64) -> u64 {
    let mut a = std::hint::black_box(x) | 1;
    for _ in 0..LOOP_DIVISIONS {
        let d = (a & 0x00ff_ffff) | 0x0001_0000;
        a = ((a.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15) / d).wrapping_add(a.wrapping_mul(3));
    }
    std::hint::black_box(a)
}

/// One loop's duration in ns: the best of many short timed batches on the calling
/// thread (short, so that some batch runs without being preempted on a busy machine).
pub fn calibrate() -> f64 {
    const BATCH: u64 = 500;
    let mut best = f64::INFINITY;
    let mut x = 7;
    for _ in 0..40 {
        let t0 = clock::monotonic_now();
        for _ in 0..BATCH {
            x = one_loop(x);
        }
        let dt = clock::monotonic_now().saturating_sub(t0).as_u64() as f64;
        best = best.min(dt / BATCH as f64);
    }
    std::hint::black_box(x);
    best
}

/// What one task is asked to do.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) group: usize,
    pub(super) index: u32,
    pub(super) class: Class,
    pub(super) affinity: CpuSet,
    pub(super) loops: u64,
    pub(super) sleep: Option<(u64, Duration)>,
    pub(super) section: Option<(u64, Duration)>,
}

/// What a task says once set up.
pub(super) struct Ready {
    pub(super) task: usize,
    pub(super) tid: i32,
    pub(super) policy: String,
    pub(super) refused: Option<String>,
    pub(super) error: Option<String>,
}

/// What a task says at its end.
#[derive(Default)]
pub(super) struct TaskEnd {
    pub(super) started: bool,
    pub(super) finished: bool,
    pub(super) loops_done: u64,
    pub(super) end_ns: u64,
    pub(super) cpu_time_ns: u64,
    pub(super) voluntary: Option<u64>,
    pub(super) involuntary: Option<u64>,
    pub(super) migrations: Option<u64>,
    pub(super) sections: SectionCounts,
}

/// One plan per task, in group order. rt0 tasks get one CPU each.
pub(super) fn plans(
    scenario: &Scenario,
    in_play: &CpuSet,
    warnings: &mut Vec<String>,
) -> Vec<Plan> {
    let mut plans = Vec::new();
    for (gi, g) in scenario.groups.iter().enumerate() {
        let usable = CpuSet::from_cpus(
            g.cpus
                .cpus()
                .iter()
                .copied()
                .filter(|&c| in_play.contains(c)),
        );
        if usable != g.cpus {
            warnings.push(format!(
                "group {}: CPUs {} asked, {} usable (online and allowed); the tasks use those",
                g.name, g.cpus, usable
            ));
        }
        for index in 0..g.count {
            let (class, affinity) = match g.class {
                GroupClass::Rt0 => {
                    let cpu = usable.cpus()[index as usize % usable.len()];
                    (Class::Rt0 { cpu }, CpuSet::from_cpus([cpu]))
                }
                GroupClass::Rt1 { policy, priority } => {
                    (Class::Rt1 { policy, priority }, usable.clone())
                }
                GroupClass::Normal => (Class::Normal, usable.clone()),
            };
            plans.push(Plan {
                group: gi,
                index,
                class,
                affinity,
                loops: g.loops,
                sleep: g.sleep.map(|e| (e.loops, e.duration)),
                section: g.section.map(|e| (e.loops, e.duration)),
            });
        }
    }
    plans
}

/// What a task thread needs.
pub(super) struct TaskCtx {
    pub(super) k: usize,
    pub(super) plan: Plan,
    pub(super) partition: Partition,
    pub(super) ret: Return,
    pub(super) shared: Arc<Shared>,
    pub(super) ready: mpsc::Sender<Ready>,
    pub(super) feed: mpsc::Receiver<Option<Producer<SectionStart>>>,
}

pub(super) fn task_main(ctx: TaskCtx) -> TaskEnd {
    let TaskCtx {
        k,
        plan,
        partition,
        ret,
        shared,
        ready,
        feed,
    } = ctx;
    let tid = sched::thread_id() as i32;
    let (refused, error) = enter(&plan);
    let policy =
        sched::current_policy().map_or_else(|e| format!("unknown ({e})"), |p| p.to_string());
    let failed = error.is_some();
    let _ = ready.send(Ready {
        task: k,
        tid,
        policy,
        refused,
        error,
    });
    drop(ready);
    let producer = feed.recv().ok().flatten();
    let mut migrator = Migrator::new(partition, ret);
    if let Some(p) = producer {
        migrator = migrator.report_to(p);
    }
    shared.wait_gate();
    if failed || shared.abort.is_raised() {
        return TaskEnd::default();
    }
    let cpu_before = thread_time::thread_cpu_time();

    // The work: only computing, sleeping and sections from here to the last loop.
    let (x, done, finished) = work(k, &plan, &shared.abort, &mut migrator);
    let end_ns = clock::monotonic_now().as_u64();
    std::hint::black_box(x);

    // After the last loop: what the kernel counted.
    let cpu_time_ns = thread_time::thread_cpu_time()
        .saturating_sub(cpu_before)
        .as_u64();
    let (voluntary, involuntary) = ctxt_switches();
    let migrations = nr_migrations();
    let stats = migrator.stats();
    let sections = SectionCounts {
        attempts: stats.attempts,
        moves: stats.moves,
        failures: migrator.failures(),
        dropped_reports: migrator.dropped_reports(),
    };
    // Release: pairs with the Acquire load of the sampler, which stops reading it.
    shared.done[k].store(true, Ordering::Release);
    // AcqRel: the first to end takes the idle snapshot; pairs with the coordinator's
    // Acquire load.
    if shared.ended.fetch_add(1, Ordering::AcqRel) == 0
        && finished
        && let Ok(snap) = procstat::read()
    {
        let _ = shared.first_end.set((end_ns, snap));
    }
    TaskEnd {
        started: true,
        finished,
        loops_done: done,
        end_ns,
        cpu_time_ns,
        voluntary,
        involuntary,
        migrations,
        sections,
    }
}

/// Enters the plan's class (the normal class when its policy is refused) and
/// affinity: the refusal, and the error that stops the task.
fn enter(plan: &Plan) -> (Option<String>, Option<String>) {
    let options = Options {
        lock_memory: false,
        prefault_stack: true,
    };
    let mut refused = None;
    let mut error = None;
    match class::enter(plan.class.clone(), options, None) {
        Ok(_) => {}
        Err(ClassError::Policy(e)) => {
            refused = Some(e.to_string());
            if let Err(e) = class::enter(Class::Normal, options, None) {
                error = Some(format!("entering the normal class after a refusal: {e}"));
            }
        }
        Err(e) => error = Some(e.to_string()),
    }
    if error.is_none()
        && let Err(e) = sched::set_affinity(&plan.affinity)
    {
        error = Some(format!("affinity {}: {e}", plan.affinity));
    }
    (refused, error)
}

/// Task `k`'s loops, with the plan's sleeps and sections (each migrated by
/// `migrator`), until done or `abort` is raised: the last value computed, the loops
/// done and whether all were.
#[inline]
fn work(k: usize, plan: &Plan, abort: &Latch, migrator: &mut Migrator) -> (u64, u64, bool) {
    let mut x = k as u64;
    let mut to_sleep = plan.sleep.map_or(u64::MAX, |(every, _)| every);
    let mut to_section = plan.section.map_or(u64::MAX, |(every, _)| every);
    let mut done = 0u64;
    let mut finished = true;
    while done < plan.loops {
        x = one_loop(x);
        done += 1;
        if done & 0x3ff == 0 && abort.is_raised() {
            finished = false;
            break;
        }
        to_sleep -= 1;
        if to_sleep == 0
            && let Some((every, d)) = plan.sleep
        {
            to_sleep = every;
            if abort.sleep_for(d) {
                finished = false;
                break;
            }
        }
        to_section -= 1;
        if to_section == 0
            && let Some((every, d)) = plan.section
        {
            to_section = every;
            let _section = migrator.section();
            if busy(d, abort) {
                finished = false;
                break;
            }
        }
    }
    (x, done, finished)
}

/// Busy for `d` (the work inside a section), or until `stop` is raised; returns
/// whether it was.
pub(super) fn busy(d: Duration, stop: &Latch) -> bool {
    let end = clock::monotonic_now()
        .as_u64()
        .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    while clock::monotonic_now().as_u64() < end {
        if stop.is_raised() {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

/// The calling thread's context switches, from `/proc/thread-self/status`.
pub(super) fn ctxt_switches() -> (Option<u64>, Option<u64>) {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches(':').trim().parse().ok())
    };
    (
        field("voluntary_ctxt_switches"),
        field("nonvoluntary_ctxt_switches"),
    )
}

/// The calling thread's migrations as the kernel counts them (`se.nr_migrations` in
/// `/proc/thread-self/sched`, present with `CONFIG_SCHED_DEBUG`).
pub(super) fn nr_migrations() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("se.nr_migrations"))
        .and_then(|v| v.trim().trim_start_matches(':').trim().parse().ok())
}
