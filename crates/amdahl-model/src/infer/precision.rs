//! Number formats of a served model: the weights' storage format and the KV cache's, and the
//! arithmetic each implies on a given device. The arithmetic precisions are the planner's
//! [`ComputePrecision`]; this module only adds the storage formats serving uses.

use crate::plan::{ComputePrecision, Hardware};
use serde::{Deserialize, Serialize};

/// Storage format of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WeightFormat {
    /// bf16 or fp16: 2 bytes, 16-bit tensor-core arithmetic.
    Bf16,
    /// fp8 (E4M3) weights and activations on devices with fp8 tensor cores (Hopper, Ada,
    /// Blackwell, MI300); weight-only elsewhere.
    Fp8,
    /// fp8 where Meta's Llama 3.1 FP8 checkpoints put it (Meta's `fp8_mixed`, FBGEMM row-wise):
    /// the MLP of every layer but the first and the last; attention projections and those two
    /// layers stay 16-bit (meta-llama/llama-models `models/llama3/quantization/loader.py`,
    /// `convert_to_fp8_quantized_model`; Dubey et al. 2024, "The Llama 3 Herd of Models" §6.2).
    Fp8Mixed,
    /// int8 weight-only (W8A16): weights dequantised to bf16 inside the GEMM.
    Int8,
    /// int4 weight-only (W4A16, AWQ/GPTQ, group size 128): dequantised to bf16 inside the GEMM.
    Int4,
    /// 4-bit float, NVFP4 (E2M1 values in blocks of 16 sharing an fp8 E4M3 scale): native fp4
    /// arithmetic on Blackwell; weight-only (dequantised to 16 bits) elsewhere.
    Fp4,
    /// 4-bit float, MXFP4 (OCP Microscaling: E2M1 values in blocks of 32 sharing a power-of-two
    /// E8M0 scale; gpt-oss's expert weights): the same arithmetic as NVFP4 — Blackwell's tensor
    /// cores take both at the fp4 rate — with fewer scale bytes.
    Mxfp4,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 7] = [
        WeightFormat::Bf16,
        WeightFormat::Fp8,
        WeightFormat::Fp8Mixed,
        WeightFormat::Int8,
        WeightFormat::Int4,
        WeightFormat::Fp4,
        WeightFormat::Mxfp4,
    ];
    /// The names a user types, in the order `amdahl infer --precision` lists them: `fp16` is
    /// `bf16`'s storage (2 bytes, 16-bit arithmetic) under its other name, `nvfp4` `fp4`'s.
    pub const NAMES: [&'static str; 9] = [
        "bf16",
        "fp16",
        "fp8",
        "fp8-mixed",
        "int8",
        "int4",
        "fp4",
        "nvfp4",
        "mxfp4",
    ];

    /// The formats the search and the precision what-if try on `hw`: the four of every device,
    /// and fp4 where the device computes it natively (Blackwell). Not `fp8-mixed` nor `mxfp4`:
    /// checkpoint layouts one publisher's models come in, not formats one quantises a model to
    /// (`fp8-mixed` is never faster than `fp8`; `mxfp4` runs as `fp4` with coarser scales).
    pub fn offered(hw: &Hardware) -> Vec<WeightFormat> {
        WeightFormat::ALL
            .into_iter()
            .filter(|w| !matches!(w, WeightFormat::Fp8Mixed | WeightFormat::Mxfp4))
            .filter(|w| *w != WeightFormat::Fp4 || hw.peak(ComputePrecision::Fp4).is_some())
            .collect()
    }

    /// Whether the attention projections (QKV, output) stay 16-bit.
    pub fn sixteen_bit_attention(self) -> bool {
        self == WeightFormat::Fp8Mixed
    }

    /// How many layers stay 16-bit whole (their MLP too): the first and the last in `fp8-mixed`.
    pub fn sixteen_bit_layers(self) -> f64 {
        match self {
            WeightFormat::Fp8Mixed => 2.0,
            _ => 0.0,
        }
    }

    /// Bytes per weight, scales included. int4 with group size 128 carries an fp16 scale and an
    /// fp16 zero point per 128 weights: 0.5 + 4/128 bytes (Lin et al. 2024, AWQ §4; Frantar et al.
    /// 2023, GPTQ); fp8 and int8 use one scale per output channel, negligible (`fp8-mixed`: its
    /// fp8 matrices; the 16-bit ones are counted apart). NVFP4 carries one 1-byte E4M3 scale per
    /// 16 values: 0.5 + 1/16 bytes (NVIDIA, "Introducing NVFP4 for efficient and accurate
    /// low-precision inference", 2025); MXFP4 one 1-byte E8M0 scale per 32: 0.5 + 1/32 bytes
    /// (Open Compute Project, "OCP Microscaling Formats (MX) v1.0 Specification", 2023, §5).
    pub fn bytes(self) -> f64 {
        match self {
            WeightFormat::Bf16 => 2.0,
            WeightFormat::Fp8 | WeightFormat::Fp8Mixed | WeightFormat::Int8 => 1.0,
            WeightFormat::Int4 => 0.5 + 4.0 / 128.0,
            WeightFormat::Fp4 => 0.5 + 1.0 / 16.0,
            WeightFormat::Mxfp4 => 0.5 + 1.0 / 32.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Fp8 => "fp8",
            WeightFormat::Fp8Mixed => "fp8-mixed",
            WeightFormat::Int8 => "int8",
            WeightFormat::Int4 => "int4",
            WeightFormat::Fp4 => "fp4",
            WeightFormat::Mxfp4 => "mxfp4",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "fp16" | "f16" => Some(WeightFormat::Bf16),
            "fp8" | "f8" => Some(WeightFormat::Fp8),
            "fp8-mixed" | "fp8_mixed" => Some(WeightFormat::Fp8Mixed),
            "int8" | "i8" | "w8a16" => Some(WeightFormat::Int8),
            "int4" | "i4" | "w4a16" => Some(WeightFormat::Int4),
            "fp4" | "nvfp4" | "f4" => Some(WeightFormat::Fp4),
            "mxfp4" => Some(WeightFormat::Mxfp4),
            _ => None,
        }
    }

    /// The arithmetic this format runs at on `hw`: fp8 is native where the device has an fp8
    /// peak, otherwise (and always for int8/int4) the weights are dequantised and multiplied at
    /// 16 bits — weight-only quantisation saves bytes, not FLOPs.
    pub fn arithmetic(self, hw: &Hardware) -> Arithmetic {
        // The device's 16-bit tensor format: bf16, or fp16 where it has no bf16 (Volta, Turing).
        let sixteen = if hw.has_bf16 {
            ComputePrecision::Bf16
        } else {
            ComputePrecision::Fp16
        };
        match self {
            WeightFormat::Bf16 => Arithmetic {
                precision: sixteen,
                native: true,
            },
            WeightFormat::Fp8 | WeightFormat::Fp8Mixed
                if hw.peak(ComputePrecision::Fp8).is_some() =>
            {
                Arithmetic {
                    precision: ComputePrecision::Fp8,
                    native: true,
                }
            }
            WeightFormat::Fp4 | WeightFormat::Mxfp4 if hw.peak(ComputePrecision::Fp4).is_some() => {
                Arithmetic {
                    precision: ComputePrecision::Fp4,
                    native: true,
                }
            }
            WeightFormat::Fp8
            | WeightFormat::Fp8Mixed
            | WeightFormat::Int8
            | WeightFormat::Int4
            | WeightFormat::Fp4
            | WeightFormat::Mxfp4 => Arithmetic {
                precision: sixteen,
                native: false,
            },
        }
    }
}

/// The arithmetic precision of the GEMMs, and whether the weight format is the device's own
/// (`native`) or stored narrower and dequantised to it (weight-only, "emulated").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Arithmetic {
    pub precision: ComputePrecision,
    pub native: bool,
}

impl Arithmetic {
    /// How the output names it: "fp8 (native)", "bf16 (int4 weight-only)".
    pub fn describe(self, w: WeightFormat) -> String {
        if self.native && w.sixteen_bit_attention() {
            format!(
                "{} (native; attention, first and last layers 16-bit)",
                self.precision.name()
            )
        } else if self.native {
            format!("{} (native)", self.precision.name())
        } else {
            format!("{} ({} weight-only)", self.precision.name(), w.name())
        }
    }
}

/// Storage format of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KvFormat {
    Bf16,
    Fp8,
    Int8,
    /// NVFP4 (blocks of 16 E2M1 values with an fp8 scale), dequantised for attention: storage
    /// only, on devices with fp4 arithmetic (Blackwell), where engines offer it.
    Fp4,
}

impl KvFormat {
    pub const ALL: [KvFormat; 4] = [KvFormat::Bf16, KvFormat::Fp8, KvFormat::Int8, KvFormat::Fp4];
    /// The names a user types, in the order `amdahl infer --kv-precision` lists them: `fp16` is
    /// `bf16`'s storage under its other name, `nvfp4` `fp4`'s.
    pub const NAMES: [&'static str; 6] = ["bf16", "fp16", "fp8", "int8", "fp4", "nvfp4"];

    /// Bytes per cached value, scales included (fp4: as the NVFP4 weights, 0.5 + 1/16).
    pub fn bytes(self) -> f64 {
        match self {
            KvFormat::Bf16 => 2.0,
            KvFormat::Fp8 | KvFormat::Int8 => 1.0,
            KvFormat::Fp4 => WeightFormat::Fp4.bytes(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvFormat::Bf16 => "bf16",
            KvFormat::Fp8 => "fp8",
            KvFormat::Int8 => "int8",
            KvFormat::Fp4 => "fp4",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "fp16" | "f16" => Some(KvFormat::Bf16),
            "fp8" | "f8" => Some(KvFormat::Fp8),
            "int8" | "i8" => Some(KvFormat::Int8),
            "fp4" | "nvfp4" => Some(KvFormat::Fp4),
            _ => None,
        }
    }
}

crate::names::from_str_by_parse!(WeightFormat, "weight format");
crate::names::from_str_by_parse!(KvFormat, "KV-cache format");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::catalog_system;

    /// Regression (seen in `infer`): V100 has no bf16, yet its 16-bit weights
    /// were said to run "bf16 (native)" and fp8 to be "dequantised to bf16".
    #[test]
    fn v100_arithmetic_is_fp16_not_bf16() {
        let (hw, _) = catalog_system("v100-32gb").unwrap();
        assert!(!hw.has_bf16);
        let a = WeightFormat::Bf16.arithmetic(&hw);
        assert_eq!((a.precision, a.native), (ComputePrecision::Fp16, true));
        let a = WeightFormat::Fp8.arithmetic(&hw);
        assert_eq!((a.precision, a.native), (ComputePrecision::Fp16, false));
        assert_eq!(a.describe(WeightFormat::Fp8), "fp16 (fp8 weight-only)");
    }

    #[test]
    fn fp8_is_native_on_hopper_and_weight_only_on_ampere() {
        let (h100, _) = catalog_system("h100").unwrap();
        let (a100, _) = catalog_system("a100-80gb").unwrap();
        assert_eq!(
            WeightFormat::Fp8.arithmetic(&h100),
            Arithmetic {
                precision: ComputePrecision::Fp8,
                native: true
            }
        );
        let a = WeightFormat::Fp8.arithmetic(&a100);
        assert!(!a.native && a.precision == ComputePrecision::Bf16);
        assert_eq!(a.describe(WeightFormat::Fp8), "bf16 (fp8 weight-only)");
        // Meta's fp8-mixed is fp8 where it is fp8, and says where it is not.
        let m = WeightFormat::Fp8Mixed;
        assert_eq!(m.arithmetic(&h100), WeightFormat::Fp8.arithmetic(&h100));
        assert_eq!(
            m.arithmetic(&h100).describe(m),
            "fp8 (native; attention, first and last layers 16-bit)"
        );
        assert_eq!("fp8_mixed".parse::<WeightFormat>(), Ok(m));
        // int4 never changes the arithmetic, only the bytes: 0.53125 B per weight.
        assert!(!WeightFormat::Int4.arithmetic(&h100).native);
        assert_eq!(WeightFormat::Int4.bytes(), 0.53125);
    }

    #[test]
    fn fp4_is_native_on_blackwell_only() {
        let (b200, _) = crate::plan::catalog_system("b200").unwrap();
        let (h100, _) = crate::plan::catalog_system("h100").unwrap();
        // B200: 4.5 PFLOP/s dense fp8 (catalog), so 9 PFLOP/s dense fp4.
        assert_eq!(b200.peak(ComputePrecision::Fp4).unwrap().tflops(), 9000.0);
        assert!(h100.peak(ComputePrecision::Fp4).is_none());
        assert_eq!(
            WeightFormat::Fp4.arithmetic(&b200),
            Arithmetic {
                precision: ComputePrecision::Fp4,
                native: true
            }
        );
        assert!(!WeightFormat::Fp4.arithmetic(&h100).native);
        // NVFP4: 4 bits and one fp8 scale per 16 values.
        assert_eq!(WeightFormat::Fp4.bytes(), 0.5625);
        assert!(WeightFormat::offered(&b200).contains(&WeightFormat::Fp4));
        assert!(!WeightFormat::offered(&h100).contains(&WeightFormat::Fp4));
        assert_eq!("nvfp4".parse::<WeightFormat>(), Ok(WeightFormat::Fp4));
        // MXFP4 (OCP MX v1.0): 4 bits and one E8M0 scale per 32 values, the fp4 rate on
        // Blackwell, weight-only elsewhere; a checkpoint's format, not one the search offers.
        let mx = WeightFormat::Mxfp4;
        assert_eq!(mx.bytes(), 0.53125);
        assert_eq!(mx.arithmetic(&b200), WeightFormat::Fp4.arithmetic(&b200));
        assert!(!mx.arithmetic(&h100).native);
        assert!(!WeightFormat::offered(&b200).contains(&mx));
        assert_eq!("MXFP4".parse::<WeightFormat>(), Ok(mx));
        // An NVFP4 KV cache stores what NVFP4 weights do per value.
        assert_eq!("nvfp4".parse::<KvFormat>(), Ok(KvFormat::Fp4));
        assert_eq!(KvFormat::Fp4.bytes(), 0.5625);
    }

    #[test]
    fn tf32_peaks_from_the_catalog() {
        let (a100, _) = crate::plan::catalog_system("a100").unwrap();
        let (v100, _) = crate::plan::catalog_system("v100").unwrap();
        // NVIDIA A100 datasheet: 156 TFLOP/s dense TF32; Volta has no TF32.
        assert_eq!(a100.peak(ComputePrecision::Tf32).unwrap().tflops(), 156.0);
        assert!(v100.peak(ComputePrecision::Tf32).is_none());
        assert_eq!(ComputePrecision::Tf32.activation_bytes(), 4.0);
    }
}
