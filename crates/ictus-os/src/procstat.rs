//! Counters from `/proc/stat`: per-CPU time by kind, steal time above all (on a virtual
//! machine, time the host ran something else while this guest wanted the CPU).
//!
//! ```
//! let before = ictus_os::procstat::read().unwrap();
//! let after = ictus_os::procstat::read().unwrap();
//! let steal = after.steal_since(&before);
//! assert!(steal.total_ns <= 1_000_000_000);
//! ```

use std::io;

use serde::{Deserialize, Serialize};

/// Time one CPU (or all of them) spent in each state, in clock ticks (`USER_HZ`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// User time.
    pub user: u64,
    /// Niced user time.
    pub nice: u64,
    /// System time.
    pub system: u64,
    /// Idle time.
    pub idle: u64,
    /// Waiting for I/O.
    pub iowait: u64,
    /// Serving interrupts.
    pub irq: u64,
    /// Serving softirqs.
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTimes {
    /// All accounted time (every counter above).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// One reading of `/proc/stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatSnapshot {
    /// All CPUs together.
    pub total: CpuTimes,
    /// Each CPU, by CPU number.
    pub per_cpu: Vec<(usize, CpuTimes)>,
    /// Clock ticks per second of these counters.
    pub ticks_per_second: u64,
}

/// Steal time between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StealDelta {
    /// All CPUs together.
    pub total_ns: u64,
    /// Each CPU.
    pub per_cpu_ns: Vec<(usize, u64)>,
}

/// Reads `/proc/stat`.
pub fn read() -> io::Result<StatSnapshot> {
    let text = std::fs::read_to_string("/proc/stat")?;
    Ok(parse(&text, user_hz()))
}

/// Clock ticks per second of `/proc/stat`'s counters (`USER_HZ`).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf only returns a value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).unwrap_or(100).max(1)
}

/// Parses the text of `/proc/stat` (counters in ticks of `ticks_per_second`).
pub fn parse(text: &str, ticks_per_second: u64) -> StatSnapshot {
    let mut snap = StatSnapshot {
        ticks_per_second,
        ..StatSnapshot::default()
    };
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(rest) = name.strip_prefix("cpu") else {
            continue;
        };
        let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        let times = CpuTimes {
            user: get(0),
            nice: get(1),
            system: get(2),
            idle: get(3),
            iowait: get(4),
            irq: get(5),
            softirq: get(6),
            steal: get(7),
        };
        if rest.is_empty() {
            snap.total = times;
        } else if let Ok(cpu) = rest.parse() {
            snap.per_cpu.push((cpu, times));
        }
    }
    snap
}

impl StatSnapshot {
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ticks.saturating_mul(1_000_000_000) / self.ticks_per_second.max(1)
    }

    /// Steal time accumulated since `earlier`.
    pub fn steal_since(&self, earlier: &StatSnapshot) -> StealDelta {
        StealDelta {
            total_ns: self.ticks_to_ns(self.total.steal.saturating_sub(earlier.total.steal)),
            per_cpu_ns: self
                .per_cpu
                .iter()
                .map(|(cpu, t)| {
                    let before = earlier
                        .per_cpu
                        .iter()
                        .find(|(c, _)| c == cpu)
                        .map_or(0, |(_, e)| e.steal);
                    (*cpu, self.ticks_to_ns(t.steal.saturating_sub(before)))
                })
                .collect(),
        }
    }

    /// Steal time since boot, all CPUs together.
    pub fn steal_total_ns(&self) -> u64 {
        self.ticks_to_ns(self.total.steal)
    }

    /// All accounted CPU time since boot, all CPUs together.
    pub fn accounted_total_ns(&self) -> u64 {
        self.ticks_to_ns(self.total.total())
    }
}

/// The fields of a task's `stat` file (`/proc/<pid>/stat`, `/proc/<pid>/task/<tid>/stat`)
/// that ictus reads: the one parser of that format, for every crate. It allocates
/// nothing, so a sampler may call it on a real-time thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStat {
    /// Field 3: `R`, `S`, `D`, `Z` (zombie), `X`/`x` (dead)...
    pub state: u8,
    /// Field 9: the kernel's task flags (`PF_KTHREAD` for kernel threads...).
    pub flags: u64,
    /// Field 14: user time, in `USER_HZ` ticks.
    pub utime: u64,
    /// Field 15: system time, in `USER_HZ` ticks.
    pub stime: u64,
    /// Field 22: start time after boot, in `USER_HZ` ticks (with the pid, names a
    /// process for good: pids are reused, start times are not).
    pub start_time: u64,
    /// Field 39: the CPU it last ran on.
    pub processor: usize,
    /// Field 40: its real-time priority (0 for the normal classes).
    pub rt_priority: u32,
    /// Field 41: its policy (0 OTHER, 1 FIFO, 2 RR, 3 BATCH, 5 IDLE, 6 DEADLINE).
    pub policy: u32,
}

impl TaskStat {
    /// Parses one `stat` line. The command name (field 2) is in parentheses and may
    /// hold spaces, parentheses and bytes that are not UTF-8, so the fields are
    /// counted after the last `)`.
    pub fn parse(line: &[u8]) -> Option<TaskStat> {
        let close = line.iter().rposition(|&b| b == b')')?;
        let mut fields = line[close + 1..]
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let state = *fields.next()?.first()?;
        let mut stat = TaskStat {
            state,
            flags: 0,
            utime: 0,
            stime: 0,
            start_time: 0,
            processor: 0,
            rt_priority: 0,
            policy: 0,
        };
        fn num<T: std::str::FromStr>(f: &[u8]) -> Option<T> {
            std::str::from_utf8(f).ok()?.parse().ok()
        }
        // The field after the state is field 4.
        for (n, f) in (4..).zip(fields) {
            match n {
                9 => stat.flags = num(f)?,
                14 => stat.utime = num(f)?,
                15 => stat.stime = num(f)?,
                22 => stat.start_time = num(f)?,
                39 => stat.processor = num(f)?,
                40 => stat.rt_priority = num(f)?,
                41 => {
                    stat.policy = num(f)?;
                    return Some(stat);
                }
                _ => {}
            }
        }
        None
    }

    /// The command name of a `stat` line (between the first `(` and the last `)`).
    pub fn comm(line: &[u8]) -> Option<&[u8]> {
        let open = line.iter().position(|&b| b == b'(')?;
        let close = line.iter().rposition(|&b| b == b')')?;
        line.get(open + 1..close)
    }

    /// Reads and parses the `stat` file at `path`.
    pub fn read(path: &str) -> Option<TaskStat> {
        TaskStat::parse(&std::fs::read(path).ok()?)
    }

    /// Whether the task has exited (a zombie not yet reaped, or dead).
    pub fn exited(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }

    /// User and system time together, in `USER_HZ` ticks.
    pub fn ticks(&self) -> u64 {
        self.utime.saturating_add(self.stime)
    }
}

/// Interrupts served by each CPU so far, other than the local timer's (every line of
/// `/proc/interrupts` with a count per CPU, summed, but `LOC`: a measuring thread's
/// own timed sleeps raise those), indexed by the CPU numbers of its header.
pub fn interrupts() -> io::Result<Vec<(usize, u64)>> {
    Ok(parse_interrupts(&std::fs::read_to_string(
        "/proc/interrupts",
    )?))
}

/// Parses the text of `/proc/interrupts`: per CPU of the header (`CPU0 CPU1 ...`), the
/// sum of its column over the lines that have one (`ERR:` and `MIS:` have a single
/// total and are left out), but the local timer's (`LOC:`).
pub fn parse_interrupts(text: &str) -> Vec<(usize, u64)> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let cpus: Vec<usize> = header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut sums = vec![0u64; cpus.len()];
    for line in lines {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        if label.trim() == "LOC" {
            continue;
        }
        let counts: Vec<u64> = rest
            .split_whitespace()
            .take(cpus.len())
            .map_while(|w| w.parse().ok())
            .collect();
        if counts.len() == cpus.len() {
            for (sum, c) in sums.iter_mut().zip(counts) {
                *sum = sum.saturating_add(c);
            }
        }
    }
    cpus.into_iter().zip(sums).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        // A name with spaces, parentheses and a byte that is not UTF-8.
        let mut line = b"4242 (a) b (\xff) R 1 4242 4242 0 -1 4194560 5 0 0 0 7 3 0 0 \
            -51 0 1 0 123456 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 \
            1 80 1 0 0 0"
            .to_vec();
        line.push(b'\n');
        let sut = TaskStat::parse(&line).unwrap();
        assert_eq!(
            sut,
            TaskStat {
                state: b'R',
                flags: 4_194_560,
                utime: 7,
                stime: 3,
                start_time: 123_456,
                processor: 1,
                rt_priority: 80,
                policy: 1,
            }
        );
        assert_eq!(TaskStat::comm(&line), Some(&b"a) b (\xff"[..]));
        assert_eq!(sut.ticks(), 10);
        assert!(!sut.exited());
        assert_eq!(TaskStat::parse(b"1 (x) Z 0 0"), None, "too short");
        let me = TaskStat::read("/proc/self/stat").unwrap();
        assert!(me.start_time > 0 && !me.exited());
    }

    #[test]
    fn interrupts_are_summed_per_cpu_of_the_header() {
        let text = "           CPU0       CPU1       CPU3\n\
              0:         44          0          2   IO-APIC    2-edge      timer\n\
             24:     123456      98765          1   PCI-MSI 512000-edge      ahci\n\
            LOC:    9000000    8000000        100   Local timer interrupts\n\
            ERR:          3\n\
            MIS:          0\n";
        assert_eq!(
            super::parse_interrupts(text),
            [(0, 123_500), (1, 98_765), (3, 3)]
        );
        assert!(super::parse_interrupts("").is_empty());
        let here = super::interrupts().unwrap();
        assert!(!here.is_empty() && here.iter().any(|&(_, n)| n > 0));
    }

    use super::*;

    const BEFORE: &str = "cpu  10 0 5 100 0 0 0 7 0 0\ncpu0 5 0 2 50 0 0 0 3 0 0\ncpu1 5 0 3 50 0 0 0 4 0 0\nintr 1 2 3\n";
    const AFTER: &str =
        "cpu  20 0 5 100 0 0 0 19 0 0\ncpu0 5 0 2 50 0 0 0 3 0 0\ncpu1 15 0 3 50 0 0 0 16 0 0\n";

    #[test]
    fn steal_is_the_eighth_counter() {
        let sut = parse(BEFORE, 100);
        assert_eq!(sut.total.steal, 7);
        assert_eq!(sut.per_cpu.len(), 2);
        assert_eq!(
            sut.per_cpu[1],
            (
                1,
                CpuTimes {
                    user: 5,
                    system: 3,
                    idle: 50,
                    steal: 4,
                    ..CpuTimes::default()
                }
            )
        );
    }

    #[test]
    fn accounted_time_sums_every_counter() {
        let sut = parse(BEFORE, 100);
        assert_eq!(sut.accounted_total_ns(), (10 + 5 + 100 + 7) * 10_000_000);
        assert_eq!(sut.steal_total_ns(), 70_000_000);
    }

    #[test]
    fn steal_delta_converts_ticks_to_nanoseconds() {
        let sut = parse(AFTER, 100).steal_since(&parse(BEFORE, 100));
        assert_eq!(sut.total_ns, 120_000_000);
        assert_eq!(sut.per_cpu_ns, vec![(0, 0), (1, 120_000_000)]);
    }
}
