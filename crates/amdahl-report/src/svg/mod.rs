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
pub use panel::Drawn;
pub use place::{place_label, Obstacles, Rect};
pub use plot::{colormap, log_space, Cell, Label, Plot, Raster, Series, Style, PALETTE};
pub use size::{size, with_size, Size, SizeSpec};
pub use ticks::{ticks, Tick, TickLabel};
