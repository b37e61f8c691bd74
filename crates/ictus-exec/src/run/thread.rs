//! A subsystem's side of a run: placing its thread, `init`, waiting for the epoch,
//! its frames, its outcome. The same for a thread of the coordinator ([`super::run`])
//! and for a launched program ([`crate::child::run`]).

use ictus_class::{self as class, Class, ClassError, Options};
use ictus_core::{CpuSet, Nanos};
use ictus_explain::MissReporter;
use ictus_os::sched;

use crate::cell::Cells;
use crate::control::{Control, Status};
use crate::executive::{self, Ending, Fault, LoopEnd, OsBeat, Runner, Stats};
use crate::group::Group;
use crate::hub::Hubs;
use crate::report::{Distribution, RunWarning, ThreadOutcome, WarningId};
use crate::schedule::{Schedule, SubsystemSpec};
use crate::state::States;
use crate::subsystem::{BoxError, Maker, Registry, SetupClient};
use crate::tap::recorder::TapSetup;

/// The outcome of entering a class on the calling thread.
pub(crate) struct Placement {
    pub(crate) class_obtained: String,
    pub(crate) memory_locked: bool,
    pub(crate) warnings: Vec<RunWarning>,
}

/// Enters the subsystem's class on the calling thread; when a real-time policy is
/// refused, goes on as normal and says which privilege was missing. Then pins to the
/// subsystem's CPU.
pub(crate) fn place(spec: &SubsystemSpec) -> Placement {
    let mut warnings = Vec::new();
    let rt0 = matches!(spec.class, Class::Rt0 { .. });
    let mut options = Options {
        lock_memory: rt0,
        prefault_stack: true,
    };
    let mut obtained = spec.class.clone();
    let mut result = class::enter(spec.class.clone(), options, None);
    if let Err(ClassError::Memory(e)) = &result {
        warnings.push(RunWarning {
            id: WarningId::MlockRefused,
            message: format!("{}: memory is not locked ({e})", spec.name),
            advice: Some(e.advice.clone()),
        });
        options.lock_memory = false;
        result = class::enter(spec.class.clone(), options, None);
    }
    if let Err(e) = &result {
        let advice = match e {
            ClassError::Policy(sched::SchedError::Refused { advice, .. }) => Some(advice.clone()),
            _ => Some(
                "real-time classes need CAP_SYS_NICE (run as root, or grant it with \
                 `setcap cap_sys_nice+ep`, or raise RLIMIT_RTPRIO)"
                    .to_string(),
            ),
        };
        warnings.push(RunWarning {
            id: WarningId::PolicyRefused,
            message: format!(
                "{}: {} refused ({e}); it runs in the normal class",
                spec.name, spec.class
            ),
            advice,
        });
        obtained = Class::Normal;
        result = class::enter(Class::Normal, options, None);
    }
    let memory_locked = result.as_ref().is_ok_and(|e| e.memory_locked);
    if !rt0 && let Some(cpu) = spec.cpu {
        if let Err(e) = sched::set_affinity(&CpuSet::from_cpus([cpu])) {
            warnings.push(RunWarning {
                id: WarningId::AffinityRefused,
                message: format!("{}: not pinned to CPU {cpu} ({e})", spec.name),
                advice: None,
            });
        }
    } else if rt0
        && matches!(obtained, Class::Normal)
        && let Some(cpu) = spec.cpu
    {
        let _ = sched::set_affinity(&CpuSet::from_cpus([cpu]));
    }
    Placement {
        class_obtained: obtained.to_string(),
        memory_locked,
        warnings,
    }
}

/// The hybrid margin for `schedule` on the calling thread (calibrated if not given).
pub(crate) fn margin_for(schedule: &Schedule, tick: Nanos) -> Option<Nanos> {
    match schedule.wait {
        crate::schedule::WaitSpec::Hybrid { margin: Some(m) } => Some(m),
        crate::schedule::WaitSpec::Hybrid { margin: None } => {
            let samples = (100_000_000 / tick.as_u64().max(1)).clamp(20, 200);
            Some(ictus_os::wait::calibrate_margin(tick, samples).margin_ns)
        }
        _ => None,
    }
}

/// How long a subsystem waits for a cell held by a writer before it goes on with
/// its last coherent copy: half a tick, at most 1 ms.
pub(crate) fn patience(tick: Nanos) -> Nanos {
    Nanos::new(tick.as_u64() / 2).min(Nanos::from_millis(1))
}

/// Everything a subsystem thread or child needs to run its frames after `init`.
pub(crate) struct Prepared<'a> {
    pub(crate) schedule: &'a Schedule,
    pub(crate) spec: &'a SubsystemSpec,
    pub(crate) slot: usize,
    pub(crate) control: &'a Control,
    pub(crate) cells: Cells,
    pub(crate) states: &'a States,
    pub(crate) names: &'a [String],
    pub(crate) setup: SetupClient,
    pub(crate) hubs: Hubs,
    pub(crate) group: Option<&'a Group>,
    pub(crate) heartbeat_timeout: Option<Nanos>,
    /// The run's tap, when recorded or traced: its frames and cells are pushed.
    pub(crate) tap: Option<TapSetup>,
}

/// What a subsystem's thread (or program) hands back when its loop has ended.
pub(crate) struct Finish {
    /// Its figures.
    pub(crate) outcome: ThreadOutcome,
    /// The subsystem itself (for [`crate::program::Outcome::take`]).
    pub(crate) subsystem: Option<Box<dyn std::any::Any + Send>>,
    /// The first error its `run` returned, kept whole.
    pub(crate) first_error: Option<Fault>,
}

impl std::fmt::Debug for Finish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finish")
            .field("outcome", &self.outcome.subsystem)
            .field("first_error", &self.first_error)
            .finish_non_exhaustive()
    }
}

impl Prepared<'_> {
    /// Places the thread, makes the subsystem (its `init`), waits for the epoch,
    /// runs the frames (reporting each miss to `reporter`, attached once placed),
    /// shuts down. The slot follows each step; a failed `init` is returned as its
    /// error.
    pub(crate) fn run(
        &self,
        maker: Maker,
        mut reporter: Option<MissReporter>,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Finish, BoxError> {
        let slot = self.control.slot(self.slot);
        // However this thread ends, also by a panic, its group partners stop
        // waiting for it, and a panic shows in its slot at once.
        let _leave = Leave {
            group: self.group,
            control: self.control,
            slot: self.slot,
        };
        slot.set_ids(std::process::id(), sched::thread_id() as u64);
        slot.set_status(Status::Starting);
        let placement = place(self.spec);
        if let Some(r) = &reporter {
            r.attach();
        }
        let margin = margin_for(self.schedule, self.control.tick());
        let mode = self.schedule.wait.mode(margin.unwrap_or(Nanos::ZERO));
        let mut reg = Registry::new(
            self.slot,
            self.names,
            &self.spec.config,
            self.states,
            self.cells.clone(),
            self.control,
            self.setup.clone(),
            self.hubs.clone(),
        );
        let mut subsystem = match maker.make(&mut reg) {
            Ok(s) => s,
            Err(e) => {
                slot.set_status(Status::Failed);
                return Err(e);
            }
        };
        let registered = reg.finish();
        let mut ports = registered.ports;
        ports.set_patience(patience(self.control.tick()));
        let mut stats = Stats::default();
        ports.warm_up();
        // Tapped from the first frame on (the warm-up is not a frame).
        if let Some(t) = &self.tap {
            ports.set_tap(t.rings.writer(self.slot), t.recorded.clone(), t.every);
        }
        ictus_os::memory::prefault_stack();
        slot.set_status(Status::Ready);
        let Ending { end, first_error } = self.frames(
            registered.explicit_ack,
            subsystem.as_mut(),
            &mut ports,
            &mut stats,
            &OsBeat { mode },
            reporter.as_mut(),
            give_up,
        );
        let shutdown_error = subsystem
            .shut_down()
            .err()
            .map(|e| executive::error_chain(e.as_ref()));
        let outcome = self.outcome(
            placement,
            margin,
            &stats,
            end,
            first_error.as_ref(),
            ports.torn().count,
            shutdown_error,
        );
        slot.publish(&stats.counters);
        slot.set_status(Status::Finished);
        Ok(Finish {
            outcome,
            subsystem: subsystem.into_any(),
            first_error,
        })
    }

    /// Once the epoch is published (else aborted), runs the subsystem's frames on
    /// `beat`, each miss reported to `reporter`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the frame loop's parts, each named"
    )]
    fn frames(
        &self,
        explicit_ack: bool,
        subsystem: &mut dyn crate::subsystem::Driven,
        ports: &mut crate::subsystem::Ports,
        stats: &mut Stats,
        beat: &OsBeat,
        reporter: Option<&mut MissReporter>,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Ending {
        if !executive::wait_for_epoch(self.control, give_up) {
            return Ending {
                end: LoopEnd::Aborted,
                first_error: None,
            };
        }
        let runner = Runner {
            control: self.control,
            slot: self.slot,
            start: self.spec.start,
            period: self.spec.period,
            group: self.group,
            heartbeat_timeout: self.heartbeat_timeout,
            explicit_ack,
            on_error: self.spec.on_error,
        };
        runner.run_explained(beat, subsystem, ports, stats, reporter)
    }

    /// The figures of this thread, once its loop ended with `end`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the outcome's sources, each named"
    )]
    fn outcome(
        &self,
        placement: Placement,
        margin: Option<Nanos>,
        stats: &Stats,
        end: LoopEnd,
        first_error: Option<&Fault>,
        torn: u64,
        shutdown_error: Option<String>,
    ) -> ThreadOutcome {
        ThreadOutcome {
            subsystem: self.spec.name.clone(),
            pid: std::process::id(),
            tid: sched::thread_id() as u64,
            class_requested: self.spec.class.to_string(),
            class_obtained: placement.class_obtained,
            policy: sched::current_policy().map_or_else(|e| e.to_string(), |p| p.to_string()),
            affinity: sched::current_affinity().map_or_else(|e| e.to_string(), |c| c.to_string()),
            memory_locked: placement.memory_locked,
            hybrid_margin_ns: margin.map(Nanos::as_u64),
            frames_run: stats.counters.frames_run,
            overruns: stats.overruns.missed,
            longest_overrun_streak: stats.overruns.longest_run,
            jitter: Distribution::of(&stats.jitter),
            exec: Distribution::of(&stats.exec),
            end: end.name().to_string(),
            warnings: placement.warnings,
            torn,
            last_frame: (stats.counters.last_frame != u64::MAX)
                .then_some(stats.counters.last_frame),
            errors: stats.counters.errors,
            first_error: first_error.map(|f| (f.frame, f.message())),
            shutdown_error,
            explanation: None,
        }
    }
}

/// Leaves a subsystem thread's synchronous group when dropped, and marks its slot
/// failed when that happens while panicking.
struct Leave<'a> {
    group: Option<&'a Group>,
    control: &'a Control,
    slot: usize,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.group {
            g.leave();
        }
        if std::thread::panicking() {
            self.control.slot(self.slot).set_status(Status::Failed);
        }
    }
}
