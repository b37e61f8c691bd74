//! The live page's server over real sockets: who may use it (token, Host, Origin,
//! the command header), what a command does (it reaches the run's control socket),
//! and what the websocket carries (history, snapshots, the end).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use ictus_exec::ctl::{Command, Server};
use ictus_exec::live::{LiveStatus, LiveSubsystem};
use ictus_exec::state::SetupStore;
use ictus_ui::{MAX_PER_ADDRESS, Ui, UiOptions};

mod common;
use common::{connect_from, connect_spread, http, request};

fn status(frame: u64, window: u64) -> LiveStatus {
    LiveStatus {
        name: "t".into(),
        frame,
        state: "run".into(),
        subsystems: vec![LiveSubsystem {
            name: "A".into(),
            status: "running".into(),
            pid: 1,
            frames_run: frame,
            overruns: 0,
            host: String::new(),
            alive: true,
            cpu: None,
            period: 1,
            lost: 0,
            max_jitter_ns: 5_000,
            window_jitter_ns: Some(4_000 + window),
            window: Some(window),
            last_exec_ns: 1_000,
            max_exec_ns: 2_000,
            ack: Some(("run".into(), 0)),
            acknowledged: true,
            errors: 0,
        }],
        pending: Vec::new(),
        phase: "running".into(),
        tick_ns: 1_000_000,
        major_frame: 1,
        stop_frame: None,
        window_frames: 100,
        states: vec!["off".into(), "pause".into(), "run".into()],
        next: None,
        hosts: Vec::new(),
        cells: Vec::new(),
        events: Vec::new(),
        events_total: 0,
        misses: Vec::new(),
        causes: None,
    }
}

/// The page on a loopback port, its commands to `control`, with the tokens it
/// makes itself (`open_loopback`: commands from loopback take none).
fn on_loopback(control: impl Into<std::path::PathBuf>, open_loopback: bool) -> Ui {
    Ui::start(UiOptions {
        open_loopback,
        ..UiOptions::loopback(control)
    })
    .unwrap()
}

#[test]
fn beyond_loopback_a_wrong_or_missing_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::start(UiOptions {
        addr: "0.0.0.0:0".parse().unwrap(),
        token: Some("0123456789abcdef0123".into()),
        read_token: Some("readonly-0123456789ab".into()),
        ..UiOptions::loopback(dir.path().join("none.sock"))
    })
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], ui.addr().port()));
    assert!(
        ui.url().ends_with("/?token=0123456789abcdef0123"),
        "{}",
        ui.url()
    );
    for path in ["/", "/status", "/live", "/command/pause"] {
        let (code, body) = http(addr, "GET", path, &[]);
        assert_eq!(code, 401, "{path} without a token: {body}");
        assert!(body.contains("token is required"), "{body}");
        let (code, body) = http(
            addr,
            "GET",
            &format!("{path}?token=0123456789abcdef0124"),
            &[],
        );
        assert_eq!(code, 401, "{path} with a wrong token: {body}");
        assert!(body.contains("wrong token"), "{body}");
    }
    let (code, body) = http(addr, "GET", "/?token=0123456789abcdef0123", &[]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("<html") || body.contains("<!doctype") || body.contains("<!DOCTYPE"));
    let (code, _) = http(
        addr,
        "GET",
        "/",
        &[("Authorization", "Bearer 0123456789abcdef0123")],
    );
    assert_eq!(code, 200);
    // The read-only token opens the views, never a command.
    assert_eq!(
        ui.read_url().unwrap(),
        format!("http://{}/?token=readonly-0123456789ab", ui.addr())
    );
    let (code, _) = http(addr, "GET", "/?token=readonly-0123456789ab", &[]);
    assert_eq!(code, 200);
    let (code, body) = http(
        addr,
        "POST",
        "/command/stop?token=readonly-0123456789ab",
        &[("X-Ictus", "1")],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("needs the control token"), "{body}");
}

#[test]
fn on_loopback_the_host_the_origin_and_the_command_header_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = mpsc::channel();
    let ctl = Server::start(dir.path(), "t", SetupStore::new(), tx, None).unwrap();
    let coordinator = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while let Ok(cmd) = rx.recv_timeout(Duration::from_secs(5)) {
            match cmd {
                Command::State(name, reply) => {
                    seen.push(name.clone());
                    let _ = reply.send(format!("ok {name} from frame 30"));
                }
                Command::Stop(reply) => {
                    seen.push("stop".into());
                    let _ = reply.send("ok stopping".into());
                    break;
                }
                Command::Status(reply) => {
                    let _ = reply.send("{}".into());
                }
            }
        }
        seen
    });
    let ui = on_loopback(ctl.path().to_path_buf(), false);
    let addr = ui.addr();
    // On loopback the views are open, a command needs the control token (in the URL
    // printed at start), the read-only one or none is refused.
    let control = ui.url();
    let token = control
        .split_once("/?token=")
        .expect("a control token")
        .1
        .to_string();
    let read = ui.read_url().expect("a read-only token");
    let read = read.split_once("/?token=").unwrap().1.to_string();
    assert_eq!(http(addr, "GET", "/", &[]).0, 200);
    for t in ["", &format!("?token={read}")] {
        let (code, body) = http(
            addr,
            "POST",
            &format!("/command/stop{t}"),
            &[("X-Ictus", "1")],
        );
        assert_eq!(code, 403, "{t}: {body}");
        assert!(body.contains("needs the control token"), "{body}");
    }
    let with = |path: &str| format!("{path}?token={token}");
    // A page of another site, or a name that rebinds to 127.0.0.1, is refused.
    let (code, body) = http(addr, "GET", "/status", &[("Host", "evil.example:80")]);
    assert_eq!(code, 403, "{body}");
    let (code, _) = http(
        addr,
        "POST",
        "/command/pause",
        &[("Origin", "http://evil.example"), ("X-Ictus", "1")],
    );
    assert_eq!(code, 403);
    // A form post (no header) is refused; a GET is not a command.
    let (code, body) = http(addr, "POST", &with("/command/pause"), &[]);
    assert_eq!(code, 403, "{body}");
    assert_eq!(http(addr, "GET", "/command/pause", &[]).0, 405);
    let (code, body) = http(
        addr,
        "POST",
        &with("/command/pa%20use"),
        &[("X-Ictus", "1")],
    );
    assert_eq!(code, 400, "{body}");
    assert_eq!(http(addr, "GET", "/nothing", &[]).0, 404);
    // No snapshot yet.
    assert_eq!(http(addr, "GET", "/status", &[]).0, 503);
    ui.publish(&status(10, 0));
    let (code, body) = http(addr, "GET", "/status", &[]);
    assert_eq!(code, 200);
    assert_eq!(serde_json::from_str::<LiveStatus>(&body).unwrap().frame, 10);
    // Commands reach the control socket, as `ictus ctl` sends them.
    let origin = format!("http://{addr}");
    let (code, body) = http(
        addr,
        "POST",
        &with("/command/pause"),
        &[("X-Ictus", "1"), ("Origin", &origin)],
    );
    assert_eq!((code, body.trim()), (200, "ok pause from frame 30"));
    let (code, body) = http(addr, "POST", &with("/command/stop"), &[("X-Ictus", "1")]);
    assert_eq!((code, body.trim()), (200, "ok stopping"));
    assert_eq!(coordinator.join().unwrap(), ["pause", "stop"]);
    drop(ctl);
    let (code, body) = http(addr, "POST", &with("/command/run"), &[("X-Ictus", "1")]);
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("no run is listening"), "{body}");
}

#[test]
fn the_websocket_carries_the_history_each_snapshot_and_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), false);
    // Two windows before the page connects: they come as its history.
    ui.publish(&status(100, 1));
    ui.publish(&status(150, 1));
    ui.publish(&status(200, 2));
    let url = format!("ws://{}/live", ui.addr());
    let (mut ws, _) = tungstenite::connect(url).unwrap();
    let mut next = || -> serde_json::Value {
        loop {
            let m = ws.read().unwrap();
            if let tungstenite::Message::Text(t) = m {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                if v["type"] != "ping" {
                    return v;
                }
            }
        }
    };
    let history = next();
    assert_eq!(history["type"], "history");
    assert_eq!(
        history["history"]["series"]["A"],
        serde_json::json!([[1, 4001], [2, 4002]])
    );
    // The last snapshot, then each new one.
    assert_eq!(next()["status"]["frame"], 200);
    ui.publish(&status(300, 3));
    let s = next();
    assert_eq!(s["type"], "status");
    assert_eq!(s["status"]["frame"], 300);
    ui.end("the run ended at frame 300 (complete)");
    let end = next();
    assert_eq!(end["type"], "end");
    assert_eq!(end["reason"], "the run ended at frame 300 (complete)");
}

#[test]
fn open_loopback_takes_local_commands_without_a_token_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), true);
    assert_eq!(ui.url(), format!("http://{}/", ui.addr()));
    // Past the access rules: the command goes to the (absent) control socket.
    let (code, body) = http(ui.addr(), "POST", "/command/stop", &[("X-Ictus", "1")]);
    assert_eq!(code, 502, "{body}");
}

#[test]
fn three_hundred_silent_connections_neither_hold_the_page_nor_stay_open() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), false);
    ui.publish(&status(10, 0));
    let addr = ui.addr();
    // Clients that connect and send nothing, as one that sends a byte a minute, from
    // several addresses (one holds MAX_PER_ADDRESS at most).
    let mut silent: Vec<TcpStream> = (0..300)
        .map(|i| connect_spread(addr, i, MAX_PER_ADDRESS))
        .collect();
    // The page still answers them all out.
    let (code, body) = http(addr, "GET", "/status", &[]);
    assert_eq!(code, 200, "{body}");
    // And each silent one is dropped by the server once its request passes the
    // whole-request bound (end of stream on the client's side), its slot freed.
    for s in silent.iter_mut().take(3) {
        s.set_read_timeout(Some(ictus_ui::REQUEST_TIMEOUT * 3))
            .unwrap();
        let mut byte = [0u8; 1];
        let n = s
            .read(&mut byte)
            .expect("closed by the server, not timed out here");
        assert_eq!(n, 0);
    }
}

/// Until `ui` holds `n` connections (at most 30 s).
fn until_held(ui: &Ui, n: usize) -> usize {
    let by = std::time::Instant::now() + Duration::from_secs(30);
    while ui.connections() != n && std::time::Instant::now() < by {
        std::thread::sleep(Duration::from_millis(20));
    }
    ui.connections()
}

#[test]
fn past_the_connection_cap_a_connection_is_answered_503_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), false);
    ui.publish(&status(10, 0));
    let addr = ui.addr();
    let held: Vec<TcpStream> = (0..ictus_ui::MAX_CONNECTIONS)
        .map(|i| connect_spread(addr, i, MAX_PER_ADDRESS))
        .collect();
    assert_eq!(
        until_held(&ui, ictus_ui::MAX_CONNECTIONS),
        ictus_ui::MAX_CONNECTIONS
    );
    let (code, body) = http(addr, "GET", "/status", &[]);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("too many connections"), "{body}");
    // The cap counts connections open now: once they go, the page answers.
    drop(held);
    assert_eq!(until_held(&ui, 0), 0);
    assert_eq!(http(addr, "GET", "/status", &[]).0, 200);
}

#[test]
fn one_address_holds_at_most_its_share_and_the_others_still_get_in() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), false);
    ui.publish(&status(10, 0));
    let addr = ui.addr();
    let greedy = std::net::Ipv4Addr::new(127, 0, 0, 2);
    let held: Vec<TcpStream> = (0..MAX_PER_ADDRESS)
        .map(|_| connect_from(addr, greedy))
        .collect();
    assert_eq!(until_held(&ui, MAX_PER_ADDRESS), MAX_PER_ADDRESS);
    // One more from the same address: 503 at once, while the server is far from full.
    let (code, body) = request(connect_from(addr, greedy), "GET", "/status", &[]);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("too many connections"), "{body}");
    // Another address is answered as usual.
    assert_eq!(http(addr, "GET", "/status", &[]).0, 200);
    // The share counts connections open now: once they go, the address gets in again.
    drop(held);
    assert_eq!(until_held(&ui, 0), 0);
    let (code, body) = request(connect_from(addr, greedy), "GET", "/status", &[]);
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_head_past_its_bound_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ui = on_loopback(dir.path().join("none.sock"), false);
    let long = "a".repeat(ictus_ui::MAX_HEAD * 2);
    let mut s = TcpStream::connect(ui.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: {}\r\nX-Long: {long}\r\n\r\n",
        ui.addr()
    );
    // The server may close before all is written.
    let _ = s.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
}
