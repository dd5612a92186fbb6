//! `amdahl bench roofline`: this machine's roofline from measured figures — the attained GEMM
//! peak (fp64 and fp32, all threads) and the STREAM triad bandwidth — its ridge point, and the
//! benchmark kernels placed on it.
//!
//! Roofline model: S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual
//! performance model for multicore architectures", CACM 52(4), 2009: attainable
//! P(I) = min(π, β·I) for operational intensity I (FLOP/byte), peak π and bandwidth β; the ridge
//! point is I* = π/β. Intensities here use compulsory DRAM traffic (each operand moved once).

use crate::error::{BenchError, Result};
use crate::gemm::{self, GemmConfig, GemmReport};
use crate::machine::{MachineInfo, Threads};
use crate::memory::{self, MemoryConfig, MemoryReport, StreamKernel};
use crate::precision::Precision;
use crate::sparse::{self, SparseConfig, SparseReport};
use crate::Hooks;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.bench.roofline/1";

/// One roof: a peak for one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Roof {
    pub precision: Precision,
    /// Attained peak, FLOP/s (median of the best GEMM size).
    pub peak: f64,
    /// GEMM order that reached it.
    pub at_n: usize,
    /// Ridge point π/β, FLOP per byte.
    pub ridge: f64,
}

/// A measured kernel on the roofline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelPoint {
    pub name: String,
    pub precision: Precision,
    /// Operational intensity, FLOP per byte of compulsory traffic.
    pub intensity: f64,
    /// Measured median rate, FLOP/s.
    pub rate: f64,
    /// min(π, β·I) under the roof of its precision.
    pub attainable: f64,
    /// "memory" left of the ridge, "compute" right of it.
    pub bound: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RooflineReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    /// STREAM triad best rate, bytes per second.
    pub bandwidth: f64,
    pub roofs: Vec<Roof>,
    pub kernels: Vec<KernelPoint>,
}

#[derive(Debug, Clone)]
pub struct RooflineConfig {
    pub gemm: GemmConfig,
    pub memory: MemoryConfig,
    pub sparse: SparseConfig,
}

impl RooflineConfig {
    pub fn full(threads: Threads) -> Self {
        let mut gemm = GemmConfig::full(threads);
        gemm.precisions = vec![Precision::Fp64, Precision::Fp32];
        gemm.sizes = vec![256, 1024, 2048];
        let mut memory = MemoryConfig::full(threads);
        memory.sweep = false;
        let mut sparse = SparseConfig::full(threads);
        sparse.sparsities = vec![0.9, 0.99];
        Self {
            gemm,
            memory,
            sparse,
        }
    }

    pub fn quick(threads: Threads) -> Self {
        let mut c = Self::full(threads);
        c.gemm.sizes = vec![64, 128];
        c.gemm.repeats = 3;
        c.memory = MemoryConfig::quick(threads);
        c.memory.sweep = false;
        c.sparse = SparseConfig::quick(threads);
        c.sparse.sparsities = vec![0.9, 0.99];
        c
    }
}

/// Measure GEMM, STREAM and sparse, then build the roofline.
pub fn run(cfg: &RooflineConfig, hooks: &mut Hooks<'_>) -> Result<RooflineReport> {
    let mut parts = || -> Result<RooflineReport> {
        hooks.set_phase(Some((0, 3)));
        let g = gemm::run(&cfg.gemm, hooks)?;
        hooks.set_phase(Some((1, 3)));
        let m = memory::run(&cfg.memory, hooks)?;
        hooks.set_phase(Some((2, 3)));
        let s = sparse::run(&cfg.sparse, hooks)?;
        build(&g, &m, Some(&s))
    };
    let out = parts();
    hooks.set_phase(None);
    out
}

/// The roofline from reports measured separately (pure): the bandwidth roof, a compute roof per
/// precision, then every kernel placed under them.
pub fn build(g: &GemmReport, m: &MemoryReport, s: Option<&SparseReport>) -> Result<RooflineReport> {
    let beta = bandwidth_roof(m)?;
    let roofs = compute_roofs(g, beta)?;
    let mut kernels = gemm_points(g, &roofs, beta);
    kernels.extend(stream_points(m, &roofs, beta));
    if let Some(s) = s {
        kernels.extend(sparse_points(s, &roofs, beta));
    }
    Ok(RooflineReport {
        schema: SCHEMA.into(),
        machine: g.machine.clone(),
        debug_build: g.debug_build,
        bandwidth: beta,
        roofs,
        kernels,
    })
}

/// β, the best bandwidth any STREAM kernel sustained, not the triad's alone: a roof below a
/// measured kernel is no roof (`stream add` once sat at 105 % of a triad-based roof).
fn bandwidth_roof(m: &MemoryReport) -> Result<f64> {
    m.stream
        .iter()
        .map(|r| r.rate.max)
        .filter(|b| *b > 0.0 && b.is_finite())
        .max_by(f64::total_cmp)
        .ok_or_else(|| BenchError::Invalid("no STREAM triad bandwidth to build a roofline".into()))
}

/// One compute roof per precision measured (fp64, fp32): the GEMM peak and its ridge point.
fn compute_roofs(g: &GemmReport, beta: f64) -> Result<Vec<Roof>> {
    let roofs: Vec<Roof> = [Precision::Fp64, Precision::Fp32]
        .iter()
        .filter_map(|&p| {
            let r = g.peak(p)?;
            Some(Roof {
                precision: p,
                peak: r.rate.median,
                at_n: r.n,
                ridge: r.rate.median / beta,
            })
        })
        .collect();
    if roofs.is_empty() {
        return Err(BenchError::Invalid(
            "no fp64 or fp32 GEMM result to build a roofline".into(),
        ));
    }
    Ok(roofs)
}

/// A kernel under its precision's roof (the last roof when its precision has none).
fn place(
    roofs: &[Roof],
    beta: f64,
    name: String,
    p: Precision,
    intensity: f64,
    rate: f64,
) -> Option<KernelPoint> {
    let roof = roofs.iter().find(|r| r.precision == p).or(roofs.last())?;
    let attainable = roof.peak.min(beta * intensity);
    Some(KernelPoint {
        name,
        precision: p,
        intensity,
        rate,
        attainable,
        // Above the memory roof a kernel did not stream all its compulsory bytes from
        // memory: its data stayed in cache (small sparse operands do). Said, not hidden as
        // "105 %". Above the compute roof only, the measured GEMM peak was low (a small or
        // disturbed GEMM), which is not a cache effect: the point keeps its roof's name.
        bound: if rate > beta * intensity {
            "cache"
        } else if intensity < roof.ridge {
            "memory"
        } else {
            "compute"
        }
        .into(),
    })
}

/// The fp64 and fp32 GEMMs at the most threads measured, 3·n² operands each.
fn gemm_points(g: &GemmReport, roofs: &[Roof], beta: f64) -> Vec<KernelPoint> {
    let most = g.rows.iter().map(|r| r.threads).max().unwrap_or(1);
    g.rows
        .iter()
        .filter(|r| r.threads == most && matches!(r.precision, Precision::Fp64 | Precision::Fp32))
        .filter_map(|r| {
            let bytes = 3.0 * (r.n * r.n * r.precision.input_bytes()) as f64;
            place(
                roofs,
                beta,
                format!("gemm {} n={}", r.precision, r.n),
                r.precision,
                r.work / bytes,
                r.rate.median,
            )
        })
        .collect()
}

/// The STREAM kernels that do arithmetic (all but copy), in fp64.
fn stream_points(m: &MemoryReport, roofs: &[Roof], beta: f64) -> Vec<KernelPoint> {
    let mut out = Vec::new();
    for row in &m.stream {
        let k = row.kernel;
        if k == StreamKernel::Copy {
            continue; // no arithmetic: intensity 0 has no place on a log axis
        }
        let flops = k.flops_per_element() * m.stream_len as f64;
        let t = row.seconds.median.0;
        out.extend(place(
            roofs,
            beta,
            format!("stream {}", k.name()),
            Precision::Fp64,
            flops / row.bytes,
            flops / t,
        ));
    }
    out
}

/// The sparse products at their useful (nonzero) FLOP, in fp32.
fn sparse_points(s: &SparseReport, roofs: &[Roof], beta: f64) -> Vec<KernelPoint> {
    s.rows
        .iter()
        .filter_map(|r| {
            let useful = 2.0 * r.nnz as f64 * s.n as f64;
            place(
                roofs,
                beta,
                format!("sparse {:.0} %", r.sparsity * 100.0),
                Precision::Fp32,
                useful / r.bytes,
                r.useful_rate.median,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_roofline_has_ridge_and_points() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = RooflineConfig::quick(t);
        cfg.gemm.sizes = vec![48];
        cfg.gemm.repeats = 1;
        cfg.memory.stream_len = Some(20_000);
        cfg.memory.repeats = 1;
        cfg.sparse.n = 40;
        cfg.sparse.repeats = 1;
        let mut seen = Vec::new();
        let r = run(
            &cfg,
            &mut Hooks::default().on_progress(|p| seen.push((p.done, p.total))),
        )
        .unwrap();
        // One progress run over the three parts, never going backwards.
        assert!(seen.windows(2).all(|w| w[1].0 >= w[0].0), "{seen:?}");
        assert_eq!(seen.last(), Some(&(3000, 3000)));
        assert_eq!(r.roofs.len(), 2);
        for roof in &r.roofs {
            assert!((roof.ridge - roof.peak / r.bandwidth).abs() <= 1e-9 * roof.ridge);
        }
        // Triad: 2 FLOP per 24 bytes (McCalpin's count).
        let triad = r.kernels.iter().find(|k| k.name == "stream triad").unwrap();
        assert!((triad.intensity - 2.0 / 24.0).abs() < 1e-15);
        // GEMM fp64 n=48: 2·48³ / (3·48²·8) = 48/12 = 4 FLOP/B.
        let g = r
            .kernels
            .iter()
            .find(|k| k.name == "gemm fp64 n=48")
            .unwrap();
        assert!((g.intensity - 4.0).abs() < 1e-12);
        assert!(r.kernels.iter().all(|k| k.attainable > 0.0));
        // A kernel once sat at 105 % of its roof (β was the triad's alone). STREAM kernels never
        // exceed the memory roof (β is the best of them); any kernel that does is labelled as
        // served from cache.
        // (The compute roof of this tiny n = 48 GEMM can sit below a STREAM kernel on a loaded
        // machine: that regression made this test flaky, so only the memory roof is asserted.)
        for k in &r.kernels {
            let memory_roof = r.bandwidth * k.intensity;
            if k.name.starts_with("stream") {
                assert!(k.rate <= memory_roof * (1.0 + 1e-12), "{k:?}");
            }
            if k.name.starts_with("gemm") {
                assert!(k.rate <= k.attainable * (1.0 + 1e-12), "{k:?}");
            }
            assert_eq!(k.bound == "cache", k.rate > memory_roof, "{k:?}");
        }
    }
}
