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

/// Run `amdahl ARGS`, require success, and return stdout (a table).
pub fn text(args: &[&str]) -> String {
    let out = amdahl()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap_or_else(|e| panic!("not UTF-8: {e}"))
}

/// Run `amdahl ARGS --svg FILE` (ARGS include `--json`), require success, and return the parsed
/// stdout and the figure's text.
pub fn json_and_svg(args: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let svg = dir.path().join("figure.svg");
    let out = amdahl()
        .args(args)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap_or_else(|e| panic!("running amdahl: {e}"));
    assert!(
        out.status.success(),
        "amdahl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"));
    (v, std::fs::read_to_string(&svg).unwrap_or_default())
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
/// Clears what would make a test's result depend on the shell it runs in: every launcher variable
/// the cluster detection reads (`amdahl_meter::cluster::VARIABLES`, so a CI job under Slurm or
/// torchrun measures like a laptop) and `COLUMNS` (table width).
pub trait ScrubEnv {
    fn scrub_env(&mut self) -> &mut Self;
}

/// What [`ScrubEnv::scrub_env`] removes.
fn scrubbed() -> impl Iterator<Item = &'static str> {
    amdahl_meter::cluster::VARIABLES
        .iter()
        .copied()
        .chain(["COLUMNS"])
}

impl ScrubEnv for std::process::Command {
    fn scrub_env(&mut self) -> &mut Self {
        scrubbed().for_each(|var| {
            self.env_remove(var);
        });
        self
    }
}

impl ScrubEnv for Command {
    fn scrub_env(&mut self) -> &mut Self {
        scrubbed().for_each(|var| {
            self.env_remove(var);
        });
        self
    }
}

/// Fake powercap trees (the real sysfs layout), written by amdahl-meter's own builder so the
/// meter's tests and these agree on what a zone is.
pub mod powercap {
    pub use amdahl_meter::rapl::fake::zone as try_zone;
    use std::path::{Path, PathBuf};

    /// `max_energy_range_uj` of a real package zone (a Xeon's, as the meter's tests use).
    pub const PKG_MAX: u64 = 262_143_328_850;
    /// `max_energy_range_uj` of a real dram zone.
    pub const DRAM_MAX: u64 = 65_712_999_613;

    /// Zone `id` under `root` (`intel-rapl:0`, or `intel-rapl:0:2` nested under its package).
    pub fn zone(root: &Path, id: &str, name: &str, energy_uj: u64, max_uj: u64) -> PathBuf {
        try_zone(root, id, name, energy_uj, max_uj)
            .unwrap_or_else(|e| panic!("fake powercap zone {id} under {}: {e}", root.display()))
    }

    /// `root` with one package zone at 1 J.
    pub fn package(root: &Path) -> PathBuf {
        zone(root, "intel-rapl:0", "package-0", 1_000_000, PKG_MAX)
    }
}

pub mod fake_node;
pub mod real;
/// The shared data sets (`$AMDAHL_SHARED_DATA`), one reader for every crate's tests.
#[path = "../../../../../tests/support/shared_data.rs"]
pub mod shared_data;

/// Fitted `name` of a calibration's JSON: (value, standard error, prior); a constant not fitted
/// panics with the reasons the calibration gives (`not_identified`).
pub fn constant(v: &Value, name: &str) -> (f64, f64, f64) {
    let Some(c) = v["constants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
    else {
        panic!("{name} not fitted: {}", v["not_identified"]);
    };
    let g = |k: &str| c[k].as_f64().unwrap();
    (g("value"), g("standard_error"), g("prior"))
}

/// An argument list typed as on a command line (`"plan --model megatron-530b --gpus 2520"`), for
/// the long invocations tests repeat; no quoting, so no argument may contain a space.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Parse `amdahl ARGS` in this process and require a usage error (exit 2): a flag refusal needs
/// no child process. Returns clap's message, as the binary prints it on stderr. Arguments that
/// parse would run the command here, so a test that expects them refused fails instead.
pub fn refused(args: &[&str]) -> String {
    let argv = std::iter::once("amdahl").chain(args.iter().copied());
    match amdahl_cli::execute(argv) {
        amdahl_cli::Outcome::Usage(e) => {
            assert_eq!(e.exit_code(), 2, "amdahl {}: {e}", args.join(" "));
            e.to_string()
        }
        amdahl_cli::Outcome::Exit(_) => panic!("amdahl {} was not refused", args.join(" ")),
        amdahl_cli::Outcome::Error(m) => {
            panic!(
                "amdahl {}: an error (exit 1), not a usage error: {m}",
                args.join(" ")
            )
        }
    }
}
