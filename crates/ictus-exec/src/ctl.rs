//! The control socket of a run: a Unix stream socket named after the run, served by
//! the coordinator on a normal-class thread outside the real-time CPUs.
//!
//! One request per connection, one line each way:
//!
//! | request                  | reply                                    |
//! |--------------------------|------------------------------------------|
//! | `state NAME`             | `ok NAME from frame F` or `error ...`    |
//! | `status`                 | one line of JSON ([`crate::live::LiveStatus`]) |
//! | `stop`                   | `ok stopping`                            |
//! | `put KEY HEX`            | `ok`                                     |
//! | `get KEY TIMEOUT_MS`     | `value HEX` or `error ...`               |
//!
//! `ictus ctl run|pause|off` sends `state`; the setup channel of child processes
//! sends `put` and `get` (seed 003's non-real-time client-server channel).
//!
//! ```no_run
//! let dir = ictus_exec::ctl::run_dir();
//! let reply = ictus_exec::ctl::request(&dir.join("stress.sock"), "state pause").unwrap();
//! assert!(reply.starts_with("ok"));
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use thiserror::Error;

use crate::state::{SetupChannelError, SetupStore};

/// Why talking to a run failed.
#[derive(Debug, Error)]
pub enum CtlError {
    /// No run of that name is listening.
    #[error("no run is listening at {} ({source}): is `ictus run` running?", path.display())]
    NotRunning {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another live run already uses the name.
    #[error("a run named '{name}' is already running (its socket {} answers)", path.display())]
    NameTaken {
        /// The run name.
        name: String,
        /// Its socket.
        path: PathBuf,
    },
    /// The folder of run sockets is not private to this user.
    #[error("{}: {why}; a run's control socket lives only in a folder of yours (remove it, or set ICTUS_RUN_DIR to one)", path.display())]
    NotPrivate {
        /// The folder.
        path: PathBuf,
        /// Whose it is.
        why: String,
    },
    /// The run folder or socket could not be made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No run is active, or several are and none was named.
    #[error("{0}")]
    Which(String),
    /// A run name that cannot name a socket (a path, an odd character).
    #[error(
        "run name '{}': {reason} (a run name is 1 to {MAX_NAME} ASCII letters, digits, `_`, `-` or `.`, not starting with `.`)",
        name.escape_debug()
    )]
    BadName {
        /// The name.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The socket's path is longer than a Unix socket address holds.
    #[error(
        "{}: {len} bytes, but a Unix socket path holds at most {MAX_SOCKET_PATH}; use a shorter run name or set ICTUS_RUN_DIR to a shorter folder",
        path.display()
    )]
    PathTooLong {
        /// The socket path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// A command that is not one word.
    #[error(
        "command '{}': a command is one word (`run`, `pause`, `off`, a mode of the schedule, `status` or `stop`)",
        command.escape_debug()
    )]
    BadCommand {
        /// The command given.
        command: String,
    },
}

/// The longest run name.
pub const MAX_NAME: usize = 64;

/// The longest path a Unix socket address holds (`sun_path` less its final NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Checks that `name` can name a run: its socket, shared-memory segments and run
/// files. No path separators, no `..`, nothing but ASCII letters, digits, `_`, `-`
/// and `.`.
pub fn check_name(name: &str) -> Result<(), CtlError> {
    let bad = |reason| {
        Err(CtlError::BadName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME {
        return bad("it is too long");
    }
    if name.starts_with('.') {
        return bad("it starts with `.`");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return bad("it holds a character other than a letter, digit, `_`, `-` or `.`");
    }
    Ok(())
}

/// Checks that run `name`'s socket in `dir` can be bound: a valid name, and a path
/// that fits a Unix socket address.
pub fn check_socket(dir: &Path, name: &str) -> Result<PathBuf, CtlError> {
    check_name(name)?;
    let path = dir.join(format!("{name}.sock"));
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(CtlError::PathTooLong { path, len });
    }
    Ok(path)
}

/// The request line for a command given on the command line: `status`, `stop`, or
/// `state NAME`. A command that is not one plain word (a space, a newline, a
/// control character) is refused, so nothing after it is silently dropped.
pub fn command_line(command: &str) -> Result<String, CtlError> {
    let plain = !command.is_empty()
        && command.len() <= MAX_NAME
        && command
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !plain {
        return Err(CtlError::BadCommand {
            command: command.to_string(),
        });
    }
    Ok(match command {
        "status" | "stop" => command.to_string(),
        state => format!("state {state}"),
    })
}

/// The folder of run sockets and files: `/run/ictus/runs` for root, else
/// `$XDG_RUNTIME_DIR/ictus/runs`, else `/tmp/ictus-<uid>/runs`.
pub fn run_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("ICTUS_RUN_DIR")
        && !dir.is_empty()
    {
        return PathBuf::from(dir);
    }
    let uid = uid();
    if uid == Some(0) {
        return PathBuf::from("/run/ictus/runs");
    }
    if let Ok(x) = std::env::var("XDG_RUNTIME_DIR")
        && !x.is_empty()
    {
        return Path::new(&x).join("ictus/runs");
    }
    PathBuf::from(format!("/tmp/ictus-{}/runs", uid.unwrap_or(0)))
}

/// Makes `dir` (mode 0700 for what it creates) and checks that nobody else can put
/// a socket in it or move it: it is this user's and not open to others (a folder of
/// this user's that is, is closed to 0700, which only its owner may do), and every
/// folder above it is this user's or root's. A folder of another user's on the way
/// (a `/tmp/ictus-UID` made first by someone else, to serve a socket of theirs in
/// the run's place) is refused: a client would take their answers for the run's.
pub fn private_dir(dir: &Path) -> Result<(), CtlError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CtlError::Io { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    let me = uid().unwrap_or(0);
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    if meta.uid() != me {
        return Err(CtlError::NotPrivate {
            path: dir.to_path_buf(),
            why: format!("it belongs to uid {}, not to you (uid {me})", meta.uid()),
        });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    }
    let mut above = dir.parent();
    while let Some(p) = above.filter(|p| !p.as_os_str().is_empty()) {
        let meta = std::fs::metadata(p).map_err(io(p))?;
        if meta.uid() != me && meta.uid() != 0 {
            return Err(CtlError::NotPrivate {
                path: dir.to_path_buf(),
                why: format!(
                    "{} above it belongs to uid {}, not to you (uid {me})",
                    p.display(),
                    meta.uid()
                ),
            });
        }
        above = p.parent();
    }
    Ok(())
}

/// Refuses a folder of run sockets (when it exists) that belongs to another user
/// than this one or root.
fn foreign_dir(dir: &Path) -> Result<(), CtlError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(());
    };
    let me = uid().unwrap_or(0);
    if meta.uid() != me && meta.uid() != 0 {
        return Err(CtlError::NotPrivate {
            path: dir.to_path_buf(),
            why: format!("it belongs to uid {}, not to you (uid {me})", meta.uid()),
        });
    }
    Ok(())
}

fn uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The socket of run `name`.
pub fn socket_path(name: &str) -> PathBuf {
    run_dir().join(format!("{name}.sock"))
}

/// The names of the runs whose sockets answer.
pub fn live_runs() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(run_dir()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            let name = p.file_name()?.to_str()?.strip_suffix(".sock")?.to_string();
            UnixStream::connect(&p).ok().map(|_| name)
        })
        .collect();
    names.sort();
    names
}

/// The socket of the run named `name`, or of the only live run when `name` is `None`.
pub fn find_run(name: Option<&str>) -> Result<PathBuf, CtlError> {
    // A socket in a folder of another user's could be theirs, answering in the run's
    // place.
    foreign_dir(&run_dir())?;
    if let Some(n) = name {
        return check_socket(&run_dir(), n);
    }
    let live = live_runs();
    match live.as_slice() {
        [one] => Ok(socket_path(one)),
        [] => Err(CtlError::Which(format!(
            "no run is active (no socket answers in {})",
            run_dir().display()
        ))),
        many => Err(CtlError::Which(format!(
            "{} runs are active ({}); name one with --name",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// Sends one request line and returns the reply line.
pub fn request(socket: &Path, line: &str) -> Result<String, CtlError> {
    request_timeout(socket, line, Duration::from_secs(5))
}

fn request_timeout(socket: &Path, line: &str, timeout: Duration) -> Result<String, CtlError> {
    let not_running = |source| CtlError::NotRunning {
        path: socket.to_path_buf(),
        source,
    };
    let mut s = UnixStream::connect(socket).map_err(not_running)?;
    s.set_read_timeout(Some(timeout)).map_err(not_running)?;
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(not_running)?;
    let mut reply = String::new();
    BufReader::new(s)
        .read_line(&mut reply)
        .map_err(not_running)?;
    Ok(reply.trim_end().to_string())
}

pub(crate) fn setup_put(socket: &Path, key: &str, value: &[u8]) -> Result<(), SetupChannelError> {
    match request(socket, &format!("put {key} {}", hex(value))) {
        Ok(r) if r == "ok" => Ok(()),
        Ok(r) => Err(SetupChannelError::Closed(r)),
        Err(e) => Err(SetupChannelError::Closed(e.to_string())),
    }
}

pub(crate) fn setup_get(
    socket: &Path,
    key: &str,
    timeout: Duration,
) -> Result<Vec<u8>, SetupChannelError> {
    let line = format!("get {key} {}", timeout.as_millis());
    match request_timeout(socket, &line, timeout + Duration::from_secs(5)) {
        Ok(r) => {
            if let Some(h) = r.strip_prefix("value ") {
                unhex(h).ok_or_else(|| SetupChannelError::Closed(format!("malformed reply '{r}'")))
            } else if r.starts_with("error timeout") {
                Err(SetupChannelError::Timeout {
                    key: key.to_string(),
                    waited: timeout,
                })
            } else {
                Err(SetupChannelError::Closed(r))
            }
        }
        Err(e) => Err(SetupChannelError::Closed(e.to_string())),
    }
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".to_string();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text == "-" {
        return Some(Vec::new());
    }
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A request the coordinator must answer itself (the store answers the others).
#[derive(Debug)]
pub enum Command {
    /// Move to the named state; reply with the outcome.
    State(String, mpsc::Sender<String>),
    /// Report the live status as a JSON line.
    Status(mpsc::Sender<String>),
    /// Stop the run.
    Stop(mpsc::Sender<String>),
}

/// The serving side: owns the socket file and removes it on drop.
#[derive(Debug)]
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Listens at the socket of run `name` in `dir` (normally [`run_dir`]; a stale socket left by a crashed run is
    /// replaced; a live one is refused). Serves `store` itself and sends the other
    /// requests to `commands`. `cpus`, when given, is where the serving thread runs
    /// (outside the real-time CPUs).
    pub fn start(
        dir: &Path,
        name: &str,
        store: SetupStore,
        commands: mpsc::Sender<Command>,
        cpus: Option<ictus_core::CpuSet>,
    ) -> Result<Server, CtlError> {
        private_dir(dir)?;
        let path = check_socket(dir, name)?;
        if path.exists() {
            if UnixStream::connect(&path).is_ok() {
                return Err(CtlError::NameTaken {
                    name: name.to_string(),
                    path,
                });
            }
            // Nobody answers: the socket of a run that died. Reclaim the name.
            let _ = std::fs::remove_file(&path);
        }
        let listener = UnixListener::bind(&path).map_err(|source| CtlError::Io {
            path: path.clone(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| CtlError::Io {
                path: path.clone(),
                source,
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ictus-ctl".into())
            .spawn(move || {
                if let Some(c) = cpus {
                    let _ = ictus_os::sched::set_affinity(&c);
                }
                // Relaxed: a stop request, polled.
                while !flag.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let (store, commands) = (store.clone(), commands.clone());
                            std::thread::spawn(move || serve(conn, &store, &commands));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
            .map_err(|source| CtlError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(Server {
            path,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Relaxed: see the serving loop.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(conn: UnixStream, store: &SetupStore, commands: &mpsc::Sender<Command>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut line = String::new();
    if BufReader::new(conn).read_line(&mut line).is_err() {
        return;
    }
    let mut words = line.split_whitespace();
    let reply = match (words.next(), words.next(), words.next()) {
        (Some("state"), Some(name), None) => {
            ask(commands, |tx| Command::State(name.to_string(), tx))
        }
        (Some("status"), None, None) => ask(commands, Command::Status),
        (Some("stop"), None, None) => ask(commands, Command::Stop),
        (Some("put"), Some(key), Some(value)) => match unhex(value) {
            Some(v) => match store.put(key, v) {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("error {e}"),
            },
            None => "error the value is not hexadecimal".to_string(),
        },
        (Some("get"), Some(key), Some(ms)) => match ms.parse::<u64>() {
            Ok(ms) => match store.get(key, Duration::from_millis(ms)) {
                Ok(v) => format!("value {}", hex(&v)),
                Err(SetupChannelError::Timeout { .. }) => "error timeout".to_string(),
                Err(e) => format!("error {e}"),
            },
            Err(_) => "error the timeout is not a number of milliseconds".to_string(),
        },
        _ => format!(
            "error unknown request '{}' (state NAME, status, stop, put KEY HEX, get KEY MS)",
            line.trim()
        ),
    };
    let _ = writer.write_all(format!("{reply}\n").as_bytes());
}

fn ask(
    commands: &mpsc::Sender<Command>,
    make: impl FnOnce(mpsc::Sender<String>) -> Command,
) -> String {
    let (tx, rx) = mpsc::channel();
    if commands.send(make(tx)).is_err() {
        return "error the run is ending".to_string();
    }
    rx.recv_timeout(Duration::from_secs(3))
        .unwrap_or_else(|_| "error the coordinator did not answer".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn run_names_that_are_paths_or_odd_are_refused() {
        for bad in [
            "",
            "../etc",
            "a/b",
            ".hidden",
            "x y",
            "tab\t",
            "new\nline",
            "é",
        ] {
            assert!(
                matches!(check_name(bad), Err(CtlError::BadName { .. })),
                "{bad:?} accepted"
            );
        }
        assert!(check_name(&"n".repeat(MAX_NAME + 1)).is_err());
        for good in ["stress", "fig2", "rig-1.b_2"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn a_socket_path_longer_than_sun_path_is_refused() {
        let dir = PathBuf::from(format!("/tmp/{}", "d".repeat(100)));
        let err = check_socket(&dir, "stress").unwrap_err();
        assert!(matches!(err, CtlError::PathTooLong { .. }), "{err}");
        assert!(err.to_string().contains("at most 107"));
        check_socket(Path::new("/run/ictus/runs"), "stress").unwrap();
    }

    #[test]
    fn a_command_is_one_plain_word() {
        assert_eq!(command_line("status").unwrap(), "status");
        assert_eq!(command_line("stop").unwrap(), "stop");
        assert_eq!(command_line("pause").unwrap(), "state pause");
        let err = command_line("pause\nstop").unwrap_err();
        assert!(err.to_string().contains("pause\\nstop"), "{err}");
        for bad in ["", "pause stop", "run\r", "a\0b"] {
            assert!(command_line(bad).is_err(), "{bad:?} accepted");
        }
    }

    proptest! {
        #[test]
        fn a_checked_name_never_escapes_the_run_folder(
            name in prop_oneof!["\\PC{0,80}", "[a-z./_\\- \\n]{0,12}"]
        ) {
            if check_name(&name).is_ok() {
                let dir = Path::new("/run/ictus/runs");
                let path = dir.join(format!("{name}.sock"));
                prop_assert_eq!(path.parent(), Some(dir));
                prop_assert_eq!(path.components().count(), dir.components().count() + 1);
            }
        }

        #[test]
        fn every_accepted_command_is_one_request_line(command in "\\PC{0,40}") {
            if let Ok(line) = command_line(&command) {
                prop_assert!(!line.contains('\n'));
                prop_assert!(line == "status" || line == "stop" || line.starts_with("state "));
            }
        }
    }

    #[test]
    fn hex_round_trips() {
        for v in [&b""[..], b"\x00\xffab"] {
            assert_eq!(unhex(&hex(v)).unwrap(), v);
        }
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_server_answers_setup_and_forwards_commands() {
        let dir = tempfile::tempdir().unwrap();
        let store = SetupStore::new();
        let (tx, rx) = mpsc::channel();
        let sut = Server::start(dir.path(), "t", store.clone(), tx, None).unwrap();
        let path = sut.path().to_path_buf();
        setup_put(&path, "route", b"loop-3").unwrap();
        assert_eq!(
            setup_get(&path, "route", Duration::from_millis(100)).unwrap(),
            b"loop-3"
        );
        assert!(matches!(
            setup_get(&path, "none", Duration::from_millis(10)),
            Err(SetupChannelError::Timeout { .. })
        ));
        let coordinator = std::thread::spawn(move || {
            if let Ok(Command::State(name, reply)) = rx.recv() {
                reply.send(format!("ok {name} from frame 30")).unwrap();
            }
        });
        assert_eq!(
            request(&path, "state pause").unwrap(),
            "ok pause from frame 30"
        );
        coordinator.join().unwrap();
        assert!(
            request(&path, "bogus")
                .unwrap()
                .starts_with("error unknown request")
        );
        drop(sut);
        assert!(!path.exists());
    }

    #[test]
    fn a_run_folder_of_another_users_is_refused_and_one_of_ours_closed() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let root = tempfile::tempdir().unwrap();
        // Ours, open to others: closed to 0700.
        let open = root.path().join("open/runs");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&open).unwrap();
        assert_eq!(std::fs::metadata(&open).unwrap().mode() & 0o777, 0o700);
        // Made anew: 0700.
        let fresh = root.path().join("fresh/runs");
        private_dir(&fresh).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o777, 0o700);
        if uid() != Some(0) {
            ictus_os::testing::skipped(
                "a_run_folder_of_another_users_is_refused_and_one_of_ours_closed",
                "giving a folder to another user needs root",
            );
            return;
        }
        // Another user's, as a /tmp/ictus-UID made first by someone else: refused,
        // the folder itself or one above it, by the server and by a client.
        let theirs = root.path().join("theirs");
        std::fs::create_dir_all(theirs.join("runs")).unwrap();
        let nobody = |p: &Path| std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        nobody(&theirs.join("runs"));
        let err = private_dir(&theirs.join("runs")).unwrap_err();
        assert!(
            err.to_string().contains("belongs to uid 65534, not to you"),
            "{err}"
        );
        nobody(&theirs);
        let under = theirs.join("mine");
        std::fs::create_dir(&under).unwrap();
        std::os::unix::fs::chown(&under, Some(0), Some(0)).unwrap();
        let err = private_dir(&under.join("runs")).unwrap_err();
        assert!(
            err.to_string().contains("above it belongs to uid 65534"),
            "{err}"
        );
        let (tx, _rx) = mpsc::channel();
        assert!(matches!(
            Server::start(&theirs.join("runs"), "r", SetupStore::new(), tx, None),
            Err(CtlError::NotPrivate { .. })
        ));
        assert!(matches!(
            foreign_dir(&theirs.join("runs")),
            Err(CtlError::NotPrivate { .. })
        ));
    }
}
