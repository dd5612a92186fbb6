//! The legend: which inside corner it goes in, and drawing it.

use super::place::{overlap, segment_hits, Rect};
use super::text::{c, esc};
use super::{Drawn, Plot, Series, SizeSpec, Style};
use crate::font;
use std::fmt::Write as _;

impl Plot {
    /// The legend's box and its labelled series, in the inside corner hiding the fewest markers
    /// and crossing the fewest line segments (ties: top-left, top-right, bottom-left,
    /// bottom-right).
    pub(super) fn legend_box(
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

    pub(super) fn draw_legend(
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
