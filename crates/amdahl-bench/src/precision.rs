//! The precisions `amdahl bench gemm` measures, and for each: how it is stored, how it is
//! computed on this machine, and the error a correct kernel may make.

use crate::error::BenchError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

impl Precision {
    pub const ALL: [Precision; 5] = [
        Precision::Fp64,
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Int8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }

    /// Bytes of one stored input element.
    pub fn input_bytes(self) -> usize {
        match self {
            Precision::Fp64 => 8,
            Precision::Fp32 => 4,
            Precision::Fp16 | Precision::Bf16 => 2,
            Precision::Int8 => 1,
        }
    }

    /// Bytes of one output element (int8 accumulates into int32).
    pub fn output_bytes(self) -> usize {
        match self {
            Precision::Int8 => 4,
            p => p.input_bytes(),
        }
    }

    /// Memory the square GEMM of order `n` allocates: A, B, C, plus the f32 copies bf16 uses and
    /// the packed copy of A the int8 kernel makes.
    pub fn gemm_bytes(self, n: usize) -> Option<u64> {
        let nn = (n as u64).checked_mul(n as u64)?;
        let per = match self {
            Precision::Bf16 => 3 * 2 + 3 * 4,
            Precision::Int8 => 1 + 1 + 1 + 4,
            p => 3 * p.input_bytes() as u64,
        };
        nn.checked_mul(per)
    }

    /// How this precision is computed here. `native` is false when the arithmetic runs in a wider
    /// type than the storage (an emulation that gains bandwidth but not arithmetic throughput).
    pub fn arithmetic(self) -> Arithmetic {
        match self {
            Precision::Fp64 => Arithmetic::native("fp64", &float_kernel()),
            Precision::Fp32 => Arithmetic::native("fp32", &float_kernel()),
            Precision::Fp16 => fp16_arithmetic(),
            Precision::Bf16 => Arithmetic::new(
                "fp32",
                false,
                "bf16 inputs widened to fp32, fp32 GEMM (gemm crate), \
                 result rounded to bf16; conversions are inside the timing",
            ),
            Precision::Int8 => Arithmetic::new(
                "int32",
                true,
                "hand-written blocked int8·int8→int32 dot products, auto-vectorised \
                 (AVX2 when present; no VNNI/AMX instructions)",
            ),
        }
    }

    /// Unit roundoff u of the arithmetic (accumulation) type; 0 for exact integer arithmetic.
    /// u = 2^-p for p significand bits (Higham 2002, Table 2.1 / §2.1).
    pub fn accumulation_roundoff(self) -> f64 {
        match self {
            Precision::Fp64 => f64::EPSILON / 2.0,
            Precision::Int8 => 0.0,
            Precision::Fp16 if self.arithmetic().native => 2f64.powi(-11),
            _ => f32::EPSILON as f64 / 2.0,
        }
    }

    /// Bound on the accumulation error of one element of C = A·B with inner dimension k, given
    /// (|A||B|)_ij: γ_k·(|A||B|)_ij with γ_k = k·u/(1 − k·u), u the unit roundoff of the
    /// accumulation type. It holds for any order of summation, FMA or not (Higham 2002,
    /// *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1, eq. 3.5 and Lemma 3.1),
    /// so a correct kernel can never exceed it. The (1 + 1e-12) covers the f64 reference's own
    /// rounding (its unit roundoff is 2^-53 ≈ 1.1e-16 per operation). Integer arithmetic is exact: 0.
    pub fn accumulation_bound(self, k: usize, abs_product: f64) -> f64 {
        let ku = k as f64 * self.accumulation_roundoff();
        let gamma = if ku < 1.0 {
            ku / (1.0 - ku)
        } else {
            f64::INFINITY
        };
        gamma * abs_product * (1.0 + 1e-12)
    }

    /// The values that round to `got` when the result is stored: `[got, got]` when the storage
    /// type is the accumulation type (fp64, fp32, int32), else the rounding cell of the 16-bit
    /// value `got` in round-to-nearest: half-way to each neighbour (subnormals included).
    ///
    /// With it the check is exact: a correct kernel stores fl(y) for some y within
    /// [`Precision::accumulation_bound`] of the exact product, so that y lies in `got`'s cell;
    /// the check asks only that the cell come within the bound of the exact value. The final
    /// rounding (half an ulp, 2^-11 relative for fp16 and 2^-8 for bf16) is no longer part of the
    /// tolerance, so the reported ratio measures the accumulation alone.
    pub fn rounding_cell(self, got: f64) -> (f64, f64) {
        let bits = match self {
            Precision::Fp16 => half::f16::from_f64(got).to_bits(),
            Precision::Bf16 => half::bf16::from_f64(got).to_bits(),
            _ => return (got, got),
        };
        let value = |b: u16| match self {
            Precision::Fp16 => half::f16::from_bits(b).to_f64(),
            _ => half::bf16::from_bits(b).to_f64(),
        };
        // Sign-magnitude: the neighbour away from zero is bits + 1, towards zero bits − 1;
        // zero's neighbours are the smallest subnormals of either sign.
        let (mag, sign) = (bits & 0x7FFF, bits & 0x8000);
        let (below, above) = if mag == 0 {
            (value(0x8001), value(0x0001))
        } else if sign == 0 {
            (value(bits - 1), value(bits + 1))
        } else {
            (value(bits + 1), value(bits - 1))
        };
        let v = value(bits);
        // Past the largest finite value the neighbour is infinite: use the spacing below.
        let above = if above.is_finite() {
            above
        } else {
            v + (v - below)
        };
        let below = if below.is_finite() {
            below
        } else {
            v - (above - v)
        };
        ((v + below) / 2.0, (v + above) / 2.0)
    }

    /// How far the values that round to `got` lie from the `exact` product: 0 when `exact` is
    /// in `got`'s rounding cell. A correct kernel keeps this within
    /// [`Precision::accumulation_bound`].
    pub fn accumulation_miss(self, got: f64, exact: f64) -> f64 {
        let (lo, hi) = self.rounding_cell(got);
        (lo - exact).max(exact - hi).max(0.0)
    }
}

/// Which `gemm` microkernels run here. The crate picks them at run time, but compiles its AVX-512
/// ones only with its `x86-v4` feature (our default `avx512` feature), so a build without it runs
/// AVX2 kernels on an AVX-512 CPU — worth saying next to the figure.
fn float_kernel() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let avx512 = std::arch::is_x86_feature_detected!("avx512f");
        let fma = std::arch::is_x86_feature_detected!("fma");
        match (cfg!(feature = "avx512"), avx512, fma) {
            (true, true, _) => "gemm crate, AVX-512 FMA microkernels".into(),
            (false, true, _) => "gemm crate, AVX2+FMA microkernels (the CPU has AVX-512; a build \
                                 with the default `avx512` feature would use it)"
                .into(),
            (_, false, true) => "gemm crate, AVX2+FMA microkernels".into(),
            _ => "gemm crate, portable (non-FMA) microkernels".into(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "gemm crate, SIMD FMA microkernels".into()
    }
}

fn fp16_arithmetic() -> Arithmetic {
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("fp16") {
        return Arithmetic::native("fp16", "gemm crate, NEON FP16 FMA microkernels");
    }
    Arithmetic::new(
        "fp32",
        false,
        "gemm crate stores fp16 and widens to fp32 while packing (F16C), \
         fp32 FMA microkernels, result rounded to fp16",
    )
}

/// How a precision's arithmetic is carried out on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Arithmetic {
    pub arithmetic: String,
    pub native: bool,
    pub kernel: String,
}

impl Arithmetic {
    fn native(arithmetic: &str, kernel: &str) -> Self {
        Self::new(arithmetic, true, kernel)
    }

    fn new(arithmetic: &str, native: bool, kernel: &str) -> Self {
        Self {
            arithmetic: arithmetic.into(),
            native,
            kernel: kernel.into(),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fp64" | "f64" | "double" => Ok(Precision::Fp64),
            "fp32" | "f32" | "float" | "single" => Ok(Precision::Fp32),
            "fp16" | "f16" | "half" => Ok(Precision::Fp16),
            "bf16" | "bfloat16" => Ok(Precision::Bf16),
            "int8" | "i8" => Ok(Precision::Int8),
            _ => Err(BenchError::UnknownPrecision(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_rejects_unknown() {
        assert_eq!("FP32".parse::<Precision>().unwrap(), Precision::Fp32);
        assert_eq!("bfloat16".parse::<Precision>().unwrap(), Precision::Bf16);
        let e = "fp8".parse::<Precision>().unwrap_err().to_string();
        assert!(e.contains("fp8") && e.contains("int8"), "{e}");
    }

    #[test]
    fn bounds_follow_higham() {
        // fp64, k = 100, |A||B| = 1: γ = 100·2^-53/(1 − 100·2^-53) ≈ 1.11e-14.
        let b = Precision::Fp64.accumulation_bound(100, 1.0);
        assert!((b - 1.1102e-14).abs() < 1e-17, "{b}");
        assert_eq!(Precision::Int8.accumulation_bound(1000, 1e6), 0.0);
        // bf16 accumulates in fp32: γ_64 = 64·2^-24/(1 − 64·2^-24) ≈ 3.81e-6.
        let b = Precision::Bf16.accumulation_bound(64, 1.0);
        assert!((b - 3.8147e-6).abs() < 1e-9, "{b}");
    }

    #[test]
    fn rounding_cells_are_half_way_to_the_neighbours() {
        // bf16 has 8 significand bits: 1.0's neighbours are 1 − 2^-8 and 1 + 2^-7.
        let (lo, hi) = Precision::Bf16.rounding_cell(1.0);
        assert_eq!((lo, hi), (1.0 - 2f64.powi(-9), 1.0 + 2f64.powi(-8)));
        // fp16 at −2: neighbours −2 − 2^-9 (away) and −2 + 2^-10 (towards zero).
        let (lo, hi) = Precision::Fp16.rounding_cell(-2.0);
        assert_eq!((lo, hi), (-2.0 - 2f64.powi(-10), -2.0 + 2f64.powi(-11)));
        // Zero's cell reaches half the smallest subnormal (fp16: 2^-24) either way.
        assert_eq!(
            Precision::Fp16.rounding_cell(0.0),
            (-(2f64.powi(-25)), 2f64.powi(-25))
        );
        assert_eq!(Precision::Fp32.rounding_cell(0.3), (0.3, 0.3));
        // One element wrong by two bf16 ulps at k = 64 misses the bound by ~1000×: caught.
        let tol = Precision::Bf16.accumulation_bound(64, 1.0);
        let wrong = 1.0 + 2.0 * 2f64.powi(-7);
        assert!(Precision::Bf16.accumulation_miss(wrong, 1.0) > 1000.0 * tol);
        // The correctly rounded value misses by nothing.
        assert_eq!(Precision::Bf16.accumulation_miss(1.0, 1.0 + 1e-3), 0.0);
        // Every value rounds into its own cell (fp16 round-to-nearest), across binades.
        for x in [1e-7, 3.3e-5, 0.1, 0.7, 1.5, 1000.3, 65000.0, -12.25] {
            let h = half::f16::from_f64(x).to_f64();
            let (lo, hi) = Precision::Fp16.rounding_cell(h);
            assert!(lo <= x && x <= hi, "{x}: [{lo}, {hi}] around {h}");
        }
    }

    #[test]
    fn bf16_is_declared_emulated() {
        assert!(!Precision::Bf16.arithmetic().native);
        assert!(Precision::Fp32.arithmetic().native);
    }
}
