//! Issue 21's attacks on a run across hosts, replayed by an outsider (a Zenoh peer
//! that is not a host of the run), for `bench/attack-hosts.sh`:
//!
//! ```text
//! zattack RUN SECONDS ENDPOINT... [--ca CA] [--cert CERT --key KEY]
//! ```
//!
//! It connects to every ENDPOINT (`quic/...` with the run's CA and, given, a
//! certificate and key; `tcp/...` for a run with `--insecure`) and for SECONDS:
//! - **reads** every key of the run, counting ticks, cell publications and statuses;
//! - **forges cells**: element 0 of cells A, B and C set to 10^12 under every host's
//!   name (h1, h2, h3), as often as it can;
//! - **forges ticks**: a tick with stop frame 1;
//! - **floods the setup store**: 64 KiB values to `setup/kv/flood-N`, counting the
//!   puts acknowledged, refused (with the first refusal's words) and unanswered.
//!
//! Prints one line of JSON with the counts and whether it ever saw a peer. It judges
//! nothing: the run's own record says whether anything changed.
#![allow(clippy::print_stderr, clippy::print_stdout)] // a bench tool's usage and result
#![allow(
    clippy::disallowed_types,
    reason = "counters read for a report: relaxed increments, read once the writers are done"
)]

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ictus_net::Endpoints;
use zenoh::Wait;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn usage() -> ExitCode {
    eprintln!("usage: zattack RUN SECONDS ENDPOINT... [--ca CA] [--cert CERT --key KEY]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut endpoints = Vec::new();
    let (mut ca, mut cert, mut key) = (None, None, None);
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--ca" => ca = it.next().cloned(),
            "--cert" => cert = it.next().cloned(),
            "--key" => key = it.next().cloned(),
            e => endpoints.push(e.to_string()),
        }
    }
    let (Some(run), Some(Ok(seconds))) = (args.first(), args.get(1).map(|s| s.parse::<f64>()))
    else {
        return usage();
    };
    if endpoints.is_empty() || cert.is_some() != key.is_some() || !(0.1..=3600.0).contains(&seconds)
    {
        return usage();
    }
    match attack(run, seconds, &endpoints, ca, cert.zip(key)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zattack: {e}");
            ExitCode::from(1)
        }
    }
}

fn attack(
    run: &str,
    seconds: f64,
    endpoints: &[String],
    ca: Option<String>,
    identity: Option<(String, String)>,
) -> Result<(), Error> {
    let connect: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let mut e = Endpoints::parse(&[], &connect)?;
    e.multicast = false;
    let mut c = ictus_net::config(&e)?;
    let tls = "transport/link/tls/";
    if let Some(ca) = &ca {
        c.insert_json5(&format!("{tls}root_ca_certificate"), &format!("{ca:?}"))?;
        c.insert_json5(&format!("{tls}verify_name_on_connect"), "false")?;
    }
    if let Some((cert, key)) = &identity {
        c.insert_json5(&format!("{tls}connect_certificate"), &format!("{cert:?}"))?;
        c.insert_json5(&format!("{tls}connect_private_key"), &format!("{key:?}"))?;
        c.insert_json5(&format!("{tls}enable_mtls"), "true")?;
    }
    let session = zenoh::open(c).wait()?;
    let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let seen = Arc::clone(&counts);
    let prefix = format!("ictus/{run}/");
    let _sub = session
        .declare_subscriber(format!("ictus/{run}/**"))
        // What the run sends, not its own forgeries coming back.
        .allowed_origin(zenoh::sample::Locality::Remote)
        .callback(move |s| {
            let rest = s.key_expr().as_str().strip_prefix(&prefix).unwrap_or("");
            let i = if rest == "tick" {
                0
            } else if rest.starts_with("cell/") {
                1
            } else if rest.starts_with("status/") {
                2
            } else {
                return;
            };
            // Relaxed: counters.
            seen[i].fetch_add(1, Ordering::Relaxed);
        })
        .wait()?;
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut forged_cells, mut forged_ticks, mut peers_seen) = (0u64, 0u64, 0usize);
    let (mut acked, mut refused, mut silent) = (0u64, 0u64, 0u64);
    let mut first_refusal = String::new();
    let big = vec![0x5au8; 64 * 1024];
    let mut n = 0u64;
    while Instant::now() < until {
        peers_seen = peers_seen.max(session.info().peers_zid().wait().count());
        for (h, host) in ["h1", "h2", "h3"].iter().enumerate() {
            for cell in ["A", "B", "C"] {
                let p = forged(h as u16, 1_000_000_000_000);
                if session
                    .put(format!("ictus/{run}/cell/{cell}/{host}"), p)
                    .wait()
                    .is_ok()
                {
                    forged_cells += 1;
                }
            }
        }
        let mut tick = Vec::with_capacity(40);
        for w in [5u64, 0, 0, 0, 1] {
            tick.extend_from_slice(&w.to_le_bytes());
        }
        if session
            .put(format!("ictus/{run}/tick"), tick)
            .wait()
            .is_ok()
        {
            forged_ticks += 1;
        }
        for _ in 0..8 {
            n += 1;
            let replies = session
                .get(format!("ictus/{run}/setup/kv/flood-{n}"))
                .payload(big.clone())
                .timeout(Duration::from_millis(300))
                .wait()?;
            match replies.recv() {
                Ok(r) => match r.result() {
                    Ok(_) => acked += 1,
                    Err(e) => {
                        refused += 1;
                        if first_refusal.is_empty() {
                            first_refusal =
                                String::from_utf8_lossy(&e.payload().to_bytes()).into_owned();
                        }
                    }
                },
                Err(_) => silent += 1,
            }
        }
        // Paced: what an attacker nobody answers would spin is not the point.
        std::thread::sleep(Duration::from_millis(2));
    }
    let json = serde_json::json!({
        "run": run,
        "seconds": seconds,
        "identity": identity.map(|(c, _)| c),
        "ca": ca,
        "peers_seen": peers_seen,
        "read": {
            // Relaxed (all): counters, read after the run.
            "ticks": counts[0].load(Ordering::Relaxed),
            "cells": counts[1].load(Ordering::Relaxed),
            "statuses": counts[2].load(Ordering::Relaxed),
        },
        "forged_cell_puts": forged_cells,
        "forged_tick_puts": forged_ticks,
        "setup_flood": {
            "puts": n,
            "bytes_offered": n * big.len() as u64,
            "acknowledged": acked,
            "refused": refused,
            "unanswered": silent,
            "first_refusal": first_refusal,
        },
    });
    println!("{json}");
    Ok(())
}

/// A publication of host index `host` with `value` at byte 0 (docs/wire.md).
fn forged(host: u16, value: i64) -> Vec<u8> {
    ictus_net::link::publication_bytes(host, 0, 1, &[(0, &value.to_le_bytes())])
}
