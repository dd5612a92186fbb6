//! The JSON contract: `docs/schema/` holds one JSON Schema per versioned output, generated from the
//! result types (`amdahl_report::schema::KINDS`). One test checks that the committed files match
//! the types; the other runs every command on embedded data and fakes and validates what it
//! writes against its schema.
//!
//! After changing a result type, regenerate the files with
//! `AMDAHL_UPDATE_SCHEMAS=1 cargo test -p amdahl-cli --test cli schemas::` and review the diff.

use crate::support::ScrubEnv;
use amdahl_report::schema::{self, KINDS};
use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const UPDATE: &str = "AMDAHL_UPDATE_SCHEMAS";
const HOW_TO_UPDATE: &str = "AMDAHL_UPDATE_SCHEMAS=1 cargo test -p amdahl-cli --test cli schemas::";

fn schema_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    dir.canonicalize().unwrap_or(dir)
}

/// The first differing line of two texts, with its line number and a little context.
fn first_difference(have: &str, want: &str) -> String {
    let (h, w): (Vec<_>, Vec<_>) = (have.lines().collect(), want.lines().collect());
    let i = h
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(h.len().min(w.len()));
    let around = |v: &[&str]| -> String {
        v.iter()
            .enumerate()
            .skip(i.saturating_sub(2))
            .take(5)
            .map(|(n, l)| format!("      {:>5} {l}\n", n + 1))
            .collect()
    };
    format!(
        "first difference at line {}\n    committed:\n{}    generated:\n{}",
        i + 1,
        around(&h),
        around(&w)
    )
}

#[test]
fn committed_schemas_match_the_result_types() {
    let dir = schema_dir();
    let update = std::env::var(UPDATE).is_ok_and(|v| v == "1");
    if update {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut problems = Vec::new();
    for k in KINDS {
        let path = dir.join(k.file_name());
        let want = k.to_file_text();
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        // Compared as JSON values, so key order (serde_json's `preserve_order`) does not matter.
        let same = serde_json::from_str::<Value>(&have).is_ok_and(|v| v == k.schema());
        if same {
            continue;
        }
        if update {
            std::fs::write(&path, want).unwrap();
            eprintln!("updated {}", path.display());
        } else if have.is_empty() {
            problems.push(format!("{} ({}): missing", path.display(), k.id));
        } else {
            problems.push(format!(
                "{} ({}) differs from the result type: {}",
                path.display(),
                k.id,
                first_difference(&have, &want)
            ));
        }
    }
    let known: BTreeSet<String> = KINDS.iter().map(|k| k.file_name()).collect();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && !known.contains(&name) {
            if update {
                std::fs::remove_file(entry.path()).unwrap();
                eprintln!("removed {name}: no registered kind");
            } else {
                problems.push(format!(
                    "{name}: no kind in amdahl_report::schema::KINDS writes it"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/schema/ is out of date with the result types:\n  {}\n\
         If the change is intended, regenerate with\n  {HOW_TO_UPDATE}\n\
         and review the diff (docs/architecture.md, \"The JSON contract\": a change that is not \
         adding an optional field needs a new version).",
        problems.join("\n  ")
    );
}

/// Collects validation failures across all commands, so one run names every broken kind.
#[derive(Default)]
struct Checker {
    validated: BTreeSet<&'static str>,
    failures: Vec<String>,
}

impl Checker {
    /// Validate one document against the schema its own `schema` field names, which must be `id`.
    fn check(&mut self, id: &'static str, what: &str, doc: &Value) {
        if doc["schema"] != id {
            self.failures.push(format!(
                "{what}: \"schema\" is {}, expected \"{id}\"",
                doc["schema"]
            ));
        }
        self.validate(id, what, doc);
    }

    /// Validate one document against the schema of kind `id`.
    fn validate(&mut self, id: &'static str, what: &str, doc: &Value) {
        let Some(kind) = schema::kind(id) else {
            self.failures.push(format!(
                "{what}: {id} is not in amdahl_report::schema::KINDS"
            ));
            return;
        };
        let validator = match jsonschema::validator_for(&kind.schema()) {
            Ok(v) => v,
            Err(e) => {
                self.failures
                    .push(format!("{id}: the schema itself is invalid: {e}"));
                return;
            }
        };
        let errors: Vec<String> = validator
            .iter_errors(doc)
            .map(|e| format!("{} at `{}`", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            self.validated.insert(id);
        } else {
            self.failures.push(format!(
                "{what} does not match docs/schema/{}:\n      {}",
                kind.file_name(),
                errors.join("\n      ")
            ));
        }
    }

    /// Run amdahl, expect success, and validate its stdout.
    fn stdout(&mut self, id: &'static str, cmd: &mut Command) {
        let what = format!("{cmd:?}");
        match json_stdout(cmd) {
            Ok(v) => self.check(id, &what, &v),
            Err(e) => self.failures.push(format!("{what}: {e}")),
        }
    }

    /// Validate a file a command wrote.
    fn file(&mut self, id: &'static str, path: &Path) {
        let what = path.display().to_string();
        match std::fs::read_to_string(path).map(|t| serde_json::from_str::<Value>(&t)) {
            Ok(Ok(v)) => self.check(id, &what, &v),
            Ok(Err(e)) => self.failures.push(format!("{what}: not JSON: {e}")),
            Err(e) => self.failures.push(format!("{what}: {e}")),
        }
    }
}

/// Run amdahl; its stdout when it exits 0.
fn succeeds(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

fn json_stdout(cmd: &mut Command) -> Result<Value, String> {
    serde_json::from_slice(&succeeds(cmd)?).map_err(|e| format!("stdout is not JSON: {e}"))
}

/// amdahl with no powercap tree and no GPU library, so nothing depends on this machine.
fn amdahl() -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.env("AMDAHL_POWERCAP_ROOT", "/nonexistent/amdahl-test-powercap")
        .scrub_env();
    c
}

/// A fake powercap tree (the real sysfs layout) with one package zone.
fn powercap(root: &Path) -> PathBuf {
    let root = root.join("powercap");
    crate::support::powercap::package(&root);
    root
}

/// Model-only commands: embedded data, no measurement.
fn models(c: &mut Checker, tmp: &Path) {
    c.stdout(
        "amdahl.fit/1",
        amdahl().args(["fit", "--builtin", "--json"]),
    );
    c.stdout("amdahl.top500/1", amdahl().args(["top500", "--json"]));
    let infer = [
        "infer",
        "--model",
        "llama3-8b",
        "--system",
        "h100",
        "--input",
        "128",
        "--output",
        "128",
    ];
    c.stdout("amdahl.infer/1", amdahl().args(infer).arg("--json"));
    c.stdout(
        "amdahl.infer-search/1",
        amdahl().args(infer).args(["--search", "--json"]),
    );
    c.stdout(
        "amdahl.serve/1",
        amdahl().args([
            "serve",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--rate",
            "5",
            "--requests",
            "50",
            "--json",
        ]),
    );
    c.stdout(
        "amdahl.serve-search/1",
        amdahl().args([
            "serve",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--gpus",
            "2",
            "--rate",
            "5",
            "--requests",
            "50",
            "--search",
            "--search-max-num-seqs",
            "64",
            "--json",
        ]),
    );
    c.stdout(
        "amdahl.serve-max-rate/1",
        amdahl().args([
            "serve",
            "--model",
            "llama3-8b",
            "--system",
            "h100",
            "--requests",
            "50",
            "--max-rate",
            "--slo-tpot-ms",
            "30",
            "--json",
        ]),
    );
    c.stdout(
        "amdahl.lifetime/1",
        amdahl().args([
            "lifetime",
            "--train-kwh",
            "50000",
            "--kwh-per-1000-requests",
            "0.4",
            "--requests-per-day",
            "1e6",
            "--days",
            "365",
            "--json",
        ]),
    );
    c.stdout(
        "amdahl.surface/1",
        amdahl()
            .args(["surface", "--json", "-o"])
            .arg(tmp.join("surface.svg")),
    );
    c.stdout(
        "amdahl.accelerate/1",
        amdahl().args([
            "accelerate",
            "--n",
            "4096",
            "--efficiency",
            "0.74",
            "--by",
            "4",
            "--json",
        ]),
    );
    let plan = [
        "plan",
        "--model",
        "llama2-7b",
        "--gpus",
        "16",
        "--batch",
        "64",
    ];
    let saved = tmp.join("plan.json");
    match json_stdout(amdahl().args(plan).args(["--tp", "2", "--json"])) {
        Ok(v) => {
            std::fs::write(&saved, v.to_string()).unwrap();
            c.check("amdahl.plan/1", "plan --json", &v);
        }
        Err(e) => c.failures.push(format!("plan --json: {e}")),
    }
    c.stdout(
        "amdahl.plan-search/1",
        amdahl()
            .args(plan)
            .args(["--search", "--quiet", "--top", "3", "--json"]),
    );
    // A mixture of experts with expert parallelism: `moe`, `ep`, `ep_comm`.
    c.stdout(
        "amdahl.plan/1",
        amdahl().args([
            "plan",
            "--model",
            "mixtral-8x7b",
            "--seq",
            "4096",
            "--system",
            "h100",
            "--gpus",
            "16",
            "--ep",
            "8",
            "--batch",
            "64",
            "--recompute",
            "full",
            "--zero",
            "1",
            "--json",
        ]),
    );
    let carbon = [
        "carbon", "--device", "a100", "--count", "64", "--hours", "100", "--region", "FR",
    ];
    c.stdout("amdahl.carbon/1", amdahl().args(carbon).arg("--json"));
    c.stdout(
        "amdahl.statement/1",
        amdahl().args(carbon).args(["--statement", "json"]),
    );
    c.stdout(
        "amdahl.sci/1",
        amdahl()
            .args(carbon)
            .args(["--sci", "token", "--sci-r", "1e9", "--json"]),
    );
    c.stdout(
        "amdahl.carbon/1",
        amdahl().args(["carbon", "--json", "--from"]).arg(&saved),
    );
    for which in ["devices", "regions", "models", "pue", "validation"] {
        c.stdout(
            "amdahl.catalog/1",
            amdahl().args(["catalog", which, "--json"]),
        );
    }
    c.stdout(
        "amdahl.catalog/1",
        amdahl().args(["catalog", "devices", "h100", "--json"]),
    );
}

/// Measuring commands against a fake powercap tree.
fn measurements(c: &mut Checker, tmp: &Path) {
    let root = powercap(tmp);
    let bump = format!(
        "echo 7000000 > {}/intel-rapl:0/energy_uj; sleep 0.1",
        root.display()
    );
    let (r0, r1, log) = (
        tmp.join("rank0.json"),
        tmp.join("rank1.json"),
        tmp.join("samples.jsonl"),
    );
    for (rank, out, script) in [("0", &r0, bump.as_str()), ("1", &r1, "true")] {
        let mut cmd = amdahl();
        cmd.env("AMDAHL_POWERCAP_ROOT", &root)
            .env("SLURM_PROCID", rank)
            .env("SLURM_LOCALID", rank)
            .env("SLURM_JOB_ID", "99")
            .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
            .arg(out);
        if rank == "0" {
            cmd.arg("--log").arg(&log);
        }
        cmd.args(["--", "sh", "-c", script]);
        if let Err(e) = succeeds(&mut cmd) {
            c.failures.push(format!("run (rank {rank}): {e}"));
        }
        c.file("amdahl.run/1", out);
    }
    // A run with a progress file (the record carries a projection) and a project name.
    let (progress, projected) = (tmp.join("progress"), tmp.join("projected.json"));
    let mut cmd = amdahl();
    cmd.env("AMDAHL_POWERCAP_ROOT", &root)
        .args([
            "run",
            "--no-gpu",
            "--interval",
            "20ms",
            "--total-steps",
            "10",
            "--project",
            "schemas",
        ])
        .arg("--progress-file")
        .arg(&progress)
        .arg("-o")
        .arg(&projected)
        .arg("--")
        .args(["sh", "-c"])
        .arg(format!(
            "for i in 1 2 3 4; do sleep 0.1; echo $i >> {}; done; sleep 0.05",
            progress.display()
        ));
    if let Err(e) = succeeds(&mut cmd) {
        c.failures.push(format!("run --progress-file: {e}"));
    }
    c.file("amdahl.run/1", &projected);
    // The sample log of rank 0: a header line, then one sample per line.
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    let mut n = 0;
    for (i, line) in lines.lines().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => {
                let what = format!("{} line {}", log.display(), i + 1);
                // The header names the kind; sample lines carry no `schema` of their own.
                if i == 0 {
                    c.check("amdahl.samples/1", &what, &v);
                } else {
                    c.validate("amdahl.samples/1", &what, &v);
                }
                n += 1;
            }
            Err(e) => c
                .failures
                .push(format!("{} line {}: {e}", log.display(), i + 1)),
        }
    }
    if n < 2 {
        c.failures.push(format!(
            "{}: {n} lines, expected a header and samples",
            log.display()
        ));
    }
    c.stdout(
        "amdahl.merge/1",
        amdahl().args(["merge", "--json"]).arg(&r0).arg(&r1),
    );
    c.stdout(
        "amdahl.carbon/1",
        amdahl().args(["carbon", "--json", "--from"]).arg(&r0),
    );
    c.stdout(
        "amdahl.scale/1",
        amdahl()
            .env("AMDAHL_POWERCAP_ROOT", &root)
            .args([
                "scale", "--no-gpu", "--n", "1,2", "--runs", "2", "--idle", "50ms",
            ])
            .args(["--json", "--", "sh", "-c", "sleep 0.0{n}"]),
    );
    c.stdout(
        "amdahl.detect/1",
        amdahl()
            .args(["detect", "--no-gpu", "--json", "--powercap-root"])
            .arg(&root),
    );
}

/// Micro-benchmarks at their smallest sizes.
fn benches(c: &mut Checker) {
    let quick = ["--quick", "--repeats", "1", "--json"];
    for (id, bench, size) in [
        ("amdahl.bench.gemm/1", "gemm", "32"),
        ("amdahl.bench.sparse/1", "sparse", "40"),
        ("amdahl.bench.roofline/1", "roofline", "48"),
        ("amdahl.bench.scaling/1", "scaling", "48"),
    ] {
        c.stdout(
            id,
            amdahl().args(["bench", bench, "--sizes", size]).args(quick),
        );
    }
    c.stdout(
        "amdahl.bench.memory/1",
        amdahl().args(["bench", "memory", "--quick", "--sizes", "20000", "--json"]),
    );
    // A device profile and a calibration of GEMM rows on it.
    let t = tempfile::tempdir().unwrap();
    let profile = t.path().join("p.json");
    let gemm = [
        "bench",
        "gemm",
        "--quick",
        "--sizes",
        "16,32,48",
        "--repeats",
        "1",
    ];
    if succeeds(
        amdahl()
            .args(gemm)
            .args(["--precision", "fp32", "--profile-out"])
            .arg(&profile),
    )
    .is_ok()
    {
        c.file("amdahl.device-profile/1", &profile);
        // Orders whose FLOPs outweigh any per-kernel latency a quick profile on a loaded machine
        // can measure (with n = 64–256 a CI run once found no row's time in GEMMs and refused).
        let runs = t.path().join("runs.csv");
        std::fs::write(
            &runs,
            "command,step_s\ngemm --n 512,0.005\ngemm --n 1024,0.04\ngemm --n 2048,0.32\n",
        )
        .unwrap();
        let cal = t.path().join("cal.json");
        let fit = amdahl()
            .args(["calibrate", "--fit", "gemm_efficiency", "--device-profile"])
            .arg(&profile)
            .arg(&runs)
            .arg("-o")
            .arg(&cal)
            .output()
            .unwrap();
        if fit.status.success() {
            c.file("amdahl.calibration/1", &cal);
        } else {
            c.failures.push(format!(
                "calibrate: {}",
                String::from_utf8_lossy(&fit.stderr)
            ));
        }
    } else {
        c.failures.push("bench gemm --profile-out failed".into());
    }
    // Only where a GPU and the `cuda` feature are there (the device check); elsewhere skipped.
    let gpu = amdahl()
        .args(["bench", "gpu", "--quick", "--json"])
        .output()
        .unwrap();
    if gpu.status.success() {
        match serde_json::from_slice(&gpu.stdout) {
            Ok(v) => c.check("amdahl.bench.gpu/1", "bench gpu --json", &v),
            Err(e) => c.failures.push(format!("bench gpu --json: {e}")),
        }
    } else {
        eprintln!("amdahl.bench.gpu/1 not validated here: `amdahl bench gpu` needs the cuda feature and a GPU");
    }
}

/// The check is not vacuous: a record missing its fields, or with a NaN written as null, fails.
#[test]
fn a_broken_output_fails_validation() {
    let mut c = Checker::default();
    let t = tempfile::tempdir().unwrap();
    let saved = t.path().join("r.json");
    std::fs::write(&saved, r#"{"schema": "amdahl.run/1", "duration_s": 1}"#).unwrap();
    c.file("amdahl.run/1", &saved);
    let mut accelerate = serde_json::json!({"schema": "amdahl.accelerate/1",
        "input": {"n": 4, "serial": 0.1, "k": 2, "comm_share": 0, "bytes_ratio": 1},
        "result": {"serial_before": 0.1, "serial_after": 0.18, "efficiency_before": 0.77,
                   "efficiency_after": 0.65, "payload_gain": 1.7}});
    c.check("amdahl.accelerate/1", "accelerate", &accelerate);
    assert!(
        c.failures.len() == 1 && c.failures[0].contains("total_energy_j"),
        "{:?}",
        c.failures
    );
    accelerate["result"]["payload_gain"] = Value::Null;
    c.check("amdahl.accelerate/1", "accelerate", &accelerate);
    assert!(
        c.failures.len() == 2 && c.failures[1].contains("payload_gain"),
        "{:?}",
        c.failures
    );
}

#[test]
fn every_output_matches_its_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Checker::default();
    models(&mut c, tmp.path());
    measurements(&mut c, tmp.path());
    benches(&mut c);
    let unchecked: Vec<_> = KINDS
        .iter()
        .map(|k| k.id)
        .filter(|id| !c.validated.contains(id) && *id != "amdahl.bench.gpu/1")
        .collect();
    if !unchecked.is_empty() {
        c.failures.push(format!(
            "no real output of {unchecked:?} was validated: add a command for it to this test"
        ));
    }
    assert!(
        c.failures.is_empty(),
        "{} problem(s):\n  {}",
        c.failures.len(),
        c.failures.join("\n  ")
    );
}
