//! One home per concept: no two public types of the same name in the workspace's
//! libraries, unless they are different concepts and [`DIFFERENT`] says why.
//!
//! The test reads `crates/*/src` as text and collects every `pub struct`, `pub enum`,
//! `pub type` and `pub trait` outside `#[cfg(test)]` code. A name declared in two
//! places fails the test unless it is listed below. An entry whose name is no longer
//! declared twice fails it too, so the list only shrinks with the debt it records.

#![allow(clippy::print_stdout)] // it lists what it finds, for `--nocapture`

mod walk;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Names declared more than once on purpose: the places are different concepts that
/// happen to share a word. Each entry says what each one is.
const DIFFERENT: &[(&str, &str)] = &[
    (
        "Args",
        "each probe's command-line arguments (its folder's cli::Args, behind the cli feature): one per probe, each of its own shape, named alike so the registry generates the probe subcommands",
    ),
    (
        "Class",
        "shield: a task class (RT0, RT1, NRT); probe survey: how a survey configuration scheduled its threads",
    ),
    (
        "Config",
        "report: a cell of the survey matrix; shield watchdog and balancer: each one's own tuning",
    ),
    (
        "ParamsRecord",
        "each probe's own parameters as recorded: one per probe, each of its own shape",
    ),
    (
        "Plan",
        "probe throughput: a sender's warm-up and length; shield plan: the shield's changes in order",
    ),
    (
        "Status",
        "exec control: where a subsystem is in its life; probe doctor: how a feature stands",
    ),
    (
        "Verdict",
        "probe survey: the survey's verdict against the target loop; probe doctor: the audit's conclusion",
    ),
];

/// A public type's declaration: where it is.
#[derive(Debug)]
struct Place {
    file: PathBuf,
    line: usize,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether an attribute line compiles what follows only for tests
/// (`#[cfg(test)]`, `#[cfg(all(test, not(loom)))]`), not `#[cfg(not(test))]`.
fn is_test_only(attribute: &str) -> bool {
    let a: String = attribute.chars().filter(|c| !c.is_whitespace()).collect();
    a.starts_with("#[cfg(")
        && (a.contains("(test)") || a.contains("(test,") || a.contains(",test"))
        && !a.contains("not(test")
}

/// The public type declared on this line, if any: `pub struct Name`, `pub enum
/// Name`, `pub type Name` or `pub trait Name`. Uninhabited enums (`pub enum Name {}`)
/// are type-level markers, not types of values, and are left out.
fn declared(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("pub ")?;
    let (keyword, rest) = rest.split_once(' ')?;
    if !matches!(keyword, "struct" | "enum" | "type" | "trait") {
        return None;
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return None;
    }
    if keyword == "enum" && rest[name.len()..].trim() == "{}" {
        return None;
    }
    Some(name)
}

/// Every public type in `crates/*/src`, outside test-only items.
fn public_types() -> BTreeMap<String, Vec<Place>> {
    let crates = root().join("crates");
    let mut files = Vec::new();
    let mut dirs: Vec<_> = fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        files.extend(walk::rust_files(&dir));
    }
    let mut found: BTreeMap<String, Vec<Place>> = BTreeMap::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        // Inside a test-only item: the brace depth at which it ends.
        let mut skip_until: Option<i64> = None;
        let mut test_attribute = false;
        let mut depth: i64 = 0;
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if skip_until.is_none() {
                if is_test_only(code.trim()) {
                    test_attribute = true;
                } else if test_attribute
                    && !code.trim().starts_with("#[")
                    && !code.trim().is_empty()
                {
                    test_attribute = false;
                    if code.contains('{') {
                        skip_until = Some(depth);
                    }
                } else if let Some(name) = declared(code) {
                    found.entry(name).or_default().push(Place {
                        file: file.strip_prefix(root()).unwrap_or(&file).to_path_buf(),
                        line: i + 1,
                    });
                }
            }
            for c in code.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if skip_until.is_some_and(|d| depth <= d) {
                skip_until = None;
            }
        }
    }
    found
}

#[test]
fn no_two_public_types_share_a_name_unless_they_are_different_concepts() {
    let found = public_types();
    let twice: BTreeMap<&str, &Vec<Place>> = found
        .iter()
        .filter(|(_, p)| p.len() > 1)
        .map(|(n, p)| (n.as_str(), p))
        .collect();
    let listed = |list: &[(&str, &str)], name: &str| list.iter().any(|(n, _)| *n == name);

    println!("public type names declared more than once:");
    for (name, places) in &twice {
        let verdict = if listed(DIFFERENT, name) {
            "different concepts"
        } else {
            "ONE CONCEPT, TWO HOMES"
        };
        println!("  {name} ({verdict})");
        for p in places.iter() {
            println!("    {}:{}", p.file.display(), p.line);
        }
    }

    let mut failures = Vec::new();
    for (name, places) in &twice {
        if !listed(DIFFERENT, name) {
            let at: Vec<_> = places
                .iter()
                .map(|p| format!("{}:{}", p.file.display(), p.line))
                .collect();
            failures.push(format!(
                "`{name}` is declared {} times ({}): give the concept one home, or \
                 rename one, or add it to DIFFERENT saying why they differ",
                places.len(),
                at.join(", ")
            ));
        }
    }
    for (name, _) in DIFFERENT {
        if !twice.contains_key(*name) {
            failures.push(format!(
                "`{name}` is no longer declared twice: remove it from DIFFERENT"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_scan_sees_declarations_and_skips_test_code() {
    assert_eq!(declared("pub struct Nanos(u64);").as_deref(), Some("Nanos"));
    assert_eq!(declared("    pub enum Flow {").as_deref(), Some("Flow"));
    assert_eq!(declared("pub trait Kind {").as_deref(), Some("Kind"));
    assert_eq!(
        declared("pub type Result<T> = ...;").as_deref(),
        Some("Result")
    );
    assert_eq!(declared("pub enum Knee {}"), None);
    assert_eq!(declared("pub(crate) struct Hidden;"), None);
    assert_eq!(declared("pub fn structure() {}"), None);
    assert!(is_test_only("#[cfg(test)]"));
    assert!(is_test_only("#[cfg(all(test, not(loom)))]"));
    assert!(!is_test_only("#[cfg(not(test))]"));
    assert!(!is_test_only("#[cfg(loom)]"));
}
