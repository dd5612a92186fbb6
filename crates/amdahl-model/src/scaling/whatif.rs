//! Végh's accelerator / precision what-if: the parallel part runs k× faster (a faster GPU, lower
//! precision arithmetic), the serial and communication time stay as they are — optionally the
//! communication time is scaled by a bytes ratio (fp32 → bf16 gradients: 0.5).
//!
//! Times are normalised to the single-processor time, T(1) = 1 = s + (1−s) with s = 1−α:
//!   before: T(N)  = s + (1−s)/N
//!   after:  T'(N) = s_other + s_comm·r + (1−s)/(k·N),   s = s_other + s_comm, r = bytes ratio.
//! New serial fraction (1−α)' = s' / (s' + (1−s)/k) with s' = s_other + s_comm·r (Végh,
//! arXiv:2005.00872, §"accelerators"; equal to `laws::accelerate_serial` when r = 1), new
//! efficiency E' = E(N, (1−α)') from the efficiency surface, and the payload gain
//! T(N)/T'(N): how much faster the same job runs, i.e. the ratio of payload (HPL Rmax)
//! performance after/before. Against a peak that grew k×, the gain is k·E'/E up to a factor
//! 1 + s(k−1) (≈ 1 + 4e-7 for Summit).

use super::error::ScalingError;
use super::laws;
use serde::{Deserialize, Serialize};

/// The question: a system at N processors with serial fraction 1−α.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIf {
    pub n: f64,
    /// 1−α before the change.
    pub serial: f64,
    /// Speed-up factor of the parallel part (k > 0; k = 4 for a 4× faster accelerator).
    pub k: f64,
    /// Share of 1−α that is communication, in [0, 1] (0: all of it is other serial work).
    pub comm_share: f64,
    /// Factor on the communication time (bytes after / bytes before; 1 = unchanged).
    pub bytes_ratio: f64,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIfResult {
    pub serial_before: f64,
    pub serial_after: f64,
    pub efficiency_before: f64,
    pub efficiency_after: f64,
    /// T(N)/T'(N): the payload performance gain of the same job.
    pub payload_gain: f64,
}

/// The `schema` of an `amdahl accelerate` result.
pub const SCHEMA: &str = "amdahl.accelerate/1";

/// The `amdahl accelerate` result: the question and the model's answer (`amdahl.accelerate/1`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccelerateResult {
    pub schema: &'static str,
    pub input: WhatIf,
    pub result: WhatIfResult,
}

impl AccelerateResult {
    pub fn new(input: WhatIf, result: WhatIfResult) -> Self {
        Self {
            schema: SCHEMA,
            input,
            result,
        }
    }
}

impl WhatIf {
    /// Starting from a measured efficiency (e.g. HPL Rmax/Rpeak) at N.
    pub fn from_efficiency(n: f64, efficiency: f64, k: f64) -> Self {
        Self {
            n,
            serial: laws::serial_from_efficiency(n, efficiency),
            k,
            comm_share: 0.0,
            bytes_ratio: 1.0,
        }
    }

    pub fn evaluate(&self) -> Result<WhatIfResult, ScalingError> {
        let arg = |name: &str, value: f64, message: &str| ScalingError::Argument {
            name: name.into(),
            value,
            message: message.into(),
        };
        if !(self.n > 1.0 && self.n.is_finite()) {
            return Err(arg("n", self.n, "needs N > 1"));
        }
        // 1−α = 0 (E = 1, perfect scaling) is a valid point: nothing serial to stay behind.
        if !(self.serial >= 0.0 && self.serial < 1.0) {
            return Err(arg("serial", self.serial, "1−α must lie in [0, 1)"));
        }
        if !(self.k > 0.0 && self.k.is_finite()) {
            return Err(arg("k", self.k, "the speed-up factor must be positive"));
        }
        if !(0.0..=1.0).contains(&self.comm_share) {
            return Err(arg("comm_share", self.comm_share, "must lie in [0, 1]"));
        }
        if !(self.bytes_ratio >= 0.0 && self.bytes_ratio.is_finite()) {
            return Err(arg("bytes_ratio", self.bytes_ratio, "must be ≥ 0"));
        }
        let s = self.serial;
        let comm = s * self.comm_share;
        let s_new = (s - comm) + comm * self.bytes_ratio;
        let par_new = (1.0 - s) / self.k;
        let serial_after = s_new / (s_new + par_new);
        let t_before = s + (1.0 - s) / self.n;
        let t_after = s_new + par_new / self.n;
        Ok(WhatIfResult {
            serial_before: s,
            serial_after,
            efficiency_before: laws::amdahl_efficiency(self.n, s),
            efficiency_after: laws::amdahl_efficiency(self.n, serial_after),
            payload_gain: t_before / t_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summit_hpl_with_four_times_faster_gpus() {
        // Summit, TOP500 2018-11: E = 74.0 % at N = 2,414,592 (the `top500` specification; Végh
        // arXiv:2005.00872). Expected E' ≈ 0.416 and payload gain ≈ 2.25 (stated to 3 digits
        // there).
        let r = WhatIf::from_efficiency(2_414_592.0, 0.740, 4.0)
            .evaluate()
            .unwrap();
        assert!((r.efficiency_before - 0.740).abs() < 1e-12);
        assert!((r.efficiency_after - 0.416).abs() < 0.0005, "{r:?}");
        assert!((r.payload_gain - 2.25).abs() < 0.005, "{r:?}");
        // Consistency: gain ≈ k·E'/E (the Rmax ratio against a 4× peak).
        assert!((r.payload_gain - 4.0 * r.efficiency_after / 0.74).abs() < 1e-5);
        // And the closed form of laws.rs when nothing is communication.
        assert!((r.serial_after - laws::accelerate_serial(r.serial_before, 4.0)).abs() < 1e-20);
    }

    #[test]
    fn halving_gradient_bytes_helps_when_communication_dominates() {
        let base = WhatIf {
            n: 1024.0,
            serial: 1e-3,
            k: 2.0,
            comm_share: 0.8,
            bytes_ratio: 1.0,
        };
        let same = base.evaluate().unwrap();
        let bf16 = WhatIf {
            bytes_ratio: 0.5,
            ..base
        }
        .evaluate()
        .unwrap();
        assert!(bf16.payload_gain > same.payload_gain);
        assert!(bf16.serial_after < same.serial_after);
        // s' = 0.2e-3 + 0.8e-3·0.5 = 0.6e-3; (1−α)' = 0.6e-3/(0.6e-3 + 0.999/2).
        assert!((bf16.serial_after - 0.6e-3 / (0.6e-3 + 0.999 / 2.0)).abs() < 1e-15);
        assert!(WhatIf { k: 0.0, ..base }.evaluate().is_err());
    }
}
