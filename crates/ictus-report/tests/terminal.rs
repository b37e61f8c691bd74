//! The terminal view of every probe's fixture records, view and footer, byte for byte
//! as `ictus probe <probe>` printed them when the views lived in the CLI
//! (`fixtures/terminal/expected/`, written by the CLI's own render functions before
//! they moved here; `terminal-run-ring.txt` is `ictus run`'s view of
//! `terminal/run-ring.json`, the executive's example run with latencies, written by the
//! CLI's `run_view::render` before it moved here in issue 33).

use std::path::Path;

use ictus_probe::record::RunRecord;

#[test]
fn every_fixture_record_prints_as_the_cli_printed_it() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let expected = fixtures.join("terminal/expected");
    let mut checked = 0;
    for entry in std::fs::read_dir(&expected).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let (dir, name) = ["survey-a", "survey-b", "survey-explained", "terminal"]
            .iter()
            .find_map(|d| Some((*d, stem.strip_prefix(&format!("{d}-"))?)))
            .unwrap_or_else(|| panic!("{stem}: no fixture directory"));
        let text =
            std::fs::read_to_string(fixtures.join(dir).join(format!("{name}.json"))).unwrap();
        let record: RunRecord = serde_json::from_str(&text).unwrap();
        let sut =
            ictus_report::probes::terminal(&record) + &ictus_report::terminal::footer(&record);
        let want = std::fs::read_to_string(&path).unwrap();
        assert!(
            sut == want,
            "{stem}: the view differs\n--- now\n{sut}\n--- before\n{want}"
        );
        checked += 1;
    }
    assert_eq!(checked, 29);
}

#[test]
fn every_probe_has_a_pinned_view() {
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/terminal/expected");
    let names: Vec<String> = std::fs::read_dir(expected)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for p in ictus_probe::registry::ProbeId::ALL {
        assert!(
            names.iter().any(|n| n.contains(&format!("-{p}-"))),
            "no pinned view of {p}"
        );
    }
}

/// The footer of a run whose misses were explained: the misses as time by cause with
/// the share the counters account for, then the advice that follows from the cause
/// that cost most (here a disk's interrupt line, and how to steer it).
#[test]
fn the_footer_gives_the_misses_as_time_by_cause_and_the_advice() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/survey-explained/loop-rt-pinned-all.json");
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sut = ictus_report::terminal::footer(&record);
    assert!(
        sut.contains(
            "3 misses: 2 with interrupts 360.0 us, 1 preempted by kworker/1:2 150.0 us; \
             counters here account for 92 % of 560.0 us late"
        ),
        "{sut}"
    );
    assert!(
        sut.contains("  advice: interrupts cost most (360.0 us of 560.0 us late"),
        "{sut}"
    );
    assert!(sut.contains("/proc/irq/36/smp_affinity_list"), "{sut}");
}
