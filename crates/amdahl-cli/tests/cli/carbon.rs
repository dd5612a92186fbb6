//! `amdahl carbon`: validation against published figures, the three input paths, statements and
//! bad input (exit 1 with a clear message, never a panic).

use crate::support::{amdahl, json, num, within, words};
use predicates::prelude::*;
use serde_json::Value;

#[test]
fn patterson_2021_gpt3() {
    // Patterson et al. 2021, Table 4: 10,000 V100 × 14.8 days × 330 W, PUE 1.1, 0.429 kgCO2e/kWh
    // -> 1,287 MWh, 552 tCO2e.
    let v = json(&words("carbon --device v100 --count 10000 --days 14.8 --power 330 --pue 1.1 --intensity 429 --no-embodied"));
    assert_eq!(v["schema"], "amdahl.carbon/1");
    assert_eq!(v["basis"], "estimated");
    within(num(&v, "energy_kwh"), 1_287_000.0, 0.01);
    within(num(&v, "co2e_kg"), 552_000.0, 0.01);
}

#[test]
fn patterson_2021_t5() {
    // Patterson et al. 2021, Table 4: 512 TPU v3 × 20 days × 310 W, PUE 1.12, 0.545 -> 85.7 MWh, 46.7 t.
    let v = json(&words("carbon --device tpuv3 --count 512 --days 20 --power 310 --pue 1.12 --intensity 545 --no-embodied"));
    within(num(&v, "energy_kwh"), 85_700.0, 0.01);
    within(num(&v, "co2e_kg"), 46_700.0, 0.01);
}

#[test]
fn llama_65b_table_15() {
    // Touvron et al. 2023, Table 15: 1,022,362 GPU-hours at 400 W, PUE 1.1, 0.385 -> 449 MWh, 173 t;
    // §2.4: 2,048 A100, "approximately 21 days" (1,022,362 / 2,048 h = 20.8 days).
    let v = json(&words(
        "carbon --device-hours 1022362 --count 2048 --power 400 --pue 1.1 --intensity 385",
    ));
    within(num(&v, "energy_kwh"), 449_000.0, 0.01);
    within(num(&v, "co2e_kg"), 173_000.0, 0.01);
    within(num(&v, "duration_days"), 20.8, 0.01);
}

#[test]
fn device_hours_without_count_is_refused_not_1285000_days() {
    // Regression: one device was assumed and "1,285,000 days" printed. The count decides the
    // wall-clock time, so it is required (usage error, exit 2).
    amdahl()
        .args(["carbon", "--device-hours", "1022362", "--power", "400"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--count"));
}

#[test]
fn compute_path_without_count_is_refused_not_an_invented_duration() {
    // The sibling of item 12: the compute path divided the FLOPs by one device's peak and printed
    // decades. The count decides the wall-clock time, so it is required.
    fails(
        &[
            "carbon", "--params", "175e9", "--tokens", "300e9", "--device", "v100", "--mfu", "0.2",
        ],
        "needs --count N",
    );
}

#[test]
fn compute_path_gpt3_on_v100() {
    // 6 · 175e9 · 300e9 FLOP on 10,000 V100 at 24.6 of 125 TFLOP/s: Patterson et al. 2021 report
    // 14.8 days. Within 10 %.
    let v = json(&words("carbon --params 175e9 --tokens 300e9 --device v100 --count 10000 --achieved-tflops 24.6 --power 330 --pue 1.1 --intensity 429"));
    within(num(&v, "duration_days"), 14.8, 0.10);
    // The same through the model catalog and an MFU.
    let m = json(&[
        "carbon", "--model", "gpt3", "--tokens", "300e9", "--device", "v100", "--count", "10000",
        "--mfu", "0.1968", "--power", "330",
    ]);
    within(num(&m, "duration_days"), 14.8, 0.10);
}

#[test]
fn compare_grids_spans_an_order_of_magnitude() {
    let v = json(&words("carbon --device h100 --count 8 --hours 24 --utilisation 0.7 --region aws:eu-west-3 --compare FR,PL,US,IN,NO,AU"));
    let c = v["compare"].as_array().unwrap();
    assert_eq!(c.len(), 6);
    let kg: Vec<f64> = c.iter().map(|x| x["co2e_kg"].as_f64().unwrap()).collect();
    let (lo, hi) = kg
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(hi / lo > 10.0, "{kg:?}");
    // TDP 700 W × 0.7 × 8 × 24 h = 94.08 kWh IT; the default PUE of every command, local = 1.0
    // (a regression: it was industry 1.56 here only).
    within(num(&v, "it_energy_kwh"), 94.08, 1e-9);
    within(num(&v, "energy_kwh"), 94.08, 1e-9);
    assert!(num(&v, "embodied_co2e_kg") > 0.0);
}

#[test]
fn statements() {
    let base = [
        "carbon",
        "--device",
        "a100",
        "--count",
        "64",
        "--hours",
        "100",
        "--power",
        "300",
        "--pue",
        "hyperscale",
        "--region",
        "FR",
    ];
    amdahl()
        .args(base)
        .args(["--statement", "md"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("64 × A100 SXM4 40GB")
                .and(predicate::str::contains("estimated at 1,920 kWh")),
        );
    amdahl()
        .args(base)
        .args(["--statement", "tex"])
        .assert()
        .success()
        .stdout(predicate::str::contains("$\\times$").and(predicate::str::contains("CO$_2$e")));
    let out = amdahl()
        .args(base)
        .args(["--statement", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], "amdahl.statement/1");
    assert_eq!(v["basis"], "estimated");
    assert_eq!(v["intensity_year"], 2023);
}

#[test]
fn from_a_measured_run() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.run/1","total_energy_j":3.6e7,"duration_s":7200}"#,
    )
    .unwrap();
    let v = json(&["carbon", "--from", f.to_str().unwrap(), "--region", "NO"]);
    assert_eq!(v["basis"], "measured");
    // 36 MJ = 10 kWh; --from defaults to the local PUE of 1.0.
    within(num(&v, "energy_kwh"), 10.0, 1e-12);
    amdahl()
        .args(["carbon", "--from", f.to_str().unwrap(), "--statement", "md"])
        .assert()
        .success()
        .stdout(predicate::str::contains("was measured at 10 kWh"));
}

/// Regression: a run whose CPU was only estimated (no RAPL) was reported as "measured", and the
/// run's own region and PUE were dropped for the world default.
#[test]
fn from_an_estimated_run_says_estimated_and_keeps_its_grid_and_pue() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.run/1","total_energy_j":3.6e7,"duration_s":7200,"pue":1.1,
           "devices":[{"id":"estimate:cpu","method":"estimate","in_total":true}],
           "intensity":{"g_per_kwh":56.0,"region":"FR","source":"OWID/Ember","year":2023}}"#,
    )
    .unwrap();
    let v = json(&["carbon", "--from", f.to_str().unwrap()]);
    assert_eq!(v["basis"], "estimated");
    assert_eq!(v["intensity"]["code"], "FR");
    // 10 kWh × PUE 1.1 × 56 g/kWh (data/grid.csv, France 2023) = 616 g.
    within(num(&v, "energy_kwh"), 11.0, 1e-12);
    within(num(&v, "co2e_kg"), 0.616, 1e-9);
}

/// A run's record says what its counters covered; `carbon --from` carries it into the energy
/// method, so a GPU-only total is not read as the whole server's.
#[test]
fn from_a_run_names_what_its_counters_covered() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.run/1","total_energy_j":3.6e6,"duration_s":3600,
           "covers":{"parts":"GPUs (counter)","scope":"gpu"}}"#,
    )
    .unwrap();
    let v = json(&["carbon", "--from", f.to_str().unwrap()]);
    assert_eq!(v["basis"], "measured");
    let method = v["method"].as_str().unwrap_or_default();
    assert!(
        method.ends_with("; covers GPUs (counter) — GPU scope"),
        "{v}"
    );
}

fn fails(args: &[&str], message: &str) {
    amdahl()
        .args(args)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(message).and(predicate::str::contains("panicked").not()));
}

/// A flag value outside its domain is a usage error (exit 2) naming the flag and the domain.
fn usage(args: &[&str], flag: &str, message: &str) {
    amdahl().args(args).assert().code(2).stderr(
        predicate::str::contains(flag)
            .and(predicate::str::contains(message))
            .and(predicate::str::contains("panicked").not()),
    );
}

#[test]
fn out_of_domain_flags_are_usage_errors() {
    usage(
        &["carbon", "--hours", "0", "--power", "300"],
        "--hours",
        "must be a positive number",
    );
    usage(
        &["carbon", "--hours", "-3", "--power", "300"],
        "--hours",
        "must be a positive number",
    );
    usage(
        &["carbon", "--hours", "1", "--power", "-300"],
        "--power",
        "not the power of one device",
    );
    usage(
        &["carbon", "--hours", "1", "--power", "1e308x"],
        "--power",
        "not a number",
    );
    usage(
        &["carbon", "--hours", "1", "--power", "300", "--count", "0"],
        "--count",
        "from 1",
    );
    // Regression: 2^32 + 1 said "must be at least 1".
    usage(
        &words("carbon --hours 1 --power 300 --count 4294967297"),
        "--count",
        "too large",
    );
    // Regression: "inf t CO2e" from a lifetime of 1e-320 years.
    usage(
        &words("carbon --device h100 --hours 1 --lifetime-years 1e-320"),
        "--lifetime-years",
        "between 0.001 and 100",
    );
    usage(
        &["carbon", "--hours", "1", "--power", "NaN"],
        "--power",
        "not a finite number",
    );
}

#[test]
fn pue_above_its_documented_bound_is_refused() {
    // Regression: `--pue 1e308` was accepted (PUE had no upper bound anywhere).
    fails(
        &["carbon", "--hours", "1", "--power", "300", "--pue", "1e308"],
        "above 3",
    );
}

#[test]
fn power_1e308_is_an_error_not_inf() {
    // Regression: finite inputs whose product overflows stop at the output sink (exit 1).
    fails(
        // (1e308 W per device is now refused at the flag: a device draws at most 30 kW.)
        &words("carbon --hours 1e300 --power 1000 --count 4000000000"),
        "non-finite",
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    fails(
        &["carbon", "--device", "h1000", "--hours", "1"],
        "did you mean",
    );
    fails(
        &[
            "carbon", "--region", "Frnace", "--hours", "1", "--power", "1",
        ],
        "did you mean France",
    );
    fails(
        &["carbon", "--hours", "1", "--power", "300", "--pue", "0.9"],
        "PUE 0.9 is below 1",
    );
    fails(
        &[
            "carbon", "--hours", "1", "--power", "300", "--pue", "cloudy",
        ],
        "unknown PUE preset",
    );
    fails(
        &words("carbon --hours 1 --power 300 --intensity 2500"),
        "outside 0-2000",
    );
    fails(
        &words("carbon --hours 1 --power 300 --intensity -1"),
        "outside 0-2000",
    );
    fails(
        &["carbon", "--hours", "1", "--days", "1", "--power", "300"],
        "--hours and --days cannot be combined",
    );
    fails(
        &words("carbon --hours 1 --power 3 --region FR --intensity 5"),
        "cannot be combined",
    );
    fails(
        &words("carbon --hours 1 --power 3 --statement md --json"),
        "cannot be combined",
    );
    fails(&["carbon", "--power", "300"], "say how long");
    fails(
        &["carbon", "--hours", "1"],
        "give --power W, or --device NAME",
    );
    fails(
        &[
            "carbon", "--params", "1e9", "--tokens", "1e9", "--device", "v100", "--power", "1",
        ],
        "--mfu X or --achieved-tflops T",
    );
    usage(
        &[
            "carbon", "--params", "1e9", "--tokens", "1e9", "--device", "v100", "--mfu", "1.5",
            "--power", "1",
        ],
        "--mfu",
        "must be a fraction in (0, 1]",
    );
    fails(
        &words("carbon --flops 1e20 --device t4 --precision fp8 --mfu 0.5"),
        "no published fp8 peak",
    );
    usage(
        &words("carbon --hours 1 --device h100 --utilisation 1.5"),
        "--utilisation",
        "must be a fraction in (0, 1]",
    );
    fails(
        &["carbon", "--from", "/nonexistent/run.json"],
        "reading /nonexistent/run.json",
    );
}

#[test]
fn bad_result_files_and_catalogs_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fit = dir.path().join("fit.json");
    std::fs::write(&fit, r#"{"schema":"amdahl.fit/1"}"#).unwrap();
    fails(
        &["carbon", "--from", fit.to_str().unwrap()],
        "not supported by `amdahl carbon --from`",
    );
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, r#"{"schema":"amdahl.plan/1"}"#).unwrap();
    fails(
        &["carbon", "--from", plan.to_str().unwrap()],
        "field `gpus` is missing",
    );
    let both = dir.path().join("run.json");
    std::fs::write(
        &both,
        r#"{"schema":"amdahl.run/1","total_energy_j":1,"duration_s":1}"#,
    )
    .unwrap();
    fails(
        &["carbon", "--from", both.to_str().unwrap(), "--hours", "2"],
        "--from and --hours cannot be combined",
    );

    let cat = dir.path().join("devices.csv");
    std::fs::write(
        &cat,
        "name,kind,tdp_w,year,source\nMyGPU,gpu,lots,2025,me\n",
    )
    .unwrap();
    let msg = format!(
        "{}: line 2, column `tdp_w`: `lots` is not a number",
        cat.display()
    );
    fails(
        &[
            "carbon",
            "--catalog",
            cat.to_str().unwrap(),
            "--device",
            "mygpu",
            "--hours",
            "1",
        ],
        &msg,
    );
}

#[test]
fn user_catalog_adds_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let cat = dir.path().join("devices.csv");
    std::fs::write(
        &cat,
        "name,aliases,kind,tdp_w,year,source\nLab Card,lab,gpu,250,2025,our lab\n",
    )
    .unwrap();
    let v = json(&[
        "carbon",
        "--catalog",
        cat.to_str().unwrap(),
        "--device",
        "lab",
        "--count",
        "2",
        "--hours",
        "10",
        "--pue",
        "1",
        "--intensity",
        "100",
    ]);
    // 2 × 250 W × 10 h = 5 kWh at 100 g/kWh = 0.5 kg.
    within(num(&v, "energy_kwh"), 5.0, 1e-12);
    within(num(&v, "co2e_kg"), 0.5, 1e-12);
}

/// The hand-written `amdahl.infer/1` contract fixture (tests/fixtures/infer.json).
fn infer_fixture() -> String {
    format!("{}/tests/fixtures/infer.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn from_an_infer_result_is_a_thousand_requests() {
    // 200 J per request × 1,000 = 0.05556 kWh IT; × PUE 1.1 (the result's) = 0.06111 kWh;
    // × 56 g/kWh (the result's FR grid) = 3.422 g: the fixture's own co2e_per_1000_requests_g.
    let v = json(&["carbon", "--from", &infer_fixture(), "--no-embodied"]);
    assert_eq!(v["basis"], "estimated");
    assert_eq!(v["intensity"]["code"], "FR");
    within(num(&v, "it_energy_kwh"), 200e3 / 3.6e6, 1e-12);
    within(num(&v, "energy_kwh"), 1.1 * 200e3 / 3.6e6, 1e-12);
    within(num(&v, "co2e_kg") * 1e3, 3.422_222_222, 1e-9);
    within(num(&v, "duration_s"), 50.0, 1e-12);
}

#[test]
fn moving_the_job_adds_the_transfer_and_its_break_even() {
    // 8 × 700 W × 24 h = 134.4 kWh IT, × PUE 1.2 = 161.28 kWh; staying on 400 g/kWh: 64.512 kg.
    // 10,000 GB × 0.01 kWh/GB = 100 kWh on the origin's 400 g/kWh = 40 kg.
    // FR (56 g/kWh, data/grid.csv): 9.03168 + 40 = 49.03168 kg, pays; break-even
    // 161.28 × (400 − 56) / (0.01 × 400) = 13,870.08 GB. PL (661.9) is dirtier: never pays.
    let v = json(&words("carbon --device h100 --count 8 --hours 24 --power 700 --pue 1.2 --intensity 400 --no-embodied --compare FR,PL --data-gb 10000 --network-kwh-per-gb 0.01"));
    let t = &v["transfer"];
    within(num(t, "energy_kwh"), 100.0, 1e-12);
    within(num(t, "co2e_kg"), 40.0, 1e-12);
    assert_eq!(t["charged_to"], "custom");
    assert_eq!(t["network"]["estimate"], false);
    let fr = &v["compare"][0]["moved"];
    within(num(fr, "total_co2e_kg"), 49.03168, 1e-9);
    within(num(fr, "ratio"), 49.03168 / 64.512, 1e-9);
    assert_eq!(fr["pays"], true);
    within(num(fr, "break_even_gb"), 13_870.08, 1e-9);
    let pl = &v["compare"][1]["moved"];
    assert_eq!(pl["pays"], false);
    assert!(pl["break_even_gb"].is_null());
    amdahl()
        .args([
            "carbon",
            "--device",
            "h100",
            "--count",
            "8",
            "--hours",
            "24",
            "--power",
            "700",
            "--pue",
            "1.2",
            "--intensity",
            "400",
            "--no-embodied",
            "--compare",
            "FR,PL",
            "--data-gb",
            "10000",
            "--network-kwh-per-gb",
            "0.01",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("13.9 TB").and(predicate::str::contains("never")));
}

#[test]
fn network_default_is_the_flagged_aslan_extrapolation() {
    // Aslan et al. 2018: 0.06 kWh/GB in 2015, halving every 2 years -> 0.06 / 2^5 in 2025.
    let v = json(&words(
        "carbon --device h100 --count 8 --hours 24 --power 700 --compare NO --data-gb 1000",
    ));
    let n = &v["transfer"]["network"];
    within(num(n, "kwh_per_gb"), 0.001875, 1e-12);
    assert_eq!(n["estimate"], true);
    let src = n["source"].as_str().unwrap();
    assert!(
        src.contains("estimate") && src.contains("2025") && src.contains("Aslan"),
        "{src}"
    );
    within(num(&v["transfer"], "energy_kwh"), 1.875, 1e-12);
}

#[test]
fn bad_transfer_options_are_errors() {
    let base = [
        "carbon", "--device", "h100", "--count", "8", "--hours", "24", "--power", "700",
    ];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    fails(&with(&["--data-gb", "10"]), "--data-gb needs --compare");
    fails(
        &with(&["--compare", "FR", "--data-gb", "0"]),
        "data volume (GB) must be a positive number",
    );
    fails(
        &with(&words("--compare FR --data-gb 10 --network-kwh-per-gb -1")),
        "network energy intensity",
    );
    fails(
        &with(&["--compare", "FR", "--network-kwh-per-gb", "0.01"]),
        "goes with --data-gb",
    );
}

#[test]
fn compare_against_a_zero_emission_grid_has_no_ratio_not_nan() {
    // With the finiteness check at the output sink, a NaN sentinel would turn this valid input
    // into an error: the ratio to a zero-emission grid does not exist, and says so (null, "-").
    let v = json(&words(
        "carbon --hours 1 --power 300 --count 1 --intensity 0 --compare FR",
    ));
    assert!(v["compare"][0]["ratio"].is_null(), "{}", v["compare"][0]);
    assert!(v["compare"][0]["co2e_kg"].as_f64().unwrap() > 0.0);
}

/// Issue "numbers and statements that agree", item 12: `carbon --from plan.json` and `lifetime
/// --train plan.json` charged a US plan at the world mean (436 g/kWh); the plan's own grid
/// (United States, 369.5 g/kWh) is used unless --region or --intensity overrides it, and the
/// output says it came from the saved result.
#[test]
fn a_saved_plans_grid_is_the_one_charged() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let out = amdahl()
        .args([
            "plan",
            "--model",
            "llama2-7b",
            "--system",
            "h100",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--batch",
            "64",
            "--recompute",
            "full",
            "--region",
            "US",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&plan, &out.stdout).unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let planned_kg = p["training"]["emissions"].as_f64().unwrap() / 1e3;
    let v = json(&["carbon", "--from", plan.to_str().unwrap()]);
    assert_eq!(v["intensity"]["g_per_kwh"], 369.5);
    assert!(v["intensity"]["name"]
        .as_str()
        .unwrap()
        .contains("as in the saved result"));
    let kg = num(&v, "co2e_kg");
    assert!((kg / planned_kg - 1.0).abs() < 1e-9, "{kg} vs {planned_kg}");
    // --region still overrides it.
    let fr = json(&["carbon", "--from", plan.to_str().unwrap(), "--region", "FR"]);
    assert_eq!(fr["intensity"]["g_per_kwh"], 56.0);
}

/// Regression: figures no device can produce are flagged, not passed silently. An H100
/// SXM's TDP is 700 W (NVIDIA data sheet): 2,000 W "per device" is a node's power. A 6-year job
/// on a 5-year life charges 120 % of the manufacture. The figures themselves are kept.
#[test]
fn power_above_the_tdp_and_a_job_longer_than_the_life_are_warned_about() {
    amdahl()
        .args(words(
            "carbon --device h100 --count 8 --hours 10 --power 2000 --json",
        ))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "above the H100 SXM5 80GB's TDP (700 W)",
        ));
    let out = amdahl()
        .args(words(
            "carbon --device h100 --count 1 --days 2191.5 --power 500 --lifetime-years 5 --json",
        ))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "lasts 120 % of the 5-year service life",
        ));
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    // 500 W × 2,191.5 days × 24 h = 26,298 kWh, kept as given.
    within(num(&v, "energy_kwh"), 26_298.0, 1e-6);
    amdahl()
        .args([
            "carbon", "--device", "h100", "--hours", "1", "--power", "1e308",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not the power of one device"));
}

/// Regression: the statement of an `infer` result is worded as a prediction ("would"),
/// rounds as the tables do, says it covers 1,000 requests, and quotes the grid's recorded year.
/// Before: "ran … was estimated", `17.038179376550822 J`, and "year not given" beside a 2022 grid.
#[test]
fn the_statement_of_a_serving_estimate_is_a_rounded_prediction_with_the_grids_year() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("infer.json");
    let out = amdahl()
        .args(words(
            "infer --model llama3-8b --system h100 --batch 64 --region FR --json",
        ))
        .assert()
        .success();
    std::fs::write(&path, &out.get_output().stdout).unwrap();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let year = v["grid"]["year"]
        .as_u64()
        .expect("infer records its grid's year");
    let out = amdahl()
        .args([
            "carbon",
            "--from",
            path.to_str().unwrap(),
            "--statement",
            "md",
        ])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("The computation would run on 1 × H100"),
        "{text}"
    );
    assert!(text.contains("prediction of 1,000 requests"), "{text}");
    assert!(text.contains(&format!(", {year}, ")), "{text}");
    assert!(
        !text.contains("year not given") && !text.contains(" ran "),
        "{text}"
    );
    // No raw f64 (15-17 digits): at most 4 significant ones, so at most 8 after the point.
    let long = regex::Regex::new(r"\.\d{9,}").unwrap();
    assert!(!long.is_match(&text), "{text}");
}

/// Regression: `--region aws:us-east-1` charges Northern Virginia's grid (EPA eGRID2022
/// subregion SRVC, 622.987 lb CO2/MWh = 282.6 g/kWh, direct), not a US average; the statement
/// names the subregion and its source; comparing it with the US country row (life-cycle) says the
/// two bases differ, and with the eGRID US total (373.4 g/kWh, same basis) it is 24 % lower.
#[test]
fn aws_us_east_1_is_charged_at_the_srvc_subregion() {
    let run = "carbon --hours 10 --power 1000 --count 1 --no-embodied --region aws:us-east-1";
    let v = json(&words(&format!("{run} --compare US-EGRID,US")));
    within(num(&v["intensity"], "g_per_kwh"), 282.6, 0.05 / 282.6);
    assert_eq!(v["intensity"]["scope"], "direct");
    assert_eq!(v["intensity"]["year"], 2022);
    // 10 kWh × 282.6 g/kWh = 2.826 kg.
    within(num(&v, "co2e_kg"), 2.826, 1e-3);
    let c = v["compare"].as_array().unwrap();
    within(c[0]["ratio"].as_f64().unwrap(), 373.4 / 282.6, 1e-3);
    // The statement is about the chosen grid only: no caution for the comparison.
    assert_eq!(
        v["caveats"].as_array().map(Vec::len),
        Some(0),
        "{}",
        v["caveats"]
    );
    amdahl()
        .args(words(&format!("{run} --compare US")))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "note: the chosen grid aws:us-east-1 is direct",
        ));
    amdahl()
        .args(words(&format!("{run} --statement md")))
        .assert()
        .success()
        .stdout(
            predicate::str::contains("on the grid of eGRID subregion SRVC, SERC Virginia/Carolina")
                .and(predicate::str::contains("EPA eGRID2022"))
                .and(predicate::str::contains("direct")),
        );
}

#[test]
fn unknown_subnational_region_suggests() {
    amdahl()
        .args(words(
            "carbon --hours 1 --power 100 --count 1 --region SRVX",
        ))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("did you mean").and(predicate::str::contains("SRVC")));
}

/// `carbon --from` a plan or serving estimate charges the power model's energy, so it
/// prints the model's accuracy line (from the energy validation set) as `plan` and `infer` do;
/// JSON carries no note, and a measured run's energy gets none.
#[test]
fn a_modelled_energy_read_from_a_result_says_how_far_the_model_holds() {
    let note = "energy: modelled, not measured";
    amdahl()
        .args(["carbon", "--from", &infer_fixture()])
        .assert()
        .success()
        .stderr(predicate::str::contains(note).and(predicate::str::contains(
            "amdahl catalog validation --energy",
        )));
    amdahl()
        .args(["carbon", "--from", &infer_fixture(), "--json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(note).not());
    amdahl()
        .args(words(
            "carbon --device h100 --count 8 --hours 1 --power 500",
        ))
        .assert()
        .success()
        .stderr(predicate::str::contains(note).not());
}

/// `amdahl carbon ARGS` and `ARGS --statement md`: (table, statement).
fn table_and_statement(args: &[&str]) -> (String, String) {
    let text = |extra: &[&str]| {
        let out = amdahl().args(args).args(extra).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    (text(&[]), text(&["--statement", "md"]))
}

/// The value of the table row `key`, e.g. "power per device".
fn row<'a>(table: &'a str, key: &str) -> &'a str {
    table
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no row `{key}` in\n{table}"))
}

/// Regression: a figure the statement shows in a smaller unit than the table was rounded after
/// scaling, so a half-way value came out differently: 7 Wh at 369.5 g/kWh = 2.5865 g, "0.002586
/// kg" in the table and "2.587 gCO₂e" in the statement. The statement now scales the table's
/// rounded figure.
#[test]
fn a_statements_figure_in_a_smaller_unit_has_the_tables_digits() {
    let (table, statement) =
        table_and_statement(&words("carbon --device h100 --hours 0.01 --region US"));
    assert_eq!(row(&table, "operational CO2e"), "0.002586 kg", "{table}");
    assert!(
        statement.contains("to 2.586 gCO₂e of operational emissions"),
        "{statement}"
    );
    assert_eq!(row(&table, "IT energy"), "0.007 kWh", "{table}");
    assert!(statement.contains("was estimated at 7 Wh"), "{statement}");
}

/// Regression: the method of a saved serving estimate said "465 W per device" beside the
/// table's "power per device 465.5 W" (and the report's 465.5 W), and neither a plan's nor an
/// serving estimate's statement said that its "IT energy" is the GPU boards' alone (the
/// commands' own tables label it GPU scope, beside a larger server figure).
#[test]
fn a_saved_predictions_statement_quotes_the_tables_power_and_its_gpu_scope() {
    let dir = tempfile::tempdir().unwrap();
    for (name, args) in [
        (
            "infer.json",
            "infer --model llama3-70b --system h100 --gpus 8 --tp 4 --precision fp8 --rate 20 \
             --region FR --json",
        ),
        (
            "plan.json",
            "plan --model llama2-7b --system h100 --gpus 16 --tp 2 --batch 64 --recompute full \
             --json",
        ),
    ] {
        let path = dir.path().join(name);
        let out = amdahl().args(words(args)).assert().success();
        std::fs::write(&path, &out.get_output().stdout).unwrap();
        let (table, statement) = table_and_statement(&["carbon", "--from", path.to_str().unwrap()]);
        let power = row(&table, "power per device");
        assert!(
            row(&table, "energy").contains(&format!(", {power} per device")),
            "{table}"
        );
        assert!(
            statement.contains(&format!(", {power} per device")),
            "{power}: {statement}"
        );
        assert!(
            statement.contains(", GPU scope: the GPU boards only)"),
            "{statement}"
        );
    }
}

/// Regression: the statement of a run whose every device was only estimated said it "ran on the
/// measured hardware", and "the CPU and memory … was estimated".
#[test]
fn an_estimated_runs_statement_does_not_call_its_hardware_measured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    std::fs::write(
        &path,
        r#"{"schema":"amdahl.run/1","total_energy_j":36,"duration_s":1,"exit_code":0,
            "devices":[{"id":"estimate:cpu","method":"estimate","in_total":true},
                       {"id":"estimate:ram","method":"estimate","in_total":true}]}"#,
    )
    .unwrap();
    let (table, statement) = table_and_statement(&["carbon", "--from", path.to_str().unwrap()]);
    assert!(row(&table, "energy").starts_with("estimated"), "{table}");
    assert!(
        statement.contains("The computation ran on the observed hardware")
            && !statement.contains("measured hardware"),
        "{statement}"
    );
    assert!(
        statement.contains("the CPU and memory had no readable energy counter and were estimated"),
        "{statement}"
    );
}

/// Regression: a saved plan's method printed the training tokens as
/// stored ("3.14159e11 tokens", "3e11 tokens") where the plan's own table says "training on
/// 3.14e11 tokens".
#[test]
fn a_saved_plans_method_quotes_the_tokens_as_the_plan_table_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "plan --model llama3-8b --system h100 --gpus 8 --batch 64 --tokens 3.14159e11";
    let out = amdahl().args(words(plan)).assert().success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(table.contains("training on 3.14e11 tokens"), "{table}");
    let path = dir.path().join("plan.json");
    let out = amdahl().args(words(plan)).arg("--json").assert().success();
    std::fs::write(&path, &out.get_output().stdout).unwrap();
    let (table, statement) = table_and_statement(&["carbon", "--from", path.to_str().unwrap()]);
    for text in [row(&table, "energy"), statement.as_str()] {
        assert!(text.contains(", 3.14e11 tokens, "), "{text}");
        assert!(!text.contains("3.14159"), "{text}");
    }
}

/// Regression: a statement's duration in seconds or minutes had 3
/// significant digits ("101 seconds", "7.41 minutes") where the table shows 4 ("0.02797 h",
/// "0.1235 h") and the statement's hours and days have 4.
#[test]
fn a_statements_seconds_and_minutes_have_the_tables_digits() {
    for (hours, table_h, words_) in [
        ("0.02797", "(0.02797 h)", "for 100.7 seconds"),
        ("0.123456", "(0.1235 h)", "for 7.407 minutes"),
    ] {
        let (table, statement) = table_and_statement(&[
            "carbon", "--device", "h100", "--count", "1", "--hours", hours, "--power", "500",
        ]);
        assert!(row(&table, "duration").contains(table_h), "{table}");
        assert!(statement.contains(words_), "{statement}");
    }
}

/// Regression: the statement flattened the parentheses of a run's
/// `covers` into commas, "covers GPUs, counter, integrated-power + CPU packages, counter + DRAM,
/// counter", where the run's summary and the table say "GPUs (counter, integrated-power) + CPU
/// packages (counter) + DRAM (counter)". Inside the statement's own parenthesis they are now
/// brackets, which keep each part's methods with it.
#[test]
fn a_statement_keeps_each_covered_part_with_its_methods() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.run/1","total_energy_j":3.6e6,"duration_s":3600,
           "covers":{"parts":"GPUs (counter, integrated-power) + CPU packages (counter) + DRAM (counter)",
                     "scope":"gpu-and-part-of-host"}}"#,
    )
    .unwrap();
    let (table, statement) = table_and_statement(&["carbon", "--from", f.to_str().unwrap()]);
    assert!(
        row(&table, "energy").contains(
            "covers GPUs (counter, integrated-power) + CPU packages (counter) + DRAM (counter) — "
        ),
        "{table}"
    );
    assert!(
        statement.contains(
            "covers GPUs [counter, integrated-power] + CPU packages [counter] + DRAM [counter] — "
        ),
        "{statement}"
    );
}

/// Regression: a run record of 0 J (the command ended before its counters first
/// advanced) is refused, not stated as "measured at 0 J" (a device that was seen never used no
/// energy), and the refusal says why and what to do instead of "measured energy must be a
/// positive number".
#[test]
fn a_zero_joule_run_is_refused_saying_why_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.run/1","total_energy_j":0,"duration_s":0.004,"exit_code":0,
            "devices":[{"id":"rapl:package-0","method":"counter","in_total":true}]}"#,
    )
    .unwrap();
    let out = amdahl()
        .args(["carbon", "--from", f.to_str().unwrap(), "--statement", "md"])
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("0 J"), "{err}");
    assert!(
        err.contains("before any device in its total registered energy"),
        "{err}"
    );
    assert!(err.contains("longer"), "{err}");
    assert!(!err.contains("must be a positive number"), "{err}");
}

#[test]
fn from_a_serve_simulation_is_the_run_it_simulated() {
    // 7,200 J over 10 s on 2 devices = 360 W each; 0.002 kWh IT, × PUE 1.2 (the result's) =
    // 0.0024 kWh, × 56 g/kWh (its FR grid) = 0.1344 g.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("serve.json");
    std::fs::write(
        &f,
        r#"{"schema":"amdahl.serve/1","energy_j":7200,"requests":100,"duration_s":10,"gpus":2,
        "pue":1.2,"grid":"France","grid_code":"FR","grid_g_per_kwh":56,"grid_year":2023,
        "model":"M","system":"H100 SXM5 80GB","workload":"w"}"#,
    )
    .unwrap();
    let v = json(&["carbon", "--from", f.to_str().unwrap(), "--no-embodied"]);
    assert_eq!(v["basis"], "estimated");
    assert_eq!(v["intensity"]["code"], "FR");
    within(num(&v, "it_energy_kwh"), 7200.0 / 3.6e6, 1e-12);
    within(num(&v, "energy_kwh"), 1.2 * 7200.0 / 3.6e6, 1e-12);
    within(num(&v, "power_per_device_w"), 360.0, 1e-9);
    within(num(&v, "co2e_kg"), 1.2 * 7200.0 / 3.6e6 * 0.056, 1e-12);
}
