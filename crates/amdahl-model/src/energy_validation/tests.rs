use super::*;

fn summary<'a>(v: &'a EnergyValidation, quantity: Quantity, subset: &str) -> &'a Summary {
    v.summaries
        .iter()
        .find(|s| s.quantity == quantity.name() && s.subset == subset)
        .unwrap()
}

#[test]
fn shipped_coefficients_are_the_fit_of_the_set() {
    // The constants in crate::power are this fit, rounded to 0.01 (0.005 for the mean busy draw
    // of unfitted generations). If the set or the serving model changes, this fails until they
    // are refitted (and docs/methodology.md's table updated with them).
    let v = energy_validation().unwrap();
    for (arch, a) in &v.fitted.active {
        let shipped = v.coefficients.coefficients(arch).active;
        assert!(
            (shipped - a).abs() <= 0.006,
            "{arch}: shipped {shipped}, fitted {a}"
        );
    }
    assert_eq!(v.fitted.active.len(), v.coefficients.active.len());
    assert!(
        (v.coefficients.compute - v.fitted.compute).abs() <= 0.006,
        "{:?}",
        v.fitted
    );
    assert!(
        (v.coefficients.memory - v.fitted.memory).abs() <= 0.006,
        "{:?}",
        v.fitted
    );
    assert!((v.coefficients.active_unfitted - v.fitted.active_unfitted).abs() <= 0.006);
    // vLLM's time per running sequence (crate::infer::engine) is the same kind of fit, on
    // the throughput rows of the same configurations: shipped rounded to 0.1 µs.
    let host = v.fitted_vllm_host_s.unwrap();
    assert!((v.vllm_host_s - host).abs() <= 0.06e-6, "{host}");
    assert_eq!(v.fitted_host_rows, 45);
    // 45 power rows: ML.ENERGY v3 on H100 and B200, the host-bound 8B-on-B200 runs left out.
    assert_eq!(v.fitted_rows, 45);
}

#[test]
fn held_out_accuracy_on_the_claimed_rows() {
    let v = energy_validation().unwrap();
    for s in &v.summaries {
        println!(
            "{:<28} {:<5} {:>3} rows: held-out median {:5.1} %, worst {:5.1} % ({}); in-sample {:5.1} % / {:5.1} %",
            s.quantity,
            s.subset,
            s.rows,
            s.held_out_median_abs_error * 100.0,
            s.held_out_worst_abs_error * 100.0,
            s.held_out_worst,
            s.median_abs_error * 100.0,
            s.worst_abs_error * 100.0
        );
    }
    // Every row of a modelled engine is in the claim, host-bound configurations too (they are
    // only left out of the fits): 112 power rows, 54 of Llama 3.1 that the fits use and 58 that
    // no fit uses (43 of Qwen3, 15 of Llama 3.3 70B). Held out, the power model and vLLM's
    // per-sequence time are both fitted without the row's configuration. Power: 6.8 % median
    // (6.3 % on the Llama 3.1 rows alone, before the others came, and 9.3 % with Qwen3 only;
    // 7.5 % on the Llama 3.1 rows until Meta's FP8 checkpoint was typed as the fp8-mixed it
    // is), but 107 % worst (Llama-3.1-8B on one B200 at batch 128, 449 W
    // measured where the model says 900 W or more: a GPU waiting on the engine's CPU, which the
    // model does not see), so the targets (median ≤ 15 %, none beyond 35 %) are NOT met. These
    // bounds hold the level reached, so that a regression fails. (7.8 % / 74 % on the Llama rows
    // while the per-sequence time was charged as host time at the busy draw without memory
    // traffic.) Since the ML.ENERGY v3 rows are predicted from a simulation of the offline run
    // they measured, over the benchmark's own steady-state window (simulated.rs), and both fits
    // redone on that: 7.1 % median, 106.9 % worst (the same row).
    let p = summary(&v, Quantity::PowerPerGpu, "claim");
    assert_eq!(p.rows, 112);
    assert!(p.held_out_median_abs_error <= 0.072, "{p:?}");
    assert!(p.held_out_worst_abs_error <= 1.08, "{p:?}");
    assert!(
        p.held_out_median_abs_error <= TARGET_MEDIAN && p.held_out_worst_abs_error > TARGET_WORST
    );
    // Energy per token carries the serving model's throughput error as well. On the Llama rows:
    // without vLLM's per-sequence time it was 18.5 % median and 51.5 % worst (the large batches
    // predicted too fast); with it as host time, 15.0 % and 42.8 %; as memory-bound GPU work
    // (the runs overlapped the engine's CPU work with the GPU's: --async-scheduling), 12.4 % —
    // the median target met — and 43.6 % worst: Llama-3.1-405B on 8 × B200 at batch 2,048,
    // predicted too slow. With Meta's FP8 405B typed as fp8-mixed (attention and the first and
    // last layers 16-bit), 11.4 % and 41.1 %. With the Qwen3 and Llama 3.3 rows, 10.2 % and the
    // same worst row. Predicted over the simulated run's steady-state window: 9.0 % median and
    // 47.8 % worst, the same row: in the window each iteration carries about 1,200 prompt tokens
    // beside its 2,048 decode steps, which the step model prices at 0.41 s where the measured
    // 7,173 tokens/s allow at most 0.29 s. The worst-case target is NOT met.
    let e = summary(&v, Quantity::EnergyPerToken, "claim");
    assert_eq!(e.rows, 112);
    assert!(e.held_out_median_abs_error <= 0.091, "{e:?}");
    assert!(e.held_out_median_abs_error <= TARGET_MEDIAN);
    assert!(e.held_out_worst_abs_error <= 0.48, "{e:?}");
    // Throughput, which the per-sequence time is fitted on: on the Llama rows 17.6 % median
    // before it, 12.2 % with it, 11.4 % with fp8-mixed; 12.3 % with the Qwen3 and Llama 3.3
    // rows; 11.7 % over the simulated window.
    let t = summary(&v, Quantity::Throughput, "claim");
    assert!(t.held_out_median_abs_error <= 0.118, "{t:?}");
}

#[test]
fn the_shipped_model_out_of_sample_on_models_no_fit_has_seen() {
    // ML.ENERGY v3's Qwen3 8B, 14B and 32B (TP 1 and 2 on H100, TP 1 on B200, batches 8 to
    // 2,048) and Llama 3.3 70B (TP 4 on H100, TP 2 on B200: Llama 3.1 70B's shape, another
    // checkpoint), selected by the rule of the Llama 3.1 rows, added after the constants were
    // fitted and marked `fit = no`: the shipped power model and per-sequence time predict them
    // as they stand. Measured when they were added (2026-12-07), 58 configurations: energy per
    // output token 8.8 % median, 29.2 % worst (Qwen3-14B on one B200 at batch 2,048, +29 %) —
    // both targets met; power 9.0 % median, 62.2 % worst (Qwen3-8B on one B200, host-bound like
    // Llama-3.1-8B there: 494 W at batch 32 where the model says 801 W); throughput 13.3 %
    // median. The Qwen3 rows alone: 8.6 %, 12.9 % and 17.8 % (too fast on every H100
    // configuration from batch 64, +18 to +30 %); Llama 3.3 70B's errors are Llama 3.1 70B's
    // within a few points (energy per token −17 to +20 %). Since the rows are predicted over the
    // simulated run's steady-state window (and the constants refitted on the Llama 3.1 rows that
    // way, still without these): energy per token 8.1 % median, 22.5 % worst (Qwen3-32B on two
    // H100 at batch 8); power 9.0 % and 64.7 % (Qwen3-8B on one B200, batch 32); throughput
    // 12.8 %.
    let v = energy_validation().unwrap();
    assert_eq!(v.fitted_rows, 45, "no Qwen3 row may enter the fit");
    let by = |q: Quantity| summary(&v, q, "out_of_sample").clone();
    let e = by(Quantity::EnergyPerToken);
    assert_eq!(e.rows, 58);
    assert!(e.median_abs_error <= 0.082, "{e:?}");
    assert!(e.worst_abs_error <= 0.226, "{e:?}");
    assert!(e.median_abs_error <= TARGET_MEDIAN && e.worst_abs_error <= TARGET_WORST);
    let p = by(Quantity::PowerPerGpu);
    assert!(p.median_abs_error <= 0.091, "{p:?}");
    assert!(p.worst_abs_error <= 0.65, "{p:?}");
    let t = by(Quantity::Throughput);
    assert!(t.median_abs_error <= 0.129, "{t:?}");
    assert!(v.cases.iter().all(|c| c.out_of_sample
        == (c.model.starts_with("qwen3") || c.id.starts_with("mlenergy3-llama3.3"))));
}

#[test]
fn the_wall_power_of_a_training_node() {
    // MLPerf Training v4.0, Sustainable Metal Cloud: GPT-3 175B on 64 nodes of 8 × H100, 6,849 W
    // per node at the shelf. The planner's power at the published layout plus the DGX H100's
    // estimated host: 6,166 W (−10.0 %) when the server scope was added, 6,804 W (−0.7 %) once
    // the power model was refitted with vLLM's per-sequence time as host time in the serving
    // steps, 6,236 W (−9.0 %) with it as memory-bound GPU work, 6,118 W (−10.7 %) after the
    // refit with Meta's FP8 405B typed as fp8-mixed, 6,206 W (−9.4 %) after the refit on the
    // serving rows' simulated windows; no coefficient is fitted to it.
    // Its immersion cooling has no fans, which the estimated host includes.
    let v = energy_validation().unwrap();
    let c = v
        .cases
        .iter()
        .find(|c| c.id == "mlpt40-smc-gpt3-64x8-nodepower")
        .unwrap();
    assert!(c.in_claim(), "{c:?}");
    assert!((c.error + 0.094).abs() < 0.02, "{c:?}");
    // And the three LoRA runs (rank 16, as logged): −5.1, +8.4 and +33.6 % from 8 to 512 GPUs
    // (−4.1, +9.7 and +35.2 % with the first power model, +5.4, +20.3 and +48.2 % with the
    // per-sequence time as host time, −3.7, +10.0 and +35.6 % after the refit on simulated
    // windows): measured power falls as the runs widen, the GPUs waiting on communication the
    // planner does not see exposed, while the planner's stays flat.
    let s = summary(&v, Quantity::NodeWallPower, "claim");
    assert_eq!(s.rows, 4);
    assert!(s.held_out_median_abs_error < 0.10, "{s:?}");
    assert!(s.held_out_worst_abs_error < 0.36, "{s:?}");
}

#[test]
fn rows_outside_the_claim_are_marked_and_explained() {
    let v = energy_validation().unwrap();
    // The host-bound configurations: Llama-3.1-8B on one B200, whose power drops from 617 W at
    // batch 64 to 449 W at batch 128, and Qwen3-8B there (646 W at batch 8, 532 W at 16). They
    // are explained, not excluded: their rows count.
    let mut host: Vec<&str> = v
        .cases
        .iter()
        .filter(|c| c.host_bound)
        .map(|c| c.configuration.as_str())
        .collect();
    host.dedup();
    assert_eq!(
        host,
        [
            "mlenergy3-llama3.1-8b-b200-tp1",
            "mlenergy3-qwen3-8b-b200-tp1"
        ]
    );
    assert!(v
        .cases
        .iter()
        .filter(|c| c.host_bound)
        .all(|c| c.in_claim()));
    // vLLM 0.5.4 (ML.ENERGY v2) and FastChat (v1) are outside the engines modelled.
    assert!(v
        .cases
        .iter()
        .filter(|c| c.id.starts_with("mlenergy2") || c.id.starts_with("mlenergy1"))
        .all(|c| !c.engine_modelled));
    assert!(v
        .cases
        .iter()
        .filter(|c| c.id.starts_with("mlenergy3"))
        .all(|c| c.engine_modelled));
    // Every row is either predicted or excluded with a reason.
    assert_eq!(v.cases.len() + v.excluded.len(), 394);
    assert!(v.excluded.iter().all(|e| !e.why.is_empty()));
}

#[test]
fn engines_by_name_and_version() {
    assert!(engine_modelled("vllm", "0.11.1"));
    assert!(engine_modelled("vLLM", "0.6.0"));
    assert!(!engine_modelled("vllm", "0.5.4"));
    assert!(engine_modelled("tensorrt-llm", ""));
    assert!(!engine_modelled("fastchat+pytorch", "PyTorch 2.0.1"));
}

#[test]
fn the_committed_predictions_are_the_live_ones() {
    // `infer`, `plan`, `carbon` and `serve` quote the committed file; it must be what the model
    // predicts now.
    let live = serde_json::to_string_pretty(&energy_validation().unwrap()).unwrap() + "\n";
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/validation/energy-predictions.json"
    );
    if std::env::var_os("AMDAHL_UPDATE_ENERGY_PREDICTIONS").is_some() {
        std::fs::write(path, &live).unwrap();
        return;
    }
    assert!(
        live == COMMITTED,
        "data/validation/energy-predictions.json is stale: rewrite it with \
         AMDAHL_UPDATE_ENERGY_PREDICTIONS=1 cargo test -p amdahl-model --lib \
         energy_validation::tests::the_committed_predictions_are_the_live_ones"
    );
    // It reads back (to within the JSON reader's last-digit rounding of floats).
    let read = energy_validation_committed().unwrap();
    let now = energy_validation().unwrap();
    assert_eq!(read.cases.len(), now.cases.len());
    for (a, b) in read.summaries.iter().zip(&now.summaries) {
        assert!((a.held_out_median_abs_error - b.held_out_median_abs_error).abs() < 1e-12);
    }
}
