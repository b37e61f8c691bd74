//! [`Buffer`]: a page-aligned anonymous memory mapping with a chosen page size, for
//! probes that measure memory itself (memory latency).
//!
//! The mapping is zero-filled by the kernel, so it is valid as bytes or as 64-bit
//! words from the start; pages are faulted in on first touch (write it once before
//! measuring). With [`Pages::Transparent`] the region is 2 MiB aligned and advised
//! `MADV_HUGEPAGE`; with [`Pages::Base`] it is advised `MADV_NOHUGEPAGE`, so that a
//! "4 KiB pages" measurement really runs on 4 KiB pages whatever the THP mode.
//!
//! ```
//! use ictus_os::buffer::{Buffer, Pages};
//! let mut sut = Buffer::new(64 * 1024, Pages::Base).unwrap();
//! sut.words_mut().fill(7);
//! assert_eq!(sut.len(), 64 * 1024);
//! assert!(sut.words().iter().all(|&w| w == 7));
//! assert_eq!(sut.bytes().as_ptr() as usize % 4096, 0);
//! ```

use std::io;
use std::ptr::NonNull;

use thiserror::Error;

/// The base page size of x86-64 and most Linux targets.
const BASE_PAGE: usize = 4096;
/// The size of a transparent huge page (PMD) on x86-64.
pub const HUGE_PAGE: usize = 2 * 1024 * 1024;

/// Which pages back a [`Buffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    /// Base (4 KiB) pages: the region is advised `MADV_NOHUGEPAGE`.
    Base,
    /// Transparent huge pages: the region is 2 MiB aligned and advised
    /// `MADV_HUGEPAGE` (the kernel may still fall back to base pages; see
    /// [`Buffer::huge_bytes`]).
    Transparent,
}

/// Why a buffer could not be made.
#[derive(Debug, Error)]
pub enum BufferError {
    /// A length of zero, or one that overflows when rounded to pages.
    #[error("a buffer of {len} bytes cannot be mapped")]
    BadLength {
        /// The length asked for.
        len: usize,
    },
    /// `mmap` refused (usually: not enough memory).
    #[error("mapping {len} bytes failed: {source}")]
    Map {
        /// The length asked for.
        len: usize,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// `madvise` refused the page-size advice.
    #[error("madvise({advice}) on {len} bytes failed: {source}")]
    Advise {
        /// `MADV_HUGEPAGE` or `MADV_NOHUGEPAGE`.
        advice: &'static str,
        /// The length of the advised region.
        len: usize,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

/// An anonymous, private, read-write mapping of `len` bytes, aligned to 4 KiB (2 MiB
/// with transparent huge pages), unmapped on drop.
#[derive(Debug)]
pub struct Buffer {
    /// What `mmap` returned (the start of the whole mapping).
    map: NonNull<u8>,
    /// The length of the whole mapping.
    map_len: usize,
    /// Offset of the usable, aligned region within the mapping.
    offset: usize,
    /// Usable length.
    len: usize,
}

// SAFETY: a Buffer owns its mapping exclusively, like a Box<[u8]>: no other handle to
// the memory exists, so moving it to another thread moves sole ownership.
unsafe impl Send for Buffer {}
// SAFETY: shared references only give out `&[u8]`/`&[u64]`, which are Sync; mutation
// needs `&mut Buffer`.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Maps `len` bytes backed by `pages`. The memory reads as zeros until written.
    pub fn new(len: usize, pages: Pages) -> Result<Buffer, BufferError> {
        let align = match pages {
            Pages::Base => BASE_PAGE,
            Pages::Transparent => HUGE_PAGE,
        };
        let rounded = len
            .checked_next_multiple_of(align)
            .filter(|&r| r > 0)
            .ok_or(BufferError::BadLength { len })?;
        // Room to slide the start up to the next 2 MiB boundary.
        let map_len = match pages {
            Pages::Base => rounded,
            Pages::Transparent => rounded
                .checked_add(HUGE_PAGE)
                .ok_or(BufferError::BadLength { len })?,
        };
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // touches no existing memory; the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(BufferError::Map {
                len,
                source: io::Error::last_os_error(),
            });
        }
        let map = NonNull::new(ptr.cast::<u8>()).ok_or(BufferError::BadLength { len })?;
        let offset = (map.as_ptr() as usize).next_multiple_of(align) - map.as_ptr() as usize;
        let buffer = Buffer {
            map,
            map_len,
            offset,
            len,
        };
        let (advice, name) = match pages {
            Pages::Base => (libc::MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE"),
            Pages::Transparent => (libc::MADV_HUGEPAGE, "MADV_HUGEPAGE"),
        };
        // SAFETY: the advised range [map + offset, map + offset + rounded) lies inside
        // the mapping just made (offset + rounded <= map_len) and starts page aligned;
        // the advice changes how pages are backed, not their contents.
        let rc = unsafe { libc::madvise(buffer.map.as_ptr().add(offset).cast(), rounded, advice) };
        if rc != 0 {
            // `buffer` is dropped here, which unmaps it.
            return Err(BufferError::Advise {
                advice: name,
                len: rounded,
                source: io::Error::last_os_error(),
            });
        }
        Ok(buffer)
    }

    /// The usable length in bytes (as asked for).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: a zero length is refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer as bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: [start, start + len) lies inside our live mapping, which is readable,
        // zero-initialised by the kernel, and only mutated through `&mut self`.
        unsafe { std::slice::from_raw_parts(self.start(), self.len) }
    }

    /// The buffer as mutable bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len) }
    }

    /// The buffer as 64-bit words (`len / 8` of them; a tail under 8 bytes is left out).
    pub fn words(&self) -> &[u64] {
        // SAFETY: the start is page aligned (so 8-byte aligned), `len / 8` words fit in
        // the mapping, and any bit pattern is a valid u64.
        unsafe { std::slice::from_raw_parts(self.start().cast::<u64>(), self.len / 8) }
    }

    /// The buffer as mutable 64-bit words (see [`words`](Self::words)).
    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `words`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.start().cast::<u64>(), self.len / 8) }
    }

    /// Bytes of this buffer currently backed by transparent huge pages
    /// (`AnonHugePages` of its mapping in `/proc/self/smaps`); `None` when unreadable.
    pub fn huge_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        anon_huge_bytes(&smaps, self.map.as_ptr() as usize)
    }

    fn start(&self) -> *mut u8 {
        // SAFETY: offset < HUGE_PAGE <= map_len, so the result stays inside the mapping.
        unsafe { self.map.as_ptr().add(self.offset) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly what mmap returned and nothing borrows
        // the memory any more (drop has `&mut self`).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// The sum of `count` 64-bit reads (unaligned where the offsets say so) at byte
/// offsets `start`, `start + stride`, ... of `bytes`: the strided-read kernel of
/// the memory-latency probe, one load, one add and one compare per access (the bounds are checked once).
///
/// # Panics
///
/// When the last read would pass the end of `bytes`.
///
/// ```
/// let bytes: Vec<u8> = (0..32).collect();
/// let sum = ictus_os::buffer::read_strided(&bytes, 4, 12, 2);
/// let at = |p: usize| u64::from_ne_bytes(bytes[p..p + 8].try_into().unwrap());
/// assert_eq!(sum, at(4).wrapping_add(at(16)));
/// ```
#[inline]
pub fn read_strided(bytes: &[u8], start: usize, stride: usize, count: usize) -> u64 {
    check_run(bytes.len(), start, stride, count);
    let base = bytes.as_ptr();
    let mut sum = 0u64;
    let mut p = start;
    for _ in 0..count {
        // SAFETY: p <= start + (count - 1) * stride, and check_run proved that plus 8
        // is within `bytes`; read_unaligned needs no alignment; any bits are a u64.
        sum = sum.wrapping_add(unsafe { base.add(p).cast::<u64>().read_unaligned() });
        p += stride;
    }
    sum
}

/// `count` 64-bit writes (of their own offset) at byte offsets `start`,
/// `start + stride`, ... of `bytes` (see [`read_strided`]).
///
/// # Panics
///
/// When the last write would pass the end of `bytes`.
///
/// ```
/// let mut bytes = vec![0u8; 32];
/// ictus_os::buffer::write_strided(&mut bytes, 4, 12, 2);
/// assert_eq!(u64::from_ne_bytes(bytes[16..24].try_into().unwrap()), 16);
/// ```
#[inline]
pub fn write_strided(bytes: &mut [u8], start: usize, stride: usize, count: usize) {
    check_run(bytes.len(), start, stride, count);
    let base = bytes.as_mut_ptr();
    let mut p = start;
    for _ in 0..count {
        // SAFETY: as in read_strided; `bytes` is borrowed mutably, so nothing else
        // reads or writes it meanwhile.
        unsafe { base.add(p).cast::<u64>().write_unaligned(p as u64) };
        p += stride;
    }
}

/// Panics unless `count` 8-byte accesses `stride` apart from `start` fit in `len`.
fn check_run(len: usize, start: usize, stride: usize, count: usize) {
    if count == 0 {
        return;
    }
    let end = (count - 1)
        .checked_mul(stride)
        .and_then(|o| o.checked_add(start))
        .and_then(|o| o.checked_add(8));
    assert!(
        end.is_some_and(|e| e <= len),
        "{count} accesses {stride} bytes apart from {start} pass the end of {len} bytes"
    );
}

/// Why a [`ChaseRing`] could not be made from a buffer's links.
#[derive(Debug, Error)]
pub enum LinkError {
    /// A link points outside the buffer, or to a word that is not a link.
    #[error("word {at} links to word {to}, which is not a link word of the buffer")]
    Outside {
        /// The word holding the bad link.
        at: usize,
        /// Where it points.
        to: u64,
    },
    /// A step of zero words.
    #[error("the link step must be at least one word")]
    ZeroStep,
}

/// A buffer of pointers to follow: the dependent-load kernel of the memory-latency probe.
///
/// Made from a [`Buffer`] whose words at indices `0, step, 2 * step, ...` hold the
/// index of another such word (the probe writes a random cycle there); every link is
/// checked, then turned into the address it names, so the chase is one `mov (reg),
/// reg` per load, as in C (an indexed load costs a cycle more on some cores).
///
/// ```
/// use ictus_os::buffer::{Buffer, ChaseRing, Pages};
/// let mut b = Buffer::new(4096, Pages::Base).unwrap();
/// let w = b.words_mut();
/// w[0] = 8; // word 0 -> word 8 -> word 0
/// let mut sut = ChaseRing::from_links(b, 8).unwrap();
/// assert_eq!(sut.position(), 0);
/// sut.chase(1);
/// assert_eq!(sut.position(), 8);
/// sut.chase(1);
/// assert_eq!(sut.position(), 0);
/// ```
#[derive(Debug)]
pub struct ChaseRing {
    /// Owned and never written after construction (no `&mut` to it is handed out).
    buffer: Buffer,
    /// The address of the current link word.
    at: *const u64,
}

// SAFETY: the ring owns its buffer (itself Send) and `at` points into that buffer
// only; moving the ring moves both together.
unsafe impl Send for ChaseRing {}

impl ChaseRing {
    /// Checks that every link word (each `step`-th word) names a link word of the
    /// buffer, then rewrites each as the address of the word it names. A word that
    /// holds a zero links to the first word.
    pub fn from_links(mut buffer: Buffer, step: usize) -> Result<ChaseRing, LinkError> {
        if step == 0 {
            return Err(LinkError::ZeroStep);
        }
        let words = buffer.words_mut();
        let n = words.len();
        for at in (0..n).step_by(step) {
            let to = words[at];
            if to >= n as u64 || !(to as usize).is_multiple_of(step) {
                return Err(LinkError::Outside { at, to });
            }
        }
        let base = words.as_mut_ptr();
        for at in (0..n).step_by(step) {
            // wrapping_add cannot wrap here: words[at] < n was checked above, so this
            // is an in-bounds address computed without unsafe.
            words[at] = base.wrapping_add(words[at] as usize).expose_provenance() as u64;
        }
        let at = buffer.words().as_ptr();
        Ok(ChaseRing { buffer, at })
    }

    /// Follows `loads` links, each load's address the previous load's value.
    #[inline(never)]
    pub fn chase(&mut self, loads: u64) {
        let mut p = self.at;
        for _ in 0..loads {
            // SAFETY: `p` starts at a link word of the buffer, and every link word holds
            // the exposed address of a link word of the same buffer (checked in
            // from_links; the buffer is never written since), so each read is of an
            // aligned, initialised u64 inside the live mapping owned by `self`.
            p = std::ptr::with_exposed_provenance(unsafe { p.read() } as usize);
        }
        self.at = p;
    }

    /// The index of the current link word.
    pub fn position(&self) -> usize {
        (self.at as usize - self.buffer.words().as_ptr() as usize) / 8
    }

    /// The buffer (read-only).
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

/// `AnonHugePages` (in bytes) of the mapping that contains `start` in an smaps text
/// (it may span a neighbouring anonymous mapping the kernel merged with it).
fn anon_huge_bytes(smaps: &str, start: usize) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && !first.ends_with(':')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            // The kernel may merge the buffer's mapping with an adjacent anonymous one
            // of the same protection, so look for the mapping that contains it.
            inside = (lo..hi).contains(&start);
            continue;
        }
        if inside && let Some(v) = line.strip_prefix("AnonHugePages:") {
            let kib = v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()?;
            return Some(kib * 1024);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transparent_buffer_starts_on_a_huge_page_boundary() {
        let sut = Buffer::new(3 * 1024 * 1024, Pages::Transparent).unwrap();
        assert_eq!(sut.bytes().as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(sut.words().len(), 3 * 1024 * 1024 / 8);
    }

    #[test]
    fn fresh_memory_reads_as_zeros_and_keeps_what_is_written() {
        let mut sut = Buffer::new(10_000, Pages::Base).unwrap();
        assert!(sut.bytes().iter().all(|&b| b == 0));
        sut.bytes_mut()[9_999] = 3;
        assert_eq!(sut.bytes()[9_999], 3);
        assert_eq!(sut.words().len(), 1_250);
    }

    #[test]
    fn a_ring_refuses_links_outside_the_buffer_or_between_link_words() {
        let mut b = Buffer::new(4096, Pages::Base).unwrap();
        b.words_mut()[8] = 512;
        assert!(matches!(
            ChaseRing::from_links(b, 8),
            Err(LinkError::Outside { at: 8, to: 512 })
        ));
        let mut b = Buffer::new(4096, Pages::Base).unwrap();
        b.words_mut()[0] = 3;
        assert!(matches!(
            ChaseRing::from_links(b, 8),
            Err(LinkError::Outside { at: 0, to: 3 })
        ));
    }

    #[test]
    fn a_ring_follows_its_links_around() {
        let mut b = Buffer::new(4096, Pages::Base).unwrap();
        let lines = 4096 / 64;
        for line in 0..lines {
            b.words_mut()[line * 8] = (((line + 1) % lines) * 8) as u64;
        }
        let mut sut = ChaseRing::from_links(b, 8).unwrap();
        sut.chase(5);
        assert_eq!(sut.position(), 40);
        sut.chase(lines as u64);
        assert_eq!(sut.position(), 40);
        assert_eq!(sut.buffer().len(), 4096);
    }

    #[test]
    #[should_panic(expected = "pass the end")]
    fn a_strided_run_past_the_end_panics() {
        read_strided(&[0u8; 16], 4, 4, 3);
    }

    #[test]
    fn a_zero_length_is_refused() {
        assert!(matches!(
            Buffer::new(0, Pages::Base),
            Err(BufferError::BadLength { len: 0 })
        ));
    }

    #[test]
    fn the_huge_page_count_is_read_from_the_buffers_own_mapping() {
        let smaps = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      2048 kB
7f0000400000-7f0000800000 rw-p 00000000 00:00 0
AnonHugePages:         0 kB
";
        assert_eq!(anon_huge_bytes(smaps, 0x7f00_0000_0000), Some(2048 * 1024));
        assert_eq!(anon_huge_bytes(smaps, 0x7f00_0040_0000), Some(0));
        assert_eq!(
            anon_huge_bytes(smaps, 0x7f00_0000_1000),
            Some(2048 * 1024),
            "merged"
        );
        assert_eq!(anon_huge_bytes(smaps, 0x1000), None);
        let sut = Buffer::new(4096, Pages::Base).unwrap();
        assert_eq!(sut.huge_bytes(), Some(0));
    }
}
