//! Injected causes are named: a busy SCHED_FIFO 99 thread of another process on the
//! measured CPU, and RT throttling provoked by a busy FIFO spinner there. Structure
//! only: the misses they cause are named as theirs; how late they were is a benchmark.

mod common;

use std::process::{Child, Command};

use ictus_os::testing::skipped;

/// A process of our own, ended by its pid when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Root, two CPUs or more, python3 and chrt: else the test says why it is skipped.
fn setting(test: &str) -> Option<usize> {
    let cpus = ictus_os::facts::online_cpus();
    let why = (!common::is_root())
        .then_some("needs root for SCHED_FIFO")
        .or_else(|| (cpus.len() < 2).then_some("needs two CPUs"))
        .or_else(|| which("python3").is_none().then_some("needs python3"))
        .or_else(|| which("chrt").is_none().then_some("needs chrt"));
    if let Some(why) = why {
        skipped(test, why);
        return None;
    }
    cpus.cpus().last().copied()
}

fn which(tool: &str) -> Option<()> {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| ())
}

/// `python3 -c CODE` under `chrt -f PRIO`, pinned to `cpu`.
fn burner(prio: u8, cpu: usize, code: &str) -> Spawned {
    Spawned(
        Command::new("chrt")
            .args(["-f", &prio.to_string(), "taskset", "-c", &cpu.to_string()])
            .args(["python3", "-c", code])
            .spawn()
            .expect("spawn the burner"),
    )
}

/// Runs the timer probe on `cpu` for `secs` and returns the record's explanation.
fn timer_explanation(cpu: usize, secs: u32) -> serde_json::Value {
    let out = common::succeeds(
        common::ictus()
            .args(["probe", "timer", "--cpus", &cpu.to_string(), "--json"])
            .args(["--duration", &format!("{secs}s"), "--mlock"]),
    );
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    record["explanation"].clone()
}

/// The events at least `ms` late whose causes mention `needle`, and all of them.
fn named(explanation: &serde_json::Value, ms: u64, needle: &str) -> (usize, usize) {
    let events: Vec<&serde_json::Value> = explanation["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["lateness_ns"].as_u64().unwrap() >= ms * 1_000_000)
        .collect();
    let hits = events
        .iter()
        .filter(|e| e["causes"].to_string().contains(needle))
        .count();
    (hits, events.len())
}

#[test]
fn a_fifo_99_burner_of_another_process_is_named_for_the_misses_it_causes() {
    let _turn = common::one_at_a_time();
    let Some(cpu) = setting("a_fifo_99_burner_of_another_process_is_named") else {
        return;
    };
    // 5 ms of work every 500 ms at FIFO 99: each burst holds the FIFO 95 timer off
    // its CPU for several periods. Each burst's start and end (CLOCK_MONOTONIC ns) on
    // its stdout: the misses it made are those whose window overlaps one.
    let mut burner = Spawned(
        Command::new("chrt")
            .args([
                "-f",
                "99",
                "taskset",
                "-c",
                &cpu.to_string(),
                "python3",
                "-c",
            ])
            .arg(
                "import time\nend=time.monotonic()+8\nwhile time.monotonic()<end:\n \
                 t=time.monotonic_ns()\n while time.monotonic_ns()-t<5000000: pass\n \
                 print(t, time.monotonic_ns(), flush=True)\n time.sleep(0.5)",
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the burner"),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let e = timer_explanation(cpu, 4);
    let _ = burner.0.kill();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut burner.0.stdout.take().unwrap(), &mut text).unwrap();
    let bursts: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().map(|n| n.parse::<u64>().ok());
            Some((w.next()??, w.next()??))
        })
        .collect();
    let t0 = e["clock_start_ns"].as_u64().unwrap();
    let made: Vec<&serde_json::Value> = e["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ev| {
            let start = t0 + ev["at_ns"].as_u64().unwrap();
            let end = start + ev["lateness_ns"].as_u64().unwrap();
            bursts.iter().any(|&(s, f)| s <= end && f >= start)
        })
        .collect();
    assert!(
        made.len() >= 2,
        "the burner's {} bursts made misses: {e}",
        bursts.len()
    );
    let hits = made
        .iter()
        .filter(|ev| ev["causes"].to_string().contains("\"comm\":\"python3\""))
        .count();
    assert!(
        hits * 10 >= made.len() * 9,
        "{hits} of {} named the burner: {e}",
        made.len()
    );
}

#[test]
fn rt_throttling_provoked_by_a_busy_fifo_spinner_is_named() {
    let _turn = common::one_at_a_time();
    let Some(cpu) = setting("rt_throttling_provoked_by_a_busy_fifo_spinner_is_named") else {
        return;
    };
    let throttles = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .is_ok_and(|v| v.trim() != "-1");
    if !throttles {
        skipped(
            "rt_throttling_is_named",
            "RT throttling is off on this machine",
        );
        return;
    }
    // A FIFO 50 spinner below the timer's FIFO 95: the timer preempts it, but together
    // they use the CPU's whole RT budget, and the kernel throttles both each second.
    let _spinner = burner(
        50,
        cpu,
        "import time\nend=time.monotonic()+8\nwhile time.monotonic()<end: pass",
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let e = timer_explanation(cpu, 4);
    // Throttling is inferred from the RT threads' run time over the last RT period
    // (1 s), which the sampler sees only from its own start: a miss in its first
    // period can be named by what preempted the timer, not yet by the budget (one
    // CI run, 2026-11-28: the miss at 134 ms, "preempted by python3 FIFO 50").
    let mut later = e.clone();
    if let Some(events) = later["events"].as_array_mut() {
        events.retain(|ev| ev["at_ns"].as_u64().unwrap_or(0) >= 1_000_000_000);
    }
    let (hits, of) = named(&later, 20, "rt-throttling");
    assert!(of >= 1, "throttling caused misses: {e}");
    assert!(
        hits * 10 >= of * 9,
        "{hits} of {of} named RT throttling: {e}"
    );
}

/// An IRQ's affinity, put back when dropped.
struct Steered {
    irq: u32,
    before: String,
}

impl Drop for Steered {
    fn drop(&mut self) {
        let _ = std::fs::write(
            format!("/proc/irq/{}/smp_affinity_list", self.irq),
            &self.before,
        );
    }
}

/// Direct writes of 4 KiB blocks to a scratch file for `secs` seconds: each one a
/// disk request, completed by the disk's interrupt.
fn disk_load(path: &std::path::Path, secs: u64) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    // O_DIRECT needs aligned buffers: a 4 KiB-aligned block from a larger Vec.
    let raw = vec![0u8; 8192];
    let offset = raw.as_ptr().align_offset(4096);
    let block = &raw[offset..offset + 4096];
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(path)
    else {
        return;
    };
    let mut n = 0u64;
    while std::time::Instant::now() < end {
        if f.write_all(block).is_err() {
            break;
        }
        n += 1;
        if n.is_multiple_of(4096) {
            let _ = std::io::Seek::rewind(&mut f);
        }
    }
}

/// The numbered interrupt line that moved most while `load` ran.
fn busiest_irq(load: impl FnOnce()) -> Option<u32> {
    let counts = || -> Vec<(u32, u64)> {
        std::fs::read_to_string("/proc/interrupts")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (label, rest) = l.split_once(':')?;
                let irq = label.trim().parse().ok()?;
                let sum = rest
                    .split_whitespace()
                    .map_while(|w| w.parse::<u64>().ok())
                    .sum();
                Some((irq, sum))
            })
            .collect()
    };
    let before = counts();
    load();
    counts()
        .into_iter()
        .filter_map(|(irq, n)| {
            let b = before.iter().find(|(i, _)| *i == irq)?.1;
            Some((irq, n.saturating_sub(b)))
        })
        .filter(|(_, d)| *d > 100)
        .max_by_key(|(_, d)| *d)
        .map(|(irq, _)| irq)
}

#[test]
fn an_interrupt_load_steered_to_the_measured_cpu_is_named() {
    let _turn = common::one_at_a_time();
    let Some(cpu) = setting("an_interrupt_load_steered_to_the_measured_cpu_is_named") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let Some(irq) = busiest_irq(|| disk_load(&scratch, 1)) else {
        skipped(
            "an_interrupt_load_is_named",
            "direct disk writes raised no interrupt here",
        );
        return;
    };
    // A managed IRQ (a multi-queue device's) stays where the kernel put it: then the
    // measured CPU is the one it is served on. Otherwise it is steered to `cpu`.
    let effective = std::fs::read_to_string(format!("/proc/irq/{irq}/effective_affinity_list"))
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok());
    let path = format!("/proc/irq/{irq}/smp_affinity_list");
    let before = std::fs::read_to_string(&path).unwrap_or_default();
    let _steered = Steered {
        irq,
        before: before.trim().to_string(),
    };
    let cpu = match std::fs::write(&path, cpu.to_string()) {
        Ok(()) => cpu,
        Err(_) => match effective {
            Some(served_on) => served_on,
            None => {
                skipped(
                    "an_interrupt_load_is_named",
                    "the kernel refused to steer the disk's IRQ",
                );
                return;
            }
        },
    };
    let load = {
        let scratch = scratch.clone();
        std::thread::spawn(move || disk_load(&scratch, 6))
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = common::ictus()
        .args(["probe", "timer", "--cpus", &cpu.to_string(), "--json"])
        .args(["--duration", "4s", "--mlock", "--explain-threshold", "50us"])
        .output()
        .unwrap();
    load.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &record["explanation"];
    let events = e["events"].as_array().unwrap();
    if events.is_empty() {
        skipped(
            "an_interrupt_load_is_named",
            "the interrupt load made no release 50 us late here",
        );
        return;
    }
    let line = format!("\"{irq}:");
    // The line is found in the misses' windows, with the time it accounts for: as
    // a reason where that time is at least a fifth of the lateness, else as seen
    // (issue 32: no counter named for what it cannot account for). On this VM each
    // interrupt counts a measured 6 us (no IRQ time accounting), so the disk's
    // interrupts are a reason for some misses and seen beside a host stall in
    // others (a CI run of 2026-11-29: 5 misses, the line in all 5, a reason in 2);
    // how much of the lateness they account for is bench/validate-explain.sh's to
    // measure, not a test's. Most, not all: the storm's tail also makes late
    // releases whose window holds no interrupt of the line.
    let with_line: Vec<&serde_json::Value> = events
        .iter()
        .flat_map(|ev| {
            let causes = ev["causes"].as_array().into_iter().flatten();
            causes.chain(ev["seen"].as_array().into_iter().flatten())
        })
        .filter(|c| c["cause"] == "interrupts" && c.to_string().contains(&line))
        .collect();
    let hits = events
        .iter()
        .filter(|ev| format!("{}{}", ev["causes"], ev["seen"]).contains(&line))
        .count();
    assert!(
        hits * 4 >= events.len() * 3,
        "{hits} of {} found IRQ {irq}: {e}",
        events.len()
    );
    for c in with_line {
        assert!(
            c["accounts_ns"].as_u64().is_some_and(|ns| ns > 0),
            "the interrupts' time: {c}"
        );
        // Counted times a measured cost here; IRQ time where the kernel accounts it.
        assert!(
            c["source"] == "count-times-cost" || c["source"] == "proc-stat-ticks",
            "{c}"
        );
    }
}
