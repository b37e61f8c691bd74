//! What a reading reads: proc and sysfs files read again and again without reopening,
//! their parsing, and the sources the record names.

use std::fs::File;
use std::os::unix::fs::FileExt;

use ictus_core::Nanos;

/// A file read again and again with `pread` at offset 0.
pub(super) struct Reread {
    file: File,
    buf: Vec<u8>,
}

impl Reread {
    pub(super) fn open(path: &str) -> Option<Reread> {
        Reread::sized(path, 16 * 1024)
    }

    /// With a buffer of `size` bytes to start (it grows when a read fills it).
    pub(super) fn sized(path: &str, size: usize) -> Option<Reread> {
        Some(Reread {
            file: File::open(path).ok()?,
            buf: vec![0; size.max(64)],
        })
    }

    pub(super) fn read(&mut self) -> Option<&str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    pub(super) fn bytes(&mut self) -> Option<&[u8]> {
        let mut len = 0;
        loop {
            if len == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let room = self.buf.len() - len;
            match self.file.read_at(&mut self.buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    // A proc or sysfs file fills what it is given unless it ended: a
                    // short read is the end (asking again would make a seq_file
                    // generate the whole file once more, 25 us for /proc/interrupts).
                    if n < room {
                        break;
                    }
                }
                Err(_) => return None,
            }
        }
        Some(&self.buf[..len])
    }
}

/// How each cause's time is found here, for the record's sources: IRQ time
/// accounting (`None`: the kernel's config unreadable), whether cpuidle has states,
/// the hypervisor, one tick of `/proc/stat`.
pub(super) fn accounting_sources(
    irq_time: Option<bool>,
    cpuidle: bool,
    hypervisor: Option<&str>,
    tick_ns: u64,
) -> Vec<String> {
    let tick = Nanos::new(tick_ns);
    let cost = crate::EVENT_COST;
    vec![
        format!(
            "time by cause: the thread's run time and run delay from schedstat (ns); other \
             threads' run time on its CPU from the scans around the miss (ns, bounded by the \
             run delay); steal from /proc/stat (ticks of {tick}, a tick less counted); page \
             faults at {} each (measured, an estimate)",
            crate::FAULT_COST
        ),
        match irq_time {
            Some(true) => format!(
                "interrupts and softirqs timed from /proc/stat's irq and softirq columns \
                 (CONFIG_IRQ_TIME_ACCOUNTING; ticks of {tick}, a tick less counted; under two \
                 ticks, their count x {cost})"
            ),
            Some(false) => format!(
                "interrupts and softirqs: this kernel does not account IRQ time \
                 (CONFIG_IRQ_TIME_ACCOUNTING off), so each counts {cost}, a per-event cost \
                 measured on a 2-vCPU VM (an estimate)"
            ),
            None => format!(
                "interrupts and softirqs: the kernel's config is unreadable, so whether it \
                 accounts IRQ time is unknown; each counts {cost}, a measured per-event cost \
                 (an estimate)"
            ),
        },
        if cpuidle {
            "idle exits: the exit latency of the deepest state entered (cpuidle, us), with \
             the CPU's idle time"
                .into()
        } else {
            "idle exits: no cpuidle states here, so no idle exit is accounted".into()
        },
        match hypervisor {
            Some(h) => format!(
                "a virtual machine ({h}): lateness that nothing here accounts for is named a \
                 host stall (the vCPU did not run)"
            ),
            None => "bare metal: lateness that nothing here accounts for is named \
                     unaccounted (SMIs, firmware; the hwlat tracer confirms)"
                .into(),
        },
    ]
}

/// Which tracer the figures could have come from: none here unless tracefs has
/// timerlat, and the sampler reads none (every figure is from the counters).
pub(super) fn tracer_source(tracefs: Option<&ictus_os::tracefs::Tracefs>) -> String {
    match tracefs {
        Some(t) if t.has_tracer("timerlat") => format!(
            "the kernel has the timerlat tracer ({}): not read by this sampler, every figure \
             comes from the counters above (rtla timerlat -a splits one miss into IRQ and \
             thread latency)",
            t.root().display()
        ),
        Some(t) => format!(
            "no timerlat tracer: tracefs at {} lists {}; every figure comes from the counters \
             above, so interrupt and thread latency are not split",
            t.root().display(),
            if t.tracers().is_empty() {
                "no tracer".to_string()
            } else {
                t.tracers().join(", ")
            }
        ),
        None => "no timerlat tracer: tracefs is not mounted here (nor readable), so no \
                 tracer was read; every figure comes from the counters above, and interrupt \
                 and thread latency are not split"
            .into(),
    }
}

/// Fields 10 (minflt) and 12 (majflt) of a `stat` line.
pub(super) fn faults(line: &[u8]) -> (u64, u64) {
    let Some(close) = line.iter().rposition(|&b| b == b')') else {
        return (0, 0);
    };
    let mut fields = line[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let num = |f: Option<&[u8]>| {
        f.and_then(|f| std::str::from_utf8(f).ok()?.parse().ok())
            .unwrap_or(0)
    };
    // Field 3 is the first after ')': field 10 is the 8th, field 12 the 10th.
    let minflt = num(fields.nth(7));
    let majflt = num(fields.nth(1));
    (minflt, majflt)
}

/// Reads a per-CPU table (`/proc/interrupts`, `/proc/softirqs`): for each line with a
/// count per CPU, the counts of `cpus` into `out` (`[line * ncpu + cpu]`), lines in
/// the order of `names` (a line seen the first time is added to it).
pub(super) fn per_cpu_table(
    text: &str,
    cpus: &[usize],
    names: &mut Vec<String>,
    out: &mut Vec<u64>,
    describe: bool,
) {
    let mut lines = text.lines();
    let Some(header) = lines.next() else { return };
    let columns: Vec<usize> = header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let index: Vec<Option<usize>> = cpus
        .iter()
        .map(|c| columns.iter().position(|x| x == c))
        .collect();
    let ncpu = cpus.len();
    out.resize(names.len() * ncpu, 0);
    let mut counts = Vec::with_capacity(columns.len());
    for (line_no, line) in lines.enumerate() {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let mut words = rest.split_whitespace();
        counts.clear();
        counts.extend(
            words
                .by_ref()
                .take(columns.len())
                .map_while(|w| w.parse::<u64>().ok()),
        );
        if counts.len() != columns.len() {
            continue;
        }
        // A numbered line's device is its last word; a named one is its label.
        let device = (describe && label.chars().all(|c| c.is_ascii_digit()))
            .then(|| words.last().unwrap_or(label));
        let is = |n: &str| match device {
            Some(d) => n
                .strip_prefix(label)
                .and_then(|r| r.strip_prefix(':'))
                .is_some_and(|r| r == d),
            None => n == label,
        };
        // Lines come in the same order at each reading: the same line first.
        let line_index = match names
            .get(line_no)
            .filter(|n| is(n))
            .map(|_| line_no)
            .or_else(|| names.iter().position(|n| is(n)))
        {
            Some(i) => i,
            None => {
                names.push(match device {
                    Some(d) => format!("{label}:{d}"),
                    None => label.to_string(),
                });
                out.resize(names.len() * ncpu, 0);
                names.len() - 1
            }
        };
        for (ci, col) in index.iter().enumerate() {
            if let Some(col) = col {
                out[line_index * ncpu + ci] = counts[*col];
            }
        }
    }
}

/// The lines whose count on CPU index `ci` moved between two readings, but `skip`.
pub(super) fn deltas(
    names: &[String],
    before: &[u64],
    after: &[u64],
    ncpu: usize,
    ci: usize,
    skip: &[&str],
) -> Vec<(String, u64)> {
    names
        .iter()
        .enumerate()
        .filter(|(_, n)| !skip.contains(&n.as_str()))
        .filter_map(|(li, n)| {
            let i = li * ncpu + ci;
            let d = after.get(i)?.saturating_sub(*before.get(i)?);
            (d > 0).then(|| (n.clone(), d))
        })
        .collect()
}

/// The usage files of `cpu`'s idle states with an exit latency, the time files of
/// every state, and the deepest one (name, exit latency in us).
pub(super) fn idle_states(cpu: usize) -> (Vec<Reread>, Vec<Reread>, Option<(String, u64)>) {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let mut files = Vec::new();
    let mut times = Vec::new();
    let mut deepest: Option<(String, u64)> = None;
    for k in 0..16 {
        let state = format!("{dir}/state{k}");
        let Ok(latency) = std::fs::read_to_string(format!("{state}/latency")) else {
            break;
        };
        if let Some(f) = Reread::sized(&format!("{state}/time"), 64) {
            times.push(f);
        }
        let latency: u64 = latency.trim().parse().unwrap_or(0);
        if latency == 0 {
            continue;
        }
        if let Some(f) = Reread::open(&format!("{state}/usage")) {
            files.push(f);
            let name = std::fs::read_to_string(format!("{state}/name"))
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|_| format!("state{k}"));
            if deepest.as_ref().is_none_or(|(_, l)| latency > *l) {
                deepest = Some((name, latency));
            }
        }
    }
    (files, times, deepest)
}

/// `sched_rt_runtime_us` and `sched_rt_period_us` in nanoseconds, `None` when
/// throttling is off or unreadable.
pub(super) fn rt_budget() -> Option<(u64, u64)> {
    let read = |name: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let runtime = read("sched_rt_runtime_us")?;
    let period = read("sched_rt_period_us")?;
    (runtime >= 0 && period > 0).then(|| (runtime as u64 * 1_000, period as u64 * 1_000))
}

/// The sum of the numbers in `files` (cpuidle's counters of every state).
pub(super) fn sum_of(files: &mut [Reread]) -> u64 {
    files
        .iter_mut()
        .filter_map(|f| f.read()?.trim().parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_cpu_table_keeps_the_asked_cpus_and_names_devices() {
        let text = "           CPU0       CPU1\n\
              9:          0          5   IO-APIC    9-fasteoi   acpi\n\
             36:          0      32618   PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
            LOC:      24606      26566   Local timer interrupts\n\
            ERR:          0\n";
        let mut names = Vec::new();
        let mut out = Vec::new();
        per_cpu_table(text, &[1], &mut names, &mut out, true);
        assert_eq!(names, ["9:acpi", "36:virtio1-req.0", "LOC"]);
        assert_eq!(out, [5, 32618, 26566]);
        let later = text.replace("32618", "32620");
        let mut out2 = Vec::new();
        per_cpu_table(&later, &[1], &mut names, &mut out2, true);
        assert_eq!(
            deltas(&names, &out, &out2, 1, 0, &["LOC"]),
            [("36:virtio1-req.0".to_string(), 2)]
        );
    }

    #[test]
    fn faults_are_fields_ten_and_twelve() {
        let line = b"42 (a b) S 1 42 42 0 -1 4194560 17 0 3 0 7 3 0 0 20 0 1 0 99";
        assert_eq!(faults(line), (17, 3));
    }
}
