//! The decisions in words: durations and the reasons of the anti ping-pong rule.

use crate::migrate::MigrationStats;

/// A duration in words: `150 us`, `4.2 ms`, `41 ms`, `2.5 s`
/// ([`DurationStyle::Rounded`](ictus_core::time::DurationStyle)).
pub(super) fn words(ns: u64) -> String {
    ictus_core::time::format_ns(ns as f64, ictus_core::time::DurationStyle::Rounded).to_string()
}

/// Why the anti ping-pong rule lets `stats` go back to an RT CPU at `now_ns`.
pub(super) fn return_reason(stats: &MigrationStats, now_ns: u64) -> String {
    match stats.predicted_next_ns() {
        None if stats.attempts == 0 => "no migration attempt yet".to_string(),
        None => "one migration attempt so far, no period known".to_string(),
        Some(next) if next > now_ns => {
            format!("next attempt predicted in {}", words(next - now_ns))
        }
        Some(next) => format!(
            "predicted attempt overdue by {}, more than its {} period",
            words(now_ns - next),
            words(stats.mean_period_ns as u64)
        ),
    }
}

/// Why the anti ping-pong rule keeps `stats` off RT CPUs at `now_ns`.
pub(super) fn withheld_reason(stats: &MigrationStats, now_ns: u64) -> String {
    match stats.predicted_next_ns() {
        Some(next) if next > now_ns => {
            format!("next attempt predicted in {}", words(next - now_ns))
        }
        Some(next) => format!("predicted attempt overdue by only {}", words(now_ns - next)),
        None => "no prediction".to_string(),
    }
}

pub(super) fn side(rt: bool) -> &'static str {
    if rt { "RT" } else { "NRT" }
}
