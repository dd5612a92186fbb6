//! `amdahl bench` end to end, at `--quick` sizes so the suite stays fast.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn amdahl() -> Command {
    Command::cargo_bin("amdahl").unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = amdahl().args(args).arg("--json").assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn gemm_quick_json_checks_every_precision() {
    let v = json(&[
        "bench",
        "gemm",
        "--quick",
        "--sizes",
        "32",
        "--repeats",
        "1",
    ]);
    assert_eq!(v["schema"], "amdahl.bench.gemm/1");
    let checks = v["verification"].as_array().unwrap();
    assert_eq!(checks.len(), 5);
    assert!(checks.iter().all(|c| c["passed"] == true));
    let rows = v["rows"].as_array().unwrap();
    // 5 precisions × 1 size × {1, all} threads (1 row per precision on a 1-CPU machine).
    assert!(rows.len() == 10 || rows.len() == 5, "{}", rows.len());
    // 2·n³ operations, and energy is "not measured" (null), never a number we made up.
    assert_eq!(rows[0]["work"], 2.0 * 32f64.powi(3));
    assert!(rows.iter().all(|r| r["energy"].is_null()));
    assert!(v["energy_source"].is_null());
    let bf16 = v["precisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["precision"] == "bf16")
        .unwrap();
    assert_eq!(bf16["native"], false);
}

#[test]
fn gemm_table_says_what_is_emulated() {
    amdahl()
        .args([
            "bench",
            "gemm",
            "--quick",
            "--sizes",
            "16",
            "--precision",
            "bf16,int8",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("bf16  EMULATED"))
        .stdout(predicate::str::contains("not measured"));
}

#[test]
fn memory_quick_counts_stream_bytes() {
    let n = 20_000.0;
    let v = json(&["bench", "memory", "--quick", "--sizes", "20000"]);
    assert_eq!(v["schema"], "amdahl.bench.memory/1");
    assert_eq!(v["validated"], true);
    // McCalpin: copy and scale move 2 arrays, add and triad 3, of 8-byte elements.
    let want = [2.0, 2.0, 3.0, 3.0].map(|a| a * 8.0 * n);
    let got: Vec<f64> = v["stream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["bytes"].as_f64().unwrap())
        .collect();
    assert_eq!(got, want);
    assert!(!v["sweep"].as_array().unwrap().is_empty());
}

#[test]
fn sparse_quick_csv_has_a_row_per_sparsity() {
    let out = amdahl()
        .args([
            "bench",
            "sparse",
            "--quick",
            "--sizes",
            "40",
            "--sparsity",
            "0,0.9",
            "--csv",
        ])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("sparsity %,nnz"), "{text}");
    assert_eq!(lines.len(), 3);
}

#[test]
fn roofline_quick_writes_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("roof.svg");
    let v = {
        let out = amdahl()
            .args([
                "bench",
                "roofline",
                "--quick",
                "--sizes",
                "48",
                "--repeats",
                "1",
            ])
            .arg("--svg")
            .arg(&svg)
            .arg("--json")
            .assert()
            .success();
        serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap()
    };
    assert_eq!(v["schema"], "amdahl.bench.roofline/1");
    let roof = &v["roofs"][0];
    let ridge = roof["peak"].as_f64().unwrap() / v["bandwidth"].as_f64().unwrap();
    assert!((roof["ridge"].as_f64().unwrap() - ridge).abs() <= 1e-9 * ridge);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("ridge"));
}

#[test]
fn scaling_quick_reports_karp_flatt_per_thread_count() {
    let v = json(&[
        "bench",
        "scaling",
        "--quick",
        "--sizes",
        "48",
        "--repeats",
        "1",
    ]);
    assert_eq!(v["schema"], "amdahl.bench.scaling/1");
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    for s in series {
        let pts = s["points"].as_array().unwrap();
        assert_eq!(pts[0]["threads"], 1);
        assert_eq!(pts[0]["speedup"], 1.0);
        assert!(pts[0]["karp_flatt"].is_null());
    }
}

#[test]
fn bad_sizes_are_refused_with_exit_1() {
    for size in ["0", "-3"] {
        amdahl()
            .args(["bench", "gemm", "--sizes", size])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "--sizes must be a positive integer",
            ));
    }
    amdahl()
        .args(["bench", "gemm", "--sizes", "300000", "--precision", "fp64"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("GiB of memory"));
    amdahl()
        .args(["bench", "memory", "--sizes", "100000000000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("GiB of memory"));
}

#[test]
fn unknown_precision_and_bad_threads_are_errors() {
    amdahl()
        .args(["bench", "gemm", "--quick", "--precision", "fp8"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown precision `fp8`"));
    amdahl()
        .args(["bench", "gemm", "--quick", "--threads", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--threads must be a positive integer",
        ));
    amdahl()
        .args(["bench", "sparse", "--quick", "--sparsity", "1.5"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("outside [0, 1)"));
}

#[test]
fn too_many_threads_warns_and_caps() {
    let out = amdahl()
        .args([
            "bench",
            "gemm",
            "--quick",
            "--sizes",
            "16",
            "--precision",
            "fp32",
        ])
        .args(["--threads", "100000", "--json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: --threads 100000 exceeds",
        ));
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["machine"]["threads"]["capped_from"], 100000);
}
