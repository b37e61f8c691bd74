//! What a sweep's outcomes add up to: each point's measurements and the headline.

use super::view::{
    AccessLabels, Cache, CacheLabels, Chase, ChaseMetrics, Knee as KneePoint, KneeLabels,
    KneeMetrics, Strided, StridedMetrics,
};
use crate::record::{Measurement, ThreadConfig};
use crate::view::{AllOr, Empty};

use super::knees::{KernelCache, Knee};
use super::params::{AccessKind, LINE_BYTES, PageSize, SweepPoint};
use super::sweep::{Outcome, PointResult};
use super::units::format_bytes;

pub(super) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub(super) fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// The measurements of one point run by `k` threads: the aggregate (label
/// `thread: "all"`; for one thread, that thread) and, with several, one per thread.
pub(super) fn point_measurements(
    point: &SweepPoint,
    k: usize,
    configs: &[ThreadConfig],
    per_thread: &[&PointResult],
    pages: PageSize,
) -> Vec<Measurement> {
    let labels = |thread: AllOr<usize>, cpu: Option<usize>| AccessLabels {
        working_set_bytes: point.size,
        threads: k,
        thread,
        stride_bytes: (point.kind != AccessKind::Chase).then_some(point.stride),
        cpu,
    };
    let reps = per_thread.iter().map(|r| r.ns.len()).min().unwrap_or(0);
    // Per repetition: the mean time per access over the threads, and their summed rate.
    let mean_ns: Vec<f64> = (0..reps)
        .map(|r| per_thread.iter().map(|t| t.ns[r]).sum::<f64>() / per_thread.len() as f64)
        .collect();
    let rate: Vec<f64> = (0..reps)
        .map(|r| per_thread.iter().map(|t| 1e9 / t.ns[r]).sum::<f64>())
        .collect();
    let huge = (pages == PageSize::Transparent).then(|| {
        per_thread
            .iter()
            .map(|t| t.huge_share.unwrap_or(0.0))
            .sum::<f64>()
            / per_thread.len() as f64
    });
    let mut out = vec![figures(
        labels(AllOr::All, None),
        point,
        &mean_ns,
        median(&rate),
        huge,
    )];
    if k > 1 {
        for (i, t) in per_thread.iter().enumerate() {
            let cpu = configs.get(i).and_then(|c| c.pinned_cpu);
            let rate = t.ns.iter().map(|ns| 1e9 / ns).collect::<Vec<_>>();
            out.push(figures(
                labels(AllOr::One(i), cpu),
                point,
                &t.ns,
                median(&rate),
                t.huge_share,
            ));
        }
    }
    out
}

/// The measurement of a point at `labels` from a series of repetitions (`ns` per
/// access, `per_s` accesses per second).
pub(super) fn figures(
    labels: AccessLabels,
    point: &SweepPoint,
    ns: &[f64],
    per_s: f64,
    huge_page_share: Option<f64>,
) -> Measurement {
    let (lo, hi) = min_max(ns);
    match point.kind {
        AccessKind::Chase => crate::view::Point::<Chase>::new(
            labels,
            ChaseMetrics {
                ns_per_load: median(ns),
                ns_per_load_min: lo,
                ns_per_load_max: hi,
                loads_per_s: per_s,
                huge_page_share,
            },
        )
        .measurement(),
        AccessKind::Read | AccessKind::Write => crate::view::Point::<Strided>::new(
            labels,
            StridedMetrics {
                ns_per_access: median(ns),
                ns_per_access_min: lo,
                ns_per_access_max: hi,
                bytes_per_s: per_s * 8.0,
                line_bytes_per_s: per_s * point.stride.min(LINE_BYTES) as f64,
                huge_page_share,
            },
        )
        .measurement_named(point.kind.name()),
    }
}

/// The mean huge-page share of the buffers of 4 MiB and more (None when there are none).
pub(super) fn huge_share_of_large_sets(outcomes: &[Outcome], points: &[SweepPoint]) -> Option<f64> {
    let shares: Vec<f64> = outcomes
        .iter()
        .flat_map(|o| o.results.iter().zip(points))
        .filter(|(_, p)| p.size >= 4 << 20)
        .filter_map(|(r, _)| r.huge_share)
        .collect();
    (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
}

// ---------------------------------------------------------------------------------
// Cache stages

pub(super) fn stage_measurements(
    caches: &[KernelCache],
    knees: &[Knee],
    pairs: &[Option<usize>],
) -> Vec<Measurement> {
    let mut out = Vec::new();
    for c in caches {
        let labels = CacheLabels {
            cache: c.name.clone(),
            cache_bytes: c.size_bytes,
            shared_cpus: c.shared_cpus.to_string(),
        };
        out.push(crate::view::Point::<Cache>::new(labels, Empty {}).measurement());
    }
    for (i, k) in knees.iter().enumerate() {
        let cache = pairs.iter().position(|&p| p == Some(i)).map(|c| &caches[c]);
        let labels = KneeLabels {
            lower_bytes: k.lower_bytes,
            upper_bytes: k.upper_bytes,
            threads: 1,
            cache: cache.map(|c| c.name.clone()),
            cache_bytes: cache.map(|c| c.size_bytes),
        };
        let metrics = KneeMetrics {
            ns_below: k.ns_below,
            ns_above: k.ns_above,
            ratio: Some(k.ns_above / k.ns_below),
        };
        out.push(crate::view::Point::<KneePoint>::new(labels, metrics).measurement());
    }
    out
}

pub(super) fn headline(
    curve: &[(usize, f64)],
    caches: &[KernelCache],
    knees: &[Knee],
    pairs: &[Option<usize>],
) -> Option<String> {
    let first = curve.first()?;
    let last = curve.last()?;
    let mut text = format!(
        "chase {:.1} ns/load at {} to {:.1} ns at {}",
        first.1,
        format_bytes(first.0 as u64),
        last.1,
        format_bytes(last.0 as u64)
    );
    let stages: Vec<String> = caches
        .iter()
        .zip(pairs)
        .filter_map(|(c, p)| {
            let k = knees[(*p)?];
            Some(format!(
                "{} {} ~ knee {}-{}",
                c.name,
                format_bytes(c.size_bytes),
                format_bytes(k.lower_bytes as u64),
                format_bytes(k.upper_bytes as u64)
            ))
        })
        .collect();
    if !stages.is_empty() {
        text.push_str("; ");
        text.push_str(&stages.join(", "));
    }
    Some(text)
}
