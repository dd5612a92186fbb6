//! `amdahl scale` end to end: real runs of tiny shell commands against a fake powercap tree
//! (the real sysfs layout in a temp dir). Each run adds N joules to the fake package counter
//! itself, so the energy per job is exact. The exact-number tests of the sweep (Amdahl series,
//! outliers, energy ratios) run through the mock executor in `amdahl_meter::scale`.

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::support::powercap::{zone, PKG_MAX};

/// A package and a dram zone (dram never moves: 0 J), so no estimate enters the total.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    zone(&root, "intel-rapl:0", "package-0", 1_000_000, PKG_MAX);
    zone(&root, "intel-rapl:0:0", "dram", 1_000_000, PKG_MAX);
    (t, root)
}

fn amdahl(root: &Path) -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .current_dir(root.parent().unwrap())
        .args(["scale", "--no-gpu"]);
    c
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Sleep 10·N ms and add N J to the package counter.
// 100 ms per unit of N: far above fork/exec jitter on a loaded 2-core machine, where 10 vs
// 20 ms sleeps were sometimes timed in the wrong order.
const WORK: &str =
    "sleep 0.{n}; f=powercap/intel-rapl:0/energy_uj; echo $(( $(cat $f) + {n}000000 )) > $f";

#[test]
fn real_runs_at_n_1_and_2_are_timed_and_metered() {
    let (t, root) = tree();
    let out = t.path().join("scale.json");
    amdahl(&root)
        .args([
            "--n",
            "1,2",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--n-counts",
            "threads",
        ])
        .args(["--idle", "50ms", "--env", "WORKERS={n}", "-o"])
        .arg(&out)
        .args(["--json", "--", "sh", "-c"])
        .arg(format!("test \"$WORKERS\" = {{n}} && {WORK}"))
        .assert()
        .success();
    let r = json(&out);
    assert_eq!(r["schema"], "amdahl.scale/1");
    assert_eq!(r["complete"], true);
    assert_eq!(r["env"][0], "WORKERS={n}");
    assert_eq!(r["idle"]["power_w"].as_f64(), Some(0.0));
    let pts = r["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    for (p, n) in pts.iter().zip([1.0, 2.0]) {
        assert_eq!(p["n"].as_f64(), Some(n));
        assert_eq!(p["runs"].as_array().unwrap().len(), 2);
        // sleep 0.N: at least 100·N ms; well under two seconds even on a loaded machine.
        let t = p["time_s"]["median"].as_f64().unwrap();
        assert!((0.1 * n..2.0).contains(&t), "N = {n}: {t} s");
        // The command added exactly N J to the package counter on every run.
        assert_eq!(p["energy_j"]["median"].as_f64(), Some(n));
        assert_eq!(p["energy_j"]["min"].as_f64(), Some(n));
        // The fake counters stand still while idle: 0 W, so all of it is above idle.
        assert_eq!(p["net_energy_j"]["median"].as_f64(), Some(n));
    }
    assert_eq!(pts[1]["energy_ratio"].as_f64(), Some(2.0));
    assert!(
        pts[1]["speedup"].as_f64().unwrap() < 1.0,
        "sleep 0.2 is slower"
    );
    let methods: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["counter", "counter"]);
    // Two N: no fit, and it says why.
    assert!(r["fit"].is_null());
    assert!(
        r["no_fit_reason"]
            .as_str()
            .unwrap()
            .contains("at least 3 distinct N"),
        "{}",
        r["no_fit_reason"]
    );
}

#[test]
fn three_n_feed_amdahl_fit_and_surface() {
    let (t, root) = tree();
    let out = t.path().join("s.json");
    amdahl(&root)
        .args([
            "--n", "1,2,3", "--runs", "1", "--warmup", "0", "--svg", "s.svg", "-o",
        ])
        .arg(&out)
        // Fixed work split N ways (0.08 s, 0.04 s, 0.02 s): a real speedup, so a law is fitted
        // (a command that does not speed up gets none: a regression).
        .args(["--", "sh", "-c", "sleep 0.0$((8/{n}))"])
        .assert()
        .success()
        .stdout(contains("scaling-law fit of the median times"));
    assert_eq!(json(&out)["fit"]["schema"], "amdahl.fit/1");
    assert!(std::fs::read_to_string(t.path().join("s.svg"))
        .unwrap()
        .contains("Energy per job vs N"));
    // `amdahl fit` reads the per-N medians (`rows`); `amdahl surface` the embedded fit.
    Command::cargo_bin("amdahl")
        .unwrap()
        .args(["fit", "--json"])
        .arg(&out)
        .assert()
        .success()
        .stdout(contains("\"measure\": \"time\""));
    Command::cargo_bin("amdahl")
        .unwrap()
        .current_dir(t.path())
        .args(["surface", "--from"])
        .arg(&out)
        .args(["-o", "surf.svg"])
        .assert()
        .success();
}

#[test]
fn a_failing_n_stops_the_sweep_keeps_earlier_results_and_exits_with_its_status() {
    let (t, root) = tree();
    let out = t.path().join("f.json");
    amdahl(&root)
        .args(["--n", "1,2,4", "--runs", "1", "--warmup", "0", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "test {n} -lt 2 || { echo 'out of memory at {n}' >&2; exit 3; }",
        ])
        .assert()
        .code(3)
        .stderr(contains("failed at N = 2"))
        .stderr(contains("out of memory at 2"));
    let r = json(&out);
    assert_eq!(r["complete"], false);
    assert_eq!(r["points"].as_array().unwrap().len(), 1);
    assert_eq!(r["failure"]["n"], 2);
    assert_eq!(r["failure"]["exit_code"], 3);
}

#[test]
fn a_missing_command_is_127() {
    let (_t, root) = tree();
    amdahl(&root)
        .args(["--n", "1,2", "--", "amdahl-no-such-command-xyz", "{n}"])
        .assert()
        .code(127)
        .stderr(contains("amdahl-no-such-command-xyz"));
}

#[test]
fn bad_n_lists_are_usage_errors() {
    let (_t, root) = tree();
    for (ns, want) in [
        ("1,2,1", "given twice"),
        ("0,1", "≥ 1"),
        ("-1,2", "invalid value"),
    ] {
        amdahl(&root)
            .args(["--n", ns, "--", "true", "{n}"])
            .assert()
            .code(2)
            .stderr(contains(want));
    }
    amdahl(&root)
        .args(["--n", "2,4", "--baseline-n", "1", "--", "true", "{n}"])
        .assert()
        .code(2)
        .stderr(contains("--baseline-n 1"));
}

#[test]
fn one_n_without_placeholder_warns_and_still_measures() {
    let (_t, root) = tree();
    amdahl(&root)
        .args([
            "--n", "2", "--runs", "1", "--warmup", "0", "--csv", "--", "true",
        ])
        .assert()
        .success()
        .stderr(contains("N changes nothing"))
        .stderr(contains("one N only"))
        .stdout(contains("n,runs,time_median_s"));
}

#[test]
fn output_is_discarded_unless_asked_for() {
    let (_t, root) = tree();
    let run = |show: bool| {
        let mut c = amdahl(&root);
        c.args(["--n", "1", "--runs", "1", "--warmup", "0"]);
        if show {
            c.arg("--show-output");
        }
        c.args(["--", "sh", "-c", "echo visible-{n}"])
            .assert()
            .success()
    };
    run(true).stdout(contains("visible-1"));
    run(false).stdout(contains("visible-1").not());
}
