//! The serialisable results of `amdahl infer` (schema `amdahl.infer/1`) and `amdahl infer
//! --search` (schema `amdahl.infer-search/1`), documented in docs/usage/infer.md. The field
//! names of `amdahl.infer/1` are a contract (`amdahl lifetime` reads them).

pub use super::charging::Charging;
use super::engine::Engine;
use super::error::InferError;
use super::intervals::{infer_intervals, Figures, InferIntervals};
use super::model::{estimate, setup_unchecked, Evaluation, InferMemory, Serving, Setup};
use super::precision::{KvFormat, WeightFormat};
use super::search::ServingCandidate;
use super::validation::InferCase;
use crate::catalog::grid::GridIntensity;
use crate::energy_validation::EnergyCase;
use crate::plan::error::divisors;
use crate::plan::{Hardware, ModelShape, Network};
use crate::power::ServerShare;
use crate::scaling::laws::alpha_eff_from_speedup;
use crate::units::Watts;
use serde::{Deserialize, Serialize};

pub const INFER_SCHEMA: &str = "amdahl.infer/1";
pub const INFER_SEARCH_SCHEMA: &str = "amdahl.infer-search/1";

/// Why this batch: given, or the smallest that sustains a requested rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BatchChoice {
    Given,
    /// The largest batch that fits (maximum load), when neither --batch nor --rate is given.
    MaxLoad,
    Rate {
        requests_per_s: f64,
    },
}

/// Végh's view of serving: the same request load (batch) as TP grows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TpPoint {
    pub tp: u32,
    pub tpot_s: f64,
    /// TPOT(tp=1) / TPOT(tp).
    pub speedup: f64,
    /// speedup / tp.
    pub efficiency: f64,
    /// α_eff = tp/(tp−1) · (S−1)/S; `None` at tp = 1.
    pub alpha_eff: Option<f64>,
    /// Share of the decode step spent in TP all-reduces (the non-parallel part).
    pub comm_share: f64,
    pub energy_per_token_j: f64,
    /// Whether the batch fits in memory at this TP.
    pub fits: bool,
}

/// The precision what-if: the same configuration with other weight formats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrecisionPoint {
    pub precision: WeightFormat,
    pub arithmetic: String,
    pub max_batch: u32,
    pub tpot_s: f64,
    pub ttft_s: f64,
    pub output_tokens_per_s: f64,
    pub energy_per_token_j: f64,
    pub fits: bool,
}

/// One point of the batch sweep behind the plots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BatchPoint {
    pub batch: u32,
    pub tpot_s: f64,
    pub e2e_s: f64,
    pub output_tokens_per_s: f64,
    pub energy_per_token_j: f64,
    pub power_per_gpu_w: f64,
}

/// Where a decode step's time goes (seconds; sums to `tpot_s`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecodeBreakdown {
    pub compute_s: f64,
    pub memory_s: f64,
    pub tp_comm_s: f64,
    pub pp_comm_s: f64,
    /// Kernels bound by neither: the per-kernel latency of the GEMM curve.
    pub kernel_latency_s: f64,
    pub overhead_s: f64,
    /// The serving engine's per-sequence time for the step's sequences (vLLM: per running
    /// sequence; memory-bound GPU work, docs/methodology.md "Engine per-sequence time"). The key
    /// keeps the name it was introduced under, when the time was read as host time.
    #[serde(default)]
    pub engine_host_s: f64,
}

impl DecodeBreakdown {
    /// The decode step of an evaluation, term by term.
    fn of(e: &Evaluation) -> Self {
        DecodeBreakdown {
            compute_s: e.decode_compute_s,
            memory_s: e.decode_memory_s,
            tp_comm_s: e.decode_comm_s,
            pp_comm_s: e.decode_p2p_s,
            kernel_latency_s: e.decode_latency_s,
            overhead_s: e.decode_overhead_s,
            engine_host_s: e.decode_host_s,
        }
    }
}

/// Result of `amdahl infer` (one configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InferResult {
    pub schema: String,
    pub model: ModelShape,
    pub parameters: f64,
    pub system: String,
    pub device_class: String,
    pub precision: WeightFormat,
    /// The GEMMs' arithmetic and whether the weight format is native or weight-only.
    pub arithmetic: String,
    pub kv_precision: KvFormat,
    /// The serving engine whose per-sequence time the steps include.
    #[serde(default)]
    pub engine: Engine,
    pub tp: u32,
    pub pp: u32,
    pub replicas: u32,
    pub gpus: u64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub batch: u32,
    pub batch_choice: BatchChoice,
    pub max_batch: u32,
    pub ttft_s: f64,
    pub tpot_s: f64,
    pub e2e_s: f64,
    pub output_tokens_per_s: f64,
    pub requests_per_s: f64,
    pub mfu: f64,
    pub mbu: f64,
    pub memory_per_gpu_bytes: f64,
    pub memory: InferMemory,
    pub power_per_gpu_w: f64,
    pub power_prefill_w: f64,
    pub power_decode_w: f64,
    pub tdp_w: f64,
    /// The board power limit set below the TDP (`--power-cap`), if any.
    #[serde(default)]
    pub power_cap_w: Option<f64>,
    pub idle_power_w: f64,
    pub idle_power_estimated: bool,
    /// IT energy at the devices per output token (before PUE).
    pub energy_per_token_j: f64,
    /// IT energy at the devices per request (before PUE).
    pub energy_per_request_j: f64,
    /// Facility energy (× PUE) of 1,000 requests, GPU scope.
    pub kwh_per_1000_requests: f64,
    /// The server the devices sit in (server scope), where one is known or given.
    #[serde(default)]
    pub server: Option<ServerShare>,
    /// Wall power per device with its share of the server (host and power-supply losses).
    #[serde(default)]
    pub power_per_gpu_server_w: Option<f64>,
    /// The server (wall) scope of `energy_per_token_j` and `energy_per_request_j`.
    #[serde(default)]
    pub energy_per_token_server_j: Option<f64>,
    #[serde(default)]
    pub energy_per_request_server_j: Option<f64>,
    /// Facility energy (× PUE) of 1,000 requests at the server scope: what a data centre pays.
    #[serde(default)]
    pub kwh_per_1000_requests_server: Option<f64>,
    pub pue: f64,
    pub pue_source: String,
    pub grid_g_per_kwh: f64,
    pub grid: GridIntensity,
    /// Includes PUE.
    pub co2e_per_1000_requests_g: f64,
    pub decode: DecodeBreakdown,
    pub tp_scaling: Vec<TpPoint>,
    pub precision_whatif: Vec<PrecisionPoint>,
    pub batch_sweep: Vec<BatchPoint>,
    pub notes: Vec<String>,
    /// Prediction intervals of throughput, TTFT, TPOT and energy per token, from the validation
    /// sets (docs/methodology.md, "Prediction intervals"); absent in results saved before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<InferIntervals>,
    /// Measured or fitted constants that replaced the catalog's (`--device-profile`,
    /// `--calibration`): one line per source, as printed under the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tuning: Vec<String>,
}

impl InferResult {
    /// This result with the intervals of its figures, classed by the device generation `arch`
    /// and the weight format.
    pub fn with_intervals(
        mut self,
        serving: &[InferCase],
        energy: &[(EnergyCase, Option<String>)],
        arch: &str,
    ) -> Self {
        let figures = Figures {
            output_tokens_per_s: self.output_tokens_per_s,
            ttft_s: self.ttft_s,
            tpot_s: self.tpot_s,
            energy_per_token_j: self.energy_per_token_j,
        };
        self.intervals = Some(infer_intervals(
            serving,
            energy,
            (arch, self.precision.name()),
            &figures,
        ));
        self
    }
}

/// Everything a result is built from.
pub struct Context<'a> {
    pub model: &'a ModelShape,
    pub hw: &'a Hardware,
    pub net: &'a Network,
    pub setup: &'a Setup,
    pub charging: &'a Charging,
}

impl InferResult {
    pub fn new(c: &Context, e: &Evaluation, choice: BatchChoice) -> Result<Self, InferError> {
        let s = c.setup;
        let sv = s.serving;
        let energy_1000 = e.energy_per_request_j * 1000.0;
        // The wall is linear in the GPU's power, so the cycle's mean power scales its energy.
        let wall = c.hw.wall_power(Watts(e.power_per_gpu_w)).map(Watts::get);
        let to_wall = wall.map(|w| w / e.power_per_gpu_w);
        let mut notes = Vec::new();
        if !s.arithmetic.native {
            notes.push(format!(
                "{} weights are dequantised to {} for the arithmetic (weight-only): bytes shrink, \
                 FLOPs do not",
                sv.weights.name(),
                s.arithmetic.precision.name()
            ));
        }
        if c.model.kv_heads < sv.tp {
            notes.push(format!(
                "tp {} > {} KV heads: each KV head is replicated {}× (as vLLM does)",
                sv.tp,
                c.model.kv_heads,
                sv.tp / c.model.kv_heads.max(1)
            ));
        }
        if c.hw.tuning.power.is_none() && crate::power::active_of(&c.hw.arch).is_none() {
            notes.push(format!(
                "power: the energy validation set has no measurement of a {} device; its busy \
                 draw is the mean of the fitted generations ({:.3} × TDP), not fitted for it",
                if c.hw.arch.is_empty() {
                    "this"
                } else {
                    c.hw.arch.as_str()
                },
                crate::power::ACTIVE_UNFITTED
            ));
        }
        if c.hw.idle_power_estimated {
            notes.push(format!(
                "idle power {:.0} W is 1/8 of TDP, an estimate; measure it and pass --idle-w",
                c.hw.idle_power.get()
            ));
        }
        Ok(InferResult {
            schema: INFER_SCHEMA.into(),
            model: c.model.clone(),
            parameters: c.model.params(),
            system: c.hw.name.clone(),
            device_class: c.hw.class.name().into(),
            precision: sv.weights,
            arithmetic: s.arithmetic.describe(sv.weights),
            kv_precision: sv.kv,
            engine: sv.engine,
            tp: sv.tp,
            pp: sv.pp,
            replicas: sv.replicas,
            gpus: sv.gpus(),
            input_tokens: s.requests.input,
            output_tokens: s.requests.output,
            batch: e.batch,
            batch_choice: choice,
            max_batch: e.max_batch,
            ttft_s: e.ttft_s,
            tpot_s: e.tpot_s,
            e2e_s: e.e2e_s,
            output_tokens_per_s: e.output_tokens_per_s,
            requests_per_s: e.requests_per_s,
            mfu: e.mfu,
            mbu: e.mbu,
            memory_per_gpu_bytes: e.memory.total.get(),
            memory: e.memory,
            power_per_gpu_w: e.power_per_gpu_w,
            power_prefill_w: e.power_prefill_w,
            power_decode_w: e.power_decode_w,
            tdp_w: c.hw.tdp.get(),
            power_cap_w: c.hw.power_cap.map(Watts::get),
            idle_power_w: c.hw.idle_power.get(),
            idle_power_estimated: c.hw.idle_power_estimated,
            energy_per_token_j: e.energy_per_token_j,
            energy_per_request_j: e.energy_per_request_j,
            kwh_per_1000_requests: energy_1000 * c.charging.pue / crate::units::JOULES_PER_KWH,
            server: c.hw.server.clone(),
            power_per_gpu_server_w: wall,
            energy_per_token_server_j: to_wall.map(|k| k * e.energy_per_token_j),
            energy_per_request_server_j: to_wall.map(|k| k * e.energy_per_request_j),
            kwh_per_1000_requests_server: to_wall
                .map(|k| k * energy_1000 * c.charging.pue / crate::units::JOULES_PER_KWH),
            pue: c.charging.pue,
            pue_source: c.charging.pue_source.clone(),
            grid_g_per_kwh: c.charging.intensity().get(),
            grid: c.charging.grid.clone(),
            co2e_per_1000_requests_g: c.charging.co2e_g(energy_1000),
            decode: DecodeBreakdown::of(e),
            tp_scaling: tp_scaling(c, e.batch)?,
            precision_whatif: precision_whatif(c, e.batch)?,
            batch_sweep: batch_sweep(c),
            notes,
            intervals: None,
            tuning: c.hw.tuning.provenance.clone(),
        })
    }
}

/// TPOT at a fixed batch for every TP the model's heads allow within a node (Végh's view:
/// per-layer all-reduces are the part that does not shrink with TP).
fn tp_scaling(c: &Context, batch: u32) -> Result<Vec<TpPoint>, InferError> {
    let sv = c.setup.serving;
    let mut out: Vec<TpPoint> = Vec::new();
    let mut base: Option<f64> = None;
    for tp in divisors(u64::from(c.net.gpus_per_node)) {
        let tp = tp as u32;
        let ok_heads = c.model.heads.is_multiple_of(tp)
            && (c.model.kv_heads.is_multiple_of(tp) || tp.is_multiple_of(c.model.kv_heads));
        // Without an inter-node figure, a TP that would take the replica past one node is left
        // out rather than refused: the configuration asked for stays within one. Likewise
        // without an intra-node figure, every TP that puts two devices of a node to work.
        let out_of_reach = !c.net.reaches(u64::from(tp) * u64::from(sv.pp));
        if !ok_heads || out_of_reach {
            continue;
        }
        let serving = Serving {
            tp,
            replicas: 1,
            ..sv
        };
        let s = setup_unchecked(c.model, c.hw, c.net, serving, c.setup.requests)?;
        let e = estimate(&s, c.hw, c.net, batch);
        let t1 = *base.get_or_insert(e.tpot_s);
        let speedup = t1 / e.tpot_s;
        let n = f64::from(tp);
        out.push(TpPoint {
            tp,
            tpot_s: e.tpot_s,
            speedup,
            efficiency: speedup / n,
            alpha_eff: (tp > 1).then(|| alpha_eff_from_speedup(n, speedup)),
            comm_share: e.decode_comm_s / e.tpot_s,
            energy_per_token_j: e.energy_per_token_j,
            fits: batch <= s.max_batch,
        });
    }
    Ok(out)
}

/// The same configuration and batch with each weight format (bf16 → fp8 → int8 → int4, and fp4
/// on a device with fp4 arithmetic).
fn precision_whatif(c: &Context, batch: u32) -> Result<Vec<PrecisionPoint>, InferError> {
    WeightFormat::offered(c.hw)
        .iter()
        .map(|&w| {
            let serving = Serving {
                weights: w,
                ..c.setup.serving
            };
            let s = setup_unchecked(c.model, c.hw, c.net, serving, c.setup.requests)?;
            let e = estimate(&s, c.hw, c.net, batch);
            Ok(PrecisionPoint {
                precision: w,
                arithmetic: s.arithmetic.describe(w),
                max_batch: s.max_batch,
                tpot_s: e.tpot_s,
                ttft_s: e.ttft_s,
                output_tokens_per_s: e.output_tokens_per_s,
                energy_per_token_j: e.energy_per_token_j,
                fits: batch <= s.max_batch,
            })
        })
        .collect()
}

/// Powers of two up to the largest batch that fits, and that batch.
fn batch_sweep(c: &Context) -> Vec<BatchPoint> {
    let max = c.setup.max_batch;
    let mut batches: Vec<u32> = std::iter::successors(Some(1u32), |b| b.checked_mul(2))
        .take_while(|&b| b < max)
        .collect();
    batches.push(max.max(1));
    batches
        .into_iter()
        .map(|b| {
            let e = estimate(c.setup, c.hw, c.net, b);
            BatchPoint {
                batch: b,
                tpot_s: e.tpot_s,
                e2e_s: e.e2e_s,
                output_tokens_per_s: e.output_tokens_per_s,
                energy_per_token_j: e.energy_per_token_j,
                power_per_gpu_w: e.power_per_gpu_w,
            }
        })
        .collect()
}

/// Result of `amdahl infer --search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InferSearchResult {
    pub schema: String,
    pub model: ModelShape,
    pub system: String,
    pub gpus: u64,
    pub pp: u32,
    pub kv_precision: KvFormat,
    /// The serving engine whose per-sequence time the steps include.
    #[serde(default)]
    pub engine: Engine,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub max_ttft_s: Option<f64>,
    pub max_tpot_s: Option<f64>,
    pub pue: f64,
    pub grid_g_per_kwh: f64,
    /// Configurations evaluated (TP × precision × batch that fit).
    pub evaluated: u64,
    /// Of those, meeting the latency limits.
    pub feasible: u64,
    pub wall_s: f64,
    pub configs_per_s: f64,
    /// Best first by energy per output token; the best batch of each (TP, precision).
    pub ranked: Vec<ServingCandidate>,
    /// Lowest energy per token for each TPOT: no other feasible configuration is both faster
    /// and cheaper. Ordered by TPOT.
    pub pareto: Vec<ServingCandidate>,
    /// Configurations skipped and why (TP the heads do not allow, nothing fits).
    pub skipped: Vec<String>,
}

impl InferSearchResult {
    /// Every listed candidate with the intervals of its class (the device generation `arch`
    /// and its weight format); the search itself is untouched.
    pub fn with_intervals(
        mut self,
        serving: &[InferCase],
        energy: &[(EnergyCase, Option<String>)],
        arch: &str,
    ) -> Self {
        for c in self.ranked.iter_mut().chain(self.pareto.iter_mut()) {
            let figures = Figures {
                output_tokens_per_s: c.output_tokens_per_s,
                ttft_s: c.ttft_s,
                tpot_s: c.tpot_s,
                energy_per_token_j: c.energy_per_token_j,
            };
            c.intervals = Some(infer_intervals(
                serving,
                energy,
                (arch, c.precision.name()),
                &figures,
            ));
        }
        self
    }
}
