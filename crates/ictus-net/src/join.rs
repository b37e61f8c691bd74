//! A host joining a schedule's run in its [`Role`]: the link to the other hosts and
//! the name its part of the run goes by, in the order the protocol needs (the link's
//! keys use the schedule's shared name, this host's segments and control socket its
//! own).
//!
//! ```no_run
//! use ictus_exec::role::Role;
//! use ictus_exec::run::{self, RunOptions};
//! use ictus_exec::schedule::Schedule;
//! use ictus_net::security::Security;
//! let mut schedule = Schedule::from_file("ring.toml".as_ref(), &ictus_os::facts::online_cpus())?;
//! // Host 1 of the table (a node): its link, then `ring.NODE` for its segments.
//! let link = ictus_net::join::join(&mut schedule, Role::of_host(1), Some(&Security::Insecure))?;
//! let options = RunOptions {
//!     link: link.map(|l| Box::new(l) as Box<dyn ictus_exec::link::Link>),
//!     ..RunOptions::default()
//! };
//! let report = run::run(&schedule, &mut run::builtin, options)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use ictus_exec::role::Role;
use ictus_exec::schedule::Schedule;

use crate::NetError;
use crate::link::ZenohLink;
use crate::security::Security;

/// Joins `schedule`'s run as `role`:
/// - the link to the other hosts when the run has links (`security`: `None` for a
///   run on one host) and the schedule places subsystems on another host than the
///   main one, opened under the schedule's name with Zenoh's threads kept off this
///   host's real-time CPUs ([`ZenohLink::open`]);
/// - then `schedule` renamed to this host's part of the run ([`Role::run_name`]: a
///   node's is `NAME.HOST`), which names its segments and control socket.
pub fn join(
    schedule: &mut Schedule,
    role: Role,
    security: Option<&Security>,
) -> Result<Option<ZenohLink>, NetError> {
    let link =
        match security {
            Some(security) if schedule.subsystems.iter().any(|s| s.host != 0) => Some(
                ZenohLink::open(schedule, role.host(), &schedule.name, security)?,
            ),
            _ => None,
        };
    schedule.name = role.run_name(schedule);
    Ok(link)
}
