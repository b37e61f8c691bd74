//! The `cpu` load: an endless integer loop per CPU, without any system call.

use std::hint::black_box;

use ictus_core::CpuSet;

use super::worker::*;

/// Loop iterations between two looks at the stop flag (tens of microseconds).
const STEP: u64 = 1 << 16;

pub(super) fn plan(cpus: &CpuSet) -> Plan {
    Plan::per_cpu("cpu", cpus, |cpu| move |w| Ok(spin(w, cpu as u64)))
}

/// One step of a 64-bit linear congruential generator (Knuth's MMIX constants): a
/// dependent multiply-add chain the compiler cannot fold away.
#[inline]
fn step(x: u64) -> u64 {
    x.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
}

fn spin(worker: &Worker<'_>, seed: u64) -> Tally {
    worker.ready();
    let mut ops = 0u64;
    let mut x = seed;
    while worker.running() {
        for _ in 0..STEP {
            x = step(black_box(x));
        }
        ops += STEP;
    }
    black_box(x);
    Tally::default().count("ops", ops)
}
