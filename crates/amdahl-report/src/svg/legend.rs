//! The legend: its entries (one per label), where it goes (an inside corner that covers no data,
//! else a band above the plot area), and drawing it.

use super::place::{overlap, segment_hits, Rect};
use super::text::{c, esc};
use super::{Drawn, Plot, Series, SizeSpec, Style};
use crate::font;
use std::fmt::Write as _;

/// A legend entry as drawn: for tests that no two entries look alike.
#[derive(Debug, Clone, PartialEq)]
pub struct Swatch {
    pub label: String,
    pub color: String,
    /// A line (dashed or not), if one is drawn.
    pub line: Option<bool>,
    pub marker: bool,
}

/// Where the legend goes.
#[derive(Debug, Clone)]
pub(super) enum LegendSpot {
    /// Inside the plot area, in a corner where it hides no marker and crosses no line.
    Inside(Rect),
    /// In a band of this height above the plot area (every corner would cover data): entries
    /// side by side, in rows as wide as the plot area.
    Above(f64),
}

/// The size of one entry: swatch and gap, then its label.
fn entry_width(s: &Series, f: f64) -> f64 {
    f * 2.7 + font::width(&s.label, f)
}

impl Plot {
    /// The series the legend names: those with a label, each label once (a second series of the
    /// same name — the upper bound drawn like the lower, one style per alternative — needs no
    /// second entry).
    pub(super) fn legend_entries(&self) -> Vec<&Series> {
        let mut seen = std::collections::HashSet::new();
        self.series
            .iter()
            .filter(|s| !s.label.is_empty() && seen.insert(s.label.as_str()))
            .collect()
    }

    /// Where the legend goes: the inside corner (top-left, top-right, bottom-left, bottom-right)
    /// whose box hides no marker and crosses no line segment; when every corner covers data, a
    /// band above the plot area. `None`: no entries.
    pub(super) fn legend_spot(
        &self,
        frame: Rect,
        z: &SizeSpec,
        markers: &[(f64, f64, f64)],
        lines: &[Vec<(f64, f64)>],
    ) -> Option<LegendSpot> {
        let named = self.legend_entries();
        if named.is_empty() {
            return None;
        }
        let f = z.legend_font;
        let lw = named.iter().map(|s| entry_width(s, f)).fold(0.0, f64::max) + f * 0.7;
        let lh = named.len() as f64 * f * 1.35 + f * 0.6;
        let inset = 4.0;
        let (left, right) = (frame.0 + inset, frame.2 - inset - lw);
        let (top, bottom) = (frame.1 + inset, frame.3 - inset - lh);
        let covers = |b: &Rect| {
            markers
                .iter()
                .any(|(x, y, r)| overlap(b, &(x - r, y - r, x + r, y + r)))
                || lines
                    .iter()
                    .any(|l| l.windows(2).any(|w| segment_hits(w[0], w[1], b)))
        };
        let fits = left <= right && top <= bottom;
        let corner = [(left, top), (right, top), (left, bottom), (right, bottom)]
            .into_iter()
            .map(|(lx, ly)| (lx, ly, lx + lw, ly + lh))
            .find(|b| fits && !covers(b));
        Some(match corner {
            Some(b) => LegendSpot::Inside(b),
            None => LegendSpot::Above(
                self.legend_rows(frame.2 - frame.0, z).len() as f64 * f * 1.35 + f * 0.4,
            ),
        })
    }

    /// The entries of a legend above the plot area, in rows no wider than `width`.
    fn legend_rows(&self, width: f64, z: &SizeSpec) -> Vec<Vec<&Series>> {
        let f = z.legend_font;
        let gap = f * 1.2;
        let mut rows: Vec<Vec<&Series>> = Vec::new();
        let mut used = 0.0;
        for s in self.legend_entries() {
            let w = entry_width(s, f);
            match rows.last_mut() {
                Some(row) if used + gap + w <= width => {
                    row.push(s);
                    used += gap + w;
                }
                _ => {
                    rows.push(vec![s]);
                    used = w;
                }
            }
        }
        rows
    }

    /// Draw the legend at its spot; `frame` is the plot area (a band sits just above it).
    pub(super) fn draw_legend(
        &self,
        out: &mut String,
        spot: &LegendSpot,
        frame: Rect,
        z: &SizeSpec,
        drawn: &mut Drawn,
    ) {
        let f = z.legend_font;
        let row_h = f * 1.35;
        match spot {
            LegendSpot::Inside(b) => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="{}" height="{}" fill="white" fill-opacity="0.9" stroke="#999" stroke-width="0.5"/>"##,
                    c(b.0),
                    c(b.1),
                    c(b.2 - b.0),
                    c(b.3 - b.1)
                );
                for (i, s) in self.legend_entries().into_iter().enumerate() {
                    let base = b.1 + (i as f64 + 1.0) * row_h;
                    draw_entry(out, s, b.0 + f * 0.4, base, z, drawn);
                }
                drawn.legend = Some(*b);
            }
            LegendSpot::Above(h) => {
                let top = frame.1 - h;
                for (r, row) in self.legend_rows(frame.2 - frame.0, z).iter().enumerate() {
                    let base = top + (r as f64 + 1.0) * row_h - f * 0.1;
                    let mut x = frame.0;
                    for s in row {
                        draw_entry(out, s, x, base, z, drawn);
                        x += entry_width(s, f) + f * 1.2;
                    }
                }
                drawn.legend = Some((frame.0, top, frame.2, frame.1));
            }
        }
    }
}

/// One entry: its swatch (line, dashed line, marker, or line with a marker) from `x`, and its
/// label, on the text baseline `base`.
fn draw_entry(out: &mut String, s: &Series, x: f64, base: f64, z: &SizeSpec, drawn: &mut Drawn) {
    let f = z.legend_font;
    let mid = base - f * 0.33;
    let line = s.style != Style::Points;
    // Points and lines through points show their marker: a line with markers must not read
    // like a plain line of the same colour.
    let marker = matches!(s.style, Style::Points | Style::LinePoints);
    if line {
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
            c(x),
            c(mid),
            c(x + f * 1.8),
            c(mid),
            s.color,
            c(z.line_w * 1.2)
        );
    }
    if marker {
        let _ = writeln!(
            out,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{}"/>"#,
            c(x + f * 0.9),
            c(mid),
            c(z.marker_r),
            s.color
        );
    }
    let tx = x + f * 2.3;
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
    drawn.legend_entries.push(Swatch {
        label: s.label.clone(),
        color: s.color.clone(),
        line: line.then_some(s.style == Style::DashedLine),
        marker,
    });
}
