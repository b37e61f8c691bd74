//! What `/proc` says of a registered task: its `stat` and `schedstat` files, opened
//! once and reread.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ictus_core::CpuSet;
use ictus_core::sync::spsc::Consumer;
use ictus_os::affinity_of;

use super::TaskRole;
use crate::migrate::{MigrationStats, SectionStart};

/// `USER_HZ`: the tick of the CPU times in `/proc/TID/stat` on every Linux
/// architecture ictus runs on (used only when `schedstat` is missing).
const USER_HZ: u64 = 100;

/// Linux's `ESRCH`: no such thread (it exited; nothing to give back).
pub(super) const ESRCH: i32 = 3;

/// What `/proc` says of a task at a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProcTask {
    /// Field 3: `R`, `S`, `D`, `Z`, ...
    pub(super) state: u8,
    /// Field 39: the CPU it last ran on.
    pub(super) processor: usize,
    /// Field 41: the policy number (1 FIFO, 2 RR, 6 DEADLINE are real-time).
    policy: u32,
    /// Fields 14 and 15: user and system time, in `USER_HZ` ticks.
    ticks: u64,
}

impl ProcTask {
    pub(super) fn realtime(&self) -> bool {
        matches!(self.policy, 1 | 2 | 6)
    }
}

/// Parses `/proc/TID/stat`: the command name may hold spaces, parentheses and bytes
/// that are not UTF-8, so fields are counted from the last `)`.
fn parse_stat(text: &[u8]) -> Option<ProcTask> {
    let t = ictus_os::procstat::TaskStat::parse(text)?;
    Some(ProcTask {
        state: t.state,
        processor: t.processor,
        policy: t.policy,
        ticks: t.ticks(),
    })
}

/// Whether a read error means the thread is gone.
fn is_gone(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ESRCH) || e.kind() == io::ErrorKind::NotFound
}

/// Opens a task's `/proc` file; done once, before the supervisor raises its priority.
pub(super) fn open_proc(tid: i32, name: &str) -> io::Result<File> {
    File::open(format!("/proc/{tid}/task/{tid}/{name}"))
}

/// A registered task, as the supervisor tracks it.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) tid: i32,
    pub(super) role: TaskRole,
    pub(super) allowed: CpuSet,
    pub(super) rx: Consumer<SectionStart>,
    /// `/proc/TID/task/TID/stat`, open for the whole run (see [`Tracked::read`]).
    stat: File,
    /// `/proc/TID/task/TID/schedstat`, where the kernel has it.
    schedstat: Option<File>,
    /// The affinity it had when the balancer started, given back at stop.
    pub(super) affinity_before: Option<CpuSet>,
    pub(super) stats: MigrationStats,
    pub(super) in_section: bool,
    /// Its ring overflowed: treated as inside a section until its next report.
    pub(super) uncertain: bool,
    pub(super) last_runtime_ns: Option<u64>,
    pub(super) proc: Option<ProcTask>,
    /// The CPU the balancer pinned it to, while that pin holds.
    pub(super) pinned: Option<usize>,
    /// Whether the balancer ever pinned it (its affinity is given back at stop).
    pub(super) ever_pinned: bool,
    pub(super) rt_share: f64,
    /// Its run time seen beyond a whole sample, carried to the next ones.
    pub(super) carry: f64,
}

impl Tracked {
    /// A task just registered: nothing sampled, pinned or reported yet.
    pub(super) fn new(
        tid: i32,
        role: TaskRole,
        allowed: CpuSet,
        rx: Consumer<SectionStart>,
        stat: File,
        schedstat: Option<File>,
    ) -> Tracked {
        Tracked {
            tid,
            role,
            allowed,
            rx,
            stat,
            schedstat,
            affinity_before: affinity_of::affinity_of(tid).ok(),
            stats: MigrationStats::default(),
            in_section: false,
            uncertain: false,
            last_runtime_ns: None,
            proc: None,
            pinned: None,
            ever_pinned: false,
            rt_share: 0.0,
            carry: 0.0,
        }
    }

    /// Where it is, or will run next: the pin if one holds (a sleeping task's
    /// `processor` is where it last ran), else the CPU it last ran on.
    pub(super) fn cpu(&self) -> Option<usize> {
        self.pinned.or(self.proc.map(|p| p.processor))
    }

    pub(super) fn realtime(&self) -> bool {
        self.proc.is_some_and(|p| p.realtime())
    }

    /// Reads its state, CPU and policy, and its run time in ns, from the files opened
    /// at start (`pread` at offset 0), using `buf`. `Ok(None)`: the thread is gone.
    ///
    /// The files stay open because a path lookup under `/proc/TID` after the thread
    /// exits makes the kernel invalidate those dentries (`d_invalidate`), which spins
    /// until any other thread that is pruning them is done: at FIFO priority on a CPU
    /// where that thread was preempted (the exiting task itself, say) it never is. This
    /// was seen: a supervisor at FIFO 50 spinning in `shrink_dcache_parent` for minutes.
    pub(super) fn read(&self, buf: &mut [u8]) -> io::Result<Option<(ProcTask, u64)>> {
        let len = match self.stat.read_at(buf, 0) {
            Ok(0) => return Ok(None),
            Ok(len) => len,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let proc = parse_stat(&buf[..len])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable stat line"))?;
        let Some(file) = &self.schedstat else {
            return Ok(Some((proc, proc.ticks * (1_000_000_000 / USER_HZ))));
        };
        let mut line = [0u8; 96];
        let len = match file.read_at(&mut line, 0) {
            Ok(0) => return Ok(None),
            Ok(len) => len,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let runtime = std::str::from_utf8(&line[..len])
            .ok()
            .and_then(|s| s.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "unreadable schedstat line")
            })?;
        Ok(Some((proc, runtime)))
    }
}

/// The supervisor thread's state.
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ictus_core::sync::spsc;
    use ictus_os::sched;

    use super::*;

    /// Thread `tid` tracked as a normal task on CPU 0, through its own files.
    fn tracked(tid: i32, rx: Consumer<SectionStart>) -> Tracked {
        Tracked::new(
            tid,
            TaskRole::Normal,
            CpuSet::from_cpus([0]),
            rx,
            open_proc(tid, "stat").unwrap(),
            open_proc(tid, "schedstat").ok(),
        )
    }

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        // Fields 4 to 52 hold their own number, but for utime (14), stime (15),
        // processor (39) and policy (41).
        let fields: Vec<String> = (4..=52)
            .map(|n| match n {
                14 => "120".to_string(),
                15 => "30".to_string(),
                39 => "5".to_string(),
                41 => "1".to_string(),
                n => n.to_string(),
            })
            .collect();
        let line = format!("1234 (a) b (c) R {}", fields.join(" "));
        let sut = parse_stat(line.as_bytes()).unwrap();
        assert_eq!(sut.state, b'R');
        assert_eq!(sut.processor, 5);
        assert_eq!(sut.policy, 1);
        assert_eq!(sut.ticks, 150);
        assert!(sut.realtime());
        assert_eq!(parse_stat(b"12 (x) S 1"), None);
        let mut odd = b"7 (\xff\xfe) ".to_vec();
        odd.extend_from_slice(line.split_once(") ").unwrap().1.as_bytes());
        assert_eq!(parse_stat(&odd), Some(sut));
    }

    #[test]
    fn a_thread_that_exits_reads_as_gone_through_the_files_opened_before() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(sched::thread_id() as i32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let (_ring, rx) = spsc::channel::<SectionStart>(1);
        let sut = tracked(tid, rx);
        let mut buf = vec![0; 4096];
        assert!(sut.read(&mut buf).unwrap().is_some(), "alive");
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        assert!(sut.read(&mut buf).unwrap().is_none(), "gone");
    }

    #[test]
    fn the_own_thread_reads_from_proc() {
        let tid = sched::thread_id() as i32;
        let (tx, rx) = spsc::channel::<SectionStart>(1);
        drop(tx);
        let sut = tracked(tid, rx);
        // The kernel adds up a running thread's run time at ticks and switches: run a
        // while, then switch.
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(1));
        let mut buf = vec![0; 4096];
        let (proc, runtime) = sut.read(&mut buf).unwrap().unwrap();
        assert_eq!(proc.state, b'R', "the reading thread runs");
        assert!(runtime > 0);
        assert!(ictus_os::facts::online_cpus().contains(proc.processor));
    }
}
