//! The Linux layer of ictus: every system call and all of the FFI `unsafe`.
//!
//! - [`clock`]: `CLOCK_MONOTONIC` reads and their measured cost.
//! - [`wait`]: the three ways to wait for an absolute deadline (nanosleep, hybrid, spin).
//! - [`sched`]: scheduling policy, priority and CPU affinity of the calling thread,
//!   set and read back, with refusals explained.
//! - [`affinity_of`]: CPU affinity of another thread, read and set (for the shield).
//! - [`handoff`]: futex, eventfd, pipe, message queue and `sched_yield`: how one thread
//!   wakes another.
//! - [`memory`]: memory locking and stack prefaulting.
//! - [`buffer`]: page-aligned anonymous mappings with a chosen page size (base or
//!   transparent huge pages), for the probes that measure memory.
//! - [`shm`]: POSIX shared memory segments named by their owner, so that a crash
//!   never leaves a stale one in the way.
//! - [`thread_time`]: CPU time consumed by the calling thread.
//! - [`process`]: a process's identity (pid and start time), whether it is alive,
//!   signals, and a child that dies with the thread that started it.
//! - [`tracefs`]: the kernel's tracing file system (ftrace), and the `timerlat`
//!   tracer run with every setting it touches restored.
//! - [`pm_qos`]: the CPU latency QoS (`/dev/cpu_dma_latency`), held for a run.
//! - [`procstat`]: steal time and other counters from `/proc/stat`.
//! - [`fs`]: output files written whole or not at all, and checked before a run.
//! - [`json`]: the line and column of a value in a JSON input found wrong after parsing.
//! - [`facts`]: what the machine is (topology, kernel, preemption model, ...), read for
//!   the audit and for the provenance of every record.
//! - [`testing`]: test support: a test that cannot run here says so, and fixtures the
//!   tests of several crates share.
//! - [`provenance`]: the tool, host and time header of every probe record and scenario
//!   result.
//!
//! What is built on these calls lives above: why a deadline was missed in
//! `ictus-explain`, the files a run captures (MCAP recordings, trace-event timelines)
//! in `ictus-capture`.
//!
//! Nothing here prints; everything returns data.

pub mod affinity_of;
pub mod buffer;
pub mod clock;
pub mod facts;
pub mod fs;
pub mod handoff;
pub mod json;
pub mod memory;
pub mod pm_qos;
pub mod process;
pub mod procstat;
pub mod provenance;
pub mod sched;
pub mod shm;
pub mod testing;
pub mod thread_time;
pub mod tracefs;
pub mod wait;
