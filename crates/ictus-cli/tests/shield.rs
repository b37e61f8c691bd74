//! End-to-end: `ictus shield` refuses bad input with one line and changes nothing;
//! `status` and `reset` without a shield say so. (The apply/reset cycle on the real
//! machine is tested in ictus-shield's fault-injection test.)

use std::path::PathBuf;

use assert_cmd::Command;
use ictus_shield::snapshot::{differences, state};

fn journal(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ictus-cli-shield-{}-{name}", std::process::id()))
}

fn refused_with_one_line(args: &[&str], name: &str) -> String {
    let path = journal(name);
    let before = state();
    let out = Command::cargo_bin("ictus")
        .unwrap()
        .args(args)
        .arg("--journal")
        .arg(&path)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
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
fn status_and_reset_without_a_shield_say_so() {
    let path = journal("none");
    Command::cargo_bin("ictus")
        .unwrap()
        .args(["shield", "reset", "--journal"])
        .arg(&path)
        .assert()
        .success()
        .stdout("no shield applied; nothing to reset\n");
    let out = Command::cargo_bin("ictus")
        .unwrap()
        .args(["shield", "status", "--json", "--journal"])
        .arg(&path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let sut: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(sut["applied"], false);
}
