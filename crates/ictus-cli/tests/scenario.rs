//! End-to-end: `ictus scenario` refuses a bad file with its line and column and starts
//! nothing; a tiny scenario runs under each placement and writes its files; Ctrl-C
//! stops tasks that sleep for years at once.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    exits, finish, ictus, kill, read_json, refused as refused_command, spawn_in_group, succeeds,
};
use serde_json::Value;

/// The RT CPU and all CPUs of a tiny scenario on this machine, if it has two.
fn cpus() -> Option<(usize, String)> {
    let machine = ictus_shield::scenario::spec::machine_cpus();
    (machine.len() >= 2).then(|| (*machine.cpus().last().unwrap(), machine.to_string()))
}

fn tiny(rt: usize, all: &str) -> String {
    format!(
        r#"# a tiny scenario for the tests
name = "tiny"
rt_cpus = "{rt}"
duration_limit = "60s"

[[group]]
name = "linux"
count = 2
cpus = "{all}"
loops = 20000

[[group]]
name = "sections"
count = 2
cpus = "{all}"
loops = 20000
sloop = 500
section = "2us"
sleep_every = 5000
sleep = "1ms"
"#
    )
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `ictus scenario` on `text` expecting a refusal: exit 2, one line naming the
/// file, line and column, and no directory created.
fn refused(text: &str, line: usize, column: usize) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), text);
    let out_dir = dir.path().join("out");
    let results = dir.path().join("results");
    for extra in [
        vec!["-o".to_string(), out_dir.display().to_string()],
        vec!["--results".to_string(), results.display().to_string()],
    ] {
        let stderr = refused_command(ictus().arg("scenario").arg(&file).args(&extra));
        let at = format!("{}:{line}:{column}: ", file.display());
        assert!(stderr.contains(&at), "expected {at:?} in {stderr}");
        assert!(!out_dir.exists() && !results.exists(), "nothing written");
    }
}

#[test]
fn an_unknown_key_is_refused_with_its_line_and_column() {
    let Some((rt, all)) = cpus() else { return };
    refused(
        &tiny(rt, &all).replace("loops = 20000\n\n", "loop = 20000\n\n"),
        10,
        1,
    );
}

#[test]
fn a_wrong_type_is_refused_with_its_line_and_column() {
    let Some((rt, all)) = cpus() else { return };
    refused(
        &tiny(rt, &all).replace("count = 2\ncpus", "count = \"two\"\ncpus"),
        8,
        9,
    );
}

#[test]
fn a_mask_naming_no_online_cpu_is_refused_with_its_line_and_column() {
    let Some((rt, all)) = cpus() else { return };
    let text = tiny(rt, &all).replacen(&format!("cpus = \"{all}\""), "cpus = \"1000-1001\"", 1);
    refused(&text, 9, 8);
}

#[test]
fn a_negative_duration_is_refused_with_its_line_and_column() {
    let Some((rt, all)) = cpus() else { return };
    refused(&tiny(rt, &all).replace("\"60s\"", "\"-60s\""), 4, 18);
}

#[test]
fn a_missing_file_is_a_usage_error() {
    let out = ictus()
        .args(["scenario", "/nonexistent/ictus-scenario.toml"])
        .output()
        .expect("ictus runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/ictus-scenario.toml"));
}

fn check_dir(dir: &Path, balancer: &str) -> Value {
    for f in ["result.json", "report.md", "timeline.svg"] {
        assert!(dir.join(f).is_file(), "{} has no {f}", dir.display());
    }
    let result = read_json(&dir.join("result.json"));
    assert_eq!(result["schema"], "ictus.scenario-result");
    assert_eq!(result["balancer"], balancer);
    assert_eq!(result["tasks"].as_array().unwrap().len(), 4);
    assert_eq!(result["groups"].as_array().unwrap().len(), 2);
    assert_eq!(result["complete"], true);
    assert_eq!(
        result["balancer_report"].is_null(),
        balancer == "none",
        "a balancer report with the ictus balancer only"
    );
    let p = &result["provenance"];
    assert_eq!(p["tool"], "ictus");
    assert_eq!(p["argv"][1], "scenario");
    let host = p["hostname"].as_str().expect("a host name");
    assert_eq!(result["hostname"], host);
    let time = |key: &str| {
        humantime::parse_rfc3339(p[key].as_str().unwrap_or_else(|| panic!("no {key}")))
            .unwrap_or_else(|e| panic!("{key}: {e}"))
    };
    assert!(time("start_time") <= time("end_time"));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.starts_with(&format!("# Scenario `tiny` under balancer `{balancer}`")));
    assert!(md.contains(&format!("{host} · Linux ")), "{md}");
    assert!(md.contains("UTC with ictus "), "{md}");
    assert!(
        std::fs::read_to_string(dir.join("timeline.svg"))
            .unwrap()
            .starts_with("<svg")
    );
    result
}

fn runs_under(balancer: &str) {
    let Some((rt, all)) = cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &tiny(rt, &all));
    let out_dir = dir.path().join("out");
    let out = ictus()
        .arg("scenario")
        .arg(&file)
        .args(["--balancer", balancer, "-o"])
        .arg(&out_dir)
        .output()
        .expect("ictus runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("tiny under balancer {balancer}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("linux") && stdout.contains("sections"),
        "{stdout}"
    );
    assert!(stdout.contains("result.json"), "{stdout}");
    check_dir(&out_dir, balancer);
}

#[test]
fn a_tiny_scenario_runs_under_stock_placement_and_writes_its_files() {
    runs_under("none");
}

#[test]
fn a_tiny_scenario_runs_under_the_ictus_balancer_and_writes_its_files() {
    runs_under("ictus");
}

#[test]
fn both_placements_run_one_after_the_other_with_a_side_by_side_page() {
    let Some((rt, all)) = cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &tiny(rt, &all));
    let results = dir.path().join("results");
    let out = succeeds(
        ictus()
            .arg("scenario")
            .arg(&file)
            .args(["--balancer", "both", "--json", "--results"])
            .arg(&results),
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(json.as_array().map(Vec::len), Some(2));
    let made: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(made.len(), 1, "one new directory: {made:?}");
    let name = made[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("-scenario-tiny"), "{name}");
    check_dir(&made[0].join("none"), "none");
    check_dir(&made[0].join("ictus"), "ictus");
    let page = std::fs::read_to_string(made[0].join("compare.md")).unwrap();
    assert!(page.contains("balancer `none`") && page.contains("balancer `ictus`"));
}

/// Tasks that sleep for ten years after every loop, and no duration limit.
fn decade(rt: usize, all: &str) -> String {
    format!(
        r#"# tasks that sleep for ten years: only a stop ends them
name = "decade"
rt_cpus = "{rt}"

[[group]]
name = "sleepers"
count = 2
cpus = "{all}"
loops = 10
sleep_every = 1
sleep = "5256000min"
"#
    )
}

#[test]
fn ctrl_c_stops_tasks_that_sleep_for_years_and_writes_an_incomplete_result() {
    let Some((rt, all)) = cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), &decade(rt, &all));
    let out_dir = dir.path().join("out");
    let args = [
        "scenario",
        file.to_str().unwrap(),
        "--balancer",
        "ictus",
        "-o",
        out_dir.to_str().unwrap(),
    ];
    let child = spawn_in_group(dir.path(), &args);
    // The output directory is made after the Ctrl-C handler is in place, just before
    // the run; then give the tasks time to fall asleep.
    let start = Instant::now();
    while !out_dir.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "ictus scenario never made its output directory"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // A terminal's Ctrl-C: SIGINT to every process of the foreground group. 5 s is far
    // beyond what a stop takes (a poll, a wake-up, the joins and the files) and far
    // below ten years.
    kill("INT", format!("-{}", child.id()));
    let out = finish(child, Duration::from_secs(5));
    exits(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("INCOMPLETE: stopped on request"),
        "{stdout}"
    );
    let result = read_json(&out_dir.join("result.json"));
    assert_eq!(result["complete"], false);
    assert_eq!(result["stopped"], "stopped on request");
    let tasks = result["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert!(tasks.iter().all(|t| t["finished"] == false), "{tasks:?}");
    assert!(
        result["balancer_report"].is_object(),
        "the balancer was stopped and reported"
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("**INCOMPLETE**: stopped on request"), "{md}");
}
