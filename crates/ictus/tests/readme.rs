//! The README's minimal subsystem is the example that CI builds and runs: its Rust
//! block is the example's snippet, character for character.

#[test]
fn the_readme_s_minimal_subsystem_is_the_example_s_snippet() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example =
        std::fs::read_to_string(format!("{root}/crates/ictus/examples/minimal.rs")).unwrap();
    let begin = "// --- the README's snippet, verbatim";
    let start = example.find(begin).expect("the snippet's start marker");
    let start = start + example[start..].find('\n').unwrap() + 1;
    let end = example
        .find("// --- end of the snippet")
        .expect("the snippet's end marker");
    let snippet = example[start..end].trim_end();
    let block = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a rust block in the README");
    assert_eq!(block, snippet, "README.md and examples/minimal.rs differ");
    assert!(snippet.contains("use ictus::prelude::*;"));
    assert!(snippet.contains("fn init(reg: &mut Registry) -> Result<Self, RegistryError>"));
}
