//! Minimal, dependency-free SVG plots: linear or log axes, line and point series, filled cells
//! (for colour maps), text labels, a legend, and several panels side by side.
//!
//! Written by hand rather than through a plotting crate so the output needs no fonts or system
//! libraries at build time, is byte-for-byte deterministic (snapshot-testable), and stays small.

use std::fmt::Write as _;

/// How an axis maps data to the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; non-positive values are dropped from series.
    Log10,
}

/// An axis: its scale, label and (optional) fixed range. Without a range it fits the data.
#[derive(Debug, Clone)]
pub struct Axis {
    pub scale: Scale,
    pub label: String,
    pub range: Option<(f64, f64)>,
}

impl Axis {
    pub fn new(scale: Scale, label: impl Into<String>) -> Self {
        Self {
            scale,
            label: label.into(),
            range: None,
        }
    }
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        self.range = Some((lo, hi));
        self
    }
    fn tr(&self, v: f64) -> Option<f64> {
        match self.scale {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log10 => (v > 0.0 && v.is_finite()).then(|| v.log10()),
        }
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Line,
    DashedLine,
    Points,
    LinePoints,
}

/// One data series.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(label: impl Into<String>, color: impl Into<String>, style: Style) -> Self {
        Self {
            label: label.into(),
            color: color.into(),
            style,
            points: Vec::new(),
        }
    }
    pub fn points(mut self, pts: impl IntoIterator<Item = (f64, f64)>) -> Self {
        self.points.extend(pts);
        self
    }
}

/// A filled rectangle in data coordinates (colour-map cells).
#[derive(Debug, Clone)]
pub struct Cell {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
    pub color: String,
}

/// A text label anchored at a data point.
#[derive(Debug, Clone)]
pub struct Label {
    pub x: f64,
    pub y: f64,
    pub text: String,
}

/// One panel: two axes and what is drawn on them.
#[derive(Debug, Clone)]
pub struct Plot {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub cells: Vec<Cell>,
    pub labels: Vec<Label>,
}

/// A qualitative palette (Okabe–Ito, readable by colour-blind viewers).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

/// Sequential colour map from dark blue (t = 0) through green to yellow (t = 1), a coarse
/// viridis approximation by linear interpolation between five of its anchor colours.
pub fn colormap(t: f64) -> String {
    const ANCHORS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (ANCHORS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(ANCHORS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (ANCHORS[i], ANCHORS[i + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// `k + 1` values from `lo` to `hi`, evenly spaced on a log scale (curves drawn on log axes).
pub fn log_space(lo: f64, hi: f64, k: usize) -> Vec<f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..=k)
        .map(|i| (a + (b - a) * i as f64 / k as f64).exp())
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Trim a float for SVG coordinates (two decimals are sub-pixel).
fn c(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Tick positions (in transformed coordinates) and their labels.
fn ticks(axis: &Axis, lo: f64, hi: f64) -> Vec<(f64, String)> {
    match axis.scale {
        Scale::Log10 => {
            let (a, b) = (lo.floor() as i32, hi.ceil() as i32);
            let span = b - a;
            let step = ((span as f64) / 8.0).ceil().max(1.0) as i32;
            let mut out = Vec::new();
            let mut k = a;
            while k <= b {
                let v = k as f64;
                if v >= lo - 1e-9 && v <= hi + 1e-9 {
                    out.push((v, log_label(k)));
                }
                k += step;
            }
            if out.len() < 2 {
                // Less than a decade: label 1-2-5 steps.
                out.clear();
                for k in a..=b {
                    for m in [1.0, 2.0, 5.0] {
                        let v = (m * 10f64.powi(k)).log10();
                        if v >= lo - 1e-9 && v <= hi + 1e-9 {
                            out.push((v, crate::sig(10f64.powf(v), 2)));
                        }
                    }
                }
            }
            out
        }
        Scale::Linear => {
            let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
            let raw = span / 6.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| span / s <= 7.0)
                .unwrap_or(10.0 * mag);
            let mut out = Vec::new();
            let mut v = (lo / step).ceil() * step;
            while v <= hi + step * 1e-9 && out.len() < 50 {
                out.push((
                    v,
                    crate::sig(if v.abs() < step * 1e-9 { 0.0 } else { v }, 3),
                ));
                v += step;
            }
            out
        }
    }
}

fn log_label(k: i32) -> String {
    match k {
        0 => "1".into(),
        1 => "10".into(),
        2 => "100".into(),
        3 => "1000".into(),
        _ => format!("1e{k}"),
    }
}

/// A label's box on the page: (left, top, right, bottom).
type Rect = (f64, f64, f64, f64);

/// Approximate width of `text` at 10 px sans-serif (average glyph ≈ 5.6 px).
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 5.6
}

/// Choose where a point's label goes: the first of eight candidate spots around the point that
/// stays inside the frame and overlaps no label placed before it (greedy; labels are few).
/// Falls back to the first spot inside the frame. Returns the text origin and its anchor.
fn place_label(
    x: f64,
    y: f64,
    text: &str,
    frame: Rect,
    placed: &mut Vec<Rect>,
) -> (f64, f64, &'static str) {
    let (w, h) = (text_width(text), 10.0);
    // (dx, dy, anchor): right-above, right-below, left-above, left-below, then further out.
    const SPOTS: [(f64, f64, bool); 8] = [
        (5.0, -5.0, false),
        (5.0, 12.0, false),
        (-5.0, -5.0, true),
        (-5.0, 12.0, true),
        (5.0, -16.0, false),
        (5.0, 23.0, false),
        (-5.0, -16.0, true),
        (-5.0, 23.0, true),
    ];
    let rect = |(dx, dy, left): (f64, f64, bool)| {
        let tx = x + dx;
        let ty = y + dy;
        let (l, r) = if left { (tx - w, tx) } else { (tx, tx + w) };
        (
            (tx, ty, if left { "end" } else { "start" }),
            (l, ty - h, r, ty + 2.0),
        )
    };
    let inside = |b: &Rect| b.0 >= frame.0 && b.2 <= frame.2 && b.1 >= frame.1 && b.3 <= frame.3;
    let overlaps = |b: &Rect| {
        placed
            .iter()
            .any(|p| b.0 < p.2 && p.0 < b.2 && b.1 < p.3 && p.1 < b.3)
    };
    let candidates: Vec<_> = SPOTS.iter().map(|&s| rect(s)).collect();
    let chosen = candidates
        .iter()
        .find(|(_, b)| inside(b) && !overlaps(b))
        .or_else(|| candidates.iter().find(|(_, b)| inside(b)))
        .unwrap_or(&candidates[0]);
    placed.push(chosen.1);
    chosen.0
}

impl Plot {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Self {
        Self {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            cells: Vec::new(),
            labels: Vec::new(),
        }
    }

    /// Data range of an axis in transformed coordinates, padded a little.
    fn extent(
        &self,
        axis: &Axis,
        pick: fn(f64, f64) -> f64,
        cell: fn(&Cell) -> [f64; 2],
    ) -> (f64, f64) {
        if let Some((lo, hi)) = axis.range {
            if let (Some(a), Some(b)) = (axis.tr(lo), axis.tr(hi)) {
                if b > a {
                    return (a, b);
                }
            }
        }
        let vals = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(x, y)| pick(x, y)))
            .chain(self.cells.iter().flat_map(cell))
            .filter_map(|v| axis.tr(v));
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in vals {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            return (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            return (lo - 0.5, hi + 0.5);
        }
        let pad = (hi - lo) * 0.04;
        (lo - pad, hi + pad)
    }

    /// Render this panel into a `<g>` occupying the rectangle (x0, y0, w, h) of the page.
    pub fn render_into(&self, out: &mut String, x0: f64, y0: f64, w: f64, h: f64) {
        let (ml, mr, mt, mb) = (64.0, 16.0, 28.0, 44.0);
        let (pw, ph) = (w - ml - mr, h - mt - mb);
        let (xl, xh) = self.extent(&self.x, |x, _| x, |c| [c.x0, c.x1]);
        let (yl, yh) = self.extent(&self.y, |_, y| y, |c| [c.y0, c.y1]);
        let px = |v: f64| x0 + ml + (v - xl) / (xh - xl) * pw;
        let py = |v: f64| y0 + mt + ph - (v - yl) / (yh - yl) * ph;
        let clip = format!("clip{}_{}", x0 as i64, y0 as i64);
        let _ = writeln!(
            out,
            r#"<g><clipPath id="{clip}"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>"#,
            c(x0 + ml),
            c(y0 + mt),
            c(pw),
            c(ph)
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-weight="bold">{}</text>"#,
            c(x0 + ml + pw / 2.0),
            c(y0 + 18.0),
            esc(&self.title)
        );
        let _ = writeln!(out, r#"<g clip-path="url(#{clip})">"#);
        for cell in &self.cells {
            if let (Some(a), Some(b), Some(p), Some(q)) = (
                self.x.tr(cell.x0),
                self.x.tr(cell.x1),
                self.y.tr(cell.y0),
                self.y.tr(cell.y1),
            ) {
                let (xa, xb) = (px(a).min(px(b)), px(a).max(px(b)));
                let (ya, yb) = (py(p).min(py(q)), py(p).max(py(q)));
                // +0.5 px overlap hides hairline seams between neighbouring cells.
                let _ = writeln!(
                    out,
                    r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                    c(xa),
                    c(ya),
                    c(xb - xa + 0.5),
                    c(yb - ya + 0.5),
                    cell.color
                );
            }
        }
        for s in &self.series {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter_map(|&(x, y)| Some((px(self.x.tr(x)?), py(self.y.tr(y)?))))
                .collect();
            if matches!(s.style, Style::Line | Style::DashedLine | Style::LinePoints)
                && pts.len() > 1
            {
                let path: Vec<String> = pts
                    .iter()
                    .map(|(x, y)| format!("{},{}", c(*x), c(*y)))
                    .collect();
                let dash = if s.style == Style::DashedLine {
                    r#" stroke-dasharray="6 4""#
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="1.8"{dash}/>"#,
                    path.join(" "),
                    s.color
                );
            }
            if matches!(s.style, Style::Points | Style::LinePoints) {
                for (x, y) in &pts {
                    let _ = writeln!(
                        out,
                        r#"<circle cx="{}" cy="{}" r="3.5" fill="{}" stroke="white" stroke-width="0.8"/>"#,
                        c(*x),
                        c(*y),
                        s.color
                    );
                }
            }
        }
        let frame = (x0 + ml, y0 + mt, x0 + ml + pw, y0 + mt + ph);
        let mut placed: Vec<Rect> = Vec::new();
        for l in &self.labels {
            if let (Some(x), Some(y)) = (self.x.tr(l.x), self.y.tr(l.y)) {
                let (text_x, text_y, anchor) =
                    place_label(px(x), py(y), &l.text, frame, &mut placed);
                let _ = writeln!(
                    out,
                    r#"<text x="{}" y="{}" font-size="10" text-anchor="{anchor}" paint-order="stroke" stroke="white" stroke-width="2.5">{}</text>"#,
                    c(text_x),
                    c(text_y),
                    esc(&l.text)
                );
            }
        }
        out.push_str("</g>\n");
        // Frame, ticks, grid.
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
            c(x0 + ml),
            c(y0 + mt),
            c(pw),
            c(ph)
        );
        for (v, label) in ticks(&self.x, xl, xh) {
            let x = px(v);
            let _ = writeln!(
                out,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#ccc" stroke-width="0.5"/><text x="{0}" y="{3}" text-anchor="middle" font-size="11">{4}</text>"##,
                c(x),
                c(y0 + mt),
                c(y0 + mt + ph),
                c(y0 + mt + ph + 15.0),
                esc(&label)
            );
        }
        for (v, label) in ticks(&self.y, yl, yh) {
            let y = py(v);
            let _ = writeln!(
                out,
                r##"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}" stroke="#ccc" stroke-width="0.5"/><text x="{3}" y="{4}" text-anchor="end" font-size="11">{5}</text>"##,
                c(y),
                c(x0 + ml),
                c(x0 + ml + pw),
                c(x0 + ml - 5.0),
                c(y + 4.0),
                esc(&label)
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>"#,
            c(x0 + ml + pw / 2.0),
            c(y0 + h - 8.0),
            esc(&self.x.label)
        );
        let (lx, ly) = (x0 + 14.0, y0 + mt + ph / 2.0);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="12" transform="rotate(-90 {} {})">{}</text>"#,
            c(lx),
            c(ly),
            c(lx),
            c(ly),
            esc(&self.y.label)
        );
        // Legend, only for labelled series, in the inside corner that hides the fewest data
        // points (ties go to top-left, then top-right, bottom-left, bottom-right).
        let named: Vec<&Series> = self.series.iter().filter(|s| !s.label.is_empty()).collect();
        if !named.is_empty() {
            let lw = named
                .iter()
                .map(|s| s.label.chars().count())
                .max()
                .unwrap_or(0) as f64
                * 6.2
                + 34.0;
            let lh = named.len() as f64 * 15.0 + 6.0;
            let (left, right) = (x0 + ml + 6.0, x0 + ml + pw - 6.0 - lw);
            let (top, bottom) = (y0 + mt + 6.0, y0 + mt + ph - 6.0 - lh);
            let page_points: Vec<(f64, f64)> = self
                .series
                .iter()
                .flat_map(|s| s.points.iter())
                .filter_map(|&(x, y)| Some((px(self.x.tr(x)?), py(self.y.tr(y)?))))
                .collect();
            let hidden = |(lx, ly): (f64, f64)| {
                page_points
                    .iter()
                    .filter(|(x, y)| *x >= lx && *x <= lx + lw && *y >= ly && *y <= ly + lh)
                    .count()
            };
            let (lx, ly) = [(left, top), (right, top), (left, bottom), (right, bottom)]
                .into_iter()
                .min_by_key(|&corner| hidden(corner))
                .unwrap_or((left, top));
            let _ = writeln!(
                out,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="white" fill-opacity="0.85" stroke="#999"/>"##,
                c(lx),
                c(ly),
                c(lw),
                c(lh)
            );
            for (i, s) in named.iter().enumerate() {
                let y = ly + 12.0 + i as f64 * 15.0;
                let dash = if s.style == Style::DashedLine {
                    r#" stroke-dasharray="4 3""#
                } else {
                    ""
                };
                if s.style == Style::Points {
                    let _ = writeln!(
                        out,
                        r#"<circle cx="{}" cy="{}" r="3.5" fill="{}"/>"#,
                        c(lx + 14.0),
                        c(y - 4.0),
                        s.color
                    );
                } else {
                    let _ = writeln!(
                        out,
                        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{dash}/>"#,
                        c(lx + 5.0),
                        c(y - 4.0),
                        c(lx + 23.0),
                        c(y - 4.0),
                        s.color
                    );
                }
                let _ = writeln!(
                    out,
                    r#"<text x="{}" y="{}" font-size="11">{}</text>"#,
                    c(lx + 28.0),
                    c(y),
                    esc(&s.label)
                );
            }
        }
        out.push_str("</g>\n");
    }
}

/// Render panels side by side, each `panel_w` × `panel_h` pixels, into one SVG document.
pub fn figure(panels: &[Plot], panel_w: f64, panel_h: f64) -> String {
    let w = panel_w * panels.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif">"#,
        c(w),
        c(panel_h),
        c(w),
        c(panel_h)
    );
    out.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    for (i, p) in panels.iter().enumerate() {
        p.render_into(&mut out, i as f64 * panel_w, 0.0, panel_w, panel_h);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colormap_endpoints_are_viridis_anchors() {
        assert_eq!(colormap(0.0), "#440154");
        assert_eq!(colormap(1.0), "#fde725");
        assert_eq!(colormap(f64::NAN), "#440154");
    }

    #[test]
    fn log_axis_ticks_are_decades() {
        let ax = Axis::new(Scale::Log10, "N");
        let t = ticks(&ax, 0.0, 3.0);
        let labels: Vec<&str> = t.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["1", "10", "100", "1000"]);
    }

    #[test]
    fn log_axis_drops_non_positive_points_and_escapes_text() {
        let mut p = Plot::new(
            "a<b",
            Axis::new(Scale::Log10, "N"),
            Axis::new(Scale::Linear, "E"),
        );
        p.series
            .push(Series::new("s", PALETTE[0], Style::Points).points([(0.0, 1.0), (10.0, 0.5)]));
        let svg = figure(&[p], 400.0, 300.0);
        assert!(svg.contains("a&lt;b"));
        // Data markers carry a white outline, the legend's marker does not.
        assert_eq!(
            svg.matches(r#"stroke="white" stroke-width="0.8""#).count(),
            1,
            "{svg}"
        );
    }
}
