//! Per-iteration time of one layout: compute, memory-bound work, communication, bubble,
//! optimizer. Formulas and their sources: docs/methodology.md.

use super::collective::{all_gather, all_reduce, all_to_all, p2p};
use super::context::{exposed_ring_time, kv_chunk_bytes, local_shape};
use super::counts;
use super::error::PlanError;
use super::hardware::{Hardware, Link, Network, Precision};
use super::memory::{memory, stage_params, Memory};
use super::moe;
use super::optimizer;
use super::recompute::{self, RecomputeModule};
use super::spec::ModelShape;
use super::spec::{Layout, Recompute, Zero3Prefetch};
use super::stages::stage_layers;
use super::validate::validate;
use crate::units::{BytesPerSecond, Flops, Seconds};
use serde::{Deserialize, Serialize};

/// Where one iteration's time goes on the slowest pipeline stage; the parts sum to the step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    /// GEMMs (forward, backward, recomputation) outside the bubble.
    pub compute: Seconds,
    /// Memory-bound element-wise work (LayerNorm, softmax, dropout, GeLU, residuals, loss).
    pub memory_bound: Seconds,
    /// Tensor-parallel all-reduces / all-gathers + reduce-scatters (not overlapped).
    pub tp_comm: Seconds,
    /// Pipeline point-to-point sends that sit on the critical path.
    pub pp_comm: Seconds,
    /// Data-parallel gradient (and ZeRO-3 parameter) traffic not hidden behind the backward.
    pub dp_comm: Seconds,
    /// Pipeline fill and drain, (p−1)/v microbatch times.
    pub bubble: Seconds,
    /// Adam step over the parameters this device owns.
    pub optimizer: Seconds,
    /// Tied-embedding gradient all-reduce between the first and last stage.
    pub other: Seconds,
    /// Expert-parallel all-to-alls (MoE dispatch and combine, forward and backward) that sit
    /// on the critical path.
    #[serde(default)]
    pub ep_comm: Seconds,
    /// Context-parallel K/V ring exchange not hidden behind attention (plan/context.rs).
    #[serde(default)]
    pub cp_comm: Seconds,
}

impl Breakdown {
    pub fn total(&self) -> Seconds {
        self.compute
            + self.memory_bound
            + self.tp_comm
            + self.pp_comm
            + self.dp_comm
            + self.bubble
            + self.optimizer
            + self.other
            + self.ep_comm
            + self.cp_comm
    }

    /// Work a single device would also do: compute and memory-bound time.
    pub fn work(&self) -> Seconds {
        self.compute + self.memory_bound
    }

    /// Exposed communication of all four kinds.
    pub fn communication(&self) -> Seconds {
        self.tp_comm + self.pp_comm + self.dp_comm + self.ep_comm + self.cp_comm
    }
}

/// The prediction for one layout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Estimate {
    pub layout: Layout,
    pub gpus: u64,
    pub step_time: Seconds,
    pub breakdown: Breakdown,
    pub tokens_per_s: f64,
    /// Executed (hardware) FLOP/s per device, the figure Megatron papers report.
    pub tflops_per_gpu: f64,
    /// Model FLOP/s per device (no recomputation counted).
    pub model_tflops_per_gpu: f64,
    pub mfu: f64,
    pub hfu: f64,
    /// Fraction of the step the device computes or streams memory (drives the power model).
    pub busy_fraction: f64,
    pub model_flops: Flops,
    pub executed_flops: Flops,
    pub memory: Memory,
}

/// Validate `layout` and predict its iteration.
pub fn evaluate(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    layout: &Layout,
) -> Result<Estimate, PlanError> {
    validate(model, hw, net, layout, None)?;
    Ok(estimate(model, hw, net, layout))
}

/// One microbatch's time on one pipeline stage, by kind.
struct StageParts {
    compute: f64,
    mem: f64,
    tp: f64,
    cp: f64,
    ep: f64,
}

impl StageParts {
    fn total(&self) -> f64 {
        self.compute + self.mem + self.tp + self.cp + self.ep
    }
}

/// Predict an iteration of a layout the caller has validated (the search's hot path).
pub fn estimate(model: &ModelShape, hw: &Hardware, net: &Network, l: &Layout) -> Estimate {
    let curve = hw.class.curve();
    let peak = hw.peak(l.precision).unwrap_or(hw.peak_bf16).get();
    let rate = curve.efficiency(l.precision) * peak;
    let latency = curve.latency.get();
    // One GEMM kernel of `f` FLOPs (docs: "GEMM efficiency").
    let gemm = |f: f64| latency + f / rate;
    // fp8 recipes (Transformer Engine) run only the Linear layers' GEMMs in fp8: core attention
    // (TE `DotProductAttention`, fp8 only with `fp8_dpa`, off by default) and Megatron's output
    // layer (a plain `ColumnParallelLinear`) stay in 16-bit (docs: "fp8").
    let fp8 = l.precision == Precision::Fp8;
    let rate16 = if fp8 {
        curve.max_efficiency * hw.peak_bf16.get()
    } else {
        rate
    };
    let gemm16 = |f: f64| latency + f / rate16;
    let mem_rate = hw.memory_bandwidth.get() * curve.memory_efficiency;

    let (t, p, d, v) = (
        f64::from(l.tp),
        f64::from(l.pp),
        f64::from(l.dp),
        f64::from(l.interleave),
    );
    let cp = f64::from(l.cp.max(1));
    let b = f64::from(l.mbs);
    let m = l.microbatches() as f64;
    // Each context-parallel rank works on s/cp tokens (plan/context.rs).
    let local = local_shape(model, l.cp);
    let (s, h, a) = (
        f64::from(local.seq),
        f64::from(model.hidden),
        f64::from(model.heads),
    );
    let act = l.precision.activation_bytes();

    // --- one layer, one microbatch, per device -------------------------------------------
    // For an MoE model every per-layer figure is the mean over its dense and MoE layers.
    let mut g = local.layer_gemms(b);
    // A rank's queries still attend to all cp·(s/cp) keys: core attention shrinks by cp, not cp².
    g[1] *= cp;
    g[2] *= cp;
    // Core attention: two batched GEMMs, or one fused FlashAttention kernel whose backward
    // re-computes QKᵀ: 5 GEMM-sized products against the forward's 2 (Dao 2023, §3.1.2).
    let (attn_fwd, attn_bwd) = if l.flash_attention {
        let k = gemm16((g[1] + g[2]) / t);
        (k, 2.5 * (k - latency) + latency)
    } else {
        // Without FlashAttention the two batched GEMMs write (QKᵀ) and read (PV) the
        // b·a·s·(s·cp)/t scores, at 2·head_dim FLOPs per score: below A100's ridge (~140
        // FLOP/byte achieved), so they take the longer of compute and memory (roofline; the
        // backward's four GEMMs touch the scores and their gradient four times).
        let scores = a * s * (s * cp) * b / t;
        let operands = (s + s * cp) * b * model.q_width() / t;
        let bytes = act * (scores + operands);
        let k = gemm16(g[1] / t).max(bytes / mem_rate) + gemm16(g[2] / t).max(bytes / mem_rate);
        (k, 2.0 * k)
    };
    let dense_fwd = gemm(g[0] / t) + gemm(g[3] / t) + moe::mlp_forward_time(model, l, b * s, gemm);
    let fwd_gemm = dense_fwd + attn_fwd;
    let modules = l.recompute_modules;
    let recompute_gemm = match l.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => {
            // FlashAttention's backward already re-computes the core attention.
            let core = if modules.contains(RecomputeModule::CoreAttn) && !l.flash_attention {
                attn_fwd
            } else {
                0.0
            };
            let others = recompute::recomputed_gemm_flops_per_token(model, modules) * b * s / t;
            core + if others > 0.0 { gemm(others) } else { 0.0 }
        }
        Recompute::Full => fwd_gemm,
    };
    // Backward: a data-gradient and a weight-gradient GEMM per forward GEMM.
    let layer_gemm = fwd_gemm + 2.0 * dense_fwd + attn_bwd + recompute_gemm;

    // Element-wise traffic, bytes per element (docs: "Memory-bound work"): LayerNorms 2×4,
    // bias-dropout-adds 2×7 on the token-hidden tensor; GeLU 4 (SwiGLU 6) per MLP element;
    // fused scale-mask-softmax + dropout 9 per attention-score element. Backward ≈ 2× forward.
    // MoE: the MLP elements of every dispatched copy, and the permutation that gathers each
    // expert's tokens and scatters them back (read + write of every copy, twice).
    let scale = act / 2.0;
    let sbh = s * b * h;
    let unsplit = if l.sp { sbh / t } else { sbh };
    let mlp_el = sbh * counts::mean_mlp_width(model) / h / t
        * if model.gated_mlp { 6.0 } else { 4.0 }
        + 8.0 * sbh * counts::mean_dispatched_copies(model);
    let score_el = if l.flash_attention {
        0.0
    } else {
        9.0 * a * s * (s * cp) * b / t
    };
    let fwd_mem = scale * (22.0 * unsplit + mlp_el + score_el) / mem_rate;
    // fp8: every fp8 GEMM input is quantised by a fused cast + transpose (Transformer Engine
    // `fp8_cast_transpose_fused`: Hopper's fp8 GEMMs take only the TN layout, so the backward
    // needs the transposed copy): 2 bytes read, 1 + 1 written per element, forward for the
    // Linear layers' inputs, backward for their output gradients (`fp8_cast_elements`).
    let cast = |forward: bool| {
        if fp8 {
            fp8_cast_elements(model, t, forward) * s * b * 4.0 / mem_rate
        } else {
            0.0
        }
    };
    let (cast_fwd, cast_bwd) = (cast(true), cast(false));
    let recompute_mem = match l.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => {
            let core = if modules.contains(RecomputeModule::CoreAttn) {
                score_el
            } else {
                0.0
            };
            let unsplit_div = if l.sp { t } else { 1.0 };
            scale
                * (core
                    + sbh * recompute::recomputed_elementwise_bytes(model, modules, t, unsplit_div))
                / mem_rate
        }
        Recompute::Full => fwd_mem + cast_fwd,
    };
    let layer_mem = 3.0 * fwd_mem + recompute_mem + cast_fwd + cast_bwd;
    // The forward pass's share of a layer's work (ZeRO-3's overlap is phase by phase).
    let fwd_share = (fwd_gemm + fwd_mem) / (layer_gemm + layer_mem).max(f64::MIN_POSITIVE);

    // Tensor parallelism: 2 all-reduces forward, 2 backward, 2 more when the forward is re-run
    // (Shoeybi et al. 2019, Fig. 4); with SP the same volume as all-gather + reduce-scatter
    // (Korthikanti et al. 2022 §4.2.2). Within the node. A parallel block sums attention and
    // MLP outputs before one all-reduce: half the messages (Wang & Komatsuzaki 2021, GPT-J;
    // Chowdhery et al. 2022, PaLM §2 "Parallel Layers").
    let tp_msgs = if l.recompute == Recompute::Full {
        6.0
    } else {
        4.0
    } / if model.parallel_block { 2.0 } else { 1.0 };
    // With SP a column-parallel GEMM (QKV; the MLP's first matrix in a dense layer — an MoE
    // layer's experts get their tokens from the dispatcher instead; one shared input in a
    // parallel block) keeps only its input's sequence shard for the backward and all-gathers it
    // again there for the weight gradient (Megatron-Core
    // `LinearWithGradAccumulationAndAsyncCommunication.backward`,
    // `megatron/core/tensor_parallel/layers.py`; Transformer Engine's `LayerNormLinear` and
    // `LayerNormMLP` backward, "Overlap input AG with dgrad", unless userbuffers' bulk overlap
    // takes it). The gather is issued beside the data-gradient GEMM, yet Korthikanti et al.
    // 2022 Table 4 measures it as exposed: SP saves 0.5 of 7.7 ms in the 22B layer's forward
    // (the model: 0.6) but 0.1 of 11.9 ms in its backward, where the element-wise saving alone
    // is twice the forward's; the ~0.9 ms missing is these gathers at NVLink speed. An fp8
    // recipe stores and gathers the fp8 copy, 1 byte an element (`fp8_linear_input_saving`).
    let sp_regathers = if l.sp && t > 1.0 {
        let inputs = if model.parallel_block {
            1.0
        } else {
            2.0 - counts::moe_fraction(model)
        };
        let bytes = if fp8 { 1.0 } else { act };
        inputs * all_gather(&net.intra, t, sbh * bytes)
    } else {
        0.0
    };
    // Under an fp8 recipe with SP, Transformer Engine gathers what it has already cast: the
    // norm outputs going into QKV and the MLP (forward: `layernorm_fwd_fp8`, then
    // `gather_along_first_dim`) and the output gradients going into the row-parallel dgrad
    // GEMMs (backward: "FP8 case with gather", `grad_output_preprocess`), 1 byte an element;
    // the reduce-scatters carry 16-bit partial sums (TE `LayerNormLinear`, `Linear`,
    // `base.py`). Each all-reduce's worth is then an fp8 all-gather plus a 16-bit reduce-scatter.
    let tp_message = if fp8 && l.sp {
        all_gather(&net.intra, t, sbh) + all_gather(&net.intra, t, sbh * act)
    } else {
        all_reduce(&net.intra, t, sbh * act)
    };
    let layer_tp_all = tp_msgs * tp_message + sp_regathers;
    let layer_tp = if l.tp_overlap {
        // Split into t chunks pipelined with the GEMMs that consume / produce them (NeMo
        // `tp_comm_overlap`, Transformer Engine userbuffers; Jiang et al. 2024, MegaScale §3.2):
        // one chunk in t stays exposed, and whatever the dense GEMMs cannot cover.
        let dense_all = dense_fwd
            * (3.0
                + if l.recompute == Recompute::Full {
                    1.0
                } else {
                    0.0
                });
        layer_tp_all / t + (layer_tp_all * (1.0 - 1.0 / t) - dense_all).max(0.0)
    } else {
        layer_tp_all
    };

    // Expert parallelism: per MoE layer, all-to-alls of the dispatched copies of the device's
    // tokens (b·s·top_k·capacity × h) among `ep` ranks `tp` apart (docs: "Mixture of experts").
    // With TP each rank dispatches its 1/t of the tokens (Megatron-Core splits the sequence
    // over the TP ranks before dispatch, as sequence parallelism does); the TP gather and
    // scatter around the experts take the place of the dense MLP's, already in `layer_tp`.
    let layer_ep = if l.ep > 1 {
        let local = (f64::from(net.gpus_per_node) / t).floor().max(1.0);
        let bytes = sbh / t * counts::mean_dispatched_copies(model) * act;
        moe::all_to_alls(l.recompute == Recompute::Full)
            * all_to_all(net, f64::from(l.ep), local, bytes)
    } else {
        0.0
    };

    // Context parallelism: the K/V ring not hidden behind the attention blocks.
    let cp_link = link(net, l.tp_cp());
    let layer_cp = exposed_ring_time(
        cp_link,
        l,
        kv_chunk_bytes(model, l),
        attn_fwd,
        attn_bwd
            + if l.recompute == Recompute::Full {
                attn_fwd
            } else {
                0.0
            },
    ) * if l.recompute == Recompute::Full {
        // The recomputed forward passes K and V around the ring again.
        4.0 / 3.0
    } else {
        1.0
    };

    // Output layer and loss, on the last stage.
    let logits = local.logit_flops(b) / t;
    let logit_mem = 3.0 * 12.0 * s * b * f64::from(model.vocab) / t / mem_rate;

    // Each stage's microbatch time; the slowest sets the pipeline's pace (plan/stages.rs).
    let stage_counts = stage_layers(model.layers, l.pp)
        .unwrap_or_else(|| vec![model.layers.div_ceil(l.pp.max(1)); l.pp.max(1) as usize]);
    let last = stage_counts.len().saturating_sub(1);
    let stage_parts = |i: usize, n: u32| {
        let n = f64::from(n);
        let tail = i == last;
        StageParts {
            compute: n * layer_gemm + if tail { 3.0 * gemm16(logits) } else { 0.0 },
            mem: n * layer_mem + if tail { logit_mem } else { 0.0 },
            tp: n * layer_tp,
            cp: n * layer_cp,
            // Overlapped (DualPipe): the all-to-alls of one microbatch run while another
            // computes; only what exceeds that computation is exposed.
            ep: if l.overlap_ep {
                (n * layer_ep - n * layer_gemm - n * layer_mem).max(0.0)
            } else {
                n * layer_ep
            },
        }
    };
    let (slowest, _) =
        stage_counts
            .iter()
            .enumerate()
            .fold((0usize, f64::NEG_INFINITY), |(bi, bt), (i, &n)| {
                let time = stage_parts(i, n).total();
                if time > bt {
                    (i, time)
                } else {
                    (bi, bt)
                }
            });
    let slow_layers = stage_counts.get(slowest).copied().unwrap_or(model.layers);
    let mb = stage_parts(slowest, slow_layers);
    let (mb_compute, mb_mem, mb_tp, mb_cp, mb_ep) = (mb.compute, mb.mem, mb.tp, mb.cp, mb.ep);
    let mb_time = mb.total();

    // Pipeline: bubble (p−1)/v microbatch times (Narayanan et al. 2021, §2.2); p2p of the
    // scattered activation b·(s/cp)·h/t on the critical path once per chunk forward and backward.
    let bubble = (p - 1.0) / v * mb_time;
    let pp_link = link(net, l.gpus());
    let pp_comm = if l.pp > 1 {
        let transfer = p2p(pp_link, sbh * act / t);
        // Overlapped (interleaved schedule): each transfer runs while the next chunk computes,
        // about a third of a chunk's forward + backward time; only the excess is exposed.
        let exposed = if l.overlap_pp {
            (transfer - mb_time / (3.0 * v)).max(0.0)
        } else {
            transfer
        };
        2.0 * (v * m + p - 1.0) * exposed
    } else {
        0.0
    };

    // Data parallelism over ranks tp·cp apart: inside the node while tp·cp·dp fits in it. The
    // gradient is reduced over DP × CP ranks (context-parallel ranks hold the same weights).
    // Routed experts are replicated only over their expert-data-parallel group of dp·cp/ep
    // ranks, which reduces their gradients separately (Megatron-Core, DeepSpeed-MoE). The
    // stage holding the most parameters sets the time.
    let (dense_params, expert_params) = stage_counts
        .iter()
        .enumerate()
        .map(|(i, &n)| stage_params(model, l, n, i == 0, i == last))
        .fold((0.0, 0.0), |best: (f64, f64), x| {
            if x.0 + x.1 > best.0 + best.1 {
                x
            } else {
                best
            }
        });
    let dcp = d * cp;
    let expert_dp = (dcp / f64::from(l.ep.max(1))).max(1.0);
    let groups = [(dense_params, dcp), (expert_params, expert_dp)];
    let (wb, gb, _) = optimizer::bytes_per_param(l);
    // Ranks of the data-parallel group on one node.
    let local = (f64::from(net.gpus_per_node) / l.tp_cp() as f64)
        .floor()
        .max(1.0);
    let dp_link = &dp_tier(net, l.tp_cp() * u64::from(l.dp), local);
    let backward_one_mb = f64::from(slow_layers)
        * (2.0 * dense_fwd + attn_bwd + 2.0 * fwd_mem + layer_tp / 2.0 + layer_ep / 2.0);
    let dp_comm = if dcp <= 1.0 {
        0.0
    } else if l.zero == 3 {
        // ZeRO-3/FSDP: per microbatch all-gather weights (forward, backward) + reduce-scatter
        // gradients (Rajbhandari et al. 2020 §7.2: 1.5× the all-reduce volume). Full
        // recomputation re-runs each layer's forward inside the backward, and the weights are
        // gathered for it too: forward, recomputed forward and backward, three gathers and one
        // reduce-scatter (Rajbhandari et al. 2021, ZeRO-Infinity §4.1: with activation
        // checkpointing the parameters are loaded three times per iteration and the gradients
        // once, arithmetic intensity seq × batch).
        let gathers = zero3_gathers(l.recompute, l.zero3_prefetch);
        // The weights are gathered and the gradients reduced layer by layer as the layers run
        // (DeepSpeed's per-module hooks, FSDP's per-layer units; Zhao et al. 2023, PyTorch FSDP
        // §3.2), never as one stage-sized buffer: each collective pays its own ring latency,
        // which the single-buffer volume term below charges once; over thousands of ranks that
        // is milliseconds per collective. Counted once per layer (FSDP's unit; DeepSpeed issues
        // one per matrix, which this leaves out).
        let per_layer_latency = |k: f64| f64::from(slow_layers) * ring_latency(net, k, local);
        // One gather and one reduce-scatter of the stage's weights, per microbatch.
        let (gather, reduce) =
            groups
                .iter()
                .filter(|&&(n, _)| n > 0.0)
                .fold((0.0, 0.0), |(g, r), &(n, k)| {
                    (
                        g + all_gather(dp_link, k, n * wb) + per_layer_latency(k),
                        r + all_gather(dp_link, k, n * gb) + per_layer_latency(k),
                    )
                });
        if l.overlap_dp {
            // Overlap phase by phase: the forward's gather hides only behind the forward, the
            // backward's gathers and reduce-scatter only behind the backward (and the
            // recomputed forward), each at the granularity the framework prefetches
            // (docs/methodology.md "ZeRO-3 overlap").
            let fwd = mb_time * fwd_share;
            let matrices = model.layer_matrices();
            let mut backward_order = matrices;
            backward_order.reverse();
            let phases = zero3_phase(l.zero3_prefetch, &matrices, fwd, gather)
                + zero3_phase(
                    l.zero3_prefetch,
                    &backward_order,
                    mb_time - fwd,
                    (gathers - 1.0) * gather + reduce,
                );
            m * (phases - mb_time).max(0.0)
        } else {
            m * (gathers * gather + reduce)
        }
    } else {
        // All-reduce of the gradients (ZeRO-0), or reduce-scatter of the gradients + all-gather
        // of the updated 16-bit weights (ZeRO-1/2, Megatron's distributed optimizer): the same
        // volume when gradients are 16-bit, more with fp32 gradients. DeepSpeed's BF16_Optimizer
        // all-reduces the whole gradient and then all-gathers the weights (`grad_all_reduce`).
        // A dense model has no expert group: no collective, no latency.
        let (reduce, gather): (f64, f64) =
            groups
                .iter()
                .filter(|&&(n, _)| n > 0.0)
                .fold((0.0, 0.0), |(r, g), &(n, k)| {
                    let reduce = if l.zero == 0 || l.grad_all_reduce {
                        all_reduce(dp_link, k, n * gb)
                    } else {
                        all_gather(dp_link, k, n * gb)
                    };
                    let gather = if l.zero == 0 {
                        0.0
                    } else {
                        all_gather(dp_link, k, n * wb)
                    };
                    (r + reduce, g + gather)
                });
        if l.overlap_dp {
            // The gradient reduction hides behind the last microbatch's backward (bucketed
            // as layers finish); the distributed optimizer's weight all-gather behind the first
            // microbatch's forward of the next step (Megatron-LM `--overlap-grad-reduce`,
            // `--overlap-param-gather`; NeMo `overlap_grad_sync`, `overlap_param_sync`).
            let forward_one_mb =
                f64::from(slow_layers) * (fwd_gemm + fwd_mem + layer_tp / 2.0 + layer_ep / 2.0);
            (reduce - backward_one_mb).max(0.0) + (gather - forward_one_mb).max(0.0)
        } else {
            reduce + gather
        }
    };

    // Adam over the parameters this device updates (plan/optimizer.rs: bytes streamed per
    // parameter, including the gradient-norm pass and the copy back to 16-bit weights).
    let owned: f64 = groups
        .iter()
        .map(|&(n, k)| n / if l.zero >= 1 { k } else { 1.0 })
        .sum();
    let optimizer = owned * optimizer::step_bytes_per_param(l) / mem_rate;

    // Tied embedding: its gradient is all-reduced between the first and last stage. Untied
    // input and output matrices live on one stage each and need no such step.
    let other = if l.pp > 1 && model.tied_embeddings {
        all_reduce(&net.inter, 2.0, model.embedding_params() / t * gb)
    } else {
        0.0
    };

    let breakdown = Breakdown {
        compute: Seconds(m * mb_compute),
        memory_bound: Seconds(m * mb_mem),
        tp_comm: Seconds(m * mb_tp),
        pp_comm: Seconds(pp_comm),
        dp_comm: Seconds(dp_comm),
        bubble: Seconds(bubble),
        optimizer: Seconds(optimizer),
        other: Seconds(other),
        ep_comm: Seconds(m * mb_ep),
        cp_comm: Seconds(m * mb_cp),
    };
    let step = breakdown.total().get();
    let batch = f64::from(l.batch);
    let model_flops = model.model_flops(batch);
    let g_all = model.layer_gemms(batch);
    let recompute_flops = f64::from(model.layers)
        * (match l.recompute {
            Recompute::None => 0.0,
            Recompute::Selective => {
                let core = if modules.contains(RecomputeModule::CoreAttn) && !l.flash_attention {
                    g_all[1] + g_all[2]
                } else {
                    0.0
                };
                core + recompute::recomputed_gemm_flops_per_token(model, modules)
                    * batch
                    * f64::from(model.seq)
            }
            Recompute::Full => g_all.iter().sum(),
        } + if l.flash_attention {
            // FlashAttention's backward re-computes the scores QKᵀ.
            g_all[1]
        } else {
            0.0
        });
    // The capacity factor's padded expert slots are computed too (forward, backward, and once
    // more when the forward is re-run).
    let padding = counts::padding_flops(model, batch * s)
        * if l.recompute == Recompute::Full {
            4.0
        } else {
            3.0
        };
    let executed = model_flops + recompute_flops + padding;
    let n = l.gpus() as f64;
    let busy = (breakdown.work().get() + optimizer) / step;
    Estimate {
        layout: *l,
        gpus: l.gpus(),
        step_time: Seconds(step),
        breakdown,
        tokens_per_s: batch * f64::from(model.seq) / step,
        tflops_per_gpu: executed / step / n / 1e12,
        model_tflops_per_gpu: model_flops / step / n / 1e12,
        mfu: model_flops / step / n / peak,
        hfu: executed / step / n / peak,
        busy_fraction: busy,
        model_flops: Flops(model_flops),
        executed_flops: Flops(executed),
        memory: memory(model, l, hw.memory),
    }
}

/// Elements per token of one layer (per TP rank) that an fp8 recipe casts to fp8: forward, the
/// inputs of the Linear layers (QKV and first MLP input `h` each, the attention output
/// `q_width/t`, the second MLP input `f/t`); backward, their output gradients (`(q + 2·kv)/t`,
/// `h`, the first MLP's `f/t` (`2f/t` gated), `h`). `f` is the mean MLP width (MoE: every
/// dispatched copy). With TP the `h`-wide tensors are whole on every rank.
fn fp8_cast_elements(model: &ModelShape, t: f64, forward: bool) -> f64 {
    let h = f64::from(model.hidden);
    let f = counts::mean_mlp_width(model);
    if forward {
        2.0 * h + (model.q_width() + f) / t
    } else {
        let up = if model.gated_mlp { 2.0 * f } else { f };
        2.0 * h + (model.q_width() + 2.0 * model.kv_width() + up) / t
    }
}

/// Weight all-gathers per microbatch under ZeRO-3: forward and backward, plus the recomputed
/// forward under full recomputation where the framework gathers for it separately — DeepSpeed
/// (Rajbhandari et al. 2021, ZeRO-Infinity §4.1: parameters loaded three times per iteration
/// with activation checkpointing). PyTorch FSDP's per-layer unit gathers once for the
/// recomputation and the backward together: its pre-backward hook unshards the layer and the
/// recomputed forward skips FSDP's forward hooks ("When composing with module-hook-based
/// activation checkpointing, the pre-backward hook is responsible for the unshard",
/// `torch/distributed/_composable/fsdp/_fsdp_state.py` `_pre_forward`; `_post_forward` leaves
/// the reshard to the post-backward hook).
pub(crate) fn zero3_gathers(recompute: Recompute, prefetch: Zero3Prefetch) -> f64 {
    if recompute == Recompute::Full && prefetch == Zero3Prefetch::Module {
        3.0
    } else {
        2.0
    }
}

/// Latency of one ring all-gather or reduce-scatter over `k` ranks of which `local` share a node:
/// `k − 1` sequential hops, the `nodes − 1` between nodes at the inter-node α and the others at
/// the intra-node α (NCCL's ring latency model, `src/graph/tuning.cc`: intra- and inter-node hop
/// latencies weighted by their counts). A group inside one node uses only the intra-node α.
pub(crate) fn ring_latency(net: &Network, k: f64, local: f64) -> f64 {
    if k <= 1.0 {
        return 0.0;
    }
    let local = local.clamp(1.0, k);
    let inter_hops = (k / local).ceil() - 1.0;
    inter_hops * net.inter.latency.get() + (k - 1.0 - inter_hops).max(0.0) * net.intra.latency.get()
}

/// Time of one pass (forward or backward) of a layer under ZeRO-3 that computes for `compute`
/// seconds and gathers / reduces for `comm`, the two overlapped as the framework prefetches:
///
/// - [`Zero3Prefetch::Layer`]: the next layer's unit moves while this layer computes, so the
///   pass takes the longer of the two;
/// - [`Zero3Prefetch::Module`]: matrix `i` computes while matrix `i + 1`'s weights move, and
///   matrix `i + 1` waits for both: `Σᵢ max(compute·wᵢ, comm·wᵢ₊₁)` with `wᵢ` the matrices'
///   shares of the layer's weights in the order the pass uses them (the last pairs with the
///   next layer's first). Equal to the longer of the two only when one dominates every pair.
pub(crate) fn zero3_phase(prefetch: Zero3Prefetch, order: &[f64], compute: f64, comm: f64) -> f64 {
    let total: f64 = order.iter().sum();
    if prefetch == Zero3Prefetch::Layer || total <= 0.0 {
        return compute.max(comm);
    }
    order
        .iter()
        .zip(order.iter().cycle().skip(1))
        .map(|(w, next)| (compute * w).max(comm * next) / total)
        .sum()
}

/// The tier a group of `span` consecutive ranks crosses.
fn link(net: &Network, span: u64) -> &Link {
    if span <= u64::from(net.gpus_per_node) {
        &net.intra
    } else {
        &net.inter
    }
}

/// The tier a data-parallel collective over `span` consecutive ranks crosses, `local` of its
/// ranks on each node. Across nodes NCCL builds several rings, each through a different network
/// interface, and splits the data among them over NVLink (NVIDIA/nccl issue #601, maintainer:
/// "creates 4 rings, each using a different NIC"; "we can use NVLink to split the operations in
/// N parts then balance the traffic onto the N NICs"), so a group with `local` ranks on a node
/// moves its inter-node bytes over `local` interfaces at once: bus bandwidth `local` times one
/// interface's (two HGX H100 nodes, 8 × 400 Gb/s: ≈ 360 GB/s all-reduce bus bandwidth, issue
/// #1277). `dp_rails` caps the interfaces used (docs/methodology.md, "Communication per
/// iteration").
fn dp_tier(net: &Network, span: u64, local: f64) -> Link {
    let tier = *link(net, span);
    if span <= u64::from(net.gpus_per_node) {
        return tier;
    }
    let rails = net
        .dp_rails
        .map_or(local, |r| local.min(f64::from(r.max(1))));
    Link {
        bandwidth: BytesPerSecond(tier.bandwidth.get() * rails),
        ..tier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::catalog;

    fn setup() -> (ModelShape, Hardware, Network) {
        catalog("a100-80gb", "megatron-145b")
    }

    fn base() -> Layout {
        Layout {
            tp: 8,
            pp: 8,
            dp: 24,
            batch: 2304,
            recompute: Recompute::Full,
            ..Layout::default()
        }
    }

    #[test]
    fn bubble_is_p_minus_1_over_v_microbatch_times() {
        // SC21 §2.2: bubble / ideal = (p−1)/(v·m).
        let (m, hw, net) = setup();
        for v in [1, 2, 5] {
            let l = Layout {
                interleave: v,
                ..base()
            };
            let e = evaluate(&m, &hw, &net, &l).unwrap_or_else(|err| panic!("{err}"));
            let ideal = e.breakdown.compute + e.breakdown.memory_bound + e.breakdown.tp_comm;
            let mb = f64::from(l.batch / (l.dp * l.mbs));
            let want = 7.0 / (f64::from(v) * mb);
            assert!((e.breakdown.bubble / ideal - want).abs() < 1e-12, "v = {v}");
        }
    }

    #[test]
    fn overlap_and_zero_do_what_they_say() {
        let (m, hw, net) = setup();
        let plain = estimate(&m, &hw, &net, &base());
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..base()
            },
        );
        assert!(ovl.breakdown.dp_comm <= plain.breakdown.dp_comm);
        assert_eq!(ovl.breakdown.compute, plain.breakdown.compute);
        let z1 = estimate(&m, &hw, &net, &Layout { zero: 1, ..base() });
        // ZeRO-1 divides the optimizer state by DP = 24 and its update time likewise.
        assert!((plain.memory.optimizer / z1.memory.optimizer - 24.0).abs() < 1e-9);
        assert!((plain.breakdown.optimizer / z1.breakdown.optimizer - 24.0).abs() < 1e-9);
    }

    #[test]
    fn hfu_over_mfu_is_4_over_3_with_full_recompute() {
        // Executed = model + one more forward: 96/72 for the transformer layers, logits 3/3.
        let (m, hw, net) = setup();
        let e = estimate(&m, &hw, &net, &base());
        let r = e.hfu / e.mfu;
        assert!(r > 1.32 && r < 4.0 / 3.0, "{r}");
        let full = m.megatron_flops(f64::from(base().batch));
        assert!((e.executed_flops.get() / full - 1.0).abs() < 1e-9);
    }

    #[test]
    fn breakdown_sums_to_step_and_selective_saves_memory() {
        let (m, hw, net) = setup();
        let sel = Layout {
            recompute: Recompute::Selective,
            sp: true,
            ..base()
        };
        let none = Layout {
            recompute: Recompute::None,
            ..base()
        };
        let es = estimate(&m, &hw, &net, &sel);
        let en = estimate(&m, &hw, &net, &none);
        assert!((es.breakdown.total() / es.step_time - 1.0).abs() < 1e-12);
        assert!(es.memory.activations < en.memory.activations);
        // Selective recomputation costs far less time than full.
        let ef = estimate(&m, &hw, &net, &base());
        assert!(es.step_time < ef.step_time);
    }
    #[test]
    fn zero3_module_prefetch_pairs_each_matrix_with_the_next_gather() {
        // Layer units: the longer of computation and communication.
        assert_eq!(
            zero3_phase(Zero3Prefetch::Layer, &[3.0, 1.0, 4.0, 4.0], 12.0, 6.0),
            12.0
        );
        // GPT matrices 3h², h², 4h², 4h² with computation = communication = 12: matrix i
        // computes while matrix i+1 arrives: max(3,1) + max(1,4) + max(4,4) + max(4,3) = 15.
        let t = zero3_phase(Zero3Prefetch::Module, &[3.0, 1.0, 4.0, 4.0], 12.0, 12.0);
        assert!((t - 15.0).abs() < 1e-12, "{t}");
        // Equal matrices, or one side dominating every pair: no loss against layer units.
        let t = zero3_phase(Zero3Prefetch::Module, &[1.0; 4], 8.0, 5.0);
        assert!((t - 8.0).abs() < 1e-12, "{t}");
        let t = zero3_phase(Zero3Prefetch::Module, &[3.0, 1.0, 4.0, 4.0], 1.0, 100.0);
        assert!((t - 100.0).abs() < 1e-9, "{t}");
    }

    #[test]
    fn data_parallel_collectives_spread_over_the_nodes_interfaces() {
        // NCCL gives each ring its own interface: a group with k ranks on a node reaches k
        // interfaces' bandwidth across nodes (NVIDIA/nccl issue #601); `dp_rails` caps it.
        let (_, _, net) = setup();
        let one = net.inter.bandwidth.get();
        assert_eq!(dp_tier(&net, 64, 4.0).bandwidth.get(), 4.0 * one);
        assert_eq!(dp_tier(&net, 64, 4.0).latency, net.inter.latency);
        let capped = Network {
            dp_rails: Some(1),
            ..net
        };
        assert_eq!(dp_tier(&capped, 64, 4.0).bandwidth.get(), one);
        let two = Network {
            dp_rails: Some(2),
            ..net
        };
        assert_eq!(dp_tier(&two, 64, 4.0).bandwidth.get(), 2.0 * one);
        // Inside one node the group uses NVLink, rails or not.
        assert_eq!(dp_tier(&net, 8, 8.0), net.intra);

        // End to end: GPT-3 175B at TP 4 × PP 8 × DP 16 on 512 A100 (2 DP ranks per node), the
        // gradient all-reduce not overlapped: the bandwidth term halves, the latency stays.
        let (m, hw, net) = catalog("a100-80gb", "gpt3-175b");
        let l = Layout {
            tp: 4,
            pp: 8,
            dp: 16,
            batch: 512,
            ..Layout::default()
        };
        let dp = |net: &Network| estimate(&m, &hw, net, &l).breakdown.dp_comm.get();
        let (rails, single) = (
            dp(&net),
            dp(&Network {
                dp_rails: Some(1),
                ..net
            }),
        );
        let latency = 2.0 * 15.0 * net.inter.latency.get();
        assert!(
            ((rails - latency) / (single - latency) - 0.5).abs() < 1e-9,
            "{rails} vs {single}"
        );
    }

    #[test]
    fn grad_all_reduce_moves_ten_bytes_a_parameter_where_zero1_moves_six() {
        // ZeRO-1 with fp32 gradients and 16-bit weights: a reduce-scatter of 4 bytes and an
        // all-gather of 2 per parameter, (k−1)/k · 6 bytes; DeepSpeed's BF16_Optimizer
        // all-reduces the whole fp32 gradient instead, 2(k−1)/k · 4 + (k−1)/k · 2 = 10 (ring
        // collectives, Thakur et al. 2005). Latency: 2(k−1)α against 3(k−1)α. GPT-3 175B at
        // TP 8 × PP 8 × DP 16, one DP rank per node, nothing overlapped.
        let (m, hw, net) = catalog("a100-80gb", "gpt3-175b");
        let l = Layout {
            tp: 8,
            pp: 8,
            dp: 16,
            batch: 512,
            zero: 1,
            fp32_grads: true,
            ..Layout::default()
        };
        let dp = |l: &Layout| estimate(&m, &hw, &net, l).breakdown.dp_comm.get();
        let alpha = 15.0 * net.inter.latency.get();
        let scatter = dp(&l) - 2.0 * alpha;
        let all_reduce = dp(&Layout {
            grad_all_reduce: true,
            ..l
        }) - 3.0 * alpha;
        assert!(
            (all_reduce / scatter - 10.0 / 6.0).abs() < 1e-9,
            "{all_reduce} vs {scatter}"
        );
        // It describes ZeRO-1 only (no pipeline here: ZeRO-3 refuses one first).
        for zero in [0, 2, 3] {
            let bad = Layout {
                zero,
                grad_all_reduce: true,
                pp: 1,
                dp: 128,
                ..l
            };
            assert!(matches!(
                validate(&m, &hw, &net, &bad, None),
                Err(PlanError::GradAllReduceWithoutZero1 { .. })
            ));
        }
    }

    #[test]
    fn ring_latency_counts_hops_between_and_inside_nodes() {
        let (_, _, net) = setup();
        let (inter, intra) = (net.inter.latency.get(), net.intra.latency.get());
        // 16 ranks, 8 per node: 15 hops, one of them between the two nodes.
        let t = ring_latency(&net, 16.0, 8.0);
        assert!((t - (inter + 14.0 * intra)).abs() < 1e-15, "{t}");
        // One rank per node (TP 8): every hop crosses the network.
        assert!((ring_latency(&net, 16.0, 1.0) - 15.0 * inter).abs() < 1e-15);
        assert_eq!(ring_latency(&net, 1.0, 8.0), 0.0);
    }

    #[test]
    fn zero3_with_full_recompute_gathers_three_times_in_deepspeed_twice_in_fsdp() {
        // ZeRO-Infinity §4.1 (DeepSpeed): forward, recomputed forward and backward gathers plus
        // one reduce-scatter, against two gathers and one reduce-scatter without recomputation;
        // 16-bit weights and gradients: 4/3 of the traffic (not overlapped here). PyTorch
        // FSDP's pre-backward unshard serves the recomputation and the backward: no extra
        // gather (`_fsdp_state.py` `_pre_forward`), the same traffic as without recomputation.
        let (m, hw, net) = setup();
        let z3 = |recompute| Layout {
            tp: 1,
            pp: 1,
            dp: 384,
            mbs: 1,
            batch: 384,
            zero: 3,
            recompute,
            zero3_prefetch: Zero3Prefetch::Module,
            ..Layout::default()
        };
        let full = estimate(&m, &hw, &net, &z3(Recompute::Full));
        let sel = estimate(&m, &hw, &net, &z3(Recompute::Selective));
        let r = full.breakdown.dp_comm / sel.breakdown.dp_comm;
        assert!((r - 4.0 / 3.0).abs() < 1e-9, "{r}");
        let fsdp = |recompute| Layout {
            zero3_prefetch: Zero3Prefetch::Layer,
            ..z3(recompute)
        };
        let fsdp_full = estimate(&m, &hw, &net, &fsdp(Recompute::Full));
        let fsdp_sel = estimate(&m, &hw, &net, &fsdp(Recompute::Selective));
        let r = fsdp_full.breakdown.dp_comm / fsdp_sel.breakdown.dp_comm;
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        assert!((full.breakdown.dp_comm / fsdp_full.breakdown.dp_comm - 4.0 / 3.0).abs() < 1e-9);
        // Overlap hides some of it, and DeepSpeed-2021 module prefetch hides less than layers.
        let ovl = |p| Layout {
            overlap_dp: true,
            zero3_prefetch: p,
            ..z3(Recompute::Full)
        };
        let layer = estimate(&m, &hw, &net, &ovl(Zero3Prefetch::Layer));
        let module = estimate(&m, &hw, &net, &ovl(Zero3Prefetch::Module));
        assert!(layer.breakdown.dp_comm < full.breakdown.dp_comm);
        assert!(module.breakdown.dp_comm >= layer.breakdown.dp_comm);
    }

    /// GPT-3 175B on H100 at TP 8 with SP and FlashAttention: the fp8 layout and its bf16 twin.
    fn fp8_setup() -> (ModelShape, Hardware, Network, Layout, Layout) {
        let (m, hw, net) = catalog("h100", "gpt3-175b");
        let l = Layout {
            tp: 8,
            dp: 1,
            batch: 8,
            recompute: Recompute::Selective,
            sp: true,
            flash_attention: true,
            precision: Precision::Fp8,
            ..Layout::default()
        };
        let bf16 = Layout {
            precision: Precision::Bf16,
            ..l
        };
        (m, hw, net, l, bf16)
    }

    #[test]
    fn fp8_runs_only_the_linear_layers_in_fp8() {
        // With an fp8 peak that makes the fp8 GEMM rate equal the 16-bit one, an fp8 step
        // computes exactly as a bf16 step: attention and the output layer were at the 16-bit
        // rate all along, and the Linear layers now are too.
        let (m, mut hw, net, l, bf16) = fp8_setup();
        let curve = hw.class.curve();
        let bf16 = estimate(&m, &hw, &net, &bf16);
        hw.peak_fp8 = Some(hw.peak_bf16 * (curve.max_efficiency / curve.fp8_efficiency));
        let same_rate = estimate(&m, &hw, &net, &l);
        let (a, b) = (
            same_rate.breakdown.compute.get(),
            bf16.breakdown.compute.get(),
        );
        assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
        // A faster fp8 unit speeds up the Linear layers only: the step cannot fall below the
        // attention and output layer's 16-bit time.
        hw.peak_fp8 = Some(hw.peak_bf16 * 1e6);
        let unbounded = estimate(&m, &hw, &net, &l);
        let g = m.layer_gemms(8.0);
        let attention =
            96.0 * 3.5 * (g[1] + g[2]) / 8.0 / (curve.max_efficiency * hw.peak_bf16.get());
        assert!(unbounded.breakdown.compute.get() > attention);
        assert!(unbounded.breakdown.compute.get() < 0.5 * a);
    }

    #[test]
    fn fp8_casts_move_four_bytes_per_cast_element() {
        // GPT-3 175B, TP 8 (h 12,288, f 49,152): per token and layer the forward casts the QKV
        // and MLP inputs (h each, whole on every rank) and the attention output and MLP
        // activation (q + f)/8: 32,256 elements; the backward the output gradients, 2h +
        // (q + 2kv + f)/8 = 35,328. Each is read in 16-bit and written in fp8 and transposed:
        // 4 bytes (Transformer Engine's fused cast + transpose).
        let (m, hw, net, l, bf16) = fp8_setup();
        let bf16 = estimate(&m, &hw, &net, &bf16);
        let fp8 = estimate(&m, &hw, &net, &l);
        let curve = hw.class.curve();
        let mem_rate = hw.memory_bandwidth.get() * curve.memory_efficiency;
        let tokens = 8.0 * 2048.0;
        let want = 96.0 * (32256.0 + 35328.0) * 4.0 * tokens / mem_rate;
        let got = fp8.breakdown.memory_bound.get() - bf16.breakdown.memory_bound.get();
        assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    }

    #[test]
    fn unfused_attention_gemms_are_bound_by_the_scores_they_move() {
        // SC21's 1.7B (h 2,304, 24 heads of 96, s 2,048) at microbatch 16 without
        // FlashAttention: QKᵀ writes b·a·s² = 1.61e9 scores, 2 bytes each, for 2·96 FLOPs each:
        // 96 FLOP/byte, below A100's achieved ridge (0.72·312 TFLOP/s over 0.80·2,039 GB/s =
        // 138), so each of a layer's six attention GEMMs (2 forward, 4 backward) takes its
        // bytes over the bandwidth, not its FLOPs over the rate. With unbounded bandwidth the
        // compute time is that much shorter, and by nothing else.
        let (m, hw, net) = catalog("a100-80gb", "megatron-1.7b");
        let l = Layout {
            tp: 1,
            mbs: 16,
            batch: 16,
            recompute: Recompute::None,
            ..Layout::default()
        };
        let real = estimate(&m, &hw, &net, &l).breakdown.compute.get();
        let unbounded = Hardware {
            memory_bandwidth: crate::units::BytesPerSecond(1e18),
            ..hw.clone()
        };
        let ideal = estimate(&m, &unbounded, &net, &l).breakdown.compute.get();
        let curve = hw.class.curve();
        let (b, a, s, h) = (16.0, 24.0, 2048.0, 2304.0);
        let bytes = 2.0 * (b * a * s * s + 2.0 * s * b * h);
        let memory = bytes / (hw.memory_bandwidth.get() * curve.memory_efficiency);
        let flops =
            2.0 * b * s * s * h / (curve.max_efficiency * hw.peak_bf16.get()) + curve.latency.get();
        assert!(memory > flops);
        let want = 24.0 * 6.0 * (memory - flops);
        assert!(
            ((real - ideal) / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            real - ideal
        );
    }

    #[test]
    fn sequence_parallelism_saves_what_korthikanti_table_4_measured() {
        // Korthikanti et al. 2022, Table 4: one layer of their 22B model (h 6,144, 64 heads,
        // s 2,048, TP 8, batch 4, A100) forward + backward takes 19.6 ms, 19.0 with SP (−3 %);
        // with selective recomputation 20.9 ms, 20.3 with SP. Table 4 rounds to 0.1 ms: the
        // ratios hold to ±0.5 %; 1 % allowed. Without the backward's re-gather of the
        // column-parallel inputs the model's SP saved 7.8 %.
        let (m, hw, net) = catalog("a100-80gb", "megatron-18b");
        let layer = |sp: bool, recompute: Recompute| {
            let time = |layers: u32| {
                let m = ModelShape {
                    layers,
                    heads: 64,
                    kv_heads: 64,
                    ..m.clone()
                };
                let l = Layout {
                    tp: 8,
                    batch: 4,
                    sp,
                    recompute,
                    precision: Precision::Bf16,
                    ..Layout::default()
                };
                let b = estimate(&m, &hw, &net, &l).breakdown;
                (b.compute + b.memory_bound + b.tp_comm).get()
            };
            (time(48) - time(24)) / 24.0
        };
        let none = layer(false, Recompute::None);
        let sp = layer(true, Recompute::None);
        let sel = layer(false, Recompute::Selective);
        let sel_sp = layer(true, Recompute::Selective);
        assert!((sp / none - 19.0 / 19.6).abs() < 0.01, "{sp} / {none}");
        assert!(
            (sel_sp / sel - 20.3 / 20.9).abs() < 0.01,
            "{sel_sp} / {sel}"
        );
    }

    #[test]
    fn fp8_with_sp_gathers_one_byte_and_reduces_two() {
        // GPT-3 175B, TP 8 with SP: per layer and microbatch four all-gather + reduce-scatter
        // pairs (2 forward, 2 backward) and the two backward re-gathers. Under fp8 every gather
        // moves the cast copy (1 byte an element), every reduce-scatter 16-bit partial sums;
        // under bf16 all move 2 bytes.
        let (m, hw, net, l, bf16) = fp8_setup();
        let fp8 = estimate(&m, &hw, &net, &l).breakdown.tp_comm.get();
        let bf16 = estimate(&m, &hw, &net, &bf16).breakdown.tp_comm.get();
        let sbh = 2048.0 * 12288.0;
        let ag = |bytes: f64| all_gather(&net.intra, 8.0, bytes);
        let want = (4.0 * (ag(sbh) + ag(2.0 * sbh)) + 2.0 * ag(sbh))
            / (4.0 * all_reduce(&net.intra, 8.0, 2.0 * sbh) + 2.0 * ag(2.0 * sbh));
        assert!(
            ((fp8 / bf16) / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            fp8 / bf16
        );
        assert!(fp8 / bf16 < 0.8);
    }

    #[test]
    fn overlapped_pipeline_sends_hide_behind_the_next_chunk() {
        // 145B on 1,536 A100, v = 2: a send of b·s·h/t bytes crosses nodes; with overlap only
        // what exceeds a third of a chunk's time is exposed, so the sends of a large model hide.
        let (m, hw, net) = setup();
        let v2 = Layout {
            interleave: 2,
            ..base()
        };
        let plain = estimate(&m, &hw, &net, &v2);
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_pp: true,
                ..v2
            },
        );
        assert!(plain.breakdown.pp_comm.get() > 0.0);
        assert_eq!(ovl.breakdown.pp_comm.get(), 0.0);
        assert_eq!(ovl.breakdown.compute, plain.breakdown.compute);
        // Megatron overlaps sends only in the interleaved schedule.
        assert!(matches!(
            validate(
                &m,
                &hw,
                &net,
                &Layout {
                    overlap_pp: true,
                    ..base()
                },
                None
            ),
            Err(PlanError::OverlapPpWithoutInterleave)
        ));
    }

    #[test]
    fn distributed_optimizer_gathers_weights_behind_the_first_forward() {
        // ZeRO-1 with overlap: the gradient reduce-scatter hides behind the last microbatch's
        // backward and the weight all-gather behind the first microbatch's forward; without
        // overlap both are exposed.
        let (m, hw, net) = setup();
        let l = Layout { zero: 1, ..base() };
        let plain = estimate(&m, &hw, &net, &l);
        let ovl = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..l
            },
        );
        assert!(plain.breakdown.dp_comm.get() > 0.0);
        assert!(ovl.breakdown.dp_comm.get() > 0.0);
        assert!(ovl.breakdown.dp_comm.get() < plain.breakdown.dp_comm.get());
        // ZeRO-0's all-reduce moves the same bytes (16-bit gradients) but can hide only behind
        // the backward: ZeRO-1 exposes less by the forward window it also uses.
        let z0 = estimate(
            &m,
            &hw,
            &net,
            &Layout {
                overlap_dp: true,
                ..base()
            },
        );
        assert!(ovl.breakdown.dp_comm.get() < z0.breakdown.dp_comm.get());
    }
}
