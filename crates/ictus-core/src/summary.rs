//! [`Summary`]: the figures every latency result carries, and which of its
//! percentiles the sample count really supports.
//!
//! ```
//! use ictus_core::{LatencyHistogram, Nanos, Percentile};
//! let mut h = LatencyHistogram::new();
//! for v in 1..=1_000u64 {
//!     h.record(Nanos::new(v * 1_000));
//! }
//! let s = h.summary();
//! // 1,000 samples support p99.9 but not p99.99.
//! assert_eq!(s.thin_percentiles(), vec![Percentile::P9999, Percentile::P99999]);
//! ```

use serde::{Deserialize, Serialize};

use crate::time::Nanos;

/// A percentile ictus reports, in parts per 100,000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Percentile {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
    /// 99.99th percentile.
    P9999,
    /// 99.999th percentile.
    P99999,
}

impl Percentile {
    /// Every reported percentile, in increasing order.
    pub const ALL: [Percentile; 6] = [
        Percentile::P50,
        Percentile::P90,
        Percentile::P99,
        Percentile::P999,
        Percentile::P9999,
        Percentile::P99999,
    ];

    /// The percentile in parts per 100,000 (p99.9 is 99,900).
    pub const fn per_100k(self) -> u64 {
        match self {
            Percentile::P50 => 50_000,
            Percentile::P90 => 90_000,
            Percentile::P99 => 99_000,
            Percentile::P999 => 99_900,
            Percentile::P9999 => 99_990,
            Percentile::P99999 => 99_999,
        }
    }

    /// The fewest samples for which this percentile is not simply the maximum
    /// or an interpolation into nothing: `1 / (1 - p)` (p99.99 needs 10,000).
    pub const fn min_samples(self) -> u64 {
        100_000 / (100_000 - self.per_100k())
    }

    /// The label people read: `p99.99`.
    pub const fn label(self) -> &'static str {
        match self {
            Percentile::P50 => "p50",
            Percentile::P90 => "p90",
            Percentile::P99 => "p99",
            Percentile::P999 => "p99.9",
            Percentile::P9999 => "p99.99",
            Percentile::P99999 => "p99.999",
        }
    }

    /// The 1-based nearest rank of this percentile among `count` sorted samples.
    pub fn rank(self, count: u64) -> u64 {
        let r = (u128::from(count) * u128::from(self.per_100k())).div_ceil(100_000);
        u64::try_from(r).unwrap_or(u64::MAX).max(1)
    }
}

/// A [`Summary`]'s keys in a record, in its order (the result schema documents them;
/// the Python package reads them by these names).
pub const SUMMARY_KEYS: [&str; 11] = [
    "count",
    "min_ns",
    "mean_ns",
    "stddev_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "p99999_ns",
    "max_ns",
];

/// Count, extremes, moments and percentiles of a latency distribution, in nanoseconds.
///
/// Serialized with exactly the keys `count, min_ns, mean_ns, stddev_ns, p50_ns, p90_ns,
/// p99_ns, p999_ns, p9999_ns, p99999_ns, max_ns`; a figure that has no sample behind it
/// (an empty distribution) is `null`. The standard deviation is the population one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min_ns: Option<Nanos>,
    /// Arithmetic mean (exact).
    pub mean_ns: Option<f64>,
    /// Population standard deviation (exact).
    pub stddev_ns: Option<f64>,
    /// Median (within 0.1 %).
    pub p50_ns: Option<Nanos>,
    /// 90th percentile (within 0.1 %).
    pub p90_ns: Option<Nanos>,
    /// 99th percentile (within 0.1 %).
    pub p99_ns: Option<Nanos>,
    /// 99.9th percentile (within 0.1 %).
    pub p999_ns: Option<Nanos>,
    /// 99.99th percentile (within 0.1 %).
    pub p9999_ns: Option<Nanos>,
    /// 99.999th percentile (within 0.1 %).
    pub p99999_ns: Option<Nanos>,
    /// Largest sample (exact).
    pub max_ns: Option<Nanos>,
}

impl Summary {
    /// The value reported for `p`.
    pub fn percentile(&self, p: Percentile) -> Option<Nanos> {
        match p {
            Percentile::P50 => self.p50_ns,
            Percentile::P90 => self.p90_ns,
            Percentile::P99 => self.p99_ns,
            Percentile::P999 => self.p999_ns,
            Percentile::P9999 => self.p9999_ns,
            Percentile::P99999 => self.p99999_ns,
        }
    }

    /// The percentiles that too few samples support (`count < p.min_samples()`).
    /// They are still reported, and must be shown as such.
    pub fn thin_percentiles(&self) -> Vec<Percentile> {
        Percentile::ALL
            .into_iter()
            .filter(|p| self.count < p.min_samples())
            .collect()
    }

    /// Whether `p` rests on enough samples.
    pub fn supports(&self, p: Percentile) -> bool {
        self.count >= p.min_samples()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_samples_follow_one_over_one_minus_p() {
        let got: Vec<u64> = Percentile::ALL.iter().map(|p| p.min_samples()).collect();
        assert_eq!(got, vec![2, 10, 100, 1_000, 10_000, 100_000]);
    }

    #[test]
    fn rank_is_nearest_rank() {
        assert_eq!(Percentile::P50.rank(1), 1);
        assert_eq!(Percentile::P50.rank(4), 2);
        assert_eq!(Percentile::P50.rank(5), 3);
        assert_eq!(Percentile::P99.rank(1_000), 990);
        assert_eq!(Percentile::P99999.rank(10), 10);
        assert_eq!(Percentile::P50.rank(0), 1);
    }
}
