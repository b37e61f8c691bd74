//! How to run: [`RunOptions`], the factory of in-process subsystems, and the
//! environment a launched program finds its run in.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::ctl;
use crate::link::Link;
use crate::live::LiveStatus;
use crate::schedule::SubsystemSpec;
use crate::subsystem::Maker;

/// A callback that receives the live status.
pub type StatusHook = Box<dyn FnMut(&LiveStatus) + Send>;

/// Says how to make the in-process subsystem of a schedule line, or why it cannot
/// be made here.
pub type Factory<'a> = dyn FnMut(&SubsystemSpec) -> Result<Maker, String> + 'a;

/// How to run.
pub struct RunOptions {
    /// Stop after this long (from the epoch); `None`: until stopped.
    pub duration: Option<Duration>,
    /// Set to stop the run (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Called with the live status every [`status_every`](Self::status_every).
    pub on_status: Option<StatusHook>,
    /// How often `on_status` is called.
    pub status_every: Duration,
    /// Serve the control socket (`ictus ctl`); always on when programs are launched.
    pub control_socket: bool,
    /// The folder of control sockets and run files.
    pub run_dir: PathBuf,
    /// More folders to look for programs in (before `PATH`).
    pub program_dirs: Vec<PathBuf>,
    /// Frames a subsystem may take to acknowledge a state before it is reported
    /// (`None`: one second's worth).
    pub ack_timeout_frames: Option<u64>,
    /// How long subsystems may take to become ready.
    pub ready_timeout: Duration,
    /// The program, and its arguments, that hosts a built-in subsystem in a
    /// process of its own (`process = "own"`): `ictus` sets itself and its hidden
    /// `subsystem` command; the program calls [`crate::child::main_builtin`].
    pub host: Option<(PathBuf, Vec<String>)>,
    /// The link to the run's other hosts, when its schedule spans several (see
    /// [`crate::link`]); `None`: every subsystem runs on this host.
    pub link: Option<Box<dyn Link>>,
    /// The CPU latency QoS held for the whole run, over the schedule's `pm_qos`
    /// (`None`: the schedule's, else 0 us, as cyclictest holds).
    pub pm_qos: Option<ictus_os::pm_qos::PmQos>,
    /// Explain every miss of this host's subsystems, from sampler threads off their
    /// CPUs (default on; off to measure what it costs).
    pub explain: bool,
    /// The lateness from which a release is a miss to explain, over the
    /// schedule's `explain_threshold` (`None`: the schedule's, else the tick).
    pub explain_threshold: Option<ictus_core::Nanos>,
    /// Where this host's tapped frames, cells and events go (`--record`,
    /// `--trace`; see [`crate::tap`]): empty, nothing is tapped and the
    /// subsystems push nothing.
    pub sinks: Vec<Box<dyn crate::tap::Sink>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: None,
            stop: Arc::new(AtomicBool::new(false)),
            on_status: None,
            status_every: Duration::from_millis(200),
            control_socket: true,
            run_dir: ctl::run_dir(),
            program_dirs: Vec::new(),
            ack_timeout_frames: None,
            ready_timeout: Duration::from_secs(10),
            host: None,
            link: None,
            pm_qos: None,
            explain: true,
            explain_threshold: None,
            sinks: Vec::new(),
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("duration", &self.duration)
            .field("run_dir", &self.run_dir)
            .field("link", &self.link.as_ref().map(|l| l.host()))
            .finish_non_exhaustive()
    }
}

/// The environment a launched program finds its run in.
pub(crate) mod env {
    /// The run's name.
    pub(crate) const RUN: &str = "ICTUS_RUN";
    /// The schedule file (absolute).
    pub(crate) const SCHEDULE: &str = "ICTUS_SCHEDULE";
    /// The subsystem the program is to run.
    pub(crate) const SUBSYSTEM: &str = "ICTUS_SUBSYSTEM";
    /// Its slot in the control block.
    pub(crate) const SLOT: &str = "ICTUS_SLOT";
    /// Where it writes its [`crate::report::ThreadOutcome`].
    pub(crate) const OUTCOME: &str = "ICTUS_OUTCOME";
    /// The lateness in nanoseconds from which a release is a miss to explain, or
    /// `off` (absent: not explained).
    pub(crate) const EXPLAIN: &str = "ICTUS_EXPLAIN";
    /// The program's sampler's part of its host's budget (a share of one CPU).
    pub(crate) const EXPLAIN_BUDGET: &str = "ICTUS_EXPLAIN_BUDGET";
    /// The control socket (setup channel).
    pub(crate) const SOCKET: &str = "ICTUS_SOCKET";
    /// The tap's segment, when the run is recorded or traced (absent: not).
    pub(crate) const TAP: &str = "ICTUS_TAP";
}
