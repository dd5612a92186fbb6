//! A parallel layout of one training job and the constraints it must satisfy.

use super::error::{nearest_divisors, nearest_multiples, PlanError};
use super::hardware::{Hardware, Network, Precision};
use super::moe;
use super::optimizer::OptimizerDtype;
use super::recompute::{RecomputeModule, RecomputeModules};
use super::shape::ModelShape;
use super::stages::stage_layers;
use serde::{Deserialize, Serialize};

/// Activation recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in
/// Large Transformer Models").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Keep every activation.
    None,
    /// Recompute only the core attention (QKᵀ, softmax, dropout, ·V), whose activations grow
    /// with s² but whose FLOPs are small.
    Selective,
    /// Keep only each layer's input; re-run the whole forward during the backward pass.
    Full,
}

impl Recompute {
    pub const ALL: [Recompute; 3] = [Recompute::None, Recompute::Selective, Recompute::Full];

    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Some(Recompute::None),
            "selective" => Some(Recompute::Selective),
            "full" => Some(Recompute::Full),
            _ => None,
        }
    }
}

/// How ZeRO-3 gathers the weights ahead of their use (what its overlap of communication with
/// computation can reach; docs/methodology.md "ZeRO-3 overlap").
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Zero3Prefetch {
    /// One unit per transformer layer, the next layer's weights gathered while this layer
    /// computes (PyTorch FSDP with one unit per layer and backward prefetch; Zhao et al. 2023,
    /// "PyTorch FSDP", §3.3): communication hides behind computation phase by phase.
    #[default]
    Layer,
    /// One weight matrix at a time, the next one gathered while this one computes and waited
    /// for before it runs (DeepSpeed ZeRO-3 as released in 2021: `fetch_sub_module` blocks and
    /// synchronises the device, `prefetch_next_sub_modules` starts a prefetch only when none is
    /// in flight). Matrices of unequal size then pair a small computation with a large gather.
    Module,
}

impl Zero3Prefetch {
    pub fn name(self) -> &'static str {
        match self {
            Zero3Prefetch::Layer => "layer",
            Zero3Prefetch::Module => "module",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "layer" => Some(Zero3Prefetch::Layer),
            "module" => Some(Zero3Prefetch::Module),
            _ => None,
        }
    }
}

/// Everything that defines how one job is laid out on the devices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Layout {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Model chunks per pipeline stage (interleaved 1F1B, Narayanan et al. 2021 §2.2.2); 1 = none.
    pub interleave: u32,
    /// Microbatch size in sequences.
    pub mbs: u32,
    /// Global batch in sequences.
    pub batch: u32,
    pub recompute: Recompute,
    /// ZeRO stage 0–3 (Rajbhandari et al. 2020); 3 is what PyTorch calls FSDP.
    pub zero: u8,
    /// Sequence parallelism (Korthikanti et al. 2022 §4.2.2).
    pub sp: bool,
    pub precision: Precision,
    /// Overlap data-parallel gradient communication with the backward pass.
    pub overlap_dp: bool,
    /// Fused attention that never materialises the s × s scores (FlashAttention, Dao et al.
    /// 2022; FlashAttention-2, Dao 2023).
    pub flash_attention: bool,
    /// Expert parallelism: each MoE layer's routed experts spread over `ep` ranks of the
    /// data-parallel group (a divisor of `dp` and of the expert count); 1 = every rank holds
    /// every expert. Part of `dp`, so the device count stays tp × pp × dp.
    #[serde(default = "one")]
    pub ep: u32,
    /// Hide the expert-parallel all-to-alls behind the computation of another microbatch
    /// (DeepSeek-V3's DualPipe, DeepSeek-AI 2024 §3.2.1; Megatron-Core's
    /// `--overlap-moe-expert-parallel-comm`): only what exceeds the computation is exposed.
    #[serde(default)]
    pub overlap_ep: bool,
    /// Context parallelism: each sequence split over `cp` ranks, attention by a ring exchange of
    /// K and V (Liu et al. 2023, Ring Attention; Dubey et al. 2024 §3.3.2). 1 = none.
    #[serde(default = "one")]
    pub cp: u32,
    /// Overlap tensor-parallel all-gathers / reduce-scatters with the GEMMs they feed (NeMo
    /// `tp_comm_overlap`, Transformer Engine userbuffers; MegaScale §3.2). Needs `sp`.
    #[serde(default)]
    pub tp_overlap: bool,
    /// Precision of Adam's moments (`--optimizer-dtype`); the master weights stay fp32.
    #[serde(default)]
    pub optimizer_dtype: OptimizerDtype,
    /// Gradients accumulated in fp32 (Megatron's `main_grad`, 4 bytes per parameter instead of 2).
    #[serde(default)]
    pub fp32_grads: bool,
    /// ZeRO-3's gathering unit and prefetch (`--zero3-prefetch`); ignored below ZeRO-3.
    #[serde(default)]
    pub zero3_prefetch: Zero3Prefetch,
    /// With `recompute: selective`, the parts of each layer re-run in the backward pass
    /// (`--recompute-modules`, Megatron-Core's names); default core attention only.
    #[serde(default, skip_serializing_if = "RecomputeModules::is_default")]
    pub recompute_modules: RecomputeModules,
    /// Overlap the pipeline's sends and receives with the next model chunk's computation
    /// (Megatron-LM `overlap_p2p_comm`, interleaved schedule only; NeMo `overlap_p2p_comm`).
    #[serde(default)]
    pub overlap_pp: bool,
    /// ZeRO-1 that all-reduces the whole gradient before each rank updates its shard, instead
    /// of reduce-scattering it: DeepSpeed's `BF16_Optimizer` under pipeline parallelism
    /// (`pipe/engine.py` `_bf16_reduce_grads` → `buffered_allreduce_fallback` over the
    /// optimizer's full fp32 gradient buffer, `bf16_optimizer.py` `get_grads_for_reduction`),
    /// then all-gathers the updated weights (`update_lp_params`). ZeRO-1 only.
    #[serde(default)]
    pub grad_all_reduce: bool,
}

fn one() -> u32 {
    1
}

/// One device, one sequence, nothing recomputed, sharded or overlapped, bf16: the baseline that
/// a layout names its departures from (`Layout { tp: 8, ..Layout::default() }`).
impl Default for Layout {
    fn default() -> Self {
        Self {
            tp: 1,
            pp: 1,
            dp: 1,
            interleave: 1,
            mbs: 1,
            batch: 1,
            recompute: Recompute::None,
            zero: 0,
            sp: false,
            precision: Precision::Bf16,
            overlap_dp: false,
            flash_attention: false,
            ep: 1,
            overlap_ep: false,
            cp: 1,
            tp_overlap: false,
            optimizer_dtype: OptimizerDtype::Fp32,
            fp32_grads: false,
            zero3_prefetch: Zero3Prefetch::Layer,
            recompute_modules: RecomputeModules::default(),
            overlap_pp: false,
            grad_all_reduce: false,
        }
    }
}

impl Layout {
    pub fn gpus(&self) -> u64 {
        u64::from(self.tp) * u64::from(self.cp) * u64::from(self.pp) * u64::from(self.dp)
    }

    /// Ranks in one model replica's tensor × context group (the ranks a gradient is reduced
    /// across besides DP: context-parallel ranks hold the same weights).
    pub fn tp_cp(&self) -> u64 {
        u64::from(self.tp) * u64::from(self.cp)
    }

    /// `selective`, or `selective(layernorm,mla_up_proj,moe_act)` when other modules than core
    /// attention are named.
    pub fn recompute_label(&self) -> String {
        if self.recompute == Recompute::Selective && !self.recompute_modules.is_default() {
            format!("selective({})", self.recompute_modules.names())
        } else {
            self.recompute.name().to_string()
        }
    }

    /// Microbatches per pipeline per iteration, m = B / (DP · mbs).
    pub fn microbatches(&self) -> u64 {
        u64::from(self.batch) / (u64::from(self.dp) * u64::from(self.mbs)).max(1)
    }

    /// A one-line description, e.g. `tp8 pp35 dp9 v1 mbs1 B2520 full zero1 sp bf16 ovl`; context
    /// parallelism (`cp16` after `tp`), expert parallelism (`ep64` after `dp`), TP overlap and
    /// optimizer-state departures are named only when used.
    pub fn label(&self) -> String {
        format!(
            "tp{}{} pp{} dp{}{} v{} mbs{} B{} {} zero{}{} {}{}{}{}{}{}{}{}{}{}",
            self.tp,
            if self.cp > 1 {
                format!(" cp{}", self.cp)
            } else {
                String::new()
            },
            self.pp,
            self.dp,
            if self.ep > 1 {
                format!(" ep{}", self.ep)
            } else {
                String::new()
            },
            self.interleave,
            self.mbs,
            self.batch,
            self.recompute_label(),
            self.zero,
            if self.sp { " sp" } else { "" },
            self.precision.name(),
            if self.overlap_dp { " ovl" } else { "" },
            if self.flash_attention { " flash" } else { "" },
            if self.overlap_ep { " ovl-ep" } else { "" },
            if self.tp_overlap { " tpovl" } else { "" },
            if self.optimizer_dtype == OptimizerDtype::Bf16 {
                " adam-bf16"
            } else {
                ""
            },
            if self.fp32_grads { " g32" } else { "" },
            if self.grad_all_reduce {
                " ar-grads"
            } else {
                ""
            },
            if self.overlap_pp { " ovl-pp" } else { "" },
            if self.zero == 3 && self.zero3_prefetch == Zero3Prefetch::Module {
                " pf-module"
            } else {
                ""
            },
        )
    }
}

/// Check the model's own shape: every dimension at least 1, KV heads dividing the heads.
pub fn validate_model(model: &ModelShape) -> Result<(), PlanError> {
    for (what, v) in [
        ("--layers", model.layers),
        ("--hidden", model.hidden),
        ("--heads", model.heads),
        ("--kv-heads", model.kv_heads),
        ("--ffn", model.ffn),
        ("--vocab", model.vocab),
        ("--seq", model.seq),
    ] {
        if v == 0 {
            return Err(PlanError::Zero {
                what,
                value: v.into(),
            });
        }
    }
    if !model.heads.is_multiple_of(model.kv_heads) {
        return Err(PlanError::KvHeads {
            kv_heads: model.kv_heads,
            heads: model.heads,
            nearest: nearest_divisors(model.heads.into(), model.kv_heads.into(), None),
        });
    }
    for (what, v) in [
        ("--head-dim", model.head_dim),
        ("q_lora_rank", model.q_lora_rank),
        ("kv_lora_rank", model.kv_lora_rank),
    ] {
        if v == Some(0) {
            return Err(PlanError::Zero { what, value: 0 });
        }
    }
    moe::validate_shape(model)
}

/// Check a layout against the model, device and node; `gpus` is the user's --gpus where given.
/// Every error names the violated constraint and the nearest valid values.
pub fn validate(
    model: &ModelShape,
    hw: &Hardware,
    net: &Network,
    l: &Layout,
    gpus: Option<u64>,
) -> Result<(), PlanError> {
    validate_model(model)?;
    for (what, v) in [
        ("--gpus-per-node", u64::from(net.gpus_per_node)),
        ("--tp", u64::from(l.tp)),
        ("--cp", u64::from(l.cp)),
        ("--pp", u64::from(l.pp)),
        ("--dp", u64::from(l.dp)),
        ("--interleave", u64::from(l.interleave)),
        ("--mbs", u64::from(l.mbs)),
        ("--batch", u64::from(l.batch)),
    ] {
        if v == 0 {
            return Err(PlanError::Zero { what, value: v });
        }
    }
    if l.tp > net.gpus_per_node {
        return Err(PlanError::TpNode {
            tp: l.tp,
            gpus_per_node: net.gpus_per_node,
            nearest: nearest_divisors(
                model.heads.into(),
                l.tp.into(),
                Some(net.gpus_per_node.into()),
            ),
        });
    }
    if !model.heads.is_multiple_of(l.tp) {
        return Err(PlanError::TpHeads {
            tp: l.tp,
            heads: model.heads,
            nearest: nearest_divisors(
                model.heads.into(),
                l.tp.into(),
                Some(net.gpus_per_node.into()),
            ),
        });
    }
    if !model.kv_heads.is_multiple_of(l.tp) {
        return Err(PlanError::TpKvHeads {
            tp: l.tp,
            kv_heads: model.kv_heads,
            nearest: nearest_divisors(model.kv_heads.into(), l.tp.into(), None),
        });
    }
    // Uneven stages are allowed (plan/stages.rs); only an empty stage is not.
    let Some(stages) = stage_layers(model.layers, l.pp) else {
        return Err(PlanError::PpLayers {
            pp: l.pp,
            layers: model.layers,
            nearest: nearest_divisors(model.layers.into(), l.pp.into(), None),
        });
    };
    if !model.seq.is_multiple_of(l.cp) {
        return Err(PlanError::CpSeq {
            cp: l.cp,
            seq: model.seq,
            nearest: nearest_divisors(model.seq.into(), l.cp.into(), None),
        });
    }
    let tp_pp = u64::from(l.tp) * u64::from(l.cp) * u64::from(l.pp);
    if let Some(n) = gpus {
        if n != l.gpus() {
            let hint = if n % tp_pp == 0 {
                format!("use --dp {} (or omit --dp)", n / tp_pp)
            } else {
                format!(
                    "--gpus must be a multiple of --tp × --cp × --pp = {tp_pp}: nearest valid \
                     --gpus: {}",
                    nearest_multiples(n, tp_pp)
                )
            };
            return Err(PlanError::GpuProduct {
                gpus: n,
                tp: l.tp,
                pp: l.pp,
                dp: l.dp.into(),
                product: l.gpus(),
                hint,
            });
        }
    }
    let unit = u64::from(l.dp) * u64::from(l.mbs);
    if u64::from(l.batch) % unit != 0 {
        return Err(PlanError::Batch {
            batch: l.batch.into(),
            dp: l.dp.into(),
            mbs: l.mbs,
            unit,
            nearest: nearest_multiples(l.batch.into(), unit),
        });
    }
    // Even stages: each chunk holds the same number of layers (Megatron). Uneven stages: every
    // chunk at least one layer (chunks of one stage differ by at most one layer).
    let even = model.layers.is_multiple_of(l.pp);
    let per_stage = if even {
        model.layers / l.pp
    } else {
        stages.iter().copied().min().unwrap_or(1)
    };
    let chunks_ok = if even {
        per_stage.is_multiple_of(l.interleave)
    } else {
        l.interleave <= per_stage
    };
    if l.interleave > 1 && (l.pp == 1 || !chunks_ok) {
        return Err(PlanError::Interleave {
            v: l.interleave,
            per_stage,
            nearest: if l.pp == 1 {
                "1".into()
            } else {
                nearest_divisors(per_stage.into(), l.interleave.into(), None)
            },
        });
    }
    let m = l.microbatches();
    if l.interleave > 1 && !m.is_multiple_of(u64::from(l.pp)) {
        return Err(PlanError::InterleaveMicrobatches {
            microbatches: m,
            pp: l.pp,
            nearest: nearest_multiples(l.batch.into(), unit * u64::from(l.pp)),
        });
    }
    if l.zero > 3 {
        return Err(PlanError::ZeroStage { zero: l.zero });
    }
    if l.zero >= 3 && l.pp > 1 {
        return Err(PlanError::ZeroWithPipeline {
            zero: l.zero,
            pp: l.pp,
        });
    }
    if l.sp && l.tp == 1 {
        return Err(PlanError::SequenceParallelWithoutTp);
    }
    validate_recompute_modules(model, l)?;
    if l.overlap_pp && l.interleave < 2 {
        return Err(PlanError::OverlapPpWithoutInterleave);
    }
    if l.grad_all_reduce && l.zero != 1 {
        return Err(PlanError::GradAllReduceWithoutZero1 { zero: l.zero });
    }
    moe::validate_layout(model, l)?;
    if l.tp_overlap && !(l.sp && l.tp > 1) {
        return Err(PlanError::TpOverlapWithoutSp { tp: l.tp });
    }
    if hw.peak(l.precision).is_none() {
        return Err(PlanError::Precision {
            device: hw.name.clone(),
            precision: l.precision.name(),
        });
    }
    Ok(())
}

/// `--recompute-modules` names parts of a selective recomputation, and only parts the model has.
fn validate_recompute_modules(model: &ModelShape, l: &Layout) -> Result<(), PlanError> {
    if l.recompute_modules.is_default() {
        return Ok(());
    }
    if l.recompute != Recompute::Selective {
        return Err(PlanError::RecomputeModulesNeedSelective {
            recompute: l.recompute.name(),
        });
    }
    let lacks = |m: RecomputeModule| match m {
        RecomputeModule::CoreAttn | RecomputeModule::Layernorm => None,
        RecomputeModule::MlaUpProj => (model.q_lora_rank.is_none() && model.kv_lora_rank.is_none())
            .then_some(
                "multi-head latent attention (q_lora_rank / kv_lora_rank, e.g. deepseek-v3)",
            ),
        RecomputeModule::MoeAct => (moe::mean_routed_width(model) == 0.0)
            .then_some("routed experts (--experts with --top-k, e.g. mixtral-8x7b)"),
        RecomputeModule::Mlp => (moe::moe_fraction(model) >= 1.0).then_some(
            "a dense MLP layer (every layer of this model is an MoE layer; use moe_act)",
        ),
    };
    for m in l.recompute_modules.modules() {
        if let Some(needs) = lacks(m) {
            return Err(PlanError::RecomputeModuleNotInModel {
                module: m.name(),
                needs,
            });
        }
    }
    Ok(())
}
