//! `amdahl plan` for mixtures of experts and its shape flags (`--ep`, `--experts`,
//! `--top-k`, `--head-dim`, `--parallel-block`, `--tied-embeddings`): published parameter
//! counts, expert parallelism's effect, and bad input (exit 1 or 2, naming the constraint).

use crate::support::{amdahl, json, num, within, words};
use predicates::prelude::*;

fn mixtral(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "plan",
        "--model",
        "mixtral-8x7b",
        "--seq",
        "4096",
        "--system",
        "h100",
        "--gpus",
        "64",
        "--batch",
        "256",
        "--recompute",
        "full",
        "--zero",
        "1",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

#[test]
fn mixtral_counts_47b_parameters_and_13b_active() {
    // Jiang et al. 2024 / Mistral AI model card: 46.7B total, 12.9B active. Tolerance 1 %.
    let v = mixtral(&["--ep", "8"]);
    within(num(&v, "parameters"), 46.7e9, 0.01);
    within(num(&v, "active_parameters"), 12.9e9, 0.01);
    assert_eq!(v["layout"]["ep"], 8);
    // --seq overrides the catalog's 32k context (it used to be ignored with --model).
    assert_eq!(v["model"]["seq"], 4096);
    assert_eq!(v["model"]["moe"]["experts"], 8);
    assert_eq!(v["model"]["moe"]["top_k"], 2);
    assert!(num(&v["breakdown"], "ep_comm") > 0.0);
}

#[test]
fn expert_parallelism_shards_expert_weights_and_adds_all_to_all() {
    let one = mixtral(&[]);
    let eight = mixtral(&["--ep", "8"]);
    // Experts are 45.1B of 46.7B weights: EP 8 keeps 1/8 of them per device.
    let (w1, w8) = (
        num(&one["memory"], "weights"),
        num(&eight["memory"], "weights"),
    );
    within(w8 / w1, (46.7 - 45.1 * 7.0 / 8.0) / 46.7, 0.02);
    assert_eq!(num(&one["breakdown"], "ep_comm"), 0.0);
    // The same arithmetic: model FLOPs and MFU's numerator do not depend on the layout.
    within(
        num(&one, "model_tflops_per_gpu") * num(&one, "step_time_s"),
        num(&eight, "model_tflops_per_gpu") * num(&eight, "step_time_s"),
        1e-9,
    );
}

#[test]
fn llama3_8b_is_untied_and_the_flag_overrides_it() {
    // Regression: the planner counted 7.50B, the catalog (Llama Team 2024, Table 3) says 8.03B.
    let base = [
        "plan",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--batch",
        "64",
        "--zero",
        "1",
    ];
    let untied = json(&base);
    within(num(&untied, "parameters"), 8.03e9, 0.005);
    let mut tied_args = base.to_vec();
    tied_args.extend(["--tied-embeddings", "true"]);
    let tied = json(&tied_args);
    assert_eq!(
        num(&untied, "parameters") - num(&tied, "parameters"),
        128256.0 * 4096.0
    );
    // FLOPs were right all along (the logit GEMM was counted): same model TFLOP·s.
    within(
        num(&untied, "model_tflops_per_gpu") * num(&untied, "step_time_s"),
        num(&tied, "model_tflops_per_gpu") * num(&tied, "step_time_s"),
        1e-9,
    );
}

#[test]
fn experts_flag_turns_a_dense_model_into_a_mixture() {
    let v = json(&words("plan --model llama3-8b --experts 16 --top-k 2 --gpus 64 --ep 16 --batch 128 --recompute full --zero 1 --flash"));
    // 32 layers × 16 experts × 3 × 4096 × 14336 + the rest of Llama-3-8B.
    let experts = 32.0 * 16.0 * 3.0 * 4096.0 * 14336.0;
    let dense_mlp = 32.0 * 3.0 * 4096.0 * 14336.0;
    let routers = 32.0 * 4096.0 * 16.0;
    within(
        num(&v, "parameters"),
        8.03e9 - dense_mlp + experts + routers,
        0.005,
    );
    assert_eq!(v["layout"]["ep"], 16);
}

#[test]
fn head_dim_and_parallel_block_flags_reach_the_model() {
    let v = json(&words(
        "plan --model gpt3-13b --gpus 8 --tp 4 --batch 32 --head-dim 64 --parallel-block",
    ));
    assert_eq!(v["model"]["head_dim"], 64);
    assert_eq!(v["model"]["parallel_block"], true);
}

#[test]
fn bad_expert_input_names_the_constraint_and_nearest_values() {
    let deepseek = [
        "plan",
        "--model",
        "deepseek-v3",
        "--system",
        "h800",
        "--gpus",
        "2048",
        "--tp",
        "8",
        "--batch",
        "15360",
    ];
    amdahl()
        .args(deepseek)
        .args(["--ep", "48"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--ep 48 does not divide the 256 experts; nearest valid --ep (dividing the experts and --dp): 32 or 64",
        ));
    amdahl()
        .args([
            "plan",
            "--model",
            "mixtral-8x7b",
            "--gpus",
            "12",
            "--ep",
            "8",
            "--batch",
            "12",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--ep 8 does not divide the data-parallel size --dp 12",
        ))
        .stderr(predicate::str::contains("nearest valid --ep: 4"));
    amdahl()
        .args([
            "plan",
            "--model",
            "mixtral-8x7b",
            "--gpus",
            "8",
            "--batch",
            "8",
            "--top-k",
            "9",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--top-k 9 routes each token to more experts than the 8 there are",
        ));
    amdahl()
        .args([
            "plan",
            "--model",
            "mixtral-8x7b",
            "--gpus",
            "8",
            "--batch",
            "8",
            "--top-k",
            "0",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--top-k"));
    amdahl()
        .args([
            "plan",
            "--model",
            "llama3-8b",
            "--gpus",
            "8",
            "--batch",
            "8",
            "--ep",
            "2",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--ep 2 needs a mixture-of-experts model",
        ));
    amdahl()
        .args([
            "plan",
            "--model",
            "llama3-8b",
            "--gpus",
            "8",
            "--batch",
            "8",
            "--top-k",
            "2",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("need --experts N"));
    amdahl()
        .args([
            "plan",
            "--model",
            "mixtral-8x7b",
            "--gpus",
            "8",
            "--batch",
            "8",
            "--capacity-factor",
            "0.5",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--capacity-factor 0.5 must be a number ≥ 1",
        ));
}

#[test]
fn search_covers_expert_parallelism() {
    let v = json(&words("plan --model mixtral-8x7b --seq 4096 --system h100 --gpus 64 --batch 256 --search --quiet --top 20"));
    let eps: Vec<u64> = v["top"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["layout"]["ep"].as_u64())
                .collect()
        })
        .unwrap_or_default();
    assert!(eps.iter().any(|&e| e > 1), "{eps:?}");
}

/// DeepSeek-V3's published layout (DeepSeek-AI 2024, §3.2: PP 16, EP 64, ZeRO-1, no TP) with
/// its recomputation (§3.2.3, §3.3.3): Megatron-Core's `--recompute-modules
/// layernorm,mla_up_proj,moe_act`.
fn deepseek_published(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "plan",
        "--model",
        "deepseek-v3",
        "--system",
        "h800",
        "--gpus",
        "2048",
        "--pp",
        "16",
        "--ep",
        "64",
        "--batch",
        "15360",
        "--zero",
        "1",
        "--flash",
        "--overlap",
        "--overlap-ep",
        "--precision",
        "fp8",
        "--optimizer-dtype",
        "bf16",
        "--fp32-grads",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn deepseek_v3_published_recomputation_fits_on_80_gb() {
    let run = |extra: &[&str]| {
        let args = deepseek_published(extra);
        json(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let published = run(&[
        "--recompute",
        "selective",
        "--recompute-modules",
        "layernorm,mla_up_proj,moe_act",
    ]);
    let core = run(&["--recompute", "selective"]);
    assert_eq!(published["fits"], true);
    assert_eq!(core["fits"], false);
    assert_eq!(
        published["layout"]["recompute_modules"],
        serde_json::json!(["layernorm", "mla_up_proj", "moe_act"])
    );
    // 56 GiB against 84.5 GiB with core attention alone, fp8 activations cached for both
    // (plan::recompute and plan::memory tests derive the bytes).
    let gib = |v: &serde_json::Value| num(&v["memory"], "total") / f64::from(1u32 << 30);
    within(gib(&published), 56.1, 0.01);
    within(gib(&core), 84.5, 0.01);
    // The up-projections are re-run: more executed FLOPs, the same model FLOPs.
    assert!(num(&published, "tflops_per_gpu") > num(&core, "tflops_per_gpu"));
    within(
        num(&published, "model_tflops_per_gpu") * num(&published, "step_time_s"),
        num(&core, "model_tflops_per_gpu") * num(&core, "step_time_s"),
        1e-9,
    );
}

#[test]
fn recompute_modules_bad_input_names_the_constraint() {
    let deepseek = deepseek_published(&[]);
    amdahl()
        .args(&deepseek)
        .args(["--recompute", "full", "--recompute-modules", "layernorm"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--recompute-modules names the parts of a selective recomputation; it needs \
             --recompute selective (got full)",
        ));
    amdahl()
        .args([
            "plan",
            "--model",
            "llama3-8b",
            "--gpus",
            "8",
            "--batch",
            "64",
            "--recompute-modules",
            "mla_up_proj",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--recompute-modules mla_up_proj: this model has no such part",
        ))
        .stderr(predicate::str::contains("multi-head latent attention"));
    amdahl()
        .args(&deepseek)
        .args(["--recompute-modules", "layernorms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid value 'layernorms'"))
        .stderr(predicate::str::contains("possible values"));
    amdahl()
        .args(&deepseek)
        .args(["--search", "--recompute-modules", "layernorm"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}
