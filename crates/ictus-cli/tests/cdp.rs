//! The DevTools client of the tests (`common/cdp.rs`) against a real headless
//! Chromium: load a page, click a button with real mouse events, wait for the
//! page's answer, evaluate JavaScript, take a screenshot, and leave no browser
//! process or profile behind. Where no Chromium is installed the test says SKIPPED
//! and passes.
#![allow(clippy::print_stderr)]

#[path = "common/cdp.rs"]
mod cdp;

use std::path::Path;
use std::time::{Duration, Instant};

/// A button far below the fold (the click must scroll to it); its handler counts
/// only trusted clicks, i.e. real input events rather than `element.click()`.
const PAGE: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cdp self-test</title>
<style>
  body { margin: 0; font: 24px sans-serif; background: #f4f1e8; }
  #status { padding: 40px; background: #204a87; color: white; }
  #spacer { height: 2500px; }
  #go { font-size: 32px; padding: 20px 60px; }
</style></head>
<body>
  <p id="status">waiting</p>
  <div id="spacer"></div>
  <button id="go">Go</button>
  <script>
    window.clicks = 0;
    window.untrusted = 0;
    document.getElementById('go').addEventListener('click', (event) => {
      if (!event.isTrusted) { window.untrusted += 1; return; }
      window.clicks += 1;
      window.lastDetail = event.detail;
      document.getElementById('status').textContent = 'clicked ' + window.clicks;
    });
  </script>
</body></html>
"#;

#[test]
fn the_cdp_client_drives_a_headless_chromium() {
    let Some(chromium) = ictus_os::testing::chromium("the_cdp_client_drives_a_headless_chromium")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    std::fs::write(&page, PAGE).unwrap();

    // A program that is no Chromium fails to launch, with a reason.
    let not_chromium = cdp::Browser::launch(Path::new("/bin/false")).err().unwrap();
    assert!(
        not_chromium.contains("before printing its DevTools address"),
        "{not_chromium}"
    );

    let started = Instant::now();
    let mut browser = cdp::Browser::launch(&chromium).unwrap();
    eprintln!("launched in {:?}", started.elapsed());
    let pid = browser.pid();
    let profile = browser.profile_dir().to_path_buf();
    assert!(
        profile.is_dir(),
        "no profile directory {}",
        profile.display()
    );
    eprintln!("chromium {} (pid {pid})", chromium.display());

    browser
        .navigate(&format!("file://{}", page.display()))
        .unwrap();
    let missing = browser
        .navigate(&format!(
            "file://{}",
            dir.path().join("absent.html").display()
        ))
        .unwrap_err();
    assert!(missing.contains("ERR_FILE_NOT_FOUND"), "{missing}");
    browser
        .navigate(&format!("file://{}", page.display()))
        .unwrap();
    assert_eq!(browser.eval("document.title").unwrap(), "cdp self-test");
    assert_eq!(browser.eval("window.innerWidth").unwrap(), 1400);
    // A click through the DOM is not trusted: the handler ignores it.
    browser
        .eval("document.getElementById('go').click()")
        .unwrap();
    assert_eq!(
        browser.eval("[window.clicks, window.untrusted]").unwrap(),
        serde_json::json!([0, 1])
    );

    browser.click("#go").unwrap();
    let took = browser
        .wait_for(
            "document.getElementById('status').textContent === 'clicked 1'",
            Duration::from_secs(5),
        )
        .unwrap();
    eprintln!("the click's text appeared after {took:?}");
    // The button lies below the 1200 px viewport: the click scrolled to it.
    assert!(browser.eval("window.scrollY").unwrap().as_f64() > Some(0.0));
    assert_eq!(
        browser
            .eval("[window.clicks, window.untrusted, window.lastDetail]")
            .unwrap(),
        serde_json::json!([1, 1, 1])
    );
    browser.click("#go").unwrap();
    browser
        .wait_for("window.clicks === 2", Duration::from_secs(5))
        .unwrap();

    // Promises are awaited; exceptions, missing elements and timeouts are errors.
    assert_eq!(
        browser
            .eval("new Promise(r => setTimeout(() => r(6 * 7), 10))")
            .unwrap(),
        42
    );
    assert_eq!(browser.eval("undefined").unwrap(), serde_json::Value::Null);
    let thrown = browser
        .eval("(() => { throw new Error('boom'); })()")
        .unwrap_err();
    assert!(thrown.contains("boom"), "{thrown}");
    let missing = browser.click("#absent").unwrap_err();
    assert!(missing.contains("no element matches"), "{missing}");
    let late = browser
        .wait_for("window.clicks === 3", Duration::from_millis(200))
        .unwrap_err();
    assert!(
        late.contains("window.clicks === 3") && late.contains("false"),
        "{late}"
    );
    let bad = browser.wait_for("1 +", Duration::from_secs(5)).unwrap_err();
    assert!(bad.contains("SyntaxError"), "{bad}");

    let png = dir.path().join("page.png");
    browser.screenshot(&png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 2000, "a screenshot of only {} B", bytes.len());

    let closing = Instant::now();
    drop(browser);
    eprintln!("closed in {:?}", closing.elapsed());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "chromium (pid {pid}) still runs after the browser was dropped"
    );
    // Its helpers (renderers, zygotes, GPU, network) go with it.
    let gone = Instant::now() + Duration::from_secs(3);
    let mut helpers = processes_naming(&profile);
    while !helpers.is_empty() && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
        helpers = processes_naming(&profile);
    }
    assert!(
        helpers.is_empty(),
        "chromium helpers still run: {helpers:?}"
    );
    assert!(
        !profile.exists(),
        "the profile {} is still there",
        profile.display()
    );
}

/// The ids of the processes whose command line mentions `path`.
fn processes_naming(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&needle))
        })
        .collect()
}
