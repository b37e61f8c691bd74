//! The HTML report opened in headless Chromium: it must render (a screenshot larger
//! than a blank page's) with its SVG plots in the DOM. Where no Chromium is installed
//! the test says SKIPPED and passes. The screenshot is kept in the target directory
//! (`target/ictus-report-screenshot.png`) for a person to look at.

use std::path::Path;
use std::process::Command;

fn run(browser: &Path, args: &[&str], url: &str) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs")
}

#[test]
fn the_html_report_renders_in_chromium_with_its_plots() {
    let Some(browser) =
        ictus_os::testing::chromium("the_html_report_renders_in_chromium_with_its_plots")
    else {
        return;
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/survey-a");
    let results = ictus_report::load(&fixtures).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, ictus_report::html(&results)).unwrap();
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();

    let shot = |html: &Path, png: &Path| {
        let out = run(
            &browser,
            &[
                &format!("--screenshot={}", png.display()),
                "--window-size=1200,3000",
            ],
            &format!("file://{}", html.display()),
        );
        assert!(
            png.is_file(),
            "no screenshot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::metadata(png).unwrap().len()
    };
    let report_png = dir.path().join("report.png");
    let report_size = shot(&page, &report_png);
    let blank_size = shot(&blank, &dir.path().join("blank.png"));
    assert!(
        report_size > 10 * blank_size,
        "the report's screenshot ({report_size} B) is hardly larger than a blank page's ({blank_size} B)"
    );
    // Kept for a person to look at.
    let keep =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ictus-report-screenshot.png");
    let _ = std::fs::copy(&report_png, keep);

    let dom = run(
        &browser,
        &["--dump-dom"],
        &format!("file://{}", page.display()),
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    let svgs = dom.matches("<svg").count();
    assert!(svgs >= 12, "{svgs} SVG elements in the rendered DOM");
    assert!(dom.contains("Wake-up latency tails"));
    assert!(
        !dom.contains("<script"),
        "the page has no script to log errors"
    );
}
