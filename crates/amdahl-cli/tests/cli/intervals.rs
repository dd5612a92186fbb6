//! `--framework` presets and the prediction intervals of `plan` and `infer`, end to end.

use crate::support::{amdahl, json, num, refused, within, words};
use predicates::prelude::*;
use serde_json::Value;

/// SC21 Table 2's GPT-3 175B with DeepSpeed ZeRO-3 on 384 A100, as published: no model
/// parallelism, microbatch 4, batch 1536, full recomputation, fp16.
const SC21_ZERO3: &str = "plan --model gpt3-175b --system a100-80gb --gpus 384 --tp 1 --pp 1 \
     --mbs 4 --batch 1536 --recompute full --zero 3 --precision fp16";

/// The SC21 layout followed by `extra`.
fn with(extra: &[&'static str]) -> Vec<&'static str> {
    words(SC21_ZERO3)
        .into_iter()
        .chain(extra.iter().copied())
        .collect()
}

fn band(v: &Value, key: &str) -> (f64, f64, f64, String) {
    let i = &v["intervals"][key];
    (
        num(i, "value"),
        num(i, "low"),
        num(i, "high"),
        i["basis"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn the_deepspeed_preset_sets_what_the_flags_would() {
    // The preset gives DeepSpeed 2021's matrix-by-matrix gathering and its overlap_comm
    // (plan/framework.rs): the same step as the flags typed out.
    let preset = json(&with(&["--framework", "deepspeed"]));
    let flags = json(&with(&["--zero3-prefetch", "module", "--overlap"]));
    assert_eq!(preset["framework"], "deepspeed-2021");
    assert_eq!(preset["layout"]["zero3_prefetch"], "module");
    assert_eq!(preset["layout"]["overlap_dp"], true);
    within(
        num(&preset, "step_time_s"),
        num(&flags, "step_time_s"),
        1e-12,
    );
    // An explicit flag wins over the preset.
    let off = json(&with(&[
        "--framework",
        "deepspeed",
        "--overlap=false",
        "--zero3-prefetch",
        "layer",
    ]));
    assert_eq!(off["layout"]["overlap_dp"], false);
    assert_eq!(off["layout"]["zero3_prefetch"], "layer");
    // Without --framework nothing changes: Megatron-LM's defaults.
    let plain = json(&words(SC21_ZERO3));
    assert_eq!(plain["framework"], "megatron-lm");
    assert_eq!(plain["layout"]["overlap_dp"], false);
}

#[test]
fn plan_intervals_follow_the_class_and_the_direction_of_each_figure() {
    let v = json(&with(&["--framework", "deepspeed"]));
    let (step, lo, hi, basis) = band(&v, "step_time_s");
    // The class is SC21's six ZeRO-3 rows, which ran 1.4–4× slower than typed: a small class,
    // its widest error, and a band above the prediction.
    assert!(
        basis.starts_with("deepspeed-2021: 6 validation runs, the widest"),
        "{basis}"
    );
    assert!(step < lo && lo < hi, "{step} {lo} {hi}");
    assert_eq!(v["intervals"]["step_time_s"]["level"], 0.9);
    // A throughput's band is the step's, inverted: low tokens/s ↔ long steps.
    let (tok, tlo, thi, _) = band(&v, "tokens_per_s");
    assert!(thi < tok, "{tlo} {thi} {tok}");
    within(tlo * hi, tok * step, 1e-9);
    within(thi * lo, tok * step, 1e-9);
    // Training energy has no validation data: no band, and it says so.
    let e = &v["intervals"]["energy_kwh"];
    assert!(e["low"].is_null() && e["high"].is_null(), "{e}");
    assert!(e["basis"]
        .as_str()
        .unwrap_or_default()
        .contains("no validation data"));
}

#[test]
fn the_plan_table_prints_the_band_and_its_class() {
    amdahl()
        .args(with(&["--framework", "megatron-lm"]))
        .assert()
        .success()
        .stdout(
            predicate::str::contains("(90 %: ")
                .and(predicate::str::contains(
                    "megatron-lm × Ampere × fp16: 16 validation runs, split conformal",
                ))
                .and(predicate::str::contains("(no validation data)")),
        );
}

#[test]
fn infer_intervals_and_tpot_without_data() {
    let v = json(&[
        "infer",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--batch",
        "64",
    ]);
    let (tput, lo, hi, basis) = band(&v, "output_tokens_per_s");
    assert!(lo < tput && tput < hi, "{lo} {tput} {hi}");
    assert!(basis.starts_with("serving throughput × Hopper"), "{basis}");
    let (_, elo, ehi, ebasis) = band(&v, "energy_per_token_j");
    assert!(elo < ehi && ebasis.contains("held out"), "{ebasis}");
    let t = &v["intervals"]["tpot_s"];
    assert!(t["low"].is_null(), "{t}");
    assert!(t["basis"]
        .as_str()
        .unwrap_or_default()
        .contains("no validation data"));
    // The figures themselves are where they were.
    assert_eq!(num(&v["intervals"]["ttft_s"], "value"), num(&v, "ttft_s"));
}

#[test]
fn an_unknown_framework_is_a_usage_error_naming_the_presets() {
    let e = refused(&with(&["--framework", "torch"]));
    assert!(
        e.contains("megatron-lm") && e.contains("deepspeed-2021") && e.contains("fsdp"),
        "{e}"
    );
    let e = refused(&with(&["--overlap=maybe"]));
    assert!(e.contains("--overlap"), "{e}");
}
