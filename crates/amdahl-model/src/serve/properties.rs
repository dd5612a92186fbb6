//! Properties of the simulator, against `infer` and itself: `infer`'s TTFT and TPOT far below
//! capacity, queues that grow past it, energy conserved over requests, one seed one result.

use super::*;
use crate::catalog::grid;
use crate::infer::{Charging, KvFormat, WeightFormat};
use crate::plan::{catalog_model, catalog_system};
use result::{Context, Described};

struct Case {
    model: ModelShape,
    hw: Hardware,
    net: Network,
    config: Config,
    prepared: Prepared,
}

/// Llama-3-8B on one H100 at bf16 (tp 1, `replicas` copies), vLLM's H100 defaults.
fn case(replicas: u32, router: Router) -> Case {
    let model = catalog_model("llama3-8b").unwrap();
    let (hw, net) = catalog_system("h100").unwrap();
    let config = Config {
        serving: Serving {
            tp: 1,
            pp: 1,
            replicas,
            weights: WeightFormat::Bf16,
            kv: KvFormat::Bf16,
            engine: Default::default(),
        },
        limits: vllm_defaults(&hw),
        router,
    };
    let prepared = prepare(&model, &hw, &net, &config).unwrap();
    Case {
        model,
        hw,
        net,
        config,
        prepared,
    }
}

fn workload(rate: f64, input: u32, output: u32, n: u32, seed: u64) -> Vec<Request> {
    let g = Generated {
        arrivals: Arrivals::Poisson { rate },
        input: Lengths::Fixed { tokens: input },
        output: Lengths::Fixed { tokens: output },
        requests: n,
        duration_s: None,
        seed,
    };
    generate(&g, 8192, "m").unwrap().0
}

fn summary(c: &Case, run: &Run) -> ServeResult {
    let charging = Charging {
        pue: 1.0,
        pue_source: "test".into(),
        grid: grid::lookup("world").unwrap(),
    };
    let ctx = Context {
        model: &c.model,
        hw: &c.hw,
        net: &c.net,
        config: &c.config,
        prepared: &c.prepared,
        charging: &charging,
        slo_ttft_s: Some(2.0),
        slo_tpot_s: Some(0.2),
    };
    let d = Described {
        workload: "test".into(),
        input_dist: None,
        output_dist: None,
        seed: None,
        clamped: 0,
    };
    ServeResult::new(&ctx, run, d)
}

#[test]
fn far_below_capacity_the_latencies_are_infers() {
    // 0.05 requests/s of 512 + 128 tokens: a request takes ~1 s, so ~95 % of requests find the
    // server empty. Their TTFT is one lone prefill, the same pass infer times (equal to 1e-9);
    // TPOT is the mean decode step over contexts 513..639, infer's at the mean context 576 (a
    // decode step is affine in the context, so 1 %).
    let c = case(1, Router::RoundRobin);
    let reqs = workload(0.05, 512, 128, 200, 3);
    check_requests(&c.model, &c.prepared, &reqs, "test").unwrap();
    let run = simulate(&c.prepared, &c.hw, &c.net, &c.config, &reqs);
    let r = summary(&c, &run);
    let u = r.unloaded.unwrap();
    assert!(
        (r.ttft_p50_s / u.ttft_s - 1.0).abs() < 1e-9,
        "{} vs {}",
        r.ttft_p50_s,
        u.ttft_s
    );
    assert!(
        (r.tpot_p50_s.unwrap() / u.tpot_s - 1.0).abs() < 0.01,
        "{:?} vs {}",
        r.tpot_p50_s,
        u.tpot_s
    );
    assert!(!r.overloaded, "{:?}", r.notes);
    assert_eq!(r.preemptions, 0);
}

#[test]
fn past_capacity_the_queue_grows_and_is_reported() {
    // infer's capacity for 512 + 128 at the largest batch, then 0.5× and 3× it.
    let c = case(1, Router::RoundRobin);
    let probe = summary(
        &c,
        &simulate(
            &c.prepared,
            &c.hw,
            &c.net,
            &c.config,
            &workload(1.0, 512, 128, 20, 1),
        ),
    );
    let cap = probe.unloaded.unwrap().capacity_requests_per_s;
    let below = workload(0.5 * cap, 512, 128, 3000, 5);
    let above = workload(3.0 * cap, 512, 128, 3000, 5);
    let rb = summary(&c, &simulate(&c.prepared, &c.hw, &c.net, &c.config, &below));
    let ra = summary(&c, &simulate(&c.prepared, &c.hw, &c.net, &c.config, &above));
    assert!(!rb.overloaded, "{:?}", rb.notes);
    assert!(ra.overloaded);
    assert!(
        ra.notes.iter().any(|n| n.contains("grows without bound")),
        "{:?}",
        ra.notes
    );
    // Offered 3× capacity, served at most at capacity: two thirds of the requests still queue at
    // the last arrival (the exact share depends on the simulated capacity; > 40 %).
    assert!(
        ra.waiting_at_last_arrival > 1200,
        "{}",
        ra.waiting_at_last_arrival
    );
    // The completion rate under overload is the simulated capacity: within 30 % of infer's
    // steady-state estimate (the simulation has chunked prefill mixed into decode steps and a
    // varying batch; infer has neither).
    assert!(
        (ra.completed_requests_per_s / cap - 1.0).abs() < 0.3,
        "{} vs {cap}",
        ra.completed_requests_per_s
    );
    assert!(ra.ttft_p99_s > 10.0 * rb.ttft_p99_s);
}

#[test]
fn the_requests_energies_sum_to_the_runs() {
    // Log-normal lengths and two replicas behind least-loaded routing, so iterations mix prefill
    // chunks with decodes: Σ requests = energy of all iterations, to 1e-9 relative.
    let c = case(2, Router::LeastLoaded);
    let g = Generated {
        arrivals: Arrivals::Gamma {
            rate: 20.0,
            cv: 2.0,
        },
        input: Lengths::LogNormal {
            mean: 1500.0,
            sigma: 1.0,
            max: None,
        },
        output: Lengths::LogNormal {
            mean: 200.0,
            sigma: 1.0,
            max: None,
        },
        requests: 2000,
        duration_s: None,
        seed: 11,
    };
    let (reqs, _) = generate(&g, c.model.seq, &c.model.name).unwrap();
    let run = simulate(&c.prepared, &c.hw, &c.net, &c.config, &reqs);
    let sum: f64 = run.records.iter().map(|r| r.energy_j).sum();
    assert!(run.energy_busy_j > 0.0);
    assert!(
        (sum / run.energy_busy_j - 1.0).abs() < 1e-9,
        "{sum} vs {}",
        run.energy_busy_j
    );
    // Every request finished: its last token after its first, after its arrival.
    for r in &run.records {
        assert!(r.ttft_s > 0.0 && r.e2e_s >= r.ttft_s, "{r:?}");
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let c = case(2, Router::RoundRobin);
    let a = workload(30.0, 700, 300, 500, 42);
    let b = workload(30.0, 700, 300, 500, 42);
    assert_eq!(a, b);
    let ra = summary(&c, &simulate(&c.prepared, &c.hw, &c.net, &c.config, &a));
    let rb = summary(&c, &simulate(&c.prepared, &c.hw, &c.net, &c.config, &b));
    assert_eq!(ra, rb);
    assert_ne!(a, workload(30.0, 700, 300, 500, 43));
}

#[test]
fn a_small_cache_preempts_and_still_finishes_everything() {
    // Cut the KV cache to 64 blocks (1,024 tokens) so 4 concurrent 200 + 100 requests overflow
    // it: preemption by recompute must happen, and every request must still complete with its
    // energy accounted.
    let mut c = case(1, Router::RoundRobin);
    c.prepared.kv_blocks = 64;
    let reqs = workload(50.0, 200, 100, 100, 9);
    check_requests(&c.model, &c.prepared, &reqs, "test").unwrap();
    let run = simulate(&c.prepared, &c.hw, &c.net, &c.config, &reqs);
    assert!(run.preemptions > 0);
    assert!(run.records.iter().all(|r| r.e2e_s > 0.0));
    let sum: f64 = run.records.iter().map(|r| r.energy_j).sum();
    assert!((sum / run.energy_busy_j - 1.0).abs() < 1e-9);
    // A request longer than the whole cache is refused, naming it.
    let long = workload(1.0, 1000, 100, 1, 1);
    let e = check_requests(&c.model, &c.prepared, &long, "t.csv")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.csv: request 1") && e.contains("KV cache"),
        "{e}"
    );
}

#[test]
fn vllm_defaults_by_device() {
    let (h100, _) = catalog_system("h100").unwrap();
    assert_eq!(vllm_defaults(&h100).max_num_batched_tokens, 8192);
    assert_eq!(vllm_defaults(&h100).max_num_seqs, 1024);
    let (a100, _) = catalog_system("a100").unwrap();
    assert_eq!(vllm_defaults(&a100).max_num_seqs, 256);
}
