//! A sheet as a grid of cells, whatever it was stored in: the legacy Excel format (`.xls`, an OLE
//! compound file), Office Open XML (`.xlsx`, a zip archive) or CSV. The list parser only sees
//! grids, so quirks of the container stay here.

use super::error::{CellProblem, Top500Error};
use super::guard::{self, MAX_CELLS};
use calamine::{Data, DataRef, Reader, Xls, Xlsx};
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One cell's value. Numbers stored as text stay text here; the parser decides per field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Empty,
    Num(f64),
    Text(String),
}

pub static EMPTY: Value = Value::Empty;

/// A rectangular-ish block of cells (CSV rows may be ragged) and where its top-left cell sits in
/// the sheet, so errors can name the cell a user sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub name: String,
    /// 0-based (row, column) of `cells[0][0]` in the sheet.
    pub origin: (u32, u32),
    cells: Vec<Vec<Value>>,
    /// Longest row, computed once (rows may be ragged; callers ask often).
    width: usize,
}

impl Grid {
    pub fn new(name: String, origin: (u32, u32), cells: Vec<Vec<Value>>) -> Self {
        let width = cells.iter().map(Vec::len).max().unwrap_or(0);
        Self {
            name,
            origin,
            cells,
            width,
        }
    }
    pub fn get(&self, row: usize, col: usize) -> &Value {
        self.cells
            .get(row)
            .and_then(|r| r.get(col))
            .unwrap_or(&EMPTY)
    }
    pub fn rows(&self) -> usize {
        self.cells.len()
    }
    pub fn cols(&self) -> usize {
        self.width
    }
    /// Spreadsheet coordinates (1-based row, column letters) of a grid cell.
    pub fn cell_ref(&self, row: usize, col: usize) -> (u64, String) {
        let r = u64::from(self.origin.0) + row as u64 + 1;
        let c = u64::from(self.origin.1) + col as u64;
        (r, column_letters(c))
    }
}

/// 0 → A, 25 → Z, 26 → AA (bijective base 26, as spreadsheets name columns).
pub fn column_letters(mut c: u64) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'A' + (c % 26) as u8);
        if c < 26 {
            break;
        }
        c = c / 26 - 1;
    }
    s.reverse();
    String::from_utf8_lossy(&s).into_owned()
}

/// What the leading bytes say a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    /// OLE2 compound document: legacy Excel `.xls`.
    Ole,
    /// Zip archive: `.xlsx` (also `.xlsb`, `.ods`, which calamine reads too).
    Zip,
    Text,
}

const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
const ZIP_MAGIC: [u8; 4] = [b'P', b'K', 0x03, 0x04];

fn sniff(file: &str, bytes: &[u8]) -> Result<Container, Top500Error> {
    if bytes.starts_with(&OLE_MAGIC) {
        return Ok(Container::Ole);
    }
    if bytes.starts_with(&ZIP_MAGIC) {
        return Ok(Container::Zip);
    }
    if bytes.is_empty() {
        return Err(Top500Error::Unrecognised {
            file: file.into(),
            reason: "the file is empty".into(),
        });
    }
    // Text: no NUL bytes in the first 8 KiB (a binary file that is neither OLE nor zip is not a
    // spreadsheet we know).
    let head = bytes.get(..bytes.len().min(8192)).unwrap_or(bytes);
    if head.contains(&0) {
        return Err(Top500Error::Unrecognised {
            file: file.into(),
            reason: "binary content that is neither an .xls (OLE) nor an .xlsx (zip) file".into(),
        });
    }
    Ok(Container::Text)
}

/// Every sheet of a file as a grid: all sheets of a workbook, or the one "sheet" of a CSV file.
pub fn load(file: &str, bytes: &[u8]) -> Result<Vec<Grid>, Top500Error> {
    match sniff(file, bytes)? {
        Container::Ole => {
            guard::xls(bytes).map_err(|m| workbook_err(file, m))?;
            shielded(file, || xls(file, bytes))
        }
        Container::Zip => {
            guard::xlsx(bytes).map_err(|m| workbook_err(file, m))?;
            shielded(file, || xlsx(file, bytes))
        }
        Container::Text => Ok(vec![csv_grid(file, bytes)?]),
    }
}

fn workbook_err(file: &str, message: impl Into<String>) -> Top500Error {
    Top500Error::Workbook {
        file: file.into(),
        message: message.into(),
    }
}

/// Run a calamine call, turning a panic inside it into an error: calamine indexes some record
/// fields without length checks, and a damaged file must not take the program down.
fn shielded<T>(file: &str, f: impl FnOnce() -> Result<T, Top500Error>) -> Result<T, Top500Error> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(workbook_err(
            file,
            "the spreadsheet parser failed on malformed data (the file is probably damaged)",
        ))
    })
}

/// Legacy Excel: calamine parses every sheet when opening (bounded by `guard::xls` first).
fn xls(file: &str, bytes: &[u8]) -> Result<Vec<Grid>, Top500Error> {
    let mut wb: Xls<_> =
        Xls::new(Cursor::new(bytes)).map_err(|e| workbook_err(file, e.to_string()))?;
    let names = wb.sheet_names();
    let mut grids = Vec::with_capacity(names.len());
    for name in names {
        let range = wb
            .worksheet_range(&name)
            .map_err(|e| workbook_err(file, format!("sheet \"{name}\": {e}")))?;
        let origin = range.start().unwrap_or((0, 0));
        let cells = range
            .rows()
            .map(|row| row.iter().map(value_of).collect())
            .collect();
        grids.push(Grid::new(name, origin, cells));
    }
    Ok(grids)
}

/// Office Open XML: cells are streamed and laid into a grid only once their extent is known to
/// be within [`MAX_CELLS`] (calamine's own `worksheet_range` would allocate the extent first).
fn xlsx(file: &str, bytes: &[u8]) -> Result<Vec<Grid>, Top500Error> {
    let mut wb: Xlsx<_> =
        Xlsx::new(Cursor::new(bytes)).map_err(|e| workbook_err(file, e.to_string()))?;
    let names = wb.sheet_names();
    let mut grids = Vec::with_capacity(names.len());
    for name in names {
        let sheet_err =
            |e: &dyn std::fmt::Display| workbook_err(file, format!("sheet \"{name}\": {e}"));
        let mut reader = wb
            .worksheet_cells_reader(&name)
            .map_err(|e| sheet_err(&e))?;
        let mut cells: Vec<((u32, u32), Value)> = Vec::new();
        while let Some(cell) = reader.next_cell().map_err(|e| sheet_err(&e))? {
            let v = value_of_ref(cell.get_value());
            if v != Value::Empty {
                cells.push((cell.get_position(), v));
            }
            if cells.len() as u64 > MAX_CELLS {
                return Err(sheet_err(&format!(
                    "more than {MAX_CELLS} cells; amdahl reads lists of up to that size"
                )));
            }
        }
        grids.push(sparse_grid(file, name, cells)?);
    }
    Ok(grids)
}

/// Lay sparse cells into a dense grid, refusing extents beyond [`MAX_CELLS`].
fn sparse_grid(
    file: &str,
    name: String,
    cells: Vec<((u32, u32), Value)>,
) -> Result<Grid, Top500Error> {
    let Some(r0) = cells.iter().map(|c| c.0 .0).min() else {
        return Ok(Grid::new(name, (0, 0), Vec::new()));
    };
    let r1 = cells.iter().map(|c| c.0 .0).max().unwrap_or(r0);
    let c0 = cells.iter().map(|c| c.0 .1).min().unwrap_or(0);
    let c1 = cells.iter().map(|c| c.0 .1).max().unwrap_or(c0);
    let (rows, cols) = (u64::from(r1 - r0) + 1, u64::from(c1 - c0) + 1);
    if rows.saturating_mul(cols) > MAX_CELLS {
        return Err(workbook_err(
            file,
            format!(
                "sheet \"{name}\" spans {rows} rows × {cols} columns, more than the {MAX_CELLS} cells amdahl reads (the file is probably damaged)"
            ),
        ));
    }
    let mut grid = vec![vec![Value::Empty; cols as usize]; rows as usize];
    for ((r, c), v) in cells {
        if let Some(slot) = grid
            .get_mut((r - r0) as usize)
            .and_then(|row| row.get_mut((c - c0) as usize))
        {
            *slot = v;
        }
    }
    Ok(Grid::new(name, (r0, c0), grid))
}

fn value_of_ref(d: &DataRef<'_>) -> Value {
    match d {
        DataRef::Empty => Value::Empty,
        DataRef::Int(i) => Value::Num(*i as f64),
        DataRef::Float(f) => Value::Num(*f),
        DataRef::Bool(b) => Value::Text(b.to_string()),
        DataRef::String(s) | DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => text(s),
        DataRef::SharedString(s) => text(s),
        DataRef::DateTime(t) => Value::Num(t.as_f64()),
        DataRef::Error(e) => Value::Text(format!("#{e:?}")),
    }
}

fn text(s: &str) -> Value {
    if s.trim().is_empty() {
        Value::Empty
    } else {
        Value::Text(s.to_string())
    }
}

fn value_of(d: &Data) -> Value {
    match d {
        Data::Empty => Value::Empty,
        Data::Int(i) => Value::Num(*i as f64),
        Data::Float(f) => Value::Num(*f),
        Data::Bool(b) => Value::Text(b.to_string()),
        Data::String(s) | Data::DateTimeIso(s) | Data::DurationIso(s) => text(s),
        Data::DateTime(t) => Value::Num(t.as_f64()),
        Data::Error(e) => Value::Text(format!("#{e:?}")),
    }
}

fn csv_grid(file: &str, bytes: &[u8]) -> Result<Grid, Top500Error> {
    // Strip a UTF-8 byte-order mark, which spreadsheet programs write at the start of CSV files.
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(bytes);
    let mut cells = Vec::new();
    for (i, rec) in rdr.byte_records().enumerate() {
        let rec = rec.map_err(|e| {
            Top500Error::Cell(Box::new(CellProblem {
                file: file.into(),
                sheet: "csv".into(),
                row: e.position().map(|p| p.line()).unwrap_or(i as u64 + 1),
                column: "A".into(),
                field: "record".into(),
                problem: format!("not valid CSV: {e}"),
            }))
        })?;
        cells.push(
            rec.iter()
                .map(|f| {
                    // TOP500 CSV exports are not always UTF-8 (site names in Latin-1): keep them
                    // readable rather than reject the whole list.
                    let s = String::from_utf8_lossy(f);
                    let t = s.trim();
                    if t.is_empty() {
                        Value::Empty
                    } else {
                        Value::Text(t.to_string())
                    }
                })
                .collect(),
        );
    }
    Ok(Grid::new("csv".into(), (0, 0), cells))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_letters_are_bijective_base_26() {
        assert_eq!(column_letters(0), "A");
        assert_eq!(column_letters(25), "Z");
        assert_eq!(column_letters(26), "AA");
        assert_eq!(column_letters(27), "AB");
        assert_eq!(column_letters(701), "ZZ");
        assert_eq!(column_letters(702), "AAA");
    }

    #[test]
    fn sniff_rejects_empty_and_binary() {
        assert!(matches!(
            sniff("f", b""),
            Err(Top500Error::Unrecognised { .. })
        ));
        assert!(matches!(
            sniff("f", b"\x00\x01junk"),
            Err(Top500Error::Unrecognised { .. })
        ));
        assert_eq!(sniff("f", b"Rank,Rmax"), Ok(Container::Text));
    }

    #[test]
    fn csv_cells_are_trimmed_text_and_rows_may_be_ragged() {
        let g = csv_grid("f.csv", b"\xEF\xBB\xBFa, b\n1\n").unwrap();
        assert_eq!(g.get(0, 1), &Value::Text("b".into()));
        assert_eq!(g.get(1, 1), &Value::Empty);
        assert_eq!(g.cols(), 2);
    }
}
