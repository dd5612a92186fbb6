//! `amdahl bench` end to end, at `--quick` sizes so the suite stays fast.

use amdahl_meter::rapl;
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Without a powercap tree, so no test depends on this machine's RAPL counters.
fn amdahl() -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.env("AMDAHL_POWERCAP_ROOT", "/nonexistent/amdahl-test-powercap");
    c
}

fn json(args: &[&str]) -> Value {
    let out = amdahl().args(args).arg("--json").assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn gemm_quick_json_checks_every_precision() {
    let v = json(&[
        "bench",
        "gemm",
        "--quick",
        "--sizes",
        "32",
        "--repeats",
        "1",
    ]);
    assert_eq!(v["schema"], "amdahl.bench.gemm/1");
    let checks = v["verification"].as_array().unwrap();
    assert_eq!(checks.len(), 5);
    assert!(checks.iter().all(|c| c["passed"] == true));
    let rows = v["rows"].as_array().unwrap();
    // 5 precisions × 1 size × {1, all} threads (1 row per precision on a 1-CPU machine).
    assert!(rows.len() == 10 || rows.len() == 5, "{}", rows.len());
    // 2·n³ operations, and energy is "not measured" (null), never a number we made up.
    assert_eq!(rows[0]["work"], 2.0 * 32f64.powi(3));
    assert!(rows.iter().all(|r| r["energy"].is_null()));
    assert_eq!(v["energy"]["status"], "not_measured");
    let bf16 = v["precisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["precision"] == "bf16")
        .unwrap();
    assert_eq!(bf16["native"], false);
}

#[test]
fn gemm_table_says_what_is_emulated() {
    amdahl()
        .args([
            "bench",
            "gemm",
            "--quick",
            "--sizes",
            "16",
            "--precision",
            "bf16,int8",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("bf16  EMULATED"))
        .stdout(predicate::str::contains("not measured"));
}

#[test]
fn memory_quick_counts_stream_bytes() {
    let n = 20_000.0;
    let v = json(&["bench", "memory", "--quick", "--sizes", "20000"]);
    assert_eq!(v["schema"], "amdahl.bench.memory/1");
    assert_eq!(v["validated"], true);
    // McCalpin: copy and scale move 2 arrays, add and triad 3, of 8-byte elements.
    let want = [2.0, 2.0, 3.0, 3.0].map(|a| a * 8.0 * n);
    let got: Vec<f64> = v["stream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["bytes"].as_f64().unwrap())
        .collect();
    assert_eq!(got, want);
    assert!(!v["sweep"].as_array().unwrap().is_empty());
}

#[test]
fn sparse_quick_csv_has_a_row_per_sparsity() {
    let out = amdahl()
        .args([
            "bench",
            "sparse",
            "--quick",
            "--sizes",
            "40",
            "--sparsity",
            "0,0.9",
            "--csv",
        ])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("sparsity %,nnz"), "{text}");
    assert_eq!(lines.len(), 3);
}

#[test]
fn roofline_quick_writes_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("roof.svg");
    let v = {
        let out = amdahl()
            .args([
                "bench",
                "roofline",
                "--quick",
                "--sizes",
                "48",
                "--repeats",
                "1",
            ])
            .arg("--svg")
            .arg(&svg)
            .arg("--json")
            .assert()
            .success();
        serde_json::from_slice::<Value>(&out.get_output().stdout).unwrap()
    };
    assert_eq!(v["schema"], "amdahl.bench.roofline/1");
    let roof = &v["roofs"][0];
    let ridge = roof["peak"].as_f64().unwrap() / v["bandwidth"].as_f64().unwrap();
    assert!((roof["ridge"].as_f64().unwrap() - ridge).abs() <= 1e-9 * ridge);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("ridge"));
}

#[test]
fn scaling_quick_reports_karp_flatt_per_thread_count() {
    let v = json(&[
        "bench",
        "scaling",
        "--quick",
        "--sizes",
        "48",
        "--repeats",
        "1",
    ]);
    assert_eq!(v["schema"], "amdahl.bench.scaling/1");
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    for s in series {
        let pts = s["points"].as_array().unwrap();
        assert_eq!(pts[0]["threads"], 1);
        assert_eq!(pts[0]["speedup"], 1.0);
        assert!(pts[0]["karp_flatt"].is_null());
        let a = &s["analysis"];
        assert_eq!(a["n_counts"], "threads");
        // Fewer than 3 thread counts (this project's CI has 2 cores): the fitter's reason, no
        // number; otherwise the fitted model.
        if pts.len() < 3 {
            assert!(a["fit"].is_null(), "{a}");
            let why = a["no_fit"].as_str().unwrap();
            let head = format!(
                "no fit possible with {} points; per-point Karp–Flatt only",
                pts.len()
            );
            assert!(why.starts_with(&head), "{why}");
        } else {
            assert!(a["fit"]["serial_fraction"].is_number(), "{a}");
        }
    }
}

#[test]
fn bad_sizes_are_refused_with_exit_1() {
    for size in ["0", "-3"] {
        amdahl()
            .args(["bench", "gemm", "--sizes", size])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "--sizes must be a positive integer",
            ));
    }
    amdahl()
        .args(["bench", "gemm", "--sizes", "300000", "--precision", "fp64"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("GiB of memory"));
    amdahl()
        .args(["bench", "memory", "--sizes", "100000000000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("GiB of memory"));
}

#[test]
fn unknown_precision_and_bad_threads_are_errors() {
    amdahl()
        .args(["bench", "gemm", "--quick", "--precision", "fp8"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("unknown precision `fp8`"));
    amdahl()
        .args(["bench", "gemm", "--quick", "--threads", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "--threads must be a positive integer",
        ));
    amdahl()
        .args(["bench", "sparse", "--quick", "--sparsity", "1.5"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("outside [0, 1)"));
}

#[test]
fn too_many_threads_warns_and_caps() {
    let out = amdahl()
        .args([
            "bench",
            "gemm",
            "--quick",
            "--sizes",
            "16",
            "--precision",
            "fp32",
        ])
        .args(["--threads", "100000", "--json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: --threads 100000 exceeds",
        ));
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["machine"]["threads"]["capped_from"], 100000);
}

/// A fake powercap tree (the real sysfs layout) whose package counter a thread advances by
/// 1 mJ every step, written atomically (temp file + rename) so a read never sees half a number.
struct MovingCounter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

const START_UJ: u64 = 1_000_000;

impl MovingCounter {
    fn start(root: &Path) -> Self {
        rapl::fake::zone(root, "intel-rapl:0", "package-0", START_UJ, 262_143_328_850).unwrap();
        let dir = root.join("intel-rapl:0");
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut uj = START_UJ;
            while !s.load(Ordering::SeqCst) {
                uj += 1_000;
                std::fs::write(dir.join("energy_uj.tmp"), format!("{uj}\n")).unwrap();
                std::fs::rename(dir.join("energy_uj.tmp"), dir.join("energy_uj")).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
            uj
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop the thread; the counter's total advance in joules.
    fn finish(mut self) -> f64 {
        self.stop.store(true, Ordering::SeqCst);
        let last = self.thread.take().unwrap().join().unwrap();
        (last - START_UJ) as f64 / 1e6
    }
}

/// Energy per FLOP comes from the package counter's delta over the timed repeats: each row's
/// J/FLOP × 2n³ is its J per run, and all rows together never exceed what the counter moved.
#[test]
fn energy_per_flop_comes_from_the_rapl_counter_delta() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    let counter = MovingCounter::start(&root);
    // n = 512 for 20 repeats: 5.4 GFLOP, ≥ 10 ms of timed runs (the shortest interval the probe
    // reads) below ~500 GFLOP/s on one thread.
    let out = Command::cargo_bin("amdahl")
        .unwrap()
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .args([
            "bench",
            "gemm",
            "--quick",
            "--precision",
            "fp32",
            "--sizes",
            "512",
            "--repeats",
            "20",
            "--threads",
            "1",
            "--json",
        ])
        .assert()
        .success();
    let moved = counter.finish();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["energy"]["status"], "measured", "{}", v["energy"]);
    // No dram zone: the meter estimates RAM, which is left out of the figure and named.
    assert_eq!(
        v["energy"]["source"],
        "intel-rapl:0 package-0 (counter); left out (estimate only: CPU time × TDP share): estimate:ram"
    );
    let mut sum = 0.0;
    for r in v["rows"].as_array().unwrap() {
        let e = &r["energy"];
        assert_eq!(e["unit"], "J/FLOP", "{r}");
        let per_flop = e["joules_per_unit"].as_f64().unwrap();
        let per_run = e["joules_per_run"].as_f64().unwrap();
        assert!(per_flop > 0.0, "{r}");
        assert!((per_flop * 2.0 * 512f64.powi(3) - per_run).abs() <= 1e-12 * per_run);
        sum += per_run * r["seconds"]["repeats"].as_f64().unwrap();
    }
    assert!(
        sum > 0.0 && sum <= moved + 1e-9,
        "{sum} J measured, counter moved {moved} J"
    );
}

/// No readable counter (an empty powercap root, given as the flag): the meter only estimates,
/// and the output says "not measured" with the reason — no number.
#[test]
fn without_a_counter_energy_is_not_measured() {
    let t = tempfile::tempdir().unwrap();
    amdahl()
        .args(["bench", "memory", "--quick", "--powercap-root"])
        .arg(t.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "energy: not measured (estimate only: CPU time × TDP share)",
        ))
        .stdout(predicate::str::contains("J/B").not())
        .stderr(predicate::str::contains(
            "energy per benchmark not measured",
        ));
}

#[test]
fn bench_repeats_above_the_cap_is_refused_before_running() {
    // Regression: `bench gemm --repeats 100000000` kept every sample (~18 bytes each).
    Command::cargo_bin("amdahl")
        .unwrap()
        .args(["bench", "gemm", "--quick", "--repeats", "100000000"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cap of 1000000"));
}

/// A fake powercap tree whose package counter a thread advances at `watts` in real time (every
/// millisecond, written atomically), as RAPL does under a steady draw.
struct RateCounter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RateCounter {
    fn start(root: &Path, watts: f64) -> Self {
        rapl::fake::zone(root, "intel-rapl:0", "package-0", START_UJ, 262_143_328_850).unwrap();
        let dir = root.join("intel-rapl:0");
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let t0 = std::time::Instant::now();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let uj = START_UJ + (watts * 1e6 * t0.elapsed().as_secs_f64()) as u64;
                std::fs::write(dir.join("energy_uj.tmp"), format!("{uj}\n")).unwrap();
                std::fs::rename(dir.join("energy_uj.tmp"), dir.join("energy_uj")).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for RateCounter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `--profile-out` reads idle power across the quiet window before the GEMMs: a counter that
/// advances 30 J/s gives 30 W idle, and the same counter under the GEMM gives 30 W loaded (the
/// fake does not know about the load; the point is that both come from the counter's rate).
#[test]
fn a_profile_holds_the_idle_power_of_the_rapl_counter() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("powercap");
    let profile = t.path().join("cpu.json");
    let counter = RateCounter::start(&root, 30.0);
    // n = 512 for 100 repeats: ≥ 50 ms of timed runs (see the test above), so the GEMM's energy
    // is read too, over a window long enough that the fake's writer thread, held off a busy CPU
    // for a few milliseconds at one end of it, moves the rate by a few per cent (over 20 repeats
    // it read 33.5 W once, in a clean-clone CI run with the Python tests beside it).
    Command::cargo_bin("amdahl")
        .unwrap()
        .env("AMDAHL_POWERCAP_ROOT", &root)
        .args([
            "bench",
            "gemm",
            "--quick",
            "--precision",
            "fp32",
            "--sizes",
            "512",
        ])
        .args(["--repeats", "100", "--threads", "1", "--power-window", "1"])
        .arg("--profile-out")
        .arg(&profile)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "reading idle power for 1 s before the benchmark",
        ));
    drop(counter);
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    let idle = p["power"]["idle_w"].as_f64().unwrap();
    // The writer thread steps every millisecond: a reading lags by one step at most (0.03 J
    // over the 1 s window) unless the machine is busy; 10 % leaves room for that.
    assert!((idle - 30.0).abs() < 3.0, "idle {idle} W");
    let compute = p["power"]["compute_w"].as_f64().unwrap();
    assert!((compute - 30.0).abs() < 3.0, "compute {compute} W");
    assert!(p["power"].get("memory_w").is_none());
    assert!(p["power"]["method"]
        .as_str()
        .unwrap()
        .starts_with("intel-rapl:0 package-0 (counter)"));
    let notes = p["notes"].to_string();
    assert!(notes.contains(" W during idle over 1.0"), "{notes}");
    assert!(
        notes.contains(" W during fp32 GEMM n=512 on 1 thread over "),
        "{notes}"
    );
    assert!(
        notes.contains("power.memory_w: this benchmark runs no such load"),
        "{notes}"
    );
}

/// Without a readable counter the profile has no idle power — the notes say why — and the
/// window is not waited for.
#[test]
fn a_profile_without_a_counter_has_no_idle_power() {
    let t = tempfile::tempdir().unwrap();
    let profile = t.path().join("mem.json");
    amdahl()
        .args(["bench", "memory", "--quick", "--power-window", "600"])
        .arg("--powercap-root")
        .arg(t.path())
        .arg("--profile-out")
        .arg(&profile)
        .timeout(Duration::from_secs(300))
        .assert()
        .success()
        .stderr(predicate::str::contains("reading idle power").not());
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    for f in ["idle_w", "compute_w", "memory_w"] {
        assert!(p["power"].get(f).is_none(), "{}", p["power"]);
    }
    let notes = p["notes"].to_string();
    assert!(
        notes.contains("power.idle_w: not measured: estimate only"),
        "{notes}"
    );
    assert!(
        notes.contains("power.memory_w: not measured: estimate only"),
        "{notes}"
    );
    assert_eq!(
        p["power"]["method"],
        "not measured: estimate only: CPU time × TDP share"
    );
}

#[test]
fn power_window_without_a_profile_is_refused() {
    for what in ["gemm", "memory", "sparse"] {
        amdahl()
            .args(["bench", what, "--quick", "--power-window", "1"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "reads idle power only for a device profile",
            ));
    }
    amdahl()
        .args(["bench", "gemm", "--power-window", "soon"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--power-window"));
}

/// The smallest `bench gemm` and `bench memory` runs that write a profile (`--profile-out` and
/// more flags after these).
fn profile_bench(dir: &Path, what: &str) -> Command {
    let mut c = amdahl();
    c.current_dir(dir)
        .args(["bench", what, "--quick", "--repeats", "1"]);
    match what {
        "gemm" => c.args(["--sizes", "16,32", "--precision", "fp32", "--threads", "1"]),
        _ => c.args(["--sizes", "20000"]),
    };
    c
}

/// A CPU profile is whole only with both benchmarks: `bench gemm` then `bench memory` with one
/// `--profile-out` give one profile with the GEMM curve and the bandwidth, which `calibrate`,
/// `carbon` and `plan` read.
#[test]
fn gemm_then_memory_merge_into_one_profile() {
    let t = tempfile::tempdir().unwrap();
    profile_bench(t.path(), "gemm")
        .args(["--profile-system", "epyc-7763", "--profile-out", "cpu.json"])
        .assert()
        .success()
        .stderr(predicate::str::contains("amdahl: wrote cpu.json"));
    // No --profile-system this time: the file's catalog device is kept.
    profile_bench(t.path(), "memory")
        .args(["--profile-out", "cpu.json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "amdahl: merged bench memory into cpu.json (kept: GEMM curve (fp32) from bench gemm)",
        ))
        .stderr(predicate::str::contains("wrote cpu.json").not());
    let text = std::fs::read_to_string(t.path().join("cpu.json")).unwrap();
    let p: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(p["schema"], "amdahl.device-profile/1");
    assert_eq!(p["system"], "EPYC 7763");
    let rate = p["gemm"][0]["sustained_flops_per_s"].as_f64().unwrap();
    assert!(rate > 0.0);
    assert!(p["memory_bandwidth"].as_f64().unwrap() > 0.0);
    let notes = p["notes"].to_string();
    assert!(!notes.contains("profile with `bench memory`"), "{notes}");
    assert!(!notes.contains("GEMM: not measured"), "{notes}");
    assert!(!notes.contains("runs no such load"), "{notes}");
    let runs: Vec<(&str, &Value)> = p["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["bench"].as_str().unwrap(), &b["figures"]))
        .collect();
    assert_eq!(
        runs,
        [
            ("bench gemm", &serde_json::json!(["gemm fp32"])),
            ("bench memory", &serde_json::json!(["memory_bandwidth"])),
        ]
    );
    assert_eq!(p["benchmarks"][0]["threads"], 1);

    // calibrate's GEMM rows on the merged profile: the GEMM curve is still there.
    let t_of = |n: f64| 1e-3 + 2.0 * n.powi(3) / (0.5 * rate);
    // Sizes whose FLOPs outweigh any kernel latency a quick bench on a loaded machine may fit:
    // with 64–192 these tests failed once each in about twenty loaded runs (gemm_efficiency
    // missing from the fit), not reproduced since.
    let rows: String = [512.0, 768.0, 1024.0, 1536.0]
        .iter()
        .map(|n| format!("gemm --n {n},{}\n", t_of(*n)))
        .collect();
    std::fs::write(t.path().join("runs.csv"), format!("command,step_s\n{rows}")).unwrap();
    let out = amdahl()
        .current_dir(t.path())
        .args([
            "calibrate",
            "runs.csv",
            "--device-profile",
            "cpu.json",
            "--json",
        ])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let (eff, _, _) = crate::support::constant(&v, "gemm_efficiency");
    assert!((eff / 0.5 - 1.0).abs() < 1e-3, "{eff}");
    // carbon takes the merged file as a profile of the EPYC 7763; without RAPL it has no power
    // under load, and says so rather than assume one.
    amdahl()
        .current_dir(t.path())
        .args(["carbon", "--device", "epyc-7763", "--hours", "1"])
        .args(["--device-profile", "cpu.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cpu.json: the profile measured no power under load",
        ));
    // plan reads it too, and refuses the CPU (no 16-bit peak in the catalog), naming it.
    amdahl()
        .current_dir(t.path())
        .args([
            "plan",
            "--model",
            "gpt3-125m",
            "--gpus",
            "1",
            "--batch",
            "8",
        ])
        .args(["--system", "epyc-7763", "--device-profile", "cpu.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("EPYC 7763"));

    // The GEMM measured again replaces the older curve; the bandwidth stays.
    profile_bench(t.path(), "gemm")
        .args(["--profile-out", "cpu.json"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "amdahl: merged bench gemm into cpu.json (kept: memory bandwidth from bench memory; \
             replaced: GEMM curve (fp32))",
        ));
    let p: Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("cpu.json")).unwrap()).unwrap();
    let runs: Vec<&str> = p["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["bench"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["bench memory", "bench gemm"]);
    assert_eq!(p["gemm"].as_array().unwrap().len(), 1);
    assert!(p["memory_bandwidth"].as_f64().unwrap() > 0.0);
}

/// `--profile-out` never overwrites what it cannot merge into: a file that is no profile, a
/// profile of another version, host or catalog device. Each is refused before the benchmark
/// runs, exit 1, the file left byte for byte.
#[test]
fn profile_out_refuses_a_file_it_cannot_merge_into() {
    let t = tempfile::tempdir().unwrap();
    profile_bench(t.path(), "gemm")
        .args(["--profile-system", "epyc-7763", "--profile-out", "cpu.json"])
        .assert()
        .success();
    let profile = std::fs::read_to_string(t.path().join("cpu.json")).unwrap();
    let cases = [
        (
            "notes.txt",
            "my notes\n".to_string(),
            "is not a device profile (not JSON",
        ),
        (
            "gemm.json",
            "{\"schema\": \"amdahl.bench.gemm/1\"}".to_string(),
            "the file is an `amdahl.bench.gemm/1`, not an `amdahl.device-profile/1` profile",
        ),
        (
            "v2.json",
            profile.replace("amdahl.device-profile/1", "amdahl.device-profile/2"),
            "the file is an `amdahl.device-profile/2`",
        ),
        (
            "other-host.json",
            profile.replacen("\"host\": \"", "\"host\": \"elsewhere-", 1),
            "the profile's host is `elsewhere-",
        ),
        (
            "other-device.json",
            profile.replacen("\"device\": \"", "\"device\": \"Other ", 1),
            "the profile's device is `Other ",
        ),
    ];
    for (name, text, said) in &cases {
        assert_ne!(text, &profile);
        std::fs::write(t.path().join(name), text).unwrap();
        for what in ["gemm", "memory"] {
            profile_bench(t.path(), what)
                .args(["--profile-out", name])
                .assert()
                .code(1)
                .stderr(predicate::str::contains(format!("--profile-out {name}: ")))
                .stderr(predicate::str::contains(*said))
                .stderr(predicate::str::contains(format!(
                    "give another path, or delete {name}"
                )));
            assert_eq!(&std::fs::read_to_string(t.path().join(name)).unwrap(), text);
        }
    }
    // Another catalog device than the file's.
    profile_bench(t.path(), "memory")
        .args(["--profile-system", "epyc-9654", "--profile-out", "cpu.json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the profile's catalog device (--profile-system) is `EPYC 7763`, this benchmark's is \
             `EPYC 9654`",
        ));
    assert_eq!(
        std::fs::read_to_string(t.path().join("cpu.json")).unwrap(),
        profile
    );
    // No temporary file left beside them.
    let mut names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cpu.json",
            "gemm.json",
            "notes.txt",
            "other-device.json",
            "other-host.json",
            "v2.json"
        ]
    );
}
