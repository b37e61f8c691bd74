//! The `cachemiss` load: random read-modify-writes over a buffer much larger than the
//! last-level cache, one private buffer per CPU.
//!
//! Each access picks a 64-byte line at random (xorshift) and increments a word in it:
//! the accesses are independent, so the core keeps many misses in flight, and every
//! line comes back dirty, so the caches also write back. With 4 KiB pages most
//! accesses miss the TLB as well.

use ictus_core::CpuSet;

use super::spec::*;
use super::worker::*;

/// Accesses between two looks at the stop flag (under a millisecond even at 200 ns
/// per miss).
const STEP: u64 = 4096;
/// Words per 64-byte line.
const WORDS_PER_LINE: usize = 8;

/// The buffer: at least four times the largest cache, a power of two, at least 64 MiB.
pub(super) fn buffer_bytes() -> u64 {
    (4 * largest_cache_bytes())
        .next_power_of_two()
        .max(64 << 20)
}

pub(super) fn plan(cpus: &CpuSet) -> Plan {
    let bytes = buffer_bytes();
    Plan::per_cpu("cachemiss", cpus, |cpu| move |w| miss(w, bytes, cpu as u64))
}

/// xorshift64 (Marsaglia): fast, and far better than the access pattern needs.
#[inline]
fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

fn miss(worker: &Worker<'_>, bytes: u64, seed: u64) -> Result<Tally, LoadStartError> {
    let words = (bytes / 8) as usize;
    // Touched now, on this CPU (first touch places the pages on its NUMA node).
    let mut buffer = touched_buffer(words, 1u64)?;
    let line_mask = words / WORDS_PER_LINE - 1;
    worker.ready();
    let mut accesses = 0u64;
    let mut x = 0x9E37_79B9_7F4A_7C15 ^ (seed + 1);
    while worker.running() {
        for _ in 0..STEP {
            x = xorshift(x);
            let word = ((x >> 17) as usize & line_mask) * WORDS_PER_LINE;
            buffer[word] = buffer[word].wrapping_add(1);
        }
        accesses += STEP;
    }
    std::hint::black_box(&buffer);
    Ok(Tally::default()
        .count("accesses", accesses)
        .size("buffer_bytes", bytes))
}
