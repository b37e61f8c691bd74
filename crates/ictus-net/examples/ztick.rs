//! The main coordinator's tick across hosts, measured (issue 11: tick-arrival jitter
//! per host). Run by `bench/validate-netns.sh` with one sender and a receiver per
//! host; all in network namespaces of one machine, so one clock serves all.
//!
//! ```text
//! ztick send LISTEN RUN TICK COUNT [RECEIVERS]
//!     waits until RECEIVERS (default 1) subscriptions are matched (10 s at most),
//!     then publishes COUNT ticks, each at its absolute deadline (clock_nanosleep),
//!     then an end tick; prints its own wake-up lateness
//! ztick recv CONNECT RUN
//!     takes the ticks from the ring its subscription fills, until the end tick (or
//!     30 s without one); prints arrival minus deadline (what a release on this host
//!     would be late by), arrival minus sending (the path), ticks missing
//! ```
//!
//! TICK is a duration (`1ms`, `250us`). One line of JSON each; no outlier dropped.
#![allow(clippy::print_stderr)] // usage errors of a bench tool

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use ictus_core::{LatencyHistogram, Nanos};
use ictus_net::tick::{END_FRAME, Tick, TickPublisher, subscribe};
use ictus_net::{Endpoints, open};
use ictus_os::clock::monotonic_now;
use ictus_os::wait::sleep_until;
use zenoh::Wait;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn usage() -> ExitCode {
    eprintln!("usage: ztick send LISTEN RUN TICK COUNT [RECEIVERS] | recv CONNECT RUN");
    ExitCode::from(2)
}

fn duration(text: &str) -> Option<Nanos> {
    let (n, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = n.parse().ok()?;
    let ns = match unit {
        "ns" => n,
        "us" => n.checked_mul(1_000)?,
        "ms" => n.checked_mul(1_000_000)?,
        "s" => n.checked_mul(1_000_000_000)?,
        _ => return None,
    };
    (1_000..=1_000_000_000)
        .contains(&ns)
        .then(|| Nanos::new(ns))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = match a[..] {
        ["send", listen, run, tick, count] | ["send", listen, run, tick, count, _] => {
            let receivers = a.get(5).map_or(Some(1), |r| r.parse().ok());
            match (duration(tick), count.parse::<u64>(), receivers) {
                (Some(t), Ok(c), Some(r)) if c > 0 && c < END_FRAME => send(listen, run, t, c, r),
                _ => return usage(),
            }
        }
        ["recv", connect, run] => recv(connect, run),
        _ => return usage(),
    };
    match run {
        Ok(line) => {
            let _ = std::io::stdout().write_all(line.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ztick: {e}");
            ExitCode::FAILURE
        }
    }
}

fn send(
    listen: &str,
    run: &str,
    tick: Nanos,
    count: u64,
    receivers: usize,
) -> Result<String, Error> {
    let session = open(&Endpoints::parse(&[listen], &[])?)?;
    let publisher = TickPublisher::new(&session, run)?;
    // Receivers announce themselves with a liveliness token each.
    let tokens = format!("ictus/{run}/receiver/*");
    let joined = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        session
            .liveliness()
            .get(&tokens)
            .wait()
            .map(|replies| replies.iter().count() >= receivers)
            .unwrap_or(false)
    });
    if !joined {
        return Err(format!("fewer than {receivers} receiver(s) joined in 10 s").into());
    }
    // Let the subscriptions settle on every peer before the first tick.
    std::thread::sleep(Duration::from_millis(500));
    let mut late = LatencyHistogram::new();
    let epoch = monotonic_now() + Nanos::from_millis(10);
    for frame in 0..count {
        let deadline = epoch + tick * frame;
        sleep_until(deadline);
        let sent = monotonic_now();
        late.record(sent.saturating_sub(deadline));
        publisher.send(Tick {
            frame,
            deadline,
            sent,
            state: 0,
            stop: u64::MAX,
        })?;
    }
    let now = monotonic_now();
    for _ in 0..3 {
        publisher.send(Tick {
            frame: END_FRAME,
            deadline: now,
            sent: now,
            state: 0,
            stop: u64::MAX,
        })?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let line = format!(
        "{{\"role\": \"send\", \"tick_ns\": {}, \"count\": {count}, \"wake_late\": {}}}\n",
        tick.as_u64(),
        serde_json::to_string(&late.summary())?
    );
    session.close().wait()?;
    Ok(line)
}

fn recv(connect: &str, run: &str) -> Result<String, Error> {
    let session = open(&Endpoints::parse(&[], &[connect])?)?;
    let (sub, mut ring) = subscribe(&session, run, 1 << 16)?;
    let me = format!("ictus/{run}/receiver/{}", std::process::id());
    let _token = session.liveliness().declare_token(me).wait()?;
    let mut after_deadline = LatencyHistogram::new();
    let mut path = LatencyHistogram::new();
    let (mut next, mut missing, mut received) = (None::<u64>, 0_u64, 0_u64);
    let mut idle_since = monotonic_now();
    'outer: loop {
        while let Some(a) = ring.pop() {
            idle_since = a.arrived;
            if a.tick.frame == END_FRAME {
                break 'outer;
            }
            if let Some(n) = next
                && a.tick.frame > n
            {
                missing += a.tick.frame - n;
            }
            next = Some(a.tick.frame + 1);
            received += 1;
            after_deadline.record(a.arrived.saturating_sub(a.tick.deadline));
            path.record(a.arrived.saturating_sub(a.tick.sent));
        }
        if monotonic_now().saturating_sub(idle_since) > Nanos::from_secs(30) {
            return Err("no tick for 30 s".into());
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let line = format!(
        "{{\"role\": \"recv\", \"received\": {received}, \"missing\": {missing}, \"dropped\": {}, \"after_deadline\": {}, \"path\": {}}}\n",
        sub.dropped(),
        serde_json::to_string(&after_deadline.summary())?,
        serde_json::to_string(&path.summary())?
    );
    drop(sub);
    session.close().wait()?;
    Ok(line)
}
