//! What a run across hosts adds to a run on one (seed 003's distributed framework),
//! without the transport: [`Link`] is what [`crate::run::run`] calls on the
//! coordinator's own thread (never a subsystem's), and `ictus-net` implements it on
//! Zenoh.
//!
//! Every host runs the same executive on its own subsystems: the host's cells and
//! control block live in its shared memory as on one host, and each subsystem is
//! released from this host's monotonic clock at `epoch + frame * tick`. The main
//! coordinator (host 0, `ictus run`) chooses the epoch once every host is ready and
//! sends it; a local coordinator (`ictus node`) converts it to its own clock and
//! publishes it in its control block. Afterwards the main coordinator's tick carries
//! the state and the stop frame to every host, and its arrival measures each host's
//! distance from the main beat. A subsystem's outputs reach the other hosts through
//! the link's forwarder, woken by [`crate::cell::Cells::listen`]'s notice at the end
//! of each frame (and on each early flush): the real-time thread itself only stores,
//! adds and wakes, it never sends.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use ictus_core::Nanos;
use serde::{Deserialize, Serialize};

use crate::cell::Cells;
use crate::control::{Control, Status};
use crate::report::{HostReport, ThreadOutcome};
use crate::state::StateWord;

/// What the main coordinator sends when every host is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    /// The deadline of frame 0, on the clock of the host that reads it.
    pub epoch: Nanos,
    /// The first frame no subsystem runs (`u64::MAX`: until stopped).
    pub stop_frame: u64,
    /// The state word in force.
    pub state: StateWord,
    /// The main host's tick (every host must run the same).
    pub tick: Nanos,
}

/// How often a node's coordinator hands its explained misses to the link
/// ([`Link::explained`]).
pub const EXPLAINED_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A subsystem of another host as its local coordinator last reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSlot {
    /// Its slot in the schedule.
    pub slot: usize,
    /// Its life stage (see [`Status`]).
    pub status: u64,
    /// Frames run.
    pub frames_run: u64,
    /// Overruns.
    pub overruns: u64,
    /// Longest overrun streak.
    pub longest_streak: u64,
    /// The last frame it ran (`u64::MAX`: none yet).
    pub last_frame: u64,
    /// Its largest release jitter so far, ns.
    pub max_jitter_ns: u64,
    /// Its longest execution so far, ns.
    pub max_exec_ns: u64,
    /// Its last acknowledgement, packed ([`crate::state::Ack::pack`]).
    pub ack: u64,
    /// Its last complete jitter window, packed as in the control block.
    #[serde(default)]
    pub window_done: u64,
    /// Frames whose `run` returned an error.
    #[serde(default)]
    pub errors: u64,
    /// The frame in which it asked the run to stop, plus one (0: it did not).
    #[serde(default)]
    pub stop_asked: u64,
}

impl RemoteSlot {
    /// Slot `slot` of `control` as it stands.
    pub fn of(control: &Control, slot: usize) -> RemoteSlot {
        let v = control.slot(slot).view();
        RemoteSlot {
            slot,
            status: v.status as u64,
            frames_run: v.frames_run,
            overruns: v.overruns,
            longest_streak: v.longest_streak,
            last_frame: v.last_frame.unwrap_or(u64::MAX),
            max_jitter_ns: v.max_jitter.as_u64(),
            max_exec_ns: v.max_exec.as_u64(),
            ack: v.ack.map_or(crate::state::Ack::NONE, |a| a.pack()),
            window_done: v
                .window_jitter
                .map_or(0, |(w, j)| crate::control::pack_window(w, j)),
            errors: v.errors,
            stop_asked: v.stop_asked.map_or(0, |f| f.saturating_add(1)),
        }
    }

    /// Its life stage.
    pub fn status(&self) -> Status {
        Status::from_word(self.status)
    }
}

/// Something the link learnt, for the coordinator's loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// Host `host` (an index in the schedule's host table) is alive.
    Joined(usize),
    /// Host `host` left the run: it ended, died or its link was cut.
    Left(usize),
    /// The main coordinator's state word and stop frame (on a node).
    Control {
        /// The state word in force.
        state: StateWord,
        /// The stop frame.
        stop_frame: u64,
    },
    /// A subsystem of another host, as last reported (on the main coordinator).
    Remote(RemoteSlot),
    /// Something another host sent was refused (it was not that host's to send):
    /// reported once per sender and kind; the run is not clean.
    Refused {
        /// The sender, or `unknown`.
        from: String,
        /// What was refused, in words.
        what: String,
    },
    /// What this host's hubs did because a host left (a proxy failed, a
    /// resource released), in words ([`crate::hub::remote::HubReport`]).
    Hub(String),
    /// Host `host` fell silent: on a node, no tick from the main coordinator (host
    /// 0); on the main coordinator, nothing from node `host`; for `for_ns`, longer
    /// than the schedule's bound ([`crate::schedule::Schedule::silence_bound`]).
    /// Reported once per host; the coordinator acts at once.
    Silent {
        /// The host.
        host: usize,
        /// How long nothing came, ns.
        for_ns: u64,
    },
    /// Cell publications of host `from` never reached this host: `total` so far
    /// (gaps in its numbering; a full queue on the way dropped them). Reported at
    /// most once a second per sender, when the total grew.
    Dropped {
        /// The sender.
        from: String,
        /// Its publications that never came, so far.
        total: u64,
    },
    /// Something arrived late (a cell past the frame after its writer's, a tick past
    /// one tick after its deadline), in words: which frame, from which host to which,
    /// how late and where its time went; or how many more were late in a second.
    Late(String),
    /// Something about the link the run's events should say (how it is set up).
    Note(String),
    /// A reader (a tool with a reader's certificate) linked to this host, or its
    /// link closed. A reader gets what it can take; nothing of the run waits on it.
    Reader {
        /// Its name (its certificate's).
        name: String,
        /// Where its link comes from.
        from: String,
        /// Whether it came or went.
        connected: bool,
    },
}

/// The many-host side of a run. Every method is called from the coordinator's own
/// thread (the one that runs [`crate::run::run`]), never from a subsystem's; a link
/// runs its transport on threads of its own.
pub trait Link: Send {
    /// This host's index in the schedule's host table (0: the main coordinator).
    fn host(&self) -> usize;

    /// The run's setup store as this host's subsystems reach it: on the main host,
    /// the store the link serves to the others from the start (a subsystem's `init`
    /// may wait there for a value another host's `init` publishes); on a node, one
    /// whose requests go to it.
    fn setup_store(&self) -> crate::state::SetupStore;

    /// Every local subsystem is ready: forward what they write (`writes`: cell index
    /// and the byte ranges of the elements this host's subsystems write) and copy in
    /// what the other hosts publish. A host announces itself ready here.
    fn ready(&mut self, cells: &Cells, writes: &[(usize, Vec<Range<usize>>)])
    -> Result<(), String>;

    /// The cells this host's subsystems read (by index in the table), told just
    /// before [`ready`](Self::ready): a late copy of another cell costs no frame here.
    fn reads(&mut self, cells: &[usize]) {
        let _ = cells;
    }

    /// The main coordinator: the hosts not ready yet (empty once all are).
    fn waiting_for(&mut self) -> Vec<usize>;

    /// The main coordinator: sends the start and begins the tick.
    fn begin(&mut self, start: Start) -> Result<(), String>;

    /// A node: the start, once the main coordinator has sent it.
    fn start(&mut self) -> Option<Start>;

    /// The main coordinator: a new state word or stop frame, for the next ticks.
    fn command(&mut self, state: StateWord, stop_frame: u64);

    /// Called every few milliseconds during the run: reports what happened, and
    /// passes this host's subsystems (of `control`) to the main coordinator.
    fn poll(&mut self, control: &Control, local: &[usize]) -> Vec<LinkEvent>;

    /// The run ended here. The main coordinator collects the other hosts' outcomes
    /// (by slot) and reports, waiting at most `timeout`; a node offers its own
    /// `outcomes` and [`report`](Self::report) until the main coordinator has them or
    /// `timeout` passes.
    fn finish(
        &mut self,
        outcomes: &BTreeMap<usize, ThreadOutcome>,
        timeout: Duration,
    ) -> (BTreeMap<usize, ThreadOutcome>, Vec<HostReport>);

    /// This host's figures so far.
    fn report(&self) -> HostReport;

    /// The run's hubs as this host holds them (hubs homed elsewhere are proxies):
    /// the link connects them to their homes from now until it ends. Called
    /// once, before any subsystem's `init`. Does nothing by default.
    fn hubs(&mut self, hubs: &crate::hub::Hubs) -> Result<(), String> {
        let _ = hubs;
        Ok(())
    }

    /// On a node, its own explained misses as they stand (the last few, newest
    /// last), for the link to pass the new ones to the main host while the run goes.
    /// Called every [`EXPLAINED_EVERY`] at most. Does nothing by default.
    fn explained(&mut self, misses: &[crate::live::LiveMiss]) {
        let _ = misses;
    }

    /// The hosts as this link sees them, for the live view: every host of the
    /// table, its presence and, for a node, the lateness of the ticks that reached it
    /// (the main host learns a node's from the node's status). Empty by default.
    fn live_hosts(&self) -> Vec<crate::live::LiveHost> {
        Vec::new()
    }

    /// Per cell, the host and time (this host's monotonic clock) of the last copy
    /// that came over the link, for the live view. Empty by default.
    fn cell_arrivals(&self) -> Vec<Option<(usize, Nanos)>> {
        Vec::new()
    }
}
