//! Plain-text tables for the terminal: a header row, aligned columns, numbers right-aligned.
//!
//! Deliberately dependency-free and colour-free so the output is the same in a pipe, a CI log and
//! a terminal (NO_COLOR needs no special case).

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

    /// Render with two spaces between columns and a dashed rule under the header.
    pub fn render(&self) -> String {
        let ncols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.headers.len()))
            .max()
            .unwrap_or(0);
        fn cell(row: &[String], i: usize) -> &str {
            row.get(i).map(String::as_str).unwrap_or("")
        }
        let widths: Vec<usize> = (0..ncols)
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| cell(r, i).chars().count())
                    .chain(std::iter::once(cell(&self.headers, i).chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let mut line = |row: &[String]| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = cell(row, i);
                let pad = w.saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                match self.aligns.get(i).copied().unwrap_or(Align::Right) {
                    Align::Left => {
                        s.push_str(c);
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule);
        for r in &self.rows {
            line(r);
        }
        out
    }
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
            t.render(),
            "system          E\n---------  ------\nSummit     0.7147\nPiz Daint    0.78\n"
        );
    }
}
