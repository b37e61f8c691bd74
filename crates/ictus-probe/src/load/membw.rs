//! The `membw` load: streaming copies between two large private buffers per CPU,
//! taking memory bandwidth from every other CPU.

use ictus_core::CpuSet;

use super::spec::*;
use super::worker::*;

/// Bytes copied between two looks at the stop flag (well under a millisecond).
const CHUNK: usize = 1 << 20;

/// Each of the two buffers: twice the largest cache, in whole chunks, at least 32 MiB.
pub(super) fn buffer_bytes() -> u64 {
    (2 * largest_cache_bytes())
        .next_multiple_of(CHUNK as u64)
        .max(32 << 20)
}

pub(super) fn plan(cpus: &CpuSet) -> Plan {
    let bytes = buffer_bytes();
    Plan::per_cpu("membw", cpus, |_| move |w| copy(w, bytes as usize))
}

fn copy(worker: &Worker<'_>, bytes: usize) -> Result<Tally, LoadStartError> {
    let mut a = touched_buffer(bytes, 0x5Au8)?;
    let mut b = touched_buffer(bytes, 0xA5u8)?;
    worker.ready();
    let mut copied = 0u64;
    let mut forward = true;
    'run: loop {
        let (src, dst) = if forward { (&a, &mut b) } else { (&b, &mut a) };
        for (s, d) in src.chunks_exact(CHUNK).zip(dst.chunks_exact_mut(CHUNK)) {
            if !worker.running() {
                break 'run;
            }
            d.copy_from_slice(s);
            copied += CHUNK as u64;
        }
        forward = !forward;
    }
    std::hint::black_box((&a, &b));
    Ok(Tally::default()
        .count("bytes", copied)
        .size("buffer_bytes", 2 * bytes as u64))
}
