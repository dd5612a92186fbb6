//! `amdahl bench gemm`: square matrix multiply C = A·B at each precision and size, on one thread
//! and on all requested threads, checked against a naive reference before any timing.
//!
//! Work counted: 2·n³ operations (n³ multiplies + n³ adds), the usual GEMM convention (LAPACK
//! Working Note 41; Dongarra et al.), so GFLOP/s compare with BLAS figures.

use crate::energy::{EnergyReading, EnergyStatus};
use crate::error::{BenchError, Result};
use crate::kernels::{matmul, matmul_i8, pack_rows_i8, reference, Exec, Rng, View};
use crate::machine::{available_memory, check_fits, MachineInfo, Threads};
use crate::precision::{Arithmetic, Precision};
use crate::stats::{Rate, Stats};
use crate::Hooks;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.bench.gemm/1";

/// What to measure.
#[derive(Debug, Clone)]
pub struct GemmConfig {
    pub sizes: Vec<usize>,
    pub precisions: Vec<Precision>,
    pub threads: Threads,
    pub warmup: usize,
    pub repeats: usize,
}

impl GemmConfig {
    /// Default sizes: 256…2048 (2048 is where BLAS libraries reach their plateau on CPUs).
    pub fn full(threads: Threads) -> Self {
        Self {
            sizes: vec![256, 512, 1024, 2048],
            precisions: Precision::ALL.to_vec(),
            threads,
            warmup: 1,
            repeats: 5,
        }
    }

    /// CI-sized: small matrices, few repeats.
    pub fn quick(threads: Threads) -> Self {
        Self {
            sizes: vec![64, 128],
            repeats: 3,
            ..Self::full(threads)
        }
    }
}

/// How a precision was computed, recorded once per precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrecisionInfo {
    pub precision: Precision,
    #[serde(flatten)]
    pub arithmetic: Arithmetic,
    /// "FLOP" for floating point, "OP" for int8.
    pub work_unit: String,
}

/// The numerical check of one precision against the naive f64 reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verification {
    pub precision: Precision,
    /// (m, k, n) of the checked product.
    pub shape: (usize, usize, usize),
    /// Largest |C − C_ref| over all elements.
    pub max_abs_error: f64,
    /// Largest ratio error / allowed bound (≤ 1 passes; 0 for exact int8).
    pub max_error_ratio: f64,
    pub passed: bool,
}

/// One timed case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GemmRow {
    pub precision: Precision,
    pub n: usize,
    pub threads: usize,
    /// 2·n³.
    pub work: f64,
    pub seconds: Stats,
    /// Operations per second (FLOP/s, or OP/s for int8): min / median / max.
    pub rate: Rate,
    /// `None`: not measured (no energy probe, or the sensor could not read).
    pub energy: Option<EnergyReading>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GemmReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    pub warmup: usize,
    pub repeats: usize,
    pub precisions: Vec<PrecisionInfo>,
    pub verification: Vec<Verification>,
    pub rows: Vec<GemmRow>,
    /// The energy sensors used, or why energy was not measured.
    pub energy: EnergyStatus,
}

impl GemmReport {
    /// Highest median rate at `precision` over all sizes on the most threads (the attained peak).
    pub fn peak(&self, precision: Precision) -> Option<&GemmRow> {
        let most = self.rows.iter().map(|r| r.threads).max()?;
        self.rows
            .iter()
            .filter(|r| r.precision == precision && r.threads == most)
            .max_by(|a, b| a.rate.median.total_cmp(&b.rate.median))
    }
}

/// Check inputs before anything runs: positive sizes, memory for the largest case.
pub fn validate(cfg: &GemmConfig) -> Result<()> {
    if cfg.sizes.is_empty() || cfg.precisions.is_empty() {
        return Err(BenchError::Invalid(
            "nothing to measure: give at least one size and one precision".into(),
        ));
    }
    let avail = available_memory();
    for &n in &cfg.sizes {
        if n == 0 {
            return Err(BenchError::NotPositive {
                what: "--sizes",
                value: 0,
            });
        }
        for &p in &cfg.precisions {
            let what = format!("{p} GEMM at n = {n}");
            let need = p.gemm_bytes(n).ok_or_else(|| BenchError::TooLarge {
                what: what.clone(),
                detail: "its byte count overflows 64 bits".into(),
            })?;
            check_fits(&what, need, avail)?;
        }
    }
    Ok(())
}

/// Run the GEMM benchmark.
pub fn run(cfg: &GemmConfig, hooks: &mut Hooks<'_>) -> Result<GemmReport> {
    validate(cfg)?;
    let mut thread_counts = vec![1, cfg.threads.used.max(1)];
    thread_counts.dedup();
    let execs = thread_counts
        .iter()
        .map(|&t| Exec::new(t))
        .collect::<Result<Vec<_>>>()?;
    let all = execs
        .last()
        .ok_or_else(|| BenchError::Invalid("no threads".into()))?;

    let total = cfg.precisions.len() * (1 + cfg.sizes.len() * execs.len());
    let mut done = 0;
    let mut verification = Vec::new();
    for &p in &cfg.precisions {
        hooks.step(done, total, format!("checking {p} against the reference"));
        let v = verify(p, (67, 75, 61), all)?;
        verification.push(v);
        done += 1;
    }

    let mut rows = Vec::new();
    for &p in &cfg.precisions {
        for &n in &cfg.sizes {
            let mut ops = Operands::new(p, n, n, n, &mut Rng::new(42));
            for exec in &execs {
                hooks.step(
                    done,
                    total,
                    format!("{p} n={n}, {} thread(s)", exec.threads()),
                );
                let work = 2.0 * (n as f64).powi(3);
                let unit = if p == Precision::Int8 {
                    "J/OP"
                } else {
                    "J/FLOP"
                };
                let mut err = None;
                let (seconds, energy) = hooks.measure(cfg.warmup, cfg.repeats, work, unit, || {
                    if let Err(e) = ops.run(exec, n, n, n) {
                        err = Some(e);
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
                rows.push(GemmRow {
                    precision: p,
                    n,
                    threads: exec.threads(),
                    work,
                    rate: seconds.rates(work),
                    seconds,
                    energy,
                });
                done += 1;
            }
        }
    }
    hooks.step(total, total, "done");
    let measured = (
        rows.iter().filter(|r| r.energy.is_some()).count(),
        rows.len(),
    );
    Ok(GemmReport {
        schema: SCHEMA.into(),
        machine: MachineInfo::detect(cfg.threads),
        debug_build: crate::DEBUG_BUILD,
        warmup: cfg.warmup,
        repeats: cfg.repeats,
        precisions: cfg
            .precisions
            .iter()
            .map(|&p| PrecisionInfo {
                precision: p,
                arithmetic: p.arithmetic(),
                work_unit: if p == Precision::Int8 { "OP" } else { "FLOP" }.into(),
            })
            .collect(),
        verification,
        rows,
        energy: hooks.energy_status(measured.0, measured.1),
    })
}

/// Multiply random inputs of shape (m, k, n) at `p` on `exec` and compare every element with
/// the naive f64 product of the same (already rounded) inputs. The check is exact rather than
/// tuned: the values that round to the stored element ([`Precision::rounding_cell`]) must come
/// within the accumulation bound γ_k·(|A||B|)_ij of the exact product
/// ([`Precision::accumulation_bound`], Higham 2002 §3.1), which a correct kernel provably meets
/// whatever its summation order, while a wrong one misses by orders of magnitude. The ratio
/// reported is that distance over the bound: the accumulation's share of its worst case. A
/// failure is an error: no figures from a wrong kernel.
pub fn verify(p: Precision, (m, k, n): (usize, usize, usize), exec: &Exec) -> Result<Verification> {
    let mut ops = Operands::new(p, m, k, n, &mut Rng::new(7));
    ops.run(exec, m, k, n)?;
    let (a, b) = ops.inputs_f64();
    let (want, abs) = reference(&a, &b, m, k, n);
    let got = ops.output_f64();
    let (mut max_abs, mut max_ratio) = (0.0f64, 0.0f64);
    for (idx, ((g, w), s)) in got.iter().zip(&want).zip(&abs).enumerate() {
        let err = (g - w).abs();
        let tol = p.accumulation_bound(k, *s);
        let miss = p.accumulation_miss(*g, *w);
        max_abs = max_abs.max(err);
        if miss > tol || !g.is_finite() {
            return Err(BenchError::WrongResult {
                kernel: format!("{p} GEMM ({m}×{k} · {k}×{n})"),
                row: idx % m,
                col: idx / m,
                got: *g,
                want: *w,
                tol,
            });
        }
        if tol > 0.0 {
            max_ratio = max_ratio.max(miss / tol);
        }
    }
    Ok(Verification {
        precision: p,
        shape: (m, k, n),
        max_abs_error: max_abs,
        max_error_ratio: max_ratio,
        passed: true,
    })
}

/// Inputs and output of one GEMM at one precision, in that precision's storage types.
enum Operands {
    F64(Vec<f64>, Vec<f64>, Vec<f64>),
    F32(Vec<f32>, Vec<f32>, Vec<f32>),
    F16(Vec<f16>, Vec<f16>, Vec<f16>),
    /// bf16 inputs/output plus the f32 working copies of the emulation.
    Bf16 {
        a: Vec<bf16>,
        b: Vec<bf16>,
        c: Vec<bf16>,
        work: [Vec<f32>; 3],
    },
    /// int8 inputs, their row-packed A, int32 output.
    I8 {
        a: Vec<i8>,
        b: Vec<i8>,
        a_rows: Vec<i8>,
        c: Vec<i32>,
    },
}

impl Operands {
    fn new(p: Precision, m: usize, k: usize, n: usize, rng: &mut Rng) -> Self {
        let mut gen = |len: usize| -> Vec<f64> { (0..len).map(|_| rng.unit()).collect() };
        let (a, b) = (gen(m * k), gen(k * n));
        match p {
            Precision::Fp64 => Operands::F64(a, b, vec![0.0; m * n]),
            Precision::Fp32 => Operands::F32(
                a.iter().map(|&x| x as f32).collect(),
                b.iter().map(|&x| x as f32).collect(),
                vec![0.0; m * n],
            ),
            Precision::Fp16 => Operands::F16(
                a.iter().map(|&x| f16::from_f64(x)).collect(),
                b.iter().map(|&x| f16::from_f64(x)).collect(),
                vec![f16::ZERO; m * n],
            ),
            Precision::Bf16 => Operands::Bf16 {
                a: a.iter().map(|&x| bf16::from_f64(x)).collect(),
                b: b.iter().map(|&x| bf16::from_f64(x)).collect(),
                c: vec![bf16::ZERO; m * n],
                work: [vec![0.0; m * k], vec![0.0; k * n], vec![0.0; m * n]],
            },
            Precision::Int8 => {
                let mut r = Rng::new(rng.uniform().to_bits());
                Operands::I8 {
                    a: (0..m * k).map(|_| r.int8()).collect(),
                    b: (0..k * n).map(|_| r.int8()).collect(),
                    a_rows: vec![0; m * k],
                    c: vec![0; m * n],
                }
            }
        }
    }

    /// C = A·B once.
    fn run(&mut self, exec: &Exec, m: usize, k: usize, n: usize) -> Result<()> {
        match self {
            Operands::F64(a, b, c) => matmul(
                exec,
                c,
                View::col_major(a, m, k),
                View::col_major(b, k, n),
                1.0,
            ),
            Operands::F32(a, b, c) => matmul(
                exec,
                c,
                View::col_major(a, m, k),
                View::col_major(b, k, n),
                1.0,
            ),
            Operands::F16(a, b, c) => matmul(
                exec,
                c,
                View::col_major(a, m, k),
                View::col_major(b, k, n),
                f16::ONE,
            ),
            Operands::Bf16 { a, b, c, work } => {
                let [a32, b32, c32] = work;
                widen(a, a32);
                widen(b, b32);
                matmul(
                    exec,
                    c32,
                    View::col_major(a32, m, k),
                    View::col_major(b32, k, n),
                    1.0,
                )?;
                for (o, &x) in c.iter_mut().zip(c32.iter()) {
                    *o = bf16::from_f32(x);
                }
                Ok(())
            }
            Operands::I8 { a, b, a_rows, c } => {
                pack_rows_i8(a, m, k, a_rows);
                matmul_i8(exec, c, a_rows, b, m, k);
                Ok(())
            }
        }
    }

    fn inputs_f64(&self) -> (Vec<f64>, Vec<f64>) {
        fn f<T: Copy>(v: &[T], g: impl Fn(T) -> f64) -> Vec<f64> {
            v.iter().map(|&x| g(x)).collect()
        }
        match self {
            Operands::F64(a, b, _) => (a.clone(), b.clone()),
            Operands::F32(a, b, _) => (f(a, f64::from), f(b, f64::from)),
            Operands::F16(a, b, _) => (f(a, f16::to_f64), f(b, f16::to_f64)),
            Operands::Bf16 { a, b, .. } => (f(a, bf16::to_f64), f(b, bf16::to_f64)),
            Operands::I8 { a, b, .. } => (f(a, f64::from), f(b, f64::from)),
        }
    }

    fn output_f64(&self) -> Vec<f64> {
        match self {
            Operands::F64(_, _, c) => c.clone(),
            Operands::F32(_, _, c) => c.iter().map(|&x| x as f64).collect(),
            Operands::F16(_, _, c) => c.iter().map(|x| x.to_f64()).collect(),
            Operands::Bf16 { c, .. } => c.iter().map(|x| x.to_f64()).collect(),
            Operands::I8 { c, .. } => c.iter().map(|&x| x as f64).collect(),
        }
    }
}

fn widen(src: &[bf16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every precision equals the naive reference within its Higham bound, on an odd shape (no
    /// dimension a multiple of a SIMD width) and on 2 threads.
    #[test]
    fn every_precision_matches_the_reference() {
        let exec = Exec::new(2).unwrap();
        for p in Precision::ALL {
            for shape in [(67, 75, 61), (33, 128, 17)] {
                let v = verify(p, shape, &exec).unwrap();
                assert!(v.passed && v.max_error_ratio <= 1.0, "{p}: {v:?}");
                if p == Precision::Int8 {
                    assert_eq!(v.max_abs_error, 0.0);
                }
            }
        }
    }

    #[test]
    fn quick_run_reports_every_case() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = GemmConfig::quick(t);
        cfg.sizes = vec![32];
        cfg.repeats = 1;
        let mut steps = Vec::new();
        let r = run(
            &cfg,
            &mut Hooks::default().on_progress(|p| steps.push(p.done)),
        )
        .unwrap();
        assert_eq!(r.schema, SCHEMA);
        assert_eq!(r.rows.len(), 5 * 2);
        assert!(r
            .rows
            .iter()
            .all(|row| row.rate.median > 0.0 && row.energy.is_none()));
        assert_eq!(r.rows[0].work, 2.0 * 32f64.powi(3));
        assert!(!r.energy.is_measured());
        assert_eq!(steps.last(), Some(&(5 + 10)));
    }

    #[test]
    fn refuses_sizes_that_do_not_fit() {
        let t = Threads {
            used: 1,
            capped_from: None,
        };
        let mut cfg = GemmConfig::quick(t);
        cfg.sizes = vec![10_000_000];
        let e = validate(&cfg).unwrap_err().to_string();
        assert!(e.contains("GiB"), "{e}");
    }
}
