//! The module scan ([`module_graph`]) that keeps every crate's modules importing one
//! way (issue 22; the test over every crate is crates/ictus/tests/modules.rs), tested
//! on small trees; and what ictus-exec must not depend on.

mod module_graph;

use std::fs;
use std::path::Path;

#[test]
fn the_scan_finds_a_circle_through_a_parent_and_ignores_tests_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    fs::create_dir(src.join("run")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "pub mod run;\npub mod link;\npub mod quiet;\n",
    )
    .unwrap();
    // The parent uses its child; the child uses an item of its parent: a circle.
    fs::write(
        src.join("run/mod.rs"),
        "mod start;\nuse start::Startup;\npub struct Report;\n",
    )
    .unwrap();
    fs::write(
        src.join("run/start.rs"),
        "use super::Report;\npub struct Startup;\n",
    )
    .unwrap();
    // link and quiet name each other only in comments, strings and tests.
    fs::write(
        src.join("link.rs"),
        "use crate::{run::Report, quiet as _};\n// crate::quiet::X\nconst S: &str = \"crate::quiet\";\n",
    )
    .unwrap();
    fs::write(
        src.join("quiet.rs"),
        "#[cfg(test)]\nmod tests {\n    use crate::link::S;\n}\n\
         #[cfg(all(test, not(loom)))]\nmod more {\n    use crate::link::S;\n}\n",
    )
    .unwrap();

    let sut = module_graph::circles(src);

    assert_eq!(sut.len(), 1, "{sut:?}");
    assert_eq!(sut[0].modules, ["run", "run::start"]);
    let edges: Vec<_> = sut[0]
        .edges
        .iter()
        .map(|e| format!("{} -> {} {}:{}", e.from, e.to, e.file.display(), e.line))
        .collect();
    assert_eq!(
        edges,
        [
            "run -> run::start run/mod.rs:2",
            "run::start -> run run/start.rs:1"
        ]
    );
    let all = module_graph::edges(src);
    assert!(all.iter().any(|e| e.from == "link" && e.to == "quiet"));
    assert!(!all.iter().any(|e| e.from == "quiet"), "{all:?}");
}

#[test]
fn ictus_exec_does_not_depend_on_the_shield() {
    // The task classes are ictus-class's; the shield sits beside the executive.
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("ictus-shield"),
        "ictus-exec's Cargo.toml names ictus-shield:\n{manifest}"
    );
}
