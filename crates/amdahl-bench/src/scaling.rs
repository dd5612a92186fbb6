//! `amdahl bench scaling`: a real kernel at 1..P threads — the fp32 GEMM and one training step
//! of a small MLP — with speedup, efficiency and the Karp–Flatt serial fraction per thread count.
//!
//! Karp & Flatt (CACM 33(5), 1990): e(p) = (1/S − 1/p)/(1 − 1/p), identical to Végh's 1 − α_eff.
//! A constant e as p grows means Amdahl's law describes the kernel; a rising e means overhead
//! that grows with p (synchronisation, memory bandwidth). The prediction at larger P below uses
//! Amdahl with the mean measured e; a fitted law (Amdahl + communication, USL) comes from
//! `amdahl_model::scaling`'s fitter, fed with [`ScalingSeries::samples`].

use crate::error::{BenchError, Result};
use crate::kernels::{matmul, Exec, Rng, View};
use crate::machine::{available_memory, check_fits, MachineInfo, Threads};
use crate::mlp::{Mlp, MlpShape};
use crate::stats::Stats;
use crate::Hooks;
use amdahl_model::scaling::laws::{amdahl_efficiency, half_efficiency_n, karp_flatt};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "amdahl.bench.scaling/1";

#[derive(Debug, Clone)]
pub struct ScalingConfig {
    /// Largest thread count P.
    pub threads: Threads,
    /// Order of the fp32 GEMM.
    pub gemm_n: usize,
    pub mlp: MlpShape,
    pub warmup: usize,
    pub repeats: usize,
}

impl ScalingConfig {
    pub fn full(threads: Threads) -> Self {
        Self {
            threads,
            gemm_n: 1024,
            mlp: MlpShape::full(),
            warmup: 1,
            repeats: 5,
        }
    }

    pub fn quick(threads: Threads) -> Self {
        Self {
            gemm_n: 128,
            mlp: MlpShape::quick(),
            repeats: 3,
            ..Self::full(threads)
        }
    }
}

/// One thread count of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub threads: usize,
    pub seconds: Stats,
    /// T(1)/T(p) on median times.
    pub speedup: f64,
    /// speedup / p.
    pub efficiency: f64,
    /// Karp–Flatt e(p); `None` at p = 1 where it is undefined.
    pub karp_flatt: Option<f64>,
    /// α_eff = 1 − e(p) (Végh); `None` at p = 1.
    pub alpha_eff: Option<f64>,
}

/// How e(p) moves with p.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    /// Fewer than two thread counts above 1: no trend can be read.
    InsufficientData,
    /// e roughly constant: Amdahl's law holds.
    Constant,
    /// e grows with p: overhead grows with the processor count.
    Rising,
    /// e falls with p: superlinear effects (caches) or a noisy baseline.
    Falling,
}

/// Efficiency predicted at a larger thread count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub threads: f64,
    pub efficiency: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingAnalysis {
    /// Mean Karp–Flatt e over p > 1: the Amdahl serial fraction 1 − α_eff.
    pub serial_fraction: Option<f64>,
    /// Least-squares slope of e against p (per thread).
    pub karp_flatt_slope: Option<f64>,
    pub trend: Trend,
    /// Amdahl efficiency 1/(N·e + 1 − e) at 2P, 4P, … 64P with the mean e.
    pub predicted: Vec<Prediction>,
    /// N at which efficiency falls to 50 %: (1 + e)/e.
    pub half_efficiency_threads: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingSeries {
    /// "gemm fp32 n=1024" or "mlp step 784-512-512-10 batch 256".
    pub kernel: String,
    /// FLOPs per run (GEMM: 2n³; MLP: its GEMMs, see `MlpShape::gemm_flops`).
    pub work: f64,
    pub points: Vec<ScalingPoint>,
    pub analysis: ScalingAnalysis,
}

impl ScalingSeries {
    /// (threads, median seconds) pairs: the input the scaling-law fitter takes.
    pub fn samples(&self) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .map(|p| (p.threads as f64, p.seconds.median.0))
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingReport {
    pub schema: String,
    pub machine: MachineInfo,
    pub debug_build: bool,
    pub series: Vec<ScalingSeries>,
}

/// Thread counts measured: every p in 1..=P up to 16, then powers of two and P itself.
pub fn thread_counts(max: usize) -> Vec<usize> {
    let max = max.max(1);
    let mut v: Vec<usize> = (1..=max.min(16)).collect();
    let mut p = 32;
    while p < max {
        v.push(p);
        p *= 2;
    }
    if v.last() != Some(&max) {
        v.push(max);
    }
    v
}

/// Speedup, efficiency and Karp–Flatt per point from (threads, seconds) — the baseline is the
/// point with the fewest threads, so a series starting at p0 > 1 uses p/p0 (Karp–Flatt against
/// a baseline, see `karp_flatt`'s docs).
pub fn points_from_times(samples: &[(usize, Stats)]) -> Vec<ScalingPoint> {
    let Some(&(p0, base)) = samples.iter().min_by_key(|(p, _)| *p) else {
        return Vec::new();
    };
    samples
        .iter()
        .map(|&(p, seconds)| {
            let speedup = base.median.0 / seconds.median.0;
            let rel = p as f64 / p0.max(1) as f64;
            let e = (rel > 1.0).then(|| karp_flatt(rel, speedup));
            ScalingPoint {
                threads: p,
                seconds,
                speedup,
                efficiency: speedup / rel,
                karp_flatt: e,
                alpha_eff: e.map(|e| 1.0 - e),
            }
        })
        .collect()
}

/// Serial fraction, trend and predictions from the points (pure; no fitting beyond a mean and
/// a least-squares slope).
pub fn analyze(points: &[ScalingPoint]) -> ScalingAnalysis {
    let kf: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.threads as f64, p.karp_flatt?)))
        .filter(|(_, e)| e.is_finite())
        .collect();
    let serial = (!kf.is_empty()).then(|| kf.iter().map(|x| x.1).sum::<f64>() / kf.len() as f64);
    let slope = slope(&kf);
    let trend = match (serial, slope) {
        (Some(mean), Some(b)) => {
            let (lo, hi) = kf
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                    (l.min(x.0), h.max(x.0))
                });
            // Change of e across the measured range, against a noise floor of half the mean
            // (or 0.01 absolute for near-perfect scaling).
            let change = b * (hi - lo);
            let floor = (0.5 * mean.abs()).max(0.01);
            if change > floor {
                Trend::Rising
            } else if change < -floor {
                Trend::Falling
            } else {
                Trend::Constant
            }
        }
        _ => Trend::InsufficientData,
    };
    let pmax = points.iter().map(|p| p.threads).max().unwrap_or(1) as f64;
    let usable = serial.filter(|e| *e > 0.0 && *e < 1.0);
    let predicted = usable
        .map(|e| {
            [2.0, 4.0, 8.0, 16.0, 64.0]
                .iter()
                .map(|k| Prediction {
                    threads: k * pmax,
                    efficiency: amdahl_efficiency(k * pmax, e),
                })
                .collect()
        })
        .unwrap_or_default();
    ScalingAnalysis {
        serial_fraction: serial,
        karp_flatt_slope: slope,
        trend,
        predicted,
        half_efficiency_threads: usable.map(half_efficiency_n),
    }
}

fn slope(xy: &[(f64, f64)]) -> Option<f64> {
    if xy.len() < 2 {
        return None;
    }
    let n = xy.len() as f64;
    let (mx, my) = (
        xy.iter().map(|p| p.0).sum::<f64>() / n,
        xy.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

pub fn run(cfg: &ScalingConfig, hooks: &mut Hooks<'_>) -> Result<ScalingReport> {
    let n = cfg.gemm_n;
    if n == 0 {
        return Err(BenchError::NotPositive {
            what: "--sizes",
            value: 0,
        });
    }
    let need = (n as u64)
        .checked_mul(n as u64)
        .and_then(|x| x.checked_mul(12))
        .ok_or_else(|| BenchError::TooLarge {
            what: format!("scaling GEMM at n = {n}"),
            detail: "n² overflows".into(),
        })?;
    check_fits(&format!("fp32 GEMM at n = {n}"), need, available_memory())?;
    let counts = thread_counts(cfg.threads.used);
    let total = 2 * counts.len();
    let mut done = 0;

    let mut rng = Rng::new(3);
    let a: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.unit() as f32).collect();
    let mut c = vec![0.0f32; n * n];
    let mut gemm_times = Vec::new();
    let mut mlp_times = Vec::new();
    let mut mlp = Mlp::new(cfg.mlp.clone(), 9)?;
    for &p in &counts {
        let exec = Exec::new(p)?;
        hooks.step(done, total, format!("gemm fp32 n={n}, {p} thread(s)"));
        let mut err = None;
        let (s, _) = hooks.measure(cfg.warmup, cfg.repeats, 1.0, "J", || {
            if let Err(e) = matmul(
                &exec,
                &mut c,
                View::col_major(&a, n, n),
                View::col_major(&b, n, n),
                1.0,
            ) {
                err = Some(e);
            }
        });
        gemm_times.push((p, s));
        done += 1;
        hooks.step(done, total, format!("mlp step, {p} thread(s)"));
        let (s, _) = hooks.measure(cfg.warmup, cfg.repeats, 1.0, "J", || {
            if let Err(e) = mlp.step(&exec) {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        mlp_times.push((p, s));
        done += 1;
    }
    hooks.step(total, total, "done");
    let widths: Vec<String> = cfg.mlp.widths.iter().map(|w| w.to_string()).collect();
    let series = |kernel: String, work: f64, times: &[(usize, Stats)]| {
        let points = points_from_times(times);
        ScalingSeries {
            kernel,
            work,
            analysis: analyze(&points),
            points,
        }
    };
    Ok(ScalingReport {
        schema: SCHEMA.into(),
        machine: MachineInfo::detect(cfg.threads),
        debug_build: crate::DEBUG_BUILD,
        series: vec![
            series(
                format!("gemm fp32 n={n}"),
                2.0 * (n as f64).powi(3),
                &gemm_times,
            ),
            series(
                format!("mlp step {} batch {}", widths.join("-"), cfg.mlp.batch),
                cfg.mlp.gemm_flops(),
                &mlp_times,
            ),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::units::Seconds;

    fn st(t: f64) -> Stats {
        Stats {
            min: Seconds(t),
            median: Seconds(t),
            max: Seconds(t),
            repeats: 1,
        }
    }

    /// T(p) = T1·(s + (1−s)/p) is Amdahl-shaped with serial fraction s; Karp–Flatt recovers s at
    /// every p and the trend reads constant.
    #[test]
    fn recovers_the_serial_fraction_of_a_synthetic_amdahl_series() {
        let s = 0.07;
        let times: Vec<(usize, Stats)> = (1..=32)
            .map(|p| (p, st(2.5 * (s + (1.0 - s) / p as f64))))
            .collect();
        let pts = points_from_times(&times);
        for p in pts.iter().skip(1) {
            assert!((p.karp_flatt.unwrap() - s).abs() < 1e-12, "{p:?}");
        }
        let a = analyze(&pts);
        assert!((a.serial_fraction.unwrap() - s).abs() < 1e-12);
        assert_eq!(a.trend, Trend::Constant);
        assert!(a.karp_flatt_slope.unwrap().abs() < 1e-12);
        // Amdahl: E(64·32) = 1/(2048·0.07 + 0.93).
        let last = a.predicted.last().unwrap();
        assert!((last.efficiency - 1.0 / (2048.0 * s + 0.93)).abs() < 1e-12);
        assert!((a.half_efficiency_threads.unwrap() - 1.07 / 0.07).abs() < 1e-9);
    }

    /// Overhead growing with p (T = T1·(s + (1−s)/p + c·p)) shows as a rising Karp–Flatt e.
    #[test]
    fn growing_overhead_reads_as_rising() {
        let times: Vec<(usize, Stats)> = (1..=16)
            .map(|p| (p, st(0.02 + 0.98 / p as f64 + 0.01 * p as f64)))
            .collect();
        assert_eq!(analyze(&points_from_times(&times)).trend, Trend::Rising);
        let two = points_from_times(&times[..2]);
        assert_eq!(analyze(&two).trend, Trend::InsufficientData);
    }

    #[test]
    fn thread_counts_cover_one_to_p() {
        assert_eq!(thread_counts(1), vec![1]);
        assert_eq!(thread_counts(4), vec![1, 2, 3, 4]);
        let big = thread_counts(100);
        assert_eq!(&big[14..], &[15, 16, 32, 64, 100]);
    }

    #[test]
    fn quick_run_has_both_kernels() {
        let t = Threads {
            used: 2,
            capped_from: None,
        };
        let mut cfg = ScalingConfig::quick(t);
        cfg.gemm_n = 48;
        cfg.repeats = 1;
        let r = run(&cfg, &mut Hooks::default()).unwrap();
        assert_eq!(r.series.len(), 2);
        for s in &r.series {
            assert_eq!(s.points.len(), 2);
            assert_eq!(s.points[0].speedup, 1.0);
            assert_eq!(s.samples().len(), 2);
        }
    }
}
