//! Plain-text tables for the terminal: a header row, aligned columns, numbers right-aligned.
//!
//! Laid out by `comfy-table`, which wraps cells inside their columns so a wide table fits a
//! narrower terminal instead of letting the terminal wrap every line. Colour-free so the output is
//! the same in a pipe, a CI log and a terminal (NO_COLOR needs no special case).
//!
//! The width to fit is given by the binary for the command it runs ([`with_max_width`], per
//! thread, so two commands at once keep their own) when stdout is a terminal; the renderers stay
//! pure functions of their results and tables are never wrapped when no width was given (pipes,
//! files, tests), so scripts and snapshots see whole lines.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, TableComponent, Width};
use std::cell::Cell;

thread_local! {
    /// The terminal width tables rendered on this thread must fit; None = no limit.
    static MAX_WIDTH: Cell<Option<u16>> = const { Cell::new(None) };
}

/// Run `f` with every table it renders on this thread fitted into `width` columns (`None`:
/// never wrap); the width before is restored afterwards, even if `f` panics.
pub fn with_max_width<R>(width: Option<u16>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u16>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MAX_WIDTH.with(|w| w.set(self.0));
        }
    }
    let _restore = Restore(MAX_WIDTH.with(|w| w.replace(width)));
    f()
}

fn max_width() -> Option<u16> {
    MAX_WIDTH.with(|w| w.get())
}

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table under construction. Cells are strings; format numbers before adding them.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers; the first column is left-aligned, the rest right-aligned
    /// (the usual shape: a name, then numbers). Change with [`Table::align`].
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        let aligns = (0..headers.len())
            .map(|i| if i == 0 { Align::Left } else { Align::Right })
            .collect();
        Self {
            headers,
            aligns,
            rows: Vec::new(),
        }
    }

    /// Set one column's alignment (out-of-range columns are ignored).
    pub fn align(mut self, column: usize, align: Align) -> Self {
        if let Some(a) = self.aligns.get_mut(column) {
            *a = align;
        }
        self
    }

    /// Append a row; missing cells render empty, extra cells are kept and widen the table.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with two spaces between columns and a dashed rule under the header, fitted to the
    /// width given by [`with_max_width`] (cells wrap inside their columns).
    pub fn render(&self) -> String {
        self.render_width(max_width())
    }

    /// Render fitted to `width` columns (`None`: never wrap).
    pub fn render_width(&self, width: Option<u16>) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.headers.len()))
            .max()
            .unwrap_or(0);
        if ncols == 0 {
            return String::new();
        }
        let pad = |row: &[String]| -> Vec<String> {
            (0..ncols)
                .map(|i| row.get(i).cloned().unwrap_or_default())
                .collect()
        };
        let mut t = comfy_table::Table::new();
        // No borders; a space between columns and a dashed rule under the header. With one
        // space of right padding per column (below) the columns sit two spaces apart.
        t.load_preset(comfy_table::presets::NOTHING)
            .set_style(TableComponent::HeaderLines, '-')
            .set_style(TableComponent::VerticalLines, ' ')
            .set_style(TableComponent::MiddleHeaderIntersections, ' ');
        match width {
            Some(w) => {
                t.set_content_arrangement(ContentArrangement::Dynamic)
                    .set_width(w);
            }
            None => {
                t.set_content_arrangement(ContentArrangement::Disabled);
            }
        }
        t.set_header(pad(&self.headers));
        for r in &self.rows {
            t.add_row(pad(r));
        }
        let floors = width.map(|w| self.column_floors(ncols, w));
        for i in 0..ncols {
            if let Some(c) = t.column_mut(i) {
                let right = u16::from(i + 1 < ncols);
                c.set_padding((0, right));
                // A floor includes the column's padding (comfy-table subtracts it).
                if let Some(&floor) = floors.as_ref().and_then(|f| f.get(i)) {
                    if floor > 0 {
                        c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                            floor.saturating_add(right),
                        )));
                    }
                }
                c.set_cell_alignment(match self.aligns.get(i).copied().unwrap_or(Align::Right) {
                    Align::Left => CellAlignment::Left,
                    Align::Right => CellAlignment::Right,
                });
            }
        }
        let mut out = t.trim_fmt();
        out.push('\n');
        out
    }
}

impl Table {
    /// The narrowest each column may be wrapped to, so that no number is ever split across lines
    /// (comfy-table breaks a word longer than its column at any character: `0.911` / `3`,
    /// `3.488` / `e-4`). When the longest words of all columns fit `width` side by side, no word
    /// is split at all; else every column is at least as wide as its longest word with a digit
    /// in it, and one character (comfy-table drops the text of a column it cannot give a
    /// character to). Where even that does not fit, the table is wider than `width` rather than
    /// broken.
    fn column_floors(&self, ncols: usize, width: u16) -> Vec<u16> {
        let longest = |numbers_only: bool| -> Vec<usize> {
            (0..ncols)
                .map(|i| {
                    std::iter::once(&self.headers)
                        .chain(&self.rows)
                        .filter_map(|r| r.get(i))
                        .flat_map(|cell| cell.split_whitespace())
                        .filter(|w| !numbers_only || unbreakable_number(w))
                        .map(|w| w.chars().count())
                        .max()
                        .unwrap_or(0)
                })
                .collect()
        };
        // Two columns apart: one space of padding and one of rule per gap.
        let gaps = 2 * ncols.saturating_sub(1);
        let fits = |f: &[usize]| f.iter().sum::<usize>() + gaps <= usize::from(width);
        let words = longest(false);
        let numbers: Vec<usize> = longest(true)
            .into_iter()
            .zip(&words)
            .map(|(n, &w)| n.max(w.min(1)))
            .collect();
        let floors = if fits(&words) || !fits(&numbers) {
            words
        } else {
            numbers
        };
        floors
            .into_iter()
            .map(|f| u16::try_from(f).unwrap_or(u16::MAX))
            .collect()
    }
}

/// Words longer than this that hold a digit (a URL, a file path) may still be split: a column
/// that wide would squeeze every other one.
const LONGEST_UNBROKEN: usize = 24;

/// Is this word (no spaces) a number, or one with its unit or punctuation attached (`0.9113`,
/// `3.488e-4`, `1,144,409`, `(24.3`, `tp2`, `53.0%`), that must stay on one line?
fn unbreakable_number(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit()) && word.chars().count() <= LONGEST_UNBROKEN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_names_left_numbers_right() {
        let mut t = Table::new(["system", "E"]);
        t.row(["Summit", "0.7147"]);
        t.row(["Piz Daint", "0.78"]);
        assert_eq!(
            t.render_width(None),
            "system          E\n---------- ------\nSummit     0.7147\nPiz Daint    0.78\n"
        );
    }

    /// Tables 150–260 columns wide would wrap in an 80–120 column terminal (every line broken in
    /// two). Fitted to a width, every line stays within it and no cell is lost.
    #[test]
    fn wide_table_fits_the_terminal_width() {
        let mut t = Table::new(["system", "source", "value"]).align(1, Align::Left);
        let source = "Uptime Institute Global Data Center Survey 2024: average annual PUE 1.56, \
                      weighted by the number of respondents in each region of the world";
        t.row(["industry", source, "1.56"]);
        t.row(["hyperscale", "Google 2023 Environmental Report", "1.1"]);
        let wide = t.render_width(None);
        assert!(wide.lines().any(|l| l.chars().count() > 150), "{wide}");
        let fitted = t.render_width(Some(80));
        for l in fitted.lines() {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        for word in ["industry", "hyperscale", "1.56", "respondents", "world"] {
            assert!(fitted.contains(word), "{word} lost:\n{fitted}");
        }
    }

    /// A narrow terminal split numbers inside their cells (`0.911` / `3`, `3.488` / `e-4`, the
    /// planner's Végh table at 80 columns): every number must come out whole.
    #[test]
    fn numbers_are_never_split_across_lines() {
        let mut t = Table::new([
            "N",
            "DP",
            "batch",
            "step s",
            "TFLOP/s",
            "E",
            "alpha_eff",
            "1-alpha",
            "comm",
            "bubble",
            "serial",
            "fits",
        ]);
        let rows = [
            [
                "2", "1", "64", "24.28", "330.3", "0.9462", "0.9431", "0.05685", "0.05521", "0",
                "0.001642", "yes",
            ],
            [
                "16", "8", "64", "3.137", "319.6", "0.9113", "0.9938", "0.006170", "0.005295", "0",
                "3.488e-4", "yes",
            ],
        ];
        for r in rows {
            t.row(r);
        }
        // 60 is too narrow for the numbers side by side: wider than asked, nothing split.
        for w in [40u16, 60, 70, 80, 100] {
            let out = t.render_width(Some(w));
            let words: Vec<&str> = out.split_whitespace().collect();
            for r in rows {
                for cell in r {
                    assert!(
                        words.contains(&cell),
                        "`{cell}` split at {w} columns:\n{out}"
                    );
                }
            }
        }
        // Wide enough for the numbers: within the width. Wide enough for every word side by
        // side (92 columns here): headers stay whole too.
        for (w, whole_headers) in [(80u16, false), (100, true)] {
            let out = t.render_width(Some(w));
            for l in out.lines() {
                assert!(l.chars().count() <= usize::from(w), "{l}");
            }
            let words: Vec<&str> = out.split_whitespace().collect();
            assert_eq!(words.contains(&"TFLOP/s"), whole_headers, "{out}");
        }
    }
}
