//! Tick values and their labels: the densest round set whose labels do not touch.

use super::text::{c, esc};
use super::{Axis, Scale, Ticks};
use crate::font;

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
    pub(super) fn width(&self, size: f64) -> f64 {
        font::width(&self.base, size)
            + self
                .sup
                .as_ref()
                .map_or(0.0, |s| font::width(s, size * SUP_SCALE))
    }
    pub(super) fn svg(&self, size: f64) -> String {
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

/// One tick: position in transformed coordinates (log10 of the value on log axes) and label.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: f64,
    pub label: TickLabel,
}

/// Tick marks for an axis spanning `lo..hi` (transformed) drawn `len` points long, whose labels
/// (at `font` pt) must not touch: the densest round set that fits, at least three ticks.
pub fn ticks(axis: &Axis, lo: f64, hi: f64, len: f64, font: f64, horizontal: bool) -> Vec<Tick> {
    ticks_reaching(axis, (lo, hi), None, len, font, horizontal)
}

/// Does the first tick lie at or below `below` (transformed; `None`: no such need)?
fn reaches(t: &[Tick], below: Option<f64>, span: f64) -> bool {
    below.is_none_or(|d| t.first().is_some_and(|a| a.at <= d + span * 1e-6))
}

/// [`ticks`], preferring a set whose first tick lies at or below `below` where one fits.
fn ticks_reaching(
    axis: &Axis,
    (lo, hi): (f64, f64),
    below: Option<f64>,
    len: f64,
    font: f64,
    horizontal: bool,
) -> Vec<Tick> {
    let reach = |t: &[Tick]| reaches(t, below, hi - lo);
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
            .find(|t| t.len() >= 3 && fits(t) && reach(t))
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
    let best = |need_reach: bool| {
        candidates
            .iter()
            .filter(|t| t.len() >= 3 && fits(t) && (!need_reach || reach(t)))
            .min_by_key(|t| (t.len().abs_diff(target), usize::MAX - t.len()))
    };
    best(true)
        .or_else(|| best(false))
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

/// [`ticks`] for an axis that fits its data, whose smallest value is `data_lo` (transformed):
/// when no tick lies at or below it (the lowest points cannot be read off: 14 ms under ticks
/// from 20 ms), the axis is extended down to a round value below the data and ticked again,
/// preferring tick sets that reach it.
/// Returns the axis's lower end and its ticks.
pub(super) fn ticks_from_below(
    axis: &Axis,
    (lo, hi): (f64, f64),
    data_lo: Option<f64>,
    len: f64,
    font: f64,
    horizontal: bool,
) -> (f64, Vec<Tick>) {
    let (lo, t) = reaching_the_data(axis, (lo, hi), data_lo, len, font, horizontal);
    // A narrow log axis over less than three decades may fit only two decade labels (10, 100
    // over data from 2 to 560, where 1-2-5 labels would touch): extend it down to the decade
    // below, so it gets a third and can be read.
    if axis.scale != Scale::Log10 || t.len() >= 3 {
        return (lo, t);
    }
    let decade = (lo + EPS).floor();
    let lower = if decade < lo - EPS {
        decade
    } else {
        decade - 1.0
    };
    let wider = ticks_reaching(axis, (lower, hi), data_lo, len, font, horizontal);
    if wider.len() > t.len() {
        (lower, wider)
    } else {
        (lo, t)
    }
}

/// [`ticks_from_below`]'s first step: ticks that reach the lowest data, extending the axis down
/// to a round value when none does.
fn reaching_the_data(
    axis: &Axis,
    (lo, hi): (f64, f64),
    data_lo: Option<f64>,
    len: f64,
    font: f64,
    horizontal: bool,
) -> (f64, Vec<Tick>) {
    let t = ticks_reaching(axis, (lo, hi), data_lo, len, font, horizontal);
    let Some(d) = data_lo else {
        return (lo, t);
    };
    if reaches(&t, data_lo, hi - lo) {
        return (lo, t);
    }
    // The round value at or below the data that every family of ticks can hold: on a log
    // axis the largest 1, 2 or 5 × 10^k not above it, on a linear one the chosen step's
    // multiple.
    let below = match axis.scale {
        Scale::Log10 => {
            let k = d.floor();
            [5.0f64, 2.0, 1.0]
                .into_iter()
                .map(|m| k + m.log10())
                .find(|&v| v <= d + EPS)
                .unwrap_or(k)
        }
        Scale::Linear => match (t.first(), t.get(1)) {
            (Some(a), Some(b)) if b.at > a.at => (d / (b.at - a.at)).floor() * (b.at - a.at),
            _ => return (lo, t),
        },
    };
    if !below.is_finite() {
        return (lo, t);
    }
    let lo = lo.min(below - (hi - below) * 0.02);
    (
        lo,
        ticks_reaching(axis, (lo, hi), data_lo, len, font, horizontal),
    )
}

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
pub(super) fn linear_ticks(lo: f64, hi: f64, whole: bool) -> Vec<Vec<Tick>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &[Tick]) -> Vec<String> {
        t.iter().map(|t| t.label.text()).collect()
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
}
