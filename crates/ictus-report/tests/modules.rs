//! The modules of ictus-report import one way: no module imports a module that imports
//! it back (issue 33). The scan is ictus-exec's (`module_graph`).

#[path = "../../ictus-exec/tests/module_graph/mod.rs"]
mod module_graph;

use std::path::Path;

#[test]
fn no_module_of_ictus_report_imports_a_module_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let circles = module_graph::circles(&src);
    let report: String = circles.iter().map(ToString::to_string).collect();
    assert!(
        circles.is_empty(),
        "module circles in ictus-report:\n{report}"
    );
}
