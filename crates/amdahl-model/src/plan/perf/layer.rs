//! One transformer layer, one microbatch, on one device: its GEMM time (forward, backward,
//! recomputation) and its memory-bound element-wise time. For an MoE model every figure is the
//! mean over its dense and MoE layers.

use super::Setting;
use crate::plan::counts;
use crate::plan::moe;
use crate::plan::recompute;
use crate::plan::spec::{ModelShape, Recompute, RecomputeModule};

/// Time of one layer for one microbatch on one device, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerTimes {
    /// Forward core attention: two batched GEMMs, or one fused FlashAttention kernel.
    pub attn_fwd: f64,
    /// Backward core attention.
    pub attn_bwd: f64,
    /// Forward GEMMs outside core attention: QKV, output projection, MLP (or experts).
    pub dense_fwd: f64,
    /// Forward GEMMs, `dense_fwd + attn_fwd`.
    pub fwd_gemm: f64,
    /// GEMMs re-run in the backward pass by recomputation.
    pub recompute_gemm: f64,
    /// Every GEMM: forward, backward (data and weight gradient per forward GEMM) and
    /// recomputation.
    pub gemm: f64,
    /// Forward memory-bound element-wise work.
    pub fwd_mem: f64,
    /// Memory-bound work re-run by recomputation (and the fp8 casts it repeats).
    pub recompute_mem: f64,
    /// Every memory-bound part: forward, backward (≈ 2× forward), recomputation, fp8 casts.
    pub mem: f64,
    /// The forward pass's share of the layer's work (ZeRO-3's overlap is phase by phase).
    pub fwd_share: f64,
}

/// One layer's GEMM and memory-bound time (docs: "GEMM efficiency", "Memory-bound work").
pub fn layer(x: &Setting) -> LayerTimes {
    let (model, l, t) = (x.model, x.l, x.t);
    let bs = x.b * x.s;
    let mut g = x.local.layer_gemms(x.b);
    // A rank's queries still attend to all cp·(s/cp) keys: core attention shrinks by cp, not cp².
    g[1] *= x.cp;
    g[2] *= x.cp;
    let (attn_fwd, attn_bwd) = core_attention(x, g[1], g[2]);
    let dense_fwd = x.k.gemm(g[0] / t)
        + x.k.gemm(g[3] / t)
        + moe::mlp_forward_time(model, l, bs, |f| x.k.gemm(f));
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
            let others = recompute::recomputed_gemm_flops_per_token(model, modules) * x.b * x.s / t;
            core + if others > 0.0 { x.k.gemm(others) } else { 0.0 }
        }
        Recompute::Full => fwd_gemm,
    };
    // Backward: a data-gradient and a weight-gradient GEMM per forward GEMM.
    // The backward of a dense GEMM is its data gradient and its weight gradient; LoRA's frozen
    // weights need only the data gradient (the adapters' own GEMMs are not counted).
    let backward_dense = if x.l.lora_rank.is_some() { 1.0 } else { 2.0 };
    let gemm = fwd_gemm + backward_dense * dense_fwd + attn_bwd + recompute_gemm;
    let el = elementwise(x);
    let mem = 3.0 * el.fwd + el.recompute + el.cast_fwd + el.cast_bwd;
    LayerTimes {
        attn_fwd,
        attn_bwd,
        dense_fwd,
        fwd_gemm,
        recompute_gemm,
        gemm,
        fwd_mem: el.fwd,
        recompute_mem: el.recompute,
        mem,
        fwd_share: (fwd_gemm + el.fwd) / (gemm + mem).max(f64::MIN_POSITIVE),
    }
}

/// Forward and backward core attention from its two GEMMs' FLOPs (`scores`: QKᵀ, `context`:
/// softmax·V, before TP). Two batched GEMMs, or one fused FlashAttention kernel whose backward
/// re-computes QKᵀ: 5 GEMM-sized products against the forward's 2 (Dao 2023, §3.1.2).
fn core_attention(x: &Setting, scores: f64, context: f64) -> (f64, f64) {
    let (t, s, cp, b) = (x.t, x.s, x.cp, x.b);
    let latency = x.k.latency;
    if x.l.flash_attention {
        let k = x.k.gemm16((scores + context) / t);
        (k, 2.5 * (k - latency) + latency)
    } else {
        // Without FlashAttention the two batched GEMMs write (QKᵀ) and read (PV) the
        // b·a·s·(s·cp)/t scores, at 2·head_dim FLOPs per score: below A100's ridge (~140
        // FLOP/byte achieved), so they take the longer of compute and memory (roofline; the
        // backward's four GEMMs touch the scores and their gradient four times).
        let score_elements = x.a * s * (s * cp) * b / t;
        let operands = (s + s * cp) * b * x.model.q_width() / t;
        let bytes = x.act * (score_elements + operands);
        let mem_rate = x.k.mem_rate;
        let k = x.k.gemm16(scores / t).max(bytes / mem_rate)
            + x.k.gemm16(context / t).max(bytes / mem_rate);
        (k, 2.0 * k)
    }
}

/// Memory-bound time of one layer, by part.
struct Elementwise {
    fwd: f64,
    recompute: f64,
    cast_fwd: f64,
    cast_bwd: f64,
}

/// Element-wise traffic, bytes per element (docs: "Memory-bound work"): LayerNorms 2×4,
/// bias-dropout-adds 2×7 on the token-hidden tensor; GeLU 4 (SwiGLU 6) per MLP element; fused
/// scale-mask-softmax + dropout 9 per attention-score element. Backward ≈ 2× forward. MoE: the
/// MLP elements of every dispatched copy, and the permutation that gathers each expert's
/// tokens and scatters them back (read + write of every copy, twice).
fn elementwise(x: &Setting) -> Elementwise {
    let (model, l, t) = (x.model, x.l, x.t);
    let (s, b, h, cp) = (x.s, x.b, x.h, x.cp);
    let mem_rate = x.k.mem_rate;
    let scale = x.act / 2.0;
    let sbh = x.sbh;
    let unsplit = if l.sp { sbh / t } else { sbh };
    let mlp_el = sbh * counts::mean_mlp_width(model) / h / t
        * if model.gated_mlp { 6.0 } else { 4.0 }
        + 8.0 * sbh * counts::mean_dispatched_copies(model);
    let score_el = if l.flash_attention {
        0.0
    } else {
        9.0 * x.a * s * (s * cp) * b / t
    };
    let fwd = scale * (22.0 * unsplit + mlp_el + score_el) / mem_rate;
    // fp8: every fp8 GEMM input is quantised by a fused cast + transpose (Transformer Engine
    // `fp8_cast_transpose_fused`: Hopper's fp8 GEMMs take only the TN layout, so the backward
    // needs the transposed copy): 2 bytes read, 1 + 1 written per element, forward for the
    // Linear layers' inputs, backward for their output gradients (`fp8_cast_elements`).
    let cast = |forward: bool| {
        if x.k.fp8 {
            fp8_cast_elements(model, t, forward) * s * b * 4.0 / mem_rate
        } else {
            0.0
        }
    };
    let (cast_fwd, cast_bwd) = (cast(true), cast(false));
    let modules = l.recompute_modules;
    let recompute = match l.recompute {
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
        Recompute::Full => fwd + cast_fwd,
    };
    Elementwise {
        fwd,
        recompute,
        cast_fwd,
        cast_bwd,
    }
}

/// Elements per token of one layer (per TP rank) that an fp8 recipe casts to fp8: forward, the
/// inputs of the Linear layers (QKV and first MLP input `h` each, the attention output
/// `q_width/t`, the second MLP input `f/t`); backward, their output gradients (`(q + 2·kv)/t`,
/// `h`, the first MLP's `f/t` (`2f/t` gated), `h`). `f` is the mean MLP width (MoE: every
/// dispatched copy). With TP the `h`-wide tensors are whole on every rank.
pub(crate) fn fp8_cast_elements(model: &ModelShape, t: f64, forward: bool) -> f64 {
    let h = f64::from(model.hidden);
    let f = counts::mean_mlp_width(model);
    if forward {
        2.0 * h + (model.q_width() + f) / t
    } else {
        let up = if model.gated_mlp { 2.0 * f } else { f };
        2.0 * h + (model.q_width() + 2.0 * model.kv_width() + up) / t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::perf::phase_tests::{base, close, setting, setup};
    use crate::plan::spec::Layout;

    #[test]
    fn without_recomputation_a_layer_is_three_forwards() {
        // Backward = a data- and a weight-gradient GEMM per forward GEMM, and 2× the forward's
        // element-wise work (unfused attention's backward is 2× its forward too).
        let (m, hw, net) = setup();
        let l = Layout {
            recompute: Recompute::None,
            ..base()
        };
        let lt = layer(&setting(&m, &hw, &net, &l));
        assert_eq!(lt.recompute_gemm, 0.0);
        assert_eq!(lt.recompute_mem, 0.0);
        close(lt.gemm, 3.0 * lt.fwd_gemm);
        close(lt.mem, 3.0 * lt.fwd_mem);
        close(lt.fwd_share, 1.0 / 3.0);
    }

    #[test]
    fn full_recomputation_re_runs_the_whole_forward() {
        // Megatron's 96/72: one more forward pass in the backward, GEMMs and element-wise work.
        let (m, hw, net) = setup();
        let l = base();
        let lt = layer(&setting(&m, &hw, &net, &l));
        assert_eq!(lt.recompute_gemm, lt.fwd_gemm);
        assert_eq!(lt.recompute_mem, lt.fwd_mem);
        close(lt.gemm, 4.0 * lt.fwd_gemm);
        close(lt.mem, 4.0 * lt.fwd_mem);
        close(lt.fwd_share, 0.25);
    }

    #[test]
    fn flash_attention_is_one_kernel_whose_backward_is_five_halves() {
        // Dao 2023 §3.1.2: one fused kernel of QKᵀ + PV FLOPs; the backward's 5 products against
        // the forward's 2, one kernel latency each way.
        let (m, hw, net) = setup();
        let l = Layout {
            flash_attention: true,
            ..base()
        };
        let x = setting(&m, &hw, &net, &l);
        let lt = layer(&x);
        let g = m.layer_gemms(1.0);
        let latency = x.k.latency;
        close(lt.attn_fwd, latency + (g[1] + g[2]) / 8.0 / x.k.rate16);
        close(lt.attn_bwd - latency, 2.5 * (lt.attn_fwd - latency));
        close(lt.fwd_gemm, lt.dense_fwd + lt.attn_fwd);
    }

    #[test]
    fn forward_elementwise_bytes_follow_the_per_element_counts() {
        // FlashAttention, no SP, bf16 (scale 1): 22 bytes per token-hidden element (LayerNorms
        // 2×4, bias-dropout-adds 2×7) on every rank, GeLU's 4 per MLP element split by TP
        // (ffn = 4h: 16/8 = 2 per token-hidden element), no score tensor: 24 · s·b·h bytes.
        let (m, hw, net) = setup();
        let l = Layout {
            flash_attention: true,
            ..base()
        };
        let x = setting(&m, &hw, &net, &l);
        let lt = layer(&x);
        let sbh = 2048.0 * 12288.0;
        close(lt.fwd_mem, 24.0 * sbh / x.k.mem_rate);
    }
}
