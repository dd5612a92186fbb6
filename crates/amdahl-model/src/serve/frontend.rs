//! The path a request takes outside the engine: the HTTP server parses it and tokenises the
//! prompt before the scheduler sees it, and the first token is detokenised and streamed back
//! after the engine produced it. A client's TTFT (vLLM's and SGLang's `bench_serving`, any
//! OpenAI-API load generator) includes both; the engine's own clock, and so the simulator's,
//! starts and stops inside them.
//!
//! Modelled as a constant added to each request's TTFT and end-to-end latency (`--frontend-ms`):
//! the same delay on every token leaves the TPOT and the inter-token gaps as they are, and
//! arrivals shifted by a constant queue as before. Not modelled: tokenising time that grows
//! with the prompt, and a frontend slowed by load (one Python process serialising many streams).

/// The frontend's time per request, ms: **one published measurement**, the mean of the two
/// runs of vLLM's completions endpoint (`--backend openai`, the endpoint `bench_serving` posts to
/// with vLLM) in vllm-project/vllm PR #54628 (2026; vLLM 0.28.1rc1, Qwen2.5-0.5B-Instruct on an
/// RTX 4070 laptop under WSL2, 512-token prompts, 8 requests at a time): the client's mean TTFT
/// minus the server's own (`vllm:time_to_first_token_seconds`), 8.4 and 12.0 ms. The chat and
/// Responses endpoints there, which also apply a chat template, measured 10.5 to 12.2 ms.
/// Another engine, version or host has its own: measure it the same way and pass
/// `--frontend-ms`. An in-process client (MLPerf's LoadGen, which hands the engine token IDs)
/// has none: 0.
pub const FRONTEND_MS: f64 = 10.2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_constant_is_the_mean_of_the_two_completions_runs() {
        // vllm-project/vllm PR #54628, "Backend parity": client TTFT − server TTFT of the
        // `openai` backend, rounds 1 and 2: 113.7 − 105.3 and 110.0 − 98.0 ms.
        let runs: [f64; 2] = [113.7 - 105.3, 110.0 - 98.0];
        let mean = runs.iter().sum::<f64>() / 2.0;
        assert!((FRONTEND_MS - mean).abs() < 1e-9, "{mean}");
    }
}
