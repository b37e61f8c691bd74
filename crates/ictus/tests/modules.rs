//! Every crate's modules import one way: no module imports a module that imports it
//! back (issues 22 and 33). The scan, and what counts as an import, are
//! ictus-exec's `tests/module_graph`; this test runs it on each crate under
//! `crates/` and names every circle with the lines that close it.
//!
//! A crate whose circles are being opened elsewhere goes in [`NOT_YET`] with the
//! reason; the list only shrinks, and an entry whose crate has no circle left is
//! refused too, so it is taken out.

#[path = "../../ictus-exec/tests/module_graph/mod.rs"]
mod module_graph;

use std::path::Path;

/// Crates that still have module circles, each with the reason.
const NOT_YET: &[(&str, &str)] = &[];

#[test]
fn no_crate_has_a_module_that_imports_a_module_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names: Vec<String> = std::fs::read_dir(&crates)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "crates found: {names:?}");
    let mut problems = String::new();
    for name in &names {
        let circles = module_graph::circles(&crates.join(name).join("src"));
        let excused = NOT_YET.iter().find(|(n, _)| n == name);
        match (circles.is_empty(), excused) {
            (false, None) => {
                let report: String = circles.iter().map(ToString::to_string).collect();
                problems += &format!("module circles in {name}:\n{report}\n");
            }
            (true, Some(_)) => {
                problems += &format!("{name} has no circle left: take it out of NOT_YET\n");
            }
            _ => {}
        }
    }
    for (name, _) in NOT_YET {
        if !names.iter().any(|n| n == name) {
            problems += &format!("NOT_YET names {name}, which is not a crate under crates/\n");
        }
    }
    assert!(problems.is_empty(), "{problems}");
}
