//! The sampler thread: each task's state and CPU every period, from `/proc`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use ictus_core::{CpuSet, Nanos};
use ictus_os::sched::{self, Policy};
use ictus_os::{clock, thread_time};

use super::result::{SamplerInfo, Timeline};
use super::shared::Shared;
use super::timeline::{MAX_BUCKETS, TimelineSums, coarsen};

/// What the sampler thread needs.
pub(super) struct SamplerCtx {
    pub(super) tids: Vec<i32>,
    pub(super) groups: Vec<usize>,
    pub(super) group_names: Vec<String>,
    pub(super) cpus: Vec<usize>,
    pub(super) nrt: CpuSet,
    pub(super) period: Duration,
    pub(super) bucket: Duration,
    pub(super) shared: Arc<Shared>,
    /// Told once the sampler has raised itself: the gate must not open before, or
    /// real-time tasks would starve it before it could.
    pub(super) ready: mpsc::Sender<()>,
}

/// What the sampler saw of one task.
#[derive(Debug, Clone, Default)]
pub(super) struct TaskSamples {
    pub(super) samples: u64,
    pub(super) running: u64,
    pub(super) changes: u64,
    pub(super) per_cpu: Vec<u64>,
}

/// What the sampler returns.
#[derive(Debug, Default)]
pub(super) struct Sampled {
    pub(super) info: SamplerInfo,
    pub(super) per_task: Vec<TaskSamples>,
    pub(super) timeline: Timeline,
}

/// The state (field 3) and the CPU last run on (field 39) from a `stat` line.
pub(super) fn parse_stat(line: &[u8]) -> Option<(u8, usize)> {
    ictus_os::procstat::TaskStat::parse(line).map(|t| (t.state, t.processor))
}

pub(super) fn sampler_main(ctx: SamplerCtx) -> Sampled {
    let _ = sched::set_affinity(&ctx.nrt);
    let policy = match sched::set_policy(Policy::Fifo { priority: 99 }) {
        Ok(()) => "fifo 99".to_string(),
        Err(_) => sched::current_policy().map_or_else(|_| "other".into(), |p| p.to_string()),
    };
    let mut reader = TaskReader::open(&ctx.tids, &ctx.cpus);
    let mut counts = vec![vec![0u32; ctx.group_names.len()]; ctx.cpus.len()];
    let bucket_ns = ctx.bucket.as_nanos().max(1) as u64;
    let period = ctx.period.as_nanos().max(1) as u64;
    let mut timeline = TimelineSums::new(ctx.cpus.len(), ctx.group_names.len(), bucket_ns);
    let mut info = SamplerInfo {
        period_ns: period,
        policy,
        cpus: ctx.nrt.clone(),
        ..SamplerInfo::default()
    };
    let cpu_before = thread_time::thread_cpu_time();
    let _ = ctx.ready.send(());
    drop(ctx.ready);
    ctx.shared.wait_gate();
    if ctx.shared.abort.is_raised() {
        return Sampled {
            info,
            per_task: reader.per_task,
            timeline: Timeline::default(),
        };
    }
    let start = ctx.shared.start();
    let mut next = start;
    // Each sleep ends at the next period or when the coordinator says the run is
    // over, whichever comes first: a long period never holds up the end.
    while !ctx.shared.sampling_over.sleep_until(Nanos::new(next)) {
        let now = clock::monotonic_now().as_u64();
        let late = now.saturating_sub(next) / period;
        info.missed += late;
        next += (late + 1) * period;
        let t = now.saturating_sub(start);
        timeline.move_to(t);
        for row in counts.iter_mut() {
            row.fill(0);
        }
        let live = reader.sample(&ctx.shared, &ctx.groups, &mut counts);
        if live == 0 && t > 0 && ctx.shared.done.iter().all(|d| d.load(Ordering::Acquire)) {
            break;
        }
        timeline.add(&counts);
        info.samples += 1;
    }
    timeline.flush();
    info.cpu_time_ns = thread_time::thread_cpu_time()
        .saturating_sub(cpu_before)
        .as_u64();
    let mut timeline = Timeline {
        bucket_ns,
        cpus: ctx.cpus.clone(),
        groups: ctx.group_names.clone(),
        buckets: timeline.buckets,
    };
    coarsen(&mut timeline, MAX_BUCKETS);
    Sampled {
        info,
        per_task: reader.per_task,
        timeline,
    }
}

/// The sampler's view of the tasks: each one's stat file, opened once before the
/// start, and what was seen of it so far.
pub(super) struct TaskReader {
    /// Per task; closed once it has ended or cannot be read.
    pub(super) files: Vec<Option<File>>,
    pub(super) per_task: Vec<TaskSamples>,
    pub(super) last_cpu: Vec<Option<usize>>,
    /// A CPU's place among the CPUs in play, by CPU number.
    pub(super) pos: Vec<Option<usize>>,
    pub(super) buf: [u8; 1024],
}

impl TaskReader {
    /// Opens the stat files of `tids`, counting their running samples on `cpus`.
    pub(super) fn open(tids: &[i32], cpus: &[usize]) -> TaskReader {
        let max_cpu = cpus.iter().copied().max().unwrap_or(0);
        let mut pos = vec![None; max_cpu + 1];
        for (i, &c) in cpus.iter().enumerate() {
            pos[c] = Some(i);
        }
        TaskReader {
            files: tids
                .iter()
                .map(|tid| File::open(format!("/proc/self/task/{tid}/stat")).ok())
                .collect(),
            per_task: vec![
                TaskSamples {
                    per_cpu: vec![0; cpus.len()],
                    ..TaskSamples::default()
                };
                tids.len()
            ],
            last_cpu: vec![None; tids.len()],
            pos,
            buf: [0u8; 1024],
        }
    }

    /// One sample of every task still running: its state and CPU, counted per task
    /// and, when running, in `counts[cpu][group]` (`groups` gives each task's group).
    /// Returns how many tasks could be read.
    pub(super) fn sample(
        &mut self,
        shared: &Shared,
        groups: &[usize],
        counts: &mut [Vec<u32>],
    ) -> usize {
        let mut live = 0;
        for k in 0..self.files.len() {
            // Acquire: pairs with the task's Release store at its end.
            if shared.done[k].load(Ordering::Acquire) {
                self.files[k] = None;
                continue;
            }
            let Some(f) = &self.files[k] else { continue };
            let got = f.read_at(&mut self.buf, 0).ok().filter(|&len| len > 0);
            let Some((state, cpu)) = got.and_then(|len| parse_stat(&self.buf[..len])) else {
                self.files[k] = None;
                continue;
            };
            live += 1;
            let s = &mut self.per_task[k];
            s.samples += 1;
            if self.last_cpu[k].is_some_and(|c| c != cpu) {
                s.changes += 1;
            }
            self.last_cpu[k] = Some(cpu);
            if state == b'R' {
                s.running += 1;
                if let Some(Some(p)) = self.pos.get(cpu) {
                    s.per_cpu[*p] += 1;
                    counts[*p][groups[k]] += 1;
                }
            }
        }
        live
    }
}
