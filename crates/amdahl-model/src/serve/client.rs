//! The client: how requests reach the server, and what its clock adds to the engine's.
//!
//! **The frontend.** The HTTP server parses a request and tokenises the prompt before the
//! scheduler sees it, and the first token is detokenised and streamed back after the engine
//! produced it. A client's TTFT (vLLM's and SGLang's `bench_serving`, any OpenAI-API load
//! generator) includes both; the engine's own clock, and so the simulator's, starts and stops
//! inside them. Modelled as a constant added to each request's TTFT and end-to-end latency
//! (`--frontend-ms`): the same delay on every token leaves the TPOT and the inter-token gaps as
//! they are, and arrivals shifted by a constant queue as before. Not modelled: tokenising time
//! that grows with the prompt, and a frontend slowed by load (one Python process serialising
//! many streams).
//!
//! **Concurrency.** A client that keeps at most N requests in flight (`bench_serving`'s
//! `--max-concurrency N`: each request waits on a semaphore of N before it is sent, released when
//! its response ends, waiters served first come first served) sends a request at its scheduled
//! time or when an earlier one's response has ended, whichever is later; with every request
//! scheduled at t = 0 (`--rate inf`) it is a closed loop of N users. Its latencies count from
//! the send, as `bench_serving` times them.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

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

/// How the requests reach the server. Absent from files written before it existed, which ran
/// as [`Client::ENGINE`] (the default).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Client {
    /// Added to each request's TTFT and end-to-end latency, s (`--frontend-ms`).
    pub frontend_s: f64,
    /// At most this many requests in flight (`--max-concurrency`); `None`: each is sent at its
    /// scheduled time.
    pub max_concurrency: Option<u32>,
}

impl Default for Client {
    fn default() -> Self {
        Client::ENGINE
    }
}

impl Client {
    /// An HTTP client sending every request at its scheduled time: amdahl's default.
    pub const HTTP: Client = Client {
        frontend_s: FRONTEND_MS * 1e-3,
        max_concurrency: None,
    };
    /// The engine's own clock: no frontend, no limit (`infer`'s view; the energy set's windows).
    pub const ENGINE: Client = Client {
        frontend_s: 0.0,
        max_concurrency: None,
    };
}

/// The client's free places under `--max-concurrency`: when each became free, in time order.
#[derive(Debug)]
pub(crate) struct Slots(Option<VecDeque<f64>>);

impl Slots {
    /// `c`'s places for `requests` requests, all free at the start.
    pub fn new(c: &Client, requests: usize) -> Self {
        Slots(c.max_concurrency.map(|n| {
            let free = (n as usize).min(requests);
            std::iter::repeat_n(f64::NEG_INFINITY, free).collect()
        }))
    }

    /// When a request scheduled at `at` is sent: `None` while every place is taken.
    pub fn send_time(&self, at: f64) -> Option<f64> {
        match &self.0 {
            None => Some(at),
            Some(free) => free.front().map(|&t| t.max(at)),
        }
    }

    /// A request was sent: it holds the earliest free place.
    pub fn take(&mut self) {
        if let Some(free) = &mut self.0 {
            free.pop_front();
        }
    }

    /// `n` requests' responses ended; their places are free from `at` (events come in time
    /// order, so the queue stays sorted).
    pub fn release(&mut self, at: f64, n: usize) {
        if let Some(free) = &mut self.0 {
            free.extend(std::iter::repeat_n(at, n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_waits_for_a_free_place_and_takes_the_earliest() {
        let two = Client {
            max_concurrency: Some(2),
            ..Client::ENGINE
        };
        let mut s = Slots::new(&two, 10);
        assert_eq!(s.send_time(0.5), Some(0.5));
        s.take();
        s.take();
        assert_eq!(s.send_time(0.5), None);
        s.release(3.0, 1);
        s.release(4.0, 1);
        // Scheduled before the place freed: sent when it did; after: at its own time.
        assert_eq!(s.send_time(1.0), Some(3.0));
        s.take();
        assert_eq!(s.send_time(5.0), Some(5.0));
        let mut open = Slots::new(&Client::HTTP, 10);
        open.take();
        assert_eq!(open.send_time(7.0), Some(7.0));
    }

    #[test]
    fn the_constant_is_the_mean_of_the_two_completions_runs() {
        // vllm-project/vllm PR #54628, "Backend parity": client TTFT − server TTFT of the
        // `openai` backend, rounds 1 and 2: 113.7 − 105.3 and 110.0 − 98.0 ms.
        let runs: [f64; 2] = [113.7 - 105.3, 110.0 - 98.0];
        let mean = runs.iter().sum::<f64>() / 2.0;
        assert!((FRONTEND_MS - mean).abs() < 1e-9, "{mean}");
    }
}
