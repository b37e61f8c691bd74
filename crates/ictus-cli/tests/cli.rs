//! End-to-end: what a user of the field expects of a command line (completions, man
//! pages, examples in `--help`, the commit in `--version`) and errors that help (the
//! suggestion kept, one exit code per kind of failure, words a person reads, a value
//! blamed on where it came from).

mod common;

use common::{ictus, ictus_in, refused, succeeds, write_file};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn completions_are_made_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef ictus"),
        ("fish", "complete -c ictus"),
    ] {
        let script = stdout(&succeeds(ictus().args(["completions", shell])));
        assert!(script.contains(marker), "{shell}: {marker}");
        for word in [
            "survey",
            "doctor",
            "timer",
            "interval",
            "completions",
            "man",
        ] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let err = refused(ictus().args(["completions", "tcsh"]));
    assert!(err.contains("possible values"), "{err}");
}

#[test]
fn man_pages_are_written_one_per_command() {
    let page = stdout(&succeeds(ictus().arg("man")));
    assert!(
        page.starts_with(".ie") || page.contains(".TH ictus 1"),
        "{page}"
    );
    assert!(page.contains("Exit status"), "ictus(1) says the exit codes");
    let dir = tempfile::tempdir().unwrap();
    let out = stdout(&succeeds(ictus().args(["man", "--out"]).arg(dir.path())));
    assert!(out.contains("man pages in"), "{out}");
    for page in [
        "ictus.1",
        "ictus-survey.1",
        "ictus-probe-timer.1",
        "ictus-ctl.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".SH"), "{page} is a man page");
    }
}

#[test]
fn the_version_names_its_commit() {
    let out = stdout(&succeeds(ictus().arg("--version")));
    let line = out.trim_end();
    assert!(line.starts_with("ictus 0."), "{line}");
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|c| c.strip_suffix(')'))
        .unwrap_or_else(|| panic!("a commit in {line}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    let sub = stdout(&succeeds(ictus().args(["probe", "timer", "--version"])));
    assert!(sub.contains(commit), "{sub}");
}

#[test]
fn each_command_s_help_ends_with_examples() {
    for args in [
        &["--help"][..],
        &["survey", "--help"],
        &["probe", "timer", "--help"],
        &["run", "-h"],
        &["ctl", "--help"],
    ] {
        let help = stdout(&succeeds(ictus().args(args)));
        assert!(help.contains("Examples:\n  ictus "), "{args:?}: {help}");
    }
    let long = stdout(&succeeds(ictus().arg("--help")));
    assert!(long.contains("Exit status:"), "{long}");
    assert!(long.contains("  2  bad input"), "{long}");
}

#[test]
fn a_typo_is_refused_with_clap_s_suggestion_on_one_line() {
    let err = refused(ictus().args(["probe", "timer", "--intervall", "1ms"]));
    assert!(
        err.starts_with("ictus: unexpected argument '--intervall'"),
        "{err}"
    );
    assert!(
        err.contains("tip: a similar argument exists: '--interval'"),
        "{err}"
    );
    assert!(err.contains("see 'ictus probe timer --help'"), "{err}");
    let err = refused(ictus().arg("doctr"));
    assert!(
        err.contains("a similar subcommand exists: 'doctor'"),
        "{err}"
    );
}

#[test]
fn a_bad_duration_says_what_was_expected_and_where() {
    let err = refused(ictus().args(["probe", "timer", "--duration", "fast"]));
    assert!(
        err.contains("not a duration: expected a number, found 'f' at character 1"),
        "{err}"
    );
    assert!(!err.contains("at 0"), "no byte offset: {err}");
}

#[test]
fn ctl_without_its_run_exits_as_bad_input_named_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let status = refused(ictus_in(dir.path()).args(["ctl", "status"]));
    assert!(status.contains("no run is active"), "{status}");
    let pause = refused(ictus_in(dir.path()).args(["ctl", "pause", "--name", "nosuchrun"]));
    assert!(pause.contains("no run is listening at"), "{pause}");
    assert!(pause.contains("is `ictus run` running?"), "{pause}");
    assert!(
        !pause.contains("?:"),
        "no OS error glued to the question: {pause}"
    );
    assert_eq!(
        pause.matches("No such file or directory").count(),
        1,
        "{pause}"
    );
}

#[test]
fn a_file_that_is_not_json_is_called_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "notes.md", "# not JSON\n");
    let err = refused(ictus().args(["import", "cyclictest"]).arg(&path));
    assert!(
        err.contains(&format!(
            "{}:1:1: not valid JSON: expected a value",
            path.display()
        )),
        "{err}"
    );
    assert!(!err.contains("expected value"), "{err}");
}

#[test]
fn a_tick_from_the_command_line_is_not_blamed_on_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        dir.path(),
        "tick.toml",
        "name = \"cli-tick\"\ntick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"s\"\nbuiltin = \"idle\"\n",
    );
    let err = refused(
        ictus_in(dir.path())
            .args(["run", "--duration", "1s", "--tick", "2s"])
            .arg(&path),
    );
    assert!(
        err.starts_with("ictus: --tick 2.00 s: the tick 2.00 s is outside"),
        "{err}"
    );
    assert!(!err.contains("tick.toml"), "{err}");
}
