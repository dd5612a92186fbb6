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
    // Every row of a modelled engine is in the claim, the host-bound 8B-on-B200 configuration
    // too (it is only left out of the fits): 54 power rows. Held out, the power model and vLLM's
    // per-sequence time are both fitted without the row's configuration. Power: 6.3 % median
    // (7.5 % until Meta's FP8 checkpoint was typed as the fp8-mixed it is), but 107 % worst (that configuration at batch 128, 449 W measured where the model says
    // 900 W or more: a GPU waiting on the engine's CPU, which the model does not see), so the
    // targets (median ≤ 15 %, none beyond 35 %) are NOT met. These bounds hold the level
    // reached, so that a regression fails. (7.8 % / 74 % while the per-sequence time was
    // charged as host time at the busy draw without memory traffic.)
    let p = summary(&v, Quantity::PowerPerGpu, "claim");
    assert_eq!(p.rows, 54);
    assert!(p.held_out_median_abs_error <= 0.064, "{p:?}");
    assert!(p.held_out_worst_abs_error <= 1.08, "{p:?}");
    assert!(
        p.held_out_median_abs_error <= TARGET_MEDIAN && p.held_out_worst_abs_error > TARGET_WORST
    );
    // Energy per token carries the serving model's throughput error as well. Without vLLM's
    // per-sequence time it was 18.5 % median and 51.5 % worst (the large batches predicted too
    // fast); with it as host time, 15.0 % and 42.8 %; as memory-bound GPU work (the runs
    // overlapped the engine's CPU work with the GPU's: --async-scheduling), 12.4 % — the median
    // target met — and 43.6 % worst: Llama-3.1-405B on 8 × B200 at batch 2,048, predicted too
    // slow. With Meta's FP8 405B typed as fp8-mixed (attention and the first and last layers
    // 16-bit), 11.4 % and 41.1 %. The worst-case target is NOT met.
    let e = summary(&v, Quantity::EnergyPerToken, "claim");
    assert_eq!(e.rows, 54);
    assert!(e.held_out_median_abs_error <= 0.115, "{e:?}");
    assert!(e.held_out_median_abs_error <= TARGET_MEDIAN);
    assert!(e.held_out_worst_abs_error <= 0.42, "{e:?}");
    // Throughput, which the per-sequence time is fitted on: 17.6 % median before it, 12.2 %
    // with it, 11.4 % with fp8-mixed.
    let t = summary(&v, Quantity::Throughput, "claim");
    assert!(t.held_out_median_abs_error <= 0.115, "{t:?}");
}

#[test]
fn the_wall_power_of_a_training_node() {
    // MLPerf Training v4.0, Sustainable Metal Cloud: GPT-3 175B on 64 nodes of 8 × H100, 6,849 W
    // per node at the shelf. The planner's power at the published layout plus the DGX H100's
    // estimated host: 6,166 W (−10.0 %) when the server scope was added, 6,804 W (−0.7 %) once
    // the power model was refitted with vLLM's per-sequence time as host time in the serving
    // steps, 6,236 W (−9.0 %) with it as memory-bound GPU work, 6,118 W (−10.7 %) after the
    // refit with Meta's FP8 405B typed as fp8-mixed; no coefficient is fitted to it.
    // Its immersion cooling has no fans, which the estimated host includes.
    let v = energy_validation().unwrap();
    let c = v
        .cases
        .iter()
        .find(|c| c.id == "mlpt40-smc-gpt3-64x8-nodepower")
        .unwrap();
    assert!(c.in_claim(), "{c:?}");
    assert!((c.error + 0.107).abs() < 0.02, "{c:?}");
    // And the three LoRA runs (rank 16, as logged): −5.1, +8.4 and +33.6 % from 8 to 512 GPUs
    // (−4.1, +9.7 and +35.2 % with the first power model, +5.4, +20.3 and +48.2 % with the
    // per-sequence time as host time): measured power falls as the runs widen, the
    // GPUs waiting on communication the planner does not see exposed, while the planner's
    // stays flat.
    let s = summary(&v, Quantity::NodeWallPower, "claim");
    assert_eq!(s.rows, 4);
    assert!(s.held_out_median_abs_error < 0.10, "{s:?}");
    assert!(s.held_out_worst_abs_error < 0.35, "{s:?}");
}

#[test]
fn rows_outside_the_claim_are_marked_and_explained() {
    let v = energy_validation().unwrap();
    // The only host-bound configuration: Llama-3.1-8B on one B200, whose power drops from 617 W
    // at batch 64 to 449 W at batch 128. It is explained, not excluded: its rows count.
    let mut host: Vec<&str> = v
        .cases
        .iter()
        .filter(|c| c.host_bound)
        .map(|c| c.configuration.as_str())
        .collect();
    host.dedup();
    assert_eq!(host, ["mlenergy3-llama3.1-8b-b200-tp1"]);
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
    assert_eq!(v.cases.len() + v.excluded.len(), 220);
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
