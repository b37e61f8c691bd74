//! Slow clients (issue 31, item 3: doors that cannot be held). 300 connections that
//! each dribble a request's head a byte at a time are all held, the page and
//! `/metrics` still answer within a second, the server makes no thread for them, and
//! each is closed once its head passes its bound (HEAD_TIMEOUT, before the whole-request one).
//!
//! One test in this file, so that the process's threads are this test's and the
//! server's alone. `ICTUS_UI_FIGURES=1` writes what it measured to stdout.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ictus_exec::live::LiveStatus;
use ictus_ui::{MAX_PER_ADDRESS, Ui, UiOptions};

mod common;

/// How many slow clients.
const SLOW: usize = 300;

/// The process's threads now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// A GET of `path`, its status code and how long the answer took to come whole.
fn get(addr: SocketAddr, path: &str) -> (u16, Duration) {
    let start = Instant::now();
    let (code, _) = common::http(addr, "GET", path, &[]);
    (code, start.elapsed())
}

/// A slow client: the next byte of a head that never ends.
struct Slow {
    stream: TcpStream,
    sent: usize,
    /// Closed by the server (end of stream, reset, or a write refused).
    closed: bool,
    /// Bytes the server sent it (none is expected: a head never ends).
    answered: usize,
}

impl Slow {
    /// The `i`th slow client, from its share of the loopback addresses (one address
    /// holds MAX_PER_ADDRESS at most).
    fn connect(addr: SocketAddr, i: usize) -> Slow {
        let stream = common::connect_spread(addr, i, MAX_PER_ADDRESS);
        stream.set_nodelay(true).unwrap();
        stream.set_nonblocking(true).unwrap();
        Slow {
            stream,
            sent: 0,
            closed: false,
            answered: 0,
        }
    }

    /// Sends one more byte and sees whether the server closed.
    fn dribble(&mut self, head: &[u8]) {
        if self.closed {
            return;
        }
        let byte = head.get(self.sent).copied().unwrap_or(b'a');
        match self.stream.write(&[byte]) {
            Ok(_) => self.sent += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => self.closed = true,
        }
        let mut buf = [0u8; 512];
        match self.stream.read(&mut buf) {
            Ok(0) => self.closed = true,
            Ok(n) => self.answered += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => self.closed = true,
        }
    }
}

fn status() -> LiveStatus {
    serde_json::from_value(serde_json::json!({
        "name": "t", "frame": 10, "state": "run", "subsystems": [], "pending": [],
        "phase": "running", "tick_ns": 1_000_000, "major_frame": 1, "stop_frame": null,
        "window_frames": 100, "states": ["run"], "next": null, "hosts": [], "cells": [],
        "events": [], "events_total": 0, "misses": []
    }))
    .unwrap()
}

#[test]
fn three_hundred_slow_clients_neither_hold_the_page_nor_add_threads_and_are_closed_past_the_bound()
{
    let before = threads();
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::start(UiOptions::loopback(dir.path().join("none.sock"))).unwrap();
    ui.publish(&status());
    let with_server = threads();
    let addr = ui.addr();
    let head = format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").into_bytes();

    // The slow clients, each a byte at a time, every 200 ms, from one thread.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let dribbler = std::thread::spawn(move || {
        let mut slow: Vec<Slow> = (0..SLOW).map(|i| Slow::connect(addr, i)).collect();
        let started = Instant::now();
        let mut told = false;
        while slow.iter().any(|s| !s.closed) && started.elapsed() < ictus_ui::REQUEST_TIMEOUT * 3 {
            for s in &mut slow {
                s.dribble(&head);
            }
            if !told && slow.iter().all(|s| s.sent > 0) {
                told = true;
                let _ = held_tx.send(());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (started.elapsed(), slow)
    });

    // Once every slow client has sent its first bytes and the server holds them all:
    held_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the slow clients connected");
    let by = Instant::now() + Duration::from_secs(30);
    while ui.connections() < SLOW && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = ui.connections();
    assert!(
        held >= SLOW,
        "the server holds {held} connections, not {SLOW}"
    );
    let during = threads();

    // The page and /metrics answer as they would alone (the bound: a
    // second).
    let mut answers = Vec::new();
    for path in ["/", "/status", "/metrics"] {
        let (code, took) = get(addr, path);
        assert_eq!(code, 200, "{path} beside {SLOW} slow clients");
        assert!(
            took < Duration::from_secs(1),
            "{path} took {took:?} beside {SLOW} slow clients"
        );
        answers.push((path, took));
    }
    let during_after_gets = threads();

    // No thread per connection: the server's own thread (made at start), this
    // test's and the dribbler.
    assert!(
        with_server <= before + 1,
        "the server made {} threads at start",
        with_server - before
    );
    assert!(
        during.max(during_after_gets) <= with_server + 1,
        "{SLOW} slow clients: {during} threads, {with_server} before them (the dribbler is one)"
    );

    // Each slow request is closed once its head passes its bound, with no
    // answer (a head that never ends is not answered).
    let (lasted, slow) = dribbler.join().unwrap();
    let open = slow.iter().filter(|s| !s.closed).count();
    assert_eq!(
        open, 0,
        "{open} of {SLOW} slow requests still open after {lasted:?}"
    );
    assert!(slow.iter().all(|s| s.answered == 0));
    let by = Instant::now() + Duration::from_secs(10);
    while ui.connections() > 0 && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ui.connections(), 0);

    if std::env::var_os("ICTUS_UI_FIGURES").is_some() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "threads: {before} before the server, {with_server} with it, {during} with \
             {held} slow clients held (the dribbler is one), {during_after_gets} after the gets"
        );
        for (path, took) in &answers {
            let _ = writeln!(out, "GET {path} beside them: {took:?}");
        }
        let _ = writeln!(out, "all {SLOW} closed within {lasted:?} of their connect");
    }
}
