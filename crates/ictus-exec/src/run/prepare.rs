//! The first phases of a run: everything that can be refused is checked and made
//! before anything starts (the subsystems of this host, the storage, the control
//! socket), then the synchronous groups.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;

use ictus_core::CpuSet;
use ictus_os::sched;

use super::error::RunError;
use super::names::{
    cells_segment, control_segment, hubs_segment, is_executable, resolve_program, tap_segment,
};
use super::options::{Factory, RunOptions};
use crate::cell::{CellTable, Cells};
use crate::control::Control;
use crate::ctl::{self, Command, Server};
use crate::group::Group;
use crate::hub::Hubs;
use crate::link::Link;
use crate::schedule::{Process, Schedule, SubsystemSpec};
use crate::state::{SetupStore, StateId, StateWord, States};
use crate::subsystem::{Maker, element_count};
use crate::tap::recorder::TapSetup;
use crate::tap::ring::TapRings;

/// A program to launch for a subsystem of this host.
pub(super) struct Launch {
    /// The subsystem's slot.
    pub(super) slot: usize,
    /// The program found.
    pub(super) path: PathBuf,
    /// Its arguments.
    pub(super) args: Vec<String>,
    /// The name it is reported by: the schedule's program, or `own`.
    pub(super) program: String,
}

/// The subsystems of this host, each made (in-process) or found (programs).
pub(super) struct Local {
    /// Their slots; the others run on their hosts.
    pub(super) slots: Vec<usize>,
    /// The in-process subsystems, by slot.
    pub(super) in_process: Vec<(usize, Maker)>,
    /// The programs.
    pub(super) programs: Vec<Launch>,
}

impl Local {
    /// Makes each in-process subsystem of host `here` and finds each program, or
    /// says which cannot be. Without a link, every subsystem must run on this host.
    pub(super) fn resolve(
        schedule: &Schedule,
        factory: &mut Factory<'_>,
        options: &RunOptions,
        linked: bool,
        here: usize,
    ) -> Result<Local, RunError> {
        if !linked && let Some(spec) = schedule.subsystems.iter().find(|s| s.host != 0) {
            return Err(RunError::OtherHost {
                path: schedule.path.clone(),
                location: spec.location,
                name: spec.name.clone(),
                host: schedule.hosts[spec.host].name.clone(),
            });
        }
        // The subsystems of this host; the others run on theirs.
        let slots: Vec<usize> = (0..schedule.subsystems.len())
            .filter(|&k| schedule.subsystems[k].host == here)
            .collect();
        let mut in_process = Vec::new();
        let mut programs = Vec::new();
        for &k in &slots {
            let spec = &schedule.subsystems[k];
            match &spec.process {
                Process::InProcess => {
                    let s = factory(spec).map_err(|m| no_subsystem(schedule, spec, m))?;
                    in_process.push((k, s));
                }
                Process::Program { program, args } => {
                    let path = resolve_program(program, schedule.folder(), &options.program_dirs)
                        .ok_or_else(|| RunError::NoProgram {
                        path: schedule.path.clone(),
                        location: spec.location,
                        name: spec.name.clone(),
                        program: program.clone(),
                    })?;
                    if !is_executable(&path) {
                        return Err(RunError::NotExecutable {
                            path: schedule.path.clone(),
                            location: spec.location,
                            name: spec.name.clone(),
                            program: path,
                        });
                    }
                    programs.push(Launch {
                        slot: k,
                        path,
                        args: args.clone(),
                        program: program.clone(),
                    });
                }
                Process::Own => {
                    // The builtin must exist here too (the host makes the same one).
                    factory(spec).map_err(|m| no_subsystem(schedule, spec, m))?;
                    let (path, args) = options.host.clone().ok_or_else(|| {
                        no_subsystem(
                            schedule,
                            spec,
                            "process = \"own\" needs a program that hosts built-ins \
                             (`ictus run` is one; RunOptions::host is not set)"
                                .to_string(),
                        )
                    })?;
                    programs.push(Launch {
                        slot: k,
                        path,
                        args,
                        program: "own".to_string(),
                    });
                }
            }
        }
        Ok(Local {
            slots,
            in_process,
            programs,
        })
    }
}

/// The error for a subsystem that cannot be made here.
fn no_subsystem(schedule: &Schedule, spec: &SubsystemSpec, message: String) -> RunError {
    RunError::NoSubsystem {
        path: schedule.path.clone(),
        location: spec.location,
        name: spec.name.clone(),
        message,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Storage {
    Local,
    Shared,
}

/// What a run makes before anything starts, and what every later phase reads.
// Its fields drop in this order once the run has ended (its server taken and its
// affinity given back first): the hubs, the control block and the cells last.
pub(super) struct Staged<'a> {
    pub(super) schedule: &'a Schedule,
    /// This host (0: the main coordinator's, or the only one).
    pub(super) here: usize,
    /// The slots of this host's subsystems.
    pub(super) local: Vec<usize>,
    /// The in-process subsystems, until they move to their threads.
    pub(super) in_process: Vec<(usize, Maker)>,
    /// The programs to launch.
    pub(super) programs: Vec<Launch>,
    /// The state the run starts in.
    pub(super) initial: StateId,
    /// Commands from the control socket (`ictus ctl`).
    pub(super) commands: mpsc::Receiver<Command>,
    /// Setup requests and their answers.
    pub(super) store: SetupStore,
    /// The subsystems' names, by slot.
    pub(super) names: Vec<String>,
    pub(super) states: States,
    pub(super) hubs: Hubs,
    pub(super) control: Control,
    pub(super) cells: Cells,
    /// The control socket, when served.
    pub(super) server: Option<Server>,
    /// The coordinator's own affinity, given back at the end.
    pub(super) affinity_before: Option<CpuSet>,
    /// The last misses explained, for the live view (none when not explaining).
    pub(super) recent_misses: Option<ictus_explain::RecentMisses>,
    /// The tap's rings and choices, when the run has sinks (`--record`, `--trace`).
    pub(super) tap: Option<TapSetup>,
}

impl<'a> Staged<'a> {
    /// Checks the run's name, makes the cells, the control block and the hubs, sets
    /// the initial state, starts the control socket, and moves the coordinator off
    /// the real-time CPUs.
    pub(super) fn make(
        schedule: &'a Schedule,
        table: &CellTable,
        options: &RunOptions,
        local: Local,
        link: Option<&dyn Link>,
        here: usize,
    ) -> Result<Staged<'a>, RunError> {
        // The run's name names its socket and segments: checked here, with the
        // socket's length, before any of them exists.
        ctl::check_name(&schedule.name)?;
        let serve = options.control_socket || !local.programs.is_empty();
        if serve {
            ctl::check_socket(&options.run_dir, &schedule.name)?;
        }
        let storage = if local.programs.is_empty() {
            Storage::Local
        } else {
            Storage::Shared
        };
        let (cells, control, hubs) = storage_of(schedule, table, storage, link.is_some(), here)?;
        let tap = if options.sinks.is_empty() {
            None
        } else {
            let n = schedule.subsystems.len();
            let max_cell = TapSetup::max_cell_for(table, &options.sinks);
            let rings = match storage {
                Storage::Local => TapRings::in_process(n, max_cell),
                Storage::Shared => {
                    TapRings::create_shared(&tap_segment(&schedule.name), n, max_cell)
                        .map_err(RunError::Tap)?
                }
            };
            Some(TapSetup::new(schedule, table, rings))
        };
        let states = States::new(&schedule.modes);
        let names: Vec<String> = schedule.subsystem_names().map(String::from).collect();
        let initial = states.id(&schedule.initial_state).unwrap_or(StateId::OFF);
        control.set_state(StateWord::constant(initial));
        // Across hosts, a node's setup requests go to the main coordinator's store.
        let store = link.map_or_else(SetupStore::new, |l| l.setup_store());
        let (cmd_tx, commands) = mpsc::channel::<Command>();
        let nrt = crate::role::Role::of_host(here).cpus_off_rt(schedule);
        let server = if serve {
            Some(Server::start(
                &options.run_dir,
                &schedule.name,
                store.clone(),
                cmd_tx,
                (!nrt.is_empty()).then_some(nrt.clone()),
            )?)
        } else {
            None
        };
        // The coordinator itself stays off the real-time CPUs when there are others (and
        // gets its own affinity back at the end).
        let affinity_before = sched::current_affinity().ok();
        if !nrt.is_empty() {
            let _ = sched::set_affinity(&nrt);
        }
        Ok(Staged {
            schedule,
            here,
            local: local.slots,
            in_process: local.in_process,
            programs: local.programs,
            initial,
            commands,
            store,
            names,
            states,
            hubs,
            control,
            cells,
            server,
            affinity_before,
            recent_misses: None,
            tap,
        })
    }
}

/// The cells, the control block and the hubs: in this process when every
/// subsystem is a thread, else in the run's shared memory.
fn storage_of(
    schedule: &Schedule,
    table: &CellTable,
    storage: Storage,
    across_hosts: bool,
    here: usize,
) -> Result<(Cells, Control, Hubs), RunError> {
    let n = schedule.subsystems.len();
    let tick = schedule.tick;
    let elements = element_count(table);
    if storage == Storage::Local {
        // No segment of this run's own to create (which would reclaim them): the
        // segments a killed run of the same name left are removed here, so a
        // name is never left poisoned (best effort: /dev/shm may be absent).
        for segment in [
            cells_segment(&schedule.name),
            control_segment(&schedule.name),
            hubs_segment(&schedule.name),
            tap_segment(&schedule.name),
        ] {
            let _ = ictus_os::shm::reclaim_stale(Some(&segment));
        }
    }
    let (cells, control) = match storage {
        Storage::Local => (
            Cells::in_process(table),
            Control::in_process_with_claims(n, tick.as_u64(), elements),
        ),
        Storage::Shared => {
            let cells = Cells::create_shared(table, &cells_segment(&schedule.name))
                .map_err(RunError::Storage)?;
            let control = Control::create_shared_named(
                &control_segment(&schedule.name),
                n,
                tick.as_u64(),
                elements,
            )
            .map_err(RunError::Control)?;
            (cells, control)
        }
    };
    // The schedule's hubs, beside the cells: in this process when every subsystem
    // is a thread, else in the run's shared memory (removed when `hubs` drops, at
    // the end of the run; a stale one of a crashed run is reclaimed on create).
    // Across hosts, the hubs homed on other hosts are proxies here.
    let hosts: Vec<String> = if across_hosts {
        schedule.hosts.iter().map(|h| h.name.clone()).collect()
    } else {
        Vec::new()
    };
    let hubs = match storage {
        Storage::Shared if !schedule.hubs.is_empty() => {
            Hubs::create_shared_at(&schedule.hubs, &hubs_segment(&schedule.name), &hosts, here)
        }
        _ => Hubs::in_process_at(&schedule.hubs, &hosts, here),
    }
    .map_err(RunError::Hubs)?;
    Ok((cells, control, hubs))
}

/// The synchronous groups, each with its number of members.
pub(super) fn groups(schedule: &Schedule) -> BTreeMap<String, Group> {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for s in &schedule.subsystems {
        if let Some(g) = &s.group {
            let members = schedule
                .subsystems
                .iter()
                .filter(|o| o.group.as_ref() == Some(g))
                .count();
            groups
                .entry(g.clone())
                .or_insert_with(|| Group::new(members));
        }
    }
    groups
}
