//! A room holds what a reader holds in mind (STYLE.md, review of 2026-11-28): a file
//! past about 1,000 lines is asking to be split by concern, and past 1,500 it must be,
//! in the change that grows it. This test reads every `.rs` file under `crates/`
//! (sources, tests, examples) and refuses one over [`MAX_LINES`], naming each with its
//! line count.
//!
//! A file that cannot be split in the change that finds it goes in [`NOT_YET_SPLIT`]
//! with the reason; the list only shrinks, and an entry whose file is gone or back
//! under the limit is refused too, so it is taken out.

mod walk;

use std::path::Path;

/// The most lines a Rust file under `crates/` may have.
const MAX_LINES: usize = 1_500;

/// Files over [`MAX_LINES`] that are being split elsewhere, each with the reason.
/// Keep it short: an entry needs a reason a reviewer accepts.
const NOT_YET_SPLIT: &[(&str, &str)] = &[];

/// Every `.rs` file under `crates/`, with its path relative to the workspace (`/`
/// separated) and its line count (as `wc -l` counts them).
fn line_counts() -> Vec<(String, usize)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files = walk::rust_files(&root.join("crates"));
    assert!(!files.is_empty(), "no .rs file under {}", root.display());
    files
        .iter()
        .map(|f| {
            let text = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let lines = text.iter().filter(|&&b| b == b'\n').count();
            let rel = f.strip_prefix(&root).unwrap_or(f);
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            (rel.join("/"), lines)
        })
        .collect()
}

#[test]
fn no_rust_file_under_crates_is_over_1500_lines() {
    let offenders: Vec<String> = line_counts()
        .into_iter()
        .filter(|(path, lines)| *lines > MAX_LINES && !NOT_YET_SPLIT.iter().any(|(p, _)| p == path))
        .map(|(path, lines)| format!("  {path}: {lines} lines"))
        .collect();
    assert!(
        offenders.is_empty(),
        "files over {MAX_LINES} lines (split each by what it holds, as \
         crates/ictus-exec/src/cell/ was split):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn every_file_not_yet_split_is_still_over_the_limit() {
    let counts = line_counts();
    let stale: Vec<String> = NOT_YET_SPLIT
        .iter()
        .filter_map(|(path, _)| match counts.iter().find(|(p, _)| p == path) {
            None => Some(format!("  {path}: gone")),
            Some((_, lines)) if *lines <= MAX_LINES => Some(format!("  {path}: {lines} lines")),
            Some(_) => None,
        })
        .collect();
    assert!(
        stale.is_empty(),
        "take these out of NOT_YET_SPLIT, they are split or under {MAX_LINES} lines:\n{}",
        stale.join("\n")
    );
}
