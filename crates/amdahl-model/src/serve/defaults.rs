//! The scheduler's limits when the user gives none (`--max-num-seqs`, `--max-num-batched-tokens`):
//! the serving engine's own defaults, read from its source.

use super::scheduler::{Limits, PrefillBatching};
use super::{Prepared, BLOCK_SIZE};
use crate::infer::Engine;
use crate::plan::Hardware;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// vLLM's defaults for `max_num_batched_tokens` and `max_num_seqs` when serving (usage context
/// OPENAI_API_SERVER): 8,192 tokens and 1,024 sequences on a device of at least 70 GiB that is
/// not an A100, else 2,048 and 256 (vLLM `EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py;
/// the A100 exception is vLLM PR #17885). TensorRT-LLM runs with them too: amdahl has not read
/// its serving defaults.
pub fn vllm_defaults(hw: &Hardware) -> Limits {
    let big = hw.memory.get() >= 70.0 * GIB && !hw.name.to_ascii_lowercase().contains("a100");
    let (max_num_seqs, max_num_batched_tokens) = if big { (1024, 8192) } else { (256, 2048) };
    Limits {
        max_num_seqs,
        max_num_batched_tokens,
        num_scheduler_steps: 1,
        prefill: PrefillBatching::Mixed,
        shared_prefix: 0,
    }
}

/// The engine's token budget of one iteration on `hw`. SGLang's `chunked_prefill_size`: 2,048
/// on a device of less than 35 GiB, 8,192 below 160 GiB, 16,384 above
/// (`ServerArgs._handle_chunked_prefill_size`, `python/sglang/srt/server_args.py`); vLLM's
/// (and TensorRT-LLM's here) from [`vllm_defaults`].
pub fn default_budget(engine: Engine, hw: &Hardware) -> u32 {
    match engine {
        Engine::Sglang => {
            let gib = hw.memory.get() / GIB;
            if gib < 35.0 {
                2048
            } else if gib < 160.0 {
                8192
            } else {
                16384
            }
        }
        Engine::Vllm | Engine::TensorrtLlm => vllm_defaults(hw).max_num_batched_tokens,
    }
}

/// The engine's cap on running requests per replica, once the KV cache is sized (`p`). SGLang's
/// `max_running_requests` when not given: the KV capacity in tokens over the context length,
/// × 512, held within 2,048–4,096, and at most half the capacity
/// (`ModelRunner._resolve_max_num_reqs`, `python/sglang/srt/model_executor/model_runner.py`);
/// vLLM's (and TensorRT-LLM's here) from [`vllm_defaults`].
pub fn default_max_num_seqs(engine: Engine, hw: &Hardware, p: &Prepared, context: u32) -> u32 {
    match engine {
        Engine::Sglang => {
            let tokens = p.kv_blocks * u64::from(BLOCK_SIZE);
            let estimated = (tokens as f64 / f64::from(context.max(1)) * 512.0) as u64;
            let capped = estimated.clamp(2048, 4096).min(tokens / 2).max(1);
            u32::try_from(capped).unwrap_or(u32::MAX)
        }
        Engine::Vllm | Engine::TensorrtLlm => vllm_defaults(hw).max_num_seqs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::{KvFormat, Serving, WeightFormat};
    use crate::plan::{catalog_model, catalog_system};
    use crate::serve::{prepare, Client, Config, Router};

    #[test]
    fn sglang_sizes_its_budget_by_memory_and_its_request_cap_by_the_cache() {
        let model = catalog_model("llama3-8b").unwrap();
        for (system, budget) in [
            ("l4", 2048),
            ("h100", 8192),
            ("a100-80gb", 8192),
            ("b200", 16384),
        ] {
            let (hw, _) = catalog_system(system).unwrap();
            assert_eq!(default_budget(Engine::Sglang, &hw), budget, "{system}");
        }
        let (hw, net) = catalog_system("h100").unwrap();
        assert_eq!(default_budget(Engine::Vllm, &hw), 8192);
        let config = Config {
            serving: Serving {
                tp: 1,
                pp: 1,
                replicas: 1,
                weights: WeightFormat::Bf16,
                kv: KvFormat::Bf16,
                engine: Engine::Sglang,
                memory_fraction: None,
            },
            limits: vllm_defaults(&hw),
            router: Router::RoundRobin,
            client: Client::ENGINE,
        };
        let mut p = prepare(&model, &hw, &net, &config).unwrap();
        // Llama 3.1 8B on an H100 holds about three of its 131,072-token contexts of cache
        // (SGLang reads the checkpoint's context): × 512 is under the 2,048 floor. Against the
        // 8,192 of Llama 3.0 it held tens, far above the 4,096 ceiling.
        assert_eq!(model.serving_context(), 131_072);
        assert_eq!(
            default_max_num_seqs(Engine::Sglang, &hw, &p, model.serving_context()),
            2048
        );
        assert_eq!(default_max_num_seqs(Engine::Sglang, &hw, &p, 8192), 4096);
        // A cache of 8 contexts gives 4,096 too (8 × 512); of 2, the 2,048 floor; of 1,000
        // tokens, half of them.
        for (tokens, cap) in [(8 * 8192, 4096), (2 * 8192, 2048), (1000, 500)] {
            p.kv_blocks = tokens / u64::from(BLOCK_SIZE);
            let want = cap.min(p.kv_blocks * u64::from(BLOCK_SIZE) / 2);
            assert_eq!(
                u64::from(default_max_num_seqs(Engine::Sglang, &hw, &p, 8192)),
                want,
                "{tokens}"
            );
        }
        assert_eq!(default_max_num_seqs(Engine::Vllm, &hw, &p, 8192), 1024);
    }
}
