//! `amdahl demo`, the README's first command: every step runs and every plot is written.

use assert_cmd::Command;
use predicates::str::contains;

#[test]
fn demo_answers_the_three_questions_and_writes_the_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    Command::cargo_bin("amdahl")
        .unwrap()
        .args(["demo", "--out"])
        .arg(&out)
        .assert()
        .success()
        // Step 1: Piz Daint 2018-11, E_HPL 78.18 % (shared TOP500 list; see tests/top500.rs).
        .stdout(contains("78.18 %"))
        // Step 1c: the built-in series' USL fit, σ = 0.02672 (usl4j's published 0.02671591).
        .stdout(contains("sigma = 0.02672"))
        // Step 2: 530B on 2,520 A100 predicted at 160 TFLOP/s per GPU (SC21 publishes 163).
        .stdout(contains("160.2"))
        // Step 3: GPT-3 facility energy, Patterson et al. 2021: 1,287 MWh (ours 1,289).
        .stdout(contains("1,289 MWh"))
        // Step 3, where to run: shipping 45 TB to Norway costs 84.38 kWh (45,000 GB × 0.06 / 32
        // kWh/GB, Aslan et al. 2018 extrapolated to 2025), 36.2 kg at 429 g/kWh: moving pays.
        .stdout(contains("84.38 kWh"))
        // Step 2b prints the serving energy step 4 types in (0.0618 kWh per 1,000 requests; the
        // line with its CO2e is step 2b's own, step 4 echoes only the kWh)...
        .stdout(contains("0.0618 kWh, 3.46 gCO2e"))
        // ... and step 4: 4,480 MWh of training repaid by serving, at 6.18 MWh a day, on day 725.
        .stdout(contains("day 725"));
    for name in [
        "surface.svg",
        "fit.svg",
        "plan.svg",
        "infer.svg",
        "lifetime.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
    }
}
