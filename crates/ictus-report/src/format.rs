//! Numbers with units and sensible precision.

/// Three significant digits, no exponent: `8.30`, `18.2`, `130`, `1055`.
pub(crate) use ictus_core::time::sig3;

/// A time in nanoseconds with a unit chosen by magnitude: `812 ns`, `12.3 µs`,
/// `1.66 ms`, `2.35 s` ([`DurationStyle::Significant`](ictus_core::time::DurationStyle)).
pub(crate) fn ns(v: f64) -> String {
    ictus_core::time::format_ns(v, ictus_core::time::DurationStyle::Significant).to_string()
}

/// Bytes as sizes are written: `44 B`, `4 KiB`, `1.5 MiB`.
pub(crate) fn bytes(b: f64) -> String {
    for (size, unit) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        let s = size as f64;
        if b >= s {
            let v = b / s;
            return if v.fract() == 0.0 {
                format!("{v:.0} {unit}")
            } else {
                format!("{} {unit}", sig3(v))
            };
        }
    }
    format!("{b:.0} B")
}

/// A data rate in MB/s (10^6 bytes, as seed 004's MByte/s).
pub(crate) fn mb_per_s(bytes_per_s: f64) -> String {
    format!("{} MB/s", sig3(bytes_per_s / 1e6))
}

/// A frequency: `4929 kHz`, `12.4 kHz`, `950 Hz`.
pub(crate) fn hz(v: f64) -> String {
    if v >= 1e6 {
        format!("{} MHz", sig3(v / 1e6))
    } else if v >= 1e3 {
        format!("{} kHz", sig3(v / 1e3))
    } else {
        format!("{} Hz", sig3(v))
    }
}

/// A count with thousands separators: `1,000,000`.
pub(crate) fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A ratio: `×0.85`, `×12.3`.
pub(crate) fn ratio(r: f64) -> String {
    format!("×{}", sig3(r))
}

/// The sentence with its first letter a capital.
pub(crate) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Escapes text for HTML.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_get_a_unit_and_three_digits() {
        assert_eq!(ns(812.0), "812 ns");
        assert_eq!(ns(8.3), "8.30 ns");
        assert_eq!(ns(12_345.0), "12.3 µs");
        assert_eq!(ns(1_660_000.0), "1.66 ms");
        assert_eq!(ns(2_350_000_000.0), "2.35 s");
    }

    #[test]
    fn sizes_rates_and_counts_read_naturally() {
        assert_eq!(bytes(44.0), "44 B");
        assert_eq!(bytes(4096.0), "4 KiB");
        assert_eq!(bytes(1536.0 * 1024.0), "1.50 MiB");
        assert_eq!(mb_per_s(1_055_394_580.0), "1055 MB/s");
        assert_eq!(hz(4_929_335.0), "4.93 MHz");
        assert_eq!(hz(12_419.0), "12.4 kHz");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(999), "999");
    }
}
