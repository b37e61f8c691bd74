//! What the unit tests share: a miss judged as the sampler judges one, the window it
//! is judged from, and an explanation of misses.

use ictus_core::Nanos;

use crate::account::{WindowDeltas, judge};
use crate::cause::Timed;
use crate::explained::{Breakdown, Explained, Explanation, SamplerReport};
use crate::miss::MissKind;

/// A miss of `thread` on CPU 1, its seventh release, 1 ms into the run and
/// `lateness_ns` late, in a 4 ms window, with `causes`.
pub(crate) fn miss_of(thread: &str, lateness_ns: u64, causes: Vec<Timed>) -> Explained {
    Explained {
        thread: thread.into(),
        cpu: Some(1),
        kind: MissKind::Late,
        seq: 7,
        at_ns: 1_000_000,
        lateness_ns,
        window_ns: 4_000_000,
        causes,
        ..Explained::default()
    }
}

/// A miss of `thread` ([`miss_of`]) judged from `w` as the sampler does: as late as
/// the window says, with the causes, what was seen and the accounting of [`judge`].
pub(crate) fn judged_miss(thread: &str, w: &WindowDeltas) -> Explained {
    let j = judge(w);
    let lateness_ns = w.lateness.as_u64();
    Explained {
        accounted_share: j.accounted_ns as f64 / lateness_ns.max(1) as f64,
        accounted_ns: j.accounted_ns,
        causes_sum_ns: j.sum_ns,
        seen: j.seen,
        run_delay_ns: w.run_delay_ns,
        ..miss_of(thread, lateness_ns, j.causes)
    }
}

/// A window `lateness_us` late on a 100 Hz tick, on a virtual machine (Firecracker's
/// KVM) when `vm`, where nothing else moved.
pub(crate) fn window(lateness_us: u64, vm: bool) -> WindowDeltas {
    WindowDeltas {
        lateness: Nanos::from_micros(lateness_us),
        tick_ns: 10_000_000,
        hypervisor: vm.then(|| "KVM (Firecracker)".to_string()),
        ..WindowDeltas::default()
    }
}

/// The tests' explanation of `misses` at `threshold_ns`, its breakdown added up, from
/// a sampler of ten readings.
pub(crate) fn explanation_of(threshold_ns: u64, misses: Vec<Explained>) -> Explanation {
    let mut breakdown = Breakdown::default();
    for m in &misses {
        breakdown.add(m);
    }
    Explanation {
        threshold_ns,
        breakdown,
        events: misses,
        sampler: SamplerReport {
            period_ns: 1_000_000,
            samples: 10,
            cpus: "0".into(),
            reading_mean_ns: 100,
            reading_max_ns: 200,
            task_scans: 1,
            ..SamplerReport::default()
        },
        ..Explanation::default()
    }
}
