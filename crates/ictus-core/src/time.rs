//! [`Nanos`]: a count of nanoseconds, the one time type of ictus.
//!
//! ```
//! use ictus_core::time::Nanos;
//! let period = Nanos::from_micros(100);
//! assert_eq!(period.as_u64(), 100_000);
//! assert_eq!(period.to_string(), "100.0 us");
//! ```

use std::fmt;
use std::ops::{Add, AddAssign, Mul, Sub};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A duration or a reading of a monotonic clock, in integer nanoseconds.
///
/// Serialized as a plain integer; fields that hold one carry `_ns` in their name.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(u64);

impl Nanos {
    /// Zero nanoseconds.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable value (about 584 years).
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Wraps a count of nanoseconds.
    pub const fn new(ns: u64) -> Self {
        Nanos(ns)
    }
    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Nanos(us * 1_000)
    }
    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Nanos(ms * 1_000_000)
    }
    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        Nanos(s * 1_000_000_000)
    }
    /// The count of nanoseconds.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
    /// The value in microseconds, as a float (for display only).
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    /// The value in seconds, as a float (for display only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self - rhs`, or zero when `rhs` is later.
    pub const fn saturating_sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(rhs.0))
    }
    /// `self - rhs`, or `None` when `rhs` is later.
    pub const fn checked_sub(self, rhs: Nanos) -> Option<Nanos> {
        match self.0.checked_sub(rhs.0) {
            Some(v) => Some(Nanos(v)),
            None => None,
        }
    }
    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Nanos) -> Option<Nanos> {
        match self.0.checked_add(rhs.0) {
            Some(v) => Some(Nanos(v)),
            None => None,
        }
    }
    /// `self + rhs`, clamped at [`Nanos::MAX`].
    pub const fn saturating_add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

// Addition and multiplication saturate at [`Nanos::MAX`] (about 584 years): a
// time computed from absurd input is clamped, never wrapped into a small one.
impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}

impl Mul<u64> for Nanos {
    type Output = Nanos;
    fn mul(self, rhs: u64) -> Nanos {
        Nanos(self.0.saturating_mul(rhs))
    }
}

impl From<Duration> for Nanos {
    /// Saturates at [`Nanos::MAX`] (about 584 years).
    fn from(d: Duration) -> Self {
        Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl From<Nanos> for Duration {
    fn from(n: Nanos) -> Self {
        Duration::from_nanos(n.0)
    }
}

impl fmt::Display for Nanos {
    /// Human form with a unit chosen by magnitude: `950 ns`, `22.1 us`, `3.31 ms`, `1.20 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0 as f64;
        match self.0 {
            0..1_000 => write!(f, "{} ns", self.0),
            1_000..1_000_000 => write!(f, "{:.1} us", v / 1e3),
            1_000_000..1_000_000_000 => write!(f, "{:.2} ms", v / 1e6),
            _ => write!(f, "{:.2} s", v / 1e9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_products_saturate_instead_of_wrapping() {
        assert_eq!(Nanos::MAX + Nanos::new(1), Nanos::MAX);
        assert_eq!(Nanos::from_secs(1) * u64::MAX, Nanos::MAX);
        let mut sut = Nanos::new(u64::MAX - 1);
        sut += Nanos::new(5);
        assert_eq!(sut, Nanos::MAX);
    }

    #[test]
    fn display_picks_a_unit_by_magnitude() {
        assert_eq!(Nanos::new(950).to_string(), "950 ns");
        assert_eq!(Nanos::new(22_140).to_string(), "22.1 us");
        assert_eq!(Nanos::new(3_305_000).to_string(), "3.31 ms");
        assert_eq!(Nanos::from_millis(1_200).to_string(), "1.20 s");
    }

    #[test]
    fn duration_round_trips() {
        let sut = Nanos::new(1_234_567_891);
        assert_eq!(Nanos::from(Duration::from(sut)), sut);
    }

    #[test]
    fn subtraction_saturates_or_reports() {
        let sut = Nanos::new(5);
        assert_eq!(sut.saturating_sub(Nanos::new(9)), Nanos::ZERO);
        assert_eq!(sut.checked_sub(Nanos::new(9)), None);
        assert_eq!(sut.checked_sub(Nanos::new(2)), Some(Nanos::new(3)));
    }
}
