//! Text measured with the real metrics of the font the plots name: DejaVu Sans, embedded in the
//! binary (`data/fonts/DejaVuSans.ttf`, Bitstream Vera licence beside it). Plot layout (margins,
//! tick spacing, label boxes, legend width) uses these widths instead of a guessed width per
//! character, so labels do not run into borders or each other.
//!
//! Widths are the sum of the glyphs' horizontal advances (`hmtx`), without kerning: DejaVu's
//! kerning moves pairs by at most a few % of an em, which the layout's padding absorbs.

use std::sync::OnceLock;

/// The font file every plot names first in `font-family` and that exports render with.
pub const FONT: &[u8] = include_bytes!("../../../data/fonts/DejaVuSans.ttf");

/// The family name to put in `font-family`.
pub const FAMILY: &str = "DejaVu Sans";

/// The `font-family` value of every plot: the embedded font first, then close fallbacks
/// (Verdana has the metrics DejaVu Sans was drawn after, through Bitstream Vera).
pub const FONT_STACK: &str = "'DejaVu Sans', Verdana, sans-serif";

struct Metrics {
    face: ttf_parser::Face<'static>,
    units_per_em: f64,
    /// Advances of ASCII in em units (the common case, looked up once).
    ascii: [f64; 128],
}

fn metrics() -> Option<&'static Metrics> {
    static M: OnceLock<Option<Metrics>> = OnceLock::new();
    M.get_or_init(|| {
        let face = ttf_parser::Face::parse(FONT, 0).ok()?;
        let units_per_em = f64::from(face.units_per_em());
        let mut ascii = [0.0; 128];
        for (i, a) in ascii.iter_mut().enumerate() {
            *a = char::from_u32(i as u32)
                .and_then(|c| face.glyph_index(c))
                .and_then(|g| face.glyph_hor_advance(g))
                .map_or(0.0, |w| f64::from(w) / units_per_em);
        }
        Some(Metrics {
            face,
            units_per_em,
            ascii,
        })
    })
    .as_ref()
}

/// Width of `text` set at `size` (same unit as the result: pt in, pt out).
pub fn width(text: &str, size: f64) -> f64 {
    let Some(m) = metrics() else {
        // Unreachable with the embedded font; an average sans-serif advance as a last resort.
        return text.chars().count() as f64 * 0.6 * size;
    };
    let em: f64 = text
        .chars()
        .map(|c| match m.ascii.get(c as usize) {
            Some(&a) if c.is_ascii() => a,
            _ => {
                let g = m.face.glyph_index(c).unwrap_or(ttf_parser::GlyphId(0));
                m.face
                    .glyph_hor_advance(g)
                    .map_or(0.6, |w| f64::from(w) / m.units_per_em)
            }
        })
        .sum();
    em * size
}

/// Height of a line of text at `size` from baseline to the top of capitals (for boxes): DejaVu's
/// cap height is 0.73 em; with descenders a line spans about 0.96 em, rounded up to 1.0 here.
pub fn line_height(size: f64) -> f64 {
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_the_fonts_advances() {
        // DejaVu Sans, 2048 units per em: "0"-"9" advance 1303 units, "M" 1767, "i" 569.
        let per = |s: &str| width(s, 2048.0);
        assert!((per("0") - 1303.0).abs() < 0.5, "{}", per("0"));
        assert!((per("M") - 1767.0).abs() < 0.5, "{}", per("M"));
        assert!((per("i") - 569.0).abs() < 0.5, "{}", per("i"));
        // Widths add up and scale with the size.
        assert!(
            (width("10", 10.0) - 2.0 * width("0", 10.0) + width("0", 10.0) - width("1", 10.0))
                .abs()
                < 1e-9
        );
        assert!((width("α−", 10.0) - 2.0 * width("α−", 5.0)).abs() < 1e-9);
        assert!(width("α", 10.0) > 3.0);
    }
}
