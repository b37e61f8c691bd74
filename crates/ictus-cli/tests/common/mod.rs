//! Helpers shared by the CLI's end-to-end tests: the binary, the checks every
//! refusal and every success must pass, processes started and signalled as a
//! terminal does, and what a run may leave behind.
// Not every test binary that shares this module uses every helper.
#![allow(dead_code)]

pub(crate) mod probe_runs;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

/// Held by the tests of a binary that change the machine (cpusets, a shield) or
/// compare snapshots of it, so that they run one at a time.
static MACHINE: Mutex<()> = Mutex::new(());

/// Waits for the other tests of this binary that hold the machine; a test that
/// failed holding it does not stop the others.
pub(crate) fn one_at_a_time() -> MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ictus`, the binary under test.
pub(crate) fn ictus() -> Command {
    Command::cargo_bin("ictus").expect("the ictus binary is built")
}

/// `ictus` with its run folder (where runs put their control sockets) in `run_dir`.
pub(crate) fn ictus_in(run_dir: &Path) -> Command {
    let mut c = ictus();
    c.env("ICTUS_RUN_DIR", run_dir);
    c
}

/// The words of `cmd` after the program, for messages.
fn words(cmd: &Command) -> Vec<String> {
    cmd.get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Runs `cmd` expecting success and returns its output; a failure names the
/// command and shows its stderr.
pub(crate) fn succeeds(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("ictus runs");
    assert!(
        out.status.success(),
        "ictus {:?} failed: {}",
        words(cmd),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` expecting success and nothing on stderr (`--json` prints nothing but
/// the record), and returns stdout as one JSON document.
pub(crate) fn json_only(cmd: &mut Command) -> Value {
    let out = succeeds(cmd);
    assert!(
        out.stderr.is_empty(),
        "--json prints nothing but JSON, stderr had: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Runs `cmd` expecting a refusal before anything runs: exit code 2, nothing on
/// stdout, one line on stderr and no panic. Returns that line (with its newline).
pub(crate) fn refused(cmd: &mut Command) -> String {
    let out = cmd.output().expect("ictus runs");
    let args = words(cmd);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "ictus {args:?} exits 2: {err}");
    assert!(out.stdout.is_empty(), "ictus {args:?} printed to stdout");
    assert_eq!(
        err.lines().count(),
        1,
        "ictus {args:?}: one line, got: {err}"
    );
    assert!(!err.contains("panicked"), "ictus {args:?}: {err}");
    err
}

/// A scratch folder for a run (its schedule, its control socket) and the run name
/// `cli-TAG-PID`, of this test process alone.
pub(crate) fn scratch_run(tag: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    (dir, format!("cli-{tag}-{}", std::process::id()))
}

/// Writes `text` as `file` in `dir`; its path.
pub(crate) fn write_file(dir: &Path, file: &str, text: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

/// `ictus ctl status --name NAME` of the run in `run_dir`: its answer, or null
/// while there is none.
pub(crate) fn ctl_status(run_dir: &Path, name: &str) -> Value {
    let out = ictus_in(run_dir)
        .args(["ctl", "status", "--name", name])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// A JSON file, parsed.
pub(crate) fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The measurements of a record named `name`.
pub(crate) fn measurements<'a>(r: &'a Value, name: &'a str) -> impl Iterator<Item = &'a Value> {
    r["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |m| m["name"] == name)
}

/// Whether a record warns with `id`.
pub(crate) fn warns(r: &Value, id: &str) -> bool {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["id"] == id)
}

/// The process id of subsystem `name` in a `ctl status` answer.
pub(crate) fn subsystem_pid(status: &Value, name: &str) -> u64 {
    status["subsystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no subsystem {name} in {status}"))["pid"]
        .as_u64()
        .unwrap()
}

/// Whether the tests run as root.
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Runs `ictus ARGS` as user nobody with no group and no capability (setpriv needs
/// root to drop them). Where that cannot be done here, says that `test` was skipped
/// and returns `None`.
pub(crate) fn as_nobody(test: &str, args: &[&str]) -> Option<Output> {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !is_root() || !setpriv.exists() {
        ictus_os::testing::skipped(test, "needs root and setpriv");
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("ictus");
    let out = std::process::Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("Permission denied") && !err.contains("ictus") {
        ictus_os::testing::skipped(
            test,
            &format!("user nobody cannot execute {}", bin.display()),
        );
        return None;
    }
    Some(out)
}

/// `ictus ARGS` started with its run folder in `run_dir`, stdout and stderr piped.
pub(crate) fn spawn(run_dir: &Path, args: &[&str]) -> Child {
    process(run_dir, args).spawn().unwrap()
}

/// Nodes h2 and h3 of the run of schedule `file`, started in `run_dir` (JSON out,
/// no status line).
pub(crate) fn spawn_nodes(run_dir: &Path, file: &str) -> (Child, Child) {
    let node = |host| {
        spawn(
            run_dir,
            &["node", file, "--host", host, "--json", "--quiet"],
        )
    };
    (node("h2"), node("h3"))
}

/// `ictus ARGS` as [`spawn`] starts it, in a process group of its own, as a shell
/// runs a foreground job.
pub(crate) fn spawn_in_group(run_dir: &Path, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    process(run_dir, args).process_group(0).spawn().unwrap()
}

fn process(run_dir: &Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("ictus"));
    c.env("ICTUS_RUN_DIR", run_dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Sends `signal` (`"INT"`, `"KILL"`...) to process `pid`, or with a `-` before it to
/// process group `pid`, as `kill(1)` does.
pub(crate) fn kill(signal: &str, pid: impl std::fmt::Display) {
    let target = pid.to_string();
    let ok = std::process::Command::new("kill")
        .args([&format!("-{signal}"), "--", &target])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {target}");
}

/// [`finish`], asserting that `child` succeeded (its stderr said otherwise).
pub(crate) fn finish_ok(child: Child, limit: Duration) -> Output {
    let out = finish(child, limit);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Waits for `child` at most `limit`, reading its output meanwhile (a record
/// larger than a pipe would otherwise block it); kills it and fails when it does
/// not end.
pub(crate) fn finish(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "ictus (process {pid}) did not end within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Asserts that `out` ended with exit code `code`, showing its stderr otherwise.
pub(crate) fn exits(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts that each host's process (its name and what it output) exited 0.
pub(crate) fn all_succeeded<const N: usize>(hosts: [(&str, &Output); N]) {
    for (who, o) in hosts {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{who}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The control socket of run `name` in `run_dir`.
pub(crate) fn socket(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.sock"))
}

/// Calls `f` every 10 ms until `done` holds of its answer, for 5 s at most, and
/// returns the last answer.
pub(crate) fn poll<T>(mut f: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let mut answer = f();
    for _ in 0..500 {
        if done(&answer) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        answer = f();
    }
    answer
}

/// Waits (5 s at most) for the control socket of run `name` in `run_dir`.
pub(crate) fn wait_for_socket(run_dir: &Path, name: &str) {
    let sock = socket(run_dir, name);
    assert!(
        poll(|| sock.exists(), |there| *there),
        "{} never appeared",
        sock.display()
    );
}

/// The shared memory segments in /dev/shm whose names start with `ictus-PREFIX`.
pub(crate) fn shm_left(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.starts_with(&format!("ictus-{prefix}")))
                .collect()
        })
        .unwrap_or_default()
}

/// The seed 003 stress schedule (A and C in-process, B in a process of its own)
/// under another run name, in `dir`.
pub(crate) fn stress_copy(dir: &Path, name: &str) -> PathBuf {
    let examples = stress_examples();
    let text = std::fs::read_to_string(examples.join("schedule.toml"))
        .unwrap()
        .replace("name = \"stress\"", &format!("name = \"{name}\""));
    std::fs::copy(examples.join("cells.toml"), dir.join("cells.toml")).unwrap();
    let path = dir.join("schedule.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The folder of the seed 003 stress example (its schedule and its cells).
pub(crate) fn stress_examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/stress")
}

/// Seed 003's ring over three hosts on loopback (`DIR/hosts.toml`): A and C on h2
/// (C in a process of its own), B on h3, the main coordinator on h1, with the run's
/// keys beside it (`DIR/keys`, made once, with a reader `python`).
pub(crate) fn three_hosts(dir: &Path, name: &str) -> PathBuf {
    std::fs::copy(stress_examples().join("cells.toml"), dir.join("cells.toml")).unwrap();
    let mut text = format!(
        "name = \"{name}\"\ntick = \"4ms\"\nmajor_frame = 3\ncells = \"cells.toml\"\n\
         initial_state = \"run\"\n[stress]\ncounters = [\"A.int\", \"B.int\", \"C.int\"]\n"
    );
    // The run's keys beside it (`ictus keys new`), with a reader's.
    let keys = dir.join("keys");
    if !keys.exists() {
        succeeds(ictus_in(dir).args(["keys", "new"]).arg(&keys).args([
            "--hosts",
            "h1,h2,h3",
            "--readers",
            "python",
        ]));
    }
    // Each host its own bundle, as on separate machines.
    text += "[security]\nkeys = \"keys/bundles/hosts/{host}\"\n";
    for h in 1..=3 {
        text += &format!(
            "[[host]]\nname = \"h{h}\"\naddress = \"127.0.0.1:{}\"\n",
            ictus_os::testing::free_port()
        );
    }
    for (n, start, from, to, host, own) in [
        ("A", 0, "A", "B", "h2", false),
        ("B", 1, "B", "C", "h3", false),
        ("C", 2, "C", "A", "h2", true),
    ] {
        text += &format!(
            "[[subsystem]]\nname = \"{n}\"\nhost = \"{host}\"\nstart = {start}\nperiod = 3\n\
             builtin = \"increment\"\nconfig = {{ from = \"{from}\", to = \"{to}\" }}\n{}",
            if own { "process = \"own\"\n" } else { "" }
        );
    }
    write_file(dir, "hosts.toml", &text)
}

/// The addresses of h1, h2 and h3 in the schedule at `path`.
pub(crate) fn addresses(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("address = \""))
        .map(|a| a.trim_end_matches('"').to_string())
        .collect()
}

/// A Python that imports `module`: the one `env` names, else the venv `.ci/run`
/// makes at `venv` (relative to the workspace), if either can.
pub(crate) fn python_with(env: &str, venv: &str, module: &str) -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os(env)
        .map(PathBuf::from)
        .into_iter()
        .chain([workspace.join(venv)])
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", &format!("import {module}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}
