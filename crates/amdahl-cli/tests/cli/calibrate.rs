//! `amdahl calibrate`, `--device-profile` and `--calibration`: the round trip through the CLI
//! (rows the model made with known constants, fitted back), and every bad input refused with its
//! file, row and field (exit 1).

use crate::support::{amdahl, constant};
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// The constants the "measured" rows are made with: a slower stack than the catalog's.
const TRUTH: [(&str, f64); 4] = [
    ("gemm_efficiency", 0.60),
    ("memory_efficiency", 0.70),
    ("kernel_latency_s", 20e-6),
    ("step_overhead_s", 0.040),
];

/// Training rows on one H100 node: small and large models, so every time constant shows.
const ROWS: [&str; 12] = [
    "plan --model gpt3-125m --system h100 --gpus 1 --batch 8 --recompute none",
    "plan --model gpt3-125m --system h100 --gpus 1 --batch 32 --mbs 4",
    "plan --model gpt3-350m --system h100 --gpus 1 --batch 16 --mbs 2 --recompute none",
    "plan --model gpt3-1.3b --system h100 --gpus 1 --batch 8 --recompute full",
    "plan --model gpt3-1.3b --system h100 --gpus 2 --tp 2 --batch 64 --mbs 4",
    "plan --model gpt3-2.7b --system h100 --gpus 2 --tp 2 --batch 32 --mbs 2 --recompute none",
    "plan --model gpt3-6.7b --system h100 --gpus 4 --tp 4 --batch 64 --recompute full",
    "plan --model gpt3-6.7b --system h100 --gpus 8 --tp 8 --batch 128 --mbs 2",
    "plan --model gpt3-13b --system h100 --gpus 8 --tp 8 --batch 64 --recompute full",
    "plan --model gpt3-350m --system h100 --gpus 1 --batch 64 --mbs 8 --recompute full",
    "plan --model gpt3-760m --system h100 --gpus 1 --batch 4 --recompute none",
    "plan --model gpt3-2.7b --system h100 --gpus 4 --tp 4 --batch 256 --mbs 8 --recompute full",
];

/// A calibration file holding `constants` for `system`, as `amdahl calibrate` writes one.
fn calibration(system: &str, constants: &[(&str, f64)]) -> Value {
    json!({
        "schema": "amdahl.calibration/1",
        "amdahl_version": "0",
        "model_version": 1,
        "system": system,
        "source": "hand-written",
        "rows": 0,
        "constants": constants.iter().map(|(n, v)| json!({
            "name": n, "value": v, "standard_error": 0.0, "prior": 0.0
        })).collect::<Vec<_>>(),
        "not_identified": [],
        "quantities": [],
        "loo_method": "exact",
        "row_errors": [],
    })
}

fn step_of(dir: &Path, cmd: &str, cal: Option<&Path>) -> f64 {
    let mut c = amdahl();
    c.current_dir(dir).args(cmd.split(' ')).arg("--json");
    if let Some(p) = cal {
        c.arg("--calibration").arg(p);
    }
    let out = c.assert().success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    v["step_time_s"].as_f64().unwrap()
}

#[test]
fn the_constants_the_rows_were_made_with_come_back() {
    let t = tempfile::tempdir().unwrap();
    let truth = t.path().join("truth.json");
    std::fs::write(&truth, calibration("H100 SXM5 80GB", &TRUTH).to_string()).unwrap();
    // "Measured" = the model with the true constants, times 1 ± 1 % (a fixed pattern).
    let mut csv = String::from("command,step_s\n");
    let mut made = Vec::new();
    for (k, cmd) in ROWS.iter().enumerate() {
        let step = step_of(t.path(), cmd, Some(&truth));
        let noise = [0.01, -0.007, 0.004, -0.01, 0.0, 0.008][k % 6];
        csv.push_str(&format!("{cmd},{}\n", step * (1.0 + noise)));
        made.push(step);
    }
    std::fs::write(t.path().join("runs.csv"), csv).unwrap();
    let out = amdahl()
        .current_dir(t.path())
        .args(["calibrate", "runs.csv", "-o", "cal.json", "--json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["schema"], "amdahl.calibration/1");
    assert_eq!(v["system"], "H100 SXM5 80GB");
    // No power rows: the power constants are named as not fitted.
    let refused: Vec<&str> = v["not_identified"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(refused.contains(&"power_active"), "{refused:?}");
    for (name, want) in TRUTH {
        let (got, se, _) = constant(&v, name);
        // Three standard errors: a two-sided 99.7 % check of the linearised fit.
        assert!(
            (got - want).abs() <= 3.0 * se,
            "{name}: {got} ± {se}, made with {want}"
        );
    }
    let step = &v["quantities"][0];
    assert_eq!(step["quantity"], "step_s");
    assert_eq!(step["loo_signed_errors"].as_array().unwrap().len(), 12);
    assert!(step["mean_abs_after"].as_f64().unwrap() < 0.01, "{step}");
    // The calibrated plan predicts what the true constants give, within the 1 % noise.
    let cal = t.path().join("cal.json");
    for (cmd, want) in ROWS.iter().zip(&made).take(3) {
        let got = step_of(t.path(), cmd, Some(&cal));
        assert!((got / want - 1.0).abs() < 0.02, "{cmd}: {got} vs {want}");
    }
    // The calibrated plan's interval comes from the 12 left-out residuals (all within ~2 %),
    // not from the validation set's class: a band a few per cent wide around the prediction.
    let out = amdahl()
        .current_dir(t.path())
        .args(ROWS[4].split(' '))
        .args(["--calibration", "cal.json", "--json"])
        .assert()
        .success();
    let p: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let band = &p["intervals"]["step_time_s"];
    let basis = band["basis"].as_str().unwrap();
    assert!(
        basis.starts_with(
            "calibration runs.csv (step_s, exact leave-one-out): 12 left-out rows, split conformal"
        ),
        "{basis}"
    );
    let (value, low, high) = (
        band["value"].as_f64().unwrap(),
        band["low"].as_f64().unwrap(),
        band["high"].as_f64().unwrap(),
    );
    assert!(low / value > 0.95 && high / value < 1.05, "{band}");
    amdahl()
        .current_dir(t.path())
        .args(ROWS[4].split(' '))
        .args(["--calibration", "cal.json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "amdahl: calibrated on 12 rows of runs.csv (gemm_efficiency 0.",
        ));
}

/// Run calibrate on `csv` in a fresh folder; it must fail with exit 1 saying each of `says`.
fn refused(csv: &str, extra: &[&str], says: &[&str]) {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("runs.csv"), csv).unwrap();
    let out = amdahl()
        .current_dir(t.path())
        .arg("calibrate")
        .arg("runs.csv")
        .args(extra)
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    for s in says {
        assert!(err.contains(s), "{csv:?}: {err} lacks {s:?}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_rows_are_refused_with_file_row_and_field() {
    let h = "plan --model gpt3-125m --system h100 --gpus 1 --batch 8";
    refused(
        &format!("command,step_s\n{h},0.1\n{h},NaN\n"),
        &[],
        &["runs.csv line 3", "step_s", "not a positive number"],
    );
    refused(
        &format!("command,step_s\n{h},-0.5\n"),
        &[],
        &["runs.csv line 2", "step_s = -0.5"],
    );
    refused(
        &format!("command,step_s\n{h},abc\n"),
        &[],
        &["runs.csv line 2, field `step_s`", "`abc` is not a number"],
    );
    refused(
        &format!("command,step_s\n{h} --bogus 3,0.1\n"),
        &[],
        &["runs.csv line 2, field `command`", "--bogus"],
    );
    refused("step_s\n0.1\n", &[], &["no `command` column"]);
    refused(&format!("command\n{h}\n"), &[], &["no measured column"]);
    refused(
        "command,tpot_s\ninfer --model llama-2-7b --system h100,0.01\n",
        &[],
        &["line 2", "give the --batch"],
    );
    refused(
        &format!("command,ttft_s\n{h},0.1\n"),
        &[],
        &["line 2", "no ttft_s", "training step"],
    );
    refused(
        "command,step_s\ngemm --n 64,0.001\n",
        &[],
        &["line 2", "give --device-profile"],
    );
    refused(
        &format!(
            "command,step_s\n{h},0.1\nplan --model gpt3-125m --system a100-80gb --gpus 1 --batch 8,0.2\n"
        ),
        &[],
        &["H100 SXM5 80GB", "A100 SXM4 80GB", "one device"],
    );
    refused(
        &format!("command,step_s\n{h} --search,0.1\n"),
        &[],
        &["line 2", "drop --search"],
    );
    // Too few rows for a constant asked for by name.
    refused(
        &format!("command,step_s\n{h},0.1\n"),
        &["--fit", "gemm_efficiency"],
        &[
            "cannot identify GEMM efficiency",
            "1 rows fit at most 0 constants",
        ],
    );
    refused(
        &format!("command,step_s\n{h},0.1\n{h} --mbs 2,0.1\n"),
        &["--fit", "speed"],
        &["unknown constant `speed`"],
    );
}

#[test]
fn a_calibration_or_profile_of_something_else_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &Value| {
        let p = t.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let plan = [
        "plan",
        "--model",
        "gpt3-125m",
        "--gpus",
        "1",
        "--batch",
        "8",
    ];
    let good = calibration("H100 SXM5 80GB", &[("gemm_efficiency", 0.6)]);
    let cases = [
        (
            "other.json",
            calibration("A100 SXM4 80GB", &[("gemm_efficiency", 0.6)]),
            "calibrated on the A100 SXM4 80GB, but --system is the H100 SXM5 80GB",
        ),
        (
            "schema.json",
            with(&good, "schema", json!("amdahl.calibration/2")),
            "schema `amdahl.calibration/2`",
        ),
        (
            "version.json",
            with(&good, "model_version", json!(999)),
            "model version 999",
        ),
        (
            "negative.json",
            calibration("H100 SXM5 80GB", &[("gemm_efficiency", -1.0)]),
            "`gemm_efficiency` = -1",
        ),
    ];
    for (name, v, says) in cases {
        let p = write(name, &v);
        amdahl()
            .args(plan)
            .args(["--system", "h100", "--calibration"])
            .arg(&p)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(name).and(predicate::str::contains(says)));
    }
    let profile = json!({
        "schema": "amdahl.device-profile/1", "amdahl_version": "0", "kind": "gpu",
        "device": "NVIDIA A100-SXM4-80GB", "system": "A100 SXM4 80GB", "host": "h",
        "measured_at": "2026-01-01T00:00:00Z", "debug_build": false,
        "gemm": [{"precision": "bf16", "points": [], "sustained_flops_per_s": 2.5e14,
                  "latency_s": 1e-5}],
        "power": {"method": "none"}, "notes": []
    });
    let p = write("a100.json", &profile);
    amdahl()
        .args(plan)
        .args(["--system", "h100", "--device-profile"])
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "a100.json: a profile of the A100 SXM4 80GB (`NVIDIA A100-SXM4-80GB`), but --system is the H100 SXM5 80GB",
        ));
    // On its own device it replaces the curve: 250 of 312 TFLOP/s is 0.80 of the peak, so the
    // step is shorter than the catalog's 0.72 gives, and the output says where it came from.
    let step = |extra: &[&str]| -> f64 {
        let out = amdahl()
            .args(plan)
            .args(["--system", "a100-80gb", "--json"])
            .args(extra)
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        v["step_time_s"].as_f64().unwrap()
    };
    let p_str = p.display().to_string();
    assert!(step(&["--device-profile", &p_str]) < step(&[]));
    amdahl()
        .args(plan)
        .args(["--system", "a100-80gb", "--device-profile"])
        .arg(&p)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "amdahl: A100 SXM4 80GB, profiled on h at 2026-01-01T00:00:00Z",
        ));
    // carbon: the profile's power under load instead of the TDP; a profile without one says so.
    let powered = write(
        "powered.json",
        &with(
            &profile,
            "power",
            json!({"compute_w": 350.0, "method": "NVML"}),
        ),
    );
    amdahl()
        .args([
            "carbon",
            "--device",
            "a100-80gb",
            "--count",
            "8",
            "--hours",
            "10",
        ])
        .arg("--device-profile")
        .arg(&powered)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "350 W per device measured under GEMM load",
        ));
    amdahl()
        .args([
            "carbon",
            "--device",
            "a100-80gb",
            "--hours",
            "1",
            "--device-profile",
        ])
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "a100.json: the profile measured no power under load",
        ));
    amdahl()
        .args([
            "carbon",
            "--device",
            "h100",
            "--hours",
            "1",
            "--device-profile",
        ])
        .arg(&powered)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "but --device is the H100 SXM5 80GB",
        ));
    let bad = write("bad.json", &with(&profile, "memory_bandwidth", json!(-3.0)));
    amdahl()
        .args(plan)
        .args(["--system", "a100-80gb", "--device-profile"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad.json: memory_bandwidth = -3"));
}

/// `v` with `key` set to `x`.
fn with(v: &Value, key: &str, x: Value) -> Value {
    let mut v = v.clone();
    v[key] = x;
    v
}

#[test]
fn a_cpu_profile_feeds_gemm_rows() {
    // The loop on any machine: profile the CPU's fp32 GEMM, calibrate GEMM rows on it, check a
    // held-back row. The measured times here are made up (a test is not a timing): the fit must
    // explain them with the GEMM curve, and a row made by the same curve must be predicted.
    let t = tempfile::tempdir().unwrap();
    amdahl()
        .current_dir(t.path())
        .args([
            "bench",
            "gemm",
            "--quick",
            "--sizes",
            "16,32",
            "--repeats",
            "1",
        ])
        .args([
            "--precision",
            "fp32",
            "--threads",
            "1",
            "--profile-out",
            "cpu.json",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("wrote cpu.json"));
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("cpu.json")).unwrap()).unwrap();
    assert_eq!(p["schema"], "amdahl.device-profile/1");
    assert_eq!(p["kind"], "cpu");
    assert_eq!(p["threads"], 1);
    let rate = p["gemm"][0]["sustained_flops_per_s"].as_f64().unwrap();
    assert!(rate > 0.0);
    // Rows made by t = 1 ms + F / (0.5 × rate): efficiency 0.5 of the profile's rate.
    let t_of = |n: f64| 1e-3 + 2.0 * n.powi(3) / (0.5 * rate);
    // Sizes whose FLOPs outweigh any kernel latency a quick bench on a loaded machine may fit:
    // with 64–192 these tests failed once each in about twenty loaded runs (gemm_efficiency
    // missing from the fit), not reproduced since.
    let rows: String = [512.0, 768.0, 1024.0, 1536.0]
        .iter()
        .map(|n| format!("gemm --n {n},{}\n", t_of(*n)))
        .collect();
    std::fs::write(t.path().join("runs.csv"), format!("command,step_s\n{rows}")).unwrap();
    std::fs::write(
        t.path().join("held.csv"),
        format!("command,step_s\ngemm --n 1280,{}\n", t_of(1280.0)),
    )
    .unwrap();
    let out = amdahl()
        .current_dir(t.path())
        .args(["calibrate", "runs.csv", "--device-profile", "cpu.json"])
        .args(["--check", "held.csv", "--json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let (eff, _, _) = constant(&v, "gemm_efficiency");
    assert!((eff / 0.5 - 1.0).abs() < 1e-3, "{eff}");
    // Latency and step overhead add up in a GEMM loop: one is kept, the other refused by name —
    // as proportional to the other, or, where the bench measured a kernel latency too small for
    // these sizes to feel (a loaded machine: CI once ran it beside a build), as not felt at all.
    let named = |list: &str, name: &str| {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == name)
    };
    let (refused, fitted) = (
        |name| named("not_identified", name),
        |name| named("constants", name),
    );
    assert!(
        (refused("kernel_latency_s") && fitted("step_overhead_s"))
            || (refused("step_overhead_s") && fitted("kernel_latency_s")),
        "{}",
        v["not_identified"]
    );
    let held = v["held_back"][0]["after"].as_f64().unwrap();
    assert!(held.abs() < 1e-3, "{held}");
    // A CPU profile is not a catalogued accelerator: plan refuses it, naming the file.
    amdahl()
        .current_dir(t.path())
        .args([
            "plan",
            "--model",
            "gpt3-125m",
            "--gpus",
            "1",
            "--batch",
            "8",
        ])
        .args(["--device-profile", "cpu.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cpu.json"));
    // A profile only from the benchmarks that measure what it holds.
    amdahl()
        .current_dir(t.path())
        .args(["bench", "sparse", "--quick", "--profile-out", "x.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "measures nothing a device profile holds",
        ));
}

#[test]
fn serving_rows_fit_the_bandwidth_fraction_and_the_step_overhead() {
    // Decode is memory-bound: TPOT and TTFT rows made with a bandwidth fraction of 0.65 and a
    // 3 ms step overhead (the model ships 0.80 and 1 ms) are fitted back.
    let t = tempfile::tempdir().unwrap();
    let truth = t.path().join("truth.json");
    let made = [("memory_efficiency", 0.65), ("step_overhead_s", 3e-3)];
    std::fs::write(&truth, calibration("H100 SXM5 80GB", &made).to_string()).unwrap();
    let mut csv = String::from("command,ttft_s,tpot_s\n");
    for (k, (model, batch, input)) in [
        ("llama-2-7b", 1, 128),
        ("llama-2-7b", 8, 512),
        ("llama-2-7b", 32, 1024),
        ("llama-2-7b", 64, 256),
        ("llama-2-13b", 1, 512),
        ("llama-2-13b", 16, 2048),
        ("llama-2-13b", 48, 128),
        ("llama-2-7b", 128, 128),
    ]
    .iter()
    .enumerate()
    {
        let cmd = format!("infer --model {model} --system h100 --batch {batch} --input {input}");
        let out = amdahl()
            .args(cmd.split(' '))
            .args(["--json", "--calibration"])
            .arg(&truth)
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert!(v["tuning"][0]
            .as_str()
            .unwrap()
            .starts_with("calibrated on 0 rows"));
        let noise = [0.005, -0.004, 0.002, -0.006, 0.0, 0.003, -0.002, 0.004][k];
        csv.push_str(&format!(
            "{cmd},{},{}\n",
            v["ttft_s"].as_f64().unwrap() * (1.0 + noise),
            v["tpot_s"].as_f64().unwrap() * (1.0 - noise)
        ));
    }
    std::fs::write(t.path().join("serve.csv"), csv).unwrap();
    let out = amdahl()
        .current_dir(t.path())
        .args(["calibrate", "serve.csv", "--json"])
        .args(["--fit", "memory_efficiency,step_overhead_s"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    for (name, want) in made {
        let c = v["constants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap();
        let (got, se) = (
            c["value"].as_f64().unwrap(),
            c["standard_error"].as_f64().unwrap(),
        );
        assert!(
            (got - want).abs() <= 3.0 * se,
            "{name}: {got} ± {se}, made with {want}"
        );
        // The serving fit starts from the shipped 1 ms overhead, not from none.
        if name == "step_overhead_s" {
            assert_eq!(c["prior"], 1e-3);
        }
    }
    let kinds: Vec<&str> = v["quantities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["quantity"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ttft_s", "tpot_s"]);
}

#[test]
fn run_records_give_the_step_time_or_say_why_not() {
    let t = tempfile::tempdir().unwrap();
    amdahl()
        .current_dir(t.path())
        .args(["-q", "run", "--no-gpu", "-o", "r.json", "--", "true"])
        .assert()
        .success();
    let text = std::fs::read_to_string(t.path().join("r.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    // No progress counted and no `steps` column: the record cannot say what a step took.
    refused_in(
        t.path(),
        "command,run\ngemm --n 64,r.json\n",
        &["--device-profile", "nowhere.json"],
        &["nowhere.json"],
    );
    v["partial"] = json!(true);
    std::fs::write(t.path().join("partial.json"), v.to_string()).unwrap();
    let profile = json!({
        "schema": "amdahl.device-profile/1", "amdahl_version": "0", "kind": "cpu",
        "device": "CPU", "system": null, "host": "h", "measured_at": "2026-01-01T00:00:00Z",
        "debug_build": false,
        "gemm": [{"precision": "fp32", "points": [], "sustained_flops_per_s": 1e10,
                  "latency_s": 0.0}],
        "power": {"method": "none"}, "notes": []
    });
    std::fs::write(t.path().join("cpu.json"), profile.to_string()).unwrap();
    let p = ["--device-profile", "cpu.json"];
    refused_in(
        t.path(),
        "command,run\ngemm --n 64,r.json\n",
        &p,
        &["line 2, field `run`", "counted no steps", "steps"],
    );
    refused_in(
        t.path(),
        "command,run,steps\ngemm --n 64,partial.json,10\n",
        &p,
        &["line 2, field `run`", "did not finish cleanly"],
    );
    refused_in(
        t.path(),
        "command,run,steps\ngemm --n 64,r.json,0\n",
        &p,
        &["field `steps`: `0` is not a whole number"],
    );
}

/// [`refused`] in an existing folder (beside the files the rows name).
fn refused_in(dir: &Path, csv: &str, extra: &[&str], says: &[&str]) {
    std::fs::write(dir.join("runs.csv"), csv).unwrap();
    let out = amdahl()
        .current_dir(dir)
        .arg("calibrate")
        .arg("runs.csv")
        .args(extra)
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    for s in says {
        assert!(err.contains(s), "{csv:?}: {err} lacks {s:?}");
    }
}

#[test]
fn vllm_rows_fit_the_engines_host_time_per_sequence() {
    // vLLM rows at several batches made with 45 µs of time per running sequence and a
    // 2 ms step overhead (the model ships 30.6 µs and 1 ms) are fitted back, alone and
    // together; `infer --calibration` then charges the fitted time per sequence.
    let t = tempfile::tempdir().unwrap();
    let truth = t.path().join("truth.json");
    let made = [("step_overhead_s", 2e-3), ("per_sequence_s", 45e-6)];
    std::fs::write(&truth, calibration("H100 SXM5 80GB", &made).to_string()).unwrap();
    let row = |model: &str, batch: u32, input: u32| {
        format!("infer --model {model} --system h100 --engine vllm --batch {batch} --input {input}")
    };
    let mut csv = String::from("command,tpot_s\n");
    let mut single = String::from("command,tpot_s\n");
    for (k, (model, batch, input)) in [
        ("llama-2-7b", 8, 512),
        ("llama-2-7b", 32, 256),
        ("llama-2-7b", 96, 512),
        ("llama-2-7b", 256, 128),
        ("llama-2-13b", 16, 1024),
        ("llama-2-13b", 64, 256),
        ("llama-2-13b", 144, 128),
    ]
    .iter()
    .enumerate()
    {
        let noise = [0.004, -0.003, 0.002, -0.004, 0.0, 0.003, -0.002][k];
        for (cmd, out) in [
            (row(model, *batch, *input), &mut csv),
            (row(model, 32, *input), &mut single),
        ] {
            let o = amdahl()
                .args(cmd.split(' '))
                .args(["--json", "--calibration"])
                .arg(&truth)
                .assert()
                .success();
            let v: Value = serde_json::from_slice(&o.get_output().stdout).unwrap();
            let tpot = v["tpot_s"].as_f64().unwrap() * (1.0 + noise);
            out.push_str(&format!("{cmd},{tpot}\n"));
        }
    }
    std::fs::write(t.path().join("serve.csv"), &csv).unwrap();
    std::fs::write(t.path().join("one-batch.csv"), &single).unwrap();
    let fit = |file: &str, names: &str, out: &str| -> Value {
        let o = amdahl()
            .current_dir(t.path())
            .args(["calibrate", file, "--json", "--fit", names, "-o", out])
            .assert()
            .success();
        serde_json::from_slice(&o.get_output().stdout).unwrap()
    };
    for names in ["per_sequence_s", "step_overhead_s,per_sequence_s"] {
        let v = fit("serve.csv", names, "cal.json");
        assert_eq!(v["engine"], "vllm", "{names}");
        for name in names.split(',') {
            let want = made.iter().find(|(n, _)| *n == name).unwrap().1;
            let (got, se, _) = constant(&v, name);
            assert!(
                (got - want).abs() <= 3.0 * se,
                "{names}: {name} {got} ± {se}, made with {want}"
            );
        }
        // The fit starts at vLLM's shipped figure.
        assert_eq!(constant(&v, "per_sequence_s").2, 26.5e-6);
    }
    // The calibrated vLLM prediction charges the fitted time per running sequence.
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("cal.json")).unwrap()).unwrap();
    let (h, _, _) = constant(&v, "per_sequence_s");
    let o = amdahl()
        .current_dir(t.path())
        .args(row("llama-2-7b", 100, 300).split(' '))
        .args(["--calibration", "cal.json", "--json"])
        .assert()
        .success();
    let p: Value = serde_json::from_slice(&o.get_output().stdout).unwrap();
    let host = p["decode"]["engine_host_s"].as_f64().unwrap();
    assert!(
        (host / (h * 100.0) - 1.0).abs() < 1e-12,
        "{host} vs {h} × 100"
    );
    // Another engine refuses the vLLM calibration rather than charging vLLM's host time.
    amdahl()
        .current_dir(t.path())
        .args("infer --model llama-2-7b --system h100 --batch 100".split(' '))
        .args(["--calibration", "cal.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cal.json: the time per running sequence (per_sequence_s) was fitted to vllm runs, but --engine is tensorrt-llm",
        ));
    // One batch cannot tell per-sequence time from the per-step overhead: refused by name,
    // alone or with the overhead; without --fit it is listed as not fitted.
    for names in ["per_sequence_s", "step_overhead_s,per_sequence_s"] {
        let o = amdahl()
            .current_dir(t.path())
            .args(["calibrate", "one-batch.csv", "--fit", names])
            .assert()
            .code(1);
        let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
        assert!(
            err.contains("cannot identify time per running sequence")
                && (err.contains("every serving row is at batch 32")
                    || err.contains("proportional to that of per-step overhead")),
            "{names}: {err}"
        );
    }
    let o = amdahl()
        .current_dir(t.path())
        .args(["calibrate", "one-batch.csv", "--json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&o.get_output().stdout).unwrap();
    assert!(
        v["not_identified"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "per_sequence_s"),
        "{}",
        v["not_identified"]
    );
    assert!(v.get("engine").is_none(), "{v}");
    // Rows of two engines: refused, naming each engine's first row.
    let mixed = csv.replacen(" --engine vllm", "", 1);
    refused_in(
        t.path(),
        &mixed,
        &["--fit", "per_sequence_s"],
        &[
            "different engines",
            "vllm (runs.csv line 3)",
            "tensorrt-llm (runs.csv line 2)",
        ],
    );
}
