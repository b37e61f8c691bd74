//! `load`: background disturbances to measure under (seed 002 §5.1.3, extended).
//!
//! ARTiS measured its latencies under five loads: a computing loop pinned on each
//! processor, a disk reader and writer, a network flood, a program calling an
//! `ioctl()` that took the big kernel lock, and a cache-miss generator. ictus runs
//! them, plus a memory-bandwidth hog, as threads of its own process:
//!
//! | kind | what each worker does | metrics |
//! |---|---|---|
//! | [`cpu`](LoadKind::Cpu) | an endless integer loop, no system call | `ops_per_s` |
//! | [`disk`](LoadKind::Disk) | write 256 KiB, `fsync`, read 256 KiB back, in a temporary directory | `fsyncs_per_s`, `write_bytes_per_s`, `read_bytes_per_s`, `bytes_per_s` |
//! | [`net`](LoadKind::Net) | UDP flood over loopback (127.0.0.1), a sender and a receiver | `packets_per_s` (received), `sent_packets_per_s`, `bytes_per_s`, `send_failures_per_s` (when any) |
//! | [`syscall`](LoadKind::Syscall) | `pipe2`, a 1-byte write and read, two `close`s | `ops_per_s`, `syscalls_per_s` |
//! | [`cachemiss`](LoadKind::Cachemiss) | random read-modify-writes over 4x the last-level cache | `accesses_per_s`, `buffer_bytes` |
//! | [`membw`](LoadKind::Membw) | streaming copies between two buffers larger than the LLC | `bytes_per_s` (copied), `buffer_bytes` |
//!
//! Every kind runs one worker per CPU of its [`LoadSpec::cpus`], pinned there and left
//! in (or returned to) `SCHED_OTHER`; `net` pairs its CPUs instead (see
//! [`LoadKind::Net`]). Each worker prepares first (pins itself, allocates and touches
//! its buffers, opens its files); [`start`] returns once all are prepared, and they
//! begin together. They count their work in local variables and publish it when
//! stopped, so the hot loops share nothing but the stop flag.
//!
//! On this machine kind matters: sync-heavy disk I/O combined with busy CPUs makes the
//! host stall the guest for 10 ms and more. That is the machine, and the loads do not
//! hide it.
//!
//! ```
//! use ictus_core::CpuSet;
//! use ictus_probe::load::{self, LoadKind, LoadSpec};
//! let first = ictus_os::facts::online_cpus().cpus()[0];
//! let running = load::start(&[LoadSpec {
//!     kind: LoadKind::Cpu,
//!     cpus: CpuSet::from_cpus([first]),
//! }])
//! .unwrap();
//! std::thread::sleep(std::time::Duration::from_millis(50));
//! let reports = running.stop();
//! assert!(reports[0].metrics["ops_per_s"] > 0.0);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

mod cachemiss;
mod cpu;
mod disk;
mod membw;
mod net;
mod running;
mod spec;
mod syscall;
mod under;
mod worker;

pub use running::{RunningLoads, start};
pub use spec::{
    LoadError, LoadKind, LoadReport, LoadSpec, LoadStartError, UnknownLoadKind, validate,
};
pub use under::{UnderLoadsError, hold, under_loads};

#[cfg(test)]
mod tests {

    use std::io;

    use std::sync::mpsc::{self};
    use std::sync::{Arc, Mutex};
    use std::thread::{self};

    use ictus_core::CpuSet;

    use ictus_os::facts;

    use super::running::*;
    use super::spec::*;
    use super::worker::*;
    use super::*;
    use std::time::Duration;

    /// Load tests count the process's `load-*` threads, so they run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Threads of this process named like load workers. (Other tests of this binary
    /// start and end threads concurrently, so the total count is not stable; the
    /// workers' names are.)
    fn load_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("load-"))
            })
            .count()
    }

    /// Load threads once the joined ones have left /proc: a thread that `join` has
    /// returned for can still be listed for a moment while the kernel reaps it, so
    /// this waits up to a second; one that outlived `stop` stays listed.
    fn load_threads_after_stop() -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        loop {
            let n = load_threads();
            if n == 0 || std::time::Instant::now() > deadline {
                return n;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn all_cpus() -> CpuSet {
        facts::online_cpus()
    }

    fn run_for(kind: LoadKind, cpus: CpuSet) -> LoadReport {
        let _serial = serial();
        assert_eq!(load_threads_after_stop(), 0);
        let sut = start(&[LoadSpec { kind, cpus }]).unwrap();
        assert_eq!(load_threads(), sut.workers());
        let dirs = sut.scratch_dirs();
        assert!(dirs.iter().all(|d| d.is_dir()));
        thread::sleep(Duration::from_millis(200));
        let mut reports = sut.stop();
        assert_eq!(
            load_threads_after_stop(),
            0,
            "{kind}: a worker outlived stop"
        );
        assert!(dirs.iter().all(|d| !d.exists()), "{kind}: scratch left");
        assert_eq!(reports.len(), 1);
        let report = reports.remove(0);
        assert_eq!(report.kind, kind);
        assert!(report.errors.is_empty(), "{kind}: {:?}", report.errors);
        assert!(report.duration_ns > 0);
        assert!(report.cpu_time_ns > 0, "{kind}: no CPU time");
        report
    }

    fn assert_positive(report: &LoadReport, key: &str) {
        let value = report.metrics.get(key).copied().unwrap_or_default();
        assert!(
            value > 0.0,
            "{}: {key} is {value}: {:?}",
            report.kind,
            report.metrics
        );
    }

    #[test]
    fn cpu_load_spins_on_every_cpu_and_stops() {
        let report = run_for(LoadKind::Cpu, all_cpus());
        assert_eq!(report.workers, all_cpus().len());
        assert_positive(&report, "ops_per_s");
    }

    #[test]
    fn disk_load_writes_fsyncs_reads_and_removes_its_directory() {
        let report = run_for(LoadKind::Disk, all_cpus());
        assert_positive(&report, "fsyncs_per_s");
        assert_positive(&report, "write_bytes_per_s");
        assert_positive(&report, "read_bytes_per_s");
    }

    #[test]
    fn net_load_floods_loopback_in_pairs() {
        let report = run_for(LoadKind::Net, all_cpus());
        assert_eq!(report.workers, all_cpus().len().next_multiple_of(2));
        assert_positive(&report, "sent_packets_per_s");
        assert_positive(&report, "packets_per_s");
        assert_positive(&report, "bytes_per_s");
    }

    #[test]
    fn net_load_on_one_cpu_puts_both_ends_there() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Net, CpuSet::from_cpus([first]));
        assert_eq!(report.workers, 2);
        assert_positive(&report, "packets_per_s");
    }

    #[test]
    fn syscall_load_cycles_pipes() {
        let report = run_for(LoadKind::Syscall, all_cpus());
        assert_positive(&report, "ops_per_s");
        let expected = report.metrics["ops_per_s"] * syscall::SYSCALLS_PER_OP as f64;
        assert!((report.metrics["syscalls_per_s"] - expected).abs() <= expected * 1e-9);
    }

    #[test]
    fn cachemiss_load_uses_at_least_four_times_the_largest_cache() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Cachemiss, CpuSet::from_cpus([first]));
        assert_positive(&report, "accesses_per_s");
        assert!(report.metrics["buffer_bytes"] >= 4.0 * largest_cache_bytes() as f64);
    }

    #[test]
    fn membw_load_copies() {
        let first = all_cpus().cpus()[0];
        let report = run_for(LoadKind::Membw, CpuSet::from_cpus([first]));
        assert_positive(&report, "bytes_per_s");
        assert!(report.metrics["buffer_bytes"] >= 4.0 * largest_cache_bytes() as f64);
    }

    #[test]
    fn dropping_running_loads_stops_them_and_removes_scratch() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let cpus = CpuSet::from_cpus([first]);
        let sut = start(&[
            LoadSpec {
                kind: LoadKind::Cpu,
                cpus: cpus.clone(),
            },
            LoadSpec {
                kind: LoadKind::Disk,
                cpus,
            },
        ])
        .unwrap();
        let dirs = sut.scratch_dirs();
        assert_eq!(dirs.len(), 1);
        assert!(load_threads() >= 2);
        drop(sut);
        assert_eq!(load_threads_after_stop(), 0);
        assert!(!dirs[0].exists());
    }

    #[test]
    fn reports_come_back_in_spec_order() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let specs: Vec<LoadSpec> = [LoadKind::Syscall, LoadKind::Cpu]
            .into_iter()
            .map(|kind| LoadSpec {
                kind,
                cpus: CpuSet::from_cpus([first]),
            })
            .collect();
        let reports = start(&specs).unwrap().stop();
        let kinds: Vec<LoadKind> = reports.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [LoadKind::Syscall, LoadKind::Cpu]);
    }

    #[test]
    fn an_offline_cpu_is_refused_before_anything_starts() {
        let err = start(&[LoadSpec {
            kind: LoadKind::Cpu,
            cpus: CpuSet::from_cpus([1000]),
        }])
        .unwrap_err();
        assert!(matches!(
            err,
            LoadError::CpuOffline {
                kind: LoadKind::Cpu,
                cpu: 1000,
                ..
            }
        ));
    }

    #[test]
    fn an_empty_cpu_set_is_refused() {
        let err = validate(&[LoadSpec {
            kind: LoadKind::Net,
            cpus: CpuSet::default(),
        }])
        .unwrap_err();
        assert!(matches!(
            err,
            LoadError::NoCpu {
                kind: LoadKind::Net
            }
        ));
    }

    #[test]
    fn kind_names_round_trip_through_from_str_and_serde() {
        for kind in LoadKind::ALL {
            assert_eq!(kind.name().parse::<LoadKind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
        assert_eq!(" CPU ".parse::<LoadKind>().unwrap(), LoadKind::Cpu);
        let err = "bogus".parse::<LoadKind>().unwrap_err();
        assert!(err.to_string().contains("'bogus'"));
    }

    #[test]
    fn a_worker_that_fails_while_preparing_fails_start_and_stops_the_others() {
        let _serial = serial();
        let first = all_cpus().cpus()[0];
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        let good = spawn(
            LoadKind::Cpu,
            cpu::plan(&CpuSet::from_cpus([first])).jobs.remove(0),
            shared.clone(),
            tx.clone(),
        )
        .unwrap();
        let bad = spawn(
            LoadKind::Disk,
            Job::new("bad", first, |_| {
                Err(LoadStartError::Io {
                    what: "opening nothing".into(),
                    source: io::Error::from(io::ErrorKind::NotFound),
                })
            }),
            shared.clone(),
            tx,
        )
        .unwrap();
        let messages: Vec<_> = rx.iter().take(2).collect();
        assert!(messages.iter().any(|m| m.is_ok()));
        assert!(messages.iter().any(|m| matches!(
            m,
            Err(LoadError::Setup {
                kind: LoadKind::Disk,
                source: LoadStartError::Io { .. },
                ..
            })
        )));
        shared.request_stop();
        good.join().unwrap();
        bad.join().unwrap();
        assert_eq!(load_threads_after_stop(), 0);
    }
}
