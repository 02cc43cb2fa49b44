//! The XY chart: several series as lines and/or markers over linear, log or percentile ("nines") axes,
//! optional categorical x (main-effect plots), and labelled reference lines (targets, baselines). With lines
//! off it is the scatter plot.

use std::fmt::Write as _;

use super::{
    Frame, Key, Scale, ScaleKind, color, data_num, escape, legend_entries, marker_is_stroke,
    marker_path, px,
};

/// One plotted point; `note` is added to its tooltip (e.g. the request count behind a mean).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub note: Option<String>,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Point {
        Point { x, y, note: None }
    }
}

/// A named series of points, drawn in the given order.
#[derive(Clone, Debug)]
pub struct XySeries {
    pub name: String,
    pub points: Vec<Point>,
    /// Join the points with a line.
    pub line: bool,
    /// Draw a marker at each point (always true for scatter plots).
    pub markers: bool,
    pub dashed: bool,
    /// Palette/marker index; defaults to the series' position.
    pub style: Option<usize>,
}

impl XySeries {
    /// A line with markers.
    pub fn line(name: impl Into<String>, points: Vec<Point>) -> XySeries {
        XySeries {
            name: name.into(),
            points,
            line: true,
            markers: true,
            dashed: false,
            style: None,
        }
    }

    /// Markers only.
    pub fn scatter(name: impl Into<String>, points: Vec<Point>) -> XySeries {
        XySeries {
            line: false,
            ..XySeries::line(name, points)
        }
    }

    pub fn dashed(mut self) -> XySeries {
        self.dashed = true;
        self
    }

    pub fn style(mut self, i: usize) -> XySeries {
        self.style = Some(i);
        self
    }
}

/// A horizontal reference line at `y` with a label (a target ratio, a baseline).
#[derive(Clone, Debug)]
pub struct RefLine {
    pub y: f64,
    pub label: String,
}

/// A line or scatter chart.
#[derive(Clone, Debug)]
pub struct XyChart {
    /// Element id of the figure (unique within the page).
    pub id: String,
    /// The one-line caption saying what the chart shows.
    pub caption: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: ScaleKind,
    pub y_scale: ScaleKind,
    /// Categorical x: point x values are indexes into this list, which gives the tick labels.
    pub x_categories: Option<Vec<String>>,
    /// Include y = 0 in a linear y domain.
    pub y_zero: bool,
    pub series: Vec<XySeries>,
    pub ref_lines: Vec<RefLine>,
    pub width: f64,
    pub height: f64,
}

impl XyChart {
    pub fn new(
        id: impl Into<String>,
        caption: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
    ) -> XyChart {
        XyChart {
            id: id.into(),
            caption: caption.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_scale: ScaleKind::Linear,
            y_scale: ScaleKind::Linear,
            x_categories: None,
            y_zero: true,
            series: Vec::new(),
            ref_lines: Vec::new(),
            width: 640.0,
            height: 360.0,
        }
    }

    /// Render as `<figure><svg>…</svg><figcaption>…</figcaption></figure>`.
    pub fn render(&self) -> String {
        let plot = self.layout();
        let frame = &plot.frame;
        let mut out = String::new();
        frame.open(&mut out, "xy", &self.caption);
        frame.plot(&mut out, &plot.yscale, &self.y_label);
        frame.x_axis(&mut out, &self.x_label, |out| self.x_ticks(out, &plot));
        frame.border(&mut out);
        for r in &self.ref_lines {
            if self.y_scale.accepts(r.y) {
                let y = plot.y(r.y);
                let text = format!(
                    "<text x=\"{}\" y=\"{}\">{}</text>",
                    px(frame.left + 6.0),
                    px(y - 4.0),
                    escape(&r.label)
                );
                frame.ref_line(&mut out, "ref-line", r.y, y, "", &text);
            }
        }
        for (i, s) in self.series.iter().enumerate() {
            self.draw_series(&mut out, &plot, s, s.style.unwrap_or(i));
        }
        frame.finish(out, &self.id, &self.caption)
    }

    /// The kind of the x axis: linear positions for categories.
    fn x_kind(&self) -> ScaleKind {
        if self.x_categories.is_some() {
            ScaleKind::Linear
        } else {
            self.x_scale
        }
    }

    /// Whether `p` can be placed on both axes.
    fn plottable(&self, p: &Point) -> bool {
        self.x_kind().accepts(p.x) && self.y_scale.accepts(p.y)
    }

    /// The scales fitted to the plottable points (and, for y, the reference lines), and the frame around
    /// them: legend on top, y labels left, x labels below.
    fn layout(&self) -> Plot {
        let points = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter(|p| self.plottable(p))
        };
        let xs: Vec<f64> = points().map(|p| p.x).collect();
        let mut ys: Vec<f64> = points().map(|p| p.y).collect();
        ys.extend(
            self.ref_lines
                .iter()
                .map(|r| r.y)
                .filter(|y| self.y_scale.accepts(*y)),
        );
        let xscale = match &self.x_categories {
            Some(cats) => CatOrScale::Cat(cats.len()),
            None => CatOrScale::Scale(Scale::fit(self.x_scale, &xs, false)),
        };
        let yscale = Scale::fit(
            self.y_scale,
            &ys,
            self.y_zero && self.y_scale == ScaleKind::Linear,
        );
        let entries = legend_entries(self.series.iter().enumerate().map(|(i, s)| {
            (
                s.name.clone(),
                s.style.unwrap_or(i),
                Key::Line { dashed: s.dashed },
            )
        }));
        let mut frame = Frame::new(self.width, &yscale, &entries);
        frame.place(14.0, self.height, 52.0);
        Plot {
            frame,
            xscale,
            yscale,
        }
    }

    /// The x ticks (category names or the scale's ticks), each with a vertical grid line.
    fn x_ticks(&self, out: &mut String, plot: &Plot) {
        let (left, top, pw, ph) = (
            plot.frame.left,
            plot.frame.top,
            plot.frame.pw,
            plot.frame.ph,
        );
        let xticks: Vec<(f64, String)> = match (&plot.xscale, &self.x_categories) {
            (CatOrScale::Cat(_), Some(cats)) => cats
                .iter()
                .enumerate()
                .map(|(i, c)| (plot.x(i as f64), c.clone()))
                .collect(),
            (CatOrScale::Scale(s), _) => s
                .ticks()
                .map(|(u, l)| (left + pw * u, l.to_string()))
                .collect(),
            _ => Vec::new(),
        };
        for (x, label) in &xticks {
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/><text class=\"tick\" x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                px(top),
                px(top + ph),
                px(top + ph + 16.0),
                escape(label),
                x = px(*x)
            );
        }
    }

    /// One series' group: its line through the plottable points, then a marker per point in style `idx`.
    fn draw_series(&self, out: &mut String, plot: &Plot, s: &XySeries, idx: usize) {
        let c = color(idx);
        let _ = write!(
            out,
            "<g class=\"series\" data-series=\"{}\">",
            escape(&s.name)
        );
        let pts: Vec<&Point> = s.points.iter().filter(|p| self.plottable(p)).collect();
        if s.line && pts.len() > 1 {
            let coords: Vec<String> = pts
                .iter()
                .map(|p| format!("{},{}", px(plot.x(p.x)), px(plot.y(p.y))))
                .collect();
            let dash = if s.dashed {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<polyline class=\"line\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
                coords.join(" ")
            );
        }
        // Dense lines get small markers so the line stays readable; every point is still an element.
        let r = match (s.line, pts.len()) {
            (false, _) => 2.8,
            (true, n) if n > 60 => 1.8,
            _ => 3.5,
        };
        for p in &pts {
            self.point(out, plot, s, idx, r, p);
        }
        out.push_str("</g>");
    }

    /// One point's marker (radius `r`, invisible but still hoverable when the series has no markers),
    /// carrying its values and a tooltip.
    fn point(&self, out: &mut String, plot: &Plot, s: &XySeries, idx: usize, r: f64, p: &Point) {
        let c = color(idx);
        let fill = if marker_is_stroke(idx) { "none" } else { c };
        let opacity = if s.line { "" } else { " fill-opacity=\"0.6\"" };
        let (cx, cy) = (plot.x(p.x), plot.y(p.y));
        let xl = match &self.x_categories {
            Some(cats) => cats
                .get(p.x as usize)
                .cloned()
                .unwrap_or_else(|| data_num(p.x)),
            None => data_num(p.x),
        };
        let note = p
            .note
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let stroke = if s.markers || marker_is_stroke(idx) {
            c
        } else {
            "none"
        };
        let (fill, stroke_w) = if s.markers {
            (fill, "1.5")
        } else {
            ("none", "0")
        };
        let _ = write!(
            out,
            "<path class=\"pt\" data-x=\"{}\" data-y=\"{}\" d=\"{}\" fill=\"{fill}\"{opacity} stroke=\"{stroke}\" stroke-width=\"{stroke_w}\"><title>{}: {} = {}, {} = {}{}</title></path>",
            escape(&xl),
            data_num(p.y),
            marker_path(idx, cx, cy, r),
            escape(&s.name),
            escape(&self.x_label),
            escape(&xl),
            escape(&self.y_label),
            data_num(p.y),
            escape(&note)
        );
    }
}

/// The x axis: categories (points' x are indexes) or a scale.
enum CatOrScale {
    Cat(usize),
    Scale(Scale),
}

/// An XY chart's geometry: the frame and both scales.
struct Plot {
    frame: Frame,
    xscale: CatOrScale,
    yscale: Scale,
}

impl Plot {
    /// The x pixel of `x` (a category index on a categorical axis).
    fn x(&self, x: f64) -> f64 {
        let (left, pw) = (self.frame.left, self.frame.pw);
        match &self.xscale {
            CatOrScale::Cat(n) => left + pw * (x + 0.5) / (*n).max(1) as f64,
            CatOrScale::Scale(s) => left + pw * s.unit(x),
        }
    }

    /// The y pixel of `y`.
    fn y(&self, y: f64) -> f64 {
        self.frame.y(&self.yscale, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> XyChart {
        let mut c = XyChart::new("t", "Two series", "clients", "ms");
        c.series.push(XySeries::line(
            "a",
            vec![Point::new(1.0, 2.0), Point::new(2.0, 4.5)],
        ));
        c.series.push(XySeries::scatter(
            "b<&>",
            vec![Point::new(1.5, 3.0), Point::new(f64::NAN, 1.0)],
        ));
        c.ref_lines.push(RefLine {
            y: 4.0,
            label: "target 4".into(),
        });
        c
    }

    #[test]
    fn every_plottable_point_carries_its_value() {
        let s = chart().render();
        assert_eq!(s.matches("class=\"pt\"").count(), 3);
        assert!(s.contains("data-x=\"2\" data-y=\"4.5\""));
        assert!(s.contains("data-x=\"1.5\" data-y=\"3\""));
        assert!(s.contains("b&lt;&amp;&gt;"));
        assert!(s.contains("class=\"ref-line\" data-y=\"4\""));
        assert!(s.contains(">clients</text>") && s.contains(">ms</text>"));
        assert!(s.contains("<figcaption>Two series</figcaption>"));
    }

    #[test]
    fn log_axis_drops_non_positive_values() {
        let mut c = XyChart::new("t", "log", "x", "y");
        c.y_scale = ScaleKind::Log;
        c.series.push(XySeries::line(
            "a",
            vec![Point::new(1.0, 0.0), Point::new(2.0, 10.0)],
        ));
        let s = c.render();
        assert_eq!(s.matches("class=\"pt\"").count(), 1);
    }

    #[test]
    fn categorical_x_labels_points_by_category() {
        let mut c = XyChart::new("t", "main effect", "level", "req/s");
        c.x_categories = Some(vec!["10".into(), "60".into()]);
        c.series.push(XySeries::line(
            "swappiness",
            vec![Point::new(0.0, 100.0), Point::new(1.0, 90.0)],
        ));
        let s = c.render();
        assert!(s.contains("data-x=\"60\" data-y=\"90\""));
    }
}
