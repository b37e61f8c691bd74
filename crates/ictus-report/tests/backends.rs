//! The backends lay out the document model and nothing else (issue 33): Markdown,
//! HTML and the terminal import the model (`doc`) and the text helpers (`format`)
//! only, never another backend, the content (`results`, `probes`, `glance`,
//! `compare`, `scenario`, `tables`, `plots`) or the crate root. The scan is
//! ictus-exec's `tests/module_graph`, the one the no-circle test uses.

#[path = "../../ictus-exec/tests/module_graph/mod.rs"]
mod module_graph;

use std::path::Path;

/// The backends' modules.
const BACKENDS: [&str; 3] = ["markdown", "html", "terminal"];

/// What a backend may import.
const ALLOWED: [&str; 2] = ["doc", "format"];

#[test]
fn a_backend_imports_the_document_model_and_the_text_helpers_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = module_graph::edges(&src);
    for b in BACKENDS {
        assert!(
            src.join(format!("{b}.rs")).is_file(),
            "the backend {b} is not at src/{b}.rs: update BACKENDS"
        );
    }
    let wrong: Vec<String> = edges
        .iter()
        .filter(|e| BACKENDS.contains(&e.from.as_str()) && !ALLOWED.contains(&e.to.as_str()))
        .map(|e| format!("{} -> {} ({}:{})", e.from, e.to, e.file.display(), e.line))
        .collect();
    assert!(
        wrong.is_empty(),
        "a backend imports what is not the document model or a text helper (put what it \
         needs into the document, built by the content side):\n{}",
        wrong.join("\n")
    );
    // The model itself names nothing of the crate: it is what both sides share.
    let model: Vec<String> = edges
        .iter()
        .filter(|e| e.from == "doc")
        .map(|e| format!("doc -> {} ({}:{})", e.to, e.file.display(), e.line))
        .collect();
    assert!(model.is_empty(), "{}", model.join("\n"));
}

#[test]
fn the_scan_sees_a_backend_that_imports_another() {
    // The scan itself: a backend naming another backend or the content is an edge.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "mod doc;\nmod html;\nmod markdown;\nmod probes;\n",
    )
    .unwrap();
    std::fs::write(src.join("doc.rs"), "pub(crate) struct Document;\n").unwrap();
    std::fs::write(src.join("probes.rs"), "pub(crate) fn tables() {}\n").unwrap();
    std::fs::write(src.join("markdown.rs"), "pub(crate) fn capitalise() {}\n").unwrap();
    std::fs::write(
        src.join("html.rs"),
        "use crate::doc::Document;\nuse crate::markdown::capitalise;\nfn f() { crate::probes::tables(); }\n",
    )
    .unwrap();
    let mut from_html: Vec<String> = module_graph::edges(src)
        .into_iter()
        .filter(|e| e.from == "html")
        .map(|e| e.to)
        .collect();
    from_html.sort();
    from_html.dedup();
    assert_eq!(from_html, ["doc", "markdown", "probes"]);
    // No circle in this crate either (the workspace's test says so for all crates).
    assert!(module_graph::circles(src).is_empty());
}
