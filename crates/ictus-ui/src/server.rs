//! The HTTP server under the live page and `/metrics`: hyper's HTTP/1.1 on a tokio
//! runtime of one thread, so a connection is a task, not a thread.
//!
//! # Its bounds (issue 31: doors that cannot be held)
//! - At most [`MAX_CONNECTIONS`] connections at once, websockets included; one more
//!   is answered 503 at once and closed (what it sends is read and dropped for a
//!   second at most, so the close does not reset the answer away; 64 such at once,
//!   more are closed with the answer a write without waiting takes).
//! - At most [`MAX_PER_ADDRESS`] of them from one address (an IPv6 address's /64),
//!   so that one client alone cannot take the others' room; one more is refused the
//!   same way.
//! - A whole request (its head, its handling and the answer's writing) must be done
//!   within [`REQUEST_TIMEOUT`] of the connection's accept, or the connection is
//!   closed: a client that dribbles a header a byte at a time, or never reads the
//!   answer, holds a slot for that long at most. The bound is the connection's: a
//!   kept-alive connection's later requests fit in the same time, and an idle one
//!   is closed at its end (a browser opens another).
//! - A request's head is at most [`MAX_HEAD`] bytes and must be read whole within
//!   [`HEAD_TIMEOUT`] of its first being waited for: a client that dribbles one is
//!   closed after that, well before the whole-request bound, so a crowd of them
//!   (from more addresses than the per-address cap stops) holds the page's slots
//!   for seconds, not for the whole bound.
//! - A websocket's message must be written within [`IO_TIMEOUT`], or it is closed.
//! - Threads: the one that runs the runtime, plus one for a command to the run's
//!   control socket (a blocking call), made when needed; both made on a thread
//!   already kept off the real-time CPUs, whose affinity they inherit.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, UPGRADE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ictus_core::CpuSet;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_tungstenite::WebSocketStream;
use tungstenite::Message;

/// The page, embedded.
const PAGE: &str = include_str!("page.html");

/// Connections open at once, websockets included; one more is answered 503 and
/// closed. Each costs a task and its buffers (a few KiB, [`MAX_HEAD`] at most), no
/// thread.
pub const MAX_CONNECTIONS: usize = 512;

/// Connections open at once from one address; one more is answered 503 and closed.
/// An IPv6 address counts by its /64, the block one host is usually given, so that a
/// host cannot take [`MAX_CONNECTIONS`] by hopping addresses. A browser opens six at
/// most to one server, plus a websocket per tab.
pub const MAX_PER_ADDRESS: usize = 32;

/// How long a whole request may take from its connection's accept: its head read,
/// handled and the answer written. Past it the connection is closed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's head may take to arrive whole (a browser sends it at once).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a websocket's message may take to be written (a page that stops
/// reading is closed after it).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request head read (hyper's buffer; its least is 8 KiB).
pub const MAX_HEAD: usize = 32 * 1024;

/// What the server shows that the rest of the crate keeps.
pub(crate) trait Content: Send + Sync + 'static {
    /// The websocket's first message: the plot's history.
    fn history(&self) -> String;
    /// `/metrics`' text, once the run reported.
    fn metrics(&self) -> Option<String>;
}

/// Who may use the server, and where commands go.
#[derive(Debug)]
pub(crate) struct Rules {
    /// The control token (views and commands).
    pub(crate) token: Option<String>,
    /// The read-only token (views, `/metrics`).
    pub(crate) read_token: Option<String>,
    /// On loopback, commands without a token.
    pub(crate) open_loopback: bool,
    /// Loopback binds check the `Host` header against these (empty: not loopback).
    pub(crate) hosts: Vec<String>,
    /// The run's control socket.
    pub(crate) control: PathBuf,
    /// Whether the page is served, or `/metrics` only.
    pub(crate) page: bool,
}

/// The last snapshot and the end, for `/status` and the websockets.
#[derive(Clone, Debug, Default)]
struct Board {
    /// Bumped by each snapshot and by the end.
    version: u64,
    status: Option<Arc<str>>,
    ended: Option<String>,
}

struct Ctx {
    rules: Rules,
    content: Arc<dyn Content>,
    board: watch::Receiver<Board>,
    permits: Arc<Semaphore>,
    per_address: Arc<PerAddress>,
}

/// The running server; stops when dropped.
pub(crate) struct Server {
    board: watch::Sender<Board>,
    permits: Arc<Semaphore>,
    stop: Arc<Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `listener` from a thread of its own, made on a thread restricted to
    /// `cpus` first.
    pub(crate) fn start(
        listener: std::net::TcpListener,
        rules: Rules,
        content: Arc<dyn Content>,
        cpus: Option<CpuSet>,
    ) -> Result<Server, String> {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (board, board_rx) = watch::channel(Board::default());
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let stop = Arc::new(Notify::new());
        let ctx = Arc::new(Ctx {
            rules,
            content,
            board: board_rx,
            permits: Arc::clone(&permits),
            per_address: Arc::default(),
        });
        let (ready, started) = std::sync::mpsc::channel();
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ictus-ui".into())
            .spawn(move || {
                if let Some(c) = &cpus {
                    let _ = ictus_os::sched::set_affinity(c);
                }
                // One thread runs every connection; a command's blocking call gets
                // one more. Both inherit this thread's CPUs.
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .max_blocking_threads(1)
                    .thread_name("ictus-ui-ctl")
                    .build();
                let runtime = match runtime {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let accepting = std::pin::pin!(accept(listener, ctx));
                    let stop = std::pin::pin!(stopped.notified());
                    futures_util::future::select(accepting, stop).await;
                });
                // Every connection's task goes with the runtime; a command under way
                // ends on its own (the control socket's own timeout).
                runtime.shutdown_background();
            })
            .map_err(|e| e.to_string())?;
        match started.recv() {
            Ok(Ok(())) => Ok(Server {
                board,
                permits,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err("the server's thread ended at start".into())
            }
        }
    }

    /// A new snapshot, serialized.
    pub(crate) fn publish(&self, status: Arc<str>) {
        self.board.send_modify(|b| {
            b.status = Some(status);
            b.version += 1;
        });
    }

    /// The run ended, and why.
    pub(crate) fn end(&self, reason: &str) {
        self.board.send_modify(|b| {
            b.ended = Some(reason.to_string());
            b.version += 1;
        });
    }

    /// Whether [`Server::end`] was called.
    pub(crate) fn ended(&self) -> bool {
        self.board.borrow().ended.is_some()
    }

    /// Connections open now.
    pub(crate) fn connections(&self) -> usize {
        MAX_CONNECTIONS - self.permits.available_permits()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The pages get the end before the server goes (half a second at most).
        if self.ended() {
            let by = Instant::now() + Duration::from_millis(500);
            while self.connections() > 0 && Instant::now() < by {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The answer to a connection past [`MAX_CONNECTIONS`], written without waiting.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; \
charset=utf-8\r\nContent-Length: 38\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n\
too many connections to the live page\n";

/// Connections past the cap being answered at once (each for [`REFUSAL`] at most);
/// more are closed with what a write without waiting takes of the answer.
const REFUSING: usize = 64;

/// How long a refused connection is read (and what it sent dropped) after its 503,
/// so that its close does not reset the answer away.
const REFUSAL: Duration = Duration::from_secs(1);

async fn accept(listener: tokio::net::TcpListener, ctx: Arc<Ctx>) {
    let refusals = Arc::new(Semaphore::new(REFUSING));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors, or a connection reset before its accept.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = Slot::take(&ctx, peer.ip()) else {
            match Arc::clone(&refusals).try_acquire_owned() {
                Ok(refusal) => {
                    tokio::spawn(refuse(stream, refusal));
                }
                Err(_) => {
                    let _ = stream.try_write(BUSY);
                }
            }
            continue;
        };
        let ctx = Arc::clone(&ctx);
        tokio::spawn(connection(stream, ctx, Arc::new(slot)));
    }
}

/// Connections open now by address ([`source`]'s key).
#[derive(Debug, Default)]
struct PerAddress(std::sync::Mutex<HashMap<IpAddr, usize>>);

/// The key a connection from `ip` counts under: an IPv4 address (also when mapped
/// into IPv6) as it is, an IPv6 address by its /64.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// A connection's room: one of [`MAX_CONNECTIONS`] and one of its address's
/// [`MAX_PER_ADDRESS`], both given back when the last holder (the connection, or its
/// websocket's task) drops it.
struct Slot {
    _permit: OwnedSemaphorePermit,
    key: IpAddr,
    per_address: Arc<PerAddress>,
}

impl Slot {
    /// The room for a connection from `ip`, or `None` when its address or the server
    /// is full.
    fn take(ctx: &Ctx, ip: IpAddr) -> Option<Slot> {
        let key = source(ip);
        let mut counts = ctx.per_address.0.lock().unwrap_or_else(|e| e.into_inner());
        // An address is in the map only while it holds a connection: a refusal adds
        // nothing, so addresses refused at the cap cannot grow it.
        if counts.get(&key).is_some_and(|&c| c >= MAX_PER_ADDRESS) {
            return None;
        }
        let permit = Arc::clone(&ctx.permits).try_acquire_owned().ok()?;
        *counts.entry(key).or_insert(0) += 1;
        Some(Slot {
            _permit: permit,
            key,
            per_address: Arc::clone(&ctx.per_address),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.per_address.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = counts.get_mut(&self.key) {
            *c -= 1;
            if *c == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// A connection past the cap: the 503, the end of writing, then what it sends is
/// read and dropped for [`REFUSAL`] at most (a close with unread bytes would reset
/// the connection, and the client could lose the answer).
async fn refuse(mut stream: tokio::net::TcpStream, _slot: OwnedSemaphorePermit) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let drain = async {
        stream.write_all(BUSY).await?;
        stream.shutdown().await?;
        let mut buf = [0u8; 1024];
        let mut read = 0;
        while read < MAX_HEAD {
            match stream.read(&mut buf).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL, drain).await;
}

/// One connection, its requests within [`REQUEST_TIMEOUT`]; a websocket then goes on
/// in a task of its own, with the connection's slot.
async fn connection(stream: tokio::net::TcpStream, ctx: Arc<Ctx>, slot: Arc<Slot>) {
    let service = hyper::service::service_fn(move |request| {
        handle(request, Arc::clone(&ctx), Arc::clone(&slot))
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, connection).await;
}

type Answer = Response<Full<Bytes>>;

fn answer(code: u16, content_type: &str, body: impl Into<Bytes>) -> Answer {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(CONTENT_TYPE, v);
    }
    h.insert("Cache-Control", HeaderValue::from_static("no-store"));
    r
}

fn text(code: u16, body: &str) -> Answer {
    answer(code, "text/plain; charset=utf-8", format!("{body}\n"))
}

fn header_value<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The request's path and query, as sent.
fn target(request: &Request<Incoming>) -> &str {
    request.uri().path_and_query().map_or("/", |p| p.as_str())
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
fn access(request: &Request<Incoming>, rules: &Rules) -> Result<Access, (u16, String)> {
    let (_, query_token) = split_url(target(request));
    let given = query_token
        .or_else(|| header_value(request, "Authorization").and_then(|v| v.strip_prefix("Bearer ")));
    let is = |t: &Option<String>| matches!((given, t), (Some(g), Some(t)) if same(g, t));
    let loopback = !rules.hosts.is_empty();
    let access = if is(&rules.token) || (rules.token.is_none() && loopback) {
        Access::Control
    } else if is(&rules.read_token) {
        Access::Read
    } else if given.is_some() {
        return Err((
            401,
            "wrong token: open the URL `ictus run` printed at start".to_string(),
        ));
    } else if loopback {
        // On loopback the views are open; a command needs the control token.
        if rules.open_loopback {
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
    if loopback && !rules.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
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

async fn handle(
    mut request: Request<Incoming>,
    ctx: Arc<Ctx>,
    slot: Arc<Slot>,
) -> Result<Answer, Infallible> {
    let access = match access(&request, &ctx.rules) {
        Ok(a) => a,
        Err((code, why)) => return Ok(text(code, &why)),
    };
    let path = split_url(target(&request)).0.to_string();
    let method = request.method().clone();
    let answer = match (&method, path.as_str()) {
        (&Method::GET, "/metrics") => match ctx.content.metrics() {
            Some(m) => answer(200, crate::metrics::CONTENT_TYPE, m),
            None => text(503, "the run has not reported yet"),
        },
        (_, "/metrics") => text(405, "method not allowed"),
        _ if !ctx.rules.page => text(
            404,
            "not found: this server (--metrics) answers /metrics only",
        ),
        (&Method::GET, "/" | "/index.html") => {
            let mut r = answer(200, "text/html; charset=utf-8", PAGE);
            let h = r.headers_mut();
            h.insert(
                "Content-Security-Policy",
                HeaderValue::from_static(
                    "default-src 'none'; script-src 'unsafe-inline'; style-src \
                     'unsafe-inline'; connect-src 'self'; img-src data:",
                ),
            );
            h.insert(
                "X-Content-Type-Options",
                HeaderValue::from_static("nosniff"),
            );
            r
        }
        (&Method::GET, "/status") => match ctx.board.borrow().status.clone() {
            Some(json) => answer(200, "application/json", json.to_string()),
            None => text(503, "the run has not reported yet"),
        },
        (&Method::GET, "/live") => live(&mut request, &ctx, slot),
        (&Method::POST, p) if p.starts_with("/command/") && access != Access::Control => text(
            403,
            "a command needs the control token: open the live page's URL `ictus run` \
             printed at start (this one may read, not command)",
        ),
        (&Method::POST, p) if p.starts_with("/command/") => {
            let name = p.trim_start_matches("/command/");
            command(&request, &ctx, name).await
        }
        (_, "/" | "/status" | "/live") => text(405, "method not allowed"),
        (_, p) if p.starts_with("/command/") => text(405, "a command is a POST"),
        _ => text(
            404,
            "not found (/, /status, /live, /command/NAME, /metrics)",
        ),
    };
    Ok(answer)
}

/// A command from the page, sent to the run's control socket.
async fn command(request: &Request<Incoming>, ctx: &Ctx, name: &str) -> Answer {
    if header_value(request, "X-Ictus") != Some("1") {
        return text(
            403,
            "a command needs the header `X-Ictus: 1` (what the page sends)",
        );
    }
    let line = match ictus_exec::ctl::command_line(name) {
        Ok(l) if name != "status" => l,
        Ok(_) | Err(_) => {
            return text(
                400,
                &format!(
                    "command '{}': a state or mode of the run, or stop",
                    name.escape_debug()
                ),
            );
        }
    };
    let control = ctx.rules.control.clone();
    // A blocking call (the socket's own timeout bounds it), on the runtime's one
    // blocking thread.
    let reply =
        tokio::task::spawn_blocking(move || ictus_exec::ctl::request(&control, &line)).await;
    let (code, reply) = match reply {
        Ok(Ok(r)) if r.starts_with("ok") => (200, r),
        Ok(Ok(r)) => (409, r),
        Ok(Err(e)) => (502, format!("error {e}")),
        Err(e) => (500, format!("error {e}")),
    };
    text(code, &reply)
}

/// The websocket's upgrade: the answer now, the stream in a task of its own.
fn live(request: &mut Request<Incoming>, ctx: &Arc<Ctx>, slot: Arc<Slot>) -> Answer {
    let upgrade =
        header_value(request, "Upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = header_value(request, "Sec-WebSocket-Key").filter(|_| upgrade) else {
        return text(400, "/live is a websocket");
    };
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let Ok(accept) = HeaderValue::from_str(&accept) else {
        return text(400, "/live is a websocket");
    };
    let upgraded = hyper::upgrade::on(request);
    let ctx = Arc::clone(ctx);
    tokio::spawn(async move {
        let _slot = slot;
        if let Ok(io) = upgraded.await {
            let ws = WebSocketStream::from_raw_socket(
                TokioIo::new(io),
                tungstenite::protocol::Role::Server,
                None,
            )
            .await;
            stream(ws, &ctx).await;
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert("Sec-WebSocket-Accept", accept);
    r
}

/// The websocket: the plot's history, then each snapshot, then the end.
async fn stream<S>(mut ws: WebSocketStream<S>, ctx: &Ctx)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    async fn send<S>(ws: &mut WebSocketStream<S>, text: String) -> bool
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        matches!(
            tokio::time::timeout(IO_TIMEOUT, ws.send(Message::text(text))).await,
            Ok(Ok(()))
        )
    }
    let mut board = ctx.board.clone();
    let history = ctx.content.history();
    if !send(&mut ws, history).await {
        return;
    }
    let mut seen = 0;
    let mut last_sent = Instant::now();
    loop {
        let now = board.borrow_and_update().clone();
        let message = if now.version != seen {
            seen = now.version;
            match (&now.ended, &now.status) {
                (Some(reason), _) => {
                    Some(serde_json::json!({"type": "end", "reason": reason}).to_string())
                }
                (None, Some(json)) => Some(format!(r#"{{"type":"status","status":{json}}}"#)),
                (None, None) => None,
            }
        } else if last_sent.elapsed() >= Duration::from_secs(1) {
            // A quiet run still shows the connection alive, and a page that left is
            // found by the failed write.
            Some(r#"{"type":"ping"}"#.to_string())
        } else {
            None
        };
        if let Some(m) = message {
            if !send(&mut ws, m).await {
                return;
            }
            last_sent = Instant::now();
            if now.ended.is_some() {
                let _ = tokio::time::timeout(IO_TIMEOUT, ws.close(None)).await;
                return;
            }
        }
        if let Ok(Err(_)) = tokio::time::timeout(Duration::from_secs(1), board.changed()).await {
            // The server is going.
            let _ = tokio::time::timeout(IO_TIMEOUT, ws.close(None)).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_busy_answer_counts_its_body() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
    }

    #[test]
    fn an_address_counts_as_itself_an_ipv6_one_by_its_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(source(ip("10.0.0.7")), ip("10.0.0.7"));
        assert_eq!(source(ip("::ffff:10.0.0.7")), ip("10.0.0.7"));
        assert_eq!(source(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            source(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            source(ip("2001:db8:1:2::9"))
        );
        assert_ne!(source(ip("2001:db8:1:3::1")), source(ip("2001:db8:1:2::1")));
    }
}
