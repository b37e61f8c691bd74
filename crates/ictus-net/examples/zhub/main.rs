//! Seed 004's Table 2 (the semaphore loop) and Figures 6 and 7 (port throughput by
//! payload) with ictus hubs, by placement: two threads on one core, on two cores,
//! two processes (shared-memory hubs), and two hosts (the hubs' home hosts joined
//! by Zenoh). Run by `bench/hubs-hosts.sh`, which sets the bare UDP and TCP figures
//! of the same sizes beside them.
//!
//! ```text
//! zhub sem threads|processes CPU_A CPU_B COUNT
//! zhub port threads|processes SIZE COUNT CPU_S CPU_R
//! zhub sem hosts HOST_ARGS COUNT
//! zhub port hosts HOST_ARGS SIZE COUNT
//! zhub keys DIR H1,H2
//! ```
//!
//! **The semaphore loop** (the seed's appendix 1): thread A gives semaphore X and
//! takes Y; thread B takes X and gives Y. One iteration is one round trip; A times
//! each one. Threads: A on CPU_A, B on CPU_B (the same CPU: "one core").
//! Processes: B is this program in a child process (`zhub peer ...`) on CPU_B, the
//! hubs in shared memory.
//!
//! **Port throughput** (the seed's appendix 2): a sender hands COUNT messages of
//! SIZE bytes (one of [`SIZES`]) to a port hub, each `send` returning once the
//! receiver has copied it; the receiver takes a first message (the seed's initial
//! synchronisation), then times the COUNT receives that follow, and reports bytes
//! per second and the time between receives.
//!
//! **Across hosts** (`hosts`; see `link.rs`): HOST_ARGS are `--hosts h1,h2 --here
//! h1 --listen ENDPOINT [--connect ENDPOINT]... [--keys DIR]` (with the keys that
//! `zhub keys` makes, the links are Zenoh's QUIC or TLS with mutual
//! authentication; without, plain); the two processes run the same
//! command, one per host. Semaphore X's home is h1 and Y's is h2 (as the seed's
//! C0_S1 and C1_S2): A runs on h1, B on h2, each gives a local hub and takes a
//! remote one. The port's home is h2, where the receiver runs; the sender runs on
//! h1. The process on h1 (sem) or h2 (port) prints the figures.
//!
//! Each prints one line of JSON: `bench`, `placement`, the parameters, `count`,
//! `elapsed_ns`, the rates, and `latency` (ictus's summary: exact count, min and
//! max, percentiles, nanoseconds). Warm-up iterations ([`WARMUP`]) are not
//! recorded; no outlier is dropped. Every wait is bounded ([`PATIENCE`]): a peer
//! that never answers ends the run with an error, never a hang.
#![allow(clippy::print_stderr)] // usage errors of a bench tool

mod hosts;

use std::io::Write;
use std::process::{Child, Command, ExitCode};
use std::thread;
use std::time::{Duration, Instant};

use ictus_core::histogram::LatencyHistogram;
use ictus_core::{CpuSet, Nanos};
use ictus_exec::hub::{HubDecl, Hubs, Port, Semaphore};

/// Round trips (or messages) before the recorded ones: the first find cold
/// caches, and across hosts the link still joining.
pub(crate) const WARMUP: u64 = 100;

/// The longest any one wait may take before the run is declared broken.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// The payload sizes a port can carry here (a port's message type is fixed at
/// compile time: `[u8; SIZE]`).
pub(crate) const SIZES: [usize; 9] = [1, 16, 64, 256, 1024, 4096, 8192, 16384, 32768];

pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where the two ends run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    /// Two threads of this process, hubs in its memory.
    Threads,
    /// This process and a child, hubs in shared memory.
    Processes,
}

/// One run, as the command line asks it.
#[derive(Debug, PartialEq, Eq)]
enum Cmd {
    Sem {
        placement: Local,
        cpu_a: usize,
        cpu_b: usize,
        count: u64,
    },
    Port {
        placement: Local,
        size: usize,
        count: u64,
        cpu_s: usize,
        cpu_r: usize,
    },
    /// The child's half of `processes`.
    Peer(Peer),
    /// Makes the run's keys for `--keys` (directory, hosts).
    Keys(String, String),
    SemHosts(hosts::HostArgs, u64),
    PortHosts(hosts::HostArgs, usize, u64),
}

/// The child's half of a `processes` run: B of the loop, or the port's sender.
#[derive(Debug, PartialEq, Eq)]
enum Peer {
    Sem {
        shm: String,
        cpu: usize,
        count: u64,
    },
    Port {
        shm: String,
        size: usize,
        count: u64,
        cpu: usize,
    },
}

const USAGE: &str = "usage: zhub sem threads|processes CPU_A CPU_B COUNT\n\
    \x20      zhub port threads|processes SIZE COUNT CPU_S CPU_R\n\
    \x20      zhub sem hosts --hosts H1,H2 --here H --listen EP [--connect EP]... [--keys DIR] COUNT\n\
    \x20      zhub port hosts --hosts H1,H2 --here H --listen EP [--connect EP]... [--keys DIR] SIZE COUNT\n\
    \x20      zhub keys DIR H1,H2\n\
    SIZE: 1, 16, 64, 256, 1024, 4096, 8192, 16384 or 32768; COUNT: 1 to 100000000";

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what} `{text}`: expected a whole number"))
}

fn count(text: &str) -> Result<u64, String> {
    match number(text, "COUNT")? {
        c @ 1..=100_000_000 => Ok(c),
        c => Err(format!("COUNT {c}: expected 1 to 100000000")),
    }
}

fn size(text: &str) -> Result<usize, String> {
    let s = number(text, "SIZE")?;
    if SIZES.contains(&s) {
        Ok(s)
    } else {
        Err(format!("SIZE {s}: expected one of {SIZES:?}"))
    }
}

fn cpu(text: &str) -> Result<usize, String> {
    number(text, "CPU")
}

fn placement(text: &str) -> Result<Local, String> {
    match text {
        "threads" => Ok(Local::Threads),
        "processes" => Ok(Local::Processes),
        _ => Err(format!(
            "placement `{text}`: expected threads, processes or hosts"
        )),
    }
}

fn parse(args: &[&str]) -> Result<Cmd, String> {
    match args {
        ["sem", "hosts", rest @ ..] => {
            let (h, rest) = hosts::HostArgs::parse(rest)?;
            match rest {
                [c] => Ok(Cmd::SemHosts(h, count(c)?)),
                _ => Err("sem hosts: expected COUNT after the host options".into()),
            }
        }
        ["port", "hosts", rest @ ..] => {
            let (h, rest) = hosts::HostArgs::parse(rest)?;
            match rest {
                [s, c] => Ok(Cmd::PortHosts(h, size(s)?, count(c)?)),
                _ => Err("port hosts: expected SIZE COUNT after the host options".into()),
            }
        }
        ["keys", dir, names] => Ok(Cmd::Keys(dir.to_string(), names.to_string())),
        ["sem", p, a, b, c] => Ok(Cmd::Sem {
            placement: placement(p)?,
            cpu_a: cpu(a)?,
            cpu_b: cpu(b)?,
            count: count(c)?,
        }),
        ["port", p, s, c, cs, cr] => Ok(Cmd::Port {
            placement: placement(p)?,
            size: size(s)?,
            count: count(c)?,
            cpu_s: cpu(cs)?,
            cpu_r: cpu(cr)?,
        }),
        ["peer", "sem", shm, c, n] => Ok(Cmd::Peer(Peer::Sem {
            shm: shm.to_string(),
            cpu: cpu(c)?,
            count: count(n)?,
        })),
        ["peer", "port", shm, s, n, c] => Ok(Cmd::Peer(Peer::Port {
            shm: shm.to_string(),
            size: size(s)?,
            count: count(n)?,
            cpu: cpu(c)?,
        })),
        _ => Err("expected sem or port and their arguments".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cmd = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zhub: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let out = match cmd {
        Cmd::Sem {
            placement,
            cpu_a,
            cpu_b,
            count,
        } => sem(placement, cpu_a, cpu_b, count).map(Some),
        Cmd::Port {
            placement,
            size,
            count,
            cpu_s,
            cpu_r,
        } => port(placement, size, count, cpu_s, cpu_r).map(Some),
        Cmd::Peer(p) => peer(p).map(|()| None),
        Cmd::Keys(dir, names) => hosts::keys(&dir, &names).map(|()| None),
        Cmd::SemHosts(h, count) => link::sem(&h, count),
        Cmd::PortHosts(h, size, count) => link::port(&h, size, count),
    };
    match out {
        Ok(line) => {
            if let Some(line) = line {
                let mut o = std::io::stdout().lock();
                if writeln!(o, "{line}").is_err() {
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("zhub: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin(cpu: usize) -> Result<(), Error> {
    ictus_os::sched::set_affinity(&CpuSet::from_cpus([cpu]))
        .map_err(|e| format!("pinning to CPU {cpu}: {e}").into())
}

/// The loop's hubs: X (A gives, B takes) and Y (B gives, A takes).
pub(crate) fn sem_decls() -> Vec<HubDecl> {
    vec![HubDecl::semaphore("x", 0), HubDecl::semaphore("y", 0)]
}

/// The port's hub, for messages of `N` bytes.
pub(crate) fn port_decls<const N: usize>() -> Vec<HubDecl> {
    vec![HubDecl::port::<[u8; N]>("p")]
}

/// A bounded take: an error after [`PATIENCE`] without a token.
pub(crate) fn take(s: &Semaphore, name: &str) -> Result<(), Error> {
    if s.take_timeout(PATIENCE)? {
        Ok(())
    } else {
        Err(format!("no token on semaphore {name} in {PATIENCE:?}: the peer stopped").into())
    }
}

/// What a timed loop measured: the recorded iterations' times and their span.
pub(crate) struct Timed {
    pub(crate) hist: LatencyHistogram,
    pub(crate) elapsed: Duration,
}

/// A's half of the loop: give X, take Y, WARMUP + `count` times; each recorded
/// iteration timed.
pub(crate) fn sem_a(x: &Semaphore, y: &Semaphore, count: u64) -> Result<Timed, Error> {
    let mut hist = LatencyHistogram::new();
    let mut start = Instant::now();
    for i in 0..WARMUP + count {
        if i == WARMUP {
            start = Instant::now();
        }
        let t0 = Instant::now();
        x.give();
        take(y, "y")?;
        if i >= WARMUP {
            hist.record(Nanos::new(t0.elapsed().as_nanos() as u64));
        }
    }
    Ok(Timed {
        hist,
        elapsed: start.elapsed(),
    })
}

/// B's half of the loop: take X, give Y.
pub(crate) fn sem_b(x: &Semaphore, y: &Semaphore, count: u64) -> Result<(), Error> {
    for _ in 0..WARMUP + count {
        take(x, "x")?;
        y.give();
    }
    Ok(())
}

/// The port's receiver: a first message (the synchronisation), WARMUP more,
/// then `count` timed ones.
pub(crate) fn port_receive<const N: usize>(
    p: &mut Port<[u8; N]>,
    count: u64,
) -> Result<Timed, Error> {
    let mut hist = LatencyHistogram::new();
    let mut start = Instant::now();
    let mut last = start;
    for i in 0..1 + WARMUP + count {
        let m = p
            .receive_timeout(PATIENCE)?
            .ok_or_else(|| format!("no message on the port in {PATIENCE:?}: the sender stopped"))?;
        std::hint::black_box(m);
        let now = Instant::now();
        if i == WARMUP {
            start = now;
        } else if i > WARMUP {
            hist.record(Nanos::new(now.duration_since(last).as_nanos() as u64));
        }
        last = now;
    }
    Ok(Timed {
        hist,
        elapsed: last.duration_since(start),
    })
}

/// The port's sender: 1 + WARMUP + `count` messages.
pub(crate) fn port_send<const N: usize>(p: &mut Port<[u8; N]>, count: u64) -> Result<(), Error> {
    let message = [0x5a_u8; N];
    for _ in 0..1 + WARMUP + count {
        p.send(&message)?;
    }
    Ok(())
}

/// The line of a semaphore loop.
pub(crate) fn sem_line(placement: &str, extra: serde_json::Value, t: &Timed) -> String {
    let secs = t.elapsed.as_secs_f64();
    let mut v = serde_json::json!({
        "bench": "sem",
        "placement": placement,
        "count": t.hist.count(),
        "warmup": WARMUP,
        "elapsed_ns": t.elapsed.as_nanos() as u64,
        "loops_per_s": if secs > 0.0 { t.hist.count() as f64 / secs } else { 0.0 },
        "latency": t.hist.summary(),
    });
    merge(&mut v, extra);
    v.to_string()
}

/// The line of a port run of `size`-byte messages.
pub(crate) fn port_line(
    placement: &str,
    size: usize,
    extra: serde_json::Value,
    t: &Timed,
) -> String {
    let secs = t.elapsed.as_secs_f64();
    let n = t.hist.count() as f64;
    let mut v = serde_json::json!({
        "bench": "port",
        "placement": placement,
        "size": size,
        "count": t.hist.count(),
        "warmup": WARMUP,
        "elapsed_ns": t.elapsed.as_nanos() as u64,
        "bytes_per_s": if secs > 0.0 { n * size as f64 / secs } else { 0.0 },
        "messages_per_s": if secs > 0.0 { n / secs } else { 0.0 },
        "latency": t.hist.summary(),
    });
    merge(&mut v, extra);
    v.to_string()
}

fn merge(v: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
}

/// A name for this run's shared hubs, unique on the machine.
fn shm_name() -> String {
    format!("ictus-zhub-{}", std::process::id())
}

/// Starts this program as the peer of a `processes` run (ended with this thread).
fn spawn_peer(args: &[String]) -> Result<Child, Error> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("peer").args(args);
    ictus_os::process::die_with_parent(&mut cmd);
    Ok(cmd.spawn()?)
}

/// Waits for the peer after a good run; ends it (by its PID, through the
/// handle) after a failed one.
fn finish<T>(mut child: Child, out: Result<T, Error>) -> Result<T, Error> {
    if out.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return out;
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("the peer process failed ({status})").into());
    }
    out
}

fn sem(placement: Local, cpu_a: usize, cpu_b: usize, count: u64) -> Result<String, Error> {
    let label = match (placement, cpu_a == cpu_b) {
        (Local::Threads, true) => "core",
        (Local::Threads, false) => "cores",
        (Local::Processes, _) => "processes",
    };
    let extra = serde_json::json!({ "cpu_a": cpu_a, "cpu_b": cpu_b });
    match placement {
        Local::Threads => {
            let hubs = Hubs::in_process(&sem_decls())?;
            let b = {
                let hubs = hubs.clone();
                thread::spawn(move || -> Result<(), Error> {
                    pin(cpu_b)?;
                    sem_b(&hubs.semaphore("x")?, &hubs.semaphore("y")?, count)
                })
            };
            pin(cpu_a)?;
            let a = sem_a(&hubs.semaphore("x")?, &hubs.semaphore("y")?, count);
            let b = b.join().map_err(|_| "thread B panicked")?;
            let t = a?;
            b?;
            Ok(sem_line(label, extra, &t))
        }
        Local::Processes => {
            let name = shm_name();
            let hubs = Hubs::create_shared(&sem_decls(), &name)?;
            pin(cpu_a)?;
            let child = spawn_peer(&["sem".into(), name, cpu_b.to_string(), count.to_string()])?;
            let a = (|| sem_a(&hubs.semaphore("x")?, &hubs.semaphore("y")?, count))();
            let t = finish(child, a)?;
            Ok(sem_line(label, extra, &t))
        }
    }
}

/// Runs `$f::<N>(args)` for the `N` equal to `$size` (one of [`SIZES`]).
macro_rules! by_size {
    ($size:expr, $f:ident ( $($arg:expr),* )) => {
        match $size {
            1 => $f::<1>($($arg),*),
            16 => $f::<16>($($arg),*),
            64 => $f::<64>($($arg),*),
            256 => $f::<256>($($arg),*),
            1024 => $f::<1024>($($arg),*),
            4096 => $f::<4096>($($arg),*),
            8192 => $f::<8192>($($arg),*),
            16384 => $f::<16384>($($arg),*),
            32768 => $f::<32768>($($arg),*),
            s => Err(format!("SIZE {s}: expected one of {:?}", $crate::SIZES).into()),
        }
    };
}

fn port(
    placement: Local,
    size: usize,
    count: u64,
    cpu_s: usize,
    cpu_r: usize,
) -> Result<String, Error> {
    by_size!(size, port_sized(placement, count, cpu_s, cpu_r))
}

fn port_sized<const N: usize>(
    placement: Local,
    count: u64,
    cpu_s: usize,
    cpu_r: usize,
) -> Result<String, Error> {
    let extra = serde_json::json!({ "cpu_s": cpu_s, "cpu_r": cpu_r });
    let t = match placement {
        Local::Threads => {
            let hubs = Hubs::in_process(&port_decls::<N>())?;
            let s = {
                let hubs = hubs.clone();
                thread::spawn(move || -> Result<(), Error> {
                    pin(cpu_s)?;
                    port_send(&mut hubs.port::<[u8; N]>("p")?, count)
                })
            };
            pin(cpu_r)?;
            let r = port_receive(&mut hubs.port::<[u8; N]>("p")?, count);
            if r.is_ok() {
                s.join().map_err(|_| "the sender thread panicked")??;
            }
            r?
        }
        Local::Processes => {
            let name = shm_name();
            let hubs = Hubs::create_shared(&port_decls::<N>(), &name)?;
            pin(cpu_r)?;
            let child = spawn_peer(&[
                "port".into(),
                name,
                N.to_string(),
                count.to_string(),
                cpu_s.to_string(),
            ])?;
            let r = (|| port_receive(&mut hubs.port::<[u8; N]>("p")?, count))();
            finish(child, r)?
        }
    };
    let label = match placement {
        Local::Threads if cpu_s == cpu_r => "core",
        Local::Threads => "cores",
        Local::Processes => "processes",
    };
    Ok(port_line(label, N, extra, &t))
}

fn peer(p: Peer) -> Result<(), Error> {
    match p {
        Peer::Sem { shm, cpu, count } => {
            let hubs = Hubs::open_shared_matching(&shm, &sem_decls())?;
            pin(cpu)?;
            sem_b(&hubs.semaphore("x")?, &hubs.semaphore("y")?, count)
        }
        Peer::Port {
            shm,
            size,
            count,
            cpu,
        } => by_size!(size, peer_port(&shm, count, cpu)),
    }
}

fn peer_port<const N: usize>(shm: &str, count: u64, cpu: usize) -> Result<(), Error> {
    let hubs = Hubs::open_shared_matching(shm, &port_decls::<N>())?;
    pin(cpu)?;
    port_send(&mut hubs.port::<[u8; N]>("p")?, count)
}

// After `by_size`, which it uses.
mod link;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semaphore_loop_between_threads_is_parsed() {
        let sut = parse(&["sem", "threads", "0", "1", "1000"]);
        assert_eq!(
            sut,
            Ok(Cmd::Sem {
                placement: Local::Threads,
                cpu_a: 0,
                cpu_b: 1,
                count: 1000
            })
        );
    }

    #[test]
    fn a_port_size_outside_the_list_is_refused_with_the_list() {
        let sut = parse(&["port", "threads", "100", "1000", "0", "1"]);
        let e = sut.unwrap_err();
        assert!(e.contains("SIZE 100") && e.contains("32768"), "{e}");
    }

    #[test]
    fn a_zero_or_missing_count_is_refused() {
        assert!(parse(&["sem", "processes", "0", "1", "0"]).is_err());
        assert!(parse(&["sem", "processes", "0", "1"]).is_err());
        assert!(parse(&["sem", "nowhere", "0", "1", "10"]).is_err());
    }

    #[test]
    fn host_runs_need_their_options_and_count() {
        let ok = parse(&[
            "sem",
            "hosts",
            "--hosts",
            "h1,h2",
            "--here",
            "h2",
            "--listen",
            "tcp/10.77.0.2:7447",
            "--connect",
            "tcp/10.77.0.1:7447",
            "500",
        ]);
        assert!(matches!(ok, Ok(Cmd::SemHosts(_, 500))), "{ok:?}");
        assert!(parse(&["sem", "hosts", "--hosts", "h1,h2", "500"]).is_err());
        assert!(
            parse(&[
                "port",
                "hosts",
                "--hosts",
                "h1,h2",
                "--here",
                "h3",
                "--listen",
                "tcp/10.77.0.2:7447",
                "64",
                "10"
            ])
            .is_err()
        );
    }

    #[test]
    fn a_semaphore_loop_in_this_process_reports_every_round_trip() {
        let cpu = ictus_os::sched::current_affinity().unwrap().cpus()[0];
        let line = sem(Local::Threads, cpu, cpu, 50).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["bench"], "sem");
        assert_eq!(v["placement"], "core");
        assert_eq!(v["latency"]["count"], 50);
    }

    #[test]
    fn the_port_hands_over_every_message_between_threads() {
        let cpu = ictus_os::sched::current_affinity().unwrap().cpus()[0];
        let line = port(Local::Threads, 64, 20, cpu, cpu).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["size"], 64);
        assert_eq!(v["latency"]["count"], 20);
    }

    #[test]
    fn the_bench_script_parses() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/hubs-hosts.sh");
        let status = Command::new("bash").args(["-n", script]).status().unwrap();
        assert!(status.success(), "bash -n {script}");
    }
}
