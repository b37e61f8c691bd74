//! What a run's parts are called and where they are found: its shared-memory
//! segments, named after the run, and the programs its schedule names.

use std::path::{Path, PathBuf};

/// Name of the control block's segment of run `name`.
pub fn control_segment(name: &str) -> String {
    format!("{name}.ctl")
}

/// Name of the cells' segment of run `name`.
pub fn cells_segment(name: &str) -> String {
    format!("{name}.cells")
}

/// Name of the tap's segment of run `name` (its rings, when programs take part
/// in a recorded or traced run).
pub fn tap_segment(name: &str) -> String {
    format!("{name}.tap")
}

/// Name of the hubs' segment of run `name`.
pub fn hubs_segment(name: &str) -> String {
    format!("{name}.hubs")
}

/// The program a schedule names: a path with a slash is relative to the schedule's
/// folder; a bare name is looked up in `dirs`, next to the running executable, in its
/// `examples/` folder (and its parent's, for test binaries), then in `PATH`.
pub fn resolve_program(program: &str, schedule_dir: &Path, dirs: &[PathBuf]) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            schedule_dir.join(p)
        };
        return p.is_file().then_some(p);
    }
    let mut candidates: Vec<PathBuf> = dirs.to_vec();
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        candidates.push(dir.to_path_buf());
        candidates.push(dir.join("examples"));
        if let Some(up) = dir.parent() {
            candidates.push(up.to_path_buf());
            candidates.push(up.join("examples"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    // As execvp does: the first executable file of the name (a plain file without
    // an execute bit is passed over, and reported only if nothing else is found).
    let found: Vec<PathBuf> = candidates
        .into_iter()
        .map(|d| d.join(program))
        .filter(|p| p.is_file())
        .collect();
    found
        .iter()
        .find(|p| is_executable(p))
        .or(found.first())
        .cloned()
}

/// Whether `path` is a file with an execute bit (root may execute any file with
/// one; others need theirs, which `spawn` reports precisely if missing).
pub(super) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
