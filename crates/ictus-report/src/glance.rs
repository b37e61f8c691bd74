//! The verdict at a glance: per configuration of the verdict's probe (the loop),
//! whether it held, its misses, its worst step, the cause that cost most and its
//! misses as time by cause ([`TimeByCause`]), with the advice that follows, as the
//! document's glance ([`model`]): a compact table (Markdown, the terminal) and a chart
//! (HTML: one stacked bar per configuration, [`svg`]).

use std::fmt::Write as _;

use ictus_core::Nanos;
use ictus_core::time::DurationStyle;
use ictus_explain::{ALL_KINDS, CauseKind, TimeByCause};
use ictus_os::pm_qos::PmQos;
use ictus_probe::r#loop::view::Trial;

use crate::doc::{self, Grid};
use crate::format::escape;
use crate::probes::ProbeReport;
use crate::results::{Results, Run};

/// One configuration of the verdict.
#[derive(Clone, Debug)]
pub(crate) struct Glance {
    /// The step (`loop-rt-pinned-idle`).
    pub(crate) id: String,
    /// `real-time, pinned, idle` (and `, CPU latency QoS off` where it was).
    pub(crate) place: String,
    /// Steps that missed their deadline.
    pub(crate) misses: u64,
    /// Steps tried.
    pub(crate) steps: u64,
    /// The longest step.
    pub(crate) worst: Option<Nanos>,
    /// The period.
    pub(crate) period: Nanos,
    /// Its explained misses as time by cause, where they were explained.
    pub(crate) chart: Option<TimeByCause>,
}

impl Glance {
    /// Whether every step made its deadline.
    pub(crate) fn held(&self) -> bool {
        self.misses == 0
    }

    /// `host stall (the vCPU did not run) 12.4 ms (36 %)`, or `-`.
    pub(crate) fn cost_most(&self) -> String {
        let Some(c) = &self.chart else {
            return if self.held() { "-" } else { "not explained" }.into();
        };
        match (c.leading(), c.lateness_ns) {
            (Some(l), late) if l.ns > 0 && late > 0 => format!(
                "{} {} ({:.0} %)",
                short(&l.phrase, l.kind),
                time(l.ns),
                100.0 * l.ns as f64 / late as f64
            ),
            (Some(l), _) => format!(
                "{} ({} of {} misses)",
                short(&l.phrase, l.kind),
                l.misses,
                c.misses
            ),
            (None, _) => "-".into(),
        }
    }

    /// `12 of 1,000` steps.
    pub(crate) fn misses_words(&self) -> String {
        format!("{} of {}", self.misses, crate::format::count(self.steps))
    }

    /// `357 µs (period 100 µs)`.
    pub(crate) fn worst_words(&self) -> String {
        format!(
            "{} (period {})",
            self.worst.map_or("-".into(), |w| time(w.as_u64())),
            time(self.period.as_u64())
        )
    }

    /// `host stall 12.4 ms, preempted by burner 1.60 ms, too small to name 6.00 µs`.
    pub(crate) fn by_cause_words(&self) -> String {
        let Some(c) = &self.chart else {
            return "-".into();
        };
        let mut parts: Vec<String> = c
            .causes
            .iter()
            .map(|x| {
                if x.ns > 0 {
                    format!("{} {}", short(&x.phrase, x.kind), time(x.ns))
                } else {
                    format!("{} {}", x.misses, short(&x.phrase, x.kind))
                }
            })
            .collect();
        if c.rest_ns > 0 && c.causes.iter().any(|x| x.ns > 0) {
            parts.push(format!("{REST} {}", time(c.rest_ns)));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    }

    /// `64 % of 34.0 ms late`, or `-`.
    pub(crate) fn accounted_words(&self) -> String {
        match self
            .chart
            .as_ref()
            .and_then(|c| Some((c.accounted_share()?, c)))
        {
            Some((share, c)) => format!("{:.0} % of {} late", share * 100.0, time(c.lateness_ns)),
            None => "-".into(),
        }
    }
}

/// A cause in few words: its kind's label (`host stall`), but a thread named
/// (`preempted by burner`).
fn short(phrase: &str, kind: Option<CauseKind>) -> String {
    match kind {
        Some(CauseKind::Preempted) | None => phrase.to_string(),
        Some(k) => k.label().to_string(),
    }
}

/// The part of a bar no named cause holds.
pub(crate) const REST: &str = "too small to name";

fn time(ns: u64) -> String {
    Nanos::new(ns).show(DurationStyle::Significant).to_string()
}

/// The first trial of a run of the verdict's probe.
fn glance(r: &Results, run: &Run) -> Option<Glance> {
    let trial = run
        .record
        .measurements
        .iter()
        .find_map(|m| m.read::<Trial>())?;
    let qos_off = r
        .manifest
        .as_ref()
        .and_then(|m| m.steps.iter().find(|s| s.id == run.id))
        .is_some_and(|s| s.pm_qos == Some(PmQos::Off));
    Some(Glance {
        id: run.id.clone(),
        place: format!(
            "{}{}",
            run.config(),
            if qos_off { ", CPU latency QoS off" } else { "" }
        ),
        misses: trial.metrics.misses.max(0.0) as u64,
        steps: trial.labels.steps,
        worst: trial
            .metrics
            .worst_completion_ns
            .map(|w| Nanos::new(w as u64)),
        period: Nanos::new(trial.labels.period_ns),
        chart: run
            .record
            .explanation
            .as_ref()
            .filter(|e| e.breakdown.events > 0)
            .map(TimeByCause::of),
    })
}

/// One glance per fixed-frequency run of the verdict's probe (the search for the
/// highest frequency held is not a configuration), in the results' order.
pub(crate) fn glances(r: &Results) -> Vec<Glance> {
    r.of(ProbeReport::verdict_probe())
        .filter(|run| !run.id.contains("-find-max"))
        .filter_map(|run| glance(r, run))
        .collect()
}

/// The compact table's columns (Markdown and terminal).
const HEADER: [&str; 7] = [
    "configuration",
    "held",
    "misses",
    "worst step",
    "cost most",
    "time by cause",
    "counters account for",
];

/// What the chart shows (under it).
const CAPTION: &str = "Each configuration of the loop: held or not, its misses, its worst \
    step and the cause that cost most; the bar is its misses' lateness by the cause that \
    accounts for it (hover for the time), the share the counters on this machine account \
    for beside it.";

/// The verdict at a glance: per configuration of the loop, whether it held, its misses,
/// its worst step, the cause that cost most, its misses as time by cause and the share
/// the counters account for, as a table and as a chart; then the advice that follows
/// from each configuration's costliest cause. `None` without a configuration.
pub(crate) fn model(r: &Results) -> Option<doc::Glance> {
    let g = glances(r);
    if g.is_empty() {
        return None;
    }
    let rows = g
        .iter()
        .map(|g| {
            vec![
                g.place.clone(),
                if g.held() { "yes" } else { "no" }.into(),
                g.misses_words(),
                g.worst_words(),
                g.cost_most(),
                g.by_cause_words(),
                g.accounted_words(),
            ]
        })
        .collect();
    Some(doc::Glance {
        table: Grid {
            header: HEADER.map(String::from).to_vec(),
            numeric: vec![false, false, true, true, false, false, false],
            rows,
        },
        svg: svg(&g),
        caption: CAPTION.into(),
        advice: g
            .iter()
            .filter_map(|g| {
                let a = g.chart.as_ref()?.advice.clone()?;
                Some((g.place.clone(), a))
            })
            .collect(),
    })
}

/// The colour of a cause kind in every chart (the live page's too: keep
/// `crates/ictus-ui/src/page.html` in step).
pub(crate) fn colour(kind: Option<CauseKind>) -> &'static str {
    match kind {
        Some(CauseKind::HostStall) => "#6a3d9a",
        Some(CauseKind::Steal) => "#b294c7",
        Some(CauseKind::Preempted) => "#e31a1c",
        Some(CauseKind::RtThrottling) => "#fb9a99",
        Some(CauseKind::Interrupts) => "#1f78b4",
        Some(CauseKind::Softirqs) => "#a6cee3",
        Some(CauseKind::IdleExit) => "#33a02c",
        Some(CauseKind::PageFaults) => "#b2df8a",
        Some(CauseKind::Overrun) => "#ff7f00",
        Some(CauseKind::Unaccounted) => "#fdbf6f",
        Some(CauseKind::Unexplained) => "#8c8c8c",
        None => "#bdbdbd",
    }
}

/// A segment of a bar as an SVG rectangle at `x`, `bar_y`, with its cause, its share
/// and (on hover) its time.
fn segment(s: &Segment, by_time: bool, x: f64, bar_y: u32) -> String {
    let fill = if s.rest { REST_COLOUR } else { colour(s.kind) };
    let what = if by_time {
        format!(
            "{}: {} ({:.0} % of the lateness{})",
            s.phrase,
            time(s.value),
            100.0 * s.share,
            if s.capped {
                ", drawn to the bar's end"
            } else {
                ""
            }
        )
    } else {
        format!("{}: {} misses", s.phrase, s.value)
    };
    format!(
        "<rect class=\"cause\" data-cause=\"{}\" data-share=\"{:.4}\" x=\"{x:.1}\" y=\"{bar_y}\" width=\"{:.1}\" height=\"20\" fill=\"{fill}\" stroke=\"#fff\" stroke-width=\"0.5\"><title>{}</title></rect>",
        escape(&s.phrase),
        s.share,
        s.width,
        escape(&what)
    )
}

/// The chart's legend at `legend_y`: every cause drawn (`kinds`, in the order of
/// ALL_KINDS), the rest where one was drawn, and the configurations whose causes
/// overlap (`overlaps`); with the chart's height below it.
fn legend(
    legend_y: u32,
    kinds: &[Option<CauseKind>],
    rest: bool,
    overlaps: &[String],
) -> (String, u32) {
    let mut entries: Vec<(&str, &str)> = ALL_KINDS
        .iter()
        .filter(|k| kinds.contains(&Some(**k)))
        .map(|k| (k.label(), colour(Some(*k))))
        .collect();
    if kinds.contains(&None) {
        entries.push(("not read by the sampler", colour(None)));
    }
    if rest {
        entries.push((REST, REST_COLOUR));
    }
    let mut legend = String::from("<g class=\"legend\">");
    let mut x = BAR_X;
    for (label, fill) in &entries {
        let _ = write!(
            legend,
            "<g class=\"key\"><rect x=\"{x}\" y=\"{legend_y}\" width=\"12\" height=\"12\" fill=\"{fill}\" stroke=\"#a0aec0\" stroke-width=\"0.5\"/><text x=\"{}\" y=\"{}\" font-size=\"13\">{}</text></g>",
            x + 16,
            legend_y + 11,
            escape(label)
        );
        x += 16 + 8 * label.chars().count() as u32 + 18;
    }
    let mut height = legend_y + if entries.is_empty() { 0 } else { 22 };
    // Causes overlap where one miss has several: their times then sum to more than
    // the lateness, and the bars stop at its end.
    if !overlaps.is_empty() {
        let _ = write!(
            legend,
            "<text class=\"overlap\" x=\"{BAR_X}\" y=\"{}\" font-size=\"13\" fill=\"#4a5568\">{}</text>",
            height + 11,
            escape(&format!(
                "Causes overlap (one miss can have several): their times sum to {} of the \
                 lateness; each bar stops at its end.",
                overlaps.join(", ")
            ))
        );
        height += 20;
    }
    legend.push_str("</g>");
    (legend, height)
}

/// One segment of a configuration's bar.
#[derive(Clone, Debug, PartialEq)]
struct Segment {
    /// The cause in the breakdown's words, or [`REST`].
    phrase: String,
    /// Its kind (its colour).
    kind: Option<CauseKind>,
    /// Whether it is the rest no named cause holds.
    rest: bool,
    /// Its time (ns), or its misses in records without times.
    value: u64,
    /// Its share of the whole: of the lateness, or of the misses.
    share: f64,
    /// Its width in pixels: `share` of the bar, cut where the bar ends.
    width: f64,
    /// Whether the bar's end cut it.
    capped: bool,
}

/// A configuration's bar: its segments in order.
#[derive(Clone, Debug, PartialEq)]
struct Bar {
    /// By time (the lateness is the whole bar), else (older records) by misses.
    by_time: bool,
    /// The segments drawn, left to right (none of zero width).
    segments: Vec<Segment>,
    /// The causes' times as a share of the lateness, where they overlap and sum to
    /// more than it (1.6: 160 %).
    overlap: Option<f64>,
}

/// The bar of `c`: each cause's time as a share of the lateness (the number its
/// labels say), the rest that no named cause holds as a segment of its own, all cut
/// where the bar ends (causes overlap: one miss can have several). Records without
/// times: each cause's misses as a share of the misses. `None` with nothing to draw.
fn bar(c: &TimeByCause) -> Option<Bar> {
    let named: u64 = c.causes.iter().map(|x| x.ns).sum();
    let by_time = named + c.rest_ns > 0;
    let whole = if by_time {
        // The lateness; a record without it (none kept) shares out what it has.
        if c.lateness_ns > 0 {
            c.lateness_ns
        } else {
            named + c.rest_ns
        }
    } else {
        c.causes.iter().map(|x| x.misses).sum::<u64>()
    };
    if whole == 0 {
        return None;
    }
    let mut parts: Vec<(String, Option<CauseKind>, bool, u64)> = c
        .causes
        .iter()
        .map(|x| {
            let v = if by_time { x.ns } else { x.misses };
            (x.phrase.clone(), x.kind, false, v)
        })
        .collect();
    if by_time && c.rest_ns > 0 {
        parts.push((REST.into(), None, true, c.rest_ns));
    }
    let mut left = BAR_W as f64;
    let mut segments = Vec::new();
    for (phrase, kind, rest, value) in parts.into_iter().filter(|p| p.3 > 0) {
        let share = value as f64 / whole as f64;
        let full = BAR_W as f64 * share;
        let width = full.min(left);
        left -= width;
        if width < 0.05 {
            continue;
        }
        segments.push(Segment {
            phrase,
            kind,
            rest,
            value,
            share,
            width,
            capped: full - width > 1e-6,
        });
    }
    let overlap = (by_time && c.lateness_ns > 0 && named > c.lateness_ns)
        .then(|| named as f64 / c.lateness_ns as f64);
    Some(Bar {
        by_time,
        segments,
        overlap,
    })
}

/// The colour of [`REST`].
const REST_COLOUR: &str = "#e2e8f0";

const WIDTH: u32 = 1100;
const ROW: u32 = 58;
const BAR_X: u32 = 16;
const BAR_W: u32 = 640;

/// The chart: one row per configuration (held or not, misses, worst step, the
/// cause that cost most), a bar of its misses' lateness by cause (each bar its own
/// 100 %, its total and the share the counters account for beside it), and a
/// legend naming the causes drawn.
fn svg(glances: &[Glance]) -> String {
    let mut kinds: Vec<Option<CauseKind>> = Vec::new();
    let mut rest = false;
    let mut overlaps: Vec<String> = Vec::new();
    let mut body = String::new();
    for (i, g) in glances.iter().enumerate() {
        let y = 8 + i as u32 * ROW;
        let (mark, tint) = if g.held() {
            ("✓ held", "#2f855a")
        } else {
            ("✗ missed", "#c05621")
        };
        let _ = write!(
            body,
            "<g class=\"config\" data-id=\"{}\" data-held=\"{}\">\
             <text x=\"{BAR_X}\" y=\"{}\" font-size=\"14\"><tspan font-weight=\"700\" fill=\"{tint}\">{mark}</tspan> \
             <tspan font-weight=\"600\">{}</tspan>: {} misses, worst step {}{}</text>",
            escape(&g.id),
            g.held(),
            y + 16,
            escape(&g.place),
            escape(&g.misses_words()),
            escape(&g.worst_words()),
            match g.chart.as_ref().and_then(|c| c.leading()) {
                Some(_) => escape(&format!("; cost most: {}", g.cost_most())),
                None => String::new(),
            }
        );
        let bar_y = y + 24;
        let _ = write!(
            body,
            "<g class=\"bar\"><rect x=\"{BAR_X}\" y=\"{bar_y}\" width=\"{BAR_W}\" height=\"20\" fill=\"#f7fafc\" stroke=\"#cbd5e0\"/>"
        );
        let beside = match g.chart.as_ref().and_then(|c| Some((bar(c)?, c))) {
            Some((b, c)) => {
                let mut x = BAR_X as f64;
                for s in &b.segments {
                    body.push_str(&segment(s, b.by_time, x, bar_y));
                    x += s.width;
                    if s.rest {
                        rest = true;
                    } else if !kinds.contains(&s.kind) {
                        kinds.push(s.kind);
                    }
                }
                if let Some(sum) = b.overlap {
                    overlaps.push(format!("{:.0} % in {}", 100.0 * sum, g.place));
                }
                if b.by_time {
                    format!(
                        "{} late, counters account for {}",
                        time(c.lateness_ns),
                        match c.accounted_share() {
                            Some(s) => format!("{:.0} %", s * 100.0),
                            None => "-".into(),
                        }
                    )
                } else {
                    format!("{} misses by cause (no times in this record)", c.misses)
                }
            }
            None if g.held() => "no misses".into(),
            None => "misses not explained (explaining was off)".into(),
        };
        let _ = write!(
            body,
            "</g><text x=\"{}\" y=\"{}\" font-size=\"13\" fill=\"#4a5568\">{}</text></g>",
            BAR_X + BAR_W + 12,
            bar_y + 15,
            escape(&beside)
        );
    }
    let (legend, height) = legend(8 + glances.len() as u32 * ROW + 6, &kinds, rest, &overlaps);
    format!(
        "<svg class=\"glance\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" style=\"max-width: 100%; height: auto\" font-family=\"system-ui, sans-serif\"><title>Each configuration's misses as time by cause</title>{body}{legend}</svg>"
    )
}

#[cfg(test)]
mod tests {
    use ictus_explain::CauseTime;

    use super::*;

    /// A cause of `ns` (its kind read from the phrase).
    fn cause(phrase: &str, ns: u64, misses: u64) -> CauseTime {
        CauseTime {
            phrase: phrase.into(),
            kind: CauseKind::of_phrase(phrase),
            misses,
            ns,
        }
    }

    /// Invented rows: `causes` over a lateness of `lateness_ns`, the rest as the
    /// breakdown computes it.
    fn chart(lateness_ns: u64, causes: Vec<CauseTime>) -> TimeByCause {
        let named: u64 = causes.iter().map(|c| c.ns).sum();
        TimeByCause {
            misses: causes.iter().map(|c| c.misses).sum(),
            lateness_ns,
            causes,
            rest_ns: lateness_ns.saturating_sub(named),
            ..TimeByCause::default()
        }
    }

    fn widths(b: &Bar) -> Vec<f64> {
        b.segments.iter().map(|s| s.width).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn each_segment_is_its_share_of_the_lateness_and_the_rest_is_a_segment() {
        let kinds = [CauseKind::Softirqs, CauseKind::Interrupts];
        let c = chart(
            1_000,
            vec![
                cause(kinds[0].phrase(), 500, 3),
                cause(kinds[1].phrase(), 200, 1),
            ],
        );
        let b = bar(&c).unwrap();
        assert!(b.by_time);
        assert_eq!(b.overlap, None);
        let shares: Vec<f64> = b.segments.iter().map(|s| s.share).collect();
        assert_eq!(shares.len(), 3, "{b:?}");
        for (share, want) in shares.iter().zip([0.5, 0.2, 0.3]) {
            assert!(close(*share, want), "{shares:?}");
        }
        // The widths are the shares of the bar, and fill it exactly.
        for s in &b.segments {
            assert!(close(s.width, s.share * BAR_W as f64), "{s:?}");
            assert!(!s.capped);
        }
        assert!(b.segments[2].rest && b.segments[2].phrase == REST);
        assert!(close(widths(&b).iter().sum(), BAR_W as f64));
    }

    #[test]
    fn overlapping_causes_are_cut_at_the_bar_end_and_said_to_overlap() {
        // As "normal, unpinned, all loads": softirqs 96 % of the lateness, interrupts
        // 60 %, a page fault 4 %: 160 % in all.
        let c = chart(
            10_000,
            vec![
                cause(CauseKind::Softirqs.phrase(), 9_600, 5),
                cause(CauseKind::Interrupts.phrase(), 6_000, 2),
                cause(CauseKind::PageFaults.phrase(), 400, 1),
            ],
        );
        let b = bar(&c).unwrap();
        // The first segment is drawn at the share its label says, not of the sum.
        assert!(close(b.segments[0].share, 0.96));
        assert!(close(b.segments[0].width, 0.96 * BAR_W as f64));
        assert!(!b.segments[0].capped);
        // The next is cut where the bar ends; the last does not fit at all.
        assert!(b.segments[1].capped);
        assert!(close(b.segments[1].width, 0.04 * BAR_W as f64));
        assert_eq!(b.segments.len(), 2, "{b:?}");
        assert!(close(widths(&b).iter().sum(), BAR_W as f64));
        // No rest: the causes hold all of it, and more.
        assert!(b.segments.iter().all(|s| !s.rest));
        assert!(close(b.overlap.unwrap(), 1.6));
    }

    #[test]
    fn without_times_the_bar_is_shared_by_misses() {
        let c = chart(0, vec![cause("interrupts", 0, 3), cause("softirqs", 0, 1)]);
        let b = bar(&c).unwrap();
        assert!(!b.by_time);
        assert_eq!(b.overlap, None);
        assert!(close(b.segments[0].width, 0.75 * BAR_W as f64));
        assert!(close(b.segments[1].width, 0.25 * BAR_W as f64));
        assert_eq!(bar(&chart(0, Vec::new())), None);
    }
}
