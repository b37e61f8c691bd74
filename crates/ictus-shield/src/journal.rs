//! The undo journal: JSON lines, append-only, each entry written and fsync'd *before*
//! the change it undoes. The first line is the header: a shield is applied while the
//! journal exists. A torn last line (the process killed mid-write) is ignored: its
//! change had not started.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::ShieldError;

/// One journal line. Every entry has `kind`, `path` and `prior_value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A shield is (being) applied. `path` is the cpuset root.
    Header {
        /// The cpuset root.
        path: PathBuf,
        /// Always empty: the header restores nothing.
        prior_value: String,
        /// RT CPUs.
        rt_cpus: CpuSet,
        /// NRT CPUs.
        nrt_cpus: CpuSet,
        /// cgroup version used.
        cgroup_version: u8,
        /// The applying process.
        pid: u32,
    },
    /// A file held `prior_value` before the shield wrote it.
    Write {
        /// The file.
        path: PathBuf,
        /// What it held.
        prior_value: String,
    },
    /// The shield created this directory (`prior_value` is `absent`).
    Mkdir {
        /// The directory.
        path: PathBuf,
        /// Always `absent`.
        prior_value: String,
    },
    /// A thread was in the group whose `tasks` file is `path`, with affinity `prior_value`.
    Task {
        /// The `tasks` file of its prior group.
        path: PathBuf,
        /// Its affinity before.
        prior_value: CpuSet,
        /// Thread id.
        tid: i32,
        /// Start time, to tell a reused id apart.
        start_time: u64,
        /// Its cpuset before (`/proc/<tid>/cpuset`).
        #[serde(default)]
        cpuset: String,
        /// Only the affinity was journaled (cgroup v2): reset leaves its group alone.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        affinity_only: bool,
    },
    /// irqbalance (`path` is its `/proc/<pid>` directory) was running and was stopped.
    Irqbalance {
        /// `/proc/<pid>`.
        path: PathBuf,
        /// `running`.
        prior_value: String,
    },
    /// The shield started a watchdog process (`path` is its `/proc/<pid>` directory);
    /// reset stops it, by pid only while its start time matches.
    Watchdog {
        /// `/proc/<pid>`.
        path: PathBuf,
        /// Always `absent`: there was no watchdog before.
        prior_value: String,
        /// Its process id.
        pid: i32,
        /// Its start time (`/proc/<pid>/stat` field 22), to tell a reused id apart.
        start_time: u64,
        /// Its limit, in milliseconds.
        limit_ms: u64,
        /// Its log of demotions (JSON lines).
        log: PathBuf,
    },
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
}

fn journal_error(path: &Path) -> impl FnOnce(std::io::Error) -> ShieldError + '_ {
    move |source| ShieldError::Journal {
        path: path.to_path_buf(),
        source,
    }
}

impl Journal {
    /// Creates a new journal; refuses if one exists (a shield is already applied).
    pub fn create(path: &Path) -> Result<Journal, ShieldError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(journal_error(path))?;
        }
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ShieldError::AlreadyApplied {
                        journal: path.to_path_buf(),
                    }
                } else {
                    journal_error(path)(e)
                }
            })?;
        sync_dir(path);
        Ok(Journal {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends one entry and waits until it is on disk.
    pub fn append(&mut self, entry: &Entry) -> Result<(), ShieldError> {
        let mut line = serde_json::to_string(entry).map_err(|e| ShieldError::Journal {
            path: self.path.clone(),
            source: e.into(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(journal_error(&self.path))
    }
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        // Best effort: the entry of the file itself in its directory.
        let _ = d.sync_all();
    }
}

/// Parses a journal's text. A last line without its newline is torn and ignored.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Entry>, ShieldError> {
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| {
                ShieldError::BadJournal(ictus_os::fs::Located {
                    file: path.display().to_string(),
                    place: ictus_os::json::Place {
                        line: i + 1,
                        column: e.column().max(1),
                    },
                    what: format!(
                        "not a shield journal entry: {}",
                        e.to_string().split(" at line ").next().unwrap_or("")
                    ),
                })
            })
        })
        .collect()
}

/// Reads the journal; `None` when there is none (no shield applied). A FIFO, a
/// device or a directory in its place is refused without blocking, as is a file
/// over [`InputKind::Journal`](ictus_os::fs::InputKind::Journal)'s limit or one that is not UTF-8 (with its line and column).
pub fn read(path: &Path) -> Result<Option<Vec<Entry>>, ShieldError> {
    match ictus_os::fs::read_input(path, ictus_os::fs::InputKind::Journal.max_bytes()) {
        Ok(text) => parse(path, &text).map(Some),
        Err(ictus_os::fs::InputError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(ShieldError::JournalInput(e)),
    }
}

/// The watchdog process the journal at `path` names: its pid and start time (which
/// together tell it from a later process given the same pid); `None` when there is
/// no journal or it names no watchdog.
pub fn watchdog(path: &Path) -> Result<Option<(i32, u64)>, ShieldError> {
    Ok(read(path)?.and_then(|entries| {
        entries.into_iter().find_map(|e| match e {
            Entry::Watchdog {
                pid, start_time, ..
            } => Some((pid, start_time)),
            _ => None,
        })
    }))
}

/// Removes the journal once everything is restored.
pub fn remove(path: &Path) -> Result<(), ShieldError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            sync_dir(path);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(journal_error(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_torn_last_line_is_ignored() {
        let dir = std::env::temp_dir().join(format!("ictus-journal-{}", std::process::id()));
        let path = dir.join("j");
        let _ = std::fs::remove_file(&path);
        let mut sut = Journal::create(&path).unwrap();
        let entry = Entry::Write {
            path: "/proc/irq/1/smp_affinity_list".into(),
            prior_value: "0-1".into(),
        };
        sut.append(&entry).unwrap();
        let watchdog = Entry::Watchdog {
            path: "/proc/77".into(),
            prior_value: "absent".into(),
            pid: 77,
            start_time: 1234,
            limit_ms: 1000,
            log: "/run/ictus/shield.watchdog.log".into(),
        };
        sut.append(&watchdog).unwrap();
        assert!(matches!(
            Journal::create(&path),
            Err(ShieldError::AlreadyApplied { .. })
        ));
        let mut text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"kind":"write","path":"#));
        text.push_str(r#"{"kind":"wri"#);
        assert_eq!(parse(&path, &text).unwrap(), vec![entry, watchdog]);
        assert_eq!(super::watchdog(&path).unwrap(), Some((77, 1234)));
        remove(&path).unwrap();
        assert_eq!(read(&path).unwrap(), None);
        assert_eq!(super::watchdog(&path).unwrap(), None);
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn a_bad_complete_line_names_its_line() {
        let sut = parse(Path::new("j"), "{}\n");
        assert!(matches!(&sut, Err(ShieldError::BadJournal(l)) if l.place.line == 1));
    }
}
