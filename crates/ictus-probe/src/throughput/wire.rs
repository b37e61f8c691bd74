//! What every message carries: the header word, the fixed pattern, the checksum.

use super::params::HEADER_BYTES;

/// The header word: the sender's clock reading, with flags in the top bits.
pub(super) mod header {
    /// The message belongs to the warm-up: the receiver does not time it.
    pub(crate) const WARMUP: u64 = 1 << 63;
    /// The last message: the receiver ends without summing or acknowledging it.
    pub(crate) const STOP: u64 = 1 << 62;
    /// A message of the untimed batch: it carries no clock reading, and the
    /// receiver sums and acknowledges it without reading the clock.
    pub(crate) const UNTIMED: u64 = 1 << 61;
    /// The clock reading (CLOCK_MONOTONIC stays below 2^61 ns, 73 years).
    pub(crate) const STAMP: u64 = UNTIMED - 1;
}

/// Byte `i` of every message's fixed pattern (`i` counts from the header's start).
#[inline]
pub(super) fn pattern_byte(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

/// The receiver's sum of one payload: its 8-byte little-endian words, then its
/// trailing bytes, added with wraparound. Reads every byte.
///
/// Whole 64-byte blocks go into eight independent sums (word `k` of every block
/// into sum `k`), which the compiler keeps in vector registers: no addition
/// waits for the one before, so the loop runs at the speed the bytes arrive
/// (about 90 GB/s from L1 on the Zen 3 this was written on, twice a single
/// chain's), and the receiver is never what limits a transfer.
#[inline]
pub fn checksum(payload: &[u8]) -> u64 {
    let (blocks, tail) = payload.as_chunks::<64>();
    let mut sums = [0u64; 8];
    for block in blocks {
        let (words, _) = block.as_chunks::<8>();
        for (sum, w) in sums.iter_mut().zip(words) {
            *sum = sum.wrapping_add(u64::from_le_bytes(*w));
        }
    }
    let mut sum = sums.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let (words, rest) = tail.as_chunks::<8>();
    for w in words {
        sum = sum.wrapping_add(u64::from_le_bytes(*w));
    }
    for &b in rest {
        sum = sum.wrapping_add(u64::from(b));
    }
    sum
}

/// What the first `min(8, n)` payload bytes, which carry the message's sequence
/// number, add to its [`checksum`].
#[inline]
pub(super) fn head_sum(seq: u64, n: usize) -> u64 {
    if n >= 8 {
        seq
    } else {
        seq.to_le_bytes()[..n].iter().map(|&b| u64::from(b)).sum()
    }
}

/// A message's header word and its payload's checksum.
#[inline]
pub(super) fn split(msg: &[u8]) -> (u64, u64) {
    let (word, payload) = msg
        .split_first_chunk::<HEADER_BYTES>()
        .expect("every message carries its header");
    (u64::from_le_bytes(*word), checksum(payload))
}
