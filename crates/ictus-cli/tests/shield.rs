//! End-to-end: `ictus shield` refuses bad input with one line and changes nothing;
//! `status` and `reset` without a shield say so; where the machine allows (root, a
//! writable cpuset), `apply --rt-throttle off --watchdog` turns the RT throttle off
//! with a watchdog process running, and `reset` brings both back; `apply` holds the RT
//! CPU's resume latency QoS at `n/a` (not with `--resume-qos off`), `status` shows it
//! and `reset` puts back the prior text. (Every stop point of apply is tested in
//! ictus-shield's fault-injection test.)

// A skipped test says so on stderr, visibly.
#![allow(clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};

// The tests compare snapshots of the whole machine, and one of them applies a
// shield: they run one at a time.
use common::{ictus, one_at_a_time, refused, succeeds};
use ictus_os::process::ProcessId;
use ictus_shield::journal;
use ictus_shield::snapshot::{self, RESUME_QOS_HELD, RT_RUNTIME, differences, state};
use ictus_shield::watchdog::{self, LogEvent};

fn journal(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ictus-cli-shield-{}-{name}", std::process::id()))
}

fn last_online_cpu() -> String {
    let online = ictus_os::facts::online_cpus();
    online.cpus().last().unwrap().to_string()
}

fn refused_with_one_line(args: &[&str], name: &str) -> String {
    let _machine = one_at_a_time();
    let path = journal(name);
    let before = state();
    let stderr = refused(ictus().args(args).arg("--journal").arg(&path));
    assert!(!path.exists(), "no journal is written");
    let diff = differences(&before, &state());
    assert!(
        diff.iter().all(|d| d.starts_with("task:")),
        "nothing changed: {diff:?}"
    );
    stderr
}

#[test]
fn every_online_cpu_as_rt_is_refused_with_exit_2() {
    let online = ictus_os::facts::online_cpus();
    let stderr = refused_with_one_line(
        &["shield", "apply", "--rt-cpus", &online.to_string()],
        "all",
    );
    assert!(stderr.contains("leaves no CPU"), "{stderr}");
}

#[test]
fn an_offline_cpu_is_refused_with_exit_2() {
    let online = ictus_os::facts::online_cpus();
    let cpu = if online.contains(9) { 1023 } else { 9 };
    let stderr = refused_with_one_line(
        &["shield", "apply", "--rt-cpus", &cpu.to_string()],
        "offline",
    );
    assert!(stderr.contains("not online"), "{stderr}");
}

#[test]
fn a_malformed_list_is_refused_with_exit_2() {
    refused_with_one_line(&["shield", "apply", "--rt-cpus", "1-x"], "malformed");
}

#[test]
fn rt_throttle_off_without_a_watchdog_is_refused_with_exit_2() {
    let cpu = last_online_cpu();
    let stderr = refused_with_one_line(
        &["shield", "apply", "--rt-cpus", &cpu, "--rt-throttle", "off"],
        "throttle",
    );
    assert!(stderr.contains("needs --watchdog"), "{stderr}");
}

#[test]
fn a_zero_watchdog_limit_is_refused_with_exit_2() {
    let cpu = last_online_cpu();
    refused_with_one_line(
        &["shield", "apply", "--rt-cpus", &cpu, "--watchdog", "0s"],
        "zero-limit",
    );
}

#[test]
fn status_and_reset_without_a_shield_say_so() {
    let _machine = one_at_a_time();
    let path = journal("none");
    assert_eq!(
        String::from_utf8(shield(&["shield", "reset"], &path)).unwrap(),
        "no shield applied; nothing to reset\n"
    );
    let sut: serde_json::Value =
        serde_json::from_slice(&shield(&["shield", "status", "--json"], &path)).unwrap();
    assert_eq!(sut["applied"], false);
}

fn skip_reason() -> Option<String> {
    ictus_shield::apply::machine_shortfall().or_else(|| {
        std::fs::read_to_string(RT_RUNTIME)
            .is_err()
            .then(|| format!("no {RT_RUNTIME}"))
    })
}

/// Resets the shield and removes the watchdog's log, whatever happened.
struct Restore(PathBuf);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = ictus_shield::reset(&self.0) {
            eprintln!("guard reset failed: {e}");
        }
        let _ = std::fs::remove_file(watchdog::log_path(&self.0));
    }
}

/// `ictus ARGS --journal JOURNAL`, which must succeed: its stdout.
fn shield(args: &[&str], journal: &Path) -> Vec<u8> {
    succeeds(ictus().args(args).arg("--journal").arg(journal)).stdout
}

fn rt_runtime() -> String {
    std::fs::read_to_string(RT_RUNTIME)
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn apply_with_the_watchdog_turns_the_throttle_off_and_reset_brings_both_back() {
    let _machine = one_at_a_time();
    if let Some(why) = skip_reason() {
        ictus_os::testing::skipped(
            "apply_with_the_watchdog_turns_the_throttle_off_and_reset_brings_both_back",
            &why,
        );
        return;
    }
    let path = journal("watchdog");
    let guard = Restore(path.clone());
    let prior = rt_runtime();
    let before = state();
    // A long limit: the watchdog watches the whole machine while it runs, and must not
    // demote a benchmark that runs meanwhile. Demotion itself is tested in ictus-shield.
    let cpu = last_online_cpu();
    shield(
        &[
            "shield",
            "apply",
            "--rt-cpus",
            &cpu,
            "--rt-throttle",
            "off",
            "--watchdog",
            "60s",
        ],
        &path,
    );
    assert_eq!(rt_runtime(), "-1", "the RT throttle is off");
    let (pid, start_time) = journal::watchdog(&path)
        .unwrap()
        .expect("the watchdog is journaled");
    assert!(
        ProcessId::from_pid_t(pid, start_time).is_alive(),
        "the watchdog runs"
    );

    let status: serde_json::Value =
        serde_json::from_slice(&shield(&["shield", "status", "--json"], &path)).unwrap();
    let w = &status["watchdog"];
    assert_eq!(w["pid"], pid, "{status:#}");
    assert_eq!(w["running"], true, "{status:#}");
    assert_eq!(w["limit_ms"], 60_000, "{status:#}");
    assert_eq!(w["demotions"], serde_json::json!([]), "{status:#}");
    assert_eq!(status["rt_runtime_us"], "-1", "{status:#}");

    shield(&["shield", "reset"], &path);
    assert_eq!(rt_runtime(), prior, "the RT throttle is back");
    assert!(
        !ProcessId::from_pid_t(pid, start_time).is_alive(),
        "the watchdog is gone"
    );
    assert!(!path.exists());
    let diff: Vec<String> = differences(&before, &state());
    assert!(diff.is_empty(), "{diff:#?}");
    let events = watchdog::read_log(&watchdog::log_path(&path));
    assert!(
        matches!(events.first(), Some(LogEvent::Started { .. })),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(LogEvent::Stopped { why, .. }) if why == "signal"),
        "{events:?}"
    );
    drop(guard);
}

/// The RT CPU's resume latency QoS text now.
fn resume_qos(cpu: usize) -> Option<String> {
    snapshot::resume_qos(cpu).map(|q| q.value)
}

#[test]
fn apply_holds_the_rt_cpu_resume_qos_status_shows_it_and_reset_puts_it_back() {
    let _machine = one_at_a_time();
    let name = "apply_holds_the_rt_cpu_resume_qos_status_shows_it_and_reset_puts_it_back";
    let cpu: usize = last_online_cpu().parse().unwrap();
    let held = snapshot::resume_qos(cpu);
    let why = ictus_shield::apply::machine_shortfall().or_else(|| match &held {
        None => Some(format!("CPU {cpu} has no resume latency QoS file")),
        Some(q) if !q.writable => Some(format!("CPU {cpu}'s resume latency QoS is not writable")),
        Some(q) if q.value == RESUME_QOS_HELD => {
            Some(format!("CPU {cpu}'s resume latency QoS is already held"))
        }
        Some(_) => None,
    });
    if let Some(why) = why {
        ictus_os::testing::skipped(name, &why);
        return;
    }
    let path = journal("resume-qos");
    let guard = Restore(path.clone());
    let prior = resume_qos(cpu);
    let before = state();
    let rt = cpu.to_string();

    let stdout = String::from_utf8(shield(&["shield", "apply", "--rt-cpus", &rt], &path)).unwrap();
    assert!(
        stdout.contains(&format!(
            "resume latency QoS: n/a on CPU(s) {cpu} (no idle state with an exit latency)"
        )),
        "{stdout}"
    );
    assert_eq!(resume_qos(cpu).as_deref(), Some(RESUME_QOS_HELD));
    let others: Vec<String> = differences(&before, &state())
        .into_iter()
        .filter(|d| d.contains("pm_qos_resume_latency_us"))
        .collect();
    assert_eq!(
        others,
        vec![format!(
            "{}: {} -> n/a",
            snapshot::resume_qos_path(cpu).display(),
            prior.as_deref().unwrap()
        )],
        "only the RT CPU's resume latency QoS is held"
    );
    let status: serde_json::Value =
        serde_json::from_slice(&shield(&["shield", "status", "--json"], &path)).unwrap();
    assert_eq!(status["cpus"][0]["cpu"], cpu, "{status:#}");
    assert_eq!(status["cpus"][0]["resume_qos"], "n/a", "{status:#}");
    let text = String::from_utf8(shield(&["shield", "status"], &path)).unwrap();
    assert!(
        text.contains("  resume latency QoS: n/a (no idle state with an exit latency)"),
        "{text}"
    );
    shield(&["shield", "reset"], &path);
    assert_eq!(resume_qos(cpu), prior, "the prior text is back");
    assert_eq!(differences(&before, &state()), Vec::<String>::new());

    let stdout = String::from_utf8(shield(
        &["shield", "apply", "--rt-cpus", &rt, "--resume-qos", "off"],
        &path,
    ))
    .unwrap();
    assert!(!stdout.contains("resume latency QoS"), "{stdout}");
    assert_eq!(resume_qos(cpu), prior, "--resume-qos off leaves it alone");
    shield(&["shield", "reset"], &path);
    assert_eq!(differences(&before, &state()), Vec::<String>::new());
    drop(guard);
}
