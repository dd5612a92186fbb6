//! `amdahl accelerate`: Végh's what-if from one measured point.

use predicates::prelude::*;
use predicates::str::contains;

use crate::support::{amdahl, refused};

#[test]
fn summit_hpl_with_four_times_faster_accelerators() {
    // Végh's example: Summit HPL, E = 74.0 %, N = 2,414,592, parallel part 4× faster
    // → E ≈ 0.416 and payload gain ≈ 2.25×. Tolerances: ±0.0005 in E, ±0.005 in the gain.
    let out = amdahl()
        .args([
            "accelerate",
            "--n",
            "2414592",
            "--efficiency",
            "0.74",
            "--by",
            "4",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "amdahl.accelerate/1");
    let r = &v["result"];
    assert!(
        (r["efficiency_after"].as_f64().unwrap() - 0.416).abs() < 5e-4,
        "{r}"
    );
    assert!(
        (r["payload_gain"].as_f64().unwrap() - 2.25).abs() < 5e-3,
        "{r}"
    );
    // 1−α grows: (1−α)' = (1−α)/((1−α) + α/k) > 1−α.
    assert!(r["serial_after"].as_f64().unwrap() > r["serial_before"].as_f64().unwrap());
}

#[test]
fn table_says_why_efficiency_fell() {
    amdahl()
        .args([
            "accelerate",
            "--n",
            "2414592",
            "--efficiency",
            "0.74",
            "--by",
            "4",
        ])
        .assert()
        .success()
        .stdout(
            contains("74.0 %")
                .and(contains("41.6 %"))
                .and(contains("2.25× faster, not 4×")),
        );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    // Values outside a flag's domain are usage errors (exit 2, naming the flag); inputs that
    // are each valid but do not make a question are errors (exit 1).
    for (args, code) in [
        (vec!["--n", "10", "--efficiency", "74", "--by", "2"], 2),
        (vec!["--n", "1", "--efficiency", "0.5", "--by", "2"], 1),
        (vec!["--n", "10", "--efficiency", "0.5", "--by", "0"], 2),
        (vec!["--n", "10", "--by", "2"], 1),
        (
            vec![
                "--n",
                "10",
                "--serial",
                "0.01",
                "--by",
                "2",
                "--comm-share",
                "1.5",
            ],
            2,
        ),
    ] {
        amdahl()
            .arg("accelerate")
            .args(&args)
            .assert()
            .code(code)
            .stderr(contains("error:").and(contains("panicked").not()));
    }
}

#[test]
fn accelerate_by_half_is_refused_not_explained_wrongly() {
    // Regression: K = 0.5 was accepted and explained as if the job had sped up.
    let e = refused(&[
        "accelerate",
        "--n",
        "10",
        "--efficiency",
        "0.5",
        "--by",
        "0.5",
    ]);
    assert!(e.contains("--by") && e.contains("at least 1"), "{e}");
}

#[test]
fn accelerate_efficiency_1_is_accepted_as_the_docs_say() {
    // Regression: the help says E in (0, 1], but E = 1 (1-α = 0) was rejected.
    let out = amdahl()
        .args([
            "accelerate",
            "--n",
            "64",
            "--efficiency",
            "1",
            "--by",
            "4",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["result"];
    assert_eq!(r["serial_after"].as_f64(), Some(0.0));
    assert_eq!(r["efficiency_after"].as_f64(), Some(1.0));
    // Nothing serial stays behind: the whole job runs K = 4 times faster.
    assert!((r["payload_gain"].as_f64().unwrap() - 4.0).abs() < 1e-12);
}
