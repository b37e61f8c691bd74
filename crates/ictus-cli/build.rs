//! Puts the git commit of the source into `ictus --version` (`ICTUS_COMMIT`): the
//! short hash where git and the repository are present, `unknown` where not (a
//! source tarball, no git installed). Never fails the build.
#![allow(
    clippy::print_stdout,
    reason = "cargo reads a build script's instructions on its stdout"
)]

use std::path::Path;
use std::process::Command;

/// `git ARGS` run in this crate's folder: its first line of output, when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ICTUS_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself (a checkout), the branch it names (a
    // commit) and the packed refs. Only files that exist: cargo reruns a script every
    // build for a path that does not.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
