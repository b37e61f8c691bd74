//! End-to-end: `ictus exec` runs a command in each task class, as the kernel then
//! reports it (policy, priority, affinity, cpuset); bad input exits 2 without running
//! anything; without privilege it names what is missing and runs nothing.
// A test that cannot run here says so on stderr (shown with --nocapture).

mod common;

use std::path::PathBuf;
use std::process::Output;

// The tests change cpusets (one applies a shield): one at a time.
use common::{as_nobody, ictus, is_root, one_at_a_time, refused};

/// The command run under `ictus exec`: its own policy (stat field 41), priority (40),
/// allowed CPUs and cpuset, as the kernel sees them.
const SHOW: &str = "cat /proc/$$/stat; grep Cpus_allowed_list /proc/$$/status; cat /proc/$$/cpuset";

struct Seen {
    policy: u32,
    priority: u32,
    cpus: String,
    cpuset: String,
}

fn seen(out: &Output) -> Seen {
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let stat = lines.next().expect("stat line");
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state).
    let field = |n: usize| fields[n - 3].parse::<u32>().unwrap();
    let cpus = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();
    let cpuset = lines.next().unwrap_or("").to_string();
    Seen {
        policy: field(41),
        priority: field(40),
        cpus,
        cpuset,
    }
}

/// `ictus exec EXTRA -- sh -c SHOW`.
fn exec_command(extra: &[&str]) -> assert_cmd::Command {
    let mut c = ictus();
    c.arg("exec").args(extra).args(["--", "sh", "-c", SHOW]);
    c
}

fn exec(extra: &[&str]) -> Output {
    exec_command(extra).output().unwrap()
}

fn last_cpu() -> usize {
    *ictus_os::facts::online_cpus().cpus().last().unwrap()
}

#[test]
fn each_class_runs_the_command_as_the_kernel_reports_it() {
    let _one = one_at_a_time();
    if let Some(why) = ictus_os::testing::realtime_refused().filter(|_| is_root()) {
        ictus_os::testing::skipped(
            "each_class_runs_the_command_as_the_kernel_reports_it",
            &format!("SCHED_FIFO is refused here even to root: {why}"),
        );
        return;
    }
    let journal = std::env::temp_dir().join("ictus-exec-test-no-shield");
    let journal = journal.to_str().unwrap();
    let cpu = last_cpu().to_string();

    let normal = exec(&["--class", "normal", "--journal", journal]);
    assert!(normal.status.success(), "{normal:?}");
    let s = seen(&normal);
    assert_eq!((s.policy, s.priority), (0, 0), "SCHED_OTHER");
    assert!(String::from_utf8_lossy(&normal.stderr).contains("ictus exec: normal"));

    let rt0 = exec(&["--class", "rt0", "--cpu", &cpu, "--journal", journal]);
    let rt1 = exec(&[
        "--class",
        "rt1",
        "--priority",
        "20",
        "--policy",
        "rr",
        "--journal",
        journal,
    ]);
    if !is_root() {
        // Without CAP_SYS_NICE the policy is refused, the reason named, nothing run.
        for out in [&rt0, &rt1] {
            assert_eq!(out.status.code(), Some(1));
            assert!(out.stdout.is_empty(), "the command did not run");
            assert!(String::from_utf8_lossy(&out.stderr).contains("CAP_SYS_NICE"));
        }
        return;
    }
    assert!(rt0.status.success(), "{rt0:?}");
    let s = seen(&rt0);
    assert_eq!((s.policy, s.priority), (1, 99), "SCHED_FIFO 99");
    assert_eq!(s.cpus, cpu);
    let err = String::from_utf8_lossy(&rt0.stderr);
    assert!(err.contains("does not survive exec"), "{err}");
    assert!(err.contains("no shield is applied"), "{err}");

    assert!(rt1.status.success(), "{rt1:?}");
    let s = seen(&rt1);
    assert_eq!((s.policy, s.priority), (2, 20), "SCHED_RR 20");
    assert_eq!(s.cpus, ictus_os::facts::online_cpus().to_string());
}

#[test]
fn bad_input_exits_2_and_runs_nothing() {
    let _one = one_at_a_time();
    for (args, says) in [
        (&["--class", "rt0"][..], "needs --cpu"),
        (&["--class", "rt0", "--cpu", "4000"][..], "not online"),
        (&["--class", "rt1"][..], "needs --priority"),
        (&["--class", "rt1", "--priority", "99"][..], "1 to 98"),
        (
            &["--class", "rt1", "--priority", "5", "--cpu", "0"][..],
            "--cpu is for",
        ),
        (
            &["--class", "normal", "--priority", "5"][..],
            "do not apply",
        ),
        (&["--class", "nonsense"][..], "invalid value"),
    ] {
        let err = refused(&mut exec_command(args));
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let missing = ictus()
        .args(["exec", "--class", "normal", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
}

#[test]
fn without_privilege_rt0_names_the_capability_and_runs_nothing() {
    let _one = one_at_a_time();
    let Some(out) = as_nobody(
        "without_privilege_rt0_names_the_capability_and_runs_nothing",
        &["exec", "--class", "rt0", "--cpu", "0", "--", "echo", "ran"],
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "the command did not run");
    assert!(err.contains("CAP_SYS_NICE"), "{err}");
}

#[test]
fn under_a_shield_rt0_joins_the_rt_cpuset() {
    let _one = one_at_a_time();
    let online = ictus_os::facts::online_cpus();
    if !is_root() || online.len() < 2 || ictus_shield::apply::privilege_shortfall().is_some() {
        ictus_os::testing::skipped(
            "under_a_shield_rt0_joins_the_rt_cpuset",
            "needs root, 2 CPUs, cpusets",
        );
        return;
    }
    if let Some(why) = ictus_os::testing::realtime_refused() {
        ictus_os::testing::skipped(
            "under_a_shield_rt0_joins_the_rt_cpuset",
            &format!("SCHED_FIFO is refused here even to root: {why}"),
        );
        return;
    }
    let journal: PathBuf =
        std::env::temp_dir().join(format!("ictus-exec-test-shield-{}", std::process::id()));
    let j = journal.to_str().unwrap();
    let cpu = last_cpu().to_string();
    let apply = ictus()
        .args(["shield", "apply", "--rt-cpus", &cpu, "--journal", j])
        .output()
        .unwrap();
    if !apply.status.success() {
        ictus_os::testing::skipped(
            "under_a_shield...",
            &format!(
                "shield apply failed: {}",
                String::from_utf8_lossy(&apply.stderr)
            ),
        );
        let _ = ictus().args(["shield", "reset", "--journal", j]).output();
        return;
    }
    let rt0 = exec(&["--class", "rt0", "--cpu", &cpu, "--journal", j]);
    let wrong = exec(&["--class", "rt0", "--cpu", "0", "--journal", j]);
    let normal = exec(&["--class", "normal", "--journal", j]);
    let reset = ictus()
        .args(["shield", "reset", "--journal", j])
        .output()
        .unwrap();
    assert!(reset.status.success(), "{reset:?}");

    assert!(rt0.status.success(), "{rt0:?}");
    let s = seen(&rt0);
    assert_eq!(
        (s.policy, s.priority, s.cpus.as_str()),
        (1, 99, cpu.as_str())
    );
    assert!(s.cpuset.ends_with("ictus-rt"), "{}", s.cpuset);
    assert!(String::from_utf8_lossy(&rt0.stderr).contains("shield RT"));

    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not an RT CPU"));

    assert!(normal.status.success(), "{normal:?}");
    let s = seen(&normal);
    assert!(
        !s.cpus.contains(&cpu),
        "normal stays off the RT CPU: {}",
        s.cpus
    );
}

#[test]
fn a_journal_that_is_not_one_is_refused_at_its_place_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "{\"kind\": \"header\"}\nnot json at all\n").unwrap();
    let fifo = dir.path().join("fifo");
    ictus_os::testing::mkfifo(&fifo).unwrap();
    for (journal, says) in [
        (garbage.clone(), format!("{}:1:", garbage.display())),
        (dir.path().to_path_buf(), "a directory".to_string()),
        (fifo.clone(), "a FIFO".to_string()),
    ] {
        // A FIFO would block a plain read for ever: the test would hang.
        let err = refused(
            ictus()
                .args(["exec", "--class", "normal", "--journal"])
                .arg(&journal)
                .args(["--", "echo", "ran"])
                .timeout(std::time::Duration::from_secs(20)),
        );
        assert!(err.contains(&says), "{err}");
    }
}
