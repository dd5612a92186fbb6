//! PNG and PDF from the same SVG a plot writes (for slides and journals that take no SVG), in
//! pure Rust: `usvg` parses the SVG, `resvg` rasterises it, `svg2pdf` writes vector PDF. Text is
//! set in the embedded DejaVu Sans ([`crate::font`]), loaded into usvg's font database by hand, so
//! no system font or library is needed and every machine renders the same glyphs the layout
//! measured.

use crate::font;
use resvg::{tiny_skia, usvg};
use std::sync::Arc;

/// PNG resolution: 300 dots per inch, what journals ask of line art at minimum.
pub const PNG_DPI: f32 = 300.0;

/// Why an SVG could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the plot's SVG could not be read for export: {0}")]
    Parse(#[from] usvg::Error),
    #[error("the plot is too large to rasterise at {PNG_DPI} dpi ({0} × {1} px)")]
    TooLarge(u32, u32),
    #[error("encoding the PNG failed: {0}")]
    Png(String),
    #[error("writing the PDF failed: {0}")]
    Pdf(String),
}

fn tree(svg: &str) -> Result<usvg::Tree, ExportError> {
    let mut db = usvg::fontdb::Database::new();
    db.load_font_data(font::FONT.to_vec());
    db.set_sans_serif_family(font::FAMILY);
    let options = usvg::Options {
        font_family: font::FAMILY.to_string(),
        fontdb: Arc::new(db),
        ..usvg::Options::default()
    };
    Ok(usvg::Tree::from_str(svg, &options)?)
}

/// The SVG rasterised at [`PNG_DPI`] (its size is in points) as a PNG file.
pub fn png(svg: &str) -> Result<Vec<u8>, ExportError> {
    let tree = tree(svg)?;
    // usvg sizes are CSS pixels (96 per inch; our `pt` sizes arrive × 4/3).
    let scale = PNG_DPI / 96.0;
    let size = tree.size();
    let (w, h) = (
        (size.width() * scale).ceil() as u32,
        (size.height() * scale).ceil() as u32,
    );
    // 20,000 px a side (1.7 m at 300 dpi) is far past any figure; a bound keeps memory sane.
    if w == 0 || h == 0 || w > 20_000 || h > 20_000 {
        return Err(ExportError::TooLarge(w, h));
    }
    let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or(ExportError::TooLarge(w, h))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| ExportError::Png(e.to_string()))
}

/// The SVG as a one-page vector PDF of the same size (text embedded as a font subset).
pub fn pdf(svg: &str) -> Result<Vec<u8>, ExportError> {
    let tree = tree(svg)?;
    svg2pdf::to_pdf(
        &tree,
        svg2pdf::ConversionOptions::default(),
        // usvg sizes are CSS pixels, 96 per inch: the page keeps the figure's size in pt.
        svg2pdf::PageOptions { dpi: 96.0 },
    )
    .map_err(|e| ExportError::Pdf(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="72pt" height="36pt" viewBox="0 0 72 36" font-family="'DejaVu Sans'"><rect width="100%" height="100%" fill="white"/><rect x="0" y="0" width="36" height="36" fill="#0072B2"/><text x="40" y="20" font-size="10">Ag</text></svg>"##;

    #[test]
    fn png_is_300_dpi_and_draws_the_shapes_and_text() {
        let bytes = png(SVG).unwrap();
        let img = tiny_skia::Pixmap::decode_png(&bytes).unwrap();
        // 72 pt = 1 in = 300 px.
        assert_eq!((img.width(), img.height()), (300, 150));
        let px = |x: u32, y: u32| img.pixel(x, y).unwrap();
        let blue = px(75, 75);
        assert_eq!((blue.red(), blue.green(), blue.blue()), (0, 0x72, 0xB2));
        // The glyphs darken some pixels right of the square (text was found and drawn).
        let dark = (160..300)
            .flat_map(|x| (0..150).map(move |y| (x, y)))
            .filter(|&(x, y)| px(x, y).red() < 100)
            .count();
        assert!(dark > 100, "{dark} dark pixels: no text drawn");
    }

    #[test]
    fn pdf_is_one_page_with_the_font_embedded() {
        let bytes = pdf(SVG).unwrap();
        assert!(bytes.starts_with(b"%PDF-"));
        let text = String::from_utf8_lossy(&bytes);
        // One page object (the page tree is `/Type /Pages`).
        assert_eq!(
            text.matches("/Type /Page").count() - text.matches("/Type /Pages").count(),
            1
        );
        assert!(text.contains("DejaVu"), "font not embedded");
    }

    #[test]
    fn bad_svg_is_an_error_not_a_panic() {
        assert!(matches!(png("<svg"), Err(ExportError::Parse(_))));
        assert!(pdf("not svg").is_err());
    }
}
