//! The precisions `amdahl bench gemm` measures, and for each: how it is stored, how it is
//! computed on this machine, and the error a correct kernel may make.

use crate::error::BenchError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// Unit roundoff of storing the result (fp16: 2^-11, bf16: 2^-8), 0 when not narrower than
    /// the accumulation.
    pub fn output_roundoff(self) -> f64 {
        match self {
            Precision::Fp16 => 2f64.powi(-11),
            Precision::Bf16 => 2f64.powi(-8),
            _ => 0.0,
        }
    }

    /// Absolute error of storing a result that underflows into the subnormal range: half the
    /// smallest subnormal (Higham 2002, eq. 2.8: fl(x) = x(1 + δ) + η, |η| ≤ u_min/2).
    /// fp16: smallest subnormal 2^-24; bf16: 2^-133.
    pub fn output_underflow(self) -> f64 {
        match self {
            Precision::Fp16 => 2f64.powi(-25),
            Precision::Bf16 => 2f64.powi(-134),
            _ => 0.0,
        }
    }

    /// Error bound for one element of C = A·B with inner dimension k, given (|A||B|)_ij and the
    /// exact c_ij: γ_k·(|A||B|)_ij + u_out·|c_ij|, where γ_k = k·u/(1 − k·u) bounds any order of
    /// summation, FMA or not (Higham 2002, eq. 3.13 and Lemma 3.1); the second term is the final
    /// rounding to the storage type (plus its underflow term). Integer arithmetic is exact: the bound is 0.
    pub fn error_bound(self, k: usize, abs_product: f64, exact: f64) -> f64 {
        let ku = k as f64 * self.accumulation_roundoff();
        let gamma = if ku < 1.0 {
            ku / (1.0 - ku)
        } else {
            f64::INFINITY
        };
        // The bound holds for the rounded output plus the accumulation in exact arithmetic on the
        // rounded inputs; add the relative error of the output rounding on top of both.
        (gamma * abs_product
            + self.output_roundoff() * (exact.abs() + gamma * abs_product)
            + self.output_underflow())
            * (1.0 + 1e-12)
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        let b = Precision::Fp64.error_bound(100, 1.0, 0.5);
        assert!((b - 1.1102e-14).abs() < 1e-17, "{b}");
        assert_eq!(Precision::Int8.error_bound(1000, 1e6, 1e5), 0.0);
        // bf16 output rounding dominates: 2^-8 · |c|.
        let b = Precision::Bf16.error_bound(64, 1.0, 4.0);
        assert!(b > 4.0 / 256.0 && b < 4.0 / 256.0 + 1e-4, "{b}");
    }

    #[test]
    fn bf16_is_declared_emulated() {
        assert!(!Precision::Bf16.arithmetic().native);
        assert!(Precision::Fp32.arithmetic().native);
    }
}
