//! Round trips through Zenoh (peer mode, no router), to set against the bare UDP
//! reference over the same links (`bench/c/udp_pingpong.c`; both run by
//! `bench/validate-netns.sh`). Same interface and output as that reference:
//!
//! ```text
//! zping pong LISTEN [SECONDS]        echo every sample of ictus/zping/ping on ictus/zping/pong
//! zping ping CONNECT COUNT SIZE      COUNT round trips of SIZE bytes after 100 warm-up
//! ```
//!
//! LISTEN and CONNECT are Zenoh endpoints (`tcp/10.77.0.2:7447`). A sample arrives on
//! Zenoh's own thread; as in the executive, it is handed to the waiting thread, which
//! takes the time: the figure includes that hand-off. Prints one line of JSON with
//! every round trip's percentiles and its max, in nanoseconds; drops no outlier.
#![allow(clippy::print_stderr)] // usage errors of a bench tool

use std::io::Write;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ictus_net::{Endpoints, open};
use zenoh::Wait;
use zenoh::qos::CongestionControl;

const WARMUP: usize = 100;

fn usage() -> ExitCode {
    eprintln!("usage: zping pong LISTEN [SECONDS] | ping CONNECT COUNT SIZE");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["pong", listen] => pong(listen, 60),
        ["pong", listen, secs] => match secs.parse() {
            Ok(s) if s > 0 => pong(listen, s),
            _ => return usage(),
        },
        ["ping", connect, count, size] => match (count.parse(), size.parse()) {
            (Ok(c), Ok(s)) if c > 0 && c <= 100_000_000 && s <= 1 << 20 => ping(connect, c, s),
            _ => return usage(),
        },
        _ => return usage(),
    };
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zping: {e}");
            ExitCode::FAILURE
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Samples as they arrive, with the time they were handed over.
type Arrivals = mpsc::Receiver<(Instant, Vec<u8>)>;

fn subscriber(
    session: &zenoh::Session,
    key: &'static str,
) -> Result<(zenoh::pubsub::Subscriber<()>, Arrivals), Error> {
    let (tx, rx) = mpsc::channel();
    let sub = session
        .declare_subscriber(key)
        .callback(move |s| {
            let _ = tx.send((Instant::now(), s.payload().to_bytes().into_owned()));
        })
        .wait()?;
    Ok((sub, rx))
}

fn pong(listen: &str, seconds: u64) -> Result<(), Error> {
    let session = open(&Endpoints::parse(&[listen], &[])?)?;
    let publisher = session
        .declare_publisher("ictus/zping/pong")
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()?;
    let (_sub, rx) = subscriber(&session, "ictus/zping/ping")?;
    while let Ok((_, v)) = rx.recv_timeout(Duration::from_secs(seconds)) {
        if v.is_empty() {
            break;
        }
        publisher.put(v).wait()?;
    }
    session.close().wait()?;
    Ok(())
}

fn ping(connect: &str, count: usize, size: usize) -> Result<(), Error> {
    let session = open(&Endpoints::parse(&[], &[connect])?)?;
    let publisher = session
        .declare_publisher("ictus/zping/ping")
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()?;
    let (_sub, rx) = subscriber(&session, "ictus/zping/pong")?;
    // The first round trip also waits for the two peers to know each other's
    // subscriptions: retry it until it comes back (bounded).
    let out = vec![0x5a_u8; size.max(1)];
    let joined = (0..200).any(|_| {
        publisher.put(out.clone()).wait().is_ok()
            && rx.recv_timeout(Duration::from_millis(50)).is_ok()
    });
    if !joined {
        return Err(format!("no answer from {connect} in 10 s").into());
    }
    while rx.try_recv().is_ok() {}
    let mut rtt: Vec<u64> = Vec::with_capacity(count);
    let mut lost = 0_usize;
    let start = Instant::now();
    for i in 0..WARMUP + count {
        let t0 = Instant::now();
        publisher.put(out.clone()).wait()?;
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok((t1, _)) if i >= WARMUP => rtt.push(t1.duration_since(t0).as_nanos() as u64),
            Ok(_) => {}
            Err(_) if i >= WARMUP => lost += 1,
            Err(_) => {}
        }
    }
    let elapsed = start.elapsed().as_nanos();
    publisher.put(Vec::<u8>::new()).wait()?;
    session.close().wait()?;
    rtt.sort_unstable();
    let n = rtt.len();
    if n == 0 {
        return Err(format!("all {count} round trips lost").into());
    }
    let pct = |p: f64| rtt[((p * n as f64) as usize).min(n - 1)];
    let mean = rtt.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
    let line = format!(
        "{{\"count\": {n}, \"lost\": {lost}, \"size\": {size}, \"elapsed_ns\": {elapsed}, \"mean_ns\": {mean:.1}, \"min_ns\": {}, \"p50_ns\": {}, \"p90_ns\": {}, \"p99_ns\": {}, \"p999_ns\": {}, \"max_ns\": {}}}\n",
        rtt[0],
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(0.999),
        rtt[n - 1]
    );
    std::io::stdout().write_all(line.as_bytes())?;
    Ok(())
}
