//! SVG plots for papers: linear or log axes, line and point series, filled cells (colour maps)
//! with a colour bar, point labels, a legend, and several panels in a grid.
//!
//! Written by hand rather than through `plotters` (see docs/architecture.md, "Plots"): the output
//! is byte-for-byte deterministic (snapshot-testable), small, and every text box is laid out with
//! the real metrics of the embedded font ([`crate::font`]), so the layout can be checked in tests:
//! [`Plot::render_into`] returns what it drew ([`Drawn`]: text boxes, markers, ticks).
//!
//! Units are points (1/72 in): a figure's `width`/`height` are given in `pt` and its `viewBox` in
//! the same numbers, so a font size of 7 is 7 pt on paper at the figure's natural size — the size
//! chosen with [`set_size`] (`--size column|page|slide`).

use crate::font;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};

/// How an axis maps data to the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; non-positive values are dropped from series.
    Log10,
}

/// What an axis counts, which decides its tick values and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ticks {
    /// Round numbers (1-2-5 steps; decades on log axes).
    #[default]
    Auto,
    /// Whole things (threads, GPUs, requests): integer ticks only.
    Counts,
    /// A count that is doubled (N = 1, 2, 4, …): ticks at powers of two.
    PowersOfTwo,
}

/// An axis: its scale, label, (optional) fixed range and tick kind. Without a range it fits
/// the data.
#[derive(Debug, Clone)]
pub struct Axis {
    pub scale: Scale,
    pub label: String,
    pub range: Option<(f64, f64)>,
    pub ticks: Ticks,
}

impl Axis {
    pub fn new(scale: Scale, label: impl Into<String>) -> Self {
        Self {
            scale,
            label: label.into(),
            range: None,
            ticks: Ticks::Auto,
        }
    }
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        self.range = Some((lo, hi));
        self
    }
    /// Integer ticks only (counts of threads, devices, requests).
    pub fn counts(mut self) -> Self {
        self.ticks = Ticks::Counts;
        self
    }
    /// Ticks at powers of two (N doubled from run to run).
    pub fn powers_of_two(mut self) -> Self {
        self.ticks = Ticks::PowersOfTwo;
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

/// A colour bar for the colour scale of a plot's cells: `color(t)` for t in [0, 1] maps the
/// values `lo..hi` (linear).
#[derive(Debug, Clone)]
pub struct ColorBar {
    pub label: String,
    pub lo: f64,
    pub hi: f64,
    pub color: fn(f64) -> String,
}

/// A raster drawn under everything else, spanning the data rectangle (x0, y0)–(x1, y1): a colour
/// map sampled once per pixel, embedded as a PNG so that the viewer interpolates it smoothly
/// (a surface of a few hundred pixels a side stays far below 100 KB).
#[derive(Debug, Clone)]
pub struct Raster {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
    pub width: u32,
    pub height: u32,
    /// Row-major RGB, top row first (`width × height × 3` bytes).
    pub rgb: Vec<u8>,
}

impl Raster {
    /// The PNG file of this raster, or `None` when its size does not match its pixels.
    pub fn png(&self) -> Option<Vec<u8>> {
        if self.rgb.len() != self.width as usize * self.height as usize * 3 {
            return None;
        }
        let mut bytes = Vec::new();
        let mut enc = png::Encoder::new(&mut bytes, self.width, self.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        enc.set_filter(png::FilterType::Paeth);
        let mut w = enc.write_header().ok()?;
        w.write_image_data(&self.rgb).ok()?;
        w.finish().ok()?;
        Some(bytes)
    }
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
    pub colorbar: Option<ColorBar>,
    pub raster: Option<Raster>,
}

/// A qualitative palette (Okabe–Ito, readable by colour-blind viewers).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

/// Sequential colour map for t in [0, 1]: viridis, exactly ([`crate::viridis`]).
pub fn colormap(t: f64) -> String {
    crate::viridis::color(t)
}

/// `k + 1` values from `lo` to `hi`, evenly spaced on a log scale (curves drawn on log axes).
pub fn log_space(lo: f64, hi: f64, k: usize) -> Vec<f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..=k)
        .map(|i| (a + (b - a) * i as f64 / k as f64).exp())
        .collect()
}

// ------------------------------------------------------------------ sizes

/// The figure sizes of `--size`: the width a figure is drawn for, in points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// One column of a two-column paper: 85 mm (241 pt); panels stacked.
    Column,
    /// The full text width of a paper: 174 mm (493 pt); two panels per row.
    Page,
    /// A 16:9 slide: 254 mm (720 pt) wide, larger type; up to three panels per row.
    Slide,
}

/// Font sizes and geometry of one [`Size`], in points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeSpec {
    pub width: f64,
    /// Panels side by side at most.
    pub per_row: usize,
    pub tick_font: f64,
    pub axis_font: f64,
    pub title_font: f64,
    pub label_font: f64,
    pub legend_font: f64,
    pub marker_r: f64,
    pub line_w: f64,
}

impl Size {
    pub fn spec(self) -> SizeSpec {
        match self {
            // Every text at least 7 pt when printed at 85 mm (issue 14).
            Size::Column => SizeSpec {
                width: 241.0,
                per_row: 1,
                tick_font: 7.0,
                axis_font: 7.5,
                title_font: 8.0,
                label_font: 7.0,
                legend_font: 7.0,
                marker_r: 2.4,
                line_w: 1.1,
            },
            Size::Page => SizeSpec {
                width: 493.0,
                per_row: 2,
                tick_font: 7.5,
                axis_font: 8.0,
                title_font: 9.0,
                label_font: 7.0,
                legend_font: 7.5,
                marker_r: 2.6,
                line_w: 1.2,
            },
            Size::Slide => SizeSpec {
                width: 720.0,
                per_row: 3,
                tick_font: 12.0,
                axis_font: 13.0,
                title_font: 14.0,
                label_font: 11.0,
                legend_font: 11.0,
                marker_r: 4.0,
                line_w: 2.0,
            },
        }
    }

    /// Parse `column`, `page` or `slide`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "column" => Some(Size::Column),
            "page" => Some(Size::Page),
            "slide" => Some(Size::Slide),
            _ => None,
        }
    }
}

static SIZE: AtomicU8 = AtomicU8::new(1);

/// Draw every figure rendered from now on at `size` (the binary sets it once from `--size`;
/// `page` without it).
pub fn set_size(size: Size) {
    let v = match size {
        Size::Column => 0,
        Size::Page => 1,
        Size::Slide => 2,
    };
    SIZE.store(v, Ordering::Relaxed);
}

/// The size set with [`set_size`].
pub fn size() -> Size {
    match SIZE.load(Ordering::Relaxed) {
        0 => Size::Column,
        2 => Size::Slide,
        _ => Size::Page,
    }
}

// ------------------------------------------------------------------ text

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Trim a float for SVG coordinates (two decimals are far below a printer's dot).
fn c(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A box on the page: (left, top, right, bottom).
pub type Rect = (f64, f64, f64, f64);

fn overlap(a: &Rect, b: &Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

fn inside(a: &Rect, frame: &Rect) -> bool {
    a.0 >= frame.0 && a.2 <= frame.2 && a.1 >= frame.1 && a.3 <= frame.3
}

/// A tick label: `base` with an optional superscript (`10` and `5` for 10⁵).
#[derive(Debug, Clone, PartialEq)]
pub struct TickLabel {
    pub base: String,
    pub sup: Option<String>,
}

impl TickLabel {
    fn plain(s: impl Into<String>) -> Self {
        Self {
            base: s.into(),
            sup: None,
        }
    }
    fn power(base: &str, k: i32) -> Self {
        Self {
            base: base.into(),
            sup: Some(k.to_string().replace('-', "−")),
        }
    }
    /// Its text as a reader says it (`10^5`), for tests and CSV.
    pub fn text(&self) -> String {
        match &self.sup {
            Some(s) => format!("{}^{}", self.base, s),
            None => self.base.clone(),
        }
    }
    fn width(&self, size: f64) -> f64 {
        font::width(&self.base, size)
            + self
                .sup
                .as_ref()
                .map_or(0.0, |s| font::width(s, size * SUP_SCALE))
    }
    fn svg(&self, size: f64) -> String {
        match &self.sup {
            None => esc(&self.base),
            Some(s) => format!(
                r#"{}<tspan dy="{}" font-size="{}">{}</tspan>"#,
                esc(&self.base),
                c(-size * 0.38),
                c(size * SUP_SCALE),
                esc(s)
            ),
        }
    }
}

const SUP_SCALE: f64 = 0.72;

// ------------------------------------------------------------------ ticks

/// One tick: position in transformed coordinates (log10 of the value on log axes) and label.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: f64,
    pub label: TickLabel,
}

/// Tick marks for an axis spanning `lo..hi` (transformed) drawn `len` points long, whose labels
/// (at `font` pt) must not touch: the densest round set that fits, at least three ticks.
pub fn ticks(axis: &Axis, lo: f64, hi: f64, len: f64, font: f64, horizontal: bool) -> Vec<Tick> {
    let fits = |t: &[Tick]| -> bool {
        if t.len() < 2 {
            return true;
        }
        let scale = len / (hi - lo).max(f64::MIN_POSITIVE);
        t.windows(2).all(|w| {
            let gap = (w[1].at - w[0].at) * scale;
            let need = if horizontal {
                (w[0].label.width(font) + w[1].label.width(font)) / 2.0 + font * 0.8
            } else {
                font * 1.6
            };
            gap >= need
        })
    };
    // Doubled counts tick at powers of two whenever three or more of them fit.
    if (axis.scale, axis.ticks) == (Scale::Log10, Ticks::PowersOfTwo) {
        if let Some(t) = power_of_two_ticks(lo, hi)
            .into_iter()
            .find(|t| t.len() >= 3 && fits(t))
        {
            return t;
        }
    }
    let candidates: Vec<Vec<Tick>> = match (axis.scale, axis.ticks) {
        (Scale::Log10, Ticks::PowersOfTwo) => {
            let mut c = power_of_two_ticks(lo, hi);
            c.extend(log_ticks(lo, hi));
            c
        }
        (Scale::Log10, t) => {
            let mut c = log_ticks(lo, hi);
            // Less than a decade or two: round values of the data, placed on the log scale.
            c.extend(
                linear_ticks(10f64.powf(lo), 10f64.powf(hi), t != Ticks::Auto)
                    .into_iter()
                    .map(|ts| {
                        ts.into_iter()
                            .filter(|t| t.at > 0.0)
                            .map(|t| Tick {
                                at: t.at.log10(),
                                label: t.label,
                            })
                            .collect()
                    }),
            );
            c
        }
        (Scale::Linear, t) => linear_ticks(lo, hi, t != Ticks::Auto),
    };
    // Candidates run from dense to sparse (within each family); take the densest that fits with
    // three or more ticks, else the fitting one with most ticks: labels that touch are worse
    // than a third tick.
    // About one tick per five label heights, between 4 and 8: dense enough to read values off,
    // sparse enough not to look like a ruler.
    let target = (len / (font * 5.0)).clamp(4.0, 8.0) as usize;
    candidates
        .iter()
        .filter(|t| t.len() >= 3 && fits(t))
        .min_by_key(|t| (t.len().abs_diff(target), usize::MAX - t.len()))
        .or_else(|| {
            candidates
                .iter()
                .filter(|t| fits(t))
                .max_by_key(|t| t.len())
        })
        .cloned()
        .unwrap_or_default()
}

const EPS: f64 = 1e-9;

/// Decade ticks every 1, 2, 3, 5, 10 … decades, then (sparser axes) 1-2-5 and 1…9 within
/// decades; dense to sparse. Labels are 10^k throughout an axis that reaches 10^5 or 10^−3, plain
/// numbers otherwise.
fn log_ticks(lo: f64, hi: f64) -> Vec<Vec<Tick>> {
    let sci = hi > 4.0 + EPS || lo < -3.0 - EPS;
    let label = |k: i32, m: f64| -> TickLabel {
        if sci {
            if m == 1.0 {
                TickLabel::power("10", k)
            } else {
                TickLabel::power(&format!("{m}×10"), k)
            }
        } else {
            TickLabel::plain(short_number(m * 10f64.powi(k)))
        }
    };
    let (a, b) = (lo.floor() as i32, hi.ceil() as i32);
    let mut out = Vec::new();
    for mantissas in [
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0][..],
        &[1.0, 2.0, 5.0],
    ] {
        let mut t = Vec::new();
        for k in a..=b {
            for &m in mantissas {
                let at = (m * 10f64.powi(k)).log10();
                if at >= lo - EPS && at <= hi + EPS {
                    t.push(Tick {
                        at,
                        label: label(k, m),
                    });
                }
            }
        }
        out.push(t);
    }
    for step in [1, 2, 3, 5, 10, 20, 50, 100] {
        let t: Vec<Tick> = (a..=b)
            .filter(|k| k.rem_euclid(step) == 0)
            .map(|k| (k, f64::from(k)))
            .filter(|(_, at)| *at >= lo - EPS && *at <= hi + EPS)
            .map(|(k, at)| Tick {
                at,
                label: label(k, 1.0),
            })
            .collect();
        out.push(t);
    }
    // Dense to sparse: 1…9 per decade, 1-2-5, then decades.
    out
}

/// A round tick value in as few digits as it needs: whole numbers with thousands separators,
/// fractions without trailing zeros (0.05, not 0.05000).
fn short_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return crate::count(v);
    }
    let s = crate::sig(v, 3);
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Ticks at 2^j every 1, 2, 3 … doublings; labels are whole numbers below 10^5, else 2^j.
fn power_of_two_ticks(lo: f64, hi: f64) -> Vec<Vec<Tick>> {
    let l2 = std::f64::consts::LOG10_2;
    let (a, b) = ((lo / l2).ceil() as i32, (hi / l2).floor() as i32);
    let big = 2f64.powi(b) >= 1e5;
    [1, 2, 3, 4, 5, 10]
        .iter()
        .map(|&step| {
            (a..=b)
                .filter(|j| j.rem_euclid(step) == 0)
                .map(|j| Tick {
                    at: f64::from(j) * l2,
                    label: if big {
                        TickLabel::power("2", j)
                    } else {
                        TickLabel::plain(short_number(2f64.powi(j)))
                    },
                })
                .collect()
        })
        .collect()
}

/// Round linear steps (1, 2, 2.5, 5 × 10^k), dense to sparse; `whole`: integer steps only.
/// Labels of one axis share one number of decimals.
fn linear_ticks(lo: f64, hi: f64, whole: bool) -> Vec<Vec<Tick>> {
    let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
    let top = span.log10().floor() as i32;
    let mut out = Vec::new();
    for k in (top - 3)..=(top + 1) {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * 10f64.powi(k);
            if whole && (step < 1.0 || step.fract() != 0.0) {
                continue;
            }
            let n = span / step;
            if !(1.0..=60.0).contains(&n) {
                continue;
            }
            let decimals = if step >= 1.0 && step.fract() == 0.0 {
                0
            } else {
                let d = (-step.log10().floor()) as usize;
                if (step / 10f64.powi(-(d as i32))).fract().abs() > 1e-9 {
                    d + 1
                } else {
                    d
                }
            };
            let mut t = Vec::new();
            let mut i = (lo / step - EPS).ceil();
            while i * step <= hi + step * EPS && t.len() < 80 {
                let v = i * step;
                let v = if v.abs() < step * EPS { 0.0 } else { v };
                let text = if v.abs() >= 1e6 && decimals == 0 {
                    crate::sig(v, 3)
                } else if decimals == 0 {
                    crate::count(v)
                } else {
                    format!("{v:.decimals$}")
                };
                t.push(Tick {
                    at: v,
                    label: TickLabel::plain(text.replace('-', "−")),
                });
                i += 1.0;
            }
            out.push(t);
        }
    }
    out
}

// ------------------------------------------------------------------ drawing

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
}

/// Does the segment p–q cross the rectangle r (Liang–Barsky clipping)?
fn segment_hits(p: (f64, f64), q: (f64, f64), r: &Rect) -> bool {
    let (dx, dy) = (q.0 - p.0, q.1 - p.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (pk, qk) in [
        (-dx, p.0 - r.0),
        (dx, r.2 - p.0),
        (-dy, p.1 - r.1),
        (dy, r.3 - p.1),
    ] {
        if pk.abs() < 1e-12 {
            if qk < 0.0 {
                return false;
            }
        } else {
            let t = qk / pk;
            if pk < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}

/// Everything a point label must not cover.
pub struct Obstacles<'a> {
    pub markers: &'a [(f64, f64, f64)],
    pub lines: &'a [Vec<(f64, f64)>],
    pub boxes: &'a [Rect],
}

impl Obstacles<'_> {
    fn hit(&self, b: &Rect) -> bool {
        self.boxes.iter().any(|p| overlap(b, p))
            || self
                .markers
                .iter()
                .any(|&(x, y, r)| overlap(b, &(x - r, y - r, x + r, y + r)))
            || self
                .lines
                .iter()
                .any(|l| l.windows(2).any(|w| segment_hits(w[0], w[1], b)))
    }
}

/// Place a label of size (w, h) near the point (x, y): the first of sixteen spots around it
/// (right, left, above, below, then diagonals, then further out) inside `frame` that covers no
/// obstacle and no label placed before. `None`: no free spot (the caller drops the label).
/// Returns the text's box.
pub fn place_label(
    (x, y): (f64, f64),
    (w, h): (f64, f64),
    gap: f64,
    frame: &Rect,
    obstacles: &Obstacles,
    placed: &[Rect],
) -> Option<Rect> {
    for d in [gap, gap + h] {
        let spots = [
            (x + d, y - h / 2.0),
            (x - d - w, y - h / 2.0),
            (x - w / 2.0, y - d - h),
            (x - w / 2.0, y + d),
            (x + d * 0.7, y - d * 0.7 - h),
            (x - d * 0.7 - w, y - d * 0.7 - h),
            (x + d * 0.7, y + d * 0.7),
            (x - d * 0.7 - w, y + d * 0.7),
        ];
        for (l, t) in spots {
            let b = (l, t, l + w, t + h);
            if inside(&b, frame) && !obstacles.hit(&b) && !placed.iter().any(|p| overlap(&b, p)) {
                return Some(b);
            }
        }
    }
    None
}

/// Split `text` into lines no wider than `width` at `size`: between the items of a `; ` list
/// where possible (a name stays on one line), else at spaces.
fn wrap(text: &str, width: f64, size: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    let items: Vec<String> = text
        .split("; ")
        .enumerate()
        .map(|(i, item)| {
            if i == 0 {
                item.to_string()
            } else {
                format!("; {item}")
            }
        })
        .collect();
    for item in items {
        if font::width(&format!("{cur}{item}"), size) <= width {
            cur.push_str(&item);
            continue;
        }
        if !cur.is_empty() && font::width(item.trim_start_matches("; "), size) <= width {
            lines.push(std::mem::take(&mut cur) + ";");
            cur = item.trim_start_matches("; ").to_string();
            continue;
        }
        // An item longer than a line: break it at spaces.
        for word in item.split(' ') {
            let trial = if cur.is_empty() {
                word.to_string()
            } else {
                format!("{cur} {word}")
            };
            if font::width(&trial, size) > width && !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
                cur = word.to_string();
            } else {
                cur = trial;
            }
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
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
            colorbar: None,
            raster: None,
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
            let pad = if axis.scale == Scale::Log10 {
                0.3
            } else {
                lo.abs().max(1.0) * 0.5
            };
            return (lo - pad, hi + pad);
        }
        let pad = (hi - lo) * 0.05;
        (lo - pad, hi + pad)
    }

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
        let mut drawn = Drawn::default();
        let (xl, xh) = self.extent(&self.x, |x, _| x, |c| [c.x0, c.x1]);
        let (yl, yh) = self.extent(&self.y, |_, y| y, |c| [c.y0, c.y1]);
        let pad = z.tick_font * 0.5;
        let mt = if self.title.is_empty() {
            pad * 2.0
        } else {
            z.title_font * 2.2
        };
        let tick_len = 3.0;
        let mb = tick_len + z.tick_font * 1.8 + pad + z.axis_font * 1.3;
        let bar_w = if self.colorbar.is_some() {
            z.tick_font * 1.2 + pad * 2.0
        } else {
            0.0
        };
        let ph = (h - mt - mb).max(20.0);
        let y_ticks = ticks(&self.y, yl, yh, ph, z.tick_font, false);
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
        let mut x_ticks = ticks(&self.x, xl, xh, pw, z.tick_font, true);
        // The last x label is centred on its tick: leave room for its right half.
        let half_last = |t: &[Tick]| {
            t.iter()
                .filter(|t| (t.at - xh).abs() < (xh - xl) * 0.1)
                .map(|t| t.label.width(z.tick_font) / 2.0 + 2.0)
                .fold(0.0, f64::max)
        };
        if half_last(&x_ticks) > mr {
            mr = half_last(&x_ticks);
            pw = (w - ml - mr).max(20.0);
            x_ticks = ticks(&self.x, xl, xh, pw, z.tick_font, true);
        }
        let px = |v: f64| x0 + ml + (v - xl) / (xh - xl) * pw;
        let py = |v: f64| y0 + mt + ph - (v - yl) / (yh - yl) * ph;
        let frame = (x0 + ml, y0 + mt, x0 + ml + pw, y0 + mt + ph);
        drawn.frame = frame;
        let clip = format!("clip{}_{}", x0 as i64, y0 as i64);
        let _ = writeln!(
            out,
            r#"<g><clipPath id="{clip}"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>"#,
            c(frame.0),
            c(frame.1),
            c(pw),
            c(ph)
        );
        if !self.title.is_empty() {
            let tx = x0 + ml + pw / 2.0;
            let ty = y0 + z.title_font * 1.25;
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
        // Grid lines under everything.
        for t in &x_ticks {
            let x = px(t.at);
            let _ = writeln!(
                out,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#e0e0e0" stroke-width="0.4"/>"##,
                c(x),
                c(frame.1),
                c(frame.3)
            );
        }
        for t in &y_ticks {
            let y = py(t.at);
            let _ = writeln!(
                out,
                r##"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}" stroke="#e0e0e0" stroke-width="0.4"/>"##,
                c(y),
                c(frame.0),
                c(frame.2)
            );
        }
        let _ = writeln!(out, r#"<g clip-path="url(#{clip})">"#);
        if let Some(r) = &self.raster {
            if let (Some(a), Some(b), Some(p), Some(q), Some(png)) = (
                self.x.tr(r.x0),
                self.x.tr(r.x1),
                self.y.tr(r.y0),
                self.y.tr(r.y1),
                r.png(),
            ) {
                use base64::Engine as _;
                let (xa, xb) = (px(a).min(px(b)), px(a).max(px(b)));
                let (ya, yb) = (py(p).min(py(q)), py(p).max(py(q)));
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
        for cell in &self.cells {
            if let (Some(a), Some(b), Some(p), Some(q)) = (
                self.x.tr(cell.x0),
                self.x.tr(cell.x1),
                self.y.tr(cell.y0),
                self.y.tr(cell.y1),
            ) {
                let (xa, xb) = (px(a).min(px(b)), px(a).max(px(b)));
                let (ya, yb) = (py(p).min(py(q)), py(p).max(py(q)));
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
        let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
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
        // Legend first (its box is an obstacle for point labels), in the inside corner that
        // hides the fewest markers and crosses the fewest line segments.
        let legend = self.legend_box(frame, z, &drawn.markers, &lines);
        // Point labels, avoiding markers, lines, the legend and each other.
        let (lw, lh) = (0.0, z.label_font * 1.15);
        let mut placed: Vec<Rect> = Vec::new();
        let mut label_svg = String::new();
        let legend_boxes: Vec<Rect> = legend.iter().map(|l| l.0).collect();
        for l in &self.labels {
            let (Some(x), Some(y)) = (self.x.tr(l.x), self.y.tr(l.y)) else {
                continue;
            };
            let (x, y) = (px(x), py(y));
            let w = font::width(&l.text, z.label_font) + lw;
            // A label's own marker is an obstacle like any other.
            let obstacles = Obstacles {
                markers: &drawn.markers,
                lines: &lines,
                boxes: &legend_boxes,
            };
            match place_label(
                (x, y),
                (w, lh),
                z.marker_r + 1.5,
                &frame,
                &obstacles,
                &placed,
            ) {
                Some(b) => {
                    let _ = writeln!(
                        label_svg,
                        r#"<text x="{}" y="{}" font-size="{}">{}</text>"#,
                        c(b.0),
                        c(b.3 - lh * 0.25),
                        c(z.label_font),
                        esc(&l.text)
                    );
                    placed.push(b);
                    drawn.labels.push((l.text.clone(), b));
                    drawn.texts.push((l.text.clone(), b));
                }
                None => drawn.dropped.push(l.text.clone()),
            }
        }
        out.push_str(&label_svg);
        out.push_str("</g>\n");
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#333" stroke-width="0.6"/>"##,
            c(frame.0),
            c(frame.1),
            c(pw),
            c(ph)
        );
        // Tick marks and labels.
        for t in &x_ticks {
            let x = px(t.at);
            let base = frame.3 + tick_len + z.tick_font * 1.55;
            let tw = t.label.width(z.tick_font);
            let _ = writeln!(
                out,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333" stroke-width="0.6"/><text x="{0}" y="{3}" text-anchor="middle" font-size="{4}">{5}</text>"##,
                c(x),
                c(frame.3),
                c(frame.3 + tick_len),
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
        for t in &y_ticks {
            let y = py(t.at);
            let right = frame.0 - tick_len - pad * 0.5;
            let tw = t.label.width(z.tick_font);
            let base = y + z.tick_font * 0.36;
            let _ = writeln!(
                out,
                r##"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}" stroke="#333" stroke-width="0.6"/><text x="{3}" y="{4}" text-anchor="end" font-size="{5}">{6}</text>"##,
                c(y),
                c(frame.0 - tick_len),
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
        // Axis titles, shortened with an ellipsis where they would not fit their side.
        let xt = fit_text(&self.x.label, pw, z.axis_font);
        let xtw = font::width(&xt, z.axis_font);
        let xb = y0 + h - z.axis_font * 0.45;
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle" font-size="{}">{}</text>"#,
            c(frame.0 + pw / 2.0),
            c(xb),
            c(z.axis_font),
            esc(&xt)
        );
        drawn.texts.push((
            xt.clone(),
            (
                frame.0 + pw / 2.0 - xtw / 2.0,
                xb - z.axis_font * 0.95,
                frame.0 + pw / 2.0 + xtw / 2.0,
                xb + z.axis_font * 0.2,
            ),
        ));
        let yt = fit_text(&self.y.label, ph, z.axis_font);
        let ytw = font::width(&yt, z.axis_font);
        let (lx, ly) = (x0 + pad + z.axis_font * 0.95, frame.1 + ph / 2.0);
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
        if let Some((b, entries)) = legend {
            self.draw_legend(out, b, &entries, z, &mut drawn);
        }
        if let Some(bar) = &self.colorbar {
            draw_colorbar(out, bar, frame, pad, z, &mut drawn);
        }
        out.push_str("</g>\n");
        drawn.x_ticks = x_ticks;
        drawn.y_ticks = y_ticks;
        drawn
    }

    /// The legend's box and its labelled series, in the inside corner hiding the fewest markers
    /// and crossing the fewest line segments (ties: top-left, top-right, bottom-left,
    /// bottom-right).
    fn legend_box(
        &self,
        frame: Rect,
        z: &SizeSpec,
        markers: &[(f64, f64, f64)],
        lines: &[Vec<(f64, f64)>],
    ) -> Option<(Rect, Vec<&Series>)> {
        let named: Vec<&Series> = self.series.iter().filter(|s| !s.label.is_empty()).collect();
        if named.is_empty() {
            return None;
        }
        let f = z.legend_font;
        let lw = named
            .iter()
            .map(|s| font::width(&s.label, f))
            .fold(0.0, f64::max)
            + f * 3.4;
        let lh = named.len() as f64 * f * 1.35 + f * 0.6;
        let inset = 4.0;
        let (left, right) = (frame.0 + inset, frame.2 - inset - lw);
        let (top, bottom) = (frame.1 + inset, frame.3 - inset - lh);
        let cost = |(lx, ly): (f64, f64)| {
            let b = (lx, ly, lx + lw, ly + lh);
            let m = markers
                .iter()
                .filter(|(x, y, r)| overlap(&b, &(x - r, y - r, x + r, y + r)))
                .count();
            let s: usize = lines
                .iter()
                .map(|l| {
                    l.windows(2)
                        .filter(|w| segment_hits(w[0], w[1], &b))
                        .count()
                })
                .sum();
            // A hidden marker is data lost; a crossed segment only passes behind the box.
            m * 1000 + s
        };
        let (lx, ly) = [(left, top), (right, top), (left, bottom), (right, bottom)]
            .into_iter()
            .min_by_key(|&corner| cost(corner))
            .unwrap_or((left, top));
        Some(((lx, ly, lx + lw, ly + lh), named))
    }

    fn draw_legend(
        &self,
        out: &mut String,
        b: Rect,
        named: &[&Series],
        z: &SizeSpec,
        drawn: &mut Drawn,
    ) {
        let f = z.legend_font;
        let (lx, ly) = (b.0, b.1);
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="white" fill-opacity="0.9" stroke="#999" stroke-width="0.5"/>"##,
            c(lx),
            c(ly),
            c(b.2 - b.0),
            c(b.3 - b.1)
        );
        for (i, s) in named.iter().enumerate() {
            let base = ly + f * 0.3 + (i as f64 + 1.0) * f * 1.35 - f * 0.3;
            let mid = base - f * 0.33;
            if s.style == Style::Points {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{}" cy="{}" r="{}" fill="{}"/>"#,
                    c(lx + f * 1.3),
                    c(mid),
                    c(z.marker_r),
                    s.color
                );
            } else {
                let dash = if s.style == Style::DashedLine {
                    format!(
                        r#" stroke-dasharray="{} {}""#,
                        c(z.line_w * 3.0),
                        c(z.line_w * 2.0)
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}"{dash}/>"#,
                    c(lx + f * 0.4),
                    c(mid),
                    c(lx + f * 2.2),
                    c(mid),
                    s.color,
                    c(z.line_w * 1.2)
                );
            }
            let tx = lx + f * 2.7;
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" font-size="{}">{}</text>"#,
                c(tx),
                c(base),
                c(f),
                esc(&s.label)
            );
            drawn.texts.push((
                s.label.clone(),
                (
                    tx,
                    base - f * 0.95,
                    tx + font::width(&s.label, f),
                    base + f * 0.2,
                ),
            ));
        }
    }
}

/// Shorten `text` with "…" until it is at most `width` wide at `size`.
fn fit_text(text: &str, width: f64, size: f64) -> String {
    if font::width(text, size) <= width {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let t: String = chars.iter().collect::<String>() + "…";
        if font::width(&t, size) <= width {
            return t;
        }
    }
    String::new()
}

fn colorbar_ticks(b: &ColorBar) -> Vec<Tick> {
    let mut t = linear_ticks(b.lo, b.hi, false);
    t.retain(|x| (3..=6).contains(&x.len()));
    t.into_iter().last().unwrap_or_default()
}

/// A vertical colour bar right of the frame: the scale as a gradient of 64 stops of its map, with
/// ticks and a rotated title.
fn draw_colorbar(
    out: &mut String,
    b: &ColorBar,
    frame: Rect,
    pad: f64,
    z: &SizeSpec,
    drawn: &mut Drawn,
) {
    let bw = z.tick_font * 1.2;
    let (bx, by, bh) = (frame.2 + pad * 2.0, frame.1, frame.3 - frame.1);
    let id = format!("cbar{}_{}", frame.0 as i64, frame.1 as i64);
    let _ = write!(
        out,
        r#"<defs><linearGradient id="{id}" x1="0" y1="1" x2="0" y2="0">"#
    );
    for i in 0..=64 {
        let t = f64::from(i) / 64.0;
        let _ = write!(
            out,
            r#"<stop offset="{}" stop-color="{}"/>"#,
            c(t),
            (b.color)(t)
        );
    }
    out.push_str("</linearGradient></defs>\n");
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="url(#{id})" stroke="#333" stroke-width="0.5"/>"##,
        c(bx),
        c(by),
        c(bw),
        c(bh)
    );
    let span = (b.hi - b.lo).max(f64::MIN_POSITIVE);
    let mut widest: f64 = 0.0;
    for t in colorbar_ticks(b) {
        let y = by + bh - (t.at - b.lo) / span * bh;
        let base = y + z.tick_font * 0.36;
        let tx = bx + bw + 2.0 + pad * 0.5;
        let w = t.label.width(z.tick_font);
        widest = widest.max(w);
        let _ = writeln!(
            out,
            r##"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#333" stroke-width="0.6"/><text x="{3}" y="{4}" font-size="{5}">{6}</text>"##,
            c(bx + bw),
            c(y),
            c(bx + bw + 2.0),
            c(tx),
            c(base),
            c(z.tick_font),
            t.label.svg(z.tick_font)
        );
        drawn.texts.push((
            t.label.text(),
            (
                tx,
                base - z.tick_font * 0.95,
                tx + w,
                base + z.tick_font * 0.2,
            ),
        ));
    }
    let lx = bx + bw + 2.0 + pad * 0.5 + widest + pad + z.axis_font * 0.8;
    let ly = by + bh / 2.0;
    let title = fit_text(&b.label, bh, z.axis_font);
    let tw = font::width(&title, z.axis_font);
    let _ = writeln!(
        out,
        r#"<text x="{0}" y="{1}" text-anchor="middle" font-size="{2}" transform="rotate(-90 {0} {1})">{3}</text>"#,
        c(lx),
        c(ly),
        c(z.axis_font),
        esc(&title)
    );
    drawn.texts.push((
        title,
        (
            lx - z.axis_font * 0.95,
            ly - tw / 2.0,
            lx + z.axis_font * 0.2,
            ly + tw / 2.0,
        ),
    ));
}

/// The panels' layout at the current [`size`]: panel width, height and columns per row.
/// `panel_w`/`panel_h` give the aspect ratio the renderer asked for.
fn grid(n: usize, panel_w: f64, panel_h: f64, z: &SizeSpec) -> (f64, f64, usize) {
    let cols = n.clamp(1, z.per_row);
    let w = z.width / cols as f64;
    let aspect = if panel_w > 0.0 && panel_h > 0.0 {
        (panel_h / panel_w).clamp(0.5, 1.0)
    } else {
        0.72
    };
    // Narrow panels get relatively taller, so their plot area keeps a usable height.
    let h = (w * aspect)
        .max(z.width * 0.42 / cols as f64 + 60.0)
        .min(w * 1.05);
    (w, h, cols)
}

/// A rendered figure and the layout of each panel.
#[derive(Debug, Clone)]
pub struct Figure {
    pub svg: String,
    pub panels: Vec<Drawn>,
    /// Labels left out of every panel (listed in the caption under the figure).
    pub caption: Option<String>,
}

/// Render panels in rows at the current [`size`] into one SVG document. `panel_w` × `panel_h`
/// is the aspect ratio each panel is drawn at (points; the width is the size's).
pub fn figure(panels: &[Plot], panel_w: f64, panel_h: f64) -> String {
    figure_at(panels, panel_w, panel_h, size()).svg
}

/// [`figure`] at a given size, with the layout of what was drawn.
pub fn figure_at(panels: &[Plot], panel_w: f64, panel_h: f64, size: Size) -> Figure {
    let z = size.spec();
    let (w, h, cols) = grid(panels.len(), panel_w, panel_h, &z);
    let rows = panels.len().div_ceil(cols).max(1);
    let mut body = String::new();
    let mut drawn = Vec::new();
    for (i, p) in panels.iter().enumerate() {
        let (r, col) = (i / cols, i % cols);
        drawn.push(p.render_into(&mut body, col as f64 * w, r as f64 * h, w, h, &z));
    }
    let dropped: Vec<&str> = drawn
        .iter()
        .flat_map(|d| d.dropped.iter().map(String::as_str))
        .collect();
    let mut height = rows as f64 * h;
    let caption = (!dropped.is_empty()).then(|| {
        format!(
            "Not labelled (no free space near the point): {}.",
            dropped.join("; ")
        )
    });
    if let Some(text) = &caption {
        let f = z.label_font;
        for line in wrap(text, z.width - 2.0 * f, f) {
            height += f * 1.3;
            let _ = writeln!(
                body,
                r##"<text x="{}" y="{}" font-size="{}" fill="#333" class="caption">{}</text>"##,
                c(f),
                c(height - f * 0.3),
                c(f),
                esc(&line)
            );
        }
        height += f * 0.5;
    }
    let width = w * cols as f64;
    let mut svg = String::with_capacity(body.len() + 400);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{0}pt" height="{1}pt" viewBox="0 0 {0} {1}" font-family="{2}">"#,
        c(width),
        c(height),
        font::FONT_STACK
    );
    svg.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    // The plotted data travel inside the SVG until the writer splits them off ([`split_data`]).
    let _ = writeln!(
        svg,
        "<metadata id=\"amdahl-data\"><![CDATA[{}]]></metadata>",
        data_csv(panels).replace("]]>", "]]]]><![CDATA[>")
    );
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    Figure {
        svg,
        panels: drawn,
        caption,
    }
}

/// The data of a figure's panels as CSV (panel, series, x, y; labels with their text) so a
/// reader can re-plot it: what `--svg FILE.svg` writes beside it as `FILE.csv`.
pub fn data_csv(panels: &[Plot]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["panel", "series", "kind", "x", "y", "x_label", "y_label"]);
    for p in panels {
        for s in &p.series {
            let kind = match s.style {
                Style::Points => "points",
                Style::Line | Style::LinePoints => "line",
                Style::DashedLine => "dashed line",
            };
            for &(x, y) in &s.points {
                let _ = w.write_record([
                    p.title.as_str(),
                    s.label.as_str(),
                    kind,
                    &format!("{x}"),
                    &format!("{y}"),
                    p.x.label.as_str(),
                    p.y.label.as_str(),
                ]);
            }
        }
        for l in &p.labels {
            let _ = w.write_record([
                p.title.as_str(),
                l.text.as_str(),
                "label",
                &format!("{}", l.x),
                &format!("{}", l.y),
                p.x.label.as_str(),
                p.y.label.as_str(),
            ]);
        }
    }
    w.into_inner()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Split the data CSV a figure carries (see [`figure`]) off its SVG: `(svg without it, csv)`.
/// An SVG without data comes back unchanged, with no CSV.
pub fn split_data(svg: &str) -> (String, Option<String>) {
    const OPEN: &str = "<metadata id=\"amdahl-data\"><![CDATA[";
    const CLOSE: &str = "]]></metadata>\n";
    let Some(start) = svg.find(OPEN) else {
        return (svg.to_string(), None);
    };
    let Some(len) = svg[start..].find(CLOSE) else {
        return (svg.to_string(), None);
    };
    let csv = svg[start + OPEN.len()..start + len].replace("]]]]><![CDATA[>", "]]>");
    let rest = format!("{}{}", &svg[..start], &svg[start + len + CLOSE.len()..]);
    (rest, Some(csv))
}
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(t: &[Tick]) -> Vec<String> {
        t.iter().map(|t| t.label.text()).collect()
    }

    #[test]
    fn colormap_is_viridis() {
        assert_eq!(colormap(0.0), "#440154");
        assert_eq!(colormap(1.0), "#fde725");
        assert_eq!(colormap(f64::NAN), "#440154");
    }

    #[test]
    fn log_axis_ticks_are_decades_plain_below_ten_thousand() {
        let ax = Axis::new(Scale::Log10, "N");
        let t = ticks(&ax, 0.0, 3.0, 300.0, 8.0, true);
        // Dense enough for 1-2-5 steps on 300 pt, plain numbers.
        assert!(
            labels(&t).starts_with(&["1".to_string(), "2".into(), "5".into(), "10".into()]),
            "{:?}",
            labels(&t)
        );
        let t = ticks(&ax, 0.0, 3.0, 110.0, 8.0, true);
        assert_eq!(labels(&t), ["1", "10", "100", "1,000"]);
    }

    #[test]
    fn wide_log_axes_use_superscript_powers_of_ten() {
        let ax = Axis::new(Scale::Log10, "N");
        let t = ticks(&ax, 0.0, 8.0, 200.0, 8.0, true);
        assert!(t.len() >= 3);
        assert!(
            t.iter()
                .all(|t| t.label.base == "10" && t.label.sup.is_some()),
            "{:?}",
            labels(&t)
        );
        let svg = t[1].label.svg(8.0);
        assert!(svg.contains("<tspan dy="), "{svg}");
    }

    #[test]
    fn every_axis_gets_at_least_three_ticks() {
        // Less than a decade on a log axis, a narrow linear range, a count axis of 1..3.
        let log = Axis::new(Scale::Log10, "x");
        assert!(ticks(&log, 0.2, 0.6, 200.0, 8.0, true).len() >= 3);
        let lin = Axis::new(Scale::Linear, "y");
        assert!(ticks(&lin, 0.95, 1.01, 150.0, 8.0, false).len() >= 3);
        let cnt = Axis::new(Scale::Linear, "threads").counts();
        let t = ticks(&cnt, 0.9, 3.1, 150.0, 8.0, true);
        assert_eq!(labels(&t), ["1", "2", "3"]);
    }

    #[test]
    fn count_axes_never_show_decimals() {
        let cnt = Axis::new(Scale::Linear, "GPUs").counts();
        for (lo, hi) in [(0.5, 4.5), (1.0, 7.0), (0.0, 250.0), (2.0, 2.8)] {
            for t in ticks(&cnt, lo, hi, 200.0, 8.0, true) {
                assert!(
                    t.at.fract() == 0.0 && !t.label.base.contains('.'),
                    "{lo}..{hi}: {:?}",
                    t.label
                );
            }
        }
    }

    #[test]
    fn doubled_counts_tick_at_powers_of_two() {
        let ax = Axis::new(Scale::Log10, "threads").powers_of_two();
        let t = ticks(&ax, 0.0, 64f64.log10(), 200.0, 8.0, true);
        assert_eq!(labels(&t), ["1", "2", "4", "8", "16", "32", "64"]);
    }

    #[test]
    fn log_fractions_have_no_trailing_zeros() {
        let ax = Axis::new(Scale::Log10, "GFLOP/s");
        let t = ticks(&ax, -2.0, 2.0, 300.0, 8.0, false);
        assert!(labels(&t).contains(&"0.01".to_string()), "{:?}", labels(&t));
        assert!(
            t.iter()
                .all(|t| !(t.label.base.contains('.') && t.label.base.ends_with('0'))),
            "{:?}",
            labels(&t)
        );
    }

    #[test]
    fn linear_labels_share_their_decimals() {
        let ax = Axis::new(Scale::Linear, "E");
        let t = ticks(&ax, 0.0, 1.0, 150.0, 8.0, false);
        let d: Vec<usize> = t
            .iter()
            .map(|t| t.label.base.split('.').nth(1).map_or(0, str::len))
            .collect();
        assert!(d.windows(2).all(|w| w[0] == w[1]), "{:?}", labels(&t));
    }

    /// The structural checks issue 14 asks of every plot: no two text boxes overlap, every
    /// marker is inside the frame and under no label, at least three ticks per axis.
    pub(crate) fn check_layout(f: &Figure) {
        for (p, d) in f.panels.iter().enumerate() {
            assert!(
                d.x_ticks.len() >= 3 && d.y_ticks.len() >= 3,
                "panel {p}: ticks {:?} {:?}",
                labels(&d.x_ticks),
                labels(&d.y_ticks)
            );
            for (i, (a, ra)) in d.texts.iter().enumerate() {
                for (b, rb) in &d.texts[i + 1..] {
                    assert!(
                        !overlap(ra, rb),
                        "panel {p}: `{a}` {ra:?} overlaps `{b}` {rb:?}"
                    );
                }
            }
            for &(x, y, r) in &d.markers {
                let m = (x - r, y - r, x + r, y + r);
                for (t, rl) in &d.labels {
                    assert!(
                        !overlap(rl, &m),
                        "panel {p}: label `{t}` covers the marker at ({x}, {y})"
                    );
                }
            }
        }
    }

    fn dense_plot(points: &[(f64, f64)]) -> Plot {
        let mut p = Plot::new(
            "dense",
            Axis::new(Scale::Log10, "N"),
            Axis::new(Scale::Linear, "E"),
        );
        p.series.push(
            Series::new("runs", PALETTE[0], Style::LinePoints).points(points.iter().copied()),
        );
        p.labels
            .extend(points.iter().enumerate().map(|(i, &(x, y))| Label {
                x,
                y,
                text: format!("run {i}"),
            }));
        p
    }

    #[test]
    fn crowded_labels_are_dropped_and_listed_in_the_caption() {
        let pts: Vec<(f64, f64)> = (0..40)
            .map(|i| (1.0 + f64::from(i) * 0.05, 0.5 + f64::from(i % 3) * 0.01))
            .collect();
        let f = figure_at(&[dense_plot(&pts)], 400.0, 300.0, Size::Column);
        check_layout(&f);
        let d = &f.panels[0];
        assert!(!d.dropped.is_empty() && d.labels.len() + d.dropped.len() == 40);
        let caption = f.caption.clone().unwrap_or_default();
        for t in &d.dropped {
            assert!(caption.contains(t.as_str()), "{t} not in {caption}");
        }
        assert!(f.svg.contains("Not labelled"));
    }

    #[test]
    fn the_data_travel_with_the_figure_and_split_off() {
        let f = figure_at(
            &[dense_plot(&[(1.0, 0.5), (2.0, 0.7), (4.0, 0.9)])],
            400.0,
            300.0,
            Size::Page,
        );
        let (svg, csv) = split_data(&f.svg);
        let csv = csv.unwrap_or_default();
        assert!(!svg.contains("amdahl-data") && svg.starts_with("<svg"));
        assert_eq!(csv.lines().count(), 1 + 3 + 3, "{csv}");
        assert!(csv.contains("dense,runs,line,2,0.7,N,E"), "{csv}");
    }

    #[test]
    fn column_size_text_is_at_least_seven_points() {
        let z = Size::Column.spec();
        assert_eq!(z.width, 241.0); // 85 mm in points
        for f in [
            z.tick_font,
            z.axis_font,
            z.title_font,
            z.label_font,
            z.legend_font,
        ] {
            assert!(f >= 7.0);
        }
        let f = figure_at(
            &[dense_plot(&[(1.0, 0.5), (2.0, 0.7)])],
            400.0,
            300.0,
            Size::Column,
        );
        assert!(
            f.svg
                .starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="241pt""#),
            "{}",
            &f.svg[..120]
        );
        for size in f
            .svg
            .split("font-size=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
        {
            let pt: f64 = size.parse().unwrap_or(0.0);
            // Superscripts are 0.72 × a 7 pt tick label at the least.
            assert!(pt >= 5.0, "font-size {pt}");
        }
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the data, placed labels stay inside the frame, overlap no other label,
        /// marker or line, and every label is either placed or listed as dropped.
        #[test]
        fn label_placer_never_covers_data_or_labels(
            pts in proptest::collection::vec((1.0f64..1000.0, 0.0f64..1.0), 1..60),
            size in 0usize..3,
        ) {
            let size = [Size::Column, Size::Page, Size::Slide][size];
            let plot = dense_plot(&pts);
            let f = figure_at(&[plot.clone(), plot], 400.0, 300.0, size);
            check_layout(&f);
            for d in &f.panels {
                prop_assert_eq!(d.labels.len() + d.dropped.len(), pts.len());
                for (_, b) in &d.labels {
                    prop_assert!(inside(b, &d.frame));
                }
            }
        }
    }
}
