//! The kernel primitives one thread uses to wake another: futex wait and wake,
//! eventfd, pipes, POSIX message queues, and `sched_yield`. The hand-off probe
//! measures hand-offs through each of them.
//!
//! The futex calls come in two kinds: [`Futex`] (process-private, its own word)
//! and functions on any `&AtomicU32` that use the shared futex operations, so
//! that they work on words in memory shared between processes
//! ([`futex_wait_shared`], [`futex_wake_shared`], the [`FutexPark`] of the hubs,
//! and the priority-inheritance lock [`PiLock`]).
//!
//! Each primitive is created (and allocates) up front; sending and receiving then
//! make exactly one system call each (a futex wait may repeat after a spurious
//! wake-up), never allocate, and retry when a signal interrupts them.
//!
//! ```
//! use ictus_os::handoff::{EventFd, pipe};
//! let ev = EventFd::new().unwrap();
//! ev.write(42).unwrap();
//! assert_eq!(ev.read().unwrap(), 42);
//!
//! let (reader, writer) = pipe().unwrap();
//! writer.write_u64(7).unwrap();
//! assert_eq!(reader.read_u64().unwrap(), 7);
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "futex words: the kernel (FUTEX_LOCK_PI, FUTEX_WAIT) is the other party, which loom cannot model"
)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ictus_core::Nanos;
use ictus_core::sync::hub::Park;
use thiserror::Error;

/// Why a hand-off primitive could not be created or used.
#[derive(Debug, Error)]
pub enum HandoffError {
    /// The kernel refused to create the primitive (fd or queue limits, usually).
    #[error("creating {what} failed: {source}")]
    Create {
        /// The primitive: `eventfd`, `pipe`, `message queue`.
        what: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A send or receive failed.
    #[error("{op} failed: {source}")]
    Transfer {
        /// The operation: `pipe read`, `eventfd write`, `mq_send`, ...
        op: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A read or write moved fewer bytes than one message (the other end closed).
    #[error("{op} moved {got} bytes instead of {expected} (the other end is closed)")]
    Short {
        /// The operation.
        op: &'static str,
        /// Bytes moved.
        got: usize,
        /// Bytes of one message.
        expected: usize,
    },
}

/// Runs `call` until it does not fail with `EINTR`; returns its result, or the error.
#[inline]
fn retry(mut call: impl FnMut() -> isize) -> Result<usize, io::Error> {
    loop {
        let rc = call();
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A 32-bit word threads can sleep on (`futex(2)`, process-private).
///
/// The word is an ordinary atomic; [`wait`](Futex::wait) sleeps only while it still
/// holds the expected value, [`wake`](Futex::wake) wakes sleepers.
///
/// ```
/// use ictus_os::handoff::Futex;
/// use std::sync::atomic::Ordering;
/// let f = Futex::new(0);
/// f.word().store(1, Ordering::Release);
/// f.wait(0); // returns at once: the word is no longer 0
/// assert_eq!(f.wake(1), 0); // nobody was sleeping
/// ```
#[derive(Debug, Default)]
pub struct Futex {
    word: AtomicU32,
}

impl Futex {
    /// A futex word holding `value`.
    pub const fn new(value: u32) -> Self {
        Futex {
            word: AtomicU32::new(value),
        }
    }

    /// The word itself.
    pub fn word(&self) -> &AtomicU32 {
        &self.word
    }

    /// Sleeps while the word equals `expected` (`FUTEX_WAIT_PRIVATE`). Returns when
    /// woken, at once when the word differs, or after a signal: the caller re-checks
    /// the word, as with any futex.
    #[inline]
    pub fn wait(&self, expected: u32) {
        // SAFETY: the address is that of a live, aligned AtomicU32 borrowed for the
        // whole call; FUTEX_WAIT only reads it, and a null timeout means no timeout.
        // Every failure (EAGAIN: the word changed, EINTR) means "re-check", so the
        // return value is ignored.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    /// Wakes up to `n` threads sleeping on the word (`FUTEX_WAKE_PRIVATE`); returns how
    /// many were woken.
    #[inline]
    pub fn wake(&self, n: u32) -> u32 {
        let n = n.min(i32::MAX as u32) as i32;
        // SAFETY: the address is that of a live, aligned AtomicU32; FUTEX_WAKE does not
        // access the memory, it only looks up sleepers keyed by the address.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                n,
            )
        };
        rc.max(0) as u32
    }
}

/// `FUTEX_WAIT` (not private) on the 32 bits at `addr` while they hold `expected`,
/// for at most `timeout`. Every failure (EAGAIN: the word changed, EINTR, ETIMEDOUT)
/// means "re-check", so the result is ignored.
///
/// # Safety
/// `addr` points at 4 aligned bytes that stay mapped for the whole call.
#[inline]
unsafe fn futex_wait_at(addr: *const u32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `addr` is valid and aligned for the whole call (the caller's contract);
    // FUTEX_WAIT only reads it. `ts_ptr` is null (no timeout) or points to `ts`, a
    // relative timespec that outlives the call.
    unsafe {
        libc::syscall(libc::SYS_futex, addr, libc::FUTEX_WAIT, expected, ts_ptr);
    }
}

/// `FUTEX_WAKE` (not private) of up to `n` sleepers on `addr`; how many were woken.
fn futex_wake_at(addr: *const u32, n: u32) -> u32 {
    let n = n.min(i32::MAX as u32) as i32;
    // SAFETY: FUTEX_WAKE does not access the memory at `addr`: it only looks up
    // sleepers keyed by the address (for a shared mapping, by the page and offset, so
    // sleepers of other processes are found); a stale address wakes nobody.
    let rc = unsafe { libc::syscall(libc::SYS_futex, addr, libc::FUTEX_WAKE, n) };
    rc.max(0) as u32
}

/// Sleeps while `word` holds `expected` (`FUTEX_WAIT`, not private: the word may
/// be in memory shared between processes), for at most `timeout`. Returns when
/// woken, at once when the word differs, after a signal or the timeout: the caller
/// re-checks the word, as with any futex.
#[inline]
pub fn futex_wait_shared(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    // SAFETY: the address is that of a live, aligned AtomicU32 borrowed for the whole
    // call.
    unsafe { futex_wait_at(word.as_ptr().cast_const(), expected, timeout) }
}

/// Wakes up to `n` threads, of any process, sleeping on `word` (`FUTEX_WAKE`, not
/// private); returns how many were woken.
#[inline]
pub fn futex_wake_shared(word: &AtomicU32, n: u32) -> u32 {
    futex_wake_at(word.as_ptr().cast_const(), n)
}

/// One word of a `futex_waitv(2)` call: the kernel's `struct futex_waitv`.
#[repr(C)]
struct WaitvEntry {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// The absolute `CLOCK_MONOTONIC` time of `deadline` (an [`Instant`], which
/// is that clock on Linux, but opaque: converted through the time left).
fn monotonic_timespec(deadline: Instant) -> libc::timespec {
    let left = deadline.saturating_duration_since(Instant::now());
    let at = crate::clock::monotonic_now()
        .as_u64()
        .saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX));
    libc::timespec {
        tv_sec: (at / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (at % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps while `a` holds `a_expected` and `b` holds `b_expected`, until a
/// wake-up on either (`futex_waitv(2)`, shared operations: the words may be
/// in memory shared between processes) or until `deadline`; returns at once
/// when either differs. The caller re-checks both, as with any futex.
///
/// Returns `false` without waiting on a kernel that lacks `futex_waitv`
/// (before Linux 5.16): the caller falls back to waiting on one word.
pub fn futex_wait_either_shared(
    a: &AtomicU32,
    a_expected: u32,
    b: &AtomicU32,
    b_expected: u32,
    deadline: Option<Instant>,
) -> bool {
    let entry = |word: &AtomicU32, val: u32| WaitvEntry {
        val: u64::from(val),
        uaddr: word.as_ptr() as u64,
        flags: libc::FUTEX2_SIZE_U32 as u32,
        reserved: 0,
    };
    let waiters = [entry(a, a_expected), entry(b, b_expected)];
    let ts = deadline.map(monotonic_timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `waiters` is an array of two kernel `struct futex_waitv` (same
    // layout, reserved zero) that outlives the call, each naming a live, aligned
    // AtomicU32 borrowed for the whole call, which the kernel only reads;
    // `ts_ptr` is null (no timeout) or points to `ts`, an absolute
    // CLOCK_MONOTONIC time that outlives the call. Every failure but ENOSYS
    // (EAGAIN: a word differs, EINTR, ETIMEDOUT) means "re-check".
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            waiters.as_ptr(),
            waiters.len() as libc::c_uint,
            0 as libc::c_uint,
            ts_ptr,
            libc::CLOCK_MONOTONIC,
        )
    };
    !(rc < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
}

/// The address of the 32 bits of `word` that hold its low half: the futex word of a
/// 64-bit counter (the kernel compares and sleeps on 32 bits).
fn low_half(word: &AtomicU64) -> *const u32 {
    let base = word.as_ptr().cast::<u32>().cast_const();
    if cfg!(target_endian = "little") {
        base
    } else {
        base.wrapping_add(1)
    }
}

/// [`futex_wait_shared`] on a 64-bit counter: sleeps while its low 32 bits equal
/// those of `expected`, at most `timeout`. The counter is only ever read and written
/// as 64 bits from Rust; the kernel reads its low half. The caller re-checks.
pub fn futex_wait_shared_u64(word: &AtomicU64, expected: u64, timeout: Option<Duration>) {
    // SAFETY: `low_half` points at 4 bytes inside a live, 8-aligned AtomicU64 borrowed
    // for the whole call (so 4-aligned); the kernel reads them atomically.
    unsafe { futex_wait_at(low_half(word), expected as u32, timeout) }
}

/// [`futex_wake_shared`] for sleepers of [`futex_wait_shared_u64`] on `word`.
pub fn futex_wake_shared_u64(word: &AtomicU64, n: u32) -> u32 {
    futex_wake_at(low_half(word), n)
}

/// The [`Park`] of the hubs: spin a little, then sleep in the kernel with the
/// shared futex operations (so hubs in shared memory work between processes).
#[derive(Clone, Copy, Debug)]
pub struct FutexPark {
    /// Re-checks (spinning) before sleeping.
    pub spins: u32,
}

impl Default for FutexPark {
    /// 100 re-checks: a few microseconds of spinning.
    fn default() -> Self {
        FutexPark { spins: 100 }
    }
}

impl Park for FutexPark {
    fn spins(&self) -> u32 {
        self.spins
    }

    fn park(&self, word: &AtomicU32, expected: u32, deadline: Option<Instant>) {
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        futex_wait_shared(word, expected, timeout);
    }

    fn unpark(&self, word: &AtomicU32, count: u32) {
        futex_wake_shared(word, count);
    }
}

/// A flag raised once and never lowered, on which threads can sleep: raising it
/// wakes every sleeper at once (a futex on its own word), so a thread that sleeps for
/// a long time still sees a stop at once, without waking in slices to look.
///
/// ```
/// use std::time::Duration;
/// use ictus_os::handoff::Latch;
/// let sut = Latch::new();
/// assert!(!sut.sleep_for(Duration::from_millis(1)), "the time ran out");
/// sut.raise();
/// assert!(sut.is_raised());
/// assert!(sut.sleep_for(Duration::from_secs(3600)), "returns at once once raised");
/// ```
#[derive(Debug, Default)]
pub struct Latch {
    /// 0 until raised, then 1.
    word: AtomicU32,
}

impl Latch {
    /// A latch not raised.
    pub const fn new() -> Latch {
        Latch {
            word: AtomicU32::new(0),
        }
    }

    /// Raises the latch and wakes every thread sleeping on it.
    pub fn raise(&self) {
        // Release: pairs with the Acquire load in `is_raised`, so what the raiser did
        // before is seen by whoever sees the latch raised.
        self.word.store(1, Ordering::Release);
        futex_wake_shared(&self.word, u32::MAX);
    }

    /// Whether the latch has been raised.
    #[inline]
    pub fn is_raised(&self) -> bool {
        // Acquire: pairs with the Release store in `raise`.
        self.word.load(Ordering::Acquire) != 0
    }

    /// Sleeps until `deadline` (`CLOCK_MONOTONIC`, as [`crate::clock::monotonic_now`])
    /// or until the latch is raised, whichever comes first; returns whether it was
    /// raised. A raise before the sleep returns at once: the kernel compares the word
    /// before it sleeps, so no raise is missed.
    pub fn sleep_until(&self, deadline: Nanos) -> bool {
        loop {
            if self.is_raised() {
                return true;
            }
            let now = crate::clock::monotonic_now();
            if now >= deadline {
                return false;
            }
            let left = Duration::from_nanos(deadline.saturating_sub(now).as_u64());
            futex_wait_shared(&self.word, 0, Some(left));
        }
    }

    /// Sleeps for `d` or until the latch is raised; returns whether it was raised.
    pub fn sleep_for(&self, d: Duration) -> bool {
        let d = Nanos::new(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.sleep_until(crate::clock::monotonic_now().saturating_add(d))
    }
}

/// The absolute `CLOCK_REALTIME` time of `deadline` (for `FUTEX_LOCK_PI`).
fn realtime_timespec(deadline: Instant) -> libc::timespec {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let at = (now.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec.max(0) as u64)
        .saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX));
    libc::timespec {
        tv_sec: (at / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (at % 1_000_000_000) as libc::c_long,
    }
}

/// The kernel's id of the calling thread (`gettid(2)`), what a [`PiLock`] word holds.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// A mutex with priority inheritance on a 32-bit word the caller owns (in process
/// or shared memory): the kernel's PI futex protocol (`FUTEX_LOCK_PI`,
/// `FUTEX_UNLOCK_PI`, see `futex(2)`).
///
/// The word is 0 when free and holds the owner's thread id when locked (with the
/// `FUTEX_WAITERS` bit once someone waits). Locking and unlocking without
/// contention are one compare-and-swap in user space; under contention the kernel
/// queues the waiters by priority and lends the owner the priority of the highest
/// waiter until it unlocks, so a low-priority owner cannot be starved by
/// medium-priority threads while a high-priority one waits (priority inversion).
///
/// The owner is a thread: unlock from the thread that locked.
///
/// ```
/// use ictus_os::handoff::PiLock;
/// use std::sync::atomic::AtomicU32;
/// let word = AtomicU32::new(0);
/// let sut = PiLock::new(&word);
/// sut.lock().unwrap();
/// assert_eq!(sut.owner(), Some(ictus_os::handoff::gettid()));
/// assert!(!sut.try_lock().unwrap(), "not recursive");
/// sut.unlock().unwrap();
/// assert_eq!(sut.owner(), None);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PiLock<'a> {
    word: &'a AtomicU32,
}

/// The bits of a PI futex word that hold the owner's thread id.
const PI_TID_MASK: u32 = libc::FUTEX_TID_MASK;

impl<'a> PiLock<'a> {
    /// The lock kept in `word` (0: free).
    pub fn new(word: &'a AtomicU32) -> Self {
        PiLock { word }
    }

    /// The thread id of the owner, if locked.
    pub fn owner(&self) -> Option<u32> {
        // Relaxed: a snapshot to look at, pairs with nothing.
        let tid = self.word.load(Ordering::Relaxed) & PI_TID_MASK;
        (tid != 0).then_some(tid)
    }

    /// Locks, sleeping (in priority order, lending our priority to the owner)
    /// while another thread holds it.
    ///
    /// Errors: `EDEADLK` when the caller already holds it; `ESRCH` or
    /// `EOWNERDEAD` when the owner died holding it (the protected data may be
    /// half updated; see [`PiLock::force_release`]).
    pub fn lock(&self) -> io::Result<()> {
        if self.try_fast() {
            return Ok(());
        }
        loop {
            match self.pi_op(libc::FUTEX_LOCK_PI) {
                Ok(()) => return Ok(()),
                // EAGAIN: the owner is exiting; EINTR: a signal. Try again.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// [`lock`](Self::lock), giving up at `deadline`: `Ok(false)` then.
    /// (`FUTEX_LOCK_PI2`, whose deadline is on `CLOCK_MONOTONIC`; before
    /// Linux 5.14 `FUTEX_LOCK_PI`, whose deadline is on `CLOCK_REALTIME`, so
    /// that a step of the wall clock then shortens or lengthens the wait.)
    pub fn lock_until(&self, deadline: Instant) -> io::Result<bool> {
        if self.try_fast() {
            return Ok(true);
        }
        loop {
            let ts = monotonic_timespec(deadline);
            match self.pi_op_until(libc::FUTEX_LOCK_PI2, &ts) {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    let ts = realtime_timespec(deadline);
                    match self.pi_op_until(libc::FUTEX_LOCK_PI, &ts) {
                        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => {}
                        other => return Self::timed(other),
                    }
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => {}
                other => return Self::timed(other),
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// A timed lock's result: `ETIMEDOUT` is `Ok(false)`.
    fn timed(r: io::Result<()>) -> io::Result<bool> {
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ETIMEDOUT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Locks if free now; `Ok(false)` when another thread (or this one) holds it.
    pub fn try_lock(&self) -> io::Result<bool> {
        if self.try_fast() {
            return Ok(true);
        }
        match self.pi_op(libc::FUTEX_TRYLOCK_PI) {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EDEADLK | libc::EBUSY | libc::EINTR)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Unlocks; the kernel hands the lock to the highest-priority waiter.
    ///
    /// Errors: `EPERM` when the caller does not hold it.
    pub fn unlock(&self) -> io::Result<()> {
        let tid = gettid();
        // Release: pairs with the Acquire of the next locker's compare-and-swap (or
        // the kernel's hand-over), so our critical section happens before theirs.
        if self
            .word
            .compare_exchange(tid, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(());
        }
        self.pi_op(libc::FUTEX_UNLOCK_PI)
    }

    /// Frees a lock whose owner died (for the owner of the memory, once it
    /// knows the holder is gone); returns the dead owner's thread id. Waiters
    /// sleeping in the kernel are not woken by this: use it when nobody waits.
    pub fn force_release(&self) -> Option<u32> {
        // AcqRel: takes what the dead owner wrote, publishes the free state.
        let old = self.word.swap(0, Ordering::AcqRel) & PI_TID_MASK;
        (old != 0).then_some(old)
    }

    /// What an error of [`lock`](Self::lock), [`try_lock`](Self::try_lock) or
    /// [`unlock`](Self::unlock) means, in words.
    pub fn meaning(error: &io::Error) -> &'static str {
        match error.raw_os_error() {
            Some(libc::EDEADLK) => "this thread already holds it",
            Some(libc::ESRCH | libc::EOWNERDEAD) => "the owner died holding it",
            Some(libc::EPERM) => "this thread does not hold it",
            _ => "the lock operation failed",
        }
    }

    /// The uncontended path: 0 -> our tid.
    #[inline]
    fn try_fast(&self) -> bool {
        // Acquire: pairs with the Release of `unlock`, so the previous critical
        // section happens before ours.
        self.word
            .compare_exchange(0, gettid(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// A PI futex lock operation on the word with an absolute timeout.
    fn pi_op_until(&self, op: libc::c_int, at: &libc::timespec) -> io::Result<()> {
        // SAFETY: as in `pi_op`; `at` is a timespec borrowed for the call, the
        // absolute time the lock operations take.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                op,
                0,
                at as *const libc::timespec,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// One PI futex operation on the word (not private: may be shared memory).
    fn pi_op(&self, op: libc::c_int) -> io::Result<()> {
        // SAFETY: the address is that of a live, aligned AtomicU32 borrowed for the
        // call; the PI operations read and compare-and-swap it (as an atomic, like our
        // own accesses) and take no timeout here (null: wait without limit).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                op,
                0,
                std::ptr::null::<libc::timespec>(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// An eventfd counter (`eventfd(2)`): a write adds to it, a read takes it and resets
/// it to zero, sleeping while it is zero.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A blocking eventfd with the counter at zero (close-on-exec).
    pub fn new() -> Result<Self, HandoffError> {
        // SAFETY: eventfd takes an initial value and flags and touches no memory.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(HandoffError::Create {
                what: "eventfd",
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` was just returned by eventfd, is open, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// Adds `value` (1 to 2^64 - 2) to the counter, waking a reader.
    #[inline]
    pub fn write(&self, value: u64) -> Result<(), HandoffError> {
        write_whole(&self.fd, "eventfd write", &value.to_ne_bytes())
    }

    /// Takes the counter (sleeping while it is zero) and resets it to zero.
    #[inline]
    pub fn read(&self) -> Result<u64, HandoffError> {
        let mut buf = [0u8; 8];
        read_whole(&self.fd, "eventfd read", &mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

/// Writes `bytes` to `fd` in one `write(2)` (again when a signal interrupts it): the
/// transfer `op`, which must move them all.
#[inline]
fn write_whole(fd: &OwnedFd, op: &'static str, bytes: &[u8]) -> Result<(), HandoffError> {
    let n = retry(|| {
        // SAFETY: `bytes` is readable for its length and outlives the call; `fd` is
        // open while it is borrowed.
        unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) }
    })
    .map_err(|source| HandoffError::Transfer { op, source })?;
    short(op, n, bytes.len())
}

/// Fills `buf` from `fd` with one `read(2)` (again when a signal interrupts it): the
/// transfer `op`, which must fill it.
#[inline]
fn read_whole(fd: &OwnedFd, op: &'static str, buf: &mut [u8]) -> Result<(), HandoffError> {
    let n = retry(|| {
        // SAFETY: `buf` is writable for its length and outlives the call; `fd` is
        // open while it is borrowed.
        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
    })
    .map_err(|source| HandoffError::Transfer { op, source })?;
    short(op, n, buf.len())
}

/// Checks that a transfer moved a whole message.
#[inline]
fn short(op: &'static str, got: usize, expected: usize) -> Result<(), HandoffError> {
    if got == expected {
        Ok(())
    } else {
        Err(HandoffError::Short { op, got, expected })
    }
}

/// The read end of a pipe (see [`pipe`]).
#[derive(Debug)]
pub struct PipeReader {
    fd: OwnedFd,
}

/// The write end of a pipe (see [`pipe`]).
#[derive(Debug)]
pub struct PipeWriter {
    fd: OwnedFd,
}

/// A blocking pipe (close-on-exec), as its read and write ends.
pub fn pipe() -> Result<(PipeReader, PipeWriter), HandoffError> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is an array of two writable c_ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(HandoffError::Create {
            what: "pipe",
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((PipeReader { fd: r }, PipeWriter { fd: w }))
}

impl PipeWriter {
    /// Writes `bytes` in one `write` (at most `PIPE_BUF` bytes are atomic).
    #[inline]
    fn write_all(&self, bytes: &[u8]) -> Result<(), HandoffError> {
        write_whole(&self.fd, "pipe write", bytes)
    }

    /// Writes one byte.
    #[inline]
    pub fn write_byte(&self, byte: u8) -> Result<(), HandoffError> {
        self.write_all(&[byte])
    }

    /// Writes one u64 (8 bytes, native order).
    #[inline]
    pub fn write_u64(&self, value: u64) -> Result<(), HandoffError> {
        self.write_all(&value.to_ne_bytes())
    }
}

impl PipeReader {
    /// Fills `buf` with one `read` (sleeping until data arrive).
    #[inline]
    fn read_exact(&self, buf: &mut [u8]) -> Result<(), HandoffError> {
        read_whole(&self.fd, "pipe read", buf)
    }

    /// Reads one byte.
    #[inline]
    pub fn read_byte(&self) -> Result<u8, HandoffError> {
        let mut buf = [0u8; 1];
        self.read_exact(&mut buf)?;
        Ok(buf[0])
    }

    /// Reads one u64 written by [`PipeWriter::write_u64`].
    #[inline]
    pub fn read_u64(&self) -> Result<u64, HandoffError> {
        let mut buf = [0u8; 8];
        self.read_exact(&mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

/// A POSIX message queue of u64 messages (`mq_overview(7)`), opened for reading and
/// writing under a name unique to this process, and unlinked when dropped.
///
/// ```
/// use ictus_os::handoff::MessageQueue;
/// let q = MessageQueue::new(1).unwrap();
/// q.send(9).unwrap();
/// assert_eq!(q.receive().unwrap(), 9);
/// ```
#[derive(Debug)]
pub struct MessageQueue {
    mqd: libc::mqd_t,
    name: CString,
}

/// Size of one message: a u64.
const MQ_MSG_BYTES: usize = 8;

impl MessageQueue {
    /// A new, empty queue holding up to `capacity` messages (1 to the system's
    /// `fs.mqueue.msg_max`, 10 by default, for an unprivileged process).
    pub fn new(capacity: u32) -> Result<Self, HandoffError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: the counter only has to hand out distinct numbers.
        let seq = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("/ictus-{}-{seq}", std::process::id());
        let name = CString::new(name).expect("the name has no NUL byte");
        // SAFETY: mq_attr is plain data; all zeros is a valid value to start from.
        let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
        attr.mq_maxmsg = capacity.max(1) as libc::c_long;
        attr.mq_msgsize = MQ_MSG_BYTES as libc::c_long;
        // SAFETY: `name` is a NUL-terminated string and `attr` a valid mq_attr, both
        // live for the call; with O_CREAT, mq_open takes exactly these two variadic
        // arguments (mode, then a pointer to the attributes).
        let mqd = unsafe {
            libc::mq_open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600 as libc::mode_t,
                &mut attr as *mut libc::mq_attr,
            )
        };
        if mqd == -1 {
            return Err(HandoffError::Create {
                what: "message queue",
                source: io::Error::last_os_error(),
            });
        }
        Ok(MessageQueue { mqd, name })
    }

    /// The queue's name (`/ictus-<pid>-<n>`), valid until the queue is dropped.
    pub fn name(&self) -> &std::ffi::CStr {
        &self.name
    }

    /// Sends one message at priority 0 (sleeping while the queue is full).
    #[inline]
    pub fn send(&self, value: u64) -> Result<(), HandoffError> {
        let buf = value.to_ne_bytes();
        retry(|| {
            // SAFETY: `buf` is MQ_MSG_BYTES readable bytes that outlive the call, and
            // the descriptor is open for as long as `self` lives.
            unsafe { libc::mq_send(self.mqd, buf.as_ptr().cast(), buf.len(), 0) as isize }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "mq_send",
            source,
        })?;
        Ok(())
    }

    /// Receives the oldest message (sleeping while the queue is empty).
    #[inline]
    pub fn receive(&self) -> Result<u64, HandoffError> {
        let mut buf = [0u8; MQ_MSG_BYTES];
        let n = retry(|| {
            // SAFETY: `buf` is mq_msgsize writable bytes that outlive the call, a null
            // priority pointer is allowed, and the descriptor is open while `self` lives.
            unsafe {
                libc::mq_receive(
                    self.mqd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    std::ptr::null_mut(),
                )
            }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "mq_receive",
            source,
        })?;
        short("mq_receive", n, MQ_MSG_BYTES)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

impl Drop for MessageQueue {
    fn drop(&mut self) {
        // SAFETY: the descriptor was opened by mq_open and is closed exactly once, here.
        unsafe { libc::mq_close(self.mqd) };
        // SAFETY: `name` is the NUL-terminated name the queue was created under.
        unsafe { libc::mq_unlink(self.name.as_ptr()) };
    }
}

/// Gives up the CPU to another runnable thread of the same priority, if any
/// (`sched_yield(2)`).
#[inline]
pub fn yield_now() {
    // SAFETY: sched_yield takes no arguments and touches no memory.
    unsafe { libc::sched_yield() };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_latch_raised_by_another_thread_wakes_a_sleeper_of_ten_years() {
        let sut = Arc::new(Latch::new());
        let sleeper = sut.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            let raised = sleeper.sleep_for(Duration::from_secs(10 * 365 * 24 * 3600));
            let _ = tx.send(raised);
        });
        std::thread::sleep(Duration::from_millis(20));
        sut.raise();
        // A bound that only a sleeper that was never woken exceeds.
        let raised = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the sleeper woke");
        assert!(raised);
        h.join().unwrap();
    }

    #[test]
    fn a_latch_not_raised_sleeps_until_its_deadline() {
        let sut = Latch::new();
        let deadline = crate::clock::monotonic_now().saturating_add(Nanos::from_millis(5));
        assert!(!sut.sleep_until(deadline));
        assert!(crate::clock::monotonic_now() >= deadline);
        assert!(!sut.is_raised());
    }

    #[test]
    fn an_eventfd_returns_what_was_written() {
        let sut = EventFd::new().unwrap();
        sut.write(1 << 62).unwrap();
        assert_eq!(sut.read().unwrap(), 1 << 62);
    }

    #[test]
    fn a_pipe_carries_bytes_and_words_in_order() {
        let (reader, writer) = pipe().unwrap();
        writer.write_byte(3).unwrap();
        writer.write_u64(u64::MAX).unwrap();
        assert_eq!(reader.read_byte().unwrap(), 3);
        assert_eq!(reader.read_u64().unwrap(), u64::MAX);
    }

    #[test]
    fn a_pipe_read_fails_once_the_writer_is_gone() {
        let (reader, writer) = pipe().unwrap();
        drop(writer);
        assert!(matches!(
            reader.read_u64(),
            Err(HandoffError::Short { got: 0, .. })
        ));
    }

    #[test]
    fn a_message_queue_is_unlinked_when_dropped() {
        let sut = MessageQueue::new(1).unwrap();
        sut.send(5).unwrap();
        assert_eq!(sut.receive().unwrap(), 5);
        let name = sut.name().to_owned();
        drop(sut);
        // SAFETY: `name` is a NUL-terminated string; without O_CREAT no more arguments.
        let mqd = unsafe { libc::mq_open(name.as_ptr(), libc::O_RDONLY) };
        assert_eq!(mqd, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOENT)
        );
    }

    #[test]
    fn a_futex_wait_returns_when_the_word_differs() {
        let sut = Futex::new(1);
        sut.wait(0);
        assert_eq!(sut.wake(1), 0);
    }

    #[test]
    fn a_futex_wake_releases_a_sleeper() {
        let sut = Arc::new(Futex::new(0));
        let other = Arc::clone(&sut);
        let sleeper = std::thread::spawn(move || {
            // Acquire: pairs with the Release store below.
            while other.word().load(Ordering::Acquire) == 0 {
                other.wait(0);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(5));
        // Release: pairs with the sleeper's Acquire load.
        sut.word().store(1, Ordering::Release);
        sut.wake(1);
        sleeper.join().unwrap();
    }

    #[test]
    fn a_shared_futex_wake_releases_a_sleeper() {
        let word = Arc::new(AtomicU32::new(0));
        let other = Arc::clone(&word);
        let sleeper = std::thread::spawn(move || {
            // Acquire: pairs with the Release store below.
            while other.load(Ordering::Acquire) == 0 {
                futex_wait_shared(&other, 0, Some(Duration::from_secs(1)));
            }
        });
        std::thread::sleep(Duration::from_millis(5));
        // Release: pairs with the sleeper's Acquire load.
        word.store(1, Ordering::Release);
        futex_wake_shared(&word, 1);
        sleeper.join().unwrap();
    }

    #[test]
    fn a_shared_futex_wait_times_out() {
        let word = AtomicU32::new(0);
        let start = Instant::now();
        futex_wait_shared(&word, 0, Some(Duration::from_millis(2)));
        assert!(start.elapsed() >= Duration::from_millis(1));
    }

    #[test]
    fn a_pi_lock_excludes_other_threads() {
        const ROUNDS: u64 = 2_000;
        let word = Arc::new(AtomicU32::new(0));
        // Only touched under the lock: a plain load and store would do, the
        // atomic just keeps the test free of unsafe.
        let counter = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (word, counter) = (Arc::clone(&word), Arc::clone(&counter));
                std::thread::spawn(move || {
                    let sut = PiLock::new(&word);
                    for _ in 0..ROUNDS {
                        sut.lock().unwrap();
                        // Relaxed: ordered by the lock.
                        let v = counter.load(Ordering::Relaxed);
                        std::hint::spin_loop();
                        counter.store(v + 1, Ordering::Relaxed);
                        sut.unlock().unwrap();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        // Relaxed: after join.
        assert_eq!(counter.load(Ordering::Relaxed), 3 * ROUNDS);
        assert_eq!(PiLock::new(&word).owner(), None);
    }

    #[test]
    fn a_pi_lock_refuses_a_second_lock_and_a_foreign_unlock() {
        let word = Arc::new(AtomicU32::new(0));
        let sut = PiLock::new(&word);
        sut.lock().unwrap();
        assert_eq!(sut.lock().unwrap_err().raw_os_error(), Some(libc::EDEADLK));
        let other = Arc::clone(&word);
        let foreign = std::thread::spawn(move || {
            let sut = PiLock::new(&other);
            (
                sut.try_lock().unwrap(),
                sut.unlock().unwrap_err().raw_os_error(),
            )
        })
        .join()
        .unwrap();
        assert_eq!(foreign, (false, Some(libc::EPERM)));
        sut.unlock().unwrap();
    }

    #[test]
    fn a_timed_pi_lock_gives_up_while_held_and_takes_it_once_freed() {
        let word = Arc::new(AtomicU32::new(0));
        let sut = PiLock::new(&word);
        sut.lock().unwrap();
        let other = Arc::clone(&word);
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let sut = PiLock::new(&other);
            let first = sut
                .lock_until(Instant::now() + Duration::from_millis(20))
                .unwrap();
            locked_tx.send(()).unwrap();
            let second = sut
                .lock_until(Instant::now() + Duration::from_secs(20))
                .unwrap();
            sut.unlock().unwrap();
            (first, second)
        });
        locked_rx.recv().unwrap();
        sut.unlock().unwrap();
        assert_eq!(waiter.join().unwrap(), (false, true));
        assert_eq!(sut.owner(), None);
    }

    #[test]
    fn a_wait_on_two_words_ends_when_either_changes() {
        let (a, b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        if !futex_wait_either_shared(&a, 1, &b, 0, None) {
            return; // A kernel before 5.16: the callers fall back.
        }
        for which in 0..2 {
            let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
            let waiter = std::thread::spawn(move || {
                let (va, vb) = (a2.load(Ordering::SeqCst), b2.load(Ordering::SeqCst));
                while a2.load(Ordering::SeqCst) == va && b2.load(Ordering::SeqCst) == vb {
                    futex_wait_either_shared(&a2, va, &b2, vb, None);
                }
            });
            std::thread::sleep(Duration::from_millis(20));
            let word = if which == 0 { &a } else { &b };
            word.fetch_add(1, Ordering::SeqCst);
            futex_wake_shared(word, 1);
            waiter.join().unwrap();
        }
        // A deadline ends it too.
        let (va, vb) = (a.load(Ordering::SeqCst), b.load(Ordering::SeqCst));
        futex_wait_either_shared(
            &a,
            va,
            &b,
            vb,
            Some(Instant::now() + Duration::from_millis(5)),
        );
    }

    #[test]
    fn a_pi_lock_held_by_a_dead_thread_reports_it() {
        let word = Arc::new(AtomicU32::new(0));
        let other = Arc::clone(&word);
        let tid = std::thread::spawn(move || {
            PiLock::new(&other).lock().unwrap();
            gettid()
        })
        .join()
        .unwrap();
        let sut = PiLock::new(&word);
        assert_eq!(sut.owner(), Some(tid));
        assert!(sut.lock().is_err(), "the owner is gone");
        assert_eq!(sut.force_release(), Some(tid));
        sut.lock().unwrap();
        sut.unlock().unwrap();
    }

    #[test]
    fn a_yield_lets_a_runnable_thread_of_the_same_cpu_run() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        // Both threads on one CPU: the spinner can only advance while this thread
        // has given the CPU up.
        let cpu = crate::sched::current_affinity().unwrap().cpus()[0];
        let one = ictus_core::CpuSet::from_cpus([cpu]);
        let before = crate::sched::current_affinity().unwrap();
        crate::sched::set_affinity(&one).unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (count, stop, one) = (Arc::clone(&count), Arc::clone(&stop), one.clone());
            std::thread::spawn(move || {
                crate::sched::set_affinity(&one).unwrap();
                // Relaxed: a counter and a stop flag, read on their own.
                while !stop.load(Ordering::Relaxed) {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        // Relaxed: see the spinner.
        while count.load(Ordering::Relaxed) == 0 {
            yield_now();
        }
        // A yield need not switch each time (the scheduler picks), but a loop of yields
        // that never lets the spinner run would take microseconds, far below a tick.
        let mut advanced = 0;
        for _ in 0..100 {
            // Relaxed: see the spinner.
            let seen = count.load(Ordering::Relaxed);
            yield_now();
            if count.load(Ordering::Relaxed) > seen {
                advanced += 1;
            }
        }
        // Relaxed: see the spinner.
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        crate::sched::set_affinity(&before).unwrap();
        assert!(
            advanced >= 3,
            "the spinner ran during {advanced} of 100 yields"
        );
    }
}
