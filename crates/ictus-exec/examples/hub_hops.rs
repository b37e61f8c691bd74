//! How long one hub operation takes through a home host, between in-process
//! hosts (no network: channels carry the messages, so what is left is the
//! relays, the home's server and their wake-ups). Three hosts: FIFO and port
//! messages go from h1 through their home h2 to h3, one at a time; a resource
//! homed on h2 and unlocked there is handed to a waiter on h1. Prints p50, p99
//! and max of each, with the sample count, for `docs/executive.md`.
//!
//! `cargo run --release -p ictus-exec --example hub_hops [SAMPLES]`

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ictus_exec::hub::remote::InProcessHosts;
use ictus_exec::hub::{HubDecl, Hubs};

/// Three hosts' tables, connected in this process.
fn three(decls: &[HubDecl]) -> InProcessHosts {
    let hosts: Vec<String> = (1..=3).map(|i| format!("h{i}")).collect();
    let tables = (0..3)
        .map(|here| Hubs::in_process_at(decls, &hosts, here).expect("a valid table"))
        .collect();
    InProcessHosts::start(&hosts, tables).expect("the hub threads start")
}

fn print(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    // An example's output, its purpose: one line per measurement.
    let _ = writeln!(
        std::io::stdout(),
        "{what:<40} n={:<6} p50 {:>9.1?} p99 {:>9.1?} max {:>9.1?}",
        samples.len(),
        at(0.5),
        at(0.99),
        samples[samples.len() - 1]
    );
}

const LONG: Duration = Duration::from_secs(20);
/// A pause between samples, so that every server is asleep when one starts.
const PAUSE: Duration = Duration::from_micros(300);

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let sut = three(&[
        HubDecl::fifo::<u64>("f", 4).at("h2"),
        HubDecl::port::<u64>("p").at("h2"),
        HubDecl::resource("r").at("h2"),
    ]);
    let hubs = &sut.hubs;

    let mut tx = hubs[0].fifo_sender::<u64>("f").expect("the sender");
    let mut rx = hubs[2].fifo_receiver::<u64>("f").expect("the receiver");
    let mut fifo = Vec::with_capacity(n);
    for i in 0..n as u64 + 10 {
        std::thread::sleep(PAUSE);
        let t = Instant::now();
        assert!(tx.send_timeout(i, LONG).expect("sent"));
        assert_eq!(rx.recv_timeout(LONG).expect("received"), Some(i));
        if i >= 10 {
            fifo.push(t.elapsed());
        }
    }
    print("fifo h1 -> home h2 -> h3", fifo);

    let receiver = {
        let hubs = hubs[2].clone();
        std::thread::spawn(move || {
            let mut port = hubs.port::<u64>("p").expect("the port");
            for i in 0..n as u64 + 10 {
                assert_eq!(port.receive_timeout(LONG).expect("received"), Some(i));
            }
        })
    };
    let mut port = hubs[0].port::<u64>("p").expect("the port");
    let mut sends = Vec::with_capacity(n);
    for i in 0..n as u64 + 10 {
        std::thread::sleep(PAUSE);
        let t = Instant::now();
        port.send(&i).expect("sent");
        if i >= 10 {
            sends.push(t.elapsed());
        }
    }
    receiver.join().expect("the receiver");
    print("port send h1 -> home h2 -> h3 (copied)", sends);

    // The home holds the resource; h1 waits; the home unlocks: how long until
    // h1 has it.
    let home = hubs[1].resource("r").expect("the resource");
    let remote = hubs[0].clone();
    let (ask_tx, ask_rx) = mpsc::channel::<()>();
    let (got_tx, got_rx) = mpsc::channel::<Instant>();
    let waiter = std::thread::spawn(move || {
        let r = remote.resource("r").expect("the resource");
        while ask_rx.recv().is_ok() {
            let g = r.lock().expect("locked");
            let _ = got_tx.send(Instant::now());
            drop(g);
        }
    });
    let mut hand = Vec::with_capacity(n);
    for i in 0..n + 10 {
        let g = home.lock().expect("locked at home");
        ask_tx.send(()).expect("the waiter");
        // Long enough for the demand to reach the home and its server to wait.
        std::thread::sleep(Duration::from_millis(2));
        let t = Instant::now();
        drop(g);
        let got = got_rx.recv_timeout(LONG).expect("granted");
        if i >= 10 {
            hand.push(got.saturating_duration_since(t));
        }
        // The release travels home before the next lock there.
        std::thread::sleep(PAUSE);
    }
    drop(ask_tx);
    waiter.join().expect("the waiter");
    print("resource unlocked at home h2 -> h1 has it", hand);
}
