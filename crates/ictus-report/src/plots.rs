//! The plots of the HTML report, drawn with plotters' SVG backend (text as SVG
//! `<text>`, no font files): latency histograms and tails, timelines, curves.

use std::error::Error;

use ictus_core::histogram::HistogramData;
use plotters::coord::Shift;
use plotters::coord::combinators::{LogCoord, WithKeyPoints};
use plotters::prelude::*;

use crate::format;
use crate::results::Run;

/// One item of a probe's plots section (the document's).
pub(crate) use crate::doc::Plot;

/// The merged latency histogram of `run`, when it has one with buckets.
pub(crate) fn merged(run: &Run) -> Option<&HistogramData> {
    run.record
        .merged
        .as_ref()
        .map(|l| &l.histogram)
        .filter(|h| !h.buckets.is_empty())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), Box<dyn Error>>;

/// Histogram bins per decade of latency.
const BINS_PER_DECADE: f64 = 40.0;

/// Plot size in pixels.
const W: u32 = 560;
const H: u32 = 340;

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The i-th series colour.
pub(crate) fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// An SVG of `size` pixels drawn by `draw`; what failed when it could not be drawn.
pub(crate) fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> Drawn,
) -> Result<String, Box<dyn Error>> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

/// One plot of the report on a white page, or a note saying why it is not drawn.
fn render(draw: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    svg((W, H), |root| {
        root.fill(&WHITE)?;
        draw(root)
    })
    .unwrap_or_else(|e| {
        format!(
            "<p class=\"note\">plot not drawn: {}</p>",
            crate::format::escape(&e.to_string())
        )
    })
}

/// A chart on `root` as every plot of the report starts one: `title` on top, room
/// below for the x labels and `y_labels` pixels to the left for the y labels.
fn chart_on<'a, 'b>(
    root: &'a Area<'b>,
    title: &str,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(y_labels);
    builder
}

/// A latency axis from `lo` to `hi` microseconds, log scale, its ticks at 1, 2 and 5
/// times the powers of ten of nanoseconds.
fn latency_axis(lo: f64, hi: f64) -> WithKeyPoints<LogCoord<f64>> {
    log_range(lo, hi).log_scale().with_key_points(
        decades(&log_range(lo * 1e3, hi * 1e3))
            .iter()
            .map(|v| v / 1e3)
            .collect(),
    )
}

/// The extent `(lowest, highest)` of `values`: (infinity, 0) when there are none.
fn extent(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values
        .into_iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)))
}

/// A line through `points` in colour `c`, named `name` in the legend.
pub(crate) fn line<CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, CT>,
    name: &str,
    points: impl IntoIterator<Item = (f64, f64)>,
    c: RGBColor,
) -> Drawn {
    chart
        .draw_series(LineSeries::new(points, c.stroke_width(2)))?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    Ok(())
}

/// The legend: every named series, in a light box at `position`.
pub(crate) fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Drawn {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(position)
        .draw()?;
    Ok(())
}

/// A log-scale axis range around `lo..hi` (both > 0).
fn log_range(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let lo = lo.max(1e-12);
    let hi = hi.max(lo * 1.01);
    (lo / 1.3)..(hi * 1.3)
}

/// Tick marks at 1, 2 and 5 times each power of ten within `r` (only the powers
/// when the range spans many decades).
fn decades(r: &std::ops::Range<f64>) -> Vec<f64> {
    let (a, b) = (r.start.log10().floor() as i32, r.end.log10().ceil() as i32);
    let mantissas: &[f64] = if b - a > 4 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    (a..=b)
        .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
        .filter(|v| r.contains(v))
        .collect()
}

/// Tick marks at powers of 4 (or 8, or 16 over wide ranges) within `r`: sizes.
fn powers(r: &std::ops::Range<f64>) -> Vec<f64> {
    let span = (r.end / r.start.max(1.0)).log2();
    let step = if span > 24.0 {
        4
    } else if span > 14.0 {
        3
    } else {
        2
    };
    (0..64)
        .step_by(step)
        .map(|k| 2f64.powi(k))
        .filter(|v| r.contains(v))
        .collect()
}

/// Shares as percentages: `100 %`, `0.1 %`.
fn share(v: &f64) -> String {
    let p = v * 100.0;
    if p >= 1.0 {
        format!("{p:.0} %")
    } else {
        format!(
            "{} %",
            format::sig3(p).trim_end_matches('0').trim_end_matches('.')
        )
    }
}

/// A tick label without trailing zeros: `5 µs`, `2.5 ms`, `100 ns`.
fn tidy(s: String) -> String {
    let (num, unit) = s.split_once(' ').unwrap_or((s.as_str(), ""));
    let num = if num.contains('.') {
        num.trim_end_matches('0').trim_end_matches('.')
    } else {
        num
    };
    if unit.is_empty() {
        num.to_string()
    } else {
        format!("{num} {unit}")
    }
}

fn us(v: &f64) -> String {
    tidy(format::ns(*v * 1e3))
}

/// Tick labels of time axes in nanoseconds.
pub(crate) fn tick_ns(v: &f64) -> String {
    tidy(format::ns(*v))
}

/// Tick labels of size axes in bytes.
pub(crate) fn tick_bytes(v: &f64) -> String {
    tidy(format::bytes(*v))
}

/// Tick labels of plain numbers.
pub(crate) fn tick_num(v: &f64) -> String {
    tidy(format::sig3(*v))
}

/// Tail plot: the share of samples at or above each latency, log-log, one line per
/// distribution. Shows every percentile at once, up to the max.
pub(crate) fn exceedance(title: &str, series: &[(String, &HistogramData)]) -> Option<String> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, h)| {
            let total: u64 = h.buckets.iter().map(|b| b.count).sum();
            let mut before = 0u64;
            let points = h
                .buckets
                .iter()
                .map(|b| {
                    let y = (total - before) as f64 / total.max(1) as f64;
                    before += b.count;
                    (b.value_ns as f64 / 1e3, y)
                })
                .collect();
            (name.clone(), points)
        })
        .filter(|(_, p): &(String, Vec<(f64, f64)>)| !p.is_empty())
        .collect();
    let (lo, hi) = extent(curves.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)));
    let ymin = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(1.0f64, f64::min);
    if curves.is_empty() || !lo.is_finite() {
        return None;
    }
    Some(render(|root| {
        let mut chart = chart_on(root, title, 56).build_cartesian_2d(
            latency_axis(lo, hi),
            ((ymin / 2.0)..1.5).log_scale().with_key_points(
                decades(&((ymin / 2.0)..1.5))
                    .into_iter()
                    .filter(|v| (v.log10().fract()).abs() < 1e-9)
                    .collect(),
            ),
        )?;
        chart
            .configure_mesh()
            .x_desc("latency")
            .y_desc("share of samples at least this late")
            .x_label_formatter(&us)
            .y_label_formatter(&share)
            .draw()?;
        for (i, (name, points)) in curves.iter().enumerate() {
            line(&mut chart, name, points.iter().copied(), colour(i))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }))
}

/// A histogram of one distribution on log-log axes: buckets gathered into
/// [`BINS_PER_DECADE`] bins a decade; `marker` draws a vertical line (a period, a deadline).
pub(crate) fn histogram(
    title: &str,
    h: &HistogramData,
    marker: Option<(f64, &str)>,
) -> Option<String> {
    let mut bins: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    for b in &h.buckets {
        let k = ((b.value_ns.max(1) as f64).log10() * BINS_PER_DECADE).floor() as i64;
        *bins.entry(k).or_default() += b.count;
    }
    let (&first, _) = bins.first_key_value()?;
    let (&last, _) = bins.last_key_value()?;
    let edge = |k: i64| 10f64.powf(k as f64 / BINS_PER_DECADE) / 1e3;
    let mut hi = edge(last + 1);
    if let Some((m, _)) = marker {
        hi = hi.max(m / 1e3);
    }
    let top = bins.values().copied().max().unwrap_or(1) as f64;
    Some(render(|root| {
        let mut chart = chart_on(root, title, 56).build_cartesian_2d(
            latency_axis(edge(first), hi),
            (0.7..top * 2.0)
                .log_scale()
                .with_key_points(decades(&(0.7..top * 2.0))),
        )?;
        chart
            .configure_mesh()
            .x_desc("latency")
            .y_desc("samples")
            .x_label_formatter(&us)
            .y_label_formatter(&|v| format::count(*v as u64))
            .draw()?;
        let c = colour(0);
        chart.draw_series(bins.iter().map(|(&k, &n)| {
            Rectangle::new(
                [(edge(k), 0.7), (edge(k + 1), n as f64)],
                c.mix(0.7).filled(),
            )
        }))?;
        if let Some((m, label)) = marker {
            let x = m / 1e3;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.7), (x, top * 2.0)],
                RED.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                label.to_string(),
                (x, top * 1.2),
                ("sans-serif", 13).into_font().color(&RED),
            )))?;
        }
        Ok(())
    }))
}

/// Points in time: `y` (ns) against `x` (seconds since start), one colour per series.
pub(crate) fn timeline(title: &str, series: &[(String, Vec<(f64, f64)>)]) -> Option<String> {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if all.is_empty() {
        return None;
    }
    let xmax = all.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1e-3);
    let (ylo, yhi) = extent(all.iter().map(|p| p.1));
    Some(render(|root| {
        let mut chart = chart_on(root, title, 64).build_cartesian_2d(
            0.0..xmax * 1.05,
            log_range(ylo, yhi)
                .log_scale()
                .with_key_points(decades(&log_range(ylo, yhi))),
        )?;
        chart
            .configure_mesh()
            .x_desc("time since the first run (s)")
            .y_desc("run duration")
            .y_label_formatter(&tick_ns)
            .draw()?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))?
                .label(name.as_str())
                .legend(move |(x, y)| Circle::new((x + 8, y), 3, c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }))
}

/// How a curve's axes are labelled.
pub(crate) struct Axes<'a> {
    pub(crate) x_desc: &'a str,
    pub(crate) y_desc: &'a str,
    pub(crate) x_fmt: &'a dyn Fn(&f64) -> String,
    pub(crate) y_fmt: &'a dyn Fn(&f64) -> String,
    /// Whether x is a size in bytes (ticks at powers of two) rather than a count.
    pub(crate) x_bytes: bool,
}

/// Curves on log-log axes, with labelled vertical lines (cache sizes).
pub(crate) fn curves(
    title: &str,
    axes: &Axes<'_>,
    series: &[(String, Vec<(f64, f64)>)],
    marks: &[(f64, String)],
) -> Option<String> {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .filter(|p| p.0 > 0.0 && p.1 > 0.0)
        .collect();
    if all.is_empty() {
        return None;
    }
    let (xlo, xhi) = extent(all.iter().map(|p| p.0));
    let (ylo, yhi) = extent(all.iter().map(|p| p.1));
    let yr = log_range(ylo, yhi * 1.5);
    Some(render(|root| {
        let mut chart = chart_on(root, title, 64).build_cartesian_2d(
            log_range(xlo, xhi)
                .log_scale()
                .with_key_points(if axes.x_bytes {
                    powers(&log_range(xlo, xhi))
                } else {
                    decades(&log_range(xlo, xhi))
                }),
            yr.clone().log_scale().with_key_points(decades(&yr)),
        )?;
        chart
            .configure_mesh()
            .x_desc(axes.x_desc)
            .y_desc(axes.y_desc)
            .x_label_formatter(axes.x_fmt)
            .y_label_formatter(axes.y_fmt)
            .draw()?;
        for (x, label) in marks {
            if *x < xlo / 1.3 || *x > xhi * 1.3 {
                continue;
            }
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(*x, yr.start), (*x, yr.end)],
                BLACK.mix(0.35).stroke_width(1),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (*x * 1.05, yr.start * 1.4),
                ("sans-serif", 12).into_font().color(&BLACK.mix(0.7)),
            )))?;
        }
        for (i, (name, points)) in series.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|p| p.0 > 0.0 && p.1 > 0.0)
                .collect();
            line(&mut chart, name, pts.iter().copied(), c)?;
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }))
}
