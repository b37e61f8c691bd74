//! POSIX shared memory segments (`shm_open(3)`) that no crash can leave in the
//! way: the memory of the communication cells and hubs shared between the
//! processes of a run.
//!
//! A segment has a logical name (`cells`, `stress.hubs`) and lives in
//! `/dev/shm` as `ictus-<name>-<pid>-<start>`, where `<pid>` and `<start>` are
//! the process id of its owner (the creator) and that process's start time
//! (field 22 of `/proc/<pid>/stat`, in clock ticks since boot). The pair names
//! one process for the life of the machine, even when the pid is reused, so
//! whether an owner is alive is a question `/proc` answers exactly.
//!
//! - [`Segment::create`] takes a lock on `/dev/shm` (`flock(2)`, which the
//!   kernel drops if the process dies), looks for segments of the same logical
//!   name, removes those whose owner is dead (gone, a zombie, or a different
//!   process under a reused pid), refuses with [`ShmError::OwnerAlive`] if one
//!   is alive, then makes its own, initialises it and marks it ready.
//! - [`Segment::open`] finds the segment of the live owner and maps it,
//!   waiting (a little) until its creator has marked it ready.
//! - The owner's segment is unlinked when the owner drops it; a crash leaves
//!   it behind, and the next `create` of the name (or [`reclaim_stale`])
//!   removes it. No stale segment ever poisons a name.
//!
//! The segment starts with a 128-byte header (magic, version, owner, layout,
//! ready flag), then two areas that the caller uses only through atomics:
//! `words64` 64-bit words ([`Segment::words`]) and, from the next 128-byte
//! boundary, `words32` 32-bit words ([`Segment::words32`], for futexes). The two
//! areas never overlap, so no location is ever accessed with two sizes.
//!
//! ```
//! use ictus_os::shm::Segment;
//! use std::sync::atomic::Ordering;
//!
//! let name = format!("doc-shm-{}", std::process::id());
//! let owner = Segment::create(&name, 4, 2, |words, _| {
//!     // Relaxed: published by the ready flag that `create` sets after this.
//!     words[0].store(42, Ordering::Relaxed);
//! })
//! .unwrap();
//! let other = Segment::open(&name).unwrap();
//! assert_eq!(other.words()[0].load(Ordering::Relaxed), 42);
//! assert_eq!(other.owner().pid, std::process::id());
//! drop(other);
//! drop(owner); // unlinks it
//! assert!(Segment::open(&name).is_err());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the protocols on them are ictus_core::sync's (seqlock, hub), model-checked there, or this file's, tested across processes"
)]

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::process::ProcessId;
use thiserror::Error;

/// Where Linux keeps POSIX shared memory objects.
pub const SHM_DIR: &str = "/dev/shm";

/// The prefix of every ictus segment's file name in [`SHM_DIR`].
pub const PREFIX: &str = "ictus-";

/// "ictusSHM", little-endian: the first word of every segment.
const MAGIC: u64 = u64::from_le_bytes(*b"ictusSHM");
/// The version of the header layout.
const VERSION: u64 = 1;
/// Header words (128 bytes).
const HEADER_WORDS: usize = 16;
/// Header word indices.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 1;
const H_PID: usize = 2;
const H_START: usize = 3;
const H_WORDS64: usize = 4;
const H_WORDS32: usize = 5;
const H_READY: usize = 6;
/// Alignment of the 32-bit area.
const AREA_ALIGN: usize = 128;
/// How long `open` waits for a creator to mark its segment ready.
const READY_WAIT: Duration = Duration::from_secs(2);
/// Longest logical name.
const MAX_NAME: usize = 200;

/// Why a segment could not be made, found or mapped.
#[derive(Debug, Error)]
pub enum ShmError {
    /// The logical name is empty, too long, or has a character other than
    /// ASCII letters, digits, `_`, `.` and `-`.
    #[error("`{name}` is not a valid segment name: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A live process already owns a segment of this name.
    #[error(
        "shared memory `{name}` is owned by process {pid}, which is still running \
         (segment {path}); stop it, or choose another name"
    )]
    OwnerAlive {
        /// The logical name.
        name: String,
        /// The owner's process id.
        pid: u32,
        /// The segment's path in /dev/shm.
        path: String,
    },
    /// No live owner has a segment of this name.
    #[error("no running process owns shared memory `{name}` (is the owner started?)")]
    NotFound {
        /// The logical name.
        name: String,
    },
    /// A system call failed.
    #[error("{op} {path}: {source}")]
    Os {
        /// The call: `shm_open`, `ftruncate`, `mmap`, ...
        op: &'static str,
        /// The path or name it was about.
        path: String,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// The file has the right name but is not an ictus segment of this version,
    /// or is shorter than its header says.
    #[error("{path} is not a usable ictus segment: {reason}")]
    Corrupt {
        /// The segment's path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The owner is alive but has not finished initialising the segment.
    #[error("{path} was not marked ready within {waited_ms} ms")]
    NotReady {
        /// The segment's path.
        path: String,
        /// How long `open` waited.
        waited_ms: u64,
    },
    /// The layout does not fit in memory.
    #[error("a segment of {words64} 64-bit and {words32} 32-bit words is too large")]
    TooLarge {
        /// 64-bit words asked for.
        words64: usize,
        /// 32-bit words asked for.
        words32: usize,
    },
}

/// This process, as the owner of the segments it creates.
fn current_owner() -> Result<ProcessId, ShmError> {
    ProcessId::current().map_err(|source| ShmError::Os {
        op: "reading the start time in",
        path: format!("/proc/{}/stat", std::process::id()),
        source,
    })
}

/// Checks a logical name.
fn check_name(name: &str) -> Result<(), ShmError> {
    let bad = |reason| {
        Err(ShmError::BadName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME {
        return bad("it is longer than 200 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return bad("only ASCII letters, digits, `_`, `.` and `-` are allowed");
    }
    Ok(())
}

/// The file name (in /dev/shm) of the segment `name` owned by `owner`.
fn file_name(name: &str, owner: ProcessId) -> String {
    format!("{PREFIX}{name}-{}", owner.key())
}

/// The logical name and owner encoded in a file name of /dev/shm, if it is
/// an ictus segment's.
pub fn parse_file_name(file: &str) -> Option<(&str, ProcessId)> {
    let rest = file.strip_prefix(PREFIX)?;
    let mut parts = rest.rsplitn(3, '-');
    let start_time = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let name = parts.next().filter(|n| !n.is_empty())?;
    Some((name, ProcessId { pid, start_time }))
}

/// A segment found in /dev/shm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The logical name.
    pub name: String,
    /// Its owner, as its file name says.
    pub owner: ProcessId,
    /// The file name in /dev/shm.
    pub file: String,
    /// Whether the owner is still running.
    pub alive: bool,
}

/// The ictus segments in /dev/shm, of the logical name `name` or of any name.
pub fn list(name: Option<&str>) -> Result<Vec<Found>, ShmError> {
    let entries = std::fs::read_dir(SHM_DIR).map_err(|source| ShmError::Os {
        op: "listing",
        path: SHM_DIR.into(),
        source,
    })?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let Some((n, owner)) = parse_file_name(file) else {
            continue;
        };
        if name.is_some_and(|want| want != n) {
            continue;
        }
        found.push(Found {
            name: n.to_owned(),
            owner,
            file: file.to_owned(),
            alive: owner.is_alive(),
        });
    }
    found.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(found)
}

/// Removes every ictus segment (of `name`, or of any name) whose owner is
/// dead; returns the file names removed.
pub fn reclaim_stale(name: Option<&str>) -> Result<Vec<String>, ShmError> {
    let _lock = DirLock::exclusive()?;
    reclaim_locked(name)
}

/// [`reclaim_stale`] with the directory lock already held.
fn reclaim_locked(name: Option<&str>) -> Result<Vec<String>, ShmError> {
    let mut removed = Vec::new();
    for f in list(name)? {
        if !f.alive {
            unlink(&f.file)?;
            removed.push(f.file);
        }
    }
    Ok(removed)
}

/// `shm_unlink` of a file name in /dev/shm; a name already gone is fine.
fn unlink(file: &str) -> Result<(), ShmError> {
    let c = c_name(file)?;
    // SAFETY: `c` is a NUL-terminated string that lives for the call.
    let rc = unsafe { libc::shm_unlink(c.as_ptr()) };
    if rc != 0 {
        let source = io::Error::last_os_error();
        if source.raw_os_error() != Some(libc::ENOENT) {
            return Err(ShmError::Os {
                op: "shm_unlink",
                path: path_of(file),
                source,
            });
        }
    }
    Ok(())
}

/// `/<file>` as a C string, the form `shm_open` takes.
fn c_name(file: &str) -> Result<CString, ShmError> {
    CString::new(format!("/{file}")).map_err(|_| ShmError::BadName {
        name: file.to_owned(),
        reason: "it holds a NUL byte",
    })
}

/// The path of a file name of /dev/shm.
fn path_of(file: &str) -> String {
    format!("{SHM_DIR}/{file}")
}

/// An exclusive `flock` on /dev/shm itself, held while segments are looked up
/// and created, so two creators of one name cannot both succeed. The kernel
/// drops it when the descriptor closes, or when the process dies.
struct DirLock {
    _fd: OwnedFd,
}

impl DirLock {
    fn exclusive() -> Result<DirLock, ShmError> {
        let os = |op, source| ShmError::Os {
            op,
            path: SHM_DIR.into(),
            source,
        };
        let dir = CString::new(SHM_DIR).expect("no NUL in the directory name");
        // SAFETY: `dir` is a NUL-terminated path that lives for the call; open takes
        // no further argument without O_CREAT.
        let fd = unsafe {
            libc::open(
                dir.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(os("opening", io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by open, is open, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        loop {
            // SAFETY: flock takes an open descriptor and flags; it touches no memory.
            let rc = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _fd: fd });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(os("locking", e));
            }
        }
    }
}

/// Byte offsets of the two areas and the total length of a layout.
fn layout(words64: usize, words32: usize) -> Option<(usize, usize, usize)> {
    let off64 = HEADER_WORDS * 8;
    let end64 = words64.checked_mul(8)?.checked_add(off64)?;
    let off32 = end64.checked_next_multiple_of(AREA_ALIGN)?;
    let end32 = words32.checked_mul(4)?.checked_add(off32)?;
    let total = end32.checked_next_multiple_of(4096)?;
    (total <= isize::MAX as usize).then_some((off64, off32, total))
}

/// A mapped shared memory segment, unmapped on drop and, for its owner,
/// unlinked then too.
pub struct Segment {
    /// What mmap returned: `len` bytes, page aligned.
    map: NonNull<u8>,
    len: usize,
    /// Byte offsets of the two areas.
    off64: usize,
    off32: usize,
    words64: usize,
    words32: usize,
    /// The logical name.
    name: String,
    /// The file name in /dev/shm.
    file: String,
    owner: ProcessId,
    /// Whether this mapping is the owner's (unlinks on drop).
    owned: bool,
    /// Stale segments `create` removed.
    reclaimed: Vec<String>,
}

// SAFETY: a Segment owns its mapping (like a Box); the memory stays mapped until
// drop, and moving the handle to another thread moves that ownership.
unsafe impl Send for Segment {}
// SAFETY: through `&Segment` the memory is only reachable as `&[AtomicU64]` and
// `&[AtomicU32]` (and the header, read atomically), which are Sync; every access
// from this and other processes is atomic.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates the segment `name` owned by this process, with `words64` 64-bit
    /// words and `words32` 32-bit words (all zero), lets `init` fill them, and
    /// marks it ready for [`open`](Self::open).
    ///
    /// Segments of the same name left by dead owners are removed first (see
    /// [`reclaimed`](Self::reclaimed)); a live owner's is left alone and the
    /// call fails with [`ShmError::OwnerAlive`].
    pub fn create(
        name: &str,
        words64: usize,
        words32: usize,
        init: impl FnOnce(&[AtomicU64], &[AtomicU32]),
    ) -> Result<Segment, ShmError> {
        Segment::create_as(name, current_owner()?, words64, words32, init)
    }

    /// [`create`](Self::create) in the name of `owner` (tests fake dead owners
    /// with it).
    fn create_as(
        name: &str,
        owner: ProcessId,
        words64: usize,
        words32: usize,
        init: impl FnOnce(&[AtomicU64], &[AtomicU32]),
    ) -> Result<Segment, ShmError> {
        check_name(name)?;
        let (off64, off32, len) =
            layout(words64, words32).ok_or(ShmError::TooLarge { words64, words32 })?;
        let lock = DirLock::exclusive()?;
        let mut reclaimed = Vec::new();
        for f in list(Some(name))? {
            if f.alive {
                return Err(ShmError::OwnerAlive {
                    name: name.to_owned(),
                    pid: f.owner.pid,
                    path: path_of(&f.file),
                });
            }
            unlink(&f.file)?;
            reclaimed.push(f.file);
        }
        let file = file_name(name, owner);
        let fd = shm_open(&file, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL)?;
        let mut segment = Segment {
            map: NonNull::dangling(),
            len: 0,
            off64,
            off32,
            words64,
            words32,
            name: name.to_owned(),
            file,
            owner,
            // From here on, a failure unlinks what was made.
            owned: true,
            reclaimed,
        };
        // SAFETY: ftruncate takes an open descriptor and a length; no memory.
        let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) };
        if rc != 0 {
            return Err(segment.os("ftruncate", io::Error::last_os_error()));
        }
        segment.map = map(&fd, len).map_err(|e| segment.os("mmap", e))?;
        segment.len = len;
        drop(fd);
        let h = segment.header();
        // Relaxed (all header fields): published by the Release store of READY.
        h[H_MAGIC].store(MAGIC, Ordering::Relaxed);
        h[H_VERSION].store(VERSION, Ordering::Relaxed);
        h[H_PID].store(u64::from(owner.pid), Ordering::Relaxed);
        h[H_START].store(owner.start_time, Ordering::Relaxed);
        h[H_WORDS64].store(words64 as u64, Ordering::Relaxed);
        h[H_WORDS32].store(words32 as u64, Ordering::Relaxed);
        init(segment.words(), segment.words32());
        // Release: pairs with the Acquire load in `open`, so the header and what
        // `init` stored are visible to any process that sees the flag.
        segment.header()[H_READY].store(1, Ordering::Release);
        drop(lock);
        Ok(segment)
    }

    /// Maps the segment `name` of its live owner.
    ///
    /// Waits up to 2 s for the owner to mark it ready.
    pub fn open(name: &str) -> Result<Segment, ShmError> {
        check_name(name)?;
        let live = list(Some(name))?.into_iter().find(|f| f.alive);
        let Some(found) = live else {
            return Err(ShmError::NotFound {
                name: name.to_owned(),
            });
        };
        let path = path_of(&found.file);
        let corrupt = |reason: String| ShmError::Corrupt {
            path: path.clone(),
            reason,
        };
        let fd = shm_open(&found.file, libc::O_RDWR)?;
        // SAFETY: fstat writes a `stat` into the zeroed struct we own; the descriptor
        // is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `st` is a valid, writable stat for the call.
        let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
        if rc != 0 {
            return Err(ShmError::Os {
                op: "fstat",
                path,
                source: io::Error::last_os_error(),
            });
        }
        let len = usize::try_from(st.st_size).unwrap_or(0);
        if len < HEADER_WORDS * 8 {
            return Err(corrupt(format!("{len} bytes is shorter than the header")));
        }
        let map = map(&fd, len).map_err(|source| ShmError::Os {
            op: "mmap",
            path: path.clone(),
            source,
        })?;
        drop(fd);
        let mut segment = Segment {
            map,
            len,
            off64: HEADER_WORDS * 8,
            off32: 0,
            words64: 0,
            words32: 0,
            name: name.to_owned(),
            file: found.file,
            owner: found.owner,
            owned: false,
            reclaimed: Vec::new(),
        };
        let start = Instant::now();
        // Acquire: pairs with the Release store of READY in `create`.
        while segment.header()[H_READY].load(Ordering::Acquire) != 1 {
            if start.elapsed() > READY_WAIT || !found.owner.is_alive() {
                return Err(ShmError::NotReady {
                    path,
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let h = segment.header();
        // Relaxed (all): ordered after the Acquire load of READY above.
        let field = |i: usize| h[i].load(Ordering::Relaxed);
        if field(H_MAGIC) != MAGIC {
            return Err(corrupt("wrong magic number".into()));
        }
        if field(H_VERSION) != VERSION {
            return Err(corrupt(format!(
                "header version {} (this build reads {VERSION})",
                field(H_VERSION)
            )));
        }
        if field(H_PID) != u64::from(found.owner.pid) || field(H_START) != found.owner.start_time {
            return Err(corrupt(
                "the header names another owner than the file".into(),
            ));
        }
        let (words64, words32) = (field(H_WORDS64) as usize, field(H_WORDS32) as usize);
        let Some((off64, off32, need)) = layout(words64, words32) else {
            return Err(corrupt("impossible layout".into()));
        };
        if need > len {
            return Err(corrupt(format!("{len} bytes, the header says {need}")));
        }
        segment.off64 = off64;
        segment.off32 = off32;
        segment.words64 = words64;
        segment.words32 = words32;
        Ok(segment)
    }

    /// The header words.
    fn header(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is at least HEADER_WORDS * 8 bytes (checked in open,
        // by construction in create), page aligned (so aligned for AtomicU64, which
        // has the layout of u64), lives as long as `self`, and is only ever accessed
        // atomically, here and in every other process.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), HEADER_WORDS) }
    }

    /// The 64-bit area (`words64` words).
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: [off64, off64 + 8 * words64) lies inside the mapping (layout() was
        // checked against its length), off64 is a multiple of 8 from a page-aligned
        // start, the memory lives as long as `self`, and it is only accessed through
        // atomics of this size (the 32-bit area does not overlap it).
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(self.off64).cast::<AtomicU64>(),
                self.words64,
            )
        }
    }

    /// The 32-bit area (`words32` words), 128-byte aligned, apart from the
    /// 64-bit area: for futex words.
    pub fn words32(&self) -> &[AtomicU32] {
        // SAFETY: as in `words`, for [off32, off32 + 4 * words32), which starts on a
        // 128-byte boundary past the end of the 64-bit area.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(self.off32).cast::<AtomicU32>(),
                self.words32,
            )
        }
    }

    /// The logical name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path in /dev/shm.
    pub fn path(&self) -> String {
        path_of(&self.file)
    }

    /// The process that created the segment.
    pub fn owner(&self) -> ProcessId {
        self.owner
    }

    /// Whether this mapping is the owner's (unlinks the segment on drop).
    pub fn is_owner(&self) -> bool {
        self.owned
    }

    /// File names of the stale segments of this name that `create` removed.
    pub fn reclaimed(&self) -> &[String] {
        &self.reclaimed
    }

    /// Unmaps the segment without unlinking it, as a crash of the owner would
    /// leave it: for tests of crash recovery.
    pub fn abandon(mut self) {
        self.owned = false;
    }

    fn os(&self, op: &'static str, source: io::Error) -> ShmError {
        ShmError::Os {
            op,
            path: self.path(),
            source,
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: `map`/`len` are what mmap returned, and nothing borrows the
            // memory any more (drop has `&mut self`).
            unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
        }
        if self.owned {
            // A failure leaves a stale segment, which the next create removes.
            let _ = unlink(&self.file);
        }
    }
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("path", &self.path())
            .field("owner", &self.owner)
            .field("owned", &self.owned)
            .field("words64", &self.words64)
            .field("words32", &self.words32)
            .finish()
    }
}

/// `shm_open` of a file name of /dev/shm, close-on-exec, mode 0600.
fn shm_open(file: &str, flags: libc::c_int) -> Result<OwnedFd, ShmError> {
    let c = c_name(file)?;
    // SAFETY: `c` is a NUL-terminated name that lives for the call; shm_open takes
    // flags and a mode and touches no other memory.
    let fd = unsafe { libc::shm_open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(ShmError::Os {
            op: "shm_open",
            path: path_of(file),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: `fd` was just returned by shm_open, is open, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Maps `len` bytes of `fd`, shared, read-write.
fn map(fd: &OwnedFd, len: usize) -> Result<NonNull<u8>, io::Error> {
    // SAFETY: a new shared mapping at an address of the kernel's choosing touches no
    // existing memory; the descriptor is open; the result is checked.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name no other test (or test run) uses.
    fn unique(tag: &str) -> String {
        format!("test-{tag}-{}", std::process::id())
    }

    #[test]
    fn file_names_carry_name_pid_and_start_time() {
        let owner = ProcessId {
            pid: 42,
            start_time: 7,
        };
        let file = file_name("a-b.c", owner);
        assert_eq!(file, "ictus-a-b.c-42-7");
        assert_eq!(parse_file_name(&file), Some(("a-b.c", owner)));
        assert_eq!(parse_file_name("ictus-x-y"), None);
        assert_eq!(parse_file_name("other-a-1-2"), None);
    }

    #[test]
    fn bad_names_are_refused() {
        for name in ["", "a/b", "sp ace", &"x".repeat(201)] {
            assert!(matches!(
                Segment::create(name, 1, 0, |_, _| {}),
                Err(ShmError::BadName { .. })
            ));
        }
    }

    #[test]
    fn two_mappings_share_words_of_both_sizes() {
        let name = unique("share");
        let sut = Segment::create(&name, 3, 5, |w64, w32| {
            // Relaxed: published by the ready flag.
            w64[2].store(7, Ordering::Relaxed);
            w32[4].store(9, Ordering::Relaxed);
        })
        .unwrap();
        assert!(sut.is_owner());
        assert!(sut.reclaimed().is_empty());
        let other = Segment::open(&name).unwrap();
        assert!(!other.is_owner());
        assert_eq!((other.words().len(), other.words32().len()), (3, 5));
        // Relaxed (all): a single thread; the mappings alias the same memory.
        assert_eq!(other.words()[2].load(Ordering::Relaxed), 7);
        assert_eq!(other.words32()[4].load(Ordering::Relaxed), 9);
        other.words()[0].store(11, Ordering::Relaxed);
        assert_eq!(sut.words()[0].load(Ordering::Relaxed), 11);
        assert_eq!(sut.words32().as_ptr() as usize % 128, 0);
        let path = sut.path();
        assert!(std::path::Path::new(&path).exists());
        drop(sut);
        assert!(!std::path::Path::new(&path).exists(), "the owner unlinks");
        // The other mapping stays valid until it is dropped.
        assert_eq!(other.words()[0].load(Ordering::Relaxed), 11);
        assert!(matches!(
            Segment::open(&name),
            Err(ShmError::NotFound { .. })
        ));
    }

    #[test]
    fn a_live_owner_is_refused_by_pid() {
        let name = unique("live");
        let _first = Segment::create(&name, 1, 0, |_, _| {}).unwrap();
        let err = Segment::create(&name, 1, 0, |_, _| {}).unwrap_err();
        match &err {
            ShmError::OwnerAlive { pid, .. } => assert_eq!(*pid, std::process::id()),
            other => panic!("expected OwnerAlive, got {other:?}"),
        }
        assert!(
            err.to_string()
                .contains(&format!("process {}", std::process::id()))
        );
    }

    #[test]
    fn a_segment_left_by_a_dead_owner_is_reclaimed_by_the_next_create() {
        let name = unique("stale");
        let dead = ProcessId {
            pid: 999_999,
            start_time: 1,
        };
        assert!(!dead.is_alive());
        Segment::create_as(&name, dead, 2, 0, |_, _| {})
            .unwrap()
            .abandon();
        let stale = path_of(&file_name(&name, dead));
        assert!(std::path::Path::new(&stale).exists());
        assert!(
            matches!(Segment::open(&name), Err(ShmError::NotFound { .. })),
            "a dead owner's segment is never opened"
        );
        let sut = Segment::create(&name, 2, 0, |_, _| {}).unwrap();
        assert_eq!(sut.reclaimed(), [file_name(&name, dead)]);
        assert!(!std::path::Path::new(&stale).exists());
    }

    #[test]
    fn a_crashed_owner_is_reclaimed_by_reclaim_stale() {
        let name = unique("reclaim");
        let dead = ProcessId {
            pid: 999_998,
            start_time: 3,
        };
        Segment::create_as(&name, dead, 1, 1, |_, _| {})
            .unwrap()
            .abandon();
        let found = list(Some(&name)).unwrap();
        assert_eq!(found.len(), 1);
        assert!(!found[0].alive);
        assert_eq!(
            reclaim_stale(Some(&name)).unwrap(),
            [file_name(&name, dead)]
        );
        assert!(list(Some(&name)).unwrap().is_empty());
    }
}
