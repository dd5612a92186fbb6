//! `amdahl surface` end to end: the SVG from the built-in history, overlays from `top500 --json`
//! and from an `amdahl.fit/1` result, and bad input.

use assert_cmd::Command;
use predicates::prelude::*;

fn amdahl() -> Command {
    Command::cargo_bin("amdahl").unwrap()
}

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
        ">1e6<",
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
    amdahl()
        .args(["surface", "--serial-range", "abc"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("LO:HI"));
}
