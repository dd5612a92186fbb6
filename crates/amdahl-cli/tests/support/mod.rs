//! Helpers the CLI test files share (`mod support;` in each): run the built `amdahl`, read its
//! `--json` result, and compare numbers with a stated relative tolerance. Not every test file
//! uses every helper.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;

/// The `amdahl` binary this test build made.
pub fn amdahl() -> Command {
    match Command::cargo_bin("amdahl") {
        Ok(c) => c,
        Err(e) => panic!("binary not built: {e}"),
    }
}

/// Run `amdahl ARGS --json`, require success (showing stderr if not), and parse stdout.
pub fn json(args: &[&str]) -> Value {
    let out = match amdahl().args(args).arg("--json").output() {
        Ok(o) => o,
        Err(e) => panic!("running amdahl: {e}"),
    };
    assert!(
        out.status.success(),
        "amdahl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => panic!("not JSON: {e}"),
    }
}

/// The number at `v[key]`, or a panic naming the missing key.
pub fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// `x` equals `want` within the relative tolerance `tol`.
pub fn within(x: f64, want: f64, tol: f64) {
    assert!(
        (x / want - 1.0).abs() < tol,
        "{x} vs {want} (tolerance {tol})"
    );
}
pub mod fake_node;
pub mod real;
