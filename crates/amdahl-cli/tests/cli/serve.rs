//! `amdahl serve` end to end: the `amdahl.serve/1` JSON contract, the per-request CSV and its
//! energy sum, overload reporting, determinism, and bad input (exit 1 naming file, row and field;
//! exit 2 for flags).

use crate::support::{amdahl, json, refused, text};
use predicates::prelude::*;

const L8: [&str; 7] = [
    "serve",
    "--model",
    "llama3-8b",
    "--system",
    "h100",
    "--requests",
    "300",
];

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn json_contract_and_the_per_request_energies_sum_to_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let per = dir.path().join("requests.csv");
    let per_s = per.to_str().unwrap();
    let v = json(
        &[
            &L8[..],
            &[
                "--rate",
                "5",
                "--input-dist",
                "lognormal:700:0.8",
                "--output-dist",
                "uniform:50:300",
            ],
            &[
                "--slo-ttft-ms",
                "2000",
                "--slo-tpot-ms",
                "200",
                "--per-request",
                per_s,
            ],
        ]
        .concat(),
    );
    assert_eq!(v["schema"], "amdahl.serve/1");
    for k in [
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "e2e_p99_s",
        "output_tokens_per_s",
        "goodput_requests_per_s",
        "energy_per_output_token_j",
        "co2e_per_1000_requests_g",
    ] {
        assert!(v[k].is_number(), "{k}: {}", v[k]);
    }
    for k in ["mean", "p50", "p99"] {
        assert!(v["energy_per_request_j"][k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(f(&v, "ttft_p99_s") >= f(&v, "ttft_p50_s"));
    // Inter-token latency: each token's gap to the one before. Most gaps are one decode step, so
    // the median gap is no longer than the slowest requests' mean gap (TPOT p99).
    assert!(f(&v, "itl_p99_s") >= f(&v, "itl_p50_s") && f(&v, "itl_p50_s") > 0.0);
    assert!(f(&v, "itl_p50_s") <= f(&v, "tpot_p99_s"), "{v}");
    assert_eq!(v["overloaded"], false);
    // The CSV has one row per request; their joules sum to the run's iteration energy (the JSON
    // prints it to 17 significant digits, the CSV each row likewise: 1e-9 relative).
    let text = std::fs::read_to_string(&per).unwrap();
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let h = rdr.headers().unwrap().clone();
    let col = h.iter().position(|c| c == "energy_j").unwrap();
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 300);
    let sum: f64 = rows.iter().map(|r| r[col].parse::<f64>().unwrap()).sum();
    let busy = f(&v, "energy_busy_j");
    assert!((sum / busy - 1.0).abs() < 1e-9, "{sum} vs {busy}");
}

#[test]
fn the_figure_draws_the_latency_cdfs_the_queue_the_kv_cache_and_the_power() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("serve.svg");
    amdahl()
        .args(L8)
        .args(["--rate", "50", "--svg", svg.to_str().unwrap()])
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    for want in [
        "<svg",
        "latency CDF",
        "time to first token",
        "time per output token",
        "inter-token latency (of tokens)",
        "waiting",
        "KV cache over time",
        "power over time",
        // The H100's catalogued server (DGX H100) gives the wall scope beside the GPUs.
        "server (wall)",
    ] {
        assert!(text.contains(want), "{want}");
    }
}

#[test]
fn the_same_seed_gives_the_same_json_and_another_seed_does_not() {
    let run = |seed: &str| {
        let out = amdahl()
            .args(L8)
            .args([
                "--rate",
                "20",
                "--input-dist",
                "lognormal:500:1",
                "--seed",
                seed,
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
        out.stdout
    };
    assert_eq!(run("7"), run("7"));
    assert_ne!(run("7"), run("8"));
}

#[test]
fn past_capacity_it_says_the_queue_grows_and_what_the_server_sustains() {
    // Llama-3-8B on one H100, 512 + 256 tokens: infer's capacity is ~30 requests/s; 200/s is far
    // past it.
    amdahl()
        .args(L8)
        .args(["--rate", "200"])
        .assert()
        .success()
        .stdout(predicate::str::contains("OVERLOADED"))
        .stdout(predicate::str::contains("(offline)").not())
        .stdout(predicate::str::contains("grows without bound"))
        .stdout(predicate::str::contains("sustains at most"));
}

#[test]
fn a_trace_is_served_and_bad_traces_name_file_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write(
        "good.csv",
        "arrival_s,input_tokens,output_tokens\n0,100,10\n0.5,200,20\n1,300,30\n",
    );
    let v = json(&[
        "serve",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--trace",
        &good,
    ]);
    assert_eq!(v["requests"], 3);
    assert!(v["workload"].as_str().unwrap().contains("good.csv"));
    for (name, text, want) in [
        (
            "neg.csv",
            "arrival_s,input_tokens,output_tokens\n0,1,1\n-2,1,1\n",
            "row 2, field `arrival_s`",
        ),
        (
            "unsorted.csv",
            "arrival_s,input_tokens,output_tokens\n3,1,1\n1,1,1\n",
            "row 2, field `arrival_s`",
        ),
        (
            "cols.csv",
            "arrival_s,input_tokens\n0,1\n",
            "no column `output_tokens`",
        ),
        (
            "long.csv",
            "arrival_s,input_tokens,output_tokens\n0,130000,2000\n",
            "request 1: input 130000 + output 2000",
        ),
    ] {
        let p = write(name, text);
        amdahl()
            .args([
                "serve",
                "--model",
                "llama3-8b",
                "--system",
                "h100",
                "--trace",
                &p,
            ])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(name))
            .stderr(predicate::str::contains(want));
    }
}

#[test]
fn too_many_requests_is_an_error_not_an_allocation_failure() {
    amdahl()
        .args([
            "serve",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--rate",
            "1",
        ])
        .args(["--requests", "4000000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--requests must be from 1 to 1,000,000",
        ));
}

#[test]
fn more_replicas_than_gpus_is_an_error_that_says_how_many_fit() {
    amdahl()
        .args([
            "serve",
            "--model",
            "llama3-70b",
            "--system",
            "h100",
            "--tp",
            "8",
            "--gpus",
            "8",
        ])
        .args(["--replicas", "2", "--rate", "1", "--requests", "10"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "2 replicas of tp 8 × pp 1 need 16 GPUs, but --gpus is 8",
        ))
        .stderr(predicate::str::contains("--replicas 1"));
}

#[test]
fn bad_flags_are_usage_errors() {
    assert!(refused(&["serve", "--model", "llama3-8b"]).contains("--rate"));
    assert!(refused(&[&L8[..], &["--rate=0"]].concat()).contains("--rate"));
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--input-dist", "normal:5:1"]].concat())
            .contains("fixed:N")
    );
    assert!(refused(&[&L8[..], &["--rate", "1", "--trace", "x.csv"]].concat()).contains("--trace"));
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--router", "random"]].concat())
            .contains("least-loaded")
    );
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--max-num-seqs", "0"]].concat())
            .contains("--max-num-seqs")
    );
}

#[test]
fn report_shows_a_saved_run_and_carbon_from_charges_its_energy() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("serve.json");
    let out = amdahl()
        .args(L8)
        .args(["--rate", "20", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&saved, &out.stdout).unwrap();
    let html = dir.path().join("report.html");
    amdahl()
        .args([
            "report",
            saved.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ])
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Serving simulations"));
    // `carbon --from` charges the simulated run: its GPU energy (idle included), PUE and grid.
    let sim: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = json(&["carbon", "--from", saved.to_str().unwrap()]);
    let kwh = f(&sim, "energy_j") / 3.6e6;
    assert!((f(&c, "it_energy_kwh") / kwh - 1.0).abs() < 1e-9, "{c}");
    assert_eq!(c["basis"], "estimated");
}

#[test]
fn a_duration_and_named_data_sets_shape_the_workload() {
    // 20 s at 5 requests/s: Poisson, about 100 arrivals (σ = 10; 60..140), ShareGPT's published
    // means (161.31 in, 337.99 out: data/serve_datasets.csv) drawn log-normal; the table and JSON
    // name the set beside the distribution it stands for.
    let v = json(&[
        "serve",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--rate",
        "5",
        "--duration",
        "20",
        "--input-dist",
        "sharegpt",
        "--output-dist",
        "ShareGPT",
    ]);
    let n = f(&v, "requests");
    assert!((60.0..=140.0).contains(&n), "{n}");
    assert_eq!(v["input_dist"], "sharegpt (lognormal:161.31:1)");
    assert_eq!(v["output_dist"], "sharegpt (lognormal:337.99:1)");
    assert!(v["workload"].as_str().unwrap().ends_with("for 20 s"));
    // Log-normal of σ 1 around the means: the sample means of ~100 draws land within a factor
    // of 1.6 (the standard error of the mean is σ_x/√n ≈ 0.13 of the mean).
    let (i, o) = (f(&v, "mean_input_tokens"), f(&v, "mean_output_tokens"));
    assert!(
        (100.0..260.0).contains(&i) && (210.0..540.0).contains(&o),
        "{i} {o}"
    );
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--duration", "0"]].concat()).contains("--duration")
    );
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--duration", "5"]].concat()).contains("--requests")
    );
    amdahl()
        .args(&L8[..5])
        .args(["--rate", "100", "--duration", "1000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("at most 1,000,000 arrivals"));
    assert!(
        refused(&[&L8[..], &["--rate", "1", "--input-dist", "sharegtp"]].concat())
            .contains("cnn-dailymail")
    );
}

#[test]
fn search_finds_the_cheapest_configuration_and_says_when_none_fits() {
    // Llama-3-8B on up to 2 H100 at 10 requests/s, p99 TTFT ≤ 1 s: tp 1|2 × 1|2 replicas ×
    // bf16|fp8 × 64|256 sequences = 12 configurations, all of which sustain the rate.
    let base = [
        "serve",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--gpus",
        "2",
        "--rate",
        "10",
        "--requests",
        "200",
        "--search",
        "--search-max-num-seqs",
        "64,256",
        "--slo-ttft-ms",
        "1000",
    ];
    let v = json(&base);
    assert_eq!(v["schema"], "amdahl.serve-search/1");
    assert_eq!(v["evaluated"], 12);
    let best = &v["cheapest_energy"];
    assert!(f(best, "ttft_p99_s") <= 1.0);
    assert_eq!(v["fewest_gpus"]["gpus"], 1);
    let front = v["pareto"].as_array().unwrap();
    assert!(!front.is_empty());
    assert_eq!(
        front.last().unwrap()["energy_per_request_j"],
        best["energy_per_request_j"]
    );
    // 5,000 requests/s is beyond any of them: the error says the most any sustains.
    amdahl()
        .args(&base[..7])
        .args(["--rate", "5000", "--requests", "500", "--search"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no configuration sustains 5"))
        .stderr(predicate::str::contains("the most any does is"));
    // A TTFT SLO of 0.001 ms: none meets it; the closest is named.
    amdahl()
        .args(&base[..11])
        .args(["--search", "--slo-ttft-ms", "0.001"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "no configuration meets the SLOs; the closest is tp",
        ));
    assert!(refused(&[&base[..], &["--replicas", "1"]].concat()).contains("--replicas"));
}

#[test]
fn num_scheduler_steps_windows_the_batch_and_bad_values_are_usage_errors() {
    // One step per decision is the default, byte for byte; ten (vLLM 0.6's multi-step, as the
    // vLLM 0.6.0 benchmark ran) makes new prompts wait for the window's end: TTFT rises; the
    // JSON and the table say it.
    let run = |extra: &[&str]| json(&[&L8[..], &["--rate", "10"], extra].concat());
    let default = run(&[]);
    assert_eq!(default["num_scheduler_steps"], 1);
    assert_eq!(default, run(&["--num-scheduler-steps", "1"]));
    let ten = run(&["--num-scheduler-steps", "10"]);
    assert_eq!(ten["num_scheduler_steps"], 10);
    assert!(
        f(&ten, "ttft_p50_s") > 2.0 * f(&default, "ttft_p50_s"),
        "{} vs {}",
        ten["ttft_p50_s"],
        default["ttft_p50_s"]
    );
    amdahl()
        .args(L8)
        .args(["--rate", "10", "--num-scheduler-steps", "10"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "num-scheduler-steps 10 (multi-step",
        ));
    // A saved result from before the field existed still reads (serde default: 1).
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.json");
    let mut v = default.clone();
    v.as_object_mut().unwrap().remove("num_scheduler_steps");
    std::fs::write(&old, v.to_string()).unwrap();
    let html = dir.path().join("r.html");
    amdahl()
        .args([
            "report",
            old.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ])
        .assert()
        .success();
    // 0, more than 256 or not a number: usage errors that give the range.
    for bad in ["0", "257", "1e9", "ten"] {
        let e = refused(&[&L8[..], &["--rate", "1", "--num-scheduler-steps", bad]].concat());
        assert!(e.contains("from 1 to 256"), "{bad}: {e}");
    }
    // Multi-step prompts are not chunked: one longer than the token budget is refused (exit 1),
    // naming the request and the flag to raise.
    amdahl()
        .args(L8)
        .args(["--rate", "1", "--num-scheduler-steps", "8"])
        .args([
            "--max-num-batched-tokens",
            "512",
            "--input-dist",
            "fixed:600",
        ])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("request 1")
                .and(predicate::str::contains("--max-num-batched-tokens 512")),
        );
}

#[test]
fn prefill_batching_follows_the_engine_and_separate_slows_the_decodes() {
    // SGLang prefills apart by default (its loop runs a prefill batch whenever one can be formed,
    // decodes only otherwise); vLLM V1 mixes. At 20 requests/s of 512 + 256 tokens on one H100
    // the decodes wait for every prompt with `separate`, so the median TPOT is higher than with
    // the same stream mixed; the JSON and the table say which ran.
    let run = |extra: &[&str]| json(&[&L8[..], &["--rate", "20"], extra].concat());
    let vllm = run(&["--engine", "vllm"]);
    assert_eq!(vllm["prefill_batching"], "mixed");
    let sglang = run(&["--engine", "sglang"]);
    assert_eq!(sglang["prefill_batching"], "separate");
    // Each engine's own limits by default: vLLM's 1,024 sequences and 8,192 tokens on an H100;
    // SGLang's 8,192-token chunks (a device under 160 GiB) and 2,048 requests (its cache holds
    // about three of Llama 3.1's 131,072-token contexts: × 512 is under SGLang's floor).
    assert_eq!(
        (&vllm["max_num_seqs"], &vllm["max_num_batched_tokens"]),
        (&1024.into(), &8192.into())
    );
    assert_eq!(
        (&sglang["max_num_seqs"], &sglang["max_num_batched_tokens"]),
        (&2048.into(), &8192.into())
    );
    assert_eq!(
        sglang,
        run(&["--engine", "sglang", "--prefill-batching", "separate"])
    );
    let mixed = run(&["--engine", "sglang", "--prefill-batching", "mixed"]);
    assert_eq!(mixed["prefill_batching"], "mixed");
    assert!(
        f(&sglang, "tpot_p50_s") > f(&mixed, "tpot_p50_s"),
        "{} vs {}",
        sglang["tpot_p50_s"],
        mixed["tpot_p50_s"]
    );
    amdahl()
        .args(L8)
        .args(["--rate", "20", "--engine", "sglang"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "prefill-batching separate (prefill-only iterations; decodes wait)",
        ));
    // Multi-step prefills apart: asking for mixed with it is an inconsistent combination (exit
    // 1); an unknown policy is a usage error naming the valid ones (exit 2).
    amdahl()
        .args(L8)
        .args(["--rate", "1", "--num-scheduler-steps", "8"])
        .args(["--prefill-batching", "mixed"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--prefill-batching must be separate with --num-scheduler-steps above 1",
        ));
    let e = refused(&[&L8[..], &["--rate", "1", "--prefill-batching", "chunked"]].concat());
    assert!(e.contains("mixed") && e.contains("separate"), "{e}");
}

#[test]
fn rate_inf_sends_every_request_at_once_and_needs_a_finite_rate_elsewhere() {
    // An offline run (bench_serving --request-rate inf): 300 requests at t = 0, so the first
    // batch fills at once and the rest queue; the summary names it and the server is
    // overloaded by construction (every request waits at the last arrival).
    let v = json(&[&L8[..], &["--rate", "inf", "--max-num-seqs", "64"]].concat());
    assert_eq!(f(&v, "requests"), 300.0);
    assert!(v["workload"]
        .as_str()
        .unwrap()
        .starts_with("every request at t = 0"));
    assert_eq!(v["overloaded"], true);
    assert_eq!(v["offline"], true);
    // The last requests wait behind whole generations of the first: hundreds of decode steps.
    assert!(f(&v, "ttft_p99_s") > 100.0 * f(&v, "itl_p50_s"), "{v}");
    // The note says why the queue is long (not a rate too high) and how fast it emptied.
    let note = v["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("offline run: all 300 requests arrive at t = 0")
            && !note.contains("lower the rate"),
        "{note}"
    );
    // The table says the backlog is the run's design, not an overload; its offered rate is no rate.
    let out = amdahl()
        .args(&L8[..])
        .args(["--rate", "inf", "--max-num-seqs", "64"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("all 300 requests at t = 0 (offline)")
            && text.contains("backlogged by construction (offline)")
            && !text.contains("OVERLOADED"),
        "{text}"
    );
    // A request rate, a cv, a duration or a search: each needs a finite --rate.
    for (extra, says) in [
        (&["--cv", "2"][..], "--cv"),
        (&["--duration", "10"][..], "--requests"),
        (&["--search"][..], "--search"),
    ] {
        amdahl()
            .args(&L8[..5])
            .args(["--rate", "inf"])
            .args(extra)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says));
    }
    amdahl()
        .args(&L8[..5])
        .args(["--rate", "infinite"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("or inf for every request at once"));
}

#[test]
fn an_offline_run_is_measured_over_ml_energys_window_as_the_energy_set_predicts_it() {
    // The energy set's row mlenergy3-llama3.1-8b-h100-tp1-b64 (ML.ENERGY v3: 5,147 output
    // tokens/s, 610.3 W, 0.1186 J per token), typed as data/validation/energy.csv's columns
    // say: the table line and the JSON give the window's figures, and they are the set's own
    // predictions (data/validation/energy-predictions.json): the throughput exactly, the power
    // and energy to 0.01 % (the run averages each iteration's power, the set's fit takes the power
    // of the window's mean activity; 0.004 % apart here, where no iteration reaches the TDP).
    let row = [
        "serve",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--engine",
        "vllm",
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "8192",
        "--rate",
        "inf",
        "--requests",
        "1024",
        "--input-dist",
        "lognormal:212:1",
        "--output-dist",
        "lognormal:395.5:1:4096",
    ];
    amdahl()
        .args(row)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "steady state (ML.ENERGY's window)  5573 output tokens/s, 578.1 W per GPU, 0.104 J",
        ));
    let v = json(&row);
    let w = &v["steady_state"];
    let set: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../data/validation/energy-predictions.json"
    ))
    .unwrap();
    let predicted = |id: &str| {
        set["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()["predicted"]
            .as_f64()
            .unwrap()
    };
    let close = |a: f64, b: f64, tol: f64| (a / b - 1.0).abs() < tol;
    let tput = predicted("mlenergy3-llama3.1-8b-h100-tp1-b64-tput");
    assert!(close(f(w, "output_tokens_per_s"), tput, 1e-9), "{w} {tput}");
    let power = predicted("mlenergy3-llama3.1-8b-h100-tp1-b64-power");
    assert!(close(f(w, "power_per_gpu_w"), power, 1e-4), "{w} {power}");
    let ept = predicted("mlenergy3-llama3.1-8b-h100-tp1-b64-ept");
    assert!(
        close(f(w, "energy_per_output_token_j"), ept, 1e-4),
        "{w} {ept}"
    );
    assert!(
        f(w, "start_s") > 0.0 && f(w, "end_s") > f(w, "start_s"),
        "{w}"
    );
    // The CSV carries them last; a run with arrivals over time has no window.
    let csv = amdahl().args(row).arg("--csv").output().unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    assert!(
        text.lines().next().unwrap().ends_with(
            "steady_output_tokens_per_s,steady_power_per_gpu_w,steady_energy_per_output_token_j"
        ),
        "{text}"
    );
    let poisson = json(&[&L8[..], &["--rate", "4"]].concat());
    assert!(poisson.get("steady_state").is_none(), "{poisson}");
}

/// The simulator charges the power model's energy, so its table says so and quotes the energy
/// validation set's errors, as `infer`, `plan` and `carbon` do (issue: every energy figure names
/// its method and the error of its class); its latencies say they are simulated and quote the
/// serving validation set's claim (from the committed summary, which the model crate's test
/// keeps live). JSON and `--quiet` carry neither note.
#[test]
fn its_table_says_what_is_modelled_and_how_far_each_model_holds() {
    let energy = "energy: modelled, not measured; GPU scope";
    let latency = "latency: simulated; on the 30 published serving runs of the validation claim, \
                   p50 is within 20 % on 51 of 90 figures";
    amdahl()
        .args(L8)
        .args(["--rate", "5"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains(energy)
                .and(predicate::str::contains(
                    "amdahl catalog validation --energy",
                ))
                .and(predicate::str::contains(latency))
                .and(predicate::str::contains(
                    "23 of the 31 that the simulated capacity alone does not decide",
                )),
        );
    for quiet in ["--json", "--quiet"] {
        amdahl()
            .args(L8)
            .args(["--rate", "5", quiet])
            .assert()
            .success()
            .stderr(
                predicate::str::contains("energy: modelled")
                    .or(predicate::str::contains("latency: simulated"))
                    .not(),
            );
    }
}

#[test]
fn a_request_is_checked_against_the_context_the_checkpoint_serves() {
    // Llama 3.1 (the catalog's llama-3.1-70b) trained on 8,192-token sequences but serves
    // 131,072 (data/models.csv `context`): a 20,000-token prompt is served, and `--seq` sets
    // another limit. A --model-file shape takes the same field.
    let long = [
        "--rate",
        "1",
        "--requests",
        "5",
        "--input-dist",
        "fixed:20000",
    ];
    let base = [
        "serve",
        "--model",
        "llama-3.1-70b",
        "--system",
        "h100",
        "--tp",
        "4",
    ];
    let v = json(&[&base[..], &long[..], &["--output-dist", "fixed:10"]].concat());
    assert_eq!(
        (v["requests"].as_u64(), v["clamped_requests"].as_u64()),
        (Some(5), Some(0))
    );
    let fails = |args: &[&str], message: &str| {
        amdahl()
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(message));
    };
    fails(
        &[&base[..], &long[..], &["--seq", "16384"]].concat(),
        "beyond the 16384-token context of Llama-3-70B",
    );
    let dir = tempfile::tempdir().unwrap();
    let shape = |context: &str| {
        let p = dir.path().join(format!("m{context}.json"));
        std::fs::write(
            &p,
            format!(
                r#"{{"name": "m", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                "ffn": 14336, "vocab": 128256, "seq": 8192, "gated_mlp": true{context}}}"#
            ),
        )
        .unwrap();
        p
    };
    let served = shape(r#", "context": 32768"#);
    let file = ["serve", "--system", "h100", "--model-file"];
    let tail = [&long[..], &["--output-dist", "fixed:10"]].concat();
    let v = json(&[&file[..], &[served.to_str().unwrap()], &tail[..]].concat());
    assert_eq!(v["requests"].as_u64(), Some(5));
    let trained = shape("");
    fails(
        &[&file[..], &[trained.to_str().unwrap()], &tail[..]].concat(),
        "beyond the 8192-token context of m",
    );
}

#[test]
fn a_shared_prefix_is_served_from_the_cache() {
    // Prompts of 1,500 tokens whose first 1,024 are a shared system prompt (64 whole blocks):
    // after the first request, every prompt takes 1,024 tokens from the prefix cache, so the
    // hit rate is 1,024/1,500 × 299/300, and prompts that compute a third of their tokens reach
    // their first token sooner, for less energy, than the same run without the prefix.
    let run = |prefix: &str| {
        let workload = [
            "--rate",
            "10",
            "--input-dist",
            "fixed:1500",
            "--output-dist",
        ];
        json(
            &[
                &L8[..],
                &workload,
                &["fixed:100", "--shared-prefix", prefix],
            ]
            .concat(),
        )
    };
    let (cold, warm) = (run("0"), run("1024"));
    assert!(cold.get("prefix_cache").is_none(), "{cold}");
    let cache = &warm["prefix_cache"];
    assert_eq!(cache["shared_tokens"], 1024);
    assert_eq!(cache["prompt_tokens"], 300 * 1500);
    assert_eq!(cache["hit_tokens"], 299 * 1024);
    let rate = cache["hit_rate"].as_f64().unwrap();
    assert!((rate - 299.0 * 1024.0 / 450_000.0).abs() < 1e-12, "{rate}");
    let ttft = |v: &serde_json::Value| f(v, "ttft_p50_s");
    assert!(
        ttft(&warm) < 0.7 * ttft(&cold),
        "{} vs {}",
        ttft(&warm),
        ttft(&cold)
    );
    let energy = |v: &serde_json::Value| f(&v["energy_per_request_j"], "mean");
    assert!(energy(&warm) < energy(&cold));
}

#[test]
fn the_frontend_is_in_every_ttft_and_end_to_end_latency_and_nowhere_else() {
    // The same stream with the default frontend (10.2 ms, vLLM PR #54628's measurement:
    // serve/client.rs) and with none (an in-process client): every request's TTFT and
    // end-to-end latency differ by exactly 10.2 ms, so their percentiles do; the TPOT, the
    // inter-token gaps and the energy are the engine's. A negative time is a usage error.
    let run = |extra: &[&str]| json(&[&L8[..], &["--rate", "5"], extra].concat());
    let (http, in_process) = (run(&[]), run(&["--frontend-ms", "0"]));
    assert!(
        (f(&http["client"], "frontend_s") - 0.0102).abs() < 1e-15,
        "{http}"
    );
    assert_eq!(f(&in_process["client"], "frontend_s"), 0.0);
    for k in ["ttft_p50_s", "ttft_p99_s", "e2e_p50_s", "e2e_p99_s"] {
        let d = f(&http, k) - f(&in_process, k);
        assert!((d - 0.0102).abs() < 1e-9, "{k}: {d}");
    }
    for k in ["tpot_p50_s", "tpot_p99_s", "itl_p99_s", "energy_j"] {
        assert_eq!(f(&http, k), f(&in_process, k), "{k}");
    }
    let table = text(&[&L8[..], &["--rate", "5", "--frontend-ms", "25"]].concat());
    assert!(
        table.contains("frontend: 25.0 ms per request in TTFT and end-to-end"),
        "{table}"
    );
    assert!(refused(&[&L8[..], &["--rate", "1", "--frontend-ms", "-1"]].concat()).contains("≥ 0"));
}

#[test]
fn max_concurrency_keeps_the_client_to_n_in_flight() {
    // bench_serving's --max-concurrency: 300 requests ready at t = 0, 4 in flight at a time. The
    // server never holds more than 4 (its queue and batch stay small), the run is not called
    // overloaded (the backlog is the client's), and the latencies count from each send: far
    // below the all-at-once run's, whose last requests wait behind the first.
    let base = [&L8[..], &["--rate", "inf"]].concat();
    let closed = json(&[&base[..], &["--max-concurrency", "4"]].concat());
    let open = json(&base);
    assert_eq!(closed["overloaded"], false, "{closed}");
    assert!(closed["workload"]
        .as_str()
        .unwrap()
        .contains("at most 4 in flight"));
    assert_eq!(closed["client"]["max_concurrency"], 4);
    assert!(open["client"]["max_concurrency"].is_null());
    let running = closed["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["running"].as_u64().unwrap() + p["waiting"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(running <= 4, "{running}");
    assert!(f(&closed, "ttft_p99_s") < 0.2 * f(&open, "ttft_p99_s"));
    assert!(closed.get("steady_state").is_none_or(|s| s.is_null()));
    let table = text(&[&base[..], &["--max-concurrency", "4"]].concat());
    assert!(
        table.contains("requests/s sent, at most 4 in flight"),
        "{table}"
    );
    assert!(!table.contains("OVERLOADED"), "{table}");
    assert!(
        refused(&[&base[..], &["--max-concurrency", "0"]].concat()).contains("--max-concurrency")
    );
    // A closed-loop search: 64 users on up to 2 H100, every configuration of tp 1|2 × 1|2
    // replicas × bf16|fp8 × 64|256 sequences serving the same 64; none is overloaded, so the SLO
    // (p99 TTFT ≤ 1 s) decides, and a tighter one (1 ms) that none meets names the closest.
    let space = [
        "--gpus",
        "2",
        "--max-concurrency",
        "64",
        "--search",
        "--search-max-num-seqs",
        "64,256",
    ];
    let found = json(&[&base[..], &space, &["--slo-ttft-ms", "1000"]].concat());
    assert_eq!(found["evaluated"], 12);
    assert_eq!(found["feasible"], 12, "{found}");
    assert!(f(&found["cheapest_energy"], "ttft_p99_s") <= 1.0);
    assert!(found["workload"]
        .as_str()
        .unwrap()
        .contains("at most 64 in flight"));
    assert_eq!(found["client"]["max_concurrency"], 64);
    let table = text(&[&base[..], &space, &["--slo-ttft-ms", "1000"]].concat());
    assert!(
        table.contains("12 configurations simulated, 12 serve the 64 in flight and meet"),
        "{table}"
    );
    amdahl()
        .args([&base[..], &space, &["--slo-ttft-ms", "1"]].concat())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "no configuration meets the SLOs; the closest is tp",
        ));
}

/// `--max-rate`: the highest passing rate has a failing one within 1 % above it, each judged by
/// its own p99s against the SLOs; without SLOs, the rate with a bounded queue, above the SLO
/// answer. Conflicting flags are usage errors.
#[test]
fn max_rate_brackets_the_rate_the_slos_allow() {
    let base = [&L8[..], &["--max-rate", "--slo-tpot-ms", "20"]].concat();
    let v = json(&base);
    assert_eq!(v["schema"], "amdahl.serve-max-rate/1");
    let (lo, hi) = (f(&v, "max_rate_rps"), f(&v, "first_failing_rps"));
    assert!(lo < hi && hi <= lo * 1.01 + 1e-12, "{lo} {hi}");
    let probes = v["probes"].as_array().unwrap();
    let at = |rate: f64| probes.iter().find(|p| f(p, "rate_rps") == rate).unwrap();
    let (pass, fail) = (at(lo), at(hi));
    assert_eq!(
        (pass["passes"].as_bool(), fail["passes"].as_bool()),
        (Some(true), Some(false))
    );
    assert!(f(pass, "tpot_p99_s") <= 0.020, "{pass}");
    assert!(
        fail["overloaded"] == true || f(fail, "tpot_p99_s") > 0.020,
        "{fail}"
    );
    // Every probe is judged by the same rule, and they come by rate.
    for p in probes {
        let within = p["overloaded"] == false && f(p, "tpot_p99_s") <= 0.020;
        assert_eq!(p["passes"].as_bool(), Some(within), "{p}");
    }
    assert!(probes
        .windows(2)
        .all(|w| f(&w[0], "rate_rps") <= f(&w[1], "rate_rps")));
    // No SLO: the queue alone decides, at a higher rate than the TPOT limit allows.
    let free = json(&[&L8[..], &["--max-rate", "--rate", "8"]].concat());
    let sustained = f(&free, "max_rate_rps");
    assert!(sustained > hi, "{sustained} vs {hi}");
    assert!(
        text(&[&L8[..], &["--max-rate", "--slo-tpot-ms", "20"]].concat()).contains(&format!(
            "highest rate within the SLOs: {}",
            amdahl_report::sig(lo, 4)
        ))
    );
    for bad in [
        &["--max-rate", "--search"][..],
        &["--max-rate", "--max-concurrency", "4"],
        &["--max-rate", "--trace", "x.csv"],
        &["--max-rate", "--per-request", "x.csv"],
    ] {
        let e = refused(&[&L8[..], bad].concat());
        assert!(e.contains("cannot be used with"), "{e}");
    }
    let out = amdahl()
        .args(L8)
        .args(["--max-rate", "--rate", "inf"])
        .output()
        .unwrap();
    // Refused after parsing, as `--search --rate inf` is (exit 1).
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("finite with --max-rate"));
}
