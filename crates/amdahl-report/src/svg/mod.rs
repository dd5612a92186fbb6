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
//! chosen with [`with_size`] (`--size column|page|slide`).
//!
//! One file per decision: `axis` (scale and tick kind), `plot` (what a panel holds), `size`
//! (`--size`), `ticks` (tick values and labels), `place` (boxes on the page and where a point
//! label may go), `text` (escaping, coordinates, wrapping), `panel` (one panel drawn into its
//! rectangle), `legend`, `colorbar`, and `figure` (panels in rows, with their data as CSV).

mod axis;
mod colorbar;
mod figure;
mod legend;
mod panel;
mod place;
mod plot;
mod size;
mod text;
mod ticks;

pub use axis::{Axis, Scale, Ticks};
pub use colorbar::ColorBar;
pub use figure::{data_csv, figure, figure_at, split_data, Figure};
pub use legend::Swatch;
pub use panel::Drawn;
pub use place::{place_label, Obstacles, Rect};
pub use plot::{colormap, log_space, Cell, Label, Plot, Raster, Series, Style, PALETTE};
pub use size::{size, with_size, Size, SizeSpec};
pub use ticks::{ticks, Tick, TickLabel};

/// Structural checks of figures, shared by every renderer's tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::place::{inside, overlap, segment_hits};
    use super::{Figure, Tick};

    thread_local! {
        /// The last figure [`super::figure`] rendered on this thread, with its layout.
        pub(super) static LAST: std::cell::RefCell<Option<Figure>> =
            const { std::cell::RefCell::new(None) };
    }

    /// The layout of the last figure a renderer drew on this thread (renderers return only
    /// the SVG text).
    pub(crate) fn last_figure() -> Figure {
        LAST.with(|l| l.borrow().clone())
            .expect("a figure was rendered on this thread")
    }

    /// Render with `svg` and check the layout of what it drew ([`check_layout`]).
    pub(crate) fn checked(svg: impl FnOnce() -> String) -> Figure {
        let _ = svg();
        let f = last_figure();
        check_layout(&f);
        f
    }

    pub(crate) fn labels(t: &[Tick]) -> Vec<String> {
        t.iter().map(|t| t.label.text()).collect()
    }

    /// The structural checks every plot passes, so that it reads in print: no two text boxes
    /// overlap, no marker is under a label, at least three ticks per axis, the legend covers
    /// no marker and no line and names each thing once.
    pub(crate) fn check_layout(f: &Figure) {
        for (p, d) in f.panels.iter().enumerate() {
            // A legend in the band above the plot area covers nothing: data are clipped to it.
            let legend = d.legend.filter(|b| inside(b, &d.frame));
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
                if let Some(b) = &legend {
                    assert!(
                        !overlap(b, &m),
                        "panel {p}: the legend {b:?} covers the marker at ({x}, {y})"
                    );
                }
            }
            if let Some(b) = &legend {
                for (i, l) in d.lines.iter().enumerate() {
                    assert!(
                        !l.windows(2).any(|w| segment_hits(w[0], w[1], b)),
                        "panel {p}: the legend {b:?} covers line {i}"
                    );
                }
            }
            // Two entries named alike, or drawn alike, say one thing twice.
            for (i, a) in d.legend_entries.iter().enumerate() {
                for b in &d.legend_entries[i + 1..] {
                    assert!(
                        a.label != b.label,
                        "panel {p}: legend entry `{}` twice",
                        a.label
                    );
                    assert!(
                        (&a.color, a.line, a.marker) != (&b.color, b.line, b.marker),
                        "panel {p}: legend entries `{}` and `{}` look alike: {a:?}",
                        a.label,
                        b.label
                    );
                }
            }
        }
    }
}
