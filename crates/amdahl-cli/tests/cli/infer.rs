//! `amdahl infer` end to end: the `amdahl.infer/1` JSON contract, `--rate`, `--search` and bad
//! input (exit 1 with an actionable message; exit 2 for usage errors).

use crate::support::{amdahl, json, json_and_svg, refused, words};
use predicates::prelude::*;

const L70: [&str; 13] = [
    "infer",
    "--model",
    "llama3-70b",
    "--system",
    "h100",
    "--tp",
    "4",
    "--precision",
    "fp8",
    "--input",
    "1024",
    "--output",
    "256",
];

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn json_contract_has_the_fields_lifetime_reads() {
    let v = json(
        &[
            &L70[..],
            &["--batch", "64", "--region", "FR", "--pue", "1.2"],
        ]
        .concat(),
    );
    assert_eq!(v["schema"], "amdahl.infer/1");
    for k in [
        "ttft_s",
        "tpot_s",
        "output_tokens_per_s",
        "requests_per_s",
        "max_batch",
        "batch",
        "memory_per_gpu_bytes",
        "power_per_gpu_w",
        "energy_per_token_j",
        "energy_per_request_j",
        "pue",
        "grid_g_per_kwh",
        "co2e_per_1000_requests_g",
        "mfu",
        "mbu",
        "gpus",
        "tp",
        "pp",
        "input_tokens",
        "output_tokens",
    ] {
        assert!(v[k].is_number(), "{k}: {}", v[k]);
    }
    assert_eq!(v["precision"], "fp8");
    assert_eq!(v["kv_precision"], "bf16");
    assert_eq!(v["batch"], 64);
    assert_eq!(v["gpus"], 4);
    // CO2e per 1,000 requests = 1000 × J/request × PUE / 3.6 MJ/kWh × g/kWh (FR grid).
    let want = 1000.0 * f(&v, "energy_per_request_j") * 1.2 / 3.6e6 * f(&v, "grid_g_per_kwh");
    assert!((f(&v, "co2e_per_1000_requests_g") / want - 1.0).abs() < 1e-9);
    assert_eq!(f(&v, "pue"), 1.2);
    // Energy per request = energy per token × output tokens.
    assert!(
        (f(&v, "energy_per_request_j") / (256.0 * f(&v, "energy_per_token_j")) - 1.0).abs() < 1e-9
    );
    // A memory-bound decode is not charged the TDP.
    assert!(f(&v, "power_per_gpu_w") < 700.0 && f(&v, "power_per_gpu_w") > 87.5);
    assert_eq!(v["tp_scaling"].as_array().map(Vec::len), Some(4));
    assert_eq!(v["precision_whatif"].as_array().map(Vec::len), Some(4));
}

#[test]
fn default_pue_and_grid_are_carbons() {
    // No --pue / --region: the one default every command uses (amdahl_model::carbon::defaults):
    // PUE `local` = 1.0 and the `world` grid, the same figures `amdahl carbon` prints.
    let v = json(&L70);
    let c = json(&["carbon", "--device", "h100", "--count", "1", "--hours", "1"]);
    assert_eq!(f(&v, "pue"), 1.0);
    assert_eq!(f(&v, "pue"), f(&c["pue"], "value"));
    assert_eq!(f(&v, "grid_g_per_kwh"), f(&c["intensity"], "g_per_kwh"));
    assert_eq!(v["batch_choice"]["kind"], "max_load");
    assert_eq!(v["batch"], v["max_batch"]);
}

#[test]
fn rate_picks_the_smallest_batch_that_sustains_it() {
    let v = json(&[&L70[..], &["--rate", "5"]].concat());
    let b = v["batch"].as_u64().unwrap_or(0);
    assert!(f(&v, "requests_per_s") >= 5.0 && b >= 1);
    let below = json(&[&L70[..], &["--batch", &(b - 1).max(1).to_string()]].concat());
    assert!(b == 1 || f(&below, "requests_per_s") < 5.0);
    amdahl()
        .args(L70)
        .args(["--rate", "1e6"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("at most").and(predicate::str::contains("requests/s")));
}

#[test]
fn search_emits_its_own_schema_with_a_pareto_front() {
    let v = json(&words(
        "infer --model llama3-8b --system h100 --search --max-tpot-ms 30 --search-max-batch 64",
    ));
    assert_eq!(v["schema"], "amdahl.infer-search/1");
    assert!(v["evaluated"].as_u64().unwrap_or(0) > 100);
    let front = v["pareto"].as_array().cloned().unwrap_or_default();
    assert!(!front.is_empty());
    // Along the front TPOT rises and energy per token falls.
    for w in front.windows(2) {
        assert!(f(&w[0], "tpot_s") <= f(&w[1], "tpot_s"));
        assert!(f(&w[0], "energy_per_token_j") > f(&w[1], "energy_per_token_j"));
    }
    for c in v["ranked"].as_array().cloned().unwrap_or_default() {
        assert!(f(&c, "tpot_s") <= 0.030);
    }
}

#[test]
fn table_csv_and_svg() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let svg = dir.path().join("infer.svg");
    amdahl()
        .args(L70)
        .args(["--batch", "8", "--svg"])
        .arg(&svg)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("time per output token").and(predicate::str::contains("Végh")),
        );
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(text.starts_with("<svg") || text.contains("<svg"), "{text}");
    amdahl()
        .args(L70)
        .args(["--batch", "8", "--csv"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("model,system,precision"));
}

#[test]
fn bad_input_is_refused_with_the_fix() {
    let cases: &[(&[&str], &str)] = &[
        (&["--batch", "0"], "--batch must be at least 1"),
        (&["--batch", "100000"], "at most"),
        (&["--tp", "3"], "nearest valid --tp"),
        (&["--rate", "-1"], "--rate must be a positive"),
        (&["--gpus", "6"], "nearest valid --gpus"),
        (&["--max-tpot-ms", "10"], "add --search"),
    ];
    // Each case adds its flag to the model and device; --tp 4 unless the case sets --tp.
    let base = [
        "infer",
        "--model",
        "llama3-70b",
        "--system",
        "h100",
        "--precision",
        "fp8",
    ];
    for (extra, msg) in cases {
        let tp: &[&str] = if extra.contains(&"--tp") {
            &[]
        } else {
            &["--tp", "4"]
        };
        amdahl()
            .args(base)
            .args(tp)
            .args(*extra)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(*msg));
    }
    // Lengths.
    for (extra, msg) in [
        (
            ["--input", "512", "--output", "0"],
            "--output must be a whole number",
        ),
        (
            ["--input", "0", "--output", "8"],
            "--input must be a whole number",
        ),
        (
            ["--input", "130000", "--output", "2000"],
            "beyond the 131072-token context",
        ),
    ] {
        amdahl()
            .args(base)
            .args(["--tp", "4"])
            .args(extra)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(msg));
    }
    // Nothing fits: the message names the memory needed.
    amdahl()
        .args([
            "infer",
            "--model",
            "llama-405b",
            "--system",
            "h100",
            "--tp",
            "2",
        ])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("GiB per device")
                .and(predicate::str::contains("--precision fp8 or int4")),
        );
    // fp8 on a device without fp8 is weight-only, and says so.
    let v = json(&words(
        "infer --model llama3-8b --system a100-80gb --precision fp8 --batch 4",
    ));
    assert_eq!(v["arithmetic"], "bf16 (fp8 weight-only)");
    // TP that neither divides nor is a multiple of the KV heads (llama2-70b: 64 heads, 8 KV).
    amdahl()
        .args([
            "infer",
            "--layers",
            "4",
            "--hidden",
            "1536",
            "--heads",
            "12",
            "--kv-heads",
            "3",
            "--seq",
            "2048",
            "--vocab",
            "1000",
            "--tp",
            "2",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("replicated"));
    // Usage errors exit 2.
    refused(&[&L70[..], &["--precision", "fp4"]].concat());
    refused(&[&L70[..], &["--batch", "4", "--rate", "2"]].concat());
}

/// The server (wall) scope: the catalog's DGX H100 for an H100 by default, `--server` and
/// `--host-w` to change it; a server of another device, or of another size, is refused.
#[test]
fn server_scope_beside_the_gpu_scope() {
    let base = words("infer --model llama3-8b --system h100 --batch 8 --input 212 --output 389");
    let v = json(&base);
    let gpu = f(&v, "power_per_gpu_w");
    let wall = f(&v, "power_per_gpu_server_w");
    // DGX H100 (data/servers.csv): (10,200 W × 0.96 − 8 × 700 W) × 0.5 / 8 = 262 W of host per
    // GPU, then ÷ 0.96 for the power supplies.
    assert_eq!(v["server"]["name"], "DGX H100");
    assert!((f(&v["server"], "host_w_per_gpu") - 262.0).abs() < 1e-9);
    assert!(
        (wall - (gpu + 262.0) / 0.96).abs() < 1e-6,
        "{wall} vs {gpu}"
    );
    let ratio = f(&v, "energy_per_token_server_j") / f(&v, "energy_per_token_j");
    assert!((ratio - wall / gpu).abs() < 1e-9);
    // A measured host replaces the estimate: 1,600 W for the 8-GPU server = 200 W per GPU.
    let g = json(&[&base[..], &["--host-w", "1600"]].concat());
    assert_eq!(g["server"]["estimated"], false);
    assert!((f(&g, "power_per_gpu_server_w") - (gpu + 200.0) / 0.96).abs() < 1e-6);
    // No server known for the device: the server fields are absent, the GPU scope stays.
    let m = json(&words("infer --model llama3-8b --system mi300x --batch 8"));
    assert!(m["power_per_gpu_server_w"].is_null() && m["energy_per_token_j"].is_f64());
    for (extra, msg) in [
        (
            "--server dgx-b200",
            "the DGX B200 holds 8 × B200 SXM 180GB, not the H100 SXM5 80GB of --system; give --system b200, or --server dgx-h100",
        ),
        ("--server dgx-h10", "did you mean dgx-h100"),
        ("--server dgx-h100 --gpus-per-node 4", "give --gpus-per-node 8"),
    ] {
        amdahl()
            .args(&base)
            .args(extra.split(' '))
            .assert()
            .code(1)
            .stderr(predicate::str::contains(msg));
    }
    assert!(refused(&["infer", "--model", "llama3-8b", "--host-w=-5"]).contains("--host-w"));
}

/// `--power-cap`: the compute clock falls until the device draws the cap; the memory-bound decode
/// holds its speed, the compute-bound prefill slows (crate::power::capped_clock). Llama-3-70B fp8
/// on 4 × H100, batch 64, at 250 W: when caps were added (energy per FLOP ∝ clock²), TTFT
/// 64.9 → 93.3 ms and 0.911 → 0.557 J per output token; since Hopper's energy per FLOP holds at
/// any clock (crate::power::CLOCK_ENERGY_EXPONENT, fitted on MLPerf's H200 MaxQ pairs,
/// 2026-12-08), TTFT 65.0 → 115.3 ms and 0.899 → 0.648 J.
#[test]
fn a_power_cap_trades_prefill_time_for_energy() {
    let base = [&L70[..], &["--batch", "64"]].concat();
    let free = json(&base);
    let capped = json(&[&base[..], &["--power-cap", "250"]].concat());
    assert!(free["power_cap_w"].is_null());
    assert_eq!(capped["power_cap_w"], 250.0);
    assert!(f(&capped, "power_per_gpu_w") <= 250.0 + 1e-9);
    assert!(f(&capped, "power_decode_w") <= 250.0 + 1e-9);
    // Decode is memory-bound: its time holds; the prefill's compute stretches.
    assert!((f(&capped, "tpot_s") / f(&free, "tpot_s") - 1.0).abs() < 1e-9);
    assert!(f(&capped, "ttft_s") > 1.7 * f(&free, "ttft_s"));
    assert!(f(&capped, "output_tokens_per_s") < f(&free, "output_tokens_per_s"));
    assert!(f(&capped, "energy_per_token_j") < 0.75 * f(&free, "energy_per_token_j"));
    // The TDP itself is no cap.
    let at_tdp = json(&[&base[..], &["--power-cap", "700"]].concat());
    assert!(at_tdp["power_cap_w"].is_null());
    // A cap the decode's memory traffic cannot meet at any clock is refused, not reported as
    // power held at the cap.
    amdahl()
        .args(&base)
        .args(["--power-cap", "120"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "below what the decode draws at the lowest clock",
        ));
    // Out of range, and the search's caps without --search.
    for cap in ["50", "800"] {
        amdahl()
            .args(&base)
            .args(["--power-cap", cap])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "outside the H100 SXM5 80GB's range: above its idle power (88 W",
            ));
    }
    amdahl()
        .args(&base)
        .args(["--search-power-cap", "300"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--search-power-cap applies to --search",
        ));
}

/// `--search --search-power-cap`: every configuration under every cap; the energy-optimal cap
/// is printed and each candidate carries its cap in the JSON.
#[test]
fn the_search_finds_the_energy_optimal_cap() {
    let args = words(
        "infer --search --model llama3-8b --system h100 --gpus 1 --input 512 --output 256 \
         --max-tpot-ms 20 --search-power-cap 300,500,700",
    );
    let v = json(&args);
    let ranked = v["ranked"].as_array().unwrap();
    assert!(ranked.iter().all(|c| c["power_cap_w"].is_f64()), "{v}");
    let best = &ranked[0];
    // No capped candidate beats the best on energy per token, and it meets the TPOT limit.
    assert!(f(best, "tpot_s") <= 0.020);
    let out = amdahl().args(&args).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains(&format!(
            "energy-optimal power cap within the limits: {:.0} W per GPU",
            f(best, "power_cap_w")
        )),
        "{text}"
    );
    amdahl()
        .args(&args[..args.len() - 1])
        .arg("300,900")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--search-power-cap 900 W is outside",
        ));
}

/// NVFP4 on a B200 is native fp4 arithmetic (twice the fp8 peak) and 0.5625 bytes per weight;
/// on an H100 it is weight-only.
#[test]
fn fp4_serves_natively_on_blackwell() {
    let v = json(&words(
        "infer --model llama3-70b --system b200 --tp 2 --precision fp4 --input 1024 --output 256 --batch 64",
    ));
    assert_eq!(v["arithmetic"], "fp4 (native)");
    let fp8 = json(&words(
        "infer --model llama3-70b --system b200 --tp 2 --precision fp8 --input 1024 --output 256 --batch 64",
    ));
    assert!(f(&v, "ttft_s") < f(&fp8, "ttft_s"));
    // Weights: the 80 layers' 68.45 B parameters at 0.5625 bytes against fp8's 1, and in both
    // the 2.10 B of the embedding and LM head at 16 bits: (38.50 + 4.20) / (68.45 + 4.20).
    let w = |v: &serde_json::Value| v["memory"]["weights"].as_f64().unwrap();
    let layers = 80.0 * (8192.0 * (8192.0 + 2048.0) + 8192.0 * 8192.0 + 3.0 * 8192.0 * 28672.0);
    let heads = 2.0 * 128256.0 * 8192.0;
    let want = (layers * 0.5625 + heads * 2.0) / (layers + heads * 2.0);
    assert!(
        (w(&v) / w(&fp8) - want).abs() < 1e-6,
        "{} {}",
        w(&v),
        w(&fp8)
    );
    let h = json(&words(
        "infer --model llama3-8b --system h100 --precision fp4 --batch 8",
    ));
    assert_eq!(h["arithmetic"], "bf16 (fp4 weight-only)");
}

/// `--beams k`: every beam is a sequence of its own in each decode step, the prompt is prefilled
/// once and its KV shared: KV = batch × (input + k × output) tokens; one output per request.
#[test]
fn beam_search_decodes_every_beam_and_shares_the_prompt() {
    let base = words("infer --model llama3-8b --system h100 --batch 16 --input 512 --output 128");
    let one = json(&base);
    let four = json(&[&base[..], &["--beams", "4"]].concat());
    let kv = |v: &serde_json::Value| v["memory"]["kv_cache"].as_f64().unwrap();
    // (512 + 4 × 128) / (512 + 128) = 1.6.
    assert!((kv(&four) / kv(&one) - 1.6).abs() < 1e-9);
    assert!(f(&four, "tpot_s") > f(&one, "tpot_s"));
    assert!(f(&four, "energy_per_token_j") > f(&one, "energy_per_token_j"));
    assert!(four["max_batch"].as_u64() < one["max_batch"].as_u64());
    // The prefill is the same: one per request, beams fork after it.
    assert!((f(&four, "ttft_s") / f(&one, "ttft_s") - 1.0).abs() < 1e-9);
    amdahl()
        .args(&base)
        .args(["--beams", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--beams must be a whole number"));
}

/// Regression: inputs no device has, or that a catalogued model would silently ignore,
/// are usage errors (exit 2) that say what to give instead. Before: `--tdp-w 1e-9` printed
/// 2.4e-13 J/token, `--tdp-w 1e308` `inf J` with exit 0, and `--hidden` beside `--model` was
/// dropped without a word.
#[test]
fn absurd_power_and_ignored_shape_flags_are_refused() {
    for tdp in ["1e-9", "1e308", "0", "inf"] {
        let e = refused(&[&L70[..], &["--tdp-w", tdp]].concat());
        assert!(e.contains("--tdp-w"), "{tdp}: {e}");
    }
    let e = refused(&[&L70[..], &["--tdp-w", "1e-9"]].concat());
    assert!(e.contains("between 0.5 and 30000"), "{e}");
    for (flag, value) in [
        ("--hidden", "100"),
        ("--heads", "8"),
        ("--kv-heads", "2"),
        ("--ffn", "4096"),
        ("--vocab", "1000"),
    ] {
        let e = refused(&[&L70[..], &[flag, value]].concat());
        assert!(e.contains(flag) && e.contains("--model"), "{flag}: {e}");
        let e = refused(&["infer", "--model-file", "m.json", flag, value]);
        assert!(e.contains("--model-file"), "{flag}: {e}");
    }
    // A catalogued model's --seq is still the run's choice (it overrides).
    let v = json(&words(
        "infer --model llama3-8b --system h100 --seq 4096 --batch 1",
    ));
    assert_eq!(v["model"]["seq"], 4096, "{}", v["model"]);
    // A TDP a device can have still works (700 W is the H100 SXM's; NVIDIA data sheet).
    let v = json(&words(
        "infer --model llama3-8b --system h100 --tdp-w 700 --batch 1",
    ));
    assert!(f(&v, "energy_per_token_j") > 0.0);
}

/// The search figure's points said nothing of which configuration they were: each of the best
/// configurations is named by TP, precision and batch, beside its point or, without room,
/// under the figure.
#[test]
fn search_figure_names_its_points() {
    let (v, text) = json_and_svg(&words(
        "infer --model llama3-8b --system h100 --search --max-tpot-ms 30 --search-max-batch 64 --json",
    ));
    let ranked = v["ranked"].as_array().cloned().unwrap_or_default();
    assert!(!ranked.is_empty());
    for c in ranked.iter().take(6) {
        let name = format!(
            "tp{} {} B{}",
            c["tp"],
            c["precision"].as_str().unwrap_or("?"),
            c["batch"]
        );
        assert!(text.contains(&name), "`{name}` not in the figure");
    }
}

#[test]
fn vllm_adds_its_time_per_running_sequence() {
    // The same configuration under TensorRT-LLM (the default) and vLLM: vLLM's decode step is
    // longer by exactly 26.5 µs per running sequence (crate::infer::engine, fitted on
    // ML.ENERGY's vLLM 0.11 runs), every other term unchanged.
    let base = words("infer --model llama3-8b --system h100 --input 212 --output 397 --batch 256");
    let trt = json(&base);
    let vllm = json(&[&base[..], &["--engine", "vllm"]].concat());
    assert_eq!(trt["engine"], "tensorrt-llm");
    assert_eq!(vllm["engine"], "vllm");
    assert_eq!(f(&trt["decode"], "engine_host_s"), 0.0);
    let host = f(&vllm["decode"], "engine_host_s");
    assert!((host - 256.0 * 26.5e-6).abs() < 1e-12, "{host}");
    let step = |v: &serde_json::Value| f(v, "tpot_s");
    assert!(
        (step(&vllm) - step(&trt) - host).abs() < 1e-12,
        "{} {}",
        step(&vllm),
        step(&trt)
    );
    assert_eq!(
        f(&vllm["decode"], "compute_s") + f(&vllm["decode"], "memory_s"),
        f(&trt["decode"], "compute_s") + f(&trt["decode"], "memory_s")
    );
    // Slower, and the per-sequence time (memory-bound GPU work) costs energy per token too.
    assert!(f(&vllm, "output_tokens_per_s") < f(&trt, "output_tokens_per_s"));
    assert!(f(&vllm, "energy_per_token_j") > f(&trt, "energy_per_token_j"));
    // Its traffic counts for power only: MBU is the model's bytes over the longer step.
    let ratio = f(&vllm, "mbu") / f(&trt, "mbu");
    assert!((ratio - step(&trt) / step(&vllm)).abs() < 1e-9, "{ratio}");
    // The table says where the time went.
    amdahl()
        .args([&base[..], &["--engine", "vllm"]].concat())
        .assert()
        .success()
        .stdout(predicate::str::contains("+ vllm per-sequence 6.78"));
    // An engine amdahl does not know is a usage error naming the ones it does.
    let e = refused(&[&base[..], &["--engine", "tgi"]].concat());
    assert!(e.contains("tensorrt-llm") && e.contains("vllm"), "{e}");
}

/// Llama-3.1-405B on 8 × B200 (212 + 362 tokens, ML.ENERGY's chat runs, which vLLM served at
/// batch 2,048) at batch 2,400: reserving each request's whole length, as TensorRT-LLM does, fits
/// 2,221 even with 90 % of the memory the weights leave; vLLM holds what it has generated, on
/// average half the output, and fits 2,840. The refusal says so.
#[test]
fn the_kv_cache_a_sequence_holds_follows_the_engine() {
    let base =
        "infer --model llama-405b --system b200 --tp 8 --input 212 --output 362 --batch 2400";
    let out = amdahl().args(words(base)).assert().code(1);
    let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(e.contains("at most 2221 concurrent sequences fit"), "{e}");
    assert!(
        e.contains("--engine vllm or sglang hold only what has been generated"),
        "{e}"
    );
    let v = json(&words(&format!("{base} --engine vllm")));
    assert_eq!(v["max_batch"], 2840);
    // 393 tokens held (212 + 362 / 2) at 64.5 KiB per token per device (126 layers × 1 KV
    // head × 128 × 2 × 2 bytes of bf16 per device at TP 8).
    let kv = v["memory"]["kv_per_sequence"].as_f64().unwrap();
    assert!((kv - 393.0 * 126.0 * 128.0 * 4.0).abs() < 1.0, "{kv}");
}

/// `--gpu-memory-fraction` is each engine's own knob, 0.9 by default: vLLM's
/// `gpu_memory_utilization` and SGLang's `mem_fraction_static` are shares of all the memory,
/// TensorRT-LLM's `free_gpu_memory_fraction` a share of what the weights and activation buffers
/// leave (MLPerf's `kvcache_free_gpu_mem_frac`, 0.97 on HPE's H100 run). A share outside
/// (0, 1] is a usage error.
#[test]
fn the_memory_fraction_is_each_engines_own() {
    let base = "infer --model llama2-70b --system h100 --tp 2 --precision fp8 --kv-precision fp8 \
                --input 294 --output 294";
    let memory = |extra: &str| json(&words(&format!("{base} {extra}")))["memory"].clone();
    for (extra, share) in [
        ("--engine vllm", 0.9),
        ("--engine vllm --gpu-memory-fraction 0.95", 0.95),
        ("--engine sglang --gpu-memory-fraction 0.8", 0.8),
    ] {
        let m = memory(extra);
        let want = share * f(&m, "capacity");
        assert!((f(&m, "usable") / want - 1.0).abs() < 1e-12, "{extra}: {m}");
    }
    // TensorRT-LLM: what is not usable is (1 − share) of what the weights leave, so 0.97 leaves
    // 0.3 × what 0.9 does, and more sequences fit.
    let (default, hpe) = (memory(""), memory("--gpu-memory-fraction 0.97"));
    let spare = |m: &serde_json::Value| f(m, "capacity") - f(m, "usable");
    assert!((spare(&hpe) / spare(&default) - 0.3).abs() < 1e-9);
    let batch = |extra: &str| f(&json(&words(&format!("{base} {extra}"))), "max_batch");
    assert!(batch("--gpu-memory-fraction 0.97") > batch(""));
    for bad in ["0", "1.2", "-0.5", "nan", "abc"] {
        let e = refused(&words(&format!("{base} --gpu-memory-fraction {bad}")));
        assert!(e.contains("--gpu-memory-fraction"), "{bad}: {e}");
    }
}
