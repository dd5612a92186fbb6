//! Errors of the serving model: each names what is wrong and the nearest thing that works.

use crate::plan::PlanError;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum InferError {
    /// Model shape, device, TP/PP divisibility: the planner's own checks and messages.
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("{what} must be at least 1 (got {value})")]
    Zero { what: &'static str, value: u64 },
    #[error(
        "{model} uses multi-head latent attention, whose compressed key-value cache `amdahl \
         infer` does not model (it would count a full multi-head cache); `amdahl plan` models \
         its training"
    )]
    LatentAttention { model: String },
    #[error(
        "an fp4 KV cache needs a device with fp4 arithmetic (Blackwell), where engines offer \
         NVFP4 KV caches; {device} has none: use --kv-precision fp8"
    )]
    Fp4Kv { device: String },
    #[error(
        "--input {input} + --output {output} = {total} tokens is beyond the {context}-token \
         context of {model}; shorten the request (at most {context} tokens in all), or give the \
         context your checkpoint serves with --seq N"
    )]
    Context {
        input: u32,
        output: u32,
        total: u64,
        context: u32,
        model: String,
    },
    #[error(
        "--tp {tp} neither divides nor is a multiple of the {kv_heads} key/value heads, so the \
         KV heads can be neither split nor replicated evenly (vLLM refuses this too); nearest \
         valid --tp: {nearest}"
    )]
    TpKvHeads {
        tp: u32,
        kv_heads: u32,
        nearest: String,
    },
    #[error(
        "{model} does not fit on {device} with tp {tp} × pp {pp} at {precision}: the weights \
         alone need {weights_gib:.1} GiB per device and one sequence of {tokens} tokens \
         {per_seq_gib:.3} GiB more, {usable_gib:.1} GiB of {capacity_gib:.1} GiB are usable; \
         use a larger --tp or --pp, narrower weights (--precision fp8 or int4), or a device with \
         more memory"
    )]
    FitsNowhere {
        model: String,
        device: String,
        tp: u32,
        pp: u32,
        precision: &'static str,
        weights_gib: f64,
        per_seq_gib: f64,
        tokens: u64,
        usable_gib: f64,
        capacity_gib: f64,
    },
    #[error(
        "--batch {batch} does not fit: {need_gib:.1} GiB per device needed, {usable_gib:.1} GiB \
         usable; at most {max_batch} concurrent sequences fit (or use a larger --tp, --kv-precision \
         fp8, narrower weights){engine_note}"
    )]
    Batch {
        batch: u32,
        max_batch: u32,
        need_gib: f64,
        usable_gib: f64,
        /// Under TensorRT-LLM, which reserves each request's whole length: that vLLM and SGLang
        /// hold less.
        engine_note: &'static str,
    },
    #[error(
        "--rate {} requests/s is more than this configuration sustains: at most \
         {max_rate:.3} requests/s (batch {at_batch}, the largest that fits); add replicas \
         (--gpus), shorten requests or use narrower weights",
        crate::units::shown(.rate)
    )]
    Rate {
        rate: f64,
        max_rate: f64,
        at_batch: u32,
    },
    #[error(
        "--rate must be a positive number of requests per second (got {})",
        crate::units::shown(.0)
    )]
    RateNotPositive(f64),
    #[error(
        "--gpu-memory-fraction must be above 0 and at most 1 (got {}): the share of device memory \
         the engine takes, 0.9 by default",
        crate::units::shown(.0)
    )]
    MemoryFraction(f64),
    #[error(
        "--gpus {gpus} is not a multiple of --tp × --pp = {tp_pp}; nearest valid --gpus: {nearest}"
    )]
    Gpus {
        gpus: u64,
        tp_pp: u64,
        nearest: String,
    },
    #[error(
        "no configuration meets the latency limits{limits}; the lowest TTFT found is \
         {best_ttft_ms:.1} ms and the lowest TPOT {best_tpot_ms:.2} ms: relax --max-ttft-ms / \
         --max-tpot-ms or add devices"
    )]
    NoneMeetsLimits {
        limits: String,
        best_ttft_ms: f64,
        best_tpot_ms: f64,
    },
}
