//! A probe's name is said once: in the registry (`ictus_record::registry`), from which
//! `ProbeId` and every dispatch over the probes are generated, and inside the probe's
//! own folder (`crates/ictus-probe/src/<probe>/`). This test reads every crate's
//! source and refuses a string literal that names a probe anywhere else, so a probe
//! stays one unit: code that needs a probe's name holds a `ProbeId`.
//!
//! Integration tests (`crates/*/tests`) and fixtures are input data (a command line,
//! a record) and are not read.

mod walk;

use std::path::{Path, PathBuf};

/// Literals spelled like a probe's name that name something else, each with where
/// and why. Keep it short: a new entry needs a reason a reviewer accepts.
const OTHER_MEANINGS: &[(&str, &str, &str)] = &[
    (
        "crates/ictus-os/src/tracefs.rs",
        "irq",
        "the kernel's `irq` trace event group (tracefs events/irq), not the probe",
    ),
    (
        "crates/ictus-exec/src/tap/timeline.rs",
        "rendezvous",
        "a synchronous group's rendezvous (seed 003) as a run's timeline names it, not the probe",
    ),
];

fn probe_names() -> Vec<&'static str> {
    ictus::probe::registry::ProbeId::ALL
        .iter()
        .map(|p| p.name())
        .collect()
}

/// The module folder of a probe in ictus-probe (`loop` for `r#loop`).
fn own_folder(root: &Path, name: &str) -> PathBuf {
    root.join("crates/ictus-probe/src").join(name)
}

#[test]
fn no_probe_name_is_a_string_literal_outside_its_folder_and_the_registry() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let registry = root.join("crates/ictus-record/src/registry.rs");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let src = krate.path().join("src");
        if src.is_dir() {
            files.extend(walk::rust_files(&src));
        }
    }
    assert!(files.len() > 50, "read only {} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        if file == &registry {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for name in probe_names() {
            if file.starts_with(own_folder(&root, name)) {
                continue;
            }
            if OTHER_MEANINGS
                .iter()
                .any(|(f, n, _)| *n == name && rel.ends_with(f))
            {
                continue;
            }
            let quoted = format!("\"{name}\"");
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains(&quoted) {
                    found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a probe's name as a string literal outside its folder and the registry \
         (use ictus_probe::registry::ProbeId):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_a_literal_and_the_registry_names_every_probe_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for name in probe_names() {
        assert!(
            own_folder(&root, name).join("mod.rs").is_file(),
            "probe {name} has no folder crates/ictus-probe/src/{name}/"
        );
    }
    let registry =
        std::fs::read_to_string(root.join("crates/ictus-record/src/registry.rs")).unwrap();
    for name in probe_names() {
        assert!(registry.contains(&format!("\"{name}\"")), "{name}");
    }
}
