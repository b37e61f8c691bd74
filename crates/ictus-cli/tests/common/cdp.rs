//! A minimal Chrome DevTools Protocol client for the integration tests: it launches
//! a headless Chromium with a throwaway profile, opens one page and drives it over
//! a single websocket (load a page, evaluate JavaScript, click with real mouse
//! events, wait for a condition, take a screenshot).
//!
//! Everything is synchronous and every wait is bounded: a call that gets no answer
//! in time is an `Err`, never a hang. Include it in a test file with
//! `#[path = "common/cdp.rs"] mod cdp;`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, ErrorKind};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// How long one protocol call (or a page load) may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long Chromium may take to print its DevTools address.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `Browser.close` may take before the process is killed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often `wait_for` evaluates its expression.
const POLL: Duration = Duration::from_millis(20);
/// Events kept for a later wait; older ones are dropped beyond this.
const MAX_QUEUED_EVENTS: usize = 1000;
/// Lines of Chromium's stderr kept for error messages.
const STDERR_TAIL: usize = 40;

/// Why a protocol call failed.
enum Failure {
    /// The evaluated JavaScript threw (or did not parse).
    Thrown(String),
    /// The browser answered with an error.
    Browser(String),
    /// No answer: the socket failed, closed or timed out.
    Link(String),
}

impl From<Failure> for String {
    fn from(failure: Failure) -> String {
        match failure {
            Failure::Thrown(text) | Failure::Browser(text) | Failure::Link(text) => text,
        }
    }
}

/// A headless Chromium driven over the DevTools protocol, with one page open.
///
/// It owns the browser process and its temporary profile directory: dropping it
/// closes the browser (killing it if it does not end within 3 s) and removes the
/// profile.
pub(crate) struct Browser {
    ws: WebSocket<TcpStream>,
    child: Child,
    /// The flattened session of the page target: page commands carry it.
    session: String,
    next_id: u64,
    /// Events of the page's session received while waiting for something else.
    events: VecDeque<Value>,
    /// Removed on drop, after the browser has ended (fields drop in order).
    profile: tempfile::TempDir,
}

impl Browser {
    /// Starts the Chromium at `path` headless (`--no-sandbox`, a 1400×1200 window,
    /// a fresh profile in a temporary directory), connects to its DevTools
    /// websocket and opens a blank page.
    pub(crate) fn launch(path: &Path) -> Result<Browser, String> {
        let profile = tempfile::Builder::new()
            .prefix("ictus-chromium-")
            .tempdir()
            .map_err(|e| format!("cannot create a profile directory: {e}"))?;
        let mut child = Command::new(path)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                "--window-size=1400,1200",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
        let Some(stderr) = child.stderr.take() else {
            unreachable!("stderr is piped")
        };
        let (tail, endpoint) = drain_stderr(stderr);
        let ws = match await_endpoint(&endpoint, &tail, &mut child).and_then(|url| connect(&url)) {
            Ok(ws) => ws,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} did not start: {e}", path.display()));
            }
        };
        let mut browser = Browser {
            ws,
            child,
            session: String::new(),
            next_id: 0,
            events: VecDeque::new(),
            profile,
        };
        browser.open_page()?;
        Ok(browser)
    }

    /// The browser process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temporary profile directory (`--user-data-dir`), removed on drop.
    pub(crate) fn profile_dir(&self) -> &Path {
        self.profile.path()
    }

    /// Loads `url` in the page and waits for its `load` event (15 s at most).
    /// A navigation within the same document (only the fragment changes) fires no
    /// `load` event and so times out.
    pub(crate) fn navigate(&mut self, url: &str) -> Result<(), String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        // A load event of an earlier navigation must not end this wait.
        self.events.retain(|e| e["method"] != "Page.loadEventFired");
        let reply = self.call("Page.navigate", json!({ "url": url }), deadline)?;
        if let Some(error) = reply["errorText"].as_str() {
            return Err(format!("navigating to {url}: {error}"));
        }
        self.wait_event("Page.loadEventFired", deadline)
            .map_err(|e| format!("navigating to {url}: {}", String::from(e)))?;
        Ok(())
    }

    /// Evaluates the JavaScript expression `expr` in the page, awaiting it when it
    /// is a promise, and returns its value as JSON. `undefined` is `null`; values
    /// JSON cannot hold (`NaN`, `Infinity`, `-0`, BigInts) come back as their text.
    /// A thrown exception is an `Err` with its description.
    pub(crate) fn eval(&mut self, expr: &str) -> Result<Value, String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        Ok(self.evaluate(expr, deadline)?)
    }

    /// Evaluates `expr` every 20 ms until it is truthy; returns how long that took.
    /// An exception thrown by `expr` counts as false (the page may not be ready
    /// yet), but a syntax error fails at once. After `timeout` the `Err` names the
    /// expression and its last value.
    pub(crate) fn wait_for(&mut self, expr: &str, timeout: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let deadline = start + timeout;
        // The newlines keep a trailing `//` comment in `expr` from eating the rest.
        let probe = format!(
            "(async () => {{
                let v;
                try {{ v = await (\n{expr}\n); }}
                catch (e) {{ return {{ ok: false, last: 'threw ' + e }}; }}
                let s;
                try {{ s = JSON.stringify(v); }} catch (e) {{}}
                return {{ ok: !!v, last: s === undefined ? String(v) : s }};
            }})()"
        );
        loop {
            // A call may outlast a very short wait by a little, never by much.
            let call_deadline = deadline.max(Instant::now() + Duration::from_secs(1));
            let last = match self.evaluate(&probe, call_deadline) {
                Ok(answer) if answer["ok"] == true => return Ok(start.elapsed()),
                Ok(answer) => answer["last"].as_str().unwrap_or("?").to_owned(),
                // E.g. "execution context was destroyed" while a page loads.
                Err(Failure::Browser(e)) => e,
                Err(e) => return Err(format!("waiting for `{expr}`: {}", String::from(e))),
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "`{expr}` still not true after {timeout:?}; last value: {}",
                    truncate(&last, 300)
                ));
            }
            std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
        }
    }

    /// Clicks the centre of the first element matching the CSS `selector` with
    /// real mouse events (move, press, release of the left button), after
    /// scrolling it into view. Fails when nothing matches, when the element has no
    /// size, or when another element covers its centre.
    pub(crate) fn click(&mut self, selector: &str) -> Result<(), String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let quoted = serde_json::to_string(selector).map_err(|e| e.to_string())?;
        let locate = format!(
            "(() => {{
                const el = document.querySelector({quoted});
                if (!el) return {{ error: 'no element matches' }};
                el.scrollIntoView({{ block: 'center', inline: 'center', behavior: 'instant' }});
                const r = el.getBoundingClientRect();
                if (r.width === 0 || r.height === 0) return {{ error: 'the element has no size' }};
                const x = r.left + r.width / 2, y = r.top + r.height / 2;
                const hit = document.elementFromPoint(x, y);
                if (!hit || (hit !== el && !el.contains(hit))) {{
                    return {{ error: 'its centre is covered by ' +
                        (hit ? hit.outerHTML.slice(0, 120) : 'nothing (outside the viewport?)') }};
                }}
                return {{ x, y }};
            }})()"
        );
        let spot = self
            .evaluate(&locate, deadline)
            .map_err(|e| format!("clicking {selector}: {}", String::from(e)))?;
        if let Some(error) = spot["error"].as_str() {
            return Err(format!("clicking {selector}: {error}"));
        }
        let (Some(x), Some(y)) = (spot["x"].as_f64(), spot["y"].as_f64()) else {
            return Err(format!("clicking {selector}: no position in {spot}"));
        };
        for (kind, button, buttons) in [
            ("mouseMoved", "none", 0),
            ("mousePressed", "left", 1),
            ("mouseReleased", "left", 0),
        ] {
            let params = json!({
                "type": kind,
                "x": x,
                "y": y,
                "button": button,
                "buttons": buttons,
                "clickCount": if kind == "mouseMoved" { 0 } else { 1 },
                "pointerType": "mouse",
            });
            self.call("Input.dispatchMouseEvent", params, deadline)
                .map_err(|e| format!("clicking {selector}: {}", String::from(e)))?;
        }
        Ok(())
    }

    /// Writes a PNG screenshot of the page's viewport to `png`.
    pub(crate) fn screenshot(&mut self, png: &Path) -> Result<(), String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let reply = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png" }),
            deadline,
        )?;
        let data = reply["data"].as_str().ok_or_else(|| {
            format!(
                "Page.captureScreenshot: no data in {}",
                truncate(&reply.to_string(), 300)
            )
        })?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("Page.captureScreenshot: bad base64: {e}"))?;
        std::fs::write(png, bytes).map_err(|e| format!("cannot write {}: {e}", png.display()))
    }

    /// Creates the page target, attaches to it (flattened session) and enables its
    /// page events.
    fn open_page(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let target = self.call(
            "Target.createTarget",
            json!({ "url": "about:blank" }),
            deadline,
        )?;
        let Some(target_id) = target["targetId"].as_str() else {
            return Err(format!("Target.createTarget: no targetId in {target}"));
        };
        let attached = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
            deadline,
        )?;
        let Some(session) = attached["sessionId"].as_str() else {
            return Err(format!("Target.attachToTarget: no sessionId in {attached}"));
        };
        self.session = session.to_owned();
        self.call("Page.enable", json!({}), deadline)?;
        Ok(())
    }

    /// `Runtime.evaluate` by value, awaiting promises; an exception is a
    /// [`Failure::Thrown`] with its description.
    fn evaluate(&mut self, expr: &str, deadline: Instant) -> Result<Value, Failure> {
        let params = json!({
            "expression": expr,
            "returnByValue": true,
            "awaitPromise": true,
        });
        let mut reply = self.call("Runtime.evaluate", params, deadline)?;
        if let Some(details) = reply.get("exceptionDetails") {
            let text = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("an exception");
            return Err(Failure::Thrown(format!(
                "evaluating `{}`: {text}",
                truncate(expr, 200)
            )));
        }
        let result = reply["result"].take();
        Ok(match result.get("unserializableValue") {
            Some(text) => text.clone(),
            None => result.get("value").cloned().unwrap_or(Value::Null),
        })
    }

    /// Sends `method` (to the page's session once attached) and waits until
    /// `deadline` for its reply's `result`. Events of the page's session that
    /// arrive meanwhile are queued; other messages are dropped.
    fn call(&mut self, method: &str, params: Value, deadline: Instant) -> Result<Value, Failure> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .map_err(|e| Failure::Link(format!("{method}: cannot send: {e}")))?;
        loop {
            let mut message = self
                .receive(deadline)
                .map_err(|e| Failure::Link(format!("{method}: {e}")))?;
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    let text = error["message"].as_str().unwrap_or("an error");
                    return Err(Failure::Browser(format!("{method}: {text} ({error})")));
                }
                return Ok(message["result"].take());
            }
            self.queue(message);
        }
    }

    /// Waits until `deadline` for the page's event `method` (taking it from the
    /// queue when it came earlier) and returns its params.
    fn wait_event(&mut self, method: &str, deadline: Instant) -> Result<Value, Failure> {
        if let Some(at) = self.events.iter().position(|e| e["method"] == method) {
            let mut event = self.events.remove(at).unwrap_or_default();
            return Ok(event["params"].take());
        }
        loop {
            let mut message = self
                .receive(deadline)
                .map_err(|e| Failure::Link(format!("waiting for {method}: {e}")))?;
            if message["method"] == method && message["sessionId"] == self.session.as_str() {
                return Ok(message["params"].take());
            }
            self.queue(message);
        }
    }

    /// Keeps `message` when it is an event of the page's session.
    fn queue(&mut self, message: Value) {
        if message.get("method").is_some() && message["sessionId"] == self.session.as_str() {
            if self.events.len() == MAX_QUEUED_EVENTS {
                self.events.pop_front();
            }
            self.events.push_back(message);
        }
    }

    /// The next JSON message from the browser, read before `deadline`.
    fn receive(&mut self, deadline: Instant) -> Result<Value, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("no answer in time".to_owned());
            }
            // A zero timeout would mean "block forever".
            self.ws
                .get_ref()
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .map_err(|e| format!("cannot set the socket's timeout: {e}"))?;
            match self.ws.read() {
                Ok(Message::Text(text)) => {
                    return serde_json::from_str(text.as_str()).map_err(|e| {
                        format!(
                            "bad JSON from the browser ({e}): {}",
                            truncate(text.as_str(), 300)
                        )
                    });
                }
                Ok(Message::Close(_)) => return Err("the browser closed the connection".to_owned()),
                // Pings are answered by tungstenite; nothing else is expected.
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("the connection failed: {e}")),
            }
        }
    }
}

impl Drop for Browser {
    /// Asks the browser to close, kills it when it is still there after 3 s, and
    /// reaps it; the profile directory is removed afterwards.
    fn drop(&mut self) {
        self.next_id += 1;
        let close = json!({ "id": self.next_id, "method": "Browser.close" });
        let _ = self.ws.send(Message::text(close.to_string()));
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Reads Chromium's stderr in a thread until it closes, so the browser never
/// blocks on a full pipe: sends the DevTools address when it is printed and keeps
/// the last lines for error messages.
fn drain_stderr(stderr: ChildStderr) -> (Arc<Mutex<VecDeque<String>>>, mpsc::Receiver<String>) {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let (tx, rx) = mpsc::channel();
    let kept = Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        let mut sent = false;
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line).trim_end().to_owned();
            if !sent
                && text.contains("DevTools listening on")
                && let Some(at) = text.find("ws://")
            {
                sent = tx.send(text[at..].to_owned()).is_ok();
            }
            if let Ok(mut kept) = kept.lock() {
                if kept.len() == STDERR_TAIL {
                    kept.pop_front();
                }
                kept.push_back(text);
            }
        }
    });
    (tail, rx)
}

/// The DevTools websocket address Chromium prints, waited for 20 s at most.
fn await_endpoint(
    endpoint: &mpsc::Receiver<String>,
    tail: &Mutex<VecDeque<String>>,
    child: &mut Child,
) -> Result<String, String> {
    let stderr = || {
        tail.lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    };
    match endpoint.recv_timeout(LAUNCH_TIMEOUT) {
        Ok(url) => Ok(url),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "no DevTools address within {LAUNCH_TIMEOUT:?}; stderr:\n{}",
            stderr()
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // Stderr closed: the browser is ending, if not already gone.
            let deadline = Instant::now() + Duration::from_secs(1);
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break format!("it ended ({status})"),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    _ => break "it closed its stderr".to_owned(),
                }
            };
            Err(format!(
                "{status} before printing its DevTools address; stderr:\n{}",
                stderr()
            ))
        }
    }
}

/// Opens the websocket at `url` (`ws://HOST:PORT/devtools/browser/ID`) with
/// bounded socket timeouts.
fn connect(url: &str) -> Result<WebSocket<TcpStream>, String> {
    let rest = url
        .strip_prefix("ws://")
        .ok_or_else(|| format!("not a ws:// address: {url}"))?;
    let host_port = rest.split('/').next().unwrap_or(rest);
    let addr: SocketAddr = host_port
        .to_socket_addrs()
        .map_err(|e| format!("bad address {host_port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host_port} resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&addr, CALL_TIMEOUT)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let setup = |s: &TcpStream| -> std::io::Result<()> {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(CALL_TIMEOUT))?;
        s.set_write_timeout(Some(CALL_TIMEOUT))
    };
    setup(&stream).map_err(|e| format!("cannot set up the socket: {e}"))?;
    let (ws, _) = tungstenite::client(url, stream)
        .map_err(|e| format!("websocket handshake with {url} failed: {e}"))?;
    Ok(ws)
}

/// `text` cut to at most `max` characters, marked with `…` when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
