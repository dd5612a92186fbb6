//! `amdahl fit` end to end: outputs on the built-in series and on files, and every kind of bad
//! input failing with exit code 1 and a message naming file, row and column.

use predicates::prelude::*;
use std::path::PathBuf;

use crate::support::{amdahl, refused};

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const STRONG: &str = "n,time\n1,100\n2,51\n4,26.5\n8,14.2\n16,8.1\n32,5.1\n64,3.6\n";

#[test]
fn builtin_reproduces_published_usl_coefficients_in_json() {
    let out = amdahl()
        .args(["fit", "--builtin", "--json", "--predict", "64,128"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "amdahl.fit/1");
    let s = &v["series"][0];
    assert_eq!(s["n_counts"], "concurrent clients");
    let p = &s["points"][1];
    for k in ["n", "speedup", "efficiency", "alpha_eff", "karp_flatt"] {
        assert!(p[k].is_number(), "point field {k}: {p}");
    }
    // α_eff + e = 1 on every point past the baseline (Karp–Flatt e = 1 − α_eff).
    let sum = p["alpha_eff"].as_f64().unwrap() + p["karp_flatt"].as_f64().unwrap();
    assert!((sum - 1.0).abs() < 1e-12);
    assert!(s["serial_fraction"].is_number());
    assert!(["constant", "rising", "falling", "untested"].contains(&s["trend"].as_str().unwrap()));
    assert_eq!(s["predictions"].as_array().unwrap().len(), 2);
    let usl = s["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == "usl")
        .unwrap();
    // Schwartz (2015) via usl4j: σ = 0.02671591, κ = 7.690945e-4; within 0.02 %.
    let sigma = usl["params"][0]["value"].as_f64().unwrap();
    let kappa = usl["params"][1]["value"].as_f64().unwrap();
    assert!((sigma / 0.02671591 - 1.0).abs() < 2e-4, "{sigma}");
    assert!((kappa / 7.690945e-4 - 1.0).abs() < 2e-4, "{kappa}");
    assert!(s["chosen_model"].is_string());
}

#[test]
fn table_csv_and_svg_from_a_csv_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, "runs.csv", STRONG);
    let svg = dir.path().join("plots/fit.svg");
    amdahl()
        .args(["fit"])
        .arg(&f)
        .args(["--predict", "1024,4096", "--svg"])
        .arg(&svg)
        .assert()
        .success()
        .stdout(predicate::str::contains("karp_flatt"))
        .stdout(predicate::str::contains("chosen:"))
        .stdout(predicate::str::contains("4096"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("Efficiency vs N"));
    amdahl()
        .args(["fit", "--csv"])
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "label,kind,model,n,speedup,efficiency,alpha_eff,karp_flatt,parameters,aicc,",
        ));
}

/// Regression: `fit --csv` omitted the fitted models; they are `model` rows, the chosen
/// one marked.
#[test]
fn fit_csv_omitted_the_fitted_models() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, "runs.csv", STRONG);
    let out = amdahl().args(["fit", "--csv"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let models: Vec<&str> = text.lines().filter(|l| l.contains(",model,")).collect();
    assert!(models.len() >= 2, "{text}");
    assert_eq!(
        models.iter().filter(|l| l.contains(",true,")).count(),
        1,
        "exactly one chosen model: {text}"
    );
}

#[test]
fn json_input_labels_and_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    for (label, serial) in [("a", 0.01), ("b", 0.05)] {
        for n in [4.0f64, 8.0, 16.0, 32.0, 64.0] {
            rows.push(format!(
                r#"{{"label":"{label}","n":{n},"throughput":{}}}"#,
                1.0 / (serial + (1.0 - serial) / n)
            ));
        }
    }
    let f = file(&dir, "runs.json", &format!("[{}]", rows.join(",")));
    let out = amdahl()
        .args(["fit", "--json", "--baseline-n", "8"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["series"].as_array().unwrap().len(), 2);
    assert_eq!(v["series"][1]["label"], "b");
    assert_eq!(v["series"][0]["baseline_n"], 8.0);
    // Against N0 = 8 the point at N = 8 has p = 1: α_eff is undefined (null).
    assert!(v["series"][0]["points"][1]["alpha_eff"].is_null());
}

#[test]
fn phases_give_a_decomposition() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        &dir,
        "phases.csv",
        "n,compute,communication,serial\n1,100,0,1\n2,50,1,1\n4,25,2,1\n8,12.5,3,1\n16,6.25,4,1\n",
    );
    amdahl()
        .arg("fit")
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains("dominant"))
        .stdout(predicate::str::contains("communication"));
}

/// Each case: file name, contents, fragments the error must contain.
#[test]
fn bad_input_exits_1_naming_file_row_and_column() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("missing.csv", "time\n1\n", &["missing column `n`"]),
        (
            "unknown.csv",
            "n,time,gpus\n1,1,1\n",
            &["unknown column `gpus`", "column 3"],
        ),
        ("n.csv", "n,time\n1,1\n0,2\n", &["row 3", "column `n`"]),
        (
            "eff.csv",
            "n,efficiency\n1,1\n2,0.9\n4,1.2\n",
            &["row 4", "column `efficiency`"],
        ),
        (
            "eff0.csv",
            "n,efficiency\n1,1\n2,0\n",
            &["row 3", "column `efficiency`"],
        ),
        (
            "time.csv",
            "n,time\n1,1\n2,-1\n",
            &["row 3", "column `time`"],
        ),
        (
            "dup.csv",
            "n,time\n1,1\n2,0.6\n2,0.5\n",
            &["appears twice", "rows 3 and 4"],
        ),
        (
            "few.csv",
            "n,time\n1,1\n2,0.6\n",
            &["no model could be fitted", "at least 3"],
        ),
        (
            "text.csv",
            "n,time\n1,fast\n",
            &["row 2", "column `time`", "not a number"],
        ),
        ("ragged.csv", "n,time\n1,1,3\n", &["line 2"]),
        (
            "bad.json",
            "[{\"n\": 1, \"time\": }]",
            &["line 1", "column"],
        ),
        ("shape.json", "{\"n\": 1}", &["rows"]),
        ("empty.csv", "", &["no data rows"]),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text, wants) in cases {
        let f = file(&dir, name, text);
        let out = amdahl().arg("fit").arg(&f).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(err.contains(name), "{name} not named: {err}");
        for w in *wants {
            assert!(err.contains(w), "{name}: expected `{w}` in: {err}");
        }
    }
}

#[test]
fn usage_errors_exit_2_and_missing_file_exits_1() {
    refused(&["fit"]);
    amdahl()
        .args(["fit", "/nonexistent/runs.csv"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/runs.csv"));
    // A value outside the flag's domain is a usage error too (exit 2), naming the flag.
    let e = refused(&["fit", "--builtin", "--predict", "0"]);
    assert!(e.contains("--predict"), "{e}");
}

#[test]
fn accelerate_what_if_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, "runs.csv", STRONG);
    amdahl()
        .arg("fit")
        .arg(&f)
        .args([
            "--accelerate",
            "4",
            "--comm-share",
            "0.5",
            "--bytes-ratio",
            "0.5",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("payload gain"));
    let out = amdahl()
        .arg("fit")
        .arg(&f)
        .args(["--json", "--accelerate", "4", "--predict", "1024"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = &v["series"][0]["what_if"];
    assert_eq!(w["n"], 1024.0);
    // A 4× faster parallel part raises 1−α and lowers E; the same job still runs faster.
    let r = &w["result"];
    assert!(r["serial_after"].as_f64().unwrap() > r["serial_before"].as_f64().unwrap());
    assert!(r["efficiency_after"].as_f64().unwrap() < r["efficiency_before"].as_f64().unwrap());
    assert!(r["payload_gain"].as_f64().unwrap() > 1.0);
    refused(&["fit", "--builtin", "--comm-share", "0.5"]);
}

/// Run `amdahl fit --json` on a CSV written to a temp dir.
fn fit_json(csv: &str) -> serde_json::Value {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("runs.csv");
    std::fs::write(&p, csv).unwrap();
    let out = amdahl()
        .args(["fit", "--json", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn fit_json_trend_is_untested_with_two_points_past_the_baseline() {
    // Regression: the table said "not tested" while the JSON said "constant".
    let v = fit_json("n,time\n1,10\n2,5.5\n4,3.2\n");
    assert_eq!(v["series"][0]["trend"], "untested");
    assert!(v["series"][0]["trend_slope"].is_null());
}

#[test]
fn fit_usl_converges_on_flops_throughputs() {
    // Regression: USL was skipped ("did not converge") for throughputs ≥ ~1e10 FLOP/s.
    // The same series in FLOP/s and in TFLOP/s must give the same σ, κ and 1-α.
    let rows = [
        (1, 1.0),
        (2, 1.9),
        (4, 3.5),
        (8, 6.0),
        (16, 9.0),
        (32, 11.0),
    ];
    let csv = |scale: f64| {
        let mut s = "n,throughput\n".to_string();
        for (n, x) in rows {
            s.push_str(&format!("{n},{:e}\n", x * scale));
        }
        s
    };
    let usl = |v: &serde_json::Value| {
        v["series"][0]["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == "usl")
            .cloned()
            .unwrap_or_else(|| panic!("USL skipped: {}", v["series"][0]["skipped"]))
    };
    let (small, big) = (fit_json(&csv(1.0)), fit_json(&csv(1e15)));
    let (a, b) = (usl(&small), usl(&big));
    for i in 0..2 {
        let (x, y) = (
            a["params"][i]["value"].as_f64().unwrap(),
            b["params"][i]["value"].as_f64().unwrap(),
        );
        assert!(((x - y) / x).abs() < 1e-6, "param {i}: {x} vs {y}");
    }
    let (s1, s2) = (
        small["series"][0]["serial_fraction"].as_f64().unwrap(),
        big["series"][0]["serial_fraction"].as_f64().unwrap(),
    );
    assert!(((s1 - s2) / s1).abs() < 1e-9);
}

#[test]
fn fit_dev_zero_stops_at_the_input_cap() {
    // Regression: `fit /dev/zero` grew without bound. It now stops at the cap, named with
    // how to raise it.
    amdahl()
        .args(["fit", "--input-format", "csv", "/dev/zero"])
        .env("AMDAHL_MAX_INPUT_MIB", "2")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("larger than 2 MiB"))
        .stderr(predicate::str::contains("AMDAHL_MAX_INPUT_MIB"));
}

#[test]
fn fit_csv_above_the_cap_is_refused_and_the_cap_can_be_raised() {
    let d = tempfile::tempdir().unwrap();
    let mut csv = String::from("n,time\n");
    for i in 1..=150_000u32 {
        csv.push_str(&format!("{i},{}\n", 1.0 + 100.0 / f64::from(i)));
    }
    assert!(csv.len() > 2 << 20);
    let p = file(&d, "big.csv", &csv);
    amdahl()
        .args(["fit", p.to_str().unwrap()])
        .env("AMDAHL_MAX_INPUT_MIB", "2")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("larger than 2 MiB"));
    amdahl()
        .args(["fit", "--csv", p.to_str().unwrap()])
        .env("AMDAHL_MAX_INPUT_MIB", "4")
        .assert()
        .success();
}

/// Regression: `--accelerate` at a `--predict` N where the chosen fit (USL, past its peak) is
/// slower than the baseline failed with the what-if's internal argument
/// ("invalid argument `serial` = 3.69…: 1−α must lie in [0, 1)"). It names the fit, the N and
/// the predicted speed-up, and what to change.
#[test]
fn accelerate_beyond_where_the_fit_speeds_up_says_why() {
    amdahl()
        .args(["fit", "--builtin", "--accelerate", "4", "--predict", "4096"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("fit predicts a speed-up of 0."))
        .stderr(predicate::str::contains("at N = 4096"))
        .stderr(predicate::str::contains(
            "--predict an N where the fit still speeds up",
        ))
        .stderr(predicate::str::contains("invalid argument").not());
    // Within the fit's useful range the what-if is computed.
    amdahl()
        .args(["fit", "--builtin", "--accelerate", "4", "--predict", "64"])
        .assert()
        .success();
}
