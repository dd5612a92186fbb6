//! Errors of the TOP500 reader: each names the file, and where it applies the sheet, the
//! spreadsheet cell (A1 notation, as a spreadsheet program shows it) and the field.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum Top500Error {
    #[error("{file}: not a spreadsheet amdahl can read ({reason}); give an .xls or .xlsx file as published by top500.org, or a CSV with the same column headers")]
    Unrecognised { file: String, reason: String },

    #[error("{file}: the workbook could not be read: {message}; re-download it from top500.org or save it again as .xlsx")]
    Workbook { file: String, message: String },

    #[error("{file}: no sheet holds a TOP500 list (a header with `Rank`, `Rmax` and `Rpeak`): {details}")]
    NoList { file: String, details: String },

    #[error("{file}: sheet \"{sheet}\": missing column `{column}` (headers found: {found}); TOP500 lists name it e.g. \"{example}\"")]
    MissingColumn {
        file: String,
        sheet: String,
        column: &'static str,
        example: &'static str,
        found: String,
    },

    /// A bad cell (boxed: the location is five strings, and errors travel by value).
    #[error("{0}")]
    Cell(Box<CellProblem>),

    /// Ranks with a gap: rows of the list were lost (a damaged record length drops them silently).
    #[error("{file}: sheet \"{sheet}\": ranks {from}–{to} are missing ({systems} systems read); the file is probably damaged: re-download it from top500.org")]
    RanksMissing {
        file: String,
        sheet: String,
        from: u32,
        to: u32,
        systems: usize,
    },
}

/// Where a bad value sits and what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellProblem {
    pub file: String,
    pub sheet: String,
    /// 1-based row as a spreadsheet program numbers it.
    pub row: u64,
    /// Column letters as a spreadsheet program names them (A, B, …, AA).
    pub column: String,
    pub field: String,
    pub problem: String,
}

impl std::fmt::Display for CellProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: sheet \"{}\", row {}, column {} (`{}`): {}",
            self.file, self.sheet, self.row, self.column, self.field, self.problem
        )
    }
}
