//! Real Open MPI (Debian `openmpi-bin`, `libopenmpi-dev`): a small C MPI program built here with
//! `mpicc` runs under `amdahl run -- mpirun -np 2`, under `amdahl scale --n 1,2,3 -- mpirun -np
//! {n}`, and as `mpirun -np 2 amdahl run` (one record per rank, local rank 0 measures the node).
//! Energy comes from a fake powercap tree that rank 0 advances by exactly 1 J per run. Skips
//! with a message where Open MPI is missing (fails under CI=true, where `.ci/run` installs it).

use crate::support::real::require;
use crate::support::ScrubEnv;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the MPI program into `dir`.
fn build(dir: &Path) -> Option<PathBuf> {
    let mpicc = require("mpicc", "libopenmpi-dev")?;
    require("mpirun", "openmpi-bin")?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mpi/work.c");
    let bin = dir.join("work");
    let out = Command::new(mpicc)
        .arg("-O2")
        .arg("-o")
        .arg(&bin)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(bin)
}

/// `amdahl` with the fake tree and mpirun allowed as root (CI containers run as root; Open MPI
/// refuses that unless both variables are set), ranks oversubscribed on a 2-core machine, and
/// each test's jobs keeping their session directory in its own temporary directory: Open MPI 4
/// creates `/tmp/ompi.<host>.<uid>` for every job, and jobs started at the same instant (these
/// tests run in parallel) race on that mkdir and fail with "File exists" (open-mpi/ompi#8510;
/// the usual cure is a unique `orte_tmpdir_base` per job).
fn amdahl(root: &Path) -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("amdahl"));
    let session = root.parent().unwrap_or(root);
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .env("OMPI_MCA_orte_tmpdir_base", session)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .scrub_env();
    c
}

fn setup() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
    let t = tempfile::tempdir().unwrap();
    let bin = build(t.path())?;
    let root = t.path().join("powercap");
    amdahl_meter::rapl::fake::zone(
        &root,
        "intel-rapl:0",
        "package-0",
        1_000_000,
        262_143_328_850,
    )
    .unwrap();
    // A dram zone that stays still, so no RAM estimate joins the total.
    amdahl_meter::rapl::fake::zone(&root, "intel-rapl:0:2", "dram", 0, 65_712_999_613).unwrap();
    let counter = root.join("intel-rapl:0/energy_uj");
    Some((t, bin, root, counter))
}

/// The first number under `key` anywhere in `v`.
fn find_number(v: &Value, key: &str) -> Option<f64> {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_f64)
            .or_else(|| m.values().find_map(|x| find_number(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_number(x, key)),
        _ => None,
    }
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn amdahl_run_meters_mpirun_np_2() {
    let Some((t, bin, root, counter)) = setup() else {
        return;
    };
    let out = t.path().join("r.json");
    let res = t.path().join("result.txt");
    let o = amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "mpirun", "-np", "2"])
        .arg(&bin)
        .arg(&res)
        .arg(&counter)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The MPI job really ran on two ranks: 0 + 1.
    assert_eq!(std::fs::read_to_string(&res).unwrap(), "size=2 sum=1\n");
    let r = json(&out);
    assert_eq!(r["exit_code"], 0);
    // Rank 0 added exactly 1 J to the package counter.
    assert_eq!(r["total_energy_j"].as_f64(), Some(1.0));
    // 100 ms serial + 300 ms per rank at least.
    assert!(
        r["duration_s"].as_f64().unwrap() >= 0.4,
        "{}",
        r["duration_s"]
    );
}

#[test]
fn amdahl_scale_fits_mpirun_at_1_2_3_ranks() {
    let Some((t, bin, root, counter)) = setup() else {
        return;
    };
    let out = t.path().join("scale.json");
    let res = t.path().join("result.txt");
    let o = amdahl(&root)
        .args([
            "scale",
            "--n",
            "1,2,3",
            "--runs",
            "1",
            "--n-counts",
            "processes",
            "-o",
        ])
        .arg(&out)
        .args(["--", "mpirun", "-np", "{n}"])
        .arg(&bin)
        .arg(&res)
        .arg(&counter)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&res).unwrap(), "size=3 sum=3\n");
    let r = json(&out);
    let pts = r["points"].as_array().unwrap();
    assert_eq!(pts.len(), 3);
    for (p, n) in pts.iter().zip([1.0, 2.0, 3.0]) {
        let t = p["time_s"]["median"].as_f64().unwrap();
        // T(N) ≥ 0.1 + 0.6/N s of sleeps; launch adds well under 10 s.
        assert!(t >= 0.1 + 0.6 / n && t < 10.0, "N = {n}: {t} s");
        assert_eq!(p["energy_j"]["median"].as_f64(), Some(1.0), "N = {n}");
    }
    // Three N: a fit, with a serial fraction above the program's own 0.1/0.7 (launch is serial
    // too) and below 1.
    assert!(!r["fit"].is_null(), "{}", r["no_fit_reason"]);
    let sf = find_number(&r["fit"], "serial_fraction").unwrap_or(f64::NAN);
    assert!(
        sf > 0.1 / 0.7 && sf < 1.0,
        "serial fraction {sf}: {}",
        r["fit"]
    );
}

#[test]
fn mpirun_np_2_amdahl_run_measures_the_node_once() {
    let Some((t, bin, root, counter)) = setup() else {
        return;
    };
    let amdahl_bin = assert_cmd::cargo::cargo_bin("amdahl");
    let mpirun = require("mpirun", "openmpi-bin").unwrap();
    let res = t.path().join("result.txt");
    // Each rank runs `amdahl run` around its own copy of the program (as with srun): the records
    // say which rank measured the node.
    let script = format!(
        "exec {a} run --no-gpu --interval 50ms -o {d}/rank$OMPI_COMM_WORLD_RANK.json -- {b} {res} {c}",
        a = amdahl_bin.display(),
        d = t.path().display(),
        b = bin.display(),
        res = res.display(),
        c = counter.display()
    );
    let o = Command::new(mpirun)
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .scrub_env()
        .args(["-np", "2", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r0 = json(&t.path().join("rank0.json"));
    let r1 = json(&t.path().join("rank1.json"));
    assert_eq!(r0["cluster"]["launcher"], "openmpi");
    assert_eq!(r0["cluster"]["role"], "measured");
    assert_eq!(r1["cluster"]["role"], "reference");
    let merged = crate::support::json(&[
        "merge",
        t.path().join("rank0.json").to_str().unwrap(),
        t.path().join("rank1.json").to_str().unwrap(),
    ]);
    // The two programs formed one MPI world (amdahl run passes the rank's environment on) and
    // its rank 0 added 1 J: counted once, by the measuring rank, not once per rank.
    assert_eq!(std::fs::read_to_string(&res).unwrap(), "size=2 sum=1\n");
    assert_eq!(r0["total_energy_j"].as_f64(), Some(1.0), "{r0}");
    assert_eq!(merged["total_energy_j"].as_f64(), Some(1.0), "{merged}");
}
