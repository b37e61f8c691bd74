//! `ictus run SCHEDULE`: runs a cyclic executive schedule, with a live status line,
//! and writes a RunRecord with per-subsystem statistics; `ictus ctl STATE`: commands
//! a running schedule.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use comfy_table::{Cell, CellAlignment, Table, presets};
use ictus_core::{Nanos, Percentile};
use ictus_exec::link::HostReport;
use ictus_exec::run::SubsystemReport;
use ictus_exec::run::{self as exec_run, Distribution, LiveStatus, RunOptions, RunReport};
use ictus_exec::schedule::{Process, WaitSpec};
use ictus_exec::schedule::{Schedule, ScheduleError};
use ictus_probe::progress::Progress;
use ictus_probe::record::{LatencyResult, Measurement, RunRecord};
use ictus_probe::session::Session;
use ictus_probe::view::run::{
    CellLatency, CellMetrics, EXECUTION_TIME, ForwardDelay, ForwardMetrics, Frames, FramesLabels,
    FramesMetrics, HostClock, HostLabels, RELEASE_JITTER, Stress, StressMetrics, Subsystem,
    SubsystemLabels, SubsystemMetrics, TickArrival, TickMetrics,
};
use ictus_probe::view::{Empty, Point};
use ictus_shield::class::Class;
use serde::{Deserialize, Serialize};

use crate::Failure;
use crate::args::OutputArgs;
use crate::common;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The schedule (TOML: tick, major frame, subsystems; see examples/stress/).
    pub(crate) schedule: PathBuf,
    /// Stop after this long (e.g. 10s, 2m); default: until Ctrl-C or `ictus ctl stop`.
    #[arg(short = 'D', long, value_parser = crate::args::positive_duration)]
    pub(crate) duration: Option<Duration>,
    /// Override the schedule's tick (e.g. 250us): the same schedule, faster or slower.
    #[arg(long, value_parser = crate::args::positive_duration)]
    pub(crate) tick: Option<Duration>,
    /// How long subsystems may take to start (their `init`, a program joining the
    /// run) before the run is given up (exit code 1, nothing left behind).
    #[arg(long, default_value = "10s", value_parser = crate::args::positive_duration)]
    pub(crate) ready_timeout: Duration,
    /// No live status line.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Serve the live page (states, modes, stop, health, jitter) at this address:
    /// `IP:PORT` or `PORT` (on 127.0.0.1); port 0 picks a free one. The URL is printed
    /// at start; beyond loopback it carries a token that every request needs.
    #[arg(long, value_name = "ADDR", value_parser = ui_addr)]
    pub(crate) ui: Option<std::net::SocketAddr>,
    /// The live page's token (at least 16 letters, digits, `-` or `_`); default: one
    /// made at start when the page is reachable beyond loopback.
    #[arg(long, value_name = "TOKEN", requires = "ui", value_parser = ui_token)]
    pub(crate) ui_token: Option<String>,
    #[command(flatten)]
    pub(crate) watch: WatchArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// How a run across hosts secures its links.
#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// The run's keys (made by `ictus keys new DIR --hosts ...`, the same directory
    /// on every host): every link across hosts is TLS with mutual authentication and
    /// the run's access rules. Given, it wins over the schedule's `[security]`.
    #[arg(long, value_name = "DIR", conflicts_with = "insecure")]
    pub(crate) keys: Option<PathBuf>,
    /// Links across hosts without TLS or access rules: any machine that can reach a
    /// host's port can read, write and stop the run. Warned and recorded.
    #[arg(long)]
    pub(crate) insecure: bool,
}

/// What `ictus run` and `ictus node` hold and watch around their subsystems.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The CPU latency QoS held for the whole run (/dev/cpu_dma_latency): a bound in
    /// us, or off (the machine as it idles). Given, it wins over the schedule's
    /// `pm_qos`; else the schedule's, else 0 (as cyclictest).
    #[arg(long, value_name = "US|off", value_parser = crate::args::pm_qos)]
    pub(crate) pm_qos: Option<ictus_os::pm_qos::PmQos>,
    /// Explain every miss of this host's subsystems (a sampler on the other CPUs
    /// reads what moved in each miss's window); off measures without it.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) explain: crate::args::Switch,
    /// A release this late (or later) is a miss to explain (e.g. 200us). Given, it
    /// wins over the schedule's `explain_threshold`; else the schedule's, else the
    /// tick.
    #[arg(long, value_parser = crate::args::positive_duration)]
    pub(crate) explain_threshold: Option<Duration>,
}

/// `--ui`: `IP:PORT`, `[IPV6]:PORT` or a port on 127.0.0.1.
fn ui_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        "expected IP:PORT (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080) or a port".to_string()
    })
}

/// `--ui-token`: see [`ictus_ui::check_token`].
fn ui_token(s: &str) -> Result<String, String> {
    ictus_ui::check_token(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// The schedule, the same file as the main host's (its host table names this host).
    pub(crate) schedule: PathBuf,
    /// This host's name in the schedule's host table (not the first: that one is the
    /// main host, where `ictus run` coordinates).
    #[arg(long)]
    pub(crate) host: String,
    /// Override the schedule's tick, as the main host does (the two must agree).
    #[arg(long, value_parser = crate::args::positive_duration)]
    pub(crate) tick: Option<Duration>,
    /// How long this host waits for its subsystems and then for the main host's start
    /// (hosts start in any order) before it gives up (exit code 1, nothing left behind).
    #[arg(long, default_value = "60s", value_parser = crate::args::positive_duration)]
    pub(crate) ready_timeout: Duration,
    /// No live status line.
    #[arg(long)]
    pub(crate) quiet: bool,
    #[command(flatten)]
    pub(crate) watch: WatchArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CtlArgs {
    /// `run`, `pause`, `off` or a mode of the schedule; `status` or `stop`.
    pub(crate) command: String,
    /// The run (its schedule's name); default: the only run active.
    #[arg(long, value_parser = run_name)]
    pub(crate) name: Option<String>,
}

/// `--name`: a name that can name a run (see [`ictus_exec::ctl::check_name`]).
fn run_name(s: &str) -> Result<String, String> {
    ictus_exec::ctl::check_name(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

/// Loads the schedule; a malformed one is bad input (exit code 2), before anything starts.
fn load(path: &std::path::Path) -> Result<Schedule, Failure> {
    Schedule::from_file(path, &ictus_os::facts::online_cpus()).map_err(|e| match e {
        e @ ScheduleError::Invalid { .. } | e @ ScheduleError::Io { .. } => Failure::usage(e),
    })
}

pub(crate) fn run(args: &RunArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let schedule = prepare(&args.schedule, args.tick, &args.out)?;
    let security = security_for(&schedule, 0, &args.trust)?;
    let how = How {
        here: 0,
        security,
        duration: args.duration,
        ready_timeout: args.ready_timeout,
        quiet: args.quiet,
        watch: &args.watch,
        out: &args.out,
        ui: args.ui.map(|addr| (addr, args.ui_token.clone())),
    };
    execute(schedule, &how, progress)
}

/// `ictus node SCHEDULE --host NAME`: this host's part of a schedule across hosts.
pub(crate) fn node(args: &NodeArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let schedule = prepare(&args.schedule, args.tick, &args.out)?;
    let here = schedule
        .hosts
        .iter()
        .position(|h| h.name == args.host)
        .ok_or_else(|| {
            let names: Vec<&str> = schedule.hosts.iter().map(|h| h.name.as_str()).collect();
            Failure::usage(anyhow::anyhow!(
                "--host {}: {} {}",
                args.host,
                args.schedule.display(),
                if names.is_empty() {
                    "has no host table ([[host]] name and address): it runs on one host, \
                     with `ictus run`"
                        .to_string()
                } else {
                    format!("names the hosts {}", names.join(", "))
                }
            ))
        })?;
    if here == 0 {
        return Err(Failure::usage(anyhow::anyhow!(
            "--host {}: the first host of the table is the main host: run \
             `ictus run {}` there",
            args.host,
            args.schedule.display()
        )));
    }
    let security = security_for(&schedule, here, &args.trust)?;
    let how = How {
        here,
        security,
        duration: None,
        ready_timeout: args.ready_timeout,
        quiet: args.quiet,
        watch: &args.watch,
        out: &args.out,
        ui: None,
    };
    execute(schedule, &how, progress)
}

/// A schedule read and checked (with `--tick`) and an output that can be written,
/// before anything starts.
fn prepare(
    path: &std::path::Path,
    tick: Option<Duration>,
    out: &OutputArgs,
) -> Result<Schedule, Failure> {
    let mut schedule = load(path)?;
    if let Some(t) = tick {
        // Every rule a tick obeys in the file holds for --tick too (bounds, the
        // hybrid margin, the major frame), before anything starts.
        schedule.with_tick(Nanos::from(t)).map_err(|e| {
            Failure::usage(anyhow::Error::new(e).context(format!("--tick {}", Nanos::from(t))))
        })?;
    }
    // The cell table is checked here too, so a malformed one starts nothing.
    schedule.cell_table().map_err(Failure::usage)?;
    // So is the output: a run is never lost to a typo in `-o`.
    if let Some(path) = &out.output {
        ictus_os::fs::check_writable(path).map_err(Failure::usage)?;
    }
    Ok(schedule)
}

/// How the links of a run across hosts are secured (`None`: one host, no links):
/// from `--keys` or `--insecure`, else the schedule's `[security]`. Without either,
/// a schedule with hosts is refused (bad input: nothing starts), saying how to make
/// keys; so are keys that are not there for this host.
fn security_for(
    schedule: &Schedule,
    here: usize,
    trust: &TrustArgs,
) -> Result<Option<ictus_net::security::Security>, Failure> {
    use ictus_net::security::{Credentials, Security};
    if schedule.hosts.is_empty() {
        if trust.keys.is_some() || trust.insecure {
            return Err(Failure::usage(anyhow::anyhow!(
                "--keys and --insecure apply to a run across hosts; {} has no host table",
                schedule.path.display()
            )));
        }
        return Ok(None);
    }
    let dir = trust.keys.clone().or_else(|| {
        (!trust.insecure)
            .then(|| schedule.security.keys.clone())
            .flatten()
    });
    if let Some(dir) = dir {
        let host = &schedule.hosts[here].name;
        return Credentials::of_host(&dir, host)
            .map(|c| Some(Security::Tls(c)))
            .map_err(Failure::usage);
    }
    if trust.insecure || schedule.security.insecure {
        return Ok(Some(Security::Insecure));
    }
    let names: Vec<&str> = schedule.hosts.iter().map(|h| h.name.as_str()).collect();
    Err(Failure::usage(anyhow::anyhow!(
        "{} runs across hosts ({}) and no keys were given: make them with \
         `ictus keys new KEYS --hosts {}`, copy KEYS to every host (KEYS/ca/, the CA's \
         key, need not travel) and give `--keys KEYS` to `ictus run` and every \
         `ictus node` (or `[security] keys = \"KEYS\"` in the schedule); `--insecure` \
         runs without authentication",
        schedule.path.display(),
        names.join(", "),
        names.join(",")
    )))
}

/// Which host runs, and how.
struct How<'a> {
    here: usize,
    security: Option<ictus_net::security::Security>,
    duration: Option<Duration>,
    ready_timeout: Duration,
    quiet: bool,
    watch: &'a WatchArgs,
    out: &'a OutputArgs,
    /// The live page's address and token.
    ui: Option<(std::net::SocketAddr, Option<String>)>,
}

/// The link to the other hosts when the schedule places subsystems on several: a
/// Zenoh session opened with this thread kept off the CPUs of this host's real-time
/// subsystems, so Zenoh's threads (which inherit it) stay off them too.
fn link_for(
    schedule: &Schedule,
    here: usize,
    security: Option<&ictus_net::security::Security>,
) -> Result<Option<Box<dyn ictus_exec::link::Link>>, Failure> {
    let Some(security) = security else {
        return Ok(None);
    };
    if schedule.subsystems.iter().all(|s| s.host == 0) {
        return Ok(None);
    }
    if let Some(others) = outside_rt(schedule, here) {
        let _ = ictus_os::sched::set_affinity(&others);
    }
    let link = ictus_net::link::ZenohLink::open(schedule, here, &schedule.name, security)
        .map_err(|e| anyhow::anyhow!("opening the link to the other hosts: {e}"))?;
    Ok(Some(Box::new(link)))
}

/// The CPUs of this machine that none of this host's real-time subsystems is pinned
/// to, if any: where the link's and the live page's threads run.
fn outside_rt(schedule: &Schedule, here: usize) -> Option<ictus_core::CpuSet> {
    let rt = ictus_core::CpuSet::from_cpus(
        schedule
            .subsystems
            .iter()
            .filter(|s| s.host == here && !matches!(s.class, ictus_shield::class::Class::Normal))
            .filter_map(|s| s.cpu),
    );
    let others = ictus_core::CpuSet::from_cpus(
        ictus_os::facts::online_cpus()
            .cpus()
            .iter()
            .copied()
            .filter(|c| !rt.contains(*c)),
    );
    (!others.is_empty()).then_some(others)
}

/// Starts the live page of `schedule`'s run, when asked, and says where it is.
fn live_page(schedule: &Schedule, how: &How<'_>) -> Result<Option<Arc<ictus_ui::Ui>>, Failure> {
    let Some((addr, token)) = &how.ui else {
        return Ok(None);
    };
    let token = match token {
        Some(t) => Some(t.clone()),
        None if !addr.ip().is_loopback() => {
            Some(ictus_ui::new_token().map_err(|e| anyhow::anyhow!(e))?)
        }
        None => None,
    };
    let control = ictus_exec::ctl::check_socket(&ictus_exec::ctl::run_dir(), &schedule.name)
        .map_err(Failure::usage)?;
    let ui = ictus_ui::Ui::start(ictus_ui::UiOptions {
        addr: *addr,
        control,
        token,
        cpus: outside_rt(schedule, how.here),
    })
    .map_err(|e| match e {
        e @ (ictus_ui::UiError::NoToken { .. } | ictus_ui::UiError::BadToken) => Failure::usage(e),
        e => anyhow::Error::new(e).into(),
    })?;
    let mut note = format!("live page: {}", ui.url());
    if addr.ip().is_unspecified() {
        let _ = write!(
            note,
            " (on every address of this machine; the token is required)"
        );
    }
    let _ = writeln!(std::io::stderr(), "{note}");
    Ok(Some(Arc::new(ui)))
}

fn execute(mut schedule: Schedule, how: &How<'_>, progress: &Arc<Progress>) -> Result<(), Failure> {
    let mut session = Session::begin(std::env::args().collect(), false);
    let affinity_before = ictus_os::sched::current_affinity().ok();
    let link = link_for(&schedule, how.here, how.security.as_ref())?;
    if link.is_some() && how.security == Some(ictus_net::security::Security::Insecure) {
        let w = ictus_core::warning::Warning::new(
            ictus_core::warning::WarningId::InsecureLinks,
            "the links across hosts are plain TCP without authentication (--insecure): \
             any machine that can reach a host's port can read, write and stop this run",
            Some("make the run's keys with `ictus keys new DIR --hosts ...` and give --keys DIR"),
        );
        eprintln!("warning: {}", w.message);
        session.warn(w);
    }
    if how.here != 0 {
        // This host's segments and control socket, apart from the other hosts' on
        // the same machine (network namespaces share /dev/shm and /run).
        schedule.name = format!("{}.{}", schedule.name, schedule.hosts[how.here].name);
    }
    let ui = live_page(&schedule, how)?;
    let stop = Arc::new(AtomicBool::new(false));
    let show = !how.quiet && !how.out.json && std::io::stderr().is_terminal();
    let (flag, watch) = (Arc::clone(&stop), Arc::clone(progress));
    let page = ui.clone();
    let mut last_line = std::time::Instant::now();
    let options = RunOptions {
        duration: how.duration,
        stop: Arc::clone(&stop),
        on_status: Some(Box::new(move |s: &LiveStatus| {
            if watch.stop_requested() {
                // Relaxed: a stop request, polled by the coordinator.
                flag.store(true, Ordering::Relaxed);
            }
            if let Some(p) = &page {
                p.publish(s);
            }
            if show && last_line.elapsed() >= Duration::from_millis(100) {
                last_line = std::time::Instant::now();
                let _ =
                    std::io::stderr().write_all(format!("\r\x1b[2K{}", status_line(s)).as_bytes());
            }
        })),
        // The live page plots one point per jitter window (about 100 ms): it is
        // sampled twice as often, so no window is skipped.
        status_every: Duration::from_millis(if ui.is_some() { 50 } else { 100 }),
        ready_timeout: how.ready_timeout,
        // `process = "own"`: ictus hosts the builtin in a child of itself.
        host: std::env::current_exe()
            .ok()
            .map(|exe| (exe, vec!["subsystem".to_string()])),
        link,
        pm_qos: how.watch.pm_qos,
        explain: how.watch.explain.on(),
        explain_threshold: how.watch.explain_threshold.map(Nanos::from),
        ..RunOptions::default()
    };
    let result = exec_run::run(&schedule, &mut exec_run::builtin, options);
    if let Some(a) = affinity_before {
        let _ = ictus_os::sched::set_affinity(&a);
    }
    if show {
        let _ = std::io::stderr().write_all(b"\r\x1b[2K");
    }
    if let Some(p) = &ui {
        p.end(&match &result {
            Ok(r) => ended(r),
            Err(e) => format!("the run failed: {e}"),
        });
    }
    let report = match result {
        Ok(r) => r,
        Err(e) if e.is_bad_input() => return Err(Failure::usage(e)),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("running {}", schedule.path.display()))
                .into());
        }
    };
    let parameters = parameters(&schedule, how.duration, &report.events);
    let mut record = session.finish("run", &parameters, progress);
    fill(&mut record, &report);
    common::emit(&record, how.out, render)?;
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    if lost > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{lost} frame(s) were lost (see the events above); the record is written and marked incomplete"
            ),
        });
    }
    let refused: u64 = report
        .hosts
        .iter()
        .flat_map(|h| &h.refused)
        .map(|r| r.count)
        .sum();
    if refused > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{refused} message(s) from other hosts were refused (see the warnings above): \
                 nothing of them was copied, and the run is not clean"
            ),
        });
    }
    let errors: u64 = report.subsystems.iter().map(|s| s.errors).sum();
    if errors > 0 {
        return Err(Failure {
            code: EXIT_FRAMES_LOST,
            error: anyhow::anyhow!(
                "{errors} frame(s) returned an error (see the warnings above); the record is written and marked incomplete"
            ),
        });
    }
    Ok(())
}

/// How a run ended, for the live page.
fn ended(report: &RunReport) -> String {
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    let mut line = format!(
        "the run ended at frame {} ({})",
        report.frames,
        if report.complete {
            "complete"
        } else {
            "stopped early or incomplete"
        }
    );
    if lost > 0 {
        let _ = write!(line, "; {lost} frame(s) lost");
    }
    if let Some(s) = &report.stress {
        let _ = write!(line, "; stress: {} missed frame(s)", s.missed_frames);
    }
    line
}

/// `ictus run`'s exit code when the run ended but frames were lost (a subsystem
/// crashed, left the run, or was never released for part of it) or, across hosts,
/// something another host sent was refused. (0: every frame
/// accounted for, run or overrun; 1: the run failed; 2: bad input, nothing ran.)
pub(crate) const EXIT_FRAMES_LOST: u8 = 3;

/// One line: the frame, the state, and per subsystem its frames and overruns.
fn status_line(s: &LiveStatus) -> String {
    let mut line = format!("{} frame {} {}", s.name, s.frame, s.state.to_uppercase());
    for sub in &s.subsystems {
        let _ = write!(
            line,
            " | {} {} ovr {}",
            sub.name, sub.frames_run, sub.overruns
        );
        if sub.status != "running" {
            let _ = write!(line, " ({})", sub.status);
        }
    }
    if !s.pending.is_empty() {
        let names: Vec<String> = s.pending.iter().map(|(n, f)| format!("{n} {f}f")).collect();
        let _ = write!(line, " | no ack: {}", names.join(", "));
    }
    line
}

/// The parameters of a run as recorded (units in the key names), and as [`render`]
/// reads them back.
#[derive(Serialize, Deserialize)]
struct RunParams {
    schedule: String,
    name: String,
    tick_ns: u64,
    major_frame: u64,
    wait: WaitSpec,
    duration_ns: Option<u64>,
    hosts: Vec<HostParams>,
    subsystems: Vec<SubsystemParams>,
    /// What happened during the run, when anything did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    events: Vec<String>,
}

/// A host of the schedule, as recorded.
#[derive(Serialize, Deserialize)]
struct HostParams {
    name: String,
    address: String,
}

/// A subsystem of the schedule, as recorded.
#[derive(Serialize, Deserialize)]
struct SubsystemParams {
    name: String,
    start: u64,
    period: u64,
    cpu: Option<usize>,
    class: Class,
    process: Process,
    builtin: Option<String>,
    group: Option<String>,
    host: Option<String>,
}

fn parameters(schedule: &Schedule, duration: Option<Duration>, events: &[String]) -> RunParams {
    RunParams {
        schedule: schedule.path.display().to_string(),
        name: schedule.name.clone(),
        tick_ns: schedule.tick.as_u64(),
        major_frame: schedule.major_frame,
        wait: schedule.wait,
        duration_ns: duration.map(|d| Nanos::from(d).as_u64()),
        hosts: schedule
            .hosts
            .iter()
            .map(|h| HostParams {
                name: h.name.clone(),
                address: h.address.to_string(),
            })
            .collect(),
        subsystems: schedule
            .subsystems
            .iter()
            .map(|s| SubsystemParams {
                name: s.name.clone(),
                start: s.start,
                period: s.period,
                cpu: s.cpu,
                class: s.class.clone(),
                process: s.process.clone(),
                builtin: s.builtin.clone(),
                group: s.group.clone(),
                host: schedule.hosts.get(s.host).map(|h| h.name.clone()),
            })
            .collect(),
        events: events.to_vec(),
    }
}

fn latency(d: &Distribution, missed: u64, longest: u64) -> LatencyResult {
    LatencyResult {
        thin_percentiles: d.summary.thin_percentiles(),
        summary: d.summary.clone(),
        max_index: d.max_index,
        missed,
        longest_miss_run: longest,
        histogram: d.histogram.clone(),
    }
}

/// Puts the run's figures into the record: per subsystem a `release-jitter` and an
/// `execution-time` measurement, the stress check, the warnings and the headline.
pub(crate) fn fill(record: &mut RunRecord, report: &RunReport) {
    record.complete = record.complete && report.complete;
    record.warnings.extend(report.warnings.iter().cloned());
    record.obtained.pm_qos = report.pm_qos.clone();
    record.explanation = report.explanation.clone();
    for s in &report.subsystems {
        let (jitter, exec) = subsystem_measurements(s);
        record.measurements.push(jitter);
        record.measurements.push(exec);
    }
    let labels = FramesLabels {
        tick_ns: report.tick_ns,
        major_frame: report.major_frame,
        wait: report.wait.clone(),
    };
    let metrics = FramesMetrics {
        frames: report.frames as f64,
    };
    let mut run = Point::<Frames>::new(labels, metrics).measurement();
    // One figure per state of the schedule: the keys are the schedule's own names.
    for (state, frames) in &report.state_frames {
        run = run.metric(&format!("{state}_frames"), *frames as f64);
    }
    record.measurements.push(run);
    if let Some(st) = &report.stress {
        let metrics = StressMetrics {
            run_frames: st.run_frames as f64,
            final_value: st.final_value as f64,
            missed_frames: st.missed_frames as f64,
            incoherent_cells: st.incoherent_cells as f64,
        };
        record
            .measurements
            .push(Point::<Stress>::new(Empty {}, metrics).measurement());
    }
    for h in &report.hosts {
        record.measurements.extend(host_measurements(h));
    }
    record.headline = Some(headline(report));
}

/// A subsystem's `release-jitter` and `execution-time` measurements.
fn subsystem_measurements(s: &SubsystemReport) -> (Measurement, Measurement) {
    let labels = SubsystemLabels {
        subsystem: s.name.clone(),
        process: s.process.clone(),
        start_frame: s.start,
        period_frames: s.period,
        cpu: s.cpu,
        class: s.outcome.as_ref().map(|o| o.class_obtained.clone()),
        policy: s.outcome.as_ref().map(|o| o.policy.clone()),
        crashed: s.crashed.clone(),
    };
    let metrics = SubsystemMetrics {
        releases_due: s.releases_due as f64,
        frames_run: s.frames_run as f64,
        overruns: s.overruns as f64,
        longest_overrun_streak: s.longest_overrun_streak as f64,
        lost_frames: s.lost as f64,
        hybrid_margin_ns: None,
        errors: Some(s.errors as f64),
        finished_early: (s.finished_early > 0).then_some(s.finished_early as f64),
    };
    let mut point = Point::<Subsystem>::new(labels, metrics);
    let mut exec = point.measurement_named(EXECUTION_TIME);
    point.metrics.hybrid_margin_ns = s
        .outcome
        .as_ref()
        .and_then(|o| o.hybrid_margin_ns)
        .map(|m| m as f64);
    let mut jitter = point.measurement_named(RELEASE_JITTER);
    if let Some(o) = &s.outcome {
        jitter = jitter.with_latency(latency(&o.jitter, s.overruns, s.longest_overrun_streak));
        exec = exec.with_latency(latency(&o.exec, s.overruns, s.longest_overrun_streak));
    }
    (jitter, exec)
}

/// A host's link figures: its ticks, its cells, and what it forwarded.
fn host_measurements(h: &HostReport) -> Vec<Measurement> {
    let labels = HostLabels {
        host: h.name.clone(),
        role: h.role.clone(),
    };
    let clock = HostClock {
        clock_offset_ns: h.clock_offset_ns as f64,
        clock_uncertainty_ns: h.clock_uncertainty_ns as f64,
    };
    let main = labels.is_main();
    let ticks = TickMetrics {
        clock: clock.clone(),
        ticks_received: h.ticks as f64,
        ticks_sent: main.then_some(h.ticks_sent_or_missing as f64),
        ticks_missing: (!main).then_some(h.ticks_sent_or_missing as f64),
        bytes_sent: h.bytes_sent as f64,
    };
    let mut tick = Point::<TickArrival>::new(labels.clone(), ticks).measurement();
    if let Some(d) = &h.tick_lateness {
        tick = tick.with_latency(latency(d, 0, 0));
    }
    let cells = CellMetrics {
        clock: clock.clone(),
        cells_sent: h.cells_sent as f64,
        cells_received: h.cells_received as f64,
        refused: h.refused.iter().map(|r| r.count).sum::<u64>() as f64,
    };
    let mut cell = Point::<CellLatency>::new(labels.clone(), cells).measurement();
    if let Some(d) = &h.cell_latency {
        cell = cell.with_latency(latency(d, 0, 0));
    }
    let mut out = vec![tick, cell];
    if let Some(d) = &h.forward_delay {
        let forwarded = ForwardMetrics {
            clock,
            cells_sent: h.cells_sent as f64,
        };
        out.push(
            Point::<ForwardDelay>::new(labels, forwarded)
                .measurement()
                .with_latency(latency(d, 0, 0)),
        );
    }
    out
}

/// The run in one line: the stress check's outcome, or the frames and what was lost.
fn headline(report: &RunReport) -> String {
    let overruns: u64 = report.subsystems.iter().map(|s| s.overruns).sum();
    let lost: u64 = report.subsystems.iter().map(|s| s.lost).sum();
    match &report.stress {
        Some(st) => format!(
            "stress: {} frames in RUN at {}, final value {}: {} missed frames ({} overruns, {} lost)",
            st.run_frames,
            Nanos::new(report.tick_ns),
            st.final_value,
            st.missed_frames,
            overruns,
            lost
        ),
        None => format!(
            "{} frames at {}: {} overruns, {} frames lost",
            report.frames,
            Nanos::new(report.tick_ns),
            overruns,
            lost
        ),
    }
}

/// The human view: one row per subsystem, the stress check, the events.
pub(crate) fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let p = record.parameters_as::<RunParams>();
    let _ = writeln!(
        out,
        "run {}: tick {}, major frame {} ticks, wait {}",
        p.as_ref().map_or("?", |p| &p.name),
        Nanos::new(p.as_ref().map_or(0, |p| p.tick_ns)),
        p.as_ref().map_or(0, |p| p.major_frame),
        p.as_ref().map_or("?", |p| p.wait.mode(Nanos::ZERO).name()),
    );
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table.set_header(vec![
        "subsystem",
        "process",
        "class",
        "run",
        "due",
        "overruns (streak)",
        "lost",
        "errors",
        "jitter p99 us",
        "jitter max us",
        "exec p99 us",
        "exec max us",
    ]);
    // Per subsystem: its release jitter (read), then its execution time.
    type Pair<'a> = (
        Option<(&'a Measurement, Point<Subsystem>)>,
        Option<&'a Measurement>,
    );
    let mut by_name: BTreeMap<String, Pair<'_>> = BTreeMap::new();
    for m in &record.measurements {
        let Some(point) = m.read::<Subsystem>() else {
            continue;
        };
        let e = by_name.entry(point.labels.subsystem.clone()).or_default();
        match m.name.as_str() {
            RELEASE_JITTER => e.0 = Some((m, point)),
            EXECUTION_TIME => e.1 = Some(m),
            _ => {}
        }
    }
    let order = p.as_ref().map_or(&[][..], |p| &p.subsystems);
    for name in order.iter().map(|s| &s.name) {
        let Some((Some((j, point)), e)) = by_name.get(name) else {
            continue;
        };
        let (labels, metrics) = (&point.labels, &point.metrics);
        let mut process = labels.process.clone();
        if let Some(c) = &labels.crashed {
            let _ = write!(process, " ({c})");
        }
        let count = |v: f64| v as u64;
        table.add_row(vec![
            Cell::new(name),
            Cell::new(process),
            Cell::new(labels.class.as_deref().unwrap_or("-")),
            Cell::new(count(metrics.frames_run)),
            Cell::new(count(metrics.releases_due)),
            Cell::new(format!(
                "{} ({})",
                count(metrics.overruns),
                count(metrics.longest_overrun_streak)
            )),
            Cell::new(count(metrics.lost_frames)),
            Cell::new(
                metrics
                    .errors
                    .map_or("-".to_string(), |e| count(e).to_string()),
            ),
            Cell::new(percentile(Some(j), Some(Percentile::P99))),
            Cell::new(percentile(Some(j), None)),
            Cell::new(percentile(*e, Some(Percentile::P99))),
            Cell::new(percentile(*e, None)),
        ]);
    }
    for col in 3..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}");
    if let Some(hosts) = hosts_table(record) {
        let _ = writeln!(out, "{hosts}");
    }
    for e in p.iter().flat_map(|p| &p.events) {
        let _ = writeln!(out, "event: {e}");
    }
    if let Some(h) = &record.headline {
        let _ = writeln!(out, "{h}");
    }
    out
}

/// A percentile of `m`'s latency (the max for `None`) in microseconds, or `-`.
fn percentile(m: Option<&Measurement>, p: Option<Percentile>) -> String {
    common::micros(m.and_then(|m| m.latency.as_ref()).and_then(|l| match p {
        Some(p) => l.summary.percentile(p),
        None => l.summary.max_ns,
    }))
}

/// The link figures of a run across hosts: one row per host.
fn hosts_table(record: &RunRecord) -> Option<Table> {
    let ticks: Vec<(&Measurement, Point<TickArrival>)> = record
        .measurements
        .iter()
        .filter_map(|m| Some((m, m.read::<TickArrival>()?)))
        .collect();
    if ticks.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
    table.set_header(vec![
        "host",
        "role",
        "ticks",
        "tick late p50 us",
        "tick late p99 us",
        "tick late max us",
        "cells sent",
        "cells recv",
        "cell p50 us",
        "cell p99 us",
        "cell max us",
        "bytes sent",
    ]);
    for (t, tick) in &ticks {
        let host = &tick.labels.host;
        let cell = record
            .measurements
            .iter()
            .filter_map(|m| Some((m, m.read::<CellLatency>()?)))
            .find(|(_, c)| &c.labels.host == host);
        let (c, cells) = (cell.as_ref().map(|c| c.0), cell.as_ref().map(|c| &c.1));
        let figure = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let role = tick.labels.role.as_str();
        let main = tick.labels.is_main();
        let ticks = if main {
            format!("{} sent", figure(tick.metrics.ticks_sent))
        } else {
            format!(
                "{} ({} missing)",
                figure(Some(tick.metrics.ticks_received)),
                figure(tick.metrics.ticks_missing)
            )
        };
        let tick_percentile = |p| {
            if main {
                "-".to_string()
            } else {
                percentile(Some(t), p)
            }
        };
        table.add_row(vec![
            Cell::new(host),
            Cell::new(role),
            Cell::new(ticks),
            Cell::new(tick_percentile(Some(Percentile::P50))),
            Cell::new(tick_percentile(Some(Percentile::P99))),
            Cell::new(tick_percentile(None)),
            Cell::new(figure(cells.map(|c| c.metrics.cells_sent))),
            Cell::new(figure(cells.map(|c| c.metrics.cells_received))),
            Cell::new(percentile(c, Some(Percentile::P50))),
            Cell::new(percentile(c, Some(Percentile::P99))),
            Cell::new(percentile(c, None)),
            Cell::new(figure(Some(tick.metrics.bytes_sent))),
        ]);
    }
    for col in 2..table.column_count() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    Some(table)
}

/// `ictus subsystem` (hidden): hosts the built-in subsystem that `ictus run`
/// launched this process for.
pub(crate) fn host() -> Result<(), Failure> {
    ictus_exec::child::run_builtin(&mut exec_run::builtin)
        .map(drop)
        .map_err(|e| anyhow::Error::new(e).into())
}

pub(crate) fn ctl(args: &CtlArgs) -> Result<(), Failure> {
    let line = ictus_exec::ctl::command_line(&args.command).map_err(Failure::usage)?;
    let socket = ictus_exec::ctl::find_run(args.name.as_deref()).map_err(Failure::usage)?;
    let reply = ictus_exec::ctl::request(&socket, &line)?;
    if let Some(err) = reply.strip_prefix("error ") {
        return Err(Failure::usage(anyhow::anyhow!("{err}")));
    }
    crate::say(&(reply + "\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_exec::run::StressReport;
    use ictus_probe::provenance::Provenance;
    use ictus_probe::record::Obtained;

    fn report() -> RunReport {
        let host = |name: &str, role: &str, ticks: u64, other: u64| HostReport {
            name: name.into(),
            role: role.into(),
            ticks,
            ticks_sent_or_missing: other,
            cells_sent: 10,
            cells_received: 9,
            bytes_sent: 4096,
            ..HostReport::default()
        };
        RunReport {
            name: "ring".into(),
            schedule: "ring.toml".into(),
            tick_ns: 1_000_000,
            major_frame: 2,
            wait: "hybrid".into(),
            frames: 400,
            state_frames: BTreeMap::from([("run".into(), 400)]),
            transitions: Vec::new(),
            subsystems: vec![SubsystemReport {
                name: "p".into(),
                process: "own".into(),
                start: 0,
                period: 2,
                cpu: Some(1),
                releases_due: 200,
                frames_run: 199,
                overruns: 1,
                longest_overrun_streak: 1,
                lost: 3,
                finished_early: 0,
                errors: 2,
                crashed: Some("killed by signal 9".into()),
                outcome: None,
            }],
            stress: Some(StressReport {
                run_frames: 400,
                counters: Vec::new(),
                final_value: 388,
                missed_frames: 12,
                incoherent_cells: 0,
            }),
            warnings: Vec::new(),
            events: vec!["pause at frame 10".into()],
            complete: true,
            hosts: vec![host("a", "main", 0, 400), host("b", "node", 399, 1)],
            pm_qos: None,
            explanation: None,
        }
    }

    fn params(events: Vec<String>) -> RunParams {
        RunParams {
            schedule: "ring.toml".into(),
            name: "ring".into(),
            tick_ns: 1_000_000,
            major_frame: 2,
            wait: WaitSpec::Hybrid { margin: None },
            duration_ns: None,
            hosts: Vec::new(),
            subsystems: vec![SubsystemParams {
                name: "p".into(),
                start: 0,
                period: 2,
                cpu: Some(1),
                class: Class::Normal,
                process: Process::Own,
                builtin: Some("increment".into()),
                group: None,
                host: None,
            }],
            events,
        }
    }

    #[test]
    fn what_fill_writes_the_render_reads_back() {
        let report = report();
        let parameters = serde_json::to_value(params(report.events.clone())).unwrap();
        let mut sut = RunRecord::new(
            "run",
            Provenance::capture(Vec::new()),
            parameters,
            Obtained::default(),
        );
        fill(&mut sut, &report);
        let names: Vec<&str> = sut.measurements.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "release-jitter",
                "execution-time",
                "frames",
                "stress",
                "tick-arrival",
                "cell-latency",
                "tick-arrival",
                "cell-latency"
            ]
        );
        let frames = &sut.measurements[2];
        assert_eq!(frames.read::<Frames>().unwrap().metrics.frames, 400.0);
        assert_eq!(frames.metrics["run_frames"], 400.0);
        let text = render(&sut);
        assert!(
            text.starts_with("run ring: tick 1.00 ms, major frame 2 ticks, wait hybrid\n"),
            "{text}"
        );
        let row = |first: &str| -> Vec<String> {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(first))
                .unwrap_or_else(|| panic!("no row {first} in\n{text}"));
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        };
        assert_eq!(
            row("p ")[..8],
            [
                "p",
                "own (killed by signal 9)",
                "-",
                "199",
                "200",
                "1 (1)",
                "3",
                "2"
            ]
        );
        assert_eq!(row("a ")[..3], ["a", "main", "400 sent"]);
        assert_eq!(row("b ")[..3], ["b", "node", "399 (1 missing)"]);
        assert_eq!(row("b ")[3..6], ["-", "-", "-"]);
        assert_eq!(row("b ")[6..8], ["10", "9"]);
        assert!(text.contains("\nevent: pause at frame 10\n"), "{text}");
    }

    #[test]
    fn the_qos_in_force_and_the_misses_explained_reach_the_record_and_its_footer() {
        use ictus_os::explain::{
            Breakdown, Cause, Explained, Explanation, MissKind, SamplerReport,
        };
        use ictus_os::pm_qos::{PmQos, PmQosState};
        let miss = Explained {
            thread: "p".into(),
            cpu: Some(1),
            kind: MissKind::Overrun,
            seq: 42,
            at_ns: 50_000_000,
            lateness_ns: 1_500_000,
            missed: 2,
            window_ns: 3_000_000,
            causes: vec![Cause::Overrun {
                exec_ns: 2_500_000,
                budget_ns: 1_000_000,
            }],
        };
        let mut breakdown = Breakdown::default();
        breakdown.add(&miss);
        let mut report = report();
        report.pm_qos = Some(PmQosState {
            requested: PmQos::Bound(0),
            held_us: Some(0),
            refused: None,
        });
        report.explanation = Some(Explanation {
            clock_start_ns: 0,
            threshold_ns: 1_000_000,
            breakdown,
            events: vec![miss],
            events_not_kept: 0,
            sampler: SamplerReport {
                period_ns: 1_000_000,
                samples: 10,
                cpus: "0".into(),
                shares_watched_cpu: false,
                reading_mean_ns: 1,
                reading_max_ns: 2,
                task_scans: 1,
                sources: Vec::new(),
            },
        });
        let parameters = serde_json::to_value(params(Vec::new())).unwrap();
        let mut sut = RunRecord::new(
            "run",
            Provenance::capture(Vec::new()),
            parameters,
            Obtained::default(),
        );
        fill(&mut sut, &report);
        assert_eq!(sut.obtained.pm_qos, report.pm_qos);
        assert_eq!(sut.explanation, report.explanation);
        let footer = common::footer(&sut);
        assert!(
            footer.contains("CPU latency QoS (/dev/cpu_dma_latency): held at 0 us"),
            "{footer}"
        );
        assert!(
            footer.contains(
                "why the misses (releases 1.00 ms or more late, missed periods, overruns): \
                 1 miss (2 periods): 1 by the thread's own overrun"
            ),
            "{footer}"
        );
        assert!(
            footer.contains("p overrun #42 at 50.00 ms: 1.50 ms late, 2 period(s) missed on CPU 1: its own execution took 2.50 ms of a 1.00 ms budget"),
            "{footer}"
        );
    }

    #[test]
    fn the_parameters_are_written_as_before() {
        let sut = serde_json::to_value(params(Vec::new())).unwrap();
        let keys: Vec<&str> = sut
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "schedule",
                "name",
                "tick_ns",
                "major_frame",
                "wait",
                "duration_ns",
                "hosts",
                "subsystems"
            ]
        );
        assert_eq!(sut["wait"]["mode"], "hybrid");
        assert_eq!(sut["subsystems"][0]["class"]["class"], "normal");
        let with_events = serde_json::to_value(params(vec!["x".into()])).unwrap();
        assert_eq!(with_events["events"][0], "x");
    }
}
