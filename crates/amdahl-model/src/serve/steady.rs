//! The steady state of an offline run (every request sent at once), measured as the ML.ENERGY
//! benchmark measures it (`ml-energy/benchmark@c1d6557f` `mlenergy/benchmark/llm/benchmark.py`,
//! `RequestTracker`): the window opens when `max_num_seqs` requests have received their first
//! token (the server has ramped up past the first prefill burst) and closes when
//! `requests − max_num_seqs − 1` requests have finished (the queue is about to empty and the
//! batch to shrink). Its throughput is the tokens delivered inside it over its length, its power
//! the GPUs' energy inside it over its length. Outside that window a run ramps up and drains,
//! which is why the benchmark leaves both out, and why a row of it is compared with the same
//! window of a simulated run rather than with `infer`'s steady state.

use super::engine::{Run, TracedIteration};
use super::Config;
use crate::power::Activity;
use serde::{Deserialize, Serialize};

/// What a simulated run shows in the benchmark's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyState {
    pub start_s: f64,
    pub end_s: f64,
    /// Output tokens delivered inside the window (first tokens included).
    pub tokens: f64,
    /// GPU energy of one device inside the window, J (replicas averaged).
    pub energy_per_device_j: f64,
    /// Seconds of the window one replica spends in iterations carrying prompt tokens, and their
    /// mean activity; then the same for decode-only iterations (time-weighted; replicas
    /// averaged).
    pub phases: [(f64, Activity); 2],
}

impl SteadyState {
    pub fn seconds(&self) -> f64 {
        self.end_s - self.start_s
    }

    pub fn tokens_per_s(&self) -> f64 {
        self.tokens / self.seconds()
    }
}

/// The window as `amdahl serve` reports it for an offline run: what the ML.ENERGY leaderboard
/// publishes for a configuration, to set beside it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SteadyFigures {
    /// The window, in seconds of the run (every request arrived at t = 0).
    pub start_s: f64,
    pub end_s: f64,
    /// Output tokens delivered in the window per second (all replicas).
    pub output_tokens_per_s: f64,
    /// Mean board power of one GPU in the window.
    pub power_per_gpu_w: f64,
    /// The GPUs' energy in the window over its output tokens.
    pub energy_per_output_token_j: f64,
}

impl SteadyFigures {
    /// The window of a traced offline run served as `c` says ([`steady_state`]; the server
    /// holds `max_num_seqs` running sequences per replica).
    pub fn of(run: &Run, c: &Config) -> Option<Self> {
        let gpus = c.serving.gpus() as f64;
        let w = steady_state(run, c.limits.max_num_seqs * c.serving.replicas)?;
        Some(SteadyFigures {
            start_s: w.start_s,
            end_s: w.end_s,
            output_tokens_per_s: w.tokens_per_s(),
            power_per_gpu_w: w.energy_per_device_j / w.seconds(),
            energy_per_output_token_j: w.energy_per_device_j * gpus / w.tokens.max(1.0),
        })
    }
}

/// The benchmark's window over a traced run (`super::simulate_traced`) of offline requests
/// with at most `max_num_seqs` running on the whole server (all replicas together), or `None`
/// where it is empty (fewer than `max_num_seqs` + 2 requests, or the closing count of finished
/// requests reached before the opening count of first tokens) or the run was not traced.
pub fn steady_state(run: &Run, max_num_seqs: u32) -> Option<SteadyState> {
    let trace = run.trace.as_ref()?;
    let n = run.records.len();
    let cap = max_num_seqs as usize;
    let finished_at_close = n.checked_sub(cap + 1).filter(|&k| k >= 1)?;
    // On the engine's clock, as the iterations and deliveries: the frontend's time is not in it.
    let mut firsts: Vec<f64> = run.records.iter().map(|r| r.first_at).collect();
    let mut ends: Vec<f64> = run.records.iter().map(|r| r.last_at).collect();
    firsts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let start_s = *firsts.get(cap.checked_sub(1)?)?;
    let end_s = ends[finished_at_close - 1];
    if end_s <= start_s {
        return None;
    }
    let tokens: u64 = trace
        .deliveries
        .iter()
        .filter(|(t, _)| *t > start_s && *t <= end_s)
        .map(|(_, k)| u64::from(*k))
        .sum();
    let mut energy = 0.0;
    let mut phases = [(0.0, Activity::default()); 2];
    for it in &trace.iterations {
        let inside = overlap(it, start_s, end_s);
        if inside <= 0.0 {
            continue;
        }
        energy += it.power_w * inside;
        let (seconds, a) = &mut phases[usize::from(!it.prefill)];
        *seconds += inside;
        a.busy += inside * it.activity.busy;
        a.compute += inside * it.activity.compute;
        a.memory += inside * it.activity.memory;
    }
    let replicas = (run.records.iter().map(|r| r.replica).max().unwrap_or(0) + 1) as f64;
    for (seconds, a) in &mut phases {
        if *seconds > 0.0 {
            a.busy /= *seconds;
            a.compute /= *seconds;
            a.memory /= *seconds;
        }
        *seconds /= replicas;
    }
    Some(SteadyState {
        start_s,
        end_s,
        tokens: tokens as f64,
        energy_per_device_j: energy / replicas,
        phases,
    })
}

/// Seconds of iteration `it` inside [start, end].
fn overlap(it: &TracedIteration, start: f64, end: f64) -> f64 {
    (it.start_s + it.time_s).min(end) - it.start_s.max(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::precision::{KvFormat, WeightFormat};
    use crate::infer::{Engine, Serving};
    use crate::plan::catalog_model;
    use crate::serve::{
        generate, prepare, simulate_traced, Arrivals, Client, Config, Generated, Lengths, Limits,
        PrefillBatching, Router, Side,
    };

    fn offline_run(requests: u32, cap: u32, replicas: u32) -> Run {
        let model = catalog_model("llama3-8b").unwrap();
        let (hw, net) = crate::plan::catalog_system("h100").unwrap();
        let c = Config {
            serving: Serving {
                tp: 1,
                pp: 1,
                replicas,
                weights: WeightFormat::Bf16,
                kv: KvFormat::Bf16,
                engine: Engine::Vllm,
                memory_fraction: None,
            },
            limits: Limits {
                max_num_seqs: cap,
                max_num_batched_tokens: 8192,
                num_scheduler_steps: 1,
                prefill: PrefillBatching::Mixed,
                shared_prefix: 0,
            },
            router: Router::RoundRobin,
            client: Client::ENGINE,
        };
        let p = prepare(&model, &hw, &net, &c).unwrap();
        let g = Generated {
            arrivals: Arrivals::AllAtOnce,
            input: Lengths::parse_side("lognormal:200:1.0", Side::Input).unwrap(),
            output: Lengths::parse_side("lognormal:300:1.0:4096", Side::Output).unwrap(),
            requests,
            duration_s: None,
            seed: 0,
        };
        let (reqs, _) = generate(&g, model.serving_context(), &model.name).unwrap();
        simulate_traced(&p, &hw, &net, &c, &reqs)
    }

    #[test]
    fn the_window_sees_a_full_batch_and_its_own_tokens_and_energy() {
        let run = offline_run(512, 64, 1);
        let s = steady_state(&run, 64).unwrap();
        assert!(s.start_s > 0.0 && s.end_s > s.start_s, "{s:?}");
        // Every token of the run is delivered once: the window's are a part of them.
        let all: u64 = run.records.iter().map(|r| u64::from(r.output_tokens)).sum();
        let delivered: u64 = run
            .trace
            .as_ref()
            .unwrap()
            .deliveries
            .iter()
            .map(|(_, k)| u64::from(*k))
            .sum();
        assert_eq!(delivered, all);
        assert!(s.tokens > 0.0 && s.tokens < all as f64);
        // While the queue is not empty the batch is full: 64 tokens per decode iteration at
        // most, so no more than 64 per iteration inside the window.
        let iterations = run
            .trace
            .as_ref()
            .unwrap()
            .iterations
            .iter()
            .filter(|it| it.start_s >= s.start_s && it.start_s < s.end_s)
            .count() as f64;
        assert!(s.tokens <= 64.0 * (iterations + 1.0), "{s:?} {iterations}");
        assert!(
            s.tokens >= 0.9 * 64.0 * (iterations - 1.0),
            "{s:?} {iterations}"
        );
        // The window's seconds are its iterations' (one replica, back to back).
        let seconds: f64 = s.phases.iter().map(|(t, _)| t).sum();
        assert!((seconds - s.seconds()).abs() < 1e-9 * s.seconds(), "{s:?}");
        // Its energy lies between idle and TDP for every second of it.
        let mean_w = s.energy_per_device_j / s.seconds();
        assert!(mean_w > 100.0 && mean_w <= 700.0, "{mean_w}");
    }

    #[test]
    fn too_few_requests_have_no_window_and_untraced_runs_none() {
        let run = offline_run(64, 64, 1);
        assert_eq!(steady_state(&run, 64), None);
        let mut run = offline_run(256, 64, 1);
        assert!(steady_state(&run, 64).is_some());
        run.trace = None;
        assert_eq!(steady_state(&run, 64), None);
    }

    #[test]
    fn replicas_are_averaged() {
        // Two replicas of 64 sequences: the server holds 128. Both are busy through the window,
        // so one replica's phases fill it, and a device's energy is one replica's.
        let run = offline_run(1024, 64, 2);
        let s = steady_state(&run, 128).unwrap();
        let seconds: f64 = s.phases.iter().map(|(t, _)| t).sum();
        assert!((seconds / s.seconds() - 1.0).abs() < 0.02, "{s:?}");
        let mean_w = s.energy_per_device_j / s.seconds();
        assert!(mean_w > 100.0 && mean_w <= 700.0, "{mean_w}");
    }
}
