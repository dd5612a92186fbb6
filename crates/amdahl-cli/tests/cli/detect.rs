//! `amdahl detect` lists every sensor with its status and, for unusable ones, the fix.

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use serde_json::Value;

#[test]
fn lists_zones_ignores_core_and_explains_a_missing_tree() {
    let t = tempfile::tempdir().unwrap();
    for (id, name) in [("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "core")] {
        crate::support::powercap::zone(t.path(), id, name, 123, 1000);
    }
    let out = Command::cargo_bin("amdahl")
        .unwrap()
        .args(["detect", "--no-gpu", "--json", "--powercap-root"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["schema"], "amdahl.detect/1");
    let s = d["sensors"].as_array().unwrap();
    let status = |dev: &str| s.iter().find(|x| x["device"] == dev).unwrap()["status"].clone();
    assert_eq!(status("intel-rapl:0"), "ok");
    assert_eq!(status("intel-rapl:0:0"), "ignored");

    let missing = t.path().join("nope");
    Command::cargo_bin("amdahl")
        .unwrap()
        .args(["detect", "--no-gpu", "--powercap-root"])
        .arg(&missing)
        .assert()
        .success()
        .stdout(predicates::str::contains("unusable").and(predicates::str::contains("modprobe")));
}
