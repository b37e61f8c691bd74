//! The kernel's tracing file system: finding it, and running the `timerlat` tracer with
//! every setting it touches restored afterwards.
//!
//! ```no_run
//! match ictus_os::tracefs::find() {
//!     Some(t) if t.has_tracer("timerlat") => println!("timerlat at {}", t.root().display()),
//!     _ => println!("no timerlat tracer here"),
//! }
//! ```

use std::io;
use std::path::{Path, PathBuf};

/// A mounted tracefs.
#[derive(Clone, Debug)]
pub struct Tracefs {
    root: PathBuf,
    tracers: Vec<String>,
}

/// Where tracefs is usually mounted.
const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The mounted tracefs whose tracer list is readable, if any.
pub fn find() -> Option<Tracefs> {
    ROOTS.iter().find_map(|root| {
        let root = PathBuf::from(root);
        let tracers = std::fs::read_to_string(root.join("available_tracers")).ok()?;
        Some(Tracefs {
            tracers: tracers.split_whitespace().map(str::to_string).collect(),
            root,
        })
    })
}

impl Tracefs {
    /// Its mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The tracers this kernel has.
    pub fn tracers(&self) -> &[String] {
        &self.tracers
    }
    /// Whether the kernel has `name`.
    pub fn has_tracer(&self, name: &str) -> bool {
        self.tracers.iter().any(|t| t == name)
    }

    /// Starts `timerlat` with a period on `cpus` (kernel list form); the settings it
    /// changes are written back when the returned session ends (also on unwinding).
    pub fn start_timerlat(&self, period_us: u64, cpus: &str) -> io::Result<TimerlatSession> {
        let mut session = TimerlatSession {
            root: self.root.clone(),
            saved: Vec::new(),
        };
        session.set("tracing_on", "0")?;
        session.set("current_tracer", "nop")?;
        session.set("buffer_size_kb", "8192")?;
        session.set("osnoise/timerlat_period_us", &period_us.to_string())?;
        session.set("osnoise/cpus", cpus)?;
        std::fs::write(self.root.join("trace"), "")?;
        session.set("current_tracer", "timerlat")?;
        session.set("tracing_on", "1")?;
        Ok(session)
    }
}

/// A running timerlat trace; dropping it restores every setting in reverse order.
#[derive(Debug)]
pub struct TimerlatSession {
    root: PathBuf,
    saved: Vec<(String, String)>,
}

impl TimerlatSession {
    fn set(&mut self, file: &str, value: &str) -> io::Result<()> {
        let path = self.root.join(file);
        let before = std::fs::read_to_string(&path)?.trim().to_string();
        std::fs::write(&path, value)?;
        self.saved.push((file.to_string(), before));
        Ok(())
    }

    /// Stops tracing and returns the trace text.
    pub fn finish(mut self) -> io::Result<String> {
        std::fs::write(self.root.join("tracing_on"), "0")?;
        let text = std::fs::read_to_string(self.root.join("trace"));
        self.restore();
        text
    }

    fn restore(&mut self) {
        while let Some((file, value)) = self.saved.pop() {
            let _ = std::fs::write(self.root.join(&file), value);
        }
    }
}

impl Drop for TimerlatSession {
    fn drop(&mut self) {
        self.restore();
    }
}

/// One latency sample from a timerlat trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerlatSample {
    /// The CPU.
    pub cpu: usize,
    /// `true` for the IRQ context, `false` for the thread context.
    pub irq: bool,
    /// The latency in nanoseconds.
    pub latency_ns: u64,
}

/// Parses one line of a timerlat trace
/// (`<idle>-0 [000] d.h1 54.029328: #1 context irq timer_latency 932 ns`).
pub fn parse_timerlat_line(line: &str) -> Option<TimerlatSample> {
    let open = line.find('[')?;
    let close = line[open..].find(']')? + open;
    let cpu = line[open + 1..close].trim().parse().ok()?;
    let rest = &line[close..];
    let ctx = rest.find("context")?;
    let mut words = rest[ctx + "context".len()..].split_whitespace();
    let irq = match words.next()? {
        "irq" => true,
        "thread" => false,
        _ => return None,
    };
    if words.next()? != "timer_latency" {
        return None;
    }
    let value: u64 = words.next()?.parse().ok()?;
    let latency_ns = match words.next().unwrap_or("ns") {
        "ns" => value,
        "us" => value * 1_000,
        _ => return None,
    };
    Some(TimerlatSample {
        cpu,
        irq,
        latency_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_and_thread_lines_parse() {
        let sut = parse_timerlat_line(
            "        <idle>-0       [000] d.h1    54.029328: #1     context    irq timer_latency       932 ns",
        );
        assert_eq!(
            sut,
            Some(TimerlatSample {
                cpu: 0,
                irq: true,
                latency_ns: 932
            })
        );
        let sut = parse_timerlat_line(
            "         <...>-868     [001] ....    54.029353: #1     context thread timer_latency      9820 ns",
        );
        assert_eq!(
            sut,
            Some(TimerlatSample {
                cpu: 1,
                irq: false,
                latency_ns: 9820
            })
        );
    }

    #[test]
    fn headers_and_other_events_are_skipped() {
        assert_eq!(parse_timerlat_line("# tracer: timerlat"), None);
        assert_eq!(
            parse_timerlat_line(
                "#         TASK-PID      CPU# ||||   TIMESTAMP    ID            CONTEXT                LATENCY"
            ),
            None
        );
        assert_eq!(
            parse_timerlat_line("  bash-1 [000] .... 1.0: sched_switch: prev_comm=bash"),
            None
        );
    }
}
