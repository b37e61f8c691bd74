//! The phases of a run: set the tasks up, release them, watch them to the end.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use ictus_core::CpuSet;
use ictus_core::sync::spsc::Producer;
use ictus_os::clock;
use ictus_os::procstat::{self, StatSnapshot};
use ictus_os::sched::{self, Policy};

use crate::balancer::{self, Balancer, TaskRole};
use crate::class::Class;
use crate::migrate::{Return, SectionStart};
use crate::partition::Partition;
use crate::scenario::spec::{self, Scenario};

use super::options::{BalancerMode, ScenarioError, ScenarioOptions, ScenarioProgress, WatchFlow};
use super::result::TaskResult;
use super::sampler::{Sampled, SamplerCtx, sampler_main};
use super::shared::Shared;
use super::summary::shares;
use super::task::{Plan, Ready, TaskCtx, TaskEnd, task_main};

/// How often the coordinating thread looks at the tasks and calls the watcher.
pub(super) const POLL: Duration = Duration::from_millis(50);

/// Where a task learns its balancer's ring: `Some` with [`BalancerMode::Ictus`], `None`
/// without a balancer or when the run is aborted.
pub(super) type Feed = mpsc::Sender<Option<Producer<SectionStart>>>;

/// What every phase of a run reads.
pub(super) struct Setting<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) opts: &'a ScenarioOptions,
    pub(super) plans: &'a [Plan],
    pub(super) in_play: &'a CpuSet,
    pub(super) partition: &'a Partition,
    pub(super) shared: &'a Arc<Shared>,
}

/// The task threads, set up and waiting at the gate.
pub(super) struct Tasks {
    pub(super) handles: Vec<JoinHandle<TaskEnd>>,
    pub(super) feeds: Vec<Feed>,
    /// In plan order.
    pub(super) ready: Vec<Ready>,
}

/// A run under way: the gate opened at `start`.
pub(super) struct Started {
    pub(super) handles: Vec<JoinHandle<TaskEnd>>,
    pub(super) sampler: JoinHandle<Sampled>,
    pub(super) running: Option<balancer::Running>,
    pub(super) stat_start: StatSnapshot,
    pub(super) coordinator: Raised,
    pub(super) start: u64,
}

/// A run over: every thread joined, the balancer stopped.
pub(super) struct Ended {
    /// In plan order.
    pub(super) ends: Vec<TaskEnd>,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) stopped: Option<String>,
    pub(super) sampled: Sampled,
    pub(super) balancer_report: Option<balancer::Report>,
    pub(super) stat_start: StatSnapshot,
    pub(super) stat_end: StatSnapshot,
}

impl Setting<'_> {
    /// Starts one thread per plan and waits until each has set itself up. On a
    /// failure, the threads started are stopped.
    pub(super) fn start_tasks(&self) -> Result<Tasks, ScenarioError> {
        let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
        let (handles, feeds, failure) = self.spawn_tasks(ready_tx);
        match self.gather_ready(&ready_rx, handles.len(), failure) {
            Ok(ready) => Ok(Tasks {
                handles,
                feeds,
                ready,
            }),
            Err(e) => {
                abort_tasks(self.shared, &feeds, handles);
                Err(e)
            }
        }
    }

    /// Spawns the task threads, in plan order; each says on `ready_tx` when it is set
    /// up, then waits for its feed and the gate. Stops at the first thread that cannot
    /// be started, and returns that failure with the threads started.
    pub(super) fn spawn_tasks(
        &self,
        ready_tx: mpsc::Sender<Ready>,
    ) -> (Vec<JoinHandle<TaskEnd>>, Vec<Feed>, Option<ScenarioError>) {
        let n = self.plans.len();
        let mut feeds = Vec::with_capacity(n);
        let mut handles: Vec<JoinHandle<TaskEnd>> = Vec::with_capacity(n);
        let ret = match self.opts.balancer {
            BalancerMode::None => Return::Never,
            BalancerMode::Ictus => Return::Stay,
        };
        for (k, plan) in self.plans.iter().enumerate() {
            let (feed_tx, feed_rx) = mpsc::channel::<Option<Producer<SectionStart>>>();
            let ctx = TaskCtx {
                k,
                plan: plan.clone(),
                partition: self.partition.clone(),
                // RT0 is never moved back by the balancer: its sections return at once.
                ret: match (plan.class.clone(), ret) {
                    (Class::Rt0 { .. }, Return::Stay) => Return::Restore,
                    (_, r) => r,
                },
                shared: self.shared.clone(),
                ready: ready_tx.clone(),
                feed: feed_rx,
            };
            let name = format!("{}-{}", self.scenario.groups[plan.group].name, plan.index);
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || task_main(ctx))
            {
                Ok(h) => {
                    handles.push(h);
                    feeds.push(feed_tx);
                }
                Err(e) => return (handles, feeds, Some(ScenarioError::Spawn(e))),
            }
        }
        (handles, feeds, None)
    }

    /// What the `started` tasks said once set up, in plan order. The error is
    /// `failure` when given, else the first task's that could not set itself up, else
    /// a task thread that ended without a word.
    pub(super) fn gather_ready(
        &self,
        ready_rx: &mpsc::Receiver<Ready>,
        started: usize,
        mut failure: Option<ScenarioError>,
    ) -> Result<Vec<Ready>, ScenarioError> {
        let mut ready: Vec<Option<Ready>> = (0..self.plans.len()).map(|_| None).collect();
        for _ in 0..started {
            match ready_rx.recv() {
                Ok(r) => {
                    let k = r.task;
                    if failure.is_none()
                        && let Some(what) = &r.error
                    {
                        failure = Some(ScenarioError::Task {
                            group: self.scenario.groups[self.plans[k].group].name.clone(),
                            index: self.plans[k].index,
                            what: what.clone(),
                        });
                    }
                    ready[k] = Some(r);
                }
                Err(_) => break,
            }
        }
        if failure.is_none() && ready.iter().any(Option::is_none) {
            failure = Some(ScenarioError::Task {
                group: "?".into(),
                index: 0,
                what: "a task thread ended during its setup".into(),
            });
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(ready.into_iter().flatten().collect()),
        }
    }

    /// Starts the balancer and the sampler, then opens the gate: the common start. On
    /// a failure, everything started is stopped.
    pub(super) fn release(
        &self,
        handles: Vec<JoinHandle<TaskEnd>>,
        feeds: &[Feed],
        ready: &[Ready],
    ) -> Result<Started, ScenarioError> {
        let shared = self.shared;
        let running = match self.start_balancer(feeds, ready) {
            Ok(r) => r,
            Err(e) => {
                abort_tasks(shared, &[], handles);
                return Err(ScenarioError::Balancer(e));
            }
        };
        let sampler = match self.spawn_sampler(ready) {
            Ok(h) => h,
            Err(e) => {
                abort_tasks(shared, &[], handles);
                if let Some(r) = running {
                    let _ = r.stop();
                }
                return Err(ScenarioError::Spawn(e));
            }
        };
        let stat_start = match procstat::read() {
            Ok(s) => s,
            Err(e) => {
                shared.sampling_over.raise();
                abort_tasks(shared, &[], handles);
                shared.open_gate(std::iter::once(sampler.thread()));
                let _ = sampler.join();
                if let Some(r) = running {
                    let _ = r.stop();
                }
                return Err(ScenarioError::ProcStat(e));
            }
        };
        // The coordinator releases the tasks and watches them from the NRT CPUs, above them.
        let coordinator = Raised::raise(&self.partition.nrt);
        let start = clock::monotonic_now().as_u64();
        // Release: pairs with the Acquire loads in `Shared::start` (tasks, sampler).
        shared.start_ns.store(start, Ordering::Release);
        shared
            .open_gate(std::iter::once(sampler.thread()).chain(handles.iter().map(|h| h.thread())));
        Ok(Started {
            handles,
            sampler,
            running,
            stat_start,
            coordinator,
            start,
        })
    }

    /// Feeds every task: with [`BalancerMode::Ictus`], registers it with a new
    /// balancer, hands it its ring and starts the balancer; else tells it there is none.
    pub(super) fn start_balancer(
        &self,
        feeds: &[Feed],
        ready: &[Ready],
    ) -> io::Result<Option<balancer::Running>> {
        match self.opts.balancer {
            BalancerMode::None => {
                for f in feeds {
                    let _ = f.send(None);
                }
                Ok(None)
            }
            BalancerMode::Ictus => {
                let mut b =
                    Balancer::new(self.partition.clone(), self.opts.balancer_config.clone());
                for (k, plan) in self.plans.iter().enumerate() {
                    let role = match plan.class {
                        Class::Rt0 { .. } => TaskRole::Rt0,
                        Class::Rt1 { .. } => TaskRole::Rt1,
                        Class::Normal => TaskRole::Normal,
                    };
                    let producer = b.register(ready[k].tid, role, plan.affinity.clone());
                    let _ = feeds[k].send(Some(producer));
                }
                b.start().map(Some)
            }
        }
    }

    /// Starts the sampler thread and waits until it has raised itself.
    pub(super) fn spawn_sampler(&self, ready: &[Ready]) -> io::Result<JoinHandle<Sampled>> {
        let (sampler_ready_tx, sampler_ready_rx) = mpsc::channel();
        let sampler_ctx = SamplerCtx {
            tids: ready.iter().map(|r| r.tid).collect(),
            groups: self.plans.iter().map(|p| p.group).collect(),
            group_names: self
                .scenario
                .groups
                .iter()
                .map(|g| g.name.clone())
                .collect(),
            cpus: self.in_play.cpus().to_vec(),
            nrt: self.partition.nrt.clone(),
            period: self.scenario.sample_period,
            bucket: self.scenario.timeline_bucket,
            shared: self.shared.clone(),
            ready: sampler_ready_tx,
        };
        let sampler = std::thread::Builder::new()
            .name("scenario-sampler".into())
            .spawn(move || sampler_main(sampler_ctx))?;
        let _ = sampler_ready_rx.recv();
        Ok(sampler)
    }

    /// Watches the run until every task has ended or it must stop, then joins the
    /// tasks and the sampler, stops the balancer and reads `/proc/stat` again.
    pub(super) fn watch_to_end(
        &self,
        started: Started,
        watch: &mut impl FnMut(&ScenarioProgress) -> WatchFlow,
    ) -> Result<Ended, ScenarioError> {
        let Started {
            handles,
            sampler,
            running,
            stat_start,
            coordinator,
            start,
        } = started;
        let stopped = self.watch_tasks(start, watch);
        let ends: Vec<TaskEnd> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        let end = clock::monotonic_now().as_u64();
        self.shared.sampling_over.raise();
        let sampled = sampler.join().unwrap_or_default();
        drop(coordinator);
        let balancer_report = running.map(|r| r.stop());
        let stat_end = procstat::read().map_err(ScenarioError::ProcStat)?;
        watch(&ScenarioProgress {
            elapsed: Duration::from_nanos(end.saturating_sub(start)),
            finished: ends.iter().filter(|e| e.finished).count(),
            tasks: self.plans.len(),
        });
        Ok(Ended {
            ends,
            start,
            end,
            stopped,
            sampled,
            balancer_report,
            stat_start,
            stat_end,
        })
    }

    /// Calls `watch` every [`POLL`] until every task has ended. When it asks, or at
    /// the scenario's duration limit, tells the tasks to stop and returns why.
    pub(super) fn watch_tasks(
        &self,
        start: u64,
        watch: &mut impl FnMut(&ScenarioProgress) -> WatchFlow,
    ) -> Option<String> {
        let n = self.plans.len();
        let mut stopped = None;
        loop {
            std::thread::sleep(POLL);
            // Acquire: pairs with the AcqRel increment of each task's end.
            let ended = self.shared.ended.load(Ordering::Acquire);
            let elapsed =
                Duration::from_nanos(clock::monotonic_now().as_u64().saturating_sub(start));
            if ended >= n {
                break;
            }
            if watch(&ScenarioProgress {
                elapsed,
                finished: ended,
                tasks: n,
            }) == WatchFlow::Stop
            {
                stopped = Some("stopped on request".to_string());
            } else if let Some(limit) = self.scenario.duration_limit
                && elapsed >= limit
            {
                stopped = Some(format!(
                    "stopped at the duration limit ({})",
                    spec::format_duration(limit)
                ));
            }
            if stopped.is_some() {
                self.shared.abort.raise();
                break;
            }
        }
        stopped
    }

    /// Each task's figures, in plan order.
    pub(super) fn task_results(&self, ready: &[Ready], ended: &Ended) -> Vec<TaskResult> {
        let (start, end) = (ended.start, ended.end);
        self.plans
            .iter()
            .zip(ready)
            .zip(&ended.ends)
            .enumerate()
            .map(|(k, ((plan, r), e))| {
                let runs = &ended.sampled.per_task[k];
                let total: u64 = runs.per_cpu.iter().sum();
                TaskResult {
                    group: self.scenario.groups[plan.group].name.clone(),
                    index: plan.index,
                    tid: r.tid,
                    affinity: plan.affinity.clone(),
                    policy: r.policy.clone(),
                    finished: e.finished,
                    loops_done: e.loops_done,
                    completion_ns: if e.started {
                        e.end_ns.saturating_sub(start)
                    } else {
                        end.saturating_sub(start)
                    },
                    cpu_time_ns: e.cpu_time_ns,
                    cpu_share: shares(self.in_play, &runs.per_cpu, total),
                    samples: runs.samples,
                    samples_running: runs.running,
                    voluntary_ctxt_switches: e.voluntary,
                    involuntary_ctxt_switches: e.involuntary,
                    migrations: e.migrations,
                    migrations_sampled: runs.changes,
                    sections: e.sections,
                }
            })
            .collect()
    }
}

/// Stops tasks that were set up but not started: tells them to give up, hands each
/// of `feeds` no balancer, opens the gate and joins them.
pub(super) fn abort_tasks(shared: &Shared, feeds: &[Feed], handles: Vec<JoinHandle<TaskEnd>>) {
    shared.abort.raise();
    for f in feeds {
        let _ = f.send(None);
    }
    shared.open_gate(handles.iter().map(|h| h.thread()));
    for h in handles {
        let _ = h.join();
    }
}

/// The calling thread raised to FIFO 99 on `cpus` for a while; dropping it puts back
/// its policy and affinity. Where FIFO is refused, it only pins.
pub(super) struct Raised {
    pub(super) policy: Option<Policy>,
    pub(super) affinity: Option<CpuSet>,
}

impl Raised {
    pub(super) fn raise(cpus: &CpuSet) -> Raised {
        let raised = Raised {
            policy: sched::current_policy().ok(),
            affinity: sched::current_affinity().ok(),
        };
        let _ = sched::set_affinity(cpus);
        let _ = sched::set_policy(Policy::Fifo { priority: 99 });
        raised
    }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some(p) = self.policy {
            let _ = sched::set_policy(p);
        }
        if let Some(a) = &self.affinity {
            let _ = sched::set_affinity(a);
        }
    }
}
