//! The executive's [`Link`] on Zenoh: what makes `ictus run` the main coordinator
//! of a schedule that spans hosts, and `ictus node` a host's local coordinator.
//!
//! Keys of run `R` (every host opens a peer session that listens on its address in
//! the schedule's host table and connects to the others'):
//!
//! | key | what | who |
//! |---|---|---|
//! | `ictus/R/host/H` | liveliness token: host H is ready and alive | every host |
//! | `ictus/R/setup/clock` | queryable: the main host's clock (offset measurement) | main |
//! | `ictus/R/setup/start` | queryable: the epoch, stop frame and state, once begun | main |
//! | `ictus/R/setup/kv/K` | queryable: the run's setup store (seed 003's setup requests) | main |
//! | `ictus/R/layout` | queryable: the cell table's layout, for tools ([`layout_json`]) | every host |
//! | `ictus/R/claims/H` | queryable: the byte ranges of each cell host H's subsystems write | every host |
//! | `ictus/R/tick` | the tick: frame, deadline, state word, stop frame | main |
//! | `ictus/R/cell/C/H` | host H's elements of cell C, at each publication | writers |
//! | `ictus/R/status/H` | host H's subsystems' counters, every 100 ms | nodes |
//! | `ictus/R/beat/H` | host H is there: the last tick frame it heard ([`crate::silence`]) | nodes |
//! | `ictus/R/outcome/H` | queryable: host H's outcomes and figures, once it ended | nodes |
//!
//! Threads: Zenoh's runtime (spawned when the session opens: it inherits the
//! opener's affinity, which [`ZenohLink::open`] sets to the CPUs without a
//! real-time subsystem, and runs `SCHED_OTHER`), the forwarder (one per host: it
//! sleeps on the cells' notice and publishes what changed) and, on the main host,
//! the tick thread (`SCHED_OTHER` on the same CPUs). No real-time thread calls
//! Zenoh or waits on a lock: subsystems only bump the notice; what Zenoh's threads
//! receive is written into the seqlocked cells (never blocking a reader) or handed
//! over through SPSC rings.
//!
//! Trust ([`crate::security`]): with the run's keys every link is TLS with mutual
//! authentication and Zenoh's access rules let each host publish only under its own
//! name; what a host publishes is then checked against its claims ([`crate::guard`]):
//! a publication with elements it does not write is refused whole, counted and
//! reported. The wire format is docs/wire.md's.

#![allow(
    clippy::disallowed_types,
    reason = "the link's state, stop frame, quit flag and traffic counters, each one word with one writer (Release/Acquire named at each use); Zenoh's threads are the other side, which loom cannot model"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ictus_core::sync::spsc::Consumer;
use ictus_core::{LatencyHistogram, Nanos};
use ictus_exec::cell::Cells;
use ictus_exec::control::Control;
use ictus_exec::link::{Link, LinkEvent, RemoteSlot, Start};
use ictus_exec::report::{Distribution, HostReport, LinkStage, ThreadOutcome};
use ictus_exec::schedule::Schedule;
use ictus_exec::state::{SetupStore, StateWord};
use ictus_os::clock::monotonic_now;
use zenoh::Wait;

use crate::gaps::{Attachment, Gaps};
use crate::guard::{Claims, Guard, Refusal, STATUS_MAX_BYTES};
use crate::health::{HealthEvent, Presence, Watch};
use crate::late::Lateness;
use crate::options::LinkOptions;
use crate::readers::{ReaderEvent, ReaderWatch};
use crate::security::Security;
use crate::silence::Silence;
use crate::tick::{Arrival, END_FRAME, Tick, TickPublisher, TickSubscriber};
use crate::view::{LatestTick, View};
use crate::{Endpoint, Endpoints, NetError, Protocol, Session};

mod claims;
mod clock;
mod forward;
mod intake;
mod setup;
mod stages;
mod status;
/// The session of `host` of `schedule` in run `run` (with the names `hosts`): over
/// QUIC with TLS and the run's access rules, or plain TCP.
fn open_session(
    schedule: &Schedule,
    host: usize,
    run: &str,
    security: &Security,
    hosts: &[String],
    options: &LinkOptions,
) -> Result<Session, NetError> {
    let bound = message_bound(schedule);
    match security {
        Security::Insecure => crate::open_bounded(
            &endpoints_of(schedule, host, Protocol::Tcp, options)?,
            bound,
        ),
        Security::Tls(credentials) => {
            let readers = crate::security::readers_in(&credentials.dir);
            let names = crate::keys::common_names(&credentials.dir).map_err(NetError::Keys)?;
            let rules = crate::security::access_rules_named(run, hosts, &readers, &names);
            crate::open_secure_bounded(
                &endpoints_of(schedule, host, Protocol::Quic, options)?,
                credentials,
                Some(&rules),
                bound,
            )
        }
    }
}

/// The guard of the cells of `schedule`, each host (of `hosts`) knowing the
/// elements it is scheduled to write.
fn guard_of(schedule: &Schedule, hosts: &[String]) -> Guard {
    let table = schedule.cell_table().unwrap_or_default();
    let cell_names = table.cells().iter().map(|c| c.name().to_string()).collect();
    let mut guard = Guard::new(hosts.to_vec(), cell_names);
    for h in 0..hosts.len() {
        if let Some(w) = schedule.host_writes(&table, h) {
            guard.set_scheduled(h, w);
        }
    }
    guard
}

#[cfg(test)]
mod tests;
mod wire;

use intake::{Arrivals, CellCounts, Intake};
use setup::ZenohSetup;
use stages::Stages;
use status::{
    Handover, LATE_PER_STATUS, NodeStatus, STATUS_EVERY, TickFigures, miss_words, new_since,
    without_control,
};
pub(crate) use wire::Publication;
use wire::read_claims;
pub use wire::{WIRE_VERSION, layout_json, message_bound, publication_bytes};

/// Exchanges of the clock measurement; the one with the shortest round trip counts.
const CLOCK_SAMPLES: usize = 16;
/// The forwarder's nice value (and the tick thread's): first among normal threads.
const FORWARDER_NICE: i32 = -10;
/// What the main host sends a node once it has read its hand-over.
const COLLECTED: &[u8] = b"collected";
/// The longest a forwarder sleeps between scans (it is woken by every publication).
const FORWARD_NAP: Duration = Duration::from_millis(20);
/// How long a host that seems to have left is asked whether it is still there.
const LIVENESS_CHECK: Duration = Duration::from_millis(200);
/// Setup requests the main host answers at once; more are refused ("busy") and
/// asked again by their node.
const SETUP_IN_FLIGHT: usize = 64;
fn zerr(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The endpoints of host `host` of `schedule`: it listens on its address and
/// connects to every other host's (QUIC or TCP), without multicast scouting; QUIC
/// endpoints carry `options`' metadata (`quic=mixed`: `?mixed_rel=1`).
pub fn endpoints_of(
    schedule: &Schedule,
    host: usize,
    protocol: Protocol,
    options: &LinkOptions,
) -> Result<Endpoints, NetError> {
    let metadata = match protocol {
        Protocol::Quic => options.quic.metadata().unwrap_or_default().to_string(),
        _ => String::new(),
    };
    let to = |h: &ictus_exec::schedule::HostSpec| Endpoint {
        protocol,
        address: h.address,
        metadata: metadata.clone(),
    };
    let listen = vec![to(&schedule.hosts[host])];
    let connect = schedule
        .hosts
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != host)
        .map(|(_, h)| to(h))
        .collect();
    Ok(Endpoints {
        listen,
        connect,
        multicast: false,
    })
}

/// The forwarder and the tick thread: no timer slack (their sleeps end on time) and
/// ahead of the other normal threads on their CPUs (Zenoh's, the coordinator's), still
/// in the normal class, since they call Zenoh, which locks and allocates. Without
/// CAP_SYS_NICE the nice value is refused and they run at 0.
fn first_among_normal_threads() {
    let _ = ictus_os::sched::set_timer_slack(1);
    let _ = ictus_os::sched::set_policy(ictus_os::sched::Policy::Other {
        nice: FORWARDER_NICE,
    });
}

/// What flows to the tick thread: the state and stop frame to send, and its end.
struct TickShared {
    state: AtomicU64,
    stop: AtomicU64,
    quit: AtomicBool,
    sent: AtomicU64,
    bytes: AtomicU64,
}

/// [`Link`] on a Zenoh session.
pub struct ZenohLink {
    run: String,
    host: usize,
    hosts: Vec<String>,
    tick_period: Nanos,
    /// Hosts other than the main one that run subsystems (the main one waits for them).
    needed: BTreeSet<usize>,
    session: Session,
    store: SetupStore,
    presence: Option<Presence>,
    watch: Option<(Watch, Consumer<HealthEvent>)>,
    joined: BTreeSet<usize>,
    /// The readers linked to this host, as they come and go.
    readers: Option<(ReaderWatch, Consumer<ReaderEvent>)>,
    /// The other hosts' silence: a node's beats and the main host's ticks.
    silence: Silence,
    queryables: Vec<zenoh::query::Queryable<()>>,
    subscribers: Vec<zenoh::pubsub::Subscriber<()>>,
    // The main host.
    start_word: Arc<Mutex<Option<[u8; 32]>>>,
    tick: Option<(JoinHandle<()>, Arc<TickShared>)>,
    /// The tick thread's counters, kept after it ends.
    tick_counts: Option<Arc<TickShared>>,
    status_ring: Option<Consumer<(usize, NodeStatus)>>,
    /// Each node's last tick figures.
    node_ticks: BTreeMap<usize, TickFigures>,
    /// Per cell, the host and time of the last copy that came over the link.
    arrivals: Arc<Mutex<Arrivals>>,
    // A node.
    offset: Option<(i64, u64)>,
    /// Shared with the cell subscriber: this host's offset, once measured.
    offset_ns: Arc<AtomicU64>,
    next_try: Instant,
    start: Option<Start>,
    ticks: Option<(TickSubscriber, Consumer<Arrival>)>,
    tick_lateness: LatencyHistogram,
    /// The largest lateness since the last status.
    recent_late: Option<u64>,
    ticks_seen: u64,
    ticks_missing: u64,
    last_tick: Option<u64>,
    last_control: Option<(StateWord, u64)>,
    status_pub: Option<zenoh::pubsub::Publisher<'static>>,
    last_status: Instant,
    status_bytes: u64,
    handover: Arc<Mutex<Option<Vec<u8>>>>,
    collected: Arc<AtomicBool>,
    // Both.
    /// Hosts that run subsystems (whose claims are asked for).
    writers: BTreeSet<usize>,
    /// Each subsystem's host, by the schedule: what a host may report about.
    slot_hosts: Vec<usize>,
    /// What is checked of the other hosts' publications, and what was refused.
    guard: Arc<Mutex<Guard>>,
    /// Copies the other hosts' publications in (shared with the cell subscriber).
    intake: Option<Arc<Intake>>,
    /// The thread learning the other hosts' claims, and its stop.
    claims_thread: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
    forwarder: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
    counts: Arc<CellCounts>,
    latency: Arc<Mutex<LatencyHistogram>>,
    forward_delay: Arc<Mutex<LatencyHistogram>>,
    /// This host's hubs connected to the other hosts' ([`Link::hubs`]).
    hub_link: Option<crate::hubs::HubLink>,
    /// The stages' delays: the sending ones (the forwarder's, once it ended) and the
    /// receiving ones (the cell subscriber's).
    stages: Arc<Mutex<Stages>>,
    /// The other hosts' publications that never came (shared with the intake), and
    /// the counts last reported.
    gaps: Arc<Mutex<Gaps>>,
    dropped_told: Vec<u64>,
    dropped_next: Instant,
    /// What arrived late here (shared with the intake), and on a node what the
    /// next status takes to the main host.
    lateness: Arc<Mutex<Lateness>>,
    late_words: Vec<String>,
    /// The cells this host's subsystems read, once told ([`Link::reads`]).
    read_here: Option<Vec<usize>>,
    /// On a node: its explained misses not yet in a status, in words, and the last
    /// ones handed over (to tell the new ones from them).
    explained_words: Vec<String>,
    explained_seen: Vec<ictus_exec::live::LiveMiss>,
    /// How it publishes ([`crate::options`]), said once in the run's events when
    /// not the defaults.
    options: LinkOptions,
    options_said: bool,
    /// What readers get ([`crate::view`]), and the main host's latest tick for it.
    view: Option<View>,
    latest_tick: LatestTick,
}

impl ZenohLink {
    /// Opens host `host`'s session for run `run` of `schedule`: with TLS and the
    /// run's access rules, or (`Security::Insecure`) plain TCP.
    ///
    /// Zenoh's threads are kept off the CPUs of this host's real-time subsystems:
    /// they inherit the opener's affinity, so the calling thread is first moved to
    /// the other CPUs ([`cpus_off_rt`](ictus_exec::role::Role::cpus_off_rt), when
    /// there are any), and stays there: it is the run's coordinator, which the
    /// executive keeps there too.
    pub fn open(
        schedule: &Schedule,
        host: usize,
        run: &str,
        security: &Security,
    ) -> Result<ZenohLink, NetError> {
        let options = LinkOptions::from_env().map_err(NetError::Zenoh)?;
        let off_rt = ictus_exec::role::Role::of_host(host).cpus_off_rt(schedule);
        if !off_rt.is_empty() {
            let _ = ictus_os::sched::set_affinity(&off_rt);
        }
        let hosts: Vec<String> = schedule.hosts.iter().map(|h| h.name.clone()).collect();
        let session = open_session(schedule, host, run, security, &hosts, &options)?;
        let guard = guard_of(schedule, &hosts);
        let needed = schedule
            .subsystems
            .iter()
            .map(|s| s.host)
            .filter(|&h| h != 0)
            .collect();
        let mut link = ZenohLink {
            run: run.to_string(),
            host,
            writers: schedule.subsystems.iter().map(|s| s.host).collect(),
            slot_hosts: schedule.subsystems.iter().map(|s| s.host).collect(),
            guard: Arc::new(Mutex::new(guard)),
            intake: None,
            claims_thread: None,
            hosts,
            tick_period: schedule.tick,
            needed,
            session,
            store: SetupStore::new(),
            presence: None,
            watch: None,
            joined: BTreeSet::new(),
            readers: None,
            silence: Silence::new(schedule.silence_bound()),
            queryables: Vec::new(),
            subscribers: Vec::new(),
            start_word: Arc::new(Mutex::new(None)),
            tick: None,
            tick_counts: None,
            status_ring: None,
            node_ticks: BTreeMap::new(),
            arrivals: Arc::new(Mutex::new(Vec::new())),
            offset: None,
            offset_ns: Arc::new(AtomicU64::new(0)),
            next_try: Instant::now(),
            start: None,
            ticks: None,
            tick_lateness: LatencyHistogram::new(),
            recent_late: None,
            ticks_seen: 0,
            ticks_missing: 0,
            last_tick: None,
            last_control: None,
            status_pub: None,
            last_status: Instant::now(),
            status_bytes: 0,
            handover: Arc::new(Mutex::new(None)),
            collected: Arc::new(AtomicBool::new(false)),
            forwarder: None,
            counts: Arc::new(CellCounts::default()),
            latency: Arc::new(Mutex::new(LatencyHistogram::new())),
            forward_delay: Arc::new(Mutex::new(LatencyHistogram::new())),
            hub_link: None,
            stages: Arc::new(Mutex::new(Stages::new())),
            gaps: Arc::new(Mutex::new(Gaps::new(0, 0))),
            dropped_told: Vec::new(),
            dropped_next: Instant::now(),
            lateness: Arc::new(Mutex::new(Lateness::new(&schedule.hosts[host].name))),
            late_words: Vec::new(),
            read_here: None,
            explained_words: Vec::new(),
            explained_seen: Vec::new(),
            options,
            options_said: false,
            view: None,
            latest_tick: Arc::new(Mutex::new(None)),
        };
        if host == 0 {
            // The setup channel serves from the start: a subsystem's `init` on one
            // host may wait for a value another host's `init` publishes.
            link.serve_setup().map_err(NetError::Zenoh)?;
        }
        Ok(link)
    }

    fn key(&self, rest: &str) -> String {
        format!("ictus/{}/{rest}", self.run)
    }

    /// Serves the main host's setup channel: its clock, the start, the setup store.
    fn serve_setup(&mut self) -> Result<(), String> {
        let clock = self
            .session
            .declare_queryable(self.key("setup/clock"))
            .callback(|query| {
                let now = monotonic_now().as_u64().to_le_bytes().to_vec();
                let _ = query.reply(query.key_expr().clone(), now).wait();
            })
            .wait()
            .map_err(zerr)?;
        let word = Arc::clone(&self.start_word);
        let start = self
            .session
            .declare_queryable(self.key("setup/start"))
            .callback(move |query| {
                let w = *word.lock().unwrap_or_else(|e| e.into_inner());
                let _ = match w {
                    Some(bytes) => query.reply(query.key_expr().clone(), bytes.to_vec()).wait(),
                    None => query.reply_err("not started").wait(),
                };
            })
            .wait()
            .map_err(zerr)?;
        let store = self.store.clone();
        let prefix = self.key("setup/kv/");
        let guard = Arc::clone(&self.guard);
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let kv = self
            .session
            .declare_queryable(self.key("setup/kv/**"))
            .callback(move |query| {
                // Relaxed (both): a bound on concurrent callbacks, nothing ordered by it.
                if in_flight.fetch_add(1, Ordering::Relaxed) >= SETUP_IN_FLIGHT {
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                    let _ = query.reply_err("busy: ask again").wait();
                    return;
                }
                let key = query
                    .key_expr()
                    .as_str()
                    .strip_prefix(&prefix)
                    .unwrap_or_default()
                    .to_string();
                let _ = match query.payload() {
                    Some(value) => {
                        let value = value.to_bytes().into_owned();
                        match store.put(&key, value) {
                            Ok(()) => query.reply(query.key_expr().clone(), Vec::new()).wait(),
                            Err(e) => {
                                guard
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .refuse(None, Refusal::SetupRefused);
                                query.reply_err(e.to_string()).wait()
                            }
                        }
                    }
                    // Never blocking Zenoh's thread: the asker waits, by asking again.
                    None => match store.get(&key, Duration::ZERO) {
                        Ok(v) => query.reply(query.key_expr().clone(), v).wait(),
                        Err(e) => query.reply_err(e.to_string()).wait(),
                    },
                };
                in_flight.fetch_sub(1, Ordering::Relaxed);
            })
            .wait()
            .map_err(zerr)?;
        self.queryables.extend([clock, start, kv]);
        let (ring, consumer) = crate::handoff::<(usize, NodeStatus)>(256);
        let prefix = self.key("status/");
        let hosts = self.hosts.clone();
        let guard = Arc::clone(&self.guard);
        let status = self
            .session
            .declare_subscriber(self.key("status/*"))
            .callback(move |sample| {
                let name = sample.key_expr().as_str().strip_prefix(&prefix);
                let h = name.and_then(|n| hosts.iter().position(|x| x == n));
                let payload = sample.payload();
                let status = (payload.len() <= STATUS_MAX_BYTES)
                    .then(|| serde_json::from_slice::<NodeStatus>(&payload.to_bytes()).ok())
                    .flatten();
                match (h, status) {
                    (Some(h), Some(status)) if h != 0 => {
                        let _ = ring.push((h, status));
                    }
                    (h, _) => guard
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .refuse(h, Refusal::BadStatus),
                }
            })
            .wait()
            .map_err(zerr)?;
        self.subscribers.push(status);
        self.status_ring = Some(consumer);
        Ok(())
    }

    /// A node's hand-over point: its outcomes, once it ended.
    fn serve_outcome(&mut self) -> Result<(), String> {
        let handover = Arc::clone(&self.handover);
        let collected = Arc::clone(&self.collected);
        let q = self
            .session
            .declare_queryable(self.key(&format!("outcome/{}", self.hosts[self.host])))
            .callback(move |query| {
                // The main host acknowledges what it read (a query carrying
                // `collected`): only then may this host leave. A reply sent is not a
                // reply read (the query may have timed out on the way).
                if query
                    .payload()
                    .is_some_and(|p| p.to_bytes().as_ref() == COLLECTED)
                {
                    // Relaxed: a flag the finishing thread polls.
                    collected.store(true, Ordering::Relaxed);
                    let _ = query.reply(query.key_expr().clone(), Vec::new()).wait();
                    return;
                }
                let h = handover.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let _ = match h {
                    Some(bytes) => query.reply(query.key_expr().clone(), bytes).wait(),
                    None => query.reply_err("running").wait(),
                };
            })
            .wait()
            .map_err(zerr)?;
        self.queryables.push(q);
        Ok(())
    }

    /// Copies the other hosts' cell publications into `cells` (once checked against
    /// their claims), measuring their delay.
    fn subscribe_cells(
        &mut self,
        cells: &Cells,
        mine: &[(usize, Vec<Range<usize>>)],
    ) -> Result<(), String> {
        *self.arrivals.lock().unwrap_or_else(|e| e.into_inner()) = vec![None; cells.len()];
        *self.gaps.lock().unwrap_or_else(|e| e.into_inner()) =
            Gaps::new(cells.len(), self.hosts.len());
        let intake = Arc::new(Intake {
            cells: cells.clone(),
            here: self.host,
            ours: mine.to_vec(),
            door: ictus_exec::cell::ForeignWrites::new(cells, mine),
            guard: Arc::clone(&self.guard),
            counts: Arc::clone(&self.counts),
            latency: Arc::clone(&self.latency),
            stages: Arc::clone(&self.stages),
            offset: Arc::clone(&self.offset_ns),
            arrivals: Arc::clone(&self.arrivals),
            gaps: Arc::clone(&self.gaps),
            lateness: Arc::clone(&self.lateness),
            hosts: self.hosts.clone(),
        });
        self.intake = Some(Arc::clone(&intake));
        let prefix = self.key("cell/");
        let sub = self
            .session
            .declare_subscriber(self.key("cell/*/*"))
            .callback(move |sample| {
                let now = monotonic_now();
                let rest = sample
                    .key_expr()
                    .as_str()
                    .strip_prefix(&prefix)
                    .unwrap_or_default();
                let (name, host) = rest.split_once('/').unwrap_or((rest, ""));
                let (handed, number) = sample
                    .attachment()
                    .map_or((None, None), |a| Attachment::decode(&a.to_bytes()));
                intake.arrive(
                    name,
                    host,
                    &sample.payload().to_bytes(),
                    now,
                    handed,
                    number,
                );
            })
            .wait()
            .map_err(zerr)?;
        self.subscribers.push(sub);
        Ok(())
    }
}

impl Link for ZenohLink {
    fn host(&self) -> usize {
        self.host
    }

    fn hubs(&mut self, hubs: &ictus_exec::hub::Hubs) -> Result<(), String> {
        if hubs.decls().is_empty() {
            return Ok(());
        }
        let link =
            crate::hubs::HubLink::start(&self.session, &self.run, &self.hosts, self.host, hubs);
        self.hub_link = Some(link.map_err(|e| e.to_string())?);
        Ok(())
    }

    fn setup_store(&self) -> SetupStore {
        if self.host == 0 {
            self.store.clone()
        } else {
            SetupStore::with_upstream(Arc::new(ZenohSetup {
                session: self.session.clone(),
                prefix: self.key("setup/kv/"),
            }))
        }
    }

    fn reads(&mut self, cells: &[usize]) {
        self.read_here = Some(cells.to_vec());
    }

    fn ready(
        &mut self,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
    ) -> Result<(), String> {
        if let Some(read) = &self.read_here {
            let table = cells.table().cells();
            let names = read
                .iter()
                .filter_map(|&c| table.get(c).map(|t| t.name().to_string()))
                .collect();
            self.lateness
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .reads(names);
        }
        self.subscribe_cells(cells, writes)?;
        if self.host != 0 {
            self.serve_outcome()?;
            self.ticks =
                Some(crate::tick::subscribe(&self.session, &self.run, 1 << 14).map_err(zerr)?);
            let p = self
                .session
                .declare_publisher(self.key(&format!("status/{}", self.hosts[self.host])))
                .wait()
                .map_err(zerr)?;
            self.status_pub = Some(p);
            self.silence.node_ready(
                &self.session,
                &self.run,
                &self.hosts[self.host],
                self.options.tick,
            )?;
        } else {
            self.silence
                .main_ready(&self.session, &self.run, &self.hosts)?;
        }
        self.serve_claims(cells, writes)?;
        self.learn_claims()?;
        self.forward(cells, writes)?;
        self.watch = Some(crate::health::watch(&self.session, &self.run, 256).map_err(zerr)?);
        self.readers = Some(crate::readers::watch(&self.session, 256).map_err(zerr)?);
        self.presence = Some(
            crate::health::announce(&self.session, &self.run, &self.hosts[self.host])
                .map_err(zerr)?,
        );
        Ok(())
    }

    fn waiting_for(&mut self) -> Vec<usize> {
        let mut events = Vec::new();
        self.drain_health(&mut events);
        self.needed
            .iter()
            .copied()
            .filter(|h| !self.joined.contains(h))
            .collect()
    }

    fn begin(&mut self, start: Start) -> Result<(), String> {
        let mut word = [0u8; 32];
        for (chunk, w) in word.chunks_exact_mut(8).zip([
            start.epoch.as_u64(),
            start.stop_frame,
            start.state.pack(),
            start.tick.as_u64(),
        ]) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        *self.start_word.lock().unwrap_or_else(|e| e.into_inner()) = Some(word);
        self.silence
            .timing(start.epoch, self.tick_period, start.stop_frame);
        self.lateness
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .timing(start.epoch, self.tick_period);
        let publisher =
            TickPublisher::with(&self.session, &self.run, &self.options).map_err(zerr)?;
        let shared = Arc::new(TickShared {
            state: AtomicU64::new(start.state.pack()),
            stop: AtomicU64::new(start.stop_frame),
            quit: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let latest = Arc::clone(&self.latest_tick);
        let period = self.tick_period;
        let handle = std::thread::Builder::new()
            .name("ictus-tick".into())
            .spawn(move || {
                // The tick's own lateness is what every host's arrival starts from.
                first_among_normal_threads();
                let mut frame = 0u64;
                loop {
                    // Relaxed (all): values the coordinator's loop sets, each read on its own.
                    let stop = s.stop.load(Ordering::Relaxed);
                    if s.quit.load(Ordering::Relaxed) || frame >= stop {
                        break;
                    }
                    let deadline = start.epoch + period * frame;
                    ictus_os::wait::sleep_until(deadline);
                    let t = Tick {
                        frame,
                        deadline,
                        sent: monotonic_now(),
                        state: s.state.load(Ordering::Relaxed),
                        stop,
                    };
                    *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
                    if publisher.send(t).is_ok() {
                        s.sent.fetch_add(1, Ordering::Relaxed);
                        s.bytes
                            .fetch_add(crate::tick::TICK_BYTES as u64, Ordering::Relaxed);
                    }
                    frame += 1;
                }
                let now = monotonic_now();
                let end = Tick {
                    frame: END_FRAME,
                    deadline: now,
                    sent: now,
                    state: s.state.load(Ordering::Relaxed),
                    stop: s.stop.load(Ordering::Relaxed),
                };
                *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
                let _ = publisher.send(end);
            })
            .map_err(zerr)?;
        self.tick_counts = Some(Arc::clone(&shared));
        self.tick = Some((handle, shared));
        Ok(())
    }

    fn start(&mut self) -> Option<Start> {
        if self.start.is_none() && Instant::now() >= self.next_try {
            self.next_try = Instant::now() + Duration::from_millis(50);
            self.start = self.ask_start();
            if let Some(s) = self.start {
                self.silence.timing(s.epoch, s.tick, s.stop_frame);
                self.lateness
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .timing(s.epoch, s.tick);
            }
        }
        self.start
    }

    fn command(&mut self, state: StateWord, stop_frame: u64) {
        if let Some((_, s)) = &self.tick {
            // Relaxed: each read on its own by the tick thread.
            s.state.store(state.pack(), Ordering::Relaxed);
            s.stop.store(stop_frame, Ordering::Relaxed);
        }
        self.silence.stop(stop_frame);
    }

    fn poll(&mut self, control: &Control, local: &[usize]) -> Vec<LinkEvent> {
        let mut events = Vec::new();
        self.drain_health(&mut events);
        self.refusals(&mut events);
        self.first_notes(&mut events);
        self.late_here(&mut events);
        self.dropped(&mut events);
        if let Some((_, ring)) = self.readers.as_mut() {
            while let Some(r) = ring.pop() {
                events.push(LinkEvent::Reader {
                    name: r.name,
                    from: r.from,
                    connected: r.connected,
                });
            }
        }
        if self.host == 0 {
            self.main_poll(&mut events);
        } else {
            self.node_poll(control, local, &mut events);
        }
        events
    }

    fn finish(
        &mut self,
        outcomes: &BTreeMap<usize, ThreadOutcome>,
        timeout: Duration,
    ) -> (BTreeMap<usize, ThreadOutcome>, Vec<HostReport>) {
        // The last publications go out first.
        self.stop_threads();
        let deadline = Instant::now() + timeout;
        if self.host != 0 {
            // A node waits longer than the main host collects (which may wait for
            // the other nodes first).
            let deadline = deadline + timeout;
            let report = self.report();
            let json = serde_json::to_vec(&Handover {
                outcomes: outcomes.clone(),
                report,
            })
            .unwrap_or_default();
            *self.handover.lock().unwrap_or_else(|e| e.into_inner()) = Some(json);
            let mut events = Vec::new();
            // Relaxed: set by the queryable's callback once the main host said it
            // has the hand-over.
            // A node whose main host fell silent offers it for no longer than the
            // bound: a main host that comes back in that time still collects it.
            let deadline = if self.silence.main_silent() {
                Instant::now() + Duration::from_nanos(self.silence.bound().as_u64())
            } else {
                deadline
            };
            while !self.collected.load(Ordering::Relaxed) && Instant::now() < deadline {
                self.drain_health(&mut events);
                if events.contains(&LinkEvent::Left(0)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            return (BTreeMap::new(), Vec::new());
        }
        let mut all = BTreeMap::new();
        let mut reports = Vec::new();
        let needed: Vec<usize> = self.needed.iter().copied().collect();
        for h in needed {
            let key = self.key(&format!("outcome/{}", self.hosts[h]));
            let mut events = Vec::new();
            'host: while Instant::now() < deadline {
                self.drain_health(&mut events);
                if !self.joined.contains(&h) {
                    // Gone (killed, cut off) before it handed anything over.
                    break;
                }
                if let Ok(replies) = self
                    .session
                    .get(&key)
                    .timeout(Duration::from_millis(1000))
                    .wait()
                {
                    while let Ok(reply) = replies.recv() {
                        if let Ok(sample) = reply.result()
                            && let Ok(hand) =
                                serde_json::from_slice::<Handover>(&sample.payload().to_bytes())
                        {
                            // Another host's words, shown without control characters;
                            // outcomes only of its own subsystems.
                            let hand = without_control(hand);
                            for (slot, outcome) in hand.outcomes {
                                if self.slot_hosts.get(slot) == Some(&h) {
                                    all.insert(slot, outcome);
                                } else {
                                    self.guard
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .refuse(Some(h), Refusal::NotItsSubsystem);
                                }
                            }
                            reports.push(hand.report);
                            // Best effort: a node not told waits out its own limit.
                            let _ = self
                                .session
                                .get(&key)
                                .payload(COLLECTED.to_vec())
                                .timeout(Duration::from_millis(1000))
                                .wait()
                                .map(|r| r.recv());
                            break 'host;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        (all, reports)
    }

    fn explained(&mut self, misses: &[ictus_exec::live::LiveMiss]) {
        if self.host == 0 {
            return;
        }
        for m in new_since(&self.explained_seen, misses) {
            if self.explained_words.len() < LATE_PER_STATUS {
                self.explained_words.push(miss_words(m));
            }
        }
        self.explained_seen = misses.to_vec();
    }

    fn live_hosts(&self) -> Vec<ictus_exec::live::LiveHost> {
        (0..self.hosts.len())
            .map(|h| {
                let tick = if h == 0 {
                    None
                } else if h == self.host {
                    Some(self.tick_figures())
                } else {
                    self.node_ticks.get(&h).copied()
                };
                ictus_exec::live::LiveHost {
                    name: self.hosts[h].clone(),
                    role: if h == 0 { "main" } else { "node" }.to_string(),
                    alive: h == self.host || self.joined.contains(&h),
                    ticks: tick.map_or(0, |t| t.ticks),
                    ticks_missing: tick.map_or(0, |t| t.missing),
                    tick_late_p50_ns: tick.and_then(|t| t.p50_ns),
                    tick_late_max_ns: tick.and_then(|t| t.max_ns),
                    tick_late_recent_ns: tick.and_then(|t| t.recent_ns),
                    ..self.cell_latency_figures(h)
                }
            })
            .collect()
    }

    fn cell_arrivals(&self) -> Vec<Option<(usize, Nanos)>> {
        self.arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn report(&self) -> HostReport {
        let main = self.host == 0;
        let (ticks_sent, tick_bytes) = self.tick_counts.as_ref().map_or((0, 0), |s| {
            // Relaxed: counters.
            (
                s.sent.load(Ordering::Relaxed),
                s.bytes.load(Ordering::Relaxed),
            )
        });
        // One lock, taken and let go before the report's other locks (a guard in a
        // field's expression would live to the end of the whole literal).
        let (late, late_by) = {
            let l = self.lateness.lock().unwrap_or_else(|e| e.into_inner());
            (l.total(), l.figures())
        };
        let latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed (all): counters.
        let cells_sent = self.counts.sent.load(Ordering::Relaxed);
        HostReport {
            name: self.hosts[self.host].clone(),
            role: if main { "main" } else { "node" }.to_string(),
            clock_offset_ns: self.offset.map_or(0, |o| o.0),
            clock_uncertainty_ns: self.offset.map_or(0, |o| o.1),
            ticks: self.ticks_seen,
            ticks_sent_or_missing: if main { ticks_sent } else { self.ticks_missing },
            tick_lateness: (!main).then(|| Distribution::of(&self.tick_lateness)),
            cells_received: self.counts.received.load(Ordering::Relaxed),
            cells_sent,
            bytes_sent: self.counts.bytes.load(Ordering::Relaxed) + tick_bytes + self.status_bytes,
            cell_latency: (latency.count() > 0).then(|| Distribution::of(&latency)),
            forward_delay: {
                let d = self.forward_delay.lock().unwrap_or_else(|e| e.into_inner());
                (d.count() > 0).then(|| Distribution::of(&d))
            },
            refused: self
                .guard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .figures(),
            late,
            late_by,
            dropped: self
                .gaps
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .dropped()
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n > 0)
                .map(|(h, &count)| ictus_exec::report::DroppedFigure {
                    from: self.hosts[h].clone(),
                    count,
                })
                .collect(),
            stages: self
                .stages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .figures(),
        }
    }
}

impl ZenohLink {
    /// Stops the forwarder and the tick thread, if running, and waits for them.
    fn stop_threads(&mut self) {
        if let Some((h, quit)) = self.claims_thread.take() {
            // Relaxed: a stop request; the join orders the rest.
            quit.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        if let Some((h, quit)) = self.forwarder.take() {
            // Relaxed: a stop request; the join orders the rest.
            quit.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        if let Some((h, s)) = self.tick.take() {
            // Relaxed: a stop request; the join orders the rest.
            s.quit.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        // After the tick thread: its last tick is in the last view.
        if let Some(v) = self.view.as_mut() {
            v.stop();
        }
    }

    /// Health events since the last call: joins and leaves of known hosts.
    /// A node's tick lateness so far.
    /// The latency of the cells that came over the link, on this host's entry of
    /// the live view (another host's is its own to measure).
    fn cell_latency_figures(&self, h: usize) -> ictus_exec::live::LiveHost {
        if h != self.host {
            return ictus_exec::live::LiveHost::default();
        }
        let l = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        ictus_exec::live::LiveHost {
            cell_latency_p50_ns: l.percentile(ictus_core::Percentile::P50).map(Nanos::as_u64),
            cell_latency_p99_ns: l.percentile(ictus_core::Percentile::P99).map(Nanos::as_u64),
            cell_latency_max_ns: l.max().map(Nanos::as_u64),
            ..ictus_exec::live::LiveHost::default()
        }
    }

    fn tick_figures(&self) -> TickFigures {
        let h = &self.tick_lateness;
        TickFigures {
            ticks: self.ticks_seen,
            missing: self.ticks_missing,
            p50_ns: h.percentile(ictus_core::Percentile::P50).map(Nanos::as_u64),
            max_ns: h.max().map(Nanos::as_u64),
            recent_ns: self.recent_late,
        }
    }

    /// Whether host `name`'s token still answers a liveliness query: a token seen to
    /// go is gone only then. Zenoh 1.10.2 in peer mode was seen to drop a live host's
    /// token from this host's view when a third host died (the main host then gave
    /// up collecting the live host's outcomes). Asked on the coordinator's thread, at
    /// most 200 ms, only when a token goes.
    fn still_alive(&self, name: &str) -> bool {
        self.session
            .liveliness()
            .get(crate::health::key(&self.run, name))
            .timeout(LIVENESS_CHECK)
            .wait()
            .ok()
            .and_then(|replies| replies.recv().ok())
            .is_some_and(|r| r.result().is_ok())
    }

    /// The writes refused since the last poll: the guard's, and the hubs' (a count
    /// past its bound is a refusal like any other).
    fn refusals(&self, events: &mut Vec<LinkEvent>) {
        let refused = self
            .guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .new_refusals();
        events.extend(
            refused
                .into_iter()
                .map(|(from, what)| LinkEvent::Refused { from, what }),
        );
        if let Some(hubs) = &self.hub_link {
            events.extend(hubs.reports().into_iter().map(|r| match r {
                // A count past its bound is a refusal like any other: reported
                // as the sender's, and the run is not clean.
                ictus_exec::hub::remote::HubReport::Refused { ref host, .. } => {
                    LinkEvent::Refused {
                        from: host.clone(),
                        what: r.to_string(),
                    }
                }
                other => LinkEvent::Hub(other.to_string()),
            }));
        }
    }

    /// On the first poll, the notes on how this host's link publishes.
    fn first_notes(&mut self, events: &mut Vec<LinkEvent>) {
        if self.options_said {
            return;
        }
        self.options_said = true;
        if !self.options.is_default() {
            events.push(LinkEvent::Note(format!(
                "this host's link publishes with {} ({})",
                self.options.words(),
                crate::options::VAR
            )));
        }
        if let Ok(runtime) = std::env::var("ZENOH_RUNTIME") {
            events.push(LinkEvent::Note(format!(
                "this host's Zenoh runtime: ZENOH_RUNTIME={runtime}"
            )));
        }
    }

    /// What came late here: the coordinator's events, and on a node the main
    /// host's too (with the next status).
    fn late_here(&mut self, events: &mut Vec<LinkEvent>) {
        let late = self
            .lateness
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(monotonic_now());
        if self.host != 0 {
            self.late_words.extend(late.iter().cloned());
        }
        events.extend(late.into_iter().map(LinkEvent::Late));
    }

    /// At most once a second, each host whose count of dropped publications grew.
    fn dropped(&mut self, events: &mut Vec<LinkEvent>) {
        if Instant::now() < self.dropped_next {
            return;
        }
        self.dropped_next = Instant::now() + Duration::from_secs(1);
        let dropped = self
            .gaps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped()
            .to_vec();
        self.dropped_told.resize(dropped.len(), 0);
        for (h, total) in dropped.into_iter().enumerate() {
            if total > self.dropped_told[h] {
                self.dropped_told[h] = total;
                events.push(LinkEvent::Dropped {
                    from: self.hosts[h].clone(),
                    total,
                });
            }
        }
    }

    /// The main host's poll: the nodes' statuses, and the nodes gone silent.
    fn main_poll(&mut self, events: &mut Vec<LinkEvent>) {
        if let Some(ring) = self.status_ring.as_mut() {
            while let Some((h, status)) = ring.pop() {
                self.node_ticks.insert(h, status.tick);
                let from = self.hosts.get(h).cloned().unwrap_or_default();
                let own = |slot: usize| self.slot_hosts.get(slot) == Some(&h);
                if !status.into_events(&from, own, events) {
                    self.guard
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .refuse(Some(h), Refusal::NotItsSubsystem);
                }
            }
        }
        let watched: Vec<usize> = self.needed.iter().copied().collect();
        self.silence.main_poll(watched.into_iter(), events);
    }

    /// A node's poll: the ticks, the main host gone silent, and every
    /// [`STATUS_EVERY`] this node's status (its `local` subsystems' slots of `control`).
    fn node_poll(&mut self, control: &Control, local: &[usize], events: &mut Vec<LinkEvent>) {
        self.take_ticks(events);
        self.silence.node_poll(events);
        if self.last_status.elapsed() >= STATUS_EVERY
            && let Some(p) = &self.status_pub
        {
            self.last_status = Instant::now();
            let status = NodeStatus {
                slots: local.iter().map(|&k| RemoteSlot::of(control, k)).collect(),
                tick: self.tick_figures(),
                late: std::mem::take(&mut self.late_words),
                explained: std::mem::take(&mut self.explained_words),
            };
            self.recent_late = None;
            let json = serde_json::to_vec(&status).unwrap_or_default();
            self.status_bytes += json.len() as u64;
            let _ = p.put(json).wait();
        }
    }

    fn drain_health(&mut self, events: &mut Vec<LinkEvent>) {
        let mut seen = Vec::new();
        if let Some((_, ring)) = self.watch.as_mut() {
            while let Some(e) = ring.pop() {
                seen.push(e);
            }
        }
        for e in seen {
            match e {
                HealthEvent::Joined(name) => {
                    if let Some(h) = self.hosts.iter().position(|x| *x == name) {
                        self.joined.insert(h);
                        events.push(LinkEvent::Joined(h));
                    }
                }
                HealthEvent::Left(name) => {
                    if let Some(h) = self.hosts.iter().position(|x| *x == name)
                        && !self.still_alive(&name)
                    {
                        self.joined.remove(&h);
                        events.push(LinkEvent::Left(h));
                    }
                }
            }
        }
    }
}

impl Drop for ZenohLink {
    fn drop(&mut self) {
        self.stop_threads();
        // Zenoh's close waits up to 10 s for a QUIC session whose peer already left
        // (the last host to end waits for nobody): it closes on a thread of its own,
        // which the process's end cuts short.
        let session = self.session.clone();
        let _ = std::thread::Builder::new()
            .name("ictus-close".into())
            .spawn(move || {
                let _ = session.close().wait();
            });
    }
}
