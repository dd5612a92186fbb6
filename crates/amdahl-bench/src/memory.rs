//! `amdahl bench memory`: STREAM copy / scale / add / triad, and a working-set sweep that shows
//! the cache levels.
//!
//! STREAM follows J. D. McCalpin, "Memory Bandwidth and Machine Balance in Current High
//! Performance Computers", IEEE TCCA Newsletter, Dec 1995, and the reference `stream.c` (v5.10):
//! the four kernels in the same order on arrays a, b, c of f64, each array at least 4× the
//! last-level cache, bytes counted as STREAM counts them — 2 arrays × 8 B × n for copy and scale,
//! 3 arrays × 8 B × n for add and triad (write-allocate traffic is not counted) — the first
//! iteration discarded, the best time reported, and the results validated against the same
//! recurrence on scalars.

use crate::energy::{EnergyReading, EnergyStatus};
use crate::error::{BenchError, Result};
use crate::kernels::Exec;
use crate::machine::{available_memory, bytes_for, check_fits, Cache, MachineInfo, Threads};
use crate::stats::{Rate, Stats};
use crate::Hooks;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::hint::black_box;

pub const SCHEMA: &str = "amdahl.bench.memory/1";

/// STREAM's scalar (`stream.c`: `scalar = 3.0`).
const SCALAR: f64 = 3.0;
/// STREAM's default array length (`STREAM_ARRAY_SIZE` in stream.c v5.10).
const STREAM_DEFAULT_N: usize = 10_000_000;
/// Last-level cache assumed when sysfs does not say (a common server L3 slice).
const FALLBACK_LLC: u64 = 32 << 20;

/// The four STREAM kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamKernel {
    Copy,
    Scale,
    Add,
    Triad,
}

impl StreamKernel {
    pub const ALL: [StreamKernel; 4] = [Self::Copy, Self::Scale, Self::Add, Self::Triad];

    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Scale => "scale",
            Self::Add => "add",
            Self::Triad => "triad",
        }
    }

    /// Arrays touched per element: copy c=a and scale b=q·c touch 2, add c=a+b and triad
    /// a=b+q·c touch 3 (McCalpin's counting).
    pub fn arrays(self) -> usize {
        match self {
            Self::Copy | Self::Scale => 2,
            Self::Add | Self::Triad => 3,
        }
    }

    /// Bytes STREAM counts for one pass over n f64 elements.
    pub fn bytes(self, n: usize) -> f64 {
        (self.arrays() * std::mem::size_of::<f64>()) as f64 * n as f64
    }

    /// Floating-point operations per element: scale and add 1, triad 2 (an FMA), copy 0.
    pub fn flops_per_element(self) -> f64 {
        match self {
            Self::Copy => 0.0,
            Self::Scale | Self::Add => 1.0,
            Self::Triad => 2.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// Elements per STREAM array; `None` picks max(10 M, 4 × last-level cache / 8 B).
    pub stream_len: Option<usize>,
    pub threads: Threads,
    pub repeats: usize,
    /// Largest working set of the sweep, bytes; `None` picks 4 × last-level cache.
    pub sweep_max: Option<u64>,
    /// Bytes each sweep point reads per timed repeat (more = steadier, slower).
    pub sweep_bytes: u64,
    /// Run the working-set sweep (the roofline needs only STREAM).
    pub sweep: bool,
}

impl MemoryConfig {
    pub fn full(threads: Threads) -> Self {
        Self {
            stream_len: None,
            threads,
            repeats: 10,
            sweep_max: None,
            sweep_bytes: 256 << 20,
            sweep: true,
        }
    }

    /// CI-sized: 1 M elements per array (fits in many L3 caches, so not a DRAM figure).
    pub fn quick(threads: Threads) -> Self {
        Self {
            stream_len: Some(1 << 20),
            threads,
            repeats: 3,
            sweep_max: Some(1 << 20),
            sweep_bytes: 4 << 20,
            sweep: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamRow {
    pub kernel: StreamKernel,
    /// Bytes counted per pass (arrays × 8 × n).
    pub bytes: f64,
    pub seconds: Stats,
    /// Bytes per second: min / median / max; STREAM's "best rate" is `rate.max`.
    pub rate: Rate,
    pub energy: Option<EnergyReading>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepPoint {
    pub working_set_bytes: u64,
    /// Best read bandwidth, bytes per second, one thread.
    pub bandwidth: f64,
}

/// Median sweep bandwidth of the points that sit inside one cache level (or beyond the last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelBandwidth {
    /// "L1", "L2", "L3", "DRAM".
    pub level: String,
    /// Capacity from sysfs, `None` for DRAM.
    pub size_bytes: Option<u64>,
    pub bandwidth: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    /// Elements per array.
    pub stream_len: usize,
    /// True when the three arrays together fit in the last-level cache: then STREAM measures
    /// the cache, not memory (only sensible for `--quick`).
    pub fits_in_cache: bool,
    pub stream: Vec<StreamRow>,
    /// STREAM validation passed (arrays equal the scalar recurrence within 1e-13, as stream.c).
    pub validated: bool,
    pub sweep: Vec<SweepPoint>,
    pub levels: Vec<LevelBandwidth>,
    /// The energy sensors used, or why energy was not measured.
    pub energy: EnergyStatus,
}

impl MemoryReport {
    pub fn triad(&self) -> Option<&StreamRow> {
        self.stream.iter().find(|r| r.kernel == StreamKernel::Triad)
    }
}

fn llc(caches: &[Cache]) -> u64 {
    caches
        .iter()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(FALLBACK_LLC)
}

/// STREAM array length: the given one, or max(10 M, 4 × LLC / 8 B) (stream.c's sizing rule).
pub fn stream_len(cfg: &MemoryConfig, caches: &[Cache]) -> usize {
    cfg.stream_len
        .unwrap_or_else(|| STREAM_DEFAULT_N.max((4 * llc(caches) / 8) as usize))
}

pub fn run(cfg: &MemoryConfig, hooks: &mut Hooks<'_>) -> Result<MemoryReport> {
    let machine = MachineInfo::detect(cfg.threads);
    let n = stream_len(cfg, &machine.caches);
    if n == 0 {
        return Err(BenchError::NotPositive {
            what: "STREAM array length",
            value: 0,
        });
    }
    let need = bytes_for("STREAM arrays", &[3, n], 8)?;
    check_fits(
        &format!("STREAM with {n} elements per array"),
        need,
        available_memory(),
    )?;
    let sweep_max = cfg.sweep_max.unwrap_or(4 * llc(&machine.caches));
    let sizes = if cfg.sweep {
        sweep_sizes(sweep_max)
    } else {
        Vec::new()
    };
    let total = 4 + sizes.len();
    let exec = Exec::new(cfg.threads.used)?;

    let (stream, validated) = stream(&exec, n, cfg.repeats, hooks, total)?;
    let mut sweep = Vec::new();
    for (i, &ws) in sizes.iter().enumerate() {
        hooks.step(4 + i, total, format!("working set {} KiB", ws >> 10));
        sweep.push(sweep_point(ws, cfg.sweep_bytes));
    }
    hooks.step(total, total, "done");
    let levels = level_bandwidths(&machine.caches, &sweep);
    let measured = (
        stream.iter().filter(|r| r.energy.is_some()).count(),
        stream.len(),
    );
    Ok(MemoryReport {
        schema: SCHEMA.into(),
        fits_in_cache: need <= llc(&machine.caches),
        machine,
        debug_build: crate::DEBUG_BUILD,
        stream_len: n,
        stream,
        validated,
        sweep,
        levels,
        energy: hooks.energy_status(measured.0, measured.1),
    })
}

/// Run the four kernels `repeats + 1` times (the first discarded, as stream.c) and validate.
fn stream(
    exec: &Exec,
    n: usize,
    repeats: usize,
    hooks: &mut Hooks<'_>,
    total: usize,
) -> Result<(Vec<StreamRow>, bool)> {
    let mut a = vec![0.0f64; n];
    let mut b = vec![0.0f64; n];
    let mut c = vec![0.0f64; n];
    let chunk = n.div_ceil(exec.threads()).max(1);
    // First touch in parallel, in the same chunks the kernels use (NUMA placement).
    exec.run(|_| {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks_mut(chunk))
            .zip(c.par_chunks_mut(chunk))
            .for_each(|((a, b), c)| {
                a.fill(1.0);
                b.fill(2.0);
                c.fill(0.0);
            })
    });
    let mut rows = Vec::new();
    let runs = repeats.max(1);
    // Each kernel runs 1 discarded + `runs` timed passes; `validate` replays the same order.
    for (i, k) in StreamKernel::ALL.iter().enumerate() {
        hooks.step(i, total, format!("STREAM {}", k.name()));
        let bytes = k.bytes(n);
        let (seconds, energy) = hooks.measure(1, runs, bytes, "J/B", || {
            exec.run(|_| stream_pass(*k, &mut a, &mut b, &mut c, chunk));
        });
        rows.push(StreamRow {
            kernel: *k,
            bytes,
            rate: seconds.rates(bytes),
            seconds,
            energy,
        });
    }
    let validated = validate(&a, &b, &c, runs + 1);
    Ok((rows, validated))
}

fn stream_pass(k: StreamKernel, a: &mut [f64], b: &mut [f64], c: &mut [f64], chunk: usize) {
    let q = SCALAR;
    match k {
        StreamKernel::Copy => c
            .par_chunks_mut(chunk)
            .zip(a.par_chunks(chunk))
            .for_each(|(c, a)| c.copy_from_slice(a)),
        StreamKernel::Scale => b
            .par_chunks_mut(chunk)
            .zip(c.par_chunks(chunk))
            .for_each(|(b, c)| b.iter_mut().zip(c).for_each(|(b, c)| *b = q * c)),
        StreamKernel::Add => c
            .par_chunks_mut(chunk)
            .zip(a.par_chunks(chunk).zip(b.par_chunks(chunk)))
            .for_each(|(c, (a, b))| {
                c.iter_mut()
                    .zip(a.iter().zip(b))
                    .for_each(|(c, (a, b))| *c = a + b)
            }),
        StreamKernel::Triad => a
            .par_chunks_mut(chunk)
            .zip(b.par_chunks(chunk).zip(c.par_chunks(chunk)))
            .for_each(|(a, (b, c))| {
                a.iter_mut()
                    .zip(b.iter().zip(c))
                    .for_each(|(a, (b, c))| *a = b + q * c)
            }),
    }
}

/// The scalar recurrence of stream.c's `checkSTREAMresults`, run kernel by kernel with
/// `runs` passes each, compared with the array averages at relative 1e-13.
fn validate(a: &[f64], b: &[f64], c: &[f64], runs: usize) -> bool {
    let (mut aj, mut bj, mut cj) = (1.0f64, 2.0f64, 0.0f64);
    for _ in 0..runs {
        cj = aj;
    }
    for _ in 0..runs {
        bj = SCALAR * cj;
    }
    for _ in 0..runs {
        cj = aj + bj;
    }
    for _ in 0..runs {
        aj = bj + SCALAR * cj;
    }
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let close = |got: f64, want: f64| ((got - want) / want).abs() <= 1e-13;
    close(avg(a), aj) && close(avg(b), bj) && close(avg(c), cj)
}

/// Working sets from 16 KiB doubling up to `max` (at least one point).
pub fn sweep_sizes(max: u64) -> Vec<u64> {
    let mut v = vec![16u64 << 10];
    while let Some(&last) = v.last() {
        if last.saturating_mul(2) > max {
            break;
        }
        v.push(last * 2);
    }
    v
}

/// Best single-thread read bandwidth over an array of `ws` bytes, re-read until about
/// `bytes_per_repeat` bytes have moved, best of 5 repeats.
fn sweep_point(ws: u64, bytes_per_repeat: u64) -> SweepPoint {
    let len = (ws / 8).max(8) as usize;
    let data: Vec<f64> = (0..len).map(|i| (i % 7) as f64).collect();
    let passes = (bytes_per_repeat / (len as u64 * 8)).max(1);
    let stats = crate::stats::measure(1, 5, || {
        for _ in 0..passes {
            black_box(read_sum(black_box(&data)));
        }
    });
    SweepPoint {
        working_set_bytes: ws,
        bandwidth: (passes as f64 * len as f64 * 8.0) / stats.min.0,
    }
}

/// Sum with 32 independent accumulators (8 AVX vectors) so the loop vectorises and enough
/// additions are in flight to be bound by loads, not by the adder's latency. Compiled for AVX2
/// when the CPU has it: the baseline x86-64 target has only 16-byte SSE2 loads, which would cap
/// the L1 figure at half the load ports' width.
fn read_sum(v: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { read_sum_avx2(v) };
    }
    read_sum_generic(v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn read_sum_avx2(v: &[f64]) -> f64 {
    read_sum_generic(v)
}

#[inline(always)]
fn read_sum_generic(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; 32];
    let chunks = v.chunks_exact(32);
    let tail: f64 = chunks.remainder().iter().sum();
    for ch in chunks {
        for (a, x) in acc.iter_mut().zip(ch) {
            *a += x;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// Assign sweep points to cache levels: a point belongs to the smallest level that holds it with
/// room to spare (≤ half its capacity) and does not fit in the level below; beyond 2× the last
/// level it is DRAM. Each level gets the median bandwidth of its points.
pub fn level_bandwidths(caches: &[Cache], sweep: &[SweepPoint]) -> Vec<LevelBandwidth> {
    let mut out = Vec::new();
    let mut lower = 0u64;
    for c in caches {
        let pts: Vec<f64> = sweep
            .iter()
            .filter(|p| p.working_set_bytes > lower && p.working_set_bytes <= c.size_bytes / 2)
            .map(|p| p.bandwidth)
            .collect();
        out.push(LevelBandwidth {
            level: format!("L{}", c.level),
            size_bytes: Some(c.size_bytes),
            bandwidth: median(pts),
        });
        lower = c.size_bytes;
    }
    let dram: Vec<f64> = sweep
        .iter()
        .filter(|p| p.working_set_bytes >= 2 * lower.max(1))
        .map(|p| p.bandwidth)
        .collect();
    out.push(LevelBandwidth {
        level: "DRAM".into(),
        size_bytes: None,
        bandwidth: median(dram),
    });
    out
}

/// The median of `v` (through [`Stats::from_samples`]): `None` when empty or any is not finite.
fn median(v: Vec<f64>) -> Option<f64> {
    Stats::from_samples(&v).map(|s| s.median.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_follow_mccalpin() {
        // stream.c: bytes[] = {2, 2, 3, 3} * sizeof(STREAM_TYPE) * STREAM_ARRAY_SIZE.
        let n = 10_000_000;
        let want = [160e6, 160e6, 240e6, 240e6];
        for (k, w) in StreamKernel::ALL.iter().zip(want) {
            assert_eq!(k.bytes(n), w, "{k:?}");
        }
    }

    #[test]
    fn quick_stream_validates_and_counts_bytes() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = MemoryConfig::quick(t);
        cfg.stream_len = Some(10_000);
        cfg.sweep_max = Some(64 << 10);
        cfg.sweep_bytes = 1 << 20;
        let r = run(&cfg, &mut Hooks::default()).unwrap();
        assert!(r.validated);
        assert_eq!(r.stream.len(), 4);
        assert_eq!(r.stream[3].bytes, 3.0 * 8.0 * 10_000.0);
        assert_eq!(r.sweep.len(), 3); // 16, 32, 64 KiB
        assert!(r.stream.iter().all(|s| s.rate.max >= s.rate.median));
    }

    #[test]
    fn validation_catches_a_wrong_array() {
        let n = 100;
        let (mut a, mut b, mut c) = (vec![1.0; n], vec![2.0; n], vec![0.0; n]);
        for k in StreamKernel::ALL {
            for _ in 0..2 {
                stream_pass(k, &mut a, &mut b, &mut c, 10);
            }
        }
        assert!(validate(&a, &b, &c, 2));
        c[3] += 1.0;
        assert!(!validate(&a, &b, &c, 2));
    }

    #[test]
    fn points_land_in_levels() {
        let caches = vec![
            Cache {
                level: 1,
                kind: "Data".into(),
                size_bytes: 64 << 10,
            },
            Cache {
                level: 2,
                kind: "Unified".into(),
                size_bytes: 1 << 20,
            },
        ];
        let sweep: Vec<SweepPoint> = sweep_sizes(4 << 20)
            .into_iter()
            .map(|ws| SweepPoint {
                working_set_bytes: ws,
                bandwidth: if ws <= 32 << 10 {
                    100.0
                } else if ws <= 512 << 10 {
                    50.0
                } else {
                    10.0
                },
            })
            .collect();
        let l = level_bandwidths(&caches, &sweep);
        let bw: Vec<Option<f64>> = l.iter().map(|x| x.bandwidth).collect();
        assert_eq!(bw, vec![Some(100.0), Some(50.0), Some(10.0)]);
    }
}
