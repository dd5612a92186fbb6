//! The colour bar beside a panel of colour-map cells.

use super::place::Rect;
use super::text::{c, esc, fit_text};
use super::ticks::{linear_ticks, Tick};
use super::{Drawn, SizeSpec};
use crate::font;
use std::fmt::Write as _;

/// A colour bar for the colour scale of a plot's cells: `color(t)` for t in [0, 1] maps the
/// values `lo..hi` (linear).
#[derive(Debug, Clone)]
pub struct ColorBar {
    pub label: String,
    pub lo: f64,
    pub hi: f64,
    pub color: fn(f64) -> String,
}

pub(super) fn colorbar_ticks(b: &ColorBar) -> Vec<Tick> {
    let mut t = linear_ticks(b.lo, b.hi, false);
    t.retain(|x| (3..=6).contains(&x.len()));
    t.into_iter().last().unwrap_or_default()
}

/// A vertical colour bar right of the frame: the scale as a gradient of 64 stops of its map, with
/// ticks and a rotated title.
pub(super) fn draw_colorbar(
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
    draw_gradient(out, b, &id, (bx, by, bw, bh));
    let widest = draw_bar_ticks(out, b, (bx, by, bw, bh), pad, z, drawn);
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

/// The bar itself at (x, y, width, height): a gradient `id` of 64 stops of the map, bottom to
/// top, filling an outlined rectangle.
fn draw_gradient(out: &mut String, b: &ColorBar, id: &str, (bx, by, bw, bh): (f64, f64, f64, f64)) {
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
}

/// The bar's tick marks and labels, right of it; returns the widest label's width.
fn draw_bar_ticks(
    out: &mut String,
    b: &ColorBar,
    (bx, by, bw, bh): (f64, f64, f64, f64),
    pad: f64,
    z: &SizeSpec,
    drawn: &mut Drawn,
) -> f64 {
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
    widest
}
