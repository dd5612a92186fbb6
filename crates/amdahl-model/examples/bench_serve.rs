//! Benchmark of `amdahl serve`: 10,000 requests of Llama-3-70B on 8 × H100 (tp 8, bf16,
//! vLLM's H100 scheduler defaults), log-normal prompts (mean 1,024, σ 0.8) and outputs (mean 256,
//! σ 0.8), Poisson arrivals at 80 % of the capacity the simulator itself finds (the completion rate
//! of an overloaded probe run). Prints wall time and simulated requests per wall second, best of
//! 5, side by side with `infer --search` over the same model and node in the same run, and
//! `serve --search` (1,000 requests of the same stream on every tp × replicas × format ×
//! max-num-seqs × power cap that fits the node).
//!
//! Run: `cargo run --release -p amdahl-model --example bench_serve`

use amdahl_model::catalog::grid;
use amdahl_model::infer::{search, Charging, KvFormat, Requests, Serving, Space, WeightFormat};
use amdahl_model::plan::{catalog_model, catalog_system, Hardware, ModelShape, Network};
use amdahl_model::serve::result::{Context, Described};
use amdahl_model::serve::{
    generate, prepare, simulate, vllm_defaults, Arrivals, Client, Config, Generated, Lengths,
    Prepared, Router, ServeResult,
};
use std::time::Instant;

struct Sys {
    model: ModelShape,
    hw: Hardware,
    net: Network,
    charging: Charging,
}

fn run(s: &Sys, c: &Config, p: &Prepared, rate: f64, n: u32) -> (ServeResult, f64) {
    let g = Generated {
        arrivals: Arrivals::Poisson { rate },
        input: Lengths::LogNormal {
            mean: 1024.0,
            sigma: 0.8,
            max: None,
        },
        output: Lengths::LogNormal {
            mean: 256.0,
            sigma: 0.8,
            max: None,
        },
        requests: n,
        duration_s: None,
        seed: 1,
    };
    let t = Instant::now();
    let (reqs, clamped) = match generate(&g, s.model.seq, &s.model.name) {
        Ok(r) => r,
        Err(e) => fail(&e),
    };
    let out = simulate(p, &s.hw, &s.net, c, &reqs);
    let ctx = Context {
        model: &s.model,
        hw: &s.hw,
        net: &s.net,
        config: c,
        prepared: p,
        charging: &s.charging,
        slo_ttft_s: Some(2.0),
        slo_tpot_s: Some(0.2),
    };
    let d = Described {
        workload: "bench".into(),
        input_dist: None,
        output_dist: None,
        seed: Some(1),
        clamped,
    };
    let r = ServeResult::new(&ctx, &out, d);
    (r, t.elapsed().as_secs_f64())
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}

fn main() {
    let (hw, net) = catalog_system("h100").unwrap_or_else(|e| fail(&e));
    let model = catalog_model("llama3-70b").unwrap_or_else(|e| fail(&e));
    let charging = Charging {
        pue: 1.0,
        pue_source: "bench".into(),
        grid: grid::lookup("world").unwrap_or_else(|e| fail(&e)),
    };
    let s = Sys {
        model,
        hw,
        net,
        charging,
    };
    let c = Config {
        serving: Serving {
            tp: 8,
            pp: 1,
            replicas: 1,
            weights: WeightFormat::Bf16,
            kv: KvFormat::Bf16,
            engine: Default::default(),
            memory_fraction: None,
        },
        limits: vllm_defaults(&s.hw),
        client: Client::HTTP,
        router: Router::RoundRobin,
    };
    let p = prepare(&s.model, &s.hw, &s.net, &c).unwrap_or_else(|e| fail(&e));
    // Capacity: the completion rate of 4,000 requests offered far beyond what one replica serves.
    let (probe, _) = run(&s, &c, &p, 1000.0, 4000);
    let cap = probe.completed_requests_per_s;
    let rate = 0.8 * cap;
    println!(
        "Llama-3-70B on 8 x H100 (tp 8, bf16), lognormal 1024/0.8 in, 256/0.8 out; capacity {cap:.2} req/s (simulated), rate {rate:.2} req/s"
    );
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..5 {
        let (r, wall) = run(&s, &c, &p, rate, 10_000);
        best = best.min(wall);
        last = Some(r);
    }
    if let Some(r) = last {
        println!(
            "serve   10,000 requests: wall {:8.1} ms  {:>9.0} simulated requests/s  ({} iterations, {:.0} s simulated; TTFT p99 {:.3} s, TPOT p99 {:.4} s, overloaded {})",
            best * 1e3,
            10_000.0 / best,
            r.iterations,
            r.duration_s,
            r.ttft_p99_s,
            r.tpot_p99_s.unwrap_or(f64::NAN),
            r.overloaded
        );
    }
    // infer --search over the same node: tp in divisors of 8 × four formats × batch 1..1024.
    let space = Space {
        gpus: 8,
        pp: 1,
        kv: KvFormat::Bf16,
        engine: Default::default(),
        memory_fraction: None,
        precisions: WeightFormat::offered(&s.hw),
        max_batch: 1024,
        max_ttft_s: None,
        max_tpot_s: None,
        top: 10,
        power_caps: vec![],
    };
    let req = Requests {
        input: 1024,
        output: 256,
        beams: 1,
    };
    let mut best = f64::INFINITY;
    let mut evaluated = 0;
    for _ in 0..5 {
        let t = Instant::now();
        match search(&s.model, &s.hw, &s.net, req, &space, &s.charging) {
            Ok(o) => evaluated = o.evaluated,
            Err(e) => fail(&e),
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "infer --search {evaluated} configurations: wall {:8.1} ms  {:>9.0} configs/s",
        best * 1e3,
        evaluated as f64 / best
    );
    serve_search(&s, rate);
}

/// `serve --search`: 1,000 requests at `rate` on tp {1, 2, 4, 8} × 1…8/tp replicas × bf16|fp8 ×
/// five max-num-seqs × caps of 500 and 700 W: 300 configurations, those that fit simulated.
fn serve_search(s: &Sys, rate: f64) {
    use amdahl_model::serve::search::{search, Described, SearchSpace};
    use amdahl_model::serve::PrefillBatching;
    use amdahl_model::units::Watts;
    let g = Generated {
        arrivals: Arrivals::Poisson { rate },
        input: Lengths::LogNormal {
            mean: 1024.0,
            sigma: 0.8,
            max: None,
        },
        output: Lengths::LogNormal {
            mean: 256.0,
            sigma: 0.8,
            max: None,
        },
        requests: 1000,
        duration_s: None,
        seed: 1,
    };
    let reqs = match generate(&g, s.model.seq, &s.model.name) {
        Ok((r, _)) => r,
        Err(e) => fail(&e),
    };
    let space = SearchSpace {
        max_gpus: 8,
        pp: 1,
        kv: KvFormat::Bf16,
        engine: Default::default(),
        memory_fraction: None,
        precisions: vec![WeightFormat::Bf16, WeightFormat::Fp8],
        max_num_seqs: vec![64, 128, 256, 512, 1024],
        max_num_batched_tokens: 8192,
        num_scheduler_steps: 1,
        prefill: PrefillBatching::Mixed,
        shared_prefix: 0,
        client: Client::HTTP,
        power_caps: vec![Watts(500.0), Watts(700.0)],
        router: Router::RoundRobin,
        slo_ttft_s: Some(2.0),
        slo_tpot_s: Some(0.2),
    };
    let mut best = f64::INFINITY;
    let mut evaluated = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let d = Described {
            workload: "bench",
            rate,
        };
        match search(&s.model, &s.hw, &s.net, &space, &reqs, d) {
            Ok(o) => evaluated = o.evaluated,
            Err(e) => fail(&e),
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "serve --search {evaluated} configurations x 1,000 requests: wall {:8.1} ms  {:>9.1} configs/s",
        best * 1e3,
        evaluated as f64 / best
    );
}
