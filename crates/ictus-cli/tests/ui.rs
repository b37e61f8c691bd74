//! The live page (`ictus run --ui`) in a real headless Chromium: it loads, shows the
//! subsystems of a running schedule, a click on PAUSE changes the state `ictus ctl
//! status` reports, and a killed subsystem shows as dead within a second. Also the
//! token beyond loopback, over a plain socket. Where no Chromium is installed the
//! browser test says SKIPPED and passes (CI installs it: `.ci/run`).
//!
//! Screenshots are kept in the target directory (`target/ictus-ui-*.png`) for a
//! person to look at (docs/img/ has copies).
#![allow(clippy::print_stderr)]

#[allow(dead_code)] // the client's self-test (tests/cdp.rs) uses all of it
#[path = "common/cdp.rs"]
mod cdp;
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{
    ctl_status, finish, finish_ok, ictus_in, kill, refused, spawn, stress_copy, subsystem_pid,
};
use serde_json::Value;

/// `ictus run SCHEDULE ARGS` in `run_dir`, and the live page's URL it prints.
fn start(
    run_dir: &Path,
    schedule: &Path,
    args: &[&str],
) -> (Child, String, mpsc::Receiver<String>) {
    start_with(run_dir, schedule, args, "live page: ")
}

/// `ictus run SCHEDULE ARGS` in `run_dir`, and the URL of its first stderr line
/// that starts with `prefix`.
fn start_with(
    run_dir: &Path,
    schedule: &Path,
    args: &[&str],
    prefix: &str,
) -> (Child, String, mpsc::Receiver<String>) {
    let mut child = spawn(
        run_dir,
        &[&["run", schedule.to_str().unwrap()], args].concat(),
    );
    // Every line of stderr goes on; the URL is the first `live page:` line.
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let by = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < by {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if let Some(url) = line.strip_prefix(prefix) {
                let url = url.split_whitespace().next().unwrap().to_string();
                return (child, url, rx);
            }
            seen.push(line);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no `{prefix}` line within 20 s; stderr: {seen:?}");
}

/// The stress schedule (tick 5 ms) under a run name of its own, run for `duration`
/// with its page at `addr`: the run folder, the run name, the process, the page's URL.
fn stress_with_page(
    tag: &str,
    duration: &str,
    addr: &str,
) -> (tempfile::TempDir, String, Child, String) {
    stress_serving(tag, duration, "--ui", addr, "live page: ")
}

/// As [`stress_with_page`], serving what `flag` (`--ui` or `--metrics`) asks for at
/// `addr`; the URL is the one printed after `said`.
fn stress_serving(
    tag: &str,
    duration: &str,
    flag: &str,
    addr: &str,
    said: &str,
) -> (tempfile::TempDir, String, Child, String) {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("{tag}-{}", std::process::id());
    let schedule = stress_copy(dir.path(), &name);
    let args = [
        "--tick",
        "5ms",
        "--duration",
        duration,
        flag,
        addr,
        "--quiet",
        "--json",
    ];
    let (run, url, _stderr) = start_with(dir.path(), &schedule, &args, said);
    (dir, name, run, url)
}

/// Waits until `expr` is true in the page, at most `seconds`.
fn until(browser: &mut cdp::Browser, expr: &str, seconds: u64) -> Duration {
    browser
        .wait_for(expr, Duration::from_secs(seconds))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The text of the page's element `id`, once `ready` is true in the page (at most
/// 5 s).
fn text_once(browser: &mut cdp::Browser, ready: &str, id: &str) -> String {
    until(browser, ready, 5);
    let text = browser
        .eval(&format!("document.getElementById('{id}').textContent"))
        .unwrap();
    text.as_str().unwrap().to_string()
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

#[test]
fn the_live_page_shows_the_run_pauses_it_and_sees_a_killed_subsystem_dead() {
    let Some(chromium) = ictus_os::testing::chromium(
        "the_live_page_shows_the_run_pauses_it_and_sees_a_killed_subsystem_dead",
    ) else {
        return;
    };
    let (dir, name, run, url) = stress_with_page("cli-ui", "60s", "127.0.0.1:0");
    // On loopback too the page's URL carries the control token: its commands need it.
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "{url}"
    );
    let mut browser = cdp::Browser::launch(&chromium).unwrap();
    browser.navigate(&url).unwrap();
    until(&mut browser, "document.body.dataset.ready === '1'", 15);

    // The subsystems of the running schedule, each alive, in RUN.
    let rows = browser
        .eval("[...document.querySelectorAll('#subsystems tr[data-name]')].map(r => [r.dataset.name, r.dataset.alive, r.querySelector('.alive').textContent])")
        .unwrap();
    assert_eq!(
        rows,
        serde_json::json!([
            ["A", "true", "alive"],
            ["B", "true", "alive"],
            ["C", "true", "alive"]
        ])
    );
    until(
        &mut browser,
        "document.getElementById('state').dataset.state === 'run'",
        5,
    );
    for command in ["off", "pause", "run", "stop"] {
        let n = browser
            .eval(&format!(
                "document.querySelectorAll('button[data-command=\"{command}\"]').length"
            ))
            .unwrap();
        assert_eq!(n, 1, "button {command}");
    }
    // The page is live: several updates a second.
    until(
        &mut browser,
        "parseFloat(document.getElementById('rate').textContent) >= 5",
        5,
    );

    // A click on PAUSE: the run's own control socket reports PAUSE.
    browser.click("button[data-command=\"pause\"]").unwrap();
    let by = Instant::now() + Duration::from_secs(10);
    loop {
        let s = ctl_status(dir.path(), &name);
        if s["state"] == "pause" {
            break;
        }
        assert!(Instant::now() < by, "ctl status still says {}", s["state"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    let reply = text_once(
        &mut browser,
        "document.getElementById('state').dataset.state === 'pause'",
        "reply",
    );
    assert!(reply.starts_with("ok pause from frame "), "{reply}");
    browser
        .screenshot(&target_dir().join("ictus-ui-paused.png"))
        .unwrap();
    browser.click("button[data-command=\"run\"]").unwrap();
    until(
        &mut browser,
        "document.getElementById('state').dataset.state === 'run'",
        10,
    );

    // B runs in a process of its own: killed, the page shows it dead within a second.
    let pid = subsystem_pid(&ctl_status(dir.path(), &name), "B");
    assert_ne!(u64::from(run.id()), pid, "B runs in a process of its own");
    let killed = Instant::now();
    kill("KILL", pid);
    let shown = until(
        &mut browser,
        "document.querySelector('#subsystems tr[data-name=\"B\"]').dataset.alive === 'false'",
        5,
    );
    let took = killed.elapsed();
    eprintln!("B killed: shown dead after {took:?} (the page's own wait {shown:?})");
    assert!(
        took <= Duration::from_secs(1),
        "B shown dead after {took:?}"
    );
    let dead = browser
        .eval("document.querySelector('#subsystems tr[data-name=\"B\"] .alive').textContent")
        .unwrap();
    assert_eq!(dead, "dead");
    let others = browser
        .eval("['A', 'C'].map(n => document.querySelector(`#subsystems tr[data-name=\"${n}\"]`).dataset.alive)")
        .unwrap();
    assert_eq!(others, serde_json::json!(["true", "true"]));
    until(
        &mut browser,
        "document.getElementById('events').textContent.includes('B: its process')",
        5,
    );
    browser
        .screenshot(&target_dir().join("ictus-ui-dead.png"))
        .unwrap();

    // Stopped from the page: the run ends, and the page says so.
    browser.eval("window.confirm = () => true").unwrap();
    browser.click("button[data-command=\"stop\"]").unwrap();
    let out = finish(run, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(3), "B's frames were lost");
    let record: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(record["measurements"].is_array(), "{record}");
    let ended = text_once(
        &mut browser,
        "document.getElementById('connection').dataset.connection === 'ended'",
        "ended",
    );
    assert!(ended.contains("the run ended at frame"), "{ended}");
}

/// One request over a plain socket: the status code.
fn get(addr: &str, path: &str) -> u16 {
    fetch(addr, path).0
}

#[test]
fn beyond_loopback_the_page_needs_the_token_printed_at_start() {
    let (_dir, _name, run, url) = stress_with_page("cli-ui-token", "3s", "0.0.0.0:0");
    let (base, token) = url.split_once("/?token=").expect("a token in the URL");
    assert!(token.len() >= 32, "{url}");
    let port = base.rsplit(':').next().unwrap();
    let addr = format!("127.0.0.1:{port}");
    assert_eq!(get(&addr, "/"), 401);
    assert_eq!(
        get(&addr, "/status?token=0123456789abcdef0123456789abcdef"),
        401
    );
    assert_eq!(get(&addr, &format!("/?token={token}")), 200);
    finish_ok(run, Duration::from_secs(30));
}

#[test]
fn a_token_from_a_file_or_the_environment_opens_the_page_and_stays_out_of_the_record() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let name = format!("cli-ui-token-file-{}", std::process::id());
    let schedule = stress_copy(dir.path(), &name);
    let secret = "file-token-0123456789abcdef";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let args = [
        "--tick",
        "5ms",
        "--duration",
        "2s",
        "--ui",
        "0.0.0.0:0",
        "--ui-token-file",
        file.to_str().unwrap(),
        "--quiet",
        "--json",
    ];
    let (run, url, _stderr) = start(dir.path(), &schedule, &args);
    assert!(url.ends_with(&format!("/?token={secret}")), "{url}");
    let out = finish(run, Duration::from_secs(30));
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
    // From the environment: the same, and no trace of it in argv either.
    let secret = "env-token-0123456789abcdef";
    let out = common::ictus_in(dir.path())
        .arg("run")
        .arg(&schedule)
        .args(&args[..6])
        .args(["--quiet", "--json"])
        .env("ICTUS_UI_TOKEN", secret)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("/?token={secret}")), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
}

#[test]
fn a_malformed_page_address_or_token_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let schedule = stress_copy(dir.path(), &format!("cli-ui-bad-{}", std::process::id()));
    let token = |name: &str, text: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let short = token("short", "short\n", 0o600);
    let good = token("good", "0123456789abcdef0123\n", 0o600);
    let open = token("open", "0123456789abcdef0123\n", 0o644);
    for (args, expect) in [
        (vec!["--ui", "localhost"], "--ui"),
        (vec!["--ui", "127.0.0.1:99999"], "--ui"),
        (vec!["--ui", "0", "--ui-token-file", &short], "at least 16"),
        (vec!["--ui", "0", "--ui-token-file", &open], "chmod 600"),
        (
            vec!["--ui", "0", "--ui-token-file", "/nonexistent/t"],
            "/nonexistent/t",
        ),
        (vec!["--ui-token-file", &good], "--ui"),
    ] {
        let stderr = refused(ictus_in(dir.path()).arg("run").arg(&schedule).args(&args));
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}

/// One request over a plain socket: the status code, the headers (lower-case
/// names) and the body.
fn fetch(addr: &str, path: &str) -> (u16, Vec<(String, String)>, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (code, headers, body.to_string())
}

/// The sum of the samples of `family` in an exposition.
fn total(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Scrapes until the run has reported and every subsystem ran (20 s at most).
fn scrape_running(addr: &str, path: &str) -> (Vec<(String, String)>, String) {
    let by = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, headers, body) = fetch(addr, path);
        if code == 200 && total(&body, "ictus_frames_total") > 0.0 {
            return (headers, body);
        }
        assert!(code == 200 || code == 503, "{path}: {code} {body}");
        assert!(
            Instant::now() < by,
            "no frames on {path} within 20 s: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn metrics_are_scraped_while_the_run_runs_and_its_frames_grow() {
    let (_dir, name, run, url) =
        stress_serving("cli-metrics", "4s", "--metrics", "127.0.0.1:0", "metrics: ");
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("not a /metrics URL without a token: {url}"))
        .to_string();
    let (headers, first) = scrape_running(&addr, "/metrics");
    assert!(
        headers.iter().any(|(k, v)| k == "content-type"
            && v == "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{headers:?}"
    );
    assert!(first.ends_with("# EOF\n"), "{first}");
    for (family, kind) in [
        ("ictus_frames", "counter"),
        ("ictus_overruns", "counter"),
        ("ictus_lost_frames", "counter"),
        ("ictus_errors", "counter"),
        ("ictus_release_lateness_seconds", "histogram"),
        ("ictus_execution_time_seconds", "histogram"),
        ("ictus_cell_age_seconds", "gauge"),
        ("ictus_host_up", "gauge"),
    ] {
        assert!(
            first.contains(&format!("\n# TYPE {family} {kind}\n")),
            "{family} {kind}: {first}"
        );
    }
    // On one host there are no ticks to be late and no link: those families
    // (ictus_host_tick_lateness_seconds, ictus_link_cell_latency_seconds) have no
    // sample and are left out. Every subsystem of the schedule is there, labelled
    // with the run.
    let subsystems = first
        .lines()
        .filter(|l| l.starts_with(&format!("ictus_frames_total{{run=\"{name}\",subsystem=")))
        .count();
    assert!(subsystems >= 2, "{first}");
    assert!(total(&first, "ictus_host_up") >= 1.0, "{first}");
    std::thread::sleep(Duration::from_millis(500));
    let (_, second) = scrape_running(&addr, "/metrics");
    assert!(
        total(&second, "ictus_frames_total") > total(&first, "ictus_frames_total"),
        "frames did not grow between two scrapes:\n{first}\n{second}"
    );
    assert!(
        total(&second, "ictus_execution_time_seconds_count") > 0.0,
        "{second}"
    );
    // The page is not served by --metrics.
    assert_eq!(fetch(&addr, "/").0, 404);
    assert_eq!(fetch(&addr, "/status").0, 404);
    finish_ok(run, Duration::from_secs(30));
}

#[test]
fn beyond_loopback_metrics_need_the_token_as_the_page_does() {
    let (_dir, _name, run, url) = stress_serving(
        "cli-metrics-token",
        "3s",
        "--metrics",
        "0.0.0.0:0",
        "metrics: ",
    );
    let (base, token) = url
        .split_once("/metrics?token=")
        .expect("a token in the URL");
    assert!(token.len() >= 32, "{url}");
    let port = base.rsplit(':').next().unwrap();
    let addr = format!("127.0.0.1:{port}");
    assert_eq!(get(&addr, "/metrics"), 401);
    assert_eq!(
        get(&addr, "/metrics?token=0123456789abcdef0123456789abcdef"),
        401
    );
    let (_, body) = scrape_running(&addr, &format!("/metrics?token={token}"));
    assert!(body.ends_with("# EOF\n"), "{body}");
    finish_ok(run, Duration::from_secs(30));
    // The page's server answers /metrics under the same rule.
    let (_dir, _name, run, url) = stress_with_page("cli-ui-metrics", "3s", "0.0.0.0:0");
    let (base, token) = url.split_once("/?token=").expect("a token in the URL");
    let addr = format!("127.0.0.1:{}", base.rsplit(':').next().unwrap());
    assert_eq!(get(&addr, "/metrics"), 401);
    scrape_running(&addr, &format!("/metrics?token={token}"));
    let out = finish(run, Duration::from_secs(30));
    assert!(out.status.success());
}

#[test]
fn a_malformed_metrics_address_or_token_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let schedule = stress_copy(
        dir.path(),
        &format!("cli-metrics-bad-{}", std::process::id()),
    );
    let short = dir.path().join("short");
    std::fs::write(&short, "short").unwrap();
    let mut perms = std::fs::metadata(&short).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&short, perms).unwrap();
    let short = short.to_str().unwrap();
    for (args, expect) in [
        (vec!["--metrics", "localhost"], "--metrics"),
        (
            vec!["--metrics", "0", "--metrics-token-file", short],
            "at least 16",
        ),
        (vec!["--metrics-token-file", short], "--metrics"),
    ] {
        let stderr = refused(ictus_in(dir.path()).arg("run").arg(&schedule).args(&args));
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}
