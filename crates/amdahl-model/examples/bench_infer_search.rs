//! Benchmark of `amdahl infer --search` (the serving model's reference search): Llama 3.1 405B on
//! one node of 8 H100, TP ∈ divisors of 8, batch 1…1,024, four weight formats; configurations
//! evaluated per second and wall time, best of 5 repetitions on one thread; each case without
//! and with `--search-power-cap` over 8 caps (300…700 W), side by side in one run.
//!
//! Run: `cargo run --release -p amdahl-model --example bench_infer_search`

use amdahl_model::infer::{search, Charging, KvFormat, Requests, Space, WeightFormat};
use amdahl_model::plan::{catalog_model, catalog_system};
use std::time::Instant;

fn main() {
    let (hw, net, model) = match (catalog_system("h100"), catalog_model("llama-405b")) {
        (Ok((hw, net)), Ok(model)) => (hw, net, model),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let grid = match amdahl_model::catalog::grid::lookup("world") {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let charging = Charging {
        pue: 1.0,
        pue_source: "bench".into(),
        grid,
    };
    println!("Llama-3.1-405B on 8 x H100 SXM5 80GB: tp in {{1,2,4,8}} x bf16/fp8/int8/int4 x batch 1..1024");
    println!(
        "{:<27} {:>10} {:>9} {:>10} {:>14}",
        "requests", "evaluated", "feasible", "wall ms", "configs/s"
    );
    let caps: Vec<amdahl_model::units::Watts> = (0..8)
        .map(|i| amdahl_model::units::Watts(300.0 + 400.0 * f64::from(i) / 7.0))
        .collect();
    for (input, output, tpot, power_caps) in [
        (512, 256, None, vec![]),
        (512, 256, None, caps.clone()),
        (1024, 256, Some(0.05), vec![]),
        (1024, 256, Some(0.05), caps.clone()),
        (4096, 512, Some(0.05), vec![]),
        (4096, 512, Some(0.05), caps.clone()),
    ] {
        let capped = !power_caps.is_empty();
        let space = Space {
            gpus: 8,
            pp: 1,
            kv: KvFormat::Fp8,
            engine: Default::default(),
            memory_fraction: None,
            precisions: WeightFormat::offered(&hw),
            max_batch: 1024,
            max_ttft_s: None,
            max_tpot_s: tpot,
            top: 10,
            power_caps,
        };
        let req = Requests {
            input,
            output,
            beams: 1,
        };
        let mut best = f64::INFINITY;
        let mut found = None;
        for _ in 0..5 {
            let t = Instant::now();
            let o = search(&model, &hw, &net, req, &space, &charging);
            best = best.min(t.elapsed().as_secs_f64());
            found = Some(o);
        }
        match found {
            Some(Ok(o)) => println!(
                "{:<27} {:>10} {:>9} {:>10.2} {:>14.0}",
                format!(
                    "{input}+{output}{}{}",
                    tpot.map_or(String::new(), |t| format!(" tpot<={}ms", t * 1e3)),
                    if capped { " 8 caps" } else { "" }
                ),
                o.evaluated,
                o.feasible,
                best * 1e3,
                o.evaluated as f64 / best
            ),
            Some(Err(e)) => println!("{input}+{output}: {e}"),
            None => {}
        }
    }
}
