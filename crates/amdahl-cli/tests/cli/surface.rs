//! `amdahl surface` end to end: the SVG from the built-in history, overlays from `top500 --json`
//! and from an `amdahl.fit/1` result, and bad input.

use assert_cmd::Command;
use predicates::prelude::*;

use crate::support::{amdahl, refused};

#[test]
fn builtin_history_surface_has_contours_and_labels() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s.svg");
    amdahl()
        .args(["surface", "-o", out.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("TOP500 (N = cores)"));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(
        svg.matches("<polyline").count(),
        3,
        "three iso-efficiency contours"
    );
    for t in [
        "E = 90 %",
        "E = 50 %",
        "E = 10 %",
        "Piz Daint 2018-11",
        "Frontier 2023-11",
        // Decades as 10^k with a superscript k.
        ">6</tspan>",
    ] {
        assert!(svg.contains(t), "{t}");
    }
}

#[test]
fn overlays_top500_json_from_stdin_and_fit_json_from_file() {
    let top = amdahl()
        .args(["top500", "--json", "--n", "accelerators"])
        .output()
        .unwrap();
    assert!(top.status.success());
    let d = tempfile::tempdir().unwrap();
    let fit = d.path().join("fit.json");
    std::fs::write(
        &fit,
        r#"{"schema":"amdahl.fit/1","series":[{"label":"allreduce","serial_fraction":0.002,
            "points":[{"n":1,"speedup":1,"efficiency":1,"alpha_eff":null,"karp_flatt":null},
                      {"n":64,"speedup":57,"efficiency":0.89,"alpha_eff":0.998,"karp_flatt":0.00195}]}]}"#,
    )
    .unwrap();
    let out = d.path().join("s.svg");
    let res = amdahl()
        .args(["surface", "--json", "--from", "-", "--from"])
        .arg(&fit)
        .args(["-o", out.to_str().unwrap()])
        .write_stdin(top.stdout)
        .output()
        .unwrap();
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).unwrap();
    assert_eq!(v["schema"], "amdahl.surface/1");
    let pts = v["points"].as_array().unwrap();
    assert!(pts
        .iter()
        .any(|p| p["label"] == "Piz Daint 2018-11" && p["n"] == 5704.0));
    assert!(pts
        .iter()
        .any(|p| p["label"] == "allreduce" && p["n"] == 64.0));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("allreduce (Karp-Flatt e)"));
}

#[test]
fn csv_lists_the_placed_points() {
    let d = tempfile::tempdir().unwrap();
    let out = amdahl()
        .args(["surface", "--csv", "-o"])
        .arg(d.path().join("s.svg"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(csv.starts_with("group,label,n,serial_fraction\n"), "{csv}");
    assert!(
        csv.contains("TOP500 (N = cores),Piz Daint 2018-11,387872,"),
        "{csv}"
    );
}

#[test]
fn bad_inputs_fail_cleanly() {
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("x.json");
    std::fs::write(&j, r#"{"schema":"amdahl.plan/1"}"#).unwrap();
    amdahl()
        .args(["surface", "-o"])
        .arg(d.path().join("s.svg"))
        .arg("--from")
        .arg(&j)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("amdahl.top500/1 and amdahl.fit/1"));
    std::fs::write(&j, "not json").unwrap();
    amdahl()
        .arg("surface")
        .arg("--from")
        .arg(&j)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not valid JSON"));
    amdahl()
        .args(["surface", "--n-range", "100:10"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--n-range"));
    let e = refused(&["surface", "--serial-range", "abc"]);
    assert!(e.contains("LO:HI"), "{e}");
}

#[test]
fn surface_from_refuses_unknown_versions_and_counts_skipped_points() {
    // Regression: `surface --from` read amdahl.top500/2 (which merge and carbon --from
    // refuse) and dropped unusable points without saying so.
    let d = tempfile::tempdir().unwrap();
    let v2 = d.path().join("v2.json");
    std::fs::write(&v2, r#"{"schema": "amdahl.top500/2", "systems": []}"#).unwrap();
    let svg = d.path().join("s.svg");
    Command::cargo_bin("amdahl")
        .unwrap()
        .args([
            "surface",
            "--from",
            v2.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("amdahl.top500/2"));
    let v1 = d.path().join("v1.json");
    std::fs::write(
        &v1,
        r#"{"schema": "amdahl.top500/1", "n_counts": "cores", "systems": [
            {"name": "A", "list": "2018-11", "n": 1000, "serial_fraction_hpl": 1e-4},
            {"name": "B", "list": "2018-11", "n": null, "serial_fraction_hpl": 1e-4},
            {"name": "C", "list": "2018-11", "n": 1000, "serial_fraction_hpl": null}]}"#,
    )
    .unwrap();
    Command::cargo_bin("amdahl")
        .unwrap()
        .args([
            "surface",
            "--from",
            v1.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stderr(predicates::str::contains("2 of 3 entries"));
}
