//! `amdahl catalog`: listings, one entry with sources, JSON schema, user overrides, unknown names.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn amdahl() -> Command {
    Command::cargo_bin("amdahl").unwrap()
}

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
