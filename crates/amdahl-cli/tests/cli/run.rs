//! `amdahl run` end to end against a fake powercap tree (the real sysfs layout in a temp dir).
//! The measured command itself moves the fake counters, so the expected energies are exact.

use crate::support::ScrubEnv;
use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use serde_json::Value;
use std::path::Path;

use crate::support::powercap::{zone, DRAM_MAX, PKG_MAX as MAX};

/// package-0 (1 J) with core and dram sub-zones; dram 1 J below its wrap point.
fn tree(root: &Path) {
    zone(root, "intel-rapl:0", "package-0", 1_000_000, MAX);
    zone(root, "intel-rapl:0:0", "core", 500_000, MAX);
    zone(
        root,
        "intel-rapl:0:2",
        "dram",
        DRAM_MAX - 1_000_000,
        DRAM_MAX,
    );
}

fn amdahl(root: &Path) -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.env("AMDAHL_POWERCAP_ROOT", root)
        .scrub_env()
        .current_dir(root.parent().unwrap());
    c
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn device<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .unwrap()
}

#[test]
fn known_deltas_and_a_wrap_are_reported_exactly() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let out = t.path().join("r.json");
    let script = format!(
        "echo 6000000 > {r}/intel-rapl:0/energy_uj; echo 2000000 > {r}/intel-rapl:0/intel-rapl:0:2/energy_uj; \
         echo 9999999 > {r}/intel-rapl:0/intel-rapl:0:0/energy_uj",
        r = root.display()
    );
    amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success()
        .stderr(contains("counter"));
    let r = json(&out);
    assert_eq!(r["schema"], "amdahl.run/1");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["partial"], false);
    // 6 J − 1 J on the package; dram wrapped: 1 J to the top + 2 J after zero.
    assert_eq!(device(&r, "intel-rapl:0")["energy_j"], 5.0);
    assert_eq!(device(&r, "intel-rapl:0:2")["energy_j"], 3.0);
    assert_eq!(device(&r, "intel-rapl:0")["method"], "counter");
    // The core sub-zone moved too but is inside the package: never a device, never added.
    assert!(r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["name"] != "core"));
    assert_eq!(r["total_energy_j"], 8.0);
    // RAPL alone covers part of the host: never the GPU or the server (wall) scope.
    assert_eq!(
        r["covers"]["parts"],
        "CPU packages (counter) + DRAM (counter)"
    );
    assert_eq!(r["covers"]["scope"], "part-of-host");
    // 8 J = 8/3.6e6 kWh; default PUE 1; 436 g/kWh (Ember 2022 world, life-cycle).
    let kwh = r["energy_kwh"].as_f64().unwrap();
    assert!((kwh - 8.0 / 3.6e6).abs() < 1e-18);
    assert!((r["co2e_g"].as_f64().unwrap() - kwh * 436.0).abs() < 1e-15);
    assert!(r["intensity"]["source"]
        .as_str()
        .unwrap()
        .starts_with("Ember"));
    assert_eq!(r["intensity"]["year"], 2022);
}

#[test]
fn a_zone_that_disappears_keeps_what_was_measured() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    zone(&root, "intel-rapl:1", "psys", 0, MAX);
    let out = t.path().join("r.json");
    let script = format!(
        "echo 4000000 > {r}/intel-rapl:1/energy_uj; sleep 0.4; rm -r {r}/intel-rapl:1; sleep 0.3",
        r = root.display()
    );
    amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let r = json(&out);
    let psys = device(&r, "intel-rapl:1");
    assert_eq!(psys["energy_j"], 4.0);
    assert!(
        psys["note"].as_str().unwrap().contains("unreadable"),
        "{psys}"
    );
    // psys covers the platform: the package and dram leave the total.
    assert_eq!(device(&r, "intel-rapl:0")["in_total"], false);
    assert_eq!(r["total_energy_j"], 4.0);
}

#[test]
fn permission_denied_is_detected_with_the_fix() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // chmod 000 does not stop root; the injected-EACCES tests in amdahl-meter cover this.
        eprintln!("skipped: running as root");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let f = root.join("intel-rapl:0/energy_uj");
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    amdahl(&root)
        .args(["run", "--no-gpu", "--", "true"])
        .assert()
        .success()
        .stderr(contains("CVE-2020-8694").and(contains("chmod")));
}

#[test]
fn exit_codes_are_propagated() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    for (cmd, code) in [("exit 0", 0), ("exit 1", 1), ("kill -9 $$", 137)] {
        amdahl(&root)
            .args(["run", "--no-gpu", "--", "sh", "-c", cmd])
            .assert()
            .code(code);
    }
    // The `--` is optional: everything after the first non-option word is the command.
    amdahl(&root)
        .args(["run", "--no-gpu", "sh", "-c", "exit 5"])
        .assert()
        .code(5);
}

#[test]
fn command_not_found_is_127_with_a_message() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    amdahl(&root)
        .args(["run", "--no-gpu", "--", "amdahl-surely-not-a-command"])
        .assert()
        .code(127)
        .stderr(contains("command not found").and(contains("amdahl-surely-not-a-command")));
}

#[test]
fn bad_input_fails_before_the_command_starts() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let marker = t.path().join("ran");
    let touch = format!("touch {}", marker.display());
    amdahl(&root)
        .args(["run", "--interval", "0s", "--", "sh", "-c", &touch])
        .assert()
        .code(2)
        .stderr(contains("greater than zero"));
    // A path below a regular file cannot be created, even by root.
    let file = t.path().join("file");
    std::fs::write(&file, "x").unwrap();
    for flag in ["-o", "--log", "--codecarbon-csv"] {
        amdahl(&root)
            .args(["run", "--no-gpu", flag])
            .arg(file.join("out"))
            .args(["--", "sh", "-c", &touch])
            .assert()
            .code(1)
            .stderr(contains("cannot write"));
    }
    amdahl(&root)
        .args([
            "run", "--no-gpu", "--region", "atlantis", "--", "sh", "-c", &touch,
        ])
        .assert()
        .code(1)
        .stderr(contains("unknown grid region `atlantis`").and(contains("did you mean")));
    // Regression: a FIFO as --progress-file hung before the command started (opening a FIFO
    // for reading waits for a writer) and ignored SIGINT/SIGTERM. Now refused at once; the
    // timeout turns a regression into a failure, not a stuck suite.
    let fifo = t.path().join("progress.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    amdahl(&root)
        .args(["run", "--no-gpu", "--total-steps", "10", "--progress-file"])
        .arg(&fifo)
        .args(["--", "sh", "-c", &touch])
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(1)
        .stderr(contains("not a regular file").and(contains("--progress-regex")));
    assert!(!marker.exists(), "the command ran despite bad input");
}

#[test]
fn no_sensor_runs_anyway_with_estimates() {
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = t.path().join("r.json");
    amdahl(&empty)
        .args([
            "run",
            "--no-gpu",
            "--cpu-tdp",
            "100",
            "--scope",
            "process",
            "-o",
        ])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(contains("running anyway with estimates"));
    let r = json(&out);
    for d in r["devices"].as_array().unwrap() {
        assert_eq!(d["method"], "estimate");
    }
}

#[test]
fn process_scope_never_exceeds_the_machine() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let out = t.path().join("r.json");
    let script = format!(
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo 50000000 > {r}/intel-rapl:0/energy_uj",
        r = root.display()
    );
    amdahl(&root)
        .args(["run", "--no-gpu", "--scope", "process", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let r = json(&out);
    let pkg = device(&r, "intel-rapl:0");
    assert_eq!(pkg["machine_energy_j"], 49.0);
    let e = pkg["energy_j"].as_f64().unwrap();
    assert!((0.0..=49.0).contains(&e), "{e}");
    let share = r["process_share"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&share));
}

#[test]
fn sigint_leaves_a_complete_partial_result_and_an_intact_log() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, log) = (t.path().join("r.json"), t.path().join("s.jsonl"));
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("amdahl"))
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .args(["run", "--no-gpu", "--interval", "100ms", "-o"])
        .arg(&out)
        .arg("--log")
        .arg(&log)
        .args(["--", "sleep", "30"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the handlers are installed and sampling runs: the log holds the header and a
    // first sample (written after the signal handlers are in place). Then a few more samples.
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
        < 2
    {
        assert!(t0.elapsed().as_secs() < 20, "amdahl did not start sampling");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: the pid is our live child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    // sleep dies of the forwarded SIGINT: 128 + 2.
    assert_eq!(status.code(), Some(130));
    let r = json(&out);
    assert_eq!(r["partial"], true);
    assert_eq!(r["interrupted_by"], "SIGINT");
    assert_eq!(r["exit_code"], 130);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["schema"], "amdahl.samples/1");
    // Header, the first sample, periodic ones, and the final one taken after the child died.
    assert!(lines.len() >= 3, "{} lines", lines.len());
    let last = lines.last().unwrap();
    assert!(last["t_s"].as_f64().unwrap() >= 0.3);
    assert_eq!(last["t_s"], r["duration_s"]);
    assert!(text.ends_with('\n'));
}

#[test]
fn codecarbon_csv_has_the_3x_header_and_appends() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let csv = t.path().join("emissions.csv");
    for _ in 0..2 {
        amdahl(&root)
            .args(["run", "--no-gpu", "--codecarbon-csv"])
            .arg(&csv)
            .args(["--", "true"])
            .assert()
            .success();
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,water_consumed,country_name,country_iso_code,region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,cpu_utilization_percent,gpu_utilization_percent,ram_utilization_percent,ram_used_gb,on_cloud,pue,wue");
    assert_eq!(lines.len(), 3);
}

/// The columns of one CSV row by header name.
fn csv_rows(text: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head = r.headers().unwrap().clone();
    r.records()
        .map(|row| {
            let row = row.unwrap();
            head.iter()
                .zip(row.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// `MemTotal` of this machine in bytes.
fn mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    amdahl_meter::procfs::parse_mem_total(&text).unwrap()
}

/// Regression: the CodeCarbon row said `ram_total_size` 25.3 (decimal GB) where CodeCarbon 3.3.2
/// writes 23.5 (GiB), estimated RAM at 0.375 W/GB (9.5 W here) where CodeCarbon 3.3.2's DIMM
/// rule gives 20 W, and left the utilisation columns 0 and `codecarbon_version` a bare amdahl
/// version. With only a package zone (no dram), RAM is estimated: ram_power is the 3.3.2 rule for
/// this machine's MemTotal (constant, so the average equals it within the integration's 1 %), the
/// machine's RAM utilisation and used GiB are filled, CPU utilisation is a percentage.
#[test]
fn codecarbon_row_has_codecarbon_3_3_2_units_rule_and_utilisation() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    crate::support::powercap::package(&root);
    let csv = t.path().join("emissions.csv");
    let out = t.path().join("r.json");
    amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .arg("--codecarbon-csv")
        .arg(&csv)
        .args(["--", "sleep", "0.3"])
        .assert()
        .success();
    let rows = csv_rows(&std::fs::read_to_string(&csv).unwrap());
    let row = &rows[0];
    let num = |k: &str| {
        row[k]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{k}: {}", row[k]))
    };
    let gib = mem_total() as f64 / 1024f64.powi(3);
    assert!(
        (num("ram_total_size") / gib - 1.0).abs() < 1e-9,
        "{} vs {gib}",
        row["ram_total_size"]
    );
    let rule = amdahl_meter::estimate::ram_watts(gib, amdahl_meter::estimate::ARM).get();
    assert!(
        (num("ram_power") / rule - 1.0).abs() < 0.01,
        "{} vs {rule}",
        row["ram_power"]
    );
    assert!(num("ram_utilization_percent") > 0.0 && num("ram_utilization_percent") <= 100.0);
    assert!(num("ram_used_gb") > 0.0 && num("ram_used_gb") < gib);
    assert!((0.0..=100.0).contains(&num("cpu_utilization_percent")));
    assert_eq!(row["python_version"], "");
    assert_eq!(
        row["codecarbon_version"],
        format!("3.3.2+amdahl.{}", env!("CARGO_PKG_VERSION"))
    );
    let r = json(&out);
    assert_eq!(
        r["utilization"]["ram_used_gib"]
            .as_f64()
            .unwrap()
            .to_string(),
        row["ram_used_gb"]
    );
}

/// Regression: a CSV an older CodeCarbon started was refused. A CodeCarbon 2.8.4 header (its
/// `EmissionsData` fields: 32 columns, without water_consumed, wue and the four utilisation
/// columns) now gets amdahl's row in those 32 columns, each under its own name, with a note.
#[test]
fn codecarbon_csv_of_codecarbon_2_8_keeps_its_32_columns() {
    const HEADER_2_8_4: &str = "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,on_cloud,pue";
    assert_eq!(HEADER_2_8_4.split(',').count(), 32);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let csv = t.path().join("emissions.csv");
    std::fs::write(&csv, format!("{HEADER_2_8_4}\n")).unwrap();
    amdahl(&root)
        .args(["run", "--no-gpu", "--pue", "1.25", "--codecarbon-csv"])
        .arg(&csv)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(contains(
            "older CodeCarbon header (32 of CodeCarbon 3.3.2's 38 columns)",
        ));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().next().unwrap(), HEADER_2_8_4);
    let rows = csv_rows(&text);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].len(), 32);
    assert_eq!(rows[0]["pue"], "1.25");
    assert_eq!(rows[0]["tracking_mode"], "machine");
    assert_eq!(rows[0]["on_cloud"], "N");
    // A header with a column CodeCarbon never wrote is refused before the command runs.
    let bad = t.path().join("bad.csv");
    std::fs::write(&bad, "timestamp,my_column\n").unwrap();
    amdahl(&root)
        .args(["run", "--no-gpu", "--codecarbon-csv"])
        .arg(&bad)
        .args(["--", "true"])
        .assert()
        .code(1)
        .stderr(contains("CodeCarbon never wrote (my_column)"));
}

#[test]
fn a_non_zero_local_rank_only_references_the_node() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let out = t.path().join("r.json");
    amdahl(&root)
        .env("SLURM_PROCID", "3")
        .env("SLURM_LOCALID", "1")
        .env("SLURM_JOB_ID", "4242")
        .args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(contains("local rank 0"));
    let r = json(&out);
    assert_eq!(r["cluster"]["role"], "reference");
    assert_eq!(r["cluster"]["job_id"], "4242");
    assert_eq!(r["cluster"]["rank"], 3);
    assert_eq!(r["devices"].as_array().unwrap().len(), 0);
}

#[test]
fn baseline_is_measured_before_the_command_and_subtracted() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let out = t.path().join("r.json");
    // Idle counters do not move during the baseline: idle power 0 W, so net = total = 5 J.
    let script = format!("echo 6000000 > {}/intel-rapl:0/energy_uj", root.display());
    amdahl(&root)
        .args(["run", "--no-gpu", "--baseline", "200ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success()
        .stderr(contains("idle baseline"));
    let r = json(&out);
    assert_eq!(r["baseline"]["power_w"], 0.0);
    assert!(r["baseline"]["duration_s"].as_f64().unwrap() >= 0.2);
    assert_eq!(r["baseline"]["net_energy_j"], r["total_energy_j"]);
    assert_eq!(device(&r, "intel-rapl:0")["energy_j"], 5.0);
    amdahl(&root)
        .args([
            "run",
            "--no-gpu",
            "--baseline",
            "1s",
            "--scope",
            "process",
            "--",
            "true",
        ])
        .assert()
        .code(1);
}

#[test]
fn process_scope_sees_cpu_time_of_orphaned_descendants() {
    // `yes` is started in the background and killed by a shell that exits without waiting for
    // it: its CPU time reaches amdahl only because amdahl is the tree's subreaper and scans it.
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = t.path().join("r.json");
    amdahl(&empty)
        .args([
            "run",
            "--no-gpu",
            "--cpu-tdp",
            "100",
            "--scope",
            "process",
            "--interval",
            "100ms",
            "-o",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", "yes > /dev/null & sleep 0.5; kill $!"])
        .assert()
        .success();
    let r = json(&out);
    // Even on a loaded 2-core machine `yes` gets well over two 10 ms ticks in 0.5 s.
    assert!(
        r["cpu_time_s"].as_f64().unwrap() > 0.02,
        "{}",
        r["cpu_time_s"]
    );
    assert!(device(&r, "estimate:cpu")["energy_j"].as_f64().unwrap() > 0.0);
}

/// `--prometheus FILE`: node_exporter's textfile collector reads the same exact energies as the
/// JSON (package 6 J − 1 J, dram wrapped 1 J + 2 J: 8 J), and the run is marked finished.
#[test]
fn prometheus_textfile_carries_the_exact_energies() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let prom = t.path().join("amdahl.prom");
    let script = format!(
        "echo 6000000 > {r}/intel-rapl:0/energy_uj; echo 2000000 > {r}/intel-rapl:0/intel-rapl:0:2/energy_uj",
        r = root.display()
    );
    amdahl(&root)
        .args(["run", "--no-gpu", "--interval", "50ms", "--prometheus"])
        .arg(&prom)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let text = std::fs::read_to_string(&prom).unwrap();
    let value = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("amdahl_run_energy_joules{"), 8.0);
    assert_eq!(value("amdahl_run_partial{"), 0.0);
    assert!(
        text.contains(
            r#"device="intel-rapl:0",kind="cpu-package",method="counter",in_total="true"} 5"#
        ),
        "{text}"
    );
    // An unwritable path fails before the command starts.
    let marker = t.path().join("ran");
    amdahl(&root)
        .args([
            "run",
            "--no-gpu",
            "--prometheus",
            "/proc/version/amdahl.prom",
            "--",
            "touch",
        ])
        .arg(&marker)
        .assert()
        .code(1)
        .stderr(contains("Prometheus textfile"));
    assert!(
        !marker.exists(),
        "the command ran despite an unwritable --prometheus path"
    );
}

/// Regression: without `--cpu-tdp` an unknown CPU was charged 85 W, "CodeCarbon's
/// default for unknown CPUs". Now the record says which catalog row the estimate used, or that
/// the 4 W-per-logical-CPU fallback was, whatever CPU this test runs on.
#[test]
fn cpu_estimate_names_its_catalog_row_or_the_fallback() {
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = t.path().join("r.json");
    amdahl(&empty)
        .args(["run", "--no-gpu", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success()
        .stderr(contains("CPU estimate: ").and(contains("CodeCarbon's default").not()));
    let r = json(&out);
    let first = r["warnings"][0].as_str().unwrap_or_default();
    assert!(
        first.starts_with("CPU estimate: ")
            && (first.contains(" matched ") || first.contains("fallback")),
        "{first}"
    );
}

#[test]
fn a_progress_file_projects_the_whole_run() {
    // 5 of 20 steps, each drawing 1 J in 10 advances of 0.1 J over ~0.2 s, then appending its
    // count to the progress file: the whole run projects to 20 J. Tolerance 10 %: the counter
    // moves in steps of 10 % of a unit, the resolution unit boundaries are interpolated to.
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, progress) = (t.path().join("r.json"), t.path().join("progress"));
    let script = format!(
        "f={r}/intel-rapl:0/energy_uj; for i in 1 2 3 4 5; do for k in 1 2 3 4 5 6 7 8 9 10; do \
         sleep 0.02; v=$(cat $f); echo $((v + 100000)) > $f.t; mv $f.t $f; done; echo \"step $i\" >> {p}; done; sleep 0.1",
        r = root.display(),
        p = progress.display()
    );
    amdahl(&root)
        .args([
            "run",
            "--no-gpu",
            "--interval",
            "20ms",
            "--total-steps",
            "20",
            "--progress-file",
        ])
        .arg(&progress)
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let r = json(&out);
    assert_eq!(r["total_energy_j"], 5.0);
    let p = &r["projection"];
    assert_eq!(
        (
            p["unit"].as_str(),
            p["units_done"].as_u64(),
            p["units_total"].as_u64()
        ),
        (Some("step"), Some(5), Some(20))
    );
    let e = p["energy_j"].as_f64().unwrap();
    assert!((e - 20.0).abs() <= 2.0, "projected {e} J");
    // 20 J at PUE 1 and 436 g/kWh.
    let kg = p["co2e_kg"].as_f64().unwrap();
    assert!((kg - e / 3.6e6 * 0.436).abs() < 1e-12);
    let [lo, hi] =
        [&p["energy_interval_j"][0], &p["energy_interval_j"][1]].map(|v| v.as_f64().unwrap());
    assert!(lo <= e && e <= hi);
}

/// Regression: a progress file left by an earlier run, already at the total, projected 0 s
/// and 0 J while the run drew energy. The projection is at least what was measured (3 J here:
/// 3 advances of 1 J), and the stale count is a warning, on stderr and in the record.
#[test]
fn a_stale_progress_file_never_projects_below_the_measured_energy() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, progress) = (t.path().join("r.json"), t.path().join("progress"));
    std::fs::write(&progress, "900\n").unwrap();
    // The file's time must lie before the run's start.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let script = format!(
        "f={r}/intel-rapl:0/energy_uj; for k in 1 2 3; do sleep 0.05; v=$(cat $f); \
         echo $((v + 1000000)) > $f.t; mv $f.t $f; done; sleep 0.1",
        r = root.display(),
    );
    amdahl(&root)
        .args([
            "run",
            "--no-gpu",
            "--interval",
            "20ms",
            "--total-steps",
            "900",
        ])
        .arg("--progress-file")
        .arg(&progress)
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success()
        .stderr(contains(
            "warning: projection: the step count 900 was reached before the run started",
        ));
    let r = json(&out);
    assert_eq!(r["total_energy_j"], 3.0);
    let p = &r["projection"];
    assert_eq!(p["energy_j"], 3.0, "{p}");
    assert!(p["duration_s"].as_f64().unwrap() >= r["duration_s"].as_f64().unwrap() - 0.05);
    assert!(p["warnings"][0].as_str().unwrap().contains("earlier run"));
}

#[test]
fn progress_flags_need_each_other() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    amdahl(&root)
        .args(["run", "--total-steps", "10", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("--progress-file"));
    amdahl(&root)
        .args([
            "run",
            "--total-steps",
            "0",
            "--progress-file",
            "p",
            "--",
            "true",
        ])
        .assert()
        .code(2);
}

#[test]
fn a_project_names_the_record_and_the_codecarbon_row() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    tree(&root);
    let (out, csv) = (t.path().join("r.json"), t.path().join("emissions.csv"));
    for project in [Some("bert, large"), None] {
        let mut c = amdahl(&root);
        c.args(["run", "--no-gpu", "-o"]).arg(&out);
        c.arg("--codecarbon-csv").arg(&csv);
        if let Some(p) = project {
            c.args(["--project", p]);
        }
        c.args(["--", "true"]).assert().success();
        assert_eq!(json(&out).get("project").and_then(Value::as_str), project);
    }
    // The CSV quotes the comma; without --project the row names amdahl, as before.
    let rows: Vec<csv::StringRecord> = csv::Reader::from_path(&csv)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.get(1).unwrap()).collect();
    assert_eq!(names, ["bert, large", "amdahl"]);
    amdahl(&root)
        .args(["run", "--project", "", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("--project"));
}
