//! Benchmark of `amdahl plan --search`: layouts evaluated per second on one thread and on all
//! cores, and the wall time of the reference search — a 530B model (hidden 20480,
//! 105 layers, 128 heads, seq 2048) on 5,128 A100 80 GB with global batch ≤ 2,520 — both over
//! exactly 5,128 devices and over every whole number of nodes up to 5,128 (`--up-to`).
//!
//! Run: `cargo run --release -p amdahl-model --example bench_plan_search`

use amdahl_model::plan::{
    catalog_model, catalog_system, search, CostInputs, Objective, Precision, SearchSpace,
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
        precisions: vec![Precision::Bf16],
        flash_attention: false,
        max_cp: 1,
        objective: Objective::Time,
        top_k: 10,
        cost: CostInputs {
            tokens: 300e9,
            pue: 1.0,
            intensity,
            price_per_device_hour: None,
        },
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
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
