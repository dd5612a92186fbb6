//! Parse a TOP500 list from the bytes of a spreadsheet or CSV file.
//!
//! The official spreadsheets drift between editions, and each quirk is handled here:
//! - units: `Rmax`/`Rpeak` carry no unit before 2017 (GFlop/s) and `[TFlop/s]` after; the unit
//!   is read from the header, and a header without one is read as GFlop/s only for lists before
//!   2017 (a later list without a unit is rejected rather than misread by 1000×);
//! - header names drift ("Power" → "Power (kW)", "Mflops/Watt" → "Power Effeciency
//!   [GFlops/Watts]" → "Energy Efficiency [GFlops/Watts]"): headers are matched after
//!   normalisation (lower case, letters and digits only);
//! - numbers stored as text ("1,234.5"), empty cells (optional fields become `None`, 0 in an
//!   optional count means "not reported");
//! - the transposed layout (fields as rows, systems as columns), found by looking for the header
//!   in the first column as well as in the first row.

use super::error::{CellProblem, Top500Error};
use super::grid::{self, Grid, Value};
use super::record::{ListFile, ListId, System};
use crate::units::{FlopsPerSecond, Watts};

/// Read the TOP500 list in `bytes`. `file` names the input in errors.
///
/// A workbook with several list sheets (the shared 2023-11 copy has the list and a transposed
/// duplicate) is read from one of them; the others are mentioned in [`ListFile::notes`].
///
/// Ranks are checked for gaps (see `check_ranks`): lost rows are an error in a spreadsheet.
pub fn read_list(file: &str, bytes: &[u8]) -> Result<ListFile, Top500Error> {
    let mut list = read_selection(file, bytes)?;
    check_ranks(&mut list, is_spreadsheet(bytes))?;
    Ok(list)
}

/// [`read_list`] without the rank check: for a deliberate selection of systems from several
/// lists (the built-in history).
pub(crate) fn read_selection(file: &str, bytes: &[u8]) -> Result<ListFile, Top500Error> {
    let grids = grid::load(file, bytes)?;
    let found = locate_all(&grids);
    // Of several list sheets, read the one with the most fields (the shared 2023-11 copy's
    // transposed sheet adds CPU cores, sockets and nodes to the plain one); ties keep the first.
    let Some(&(g, layout)) = found.iter().rev().max_by_key(|(g, l)| field_count(g, *l)) else {
        return Err(no_list(file, &grids));
    };
    let mut list = parse_sheet(file, g, layout)?;
    for &(other, l) in found.iter().filter(|(o, _)| !std::ptr::eq(*o, g)) {
        // Sheet names can be bare numbers ("62"): say that they are sheet names, which one was
        // read and why, so the note is not mistaken for a rank or a count.
        list.notes.push(format!(
            "{file}: the workbook holds the list twice; read the sheet named \"{}\" (it has the \
             most fields) and ignored the copy in the sheet named \"{}\" ({})",
            g.name,
            other.name,
            if l.transposed {
                "transposed: one system per column"
            } else {
                "one system per row"
            },
        ));
    }
    Ok(list)
}

/// An official list as top500.org publishes it: an OLE2 `.xls` or a zip `.xlsx`.
fn is_spreadsheet(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) || bytes.starts_with(b"PK")
}

/// Systems every official list holds.
pub const LIST_LENGTH: usize = 500;

/// Ranks must run from 1 without gaps (ties share a rank and the next rank skips as many: 1, 2,
/// 2, 4). A gap means rows were lost: an error for a spreadsheet (an official list is complete),
/// a note for a CSV (which may be a deliberate selection). A spreadsheet with fewer than
/// [`LIST_LENGTH`] systems is noted too: it may have been cut short at the end.
fn check_ranks(list: &mut ListFile, spreadsheet: bool) -> Result<(), Top500Error> {
    // One file may hold several editions (a CSV with a list column): each is ranked on its own.
    let mut editions: Vec<Option<ListId>> = list.systems.iter().map(|s| s.list).collect();
    editions.sort_unstable();
    editions.dedup();
    for edition in editions {
        let ranks: Vec<u32> = list
            .systems
            .iter()
            .filter(|s| s.list == edition)
            .map(|s| s.rank)
            .collect();
        check_edition(list, ranks, spreadsheet)?;
    }
    Ok(())
}

fn check_edition(
    list: &mut ListFile,
    mut ranks: Vec<u32>,
    spreadsheet: bool,
) -> Result<(), Top500Error> {
    ranks.sort_unstable();
    // Sorted, the i-th rank (from 0) is at most i + 1; the first that exceeds it starts a gap.
    let gap = ranks
        .iter()
        .enumerate()
        .find(|&(i, &r)| u64::from(r) > i as u64 + 1)
        .map(|(i, &r)| (i as u32 + 1, r - 1));
    if let Some((from, to)) = gap {
        if spreadsheet {
            return Err(Top500Error::RanksMissing {
                file: list.file.clone(),
                sheet: list.sheet.clone(),
                from,
                to,
                systems: ranks.len(),
            });
        }
        list.notes.push(format!(
            "warning: {}: ranks {from}–{to} are missing ({} systems read); analysing the systems present",
            list.file,
            ranks.len()
        ));
    } else if spreadsheet && ranks.len() < LIST_LENGTH {
        list.notes.push(format!(
            "warning: {}: sheet \"{}\" holds {} systems, an official TOP500 list holds {LIST_LENGTH}; the file may be cut short",
            list.file,
            list.sheet,
            ranks.len()
        ));
    }
    Ok(())
}

/// Read every sheet that holds a TOP500 list (for checking that duplicates agree).
pub fn read_all_sheets(file: &str, bytes: &[u8]) -> Result<Vec<ListFile>, Top500Error> {
    let grids = grid::load(file, bytes)?;
    let found = locate_all(&grids);
    if found.is_empty() {
        return Err(no_list(file, &grids));
    }
    found
        .into_iter()
        .map(|(g, l)| parse_sheet(file, g, l))
        .collect()
}

fn no_list(file: &str, grids: &[Grid]) -> Top500Error {
    let details = if grids.is_empty() {
        "the workbook has no sheets".to_string()
    } else {
        grids
            .iter()
            .map(|g| {
                format!(
                    "sheet \"{}\" ({} rows × {} columns) has no row or column with Rank, Rmax and Rpeak",
                    g.name,
                    g.rows(),
                    g.cols()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Top500Error::NoList {
        file: file.into(),
        details,
    }
}

/// Where the header is: row `header` (systems below it) or, transposed, column `header`
/// (systems to its right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    transposed: bool,
    header: usize,
}

/// How far into a sheet to look for the header (title rows above it are allowed).
const HEADER_SEARCH: usize = 20;

fn locate_all(grids: &[Grid]) -> Vec<(&Grid, Layout)> {
    grids
        .iter()
        .filter_map(|g| locate_header(g).map(|l| (g, l)))
        .collect()
}

/// Number of non-empty header labels of a list sheet.
fn field_count(g: &Grid, l: Layout) -> usize {
    let v = View { g, l };
    (0..v.fields())
        .filter(|&f| !matches!(v.header(f), Value::Empty))
        .count()
}

fn is_header_line(labels: impl Iterator<Item = String>) -> bool {
    let (mut rank, mut rmax, mut rpeak) = (false, false, false);
    for h in labels {
        rank |= h == "rank";
        rmax |= h.starts_with("rmax");
        rpeak |= h.starts_with("rpeak");
    }
    rank && rmax && rpeak
}

fn locate_header(g: &Grid) -> Option<Layout> {
    let (rows, cols) = (g.rows(), g.cols());
    for r in 0..rows.min(HEADER_SEARCH) {
        if is_header_line((0..cols).map(|c| norm(g.get(r, c)))) {
            return Some(Layout {
                transposed: false,
                header: r,
            });
        }
    }
    for c in 0..cols.min(HEADER_SEARCH) {
        if is_header_line((0..rows).map(|r| norm(g.get(r, c)))) {
            return Some(Layout {
                transposed: true,
                header: c,
            });
        }
    }
    None
}

/// Header normalisation: lower case, ASCII letters and digits only ("Rmax [TFlop/s]" → "rmaxtflops").
fn norm(v: &Value) -> String {
    match v {
        Value::Text(s) => s
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect(),
        _ => String::new(),
    }
}

fn raw(v: &Value) -> String {
    match v {
        Value::Empty => String::new(),
        Value::Num(f) => {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{}", *f as i64)
            } else {
                f.to_string()
            }
        }
        Value::Text(s) => s.trim().to_string(),
    }
}

/// A sheet seen as records × fields whatever its orientation.
struct View<'a> {
    g: &'a Grid,
    l: Layout,
}

impl View<'_> {
    fn fields(&self) -> usize {
        if self.l.transposed {
            self.g.rows()
        } else {
            self.g.cols()
        }
    }
    fn records(&self) -> usize {
        let n = if self.l.transposed {
            self.g.cols()
        } else {
            self.g.rows()
        };
        n.saturating_sub(self.l.header + 1)
    }
    fn pos(&self, rec: Option<usize>, field: usize) -> (usize, usize) {
        let i = rec.map_or(self.l.header, |r| self.l.header + 1 + r);
        if self.l.transposed {
            (field, i)
        } else {
            (i, field)
        }
    }
    fn header(&self, field: usize) -> &Value {
        let (r, c) = self.pos(None, field);
        self.g.get(r, c)
    }
    fn get(&self, rec: usize, field: usize) -> &Value {
        let (r, c) = self.pos(Some(rec), field);
        self.g.get(r, c)
    }
}

/// The columns a list needs (`Option` for those it may lack) and the units their headers state.
struct Columns {
    rank: usize,
    name: Option<usize>,
    computer: Option<usize>,
    site: Option<usize>,
    country: Option<usize>,
    total_cores: usize,
    acc_cores: Option<usize>,
    accelerator: Option<usize>,
    nodes: Option<usize>,
    rmax: (usize, f64),
    rpeak: (usize, f64),
    hpcg: Option<(usize, f64)>,
    /// Column and W per unit.
    power: Option<(usize, f64)>,
    /// Column and GFlop/s-per-W per unit.
    efficiency: Option<(usize, f64)>,
    list: Option<usize>,
    source: Option<usize>,
}

/// Flop/s per unit stated in a header ("Rmax [TFlop/s]" → 1e12); `None` when it states none.
fn flop_unit(header: &str) -> Option<f64> {
    let h = header.to_ascii_lowercase();
    [
        ("pflop", 1e15),
        ("tflop", 1e12),
        ("gflop", 1e9),
        ("mflop", 1e6),
    ]
    .into_iter()
    .find(|(u, _)| h.contains(u))
    .map(|(_, s)| s)
}

fn power_unit(header: &str) -> f64 {
    let h: String = header
        .to_ascii_lowercase()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    if h.contains("(mw)") || h.contains("[mw]") {
        1e6
    } else if h.contains("(w)") || h.contains("[w]") {
        1.0
    } else {
        // TOP500 has always listed power in kW ("Power" before 2017, "Power (kW)" after).
        1e3
    }
}

/// The list before which TOP500 spreadsheets gave Rmax/Rpeak in GFlop/s without a unit.
const TFLOPS_SINCE: ListId = ListId {
    year: 2017,
    month: 6,
};

fn parse_sheet(file: &str, g: &Grid, l: Layout) -> Result<ListFile, Top500Error> {
    let v = View { g, l };
    let headers = Headers::read(file, &v);
    let list_guess = guess_list(file, g);
    let mut notes = Vec::new();
    let cols = find_columns(&headers, list_guess, &mut notes)?;
    let systems = parse_records(file, &v, &cols, &headers.raw, list_guess, &mut notes)?;
    Ok(ListFile {
        file: file.into(),
        sheet: g.name.clone(),
        transposed: l.transposed,
        systems,
        notes,
    })
}

/// A sheet's header labels: normalised to be matched across editions, and as written to be
/// quoted in messages.
struct Headers<'a> {
    file: &'a str,
    v: &'a View<'a>,
    norm: Vec<String>,
    raw: Vec<String>,
}

impl<'a> Headers<'a> {
    fn read(file: &'a str, v: &'a View<'a>) -> Self {
        Headers {
            file,
            v,
            norm: (0..v.fields()).map(|f| norm(v.header(f))).collect(),
            raw: (0..v.fields()).map(|f| raw(v.header(f))).collect(),
        }
    }
    /// The first field whose normalised label satisfies `pred`.
    fn find(&self, pred: impl Fn(&str) -> bool) -> Option<usize> {
        self.norm.iter().position(|h| pred(h))
    }
    /// The label of `field` as written ("" beyond the last).
    fn label(&self, field: usize) -> &str {
        self.raw.get(field).map_or("", String::as_str)
    }
    /// A required column is absent; the labels the sheet has are listed, so that a misspelt
    /// one can be recognised.
    fn missing(&self, column: &'static str, example: &'static str) -> Top500Error {
        Top500Error::MissingColumn {
            file: self.file.into(),
            sheet: self.v.g.name.clone(),
            column,
            example,
            found: self
                .raw
                .iter()
                .filter(|h| !h.is_empty())
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
    /// A problem with the header cell of `field` itself.
    fn err(&self, field: usize, problem: String) -> Top500Error {
        let (r, c) = self.v.pos(None, field);
        let (row, column) = self.v.g.cell_ref(r, c);
        Top500Error::Cell(Box::new(CellProblem {
            file: self.file.into(),
            sheet: self.v.g.name.clone(),
            row,
            column,
            field: self.raw.get(field).cloned().unwrap_or_default(),
            problem,
        }))
    }
}

/// The list a sheet without a List column is, from the file's name or a sheet named by the
/// edition's number; it decides how a header without a unit is read.
fn guess_list(file: &str, g: &Grid) -> Option<ListId> {
    ListId::from_file_name(file).or_else(|| {
        g.name
            .trim()
            .parse::<u32>()
            .ok()
            .and_then(ListId::from_edition)
    })
}

/// Every column the list needs or may have, found by its normalised label.
fn find_columns(
    h: &Headers<'_>,
    list_guess: Option<ListId>,
    notes: &mut Vec<String>,
) -> Result<Columns, Top500Error> {
    let list = h.find(|l| l == "list");
    let (rmax, rpeak, hpcg) = flop_columns(h, list_guess, list, notes)?;
    let cols = Columns {
        rank: h
            .find(|l| l == "rank")
            .ok_or_else(|| h.missing("Rank", "Rank"))?,
        name: h.find(|l| l == "name"),
        computer: h.find(|l| l == "computer" || l == "system"),
        site: h.find(|l| l == "site" || l == "installationsite"),
        country: h.find(|l| l == "country"),
        total_cores: h
            .find(|l| l == "totalcores" || l == "cores" || l == "processors")
            .ok_or_else(|| h.missing("Total Cores", "Total Cores"))?,
        acc_cores: h.find(|l| l == "acceleratorcoprocessorcores"),
        accelerator: h.find(|l| l == "acceleratorcoprocessor" || l == "accelerator"),
        nodes: h.find(|l| l == "nodes"),
        rmax,
        rpeak,
        hpcg,
        power: h
            .find(|l| l == "power" || l.starts_with("powerkw") || l.starts_with("powermw"))
            .map(|f| (f, power_unit(h.label(f)))),
        efficiency: h.find(|l| l.contains("flopswatt")).map(|f| {
            let mflops = h.norm.get(f).is_some_and(|l| l.contains("mflops"));
            (f, if mflops { 1e-3 } else { 1.0 })
        }),
        list,
        source: h.find(|l| l == "source"),
    };
    if cols.name.is_none() && cols.computer.is_none() {
        return Err(h.missing("Name", "Name"));
    }
    Ok(cols)
}

/// A performance column with its Flop/s per unit.
type FlopColumn = (usize, f64);

/// Rmax and Rpeak (both required) and HPCG, with their units; a note when Rmax or Rpeak was
/// read as GFlop/s for want of a unit, since that reading is a guess.
fn flop_columns(
    h: &Headers<'_>,
    list_guess: Option<ListId>,
    list: Option<usize>,
    notes: &mut Vec<String>,
) -> Result<(FlopColumn, FlopColumn, Option<FlopColumn>), Top500Error> {
    let rmax = h
        .find(|l| l.starts_with("rmax"))
        .ok_or_else(|| h.missing("Rmax", "Rmax [TFlop/s]"))?;
    let rpeak = h
        .find(|l| l.starts_with("rpeak"))
        .ok_or_else(|| h.missing("Rpeak", "Rpeak [TFlop/s]"))?;
    let unit_of = |field: usize| flop_unit_of(h, field, list_guess, list);
    let (rmax_unit, rpeak_unit) = (unit_of(rmax)?, unit_of(rpeak)?);
    let unitless: Vec<String> = [rmax, rpeak]
        .iter()
        .filter_map(|&f| h.raw.get(f))
        .filter(|l| flop_unit(l).is_none())
        .map(|l| format!("\"{l}\""))
        .collect();
    if !unitless.is_empty() {
        notes.push(format!(
            "{}: header {} states no unit: read as GFlop/s, the unit of TOP500 spreadsheets before {TFLOPS_SINCE}",
            h.file,
            unitless.join(" and ")
        ));
    }
    let hpcg = match h.find(|l| l.starts_with("hpcg")) {
        Some(f) => Some((f, unit_of(f)?)),
        None => None,
    };
    Ok(((rmax, rmax_unit), (rpeak, rpeak_unit), hpcg))
}

/// Flop/s per unit of a performance column: the unit its header states, else GFlop/s, the unit
/// of spreadsheets before [`TFLOPS_SINCE`]. A sheet guessed to be a later list (and without a
/// List column) is refused instead, since reading it in GFlop/s would be off by 1000×.
fn flop_unit_of(
    h: &Headers<'_>,
    field: usize,
    list_guess: Option<ListId>,
    list: Option<usize>,
) -> Result<f64, Top500Error> {
    let label = h.label(field);
    if let Some(u) = flop_unit(label) {
        return Ok(u);
    }
    match list_guess {
        Some(id) if id >= TFLOPS_SINCE && list.is_none() => Err(h.err(
            field,
            format!(
                "the header states no unit, and lists from {TFLOPS_SINCE} on (this is {id}) give TFlop/s; \
                 write the unit into the header, e.g. \"{label} [TFlop/s]\""
            ),
        )),
        _ => Ok(1e9),
    }
}

/// Every record of the sheet that is a system; blank records are passed over and rows with
/// neither rank nor Rmax (footnotes, spacers) noted as skipped.
fn parse_records(
    file: &str,
    v: &View<'_>,
    cols: &Columns,
    raw_headers: &[String],
    list_guess: Option<ListId>,
    notes: &mut Vec<String>,
) -> Result<Vec<System>, Top500Error> {
    let g = v.g;
    let rmax = cols.rmax.0;
    let mut systems = Vec::with_capacity(v.records());
    for rec in 0..v.records() {
        if (0..v.fields()).all(|f| matches!(v.get(rec, f), Value::Empty)) {
            continue;
        }
        let ctx = RowCtx {
            file,
            v,
            rec,
            raw_headers,
        };
        // A row with neither rank nor Rmax is a footnote or a spacer, not a system.
        let rank_num = number(v.get(rec, cols.rank)).ok().flatten();
        let rmax_num = number(v.get(rec, rmax)).ok().flatten();
        if rank_num.is_none() && rmax_num.is_none() {
            let (r, c) = v.pos(Some(rec), cols.rank);
            let (row, column) = g.cell_ref(r, c);
            notes.push(format!(
                "{file}: sheet \"{}\", row {row}, column {column}: skipped (no rank and no Rmax)",
                g.name
            ));
            continue;
        }
        systems.push(parse_system(&ctx, cols, list_guess)?);
    }
    Ok(systems)
}

struct RowCtx<'a> {
    file: &'a str,
    v: &'a View<'a>,
    rec: usize,
    raw_headers: &'a [String],
}

impl RowCtx<'_> {
    fn err(&self, field: usize, problem: impl Into<String>) -> Top500Error {
        let (r, c) = self.v.pos(Some(self.rec), field);
        let (row, column) = self.v.g.cell_ref(r, c);
        Top500Error::Cell(Box::new(CellProblem {
            file: self.file.into(),
            sheet: self.v.g.name.clone(),
            row,
            column,
            field: self.raw_headers.get(field).cloned().unwrap_or_default(),
            problem: problem.into(),
        }))
    }
    fn text(&self, field: Option<usize>) -> String {
        field
            .map(|f| raw(self.v.get(self.rec, f)))
            .unwrap_or_default()
    }
    fn num(&self, field: usize) -> Result<Option<f64>, Top500Error> {
        number(self.v.get(self.rec, field)).map_err(|p| self.err(field, p))
    }
    fn required(&self, field: usize) -> Result<f64, Top500Error> {
        self.num(field)?
            .ok_or_else(|| self.err(field, "empty; every system needs this value"))
    }
    /// A non-negative count; 0 or empty means "not reported" for optional counts.
    fn count(&self, field: Option<usize>) -> Result<Option<u64>, Top500Error> {
        let Some(f) = field else { return Ok(None) };
        match self.num(f)? {
            None => Ok(None),
            Some(x) if x < 0.0 => Err(self.err(f, format!("{x} is negative; a count is ≥ 0"))),
            Some(0.0) => Ok(None),
            Some(x) => Ok(Some(x.round() as u64)),
        }
    }
    fn positive(&self, field: Option<(usize, f64)>) -> Result<Option<f64>, Top500Error> {
        let Some((f, scale)) = field else {
            return Ok(None);
        };
        match self.num(f)? {
            None => Ok(None),
            Some(x) if x < 0.0 => Err(self.err(f, format!("{x} is negative"))),
            Some(0.0) => Ok(None),
            Some(x) => self.finite(f, x, scale).map(Some),
        }
    }
    /// `x` in the header's unit times `scale` (to SI), which must stay finite (1e308 TFlop/s
    /// does not).
    fn finite(&self, field: usize, x: f64, scale: f64) -> Result<f64, Top500Error> {
        let si = x * scale;
        if si.is_finite() {
            Ok(si)
        } else {
            Err(self.err(
                field,
                format!("{x} is too large to be a measurement in this column's unit"),
            ))
        }
    }
}

/// A cell as a number: numeric cells as they are; text with thousands separators or spaces
/// ("1,234.5", " 17590 ") parsed; empty → `None`. Non-finite values are rejected.
fn number(v: &Value) -> Result<Option<f64>, String> {
    let x = match v {
        Value::Empty => return Ok(None),
        Value::Num(f) => *f,
        Value::Text(s) => {
            let t: String = s
                .chars()
                .filter(|c| !matches!(c, ',' | '_' | '\u{a0}' | '\u{202f}') && !c.is_whitespace())
                .collect();
            if t.is_empty() {
                return Ok(None);
            }
            t.parse::<f64>()
                .map_err(|_| format!("\"{}\" is not a number", s.trim()))?
        }
    };
    if x.is_finite() {
        Ok(Some(x))
    } else {
        Err(format!("{x} is not a finite number"))
    }
}

fn parse_system(
    ctx: &RowCtx<'_>,
    cols: &Columns,
    list_guess: Option<ListId>,
) -> Result<System, Top500Error> {
    let rank = system_rank(ctx, cols)?;
    let list = system_list(ctx, cols, list_guess)?;
    let (rmax, rpeak) = rmax_rpeak(ctx, cols)?;
    let total_cores = total_cores(ctx, cols)?;
    let name = match ctx.text(cols.name) {
        n if n.is_empty() => ctx.text(cols.computer),
        n => n,
    };
    let accelerator = Some(ctx.text(cols.accelerator))
        .filter(|a| !a.is_empty() && !a.eq_ignore_ascii_case("none"));
    let source = system_source(ctx, cols);
    Ok(System {
        list,
        rank,
        name,
        computer: ctx.text(cols.computer),
        site: ctx.text(cols.site),
        country: ctx.text(cols.country),
        total_cores,
        accelerator_cores: ctx.count(cols.acc_cores)?,
        accelerator,
        nodes: ctx.count(cols.nodes)?,
        rmax: FlopsPerSecond(rmax),
        rpeak: FlopsPerSecond(rpeak),
        hpcg: hpcg(ctx, cols, rpeak)?,
        power: ctx.positive(cols.power)?.map(Watts),
        listed_gflops_per_watt: ctx.positive(cols.efficiency)?,
        source,
    })
}

/// The rank: a whole number ≥ 1 that fits the record's u32.
fn system_rank(ctx: &RowCtx<'_>, cols: &Columns) -> Result<u32, Top500Error> {
    let rank = ctx.required(cols.rank)?;
    if rank < 1.0 || rank.fract() != 0.0 || rank > f64::from(u32::MAX) {
        return Err(ctx.err(
            cols.rank,
            format!("{rank} is not a rank (a whole number ≥ 1)"),
        ));
    }
    Ok(rank as u32)
}

/// The row's List date when the sheet has the column, else the list the file was guessed to be.
fn system_list(
    ctx: &RowCtx<'_>,
    cols: &Columns,
    list_guess: Option<ListId>,
) -> Result<Option<ListId>, Top500Error> {
    let Some(f) = cols.list else {
        return Ok(list_guess);
    };
    let s = ctx.text(Some(f));
    ListId::parse(&s).map(Some).ok_or_else(|| {
        ctx.err(
            f,
            format!("\"{s}\" is not a list date; write it as YYYY-MM, e.g. 2018-11"),
        )
    })
}

/// Rmax and Rpeak in Flop/s, both > 0 and Rmax within Rpeak (HPL cannot beat the peak, so a
/// higher Rmax is a wrong value or unit).
fn rmax_rpeak(ctx: &RowCtx<'_>, cols: &Columns) -> Result<(f64, f64), Top500Error> {
    let flops = |(f, unit): (usize, f64), what: &str| -> Result<f64, Top500Error> {
        let x = ctx.required(f)?;
        if x <= 0.0 {
            return Err(ctx.err(f, format!("{what} must be > 0, got {x}")));
        }
        ctx.finite(f, x, unit)
    };
    let rmax = flops(cols.rmax, "Rmax")?;
    let rpeak = flops(cols.rpeak, "Rpeak")?;
    if rmax > rpeak * (1.0 + 1e-9) {
        return Err(ctx.err(
            cols.rmax.0,
            format!(
                "Rmax ({}) exceeds Rpeak ({}): HPL cannot beat the theoretical peak; check both values and the units in their headers",
                raw(ctx.v.get(ctx.rec, cols.rmax.0)),
                raw(ctx.v.get(ctx.rec, cols.rpeak.0)),
            ),
        ));
    }
    Ok((rmax, rpeak))
}

/// The total core count, at least one: it is the N of every per-core figure.
fn total_cores(ctx: &RowCtx<'_>, cols: &Columns) -> Result<u64, Top500Error> {
    let cores = ctx.required(cols.total_cores)?;
    if cores < 1.0 {
        return Err(ctx.err(
            cols.total_cores,
            format!("{cores} cores: a system needs at least one core (N ≥ 1)"),
        ));
    }
    Ok(cores.round() as u64)
}

/// The row's Source, else where in the file the row is, so that every system can be traced.
fn system_source(ctx: &RowCtx<'_>, cols: &Columns) -> String {
    match ctx.text(cols.source) {
        s if s.is_empty() => {
            let (r, c) = ctx.v.pos(Some(ctx.rec), cols.rank);
            let (row, column) = ctx.v.g.cell_ref(r, c);
            let at = if ctx.v.l.transposed {
                format!("column {column}")
            } else {
                format!("row {row}")
            };
            format!("{}, sheet \"{}\", {at}", ctx.file, ctx.v.g.name)
        }
        s => s,
    }
}

/// HPCG in Flop/s, if listed. Like HPL it cannot beat the theoretical peak (a regression:
/// E_HPCG 200 % was shown).
fn hpcg(
    ctx: &RowCtx<'_>,
    cols: &Columns,
    rpeak: f64,
) -> Result<Option<FlopsPerSecond>, Top500Error> {
    match ctx.positive(cols.hpcg)? {
        Some(h) if h > rpeak * (1.0 + 1e-9) => {
            let f = cols.hpcg.map_or(cols.rmax.0, |c| c.0);
            Err(ctx.err(
                f,
                format!(
                    "HPCG ({}) exceeds Rpeak ({}): no benchmark beats the theoretical peak; check both values and the units in their headers",
                    raw(ctx.v.get(ctx.rec, f)),
                    raw(ctx.v.get(ctx.rec, cols.rpeak.0)),
                ),
            ))
        }
        h => Ok(h.map(FlopsPerSecond)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "Rank,Name,Site,Country,Total Cores,Accelerator/Co-Processor Cores,Rmax [TFlop/s],Rpeak [TFlop/s],HPCG [TFlop/s],Power (kW)\n\
        1,Alpha,Lab,X,\"1,000\",,50,100,1,500\n\
        2,Beta,Lab,Y,10,,5,10,,\n";

    #[test]
    fn top500_rmax_1e308_and_hpcg_above_rpeak_are_errors_not_nan() {
        // Regression: "NaN %", "inf" and E_HPCG 200 % were printed with exit 0.
        let head = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s],HPCG [TFlop/s]\n";
        let huge = format!("{head}1,A,10,1e308,1e308,\n");
        let e = read_list("TOP500_201811.csv", huge.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        let hpcg = format!("{head}1,A,10,5,10,20\n");
        let e = read_list("TOP500_201811.csv", hpcg.as_bytes()).unwrap_err();
        assert!(
            e.to_string().contains("HPCG (20) exceeds Rpeak (10)"),
            "{e}"
        );
    }

    #[test]
    fn top500_ranks_with_a_gap_are_noted_in_a_csv() {
        // Regression: lost rows must not vanish silently.
        let csv = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n\
            1,A,10,5,10\n2,B,10,5,10\n2,C,10,5,10\n4,D,10,5,10\n7,E,10,5,10\n";
        let l = read_list("TOP500_201811.csv", csv.as_bytes()).unwrap();
        assert_eq!(l.systems.len(), 5);
        let notes = l.notes.join("\n");
        assert!(notes.contains("ranks 5–6 are missing"), "{notes}");
        // Ties (1, 2, 2, 4) are not a gap.
        let tied = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n\
            1,A,10,5,10\n2,B,10,5,10\n2,C,10,5,10\n4,D,10,5,10\n";
        let l = read_list("TOP500_201811.csv", tied.as_bytes()).unwrap();
        assert!(
            !l.notes.iter().any(|n| n.contains("missing")),
            "{:?}",
            l.notes
        );
        // Not starting at 1 is a gap too.
        let late = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n3,A,10,5,10\n";
        let l = read_list("TOP500_201811.csv", late.as_bytes()).unwrap();
        assert!(l.notes.iter().any(|n| n.contains("ranks 1–2 are missing")));
    }

    #[test]
    fn csv_with_text_numbers_and_empty_cells() {
        let l = read_list("TOP500_201811.csv", CSV.as_bytes()).unwrap();
        assert_eq!(l.systems.len(), 2);
        let a = &l.systems[0];
        assert_eq!(a.total_cores, 1000);
        assert_eq!(a.rmax.get(), 50e12);
        assert_eq!(a.hpcg.map(|h| h.get()), Some(1e12));
        assert_eq!(a.power.map(|p| p.get()), Some(500e3));
        assert_eq!(a.list.map(|l| l.to_string()).as_deref(), Some("2018-11"));
        assert_eq!(l.systems[1].hpcg, None);
    }

    #[test]
    fn header_without_unit_is_gflops_before_2017_and_rejected_after() {
        let old = "Rank,Name,Total Cores,Rmax,Rpeak\n1,A,10,500,1000\n";
        let l = read_list("TOP500_201306.csv", old.as_bytes()).unwrap();
        assert_eq!(l.systems[0].rmax.get(), 500e9);
        assert!(l.notes.iter().any(|n| n.contains("GFlop/s")));
        let e = read_list("TOP500_201811.csv", old.as_bytes()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("row 1, column D (`Rmax`)"), "{msg}");
        assert!(msg.contains("TFlop/s"), "{msg}");
    }

    #[test]
    fn transposed_csv_reads_like_rows() {
        let t = "Rank,1,2\nName,A,B\nTotal Cores,10,20\nRmax [TFlop/s],1,2\nRpeak [TFlop/s],2,4\n";
        let l = read_list("t.csv", t.as_bytes()).unwrap();
        assert!(l.transposed);
        assert_eq!(l.systems.len(), 2);
        assert_eq!(l.systems[1].name, "B");
        assert_eq!(l.systems[1].total_cores, 20);
    }

    #[test]
    fn bad_cells_name_row_column_and_field() {
        let cases = [
            (
                "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,0,1,2\n",
                "row 2, column C (`Total Cores`)",
                "at least one core",
            ),
            (
                "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,8,3,2\n",
                "row 2, column D (`Rmax [TFlop/s]`)",
                "exceeds Rpeak",
            ),
            (
                "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,8,x1,2\n",
                "row 2, column D",
                "\"x1\" is not a number",
            ),
            (
                "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,8,,2\n",
                "row 2, column D",
                "empty",
            ),
            (
                "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,8,inf,2\n",
                "row 2, column D",
                "finite",
            ),
        ];
        for (csv, at, what) in cases {
            let msg = read_list("bad.csv", csv.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(msg.starts_with("bad.csv: sheet \"csv\""), "{msg}");
            assert!(msg.contains(at), "{msg}");
            assert!(msg.contains(what), "{msg}");
        }
    }

    #[test]
    fn missing_columns_are_named() {
        let msg = read_list(
            "m.csv",
            b"Rank,Name,Total Cores,Rmax [TFlop/s],Cores\n1,A,1,1,1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("no sheet holds a TOP500 list"), "{msg}");
        let msg = read_list(
            "m.csv",
            b"Rank,Name,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,1,1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("missing column `Total Cores`"), "{msg}");
    }

    #[test]
    fn footnote_rows_are_skipped_with_a_note() {
        let t = "Rank,Name,Total Cores,Rmax [TFlop/s],Rpeak [TFlop/s]\n1,A,8,1,2\n,,,,\nSource: top500.org,,,,\n";
        let l = read_list("f.csv", t.as_bytes()).unwrap();
        assert_eq!(l.systems.len(), 1);
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
    }

    #[test]
    fn numbers_as_text() {
        assert_eq!(number(&Value::Text(" 1,234.5 ".into())), Ok(Some(1234.5)));
        assert_eq!(number(&Value::Text("".into())), Ok(None));
        assert!(number(&Value::Text("NaN".into())).is_err());
        assert_eq!(number(&Value::Num(2.0)), Ok(Some(2.0)));
    }
}
