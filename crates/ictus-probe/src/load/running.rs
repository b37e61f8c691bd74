//! Loads started and stopped: each kind's workers spawned on their CPUs, their
//! outcomes reported.

use ictus_core::{CpuSet, Nanos};
use ictus_os::clock::monotonic_now;
use ictus_os::sched::{self, Policy};
use ictus_os::thread_time::thread_cpu_time;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::{self, JoinHandle};

use super::spec::*;
use super::worker::*;
use super::{cachemiss, cpu, disk, membw, net, syscall};

/// Starts the loads and returns once every worker is prepared and running. A failure
/// stops and joins whatever had started, removes temporary files, and is returned.
pub fn start(specs: &[LoadSpec]) -> Result<RunningLoads, LoadError> {
    validate(specs)?;
    let shared = Arc::new(Shared::default());
    // From here on, an early return drops `running`, which stops and joins every
    // worker spawned so far and then removes the temporary directories.
    let mut running = RunningLoads {
        shared: shared.clone(),
        loads: Vec::with_capacity(specs.len()),
        started: None,
        stopped: false,
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut expected = 0;
    for spec in specs {
        let plan = match spec.kind {
            LoadKind::Cpu => cpu::plan(&spec.cpus),
            LoadKind::Disk => disk::plan(&spec.cpus)?,
            LoadKind::Net => net::plan(&spec.cpus)?,
            LoadKind::Syscall => syscall::plan(&spec.cpus),
            LoadKind::Cachemiss => cachemiss::plan(&spec.cpus),
            LoadKind::Membw => membw::plan(&spec.cpus),
        };
        let mut load = Load {
            kind: spec.kind,
            cpus: spec.cpus.clone(),
            workers: Vec::with_capacity(plan.jobs.len()),
            scratch: plan.scratch,
        };
        for job in plan.jobs {
            let cpu = job.cpu;
            let spawned = spawn(spec.kind, job, shared.clone(), ready_tx.clone());
            match spawned {
                Ok(handle) => {
                    load.workers.push(WorkerHandle { cpu, handle });
                    expected += 1;
                }
                Err(source) => {
                    running.loads.push(load);
                    return Err(LoadError::Spawn {
                        kind: spec.kind,
                        cpu,
                        source,
                    });
                }
            }
        }
        running.loads.push(load);
    }
    drop(ready_tx);
    for _ in 0..expected {
        // Every worker sends exactly one message (its `ReadySignal` sends on drop when
        // the worker failed or panicked before it was ready), so this cannot hang.
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvError) => break,
        }
    }
    running.started = Some(monotonic_now());
    shared.open_gate();
    Ok(running)
}

/// Loads that are running. [`stop`](RunningLoads::stop) them to get their reports;
/// dropping them also stops and joins every worker and removes temporary files, so an
/// early return or a panic leaves nothing behind.
#[derive(Debug)]
pub struct RunningLoads {
    pub(super) shared: Arc<Shared>,
    pub(super) loads: Vec<Load>,
    pub(super) started: Option<Nanos>,
    pub(super) stopped: bool,
}

impl RunningLoads {
    /// Stops every worker, waits for them, removes temporary files, and reports, one
    /// report per spec, in the order given to [`start`].
    pub fn stop(mut self) -> Vec<LoadReport> {
        self.shutdown()
    }

    /// The temporary directories the disk loads write in (removed when stopped).
    pub fn scratch_dirs(&self) -> Vec<PathBuf> {
        self.loads
            .iter()
            .filter_map(|l| l.scratch.as_ref().map(|s| s.path().to_path_buf()))
            .collect()
    }

    /// Worker threads running, over all loads.
    pub fn workers(&self) -> usize {
        self.loads.iter().map(|l| l.workers.len()).sum()
    }

    pub(super) fn shutdown(&mut self) -> Vec<LoadReport> {
        if self.stopped {
            return Vec::new();
        }
        self.stopped = true;
        let end = monotonic_now();
        self.shared.request_stop();
        let duration = self.started.map_or(Nanos::ZERO, |s| end.saturating_sub(s));
        // Join every worker of every load before removing any directory.
        let joined: Vec<Vec<(usize, thread::Result<Outcome>)>> = self
            .loads
            .iter_mut()
            .map(|load| {
                load.workers
                    .drain(..)
                    .map(|w| (w.cpu, w.handle.join()))
                    .collect()
            })
            .collect();
        self.loads
            .iter_mut()
            .zip(joined)
            .map(|(load, outcomes)| load.report(duration, outcomes))
            .collect()
    }
}

impl Drop for RunningLoads {
    fn drop(&mut self) {
        // Runs before the fields are dropped: threads are joined first, then the
        // scratch directories (fields of `loads`) are removed.
        let _ = self.shutdown();
    }
}

/// One running load.
#[derive(Debug)]
pub(super) struct Load {
    pub(super) kind: LoadKind,
    pub(super) cpus: CpuSet,
    pub(super) workers: Vec<WorkerHandle>,
    pub(super) scratch: Option<ScratchDir>,
}

impl Load {
    pub(super) fn report(
        &mut self,
        duration: Nanos,
        outcomes: Vec<(usize, thread::Result<Outcome>)>,
    ) -> LoadReport {
        let mut report = LoadReport {
            kind: self.kind,
            cpus: self.cpus.clone(),
            workers: outcomes.len(),
            duration_ns: duration.as_u64(),
            cpu_time_ns: 0,
            metrics: BTreeMap::new(),
            errors: Vec::new(),
        };
        for (cpu, outcome) in outcomes {
            let outcome = match outcome {
                Ok(o) => o,
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    report
                        .errors
                        .push(format!("the worker on CPU {cpu} panicked: {why}"));
                    continue;
                }
            };
            report.cpu_time_ns += outcome.cpu_time.as_u64();
            let secs = outcome.elapsed.as_secs_f64();
            if secs > 0.0 {
                for (name, count) in &outcome.tally.counts {
                    *report.metrics.entry(format!("{name}_per_s")).or_default() +=
                        *count as f64 / secs;
                }
            }
            for (name, value) in &outcome.tally.sizes {
                let slot = report.metrics.entry((*name).to_string()).or_default();
                *slot = slot.max(*value as f64);
            }
            if let Some(e) = outcome.tally.error {
                report.errors.push(format!("worker on CPU {cpu}: {e}"));
            }
        }
        if let Some(scratch) = self.scratch.take()
            && let Err(e) = scratch.remove()
        {
            report.errors.push(e.to_string());
        }
        report
    }
}

#[derive(Debug)]
pub(super) struct WorkerHandle {
    pub(super) cpu: usize,
    pub(super) handle: JoinHandle<Outcome>,
}

pub(super) fn spawn(
    kind: LoadKind,
    job: Job,
    shared: Arc<Shared>,
    tx: Sender<Result<(), LoadError>>,
) -> io::Result<JoinHandle<Outcome>> {
    let Job { cpu, name, work } = job;
    thread::Builder::new().name(name).spawn(move || {
        let signal = ReadySignal {
            kind,
            cpu,
            tx,
            sent: Cell::new(false),
        };
        let worker = Worker {
            shared: &shared,
            signal: &signal,
            began: Cell::new(None),
        };
        let result = prepare_thread(cpu).and_then(|()| work(&worker));
        let ended = (monotonic_now(), thread_cpu_time());
        let tally = match (result, worker.began.get()) {
            (Ok(tally), _) => tally,
            (Err(e), None) => {
                signal.send(Err(e));
                Tally::default()
            }
            // Failed after the start: the report says why.
            (Err(e), Some(_)) => Tally::default().error(Some(e.to_string())),
        };
        let (elapsed, cpu_time) = worker.began.get().map_or((Nanos::ZERO, Nanos::ZERO), |b| {
            (ended.0.saturating_sub(b.0), ended.1.saturating_sub(b.1))
        });
        Outcome {
            elapsed,
            cpu_time,
            tally,
        }
    })
}

/// Pins the calling worker to `cpu` and makes sure it is not real-time (a thread
/// inherits its creator's policy).
pub(super) fn prepare_thread(cpu: usize) -> Result<(), LoadStartError> {
    sched::set_affinity(&CpuSet::from_cpus([cpu])).map_err(LoadStartError::Pin)?;
    if sched::current_policy().is_ok_and(|p| p.is_realtime()) {
        sched::set_policy(Policy::Other { nice: 0 }).map_err(LoadStartError::Policy)?;
    }
    Ok(())
}
