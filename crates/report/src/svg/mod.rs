//! A small SVG chart library: the shared pieces (escaping, number formatting, scales and 1-2-5 ticks, the
//! colour-blind-safe palette and marker shapes) used by the XY chart (lines, scatter) and the bar chart.
//!
//! Every chart is one `<figure>` holding one `<svg>` and a one-line `<figcaption>`. Every plotted value is
//! carried by its element (`data-x`/`data-y` on points, `data-value` on bars, printed with Rust's shortest
//! round-trip float format) so tests, and readers with a DOM inspector, can check what was drawn.

mod bar;
mod xy;

pub(crate) use bar::{BarChart, BarSeries, BarValue};
pub(crate) use xy::{Point, RefLine, XyChart, XySeries};

use std::fmt::Write as _;

/// Okabe–Ito palette, reordered so the first colours have the most contrast on white.
pub(crate) const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#B8A600",
];

/// The colour of series `i`.
pub(crate) fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escape text for XML/HTML text content and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab/newline are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A value as written into `data-*` attributes: Rust's shortest representation that parses back exactly.
pub(crate) fn data_num(v: f64) -> String {
    format!("{v}")
}

/// A coordinate in the SVG (two decimals are plenty for pixels).
fn px(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// A number for people: up to `decimals` decimals, large values with k/M/G suffixes.
pub(crate) fn human(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let d = if suffix.is_empty() { decimals } else { 3 };
    let mut s = format!("{scaled:.d$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s.push_str(suffix);
    s
}

/// The 1-2-5 step that splits `range` into about `target` intervals.
pub(crate) fn nice_step(range: f64, target: usize) -> f64 {
    let target = target.max(1) as f64;
    if !(range.is_finite() && range > 0.0) {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Ticks on 1-2-5 steps covering `[lo, hi]`; the domain is widened to the outer ticks.
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    if !lo.is_finite() || !hi.is_finite() {
        lo = 0.0;
        hi = 1.0;
    }
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        lo -= pad;
        hi += pad;
    }
    let step = nice_step(hi - lo, target);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let n = ((last - first) as i64).clamp(1, 1000);
    let ticks: Vec<f64> = (0..=n)
        .map(|i| {
            let t = (first + i as f64) * step;
            // Clean floating noise such as 0.30000000000000004.
            let digits = (-step.log10().floor()).max(0.0) as i32 + 1;
            let f = 10f64.powi(digits);
            (t * f).round() / f
        })
        .collect();
    (ticks[0], ticks[ticks.len() - 1], ticks)
}

/// Decimals needed to print ticks `step` apart.
fn tick_decimals(ticks: &[f64]) -> usize {
    if ticks.len() < 2 {
        return 2;
    }
    let step = (ticks[1] - ticks[0]).abs();
    if step <= 0.0 || !step.is_finite() {
        return 2;
    }
    (-step.log10().floor()).clamp(0.0, 6.0) as usize
}

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScaleKind {
    /// Linear, with 1-2-5 ticks.
    #[default]
    Linear,
    /// Base-10 logarithmic, ticks on decades (and 2, 5 within when the span is short). Values ≤ 0 are not plotted.
    Log,
    /// Percentiles (0–100 exclusive of 100) spaced by their "nines": 90, 99, 99.9 are equidistant.
    Nines,
}

impl ScaleKind {
    /// Whether `v` can be placed on this scale.
    pub fn accepts(self, v: f64) -> bool {
        match self {
            ScaleKind::Linear => v.is_finite(),
            ScaleKind::Log => v.is_finite() && v > 0.0,
            ScaleKind::Nines => v.is_finite() && (0.0..100.0).contains(&v),
        }
    }

    fn forward(self, v: f64) -> f64 {
        match self {
            ScaleKind::Linear => v,
            ScaleKind::Log => v.log10(),
            ScaleKind::Nines => -(1.0 - v / 100.0).log10(),
        }
    }
}

/// A resolved axis: the domain in transformed units, the ticks and their labels.
#[derive(Clone, Debug)]
pub(crate) struct Scale {
    kind: ScaleKind,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Scale {
    /// Fit a scale to the values (already filtered by `accepts`). `zero` forces 0 into a linear domain.
    pub(crate) fn fit(kind: ScaleKind, values: &[f64], zero: bool) -> Scale {
        let mut min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let mut max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !min.is_finite() || !max.is_finite() {
            (min, max) = match kind {
                ScaleKind::Linear => (0.0, 1.0),
                ScaleKind::Log => (1.0, 10.0),
                ScaleKind::Nines => (50.0, 99.0),
            };
        }
        match kind {
            ScaleKind::Linear => Scale::fit_linear(min, max, zero),
            ScaleKind::Log => Scale::fit_log(min, max),
            ScaleKind::Nines => Scale::fit_nines(min, max),
        }
    }

    /// A linear scale over [min, max] with 1-2-5 ticks.
    fn fit_linear(mut min: f64, mut max: f64, zero: bool) -> Scale {
        // A little headroom so no point, label or reference line sits on the frame.
        // Never across zero: data that starts at 0 keeps its axis at 0.
        let pad = (max - min) * 0.03;
        min = if min >= 0.0 {
            (min - pad).max(0.0)
        } else {
            min - pad
        };
        max = if max <= 0.0 {
            (max + pad).min(0.0)
        } else {
            max + pad
        };
        if zero {
            min = min.min(0.0);
            max = max.max(0.0);
        }
        let (lo, hi, ticks) = nice_ticks(min, max, 6);
        let d = tick_decimals(&ticks);
        let ticks = ticks.into_iter().map(|t| (t, human(t, d))).collect();
        Scale {
            kind: ScaleKind::Linear,
            lo,
            hi,
            ticks,
        }
    }

    /// A log scale from the 1-2-5 value below `min` to the one above `max`.
    fn fit_log(min: f64, max: f64) -> Scale {
        // Fit to the nearest 1-2-5 values around the data, ticks on decades and 2, 5 within.
        let steps = |v: f64| -> Vec<f64> {
            let e = v.log10().floor() as i32;
            (e - 1..=e + 1)
                .flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k)))
                .collect()
        };
        let lo_v = steps(min)
            .into_iter()
            .filter(|s| *s <= min * (1.0 + 1e-12))
            .fold(f64::NAN, f64::max);
        let hi_v = steps(max)
            .into_iter()
            .filter(|s| *s >= max * (1.0 - 1e-12))
            .fold(f64::NAN, f64::min);
        let (mut lo, mut hi) = (lo_v.log10(), hi_v.log10());
        if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
            lo -= 1.0;
            hi += 1.0;
        }
        let decades = hi - lo;
        let mut ticks = Vec::new();
        for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
            let base = 10f64.powi(e);
            let ms: &[f64] = if decades <= 3.0 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            for m in ms {
                let t = m * base;
                let l = t.log10();
                if l >= lo - 1e-9 && l <= hi + 1e-9 {
                    ticks.push(t);
                }
            }
        }
        let ticks = ticks
            .into_iter()
            .map(|t| {
                let d = if t < 1.0 {
                    (-t.log10().floor()) as usize
                } else {
                    0
                };
                (t.log10(), human(t, d))
            })
            .collect();
        Scale {
            kind: ScaleKind::Log,
            lo,
            hi,
            ticks,
        }
    }

    /// A nines scale from 0% or 50% up to the decade of nines above `max`.
    fn fit_nines(min: f64, max: f64) -> Scale {
        let lo = if min >= 50.0 {
            ScaleKind::Nines.forward(50.0)
        } else {
            0.0
        };
        let hi = ScaleKind::Nines.forward(max).ceil().max(1.0);
        let mut ticks = Vec::new();
        if lo == 0.0 {
            ticks.push((0.0, "0%".to_string()));
        }
        ticks.push((ScaleKind::Nines.forward(50.0), "50%".to_string()));
        let mut n = 1;
        while (n as f64) <= hi + 1e-9 {
            let p = 100.0 - 100.0 / 10f64.powi(n);
            ticks.push((n as f64, format!("{}%", human(p, n as usize))));
            n += 1;
        }
        Scale {
            kind: ScaleKind::Nines,
            lo,
            hi,
            ticks,
        }
    }

    /// Position of `v` in 0..=1 along the axis.
    pub(crate) fn unit(&self, v: f64) -> f64 {
        let t = self.kind.forward(v);
        if self.hi == self.lo {
            0.5
        } else {
            (t - self.lo) / (self.hi - self.lo)
        }
    }

    /// Tick positions (0..=1) and labels.
    pub(crate) fn ticks(&self) -> impl Iterator<Item = (f64, &str)> {
        self.ticks.iter().filter_map(move |(t, l)| {
            let u = if self.hi == self.lo {
                0.5
            } else {
                (t - self.lo) / (self.hi - self.lo)
            };
            (-1e-9..=1.0 + 1e-9).contains(&u).then_some((u, l.as_str()))
        })
    }
}

/// Approximate rendered width of `s` at `size` px in the sans-serif stack (good enough for layout).
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.56
}

/// Marker shape `i` (circle, square, triangle, diamond, ...) centred on (x, y), as a path.
fn marker_path(i: usize, x: f64, y: f64, r: f64) -> String {
    match i % 5 {
        0 => format!(
            "M{} {}a{r} {r} 0 1 0 {} 0a{r} {r} 0 1 0 -{} 0z",
            px(x - r),
            px(y),
            px(2.0 * r),
            px(2.0 * r)
        ),
        1 => {
            let s = r * 0.9;
            format!(
                "M{} {}h{}v{}h-{}z",
                px(x - s),
                px(y - s),
                px(2.0 * s),
                px(2.0 * s),
                px(2.0 * s)
            )
        }
        2 => format!(
            "M{} {}L{} {}L{} {}z",
            px(x),
            px(y - r * 1.15),
            px(x + r * 1.1),
            px(y + r * 0.85),
            px(x - r * 1.1),
            px(y + r * 0.85)
        ),
        3 => format!(
            "M{} {}L{} {}L{} {}L{} {}z",
            px(x),
            px(y - r * 1.25),
            px(x + r * 1.1),
            px(y),
            px(x),
            px(y + r * 1.25),
            px(x - r * 1.1),
            px(y)
        ),
        _ => format!(
            "M{} {}L{} {}M{} {}L{} {}",
            px(x - r),
            px(y - r),
            px(x + r),
            px(y + r),
            px(x - r),
            px(y + r),
            px(x + r),
            px(y - r)
        ),
    }
}

/// Whether marker `i` is drawn as a stroke only (the cross).
fn marker_is_stroke(i: usize) -> bool {
    i % 5 == 4
}

/// How a legend entry is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// A line sample with the series' marker (dashed when the series is).
    Line { dashed: bool },
    /// A filled square (bar charts).
    Swatch,
}

/// Legend entries laid out in rows across the top of the chart; returns (svg, height used).
fn legend(entries: &[(String, usize, Key)], x0: f64, y0: f64, width: f64) -> (String, f64) {
    if entries.is_empty() {
        return (String::new(), 0.0);
    }
    let mut out = String::from("<g class=\"legend\">");
    let (mut x, mut y) = (x0, y0 + 10.0);
    for (name, idx, key) in entries {
        let w = 34.0 + text_width(name, 12.0) + 18.0;
        if x + w > x0 + width && x > x0 {
            x = x0;
            y += 18.0;
        }
        let _ = write!(
            out,
            "<g class=\"legend-item\" data-series=\"{}\">",
            escape(name)
        );
        match key {
            Key::Line { dashed } => {
                let dash = if *dashed {
                    " stroke-dasharray=\"5 3\""
                } else {
                    ""
                };
                let fill = if marker_is_stroke(*idx) {
                    "none"
                } else {
                    color(*idx)
                };
                let _ = write!(
                    out,
                    "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{dash}/><path d=\"{}\" fill=\"{fill}\" stroke=\"{}\" stroke-width=\"1.5\"/>",
                    px(x),
                    px(y),
                    px(x + 26.0),
                    px(y),
                    color(*idx),
                    marker_path(*idx, x + 13.0, y, 3.5),
                    color(*idx),
                );
            }
            Key::Swatch => {
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"11\" fill=\"{}\"/>",
                    px(x + 4.0),
                    px(y - 5.5),
                    color(*idx)
                );
            }
        }
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" class=\"legend-text\">{}</text></g>",
            px(x + 32.0),
            px(y + 4.0),
            escape(name)
        );
        x += w;
    }
    out.push_str("</g>");
    (out, y + 12.0 - y0)
}

/// The layout and the parts every chart kind draws the same way: the y-tick labels set the left margin,
/// the legend sits on top, the plot area fills the rest; the `<svg>` element, the plot frame with the y
/// axis, the x-axis group around the chart's own ticks, reference lines, the border and the closing legend
/// and `<figure>`. Each chart fits its scales, places its ticks and draws its series in between.
struct Frame {
    width: f64,
    /// The plot area: left edge, width; top edge and height once `place` has run.
    left: f64,
    pw: f64,
    top: f64,
    ph: f64,
    /// The whole picture's height.
    height: f64,
    legend_svg: String,
    legend_h: f64,
}

impl Frame {
    /// The horizontal layout for a chart `width` wide whose y axis is `yscale`, with the legend `entries`.
    fn new(width: f64, yscale: &Scale, entries: &[(String, usize, Key)]) -> Frame {
        let ytick_w = yscale
            .ticks()
            .map(|(_, l)| text_width(l, 11.0))
            .fold(0.0, f64::max);
        let left = 30.0 + ytick_w + 10.0;
        let right = 24.0;
        let pw = width - left - right;
        let (legend_svg, legend_h) = legend(entries, left, 6.0, pw);
        Frame {
            width,
            left,
            pw,
            top: 0.0,
            ph: 0.0,
            height: 0.0,
            legend_svg,
            legend_h,
        }
    }

    /// The vertical layout: `top_pad` above the plot (below the legend), the picture `height` plus the
    /// legend's, `bottom` below the plot for the x axis.
    fn place(&mut self, top_pad: f64, height: f64, bottom: f64) {
        self.top = top_pad + self.legend_h;
        self.height = height + self.legend_h;
        self.ph = self.height - self.top - bottom;
    }

    /// The y pixel of value `y`.
    fn y(&self, yscale: &Scale, y: f64) -> f64 {
        self.top + self.ph * (1.0 - yscale.unit(y))
    }

    /// The opening `<svg>` element.
    fn open(&self, out: &mut String, class: &str, caption: &str) {
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{class}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{cap}\">",
            w = px(self.width),
            h = px(self.height),
            cap = escape(caption)
        );
    }

    /// The plot's background, the horizontal grid with the y ticks, and the rotated y-axis label.
    fn plot(&self, out: &mut String, yscale: &Scale, y_label: &str) {
        let (left, top, pw, ph) = (self.left, self.top, self.pw, self.ph);
        let _ = write!(
            out,
            "<rect class=\"plot-bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(left),
            px(top),
            px(pw),
            px(ph)
        );
        out.push_str("<g class=\"axis y-axis\">");
        for (u, label) in yscale.ticks() {
            let y = top + ph * (1.0 - u);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/><text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                px(left),
                px(left + pw),
                px(left - 6.0),
                px(y + 4.0),
                escape(label),
                y = px(y)
            );
        }
        let _ = write!(
            out,
            "<text class=\"axis-label\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\">{}</text></g>",
            px(16.0),
            px(top + ph / 2.0),
            escape(y_label)
        );
    }

    /// The x-axis group: the chart's `ticks` (written by the closure) and the axis `label` under them.
    fn x_axis(&self, out: &mut String, label: &str, ticks: impl FnOnce(&mut String)) {
        out.push_str("<g class=\"axis x-axis\">");
        ticks(out);
        let _ = write!(
            out,
            "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
            px(self.left + self.pw / 2.0),
            px(self.height - 10.0),
            escape(label)
        );
    }

    /// A horizontal reference line across the plot at value `value` (pixel `y`), carrying the value in
    /// `data-y`; `style` is extra attributes of the line, `label` the SVG that names it (text or tooltip).
    fn ref_line(
        &self,
        out: &mut String,
        class: &str,
        value: f64,
        y: f64,
        style: &str,
        label: &str,
    ) {
        let _ = write!(
            out,
            "<g class=\"{class}\" data-y=\"{}\"><line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"{style}/>{label}</g>",
            data_num(value),
            px(self.left),
            px(self.left + self.pw),
            y = px(y)
        );
    }

    /// The border around the plot area.
    fn border(&self, out: &mut String) {
        let _ = write!(
            out,
            "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(self.left),
            px(self.top),
            px(self.pw),
            px(self.ph)
        );
    }

    /// The legend, the closing `</svg>` and the `<figure>` around it all.
    fn finish(&self, mut out: String, id: &str, caption: &str) -> String {
        out.push_str(&self.legend_svg);
        out.push_str("</svg>");
        figure(id, &out, caption)
    }
}

/// The legend entries of a chart: none for a single series (the caption names it), else one per series.
fn legend_entries(
    entries: impl ExactSizeIterator<Item = (String, usize, Key)>,
) -> Vec<(String, usize, Key)> {
    if entries.len() > 1 {
        entries.collect()
    } else {
        Vec::new()
    }
}

/// Wrap a finished `<svg>` and its caption into the chart's `<figure>`.
fn figure(id: &str, svg: &str, caption: &str) -> String {
    format!(
        "<figure class=\"chart\" id=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
        escape(id),
        escape(caption)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_1_2_5() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 6), 2.0);
        assert_eq!(nice_step(0.3, 6), 0.05);
        assert_eq!(nice_step(3000.0, 6), 500.0);
        assert_eq!(nice_step(1.0, 10), 0.1);
    }

    #[test]
    fn ticks_cover_the_data() {
        let (lo, hi, t) = nice_ticks(3.2, 97.0, 6);
        assert_eq!(lo, 0.0);
        assert_eq!(hi, 100.0);
        assert_eq!(t, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let (_, _, t) = nice_ticks(0.1, 0.35, 5);
        assert_eq!(t, vec![0.1, 0.15, 0.2, 0.25, 0.3, 0.35]);
        let (lo, hi, _) = nice_ticks(5.0, 5.0, 5);
        assert!(lo < 5.0 && hi > 5.0);
    }

    #[test]
    fn linear_headroom_never_crosses_zero() {
        let s = Scale::fit(ScaleKind::Linear, &[0.0, 9.0], false);
        let labels: Vec<&str> = s.ticks().map(|(_, l)| l).collect();
        assert_eq!(labels.first(), Some(&"0"));
        // A value on a tick gets room above it.
        let s = Scale::fit(ScaleKind::Linear, &[1.0, 4.0], false);
        assert!(s.unit(4.0) < 1.0);
    }

    #[test]
    fn log_scale_ticks_on_decades() {
        let s = Scale::fit(ScaleKind::Log, &[0.5, 120.0], false);
        let labels: Vec<&str> = s.ticks().map(|(_, l)| l).collect();
        assert_eq!(
            labels,
            vec!["0.5", "1", "2", "5", "10", "20", "50", "100", "200"]
        );
        let s = Scale::fit(ScaleKind::Log, &[1.0, 100.0], false);
        assert!((s.unit(10.0) - 0.5).abs() < 1e-9);
        let s = Scale::fit(ScaleKind::Log, &[0.001, 1e6], false);
        let labels: Vec<&str> = s.ticks().map(|(_, l)| l).collect();
        assert_eq!(labels.len(), 10);
        let s = Scale::fit(ScaleKind::Log, &[3.0, 3.0], false);
        assert!(s.unit(3.0) > 0.0 && s.unit(3.0) < 1.0);
    }

    #[test]
    fn nines_scale_is_equidistant_in_nines() {
        let s = Scale::fit(ScaleKind::Nines, &[50.0, 99.99], false);
        let a = s.unit(90.0);
        let b = s.unit(99.0);
        let c = s.unit(99.9);
        assert!(((b - a) - (c - b)).abs() < 1e-9);
        let labels: Vec<&str> = s.ticks().map(|(_, l)| l).collect();
        assert_eq!(labels, vec!["50%", "90%", "99%", "99.9%", "99.99%"]);
        assert!(!ScaleKind::Nines.accepts(100.0));
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(escape("a\u{1}b"), "a\u{FFFD}b");
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human(12.5, 2), "12.5");
        assert_eq!(human(12000.0, 0), "12k");
        assert_eq!(human(1_500_000.0, 0), "1.5M");
        assert_eq!(human(0.0, 2), "0");
        assert_eq!(human(f64::NAN, 2), "–");
    }

    #[test]
    fn data_numbers_round_trip() {
        for v in [0.1, 1.0 / 3.0, 12345.678, 1e-9] {
            assert_eq!(data_num(v).parse::<f64>().unwrap(), v);
        }
    }
}
