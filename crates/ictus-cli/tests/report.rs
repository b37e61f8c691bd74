//! `ictus report` and `ictus compare` on the report fixtures (real records from tiny
//! probe runs, in crates/ictus-report/tests/fixtures).

mod common;

use std::path::{Path, PathBuf};

use common::{ictus, refused, succeeds};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ictus-report/tests/fixtures")
        .join(name)
}

/// A scratch copy of a fixture directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn of(name: &str, tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ictus-cli-report-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(fixture(name)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn report_writes_markdown_and_html_into_the_directory_and_prints_their_paths() {
    let dir = Scratch::of("survey-a", "report");
    let out = succeeds(ictus().arg("report").arg(&dir.0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let md = dir.0.join("report.md");
    let html = dir.0.join("report.html");
    assert_eq!(stdout, format!("{}\n{}\n", md.display(), html.display()));
    assert!(std::fs::read_to_string(md).unwrap().contains("## Verdict"));
    assert!(std::fs::read_to_string(html).unwrap().contains("<svg"));
}

#[test]
fn compare_prints_one_column_per_run_with_ratios() {
    let out = succeeds(
        ictus()
            .arg("compare")
            .arg(fixture("survey-a"))
            .arg(fixture("survey-b")),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("# ictus compare: 2 runs"));
    let header = stdout
        .lines()
        .find(|l| l.starts_with("| configuration | load | figure |"))
        .expect("the timer table");
    assert!(
        header.contains("| 1: ") && header.contains("(reference) | 2: "),
        "{header}"
    );
    assert!(stdout.contains(" (×"), "ratios against the first run");
    assert!(stdout.contains("†"), "thin tails are flagged");
}

#[test]
fn compare_with_a_reference_and_html_writes_the_page() {
    let dir = Scratch::of("survey-b", "compare-html");
    let page = dir.0.join("compare.html");
    let out = succeeds(
        ictus()
            .arg("compare")
            .arg(fixture("survey-a"))
            .arg(fixture("survey-b").join("timer-rt-pinned-idle.json"))
            .args(["--reference", "2", "--html"])
            .arg(&page),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("against run 2"));
    assert!(std::fs::read_to_string(page).unwrap().contains("<svg"));
}

#[test]
fn a_truncated_record_exits_2_with_one_line_naming_the_file() {
    let dir = Scratch::of("survey-b", "truncated");
    let file = dir.0.join("jitter-rt-pinned-idle.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 3]).unwrap();
    for args in [
        vec!["report".into(), dir.0.clone()],
        vec!["compare".into(), fixture("survey-a"), dir.0.clone()],
    ] {
        // Nothing on stdout: no half report.
        let stderr = refused(ictus().args(&args));
        assert!(stderr.contains("jitter-rt-pinned-idle.json:"), "{stderr}");
    }
    assert!(!dir.0.join("report.md").exists());
}

#[test]
fn compare_needs_two_runs_and_a_reference_among_them() {
    ictus()
        .arg("compare")
        .arg(fixture("survey-a"))
        .assert()
        .code(2);
    let out = ictus()
        .arg("compare")
        .arg(fixture("survey-a"))
        .arg(fixture("survey-b"))
        .args(["--reference", "3"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("--reference 3")
    );
}
