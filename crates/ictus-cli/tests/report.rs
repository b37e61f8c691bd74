//! `ictus report` and `ictus compare` on the report fixtures (real records from tiny
//! probe runs, in crates/ictus-report/tests/fixtures).

#[path = "common/cdp.rs"]
#[allow(dead_code, reason = "this file loads pages and reads them: no clicks")]
mod cdp;
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

/// The survey's report opened in headless Chromium (through the tests' DevTools
/// client): the verdict's chart of each configuration's misses by cause is rendered,
/// not only written: the SVG has a box on the page, above the verdict's words, with
/// one bar per configuration of the fixture survey (four, one of them held) whose
/// causes' segments are drawn, and a legend naming the causes. The screenshot is kept
/// in the target directory (`target/ictus-report-glance.png`) for a person to look at.
#[test]
fn the_reports_chart_of_misses_by_cause_renders_in_chromium() {
    let Some(chromium) =
        ictus_os::testing::chromium("the_reports_chart_of_misses_by_cause_renders_in_chromium")
    else {
        return;
    };
    let dir = Scratch::of("survey-explained", "chart");
    succeeds(ictus().arg("report").arg(&dir.0));
    let page = dir.0.join("report.html");
    let mut browser = cdp::Browser::launch(&chromium).unwrap();
    browser
        .navigate(&format!("file://{}", page.display()))
        .unwrap();
    let chart = browser
        .eval(
            "(() => { const svg = document.querySelector('svg.glance'); \
             const box = svg.getBoundingClientRect(); \
             const line = document.querySelector('.verdict p.line').getBoundingClientRect(); \
             const bars = [...svg.querySelectorAll('g.config')].map(g => { \
               const b = g.querySelector('g.bar').getBBox(); \
               return [g.dataset.id, g.dataset.held, Math.round(b.width), \
                 [...g.querySelectorAll('rect.cause')].filter(r => r.getBBox().width > 0).length]; }); \
             const legend = [...svg.querySelectorAll('g.legend g.key text')].map(t => t.textContent); \
             const keys = [...svg.querySelectorAll('g.legend g.key')].every(k => k.getBBox().width > 0); \
             return { width: box.width, height: box.height, above: box.bottom <= line.top, \
               bars, legend, keys }; })()",
        )
        .unwrap();
    let width = chart["width"].as_f64().unwrap();
    let height = chart["height"].as_f64().unwrap();
    assert!(width > 300.0 && height > 100.0, "the chart's box: {chart}");
    assert_eq!(
        chart["above"], true,
        "the chart leads the verdict's words: {chart}"
    );
    let bars = chart["bars"].as_array().unwrap();
    let ids: Vec<&str> = bars.iter().map(|b| b[0].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "loop-normal-unpinned-idle",
            "loop-rt-pinned-all",
            "loop-rt-pinned-idle",
            "loop-shielded-idle"
        ],
        "{chart}"
    );
    for b in bars {
        assert!(b[2].as_u64().unwrap() > 0, "a bar without a box: {b}");
        // The three that missed draw their causes (and what was too small to name);
        // the one that held draws none.
        let segments = b[3].as_u64().unwrap();
        if b[1] == "true" {
            assert_eq!(segments, 0, "{b}");
        } else {
            assert!(segments >= 2, "{b}");
        }
    }
    let legend: Vec<&str> = chart["legend"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        legend,
        ["host stall", "preempted", "interrupts", "too small to name"],
        "{chart}"
    );
    assert_eq!(chart["keys"], true, "a legend key without a box: {chart}");
    let png = dir.0.join("report.png");
    browser.screenshot(&png).unwrap();
    let keep = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ictus-report-glance.png");
    let _ = std::fs::copy(&png, keep);
}

/// The live page draws the run's misses by cause as the report does: the page as
/// served, its stream replaced by one snapshot whose `causes` are a fixture run's
/// misses (the executive's `MissTally` fills them from a real run's sampler), opened
/// in headless Chromium: a segment per cause in the bar, the legend naming them, the
/// accounted share and the advice.
#[test]
fn the_live_page_draws_the_runs_misses_by_cause_in_chromium() {
    let Some(chromium) =
        ictus_os::testing::chromium("the_live_page_draws_the_runs_misses_by_cause_in_chromium")
    else {
        return;
    };
    let record: ictus_probe::record::RunRecord = serde_json::from_str(
        &std::fs::read_to_string(
            fixture("survey-explained").join("loop-normal-unpinned-idle.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let causes = ictus_explain::TimeByCause::of(record.explanation.as_ref().unwrap());
    let status = serde_json::json!({
        "name": "chart", "frame": 100, "state": "run", "phase": "running",
        "tick_ns": 1_000_000, "subsystems": [], "pending": [], "causes": causes,
    });
    let message = serde_json::json!({"type": "status", "status": status}).to_string();
    // A stream that opens and delivers the one snapshot.
    let stub = format!(
        "<script>window.WebSocket = function () {{ var ws = this; setTimeout(function () {{ \
         ws.onopen(); ws.onmessage({{ data: {} }}); }}, 10); }}; \
         window.WebSocket.prototype.close = function () {{}};</script>",
        serde_json::to_string(&message).unwrap()
    );
    let page =
        include_str!("../../ictus-ui/src/page.html").replacen("<script>", &(stub + "<script>"), 1);
    let dir = Scratch::of("survey-explained", "live");
    let path = dir.0.join("live.html");
    std::fs::write(&path, page).unwrap();
    let mut browser = cdp::Browser::launch(&chromium).unwrap();
    browser
        .navigate(&format!("file://{}", path.display()))
        .unwrap();
    browser
        .wait_for(
            "document.querySelectorAll('#causechart rect.cause').length > 0",
            std::time::Duration::from_secs(10),
        )
        .unwrap();
    let drawn = browser
        .eval(
            "({ box: document.getElementById('causechart').getBoundingClientRect().width, \
               rects: [...document.querySelectorAll('#causechart rect.cause')].map(r => r.dataset.cause), \
               widths: [...document.querySelectorAll('#causechart rect.cause')].map(r => [+r.getAttribute('width'), +r.dataset.share]), \
               legend: [...document.querySelectorAll('#causelegend .key')].map(k => k.textContent), \
               sum: document.getElementById('causesum').textContent, \
               advice: document.getElementById('causeadvice').textContent })",
        )
        .unwrap();
    assert!(drawn["box"].as_f64().unwrap() > 100.0, "{drawn}");
    assert_eq!(
        drawn["rects"],
        serde_json::json!([
            "preempted by burner",
            "host stall (the vCPU did not run)",
            "too small to name"
        ]),
        "{drawn}"
    );
    assert_eq!(
        drawn["legend"],
        serde_json::json!(["preempted", "host stall", "too small to name"]),
        "{drawn}"
    );
    // Each segment is its cause's share of the lateness (as its title says), never
    // past the bar's end.
    let mut end = 0.0;
    for w in drawn["widths"].as_array().unwrap() {
        let (width, share) = (w[0].as_f64().unwrap(), w[1].as_f64().unwrap());
        assert!(
            (width - (1000.0 * share).min(1000.0 - end)).abs() < 0.11,
            "a segment not its share of the lateness: {drawn}"
        );
        end += width;
    }
    assert!(end <= 1000.05, "the segments pass the bar's end: {drawn}");
    let sum = drawn["sum"].as_str().unwrap();
    assert!(sum.starts_with("20 misses"), "{sum}");
    assert!(sum.contains("counters here account for 70 %"), "{sum}");
    assert!(sum.contains("cost most: preempted by burner"), "{sum}");
    let advice = drawn["advice"].as_str().unwrap();
    assert!(advice.contains("taskset -pc OTHER_CPUS 4242"), "{advice}");
    let png = dir.0.join("live.png");
    browser.screenshot(&png).unwrap();
    let keep = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ictus-live-causes.png");
    let _ = std::fs::copy(&png, keep);
}
