//! Memory per device: weights, gradients, optimizer state (by ZeRO stage), activations.
//!
//! Sources: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
//! Parameter Models", §3.1 (mixed-precision Adam: 2 + 2 + 12 bytes per parameter) and §5
//! (stages 1–3 shard optimizer state, gradients, parameters over DP); Korthikanti et al. 2022,
//! "Reducing Activation Recomputation in Large Transformer Models", §4 (activation bytes per
//! layer, eqs. 1–5) and §4.2.3 (pipeline: the first stage holds p microbatches, ×(1 + (p−1)/(pv))
//! when interleaved).

use super::counts;
use super::hardware::ComputePrecision;
use super::optimizer;
use super::recompute::{self, RecomputeModule, RecomputeModules};
use super::spec::ModelShape;
use super::spec::{Layout, Recompute};
use super::stages::stage_layers;
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// Memory of the most loaded device (the first pipeline stage).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub weights: Bytes,
    pub gradients: Bytes,
    pub optimizer: Bytes,
    pub activations: Bytes,
    pub total: Bytes,
    pub capacity: Bytes,
    pub fits: bool,
}

/// Bytes per parameter of (weights, gradients, optimizer state) before ZeRO sharding, for a
/// layout with fp32 Adam moments and 16-bit gradients (ZeRO §3.1: K = 12); the full rule, with
/// `--optimizer-dtype` and `--fp32-grads`, is [`super::optimizer::bytes_per_param`].
pub fn bytes_per_param(p: ComputePrecision) -> (f64, f64, f64) {
    optimizer::bytes_per_param(&Layout {
        precision: p,
        ..Layout::default()
    })
}

/// Activation bytes of one layer for one microbatch of `b` sequences, per tensor-parallel rank
/// (Korthikanti et al. 2022, Table 2), generalised to GQA and gated MLPs:
/// per token-hidden element, attention keeps 2 (LN out), 2 (Q), 4·k/a (K, V), 2 (context) and
/// 1 (dropout mask) bytes, plus 5 bytes per score element (softmax out, dropout mask and out);
/// the MLP keeps 2 + 4f/h (6f/h gated) + 1; the two LayerNorm inputs 4. Their sum is 34 + 5as/h
/// for a GPT layer. The 10 bytes of LayerNorm/dropout tensors are split by TP only with
/// sequence parallelism. With a head width other than h/a, Q, K, V and the context scale with
/// their widths; an MoE layer keeps its MLP tensors for every dispatched copy of a token
/// (top_k × capacity factor, plus shared experts) and 2 bytes for each copy's input
/// ([`counts::mean_mlp_width`], [`counts::mean_dispatched_copies`]). With context parallelism every
/// tensor holds `s/cp` tokens while each query's score row still spans all `s` keys.
pub fn layer_activation_bytes(model: &ModelShape, l: &Layout, b: f64, mode: Recompute) -> f64 {
    let cp = f64::from(l.cp.max(1));
    let (s, h, a) = (
        f64::from(model.seq) / cp,
        f64::from(model.hidden),
        f64::from(model.heads),
    );
    let t = f64::from(l.tp);
    let scale = l.precision.activation_bytes() / 2.0;
    let sbh = s * b * h;
    let f = counts::mean_mlp_width(model);
    let split = (4.0 * model.q_width() + 4.0 * model.kv_width()) / h
        + if model.gated_mlp { 6.0 } else { 4.0 } * f / h
        + 2.0 * counts::mean_dispatched_copies(model);
    let unsplit_div = if l.sp { t } else { 1.0 };
    let unsplit = 10.0 / unsplit_div;
    // FlashAttention keeps no score-sized tensor (only per-row softmax statistics).
    let scores = if l.flash_attention {
        0.0
    } else {
        5.0 * a * s * cp / h / t
    };
    let modules = l.recompute_modules;
    scale
        * sbh
        * match mode {
            Recompute::None => {
                unsplit + split / t + scores
                    - fp8_linear_input_saving(model, l, RecomputeModules::new(&[]), t, unsplit_div)
            }
            // The named modules' outputs are not stored (plan/recompute.rs).
            Recompute::Selective => {
                let kept_scores = if modules.contains(RecomputeModule::CoreAttn) {
                    0.0
                } else {
                    scores
                };
                unsplit + split / t + kept_scores
                    - recompute::dropped_bytes(model, modules, t, unsplit_div)
                    - fp8_linear_input_saving(model, l, modules, t, unsplit_div)
            }
            // Only the layer input (2 bytes per element) is kept; split by TP with SP.
            Recompute::Full => 2.0 / if l.sp { t } else { 1.0 },
        }
}

/// Bytes per token-hidden element an fp8 recipe saves by keeping the Linear layers' inputs for
/// the backward pass in fp8, 1 byte instead of 2: Transformer Engine's `Linear` saves the fp8
/// transposed input it casts for the weight-gradient GEMM in place of the 16-bit one
/// (`transformer_engine/pytorch/module/linear.py`, `_Linear.forward`: `inputmat_t if
/// weight.requires_grad and fp8_wgrad`); DeepSeek-V3 caches the same tensors in fp8 (DeepSeek-AI
/// 2024, §3.3.3). The inputs are the two norms' outputs (unless `layernorm` recomputes them), the
/// attention output (q_width), the second MLP matrix's input (the MLP width, less what `moe_act`
/// or `mlp` recompute) and every dispatched expert copy. None for other precisions.
fn fp8_linear_input_saving(
    model: &ModelShape,
    l: &Layout,
    modules: RecomputeModules,
    t: f64,
    unsplit_div: f64,
) -> f64 {
    if l.precision != ComputePrecision::Fp8 {
        return 0.0;
    }
    let h = f64::from(model.hidden);
    let norms = if modules.contains(RecomputeModule::Layernorm) {
        0.0
    } else {
        2.0 / unsplit_div
    };
    let mut mlp_input = counts::mean_mlp_width(model);
    if modules.contains(RecomputeModule::MoeAct) {
        mlp_input -= counts::mean_routed_width(model);
    }
    if modules.contains(RecomputeModule::Mlp) {
        mlp_input -= (1.0 - counts::moe_fraction(model)) * f64::from(model.ffn);
    }
    norms + ((model.q_width() + mlp_input.max(0.0)) / h + counts::mean_dispatched_copies(model)) / t
}

/// Weights of pipeline stage `first`..`last` holding `layers` transformer layers, on one device,
/// split into those replicated over the whole data-parallel group and the routed experts, which
/// expert parallelism divides by `ep` and which are replicated only over the ranks of their
/// expert-data-parallel group. The first stage holds the input embedding, the last the output
/// layer (tied: a copy of the embedding, as Megatron keeps it); with one stage an untied model
/// holds both matrices. Returns `(dense, experts)` parameter counts per device.
pub fn stage_params(
    model: &ModelShape,
    l: &Layout,
    layers: u32,
    first: bool,
    last: bool,
) -> (f64, f64) {
    let t = f64::from(l.tp);
    let embeddings = if l.pp <= 1 {
        model.first_stage_embedding_params(1)
    } else {
        f64::from(u8::from(first) + u8::from(last)) * model.embedding_params()
    };
    let routed = counts::mean_routed_params(model);
    let n = f64::from(layers);
    let dense = (n * (model.layer_params() - routed) + embeddings) / t;
    let experts = n * routed / f64::from(l.ep.max(1)) / t;
    (dense, experts)
}

/// Memory of the most loaded device: the largest over pipeline stages (plan/stages.rs) of its
/// weights, gradients, optimizer state and activations.
pub fn memory(model: &ModelShape, l: &Layout, capacity: Bytes) -> Memory {
    let p = l.pp.max(1);
    let stages =
        stage_layers(model.layers, p).unwrap_or_else(|| vec![model.layers.div_ceil(p); p as usize]);
    let last = stages.len().saturating_sub(1);
    // Microbatches in flight fall with the stage index, so an inner stage holding no more layers
    // than an inner stage before it holds no more memory: only the first stage, the last, and
    // each inner stage that holds more layers than every inner stage before it can be the
    // fullest (three evaluations instead of `pp` on the search's hot path; the test
    // `fullest_stage_is_among_the_candidates` checks this against every stage).
    let mut most_inner = 0;
    stages
        .iter()
        .enumerate()
        .filter(|&(i, &n)| {
            let inner = i != 0 && i != last;
            let candidate = !inner || n > most_inner;
            if inner {
                most_inner = most_inner.max(n);
            }
            candidate
        })
        .map(|(i, &n)| stage_memory(model, l, capacity, i, n, i == 0, i == last))
        .max_by(|a, b| a.total.get().total_cmp(&b.total.get()))
        .unwrap_or_else(|| stage_memory(model, l, capacity, 0, model.layers, true, true))
}

/// Memory of pipeline stage `index` holding `layers` transformer layers (see [`stage_params`]),
/// the last stage also the fp32 logits.
fn stage_memory(
    model: &ModelShape,
    l: &Layout,
    capacity: Bytes,
    index: usize,
    layers: u32,
    first: bool,
    last: bool,
) -> Memory {
    let (t, p) = (f64::from(l.tp), f64::from(l.pp));
    // ZeRO and the distributed optimizer shard over every rank holding the same weights:
    // data-parallel and context-parallel ranks (Megatron-Core shards over the DP × CP group);
    // routed experts only over the dp·cp/ep ranks that hold the same experts.
    let d = f64::from(l.dp) * f64::from(l.cp.max(1));
    let expert_dp = (d / f64::from(l.ep.max(1))).max(1.0);
    let (dense, experts) = stage_params(model, l, layers, first, last);
    let (wb, gb, ob) = optimizer::bytes_per_param(l);
    let sharded = |stage: u8, bytes: f64| {
        if l.zero >= stage {
            bytes * (dense / d + experts / expert_dp)
        } else {
            bytes * (dense + experts)
        }
    };
    let mut weights = sharded(3, wb);
    if l.zero == 3 && d > 1.0 {
        // ZeRO-3 gathers each layer's full (TP- and EP-split) weights before use: the layer
        // being computed and the one being prefetched, at most DeepSpeed's
        // `stage3_max_live_parameters` (default 1e9 parameters, DeepSpeed configuration docs).
        let routed = counts::mean_routed_params(model);
        let layer = model.layer_params() - routed + routed / f64::from(l.ep.max(1));
        weights += (2.0 * layer / t).min(ZERO3_MAX_LIVE_PARAMS) * wb;
    }
    // ZeRO-2 with pipeline parallelism: the gradients of all microbatches accumulate in a full
    // buffer that is reduce-scattered once after the flush (Megatron's distributed optimizer), so
    // only the optimizer state is sharded; without PP DeepSpeed reduces each micro-step's
    // gradients into the owner's shard.
    let gradients = if l.pp > 1 && l.microbatches() > 1 {
        gb * (dense + experts)
    } else {
        sharded(2, gb)
    };
    let optimizer = sharded(1, ob);

    let b = f64::from(l.mbs);
    let m = l.microbatches() as f64;
    let v = f64::from(l.interleave);
    // 1F1B: stage i holds min(m, p − i) microbatches in flight; interleaving adds (p−1)/(p·v) of
    // a stage's worth (Korthikanti et al. 2022, §4.2.3). This matches Megatron-Core's schedule:
    // the first rank runs (v−1)·p + 2(p−1) + 1 warm-up chunks of L/(p·v) layers each
    // (`get_pp_rank_microbatches`), L·(1 + (p−1)/(p·v)) microbatch-layers in all.
    let in_flight = m.min(p - index as f64).max(1.0)
        * if l.interleave > 1 {
            1.0 + (p - 1.0) / (p * v)
        } else {
            1.0
        };
    let per_layer = layer_activation_bytes(model, l, b, l.recompute);
    let mut activations = f64::from(layers) * per_layer * in_flight;
    if l.recompute == Recompute::Full {
        // Re-running one layer's forward materialises its full activations once.
        activations += layer_activation_bytes(model, l, b, Recompute::None);
    }
    if last {
        // Logits in fp32 for the loss: 4·(s/cp)·b·V/t bytes.
        activations +=
            4.0 * f64::from(model.seq) / f64::from(l.cp.max(1)) * b * f64::from(model.vocab) / t;
    }
    let total = weights + gradients + optimizer + activations;
    Memory {
        weights: Bytes(weights),
        gradients: Bytes(gradients),
        optimizer: Bytes(optimizer),
        activations: Bytes(activations),
        total: Bytes(total),
        capacity,
        fits: total <= usable(capacity).get(),
    }
}

/// Parameters ZeRO-3 keeps gathered at once: DeepSpeed's `stage3_max_live_parameters` default.
pub const ZERO3_MAX_LIVE_PARAMS: f64 = 1e9;

/// Fraction of a device's memory a training job may use: the capacity less 5 % for the CUDA
/// context, NCCL buffers and allocator fragmentation (an estimate; PyTorch reports 1–3 GiB of
/// such overhead on 80 GB devices).
pub const USABLE_FRACTION: f64 = 0.95;

/// Memory a job may use: [`USABLE_FRACTION`] of the capacity.
pub fn usable(capacity: Bytes) -> Bytes {
    capacity * USABLE_FRACTION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fullest_stage_is_among_the_candidates() {
        // Every stage evaluated against the three candidates `memory` evaluates, over uneven and
        // even splits, interleaving, microbatch counts below and above the stage count.
        let Ok(m) = catalog_model("llama3-405b") else {
            panic!("llama3-405b missing from the catalog")
        };
        let cap = Bytes(80.0 * (1u64 << 30) as f64);
        for pp in [1, 2, 5, 7, 12, 16, 31, 63] {
            for (batch, interleave) in [(4, 1), (64, 1), (512, 1), (512, 2)] {
                let l = Layout {
                    tp: 8,
                    pp,
                    batch,
                    interleave,
                    ..Layout::default()
                };
                let stages = stage_layers(m.layers, pp).unwrap_or_default();
                let last = stages.len() - 1;
                let every = stages
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        stage_memory(&m, &l, cap, i, n, i == 0, i == last)
                            .total
                            .get()
                    })
                    .fold(0.0, f64::max);
                assert_eq!(
                    memory(&m, &l, cap).total.get(),
                    every,
                    "pp {pp} B {batch} v {interleave}"
                );
            }
        }
    }
    use crate::plan::shape::catalog_model;

    fn layout(tp: u32, sp: bool, rc: Recompute) -> Layout {
        Layout {
            tp,
            recompute: rc,
            sp,
            ..Layout::default()
        }
    }

    #[test]
    fn korthikanti_table2_forms() {
        // GPT-3 175B: s = 2048, h = 12288, a = 96, b = 1.
        let Ok(m) = catalog_model("gpt3-175b") else {
            panic!("gpt3-175b missing from the catalog")
        };
        let (s, h, a, t) = (2048.0, 12288.0, 96.0, 8.0);
        let sbh = s * h;
        // No parallelism: sbh(34 + 5as/h).
        let got =
            layer_activation_bytes(&m, &layout(1, false, Recompute::None), 1.0, Recompute::None);
        assert!((got / (sbh * (34.0 + 5.0 * a * s / h)) - 1.0).abs() < 1e-12);
        // TP: sbh(10 + 24/t + 5as/(ht)).
        let got =
            layer_activation_bytes(&m, &layout(8, false, Recompute::None), 1.0, Recompute::None);
        let want = sbh * (10.0 + 24.0 / t + 5.0 * a * s / (h * t));
        assert!((got / want - 1.0).abs() < 1e-12);
        // TP + SP + selective: 34·sbh/t.
        let l = layout(8, true, Recompute::Selective);
        let got = layer_activation_bytes(&m, &l, 1.0, Recompute::Selective);
        assert!((got / (34.0 * sbh / t) - 1.0).abs() < 1e-12);
        // Full recompute: 2·sbh (input only).
        let got =
            layer_activation_bytes(&m, &layout(8, false, Recompute::Full), 1.0, Recompute::Full);
        assert!((got / (2.0 * sbh) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fp8_keeps_the_linear_inputs_in_one_byte() {
        // GPT-3 175B, TP 8 with SP, selective: the norms' outputs (2 of the 10 SP-split bytes per
        // element), the attention output (h/8) and the MLP activation (4h/8) drop from 2 bytes
        // to 1: 2/8 + 5/8 = 0.875 bytes per token-hidden element (Transformer Engine saves the
        // fp8 transposed input of each Linear for the weight gradient).
        let Ok(m) = catalog_model("gpt3-175b") else {
            panic!("gpt3-175b missing from the catalog")
        };
        let l = layout(8, true, Recompute::Selective);
        let fp8 = Layout {
            precision: ComputePrecision::Fp8,
            ..l
        };
        let sbh = 2048.0 * 12288.0;
        let saved = (layer_activation_bytes(&m, &l, 1.0, Recompute::Selective)
            - layer_activation_bytes(&m, &fp8, 1.0, Recompute::Selective))
            / sbh;
        assert!((saved - 0.875).abs() < 1e-12, "{saved}");
        // Full recomputation keeps only the 16-bit layer input either way.
        let full = |p| {
            let l = Layout {
                precision: p,
                ..layout(8, true, Recompute::Full)
            };
            layer_activation_bytes(&m, &l, 1.0, Recompute::Full)
        };
        assert_eq!(full(ComputePrecision::Fp8), full(ComputePrecision::Bf16));
    }

    #[test]
    fn zero_stages_shard_16_bytes_per_parameter() {
        // ZeRO §5, Figure 1: Ψ = 7.5B, N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for stages 0–3.
        let psi = 7.5e9;
        let d = 64.0;
        let (w, g, o) = bytes_per_param(ComputePrecision::Bf16);
        let stage = [
            (w + g + o) * psi,
            (w + g) * psi + o * psi / d,
            w * psi + (g + o) * psi / d,
            (w + g + o) * psi / d,
        ];
        let want = [120e9, 31.4e9, 16.6e9, 1.9e9];
        for (s, w) in stage.iter().zip(want) {
            assert!((s / w - 1.0).abs() < 0.02, "{s} vs {w}");
        }
    }
}
