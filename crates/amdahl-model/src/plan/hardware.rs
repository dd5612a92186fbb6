//! Devices and networks the performance model runs on.
//!
//! `Hardware` carries exactly what the model needs; the catalog (another module) builds it from
//! its data files. Until that lands, [`builtin_device`] holds a small table whose every figure is
//! cited next to it. Peaks are *dense* (no 2:4 sparsity) tensor-core figures from the vendor data
//! sheets.

use crate::units::{Bytes, BytesPerSecond, FlopsPerSecond, Seconds, Watts};
use serde::{Deserialize, Serialize};

/// Arithmetic precision of the training run (mixed precision keeps fp32 master weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
    Fp8,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Bf16, Precision::Fp8];

    /// Bytes per activation element stored and communicated. fp8 runs (Transformer Engine) keep
    /// activations and communication in bf16; only GEMM inputs are cast to fp8.
    pub fn activation_bytes(self) -> f64 {
        match self {
            Precision::Fp32 => 4.0,
            Precision::Bf16 | Precision::Fp8 => 2.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Some(Precision::Fp32),
            "bf16" | "fp16" | "f16" => Some(Precision::Bf16),
            "fp8" | "f8" => Some(Precision::Fp8),
            _ => None,
        }
    }
}

/// Architecture family: selects the GEMM-efficiency curve and memory-bandwidth efficiency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    Volta,
    Ampere,
    Hopper,
    /// Anything else: the Ampere constants, stated as such in the output.
    Generic,
}

/// Achieved fraction of a device's peak as a function of operation size.
///
/// A GEMM of F FLOPs takes `latency + F / (max_efficiency × peak)`: a fixed cost per kernel
/// (launch, ramp-up, last partial wave of thread blocks) plus the FLOPs at the sustained
/// large-GEMM rate. Its efficiency F/(t × peak) = max_efficiency · F/(F + F½) rises with size and
/// is half of `max_efficiency` at F½ = latency × max_efficiency × peak. Constants and their origin:
/// docs/methodology/plan.md ("GEMM efficiency").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmCurve {
    pub max_efficiency: f64,
    pub latency: Seconds,
    /// Achieved fraction of the data-sheet memory bandwidth for streaming (memory-bound) kernels.
    pub memory_efficiency: f64,
}

impl DeviceClass {
    /// The curve for this class (see docs/methodology/plan.md for the sources of the constants).
    pub fn curve(self) -> GemmCurve {
        match self {
            // Volta: cuBLAS fp16 large GEMMs reach ~ 100 of 125 TFLOP/s on V100 SXM2 (NVIDIA
            // "Deep Learning Performance" GEMM guide); same kernel latency as Ampere.
            DeviceClass::Volta => GemmCurve {
                max_efficiency: 0.80,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
            DeviceClass::Ampere | DeviceClass::Generic => GemmCurve {
                max_efficiency: 0.72,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
            DeviceClass::Hopper => GemmCurve {
                max_efficiency: 0.72,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "volta" => Some(DeviceClass::Volta),
            "ampere" => Some(DeviceClass::Ampere),
            "hopper" => Some(DeviceClass::Hopper),
            "generic" => Some(DeviceClass::Generic),
            _ => None,
        }
    }
}

/// One accelerator as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    pub name: String,
    pub class: DeviceClass,
    /// Dense peak for fp32 training (IEEE fp32 FMA units; TF32 is not used by default in
    /// PyTorch matmuls since 1.12).
    pub peak_fp32: FlopsPerSecond,
    /// Dense tensor-core peak for bf16 (fp16 on Volta, which has no bf16).
    pub peak_bf16: FlopsPerSecond,
    /// Dense tensor-core fp8 peak, where the device has fp8.
    pub peak_fp8: Option<FlopsPerSecond>,
    pub memory: Bytes,
    pub memory_bandwidth: BytesPerSecond,
    /// Per-GPU, per-direction bandwidth of the intra-node link (NVLink).
    pub intra_node_bandwidth: BytesPerSecond,
    pub tdp: Watts,
    pub idle_power: Watts,
}

impl Hardware {
    /// Dense peak at `p`, `None` where the device lacks that precision.
    pub fn peak(&self, p: Precision) -> Option<FlopsPerSecond> {
        match p {
            Precision::Fp32 => Some(self.peak_fp32),
            Precision::Bf16 => Some(self.peak_bf16),
            Precision::Fp8 => self.peak_fp8,
        }
    }
}

/// One network tier: α–β parameters for the collectives that cross it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Per-GPU, per-direction bandwidth (β⁻¹).
    pub bandwidth: BytesPerSecond,
    /// Per-message latency (α).
    pub latency: Seconds,
    /// Achieved fraction of `bandwidth` by the collective library.
    pub efficiency: f64,
}

impl Link {
    /// Effective bandwidth the α–β model divides by.
    pub fn effective_bandwidth(&self) -> f64 {
        self.bandwidth.get() * self.efficiency
    }
}

/// The two tiers of a GPU cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Network {
    pub gpus_per_node: u32,
    pub intra: Link,
    pub inter: Link,
}

impl Network {
    /// The network of the usual 8-GPU node of this device: NVLink inside, one InfiniBand NIC of
    /// `inter_gbit` Gbit/s per GPU between nodes (DGX A100: 8 × HDR 200; DGX H100: 8 × NDR 400).
    /// Efficiencies and latencies: typical nccl-tests figures (docs/methodology/plan.md).
    pub fn node_of(hw: &Hardware, inter_gbit: f64) -> Self {
        Network {
            gpus_per_node: 8,
            intra: Link {
                bandwidth: hw.intra_node_bandwidth,
                latency: Seconds(5e-6),
                efficiency: 0.80,
            },
            inter: Link {
                bandwidth: BytesPerSecond(inter_gbit * 1e9 / 8.0),
                latency: Seconds(10e-6),
                efficiency: 0.85,
            },
        }
    }
}

/// A built-in device with the inter-node bandwidth of its usual node (Gbit/s per GPU).
#[derive(Debug, Clone)]
pub struct BuiltinDevice {
    pub hardware: Hardware,
    pub inter_node_gbit: f64,
    pub source: &'static str,
}

const GB: f64 = 1e9;
const T: f64 = 1e12;

/// Built-in devices, until the shared catalog lands. Names are matched case-insensitively.
pub fn builtin_devices() -> Vec<BuiltinDevice> {
    let dev = |name: &str,
               class,
               fp32: f64,
               bf16: f64,
               fp8: Option<f64>,
               mem_gib: f64,
               bw_gbs: f64,
               nvlink_gbs: f64,
               tdp: f64,
               idle: f64| Hardware {
        name: name.to_string(),
        class,
        peak_fp32: FlopsPerSecond(fp32 * T),
        peak_bf16: FlopsPerSecond(bf16 * T),
        peak_fp8: fp8.map(|x| FlopsPerSecond(x * T)),
        memory: Bytes::from_gib(mem_gib),
        memory_bandwidth: BytesPerSecond(bw_gbs * GB),
        intra_node_bandwidth: BytesPerSecond(nvlink_gbs * GB),
        tdp: Watts(tdp),
        idle_power: Watts(idle),
    };
    vec![
        // NVIDIA A100 Tensor Core GPU data sheet (2021): FP32 19.5, BF16 312 TFLOP/s dense;
        // 40 GB HBM2 1,555 GB/s; 80 GB HBM2e 2,039 GB/s; NVLink 600 GB/s (300 per direction);
        // max TDP 400 W (SXM). Idle ~ 50 W: typical nvidia-smi idle draw of an SXM A100 (an
        // estimate, override with --idle-w).
        BuiltinDevice {
            hardware: dev(
                "a100-40gb",
                DeviceClass::Ampere,
                19.5,
                312.0,
                None,
                40.0,
                1555.0,
                300.0,
                400.0,
                50.0,
            ),
            inter_node_gbit: 200.0,
            source: "NVIDIA A100 data sheet (2021); DGX A100: 8x HDR 200 Gb/s",
        },
        BuiltinDevice {
            hardware: dev(
                "a100-80gb",
                DeviceClass::Ampere,
                19.5,
                312.0,
                None,
                80.0,
                2039.0,
                300.0,
                400.0,
                50.0,
            ),
            inter_node_gbit: 200.0,
            source: "NVIDIA A100 data sheet (2021); DGX A100: 8x HDR 200 Gb/s",
        },
        // NVIDIA H100 Tensor Core GPU data sheet (SXM5): FP32 67, BF16 989, FP8 1,979 TFLOP/s
        // dense; 80 GB HBM3 3.35 TB/s; NVLink 900 GB/s (450 per direction); up to 700 W.
        // Idle ~ 70 W (estimate).
        BuiltinDevice {
            hardware: dev(
                "h100-sxm",
                DeviceClass::Hopper,
                67.0,
                989.0,
                Some(1979.0),
                80.0,
                3350.0,
                450.0,
                700.0,
                70.0,
            ),
            inter_node_gbit: 400.0,
            source: "NVIDIA H100 data sheet (SXM5); DGX H100: 8x NDR 400 Gb/s",
        },
        // NVIDIA V100 data sheet (SXM2 32 GB): FP32 15.7, FP16 tensor 125 TFLOP/s; HBM2
        // 900 GB/s; NVLink 300 GB/s (150 per direction); 300 W. DGX-1: 4x EDR 100 Gb/s for 8
        // GPUs = 50 Gb/s per GPU. Idle ~ 40 W (estimate).
        BuiltinDevice {
            hardware: dev(
                "v100-32gb",
                DeviceClass::Volta,
                15.7,
                125.0,
                None,
                32.0,
                900.0,
                150.0,
                300.0,
                40.0,
            ),
            inter_node_gbit: 50.0,
            source: "NVIDIA V100 data sheet (SXM2); DGX-1: 4x EDR 100 Gb/s per 8 GPUs",
        },
    ]
}

/// Look a built-in device up by name (case-insensitive; `a100` means the 80 GB part).
pub fn builtin_device(name: &str) -> Option<BuiltinDevice> {
    let key = match name.to_ascii_lowercase().as_str() {
        "a100" | "a100-sxm" | "a100-80gb-sxm" => "a100-80gb".to_string(),
        "a100-40gb-sxm" => "a100-40gb".to_string(),
        "h100" | "h100-sxm5" | "h100-80gb" => "h100-sxm".to_string(),
        "v100" | "v100-sxm2" => "v100-32gb".to_string(),
        other => other.to_string(),
    };
    builtin_devices()
        .into_iter()
        .find(|d| d.hardware.name == key)
}
