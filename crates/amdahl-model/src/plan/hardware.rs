//! Devices and networks the performance model runs on.
//!
//! `Hardware` carries exactly what the model needs. It is built from a device of the catalog
//! (`data/devices.csv`, [`crate::catalog::devices`]) by [`Hardware::from_catalog`]; the rules that
//! turn catalog columns into model inputs (link direction, binary memory units, idle power where
//! the catalog has none, the GEMM-curve family) are documented there and in
//! docs/methodology.md ("Hardware from the catalog"). Peaks are *dense* (no 2:4 sparsity)
//! vendor figures.

use super::error::PlanError;
use crate::catalog::devices::{Device, PeakPrecision};
use crate::power::{capped_clock, device_power, Activity, Coefficients, ServerShare};
use crate::units::{Bytes, BytesPerSecond, FlopsPerSecond, Seconds, Watts};
use serde::{Deserialize, Serialize};

/// Arithmetic precision of the training run (mixed precision keeps fp32 master weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "Precision")]
pub enum ComputePrecision {
    Fp32,
    Bf16,
    /// IEEE half precision with loss scaling: the 16-bit format of devices without bf16 (Volta,
    /// Turing); same tensor-core peak as their bf16-capable successors' 16-bit column.
    Fp16,
    Fp8,
    /// TF32 tensor-core matmuls on fp32 data (Ampere and later): fp32 storage and optimizer,
    /// the catalog's `tf32` peak.
    Tf32,
    /// 4-bit float (NVFP4/MXFP4, E2M1 with block scales) on Blackwell tensor cores: a serving
    /// format; its peak is twice the fp8 peak (NVIDIA Blackwell architecture technical brief,
    /// 2024: B200 9 PFLOP/s dense fp4 against 4.5 fp8).
    Fp4,
}

impl ComputePrecision {
    pub const ALL: [ComputePrecision; 6] = [
        ComputePrecision::Fp32,
        ComputePrecision::Bf16,
        ComputePrecision::Fp16,
        ComputePrecision::Fp8,
        ComputePrecision::Tf32,
        ComputePrecision::Fp4,
    ];
    /// The names of [`Self::ALL`], in order (`parse` also takes `f32`, `f16`, `f8`, `nvfp4`,
    /// `mxfp4`).
    pub const NAMES: [&'static str; 6] = ["fp32", "bf16", "fp16", "fp8", "tf32", "fp4"];

    /// Bytes per activation element stored and communicated. fp8 runs (Transformer Engine) keep
    /// activations and communication in bf16; only GEMM inputs are cast to fp8.
    pub fn activation_bytes(self) -> f64 {
        match self {
            ComputePrecision::Fp32 | ComputePrecision::Tf32 => 4.0,
            ComputePrecision::Bf16
            | ComputePrecision::Fp16
            | ComputePrecision::Fp8
            | ComputePrecision::Fp4 => 2.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ComputePrecision::Fp32 => "fp32",
            ComputePrecision::Bf16 => "bf16",
            ComputePrecision::Fp16 => "fp16",
            ComputePrecision::Fp8 => "fp8",
            ComputePrecision::Tf32 => "tf32",
            ComputePrecision::Fp4 => "fp4",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Some(ComputePrecision::Fp32),
            "bf16" => Some(ComputePrecision::Bf16),
            "fp16" | "f16" => Some(ComputePrecision::Fp16),
            "fp8" | "f8" => Some(ComputePrecision::Fp8),
            "tf32" => Some(ComputePrecision::Tf32),
            "fp4" | "f4" | "nvfp4" | "mxfp4" => Some(ComputePrecision::Fp4),
            _ => None,
        }
    }
}

/// Architecture family: selects the GEMM-efficiency curve and memory-bandwidth efficiency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
/// docs/methodology.md ("GEMM efficiency").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GemmCurve {
    /// Sustained fraction of the 16-bit (and fp32) tensor peak for large GEMMs.
    pub max_efficiency: f64,
    /// Sustained fraction of the fp8 peak for the fp8 GEMMs of an fp8 recipe.
    pub fp8_efficiency: f64,
    pub latency: Seconds,
    /// Achieved fraction of the data-sheet memory bandwidth for streaming (memory-bound) kernels.
    pub memory_efficiency: f64,
}

impl GemmCurve {
    /// The sustained large-GEMM fraction of the peak at precision `p`.
    pub fn efficiency(&self, p: ComputePrecision) -> f64 {
        // fp4 GEMMs are taken to sustain the fp8 share of their peak: no published
        // measurement separates them yet.
        if matches!(p, ComputePrecision::Fp8 | ComputePrecision::Fp4) {
            self.fp8_efficiency
        } else {
            self.max_efficiency
        }
    }
}

/// Sustained fraction of the fp8 peak reached by the fp8 GEMMs of a Transformer Engine recipe
/// on Hopper, **calibrated** on one row, the largest NeMo 24.07 run (GPT3-175B on 512 H100,
/// data/validation/train.csv `nemo2407-gpt3-175b-512`), after the fp8 recipe's 16-bit attention
/// and output layer, casts and fp8 activation storage were modelled (0.555), and again when
/// data-parallel collectives got one network interface per rank on the node (0.537); the other
/// eleven fp8 rows test it (docs/methodology.md, "GEMM efficiency"). Devices of other classes
/// with fp8 (Ada, Blackwell, MI300) use it too, unvalidated.
pub const HOPPER_FP8_EFFICIENCY: f64 = 0.537;

impl DeviceClass {
    /// The curve for this class (see docs/methodology.md for the sources of the constants).
    pub fn curve(self) -> GemmCurve {
        match self {
            // Volta: cuBLAS fp16 large GEMMs reach ~ 100 of 125 TFLOP/s on V100 SXM2 (NVIDIA
            // "Deep Learning Performance" GEMM guide); same kernel latency as Ampere.
            DeviceClass::Volta => GemmCurve {
                max_efficiency: 0.80,
                fp8_efficiency: HOPPER_FP8_EFFICIENCY,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
            DeviceClass::Ampere | DeviceClass::Generic => GemmCurve {
                max_efficiency: 0.72,
                fp8_efficiency: HOPPER_FP8_EFFICIENCY,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
            DeviceClass::Hopper => GemmCurve {
                max_efficiency: 0.72,
                fp8_efficiency: HOPPER_FP8_EFFICIENCY,
                latency: Seconds(20e-6),
                memory_efficiency: 0.80,
            },
        }
    }

    /// The class of a catalogued microarchitecture (`arch` column of data/devices.csv). Only
    /// Volta, Ampere and Hopper have curves of their own; every other architecture is
    /// [`DeviceClass::Generic`] (the Ampere constants), which the plan output states.
    pub fn from_arch(arch: &str) -> Self {
        DeviceClass::parse(arch.trim()).unwrap_or(DeviceClass::Generic)
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceClass::Volta => "volta",
            DeviceClass::Ampere => "ampere",
            DeviceClass::Hopper => "hopper",
            DeviceClass::Generic => "generic",
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hardware {
    pub name: String,
    pub class: DeviceClass,
    /// The catalog's `arch` (Hopper, Blackwell, …): the power model's generation.
    #[serde(default)]
    pub arch: String,
    /// Dense peak for fp32 training (IEEE fp32 FMA units; TF32 is not used by default in
    /// PyTorch matmuls since 1.12); `None` where the vendor publishes none.
    pub peak_fp32: Option<FlopsPerSecond>,
    /// Dense 16-bit tensor-core peak: bf16, or fp16 on devices without bf16 (`has_bf16`).
    pub peak_bf16: FlopsPerSecond,
    /// Whether the device computes bf16 natively. From the catalog's `arch`: Volta and Turing
    /// have fp16 tensor cores only (NVIDIA V100 and T4 datasheets); bf16 came with Ampere.
    #[serde(default = "yes")]
    pub has_bf16: bool,
    /// Dense tensor-core fp8 peak, where the device has fp8.
    pub peak_fp8: Option<FlopsPerSecond>,
    /// Dense TF32 tensor-core peak (Ampere and later).
    #[serde(default)]
    pub peak_tf32: Option<FlopsPerSecond>,
    /// Dense fp4 tensor-core peak (Blackwell): twice the fp8 peak ([`ComputePrecision::Fp4`]).
    #[serde(default)]
    pub peak_fp4: Option<FlopsPerSecond>,
    pub memory: Bytes,
    pub memory_bandwidth: BytesPerSecond,
    /// Per-GPU, per-direction bandwidth of the intra-node link (NVLink); absent where the
    /// catalog has none and no --intra-gbs gave one (MI300A, Max 1550): only a layout whose
    /// devices talk to each other inside a node needs it, and no figure nobody gave is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra_node_bandwidth: Option<BytesPerSecond>,
    pub tdp: Watts,
    pub idle_power: Watts,
    /// `idle_power` is the [`IDLE_FRACTION_OF_TDP`] estimate, not a catalogued or given figure.
    #[serde(default)]
    pub idle_power_estimated: bool,
    /// The server around the device, for the server (wall) scope; `None`: GPU scope only.
    #[serde(default)]
    pub server: Option<ServerShare>,
    /// A board power limit below the TDP (`--power-cap`, `nvidia-smi -pl`): the compute clock
    /// falls until the device draws at most this ([`crate::power::capped_clock`]).
    #[serde(default)]
    pub power_cap: Option<Watts>,
    /// Constants measured on this device (`--device-profile`) or fitted to the user's runs
    /// (`--calibration`) in place of the catalog's; absent: the catalog's, from the class and the
    /// generation. Read them through [`Hardware::curve`], [`Hardware::power_coefficients`] and
    /// [`Hardware::step_overhead`], never from the class or the generation directly.
    #[serde(default, skip_serializing_if = "Tuning::is_catalog")]
    pub tuning: Tuning,
}

/// Device constants that replace the catalog's: a GEMM curve, power coefficients, a per-step
/// overhead, and where each came from (one line per source, printed under every table that used
/// them).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tuning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<GemmCurve>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<Coefficients>,
    /// Fixed time per training iteration or serving step (framework, launch and host overhead
    /// outside the kernels): added to `plan`'s step, in place of `infer`'s
    /// [`crate::infer::step::STEP_OVERHEAD_S`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overhead: Option<Seconds>,
    /// Host time per running sequence per serving iteration, in place of the serving engine's
    /// ([`crate::infer::Engine::per_sequence_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_sequence_overhead: Option<Seconds>,
    /// "A100 SXM4 80GB, profiled on HOST at DATE", "calibrated on N rows of FILE".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<String>,
}

impl Tuning {
    /// Nothing replaced: the catalog's constants throughout.
    pub fn is_catalog(&self) -> bool {
        self == &Tuning::default()
    }
}

/// Idle power as a fraction of TDP, used where the catalog has no `idle_w` (no vendor publishes
/// idle power) and the user gives no `--idle-w`: 1/8. An estimate of the typical draw of an idle
/// data-centre GPU (A100 SXM 400 W → 50 W), flagged `idle_power_estimated` in every result;
/// measure it with `amdahl run` and pass `--idle-w` or an `idle_w` column with `--catalog`.
pub const IDLE_FRACTION_OF_TDP: f64 = 0.125;

/// User values that fill in or replace catalog figures (`--intra-gbs`, `--tdp-w`, `--idle-w`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    pub intra_node_bandwidth: Option<BytesPerSecond>,
    pub tdp: Option<Watts>,
    pub idle_power: Option<Watts>,
}

/// Bytes of a memory capacity the vendor quotes in "GB". HBM stacks come in binary sizes and
/// vendors round them to GB: an "80 GB" A100 or H100 has 80 GiB (nvidia-smi reports 81,920 MiB
/// on A100 80 GB), so the planner reads the catalog's figure as GiB. (The catalog keeps the
/// vendor's number; embodied-carbon factors are quoted per vendor GB.)
fn capacity(vendor_gb: f64) -> Bytes {
    Bytes::from_gib(vendor_gb)
}

impl Hardware {
    /// The model's view of a catalogued device.
    ///
    /// - peaks: the catalog's dense fp32, 16-bit (`fp16` column: bf16/fp16 tensor) and fp8;
    /// - memory: vendor GB read as GiB (see `capacity`); bandwidth as catalogued;
    /// - intra-node link: the catalog's `link_gbs` is the vendor's aggregate over both
    ///   directions (A100 NVLink 3: 600 GB/s), the α–β model needs one direction: half;
    /// - idle power: the catalog's `idle_w`, else `--idle-w`, else [`IDLE_FRACTION_OF_TDP`] × TDP
    ///   (marked estimated);
    /// - class: from the `arch` column ([`DeviceClass::from_arch`]).
    ///
    /// Fails, naming the device and the option that supplies it, when something the model needs
    /// is neither in the catalog nor in `o` — except the intra-node link, which only a layout of
    /// more than one device in a node needs ([`Network::check_span`]).
    pub fn from_catalog(d: &Device, o: &Overrides) -> Result<Self, PlanError> {
        let missing = |what: &'static str, fix: &'static str| PlanError::DeviceField {
            device: d.name.clone(),
            what,
            fix,
        };
        let peak_bf16 = d
            .peak(PeakPrecision::Fp16)
            .ok_or_else(|| missing("16-bit (bf16/fp16) peak", "add fp16_tflops with --catalog"))?;
        let memory = d
            .memory_gb()
            .map(capacity)
            .ok_or_else(|| missing("on-package memory", "add memory_gb with --catalog"))?;
        let memory_bandwidth = d
            .memory_bandwidth
            .ok_or_else(|| missing("memory bandwidth", "add memory_bw_gbs with --catalog"))?;
        // No figure is no error here: only devices that talk to each other need one
        // (`Network::check_span` refuses that, naming --intra-gbs).
        let intra_node_bandwidth = o.intra_node_bandwidth.or(d.link_bandwidth.map(|b| b * 0.5));
        let tdp = o
            .tdp
            .or(d.tdp)
            .ok_or_else(|| missing("TDP", "give --tdp-w"))?;
        let (idle_power, idle_power_estimated) = match o.idle_power.or(d.idle) {
            Some(w) => (w, false),
            None => (tdp * IDLE_FRACTION_OF_TDP, true),
        };
        Ok(Hardware {
            name: d.name.clone(),
            class: DeviceClass::from_arch(&d.arch),
            arch: d.arch.trim().to_string(),
            peak_fp32: d.peak(PeakPrecision::Fp32),
            peak_bf16,
            has_bf16: !matches!(
                d.arch.trim().to_ascii_lowercase().as_str(),
                "volta" | "turing"
            ),
            peak_fp8: d.peak(PeakPrecision::Fp8),
            peak_tf32: d.peak(PeakPrecision::Tf32),
            peak_fp4: d
                .arch
                .trim()
                .eq_ignore_ascii_case("blackwell")
                .then(|| d.peak(PeakPrecision::Fp8).map(|p| p * 2.0))
                .flatten(),
            memory,
            memory_bandwidth,
            intra_node_bandwidth,
            tdp,
            idle_power,
            idle_power_estimated,
            // The catalog's reference server for the device, where it has one.
            power_cap: None,
            tuning: Tuning::default(),
            server: crate::catalog::servers::embedded()
                .ok()
                .and_then(|s| s.for_gpu(&d.name))
                .map(|s| ServerShare::of_server(s, tdp)),
        })
    }
}

impl Hardware {
    /// The GEMM curve the model uses on this device: measured or fitted where given, else the
    /// class's ([`DeviceClass::curve`]).
    pub fn curve(&self) -> GemmCurve {
        self.tuning.curve.unwrap_or_else(|| self.class.curve())
    }

    /// The power model's coefficients for this device: fitted where given, else the
    /// generation's ([`Coefficients::of`]).
    pub fn power_coefficients(&self) -> Coefficients {
        self.tuning
            .power
            .unwrap_or_else(|| Coefficients::of(&self.arch))
    }

    /// Fixed time per step outside the kernels that the user's calibration found; `None`: the
    /// model's own (none in `plan`, [`crate::infer::step::STEP_OVERHEAD_S`] in `infer`).
    pub fn step_overhead(&self) -> Option<Seconds> {
        self.tuning.step_overhead
    }

    pub fn per_sequence_overhead(&self) -> Option<Seconds> {
        self.tuning.per_sequence_overhead
    }

    /// Board power while doing `a`: the shared power model ([`crate::power`], docs/methodology.md,
    /// "Power model") at this device's TDP and idle draw, never below idle nor above the TDP.
    pub fn power(&self, a: &Activity) -> Watts {
        device_power(
            &self.power_coefficients(),
            self.tdp,
            self.idle_power,
            self.power_cap,
            a,
        )
    }

    /// Whether some clock meets the power cap for a pass doing `a` at full clock (always, without
    /// a cap): `plan` and `infer` refuse a cap their work cannot meet instead of reporting power
    /// held at the cap.
    pub fn cap_is_reachable(&self, a: &Activity, compute_share: f64) -> bool {
        self.power_cap.is_none_or(|cap| {
            capped_clock(
                &self.power_coefficients(),
                self.tdp,
                self.idle_power,
                cap,
                a,
                compute_share,
                crate::power::clock_energy_exponent(&self.arch),
            )
            .is_some()
        })
    }

    /// The share of its full compute clock at which the device, doing `a` at full clock with
    /// `compute_share` of the time compute-bound, meets its power cap: 1 without a cap or when
    /// the cap is not reached; [`crate::power::MIN_CLOCK_SHARE`] when no clock meets it (the
    /// power is then held at the cap: callers check [`Hardware::cap_is_reachable`] first).
    pub fn clock_under_cap(&self, a: &Activity, compute_share: f64) -> f64 {
        match self.power_cap {
            None => 1.0,
            Some(cap) => capped_clock(
                &self.power_coefficients(),
                self.tdp,
                self.idle_power,
                cap,
                a,
                compute_share,
                crate::power::clock_energy_exponent(&self.arch),
            )
            .unwrap_or(crate::power::MIN_CLOCK_SHARE),
        }
    }

    /// Wall power of one device drawing `gpu` with its share of the server, where one is set.
    pub fn wall_power(&self, gpu: Watts) -> Option<Watts> {
        self.server.as_ref().map(|s| s.wall(gpu))
    }

    /// Dense peak at `p`, `None` where the device lacks that precision.
    pub fn peak(&self, p: ComputePrecision) -> Option<FlopsPerSecond> {
        match p {
            ComputePrecision::Fp32 => self.peak_fp32,
            ComputePrecision::Bf16 => self.has_bf16.then_some(self.peak_bf16),
            ComputePrecision::Fp16 => Some(self.peak_bf16),
            ComputePrecision::Fp8 => self.peak_fp8,
            ComputePrecision::Tf32 => self.peak_tf32,
            ComputePrecision::Fp4 => self.peak_fp4,
        }
    }
}

fn yes() -> bool {
    true
}

/// One network tier: α–β parameters for the collectives that cross it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// What the model charges traffic that no device sends to: free. The link of a tier the
/// network does not have ([`Network::intra_link`]); [`Network::check_span`] keeps every layout
/// that would send anything over it out, so it only ever multiplies zero messages and bytes.
static NO_LINK: Link = Link {
    bandwidth: BytesPerSecond(f64::INFINITY),
    latency: Seconds(0.0),
    efficiency: 1.0,
};

/// The two tiers of a GPU cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Network {
    pub gpus_per_node: u32,
    /// The tier inside a node; absent where no figure is known (none in the catalog, no
    /// --intra-gbs): no two devices of a node then work together (a layout of one device),
    /// and no figure nobody gave is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intra: Option<Link>,
    /// The tier between nodes; absent where no figure is known (no reference server for the
    /// device in the catalog, no --inter-gbit): the layout then stays within one node, and no
    /// figure nobody gave is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter: Option<Link>,
    /// Network interfaces per node that a data-parallel collective spreads its inter-node
    /// traffic over. `None` (the default): one per rank of the group on the node, as NCCL's
    /// rings do (docs/methodology.md "Communication per iteration", DP); `Some(n)`: at most `n`
    /// (1: each rank's traffic through its own interface only).
    #[serde(default)]
    pub dp_rails: Option<u32>,
}

impl Network {
    /// The network of an 8-device node of this device: its intra-node link inside (none where
    /// the device has no figure), `inter_gbit` Gbit/s per device between nodes (the catalog's
    /// `scale_out_gbit`: DGX A100 8 × HDR 200; DGX H100 8 × NDR 400), no inter-node tier where
    /// that is `None`. Efficiencies and latencies: typical nccl-tests figures
    /// (docs/methodology.md).
    pub fn node_of(hw: &Hardware, inter_gbit: Option<f64>) -> Self {
        Network {
            gpus_per_node: 8,
            intra: hw.intra_node_bandwidth.map(|bandwidth| Link {
                bandwidth,
                latency: Seconds(5e-6),
                efficiency: 0.80,
            }),
            inter: inter_gbit.map(|gbit| Link {
                bandwidth: BytesPerSecond(gbit * 1e9 / 8.0),
                latency: Seconds(10e-6),
                efficiency: 0.85,
            }),
            dp_rails: None,
        }
    }

    /// The link the model charges intra-node traffic to. Without an intra-node tier no two
    /// devices of a node work together ([`Network::check_span`]), so the model sends nothing
    /// over it: a free link that multiplies zero messages and bytes, never shown.
    pub fn intra_link(&self) -> &Link {
        self.intra.as_ref().unwrap_or(&NO_LINK)
    }

    /// The link the model charges inter-node traffic to. Without an inter-node tier the layout
    /// stays within one node ([`Network::check_span`]), so whatever the model would send
    /// between nodes — nothing, except the tied embedding's all-reduce between the first and
    /// the last pipeline stage, which the planner always charges to the network — goes over
    /// the intra-node link.
    pub fn inter_link(&self) -> &Link {
        self.inter.as_ref().unwrap_or(self.intra_link())
    }

    /// Whether `span` devices working together, packed onto nodes of `gpus_per_node`, have the
    /// tiers they talk over: the intra-node one where two or more share a node, the inter-node
    /// one where they leave it. The what-ifs (infer's TP sweep, serve's search) leave out what
    /// this refuses; [`Network::check_span`] says why.
    pub fn reaches(&self, span: u64) -> bool {
        !self.lacks_intra_for(span)
            && (self.inter.is_some() || span <= u64::from(self.gpus_per_node))
    }

    /// Whether `span` devices working together put two or more in one node, and the network
    /// has no intra-node tier for them to talk over.
    pub fn lacks_intra_for(&self, span: u64) -> bool {
        self.intra.is_none() && span.min(u64::from(self.gpus_per_node)) > 1
    }

    /// `span` devices working together (`what`: "--gpus 16", "tp 4 × pp 4 per replica") need the
    /// intra-node tier when two or more of them share a node, and the inter-node tier when they
    /// do not fit in one node: refused, naming `--intra-gbs` or `--inter-gbit`, when the network
    /// has no such tier. One device never needs either.
    pub fn check_span(&self, device: &str, span: u64, what: String) -> Result<(), PlanError> {
        if self.lacks_intra_for(span) {
            return Err(PlanError::IntraNode {
                device: device.to_string(),
                what,
                per_node: span.min(u64::from(self.gpus_per_node)),
            });
        }
        if self.inter.is_some() || span <= u64::from(self.gpus_per_node) {
            return Ok(());
        }
        Err(PlanError::InterNode {
            device: device.to_string(),
            what,
            span,
            gpus_per_node: self.gpus_per_node,
        })
    }
}

/// A catalogued device of the embedded catalog, with the network of its vendor reference server
/// (`scale_out_gbit`) and no overrides: what the library's tests and examples plan on.
pub fn catalog_system(name: &str) -> Result<(Hardware, Network), PlanError> {
    let d = crate::catalog::devices::lookup(name)?;
    system(d, &Overrides::default(), None)
}

/// Hardware and network for a catalogued device: `inter_gbit` (Gbit/s per device between nodes)
/// if given, else the catalog's `scale_out_gbit`, else no inter-node tier — which only a layout
/// that leaves one node needs ([`Network::check_span`] refuses it there, naming `--inter-gbit`).
/// Likewise the intra-node link: `o`'s, else the catalog's, else none, which only a layout with
/// two or more devices in a node needs (refused there naming `--intra-gbs`).
pub fn system(
    d: &Device,
    o: &Overrides,
    inter_gbit: Option<f64>,
) -> Result<(Hardware, Network), PlanError> {
    let hw = Hardware::from_catalog(d, o)?;
    let net = Network::node_of(&hw, inter_gbit.or(d.scale_out_gbit));
    Ok((hw, net))
}

crate::names::from_str_by_parse!(ComputePrecision, "precision");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a100_from_the_catalog_matches_the_datasheet() {
        // NVIDIA A100 datasheet (2021): 19.5 fp32, 312 bf16 TFLOP/s dense, 2,039 GB/s, NVLink
        // 600 GB/s total = 300 per direction, 400 W; DGX A100: 8 × HDR 200 Gb/s.
        let (hw, net) = catalog_system("a100-80gb").unwrap();
        assert_eq!(hw.class, DeviceClass::Ampere);
        assert_eq!(hw.peak(ComputePrecision::Fp32).unwrap().tflops(), 19.5);
        assert_eq!(hw.peak(ComputePrecision::Bf16).unwrap().tflops(), 312.0);
        assert!(hw.peak(ComputePrecision::Fp8).is_none());
        assert_eq!(hw.memory, Bytes::from_gib(80.0));
        assert_eq!(hw.memory_bandwidth.get(), 2039e9);
        assert_eq!(hw.intra_node_bandwidth, Some(BytesPerSecond(300e9)));
        assert_eq!(net.inter_link().bandwidth.get(), 200e9 / 8.0);
        assert_eq!(hw.tdp, Watts(400.0));
        // No idle_w in the catalog: 1/8 of TDP, marked as an estimate.
        assert_eq!(hw.idle_power, Watts(50.0));
        assert!(hw.idle_power_estimated);
    }

    #[test]
    fn overrides_fill_in_and_replace() {
        let d = crate::catalog::devices::lookup("tpuv4").unwrap();
        // TPU v4 has no catalogued per-chip link bandwidth and no reference server: no
        // intra-node tier until --intra-gbs gives one, and two chips working together are
        // refused naming it.
        let (hw, net) = system(d, &Overrides::default(), None).unwrap();
        assert!(hw.intra_node_bandwidth.is_none() && net.intra.is_none());
        let e = net
            .check_span(&hw.name, 2, "tp 2 × pp 1 per replica".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("TPU v4") && e.contains("--intra-gbs"), "{e}");
        let o = Overrides {
            intra_node_bandwidth: Some(BytesPerSecond(100e9)),
            idle_power: Some(Watts(30.0)),
            ..Overrides::default()
        };
        // No reference server either: no inter-node tier until --inter-gbit gives one.
        let (_, net) = system(d, &o, None).unwrap();
        assert!(net.inter.is_none());
        let (hw, net) = system(d, &o, Some(100.0)).unwrap();
        assert_eq!(net.inter.unwrap().bandwidth.get(), 100e9 / 8.0);
        assert_eq!(net.intra.unwrap().bandwidth.get(), 100e9);
        assert_eq!(hw.class, DeviceClass::Generic);
        assert_eq!(hw.idle_power, Watts(30.0));
        assert!(!hw.idle_power_estimated);
    }

    #[test]
    fn only_a_layout_that_leaves_the_node_needs_the_inter_node_tier() {
        // L40S: a PCIe card, no reference server, so no catalogued scale-out bandwidth.
        let d = crate::catalog::devices::lookup("l40s").unwrap();
        let (hw, net) = system(d, &Overrides::default(), None).unwrap();
        assert!(net.inter.is_none());
        // Within the node the model's inter-node traffic goes over the intra-node link.
        assert_eq!(net.inter_link(), net.intra_link());
        assert!(net.check_span(&hw.name, 8, "8".into()).is_ok());
        let e = net
            .check_span(&hw.name, 16, "the layout tp 1 × pp 1 × dp 16".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("L40S")
                && e.contains("--inter-gbit")
                && e.contains("dp 16 spans 16 devices"),
            "{e}"
        );
        // With a figure any span is fine.
        let (hw, net) = system(d, &Overrides::default(), Some(100.0)).unwrap();
        assert!(net.check_span(&hw.name, 64, "64".into()).is_ok());
    }

    #[test]
    fn only_devices_that_talk_inside_a_node_need_the_intra_node_link() {
        // MI300A and Max 1550: no catalogued intra-node link bandwidth (docs/methodology.md).
        for name in ["mi300a", "max-1550"] {
            let d = crate::catalog::devices::lookup(name).unwrap();
            let (hw, net) = system(d, &Overrides::default(), None).unwrap();
            assert!(
                hw.intra_node_bandwidth.is_none() && net.intra.is_none(),
                "{name}"
            );
            // One device talks to nobody: no link needed, none charged.
            assert!(net
                .check_span(&hw.name, 1, "tp 1 × pp 1 per replica".into())
                .is_ok());
            assert!(net.reaches(1));
            assert_eq!(
                crate::plan::collective::all_reduce(net.intra_link(), 1.0, 1e9),
                0.0
            );
            assert_eq!(
                0.0 * crate::plan::collective::p2p(net.intra_link(), 1e9),
                0.0
            );
            // Two devices in a node are refused, naming the option and the layout.
            for span in [2, 8, 16] {
                assert!(!net.reaches(span), "{name} {span}");
                let e = net
                    .check_span(
                        &hw.name,
                        span,
                        format!("the layout tp 1 × pp 1 × dp {span}"),
                    )
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains(&hw.name)
                        && e.contains("--intra-gbs")
                        && e.contains(&format!("dp {span} puts {} devices", span.min(8))),
                    "{e}"
                );
            }
            // One device per node talks only between nodes: the intra-node link is not needed.
            let (_, spread) = system(d, &Overrides::default(), Some(200.0)).unwrap();
            let spread = Network {
                gpus_per_node: 1,
                ..spread
            };
            assert!(spread.reaches(4));
            assert!(spread.check_span(&hw.name, 4, "4".into()).is_ok());
            let o = Overrides {
                intra_node_bandwidth: Some(BytesPerSecond(100e9)),
                ..Overrides::default()
            };
            let (hw, net) = system(d, &o, None).unwrap();
            assert_eq!(hw.intra_node_bandwidth, Some(BytesPerSecond(100e9)));
            assert_eq!(net.intra_link().bandwidth.get(), 100e9);
            assert!(net.check_span(&hw.name, 8, "8".into()).is_ok());
        }
    }

    #[test]
    fn a_network_without_intra_node_tier_serialises_without_the_field() {
        let (hw, net) = catalog_system("mi300a").unwrap();
        let v = serde_json::to_value(&hw).unwrap();
        assert!(v.get("intra_node_bandwidth").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<Hardware>(v).unwrap(), hw);
        let v = serde_json::to_value(net).unwrap();
        assert!(v.get("intra").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<Network>(v).unwrap(), net);
        let (hw, net) = catalog_system("h100").unwrap();
        let v = serde_json::to_value(&hw).unwrap();
        assert_eq!(v["intra_node_bandwidth"].as_f64(), Some(450e9));
        let v = serde_json::to_value(net).unwrap();
        assert_eq!(v["intra"]["bandwidth"].as_f64(), Some(450e9));
    }

    #[test]
    fn a_network_without_inter_node_tier_serialises_without_the_field() {
        let d = crate::catalog::devices::lookup("l40s").unwrap();
        let (_, net) = system(d, &Overrides::default(), None).unwrap();
        let v = serde_json::to_value(net).unwrap();
        assert!(v.get("inter").is_none(), "{v}");
        let back: Network = serde_json::from_value(v).unwrap();
        assert_eq!(back, net);
        let (_, net) = catalog_system("h100").unwrap();
        let v = serde_json::to_value(net).unwrap();
        assert_eq!(v["inter"]["bandwidth"].as_f64(), Some(50e9));
    }

    #[test]
    fn cpus_cannot_be_planned_and_say_why() {
        let e = catalog_system("epyc-7763").unwrap_err().to_string();
        assert!(e.contains("EPYC 7763") && e.contains("16-bit"), "{e}");
    }

    #[test]
    fn unknown_device_suggests_names() {
        let e = catalog_system("h1000").unwrap_err().to_string();
        assert!(e.contains("did you mean") && e.contains("h100"), "{e}");
    }
}
