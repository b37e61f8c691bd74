//! The memory-latency probe's measurements: the access points (the chase and the strided
//! reads and writes) by working set, stride and thread count, the caches the kernel
//! reports, and the knees of the chase curve.

use serde::{Deserialize, Serialize};

use crate::record::Measurement;
use crate::view::{AllOr, Empty, Kind};

/// The name of a chase point.
pub const CHASE: &str = "chase";
/// The name of a strided-read point.
pub const STRIDED_READ: &str = "strided-read";
/// The name of a strided-write point.
pub const STRIDED_WRITE: &str = "strided-write";

/// A point of the dependent pointer chase (`chase`).
pub enum Chase {}

impl Kind for Chase {
    const NAMES: &'static [&'static str] = &[CHASE];
    type Labels = AccessLabels;
    type Metrics = ChaseMetrics;
}

/// A point of strided 64-bit reads or writes (`strided-read`, `strided-write`).
pub enum Strided {}

impl Kind for Strided {
    const NAMES: &'static [&'static str] = &[STRIDED_READ, STRIDED_WRITE];
    type Labels = AccessLabels;
    type Metrics = StridedMetrics;
}

/// Where an access point sits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccessLabels {
    /// The buffer walked.
    pub working_set_bytes: usize,
    /// Threads measuring at once.
    pub threads: usize,
    /// The aggregate of the threads (`"all"`; for one thread, that thread) or one of
    /// them.
    pub thread: AllOr<usize>,
    /// Distance between accesses (strided points only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride_bytes: Option<usize>,
    /// The CPU of one thread of several, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
}

/// What a chase point measured: the median of the repetitions, with their extremes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChaseMetrics {
    /// Time per dependent load.
    pub ns_per_load: f64,
    /// The fastest repetition.
    pub ns_per_load_min: f64,
    /// The slowest repetition.
    pub ns_per_load_max: f64,
    /// Loads per second (the threads summed).
    pub loads_per_s: f64,
    /// Share of the buffer on huge pages (transparent huge pages only).
    pub huge_page_share: Option<f64>,
}

/// What a strided point measured: the median of the repetitions, with their extremes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StridedMetrics {
    /// Time per 64-bit access.
    pub ns_per_access: f64,
    /// The fastest repetition.
    pub ns_per_access_min: f64,
    /// The slowest repetition.
    pub ns_per_access_max: f64,
    /// Bytes accessed per second (8 per access).
    pub bytes_per_s: f64,
    /// Cache-line bytes moved per second (the stride, up to a line, per access).
    pub line_bytes_per_s: f64,
    /// Share of the buffer on huge pages (transparent huge pages only).
    pub huge_page_share: Option<f64>,
}

/// A cache the kernel reports (`cache`).
pub enum Cache {}

impl Kind for Cache {
    const NAMES: &'static [&'static str] = &["cache"];
    type Labels = CacheLabels;
    type Metrics = Empty;
}

/// A chase or strided point read as one: where it sits, and its time per access (per
/// load, for the chase).
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// Where it sits.
    pub labels: AccessLabels,
    /// [`ChaseMetrics::ns_per_load`] or [`StridedMetrics::ns_per_access`].
    pub ns: f64,
}

impl Access {
    /// `m` read as a chase or strided point.
    pub fn read(m: &Measurement) -> Option<Access> {
        match m.read::<Chase>() {
            Some(p) => Some(Access {
                labels: p.labels,
                ns: p.metrics.ns_per_load,
            }),
            None => m.read::<Strided>().map(|p| Access {
                labels: p.labels,
                ns: p.metrics.ns_per_access,
            }),
        }
    }
}

/// A kernel-reported cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheLabels {
    /// `L1d`, `L1i`, `L2`, `L3`.
    pub cache: String,
    /// Its size.
    pub cache_bytes: u64,
    /// The CPUs sharing it (`0-3`).
    pub shared_cpus: String,
}

/// A knee of the one-thread chase curve: where the time per load rises (`knee`).
pub enum Knee {}

impl Kind for Knee {
    const NAMES: &'static [&'static str] = &["knee"];
    type Labels = KneeLabels;
    type Metrics = KneeMetrics;
}

/// Where a knee is, and the kernel's cache it matches, if one does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeLabels {
    /// The last working set before the rise.
    pub lower_bytes: usize,
    /// The first working set after it.
    pub upper_bytes: usize,
    /// Threads of the curve (1).
    pub threads: usize,
    /// The kernel's cache at this knee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// That cache's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
}

/// The rise at a knee.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KneeMetrics {
    /// Time per load at `lower_bytes`.
    pub ns_below: f64,
    /// Time per load at `upper_bytes`.
    pub ns_above: f64,
    /// `ns_above / ns_below`.
    pub ratio: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Point;
    use crate::view::tests::{keys, round_trip};

    fn labels(stride_bytes: Option<usize>) -> AccessLabels {
        AccessLabels {
            working_set_bytes: 4096,
            threads: 2,
            thread: AllOr::One(1),
            stride_bytes,
            cpu: Some(3),
        }
    }

    #[test]
    fn a_chase_point_reads_back_with_the_keys_the_report_knows() {
        let sut = Point::<Chase>::new(
            labels(None),
            ChaseMetrics {
                ns_per_load: 1.5,
                ns_per_load_min: 1.4,
                ns_per_load_max: 1.6,
                loads_per_s: 6e8,
                huge_page_share: None,
            },
        );
        let m = round_trip(&sut, CHASE);
        assert_eq!(
            keys(&m),
            (
                vec!["cpu", "thread", "threads", "working_set_bytes"],
                vec![
                    "loads_per_s",
                    "ns_per_load",
                    "ns_per_load_max",
                    "ns_per_load_min"
                ]
            )
        );
        assert_eq!(m.labels["thread"], 1);
    }

    #[test]
    fn a_strided_point_reads_back_under_both_names() {
        let mut l = labels(Some(64));
        l.thread = AllOr::All;
        l.cpu = None;
        let sut = Point::<Strided>::new(
            l,
            StridedMetrics {
                ns_per_access: 0.5,
                ns_per_access_min: 0.4,
                ns_per_access_max: 0.6,
                bytes_per_s: 16e9,
                line_bytes_per_s: 128e9,
                huge_page_share: Some(0.5),
            },
        );
        round_trip(&sut, STRIDED_WRITE);
        let m = round_trip(&sut, STRIDED_READ);
        assert_eq!(m.labels["thread"], "all");
        assert_eq!(
            keys(&m).1,
            vec![
                "bytes_per_s",
                "huge_page_share",
                "line_bytes_per_s",
                "ns_per_access",
                "ns_per_access_max",
                "ns_per_access_min"
            ]
        );
        assert!(m.read::<Chase>().is_none());
        assert_eq!(Access::read(&m).map(|a| a.ns), Some(0.5));
    }

    #[test]
    fn caches_and_knees_read_back() {
        let cache = Point::<Cache>::new(
            CacheLabels {
                cache: "L2".into(),
                cache_bytes: 1 << 20,
                shared_cpus: "0-1".into(),
            },
            Empty {},
        );
        assert!(round_trip(&cache, "cache").metrics.is_empty());
        let knee = Point::<Knee>::new(
            KneeLabels {
                lower_bytes: 1 << 19,
                upper_bytes: 1 << 21,
                threads: 1,
                cache: None,
                cache_bytes: None,
            },
            KneeMetrics {
                ns_below: 4.0,
                ns_above: 12.0,
                ratio: Some(3.0),
            },
        );
        let m = round_trip(&knee, "knee");
        assert_eq!(
            keys(&m),
            (
                vec!["lower_bytes", "threads", "upper_bytes"],
                vec!["ns_above", "ns_below", "ratio"]
            )
        );
    }
}
