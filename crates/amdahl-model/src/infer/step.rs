//! One forward pass of a served model on one pipeline stage of one device: a roofline per
//! operation. Every operation takes the larger of its FLOPs at the device's attainable rate for
//! that size (the planner's [`GemmCurve`](crate::plan::GemmCurve): kernel latency + FLOPs at the
//! sustained rate) and its bytes over the achieved memory bandwidth; tensor-parallel all-reduces
//! are added on the tier they cross. Formulas and sources: docs/methodology.md ("Inference").

use super::engine::Engine;
use super::precision::{Arithmetic, KvFormat, WeightFormat};
use crate::plan::collective::all_reduce;
use crate::plan::{ComputePrecision, Hardware, ModelShape, Network};

/// Fixed cost of one forward pass outside the kernels: the serving engine's per-iteration
/// scheduling, input preparation and sampling. 1 ms, an order-of-magnitude **estimate** (not
/// fitted): Srivatsa et al. 2024 ("Can scheduling overhead dominate LLM inference performance?",
/// UCSD WukLab) show this per-iteration CPU work (tensor pre- and post-processing) taking more
/// than half the inference time in vLLM and much less in SGLang on current GPUs. Kernel-launch
/// costs are not in here: they are the GEMM curve's per-kernel latency.
pub const STEP_OVERHEAD_S: f64 = 1e-3;

/// Bytes of one activation element (16-bit: fp8 GEMMs take 16-bit activations in and quantise
/// them on the fly, as TensorRT-LLM's and vLLM's fp8 paths do; communication stays 16-bit).
pub const ACT_BYTES: f64 = 2.0;

/// Bytes of a weight kept at 16 bits. Every quantised format here keeps the embedding and the
/// output layer (LM head) at 16 bits, as the tools that make such checkpoints do: NVIDIA Model
/// Optimizer disables `*lm_head*` quantisers by default (`modelopt.torch.quantization.config`),
/// vLLM's `--quantization fp8` converts linear layers only (the LM head is a
/// `ParallelLMHead`), AutoAWQ and GPTQ quantise the decoder layers' linears only, and Meta's
/// FP8 checkpoints list `lm_head` among the modules not converted.
pub const SIXTEEN_BIT_BYTES: f64 = 2.0;

/// What one pass costs one device: wall time and where it went, and the work done (for MFU,
/// MBU and the power model).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pass {
    pub time: f64,
    /// Seconds of operations limited by arithmetic.
    pub compute: f64,
    /// Seconds of operations limited by memory bandwidth.
    pub memory: f64,
    /// Seconds of kernels too small for either limit: their time is the GEMM curve's per-kernel
    /// latency (launch, ramp-up, last wave).
    pub latency: f64,
    /// Seconds of tensor-parallel all-reduces.
    pub comm: f64,
    /// The fixed per-step overhead.
    pub overhead: f64,
    /// The engine's per-sequence time for the pass's sequences ([`super::engine::Engine`]):
    /// memory-bound GPU work.
    pub host: f64,
    /// FLOPs this device executed.
    pub flops: f64,
    /// Bytes this device moved to or from its memory.
    pub bytes: f64,
}

impl Pass {
    /// Add `w` × the kernel time and work of `x` (one of several kinds of layer, weighted by
    /// its share of the layers).
    fn add_scaled(&mut self, x: &Pass, w: f64) {
        self.compute += w * x.compute;
        self.memory += w * x.memory;
        self.latency += w * x.latency;
        self.flops += w * x.flops;
        self.bytes += w * x.bytes;
    }
}

/// The device-side constants of a configuration, computed once per evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Device {
    /// Sustained GEMM rate at the arithmetic precision (its efficiency × peak).
    pub gemm_rate: f64,
    /// Sustained GEMM rate at the device's 16-bit precision: the output layer, and the layers
    /// a mixed format keeps at 16 bits.
    pub gemm_rate16: f64,
    /// Sustained rate of attention (16-bit: FlashAttention).
    pub attn_rate: f64,
    /// Per-kernel latency of the GEMM curve.
    pub latency: f64,
    /// Achieved memory bandwidth.
    pub bandwidth: f64,
    /// Fixed time per step: [`STEP_OVERHEAD_S`], or the user's calibrated figure.
    pub overhead: f64,
    /// Time per sequence of a step (GPU work): the engine's, or the user's calibrated figure.
    pub per_sequence: f64,
}

impl Device {
    pub fn new(hw: &Hardware, arith: Arithmetic, engine: Engine) -> Self {
        let curve = hw.curve();
        let peak = hw.peak(arith.precision).unwrap_or(hw.peak_bf16).get();
        let sixteen = WeightFormat::Bf16.arithmetic(hw).precision;
        let peak16 = hw.peak(sixteen).unwrap_or(hw.peak_bf16).get();
        Device {
            gemm_rate: curve.efficiency(arith.precision) * peak,
            gemm_rate16: curve.efficiency(sixteen) * peak16,
            attn_rate: curve.max_efficiency
                * hw.peak(ComputePrecision::Bf16).map_or(peak, |p| p.get()),
            latency: curve.latency.get(),
            bandwidth: hw.memory_bandwidth.get() * curve.memory_efficiency,
            overhead: hw.step_overhead().map_or(STEP_OVERHEAD_S, |o| o.get()),
            per_sequence: hw
                .per_sequence_overhead()
                .map_or(engine.per_sequence_s(), |o| o.get()),
        }
    }
}

/// The sharded shape one device holds: per-GPU widths with TP `t`, layers with PP `p`.
#[derive(Debug, Clone, Copy)]
pub struct Shard {
    pub tp: f64,
    pub layers: f64,
    pub hidden: f64,
    pub ffn: f64,
    pub vocab: f64,
    /// Query heads × head width on this device (h / t).
    pub q_width: f64,
    /// Key (= value) heads × head width on this device; at least one head: with t > kv_heads
    /// each KV head is replicated t / kv_heads times (vLLM, TensorRT-LLM).
    pub kv_width: f64,
    /// Extra MLP matrices beyond the down projection (1 plain, 2 gated).
    pub up_mats: f64,
    /// Bytes per weight of the quantised (or 16-bit) matrices.
    pub w_bytes: f64,
    /// The attention projections at 16 bits ([`WeightFormat::sixteen_bit_attention`]).
    pub attn16: bool,
    /// Share of the layers whose MLP is 16-bit too ([`WeightFormat::sixteen_bit_layers`]).
    pub mlp16_share: f64,
    pub kv_bytes: f64,
    /// V × h matrices held: 1 tied embedding, 2 with a separate output layer (Llama).
    pub embeddings: f64,
    /// Mixture of experts, if the model has one.
    pub moe: Option<MoeShard>,
}

/// A mixture of experts as one device serves it: every expert resident (split by TP like the
/// dense MLP), each token computing `top_k` routed and `shared` experts.
#[derive(Debug, Clone, Copy)]
pub struct MoeShard {
    /// Fraction of the layers that are MoE layers.
    pub frac: f64,
    pub experts: f64,
    pub top_k: f64,
    pub shared: f64,
    /// One expert's MLP width (before the TP split).
    pub expert_ffn: f64,
}

impl MoeShard {
    /// Expected number of distinct routed experts `tokens` tokens use in one layer, with
    /// uniform routing: E·(1 − (1 − k/E)^tokens). A decode step reads only these experts'
    /// weights: at batch 1 top_k of them, at large batches all (Mixtral: Jiang et al. 2024 §4
    /// report experts chosen close to uniformly).
    pub fn touched(&self, tokens: f64) -> f64 {
        self.experts * (1.0 - (1.0 - self.top_k / self.experts).powf(tokens))
    }
}

impl Shard {
    pub fn new(m: &ModelShape, tp: u32, pp: u32, w: WeightFormat, kv: KvFormat) -> Self {
        let t = f64::from(tp);
        let head = m.head_width();
        let kv_heads = (f64::from(m.kv_heads) / t).max(1.0);
        Shard {
            tp: t,
            layers: f64::from(m.layers) / f64::from(pp),
            hidden: f64::from(m.hidden),
            ffn: f64::from(m.ffn),
            vocab: f64::from(m.vocab),
            q_width: m.q_width() / t,
            kv_width: kv_heads * head,
            up_mats: m.mlp_matrices() - 1.0,
            w_bytes: w.bytes(),
            attn16: w.sixteen_bit_attention(),
            // (For a mixture of experts only the attention: Meta's MoE recipe differs, and the
            // outer layers' experts are not itemised.)
            mlp16_share: if m.moe.is_some() {
                0.0
            } else {
                (w.sixteen_bit_layers() / f64::from(m.layers)).min(1.0)
            },
            kv_bytes: kv.bytes(),
            embeddings: m.embedding_matrices(),
            moe: m.moe.map(|e| MoeShard {
                frac: crate::plan::counts::moe_fraction(m),
                experts: f64::from(e.experts),
                top_k: f64::from(e.top_k),
                shared: f64::from(e.shared_experts),
                expert_ffn: f64::from(e.expert_ffn),
            }),
        }
    }

    /// Attention weights of one layer on this device (QKV and output projection).
    pub fn attention_weights(&self) -> f64 {
        let h = self.hidden;
        h * (self.q_width + 2.0 * self.kv_width) + self.q_width * h
    }

    /// MLP weights of one layer on this device (norms are negligible). For a mixture of experts
    /// the mean over layers, every expert and the router counted.
    pub fn mlp_weights(&self) -> f64 {
        let h = self.hidden;
        let dense = (self.up_mats + 1.0) * h * self.ffn / self.tp;
        match &self.moe {
            None => dense,
            Some(e) => {
                let moe = (self.up_mats + 1.0) * h * e.expert_ffn / self.tp
                    * (e.experts + e.shared)
                    + h * e.experts;
                e.frac * moe + (1.0 - e.frac) * dense
            }
        }
    }

    /// Bytes per attention-projection weight.
    fn attention_bytes(&self) -> f64 {
        if self.attn16 {
            SIXTEEN_BIT_BYTES
        } else {
            self.w_bytes
        }
    }

    /// Bytes per MLP weight, the mean over layers.
    fn mlp_bytes(&self) -> f64 {
        self.w_bytes + self.mlp16_share * (SIXTEEN_BIT_BYTES - self.w_bytes)
    }

    /// MLP width per token that element-wise work and activations see (mean over layers).
    pub fn mlp_width(&self) -> f64 {
        match &self.moe {
            None => self.ffn,
            Some(e) => e.frac * e.expert_ffn * (e.top_k + e.shared) + (1.0 - e.frac) * self.ffn,
        }
    }

    /// KV-cache bytes of one token on this device (all layers of the stage).
    pub fn kv_per_token(&self) -> f64 {
        self.layers * 2.0 * self.kv_width * self.kv_bytes
    }

    /// Weight bytes on this device: the stage's layers plus the embedding and, when untied, the
    /// separate output layer (16-bit under every format, [`SIXTEEN_BIT_BYTES`]), split over TP.
    /// (Every stage is charged both, the first and last stage's share; a small overestimate
    /// for pp > 1.) The output layer is read once per pass either way (the logit GEMM), the
    /// embedding only for the tokens' rows, so an untied model needs more memory but no more
    /// time.
    pub fn weight_bytes(&self) -> f64 {
        self.layers
            * (self.attention_weights() * self.attention_bytes()
                + self.mlp_weights() * self.mlp_bytes())
            + self.embeddings * self.vocab * self.hidden / self.tp * SIXTEEN_BIT_BYTES
    }
}

/// The work of one pass: `tokens` new tokens of `rows` sequences whose queries attend to
/// `pairs` (query, key) pairs in all, reading `kv_read` tokens of cached keys and values.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub tokens: f64,
    pub rows: f64,
    pub pairs: f64,
    pub kv_read: f64,
}

impl Work {
    /// Prefill of `seqs` prompts of `len` tokens: causal attention, L(L+1)/2 pairs per prompt;
    /// keys and values stay on chip (FlashAttention), so only the new cache is written.
    pub fn prefill(seqs: f64, len: f64) -> Self {
        Work {
            tokens: seqs * len,
            rows: seqs,
            pairs: seqs * len * (len + 1.0) / 2.0,
            kv_read: 0.0,
        }
    }

    /// One decode step of `seqs` sequences holding `ctx` tokens each: one query each, every
    /// cached key and value read once (PagedAttention; Kwon et al. 2023).
    pub fn decode(seqs: f64, ctx: f64) -> Self {
        Work {
            tokens: seqs,
            rows: seqs,
            pairs: seqs * ctx,
            kv_read: seqs * ctx,
        }
    }
}

/// Time of one pass over one stage's layers (and the output layer) on one device.
pub fn pass(s: &Shard, d: &Device, net: &Network, w: &Work) -> Pass {
    let mut p = Pass::default();
    let t = w.tokens;
    let h = s.hidden;
    let gemm_at = |k: f64, n: f64, rows: f64, format: (f64, f64), p: &mut Pass| {
        gemm_into(p, d, (rows, k, n), format)
    };
    let (quantised, sixteen) = ((s.w_bytes, d.gemm_rate), (SIXTEEN_BIT_BYTES, d.gemm_rate16));
    let gemm = |k: f64, n: f64, rows: f64, p: &mut Pass| gemm_at(k, n, rows, quantised, p);
    let mut layer = Pass::default();
    let attn = if s.attn16 { sixteen } else { quantised };
    gemm_at(h, s.q_width + 2.0 * s.kv_width, t, attn, &mut layer);
    gemm_at(s.q_width, h, t, attn, &mut layer);
    match &s.moe {
        None => {
            // The MLP, at 16 bits in the share of layers a mixed format keeps there.
            for (share, format) in [(1.0 - s.mlp16_share, quantised), (s.mlp16_share, sixteen)] {
                if share > 0.0 {
                    let mut mlp = Pass::default();
                    gemm_at(h, s.up_mats * s.ffn / s.tp, t, format, &mut mlp);
                    gemm_at(s.ffn / s.tp, h, t, format, &mut mlp);
                    layer.add_scaled(&mlp, share);
                }
            }
        }
        Some(e) => {
            // Dense layers' MLP and MoE layers' router, shared and routed experts, each
            // weighted by its share of the layers.
            let mut dense = Pass::default();
            gemm(h, s.up_mats * s.ffn / s.tp, t, &mut dense);
            gemm(s.ffn / s.tp, h, t, &mut dense);
            let mut moe = Pass::default();
            gemm(h, e.experts, t, &mut moe);
            if e.shared > 0.0 {
                gemm(h, s.up_mats * e.shared * e.expert_ffn / s.tp, t, &mut moe);
                gemm(e.shared * e.expert_ffn / s.tp, h, t, &mut moe);
            }
            // Routed experts as grouped GEMMs (up and down): the FLOPs of top_k experts per
            // token, the weights of the experts the step's tokens touch.
            let fe = e.expert_ffn / s.tp;
            let touched = e.touched(t);
            for (k, n) in [(h, s.up_mats * fe), (fe, h)] {
                let flops = 2.0 * t * e.top_k * k * n;
                let bytes = touched * k * n * s.w_bytes + t * e.top_k * (k + n) * ACT_BYTES;
                charge(
                    &mut moe,
                    flops / d.gemm_rate,
                    d.latency,
                    bytes / d.bandwidth,
                );
                moe.flops += flops;
                moe.bytes += bytes;
            }
            layer.add_scaled(&dense, 1.0 - e.frac);
            layer.add_scaled(&moe, e.frac);
        }
    }
    // Attention: QKᵀ and softmax·V, 2 FLOPs per multiply–add, per (query, key) pair and head
    // width; the cache read (decode) and written (new tokens), queries and outputs streamed.
    let attn_flops = 4.0 * w.pairs * s.q_width;
    let attn_bytes =
        (w.kv_read + t) * 2.0 * s.kv_width * s.kv_bytes + 2.0 * t * s.q_width * ACT_BYTES;
    charge(
        &mut layer,
        attn_flops / d.attn_rate,
        d.latency,
        attn_bytes / d.bandwidth,
    );
    // Element-wise: two RMSNorms (read + write h), two residual adds (3h), the MLP activation
    // (read 2 f/t, write f/t for a gated MLP).
    let ew = t * ACT_BYTES * (10.0 * h + 3.0 * s.mlp_width() / s.tp);
    layer.memory += ew / d.bandwidth;
    layer.flops += attn_flops;
    layer.bytes += attn_bytes + ew;
    // Tensor parallelism: two all-reduces of the t × h activation per layer (after the attention
    // output projection and after the MLP; Shoeybi et al. 2019, Fig. 3).
    let link = if s.tp <= f64::from(net.gpus_per_node) {
        net.intra_link()
    } else {
        net.inter_link()
    };
    layer.comm = 2.0 * all_reduce(link, s.tp, t * h * ACT_BYTES);

    p.compute = layer.compute * s.layers;
    p.memory = layer.memory * s.layers;
    p.latency = layer.latency * s.layers;
    p.comm = layer.comm * s.layers;
    p.flops = layer.flops * s.layers;
    p.bytes = layer.bytes * s.layers;
    // Output layer: logits of the last token of every sequence, 16-bit under every format.
    gemm_at(h, s.vocab / s.tp, w.rows, sixteen, &mut p);
    p.overhead = d.overhead;
    // The engine's time per running sequence: GPU work the kernels above do not itemise, in
    // series with them (docs/methodology.md, "Engine per-sequence time"). Its memory traffic
    // counts for power (model.rs, `activity`), not in `bytes`, which MBU reads.
    p.host = d.per_sequence * w.rows;
    p.time = p.compute + p.memory + p.latency + p.comm + p.overhead + p.host;
    p
}

/// A GEMM of a (rows × k) activation by a (k × n) weight shard stored at `w_bytes` per weight,
/// at the sustained `rate`, charged to `p`.
fn gemm_into(p: &mut Pass, d: &Device, (rows, k, n): (f64, f64, f64), (w_bytes, rate): (f64, f64)) {
    let flops = 2.0 * rows * k * n;
    let bytes = k * n * w_bytes + rows * (k + n) * ACT_BYTES;
    charge(p, flops / rate, d.latency, bytes / d.bandwidth);
    p.flops += flops;
    p.bytes += bytes;
}

/// Roofline of one kernel: max(latency + FLOPs/rate, bytes/bandwidth), charged to arithmetic,
/// memory or (when neither the FLOPs nor the bytes outweigh the kernel latency) latency.
fn charge(p: &mut Pass, compute: f64, latency: f64, memory: f64) {
    if latency + compute < memory {
        p.memory += memory;
    } else if compute >= memory {
        p.compute += latency + compute;
    } else {
        p.latency += latency + compute;
    }
}
