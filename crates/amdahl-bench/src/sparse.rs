//! `amdahl bench sparse`: C = A·B with A sparse (CSR, unstructured random zeros) against the
//! dense product of the same shape, over sparsities 0–99 %: where skipping zeros starts to pay.
//!
//! The dense product is the fp32 `gemm` kernel; its time does not depend on the values, so it is
//! measured once. The sparse kernel is a row-parallel CSR × dense product: for each nonzero
//! a_ij, row i of C += a_ij · row j of B (contiguous, vectorised). Both run in fp32 on the same
//! threads.

use crate::energy::{EnergyReading, EnergyStatus};
use crate::error::{BenchError, Result};
use crate::kernels::{matmul, Exec, Rng, View};
use crate::machine::{available_memory, check_fits, MachineInfo, Threads};
use crate::stats::{Rate, Stats};
use crate::Hooks;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.bench.sparse/1";

#[derive(Debug, Clone)]
pub struct SparseConfig {
    /// Order of the square matrices.
    pub n: usize,
    /// Fractions of zeros in A, each in [0, 1).
    pub sparsities: Vec<f64>,
    pub threads: Threads,
    pub warmup: usize,
    pub repeats: usize,
}

impl SparseConfig {
    pub fn full(threads: Threads) -> Self {
        Self {
            n: 1024,
            sparsities: vec![0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99],
            threads,
            warmup: 1,
            repeats: 5,
        }
    }

    pub fn quick(threads: Threads) -> Self {
        Self {
            n: 128,
            sparsities: vec![0.0, 0.5, 0.9, 0.99],
            repeats: 3,
            ..Self::full(threads)
        }
    }
}

/// A compressed-sparse-row matrix (Saad, "Iterative Methods for Sparse Linear Systems", §3.4).
#[derive(Debug, Clone)]
pub struct Csr {
    pub rows: usize,
    pub cols: usize,
    pub row_ptr: Vec<usize>,
    pub col_idx: Vec<u32>,
    pub values: Vec<f32>,
}

impl Csr {
    /// From a dense row-major matrix, keeping the nonzeros.
    pub fn from_dense(dense: &[f32], rows: usize, cols: usize) -> Self {
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let (mut col_idx, mut values) = (Vec::new(), Vec::new());
        row_ptr.push(0);
        for r in dense.chunks_exact(cols.max(1)).take(rows) {
            for (j, &v) in r.iter().enumerate() {
                if v != 0.0 {
                    col_idx.push(j as u32);
                    values.push(v);
                }
            }
            row_ptr.push(values.len());
        }
        Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        }
    }

    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Bytes the CSR arrays occupy: values (4) + column indices (4) per nonzero + row pointers.
    pub fn bytes(&self) -> f64 {
        (8 * self.nnz() + std::mem::size_of::<usize>() * self.row_ptr.len()) as f64
    }
}

/// C (row-major rows×n) = A (CSR) · B (row-major cols×n), rows of C in parallel.
pub fn csr_matmul(exec: &Exec, a: &Csr, b: &[f32], n: usize, c: &mut [f32]) {
    exec.run(|_| {
        c.par_chunks_mut(n.max(1))
            .enumerate()
            .for_each(|(i, crow)| {
                crow.fill(0.0);
                let (lo, hi) = (
                    a.row_ptr.get(i).copied().unwrap_or(0),
                    a.row_ptr.get(i + 1).copied().unwrap_or(0),
                );
                let idx = a.col_idx.get(lo..hi).unwrap_or(&[]);
                let val = a.values.get(lo..hi).unwrap_or(&[]);
                for (&j, &v) in idx.iter().zip(val) {
                    let j = j as usize;
                    if let Some(brow) = b.get(j * n..(j + 1) * n) {
                        for (cv, bv) in crow.iter_mut().zip(brow) {
                            *cv += v * bv;
                        }
                    }
                }
            })
    });
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SparseRow {
    pub sparsity: f64,
    pub nnz: usize,
    pub seconds: Stats,
    /// Useful operations per second: 2·nnz·n / t.
    pub useful_rate: Rate,
    /// Median sparse time / median dense time (< 1: skipping zeros pays).
    pub time_ratio: f64,
    /// Compulsory bytes (CSR arrays + B + C) for the roofline.
    pub bytes: f64,
    pub energy: Option<EnergyReading>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SparseReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    pub n: usize,
    pub dense_seconds: Stats,
    /// 2·n³ / t of the dense product.
    pub dense_rate: Rate,
    pub dense_energy: Option<EnergyReading>,
    pub rows: Vec<SparseRow>,
    /// Sparsity where the sparse product becomes as fast as the dense one (interpolated);
    /// `None` when sparse never won in the measured range.
    pub crossover_time: Option<f64>,
    /// The same in energy per run; `None` when energy was not measured or sparse never won.
    pub crossover_energy: Option<f64>,
    /// Largest |sparse − dense| over all elements and sparsities, and its allowed bound
    /// 2·γ_n·n (both products within γ_n·(|A||B|) of exact, entries in [−1, 1]; Higham eq. 3.13).
    pub max_abs_diff: f64,
    pub diff_bound: f64,
    /// The energy sensors used, or why energy was not measured.
    pub energy: EnergyStatus,
}

pub fn validate(cfg: &SparseConfig) -> Result<()> {
    if cfg.n == 0 {
        return Err(BenchError::NotPositive {
            what: "--sizes",
            value: 0,
        });
    }
    if cfg.sparsities.is_empty() {
        return Err(BenchError::Invalid("give at least one sparsity".into()));
    }
    if let Some(s) = cfg.sparsities.iter().find(|s| !(0.0..1.0).contains(*s)) {
        return Err(BenchError::Invalid(format!(
            "sparsity {s} is outside [0, 1); give fractions of zeros such as 0.9"
        )));
    }
    let nn = (cfg.n as u64)
        .checked_mul(cfg.n as u64)
        .ok_or_else(|| BenchError::TooLarge {
            what: format!("sparse benchmark at n = {}", cfg.n),
            detail: "n² overflows".into(),
        })?;
    // Dense A, B, two C (f32) plus CSR at most 8 B per element + row pointers.
    let need = nn.saturating_mul(4 * 4 + 8);
    check_fits(
        &format!("sparse benchmark at n = {}", cfg.n),
        need,
        available_memory(),
    )
}

/// The operands every case shares: B, the values A takes where it keeps an entry, and the
/// uniform draw that decides whether it does (an entry is zero at sparsity s when its draw < s,
/// so every sparsity's zeros include the previous one's).
struct Operands {
    n: usize,
    b: Vec<f32>,
    values: Vec<f32>,
    keep: Vec<f64>,
}

impl Operands {
    fn new(n: usize) -> Self {
        let mut rng = Rng::new(11);
        let b: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
        let values: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
        let keep: Vec<f64> = (0..n * n).map(|_| rng.uniform()).collect();
        Self { n, b, values, keep }
    }
}

pub fn run(cfg: &SparseConfig, hooks: &mut Hooks<'_>) -> Result<SparseReport> {
    validate(cfg)?;
    let n = cfg.n;
    let exec = Exec::new(cfg.threads.used)?;
    let ops = Operands::new(n);
    let total = 1 + cfg.sparsities.len();
    let work = 2.0 * (n as f64).powi(3);

    hooks.step(0, total, format!("dense fp32 n={n}"));
    let (dense_seconds, dense_energy) = time_dense(cfg, hooks, &exec, &ops, work)?;

    let gamma = {
        let ku = n as f64 * f32::EPSILON as f64 / 2.0;
        ku / (1.0 - ku)
    };
    let diff_bound = 2.0 * gamma * n as f64;
    let mut max_abs_diff = 0.0f64;
    let mut rows = Vec::new();
    let mut scratch = Scratch::new(n);
    for (i, &s) in cfg.sparsities.iter().enumerate() {
        hooks.step(1 + i, total, format!("sparsity {:.0} %", s * 100.0));
        let (row, diff) = sparse_row(cfg, hooks, &exec, &ops, &mut scratch, s, diff_bound)?;
        max_abs_diff = max_abs_diff.max(diff);
        rows.push(SparseRow {
            time_ratio: row.seconds.median.0 / dense_seconds.median.0,
            ..row
        });
    }
    hooks.step(total, total, "done");

    let time_pts: Vec<(f64, f64)> = rows.iter().map(|r| (r.sparsity, r.time_ratio)).collect();
    let energy_pts = energy_ratios(&rows, dense_energy.as_ref());
    let measured = (
        rows.iter().filter(|r| r.energy.is_some()).count() + usize::from(dense_energy.is_some()),
        rows.len() + 1,
    );
    Ok(SparseReport {
        schema: SCHEMA.into(),
        machine: MachineInfo::detect(cfg.threads),
        debug_build: crate::DEBUG_BUILD,
        n,
        dense_rate: dense_seconds.rates(work),
        dense_seconds,
        dense_energy,
        crossover_time: crossover(&time_pts),
        crossover_energy: energy_pts.as_deref().and_then(crossover),
        rows,
        max_abs_diff,
        diff_bound,
        energy: hooks.energy_status(measured.0, measured.1),
    })
}

/// Time the dense fp32 product of the fully dense A (`values`) and B, `work` FLOP a run.
fn time_dense(
    cfg: &SparseConfig,
    hooks: &mut Hooks<'_>,
    exec: &Exec,
    ops: &Operands,
    work: f64,
) -> Result<(Stats, Option<EnergyReading>)> {
    let n = ops.n;
    let mut c_dense = vec![0.0f32; n * n];
    let mut err = None;
    // Row-major m×k is column-major k×m: C (row-major) = Cᵀ (column-major) = Bᵀ·Aᵀ.
    let measured = hooks.measure(cfg.warmup, cfg.repeats, work, "J/FLOP", || {
        if let Err(e) = matmul(
            exec,
            &mut c_dense,
            View::col_major(&ops.b, n, n),
            View::col_major(&ops.values, n, n),
            1.0,
        ) {
            err = Some(e);
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(measured),
    }
}

/// The n×n buffers the sparsities reuse: A with its zeros, the dense and the sparse product.
struct Scratch {
    a_dense: Vec<f32>,
    c_dense: Vec<f32>,
    c_sparse: Vec<f32>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Self {
            a_dense: vec![0.0f32; n * n],
            c_dense: vec![0.0f32; n * n],
            c_sparse: vec![0.0f32; n * n],
        }
    }
}

/// One sparsity: A with the fraction `s` of zeros, its CSR product checked against the dense
/// product of the same matrix (within `diff_bound`), then timed. The row's `time_ratio` is left
/// for the caller, which has the dense time; also returns the largest difference seen.
fn sparse_row(
    cfg: &SparseConfig,
    hooks: &mut Hooks<'_>,
    exec: &Exec,
    ops: &Operands,
    scratch: &mut Scratch,
    s: f64,
    diff_bound: f64,
) -> Result<(SparseRow, f64)> {
    let n = ops.n;
    let Scratch {
        a_dense,
        c_dense,
        c_sparse,
    } = scratch;
    for ((d, &v), &u) in a_dense.iter_mut().zip(&ops.values).zip(&ops.keep) {
        *d = if u < s { 0.0 } else { v };
    }
    let a = Csr::from_dense(a_dense, n, n);
    // Check against the dense product of the same matrix before timing.
    matmul(
        exec,
        c_dense,
        View::col_major(&ops.b, n, n),
        View::col_major(a_dense, n, n),
        1.0,
    )?;
    csr_matmul(exec, &a, &ops.b, n, c_sparse);
    let diff = c_sparse
        .iter()
        .zip(c_dense.iter())
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(0.0, f64::max);
    if diff > diff_bound || !diff.is_finite() {
        return Err(BenchError::WrongResult {
            kernel: format!("CSR × dense at sparsity {s}"),
            row: 0,
            col: 0,
            got: diff,
            want: 0.0,
            tol: diff_bound,
        });
    }
    let useful = 2.0 * a.nnz() as f64 * n as f64;
    let (seconds, energy) =
        hooks.measure(cfg.warmup, cfg.repeats, useful.max(1.0), "J/FLOP", || {
            csr_matmul(exec, &a, &ops.b, n, c_sparse)
        });
    let row = SparseRow {
        sparsity: s,
        nnz: a.nnz(),
        useful_rate: seconds.rates(useful),
        time_ratio: f64::NAN,
        bytes: a.bytes() + 2.0 * 4.0 * (n * n) as f64,
        seconds,
        energy,
    };
    Ok((row, diff))
}

/// (sparsity, sparse/dense energy per run) for every row; `None` unless every case, the dense
/// one included, was metered.
fn energy_ratios(rows: &[SparseRow], dense: Option<&EnergyReading>) -> Option<Vec<(f64, f64)>> {
    let d = dense?;
    rows.iter()
        .map(|r| {
            r.energy
                .as_ref()
                .map(|e| (r.sparsity, e.joules_per_run.0 / d.joules_per_run.0))
        })
        .collect()
}

/// The sparsity where the sparse/dense ratio first reaches 1, from (sparsity, ratio) points in
/// increasing sparsity: linear interpolation of ln(ratio) between the last point above 1 and the
/// first at or below it. The first point itself when it is already ≤ 1; `None` when no point is.
pub fn crossover(points: &[(f64, f64)]) -> Option<f64> {
    let first = points.iter().position(|&(_, r)| r <= 1.0 && r > 0.0)?;
    if first == 0 {
        return points.first().map(|p| p.0);
    }
    let (s0, r0) = *points.get(first - 1)?;
    let (s1, r1) = *points.get(first)?;
    let (l0, l1) = (r0.ln(), r1.ln());
    if !(l0.is_finite() && l1.is_finite()) || l0 == l1 {
        return Some(s1);
    }
    Some(s0 + (s1 - s0) * l0 / (l0 - l1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossover_interpolates_in_log_ratio() {
        // ratio 4 at 0.8, 0.25 at 0.9: ln-midpoint is 0.85.
        let c = crossover(&[(0.5, 8.0), (0.8, 4.0), (0.9, 0.25)]).unwrap();
        assert!((c - 0.85).abs() < 1e-12, "{c}");
        assert_eq!(crossover(&[(0.0, 0.9), (0.5, 0.4)]), Some(0.0));
        assert_eq!(crossover(&[(0.0, 3.0), (0.99, 1.2)]), None);
    }

    #[test]
    fn csr_product_equals_dense_product() {
        let (n, exec) = (37, Exec::new(2).unwrap());
        let mut rng = Rng::new(5);
        let a: Vec<f32> = (0..n * n)
            .map(|_| {
                if rng.uniform() < 0.7 {
                    0.0
                } else {
                    rng.unit() as f32
                }
            })
            .collect();
        let b: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
        let csr = Csr::from_dense(&a, n, n);
        assert_eq!(csr.nnz(), a.iter().filter(|x| **x != 0.0).count());
        let mut c = vec![0.0; n * n];
        csr_matmul(&exec, &csr, &b, n, &mut c);
        for i in 0..n {
            for j in 0..n {
                let want: f64 = (0..n)
                    .map(|p| a[i * n + p] as f64 * b[p * n + j] as f64)
                    .sum();
                assert!((c[i * n + j] as f64 - want).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn quick_run_finds_ratios_and_rejects_bad_sparsity() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = SparseConfig::quick(t);
        cfg.n = 48;
        cfg.repeats = 1;
        let r = run(&cfg, &mut Hooks::default()).unwrap();
        assert_eq!(r.rows.len(), 4);
        assert!(r.rows.iter().all(|x| x.time_ratio > 0.0));
        assert!(r.max_abs_diff <= r.diff_bound);
        assert!(r.crossover_energy.is_none());
        cfg.sparsities = vec![1.0];
        assert!(validate(&cfg).is_err());
    }
}
