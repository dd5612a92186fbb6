//! Benchmark of `amdahl plan --search`: layouts evaluated per second on one thread and on all
//! cores, and the wall time of the planner's reference search — a 530B model (hidden 20480, 105
//! layers, 128 heads, seq 2048) on 5,128 A100 80 GB with global batch ≤ 2,520 — both over exactly
//! 5,128 devices and over every whole number of nodes up to 5,128 (`--up-to`) — and a search of the
//! size of Llama 3's pre-training (Dubey et al. 2024): Llama 3 405B at 131,072 tokens on 16,384
//! H100 over TP × CP (up to 16) × PP (uneven splits included) × DP, TP overlap and the rest.
//!
//! Run: `cargo run --release -p amdahl-model --example bench_plan_search`

use amdahl_model::plan::{
    catalog_model, catalog_system, search, ComputePrecision, CostInputs, Objective, SearchSpace,
};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

fn main() {
    let (hw, net, model) = match (catalog_system("a100-80gb"), catalog_model("mt-nlg-530b")) {
        (Ok((hw, net)), Ok(model)) => (hw, net, model),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let intensity = match amdahl_model::catalog::grid::lookup("world") {
        Ok(g) => g.g_per_kwh,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let space = |up_to: bool| SearchSpace {
        gpus: 5128,
        up_to,
        max_batch: 2520,
        exact_batch: false,
        microbatches: vec![1, 2, 4, 8],
        max_interleave: 4,
        precisions: vec![ComputePrecision::Bf16],
        flash_attention: false,
        framework: Default::default(),
        max_cp: 1,
        objective: Objective::Time,
        top_k: 10,
        cost: CostInputs {
            tokens: 300e9,
            pue: 1.0,
            intensity,
            price_per_device_hour: None,
        },
        power_caps: Vec::new(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    long_context(cores, intensity);
    println!("530B (h 20480, l 105, a 128, s 2048) on 5,128 A100 80 GB, global batch <= 2,520");
    // `evaluated` counts every enumerated layout (cheap constraint checks reject some before the
    // memory model); `fitting` layouts also get the full time/energy model and are ranked.
    println!(
        "{:<26} {:>7} {:>10} {:>9} {:>9} {:>13} {:>13}",
        "space", "threads", "evaluated", "fitting", "wall s", "evaluated/s", "fitting/s"
    );
    for (name, up_to) in [
        ("exactly 5,128 devices", false),
        ("up to 5,128 (whole nodes)", true),
    ] {
        for threads in [1, cores] {
            let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("thread pool: {e}");
                    std::process::exit(1);
                }
            };
            let s = space(up_to);
            // Best of three runs: the figure is throughput, not cold-start time.
            let mut best = f64::INFINITY;
            let mut last = None;
            for _ in 0..3 {
                let t0 = Instant::now();
                let out = pool.install(|| search(&model, &hw, &net, &s, &AtomicU64::new(0)));
                best = best.min(t0.elapsed().as_secs_f64());
                last = Some(out);
            }
            if let Some(out) = last {
                println!(
                    "{:<26} {:>7} {:>10} {:>9} {:>9.4} {:>13.3e} {:>13.3e}",
                    name,
                    threads,
                    out.evaluated,
                    out.fitting,
                    best,
                    out.evaluated as f64 / best,
                    out.fitting as f64 / best
                );
                if threads == cores {
                    if let Some(c) = out.top.first() {
                        println!(
                            "{:<26} best: {} ({:.2} s/step, {:.1} TFLOP/s/GPU)",
                            "",
                            c.estimate.layout.label(),
                            c.estimate.step_time.get(),
                            c.estimate.tflops_per_gpu
                        );
                    }
                }
            }
        }
    }
}

/// Llama 3 405B, 131,072-token sequences, 16,384 H100, batch 128 (Dubey et al. 2024 Table 4's
/// long-context stage), context parallelism up to 16.
fn long_context(cores: usize, intensity: amdahl_model::units::GramsPerKwh) {
    let (hw, net, mut model) = match (catalog_system("h100"), catalog_model("llama3-405b")) {
        (Ok((hw, net)), Ok(model)) => (hw, net, model),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    model.seq = 131_072;
    let space = SearchSpace {
        gpus: 16_384,
        up_to: false,
        max_batch: 128,
        exact_batch: true,
        microbatches: vec![1],
        max_interleave: 8,
        precisions: vec![ComputePrecision::Bf16],
        flash_attention: true,
        framework: Default::default(),
        max_cp: 16,
        objective: Objective::Time,
        top_k: 10,
        cost: CostInputs {
            tokens: 300e9,
            pue: 1.0,
            intensity,
            price_per_device_hour: None,
        },
        power_caps: Vec::new(),
    };
    println!("Llama 3 405B at s = 131,072 on 16,384 H100, batch 128, CP <= 16, TP overlap");
    for threads in [1, cores] {
        let Ok(pool) = rayon::ThreadPoolBuilder::new().num_threads(threads).build() else {
            eprintln!("thread pool");
            std::process::exit(1);
        };
        let mut best = f64::INFINITY;
        let mut last = None;
        for _ in 0..3 {
            let t0 = Instant::now();
            let out = pool.install(|| search(&model, &hw, &net, &space, &AtomicU64::new(0)));
            best = best.min(t0.elapsed().as_secs_f64());
            last = Some(out);
        }
        if let Some(out) = last {
            println!(
                "{:<26} {:>7} {:>10} {:>9} {:>9.4} {:>13.3e} {:>13.3e}",
                "CP search",
                threads,
                out.evaluated,
                out.fitting,
                best,
                out.evaluated as f64 / best,
                out.fitting as f64 / best
            );
            if let Some(c) = out.top.first() {
                println!(
                    "{:<26} best: {} ({:.2} s/step, {:.1} model TFLOP/s/GPU)",
                    "",
                    c.estimate.layout.label(),
                    c.estimate.step_time.get(),
                    c.estimate.model_tflops_per_gpu
                );
            }
        }
    }
}
