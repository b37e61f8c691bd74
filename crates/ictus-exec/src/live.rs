//! The live view of a run: what `ictus ctl status`, the status line and the live page
//! show while it runs. Built by the coordinator from the control block (the
//! subsystems' own counters, never a lock or a message from a real-time thread), the
//! link's figures when the run spans hosts, and the run's event log.
//!
//! ```
//! use ictus_exec::live::LiveStatus;
//! let s: LiveStatus = serde_json::from_str(
//!     r#"{"name":"stress","frame":3,"state":"run","subsystems":[],"pending":[]}"#,
//! ).unwrap();
//! assert!(s.hosts.is_empty() && s.cells.is_empty());
//! ```

use ictus_core::Nanos;
use ictus_explain::{Breakdown, Explained, MissKind, TimeByCause};
use serde::{Deserialize, Serialize};

use crate::control::{Control, Status};
use crate::schedule::Schedule;
use crate::state::{self, StateLog, States};

/// Events a snapshot carries (the newest; `events_total` counts them all).
pub const LIVE_EVENTS: usize = 64;

/// A snapshot of the run for a status line, `ictus ctl status` and the live page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveStatus {
    /// The run.
    pub name: String,
    /// The current frame (0 before the epoch).
    pub frame: u64,
    /// The state in force.
    pub state: String,
    /// Per subsystem.
    pub subsystems: Vec<LiveSubsystem>,
    /// Who has not acknowledged the state, and for how many frames.
    pub pending: Vec<(String, u64)>,
    /// `starting` (subsystems not all ready), `running`, `stopping` (a stop was asked
    /// for: it takes effect at [`stop_frame`](Self::stop_frame)).
    #[serde(default)]
    pub phase: String,
    /// The tick.
    #[serde(default)]
    pub tick_ns: u64,
    /// Minor frames per major frame.
    #[serde(default)]
    pub major_frame: u64,
    /// The frame the run stops at, once known.
    #[serde(default)]
    pub stop_frame: Option<u64>,
    /// The frames a jitter window spans ([`LiveSubsystem::window_jitter_ns`]).
    #[serde(default)]
    pub window_frames: u64,
    /// Every state and mode the run can be moved to: OFF, PAUSE, RUN, then the
    /// schedule's modes.
    #[serde(default)]
    pub states: Vec<String>,
    /// The state commanded next and its first frame, while a change is announced.
    #[serde(default)]
    pub next: Option<(String, u64)>,
    /// The hosts (one, this host, when the run does not span hosts).
    #[serde(default)]
    pub hosts: Vec<LiveHost>,
    /// The cells.
    #[serde(default)]
    pub cells: Vec<LiveCell>,
    /// The newest events (at most [`LIVE_EVENTS`]), oldest first.
    #[serde(default)]
    pub events: Vec<LiveEvent>,
    /// Events so far (the index of the next one).
    #[serde(default)]
    pub events_total: u64,
    /// The last misses explained (at most 16, newest last; this host's in-process
    /// subsystems, none when explaining is off).
    #[serde(default)]
    pub misses: Vec<LiveMiss>,
    /// The run's explained misses so far as time by cause, with the advice that
    /// follows from the costliest (the same chart as the survey's report; none
    /// before the first miss, or when explaining is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causes: Option<TimeByCause>,
}

/// The run's explained misses so far, tallied from the sampler's last misses at each
/// snapshot: each miss added once ([`MissTally::update`]), for
/// [`LiveStatus::causes`].
#[derive(Debug, Default)]
pub struct MissTally {
    breakdown: Breakdown,
    /// The misses kept for the advice (the first [`MissTally::KEEP`]).
    kept: Vec<Explained>,
    /// The newest miss added: `(thread, seq, at_ns)`.
    last: Option<(String, u64, u64)>,
}

impl MissTally {
    /// Misses kept for the advice's details (the thread, the interrupt line).
    pub const KEEP: usize = 64;

    /// Adds the misses of `recent` (the sampler's last, newest last) not added yet.
    /// More misses between two snapshots than the sampler keeps are not all seen:
    /// the tally is of those seen.
    pub fn update(&mut self, recent: &[Explained]) {
        let key = |e: &Explained| (e.thread.clone(), e.seq, e.at_ns);
        let from = self
            .last
            .as_ref()
            .and_then(|last| recent.iter().rposition(|e| key(e) == *last))
            .map_or(0, |i| i + 1);
        for e in &recent[from..] {
            self.breakdown.add(e);
            if self.kept.len() < Self::KEEP {
                self.kept.push(e.clone());
            }
        }
        if let Some(e) = recent.last() {
            self.last = Some(key(e));
        }
    }

    /// The chart of the misses tallied, `None` before the first.
    pub fn chart(&self) -> Option<TimeByCause> {
        (self.breakdown.events > 0).then(|| TimeByCause::of_misses(&self.breakdown, &self.kept))
    }
}

/// One explained miss in a [`LiveStatus`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveMiss {
    /// The subsystem.
    pub subsystem: String,
    /// Its frame.
    pub frame: u64,
    /// A late release, skipped releases, or an overrun.
    pub kind: MissKind,
    /// How late the release was (an overrun: how far its end passed the next
    /// release).
    pub lateness_ns: u64,
    /// Releases skipped.
    pub missed: u64,
    /// The dominant cause, in words (`the hypervisor stole 4ms`, `its own execution
    /// took 2.5ms of a 1ms budget`, `unexplained: nothing visible on this CPU`).
    pub cause: String,
}

impl From<&Explained> for LiveMiss {
    fn from(e: &Explained) -> LiveMiss {
        LiveMiss {
            subsystem: e.thread.clone(),
            frame: e.seq,
            kind: e.kind,
            lateness_ns: e.lateness_ns,
            missed: e.missed,
            cause: e.causes.first().map_or_else(
                || "unexplained: nothing visible on this CPU".to_string(),
                ToString::to_string,
            ),
        }
    }
}

/// One subsystem in a [`LiveStatus`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveSubsystem {
    /// Its name.
    pub name: String,
    /// Its life stage: `empty`, `starting`, `ready`, `running`, `finished`, `failed`.
    pub status: String,
    /// The process it runs in.
    pub pid: u32,
    /// Frames run.
    pub frames_run: u64,
    /// Overruns.
    pub overruns: u64,
    /// Its host's name (empty when the run does not span hosts).
    #[serde(default)]
    pub host: String,
    /// False once it failed: its process died, its thread panicked, its host left.
    #[serde(default = "yes")]
    pub alive: bool,
    /// Its CPU, when pinned.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Its period in minor frames.
    #[serde(default)]
    pub period: u64,
    /// Releases lost so far: due, not run and not overrun (a dead subsystem's).
    #[serde(default)]
    pub lost: u64,
    /// Its largest release jitter so far.
    #[serde(default)]
    pub max_jitter_ns: u64,
    /// Its largest release jitter in its last complete window of
    /// [`LiveStatus::window_frames`] frames, and the window's index.
    #[serde(default)]
    pub window_jitter_ns: Option<u64>,
    /// The index of that window (frame / window_frames).
    #[serde(default)]
    pub window: Option<u64>,
    /// Its last execution time.
    #[serde(default)]
    pub last_exec_ns: u64,
    /// Its longest execution so far.
    #[serde(default)]
    pub max_exec_ns: u64,
    /// The state it acknowledged last, and from which frame.
    #[serde(default)]
    pub ack: Option<(String, u64)>,
    /// Whether that is the state in force.
    #[serde(default)]
    pub acknowledged: bool,
    /// Frames whose `run` returned an error (this host's subsystems).
    #[serde(default)]
    pub errors: u64,
}

fn yes() -> bool {
    true
}

/// One host in a [`LiveStatus`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveHost {
    /// Its name in the host table (`this host` when the run does not span hosts).
    pub name: String,
    /// `main` (coordinates and sends the tick) or `node`.
    pub role: String,
    /// Whether it is in the run (its liveliness token is there).
    pub alive: bool,
    /// Ticks that reached it (a node), and the ones that did not.
    pub ticks: u64,
    /// Ticks that never reached it.
    pub ticks_missing: u64,
    /// Tick arrival minus the tick's deadline (a node): median so far.
    pub tick_late_p50_ns: Option<u64>,
    /// The largest so far.
    pub tick_late_max_ns: Option<u64>,
    /// The largest over the node's last status period (100 ms).
    pub tick_late_recent_ns: Option<u64>,
    /// Cells that came over the link to this host (this host's entry only): arrival
    /// minus the writer's frame start, median so far.
    #[serde(default)]
    pub cell_latency_p50_ns: Option<u64>,
    /// Its 99th percentile so far.
    #[serde(default)]
    pub cell_latency_p99_ns: Option<u64>,
    /// Its largest so far.
    #[serde(default)]
    pub cell_latency_max_ns: Option<u64>,
}

/// One cell in a [`LiveStatus`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCell {
    /// Its name.
    pub name: String,
    /// Its size in bytes.
    pub bytes: usize,
    /// The subsystems of this host that write it (element claims).
    pub writers: Vec<String>,
    /// The writer that published it last (a subsystem, or `host NAME` for a copy
    /// that came over the link), if any.
    pub last_writer: Option<String>,
    /// The frame of that publication, when a subsystem of this host made it.
    pub frame: Option<u64>,
    /// How old the cell's content is: now minus the start of the frame that published
    /// it (a subsystem of this host), or minus the arrival of the copy (another host).
    pub age_ns: Option<u64>,
    /// Writes so far (its seqlock's sequence / 2).
    pub writes: u64,
}

/// One line of the event log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveEvent {
    /// Its index in the run's log (0-based).
    pub index: u64,
    /// What happened (`frame F: ...`).
    pub text: String,
}

/// The frames of a jitter window: about 100 ms, at least one frame.
pub fn window_frames(tick: Nanos) -> u64 {
    (100_000_000 / tick.as_u64().max(1)).max(1)
}

/// What the coordinator knows beside the control block, for a snapshot.
#[derive(Debug, Default)]
pub struct Extras<'a> {
    /// The run's events so far.
    pub events: &'a [String],
    /// The hosts, from the link (empty on one host).
    pub hosts: Vec<LiveHost>,
    /// Per cell, the host and time of the last copy the link brought (empty on one host).
    pub arrivals: Vec<Option<(usize, Nanos)>>,
    /// The epoch, once set.
    pub epoch: Option<Nanos>,
    /// The stop frame, once set.
    pub stop_frame: Option<u64>,
    /// Whether subsystems are still starting.
    pub starting: bool,
    /// Whether a stop was asked for (Ctrl-C, `ictus ctl stop`, the page).
    pub stopping: bool,
    /// This host (0 on one host or the main host).
    pub here: usize,
    /// The last misses explained.
    pub misses: Vec<LiveMiss>,
    /// The run's explained misses so far as time by cause ([`MissTally::chart`]).
    pub causes: Option<TimeByCause>,
}

/// The snapshot of a run now.
pub fn snapshot(
    schedule: &Schedule,
    control: &Control,
    states: &States,
    log: &StateLog,
    frame: u64,
    cells: Option<&crate::cell::Cells>,
    extras: Extras<'_>,
) -> LiveStatus {
    let names: Vec<&str> = schedule
        .subsystems
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let acks: Vec<(&str, Option<state::Ack>)> = (0..names.len())
        .map(|k| (names[k], control.slot(k).ack()))
        .collect();
    let word = control.state();
    let pending = state::pending(word, frame, acks)
        .into_iter()
        .map(|p| (p.subsystem, p.frames))
        .collect();
    let in_force = log.at(frame);
    let window = window_frames(control.tick());
    let spans_hosts = schedule.subsystems.iter().any(|s| s.host != 0);
    let subsystems = schedule
        .subsystems
        .iter()
        .enumerate()
        .map(|(k, spec)| {
            let v = control.slot(k).view();
            let due = spec.releases_before(frame.min(extras.stop_frame.unwrap_or(u64::MAX)));
            let failed = v.status == Status::Failed;
            LiveSubsystem {
                name: spec.name.clone(),
                status: v.status.name().to_string(),
                pid: v.pid,
                frames_run: v.frames_run,
                overruns: v.overruns,
                host: if spans_hosts {
                    schedule.hosts[spec.host].name.clone()
                } else {
                    String::new()
                },
                alive: !failed,
                cpu: spec.cpu,
                period: spec.period,
                lost: if failed {
                    due.saturating_sub(v.frames_run + v.overruns)
                } else {
                    0
                },
                max_jitter_ns: v.max_jitter.as_u64(),
                window_jitter_ns: v.window_jitter.map(|(_, j)| j.as_u64()),
                window: v.window_jitter.map(|(w, _)| w),
                last_exec_ns: v.last_exec.as_u64(),
                max_exec_ns: v.max_exec.as_u64(),
                ack: v.ack.map(|a| (states.name(a.state).to_string(), a.frame)),
                acknowledged: v.ack.is_some_and(|a| a.state == in_force),
                errors: v.errors,
            }
        })
        .collect();
    let hosts = if extras.hosts.is_empty() {
        vec![LiveHost {
            name: schedule
                .hosts
                .first()
                .map_or_else(|| "this host".to_string(), |h| h.name.clone()),
            role: "main".into(),
            alive: true,
            ..LiveHost::default()
        }]
    } else {
        extras.hosts
    };
    let now = ictus_os::clock::monotonic_now();
    let cells = cells.map_or_else(Vec::new, |c| {
        live_cells(schedule, control, c, &extras.arrivals, extras.epoch, now)
    });
    let total = extras.events.len();
    let first = total.saturating_sub(LIVE_EVENTS);
    LiveStatus {
        name: schedule.name.clone(),
        frame,
        state: states.name(in_force).to_string(),
        subsystems,
        pending,
        phase: if extras.starting {
            "starting"
        } else if extras.stopping {
            "stopping"
        } else {
            "running"
        }
        .to_string(),
        tick_ns: control.tick().as_u64(),
        major_frame: schedule.major_frame,
        stop_frame: extras.stop_frame,
        window_frames: window,
        states: states.names().iter().map(|s| s.to_string()).collect(),
        next: (word.next != word.previous && word.from_frame > frame)
            .then(|| (states.name(word.next).to_string(), word.from_frame)),
        hosts,
        cells,
        events: extras.events[first..]
            .iter()
            .enumerate()
            .map(|(i, text)| LiveEvent {
                index: (first + i) as u64,
                text: text.clone(),
            })
            .collect(),
        events_total: total as u64,
        misses: extras.misses,
        causes: extras.causes,
    }
}

/// Each cell's writers and its last publication. A subsystem publishes every output
/// at the end of every frame it runs, so the cell's last publication is its writers'
/// last frame (read from their slots: nothing is added to the frame loop); a copy from
/// another host is the link's last arrival.
fn live_cells(
    schedule: &Schedule,
    control: &Control,
    cells: &crate::cell::Cells,
    arrivals: &[Option<(usize, Nanos)>],
    epoch: Option<Nanos>,
    now: Nanos,
) -> Vec<LiveCell> {
    let tick = control.tick();
    let mut element = 0;
    cells
        .table()
        .cells()
        .iter()
        .enumerate()
        .map(|(c, decl)| {
            let mut writers: Vec<usize> = Vec::new();
            for _ in decl.elements() {
                if let Some(w) = control.writer_of(element)
                    && !writers.contains(&w)
                {
                    writers.push(w);
                }
                element += 1;
            }
            // The local writer that ran last.
            let local = writers
                .iter()
                .filter_map(|&w| control.slot(w).view().last_frame.map(|f| (f, w)))
                .max();
            let local_at = local.and_then(|(f, _)| epoch.map(|e| e + tick * f));
            let remote = arrivals.get(c).copied().flatten();
            let (last_writer, frame, at) = match (local, remote) {
                (Some((f, w)), Some((_, r))) if local_at.is_some_and(|l| l >= r) => {
                    (Some(schedule.subsystems[w].name.clone()), Some(f), local_at)
                }
                (_, Some((h, r))) => (
                    Some(format!(
                        "host {}",
                        schedule.hosts.get(h).map_or("?", |x| x.name.as_str())
                    )),
                    None,
                    Some(r),
                ),
                (Some((f, w)), None) => {
                    (Some(schedule.subsystems[w].name.clone()), Some(f), local_at)
                }
                (None, None) => (None, None, None),
            };
            LiveCell {
                name: decl.name().to_string(),
                bytes: decl.bytes(),
                writers: writers
                    .iter()
                    .map(|&w| schedule.subsystems[w].name.clone())
                    .collect(),
                last_writer,
                frame,
                age_ns: at.map(|a| now.saturating_sub(a).as_u64()),
                writes: cells.sequence(c) / 2,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_explain::{Cause, CauseKind};

    fn miss(seq: u64, ns: u64) -> Explained {
        Explained {
            thread: "ctrl".into(),
            cpu: Some(1),
            kind: MissKind::Late,
            seq,
            at_ns: seq * 1_000_000,
            lateness_ns: ns,
            window_ns: 2 * ns,
            causes: vec![ictus_explain::Timed {
                cause: Cause::Steal { ns },
                accounts_ns: ns,
                share: 1.0,
                source: ictus_explain::Source::ProcStatTicks,
            }],
            accounted_ns: ns,
            accounted_share: 1.0,
            causes_sum_ns: ns,
            ..Explained::default()
        }
    }

    #[test]
    fn the_tally_adds_each_miss_once_as_the_snapshots_see_them_again() {
        let mut sut = MissTally::default();
        assert!(sut.chart().is_none());
        let first = vec![miss(1, 10_000_000), miss(2, 20_000_000)];
        sut.update(&first);
        // The next snapshot sees the same two and a new one; then nothing new.
        let second = vec![
            miss(1, 10_000_000),
            miss(2, 20_000_000),
            miss(3, 30_000_000),
        ];
        sut.update(&second);
        sut.update(&second);
        // The oldest fell out of the sampler's last misses: the rest are not added again.
        sut.update(&second[1..]);
        let chart = sut.chart().unwrap();
        assert_eq!(chart.misses, 3);
        assert_eq!(chart.lateness_ns, 60_000_000);
        assert_eq!(chart.causes.len(), 1);
        assert_eq!(chart.causes[0].kind, Some(CauseKind::Steal));
        assert_eq!(chart.causes[0].ns, 60_000_000);
        assert!(chart.advice.as_ref().unwrap().contains("dedicated vCPUs"));
        let json = serde_json::to_value(&chart).unwrap();
        assert_eq!(json["causes"][0]["kind"], "steal");
    }
}
