//! How the checks and the verdict write durations, sizes, limits and refusals.

use ictus_core::{CpuSet, Nanos};
use ictus_os::facts::{Attempt, Rlimit};

/// `50 ms`, `1 s`, `2500 us`: whole units without decimals where they divide it
/// (`2.50 ms` where none does).
pub(super) fn duration_text(d: Nanos) -> String {
    d.show(ictus_core::time::DurationStyle::Whole).to_string()
}

/// `32 KiB`, `8 MiB`, `1536 B`.
pub(super) fn bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if b >= size && b.is_multiple_of(size) {
            return format!("{} {unit}", b / size);
        }
    }
    if b >= 1 << 20 {
        return format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    }
    format!("{b} B")
}

pub(super) fn limit(v: Option<u64>, unit_bytes: bool) -> String {
    match v {
        None => "unlimited".to_owned(),
        Some(n) if unit_bytes => bytes(n),
        Some(n) => n.to_string(),
    }
}

pub(super) fn rlimit_text(r: Option<Rlimit>, unit_bytes: bool) -> String {
    match r {
        None => "unknown".to_owned(),
        Some(r) if r.soft == r.hard => limit(r.soft, unit_bytes),
        Some(r) => format!(
            "{} (hard {})",
            limit(r.soft, unit_bytes),
            limit(r.hard, unit_bytes)
        ),
    }
}

pub(super) fn attempt_text(a: &Attempt) -> String {
    match a {
        Attempt::Succeeded => "allowed".to_owned(),
        Attempt::Failed { errno, error } => {
            format!("refused with {} ({error})", errno_name(*errno))
        }
    }
}

pub(super) fn errno_name(errno: i32) -> String {
    match errno {
        1 => "EPERM".into(),
        12 => "ENOMEM".into(),
        13 => "EACCES".into(),
        16 => "EBUSY".into(),
        22 => "EINVAL".into(),
        38 => "ENOSYS".into(),
        n => format!("errno {n}"),
    }
}

/// The CPUs a real-time workload would get: every online CPU but the first.
pub(super) fn rt_cpus(online: &CpuSet) -> String {
    let rest = CpuSet::from_cpus(online.cpus().iter().skip(1).copied());
    if rest.is_empty() {
        "1".to_owned()
    } else {
        rest.to_string()
    }
}

/// An exit latency in microseconds, as the kernel declares it: `0 us`, `133 us`.
pub(super) fn duration_text_us(d: Nanos) -> String {
    d.show(ictus_core::time::DurationStyle::Micros).to_string()
}
