//! Errors of the benchmark library. Each message says what was wrong and how to fix it.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error("{what} must be a positive integer, got {value}; pass a value of 1 or more")]
    NotPositive { what: &'static str, value: i64 },

    #[error(
        "{what} needs {needed_gib:.2} GiB of memory but only {available_gib:.2} GiB is available; \
         pass a smaller size"
    )]
    OutOfMemory {
        what: String,
        needed_gib: f64,
        available_gib: f64,
    },

    #[error("{what} is too large to address on this machine ({detail}); pass a smaller size")]
    TooLarge { what: String, detail: String },

    #[error("unknown precision `{0}`; use one of fp64, fp32, fp16, bf16, int8")]
    UnknownPrecision(String),

    #[error("could not start a pool of {threads} worker threads: {source}")]
    ThreadPool {
        threads: usize,
        #[source]
        source: rayon::ThreadPoolBuildError,
    },

    #[error(
        "{kernel} gave a wrong result at element ({row}, {col}): got {got}, reference {want}, \
         allowed accumulation error {tol:e} beyond the rounding of the stored result; the kernel is broken on this machine, please report it"
    )]
    WrongResult {
        kernel: String,
        row: usize,
        col: usize,
        got: f64,
        want: f64,
        tol: f64,
    },

    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, BenchError>;
