//! The kernel primitives one thread uses to wake another: futex wait and wake,
//! eventfd, pipes, POSIX message queues, and `sched_yield`. The `pingpong` probe
//! measures hand-offs through each of them.
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

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
        let buf = value.to_ne_bytes();
        let n = retry(|| {
            // SAFETY: `buf` is 8 readable bytes that outlive the call; the fd is open
            // for as long as `self` lives.
            unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "eventfd write",
            source,
        })?;
        short("eventfd write", n, buf.len())
    }

    /// Takes the counter (sleeping while it is zero) and resets it to zero.
    #[inline]
    pub fn read(&self) -> Result<u64, HandoffError> {
        let mut buf = [0u8; 8];
        let n = retry(|| {
            // SAFETY: `buf` is 8 writable bytes that outlive the call; the fd is open
            // for as long as `self` lives.
            unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "eventfd read",
            source,
        })?;
        short("eventfd read", n, buf.len())?;
        Ok(u64::from_ne_bytes(buf))
    }
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
        let n = retry(|| {
            // SAFETY: `bytes` is readable for its length and outlives the call; the fd
            // is open for as long as `self` lives.
            unsafe { libc::write(self.fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "pipe write",
            source,
        })?;
        short("pipe write", n, bytes.len())
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
        let n = retry(|| {
            // SAFETY: `buf` is writable for its length and outlives the call; the fd is
            // open for as long as `self` lives.
            unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
        })
        .map_err(|source| HandoffError::Transfer {
            op: "pipe read",
            source,
        })?;
        short("pipe read", n, buf.len())
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
    fn yielding_returns() {
        yield_now();
    }
}
