//! Round trip: rows synthesised from the model with known constants plus noise; the fit must
//! recover each constant within its standard error (three, for a 99.7 % two-sided check) and
//! refuse what the rows cannot identify.

use super::*;
use crate::plan::{catalog_system, shape::catalog_model, Recompute};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// The constants the synthetic runs were "measured" with: a stack slower than the catalog's
/// (GEMMs at 0.60 of peak, streaming at 0.70 of the bandwidth, 40 ms of framework overhead per
/// iteration) on a device drawing a little less when busy.
const TRUE_TIME: [f64; 4] = [0.60, 0.70, 20e-6, 0.040];
const TRUE_POWER: [f64; 3] = [0.35, 0.70, 0.40];

fn layouts() -> Vec<(&'static str, Layout)> {
    let mut out = Vec::new();
    for (model, tp, mbs, batch, recompute) in [
        ("gpt3-125m", 1, 1, 8, Recompute::None),
        ("gpt3-125m", 1, 4, 32, Recompute::Selective),
        ("gpt3-350m", 1, 2, 16, Recompute::None),
        ("gpt3-1.3b", 1, 1, 8, Recompute::Full),
        ("gpt3-1.3b", 2, 4, 64, Recompute::Selective),
        ("gpt3-2.7b", 2, 2, 32, Recompute::None),
        ("gpt3-6.7b", 4, 1, 64, Recompute::Full),
        ("gpt3-6.7b", 8, 2, 128, Recompute::Selective),
        ("gpt3-13b", 8, 1, 64, Recompute::Full),
        ("gpt3-350m", 1, 8, 64, Recompute::Full),
        ("gpt3-760m", 1, 1, 4, Recompute::None),
        ("gpt3-2.7b", 4, 8, 256, Recompute::Full),
    ] {
        out.push((
            model,
            Layout {
                tp,
                dp: 1,
                mbs,
                batch,
                recompute,
                ..Layout::default()
            },
        ));
    }
    out
}

/// Rows of step time and power on an H100, generated with `time` and `power` and multiplied by
/// `1 + noise·u`, u uniform in [−1, 1].
fn synthetic(noise: f64, seed: u64) -> Vec<Row> {
    let (hw, net) = catalog_system("h100").unwrap();
    let mut truth = hw.clone();
    set(&mut truth, &TIME_CONSTANTS, &TRUE_TIME);
    set(&mut truth, &POWER_CONSTANTS, &TRUE_POWER);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut rows = Vec::new();
    for (k, (model, layout)) in layouts().into_iter().enumerate() {
        let w = Arc::new(Workload::Train {
            model: catalog_model(model).unwrap(),
            hw: hw.clone(),
            net,
            layout,
        });
        for q in [Quantity::StepS, Quantity::PowerW] {
            let v = predict(&w, &truth, q) * (1.0 + noise * (2.0 * rng.random::<f64>() - 1.0));
            rows.push(Row {
                origin: format!("synthetic row {}", k + 1),
                workload: w.clone(),
                quantity: q,
                measured: v,
            });
        }
    }
    rows
}

fn value(c: &Calibration, name: &str) -> Option<(f64, f64)> {
    c.constants
        .iter()
        .find(|k| k.name == name)
        .map(|k| (k.value, k.standard_error))
}

#[test]
fn the_fit_recovers_the_constants_the_rows_were_made_with() {
    let c = calibrate(&synthetic(0.01, 42), &Request::default(), "synthetic").unwrap();
    // The small models' many small kernels identify the latency too: all seven training
    // constants are fitted; the serving engine's time per running sequence, which no training row
    // has, is refused by name.
    let refused: Vec<&str> = c.not_identified.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(refused, ["per_sequence_s"], "{:?}", c.not_identified);
    assert!(
        c.not_identified[0].reason.contains("no row is served"),
        "{:?}",
        c.not_identified
    );
    assert_eq!(c.engine, None);
    for (name, want) in TIME_CONSTANTS
        .iter()
        .zip(TRUE_TIME)
        .chain(POWER_CONSTANTS.iter().zip(TRUE_POWER))
    {
        let (v, se) = value(&c, name).unwrap();
        assert!(se > 0.0 && se.is_finite(), "{name}: se {se}");
        assert!(
            (v - want).abs() <= 3.0 * se,
            "{name}: fitted {v} ± {se}, made with {want}"
        );
    }
    let step = c
        .quantities
        .iter()
        .find(|q| q.quantity == Quantity::StepS)
        .unwrap();
    // Before: the catalog's constants miss the slower stack by tens of per cent; after: within
    // the 1 % noise; left out: within 2 %.
    assert!(step.mean_abs_before > 0.10, "{step:?}");
    assert!(step.mean_abs_after < 0.01, "{step:?}");
    assert!(step.mean_abs_loo < 0.02, "{step:?}");
    assert_eq!(step.loo_signed_errors.len(), 12);
    assert_eq!(c.loo_method, "exact");
}

#[test]
fn without_noise_the_fit_is_exact() {
    let c = calibrate(&synthetic(0.0, 1), &Request::default(), "synthetic").unwrap();
    for (name, want) in TIME_CONSTANTS.iter().zip(TRUE_TIME) {
        let (v, _) = value(&c, name).unwrap();
        assert!((v / want - 1.0).abs() < 1e-4, "{name}: {v} vs {want}");
    }
}

#[test]
fn a_calibration_applies_to_its_device_only() {
    let c = calibrate(&synthetic(0.01, 3), &Request::default(), "runs.csv").unwrap();
    let (mut hw, _) = catalog_system("h100").unwrap();
    c.apply(&mut hw, "cal.json").unwrap();
    assert!(hw.tuning.provenance[0].starts_with("calibrated on 12 rows of runs.csv"));
    let (v, _) = value(&c, "gemm_efficiency").unwrap();
    assert_eq!(hw.curve().max_efficiency, v);
    let (mut a100, _) = catalog_system("a100-80gb").unwrap();
    let e = c.apply(&mut a100, "cal.json").unwrap_err().to_string();
    assert!(e.contains("cal.json") && e.contains("--system"), "{e}");
    let old = Calibration {
        model_version: MODEL_VERSION + 1,
        ..c.clone()
    };
    let e = old.apply(&mut hw, "old.json").unwrap_err().to_string();
    assert!(e.contains("old.json") && e.contains("model version"), "{e}");
}

#[test]
fn asking_for_an_unidentifiable_constant_is_an_error_naming_it() {
    let times: Vec<Row> = synthetic(0.01, 5)
        .into_iter()
        .filter(|r| r.quantity == Quantity::StepS)
        .collect();
    let req = Request {
        constants: Some(vec!["gemm_efficiency".into(), "power_compute".into()]),
    };
    let e = calibrate(&times, &req, "x").unwrap_err().to_string();
    assert!(
        e.contains("cannot identify compute power coefficient: no row measures power"),
        "{e}"
    );
    // Without naming them, the power constants are listed as not fitted instead.
    let c = calibrate(&times, &Request::default(), "x").unwrap();
    assert_eq!(c.not_identified.len(), 4, "{:?}", c.not_identified);
}

#[test]
fn a_gemm_loop_cannot_tell_latency_from_step_overhead() {
    // t = latency + overhead + F / (efficiency × rate): the two fixed costs add up, and the
    // fit keeps the first and refuses the second by name.
    let (hw, _) = catalog_system("h100").unwrap();
    let rows: Vec<Row> = [256.0f64, 512.0, 1024.0, 2048.0, 4096.0]
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let flops = 2.0 * n.powi(3);
            Row {
                origin: format!("line {}", k + 2),
                workload: Arc::new(Workload::Gemm {
                    flops,
                    peak: 1e12,
                    hw: hw.clone(),
                }),
                quantity: Quantity::StepS,
                measured: 5e-5 + flops / (0.5 * 1e12),
            }
        })
        .collect();
    let c = calibrate(&rows, &Request::default(), "x").unwrap();
    let refused: Vec<&str> = c.not_identified.iter().map(|r| r.name.as_str()).collect();
    assert!(
        refused.contains(&"step_overhead_s"),
        "{:?}",
        c.not_identified
    );
    let why = &c
        .not_identified
        .iter()
        .find(|r| r.name == "step_overhead_s")
        .unwrap()
        .reason;
    assert!(
        why.contains("proportional to that of kernel latency"),
        "{why}"
    );
    let (eff, _) = value(&c, "gemm_efficiency").unwrap();
    let (lat, _) = value(&c, "kernel_latency_s").unwrap();
    assert!(
        (eff / 0.5 - 1.0).abs() < 1e-4 && (lat / 5e-5 - 1.0).abs() < 1e-3,
        "{eff} {lat}"
    );
}

#[test]
fn bad_measurements_are_refused_with_their_row() {
    let mut rows = synthetic(0.0, 1);
    rows[3].measured = f64::NAN;
    let e = calibrate(&rows, &Request::default(), "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("synthetic row 2") && e.contains("power_w"),
        "{e}"
    );
    rows[3].measured = -1.0;
    assert!(calibrate(&rows, &Request::default(), "x").is_err());
}

// The serving engine's time per running sequence (`per_sequence_s`, infer/engine.rs).

/// vLLM as the synthetic serving rows ran it: 45 µs per running sequence per step (the shipped
/// figure is 26.5 µs) and 2 ms of fixed overhead per step (the shipped estimate is 1 ms).
const TRUE_PER_SEQUENCE: f64 = 45e-6;
const TRUE_SERVING_OVERHEAD: f64 = 2e-3;

/// Serving rows (TPOT and output tokens/s) of `engine` at `batches` on one H100, made with the
/// constants above and multiplied by `1 + noise·u`, u uniform in [−1, 1].
fn serving_rows(engine: Engine, batches: &[u32], noise: f64, seed: u64) -> Vec<Row> {
    let (hw, net) = catalog_system("h100").unwrap();
    let mut truth = hw.clone();
    set(
        &mut truth,
        &["step_overhead_s", "per_sequence_s"],
        &[TRUE_SERVING_OVERHEAD, TRUE_PER_SEQUENCE],
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut rows = Vec::new();
    for (model, input) in [("llama2-7b", 512), ("llama2-13b", 1024)] {
        for &batch in batches {
            let w = Arc::new(Workload::Serve {
                model: catalog_model(model).unwrap(),
                hw: hw.clone(),
                net,
                serving: Serving {
                    tp: 1,
                    pp: 1,
                    replicas: 1,
                    weights: crate::infer::WeightFormat::Bf16,
                    kv: crate::infer::KvFormat::Bf16,
                    engine,
                    memory_fraction: None,
                },
                requests: Requests {
                    input,
                    output: 256,
                    beams: 1,
                },
                batch,
            });
            for q in [Quantity::TpotS, Quantity::TokensPerS] {
                let v = predict(&w, &truth, q) * (1.0 + noise * (2.0 * rng.random::<f64>() - 1.0));
                rows.push(Row {
                    origin: format!("{} {model} batch {batch}", engine.name()),
                    workload: w.clone(),
                    quantity: q,
                    measured: v,
                });
            }
        }
    }
    rows
}

fn fit_only(names: &[&str]) -> Request {
    Request {
        constants: Some(names.iter().map(|n| n.to_string()).collect()),
    }
}

const BATCHES: [u32; 6] = [8, 16, 32, 64, 128, 256];

#[test]
fn serving_rows_at_several_batches_give_back_the_engines_host_time() {
    let rows = serving_rows(Engine::Vllm, &BATCHES, 0.005, 11);
    // With the overhead held at the truth, the host time alone; then both together.
    let held: Vec<Row> = {
        let mut hw = rows[0].workload.hardware().clone();
        hw.tuning.step_overhead = Some(Seconds(TRUE_SERVING_OVERHEAD));
        rows.iter()
            .map(|r| {
                let Workload::Serve {
                    model,
                    net,
                    serving,
                    requests,
                    batch,
                    ..
                } = &*r.workload
                else {
                    unreachable!("serving rows")
                };
                Row {
                    workload: Arc::new(Workload::Serve {
                        model: model.clone(),
                        hw: hw.clone(),
                        net: *net,
                        serving: *serving,
                        requests: *requests,
                        batch: *batch,
                    }),
                    ..r.clone()
                }
            })
            .collect()
    };
    for (rows, names) in [
        (&held, &["per_sequence_s"][..]),
        (&rows, &["step_overhead_s", "per_sequence_s"][..]),
    ] {
        let c = calibrate(rows, &fit_only(names), "serve.csv").unwrap();
        let k = c
            .constants
            .iter()
            .find(|k| k.name == "per_sequence_s")
            .unwrap();
        // The fit starts at vLLM's shipped figure, and finds the rows' own.
        assert_eq!(k.prior, crate::infer::engine::VLLM_PER_SEQUENCE_S);
        assert!(k.standard_error > 0.0 && k.standard_error < 0.1 * TRUE_PER_SEQUENCE);
        assert!(
            (k.value - TRUE_PER_SEQUENCE).abs() <= 3.0 * k.standard_error,
            "{names:?}: {} ± {}, made with {TRUE_PER_SEQUENCE}",
            k.value,
            k.standard_error
        );
        assert_eq!(c.engine, Some(Engine::Vllm));
        if let Some((v, se)) = value(&c, "step_overhead_s") {
            assert!((v - TRUE_SERVING_OVERHEAD).abs() <= 3.0 * se, "{v} ± {se}");
        }
        let tpot = c
            .quantities
            .iter()
            .find(|q| q.quantity == Quantity::TpotS)
            .unwrap();
        assert!(tpot.mean_abs_after < 0.005, "{tpot:?}");
    }
}

#[test]
fn one_batch_cannot_tell_host_time_from_step_overhead() {
    let rows = serving_rows(Engine::Vllm, &[64], 0.005, 12);
    // Alone, with the overhead held at its prior: refused by the rows' single batch.
    let e = calibrate(&rows, &fit_only(&["per_sequence_s"]), "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot identify time per running sequence")
            && e.contains("every serving row is at batch 64"),
        "{e}"
    );
    // With the overhead: the Gram–Schmidt test finds the two columns proportional and keeps
    // the overhead, the better-known constant.
    let e = calibrate(
        &rows,
        &fit_only(&["step_overhead_s", "per_sequence_s"]),
        "x",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot identify time per running sequence")
            && e.contains("proportional to that of per-step overhead"),
        "{e}"
    );
    // Not named: listed as not fitted, the overhead fitted, no engine recorded.
    let c = calibrate(&rows, &Request::default(), "x").unwrap();
    assert!(c.not_identified.iter().any(|r| r.name == "per_sequence_s"));
    assert!(!c.constants.iter().any(|k| k.name == "per_sequence_s"));
    assert_eq!(c.engine, None);
}

#[test]
fn rows_of_two_engines_refuse_the_host_time_naming_them() {
    let mut rows = serving_rows(Engine::Vllm, &BATCHES, 0.005, 13);
    rows.extend(serving_rows(Engine::TensorrtLlm, &BATCHES, 0.005, 14));
    let e = calibrate(&rows, &fit_only(&["per_sequence_s"]), "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("different engines")
            && e.contains("vllm (vllm llama2-7b batch 8)")
            && e.contains("tensorrt-llm (tensorrt-llm llama2-7b batch 8)"),
        "{e}"
    );
    // The other constants are still fitted to both engines' rows.
    let c = calibrate(&rows, &fit_only(&["step_overhead_s"]), "x").unwrap();
    assert!(value(&c, "step_overhead_s").is_some());
}

#[test]
fn a_fitted_host_time_is_what_infer_uses() {
    let rows = serving_rows(Engine::Vllm, &BATCHES, 0.005, 15);
    let c = calibrate(&rows, &fit_only(&["per_sequence_s"]), "serve.csv").unwrap();
    let (fitted, _) = value(&c, "per_sequence_s").unwrap();
    let Workload::Serve {
        model,
        hw,
        net,
        serving,
        requests,
        ..
    } = &*rows[0].workload
    else {
        unreachable!("serving rows")
    };
    let mut hw = hw.clone();
    c.apply(&mut hw, "cal.json").unwrap();
    assert_eq!(hw.per_sequence_overhead(), Some(Seconds(fitted)));
    c.check_engine(Engine::Vllm, "cal.json").unwrap();
    let s = setup_unchecked(model, &hw, net, *serving, *requests).unwrap();
    for batch in [1, 24, 200] {
        let e = estimate(&s, &hw, net, batch);
        let want = fitted * f64::from(batch);
        assert!(
            (e.decode_host_s / want - 1.0).abs() < 1e-12,
            "{} vs {want}",
            e.decode_host_s
        );
    }
    let e = c
        .check_engine(Engine::TensorrtLlm, "cal.json")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cal.json") && e.contains("--engine vllm") && e.contains("tensorrt-llm"),
        "{e}"
    );
}
