//! `amdahl merge` sums per-node results without counting a node once per rank.

use crate::support::powercap::{zone, PKG_MAX};
use crate::support::ScrubEnv;
use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn run_rank(root: &Path, out: &Path, rank: &str, local: &str, script: &str) {
    Command::cargo_bin("amdahl")
        .unwrap()
        .env("AMDAHL_POWERCAP_ROOT", root)
        .scrub_env()
        .env("SLURM_PROCID", rank)
        .env("SLURM_LOCALID", local)
        .env("SLURM_JOB_ID", "99")
        .args(["run", "--no-gpu", "-o"])
        .arg(out)
        .args(["--", "sh", "-c", script])
        .assert()
        .success();
}

#[test]
fn ranks_of_one_node_count_once() {
    let t = tempfile::tempdir().unwrap();
    let pc = t.path().join("powercap");
    let root = zone(&pc, "intel-rapl:0", "package-0", 0, PKG_MAX);
    let bump = format!("echo 7000000 > {}/energy_uj", root.display());
    let (a, b) = (t.path().join("rank0.json"), t.path().join("rank1.json"));
    run_rank(&pc, &a, "0", "0", &bump);
    run_rank(&pc, &b, "1", "1", "true");
    let out = Command::cargo_bin("amdahl")
        .unwrap()
        .args(["merge", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["schema"], "amdahl.merge/1");
    // Rank 0 measured the node (7 J on the package, plus the RAM estimate: no dram zone here);
    // rank 1 only references it, so the job total is rank 0's.
    let r0: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(r0["devices"][0]["energy_j"], 7.0);
    assert_eq!(m["total_energy_j"], r0["total_energy_j"]);
    assert_eq!(m["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(m["nodes"][0]["ranks"], serde_json::json!([0, 1]));
}

#[test]
fn a_file_that_is_not_a_run_result_is_named() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("x.json");
    std::fs::write(&f, "{\"schema\": \"other/1\"}").unwrap();
    Command::cargo_bin("amdahl")
        .unwrap()
        .arg("merge")
        .arg(&f)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("x.json"));
}
