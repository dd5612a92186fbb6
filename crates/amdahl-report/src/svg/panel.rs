//! One panel drawn into its rectangle of the page.

use super::colorbar::{colorbar_ticks, draw_colorbar};
use super::legend::{LegendSpot, Swatch};
use super::place::{place_label, Obstacles, Rect};
use super::text::{c, esc, fit_text};
use super::ticks::{ticks_from_below, Tick};
use super::{Plot, Series, SizeSpec, Style};
use crate::font;
use std::fmt::Write as _;

/// What a panel drew, on the page: for tests of the layout (overlaps, points inside the frame)
/// and for the caption of labels that did not fit.
#[derive(Debug, Clone, Default)]
pub struct Drawn {
    /// The plot area.
    pub frame: Rect,
    /// Every text's box, with its text.
    pub texts: Vec<(String, Rect)>,
    /// Every data marker: centre and radius.
    pub markers: Vec<(f64, f64, f64)>,
    /// Point labels placed (text, box).
    pub labels: Vec<(String, Rect)>,
    /// Point labels left out because no free spot was near their point.
    pub dropped: Vec<String>,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    /// Every line drawn through data, on the page.
    pub lines: Vec<Vec<(f64, f64)>>,
    /// The legend's box (inside the plot area, or the band above it), if there is one.
    pub legend: Option<Rect>,
    /// The legend's entries, in order, as drawn.
    pub legend_entries: Vec<Swatch>,
}

/// A data marker on the page: centre and radius.
type Marker = (f64, f64, f64);

/// How far tick marks reach out of the frame, in points.
const TICK_LEN: f64 = 3.0;

/// Where a panel's parts go, fixed before anything is drawn: the data ranges (transformed), the
/// margins around the plot area, the plot area and the ticks of both axes.
struct Layout {
    /// The panel's rectangle on the page: left, top and height.
    x0: f64,
    y0: f64,
    h: f64,
    /// The data ranges, in transformed coordinates (log10 of the values on log axes).
    xl: f64,
    xh: f64,
    yl: f64,
    yh: f64,
    /// Spacing between parts: half a tick label's font size.
    pad: f64,
    /// Left and top margins, and the plot area's width and height.
    ml: f64,
    mt: f64,
    pw: f64,
    ph: f64,
    /// The plot area on the page.
    frame: Rect,
    x_ticks: Vec<Tick>,
    y_ticks: Vec<Tick>,
}

impl Layout {
    /// The page x of a transformed x value.
    fn px(&self, v: f64) -> f64 {
        self.x0 + self.ml + (v - self.xl) / (self.xh - self.xl) * self.pw
    }

    /// The page y of a transformed y value (up is smaller y on the page).
    fn py(&self, v: f64) -> f64 {
        self.y0 + self.mt + self.ph - (v - self.yl) / (self.yh - self.yl) * self.ph
    }
}

impl Plot {
    /// Render this panel into the rectangle (x0, y0, w, h) of the page at size `z`; returns what
    /// was drawn where.
    pub fn render_into(
        &self,
        out: &mut String,
        x0: f64,
        y0: f64,
        w: f64,
        h: f64,
        z: &SizeSpec,
    ) -> Drawn {
        // The legend goes in an inside corner that covers no data; when every corner would, a
        // band above the plot area is taken from the panel and the layout done again.
        let mut l = self.layout(x0, y0, w, h, z, 0.0);
        let (markers, lines) = self.page_geometry(&l, z);
        let mut legend = self.legend_spot(l.frame, z, &markers, &lines);
        if let Some(LegendSpot::Above(band)) = legend {
            l = self.layout(x0, y0, w, h, z, band);
            legend = Some(LegendSpot::Above(band));
        }
        let mut drawn = Drawn {
            frame: l.frame,
            ..Drawn::default()
        };
        let clip = format!("clip{}_{}", x0 as i64, y0 as i64);
        let _ = writeln!(
            out,
            r#"<g><clipPath id="{clip}"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>"#,
            c(l.frame.0),
            c(l.frame.1),
            c(l.pw),
            c(l.ph)
        );
        self.draw_title(out, &l, z, &mut drawn);
        // Grid lines under everything.
        draw_grid(out, &l);
        let _ = writeln!(out, r#"<g clip-path="url(#{clip})">"#);
        self.draw_raster(out, &l);
        self.draw_cells(out, &l);
        let lines = self.draw_series(out, &l, z, &mut drawn);
        // The legend's box is an obstacle for point labels.
        let legend_boxes: Vec<Rect> = match &legend {
            Some(LegendSpot::Inside(b)) => vec![*b],
            _ => Vec::new(),
        };
        self.draw_point_labels(out, &l, z, &lines, &legend_boxes, &mut drawn);
        out.push_str("</g>\n");
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333" stroke-width="0.6"/>"##,
            c(l.frame.0),
            c(l.frame.1),
            c(l.pw),
            c(l.ph)
        );
        draw_x_ticks(out, &l, z, &mut drawn);
        draw_y_ticks(out, &l, z, &mut drawn);
        self.draw_axis_titles(out, &l, z, &mut drawn);
        if let Some(spot) = &legend {
            self.draw_legend(out, spot, l.frame, z, &mut drawn);
        }
        if let Some(bar) = &self.colorbar {
            draw_colorbar(out, bar, l.frame, l.pad, z, &mut drawn);
        }
        out.push_str("</g>\n");
        drawn.x_ticks = l.x_ticks;
        drawn.y_ticks = l.y_ticks;
        drawn.lines = lines;
        drawn
    }

    /// Each series' points on the page (points a log axis cannot show are left out).
    fn page_points(&self, l: &Layout) -> Vec<Vec<(f64, f64)>> {
        self.series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .filter_map(|&(x, y)| Some((l.px(self.x.tr(x)?), l.py(self.y.tr(y)?))))
                    .collect()
            })
            .collect()
    }

    /// The markers and lines the series will draw, on the page (what a legend must not cover).
    fn page_geometry(&self, l: &Layout, z: &SizeSpec) -> (Vec<Marker>, Vec<Vec<(f64, f64)>>) {
        let mut markers = Vec::new();
        let mut lines = Vec::new();
        for (s, pts) in self.series.iter().zip(self.page_points(l)) {
            if matches!(s.style, Style::Points | Style::LinePoints) {
                markers.extend(pts.iter().map(|&(x, y)| (x, y, z.marker_r)));
            }
            if matches!(s.style, Style::Line | Style::DashedLine | Style::LinePoints)
                && pts.len() > 1
            {
                lines.push(pts);
            }
        }
        (markers, lines)
    }

    /// The layout in the rectangle (x0, y0, w, h): margins for the title, a legend band of
    /// height `band` above the plot area, the axis titles, the measured tick labels and the
    /// colour bar, then the ticks that fit the plot area left.
    fn layout(&self, x0: f64, y0: f64, w: f64, h: f64, z: &SizeSpec, band: f64) -> Layout {
        let (xl, xh) = self.extent(&self.x, |x, _| x, |c| [c.x0, c.x1]);
        let (yl, yh) = self.extent(&self.y, |_, y| y, |c| [c.y0, c.y1]);
        let x_min = self.data_min(&self.x, |x, _| x, |c| [c.x0, c.x1]);
        let y_min = self.data_min(&self.y, |_, y| y, |c| [c.y0, c.y1]);
        let pad = z.tick_font * 0.5;
        let title = if self.title.is_empty() {
            pad * 2.0
        } else {
            z.title_font * 2.2
        };
        let mt = title + band;
        let mb = TICK_LEN + z.tick_font * 1.8 + pad + z.axis_font * 1.3;
        let bar_w = if self.colorbar.is_some() {
            z.tick_font * 1.2 + pad * 2.0
        } else {
            0.0
        };
        let ph = (h - mt - mb).max(20.0);
        let (yl, y_ticks) = ticks_from_below(&self.y, (yl, yh), y_min, ph, z.tick_font, false);
        let y_tick_w = y_ticks
            .iter()
            .map(|t| t.label.width(z.tick_font))
            .fold(0.0, f64::max);
        let ml = pad + z.axis_font * 1.3 + y_tick_w + pad + 3.0;
        let bar_ticks_w = self.colorbar.as_ref().map_or(0.0, |b| {
            colorbar_ticks(b)
                .iter()
                .map(|t| t.label.width(z.tick_font))
                .fold(0.0, f64::max)
                + z.axis_font * 1.6
                + pad * 2.0
        });
        let mut mr = pad * 2.0 + bar_w + bar_ticks_w;
        let mut pw = (w - ml - mr).max(20.0);
        let (mut xl, mut x_ticks) =
            ticks_from_below(&self.x, (xl, xh), x_min, pw, z.tick_font, true);
        // The last x label is centred on its tick: leave room for its right half.
        let half_last = |t: &[Tick], xl: f64| {
            t.iter()
                .filter(|t| (t.at - xh).abs() < (xh - xl) * 0.1)
                .map(|t| t.label.width(z.tick_font) / 2.0 + 2.0)
                .fold(0.0, f64::max)
        };
        if half_last(&x_ticks, xl) > mr {
            mr = half_last(&x_ticks, xl);
            pw = (w - ml - mr).max(20.0);
            (xl, x_ticks) = ticks_from_below(&self.x, (xl, xh), x_min, pw, z.tick_font, true);
        }
        let frame = (x0 + ml, y0 + mt, x0 + ml + pw, y0 + mt + ph);
        Layout {
            x0,
            y0,
            h,
            xl,
            xh,
            yl,
            yh,
            pad,
            ml,
            mt,
            pw,
            ph,
            frame,
            x_ticks,
            y_ticks,
        }
    }

    /// The title, bold and centred above the plot area.
    fn draw_title(&self, out: &mut String, l: &Layout, z: &SizeSpec, drawn: &mut Drawn) {
        if self.title.is_empty() {
            return;
        }
        let tx = l.x0 + l.ml + l.pw / 2.0;
        let ty = l.y0 + z.title_font * 1.25;
        let tw = font::width(&self.title, z.title_font);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{}" font-weight="bold">{}</text>"#,
            c(tx),
            c(ty),
            c(z.title_font),
            esc(&self.title)
        );
        // Bold runs ~8 % wider than the regular metrics measured here.
        let tw = tw * 1.08;
        drawn.texts.push((
            self.title.clone(),
            (
                tx - tw / 2.0,
                ty - z.title_font * 0.8,
                tx + tw / 2.0,
                ty + z.title_font * 0.2,
            ),
        ));
    }

    /// The raster, stretched over the data rectangle it spans (the viewer interpolates it).
    fn draw_raster(&self, out: &mut String, l: &Layout) {
        let Some(r) = &self.raster else {
            return;
        };
        if let (Some(a), Some(b), Some(p), Some(q), Some(png)) = (
            self.x.tr(r.x0),
            self.x.tr(r.x1),
            self.y.tr(r.y0),
            self.y.tr(r.y1),
            r.png(),
        ) {
            use base64::Engine as _;
            let (xa, xb) = (l.px(a).min(l.px(b)), l.px(a).max(l.px(b)));
            let (ya, yb) = (l.py(p).min(l.py(q)), l.py(p).max(l.py(q)));
            let _ = writeln!(
                out,
                r#"<image x="{}" y="{}" width="{}" height="{}" preserveAspectRatio="none" href="data:image/png;base64,{}"/>"#,
                c(xa),
                c(ya),
                c(xb - xa),
                c(yb - ya),
                base64::engine::general_purpose::STANDARD.encode(png)
            );
        }
    }

    /// The filled cells (colour maps).
    fn draw_cells(&self, out: &mut String, l: &Layout) {
        for cell in &self.cells {
            if let (Some(a), Some(b), Some(p), Some(q)) = (
                self.x.tr(cell.x0),
                self.x.tr(cell.x1),
                self.y.tr(cell.y0),
                self.y.tr(cell.y1),
            ) {
                let (xa, xb) = (l.px(a).min(l.px(b)), l.px(a).max(l.px(b)));
                let (ya, yb) = (l.py(p).min(l.py(q)), l.py(p).max(l.py(q)));
                // +0.3 pt overlap hides hairline seams between neighbouring cells.
                let _ = writeln!(
                    out,
                    r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                    c(xa),
                    c(ya),
                    c(xb - xa + 0.3),
                    c(yb - ya + 0.3),
                    cell.color
                );
            }
        }
    }

    /// The series' lines and markers; returns the lines drawn, on the page (obstacles for the
    /// legend and the point labels). Markers go into `drawn`.
    fn draw_series(
        &self,
        out: &mut String,
        l: &Layout,
        z: &SizeSpec,
        drawn: &mut Drawn,
    ) -> Vec<Vec<(f64, f64)>> {
        let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
        for (s, pts) in self.series.iter().zip(self.page_points(l)) {
            if matches!(s.style, Style::Line | Style::DashedLine | Style::LinePoints)
                && pts.len() > 1
            {
                draw_polyline(out, s, &pts, z);
                lines.push(pts.clone());
            }
            if matches!(s.style, Style::Points | Style::LinePoints) {
                for &(x, y) in &pts {
                    let _ = writeln!(
                        out,
                        r#"<circle cx="{}" cy="{}" r="{}" fill="{}" stroke="white" stroke-width="0.8"/>"#,
                        c(x),
                        c(y),
                        c(z.marker_r),
                        s.color
                    );
                    drawn.markers.push((x, y, z.marker_r));
                }
            }
        }
        lines
    }

    /// Point labels, each at the first free spot near its point (avoiding markers, lines, the
    /// legend and each other); those without one are listed in `drawn.dropped`.
    fn draw_point_labels(
        &self,
        out: &mut String,
        l: &Layout,
        z: &SizeSpec,
        lines: &[Vec<(f64, f64)>],
        legend_boxes: &[Rect],
        drawn: &mut Drawn,
    ) {
        let lh = z.label_font * 1.15;
        let mut placed: Vec<Rect> = Vec::new();
        for label in &self.labels {
            let (Some(x), Some(y)) = (self.x.tr(label.x), self.y.tr(label.y)) else {
                continue;
            };
            let (x, y) = (l.px(x), l.py(y));
            let w = font::width(&label.text, z.label_font);
            // A label's own marker is an obstacle like any other.
            let obstacles = Obstacles {
                markers: &drawn.markers,
                lines,
                boxes: legend_boxes,
            };
            match place_label(
                (x, y),
                (w, lh),
                z.marker_r + 1.5,
                &l.frame,
                &obstacles,
                &placed,
            ) {
                Some(b) => {
                    let _ = writeln!(
                        out,
                        r#"<text x="{}" y="{}" font-size="{}">{}</text>"#,
                        c(b.0),
                        c(b.3 - lh * 0.25),
                        c(z.label_font),
                        esc(&label.text)
                    );
                    placed.push(b);
                    drawn.labels.push((label.text.clone(), b));
                    drawn.texts.push((label.text.clone(), b));
                }
                None => drawn.dropped.push(label.text.clone()),
            }
        }
    }

    /// The axis titles, shortened with an ellipsis where they would not fit their side.
    fn draw_axis_titles(&self, out: &mut String, l: &Layout, z: &SizeSpec, drawn: &mut Drawn) {
        let frame = l.frame;
        let xt = fit_text(&self.x.label, l.pw, z.axis_font);
        let xtw = font::width(&xt, z.axis_font);
        let xb = l.y0 + l.h - z.axis_font * 0.45;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{}">{}</text>"#,
            c(frame.0 + l.pw / 2.0),
            c(xb),
            c(z.axis_font),
            esc(&xt)
        );
        drawn.texts.push((
            xt.clone(),
            (
                frame.0 + l.pw / 2.0 - xtw / 2.0,
                xb - z.axis_font * 0.95,
                frame.0 + l.pw / 2.0 + xtw / 2.0,
                xb + z.axis_font * 0.2,
            ),
        ));
        let yt = fit_text(&self.y.label, l.ph, z.axis_font);
        let ytw = font::width(&yt, z.axis_font);
        let (lx, ly) = (l.x0 + l.pad + z.axis_font * 0.95, frame.1 + l.ph / 2.0);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{}" transform="rotate(-90 {} {})">{}</text>"#,
            c(lx),
            c(ly),
            c(z.axis_font),
            c(lx),
            c(ly),
            esc(&yt)
        );
        drawn.texts.push((
            yt,
            (
                lx - z.axis_font * 0.95,
                ly - ytw / 2.0,
                lx + z.axis_font * 0.2,
                ly + ytw / 2.0,
            ),
        ));
    }
}

/// Light grid lines at every tick, across the plot area.
fn draw_grid(out: &mut String, l: &Layout) {
    let frame = l.frame;
    for t in &l.x_ticks {
        let x = l.px(t.at);
        let _ = writeln!(
            out,
            r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#e0e0e0" stroke-width="0.4"/>"##,
            c(x),
            c(frame.1),
            c(frame.3)
        );
    }
    for t in &l.y_ticks {
        let y = l.py(t.at);
        let _ = writeln!(
            out,
            r##"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}" stroke="#e0e0e0" stroke-width="0.4"/>"##,
            c(y),
            c(frame.0),
            c(frame.2)
        );
    }
}

/// One series' line through its points (on the page), dashed for [`Style::DashedLine`].
fn draw_polyline(out: &mut String, s: &Series, pts: &[(f64, f64)], z: &SizeSpec) {
    let path: Vec<String> = pts
        .iter()
        .map(|(x, y)| format!("{},{}", c(*x), c(*y)))
        .collect();
    let dash = if s.style == Style::DashedLine {
        format!(
            r#" stroke-dasharray="{} {}""#,
            c(z.line_w * 3.5),
            c(z.line_w * 2.5)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"{dash}/>"#,
        path.join(" "),
        s.color,
        c(z.line_w)
    );
}

/// The x tick marks below the frame, with their labels centred under them.
fn draw_x_ticks(out: &mut String, l: &Layout, z: &SizeSpec, drawn: &mut Drawn) {
    let frame = l.frame;
    for t in &l.x_ticks {
        let x = l.px(t.at);
        let base = frame.3 + TICK_LEN + z.tick_font * 1.55;
        let tw = t.label.width(z.tick_font);
        let _ = writeln!(
            out,
            r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333" stroke-width="0.6"/><text x="{0}" y="{3}" text-anchor="middle" font-size="{4}">{5}</text>"##,
            c(x),
            c(frame.3),
            c(frame.3 + TICK_LEN),
            c(base),
            c(z.tick_font),
            t.label.svg(z.tick_font)
        );
        drawn.texts.push((
            t.label.text(),
            (
                x - tw / 2.0,
                base - z.tick_font * 0.95,
                x + tw / 2.0,
                base + z.tick_font * 0.2,
            ),
        ));
    }
}

/// The y tick marks left of the frame, with their labels right-aligned against them.
fn draw_y_ticks(out: &mut String, l: &Layout, z: &SizeSpec, drawn: &mut Drawn) {
    let frame = l.frame;
    for t in &l.y_ticks {
        let y = l.py(t.at);
        let right = frame.0 - TICK_LEN - l.pad * 0.5;
        let tw = t.label.width(z.tick_font);
        let base = y + z.tick_font * 0.36;
        let _ = writeln!(
            out,
            r##"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}" stroke="#333" stroke-width="0.6"/><text x="{3}" y="{4}" text-anchor="end" font-size="{5}">{6}</text>"##,
            c(y),
            c(frame.0 - TICK_LEN),
            c(frame.0),
            c(right),
            c(base),
            c(z.tick_font),
            t.label.svg(z.tick_font)
        );
        drawn.texts.push((
            t.label.text(),
            (
                right - tw,
                base - z.tick_font * 0.95,
                right,
                base + z.tick_font * 0.2,
            ),
        ));
    }
}
