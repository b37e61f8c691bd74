//! `survey`: the main job. A campaign of probes over a matrix of configurations
//! (scheduling class x load), ending in a results directory that `ictus-report`
//! renders: the plan (which probe, in which configuration, for how long), the
//! runner (each record written as it completes, the manifest after every step), and
//! the verdict against the target loop.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts;
use ictus_os::pm_qos::PmQos;
use ictus_os::sched::Policy;
use thiserror::Error;

use crate::probe::Probe;
use crate::progress::Progress;
use crate::record::RunRecord;
use crate::setup::{Length, SchedSpec};
use crate::{compute, jitter, r#loop, memlat, pingpong, rendezvous, throughput, timer};

mod manifest;
mod verdict;
pub use manifest::{
    Class, DOCTOR_FILE, LoadCase, MANIFEST_FILE, MANIFEST_SCHEMA, MANIFEST_VERSION, Manifest,
    Profile, Step, StepStatus, Target, Verdict,
};
use serde::Serialize;
pub use verdict::verdict;

/// What one step runs: a probe's parameters.
type Action = Arc<dyn Probe>;

/// One planned step: what it is, what it runs, how long it should take.
#[derive(Clone, Debug)]
pub struct PlannedStep {
    step: Step,
    action: Option<Action>,
    estimate: Duration,
    /// Where its loads run (the system CPU when shielded).
    load_cpus: CpuSet,
    /// Where it measures.
    cpus: CpuSet,
}

impl PlannedStep {
    /// The step as the manifest will list it.
    pub fn step(&self) -> &Step {
        &self.step
    }
    /// Its expected duration.
    pub fn estimate(&self) -> Duration {
        self.estimate
    }
}

/// The survey's options.
#[derive(Clone, Debug)]
pub struct SurveyOptions {
    /// How long.
    pub profile: Profile,
    /// The loop the verdict is about.
    pub target: Target,
    /// CPUs the survey measures on (and loads).
    pub cpus: CpuSet,
    /// Whether the shielded configuration is tried.
    pub shield: ShieldAccess,
}

impl Default for SurveyOptions {
    /// Quick, seed 000's gesture loop, every online CPU.
    fn default() -> Self {
        SurveyOptions {
            profile: Profile::Quick,
            target: Target::default(),
            cpus: facts::online_cpus(),
            shield: ShieldAccess::Unavailable(
                "the shield is driven by `ictus survey` (ictus-shield), not by the library \
                 alone"
                    .into(),
            ),
        }
    }
}

/// Why a survey could not run.
#[derive(Debug, Error)]
pub enum SurveyError {
    /// The results directory could not be written.
    #[error(transparent)]
    Write(#[from] ictus_os::fs::OutputError),
    /// No CPU.
    #[error("no CPU to measure on")]
    NoCpu,
    /// The target cannot be planned on this machine.
    #[error("the target asks for {cores} cores; {cpus} CPUs are selected")]
    TargetCores {
        /// Asked.
        cores: usize,
        /// Available.
        cpus: usize,
    },
}

/// A profile's run lengths, in tenths of the quick profile's.
fn scale(p: Profile) -> u64 {
    match p {
        Profile::Smoke => 1,
        Profile::Quick => 10,
        Profile::Standard => 50,
        Profile::Full => 300,
    }
}

/// Whether this process may use SCHED_FIFO; the reason when not.
fn fifo_refusal() -> Option<String> {
    match facts::try_sched_fifo() {
        facts::Attempt::Succeeded => None,
        facts::Attempt::Failed { error, .. } => Some(format!(
            "SCHED_FIFO refused ({error}); see `ictus doctor` for the fix"
        )),
    }
}

/// Where the shielded configuration puts things: seed 000's principle, one system CPU
/// (the first of the survey's CPUs: it keeps the machine's tasks, IRQs and the loads)
/// and the others shielded for the measuring threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShieldSplit {
    /// The shielded (RT) CPUs.
    pub rt: CpuSet,
    /// The system CPU.
    pub system: CpuSet,
}

impl ShieldSplit {
    /// The split of `cpus`, when it has two CPUs or more.
    pub fn of(cpus: &CpuSet) -> Option<ShieldSplit> {
        let (first, rest) = cpus.cpus().split_first()?;
        (!rest.is_empty()).then(|| ShieldSplit {
            rt: CpuSet::from_cpus(rest.iter().copied()),
            system: CpuSet::from_cpus([*first]),
        })
    }
}

/// Applies and undoes the shield for the survey's shielded configuration. The survey
/// knows nothing of cpusets: the CLI implements this with `ictus-shield`'s
/// `survey::SurveyShield` (its own journal, its exact reset).
pub trait ShieldDriver: Send + Sync + std::fmt::Debug {
    /// Applies a shield whose RT CPUs are `split.rt` (the rest of the machine NRT) and
    /// lets this process place its threads on either side by affinity. `Err`: why not.
    fn apply(&self, split: &ShieldSplit) -> Result<String, String>;
    /// Undoes it exactly. `Ok`: what was restored; `Err`: what could not be (the
    /// journal is kept, and says how to finish).
    fn reset(&self) -> Result<String, String>;
}

/// Whether the survey may try the shielded configuration.
#[derive(Clone, Debug)]
pub enum ShieldAccess {
    /// Through this driver.
    Driver(Arc<dyn ShieldDriver>),
    /// Not, for this reason (with the fix).
    Unavailable(String),
}

fn sched(class: Class, cpus: &CpuSet, pin_always: bool) -> SchedSpec {
    match class {
        Class::NormalUnpinned => SchedSpec {
            cpus: cpus.clone(),
            pin: pin_always,
            policy: Policy::Other { nice: 0 },
            mlock: false,
            pm_qos: Default::default(),
            explain: true,
            explain_threshold: None,
        },
        Class::RtPinned | Class::Shielded => SchedSpec {
            cpus: cpus.clone(),
            pin: true,
            policy: Policy::Fifo { priority: 95 },
            mlock: true,
            pm_qos: Default::default(),
            explain: true,
            explain_threshold: None,
        },
    }
}

/// The plan under way: the steps so far and what decides whether one can run.
struct Planner<'a> {
    opts: &'a SurveyOptions,
    /// Why SCHED_FIFO is refused, if it is.
    fifo: Option<String>,
    /// The shielded configuration's CPUs, or why it is not tried.
    shield: Result<ShieldSplit, String>,
    steps: Vec<PlannedStep>,
}

impl Planner<'_> {
    /// The CPUs a class measures on, and those its loads run on.
    fn cpus(&self, class: Class) -> (CpuSet, CpuSet) {
        match (class, &self.shield) {
            (Class::Shielded, Ok(split)) => (split.rt.clone(), split.system.clone()),
            _ => (self.opts.cpus.clone(), self.opts.cpus.clone()),
        }
    }

    /// Adds a step of the probe `action` runs; `skip` (or the class's own refusal)
    /// plans it as skipped.
    fn push(
        &mut self,
        class: Class,
        load: LoadCase,
        action: Action,
        estimate: Duration,
        skip: Option<String>,
    ) {
        let probe = action.name();
        let id = format!("{probe}-{}-{}", class.name(), load.name());
        let refusal = skip.or_else(|| match class {
            Class::Shielded => self
                .shield
                .as_ref()
                .err()
                .cloned()
                .or_else(|| self.fifo.clone()),
            Class::RtPinned => self.fifo.clone(),
            Class::NormalUnpinned => None,
        });
        let (status, reason, action) = match refusal {
            Some(r) => (StepStatus::Skipped, Some(r), None),
            None => (StepStatus::NotRun, None, Some(action)),
        };
        let (cpus, load_cpus) = self.cpus(class);
        self.steps.push(PlannedStep {
            step: Step {
                id,
                probe: probe.name().to_string(),
                class,
                load,
                status,
                file: None,
                reason,
                cpus: None,
                irqs: None,
                pm_qos: None,
            },
            estimate: if action.is_some() {
                estimate
            } else {
                Duration::ZERO
            },
            action,
            load_cpus,
            cpus,
        });
    }

    /// Adds the idle step of `action`'s probe in `class` with the CPU latency QoS off
    /// (its id ends in `-qos-off`), beside the default one that holds it.
    fn push_qos_off(
        &mut self,
        class: Class,
        action: Action,
        estimate: Duration,
        skip: Option<String>,
    ) {
        self.push(class, LoadCase::Idle, action, estimate, skip);
        if let Some(last) = self.steps.last_mut() {
            last.step.id.push_str("-qos-off");
            last.step.pm_qos = Some(PmQos::Off);
        }
    }

    /// Timer, pingpong and jitter over every class and load.
    fn matrix(&mut self, k: u64) {
        let timer_len = match self.opts.profile {
            Profile::Full => (Nanos::from_micros(100), Nanos::from_secs(100)),
            _ => (Nanos::from_millis(1), Nanos::from_millis(2_000 * k / 10)),
        };
        for class in [Class::RtPinned, Class::NormalUnpinned, Class::Shielded] {
            let (cpus, _) = self.cpus(class);
            let last = CpuSet::from_cpus(cpus.cpus().last().copied());
            for load in LoadCase::matrix() {
                let s = sched(class, &cpus, false);
                let t = timer::TimerParams {
                    interval: timer_len.0,
                    length: Length::Duration(timer_len.1),
                    sched: SchedSpec {
                        cpus: if class == Class::NormalUnpinned {
                            last.clone()
                        } else {
                            cpus.clone()
                        },
                        pm_qos: Default::default(),
                        explain: true,
                        explain_threshold: None,
                        ..s.clone()
                    },
                    mode: timer::ModeRequest::Nanosleep,
                    warmup: Nanos::from_millis(100),
                };
                let estimate = Duration::from(timer_len.1) + Duration::from_millis(400);
                if class != Class::NormalUnpinned && load == LoadCase::Idle {
                    // The same, the CPU latency QoS off: what holding it gains here.
                    let off = timer::TimerParams {
                        sched: SchedSpec {
                            pm_qos: PmQos::Off,
                            ..t.sched.clone()
                        },
                        ..t.clone()
                    };
                    self.push(class, load.clone(), Arc::new(t), estimate, None);
                    self.push_qos_off(class, Arc::new(off), estimate, None);
                } else {
                    self.push(class, load.clone(), Arc::new(t), estimate, None);
                }
                let mut placements = vec![crate::setup::Placement::SameCpu];
                if cpus.len() >= 2 {
                    placements.push(crate::setup::Placement::CrossCpu);
                }
                let point = Nanos::from_millis(500 * k / 10);
                let p = pingpong::PingpongParams {
                    primitives: vec![pingpong::Primitive::Futex],
                    placements: placements.clone(),
                    length: Length::Duration(point),
                    warmup: Nanos::from_millis(50),
                    sched: SchedSpec {
                        cpus: cpus.clone(),
                        pin: true,
                        pm_qos: Default::default(),
                        ..s.clone()
                    },
                    cpu_load: false,
                };
                let estimate =
                    Duration::from(point) * placements.len() as u32 + Duration::from_millis(400);
                self.push(class, load.clone(), Arc::new(p), estimate, None);
                let j = jitter::JitterParams {
                    sched: SchedSpec {
                        cpus: last.clone(),
                        pin: class != Class::NormalUnpinned,
                        ..s.clone()
                    },
                    routine: jitter::Routine::Divisions {
                        divisions: 1_000_000,
                    },
                    runs: 300 * k / 10,
                    warmup_runs: 5,
                };
                let estimate = Duration::from_millis(3 * 300 * k / 10) + Duration::from_millis(400);
                self.push(class, load, Arc::new(j), estimate, None);
            }
        }
    }

    /// The class the single-configuration probes run in: real-time where allowed.
    fn rt_or_normal(&self) -> Class {
        if self.fifo.is_some() {
            Class::NormalUnpinned
        } else {
            Class::RtPinned
        }
    }

    /// Memlat, compute, throughput and rendezvous, idle.
    fn idle_probes(&mut self, k: u64) {
        let cpus = self.opts.cpus.clone();
        let last = CpuSet::from_cpus(cpus.cpus().last().copied());
        let quick = self.opts.profile == Profile::Quick;
        let class = self.rt_or_normal();
        let m = memlat::MemlatParams {
            sizes: match self.opts.profile {
                Profile::Smoke => vec![4 << 10, 64 << 10],
                Profile::Quick => vec![4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20],
                _ => memlat::default_sizes(),
            },
            strides: match self.opts.profile {
                Profile::Quick | Profile::Smoke => vec![4, 64],
                _ => vec![4, 44, 64, 4096],
            },
            mode: memlat::Mode::All,
            threads: 1,
            pages: memlat::PageSize::Base,
            repeat: if quick { 3 } else { 5 },
            point_time: Nanos::from_millis(if quick { 5 } else { 20 }),
            sched: SchedSpec {
                cpus: last,
                ..sched(class, &cpus, true)
            },
        };
        let estimate = Duration::from_secs(if quick { 8 } else { 25 });
        self.push(class, LoadCase::Idle, Arc::new(m), estimate, None);
        let c = compute::ComputeParams {
            sched: sched(class, &cpus, true),
            sizes: vec![11, 101, 1_001, 10_001, 100_001, 1_000_001],
            split_modules: 100_001,
            threads: (1..=cpus.len()).collect(),
            point_time: Nanos::from_millis(100 * k / 10),
        };
        let points = (c.sizes.len() + c.threads.len()) as u32;
        let estimate = Duration::from_millis(100 * k / 10) * points + Duration::from_secs(1);
        self.push(class, LoadCase::Idle, Arc::new(c), estimate, None);
        let two_cpus = (cpus.len() < 2).then(|| "needs two CPUs".to_string());
        let t = throughput::ThroughputParams {
            sched: sched(Class::NormalUnpinned, &cpus, true),
            transports: throughput::Transport::ALL.to_vec(),
            placements: vec![
                crate::setup::Placement::CrossCpu,
                crate::setup::Placement::SameCpu,
            ],
            mode: throughput::Pacing::Sync,
            sizes: vec![0, 64, 1024, 4096, 32768],
            length: Length::Duration(Nanos::from_millis((20 * k / 10).max(1))),
            warmup: Nanos::from_millis(5),
            round_trips: 200_000,
        };
        let estimate = Duration::from_millis(20 * k / 10 * 4 * 2 * 5) + Duration::from_secs(2);
        let normal = Class::NormalUnpinned;
        self.push(
            normal,
            LoadCase::Idle,
            Arc::new(t),
            estimate,
            two_cpus.clone(),
        );
        let r = rendezvous::RendezvousParams {
            sched: sched(Class::NormalUnpinned, &cpus, true),
            threads: (2..=cpus.len().min(4)).collect(),
            spacings: vec![
                rendezvous::Spacing::SameLine,
                rendezvous::Spacing::Adjacent,
                rendezvous::Spacing::Bytes(5000),
            ],
            payloads: vec![0, 512],
            steps: 200_000 * k / 10,
            timed_steps: 50_000 * k / 10,
            round_trips: 500_000,
        };
        let estimate = Duration::from_millis(300 * k);
        self.push(normal, LoadCase::Idle, Arc::new(r), estimate, two_cpus);
    }

    /// The target loop: real-time, normal and shielded, idle and under every load;
    /// then the highest frequency.
    fn loops(&mut self, k: u64) {
        let target = self.opts.target;
        let cores = target.cores;
        let loop_steps = 20_000 * k / 10;
        for class in [Class::RtPinned, Class::NormalUnpinned, Class::Shielded] {
            let (cpus, _) = self.cpus(class);
            // Shielded, each thread needs an RT CPU of its own (seed 000: one process each).
            let short = (class == Class::Shielded && self.shield.is_ok() && cpus.len() < cores)
                .then(|| {
                    format!(
                        "the target loop needs {cores} cores; the shield leaves {} RT CPU(s) \
                         here (one CPU stays the system's): `--cores {}` tries it on them",
                        cpus.len(),
                        cpus.len()
                    )
                });
            for load in [LoadCase::Idle, LoadCase::All] {
                let l = r#loop::LoopParams {
                    sched: sched(class, &cpus, true),
                    threads: cores,
                    frequency_hz: target.frequency_hz,
                    modules: 1_001,
                    exchange_bytes: target.exchange_bytes,
                    steps: loop_steps,
                    margin: None,
                    find_max: None,
                    trace: None,
                };
                let secs = loop_steps as f64 / target.frequency_hz;
                let estimate = Duration::from_secs_f64(secs + 0.6);
                let off = (class != Class::NormalUnpinned && load == LoadCase::Idle).then(|| {
                    let mut off = l.clone();
                    off.sched.pm_qos = PmQos::Off;
                    off
                });
                self.push(class, load, Arc::new(l), estimate, short.clone());
                if let Some(off) = off {
                    self.push_qos_off(class, Arc::new(off), estimate, short.clone());
                }
            }
        }
        let class = self.rt_or_normal();
        let find = r#loop::LoopParams {
            sched: sched(class, &self.opts.cpus, true),
            threads: cores,
            frequency_hz: target.frequency_hz,
            modules: 1_001,
            exchange_bytes: target.exchange_bytes,
            steps: 10_000 * k / 10,
            margin: None,
            find_max: Some(r#loop::FindMax {
                max_trial: Nanos::from_millis(100 * k),
                floor_hz: if self.opts.profile == Profile::Smoke {
                    1_000.0
                } else {
                    100.0
                },
                ..r#loop::FindMax::default()
            }),
            trace: None,
        };
        self.push(
            class,
            LoadCase::Idle,
            Arc::new(find),
            Duration::from_secs(k),
            None,
        );
        // The last step's id says what it is.
        if let Some(last) = self.steps.last_mut() {
            last.step.id = format!("loop-find-max-{}-idle", class.name());
        }
    }
}

/// The steps of a survey, in order, before any runs.
pub fn plan(opts: &SurveyOptions) -> Result<Vec<PlannedStep>, SurveyError> {
    if opts.cpus.is_empty() {
        return Err(SurveyError::NoCpu);
    }
    if opts.target.cores > opts.cpus.len() {
        return Err(SurveyError::TargetCores {
            cores: opts.target.cores,
            cpus: opts.cpus.len(),
        });
    }
    let shield = match (&opts.shield, ShieldSplit::of(&opts.cpus)) {
        (ShieldAccess::Unavailable(why), _) => Err(why.clone()),
        (ShieldAccess::Driver(_), None) => {
            Err("needs two CPUs: one for the system, one or more shielded".to_string())
        }
        (ShieldAccess::Driver(_), Some(split)) => Ok(split),
    };
    let mut planner = Planner {
        opts,
        fifo: fifo_refusal(),
        shield,
        steps: Vec::new(),
    };
    let k = scale(opts.profile);
    planner.matrix(k);
    planner.idle_probes(k);
    planner.loops(k);
    Ok(planner.steps)
}

/// Runs one action under its loads; returns the record.
fn execute(
    action: &Action,
    load: &LoadCase,
    load_cpus: &CpuSet,
    argv: &[String],
    progress: &Progress,
) -> Result<RunRecord, String> {
    crate::load::under_loads(&load.specs(load_cpus), || {
        action.run(argv.to_vec(), progress)
    })
    .map_err(|e| e.to_string())
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), SurveyError> {
    let text = serde_json::to_string_pretty(value).expect("survey data serializes") + "\n";
    // Whole or not at all: a reader never sees half a file.
    Ok(ictus_os::fs::write_atomic(path, text)?)
}

/// Runs the planned steps into `dir` (which must exist), writing each record as it
/// completes and the manifest after every step, so a crash or Ctrl-C leaves a
/// consistent, incomplete directory. `progress` counts milliseconds of estimated
/// work; its label names the current step; a stop request ends the current probe
/// early (its record is kept, marked incomplete) and leaves the rest not run.
pub fn run(
    opts: &SurveyOptions,
    steps: Vec<PlannedStep>,
    dir: &Path,
    argv: Vec<String>,
    progress: &Progress,
) -> Result<Manifest, SurveyError> {
    let total: Duration = steps.iter().map(|s| s.estimate).sum();
    progress.set_total(total.as_millis() as u64);
    let mut manifest = Manifest {
        schema: MANIFEST_SCHEMA.into(),
        schema_version: MANIFEST_VERSION,
        complete: false,
        profile: opts.profile,
        target: opts.target,
        provenance: crate::provenance::Provenance::capture(argv.clone()),
        steps: steps.iter().map(|s| s.step.clone()).collect(),
        verdict: None,
        shield: Vec::new(),
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    write_json(&manifest_path, &manifest)?;
    write_json(&dir.join(DOCTOR_FILE), &crate::doctor::audit())?;

    let mut done_ms = 0u64;
    let mut shield = Shielding::new(opts);
    for (i, planned) in steps.iter().enumerate() {
        let Some(action) = &planned.action else {
            continue;
        };
        if progress.stop_requested() {
            break;
        }
        // The shield is applied for a run of shielded steps and reset after it.
        let shielded = planned.step.class == Class::Shielded;
        if let Err(why) = shield.set(shielded, &mut manifest.shield) {
            let step = &mut manifest.steps[i];
            step.status = StepStatus::Skipped;
            step.reason = Some(why);
            write_json(&manifest_path, &manifest)?;
            continue;
        }
        progress.set_label(&planned.step.id);
        let inner = Progress::new();
        let finished = AtomicBool::new(false);
        let irqs_before = ictus_os::procstat::interrupts().ok();
        let estimate_ms = planned.estimate.as_millis() as u64;
        let outcome = std::thread::scope(|s| {
            // Forwards a stop request to the step, and the step's progress to the
            // survey's, until the step finishes.
            s.spawn(|| {
                // Relaxed: a polling flag; the scope's join orders everything after.
                while !finished.load(Ordering::Relaxed) {
                    if progress.stop_requested() {
                        inner.request_stop();
                    }
                    let frac = if inner.total() > 0 {
                        (inner.done() as f64 / inner.total() as f64).min(1.0)
                    } else {
                        0.0
                    };
                    progress.set_done(done_ms + (frac * estimate_ms as f64) as u64);
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            let r = execute(
                action,
                &planned.step.load,
                &planned.load_cpus,
                &argv,
                &inner,
            );
            finished.store(true, Ordering::Relaxed);
            r
        });
        done_ms += estimate_ms;
        progress.set_done(done_ms);
        let step = &mut manifest.steps[i];
        step.cpus = Some(planned.cpus.to_string());
        step.irqs = irqs_before
            .zip(ictus_os::procstat::interrupts().ok())
            .map(|(a, b)| irqs_on(&a, &b, &planned.cpus));
        match outcome {
            Ok(record) => {
                let file = format!("{}.json", step.id);
                write_json(&dir.join(&file), &record)?;
                step.status = StepStatus::Done;
                step.file = Some(file);
                if !record.complete {
                    step.reason = Some("stopped early: the record covers what ran".into());
                }
            }
            Err(e) => {
                step.status = StepStatus::Failed;
                step.reason = Some(e);
            }
        }
        write_json(&manifest_path, &manifest)?;
    }
    // Also after Ctrl-C: the stop ended the step under way, the loop above, and here
    // the shield.
    let _ = shield.set(false, &mut manifest.shield);
    manifest.complete = !progress.stop_requested();
    manifest.provenance.finish();
    manifest.verdict = verdict(&manifest, dir);
    write_json(&manifest_path, &manifest)?;
    Ok(manifest)
}

/// The shield of the survey's shielded steps: applied when a run of them starts,
/// reset when it ends.
struct Shielding {
    driver: Option<(Arc<dyn ShieldDriver>, ShieldSplit)>,
    applied: bool,
    /// Why it could not be applied, once it could not (the later shielded steps are
    /// skipped for the same reason).
    failed: Option<String>,
}

impl Shielding {
    fn new(opts: &SurveyOptions) -> Shielding {
        let driver = match &opts.shield {
            ShieldAccess::Driver(d) => ShieldSplit::of(&opts.cpus).map(|s| (Arc::clone(d), s)),
            ShieldAccess::Unavailable(_) => None,
        };
        Shielding {
            driver,
            applied: false,
            failed: None,
        }
    }

    /// Makes the shield applied (`on`) or not, logging what it did; `Err` when a
    /// shielded step cannot run.
    fn set(&mut self, on: bool, log: &mut Vec<String>) -> Result<(), String> {
        if let Some(why) = self.failed.as_ref().filter(|_| on) {
            return Err(why.clone());
        }
        let Some((driver, split)) = &self.driver else {
            return if on {
                Err("the survey has no shield to apply".into())
            } else {
                Ok(())
            };
        };
        match (on, self.applied) {
            (true, false) => match driver.apply(split) {
                Ok(what) => {
                    self.applied = true;
                    log.push(format!("applied: {what}"));
                    Ok(())
                }
                Err(e) => {
                    let why = format!("the shield could not be applied: {e}");
                    log.push(why.clone());
                    self.failed = Some(why.clone());
                    Err(why)
                }
            },
            (false, true) => {
                self.applied = false;
                match driver.reset() {
                    Ok(what) => log.push(format!("reset: {what}")),
                    Err(e) => log.push(format!("reset left problems: {e}")),
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Interrupts the CPUs of `cpus` served between two readings.
fn irqs_on(before: &[(usize, u64)], after: &[(usize, u64)], cpus: &CpuSet) -> u64 {
    after
        .iter()
        .filter(|(cpu, _)| cpus.contains(*cpu))
        .map(|(cpu, n)| {
            let was = before.iter().find(|(c, _)| c == cpu).map_or(0, |(_, b)| *b);
            n.saturating_sub(was)
        })
        .sum()
}

/// The results directory's name: `HOST-YYYYMMDD-HHMMSS` under `root`.
pub fn results_dir(root: &Path) -> PathBuf {
    let host = facts::kernel().hostname;
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stamp: String = now
        .trim_end_matches('Z')
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .map(|c| if c == 'T' { '-' } else { c })
        .collect();
    root.join(format!("{host}-{stamp}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ProbeId;

    #[test]
    fn the_quick_plan_covers_the_matrix_and_ends_with_the_loop() {
        let sut = plan(&SurveyOptions::default()).unwrap();
        for probe in [ProbeId::Timer, ProbeId::Pingpong, ProbeId::Jitter] {
            let n = sut
                .iter()
                .filter(|s| s.step.probe == probe && s.step.pm_qos.is_none())
                .count();
            assert_eq!(n, 3 * 8, "{probe}: 3 classes x 8 load cases");
        }
        // The real-time classes, idle, again with the CPU latency QoS off.
        let off: Vec<&str> = sut
            .iter()
            .filter(|s| s.step.pm_qos == Some(PmQos::Off))
            .map(|s| s.step.id.as_str())
            .collect();
        assert_eq!(
            off,
            [
                "timer-rt-pinned-idle-qos-off",
                "timer-shielded-idle-qos-off",
                "loop-rt-pinned-idle-qos-off",
                "loop-shielded-idle-qos-off"
            ]
        );
        assert!(
            sut.iter()
                .filter(|s| s.step.class == Class::Shielded)
                .all(|s| s.step.status == StepStatus::Skipped && s.action.is_none())
        );
        assert!(sut.last().unwrap().step.id.starts_with("loop-find-max"));
        let ids: std::collections::BTreeSet<_> = sut.iter().map(|s| &s.step.id).collect();
        assert_eq!(
            ids.len(),
            sut.len(),
            "step ids are unique (they name files)"
        );
    }

    /// A shield that only counts what it is asked.
    #[derive(Debug, Default)]
    struct FakeShield {
        calls: std::sync::Mutex<Vec<String>>,
        refuse: bool,
    }

    impl ShieldDriver for FakeShield {
        fn apply(&self, split: &ShieldSplit) -> Result<String, String> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("apply {}", split.rt));
            if self.refuse {
                Err("no cpuset".into())
            } else {
                Ok(format!("RT CPUs {}", split.rt))
            }
        }
        fn reset(&self) -> Result<String, String> {
            self.calls.lock().unwrap().push("reset".into());
            Ok("3 value(s) restored".into())
        }
    }

    fn shielded_opts(cpus: &str, driver: Arc<FakeShield>) -> SurveyOptions {
        SurveyOptions {
            cpus: cpus.parse().unwrap(),
            shield: ShieldAccess::Driver(driver),
            ..SurveyOptions::default()
        }
    }

    #[test]
    fn with_a_shield_the_shielded_steps_measure_on_the_rt_cpus_and_load_the_system_cpu() {
        let opts = shielded_opts("0-3", Arc::new(FakeShield::default()));
        let sut = plan(&opts).unwrap();
        let shielded: Vec<&PlannedStep> = sut
            .iter()
            .filter(|s| s.step.class == Class::Shielded)
            .collect();
        assert!(!shielded.is_empty());
        for s in &shielded {
            if fifo_refusal().is_some() {
                assert_eq!(s.step.status, StepStatus::Skipped);
                continue;
            }
            assert_eq!(s.step.status, StepStatus::NotRun, "{}", s.step.id);
            assert_eq!(s.cpus.to_string(), "1-3", "{}", s.step.id);
            assert_eq!(s.load_cpus.to_string(), "0", "{}", s.step.id);
        }
        // Other classes measure and load on every CPU.
        let rt = sut
            .iter()
            .find(|s| s.step.id == "timer-rt-pinned-all-loads")
            .unwrap();
        assert_eq!(rt.load_cpus.to_string(), "0-3");
        // On two CPUs one is left shielded: a two-core loop cannot be shielded there.
        let two = plan(&shielded_opts("0-1", Arc::new(FakeShield::default()))).unwrap();
        let l = two
            .iter()
            .find(|s| s.step.id == "loop-shielded-idle")
            .unwrap();
        assert_eq!(l.step.status, StepStatus::Skipped);
        assert!(
            l.step.reason.as_ref().unwrap().contains("--cores 1"),
            "{:?}",
            l.step.reason
        );
        // Without root (the default options) every shielded step says why it was skipped.
        for s in plan(&SurveyOptions::default()).unwrap() {
            if s.step.class == Class::Shielded {
                assert_eq!(s.step.status, StepStatus::Skipped);
                assert!(s.step.reason.is_some());
            }
        }
    }

    #[test]
    fn the_shield_is_applied_for_a_run_of_shielded_steps_and_reset_after_it() {
        let driver = Arc::new(FakeShield::default());
        let opts = shielded_opts("0-1", Arc::clone(&driver));
        let mut sut = Shielding::new(&opts);
        let mut log = Vec::new();
        for on in [false, true, true, false, true, false, false] {
            sut.set(on, &mut log).unwrap();
        }
        assert_eq!(
            *driver.calls.lock().unwrap(),
            ["apply 1", "reset", "apply 1", "reset"]
        );
        assert_eq!(log.len(), 4);
        // A shield that cannot be applied skips every later shielded step, once asked.
        let refusing = Arc::new(FakeShield {
            refuse: true,
            ..FakeShield::default()
        });
        let mut sut = Shielding::new(&shielded_opts("0-1", Arc::clone(&refusing)));
        assert!(sut.set(true, &mut log).unwrap_err().contains("no cpuset"));
        assert!(sut.set(true, &mut log).is_err());
        sut.set(false, &mut log).unwrap();
        assert_eq!(*refusing.calls.lock().unwrap(), ["apply 1"]);
    }

    #[test]
    fn the_quick_profile_is_planned_for_about_three_minutes() {
        let total: Duration = plan(&SurveyOptions::default())
            .unwrap()
            .iter()
            .map(|s| s.estimate)
            .sum();
        assert!(total < Duration::from_secs(300), "{total:?}");
    }

    #[test]
    fn results_directories_are_named_by_host_and_time() {
        let sut = results_dir(Path::new("ictus-results"));
        let name = sut.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with(&facts::kernel().hostname));
        assert_eq!(name.rsplit('-').next().unwrap().len(), 6, "{name}");
    }
}
