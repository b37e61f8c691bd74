//! The asymmetric balancer (seed 002 §2.3, §3.2).
//!
//! A supervisor thread on the NRT CPUs periodically places the RT1+ and normal tasks
//! registered with it. ARTiS's rules, in user space:
//!
//! - **Load.** Per CPU, `load = L / (1 - RT)` (§3.2.2). Here **L** is the number of
//!   *registered* tasks with a non-real-time policy that are runnable (state `R` in
//!   `/proc/TID/task/TID/stat`) on that CPU at a sample, and **RT** is the share of
//!   time that *registered* tasks with a real-time policy (FIFO, RR, DEADLINE) used
//!   on that CPU: each sample, their runtime delta from `/proc/TID/task/TID/schedstat`
//!   over the sample interval, capped at 1, smoothed as the kernel's `CALC_LOAD` does
//!   with a weight of `1 / rt_window` (ARTiS: 500 samples, about half a second; until
//!   that many samples exist the weight is `1 / samples`, a plain average, so a fresh
//!   balancer does not start from zero). When RT nears 1 the free share is floored at
//!   [`MIN_FREE_SHARE`]: such a CPU counts as a hundred times as loaded per task. A CPU
//!   without runnable non-real-time tasks has load 0 however busy its real-time tasks
//!   keep it, as in ARTiS.
//! - **Push, not pull** (§3.2.3): only the supervisor moves tasks, and the RT CPUs
//!   never run balancing code. Every `rt_push_period` (ARTiS: 4x as often as the
//!   rest) RT1+ tasks found on NRT CPUs are pushed to the least loaded RT CPU they are
//!   allowed on (see [`push_rt`]). Every `push_period` one task is pushed from the most
//!   loaded CPU to the least loaded one, when that lowers the higher of the two loads
//!   (the difference is worth more than one task on the destination), moving normal
//!   tasks off RT CPUs before RT1+ tasks and RT1+ tasks onto RT CPUs before normal
//!   ones (§3.2.5); among tasks bound for an RT CPU, those whose next migration attempt
//!   is predicted furthest away go first (§3.2.4). Only tasks counted in L move in this
//!   push: real-time tasks change no L.
//! - **Anti ping-pong** (§3.2.4): no task is moved onto an RT CPU while
//!   [`MigrationStats::may_return`] says its next migration attempt is predicted soon
//!   (counted as `withheld`), nor while it is inside a section.
//! - **RT0 tasks never move**; their CPU time counts as RT load. No task is ever
//!   pinned outside the CPUs it was registered with.
//!
//! The supervisor runs on the NRT CPUs at `SCHED_FIFO` [`DEFAULT_FIFO_PRIORITY`]
//! (above every RT1+ task, so that none can keep it off its CPU; a refusal is noted
//! and it runs anyway). It opens each task's `/proc` files once, before raising its
//! priority, and rereads them: it never looks a `/proc` path up while it runs (see
//! `Tracked::read` in the source for the kernel spin that avoids).
//!
//! At start every movable task is placed once (RT1+ over the RT CPUs, normal tasks
//! over the NRT CPUs, least loaded first, then balanced as the pushes would; see
//! [`place_all`]). A placement pins the task to exactly one
//! CPU with `sched_setaffinity`: the balancer owns the placement of registered tasks,
//! which the kernel's own balancer would otherwise undo. Every move is a [`Decision`]
//! with its reason in words, and counted in the [`Report`]. When the balancer stops,
//! every task it pinned gets back the affinity it had when the balancer started.
//!
//! # Talking to tasks without a shared lock
//!
//! Each task reports its migration attempts to the supervisor through its own
//! lock-free SPSC ring ([`Balancer::register`] returns the producer end for
//! [`crate::migrate::Migrator::report_to`]). A section reports its start *before* the
//! task touches its affinity, and its end after. The supervisor drains the rings at
//! every sample and never moves a task inside a section onto an RT CPU. For the race
//! where a section starts between that check and the move, it drains the task's ring
//! again right after every move onto an RT CPU: the kernel serialises the two
//! affinity changes of the task under the task's own lock, so if the task's move came
//! first the supervisor's second look is bound to see the report; it then moves the
//! task straight off the RT CPU (counted as `raced`). The task never waits for the
//! supervisor. If a ring overflows (the task reported faster than the supervisor
//! drained), the task is treated as inside a section until its next report arrives.
//!
//! # What differs from ARTiS
//!
//! - ARTiS balanced every task in the kernel; this balancer sees only the tasks
//!   registered with it, and L and RT count only those. Other tasks on a CPU are
//!   invisible to it.
//! - ARTiS moved tasks through its RT-FIFOs so that an RT CPU never took a runqueue
//!   lock an NRT CPU held. Here a move is `sched_setaffinity`, which the kernel
//!   carries out with its own locks: the task's `pi_lock` and the runqueue locks of
//!   both CPUs. The RT CPU's side of the balancer is lock-free (the tasks only push to
//!   their rings), but each move does take kernel locks an RT CPU's scheduler also
//!   takes, as the stock load balancer does. Reading `/proc/TID/task/TID/stat` briefly
//!   takes the task's signal-handler lock.
//! - RT1+ tasks whose real-time policy was refused run `SCHED_OTHER`: they count in L,
//!   not RT. The RT push then moves such a task onto an RT CPU only when that CPU,
//!   with it, is no more loaded than the best NRT CPU it may use (else it swaps places
//!   with a normal task on an RT CPU, which changes no load), and the other push may
//!   move it off an RT CPU when no normal task there can go: neither undoes the
//!   other. ARTiS had no such tasks: its RT1+ tasks were always real-time.
//!
//! ```
//! use ictus_shield::balancer::{CpuState, TaskRole, Snapshot, TaskState, push_one};
//! use ictus_shield::migrate::MigrationStats;
//!
//! // CPU 0 is NRT with two runnable normal tasks; CPU 1 is RT and idle.
//! let task = |tid| TaskState {
//!     tid,
//!     role: TaskRole::Normal,
//!     cpu: Some(0),
//!     allowed: "0-1".parse().unwrap(),
//!     realtime: false,
//!     runnable: true,
//!     rt_share: 0.0,
//!     stats: MigrationStats::default(),
//!     in_section: false,
//! };
//! let mut snapshot = Snapshot {
//!     now_ns: 0,
//!     cpus: vec![
//!         CpuState { cpu: 0, rt: false, runnable: 2, rt_share: 0.0 },
//!         CpuState { cpu: 1, rt: true, runnable: 0, rt_share: 0.0 },
//!     ],
//!     tasks: vec![task(10), task(11)],
//! };
//! let pass = push_one(&mut snapshot, 20_000_000);
//! assert_eq!((pass.moves[0].from, pass.moves[0].to), (Some(0), 1));
//! assert_eq!(snapshot.load_of(0), 1.0);
//! // Balanced now: the next pass moves nothing.
//! assert!(push_one(&mut snapshot, 20_000_000).moves.is_empty());
//! ```
//!
//! The live balancer:
//!
//! ```no_run
//! use ictus_core::CpuSet;
//! use ictus_shield::balancer::{Balancer, Config, TaskRole};
//! use ictus_shield::migrate::{Migrator, Return};
//! use ictus_shield::partition;
//! let online: CpuSet = "0-3".parse().unwrap();
//! let partition = partition::logical("2-3".parse().unwrap(), &online).unwrap();
//! let mut balancer = Balancer::new(partition.clone(), Config::default());
//! let tid = ictus_os::sched::thread_id() as i32;
//! let ring = balancer.register(tid, TaskRole::Rt1, online.clone());
//! let mut migrator = Migrator::new(partition, Return::Stay).report_to(ring);
//! let running = balancer.start().unwrap();
//! // ... work, with `migrator.section()` around what endangers latency ...
//! let report = running.stop();
//! assert!(report.samples > 0);
//! ```

#[cfg(doc)]
use crate::migrate::MigrationStats;

mod model;
mod policy;
mod proc;
mod prose;
mod supervisor;

pub use model::{
    Config, DEFAULT_FIFO_PRIORITY, Decision, MIN_FREE_SHARE, RING_CAPACITY, Report, TaskRole,
};
pub use policy::{
    CpuState, Move, PassOutcome, Snapshot, TaskState, load, place_all, push_one, push_rt,
};
pub use supervisor::{Balancer, Running};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_report_read_without_the_added_fields() {
        let config = serde_json::json!({
            "sample_period": {"secs": 0, "nanos": 1_000_000},
            "rt_window": 500,
            "rt_push_period": {"secs": 0, "nanos": 5_000_000},
            "push_period": {"secs": 0, "nanos": 20_000_000},
            "horizon": {"secs": 0, "nanos": 20_000_000},
        });
        let sut: Config = serde_json::from_value(config).unwrap();
        assert_eq!(sut, Config::default());
        let report = serde_json::to_value(Report::default()).unwrap();
        let back: Report = serde_json::from_value(report).unwrap();
        assert_eq!(back, Report::default());
    }
}
