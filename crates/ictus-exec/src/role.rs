//! A run's role: the main host's (it coordinates the whole run: `ictus run`) or a
//! node's (host H's part of a schedule across hosts: `ictus node`), and what follows
//! from it on this host: the name of its segments and control socket, and the CPUs
//! where the threads that serve the run belong (off its real-time subsystems' CPUs).
//!
//! ```
//! use ictus_core::CpuSet;
//! use ictus_exec::role::Role;
//! use ictus_exec::schedule::Schedule;
//! let text = "name = \"ring\"\ntick = \"1ms\"\nmajor_frame = 1\n\
//!     [[host]]\nname = \"a\"\naddress = \"10.77.0.1:7447\"\n\
//!     [[host]]\nname = \"b\"\naddress = \"10.77.0.2:7447\"\n\
//!     [[subsystem]]\nname = \"s\"\nhost = \"b\"\n";
//! let schedule = Schedule::parse(text, "ring.toml", &CpuSet::from_cpus([0, 1]))?;
//! // Host b's segments and control socket are `ring.b`; the main host's `ring`.
//! assert_eq!(Role::of_host(1).run_name(&schedule), "ring.b");
//! assert_eq!(Role::Main.run_name(&schedule), "ring");
//! # Ok::<(), ictus_exec::schedule::ScheduleError>(())
//! ```

use ictus_class::Class;
use ictus_core::CpuSet;
use ictus_os::facts;

use crate::schedule::Schedule;

/// Which part of a schedule's run this process coordinates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// The main host: the host table's first, or the only host. It coordinates the
    /// whole run and sends the tick.
    #[default]
    Main,
    /// A node: host `host` of the schedule's host table (not the first). It releases
    /// its own subsystems on the main host's tick.
    Node {
        /// Its index in the schedule's host table.
        host: usize,
    },
}

impl Role {
    /// The role of host `host` of the table (0: the main host).
    pub fn of_host(host: usize) -> Role {
        match host {
            0 => Role::Main,
            host => Role::Node { host },
        }
    }

    /// Its index in the schedule's host table (0: the main host).
    pub fn host(self) -> usize {
        match self {
            Role::Main => 0,
            Role::Node { host } => host,
        }
    }

    /// The name of this host's part of `schedule`'s run, which names its segments
    /// and control socket: the schedule's name on the main host; on a node the
    /// schedule's name, a dot and the node's name, apart from the other hosts' on the
    /// same machine (network namespaces share `/dev/shm` and `/run`). The links
    /// between hosts keep the schedule's own name, which every host shares.
    pub fn run_name(self, schedule: &Schedule) -> String {
        match self {
            Role::Main => schedule.name.clone(),
            Role::Node { host } => match schedule.hosts.get(host) {
                Some(h) => format!("{}.{}", schedule.name, h.name),
                None => schedule.name.clone(),
            },
        }
    }

    /// The CPUs of this machine that none of this host's real-time subsystems (a
    /// class other than normal, pinned) is pinned to: where the threads that serve
    /// the run (the link's, the live page's) belong. Empty when every online CPU
    /// has one.
    pub fn cpus_off_rt(self, schedule: &Schedule) -> CpuSet {
        let here = self.host();
        let rt = CpuSet::from_cpus(
            schedule
                .subsystems
                .iter()
                .filter(|s| s.host == here && !matches!(s.class, Class::Normal))
                .filter_map(|s| s.cpu),
        );
        CpuSet::from_cpus(
            facts::online_cpus()
                .cpus()
                .iter()
                .copied()
                .filter(|c| !rt.contains(*c)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_zero_is_the_main_host_and_others_are_nodes() {
        assert_eq!(Role::of_host(0), Role::Main);
        assert_eq!(Role::of_host(2), Role::Node { host: 2 });
        assert_eq!(Role::of_host(2).host(), 2);
        assert_eq!(Role::Main.host(), 0);
    }

    #[test]
    fn a_node_runs_under_the_schedule_name_and_its_own() {
        let schedule = crate::schedule::two_hosts();
        assert_eq!(Role::Main.run_name(&schedule), schedule.name);
        assert_eq!(
            Role::of_host(1).run_name(&schedule),
            format!("{}.h2", schedule.name)
        );
        // Subsystems of the class normal leave their CPU to the threads that serve.
        let online = facts::online_cpus();
        assert_eq!(Role::Main.cpus_off_rt(&schedule), online);
    }
}
