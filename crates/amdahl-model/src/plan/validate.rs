//! The constraints a model shape and a layout must satisfy before the planner models them. Every
//! error names the violated constraint and the nearest valid values.

use super::counts::{mean_routed_width, moe_fraction};
use super::error::{divisors, nearest, nearest_divisors, nearest_multiples, PlanError};
use super::hardware::{ComputePrecision, Hardware, Network};
use super::spec::{Layout, ModelShape, Recompute, RecomputeModule};
use super::stages::stage_layers;

/// The data-parallel degree of `gpus` devices for tensor × context × pipeline degrees `tp`,
/// `cp`, `pp`: `gpus / (tp·cp·pp)`, an error naming the nearest valid counts when that does not
/// divide, and 0 when a degree is 0 (which [`validate`] then reports by name).
pub fn data_parallel_degree(gpus: u64, tp: u32, cp: u32, pp: u32) -> Result<u32, PlanError> {
    let tp_pp = u64::from(tp) * u64::from(cp) * u64::from(pp);
    if tp_pp == 0 {
        return Ok(0);
    }
    if !gpus.is_multiple_of(tp_pp) {
        return Err(PlanError::GpusNotDivisible {
            gpus,
            tp_pp,
            nearest: nearest_multiples(gpus, tp_pp),
        });
    }
    u32::try_from(gpus / tp_pp).map_err(|_| PlanError::GpusTooLarge { gpus })
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
    validate_moe_shape(model)
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
    validate_degrees(model, net, l)?;
    validate_sizes(model, l, gpus)?;
    net.check_span(
        &hw.name,
        l.gpus(),
        match l.cp {
            1 => format!("the layout tp {} × pp {} × dp {}", l.tp, l.pp, l.dp),
            cp => format!(
                "the layout tp {} × cp {cp} × pp {} × dp {}",
                l.tp, l.pp, l.dp
            ),
        },
    )?;
    validate_options(model, hw, l)
}

/// Every degree and size at least 1; tensor parallelism within the node and dividing the query
/// and key–value heads.
fn validate_degrees(model: &ModelShape, net: &Network, l: &Layout) -> Result<(), PlanError> {
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
    Ok(())
}

/// The pipeline stages, the context-parallel split, the device count, the batch and the
/// interleaving fit together.
fn validate_sizes(model: &ModelShape, l: &Layout, gpus: Option<u64>) -> Result<(), PlanError> {
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
    Ok(())
}

/// The options the layout combines are ones the model, the device and each other allow.
fn validate_options(model: &ModelShape, hw: &Hardware, l: &Layout) -> Result<(), PlanError> {
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
    validate_expert_parallel(model, l)?;
    if l.tp_overlap && !(l.sp && l.tp > 1) {
        return Err(PlanError::TpOverlapWithoutSp { tp: l.tp });
    }
    if l.precision == ComputePrecision::Fp4 {
        return Err(PlanError::Fp4Training);
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
        RecomputeModule::MoeAct => (mean_routed_width(model) == 0.0)
            .then_some("routed experts (--experts with --top-k, e.g. mixtral-8x7b)"),
        RecomputeModule::Mlp => (moe_fraction(model) >= 1.0).then_some(
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

/// Check the MoE part of a shape (see [`Moe`](super::spec::Moe)).
pub fn validate_moe_shape(m: &ModelShape) -> Result<(), PlanError> {
    let Some(e) = &m.moe else {
        return Ok(());
    };
    for (what, v) in [
        ("--experts", e.experts),
        ("--top-k", e.top_k),
        ("--expert-ffn", e.expert_ffn),
        ("--moe-layers", e.moe_layers),
    ] {
        if v == 0 {
            return Err(PlanError::Zero {
                what,
                value: v.into(),
            });
        }
    }
    if e.top_k > e.experts {
        return Err(PlanError::TopK {
            top_k: e.top_k,
            experts: e.experts,
        });
    }
    if e.moe_layers > m.layers {
        return Err(PlanError::MoeLayers {
            moe_layers: e.moe_layers,
            layers: m.layers,
        });
    }
    if !(e.capacity_factor.is_finite() && e.capacity_factor >= 1.0) {
        return Err(PlanError::CapacityFactor {
            value: e.capacity_factor,
        });
    }
    Ok(())
}

/// Check the expert-parallel degree of a layout: it divides the experts and the data-parallel
/// size (EP groups are formed inside the DP group, as in Megatron-Core and DeepSpeed-MoE).
pub fn validate_expert_parallel(m: &ModelShape, l: &Layout) -> Result<(), PlanError> {
    if l.ep == 0 {
        return Err(PlanError::Zero {
            what: "--ep",
            value: 0,
        });
    }
    if l.ep == 1 {
        return Ok(());
    }
    let Some(e) = m.moe.as_ref().filter(|e| e.routes()) else {
        return Err(PlanError::EpWithoutMoe {
            ep: l.ep,
            model: m.name.clone(),
        });
    };
    if !e.experts.is_multiple_of(l.ep) {
        return Err(PlanError::EpExperts {
            ep: l.ep,
            experts: e.experts,
            nearest: nearest_common_divisors(e.experts, l.dp, l.ep),
        });
    }
    if !l.dp.is_multiple_of(l.ep) {
        return Err(PlanError::EpDp {
            ep: l.ep,
            dp: l.dp,
            nearest: nearest_common_divisors(e.experts, l.dp, l.ep),
        });
    }
    Ok(())
}

/// Nearest values around `x` dividing both `a` and `b` (the valid EP degrees).
fn nearest_common_divisors(a: u32, b: u32, x: u32) -> String {
    let ds: Vec<u64> = divisors(a.into())
        .into_iter()
        .filter(|d| u64::from(b).is_multiple_of(*d))
        .collect();
    if ds.is_empty() {
        return nearest_divisors(a.into(), x.into(), None);
    }
    let below = ds.iter().rev().find(|&&d| d <= u64::from(x)).copied();
    let above = ds.iter().find(|&&d| d > u64::from(x)).copied();
    nearest(below, above)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_parallel_degree_is_what_the_other_degrees_leave() {
        assert_eq!(data_parallel_degree(5120, 8, 1, 35).ok(), None);
        assert_eq!(data_parallel_degree(2520, 8, 1, 35).ok(), Some(9));
        assert_eq!(data_parallel_degree(64, 8, 2, 1).ok(), Some(4));
        assert_eq!(data_parallel_degree(64, 0, 1, 1).ok(), Some(0));
        let Err(e) = data_parallel_degree(100, 8, 1, 1) else {
            panic!("100 is not a multiple of 8")
        };
        assert!(
            e.to_string().contains("nearest valid --gpus: 96 or 104"),
            "{e}"
        );
        let Err(e) = data_parallel_degree(1 << 40, 1, 1, 1) else {
            panic!("2^40 is not a u32")
        };
        assert_eq!(e.to_string(), "--gpus 1099511627776 is too large");
    }
}
