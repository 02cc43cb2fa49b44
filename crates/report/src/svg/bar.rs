//! The grouped bar chart: categories along x, one bar per series in each category, optional confidence
//! intervals as error bars, an emphasised baseline bar with a dashed line at its value, and a flag text
//! (e.g. "*" for a significant difference) above a bar. Histograms are the same chart with buckets as
//! categories and one series per distribution.

use std::fmt::Write as _;

use super::{
    Frame, Key, Scale, ScaleKind, color, data_num, escape, legend_entries, px, text_width,
};

/// One bar: its value, optional interval, and marks.
#[derive(Clone, Debug, PartialEq)]
pub struct BarValue {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Text drawn above the bar, e.g. "*" for significantly different from the baseline.
    pub flag: Option<String>,
    /// The baseline bar: drawn hatched with a dashed line across the chart at its value.
    pub baseline: bool,
    /// Extra tooltip text.
    pub note: Option<String>,
}

impl BarValue {
    pub fn new(value: f64) -> BarValue {
        BarValue {
            value,
            lo: None,
            hi: None,
            flag: None,
            baseline: false,
            note: None,
        }
    }

    pub fn interval(mut self, lo: f64, hi: f64) -> BarValue {
        self.lo = Some(lo);
        self.hi = Some(hi);
        self
    }
}

/// A series: one (optional) bar per category.
#[derive(Clone, Debug)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<Option<BarValue>>,
}

/// A grouped bar chart.
#[derive(Clone, Debug)]
pub struct BarChart {
    pub id: String,
    pub caption: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// Text under each bar when it should differ from the category (which stays in `data-category` and
    /// the tooltip), e.g. only the knob values that differ between configurations.
    pub tick_labels: Vec<String>,
    pub series: Vec<BarSeries>,
    pub width: f64,
    pub height: f64,
}

/// Labels short enough to tell the bars apart: a prefix every label shares (up to a space or `/`)
/// says nothing about which bar is which and is dropped first, so long labels are not all cut down to the
/// same prefix; what remains is cut to 25 characters.
fn short_labels(labels: &[String]) -> Vec<String> {
    const MAX: usize = 26;
    if labels.iter().all(|l| l.chars().count() <= MAX) {
        return labels.to_vec();
    }
    let mut common = labels.first().map_or(0, |l| l.len());
    for l in labels.iter().skip(1) {
        common = common.min(
            labels[0]
                .bytes()
                .zip(l.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    // Back to a boundary, so a number is never cut in two.
    let cut = labels
        .first()
        .map(|l| {
            l[..common.min(l.len())]
                .rfind([' ', '/'])
                .map_or(0, |i| i + 1)
        })
        .unwrap_or(0);
    labels
        .iter()
        .map(|l| {
            let rest = if labels.len() > 1 && cut > 0 {
                format!("…{}", &l[cut..])
            } else {
                l.clone()
            };
            if rest.chars().count() > MAX {
                format!("{}…", rest.chars().take(MAX - 1).collect::<String>())
            } else {
                rest
            }
        })
        .collect()
}

impl BarChart {
    pub fn new(
        id: impl Into<String>,
        caption: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> BarChart {
        BarChart {
            id: id.into(),
            caption: caption.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            categories: Vec::new(),
            tick_labels: Vec::new(),
            series: Vec::new(),
            width: 640.0,
            height: 360.0,
        }
    }

    /// Render as `<figure><svg>…</svg><figcaption>…</figcaption></figure>`.
    pub fn render(&self) -> String {
        let (yscale, baselines) = self.y_domain();
        let layout = self.layout(yscale);
        let frame = &layout.frame;
        let mut out = String::new();
        frame.open(&mut out, "bars", &self.caption);
        out.push_str("<defs><pattern id=\"hatch-");
        out.push_str(&escape(&self.id));
        out.push_str("\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#555555\" stroke-width=\"3\"/></pattern></defs>");
        frame.plot(&mut out, &layout.yscale, &self.y_label);
        frame.x_axis(&mut out, &self.x_label, |out| self.x_ticks(out, &layout));
        for (si, s) in self.series.iter().enumerate() {
            let _ = write!(
                out,
                "<g class=\"series\" data-series=\"{}\">",
                escape(&s.name)
            );
            for (ci, v) in s.values.iter().enumerate() {
                let Some(v) = v else { continue };
                let Some(cat) = self.categories.get(ci) else {
                    continue;
                };
                if v.value.is_finite() {
                    self.bar(&mut out, &layout, (si, s), (ci, cat), v);
                }
            }
            out.push_str("</g>");
        }
        for (si, b) in &baselines {
            self.baseline(&mut out, &layout, *si, *b);
        }
        frame.border(&mut out);
        frame.finish(out, &self.id, &self.caption)
    }

    /// The y scale over every finite value and interval end (and 0), and the first baseline value of each
    /// series (a comparison has one per machine, drawn in the series' colour).
    fn y_domain(&self) -> (Scale, Vec<(usize, f64)>) {
        let mut ys = vec![0.0];
        let mut baselines: Vec<(usize, f64)> = Vec::new();
        for (si, s) in self.series.iter().enumerate() {
            for v in s.values.iter().flatten() {
                for y in [Some(v.value), v.lo, v.hi].into_iter().flatten() {
                    if y.is_finite() {
                        ys.push(y);
                    }
                }
                if v.baseline && v.value.is_finite() && !baselines.iter().any(|(i, _)| *i == si) {
                    baselines.push((si, v.value));
                }
            }
        }
        (Scale::fit(ScaleKind::Linear, &ys, true), baselines)
    }

    /// The frame and the category slots. Category labels stay horizontal when they fit and are rotated
    /// otherwise (truncated, the full text in a tooltip), which takes room below the plot.
    fn layout(&self, yscale: Scale) -> Layout {
        let entries = legend_entries(
            self.series
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i, Key::Swatch)),
        );
        let mut frame = Frame::new(self.width, &yscale, &entries);
        let slot = frame.pw / self.categories.len().max(1) as f64;
        let labels = short_labels(if self.tick_labels.len() == self.categories.len() {
            &self.tick_labels
        } else {
            &self.categories
        });
        let max_label = labels
            .iter()
            .map(|c| text_width(c, 11.0))
            .fold(0.0, f64::max);
        let rotate = max_label > slot - 4.0;
        let label_h = if rotate {
            max_label * 0.72 + 14.0
        } else {
            18.0
        };
        frame.place(
            20.0,
            self.height + if rotate { label_h - 18.0 } else { 0.0 },
            36.0 + label_h,
        );
        let ns = self.series.len().max(1);
        let group_w = slot * if ns == 1 { 0.7 } else { 0.84 };
        let zero = frame.y(&yscale, 0.0);
        Layout {
            frame,
            yscale,
            slot,
            labels,
            rotate,
            group_w,
            bar_w: group_w / ns as f64,
            zero,
        }
    }

    /// One label under each category slot.
    fn x_ticks(&self, out: &mut String, l: &Layout) {
        let (left, top, ph) = (l.frame.left, l.frame.top, l.frame.ph);
        for (i, (full, label)) in self.categories.iter().zip(&l.labels).enumerate() {
            let x = left + l.slot * (i as f64 + 0.5);
            let y = top + ph + 15.0;
            if l.rotate {
                let _ = write!(
                    out,
                    "<text class=\"tick\" transform=\"translate({} {}) rotate(-45)\" text-anchor=\"end\"><title>{}</title>{}</text>",
                    px(x + 3.0),
                    px(y - 4.0),
                    escape(full),
                    escape(label)
                );
            } else {
                let _ = write!(
                    out,
                    "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\"><title>{}</title>{}</text>",
                    px(x),
                    px(y),
                    escape(full),
                    escape(label)
                );
            }
        }
    }

    /// The bar of series `si` in category `ci` (hatched when it is the baseline), then its marks.
    fn bar(
        &self,
        out: &mut String,
        l: &Layout,
        (si, s): (usize, &BarSeries),
        (ci, cat): (usize, &str),
        v: &BarValue,
    ) {
        let x =
            l.frame.left + l.slot * ci as f64 + (l.slot - l.group_w) / 2.0 + l.bar_w * si as f64;
        let y = l.y(v.value);
        let zero = l.zero;
        let (y0, h) = if y <= zero {
            (y, zero - y)
        } else {
            (zero, y - zero)
        };
        let fill = if v.baseline {
            format!("url(#hatch-{})", escape(&self.id))
        } else {
            color(si).to_string()
        };
        let stroke = if v.baseline { "#333333" } else { "none" };
        let interval = match (v.lo, v.hi) {
            (Some(lo), Some(hi)) => {
                format!(" data-lo=\"{}\" data-hi=\"{}\"", data_num(lo), data_num(hi))
            }
            _ => String::new(),
        };
        let _ = write!(
            out,
            "<rect class=\"bar{}\" data-category=\"{}\" data-value=\"{}\"{interval} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"{stroke}\"><title>{}</title></rect>",
            if v.baseline { " baseline" } else { "" },
            escape(cat),
            data_num(v.value),
            px(x + l.bar_w * 0.06),
            px(y0),
            px(l.bar_w * 0.88),
            px(h.max(0.5)),
            escape(&self.tooltip(s, cat, v))
        );
        marks(out, l, x + l.bar_w / 2.0, y, v);
    }

    /// A bar's tooltip: series (when there are several), category, value, interval and marks.
    fn tooltip(&self, s: &BarSeries, cat: &str, v: &BarValue) -> String {
        let tip_interval = match (v.lo, v.hi) {
            (Some(lo), Some(hi)) => format!(" [{} – {}]", data_num(lo), data_num(hi)),
            _ => String::new(),
        };
        let mut tip = format!(
            "{}{}: {} = {}{}",
            if self.series.len() > 1 {
                format!("{} · ", s.name)
            } else {
                String::new()
            },
            cat,
            self.y_label,
            data_num(v.value),
            tip_interval
        );
        if v.baseline {
            tip.push_str(" (baseline)");
        }
        if let Some(f) = &v.flag {
            tip.push_str(&format!(" {f}"));
        }
        if let Some(n) = &v.note {
            tip.push_str(&format!(" ({n})"));
        }
        tip
    }

    /// The dashed line across the chart at series `si`'s baseline value `b`. With several series the lines
    /// are told apart by colour (the caption says so); a text label per line would collide, so the name
    /// goes into a tooltip.
    fn baseline(&self, out: &mut String, l: &Layout, si: usize, b: f64) {
        let y = l.y(b);
        let (stroke, text) = if self.series.len() > 1 {
            (
                format!(" style=\"stroke: {}\"", color(si)),
                format!(
                    "<title>baseline · {}: {}</title>",
                    escape(&self.series[si].name),
                    data_num(b)
                ),
            )
        } else {
            (
                String::new(),
                format!(
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">baseline</text>",
                    px(l.frame.left + l.frame.pw - 4.0),
                    px(y - 4.0)
                ),
            )
        };
        l.frame
            .ref_line(out, "ref-line baseline", b, y, &stroke, &text);
    }
}

/// A bar chart's geometry: the frame, the y scale, the width of a category's slot, the labels under the
/// slots (and whether they are rotated), the width of a slot's group of bars and of one bar, and the y
/// pixel of 0.
struct Layout {
    frame: Frame,
    yscale: Scale,
    slot: f64,
    labels: Vec<String>,
    rotate: bool,
    group_w: f64,
    bar_w: f64,
    zero: f64,
}

impl Layout {
    fn y(&self, v: f64) -> f64 {
        self.frame.y(&self.yscale, v)
    }
}

/// A bar's marks, centred on `cx` above the bar top `y`: the error bar of its interval and its flag text
/// above both.
fn marks(out: &mut String, l: &Layout, cx: f64, y: f64, v: &BarValue) {
    let mut flag_y = y.min(l.zero) - 4.0;
    if let (Some(lo), Some(hi)) = (
        v.lo.filter(|l| l.is_finite()),
        v.hi.filter(|h| h.is_finite()),
    ) {
        let (ylo, yhi) = (l.y(lo), l.y(hi));
        let cap = (l.bar_w * 0.2).clamp(2.0, 6.0);
        let _ = write!(
            out,
            "<path class=\"err\" d=\"M{} {}V{}M{} {}h{}M{} {}h{}\"/>",
            px(cx),
            px(ylo),
            px(yhi),
            px(cx - cap),
            px(ylo),
            px(2.0 * cap),
            px(cx - cap),
            px(yhi),
            px(2.0 * cap)
        );
        flag_y = flag_y.min(yhi - 4.0);
    }
    if let Some(f) = &v.flag {
        let _ = write!(
            out,
            "<text class=\"flag\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            px(cx),
            px(flag_y),
            escape(f)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_carry_values_intervals_and_marks() {
        let mut c = BarChart::new("b", "Req/s per configuration", "configuration", "req/s");
        c.categories = vec!["base".into(), "fast".into()];
        let mut base = BarValue::new(100.0).interval(95.0, 105.0);
        base.baseline = true;
        let mut fast = BarValue::new(130.5).interval(125.0, 136.0);
        fast.flag = Some("*".into());
        c.series.push(BarSeries {
            name: "req/s".into(),
            values: vec![Some(base), Some(fast)],
        });
        let s = c.render();
        assert_eq!(s.matches("<rect class=\"bar").count(), 2);
        assert!(s.contains("class=\"bar baseline\" data-category=\"base\" data-value=\"100\" data-lo=\"95\" data-hi=\"105\""));
        assert!(s.contains("data-category=\"fast\" data-value=\"130.5\""));
        assert!(s.contains("class=\"flag\""));
        assert!(s.contains("class=\"ref-line baseline\" data-y=\"100\""));
        assert_eq!(s.matches("class=\"err\"").count(), 2);
    }

    /// Issue 13: the 27 labels of a 3^3 sweep were all cut to the same 25-character prefix.
    #[test]
    fn long_labels_keep_the_part_that_tells_them_apart() {
        let labels: Vec<String> = ["10", "60", "100"]
            .iter()
            .flat_map(|sw| {
                ["1000000", "3000000"].map(|s| {
                    format!("policy=rr:10 base_slice_ns=3000000 nice=0 swappiness={sw} slice={s}")
                })
            })
            .collect();
        let short = short_labels(&labels);
        let mut distinct = short.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), labels.len(), "{short:?}");
        assert_eq!(short[0], "…swappiness=10 slice=1000…");
        assert!(short.iter().all(|s| s.chars().count() <= 26), "{short:?}");
        // Short labels are left alone; one label keeps its head.
        assert_eq!(short_labels(&["a".into(), "b".into()]), vec!["a", "b"]);
        assert_eq!(
            short_labels(&[labels[0].clone()])[0],
            "policy=rr:10 base_slice_n…"
        );
    }

    #[test]
    fn many_long_categories_rotate() {
        let mut c = BarChart::new("b", "x", "configuration", "req/s");
        c.categories = (0..27)
            .map(|i| format!("swappiness={i} slice=3ms"))
            .collect();
        c.series.push(BarSeries {
            name: "req/s".into(),
            values: (0..27).map(|i| Some(BarValue::new(i as f64))).collect(),
        });
        let s = c.render();
        assert!(s.contains("rotate(-45)"));
        assert_eq!(s.matches("<rect class=\"bar").count(), 27);
    }
}
