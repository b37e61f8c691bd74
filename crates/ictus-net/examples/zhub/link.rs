//! zhub's runs across hosts: the same loops as in one host, on hubs whose homes
//! are on two hosts, joined by a [`HubLink`] over a Zenoh session.
//!
//! Semaphore X's home is the first host (A's), Y's the second (B's): each side
//! gives a local hub and takes a remote one, as the seed's C0_S1 and C1_S2. The
//! port's home is the second host, where the receiver runs; the sender runs on
//! the first.
//!
//! Leaving: the last operation of a run crosses the link, so neither side may
//! stop its link before the other has what it waits for. The first host gives a
//! semaphore `done` homed there once its part is over, and keeps its link until
//! the second host has taken it (or [`PATIENCE`] passed); the second host takes
//! it (so the first's last operation is done) and leaves.

use std::thread;
use std::time::{Duration, Instant};

use ictus_exec::hub::{HubDecl, Hubs, Semaphore};
use ictus_net::hubs::HubLink;
use ictus_net::security::Credentials;
use ictus_net::{Endpoints, open, open_secure};
use zenoh::Wait;

use crate::hosts::HostArgs;
use crate::{
    Error, PATIENCE, pin, port_line, port_receive, port_send, sem_a, sem_b, sem_line, take,
};

/// The run's name on the link (its key prefix).
const RUN: &str = "zhub";

/// What the link's message for a remote operation still needs after the last
/// one: the first host keeps its link this long after `done` was taken.
const GRACE: Duration = Duration::from_millis(200);

/// This host's Zenoh session, listening and connecting as asked; with keys,
/// its links authenticated by this host's certificate.
fn session(h: &HostArgs) -> Result<zenoh::Session, Error> {
    let ls: Vec<&str> = h.listen.iter().map(String::as_str).collect();
    let cs: Vec<&str> = h.connect.iter().map(String::as_str).collect();
    let endpoints = Endpoints::parse(&ls, &cs)?;
    Ok(match &h.keys {
        Some(dir) => open_secure(
            &endpoints,
            &Credentials::of_host(dir, &h.hosts[h.here])?,
            None,
        )?,
        None => open(&endpoints)?,
    })
}

/// The hand-shake that ends a run (see the module's head).
fn leave(h: &HostArgs, done: &Semaphore) -> Result<(), Error> {
    if h.here == 0 {
        done.give();
        let start = Instant::now();
        while done.count() > 0 && start.elapsed() < PATIENCE {
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(GRACE);
        Ok(())
    } else {
        take(done, "done")
    }
}

/// Runs `body` with the hubs `decls` (plus `done`) as this host sees them,
/// linked to the other host, then leaves and stops the link.
fn linked<T>(
    h: &HostArgs,
    mut decls: Vec<HubDecl>,
    body: impl FnOnce(&Hubs) -> Result<T, Error>,
) -> Result<T, Error> {
    decls.push(HubDecl::semaphore("done", 0).at(&h.hosts[0]));
    let hubs = Hubs::in_process_at(&decls, &h.hosts, h.here)?;
    let session = session(h)?;
    let link = HubLink::start(&session, RUN, &h.hosts, h.here, &hubs)?;
    let out = body(&hubs);
    let left = match &out {
        Ok(_) => hubs
            .semaphore("done")
            .map_err(Error::from)
            .and_then(|d| leave(h, &d)),
        Err(_) => Ok(()),
    };
    link.stop();
    let _ = session.close().wait();
    let out = out?;
    left?;
    Ok(out)
}

fn extra(h: &HostArgs) -> serde_json::Value {
    let link = if h.keys.is_some() {
        "zenoh-secure"
    } else {
        "zenoh-plain"
    };
    serde_json::json!({ "hosts": h.hosts, "here": h.hosts[h.here], "link": link, "listen": h.listen })
}

/// The semaphore loop across hosts: A on the first host prints.
pub(crate) fn sem(h: &HostArgs, count: u64) -> Result<Option<String>, Error> {
    let decls = vec![
        HubDecl::semaphore("x", 0).at(&h.hosts[0]),
        HubDecl::semaphore("y", 0).at(&h.hosts[1]),
    ];
    linked(h, decls, |hubs| {
        let (x, y) = (hubs.semaphore("x")?, hubs.semaphore("y")?);
        if h.here == 0 {
            pin_from_env("CPU_A")?;
            let t = sem_a(&x, &y, count)?;
            Ok(Some(sem_line("hosts", extra(h), &t)))
        } else {
            pin_from_env("CPU_B")?;
            sem_b(&x, &y, count)?;
            Ok(None)
        }
    })
}

/// Port throughput across hosts: the receiver, on the port's home (the second
/// host), prints.
pub(crate) fn port(h: &HostArgs, size: usize, count: u64) -> Result<Option<String>, Error> {
    by_size!(size, port_sized(h, count))
}

fn port_sized<const N: usize>(h: &HostArgs, count: u64) -> Result<Option<String>, Error> {
    let decls = vec![HubDecl::port::<[u8; N]>("p").at(&h.hosts[1])];
    linked(h, decls, |hubs| {
        let mut p = hubs.port::<[u8; N]>("p")?;
        if h.here == 1 {
            pin_from_env("CPU_B")?;
            let t = port_receive(&mut p, count)?;
            Ok(Some(port_line("hosts", N, extra(h), &t)))
        } else {
            pin_from_env("CPU_A")?;
            port_send(&mut p, count)?;
            Ok(None)
        }
    })
}

/// Pins this thread to the CPU in the environment variable `var`, if set (the
/// bench script's CPU_A and CPU_B, as in one host).
fn pin_from_env(var: &str) -> Result<(), Error> {
    match std::env::var(var) {
        Ok(v) => pin(v
            .parse()
            .map_err(|_| format!("{var}={v}: expected a CPU number"))?),
        Err(_) => Ok(()),
    }
}
