//! A panel's content: series, cells, labels, raster, and the palette and colour map they use.

use super::{Axis, ColorBar, Scale};

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

    /// The smallest data value on an axis that fits the data (transformed); `None` on an axis
    /// with a fixed range or without data.
    pub(super) fn data_min(
        &self,
        axis: &Axis,
        pick: fn(f64, f64) -> f64,
        cell: fn(&Cell) -> [f64; 2],
    ) -> Option<f64> {
        if axis.range.is_some() {
            return None;
        }
        self.series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(x, y)| pick(x, y)))
            .chain(self.cells.iter().flat_map(cell))
            .filter_map(|v| axis.tr(v))
            .reduce(f64::min)
    }

    /// Data range of an axis in transformed coordinates, padded a little.
    pub(super) fn extent(
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
        if axis.ticks == super::Ticks::PowersOfTwo {
            (lo, hi) = three_powers_of_two(lo, hi);
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
}

/// A doubled count's range (log10) widened by whole doublings, alternately below and above,
/// until it holds three powers of two to tick at: runs at n = 64 and 128 alone would otherwise
/// be ticked 70, 80, 90, 100.
fn three_powers_of_two(mut lo: f64, mut hi: f64) -> (f64, f64) {
    let l2 = std::f64::consts::LOG10_2;
    let eps = 1e-9;
    let count = |lo: f64, hi: f64| (hi / l2 + eps).floor() - (lo / l2 - eps).ceil() + 1.0;
    let mut below = true;
    while count(lo, hi) < 3.0 {
        if below {
            lo = ((lo / l2 - eps).ceil() - 1.0) * l2;
        } else {
            hi = ((hi / l2 + eps).floor() + 1.0) * l2;
        }
        below = !below;
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bench gemm --quick` (n = 64, 128) was ticked 70–100, not at its sizes.
    #[test]
    fn doubled_counts_span_three_powers_of_two() {
        let mut p = Plot::new(
            "gemm",
            Axis::new(Scale::Log10, "n").powers_of_two(),
            Axis::new(Scale::Log10, "GFLOP/s"),
        );
        p.series.push(
            Series::new("fp32", PALETTE[0], Style::LinePoints)
                .points([(64.0, 10.0), (128.0, 20.0)]),
        );
        let (lo, hi) = p.extent(&p.x, |x, _| x, |c| [c.x0, c.x1]);
        assert!(lo <= 32f64.log10() && hi >= 128f64.log10(), "{lo} {hi}");
        assert!(hi < 256f64.log10(), "{hi}");
        let (lo, hi) = p.extent(&p.y, |_, y| y, |c| [c.y0, c.y1]);
        assert!(lo > 9f64.log10() && hi < 22f64.log10(), "{lo} {hi}");
    }

    #[test]
    fn colormap_is_viridis() {
        assert_eq!(colormap(0.0), "#440154");
        assert_eq!(colormap(1.0), "#fde725");
        assert_eq!(colormap(f64::NAN), "#440154");
    }
}
