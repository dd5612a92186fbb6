//! Végh's view of one layout: effective parallelism α_eff and efficiency as N grows.
//!
//! With W the per-device work (compute + memory-bound time, what a single device would also
//! do) and T = W + C + B + S the step (exposed communication, bubble, serial: optimizer and
//! other), the efficiency is E = W/T and (Végh, arXiv:2005.00872; Karp–Flatt 1990)
//! 1−α_eff = (1−E)/(E·(N−1)) = (C + B + S)/(W·(N−1)), so each cause contributes
//! part/(W·(N−1)) and the three contributions sum to 1−α_eff exactly.
//! Strong scaling keeps the global batch and grows DP; weak scaling keeps the per-replica batch.

use super::error::divisors;
use super::hardware::{ComputePrecision, Hardware, Network};
use super::perf::{estimate, Estimate};
use super::spec::Layout;
use super::spec::ModelShape;
use super::validate::validate;
use crate::units::FlopsPerSecond;
use serde::{Deserialize, Serialize};

/// 1−α_eff split by cause; the three sum to `serial_total`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SerialParts {
    pub communication: f64,
    pub bubble: f64,
    pub serial: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScalingPoint {
    pub gpus: u64,
    pub dp: u32,
    pub batch: u32,
    pub step_time_s: f64,
    pub tflops_per_gpu: f64,
    pub efficiency: f64,
    /// α_eff; `None` at N = 1 where it is undefined.
    pub alpha_eff: Option<f64>,
    pub serial_total: Option<f64>,
    pub parts: Option<SerialParts>,
    pub fits: bool,
}

/// The precision what-if: the same layout at fp8, communication bytes unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrecisionWhatIf {
    pub from: ComputePrecision,
    pub to: ComputePrecision,
    /// True where the device has no fp8 and 2 × its bf16 peak was assumed.
    pub hypothetical_peak: bool,
    pub peak_tflops: f64,
    pub base: ScalingPoint,
    pub whatif: ScalingPoint,
    pub strong: Vec<ScalingPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scaling {
    pub strong: Vec<ScalingPoint>,
    pub weak: Vec<ScalingPoint>,
    pub precision_whatif: Option<PrecisionWhatIf>,
}

/// α_eff and its parts for one estimate.
pub fn point(e: &Estimate) -> ScalingPoint {
    let n = e.gpus as f64;
    let t = e.step_time.get();
    let work = e.breakdown.work().get();
    let eff = work / t;
    let (alpha, serial, parts) = if e.gpus > 1 && work > 0.0 {
        // part/(W/N) · 1/(N−1): with T = W/N + Σ parts, these sum to (1−E)/(E(N−1)).
        let k = 1.0 / (work * (n - 1.0));
        let parts = SerialParts {
            communication: e.breakdown.communication().get() * k,
            bubble: e.breakdown.bubble.get() * k,
            serial: (e.breakdown.optimizer + e.breakdown.other).get() * k,
        };
        let s = parts.communication + parts.bubble + parts.serial;
        (Some(1.0 - s), Some(s), Some(parts))
    } else {
        (None, None, None)
    };
    ScalingPoint {
        gpus: e.gpus,
        dp: e.layout.dp,
        batch: e.layout.batch,
        step_time_s: t,
        tflops_per_gpu: e.tflops_per_gpu,
        efficiency: eff,
        alpha_eff: alpha,
        serial_total: serial,
        parts,
        fits: e.memory.fits,
    }
}

/// Evenly spread (in log N) subset of at most `k` values, always keeping the first and last.
fn thin(v: Vec<u32>, k: usize) -> Vec<u32> {
    if v.len() <= k || k < 2 {
        return v;
    }
    let last = v.len() - 1;
    let mut out: Vec<u32> = (0..k)
        .filter_map(|i| v.get(i * last / (k - 1)).copied())
        .collect();
    out.dedup();
    out
}

fn series(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    base: &Layout,
    dps: &[u32],
    batch_of: &dyn Fn(u32) -> Option<u32>,
) -> Vec<ScalingPoint> {
    dps.iter()
        .filter_map(|&dp| {
            let l = Layout {
                dp,
                batch: batch_of(dp)?,
                ..*base
            };
            validate(model, hw, net, &l, None).ok()?;
            Some(point(&estimate(model, hw, net, &l)))
        })
        .collect()
}

/// Strong and weak scaling of `base`, and the precision what-if.
pub fn scaling(model: &ModelShape, hw: &Hardware, net: &Network, base: &Layout) -> Scaling {
    let unit = base.mbs.max(1);
    let per_replica = base.batch / base.dp.max(1);
    // Strong: every DP that divides B/mbs (one microbatch per replica at the top).
    let top = base.batch / unit;
    let strong_dps = thin(
        divisors(top.into())
            .into_iter()
            .filter_map(|d| u32::try_from(d).ok())
            .collect(),
        24,
    );
    let strong = series(model, hw, net, base, &strong_dps, &|_| Some(base.batch));
    // Weak: powers of two up to 16× the configured DP, and the configured DP itself.
    let mut weak_dps: Vec<u32> = (0..=20)
        .map(|k| 1u32 << k)
        .take_while(|&d| d <= base.dp.saturating_mul(16).max(64))
        .collect();
    weak_dps.push(base.dp);
    weak_dps.sort_unstable();
    weak_dps.dedup();
    let weak = series(model, hw, net, base, &weak_dps, &|d| {
        per_replica.checked_mul(d)
    });
    let precision_whatif = (base.precision != ComputePrecision::Fp8).then(|| {
        let hypothetical = hw.peak_fp8.is_none();
        let mut hw8 = hw.clone();
        let peak = hw
            .peak_fp8
            .unwrap_or(FlopsPerSecond(2.0 * hw.peak_bf16.get()));
        hw8.peak_fp8 = Some(peak);
        let l8 = Layout {
            precision: ComputePrecision::Fp8,
            ..*base
        };
        PrecisionWhatIf {
            from: base.precision,
            to: ComputePrecision::Fp8,
            hypothetical_peak: hypothetical,
            peak_tflops: peak.tflops(),
            base: point(&estimate(model, hw, net, base)),
            whatif: point(&estimate(model, &hw8, net, &l8)),
            strong: series(model, &hw8, net, &l8, &strong_dps, &|_| Some(base.batch)),
        }
    });
    Scaling {
        strong,
        weak,
        precision_whatif,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::hardware::catalog_system;
    use crate::plan::shape::catalog_model;
    use crate::plan::spec::Recompute;
    use crate::scaling::laws::serial_from_efficiency;

    #[test]
    fn parts_sum_to_serial_fraction_of_vegh() {
        let (Ok((hw, net)), Ok(m)) = (catalog_system("a100-80gb"), catalog_model("megatron-39b"))
        else {
            panic!("catalog entries missing")
        };
        let base = Layout {
            tp: 8,
            pp: 2,
            dp: 32,
            batch: 1536,
            recompute: Recompute::Full,
            ..Layout::default()
        };
        let s = scaling(&m, &hw, &net, &base);
        assert!(s.strong.len() > 5 && s.weak.len() > 3);
        for p in s.strong.iter().chain(s.weak.iter()) {
            let (Some(total), Some(parts)) = (p.serial_total, p.parts) else {
                continue;
            };
            let sum = parts.communication + parts.bubble + parts.serial;
            assert!((sum - total).abs() <= 1e-12 * total.max(1e-30));
            // Same number as the scaling law applied to the efficiency (Végh; Karp–Flatt).
            let law = serial_from_efficiency(p.gpus as f64, p.efficiency);
            assert!((law / total - 1.0).abs() < 1e-9, "{law} vs {total}");
        }
        // Strong scaling at fixed batch: efficiency falls as N grows (bubble grows as m shrinks).
        let e: Vec<f64> = s.strong.iter().map(|p| p.efficiency).collect();
        assert!(e.windows(2).all(|w| w[1] <= w[0] + 1e-12), "{e:?}");
        // A100 has no fp8: the what-if is flagged hypothetical and is faster per step.
        let Some(w) = s.precision_whatif else {
            panic!("no what-if")
        };
        assert!(w.hypothetical_peak);
        assert!(w.whatif.step_time_s < w.base.step_time_s);
    }
}
