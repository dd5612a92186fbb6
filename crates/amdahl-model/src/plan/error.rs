//! Errors of the planning model: each names the violated constraint and the nearest valid values.

use thiserror::Error;

/// Format `(below, above)` nearest valid values for a message.
pub(crate) fn nearest(below: Option<u64>, above: Option<u64>) -> String {
    match (below, above) {
        (Some(a), Some(b)) if a == b => format!("{a}"),
        (Some(a), Some(b)) => format!("{a} or {b}"),
        (Some(a), None) | (None, Some(a)) => format!("{a}"),
        (None, None) => "none".into(),
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum PlanError {
    /// An unknown device or model (with the nearest names), or a malformed catalog.
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error("the catalog has no {what} for {device}; {fix}")]
    DeviceField {
        device: String,
        what: &'static str,
        fix: &'static str,
    },
    #[error(
        "the catalog has no reference-server inter-node bandwidth for {device}, and {what} \
         spans {span} devices, more than one node of {gpus_per_node}; give --inter-gbit (Gbit/s \
         per device), or keep the layout within one node (--gpus-per-node sets its size)"
    )]
    InterNode {
        device: String,
        what: String,
        span: u64,
        gpus_per_node: u32,
    },
    #[error(
        "the catalog has no intra-node link bandwidth for {device}, and {what} puts {per_node} \
         devices that talk to each other in one node; give --intra-gbs (GB/s per device and \
         direction), or run on one device"
    )]
    IntraNode {
        device: String,
        what: String,
        per_node: u64,
    },
    #[error("model {model} cannot be planned: {reason}; give its shape with --layers/--hidden/--heads/--seq/--vocab or --model-file")]
    ModelShape { model: String, reason: String },
    #[error("{what} must be at least 1 (got {value})")]
    Zero { what: &'static str, value: u64 },
    #[error(
        "tensor-parallel size --tp {tp} does not divide the {heads} attention heads; \
         nearest valid --tp: {nearest}"
    )]
    TpHeads {
        tp: u32,
        heads: u32,
        nearest: String,
    },
    #[error(
        "tensor-parallel size --tp {tp} does not divide the {kv_heads} key/value heads \
         (grouped-query attention); nearest valid --tp: {nearest}"
    )]
    TpKvHeads {
        tp: u32,
        kv_heads: u32,
        nearest: String,
    },
    #[error(
        "--kv-heads {kv_heads} must divide --heads {heads}; nearest valid --kv-heads: {nearest}"
    )]
    KvHeads {
        kv_heads: u32,
        heads: u32,
        nearest: String,
    },
    #[error(
        "tensor parallelism must stay within a node: --tp {tp} > {gpus_per_node} GPUs per node; \
         nearest valid --tp: {nearest}"
    )]
    TpNode {
        tp: u32,
        gpus_per_node: u32,
        nearest: String,
    },
    #[error(
        "pipeline size --pp {pp} leaves a stage with no layer: the model has {layers} layers; \
         use --pp at most {layers} (an even split: {nearest})"
    )]
    PpLayers {
        pp: u32,
        layers: u32,
        nearest: String,
    },
    #[error("--gpus {gpus} is not --tp × --pp × --dp = {tp} × {pp} × {dp} = {product}; {hint}")]
    GpuProduct {
        gpus: u64,
        tp: u32,
        pp: u32,
        dp: u64,
        product: u64,
        hint: String,
    },
    #[error(
        "--gpus {gpus} is not divisible by --tp × --cp × --pp = {tp_pp}; nearest valid --gpus: {nearest}"
    )]
    GpusNotDivisible {
        gpus: u64,
        tp_pp: u64,
        nearest: String,
    },
    #[error("--gpus {gpus} is too large")]
    GpusTooLarge { gpus: u64 },
    #[error(
        "global batch --batch {batch} is not divisible by DP × microbatch = {dp} × {mbs} = {unit}; \
         nearest valid --batch: {nearest}"
    )]
    Batch {
        batch: u64,
        dp: u64,
        mbs: u32,
        unit: u64,
        nearest: String,
    },
    #[error(
        "--interleave {v} needs pipeline parallelism (--pp > 1) and must divide the {per_stage} \
         layers per stage; nearest valid --interleave: {nearest}"
    )]
    Interleave {
        v: u32,
        per_stage: u32,
        nearest: String,
    },
    #[error(
        "the interleaved schedule needs the number of microbatches ({microbatches}) to be a \
         multiple of --pp {pp}; nearest valid --batch: {nearest}"
    )]
    InterleaveMicrobatches {
        microbatches: u64,
        pp: u32,
        nearest: String,
    },
    #[error("--zero {zero} is not a ZeRO stage; use 0, 1, 2 or 3 (3 = FSDP)")]
    ZeroStage { zero: u8 },
    #[error(
        "ZeRO stage {zero} re-gathers every stage's weights for each microbatch, which pipeline \
         parallelism does not support (DeepSpeed, Megatron); use --zero 0, 1 or 2 with --pp {pp}, \
         or --pp 1"
    )]
    ZeroWithPipeline { zero: u8, pp: u32 },
    #[error(
        "expert-parallel size --ep {ep} does not divide the {experts} experts; nearest valid --ep \
         (dividing the experts and --dp): {nearest}"
    )]
    EpExperts {
        ep: u32,
        experts: u32,
        nearest: String,
    },
    #[error(
        "expert-parallel size --ep {ep} does not divide the data-parallel size --dp {dp} (expert \
         parallelism splits the experts over data-parallel ranks); nearest valid --ep: {nearest}"
    )]
    EpDp { ep: u32, dp: u32, nearest: String },
    #[error(
        "--ep {ep} needs a mixture-of-experts model, and {model} is dense; use --ep 1, or give \
         --experts N --top-k K"
    )]
    EpWithoutMoe { ep: u32, model: String },
    #[error(
        "--top-k {top_k} routes each token to more experts than the {experts} there are; \
         nearest valid --top-k: {experts} (or fewer, at least 1)"
    )]
    TopK { top_k: u32, experts: u32 },
    #[error(
        "--moe-layers {moe_layers} is more than the {layers} layers; nearest valid --moe-layers: \
         {layers}"
    )]
    MoeLayers { moe_layers: u32, layers: u32 },
    #[error(
        "--capacity-factor {value} must be a number ≥ 1 (1 = every expert gets exactly its mean \
         load; Switch Transformer used 1.0–2.0)"
    )]
    CapacityFactor { value: f64 },
    #[error(
        "context parallelism --cp {cp} does not divide the sequence of {seq} tokens; nearest \
         valid --cp: {nearest}"
    )]
    CpSeq { cp: u32, seq: u32, nearest: String },
    #[error(
        "--tp-overlap overlaps the all-gathers and reduce-scatters of sequence parallelism: it \
         needs --tp > 1 (got {tp}) and --sp"
    )]
    TpOverlapWithoutSp { tp: u32 },
    #[error(
        "--recompute-modules names the parts of a selective recomputation; it needs --recompute \
         selective (got {recompute})"
    )]
    RecomputeModulesNeedSelective { recompute: &'static str },
    #[error(
        "--recompute-modules {module}: this model has no such part; {module} needs {needs}; \
         valid modules: core_attn, layernorm, mla_up_proj, moe_act, mlp"
    )]
    RecomputeModuleNotInModel {
        module: &'static str,
        needs: &'static str,
    },
    #[error(
        "--overlap-pp overlaps the pipeline's sends and receives with the next model chunk; it \
         needs the interleaved schedule (--interleave 2 or more, as Megatron-LM requires)"
    )]
    OverlapPpWithoutInterleave,
    #[error(
        "--grad-all-reduce describes ZeRO-1 that all-reduces the whole gradient before each rank \
         updates its shard (DeepSpeed's BF16_Optimizer); use it with --zero 1 (got --zero {zero})"
    )]
    GradAllReduceWithoutZero1 { zero: u8 },
    #[error("sequence parallelism needs tensor parallelism (--tp > 1)")]
    SequenceParallelWithoutTp,
    #[error(
        "fp4 (NVFP4/MXFP4) is a serving format in amdahl: no published fp4 training recipe is \
         modelled; plan with --precision fp8 or bf16, serve with `amdahl infer --precision fp4`"
    )]
    Fp4Training,
    #[error(
        "{device} has no {precision} arithmetic; use --precision {}",
        alternatives(precision)
    )]
    Precision {
        device: String,
        precision: &'static str,
    },
    #[error(
        "no layout of this model fits on {gpus} × {device}: the leanest ({layout}) needs \
         {need_gib:.1} GiB per device, {have_gib:.1} GiB are usable; use more devices or a \
         device with more memory"
    )]
    FitsNowhere {
        gpus: u64,
        device: String,
        need_gib: f64,
        have_gib: f64,
        layout: String,
    },
}

/// All divisors of `n` in increasing order, in O(√n).
pub fn divisors(n: u64) -> Vec<u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u64;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// Largest divisor of `n` not above `x` (other than `x` itself) and smallest above `x`, both
/// capped at `max`.
pub(crate) fn nearest_divisors(n: u64, x: u64, max: Option<u64>) -> String {
    let ds: Vec<u64> = divisors(n)
        .into_iter()
        .filter(|&d| max.is_none_or(|m| d <= m))
        .collect();
    let below = ds.iter().rev().find(|&&d| d <= x).copied();
    let above = ds.iter().find(|&&d| d > x).copied();
    nearest(below, above)
}

/// Nearest multiples of `unit` around `x` (the lower one omitted when it would be 0).
pub fn nearest_multiples(x: u64, unit: u64) -> String {
    if unit == 0 {
        return "none".into();
    }
    let lo = x / unit * unit;
    let hi = lo + unit;
    nearest((lo > 0).then_some(lo), Some(hi))
}

/// What to suggest instead of a precision a device lacks: fp16 for bf16 (Volta, Turing have
/// fp16 tensor cores only), bf16 or fp16 otherwise.
fn alternatives(precision: &str) -> &'static str {
    match precision {
        "bf16" => "fp16 (16-bit with loss scaling; this device has no bf16) or fp32",
        _ => "bf16 (fp16 on devices without bf16) or fp32",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_in_order() {
        assert_eq!(divisors(105), [1, 3, 5, 7, 15, 21, 35, 105]);
        assert_eq!(divisors(16), [1, 2, 4, 8, 16]);
        assert_eq!(divisors(1), [1]);
        assert!(divisors(0).is_empty());
    }

    #[test]
    fn nearest_values() {
        assert_eq!(nearest_divisors(128, 6, Some(8)), "4 or 8");
        assert_eq!(nearest_divisors(128, 16, Some(8)), "8");
        assert_eq!(nearest_divisors(105, 32, None), "21 or 35");
        assert_eq!(nearest_multiples(2500, 18), "2484 or 2502");
        assert_eq!(nearest_multiples(5, 18), "18");
    }
}
