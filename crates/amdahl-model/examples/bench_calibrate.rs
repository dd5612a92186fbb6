//! Benchmark of `amdahl calibrate` and of a search with a calibration loaded: the fit on 1,000
//! measured training rows (each with a step time and a power: 2,000 residuals; synthesised from
//! the model with known constants and 2 % noise, so the fit has a right answer), and `plan
//! --search` of Llama-2-70B on 1,024 H100 with and without the fitted calibration, side by side.
//! With an argument, also writes the 1,000 rows as a measured-runs CSV there (for the whole
//! command, `scripts/bench/calibrate.sh`).
//!
//! Run: `cargo run --release -p amdahl-model --example bench_calibrate [-- rows.csv]`

use amdahl_model::calibrate::{
    calibrate, predict, set, Quantity, Request, Row, Workload, POWER_CONSTANTS, TIME_CONSTANTS,
};
use amdahl_model::plan::{
    catalog_model, catalog_system, search, validate, ComputePrecision, CostInputs, Layout,
    Objective, Recompute, SearchSpace,
};
use rand::{Rng, SeedableRng};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

const TRUE_TIME: [f64; 4] = [0.60, 0.70, 25e-6, 0.030];
const TRUE_POWER: [f64; 3] = [0.36, 0.70, 0.40];

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}

/// 1,000 valid layouts of GPT-3-family models on 1–64 H100, with their `plan` command lines.
fn rows(n: usize) -> (Vec<Row>, String) {
    let (hw, net) = catalog_system("h100").unwrap_or_else(|e| fail(e));
    let mut truth = hw.clone();
    set(&mut truth, &TIME_CONSTANTS, &TRUE_TIME);
    set(&mut truth, &POWER_CONSTANTS, &TRUE_POWER);
    let models = [
        "gpt3-125m",
        "gpt3-350m",
        "gpt3-760m",
        "gpt3-1.3b",
        "gpt3-2.7b",
        "gpt3-6.7b",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let (mut out, mut csv) = (Vec::new(), String::from("command,step_s,power_w\n"));
    while out.len() < 2 * n {
        let name = models[rng.random_range(0..models.len())];
        let model = catalog_model(name).unwrap_or_else(|e| fail(e));
        let tp = [1u32, 2, 4, 8][rng.random_range(0..4)];
        let dp = [1u32, 2, 4, 8][rng.random_range(0..4)];
        let mbs = [1u32, 2, 4][rng.random_range(0..3)];
        let batch = dp * mbs * [1u32, 2, 4, 8][rng.random_range(0..4)];
        let recompute =
            [Recompute::None, Recompute::Selective, Recompute::Full][rng.random_range(0..3)];
        let layout = Layout {
            tp,
            dp,
            mbs,
            batch,
            recompute,
            ..Layout::default()
        };
        if validate(&model, &hw, &net, &layout, None).is_err() {
            continue;
        }
        let w = Arc::new(Workload::Train {
            model,
            hw: hw.clone(),
            net,
            layout,
        });
        let mut noisy =
            |q| predict(&w, &truth, q) * (1.0 + 0.02 * (2.0 * rng.random::<f64>() - 1.0));
        let (step, power) = (noisy(Quantity::StepS), noisy(Quantity::PowerW));
        let r = match recompute {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        };
        csv.push_str(&format!(
            "plan --model {name} --system h100 --gpus {} --tp {tp} --dp {dp} --mbs {mbs} --batch {batch} --recompute {r},{step},{power}\n",
            tp * dp
        ));
        let line = out.len() / 2 + 2;
        for (q, v) in [(Quantity::StepS, step), (Quantity::PowerW, power)] {
            out.push(Row {
                origin: format!("row {line}"),
                workload: w.clone(),
                quantity: q,
                measured: v,
            });
        }
    }
    (out, csv)
}

fn main() {
    let (rows, csv) = rows(1000);
    if let Some(path) = std::env::args().nth(1) {
        std::fs::write(&path, csv).unwrap_or_else(|e| fail(e));
    }
    let mut best = f64::INFINITY;
    let mut cal = None;
    for _ in 0..3 {
        let t0 = Instant::now();
        let c = calibrate(&rows, &Request::default(), "synthetic").unwrap_or_else(|e| fail(e));
        best = best.min(t0.elapsed().as_secs_f64());
        cal = Some(c);
    }
    let Some(cal) = cal else {
        fail("no calibration")
    };
    println!(
        "calibrate: 1,000 rows (step_s + power_w, 2,000 residuals), {} constants fitted, leave-one-out {}: {:.3} s (best of 3, {} threads)",
        cal.constants.len(),
        cal.loo_method,
        best,
        rayon::current_num_threads()
    );
    for c in &cal.constants {
        println!(
            "  {:<18} {:>10.4e} ± {:.1e}",
            c.name, c.value, c.standard_error
        );
    }
    for r in &cal.not_identified {
        println!("  not fitted: {} ({})", r.name, r.reason);
    }

    let (hw, net) = catalog_system("h100").unwrap_or_else(|e| fail(e));
    let mut tuned = hw.clone();
    cal.apply(&mut tuned, "synthetic")
        .unwrap_or_else(|e| fail(e));
    let model = catalog_model("llama-2-70b").unwrap_or_else(|e| fail(e));
    let space = SearchSpace {
        gpus: 1024,
        up_to: false,
        max_batch: 1024,
        exact_batch: true,
        microbatches: vec![1, 2, 4, 8],
        max_interleave: 4,
        precisions: vec![ComputePrecision::Bf16],
        flash_attention: true,
        max_cp: 1,
        objective: Objective::Time,
        top_k: 10,
        cost: CostInputs {
            tokens: 2e12,
            pue: 1.0,
            intensity: amdahl_model::units::GramsPerKwh(475.0),
            price_per_device_hour: None,
        },
        power_caps: Vec::new(),
        framework: Default::default(),
    };
    let time = |h: &amdahl_model::plan::Hardware| {
        let mut best = f64::INFINITY;
        let mut evaluated = 0;
        for _ in 0..5 {
            let t0 = Instant::now();
            let out = search(&model, h, &net, &space, &AtomicU64::new(0));
            best = best.min(t0.elapsed().as_secs_f64());
            evaluated = out.evaluated;
        }
        (best, evaluated)
    };
    // Interleaved, so drift in the machine's speed hits both alike.
    let (plain, n) = time(&hw);
    let (calibrated, _) = time(&tuned);
    let (plain2, _) = time(&hw);
    let plain = plain.min(plain2);
    println!(
        "plan --search llama-2-70b on 1,024 H100 ({n} layouts): uncalibrated {:.1} ms, calibrated {:.1} ms, ratio {:.2}",
        plain * 1e3,
        calibrated * 1e3,
        calibrated / plain
    );
}
