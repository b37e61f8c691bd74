//! The live page of an ictus run (`ictus run SCHEDULE --ui 127.0.0.1:PORT`): seed 003's
//! main-coordinator GUI in a browser. One self-contained page (no CDN, no request
//! beyond this server), live over a websocket, with buttons for every state and mode
//! of the schedule and for stop.
//!
//! # How it stays off the real-time path
//! The coordinator hands each live snapshot ([`LiveStatus`], built from the subsystems'
//! own counters) to [`Ui::publish`], which serializes it once and wakes the page
//! connections; everything else happens on this crate's threads, which run where
//! [`UiOptions::cpus`] says (the CLI keeps them off the CPUs of the real-time
//! subsystems; threads inherit the affinity of the thread that makes them, so
//! tiny_http's own accept thread is made on a thread already restricted). A command
//! from the page goes through the run's control socket, exactly as `ictus ctl` sends
//! it.
//!
//! # Who may use it
//! Two tokens: the control token (the URL printed as the live page's: views and
//! commands) and a read-only one (printed beside it: the page, `/status`, `/live`,
//! `/metrics`, never a command; for a dashboard or a Prometheus that scrapes).
//! - Bound to a loopback address, the views need no token, but a command needs the
//!   control token (any local user could stop the run otherwise; `open_loopback`
//!   opts out), and the `Host` header must name that address (a DNS-rebinding page
//!   cannot reach it).
//! - Bound elsewhere, every request needs one of the tokens (`?token=` or
//!   `Authorization: Bearer`); a wrong or missing one gets 401, a command with the
//!   read-only one 403.
//! - A command is a `POST` with the header `X-Ictus: 1` (a page of another origin
//!   cannot send it without a CORS preflight, which this server never grants), and a
//!   request whose `Origin` is not this server's is refused (403), websocket included.
//!
//! # Endpoints
//! | request | answer |
//! |---|---|
//! | `GET /` | the page |
//! | `GET /status` | the last snapshot, JSON |
//! | `GET /live` (websocket) | `{"type":"history",...}` once, then `{"type":"status","status":{...}}` per snapshot, `{"type":"end","reason":...}` |
//! | `POST /command/NAME` | the control socket's reply to `state NAME` or `stop` |
//! | `GET /metrics` | the run in the OpenMetrics text format ([`metrics`]) |
//!
//! With [`UiOptions::page`] false (`ictus run --metrics ADDR`) the same server, with
//! the same access rules, answers `/metrics` only.
//!
//! ```no_run
//! use ictus_ui::{Ui, UiOptions};
//! let ui = Ui::start(UiOptions {
//!     addr: "127.0.0.1:0".parse().unwrap(),
//!     control: ictus_exec::ctl::socket_path("stress"),
//!     token: None,
//!     read_token: None,
//!     open_loopback: false,
//!     cpus: None,
//!     page: true,
//! })
//! .unwrap();
//! eprintln!("live page: {}", ui.url());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "the server's stop flag and connection count: one word each, no protocol"
)]
#![forbid(unsafe_code)]

pub mod metrics;

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ictus_core::CpuSet;
pub use ictus_exec::live::LiveStatus;
use serde::Serialize;
use thiserror::Error;
use tiny_http::{Header, Method, Request, Response, StatusCode};

/// The page, embedded.
const PAGE: &str = include_str!("page.html");

/// Plot points kept per subsystem for a page that connects later (about 60 s of
/// 100 ms windows).
const HISTORY: usize = 600;

/// Connections served at once; more get 503.
const MAX_CONNECTIONS: usize = 64;

/// The shortest token accepted from the user.
pub const MIN_TOKEN: usize = 16;

/// Why the page could not be served.
#[derive(Debug, Error)]
pub enum UiError {
    /// The address could not be bound.
    #[error("{flag} {addr}: cannot listen there: {message}")]
    Bind {
        /// The option that asked for it (`--ui`, `--metrics`).
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// What the system said.
        message: String,
    },
    /// Bound beyond loopback without a token.
    #[error(
        "{flag} {addr}: a server reachable beyond this machine needs a token (one is made at \
         start when none is given)"
    )]
    NoToken {
        /// The option that asked for it (`--ui`, `--metrics`).
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
    },
    /// A token too short or with characters a URL would mangle.
    #[error("the token must be at least {MIN_TOKEN} characters, letters, digits, `-` or `_` only")]
    BadToken,
    /// No random bytes for a token.
    #[error("reading /dev/urandom for a token: {0}")]
    Random(#[source] std::io::Error),
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct UiOptions {
    /// The address to listen at (port 0: any free port).
    pub addr: SocketAddr,
    /// The run's control socket, where commands go.
    pub control: PathBuf,
    /// The control token: every request beyond loopback, and every command (a state,
    /// a mode, stop) from anywhere, must carry it. Required when `addr` is not
    /// loopback; on loopback one is made when `None` (unless `open_loopback`).
    pub token: Option<String>,
    /// The read-only token: the page, `/status`, `/live` and `/metrics`, never a
    /// command (for a dashboard or a Prometheus that scrapes). Made when `None` and
    /// the page is served.
    pub read_token: Option<String>,
    /// On loopback, take commands without a token (any local user may then stop the
    /// run), as before 2026-11-29.
    pub open_loopback: bool,
    /// Where this server's threads run (outside the real-time CPUs).
    pub cpus: Option<CpuSet>,
    /// Whether the page is served (`--ui`); false serves `/metrics` only
    /// (`--metrics`).
    pub page: bool,
}

impl UiOptions {
    /// The option of `ictus run` that asks for this server.
    fn flag(&self) -> &'static str {
        if self.page { "--ui" } else { "--metrics" }
    }
}

/// How long one read or write of a connection may wait: a client that sends
/// nothing (or stops reading a websocket) for this long is dropped and its thread
/// freed. The listening socket's timeouts, which Linux gives every connection it
/// accepts: tiny_http sets none of its own.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The server listening at `addr`, its connections' reads and writes bounded by
/// [`IO_TIMEOUT`].
fn listen(addr: SocketAddr) -> Result<tiny_http::Server, String> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| e.to_string())?;
    let socket = socket2::SockRef::from(&listener);
    socket
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| socket.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    tiny_http::Server::from_listener(listener, None).map_err(|e| e.to_string())
}

/// A token of 128 random bits, in hex.
pub fn new_token() -> Result<String, UiError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(UiError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks a token given by the user.
pub fn check_token(token: &str) -> Result<(), UiError> {
    if token.len() >= MIN_TOKEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Ok(())
    } else {
        Err(UiError::BadToken)
    }
}

/// The plot's past points, for a page that connects late.
#[derive(Debug, Default, Serialize)]
struct History {
    tick_ns: u64,
    window_frames: u64,
    series: BTreeMap<String, VecDeque<(u64, u64)>>,
}

impl History {
    fn add(&mut self, s: &LiveStatus) {
        self.tick_ns = s.tick_ns;
        self.window_frames = s.window_frames;
        for sub in &s.subsystems {
            let (Some(w), Some(j)) = (sub.window, sub.window_jitter_ns) else {
                continue;
            };
            let series = self.series.entry(sub.name.clone()).or_default();
            if series.back().is_none_or(|&(last, _)| w > last) {
                if series.len() == HISTORY {
                    series.pop_front();
                }
                series.push_back((w, j));
            }
        }
    }
}

#[derive(Debug, Default)]
struct Latest {
    /// Bumped by each snapshot and by the end.
    version: u64,
    status: Option<Arc<str>>,
    history: History,
    ended: Option<String>,
}

#[derive(Debug)]
struct Shared {
    latest: Mutex<Latest>,
    changed: Condvar,
    stop: AtomicBool,
    connections: AtomicUsize,
    token: Option<String>,
    read_token: Option<String>,
    open_loopback: bool,
    /// Loopback binds check the `Host` header against these.
    hosts: Vec<String>,
    control: PathBuf,
    /// Whether the page is served, or `/metrics` only.
    page: bool,
    /// Made from the first snapshot (the run's name labels every series).
    metrics: OnceLock<metrics::Metrics>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The live page's server; stops serving when dropped.
pub struct Ui {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ui {
    /// Listens at `options.addr` and serves the page from threads of its own.
    pub fn start(options: UiOptions) -> Result<Ui, UiError> {
        let addr = options.addr;
        let flag = options.flag();
        for t in options.token.iter().chain(&options.read_token) {
            check_token(t)?;
        }
        if options.token.is_none() && !addr.ip().is_loopback() {
            return Err(UiError::NoToken { flag, addr });
        }
        // Commands need a token on loopback too (any local user could stop the run
        // otherwise), and readers get one of their own that cannot command.
        let token = match options.token.clone() {
            None if options.page && !options.open_loopback => Some(new_token()?),
            t => t,
        };
        let read_token = match options.read_token.clone() {
            None if options.page => Some(new_token()?),
            t => t,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let cpus = options.cpus.clone();
        let bind = std::thread::Builder::new()
            .name("ictus-ui".into())
            .spawn(move || {
                if let Some(c) = &cpus {
                    let _ = ictus_os::sched::set_affinity(c);
                }
                // Made here, so its accept thread inherits this thread's CPUs.
                let _ = tx.send(listen(addr));
            })
            .map_err(|e| UiError::Bind {
                flag,
                addr,
                message: e.to_string(),
            })?;
        let server = rx
            .recv()
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .map_err(|message| UiError::Bind {
                flag,
                addr,
                message,
            })?;
        let _ = bind.join();
        let bound = server.server_addr().to_ip().unwrap_or(addr);
        let port = bound.port();
        let hosts = if addr.ip().is_loopback() {
            vec![
                format!("{bound}"),
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]
        } else {
            Vec::new()
        };
        let shared = Arc::new(Shared {
            latest: Mutex::new(Latest::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            token,
            read_token,
            open_loopback: options.open_loopback,
            hosts,
            control: options.control,
            page: options.page,
            metrics: OnceLock::new(),
        });
        let server = Arc::new(server);
        let (s, srv) = (Arc::clone(&shared), Arc::clone(&server));
        let thread = std::thread::Builder::new()
            .name("ictus-ui".into())
            .spawn(move || {
                if let Some(c) = &options.cpus {
                    let _ = ictus_os::sched::set_affinity(c);
                }
                serve(&srv, &s);
            })
            .map_err(|e| UiError::Bind {
                flag,
                addr,
                message: e.to_string(),
            })?;
        Ok(Ui {
            shared,
            addr: bound,
            server,
            thread: Some(thread),
        })
    }

    /// The address it listens at (with the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, with its token when one is needed.
    pub fn url(&self) -> String {
        self.url_of("/")
    }

    /// The URL of `/metrics`, with its token when one is needed (a scraper can send
    /// it as `Authorization: Bearer` instead).
    pub fn metrics_url(&self) -> String {
        self.url_of("/metrics")
    }

    /// The page's URL with the read-only token (the page, its views and
    /// `/metrics`, no command), where there is one.
    pub fn read_url(&self) -> Option<String> {
        let t = self.shared.read_token.as_ref()?;
        Some(format!("http://{}/?token={t}", self.addr))
    }

    fn url_of(&self, path: &str) -> String {
        match &self.shared.token {
            Some(t) => format!("http://{}{path}?token={t}", self.addr),
            None => format!("http://{}{path}", self.addr),
        }
    }

    /// Hands a snapshot to the page: serialized once here, sent by the connections'
    /// threads. Called from the coordinator's status hook.
    pub fn publish(&self, status: &LiveStatus) {
        self.shared
            .metrics
            .get_or_init(|| metrics::Metrics::new(&status.name))
            .update(status);
        if !self.shared.page {
            return;
        }
        let json: Arc<str> = match serde_json::to_string(status) {
            Ok(j) => j.into(),
            Err(_) => return,
        };
        let mut latest = self.shared.lock();
        latest.history.add(status);
        latest.status = Some(json);
        latest.version += 1;
        drop(latest);
        self.shared.changed.notify_all();
    }

    /// Tells the pages that the run ended, and why.
    pub fn end(&self, reason: &str) {
        let mut latest = self.shared.lock();
        latest.ended = Some(reason.to_string());
        latest.version += 1;
        drop(latest);
        self.shared.changed.notify_all();
    }

    /// Page connections open now.
    pub fn connections(&self) -> usize {
        // Relaxed: a gauge.
        self.shared.connections.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        // The pages get the end before the server goes (half a second at most).
        if self.shared.lock().ended.is_some() {
            let by = Instant::now() + Duration::from_millis(500);
            while self.connections() > 0 && Instant::now() < by {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Relaxed: polled by the serving loop and the connections, which the
        // notification below wakes.
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.changed.notify_all();
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, shared: &Arc<Shared>) {
    // Relaxed: a stop request, polled.
    while !shared.stop.load(Ordering::Relaxed) {
        let request = match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => break,
        };
        // Relaxed: a gauge, bounded loosely.
        if shared.connections.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            let _ = request.respond(text(503, "too many connections to the live page"));
            continue;
        }
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("ictus-ui-conn".into())
            .spawn(move || {
                handle(request, &s);
                // Relaxed: a gauge.
                s.connections.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            // Relaxed: a gauge.
            shared.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn text(code: u16, body: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(format!("{body}\n"))
        .with_status_code(StatusCode(code))
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
        .with_header(header("Cache-Control", "no-store"))
}

fn header(name: &str, value: &str) -> Header {
    // Every header here is ASCII text without line breaks (names and values of this
    // file, a base64 key).
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("an ASCII header")
}

fn header_value<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// The path and the `token` of the query, if any.
fn split_url(url: &str) -> (&str, Option<&str>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let token = query.split('&').find_map(|kv| kv.strip_prefix("token="));
    (path, token)
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// What a request may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// The page, its views, `/metrics`.
    Read,
    /// Those, and commands.
    Control,
}

/// What a request may do, or why it is refused before it is routed.
fn access(request: &Request, shared: &Shared) -> Result<Access, (u16, String)> {
    let (_, query_token) = split_url(request.url());
    let given = query_token
        .or_else(|| header_value(request, "Authorization").and_then(|v| v.strip_prefix("Bearer ")));
    let is = |t: &Option<String>| matches!((given, t), (Some(g), Some(t)) if same(g, t));
    let loopback = !shared.hosts.is_empty();
    let access = if is(&shared.token) || (shared.token.is_none() && loopback) {
        Access::Control
    } else if is(&shared.read_token) {
        Access::Read
    } else if given.is_some() {
        return Err((
            401,
            "wrong token: open the URL `ictus run` printed at start".to_string(),
        ));
    } else if loopback {
        // On loopback the views are open; a command needs the control token.
        if shared.open_loopback {
            Access::Control
        } else {
            Access::Read
        }
    } else {
        return Err((
            401,
            "a token is required: open the URL `ictus run` printed at start (…/?token=…)"
                .to_string(),
        ));
    };
    let host = header_value(request, "Host").unwrap_or_default();
    if loopback && !shared.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Err((
            403,
            format!("Host '{host}' is not this server's: open the URL `ictus run` printed"),
        ));
    }
    if let Some(origin) = header_value(request, "Origin")
        && !origin.eq_ignore_ascii_case(&format!("http://{host}"))
    {
        return Err((403, format!("Origin '{origin}' is not this page's")));
    }
    Ok(access)
}

fn handle(request: Request, shared: &Arc<Shared>) {
    let access = match access(&request, shared) {
        Ok(a) => a,
        Err((code, why)) => {
            let _ = request.respond(text(code, &why));
            return;
        }
    };
    let (path, _) = split_url(request.url());
    let path = path.to_string();
    match (request.method(), path.as_str()) {
        (Method::Get, "/metrics") => {
            let _ = match shared.metrics.get() {
                Some(m) => request.respond(
                    Response::from_string(m.encode())
                        .with_header(header("Content-Type", metrics::CONTENT_TYPE))
                        .with_header(header("Cache-Control", "no-store")),
                ),
                None => request.respond(text(503, "the run has not reported yet")),
            };
        }
        (_, "/metrics") => {
            let _ = request.respond(text(405, "method not allowed"));
        }
        _ if !shared.page => {
            let _ = request.respond(text(
                404,
                "not found: this server (--metrics) answers /metrics only",
            ));
        }
        (Method::Get, "/") | (Method::Get, "/index.html") => {
            let _ = request.respond(
                Response::from_string(PAGE)
                    .with_header(header("Content-Type", "text/html; charset=utf-8"))
                    .with_header(header("Cache-Control", "no-store"))
                    .with_header(header(
                        "Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; style-src \
                         'unsafe-inline'; connect-src 'self'; img-src data:",
                    ))
                    .with_header(header("X-Content-Type-Options", "nosniff")),
            );
        }
        (Method::Get, "/status") => {
            let status = shared.lock().status.clone();
            let _ = match status {
                Some(json) => request.respond(
                    Response::from_string(json.to_string())
                        .with_header(header("Content-Type", "application/json"))
                        .with_header(header("Cache-Control", "no-store")),
                ),
                None => request.respond(text(503, "the run has not reported yet")),
            };
        }
        (Method::Get, "/live") => live(request, shared),
        (Method::Post, p) if p.starts_with("/command/") && access != Access::Control => {
            let _ = request.respond(text(
                403,
                "a command needs the control token: open the live page's URL `ictus run` \
                 printed at start (this one may read, not command)",
            ));
        }
        (Method::Post, p) if p.starts_with("/command/") => {
            let name = p.trim_start_matches("/command/").to_string();
            command(request, shared, &name);
        }
        (_, "/" | "/status" | "/live") => {
            let _ = request.respond(text(405, "method not allowed"));
        }
        (_, p) if p.starts_with("/command/") => {
            let _ = request.respond(text(405, "a command is a POST"));
        }
        _ => {
            let _ = request.respond(text(
                404,
                "not found (/, /status, /live, /command/NAME, /metrics)",
            ));
        }
    }
}

/// A command from the page, sent to the run's control socket.
fn command(request: Request, shared: &Shared, name: &str) {
    if header_value(&request, "X-Ictus") != Some("1") {
        let _ = request.respond(text(
            403,
            "a command needs the header `X-Ictus: 1` (what the page sends)",
        ));
        return;
    }
    let line = match ictus_exec::ctl::command_line(name) {
        Ok(l) if name != "status" => l,
        Ok(_) | Err(_) => {
            let _ = request.respond(text(
                400,
                &format!(
                    "command '{}': a state or mode of the run, or stop",
                    name.escape_debug()
                ),
            ));
            return;
        }
    };
    let (code, reply) = match ictus_exec::ctl::request(&shared.control, &line) {
        Ok(r) if r.starts_with("ok") => (200, r),
        Ok(r) => (409, r),
        Err(e) => (502, format!("error {e}")),
    };
    let _ = request.respond(text(code, &reply));
}

/// The websocket: the plot's history, then each snapshot, then the end.
fn live(request: Request, shared: &Arc<Shared>) {
    let key = header_value(&request, "Sec-WebSocket-Key").map(str::to_string);
    let upgrade =
        header_value(&request, "Upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = key.filter(|_| upgrade) else {
        let _ = request.respond(text(400, "/live is a websocket"));
        return;
    };
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response =
        Response::empty(StatusCode(101)).with_header(header("Sec-WebSocket-Accept", &accept));
    let stream = request.upgrade("websocket", response);
    let mut ws =
        tungstenite::WebSocket::from_raw_socket(stream, tungstenite::protocol::Role::Server, None);
    let history = {
        let latest = shared.lock();
        serde_json::json!({"type": "history", "history": &latest.history}).to_string()
    };
    if ws.send(tungstenite::Message::text(history)).is_err() {
        return;
    }
    let mut seen = 0;
    let mut last_sent = Instant::now();
    loop {
        let (status, ended, version) = {
            let mut latest = shared.lock();
            // Relaxed: a stop request; the condvar wakes the wait.
            while latest.version == seen && !shared.stop.load(Ordering::Relaxed) {
                let (l, timeout) = shared
                    .changed
                    .wait_timeout(latest, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner());
                latest = l;
                if timeout.timed_out() {
                    break;
                }
            }
            (latest.status.clone(), latest.ended.clone(), latest.version)
        };
        // Relaxed: a stop request.
        if shared.stop.load(Ordering::Relaxed) {
            let _ = ws.close(None);
            let _ = ws.flush();
            return;
        }
        let message = if version != seen {
            seen = version;
            match (&ended, &status) {
                (Some(reason), _) => {
                    serde_json::json!({"type": "end", "reason": reason}).to_string()
                }
                (None, Some(json)) => format!(r#"{{"type":"status","status":{json}}}"#),
                (None, None) => continue,
            }
        } else if last_sent.elapsed() >= Duration::from_secs(1) {
            // A quiet run still shows the connection alive, and a page that left is
            // found by the failed write.
            r#"{"type":"ping"}"#.to_string()
        } else {
            continue;
        };
        if ws.send(tungstenite::Message::text(message)).is_err() {
            return;
        }
        last_sent = Instant::now();
        if ended.is_some() {
            let _ = ws.close(None);
            let _ = ws.flush();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_long_and_plain() {
        check_token(&new_token().unwrap()).unwrap();
        assert!(check_token("short").is_err());
        assert!(check_token("abcdefghijklmnop&x=1").is_err());
        assert_ne!(new_token().unwrap(), new_token().unwrap());
    }

    #[test]
    fn the_token_is_taken_from_the_query() {
        assert_eq!(split_url("/live?token=abc"), ("/live", Some("abc")));
        assert_eq!(split_url("/?a=1&token=t"), ("/", Some("t")));
        assert_eq!(split_url("/status"), ("/status", None));
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn a_page_bound_beyond_loopback_needs_a_token() {
        let err = Ui::start(UiOptions {
            addr: "0.0.0.0:0".parse().unwrap(),
            control: PathBuf::from("/nonexistent.sock"),
            token: None,
            read_token: None,
            open_loopback: false,
            cpus: None,
            page: true,
        })
        .unwrap_err();
        assert!(matches!(err, UiError::NoToken { .. }), "{err}");
    }
}
