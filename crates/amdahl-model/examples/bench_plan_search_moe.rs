//! Benchmark of `amdahl plan --search` for a mixture of experts: DeepSeek-V3 (671B,
//! 256 routed experts + 1 shared, top-8) on 2,048 H800 with a global batch of 15,360 sequences
//! of 4,096 tokens (DeepSeek-AI 2024, §3.2 and §4.2) over TP × PP × EP × DP × microbatch ×
//! recomputation (× interleaving, ZeRO, SP, DP overlap), fp8. Layouts evaluated per second on
//! one thread and on all cores, and the wall time; best of three runs.
//!
//! DeepSeek-V3's 61 layers are prime, so without uneven pipeline stages the only PP degrees
//! are 1 and 61; the second space is the same model with 64 layers (62 of them MoE), which
//! exercises the PP dimension as a DeepSeek-V3-size model that PP divides.
//!
//! Run: `cargo run --release -p amdahl-model --example bench_plan_search_moe`

use amdahl_model::plan::{
    catalog_model, catalog_system, search, space_size, ComputePrecision, CostInputs, ModelShape,
    Objective, SearchSpace,
};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

fn main() {
    let (hw, net, model) = match (catalog_system("h800"), catalog_model("deepseek-v3")) {
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
    let space = SearchSpace {
        gpus: 2048,
        up_to: false,
        max_batch: 15360,
        max_cp: 1,
        exact_batch: true,
        microbatches: vec![1, 2, 4, 8],
        max_interleave: 4,
        precisions: vec![ComputePrecision::Fp8],
        flash_attention: true,
        framework: Default::default(),
        objective: Objective::Time,
        top_k: 10,
        cost: CostInputs {
            tokens: 14.8e12,
            pue: 1.0,
            intensity,
            price_per_device_hour: None,
        },
        power_caps: Vec::new(),
    };
    let mut deep64 = model.clone();
    deep64.name = "DeepSeek-V3-size, 64 layers".into();
    deep64.layers = 64;
    if let Some(m) = deep64.moe.as_mut() {
        m.moe_layers = 62;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("DeepSeek-V3 on 2,048 H800, global batch 15,360 x 4,096 tokens, fp8");
    println!(
        "{:<30} {:>7} {:>10} {:>9} {:>9} {:>13}",
        "model", "threads", "evaluated", "fitting", "wall s", "evaluated/s"
    );
    let models: [&ModelShape; 2] = [&model, &deep64];
    for m in models {
        let total = space_size(m, &net, &space);
        for threads in [1, cores] {
            let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("thread pool: {e}");
                    std::process::exit(1);
                }
            };
            let mut best = f64::INFINITY;
            let mut last = None;
            for _ in 0..3 {
                let t0 = Instant::now();
                let out = pool.install(|| search(m, &hw, &net, &space, &AtomicU64::new(0)));
                best = best.min(t0.elapsed().as_secs_f64());
                last = Some(out);
            }
            let Some(out) = last else { continue };
            assert_eq!(out.evaluated, total);
            println!(
                "{:<30} {:>7} {:>10} {:>9} {:>9.4} {:>13.3e}",
                m.name,
                threads,
                out.evaluated,
                out.fitting,
                best,
                out.evaluated as f64 / best
            );
            if threads == cores {
                if let Some(c) = out.top.first() {
                    println!(
                        "{:<30} best: {} ({:.2} s/step, {:.0} tokens/s/GPU, MFU {:.1} %, {:.0}K GPU-h per 1T tokens)",
                        "",
                        c.estimate.layout.label(),
                        c.estimate.step_time.get(),
                        c.estimate.tokens_per_s / c.estimate.gpus as f64,
                        100.0 * c.estimate.mfu,
                        1e12 / c.estimate.tokens_per_s * c.estimate.gpus as f64 / 3600.0 / 1e3
                    );
                }
            }
        }
    }
}
