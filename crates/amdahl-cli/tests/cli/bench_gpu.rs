//! `amdahl bench gpu` where there is no GPU (CI): clear errors, exit 1, never a panic.

use predicates::prelude::*;

use crate::support::amdahl;

#[test]
fn without_the_feature_it_says_how_to_rebuild() {
    let out = amdahl()
        .args(["bench", "gpu", "--quick", "--json"])
        .assert();
    if cfg!(feature = "cuda") {
        // Built with CUDA: on a machine without a driver this is a clear error; with a GPU it
        // measures. Either way, no panic.
        let code = out.get_output().status.code();
        assert!(matches!(code, Some(0) | Some(1)), "{code:?}");
        out.stderr(predicate::str::contains("panicked").not());
    } else {
        out.code(1).stdout("").stderr(
            "error: built without the `cuda` feature: \
             cargo build --release -p amdahl-cli --features cuda\n",
        );
    }
}

#[test]
fn bad_flags_exit_1_before_any_device_is_touched() {
    for (args, says) in [
        (&["--sizes", "0"][..], "--sizes must be a positive integer"),
        (&["--sizes", "-3"][..], "--sizes must be a positive integer"),
        (&["--precision", "fp8"][..], "unknown GPU precision `fp8`"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--copy-mib", "0"][..], "--copy-mib"),
        (&["--sizes", "4000000000"][..], "out of range"),
        (
            &["--device-mib", "-1"][..],
            "--device-mib -1 is out of range",
        ),
    ] {
        amdahl()
            .args(["bench", "gpu"])
            .args(args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(says));
    }
    // A duration outside its domain is refused by the flag parser (usage error, exit 2).
    amdahl()
        .args(["bench", "gpu", "--min-time", "-2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--min-time"));
    amdahl()
        .args(["bench", "gpu", "--power-window", "-1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--power-window"));
}

#[test]
fn conflicting_flags_are_usage_errors() {
    amdahl()
        .args(["bench", "gpu", "--no-gemm", "--no-copy"])
        .assert()
        .code(2);
}

/// The whole measuring path against a fake driver + cuBLAS compiled from
/// `tests/fixtures/fake_cuda.c` (needs the default `cuda` feature and a C compiler; skipped otherwise).
#[cfg(all(feature = "cuda", target_os = "linux"))]
mod fake_driver {
    use super::*;
    use serde_json::Value;
    use std::path::{Path, PathBuf};

    /// The fake driver as libcuda and libcublas, without NVML.
    fn build_fake(dir: &Path) -> Option<PathBuf> {
        build_fake_with(dir, false)
    }

    /// The fake as libcuda, libcublas and, with `nvml`, libnvidia-ml: links to one file, so the
    /// fake NVML sees what the fake driver runs.
    fn build_fake_with(dir: &Path, nvml: bool) -> Option<PathBuf> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_cuda.c");
        let lib = dir.join("libcuda.so.1");
        let ok = std::process::Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("skipped: no C compiler to build the fake CUDA library");
            return None;
        }
        std::os::unix::fs::symlink("libcuda.so.1", dir.join("libcublas.so.12")).ok()?;
        if nvml {
            std::os::unix::fs::symlink("libcuda.so.1", dir.join("libnvidia-ml.so.1")).ok()?;
        }
        Some(dir.to_path_buf())
    }

    fn gpu(libs: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
        amdahl()
            .env("LD_LIBRARY_PATH", libs)
            .args(["bench", "gpu"])
            .args(args)
            .assert()
    }

    #[test]
    fn measures_checks_and_refuses_through_the_fake_driver() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(libs) = build_fake(tmp.path()) else {
            return;
        };
        let quick = [
            "--quick",
            "--sizes",
            "64,130",
            "--copy-mib",
            "1",
            "--device-mib",
            "2",
            "--repeats",
            "2",
        ];
        let out = gpu(&libs, &[&quick[..], &["--json"]].concat()).success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(v["schema"], "amdahl.bench.gpu/1");
        assert_eq!(v["device"]["name"], "Fake GPU (host memory)");
        assert_eq!(v["device"]["driver_cuda_version"], "12.4");
        // Every precision checked (the fake computes exactly what cuBLAS would: C = Aᵀ·B).
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 6);
        // 6 precisions × 2 sizes, less int8 at n = 130 (not a multiple of 4).
        let gemm = v["gemm"].as_array().unwrap();
        assert_eq!(gemm.len(), 11);
        assert_eq!(gemm[0]["flops_per_run"], 2.0 * 64f64.powi(3));
        assert!(gemm.iter().all(|g| g["copy_share"].as_f64().is_some()));
        assert_eq!(v["not_measured"][0]["what"], "int8 n=130");
        assert_eq!(v["copies"].as_array().unwrap().len(), 4);
        // The device-to-device copy: 2 MiB read and 2 MiB written per copy.
        let d = &v["device_memory"];
        assert_eq!(d["bytes"], 2 << 20);
        assert_eq!(d["bytes_moved"], 2.0 * (2 << 20) as f64);
        let best = d["bandwidth"]["max"].as_f64().unwrap();
        let fastest = d["time"]["min"].as_f64().unwrap();
        assert!(
            (best * fastest / (4 << 20) as f64 - 1.0).abs() < 1e-9,
            "{d}"
        );
        // No NVML here: no power, and why.
        for case in ["idle", "compute", "memory"] {
            assert_eq!(v["power"][case]["status"], "not_measured", "{}", v["power"]);
        }

        gpu(&libs, &quick)
            .success()
            .stdout(predicate::str::contains("host↔device copies"))
            .stdout(predicate::str::contains(
                "device memory: device-to-device copy of 2.000 MiB",
            ))
            .stdout(predicate::str::contains("  idle: not measured ("));
        amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .env("FAKE_WRONG", "1")
            .args(["bench", "gpu"])
            .args(quick)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "gave a wrong result at element (5, 0)",
            ));
        amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .env("FAKE_NODEV", "1")
            .args(["bench", "gpu", "--quick"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("the driver sees no CUDA device"));
        // The fake has 7 GiB free; fp64 at n = 40000 needs 3·40000²·8 B = 35.76 GiB.
        gpu(&libs, &["--sizes", "40000"])
            .code(1)
            .stderr(predicate::str::contains("needs 35.76 GiB of GPU memory"));
        gpu(&libs, &["--device", "3"])
            .code(1)
            .stderr(predicate::str::contains("--device 3 does not exist"));
    }

    #[test]
    fn a_profile_from_the_fake_driver_feeds_plan() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(libs) = build_fake(tmp.path()) else {
            return;
        };
        let profile = tmp.path().join("gpu.json");
        gpu(
            &libs,
            &[
                "--quick",
                "--sizes",
                "64,128",
                "--copy-mib",
                "1",
                "--device-mib",
                "1",
                "--repeats",
                "2",
            ],
        )
        .success();
        amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .args([
                "bench",
                "gpu",
                "--quick",
                "--sizes",
                "64,128",
                "--copy-mib",
                "1",
                "--device-mib",
                "2",
            ])
            .args([
                "--precision",
                "bf16,fp32",
                "--profile-system",
                "a100-80gb",
                "--profile-out",
            ])
            .arg(&profile)
            .assert()
            .success();
        let p: Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
        assert_eq!(p["schema"], "amdahl.device-profile/1");
        assert_eq!(p["kind"], "gpu");
        assert_eq!(p["device"], "Fake GPU (host memory)");
        assert_eq!(p["system"], "A100 SXM4 80GB");
        assert_eq!(p["driver"], "CUDA driver 12.4");
        assert_eq!(p["gemm"].as_array().unwrap().len(), 2);
        assert!(p["host_to_device"].as_f64().unwrap() > 0.0);
        // The device-to-device copy's best bandwidth is the memory bandwidth.
        assert!(p["memory_bandwidth"].as_f64().unwrap() > 0.0);
        // No NVML here: no power figure, and the notes say why for each.
        for f in ["idle_w", "compute_w", "memory_w"] {
            assert!(p["power"].get(f).is_none(), "{}", p["power"]);
            assert!(
                p["notes"]
                    .to_string()
                    .contains(&format!("power.{f}: not measured")),
                "{}",
                p["notes"]
            );
        }
        assert!(p["power"]["method"]
            .as_str()
            .unwrap()
            .starts_with("not measured"));
        amdahl()
            .args([
                "plan",
                "--model",
                "gpt3-125m",
                "--gpus",
                "1",
                "--batch",
                "8",
            ])
            .args(["--system", "a100-80gb", "--device-profile"])
            .arg(&profile)
            .assert()
            .success()
            .stderr(predicate::str::contains(
                "amdahl: A100 SXM4 80GB, profiled on",
            ));
        // Unmatched name, no --profile-system: written, with a warning, and refused by plan.
        let anon = tmp.path().join("anon.json");
        amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .args([
                "bench",
                "gpu",
                "--quick",
                "--sizes",
                "64",
                "--no-copy",
                "--device-mib",
                "0",
                "--profile-out",
            ])
            .arg(&anon)
            .assert()
            .success()
            .stderr(predicate::str::contains("matches no catalogued device"));
        amdahl()
            .args([
                "plan",
                "--model",
                "gpt3-125m",
                "--gpus",
                "1",
                "--batch",
                "8",
                "--device-profile",
            ])
            .arg(&anon)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("matched no catalogued device"));
    }

    /// The power path end to end: the fake NVML's counter runs at 60 W until the first GEMM, at
    /// 400 W from then and at 250 W from the first device-to-device copy, so the idle window,
    /// the GEMM load and the copy load must read exactly those, and the profile must hold them.
    #[test]
    fn power_and_device_memory_through_the_fake_driver_and_nvml() {
        let tmp = tempfile::tempdir().unwrap();
        let Some(libs) = build_fake_with(tmp.path(), true) else {
            return;
        };
        let profile = tmp.path().join("gpu.json");
        let out = amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .env_remove("CUDA_VISIBLE_DEVICES")
            .args(["bench", "gpu", "--quick", "--sizes", "64,96"])
            .args(["--precision", "fp32,bf16", "--copy-mib", "1"])
            .args([
                "--device-mib",
                "4",
                "--repeats",
                "2",
                "--power-window",
                "0.3",
            ])
            .args(["--json", "--profile-system", "a100-80gb", "--profile-out"])
            .arg(&profile)
            .assert()
            .success()
            .stderr(predicate::str::contains(
                "reading the GPU's idle power for 0.3 s",
            ));
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let pw = &v["power"];
        let watts = |case: &str| {
            assert_eq!(pw[case]["status"], "measured", "{pw}");
            assert!(pw[case]["seconds"].as_f64().unwrap() >= 0.3, "{pw}");
            pw[case]["watts"].as_f64().unwrap()
        };
        // Each within 3 % (the window's ends are two clock reads apart from the counter's).
        for (case, want) in [("idle", 60.0), ("compute", 400.0), ("memory", 250.0)] {
            let w = watts(case);
            assert!((w / want - 1.0).abs() < 0.03, "{case}: {w} W, want {want}");
        }
        // The compute load is the largest 16-bit GEMM; the memory load the device copy.
        assert_eq!(pw["compute"]["during"], "bf16 GEMM n=96");
        assert_eq!(pw["memory"]["during"], "device-to-device copy of 4 MiB");
        assert_eq!(
            pw["idle"]["source"],
            "gpu:0 Fake GPU (host memory) (counter)"
        );

        let p: Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
        assert_eq!(p["power"]["idle_w"], pw["idle"]["watts"]);
        assert_eq!(p["power"]["compute_w"], pw["compute"]["watts"]);
        assert_eq!(p["power"]["memory_w"], pw["memory"]["watts"]);
        assert_eq!(
            p["power"]["method"],
            "gpu:0 Fake GPU (host memory) (counter)"
        );
        assert_eq!(
            p["memory_bandwidth"],
            v["device_memory"]["bandwidth"]["max"]
        );
        assert!(
            !p["notes"].to_string().contains("not measured"),
            "{}",
            p["notes"]
        );
        // The table says the same.
        amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .args([
                "bench",
                "gpu",
                "--quick",
                "--sizes",
                "64",
                "--precision",
                "fp32",
            ])
            .args(["--no-copy", "--device-mib", "1", "--power-window", "0.1"])
            .assert()
            .success()
            .stdout(predicate::str::contains(
                "power (gpu:0 Fake GPU (host memory) (counter)):",
            ))
            // The watts themselves are checked above over 0.3 s; a 0.1 s window on a loaded
            // machine can read 59.x W, so here only the line's form.
            .stdout(predicate::str::is_match(r"  idle: \d+\.\d W \(idle, ").unwrap())
            .stdout(predicate::str::contains(" W (fp32 GEMM n=64, "));
        // A window of 0 reads no power at all, and says so.
        let out = amdahl()
            .env("LD_LIBRARY_PATH", &libs)
            .args([
                "bench",
                "gpu",
                "--quick",
                "--sizes",
                "64",
                "--precision",
                "fp32",
            ])
            .args([
                "--no-copy",
                "--device-mib",
                "1",
                "--power-window",
                "0",
                "--json",
            ])
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(v["power"]["idle"]["status"], "not_measured");
        assert!(v["power"]["idle"]["reason"]
            .as_str()
            .unwrap()
            .contains("--power-window 0"));
    }
}
