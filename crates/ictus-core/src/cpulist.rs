//! [`CpuSet`]: the kernel's CPU list format (`0-3,8,10-11`), parsed and printed.
//!
//! ```
//! use ictus_core::CpuSet;
//! let set: CpuSet = "0-2,5".parse().unwrap();
//! assert_eq!(set.cpus(), &[0, 1, 2, 5]);
//! assert_eq!(set.to_string(), "0-2,5");
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a CPU list did not parse.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CpuListError {
    /// A part is not a number or a range `a-b`.
    #[error("'{part}' is not a CPU number or a range like 2-5")]
    BadPart {
        /// The offending part.
        part: String,
    },
    /// An empty item between commas (`0,,1`, `0,`): a typo, never what `/sys` prints.
    #[error(
        "an empty item in the list (expected CPU numbers or ranges like 2-5 between the commas)"
    )]
    EmptyPart,
    /// A range runs backwards.
    #[error("range {first}-{last} runs backwards")]
    Backwards {
        /// Start of the range.
        first: usize,
        /// End of the range.
        last: usize,
    },
    /// A CPU number beyond any plausible machine.
    #[error("CPU {cpu} is beyond the largest supported CPU number {max}")]
    TooLarge {
        /// The CPU asked for.
        cpu: usize,
        /// The largest accepted.
        max: usize,
    },
}

/// Largest CPU number accepted by the parser (the kernel's `CPU_SETSIZE` minus one).
pub const MAX_CPU: usize = 1023;

/// A sorted set of CPU numbers without duplicates.
///
/// Read from JSON as a list of CPU numbers, each at most [`MAX_CPU`] (a record or
/// manifest naming CPU 10^11 is refused at that number, never carried to a
/// `cpu_set_t`), sorted and without duplicates whatever the order written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CpuSet(Vec<usize>);

/// One CPU number read from a list: at most [`MAX_CPU`].
struct BoundedCpu(usize);

impl<'de> Deserialize<'de> for BoundedCpu {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cpu = u64::deserialize(d)?;
        usize::try_from(cpu)
            .ok()
            .filter(|&c| c <= MAX_CPU)
            .map(BoundedCpu)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "expected a CPU number from 0 to {MAX_CPU}, found {cpu}"
                ))
            })
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CpuSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a list of CPU numbers from 0 to {MAX_CPU}")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<CpuSet, A::Error> {
                // No capacity from the input's hint: at most MAX_CPU + 1 distinct CPUs.
                let mut cpus = Vec::new();
                while let Some(BoundedCpu(cpu)) = seq.next_element()? {
                    cpus.push(cpu);
                }
                Ok(CpuSet::from_cpus(cpus))
            }
        }
        d.deserialize_seq(V)
    }
}

impl CpuSet {
    /// The set of the given CPUs (sorted, duplicates removed).
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut v: Vec<usize> = cpus.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        CpuSet(v)
    }
    /// The CPUs, in increasing order.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for CpuSet {
    type Err = CpuListError;
    /// Parses the kernel's list format; surrounding whitespace and an empty string
    /// (the empty set) are accepted, as `/sys` files print them. An empty item inside
    /// a list (`0,,1`, `0,`) is refused: it is a typo that would silently drop CPUs.
    fn from_str(s: &str) -> Result<Self, CpuListError> {
        let mut cpus = Vec::new();
        if s.trim().is_empty() {
            return Ok(CpuSet::default());
        }
        for part in s.trim().split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(CpuListError::EmptyPart);
            }
            let num = |t: &str| {
                t.trim()
                    .parse::<usize>()
                    .map_err(|_| CpuListError::BadPart {
                        part: part.to_string(),
                    })
            };
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            if first > last {
                return Err(CpuListError::Backwards { first, last });
            }
            if last > MAX_CPU {
                return Err(CpuListError::TooLarge {
                    cpu: last,
                    max: MAX_CPU,
                });
            }
            cpus.extend(first..=last);
        }
        Ok(CpuSet::from_cpus(cpus))
    }
}

impl fmt::Display for CpuSet {
    /// The compact kernel form, `0-2,5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_beyond_max_cpu_in_json_is_refused_and_others_are_sorted() {
        let err = serde_json::from_str::<CpuSet>("[0, 99999999999]").unwrap_err();
        assert!(
            err.to_string()
                .contains("from 0 to 1023, found 99999999999"),
            "{err}"
        );
        let sut: CpuSet = serde_json::from_str("[3, 1, 3, 1023]").unwrap();
        assert_eq!(sut.cpus(), &[1, 3, 1023]);
        assert_eq!(serde_json::to_string(&sut).unwrap(), "[1,3,1023]");
        assert!(serde_json::from_str::<CpuSet>("[-1]").is_err());
        assert!(serde_json::from_str::<CpuSet>("{}").is_err());
    }
    use proptest::prelude::*;

    #[test]
    fn parses_what_sysfs_prints() {
        assert_eq!("0-1\n".parse::<CpuSet>().unwrap().cpus(), &[0, 1]);
        assert_eq!("".parse::<CpuSet>().unwrap(), CpuSet::default());
        assert_eq!("3,1,1".parse::<CpuSet>().unwrap().cpus(), &[1, 3]);
    }

    #[test]
    fn rejects_garbage_with_the_part_named() {
        assert_eq!(
            "1,x".parse::<CpuSet>().unwrap_err(),
            CpuListError::BadPart { part: "x".into() }
        );
        assert_eq!(
            "5-2".parse::<CpuSet>().unwrap_err(),
            CpuListError::Backwards { first: 5, last: 2 }
        );
        assert!(matches!(
            "0-5000".parse::<CpuSet>(),
            Err(CpuListError::TooLarge { .. })
        ));
    }

    #[test]
    fn an_empty_item_in_a_list_is_refused() {
        for text in ["0,,1", "0,", ",0", " , ", "1-2,,3"] {
            assert_eq!(
                text.parse::<CpuSet>().unwrap_err(),
                CpuListError::EmptyPart,
                "{text:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn a_list_with_an_empty_item_never_parses(
            cpus in prop::collection::vec(0usize..200, 1..10),
            at in 0usize..10,
        ) {
            let mut items: Vec<String> = cpus.iter().map(usize::to_string).collect();
            items.insert(at.min(items.len()), String::new());
            prop_assert!(items.join(",").parse::<CpuSet>().is_err());
        }

        #[test]
        fn display_and_parse_round_trip(cpus in prop::collection::vec(0usize..200, 0..40)) {
            let sut = CpuSet::from_cpus(cpus);
            prop_assert_eq!(sut.to_string().parse::<CpuSet>().unwrap(), sut);
        }
    }
}
