//! Errors of the scaling module: every variant says where (row, column) and how to fix it.
//! Rows are 1-based line numbers of the CSV file, or 1-based element indices of a JSON array.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ScalingError {
    #[error("malformed CSV at line {line}: {message}")]
    Csv { line: u64, message: String },
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{what}: expected {expected}")]
    Shape { what: String, expected: String },
    #[error("no data rows: give a header line and at least one row (columns `n` and one of time, throughput, speedup, efficiency, or rmax+rpeak)")]
    Empty,
    #[error("missing column `{column}`: {hint}")]
    MissingColumn { column: String, hint: String },
    #[error("unknown column `{column}` (column {index}): known columns are n, time, throughput, speedup, efficiency, rmax, rpeak, label, compute, communication, sync, copy, serial")]
    UnknownColumn { column: String, index: usize },
    #[error("columns `{first}` and `{second}` both given: keep only one measure per file")]
    AmbiguousMeasure { first: String, second: String },
    #[error("row {row}, column `{column}`: {message}")]
    Value {
        row: usize,
        column: String,
        message: String,
    },
    #[error("series `{label}`: N = {n} appears twice (rows {first_row} and {row}); average the repeats or give them different labels")]
    DuplicateN {
        label: String,
        n: f64,
        first_row: usize,
        row: usize,
    },
    #[error("series `{label}`: baseline N = {n} is not among the measured N; pass a measured N to --baseline-n")]
    BaselineMissing { label: String, n: f64 },
    #[error("series `{label}`: no model could be fitted ({reasons}); measure at more distinct N")]
    NoModelFits { label: String, reasons: String },
    #[error(
        "series `{label}`: the chosen {model} fit predicts a speed-up of {speedup:.3} at N = {n} \
         (more processors slower than the baseline), so there is no serial fraction in [0, 1) for \
         --accelerate to start from; --predict an N where the fit still speeds up, or leave \
         --predict out"
    )]
    WhatIfBeyondFit {
        label: String,
        model: String,
        n: f64,
        speedup: f64,
    },
    #[error("invalid argument `{name}` = {value}: {message}")]
    Argument {
        name: String,
        value: f64,
        message: String,
    },
}
