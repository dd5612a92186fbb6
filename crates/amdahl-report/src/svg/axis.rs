//! Axes: how data map to the page and which ticks they get.

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
    pub(super) fn tr(&self, v: f64) -> Option<f64> {
        match self.scale {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log10 => (v > 0.0 && v.is_finite()).then(|| v.log10()),
        }
    }
}
