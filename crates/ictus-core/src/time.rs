//! [`Nanos`]: a count of nanoseconds, the one time type of ictus; and
//! [`format_ns`], the one way a duration is written for a person, in one of the
//! [`DurationStyle`]s that ictus's outputs use.
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
    /// Human form with a unit chosen by magnitude: `950 ns`, `22.1 us`, `3.31 ms`, `1.20 s`
    /// ([`DurationStyle::Fixed`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&format_ns(self.0 as f64, DurationStyle::Fixed), f)
    }
}

impl Nanos {
    /// This duration written in `style` (see [`format_ns`]).
    pub fn show(self, style: DurationStyle) -> Shown {
        format_ns(self.0 as f64, style)
    }
}

/// How a duration is written for a person. Each output of ictus keeps one style, so
/// that its text stays what it was; the styles differ in precision and in how
/// "micro" is spelled (`us` where text may be read by tools and terminals without
/// Unicode, `µs` in reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationStyle {
    /// [`Nanos`]'s `Display`: `950 ns`, `22.1 us`, `3.31 ms`, `1.20 s` (whole
    /// nanoseconds, one decimal of microseconds, two of milliseconds and seconds).
    Fixed,
    /// Three significant digits and the micro sign, for reports (terminal tables,
    /// Markdown, HTML): `812 ns`, `12.3 µs`, `1.66 ms`, `2.35 s`.
    Significant,
    /// Two digits at most, for sentences (the balancer's reasons): `150 us`, `4.2 ms`,
    /// `41 ms`, `2.5 s`, `12 s`; below a millisecond in whole microseconds.
    Rounded,
    /// A whole number of the largest unit that divides it (`50 ms`, `1 s`, `20 us`),
    /// else [`DurationStyle::Fixed`]: for limits and settings (the doctor's).
    Whole,
    /// Whole microseconds, as the kernel declares exit latencies: `0 us`, `133 us`.
    Micros,
    /// One decimal of seconds from a second up, else of milliseconds: `55.1 s`,
    /// `12.5 ms` (the doctor's idle-state residencies).
    Tenths,
}

/// A duration of `ns` nanoseconds written in `style`: a value that implements
/// `Display`, so writing it allocates nothing. `ns` may be fractional or negative
/// (a mean, a difference); [`DurationStyle::Whole`] and [`DurationStyle::Micros`]
/// count whole nanoseconds.
///
/// ```
/// use ictus_core::time::{DurationStyle, format_ns};
/// assert_eq!(format_ns(12_345.0, DurationStyle::Significant).to_string(), "12.3 µs");
/// assert_eq!(format_ns(12_345.0, DurationStyle::Fixed).to_string(), "12.3 us");
/// assert_eq!(format_ns(150_000.0, DurationStyle::Rounded).to_string(), "150 us");
/// ```
pub fn format_ns(ns: f64, style: DurationStyle) -> Shown {
    Shown { ns, style }
}

/// A duration and the style it is written in ([`format_ns`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shown {
    ns: f64,
    style: DurationStyle,
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.ns;
        match self.style {
            DurationStyle::Fixed => {
                let a = v.abs();
                if a < 1e3 {
                    write!(f, "{v} ns")
                } else if a < 1e6 {
                    write!(f, "{:.1} us", v / 1e3)
                } else if a < 1e9 {
                    write!(f, "{:.2} ms", v / 1e6)
                } else {
                    write!(f, "{:.2} s", v / 1e9)
                }
            }
            DurationStyle::Significant => {
                let a = v.abs();
                if a < 1e3 {
                    write!(f, "{} ns", Sig3(v))
                } else if a < 1e6 {
                    write!(f, "{} µs", Sig3(v / 1e3))
                } else if a < 1e9 {
                    write!(f, "{} ms", Sig3(v / 1e6))
                } else {
                    write!(f, "{} s", Sig3(v / 1e9))
                }
            }
            DurationStyle::Rounded => {
                if v >= 10e9 {
                    write!(f, "{:.0} s", v / 1e9)
                } else if v >= 1e9 {
                    write!(f, "{:.1} s", v / 1e9)
                } else if v >= 10e6 {
                    write!(f, "{:.0} ms", v / 1e6)
                } else if v >= 1e6 {
                    write!(f, "{:.1} ms", v / 1e6)
                } else {
                    write!(f, "{:.0} us", v / 1e3)
                }
            }
            DurationStyle::Whole => {
                let ns = v as u64;
                for (size, unit) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
                    if ns >= size && ns.is_multiple_of(size) {
                        return write!(f, "{} {unit}", ns / size);
                    }
                }
                format_ns(v, DurationStyle::Fixed).fmt(f)
            }
            DurationStyle::Micros => write!(f, "{} us", v as u64 / 1_000),
            DurationStyle::Tenths => {
                // Milliseconds from the seconds, as the doctor always computed them
                // (so that a value on a rounding edge rounds as it did).
                let secs = v / 1e9;
                if secs >= 1.0 {
                    write!(f, "{secs:.1} s")
                } else {
                    write!(f, "{:.1} ms", secs * 1e3)
                }
            }
        }
    }
}

/// Three significant digits, no exponent: `8.30`, `18.2`, `130`, `1055`: the
/// precision of [`DurationStyle::Significant`], and of the reports' other units.
pub fn sig3(v: f64) -> String {
    Sig3(v).to_string()
}

/// [`sig3`] without allocating.
struct Sig3(f64);

impl fmt::Display for Sig3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let a = v.abs();
        if a >= 100.0 || a == 0.0 {
            write!(f, "{v:.0}")
        } else if a >= 10.0 {
            write!(f, "{v:.1}")
        } else if a >= 1.0 {
            write!(f, "{v:.2}")
        } else {
            write!(f, "{v:.3}")
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

    #[test]
    fn each_style_keeps_its_precision_and_its_micro() {
        let at = |ns: f64, style| format_ns(ns, style).to_string();
        use DurationStyle::*;
        assert_eq!(at(950.0, Fixed), "950 ns");
        assert_eq!(at(22_140.0, Fixed), "22.1 us");
        assert_eq!(at(812.0, Significant), "812 ns");
        assert_eq!(at(12_345.0, Significant), "12.3 µs");
        assert_eq!(at(1_660_000.0, Significant), "1.66 ms");
        assert_eq!(at(2_350_000_000.0, Significant), "2.35 s");
        assert_eq!(at(150_000.0, Rounded), "150 us");
        assert_eq!(at(4_200_000.0, Rounded), "4.2 ms");
        assert_eq!(at(41_000_000.0, Rounded), "41 ms");
        assert_eq!(at(2_500_000_000.0, Rounded), "2.5 s");
        assert_eq!(at(12e9, Rounded), "12 s");
        assert_eq!(at(50e6, Whole), "50 ms");
        assert_eq!(at(1e9, Whole), "1 s");
        assert_eq!(at(2_500_000.0, Whole), "2500 us");
        assert_eq!(at(2_500_100.0, Whole), "2.50 ms");
        assert_eq!(at(133_400.0, Micros), "133 us");
        assert_eq!(at(55_120_000_000.0, Tenths), "55.1 s");
        assert_eq!(at(12_460_000.0, Tenths), "12.5 ms");
        assert_eq!(Nanos::new(22_140).show(Significant).to_string(), "22.1 µs");
        assert_eq!(sig3(8.3), "8.30");
        assert_eq!(sig3(1055.0), "1055");
        assert_eq!(sig3(0.0), "0");
    }
}
