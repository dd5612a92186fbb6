//! The model and system options `plan` and `infer` share: which transformer (`--model NAME`,
//! `--model-file`, or shape flags) and which device and network (`--system`, `--catalog`, link
//! and power overrides), resolved the same way for both.

use amdahl_model::calibrate::Calibration;
use amdahl_model::catalog::Catalogs;
use amdahl_model::infer::{Engine, KvFormat, WeightFormat};
use amdahl_model::plan::{system, Hardware, Link, ModelShape, Moe, Network, Overrides};
use amdahl_model::power::ServerShare;
use amdahl_model::profile::DeviceProfile;
use amdahl_model::units::{BytesPerSecond, Seconds, Watts};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// The options that name a whole shape: the shape flags cannot refine them (they used to be
/// ignored silently with --model). --seq and the attention, embedding and MoE flags can.
const SHAPE_SOURCES: [&str; 2] = ["model", "model_file"];

/// Which transformer.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// Model from `amdahl catalog models`, by name or alias (gpt3-175b, mt-nlg-530b, llama2-70b,
    /// llama3-8b, megatron-1.7b … megatron-1t); decoder-only transformers.
    #[arg(long, conflicts_with_all = ["model_file", "layers"])]
    pub model: Option<String>,
    /// Model shape as JSON: {"name", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "gated_mlp"},
    /// optionally "head_dim", "parallel_block", "tied_embeddings", "context" (the longest request
    /// a server of it takes, where longer than "seq"), "moe": {"experts", "top_k",
    /// "shared_experts", "expert_ffn", "moe_layers", "capacity_factor"} (docs/usage/plan.md).
    #[arg(long, conflicts_with = "layers")]
    pub model_file: Option<PathBuf>,
    /// Transformer layers (with --hidden, --heads, --seq, --vocab).
    #[arg(long, requires_all = ["hidden", "heads", "seq", "vocab"])]
    pub layers: Option<u32>,
    /// Hidden size (model width), with --layers; a --model's or --model-file's shape is its own
    /// (edit a --model-file to change it).
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub hidden: Option<u32>,
    /// Attention heads, with --layers.
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub heads: Option<u32>,
    /// Key/value heads (grouped-query attention), with --layers; default: --heads.
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub kv_heads: Option<u32>,
    /// MLP width, with --layers; default 4 × hidden.
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub ffn: Option<u32>,
    /// Gated (SwiGLU) MLP with three matrices, with --layers.
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub gated: bool,
    /// Sequence length in tokens (also overrides a --model's or --model-file's); for serve and
    /// infer, the longest request (prompt + output) the served checkpoint takes.
    #[arg(long)]
    pub seq: Option<u32>,
    /// Vocabulary size, with --layers.
    #[arg(long, conflicts_with_all = SHAPE_SOURCES)]
    pub vocab: Option<u32>,
    /// Per-head width where it is not hidden / heads (PaLM: 256); applies to any model.
    #[arg(long, value_parser = crate::domain::count)]
    pub head_dim: Option<u32>,
    /// Parallel attention + MLP block (GPT-J, GPT-NeoX, PaLM): one tensor-parallel all-reduce
    /// per layer instead of two; `--parallel-block false` turns a catalog's off.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub parallel_block: Option<bool>,
    /// Output layer tied to the input embedding (true) or a separate matrix (false); default:
    /// the catalog's `tied_embeddings` (Llama: false), true for shapes given by flags.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub tied_embeddings: Option<bool>,
    /// Mixture of experts: routed experts per MoE layer (with --top-k on a dense model).
    #[arg(long, value_parser = crate::domain::count)]
    pub experts: Option<u32>,
    /// Routed experts each token uses (top-k routing).
    #[arg(long, value_parser = crate::domain::count)]
    pub top_k: Option<u32>,
    /// Experts every token uses besides its routed ones (DeepSeekMoE); default 0.
    #[arg(long)]
    pub shared_experts: Option<u32>,
    /// Inner MLP width of one expert; default --ffn.
    #[arg(long, value_parser = crate::domain::count)]
    pub expert_ffn: Option<u32>,
    /// How many layers are MoE layers (the rest dense); default all.
    #[arg(long, value_parser = crate::domain::count)]
    pub moe_layers: Option<u32>,
    /// Expert capacity over the mean load, ≥ 1 (dropless routing: the load imbalance); default 1.
    #[arg(long)]
    pub capacity_factor: Option<f64>,
}

/// Which device, node and network.
#[derive(clap::Args, Debug, Clone)]
pub struct SystemArgs {
    /// Device from `amdahl catalog devices`, by name or alias (a100-80gb, a100-40gb, h100,
    /// h200, v100-32gb, mi300x, …).
    #[arg(long, default_value = "a100-80gb")]
    pub system: String,
    /// Override or extend a catalog with a CSV file in the format of data/*.csv (repeatable).
    #[arg(long = "catalog", value_name = "FILE")]
    pub catalogs: Vec<PathBuf>,
    /// Devices per node: tensor parallelism stays inside a node, data and pipeline parallelism
    /// cross nodes.
    #[arg(long, default_value_t = 8, value_parser = crate::domain::count)]
    pub gpus_per_node: u32,
    /// Inter-node bandwidth per GPU in Gbit/s (default: the catalog's reference server).
    #[arg(long, value_parser = crate::domain::positive)]
    pub inter_gbit: Option<f64>,
    /// Inter-node latency per message in µs.
    #[arg(long, value_parser = crate::domain::non_negative)]
    pub inter_latency_us: Option<f64>,
    /// Achieved fraction of the inter-node bandwidth.
    #[arg(long, value_parser = crate::domain::fraction)]
    pub inter_eff: Option<f64>,
    /// Intra-node (NVLink) bandwidth per GPU and direction in GB/s.
    #[arg(long, value_parser = crate::domain::positive)]
    pub intra_gbs: Option<f64>,
    /// Device idle power in W (default: the catalog's idle_w, else 1/8 of TDP, an estimate).
    #[arg(long, value_parser = crate::domain::non_negative)]
    pub idle_w: Option<f64>,
    /// Device TDP in W.
    #[arg(long, value_parser = crate::domain::device_watts)]
    pub tdp_w: Option<f64>,
    /// Board power limit per device in W (as `nvidia-smi -pl` sets it): the compute clock falls
    /// until the device draws at most this; memory bandwidth holds. Between the idle power and
    /// the TDP.
    #[arg(long, value_parser = crate::domain::positive, value_name = "W")]
    pub power_cap: Option<f64>,
    /// Server the devices sit in, for the server (wall) scope of energy (`amdahl catalog
    /// servers`; default: the catalog's server for the device, e.g. dgx-h100 for h100).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Non-GPU power of one server under load in W (CPUs, DRAM, NICs, fans, switches), measured,
    /// in place of the catalog's estimate; shared by its --gpus-per-node devices.
    #[arg(long, value_parser = crate::domain::non_negative, value_name = "W")]
    pub host_w: Option<f64>,
    /// A device profile (`amdahl bench … --profile-out`) of the --system device: its measured
    /// GEMM curve, bandwidth and power replace the catalog's constants.
    #[arg(long, value_name = "FILE")]
    pub device_profile: Option<PathBuf>,
    /// A calibration (`amdahl calibrate -o`) of the --system device: its fitted constants
    /// replace the model's (after any --device-profile).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
}

/// Say under a table which measured or fitted constants replaced the catalog's.
pub fn note_tuning(hw: &Hardware) {
    for line in &hw.tuning.provenance {
        crate::output::note(line);
    }
}

/// Read a JSON file of the type `T`, naming the file and the flag in every error.
pub fn read_json<T: serde::de::DeserializeOwned>(flag: &str, path: &std::path::Path) -> Result<T> {
    let text = crate::input::read_text(path).with_context(|| format!("reading {flag}"))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{flag} {}: not a file of the expected kind", path.display()))
}

impl SystemArgs {
    /// The `--calibration` file, read again for its residuals (the prediction intervals of a
    /// calibrated model come from them, not from the validation set).
    pub fn calibration(&self) -> Result<Option<Calibration>> {
        self.calibration
            .as_deref()
            .map(|p| read_json("--calibration", p))
            .transpose()
    }

    /// Refuse a `--calibration` whose time per running sequence was fitted to another
    /// serving engine than `engine` (`--engine`).
    pub fn check_engine(&self, engine: Engine) -> Result<()> {
        if let (Some(cal), Some(p)) = (self.calibration()?, &self.calibration) {
            cal.check_engine(engine, &p.display().to_string())?;
        }
        Ok(())
    }

    /// Lay `--device-profile` and `--calibration` over the catalog's device; the user's own
    /// `--idle-w` still wins over a profile's idle power.
    fn tune(&self, hw: &mut Hardware) -> Result<()> {
        if let Some(p) = &self.device_profile {
            let profile: DeviceProfile = read_json("--device-profile", p)?;
            let idle = (hw.idle_power, hw.idle_power_estimated);
            profile.apply(hw, &p.display().to_string())?;
            if self.idle_w.is_some() {
                (hw.idle_power, hw.idle_power_estimated) = idle;
            }
        }
        if let Some(p) = &self.calibration {
            let cal: Calibration = read_json("--calibration", p)?;
            cal.apply(hw, &p.display().to_string())?;
        }
        Ok(())
    }
}

impl ModelArgs {
    /// The model: a catalogued name, a JSON shape file, or shape flags; then the attention,
    /// embedding and mixture-of-experts overrides (`--head-dim`, `--experts`, …).
    pub fn resolve(&self, c: &Catalogs) -> Result<ModelShape> {
        let base = self.base(c)?;
        self.overrides(base)
    }

    /// Apply the flags that refine any model's shape.
    fn overrides(&self, mut m: ModelShape) -> Result<ModelShape> {
        // The sequence length is a choice of the run, not of the model (Mixtral's 32k context
        // is not its training sequence); it used to be ignored silently with --model.
        if let Some(s) = self.seq {
            // For `serve` and `infer`, the longest request the run allows: it replaces the
            // checkpoint's context too.
            m.seq = s;
            m.context = None;
        }
        if let Some(d) = self.head_dim {
            m.head_dim = Some(d);
        }
        if let Some(p) = self.parallel_block {
            m.parallel_block = p;
        }
        if let Some(t) = self.tied_embeddings {
            m.tied_embeddings = t;
        }
        let moe_flags = self.top_k.is_some()
            || self.shared_experts.is_some()
            || self.expert_ffn.is_some()
            || self.moe_layers.is_some()
            || self.capacity_factor.is_some();
        let mut moe = match (m.moe, self.experts) {
            (Some(e), _) => e,
            (None, Some(experts)) => Moe {
                experts,
                top_k: self.top_k.context(
                    "--experts turns a dense model into a mixture of experts: give --top-k \
                     (routed experts per token) too",
                )?,
                shared_experts: 0,
                expert_ffn: m.ffn,
                moe_layers: m.layers,
                capacity_factor: 1.0,
            },
            (None, None) if moe_flags => bail!(
                "{} is a dense model: --top-k, --shared-experts, --expert-ffn, --moe-layers and \
                 --capacity-factor need --experts N (and --top-k K) to make it a mixture of experts",
                m.name
            ),
            (None, None) => return Ok(m),
        };
        if let Some(e) = self.experts {
            moe.experts = e;
        }
        if let Some(k) = self.top_k {
            moe.top_k = k;
        }
        if let Some(s) = self.shared_experts {
            moe.shared_experts = s;
        }
        if let Some(f) = self.expert_ffn {
            moe.expert_ffn = f;
        }
        if let Some(l) = self.moe_layers {
            moe.moe_layers = l;
        }
        if let Some(cf) = self.capacity_factor {
            moe.capacity_factor = cf;
        }
        m.moe = Some(moe);
        Ok(m)
    }

    fn base(&self, c: &Catalogs) -> Result<ModelShape> {
        if let Some(name) = &self.model {
            let m = c.models.lookup(name).context("--model")?;
            return Ok(ModelShape::from_catalog(m)?);
        }
        if let Some(path) = &self.model_file {
            let text = crate::input::read_text(path).context("reading the --model-file")?;
            return serde_json::from_str(&text).with_context(|| {
                format!(
                    "parsing model file {} (expected JSON with name, layers, hidden, heads, \
                 kv_heads, ffn, vocab, seq, gated_mlp)",
                    path.display()
                )
            });
        }
        match (self.layers, self.hidden, self.heads, self.seq, self.vocab) {
            (Some(layers), Some(hidden), Some(heads), Some(seq), Some(vocab)) => Ok(ModelShape {
                name: "custom".into(),
                layers,
                hidden,
                heads,
                kv_heads: self.kv_heads.unwrap_or(heads),
                ffn: self.ffn.unwrap_or(hidden.saturating_mul(4)),
                vocab,
                seq,
                gated_mlp: self.gated,
                ..ModelShape::default()
            }),
            _ => bail!(
                "give a model: --model NAME, --model-file F, or --layers L --hidden H --heads A \
             --seq S --vocab V"
            ),
        }
    }
}

impl SystemArgs {
    /// The server scope: `--server`, else the catalog's server for the device; its host replaced
    /// by `--host-w` when given. A server built around another device is refused.
    fn server_share(&self, c: &Catalogs, hw: &Hardware) -> Result<Option<ServerShare>> {
        let server = match &self.server {
            Some(name) => {
                let s = c.servers.lookup(name).context("--server")?;
                if !s.gpu.eq_ignore_ascii_case(&hw.name) {
                    let fit = c.servers.for_gpu(&hw.name).map_or(String::new(), |f| {
                        format!(
                            ", or --server {} for the {}",
                            f.aliases.first().unwrap_or(&f.name),
                            hw.name
                        )
                    });
                    bail!(
                        "--server {name}: the {} holds {} × {}, not the {} of --system; give \
                         --system {}{fit}",
                        s.name,
                        s.gpus,
                        s.gpu,
                        hw.name,
                        c.devices.lookup(&s.gpu).map_or(s.gpu.clone(), |d| d
                            .aliases
                            .first()
                            .cloned()
                            .unwrap_or(d.name.clone())),
                    );
                }
                if s.gpus != self.gpus_per_node {
                    bail!(
                        "--server {name} holds {} GPUs, --gpus-per-node is {}: give \
                         --gpus-per-node {}",
                        s.gpus,
                        self.gpus_per_node,
                        s.gpus
                    );
                }
                Some(ServerShare::of_server(s, hw.tdp))
            }
            None => hw.server.clone(),
        };
        Ok(match self.host_w {
            Some(w) => Some(ServerShare {
                name: "given (--host-w)".into(),
                host_w_per_gpu: w / f64::from(self.gpus_per_node),
                psu_efficiency: server.as_ref().map_or(0.96, |s| s.psu_efficiency),
                estimated: false,
                source: format!(
                    "--host-w {w}: the user's figure for one server of {} devices",
                    self.gpus_per_node
                ),
            }),
            None => server,
        })
    }

    /// The device of the catalog with the user's overrides, and its node's network.
    pub fn resolve(&self, c: &Catalogs) -> Result<(Hardware, Network)> {
        let dev = c.devices.lookup(&self.system).context("--system")?;
        let overrides = Overrides {
            intra_node_bandwidth: self.intra_gbs.map(|x| BytesPerSecond(x * 1e9)),
            tdp: self.tdp_w.map(Watts),
            idle_power: self.idle_w.map(Watts),
        };
        let (mut hw, mut net) = system(dev, &overrides, self.inter_gbit)?;
        net.gpus_per_node = self.gpus_per_node;
        if let Some(x) = self.inter_latency_us {
            if !(x >= 0.0 && x.is_finite()) {
                bail!("--inter-latency-us {x} must be a non-negative number");
            }
            inter_tier(&mut net, &hw, "--inter-latency-us")?.latency = Seconds(x * 1e-6);
        }
        if let Some(x) = self.inter_eff {
            if !(x > 0.0 && x <= 1.0) {
                bail!("--inter-eff {x} must be in (0, 1]");
            }
            inter_tier(&mut net, &hw, "--inter-eff")?.efficiency = x;
        }
        for (what, v) in [
            net.inter.map(|l| ("--inter-gbit", l.bandwidth.get())),
            net.intra.map(|l| ("--intra-gbs", l.bandwidth.get())),
            Some(("--tdp-w", hw.tdp.get())),
        ]
        .into_iter()
        .flatten()
        {
            if !(v > 0.0 && v.is_finite()) {
                bail!("{what} must be a positive number");
            }
        }
        hw.server = self.server_share(c, &hw)?;
        self.tune(&mut hw)?;
        if let Some(cap) = self.power_cap {
            let cap = cap_in_range(&hw, "--power-cap", cap)?;
            hw.power_cap = (cap < hw.tdp).then_some(cap);
        }
        if !(hw.idle_power.get() >= 0.0 && hw.idle_power.get() <= hw.tdp.get()) {
            bail!(
                "--idle-w must be between 0 and the TDP ({} W)",
                hw.tdp.get()
            );
        }
        Ok((hw, net))
    }
}

/// The inter-node tier an `--inter-…` option refines: refused, naming `--inter-gbit`, where the
/// device has none (no reference server in the catalog and no --inter-gbit).
fn inter_tier<'a>(net: &'a mut Network, hw: &Hardware, flag: &str) -> Result<&'a mut Link> {
    match net.inter.as_mut() {
        Some(l) => Ok(l),
        None => bail!(
            "{flag} refines the inter-node network, and the catalog has no reference-server \
             inter-node bandwidth for {}: give --inter-gbit (Gbit/s per device) too",
            hw.name
        ),
    }
}

/// A power cap the device can run under: above its idle power, at most its TDP.
fn cap_in_range(hw: &Hardware, flag: &str, cap: f64) -> Result<Watts> {
    let (idle, tdp) = (hw.idle_power.get(), hw.tdp.get());
    if cap > idle && cap <= tdp {
        return Ok(Watts(cap));
    }
    bail!(
        "{flag} {cap} W is outside the {}'s range: above its idle power ({idle:.0} W{}) and at \
         most its TDP ({tdp:.0} W)",
        hw.name,
        if hw.idle_power_estimated {
            ", an estimate: set --idle-w"
        } else {
            ""
        }
    )
}

/// `--search-power-cap W,W,…`: each between the device's idle power and its TDP.
pub fn search_caps(hw: &Hardware, caps: &[f64]) -> Result<Vec<Watts>> {
    caps.iter()
        .map(|&c| cap_in_range(hw, "--search-power-cap", c))
        .collect()
}

/// The number formats of a served model, shared by `infer` and `serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingFormats {
    /// Weight format: bf16/fp16, fp8 (native on Hopper/Ada/Blackwell/MI300, else weight-only),
    /// fp8-mixed (Meta's Llama 3.1 FP8 checkpoints: fp8 MLPs, 16-bit attention and first and
    /// last layers), int8 or int4 weight-only (16-bit arithmetic), fp4 = nvfp4 (NVFP4) or mxfp4
    /// (OCP MXFP4; both native on Blackwell).
    /// The embedding and LM head stay 16-bit in every format.
    #[arg(
        help_heading = "Serving",
        long,
        value_parser = crate::domain::model_enum::<WeightFormat>(&WeightFormat::NAMES, &[]),
        default_value = "bf16"
    )]
    pub precision: WeightFormat,
    /// KV-cache format (fp4 = nvfp4: an NVFP4 cache, on Blackwell only).
    #[arg(
        help_heading = "Serving",
        long,
        value_parser = crate::domain::model_enum::<KvFormat>(&KvFormat::NAMES, &[]),
        default_value = "bf16"
    )]
    pub kv_precision: KvFormat,
    /// Serving engine: vllm adds its time per running sequence in every step (memory-bound GPU
    /// work: sampling, input preparation; fitted on published vLLM 0.11 runs, the figure in
    /// `amdahl catalog validation --energy`); tensorrt-llm and sglang have the fixed per-step
    /// overhead only, and sglang prefills apart in `serve`.
    #[arg(
        help_heading = "Serving",
        long,
        value_parser = crate::domain::model_enum::<Engine>(&Engine::NAMES, &[]),
        default_value = "tensorrt-llm"
    )]
    pub engine: Engine,
    /// The engine's share of device memory, 0 < F ≤ 1 [default: 0.9, each engine's own]:
    /// vLLM's --gpu-memory-utilization and SGLang's --mem-fraction-static (of all the memory,
    /// weights included), TensorRT-LLM's free_gpu_memory_fraction (of the memory the weights
    /// leave, all of it KV cache).
    #[arg(help_heading = "Serving", long, value_name = "F", value_parser = memory_fraction)]
    pub gpu_memory_fraction: Option<f64>,
}

/// `--gpu-memory-fraction`: a share, above 0 and at most 1.
fn memory_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number: give a share such as 0.9"))?;
    if f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(format!(
            "{f} is not a share of the memory: give a number above 0 and at most 1 (0.9 is the \
             engines' default)"
        ))
    }
}
