//! `amdahl catalog`: listings, one entry with sources, JSON schema, user overrides, unknown names.

use predicates::prelude::*;
use serde_json::Value;

use crate::support::{amdahl, text};

fn json(args: &[&str]) -> Value {
    let out = amdahl()
        .args(args)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn one_device_with_sources() {
    amdahl()
        .args(["catalog", "devices", "h100"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("H100 SXM5 80GB")
                .and(predicate::str::contains("2:4 sparse"))
                .and(predicate::str::contains(
                    "NVIDIA H100 Tensor Core GPU datasheet",
                )),
        );
}

#[test]
fn listings_as_json() {
    let d = json(&["catalog", "devices"]);
    assert_eq!(d["schema"], "amdahl.catalog/1");
    assert_eq!(d["catalog"], "devices");
    let items = d["items"].as_array().unwrap();
    assert!(items.len() >= 25);
    // H100 SXM dense bf16: 989.4 TFLOP/s (NVIDIA datasheet), stored in FLOP/s.
    let h = items
        .iter()
        .find(|x| x["name"] == "H100 SXM5 80GB")
        .unwrap();
    assert_eq!(h["peak"]["fp16"].as_f64(), Some(989.4e12));

    let r = json(&["catalog", "regions"]);
    let codes: Vec<&str> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["code"].as_str())
        .collect();
    for c in [
        "world",
        "FR",
        "aws:eu-west-3",
        "gcp:europe-west1",
        "azure:francecentral",
        "SRVC",
        "US-EGRID",
        "CA-QC",
        "AU-NSW",
    ] {
        assert!(codes.contains(&c), "{c} missing");
    }
    let m = json(&["catalog", "models"]);
    assert!(m["items"].as_array().unwrap().len() >= 25);
    let p = json(&["catalog", "pue"]);
    assert_eq!(p["items"][1]["pue"].as_f64(), Some(1.1));
}

#[test]
fn tables_and_csv() {
    amdahl()
        .args(["catalog", "regions", "Norway"])
        .assert()
        .success()
        .stdout(predicate::str::contains("NO"));
    amdahl()
        .args(["catalog", "models"])
        .assert()
        .success()
        .stdout(predicate::str::contains("PaLM-540B"));
    amdahl()
        .args(["catalog", "pue", "--csv"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "name,pue,year,source\nlocal,1,",
        ));
    amdahl()
        .args(["catalog", "devices", "--csv"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "V100 SXM2 16GB,gpu,7.8,15.7,,125,",
        ));
}

#[test]
fn unknown_names_suggest() {
    amdahl()
        .args(["catalog", "devices", "mi300"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("unknown device `mi300`; did you mean")
                .and(predicate::str::contains("MI300X")),
        );
    amdahl()
        .args(["catalog", "regions", "gcp:europe-west"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("gcp:europe-west1"));
}

#[test]
fn user_file_overrides_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("grid.csv");
    std::fs::write(&f, "alpha2,alpha3,name,g_per_kwh,year,scope,source\nFR,FRA,France,21,2025,lifecycle,RTE eco2mix\n").unwrap();
    amdahl()
        .args(["catalog", "regions", "FR", "--catalog", f.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("21").and(predicate::str::contains("RTE eco2mix")));
    // A region mapped to the French grid follows the override.
    let v = json(&[
        "catalog",
        "regions",
        "aws:eu-west-3",
        "--catalog",
        f.to_str().unwrap(),
    ]);
    assert_eq!(v["items"][0]["g_per_kwh"].as_f64(), Some(21.0));
}

#[test]
fn malformed_user_catalog_names_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("grid.csv");
    std::fs::write(
        &f,
        "alpha2,alpha3,name,g_per_kwh,year,scope,source\nFR,FRA,France,21,2025,sometimes,x\n",
    )
    .unwrap();
    amdahl()
        .args(["catalog", "regions", "--catalog", f.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{}: line 2, column `scope`: `sometimes` is not `lifecycle` or `direct`",
            f.display()
        )));
    std::fs::write(&f, "what,is,this\n1,2,3\n").unwrap();
    amdahl()
        .args(["catalog", "pue", "--catalog", f.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot tell which catalog"));
}

/// Runs in the committed validation set: the data rows of data/validation/train.csv.
fn validation_rows() -> usize {
    let csv = include_str!("../../../../data/validation/train.csv");
    csv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count()
        - 1
}

#[test]
fn validation_lists_every_published_run_with_its_error_and_the_summaries() {
    let v = json(&["catalog", "validation"]);
    assert_eq!(v["catalog"], "validation");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), validation_rows());
    // The sign convention holds in every metric: the error is the published step over the
    // predicted one, less one (data/validation/train.csv's header).
    for r in items {
        let (e, p, q) = (
            r["error"].as_f64().unwrap(),
            r["published_step_s"].as_f64().unwrap(),
            r["predicted_step_s"].as_f64().unwrap(),
        );
        assert!((e - (p / q - 1.0)).abs() < 1e-9, "{r}");
        assert!(r["fits"].as_bool().unwrap(), "{r}");
    }
    // NeMo 24.07's GPT3-20B row: 5,851 tokens/s per GPU published on 64 H100 (the table's
    // GBS 256 makes its step 256 × 2048 / (64 × 5851) = 1.400 s).
    let gpt = items
        .iter()
        .find(|r| r["name"] == "nemo2407-gpt3-20b")
        .unwrap();
    assert_eq!(gpt["published"].as_f64(), Some(5851.0));
    assert!((gpt["published_step_s"].as_f64().unwrap() - 1.4001).abs() < 1e-3);

    let table = text(&["catalog", "validation"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("nemo2407-gpt3-20b "))
        .unwrap();
    let error = 100.0 * gpt["error"].as_f64().unwrap();
    assert!(row.ends_with(&format!("{error:+.1} %")), "{row}");
    let summary = |group: &str| {
        table
            .lines()
            .find(|l| l.starts_with(group))
            .unwrap_or_else(|| panic!("no {group} line in\n{table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // The whole set's row: its run count and mean |error| recomputed from the JSON.
    let all = summary("all ");
    let mean = items
        .iter()
        .map(|r| r["error"].as_f64().unwrap().abs())
        .sum::<f64>()
        / items.len() as f64;
    assert_eq!(all[1], items.len().to_string());
    assert_eq!(all[2], format!("{:.1}", 100.0 * mean));
    assert!(table.contains("targets (mean |error| ≤ 5 %, no run beyond 12 %)"));
    // The CSV carries the same runs.
    let csv = amdahl()
        .args(["catalog", "validation", "--csv"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    assert_eq!(reader.records().count(), items.len());
}

#[test]
fn one_validation_run_in_full_and_unknown_runs_named() {
    amdahl()
        .args(["catalog", "validation", "llama3-405b-8k-16384"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("16384 × H100 SXM5 80GB")
                .and(predicate::str::contains("tp8 pp16 dp128"))
                .and(predicate::str::contains("pipeline bubble"))
                .and(predicate::str::contains("source: Dubey et al. 2024")),
        );
    // A user catalog cannot change the published runs' systems: said, not silently ignored.
    let dir = tempfile::tempdir().unwrap();
    let lab = dir.path().join("grid.csv");
    std::fs::write(
        &lab,
        "alpha2,alpha3,name,g_per_kwh,year,scope,source\nFR,FRA,France,21,2025,lifecycle,RTE eco2mix\n",
    )
    .unwrap();
    amdahl()
        .args(["catalog", "validation", "sc21-1t", "--catalog"])
        .arg(&lab)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: --catalog does not apply to validation",
        ));
    amdahl()
        .args(["catalog", "validation", "llama3-405b"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("unknown validation run `llama3-405b`")
                .and(predicate::str::contains("llama3-405b-8k-8192")),
        );
}

#[test]
fn validation_plot_draws_every_framework_and_other_catalogs_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("validation.svg");
    amdahl()
        .args(["catalog", "validation", "-q", "--svg"])
        .arg(&svg)
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    for label in ["megatron-lm", "nemo", "meta", "deepspeed", "±12 %", "±5 %"] {
        assert!(text.contains(label), "{label} missing from the plot");
    }
    amdahl()
        .args(["catalog", "devices", "--svg"])
        .arg(&svg)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--svg draws the validation set only",
        ));
}

/// `catalog validation --energy`: every row with its held-out error, the summaries and the rows
/// not expressible yet; its JSON carries the same numbers.
#[test]
fn energy_validation_set_is_printed_with_its_held_out_errors() {
    let out = amdahl()
        .args(["catalog", "validation", "--energy"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // The fitted power model's summary line and the claim's verdicts (docs/methodology.md).
    assert!(
        text.contains(
            "power not met (median met, worst not), energy per token not met (median met, worst not)"
        ),
        "{text}"
    );
    assert!(text.contains("busy hopper 0.34, blackwell 0.50"), "{text}");
    assert!(
        text.contains("vLLM time per running sequence per step (GPU work): 26.5 µs, fitted on 45"),
        "{text}"
    );
    assert!(
        text.contains("not expressible yet: 18 of 394 rows"),
        "{text}"
    );
    // The power-cap pairs close the table (data/validation/power_caps.csv): the held-out
    // Llama-2-70B pair keeps 0.842 of its throughput at 500 W in the model, 0.807 published.
    assert!(
        text.contains("power caps: throughput at the cap over the same system's uncapped")
            && text.contains(
                "mlperf41-h200-llama2-70b-500w  500 W           0.807           0.842  +4.3 %  held out"
            ),
        "{text}"
    );
    // The Qwen3 and Llama 3.3 rows no fit has seen, and the shipped model's errors on them.
    assert!(
        text.contains("of which out of sample (fit = no")
            && text.contains("energy per output token (J)    58           8.1 %  22.5 %"),
        "{text}"
    );
    let v = crate::support::json(&["catalog", "validation", "--energy"]);
    let set = &v["items"][0];
    // The same pairs in the JSON: GPT-J keeps 189.806 / 291.103 of its samples per second at
    // 350 W, published, 0.648 modelled.
    let gptj = &set["power_caps"][0];
    assert_eq!(gptj["id"], "mlperf41-h200-gptj-350w");
    assert!((gptj["published"].as_f64().unwrap() - 189.806 / 291.103).abs() < 1e-12);
    assert!(
        (gptj["predicted"].as_f64().unwrap() - 0.648).abs() < 0.001,
        "{gptj}"
    );
    assert_eq!(gptj["fitted"], true);
    let case = set["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "mlenergy3-llama3.1-8b-h100-tp1-b8-power")
        .unwrap();
    // ML.ENERGY v3: 486.4 W; predicted 493.4 W in-sample (+1.4 %) and 461.0 W held out (−5.2 %)
    // over the simulated run's measurement window (489.2 W and 462.5 W from `infer`'s steady
    // state, before 2026-12-07).
    assert_eq!(case["published"], 486.4);
    assert!(
        (case["error"].as_f64().unwrap() - 0.014).abs() < 0.005,
        "{case}"
    );
    assert!(
        (case["held_out_error"].as_f64().unwrap() + 0.052).abs() < 0.005,
        "{case}"
    );
    for bad in [
        &["catalog", "devices", "--energy"][..],
        &["catalog", "validation", "--energy", "--svg", "x.svg"][..],
    ] {
        amdahl().args(bad).assert().code(1);
    }
}

/// Regression: the sub-national rows are listed with source and year, and a cloud region
/// shows the grid it maps to.
#[test]
fn subnational_grids_and_the_regions_on_them() {
    let v = json(&["catalog", "regions", "SRVC"]);
    let srvc = &v["items"][0];
    assert_eq!(srvc["code"], "SRVC");
    assert!((srvc["g_per_kwh"].as_f64().unwrap() - 282.6).abs() < 0.05);
    assert_eq!(srvc["year"], 2022);
    assert!(srvc["source"].as_str().unwrap().contains("eGRID2022"));
    amdahl()
        .args(["catalog", "regions", "gcp:northamerica-northeast1"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("on the grid of province CA-QC (Quebec)")
                .and(predicate::str::contains("National Inventory Report"))
                .and(predicate::str::contains("2019")),
        );
    // Every listed row has a year and a source.
    let all = json(&["catalog", "regions"]);
    for x in all["items"].as_array().unwrap() {
        assert!(x["year"].as_u64().is_some(), "{x}");
        assert!(!x["source"].as_str().unwrap().is_empty(), "{x}");
    }
    amdahl()
        .args(["catalog", "regions", "CA-QCX"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("CA-QC"));
}

/// A user file in the format of data/subnational.csv replaces a sub-national row by code, and the
/// cloud regions on that grid follow it; a bad unit names file, line and column.
#[test]
fn user_subnational_file_overrides_and_regions_follow() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sub.csv");
    let head = "code,country,name,kind,g_per_kwh,published,published_unit,year,scope,source\n";
    std::fs::write(
        &f,
        format!("{head}SRVC,US,SERC Virginia/Carolina,eGRID subregion,250,551.2,lb/MWh,2023,direct,my eGRID2023 copy\n"),
    )
    .unwrap();
    let v = json(&[
        "catalog",
        "regions",
        "aws:us-east-1",
        "--catalog",
        f.to_str().unwrap(),
    ]);
    assert_eq!(v["items"][0]["g_per_kwh"].as_f64(), Some(250.0));
    assert_eq!(v["items"][0]["year"], 2023);
    assert!(v["items"][0]["source"]
        .as_str()
        .unwrap()
        .contains("my eGRID2023 copy"));
    std::fs::write(
        &f,
        format!("{head}SRVC,US,x,eGRID subregion,250,551.2,lb/kWh,2023,direct,s\n"),
    )
    .unwrap();
    amdahl()
        .args(["catalog", "regions", "--catalog", f.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{}: line 2, column `published_unit`",
            f.display()
        )));
}

#[test]
fn the_serving_validation_set_prints_every_row_and_the_summary() {
    // data/validation/serve.csv: 150 published runs, each simulated; the table ends with the
    // summary against the targets (p50 20 %, p99 30 %, throughput 15 %) and the inter-token
    // latencies of every row.
    // One run of the table (the set takes ~15 s to simulate in a debug build): every row's id
    // in the first column above the legend, then the summaries.
    let out = crate::support::amdahl()
        .args(["catalog", "validation", "--serve"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let ids: std::collections::BTreeSet<&str> = text
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("error:"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids.len(), 150, "{ids:?}");
    assert!(ids.contains("mlperf41-h100x8-server"));
    assert!(ids.contains("mlenergy3-qwen3-32b-h100-tp2-b64-itl"));
    assert!(ids.contains("vllm083-70b-a100x8-tp4pp2-rps1"));
    assert!(
        text.contains("inter-token latency, every row")
            && text.contains("p50 98 of 114 within 20 %"),
        "{text}"
    );
    // Runs typed alike by different submitters: the same prediction, published figures apart.
    assert!(
        text.contains(
            "runs typed alike (the same inputs to amdahl serve, other submitters): 3 \
             groups, 7 runs"
        ) && text.contains("p50 median 8.0 %, up to 28.5 %"),
        "{text}"
    );
    crate::support::amdahl()
        .args(["catalog", "devices", "--serve"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "--serve selects a validation set",
        ));
}
