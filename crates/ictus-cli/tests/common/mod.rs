//! Helpers shared by the CLI's end-to-end tests.

use std::process::{Child, Output};
use std::time::Duration;

/// Waits for `child` at most `limit`, reading its output meanwhile (a record
/// larger than a pipe would otherwise block it); kills it and fails when it does
/// not end.
pub(crate) fn finish(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            let out = rx.recv().unwrap().unwrap();
            panic!(
                "ictus (process {pid}) did not end within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The seed 003 stress schedule (A and C in-process, B in a process of its own)
/// under another run name, in `dir`.
#[allow(dead_code)] // not every test binary that shares this module runs it
pub(crate) fn stress_copy(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/stress");
    let text = std::fs::read_to_string(examples.join("schedule.toml"))
        .unwrap()
        .replace("name = \"stress\"", &format!("name = \"{name}\""));
    std::fs::copy(examples.join("cells.toml"), dir.join("cells.toml")).unwrap();
    let path = dir.join("schedule.toml");
    std::fs::write(&path, text).unwrap();
    path
}
