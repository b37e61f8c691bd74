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
//! subsystems; threads inherit the affinity of the thread that makes them, so the
//! server's tokio runtime of one thread, and the one thread it makes for a command,
//! are made on a thread already restricted). A command from the page goes through
//! the run's control socket, exactly as `ictus ctl` sends it.
//!
//! # Its bounds
//! A connection is a task of that one thread, not a thread: at most
//! [`MAX_CONNECTIONS`] at once and [`MAX_PER_ADDRESS`] from one address (one more is
//! answered 503 and closed), its requests
//! done within [`REQUEST_TIMEOUT`] of the accept (heads read, answered and written)
//! or closed, a head of [`MAX_HEAD`] bytes at most, read whole within
//! [`HEAD_TIMEOUT`], a websocket's message
//! written within [`IO_TIMEOUT`]. Held connections that send a byte now and then
//! neither hold the page nor add threads (tests/slow_clients.rs holds 300).
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

#![forbid(unsafe_code)]

pub mod metrics;
mod server;

pub use server::{
    HEAD_TIMEOUT, IO_TIMEOUT, MAX_CONNECTIONS, MAX_HEAD, MAX_PER_ADDRESS, REQUEST_TIMEOUT,
};

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use ictus_core::CpuSet;
pub use ictus_exec::live::LiveStatus;
use serde::Serialize;
use thiserror::Error;

/// Plot points kept per subsystem for a page that connects later (about 60 s of
/// 100 ms windows).
const HISTORY: usize = 600;

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
    /// The page on a free loopback port, its commands to `control`, with the tokens
    /// the server makes itself, its threads wherever this one runs.
    pub fn loopback(control: impl Into<PathBuf>) -> UiOptions {
        UiOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            control: control.into(),
            token: None,
            read_token: None,
            open_loopback: false,
            cpus: None,
            page: true,
        }
    }
}

impl UiOptions {
    /// The option of `ictus run` that asks for this server.
    fn flag(&self) -> &'static str {
        if self.page { "--ui" } else { "--metrics" }
    }
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

/// What the page shows beside the last snapshot: the plot's past points and the
/// run's metrics.
#[derive(Debug, Default)]
struct Shared {
    history: Mutex<History>,
    /// Made from the first snapshot (the run's name labels every series).
    metrics: OnceLock<metrics::Metrics>,
}

impl server::Content for Shared {
    fn history(&self) -> String {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({"type": "history", "history": &*history}).to_string()
    }

    fn metrics(&self) -> Option<String> {
        self.metrics.get().map(metrics::Metrics::encode)
    }
}

/// The live page's server; stops serving when dropped.
pub struct Ui {
    shared: Arc<Shared>,
    addr: SocketAddr,
    token: Option<String>,
    read_token: Option<String>,
    page: bool,
    server: server::Server,
}

impl Ui {
    /// Listens at `options.addr` and serves the page from a thread of its own.
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
        let bind_error = |message: String| UiError::Bind {
            flag,
            addr,
            message,
        };
        let listener = std::net::TcpListener::bind(addr).map_err(|e| bind_error(e.to_string()))?;
        let bound = listener.local_addr().unwrap_or(addr);
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
        let shared = Arc::new(Shared::default());
        let rules = server::Rules {
            token: token.clone(),
            read_token: read_token.clone(),
            open_loopback: options.open_loopback,
            hosts,
            control: options.control,
            page: options.page,
        };
        let content: Arc<dyn server::Content> = Arc::clone(&shared) as _;
        let server =
            server::Server::start(listener, rules, content, options.cpus).map_err(bind_error)?;
        Ok(Ui {
            shared,
            addr: bound,
            token,
            read_token,
            page: options.page,
            server,
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
        let t = self.read_token.as_ref()?;
        Some(format!("http://{}/?token={t}", self.addr))
    }

    fn url_of(&self, path: &str) -> String {
        match &self.token {
            Some(t) => format!("http://{}{path}?token={t}", self.addr),
            None => format!("http://{}{path}", self.addr),
        }
    }

    /// Hands a snapshot to the page: serialized once here, sent by the server's
    /// thread. Called from the coordinator's status hook.
    pub fn publish(&self, status: &LiveStatus) {
        self.shared
            .metrics
            .get_or_init(|| metrics::Metrics::new(&status.name))
            .update(status);
        if !self.page {
            return;
        }
        let json: Arc<str> = match serde_json::to_string(status) {
            Ok(j) => j.into(),
            Err(_) => return,
        };
        self.shared
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(status);
        self.server.publish(json);
    }

    /// Tells the pages that the run ended, and why.
    pub fn end(&self, reason: &str) {
        self.server.end(reason);
    }

    /// Connections open now (websockets, and requests not yet answered).
    pub fn connections(&self) -> usize {
        self.server.connections()
    }
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
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
