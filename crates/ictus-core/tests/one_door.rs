//! Every atomic of `ictus_core::sync` comes through its facade (`sync/atomic.rs`),
//! which switches to loom's model-checked twins under `--cfg loom`: a raw std atomic in
//! a lock-free structure would be one loom never sees. Clippy's `disallowed_types`
//! (the workspace's `clippy.toml`) guards every other crate and module; inside `sync`,
//! where the facade's re-exports look raw to clippy, this test does.

use std::path::Path;

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_facade_names_std_s_or_loom_s_atomics_in_sync() {
    let sync = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sync");
    let mut all = Vec::new();
    files(&sync, &mut all);
    assert!(all.len() > 3, "sync's files: {all:?}");
    let mut raw = Vec::new();
    for path in all.iter().filter(|p| !p.ends_with("atomic.rs")) {
        let text = std::fs::read_to_string(path).unwrap();
        // The unit tests at the bottom of a file may count with std's atomics (they
        // run without loom); the code above them may not.
        let code = text.split("#[cfg(all(test, not(loom)))]").next().unwrap();
        let code = code.split("#[cfg(test)]").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap();
            if line.contains("std::sync::atomic") || line.contains("loom::sync::atomic") {
                raw.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        raw.is_empty(),
        "atomics not through sync/atomic.rs:\n{}",
        raw.join("\n")
    );
}
