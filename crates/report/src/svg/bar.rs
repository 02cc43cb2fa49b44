//! The grouped bar chart: categories along x, one bar per series in each category, optional confidence
//! intervals as error bars, an emphasised baseline bar with a dashed line at its value, and a flag text
//! (e.g. "*" for a significant difference) above a bar. Histograms are the same chart with buckets as
//! categories and one series per distribution.

use std::fmt::Write as _;

use super::{Frame, Key, Scale, ScaleKind, color, data_num, escape, px, text_width};

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
    pub series: Vec<BarSeries>,
    pub width: f64,
    pub height: f64,
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
            series: Vec::new(),
            width: 640.0,
            height: 360.0,
        }
    }

    /// Render as `<figure><svg>…</svg><figcaption>…</figcaption></figure>`.
    pub fn render(&self) -> String {
        let mut ys = vec![0.0];
        // One baseline per series (a comparison has one per machine), drawn in the series' colour.
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
        let yscale = Scale::fit(ScaleKind::Linear, &ys, true);
        let entries: Vec<(String, usize, Key)> = if self.series.len() > 1 {
            self.series
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.clone(), i, Key::Swatch))
                .collect()
        } else {
            Vec::new()
        };
        let mut frame = Frame::new(self.width, &yscale, &entries);
        let (left, pw) = (frame.left, frame.pw);
        let n = self.categories.len().max(1);
        let slot = pw / n as f64;
        // Category labels: horizontal when they fit, rotated otherwise (truncated, full text in a tooltip).
        let short: Vec<String> = self
            .categories
            .iter()
            .map(|c| {
                if c.chars().count() > 26 {
                    format!("{}…", c.chars().take(25).collect::<String>())
                } else {
                    c.clone()
                }
            })
            .collect();
        let max_label = short
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
        let (top, ph) = (frame.top, frame.ph);
        let ypos = |y: f64| frame.y(&yscale, y);

        let mut out = String::new();
        frame.open(&mut out, "bars", &self.caption);
        out.push_str("<defs><pattern id=\"hatch-");
        out.push_str(&escape(&self.id));
        out.push_str("\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#555555\" stroke-width=\"3\"/></pattern></defs>");
        frame.plot(&mut out, &yscale, &self.y_label);
        out.push_str("<g class=\"axis x-axis\">");
        for (i, (full, label)) in self.categories.iter().zip(&short).enumerate() {
            let x = left + slot * (i as f64 + 0.5);
            let y = top + ph + 15.0;
            if rotate {
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
                    "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    px(x),
                    px(y),
                    escape(label)
                );
            }
        }
        frame.x_label(&mut out, &self.x_label);
        // Bars.
        let ns = self.series.len().max(1);
        let group_w = slot * if ns == 1 { 0.7 } else { 0.84 };
        let bar_w = group_w / ns as f64;
        let zero = ypos(0.0);
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
                if !v.value.is_finite() {
                    continue;
                }
                let x = left + slot * ci as f64 + (slot - group_w) / 2.0 + bar_w * si as f64;
                let y = ypos(v.value);
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
                let _ = write!(
                    out,
                    "<rect class=\"bar{}\" data-category=\"{}\" data-value=\"{}\"{interval} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"{stroke}\"><title>{}</title></rect>",
                    if v.baseline { " baseline" } else { "" },
                    escape(cat),
                    data_num(v.value),
                    px(x + bar_w * 0.06),
                    px(y0),
                    px(bar_w * 0.88),
                    px(h.max(0.5)),
                    escape(&tip)
                );
                let cx = x + bar_w / 2.0;
                let mut flag_y = y.min(zero) - 4.0;
                if let (Some(lo), Some(hi)) = (
                    v.lo.filter(|l| l.is_finite()),
                    v.hi.filter(|h| h.is_finite()),
                ) {
                    let (ylo, yhi) = (ypos(lo), ypos(hi));
                    let cap = (bar_w * 0.2).clamp(2.0, 6.0);
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
            out.push_str("</g>");
        }
        for (si, b) in &baselines {
            let y = ypos(*b);
            // With several series the lines are told apart by colour (the caption says so); a text label
            // per line would collide, so the name goes into a tooltip.
            let (stroke, text) = if self.series.len() > 1 {
                (
                    format!(" style=\"stroke: {}\"", color(*si)),
                    format!(
                        "<title>baseline · {}: {}</title>",
                        escape(&self.series[*si].name),
                        data_num(*b)
                    ),
                )
            } else {
                (
                    String::new(),
                    format!(
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">baseline</text>",
                        px(left + pw - 4.0),
                        px(y - 4.0)
                    ),
                )
            };
            let _ = write!(
                out,
                "<g class=\"ref-line baseline\" data-y=\"{}\"><line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"{stroke}/>{text}</g>",
                data_num(*b),
                px(left),
                px(left + pw),
                y = px(y)
            );
        }
        frame.border(&mut out);
        frame.finish(out, &self.id, &self.caption)
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
