//! The serving engine around the model's kernels, and what it costs outside them.
//!
//! Every engine pays a fixed time per iteration (`step::STEP_OVERHEAD_S`). vLLM's steps also
//! take time in proportion to the running sequences that the step model's kernels do not
//! itemise: charged as memory-bound GPU work (sampling over the vocabulary, paged-KV gathers,
//! input preparation), because the runs it was fitted on overlapped vLLM's CPU work with the
//! GPU's (`--async-scheduling`) and drew near-TDP power while doing it. SGLang and TensorRT-LLM
//! are modelled without it; no measurement here says how much they have. The constant's origin,
//! a fit with each configuration held out, and why it is GPU work: docs/methodology.md ("Engine
//! per-sequence time").

use crate::names::from_str_by_parse;
use serde::{Deserialize, Serialize};

/// Fraction of device memory the serving engine may use: vLLM's default
/// `gpu_memory_utilization = 0.9` (vLLM engine arguments); the rest is CUDA context, library
/// workspaces and fragmentation. TensorRT-LLM applies its default fraction, also 0.9, to the
/// memory left free once the weights are in ([`Engine::usable_memory`]).
pub const USABLE_MEMORY: f64 = 0.9;

/// Time per running sequence per iteration of vLLM 0.11 (V1 engine), seconds: **fitted**,
/// the least-squares fit of the energy validation set's vLLM throughput rows
/// (data/validation/energy.csv, ML.ENERGY v3: Llama-3.1 8B to 405B on H100 and B200, batches 8
/// to 2,048; host-bound configurations left out), the per-configuration held-out error reported
/// by `amdahl catalog validation --energy`. A test checks it against the fit
/// (`energy_validation::tests`).
pub const VLLM_PER_SEQUENCE_S: f64 = 26.5e-6;

/// The serving engine a configuration runs under (`--engine`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// TensorRT-LLM: the per-iteration overhead only (the serving model's constants were set
    /// against its measurements, data/validation/infer.csv).
    #[default]
    TensorrtLlm,
    /// SGLang: as TensorRT-LLM; no measurement of its own yet. In `serve` it prefills prompts in iterations of their own
    /// (`serve::PrefillBatching::Separate`, its default loop).
    Sglang,
    /// vLLM (V1 engine): time per running sequence per iteration, [`VLLM_PER_SEQUENCE_S`].
    Vllm,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::TensorrtLlm, Engine::Sglang, Engine::Vllm];
    pub const NAMES: [&'static str; 3] = ["tensorrt-llm", "sglang", "vllm"];

    pub fn name(self) -> &'static str {
        match self {
            Engine::TensorrtLlm => "tensorrt-llm",
            Engine::Sglang => "sglang",
            Engine::Vllm => "vllm",
        }
    }

    /// The names and the usual spellings of a framework column (`trt-llm`, `TensorRT-LLM`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tensorrt-llm" | "trt-llm" | "trtllm" => Some(Engine::TensorrtLlm),
            "sglang" => Some(Engine::Sglang),
            "vllm" => Some(Engine::Vllm),
            _ => None,
        }
    }

    /// Share of a request's generated tokens whose KV cache a running sequence holds, on average
    /// over its life. TensorRT-LLM's default capacity scheduler (`GUARANTEED_NO_EVICT`,
    /// `SchedulerConfig`'s default) admits a request only with room for its whole generation,
    /// so all of it. vLLM (PagedAttention: blocks allocated as tokens are made, Kwon et al.,
    /// SOSP 2023 §4.2; preemption when they run out) and SGLang (its token pool, allocated per
    /// token) hold what has been generated so far: in a steady continuous batch, half.
    pub fn output_kv_held(self) -> f64 {
        match self {
            Engine::TensorrtLlm => 1.0,
            Engine::Vllm | Engine::Sglang => 0.5,
        }
    }

    /// Device memory the engine fills (weights, activation buffers, KV cache), in bytes, on a
    /// device of `capacity` bytes whose weights and activation buffers take `fixed`, with the
    /// engine's memory share `fraction`. vLLM's `gpu_memory_utilization` (default 0.9,
    /// [`USABLE_MEMORY`]) is a share of all the memory; TensorRT-LLM's
    /// `free_gpu_memory_fraction` (default 0.9, `KvCacheConfig`: "90 % of free GPU memory for KV
    /// cache") a share of what is free once the weights and activation buffers are in. SGLang's
    /// `mem_fraction_static` is a share of all the memory, as vLLM's.
    pub fn usable_memory(self, capacity: f64, fixed: f64, fraction: f64) -> f64 {
        match self {
            Engine::TensorrtLlm => fixed + fraction * (capacity - fixed).max(0.0),
            Engine::Vllm | Engine::Sglang => fraction * capacity,
        }
    }

    /// Host time per running sequence per iteration, seconds.
    pub fn per_sequence_s(self) -> f64 {
        match self {
            Engine::Vllm => VLLM_PER_SEQUENCE_S,
            Engine::TensorrtLlm | Engine::Sglang => 0.0,
        }
    }
}

from_str_by_parse!(Engine, "engine");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for (e, n) in Engine::ALL.into_iter().zip(Engine::NAMES) {
            assert_eq!(e.name(), n);
            assert_eq!(n.parse::<Engine>(), Ok(e));
        }
        assert_eq!("TensorRT-LLM".parse::<Engine>(), Ok(Engine::TensorrtLlm));
        assert!("tgi".parse::<Engine>().is_err());
    }
}
