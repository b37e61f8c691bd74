//! The reports of the fixture surveys (real probe runs with tiny parameters, made by
//! `tests/fixtures/make-fixtures.sh`): Markdown snapshots, the HTML's content, and
//! every kind of bad input named by its file.

use std::path::{Path, PathBuf};

use ictus_probe::record::{Measurement, RunRecord};
use ictus_report::{
    ReportError, compare_html, compare_markdown, html, load, markdown, write_reports,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The source path differs between checkouts: snapshots show it as `FIXTURES/...`.
fn portable(text: &str) -> String {
    text.replace(&fixture("").display().to_string(), "FIXTURES/")
}

/// A copy of a fixture directory that a test may change.
fn copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

#[test]
fn markdown_report_of_a_survey() {
    let sut = load(&fixture("survey-a")).unwrap();
    insta::assert_snapshot!("survey_a", portable(&markdown(&sut)));
}

#[test]
fn markdown_comparison_of_two_surveys() {
    let runs = [
        load(&fixture("survey-a")).unwrap(),
        load(&fixture("survey-b")).unwrap(),
    ];
    insta::assert_snapshot!("compare_a_b", portable(&compare_markdown(&runs, 0)));
}

#[test]
fn the_report_puts_host_then_verdict_then_contents_then_the_seed_tables_in_order() {
    let text = markdown(&load(&fixture("survey-a")).unwrap());
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("no {s:?} in the report"))
    };
    assert!(text.starts_with("# ictus survey of "));
    assert!(at("AMD") < at("## Verdict") || at("Linux") < at("## Verdict"));
    assert!(at("## Verdict") < at("## Contents"));
    let order = [
        "(seed 000 Table 3)",
        "(seed 000 Table 5)",
        "(seed 000 Table 6)",
        "(seed 000 Table 7)",
        "(seed 002 Table 1)",
        "(seed 002 Table 2)",
        "(seed 001 Table 3)",
        "(seed 004 Figures 6 and 7)",
    ];
    let heads: Vec<usize> = order
        .iter()
        .map(|s| {
            text.rfind(&format!("{s} <a id="))
                .unwrap_or_else(|| panic!("no table {s}"))
        })
        .collect();
    assert!(heads.windows(2).all(|w| w[0] < w[1]), "{heads:?}");
    assert!(!text.contains("INCOMPLETE"));
}

#[test]
fn skipped_and_failed_steps_say_why_in_their_cells() {
    let text = markdown(&load(&fixture("survey-a")).unwrap());
    assert!(text.contains("| shielded | idle | skipped: shield not available |"));
    assert!(text.contains("failed: load net: could not bind"));
    assert!(text.contains("~"), "thin p99.999 are marked");
    assert!(text.contains(ictus_report::tables::THIN_NOTE));
}

#[test]
fn a_survey_without_rendezvous_memlat_or_throughput_says_they_were_not_measured() {
    let text = markdown(&load(&fixture("survey-b")).unwrap());
    assert!(text.contains("Not measured: the survey has no rendezvous step"));
    assert!(text.contains("Not measured: the survey has no memlat step"));
    assert!(text.contains("Not measured: the survey has no throughput step"));
    // survey-b's compute ran against survey-a's: the seed's time reduction is there.
    assert!(text.contains("% (speed ×"), "{text}");
}

#[test]
fn an_incomplete_survey_says_so_at_the_top_of_both_reports() {
    let dir = copy("survey-a");
    let path = dir.path().join("survey.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["complete"] = false.into();
    manifest["verdict"] = serde_json::Value::Null;
    std::fs::write(&path, manifest.to_string()).unwrap();
    std::fs::remove_file(dir.path().join("loop-rt-pinned-idle.json")).unwrap();
    let sut = load(dir.path()).unwrap();
    let md = markdown(&sut);
    let first_lines: Vec<&str> = md.lines().take(3).collect();
    assert!(first_lines[2].contains("INCOMPLETE"), "{first_lines:?}");
    assert!(md.contains("No verdict: the survey stopped before the loop probe ran."));
    assert!(
        md.contains("Missing: loop-rt-pinned-idle.json not found"),
        "{md}"
    );
    let page = html(&sut);
    let banner = page.find("class=\"incomplete\"").unwrap();
    assert!(banner < page.find("Verdict").unwrap());
}

#[test]
fn write_reports_writes_both_files_into_the_directory() {
    let dir = copy("survey-b");
    let sut = load(dir.path()).unwrap();
    let (md, page) = write_reports(dir.path(), &sut).unwrap();
    assert_eq!(md, dir.path().join("report.md"));
    assert!(
        std::fs::read_to_string(md)
            .unwrap()
            .starts_with("# ictus survey of ")
    );
    assert!(
        std::fs::read_to_string(page)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    // The reports do not get in the way of reading the directory again.
    assert_eq!(load(dir.path()).unwrap().runs.len(), sut.runs.len());
}

#[test]
fn the_html_is_self_contained_with_inline_svg_plots() {
    let page = html(&load(&fixture("survey-a")).unwrap());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("<script"), "no JavaScript");
    // No network: nothing loaded from elsewhere (the SVG namespace URI is only a name).
    assert!(!page.contains("<link") && !page.contains("src=") && !page.contains("href=\"http"));
    assert!(!page.contains("@import") && !page.contains("url("));
    // Tails, six histograms, memlat, compute, hand-off tails, throughput, timeline, loop.
    let svgs = page.matches("<svg").count();
    assert!(svgs >= 12, "{svgs} plots");
    assert!(page.contains("Wake-up latency tails"));
    assert!(page.contains("Memory latency by working set"));
    assert!(page.contains("Throughput by payload"));
    assert!(page.contains("Loop step completion"));
    assert!(page.contains("do not carry yet"));
}

#[test]
fn the_comparison_html_overlays_the_runs_tails() {
    let runs = [
        load(&fixture("survey-a")).unwrap(),
        load(&fixture("survey-b")).unwrap(),
    ];
    let page = compare_html(&runs, 1);
    assert!(page.contains("Wake-up latency tails: real-time, pinned, idle"));
    assert!(page.contains("(reference)"));
    assert!(!page.contains("<script"));
}

#[test]
fn a_single_record_file_is_a_report_too() {
    let sut = load(&fixture("survey-a").join("timer-rt-pinned-idle.json")).unwrap();
    assert_eq!(sut.runs.len(), 1);
    let text = markdown(&sut);
    assert!(text.starts_with("# ictus results from "));
    assert!(
        text.contains("| real-time, pinned | idle | 500 |"),
        "{text}"
    );
    assert!(text.contains("Not measured: no doctor.json here"));
}

// --- bad input ------------------------------------------------------------------

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn error_of(dir: &Path) -> String {
    let e = load(dir).expect_err("bad input must be refused");
    e.to_string()
}

#[test]
fn a_truncated_record_is_refused_naming_the_file_line_and_column() {
    let dir = copy("survey-b");
    let text = std::fs::read_to_string(dir.path().join("timer-rt-pinned-idle.json")).unwrap();
    write(
        dir.path(),
        "timer-rt-pinned-idle.json",
        &text[..text.len() / 2],
    );
    let e = error_of(dir.path());
    assert!(e.contains("timer-rt-pinned-idle.json:"), "{e}");
    assert!(e.contains("the text ends"), "{e}");
    assert_eq!(e.lines().count(), 1);
}

#[test]
fn foreign_json_and_other_schema_versions_are_refused() {
    let dir = copy("survey-b");
    write(
        dir.path(),
        "cyclictest.json",
        r#"{"file_version": 1, "thread": {}}"#,
    );
    let e = error_of(dir.path());
    assert!(
        e.contains("cyclictest.json") && e.contains("not an ictus result record"),
        "{e}"
    );

    let dir = copy("survey-b");
    write(
        dir.path(),
        "future.json",
        r#"{"schema": "ictus.run-record", "schema_version": 99}"#,
    );
    let e = error_of(dir.path());
    assert!(
        e.contains("future.json") && e.contains("schema version 99"),
        "{e}"
    );
}

#[test]
fn a_broken_manifest_or_audit_is_refused_naming_the_file() {
    let dir = copy("survey-b");
    write(
        dir.path(),
        "survey.json",
        r#"{"schema": "ictus.survey", "schema_version": 1, "complete": tr"#,
    );
    let e = load(dir.path()).unwrap_err();
    assert!(matches!(e, ReportError::Json(_)), "{e}");
    assert!(e.to_string().contains("survey.json:1:"), "{e}");

    let dir = copy("survey-b");
    write(dir.path(), "survey.json", r#"{"schema": "something.else"}"#);
    assert!(matches!(load(dir.path()), Err(ReportError::Schema { .. })));

    let dir = copy("survey-b");
    write(
        dir.path(),
        "survey.json",
        r#"{"schema": "ictus.survey", "schema_version": 7}"#,
    );
    assert!(matches!(
        load(dir.path()),
        Err(ReportError::Version { found: 7, .. })
    ));

    let dir = copy("survey-b");
    write(dir.path(), "doctor.json", r#"{"checks": 3}"#);
    let e = error_of(dir.path());
    assert!(e.contains("doctor.json:1:"), "{e}");
}

#[test]
fn an_empty_directory_or_a_missing_path_is_an_error_not_an_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(load(dir.path()), Err(ReportError::Empty { .. })));
    let e = load(&dir.path().join("nope")).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

/// Whether `m`, a measurement of a `probe` record, reads through one of the typed
/// views of that probe.
fn reads_through_its_view(probe: &str, m: &Measurement) -> bool {
    use ictus_probe::compute::view as compute;
    use ictus_probe::jitter::view as jitter;
    use ictus_probe::r#loop::view as r#loop;
    use ictus_probe::memlat::view as memlat;
    use ictus_probe::pingpong::view as pingpong;
    use ictus_probe::rendezvous::view as rendezvous;
    use ictus_probe::throughput::view as throughput;
    match probe {
        "memlat" => {
            memlat::Access::read(m).is_some()
                || m.read::<memlat::Cache>().is_some()
                || m.read::<memlat::Knee>().is_some()
        }
        "rendezvous" => {
            m.read::<rendezvous::Rendezvous>().is_some()
                || m.read::<rendezvous::CachelineRoundTrip>().is_some()
        }
        "throughput" => {
            m.read::<throughput::Transfer>().is_some()
                || m.read::<throughput::Memcpy>().is_some()
                || m.read::<rendezvous::CachelineRoundTrip>().is_some()
                || m.read::<throughput::Targets>().is_some()
        }
        "compute" => m.read::<compute::Step>().is_some(),
        "pingpong" => m.read::<pingpong::Handoff>().is_some(),
        "loop" => m.read::<r#loop::Trial>().is_some(),
        "jitter" => m.read::<jitter::Runs>().is_some() || m.read::<jitter::SlowRun>().is_some(),
        _ => false,
    }
}

/// Whether a `probe` record's parameters read as that probe records them.
fn parameters_read(r: &RunRecord) -> bool {
    use ictus_probe::{compute, jitter, r#loop, memlat, pingpong, rendezvous, throughput, timer};
    match r.probe.as_str() {
        "timer" => r.parameters_as::<timer::RecordedParams>().is_some(),
        "pingpong" => r.parameters_as::<pingpong::ParamsRecord>().is_some(),
        "memlat" => r.parameters_as::<memlat::ParamsRecord>().is_some(),
        "throughput" => r.parameters_as::<throughput::ParamsRecord>().is_some(),
        "jitter" => r.parameters_as::<jitter::JitterParams>().is_some(),
        "loop" => r.parameters_as::<r#loop::LoopParams>().is_some(),
        "compute" => r.parameters_as::<compute::ComputeParams>().is_some(),
        "rendezvous" => r.parameters_as::<rendezvous::RendezvousParams>().is_some(),
        _ => false,
    }
}

/// The fixture records were written by an earlier ictus, key by key: every
/// measurement and every probe's parameters still read through the typed views the
/// tables use, so no cell of the snapshots above comes from a fallback.
#[test]
fn the_fixture_records_read_through_the_typed_views() {
    for survey in ["survey-a", "survey-b"] {
        for run in &load(&fixture(survey)).unwrap().runs {
            let r = &run.record;
            assert!(parameters_read(r), "{survey}/{}: parameters", run.file);
            assert!(r.policy_requested().is_some(), "{survey}/{}", run.file);
            for m in &r.measurements {
                assert!(
                    reads_through_its_view(&r.probe, m),
                    "{survey}/{}: {} {:?} {:?}",
                    run.file,
                    m.name,
                    m.labels,
                    m.metrics
                );
            }
        }
    }
}

/// Sets `obtained.pm_qos` in every latency record of `dir` (`None`: off), and gives the
/// loop record an explanation of two misses.
fn with_qos_and_misses(dir: &Path, held: Option<u32>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let latency = ["timer-", "loop-", "jitter-", "pingpong-", "rendezvous-"];
        if !latency.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["obtained"]["pm_qos"] = serde_json::json!({
            "requested": held.map_or(serde_json::json!("off"), |us| serde_json::json!(us)),
            "held_us": held,
            "refused": null
        });
        if name.starts_with("loop-") {
            v["explanation"] = serde_json::json!({
                "threshold_ns": 100000,
                "breakdown": {
                    "events": 2, "dropped": 0,
                    "by_cause": [["preempted by kworker/1:2", 1], ["unexplained", 1]],
                    "unexplained": 1, "seen": [["preempted", 1]]
                },
                "events": [],
                "events_not_kept": 0,
                "sampler": {
                    "period_ns": 1000000, "samples": 10, "cpus": "0",
                    "shares_watched_cpu": false, "reading_mean_ns": 40000,
                    "reading_max_ns": 90000, "task_scans": 1, "sources": []
                }
            });
        }
        std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }
}

#[test]
fn the_reports_say_why_the_misses_per_run_and_the_qos_in_force() {
    let dir = copy("survey-a");
    with_qos_and_misses(dir.path(), Some(0));
    let sut = load(dir.path()).unwrap();
    let md = markdown(&sut);
    let why = md
        .find("## Why the misses")
        .expect("a why-the-misses section");
    assert!(md.find("## Warnings").unwrap() > why);
    let row = md[why..]
        .lines()
        .find(|l| l.starts_with("| loop-rt-pinned-idle"))
        .expect("a row for the loop run");
    assert!(row.contains("held at 0 us"), "{row}");
    assert!(
        row.contains("1 preempted by kworker/1:2, 1 unexplained"),
        "{row}"
    );
    assert!(md.contains("[Why the misses](#why)"));
    assert!(html(&sut).contains("<h2 id=\"why\">Why the misses</h2>"));
}

#[test]
fn a_comparison_at_unequal_qos_settings_says_so_and_one_at_equal_settings_does_not() {
    let (a, b) = (copy("survey-a"), copy("survey-b"));
    with_qos_and_misses(a.path(), Some(0));
    with_qos_and_misses(b.path(), None);
    let unequal = [load(a.path()).unwrap(), load(b.path()).unwrap()];
    let note = "different CPU latency QoS settings (run 1: held at 0 us; run 2: off)";
    assert!(compare_markdown(&unequal, 0).contains(note));
    assert!(compare_html(&unequal, 0).contains(note));
    with_qos_and_misses(b.path(), Some(0));
    let equal = [load(a.path()).unwrap(), load(b.path()).unwrap()];
    assert!(!compare_markdown(&equal, 0).contains("different CPU latency QoS"));
}

#[test]
fn markdown_report_of_a_survey_with_explained_misses() {
    let sut = load(&fixture("survey-explained")).unwrap();
    insta::assert_snapshot!("survey_explained", portable(&markdown(&sut)));
}

/// The glance's bars agree with their labels (issue 32's chart): each cause's segment
/// is its time as a share of the configuration's lateness, the number its label and
/// the table say, and a bar's segments never run past its end.
#[test]
fn the_glance_bars_are_shares_of_the_lateness() {
    let page = html(&load(&fixture("survey-explained")).unwrap());
    let attr = |tag: &str, name: &str| -> f64 {
        let at = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        tag[at..].split('"').next().unwrap().parse().unwrap()
    };
    let mut bars = 0;
    for config in page.split("<g class=\"config\"").skip(1) {
        let bar = config.split("</g>").next().unwrap();
        let (bar_x, bar_w) = {
            let frame = &bar[bar.find("<rect ").unwrap()..];
            (attr(frame, "x"), attr(frame, "width"))
        };
        let mut end = bar_x;
        for seg in bar.split("<rect class=\"cause\"").skip(1) {
            let (x, w, share) = (attr(seg, "x"), attr(seg, "width"), attr(seg, "data-share"));
            assert!((x - end).abs() < 0.11, "segments follow each other: {seg}");
            end = x + w;
            let title = &seg[seg.find("<title>").unwrap()..];
            let pct = format!("({:.0} % of the lateness", share * 100.0);
            assert!(
                title.contains(&pct),
                "the label says the share drawn: {title}"
            );
            if !title.contains("drawn to the bar's end") {
                assert!((w - share * bar_w).abs() < 0.11, "{seg}");
            }
        }
        assert!(
            end <= bar_x + bar_w + 0.11,
            "a bar runs past its end: {bar}"
        );
        bars += 1;
    }
    assert_eq!(bars, 4);
}

/// The verdict leads with each configuration at a glance (held or not, misses, worst
/// step, the cause that cost most, time by cause), the prose after it, then the
/// advice that follows from each costliest cause.
#[test]
fn the_verdict_leads_with_each_configuration_at_a_glance() {
    let sut = load(&fixture("survey-explained")).unwrap();
    let md = markdown(&sut);
    let verdict = md.find("## Verdict").unwrap();
    let table = md
        .find("| configuration | held |")
        .expect("the glance table");
    let line = md.find("**Yes: this machine holds").unwrap();
    assert!(verdict < table && table < line, "{md}");
    let row = |id: &str| {
        md[verdict..]
            .lines()
            .find(|l| l.starts_with(&format!("| {id}")))
            .unwrap_or_else(|| panic!("no row for {id}"))
            .to_string()
    };
    let normal = row("normal, unpinned, idle");
    assert!(normal.contains("| no | 20 of "), "{normal}");
    assert!(
        normal.contains("preempted by burner 2.94 ms (67 %)"),
        "{normal}"
    );
    assert!(normal.contains("70 % of 4.40 ms late"), "{normal}");
    let all = row("real-time, pinned, all loads");
    assert!(all.contains("interrupts 360 µs (64 %)"), "{all}");
    assert!(all.contains("too small to name 50.0 µs"), "{all}");
    let held = row("shielded, idle");
    assert!(held.contains("| yes | 0 of "), "{held}");
    // The advice follows from each configuration's costliest cause.
    assert!(md.contains("burner (pid 4242, OTHER) ran on CPU 1"), "{md}");
    assert!(
        md.contains("IRQ 36 (virtio1-req.0) was served on CPU 1"),
        "{md}"
    );
    assert!(md.contains("pinned, dedicated vCPUs"), "{md}");

    let page = html(&sut);
    let svg = page
        .find("<svg class=\"glance\"")
        .expect("the glance chart");
    assert!(page.find("<h2 id=\"verdict\">").unwrap() < svg);
    assert!(svg < page.find("<p class=\"line\">").unwrap());
    assert_eq!(page.matches("<g class=\"config\"").count(), 4);
    assert_eq!(page.matches("data-held=\"true\"").count(), 1);
    for key in ["host stall", "preempted", "interrupts", "too small to name"] {
        assert!(
            page.contains(&format!("font-size=\"13\">{key}</text>")),
            "no legend key {key}"
        );
    }
    assert!(!page.contains("<script"));
}

#[test]
fn the_terminal_glance_is_the_same_table_with_the_advice() {
    let sut = load(&fixture("survey-explained")).unwrap();
    let text = ictus_report::glance_table(&sut).unwrap();
    assert!(text.contains("configuration"), "{text}");
    assert!(text.contains("preempted by burner"), "{text}");
    assert!(
        text.contains("advice (real-time, pinned, all loads): interrupts"),
        "{text}"
    );
    assert!(ictus_report::glance_table(&load(&fixture("survey-b")).unwrap()).is_some());
}
