//! Reading catalog CSV files into rows whose cells parse with errors naming file, line and column.

use super::CatalogError;

/// The first line that is neither empty nor a `#` comment: the header.
pub(crate) fn header_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("")
}

/// One data row of a catalog file.
pub(crate) struct Row<'a> {
    file: &'a str,
    line: u64,
    headers: &'a csv::StringRecord,
    record: csv::StringRecord,
}

/// Parse `text` (CSV, `#` comment lines allowed) and check that every `required` column exists.
/// Calls `each` on every data row, collecting its results.
pub(crate) fn parse<T>(
    text: &str,
    file: &str,
    required: &[&str],
    mut each: impl FnMut(&Row) -> Result<T, CatalogError>,
) -> Result<Vec<T>, CatalogError> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| file_error(file, &e))?.clone();
    for col in required {
        if !headers.iter().any(|h| h == *col) {
            return Err(CatalogError::File {
                file: file.into(),
                message: format!(
                    "missing column `{col}` in the header (expected columns: {})",
                    required.join(",")
                ),
            });
        }
    }
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| file_error(file, &e))?;
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let row = Row {
            file,
            line,
            headers: &headers,
            record,
        };
        out.push(each(&row)?);
    }
    Ok(out)
}

fn file_error(file: &str, e: &csv::Error) -> CatalogError {
    let line = e.position().map(|p| p.line());
    let message = match (line, e.kind()) {
        (Some(l), csv::ErrorKind::UnequalLengths { expected_len, len, .. }) => format!(
            "line {l}: {len} cells where the header has {expected_len} (quote cells that contain commas)"
        ),
        (Some(l), _) => format!("line {l}: {e}"),
        (None, _) => e.to_string(),
    };
    CatalogError::File {
        file: file.into(),
        message,
    }
}

impl Row<'_> {
    /// An error about column `column` of this row.
    pub(crate) fn err(&self, column: &str, message: impl Into<String>) -> CatalogError {
        CatalogError::Field {
            file: self.file.into(),
            line: self.line,
            column: column.into(),
            message: message.into(),
        }
    }

    /// The trimmed cell, or "" when the column is absent (optional columns).
    pub(crate) fn cell(&self, column: &str) -> &str {
        self.headers
            .iter()
            .position(|h| h == column)
            .and_then(|i| self.record.get(i))
            .unwrap_or("")
    }

    /// A cell that must not be empty.
    pub(crate) fn text(&self, column: &str) -> Result<String, CatalogError> {
        match self.cell(column) {
            "" => Err(self.err(column, "is empty; every row needs a value here")),
            s => Ok(s.to_string()),
        }
    }

    /// An optional finite number that must be > 0 when present.
    pub(crate) fn opt_positive(&self, column: &str) -> Result<Option<f64>, CatalogError> {
        let s = self.cell(column);
        if s.is_empty() {
            return Ok(None);
        }
        let v: f64 = s
            .parse()
            .map_err(|_| self.err(column, format!("`{s}` is not a number")))?;
        if !v.is_finite() || v <= 0.0 {
            return Err(self.err(column, format!("`{s}` must be a positive number")));
        }
        Ok(Some(v))
    }

    /// A required number that must be > 0.
    pub(crate) fn positive(&self, column: &str) -> Result<f64, CatalogError> {
        self.opt_positive(column)?
            .ok_or_else(|| self.err(column, "is empty; every row needs a number here"))
    }

    /// A required year between 1950 and 2100.
    pub(crate) fn year(&self, column: &str) -> Result<u16, CatalogError> {
        let s = self.cell(column);
        match s.parse::<u16>() {
            Ok(y) if (1950..=2100).contains(&y) => Ok(y),
            _ => Err(self.err(column, format!("`{s}` is not a year (1950-2100)"))),
        }
    }

    /// An optional positive whole number.
    pub(crate) fn opt_count(&self, column: &str) -> Result<Option<u32>, CatalogError> {
        let s = self.cell(column);
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(self.err(column, format!("`{s}` is not a positive whole number"))),
        }
    }

    /// An optional yes/no (also true/false, 1/0); empty = None.
    pub(crate) fn opt_bool(&self, column: &str) -> Result<Option<bool>, CatalogError> {
        match self.cell(column).to_ascii_lowercase().as_str() {
            "" => Ok(None),
            "yes" | "true" | "1" => Ok(Some(true)),
            "no" | "false" | "0" => Ok(Some(false)),
            s => Err(self.err(column, format!("`{s}` is not yes or no"))),
        }
    }

    /// A `;`-separated list (empty cell = empty list).
    pub(crate) fn list(&self, column: &str) -> Vec<String> {
        self.cell(column)
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }
}

/// Replace rows of `base` whose key equals a key in `user`, append the others.
pub(crate) fn merge_by<T>(base: &mut Vec<T>, user: Vec<T>, key: impl Fn(&T) -> String) {
    for item in user {
        let k = key(&item);
        match base.iter_mut().find(|b| key(b) == k) {
            Some(slot) => *slot = item,
            None => base.push(item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_count_comments_and_header() {
        let text = "# comment\nname,v\na,1\nb,x\n";
        let e = parse(text, "t.csv", &["name", "v"], |r| r.positive("v")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv: line 4, column `v`: `x` is not a number"
        );
    }

    #[test]
    fn missing_column_is_reported() {
        let e = parse("name\na\n", "t.csv", &["name", "v"], |r| r.positive("v")).unwrap_err();
        assert!(e.to_string().contains("missing column `v`"), "{e}");
    }

    #[test]
    fn ragged_row_is_reported_with_its_line() {
        let e = parse("name,v\na,1,2\n", "t.csv", &["name"], |r| r.text("name")).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }
}
