//! The access patterns: the pointer chase's random cycle and the strided reads and
//! writes.

use ictus_os::buffer;

use super::params::LINE_BYTES;

/// Chase loads between clock reads.
pub(super) const CHASE_CHUNK: u64 = 1 << 14;
/// Strided accesses between clock reads (they run about 4x faster than chase loads).
pub(super) const STRIDED_CHUNK: u64 = 1 << 16;
pub(super) const WORDS_PER_LINE: usize = LINE_BYTES / 8;

/// A small deterministic PRNG (SplitMix64): enough to shuffle, no dependency.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n` > 0; multiply-shift, bias under 2^-32 for n < 2^32).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Builds one random cycle over the 64-byte lines of `words` with Sattolo's algorithm:
/// the first word of line `i` holds the word index of the next line's first word, and
/// following them from any line visits every line once before returning. Writes every
/// line (so every page) once.
pub fn build_cycle(words: &mut [u64], seed: u64) {
    let lines = words.len() / WORDS_PER_LINE;
    for line in 0..lines {
        words[line * WORDS_PER_LINE] = (line * WORDS_PER_LINE) as u64;
    }
    let mut rng = SplitMix64::new(seed);
    for i in (1..lines).rev() {
        let j = rng.below(i as u64) as usize;
        words.swap(i * WORDS_PER_LINE, j * WORDS_PER_LINE);
    }
}

/// `accesses` 64-bit reads `stride` bytes apart from byte `*pos`, wrapping to the start
/// when the next read would pass the end; returns their sum and moves `*pos` on.
#[inline(never)]
pub fn read_strided(bytes: &[u8], stride: usize, pos: &mut usize, accesses: u64) -> u64 {
    let mut sum = 0u64;
    walk(bytes.len(), stride, pos, accesses, |start, count| {
        sum = sum.wrapping_add(buffer::read_strided(bytes, start, stride, count));
    });
    sum
}

/// `accesses` 64-bit writes `stride` bytes apart from byte `*pos` (see [`read_strided`]).
#[inline(never)]
pub fn write_strided(bytes: &mut [u8], stride: usize, pos: &mut usize, accesses: u64) {
    walk(bytes.len(), stride, pos, accesses, |start, count| {
        buffer::write_strided(bytes, start, stride, count);
    });
}

/// Splits `accesses` strided accesses from `*pos` into runs that end before `len`,
/// wrapping to 0 after each run that reaches the end; `run(start, count)` does them.
/// Only finishing the pass in progress costs a division (whole passes are counted
/// once), so a short pass costs a few cycles more than its accesses; a stride at least
/// as large as the working set degenerates to one word read over and over.
#[inline]
pub(super) fn walk(
    len: usize,
    stride: usize,
    pos: &mut usize,
    accesses: u64,
    mut run: impl FnMut(usize, usize),
) {
    let last = len - 8;
    let per_pass = last / stride + 1;
    let mut left = usize::try_from(accesses).unwrap_or(usize::MAX);
    // Finish the pass in progress.
    if *pos != 0 {
        let count = ((last - *pos) / stride + 1).min(left);
        run(*pos, count);
        left -= count;
        *pos += count * stride;
        if *pos > last {
            *pos = 0;
        }
    }
    // Whole passes from the start.
    while left >= per_pass {
        run(0, per_pass);
        left -= per_pass;
    }
    // Part of one more.
    if left > 0 {
        run(0, left);
        *pos = left * stride;
    }
}

// ---------------------------------------------------------------------------------
// Figures
