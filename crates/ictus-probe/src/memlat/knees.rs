//! Knees in the latency curve and the kernel's caches they match.

use ictus_core::CpuSet;
use ictus_os::facts;

/// A step between consecutive working sets whose chase latency grows by more than
/// this factor is (part of) a knee.
pub const KNEE_RATIO: f64 = 1.5;
/// Adjacent steep steps join into one knee while it spans at most this factor in
/// working set.
pub const MAX_KNEE_SPAN: usize = 4;
/// A knee matches a cache whose size is within this factor of the knee's interval.
pub const MATCH_FACTOR: f64 = 4.0;

/// A rise of the chase curve between two working sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knee {
    /// The last working set before the rise.
    pub lower_bytes: usize,
    /// The first working set after it.
    pub upper_bytes: usize,
    /// Latency at `lower_bytes`.
    pub ns_below: f64,
    /// Latency at `upper_bytes`.
    pub ns_above: f64,
}

/// A cache the kernel reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCache {
    /// `L1d`, `L2`, `L3`.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The CPUs sharing it.
    pub shared_cpus: CpuSet,
}

/// The data and unified caches of the online CPUs, smallest first.
pub fn kernel_caches() -> Vec<KernelCache> {
    let mut caches: Vec<KernelCache> = facts::caches()
        .into_iter()
        .filter(|c| c.kind != "Instruction")
        .filter_map(|c| {
            Some(KernelCache {
                name: c.name(),
                size_bytes: c.size_bytes?,
                shared_cpus: c.shared_cpus.clone(),
            })
        })
        .collect();
    caches.sort_by_key(|c| c.size_bytes);
    caches.dedup_by(|a, b| a.name == b.name && a.size_bytes == b.size_bytes);
    caches
}

/// The knees of a latency curve (`(working set, ns)`, any order). Every step between
/// consecutive working sets whose latency grows by more than `ratio` is a knee; a steep
/// step right after another joins it while the joined knee spans at most
/// [`MAX_KNEE_SPAN`] in working set (a transition spread over two doublings, as a
/// shared L3 gives, is one stage; with coarser sizes each steep step is its own).
pub fn find_knees(curve: &[(usize, f64)], ratio: f64) -> Vec<Knee> {
    let mut pts = curve.to_vec();
    pts.sort_by_key(|&(size, _)| size);
    let mut knees: Vec<Knee> = Vec::new();
    let mut open = false;
    for w in pts.windows(2) {
        let ((s0, n0), (s1, n1)) = (w[0], w[1]);
        let steep = n0 > 0.0 && n1 / n0 > ratio;
        match knees.last_mut() {
            Some(k) if steep && open && s1 <= k.lower_bytes.saturating_mul(MAX_KNEE_SPAN) => {
                k.upper_bytes = s1;
                k.ns_above = n1;
            }
            _ if steep => knees.push(Knee {
                lower_bytes: s0,
                upper_bytes: s1,
                ns_below: n0,
                ns_above: n1,
            }),
            _ => {}
        }
        open = steep;
    }
    knees
}

/// How far (in factors of 2) `size` lies outside the interval of `knee` (0 inside).
pub(super) fn octaves_off(size: u64, knee: &Knee) -> f64 {
    let s = size as f64;
    let (lo, hi) = (knee.lower_bytes as f64, knee.upper_bytes as f64);
    if s < lo {
        (lo / s).log2()
    } else if s > hi {
        (s / hi).log2()
    } else {
        0.0
    }
}

/// Pairs each cache (smallest first) with the first knee, after the previous cache's,
/// whose interval lies within [`MATCH_FACTOR`] of the cache's size: `result[i]` is the
/// index in `knees` of the knee of `caches[i]`. A cache leaves a knee it only lies near
/// to the next cache when that one lies inside it (coarse working sets make knees that
/// span two levels).
pub fn match_caches(caches: &[KernelCache], knees: &[Knee]) -> Vec<Option<usize>> {
    let limit = MATCH_FACTOR.log2();
    let mut next = 0;
    let mut pairs = Vec::with_capacity(caches.len());
    for (c, cache) in caches.iter().enumerate() {
        let found = (next..knees.len())
            .find(|&i| octaves_off(cache.size_bytes, &knees[i]) <= limit)
            .filter(|&i| {
                let near_only = octaves_off(cache.size_bytes, &knees[i]) > 0.0;
                let next_inside = caches
                    .get(c + 1)
                    .is_some_and(|n| octaves_off(n.size_bytes, &knees[i]) == 0.0);
                !(near_only && next_inside)
            });
        if let Some(i) = found {
            next = i + 1;
        }
        pairs.push(found);
    }
    pairs
}
