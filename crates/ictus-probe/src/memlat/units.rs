//! Sizes in binary units, printed and parsed (`4 KiB`, `64M`).

/// `4 KiB`, `1 MiB`, `1.5 GiB`, `100 B`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A byte count such as `4096`, `4K`, `64KiB`, `1M`, `2GiB` (binary multiples,
/// case-insensitive).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let num: usize = num
        .parse()
        .map_err(|_| format!("{text:?}: expected a size such as 4096, 64K or 256M"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?}: unknown unit (use K, M or G)")),
    };
    num.checked_mul(1usize << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

/// A comma-separated list of byte counts (see [`parse_bytes`]). An empty text is
/// the empty list; an empty item inside a list (`4K,,8K`, `4K,`) is refused, as a
/// typo that would silently drop a point.
pub fn parse_byte_list(text: &str) -> Result<Vec<usize>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|item| {
            if item.trim().is_empty() {
                Err(format!(
                    "{text:?}: an empty item in the list (expected sizes such as 4K between the commas)"
                ))
            } else {
                parse_bytes(item)
            }
        })
        .collect()
}
