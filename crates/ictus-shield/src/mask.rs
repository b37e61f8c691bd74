//! The kernel's hexadecimal CPU masks (`/proc/irq/*/smp_affinity`, the workqueue
//! cpumask): 32-bit groups of hex digits separated by commas, most significant first.

use ictus_core::CpuSet;

/// Parses a hex mask like `3` or `00000000,00000001`; `None` when it is not one.
pub fn parse_mask(text: &str) -> Option<CpuSet> {
    let mut cpus = Vec::new();
    let groups: Vec<&str> = text.trim().split(',').collect();
    for (i, group) in groups.iter().rev().enumerate() {
        let word = u32::from_str_radix(group, 16).ok()?;
        cpus.extend((0..32).filter(|b| word & (1 << b) != 0).map(|b| i * 32 + b));
    }
    Some(CpuSet::from_cpus(cpus))
}

/// The hex mask of `cpus`, as the kernel accepts it (`3`, `1,00000000`).
pub fn format_mask(cpus: &CpuSet) -> String {
    let top = cpus.cpus().last().copied().unwrap_or(0);
    let words: Vec<u32> = (0..=top / 32)
        .map(|w| {
            cpus.cpus()
                .iter()
                .filter(|&&c| c / 32 == w)
                .fold(0u32, |acc, &c| acc | 1 << (c % 32))
        })
        .collect();
    let mut out = format!("{:x}", words[words.len() - 1]);
    for word in words.iter().rev().skip(1) {
        out.push_str(&format!(",{word:08x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip_across_word_boundaries() {
        for list in ["0", "1", "0-1", "0,33", "5,40-42"] {
            let sut: CpuSet = list.parse().unwrap();
            assert_eq!(parse_mask(&format_mask(&sut)), Some(sut), "{list}");
        }
    }

    #[test]
    fn kernel_forms_parse() {
        assert_eq!(parse_mask("3").unwrap().to_string(), "0-1");
        assert_eq!(parse_mask("00000000,00000002").unwrap().to_string(), "1");
        assert_eq!(format_mask(&"1".parse().unwrap()), "2");
        assert!(parse_mask("xyz").is_none());
    }
}
