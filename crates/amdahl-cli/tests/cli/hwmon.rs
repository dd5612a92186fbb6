//! AMD and Intel GPUs and ARM host sensors end to end (`run`, `detect`, `exporter`), over fake
//! hwmon trees written by amdahl-meter's own builder (`hwmon::fake`, which cites the drivers'
//! layouts), pointed at with `AMDAHL_HWMON_ROOT`.

use crate::support::real::{parse_metrics, sum, Metric};
use crate::support::ScrubEnv;
use amdahl_meter::hwmon::fake;
use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn amdahl(t: &Path) -> Command {
    let mut c = Command::cargo_bin("amdahl").unwrap();
    c.scrub_env()
        .env("AMDAHL_POWERCAP_ROOT", t.join("powercap"))
        .env("AMDAHL_HWMON_ROOT", t.join("hwmon"))
        .env_remove("ROCR_VISIBLE_DEVICES")
        .env_remove("HIP_VISIBLE_DEVICES")
        .env_remove("ZE_AFFINITY_MASK")
        .current_dir(t);
    c
}

fn device<'a>(r: &'a Value, id: &str) -> Option<&'a Value> {
    r["devices"].as_array()?.iter().find(|d| d["id"] == id)
}

/// Two MI300X at a constant 500 W and 250 W beside a RAPL package: both GPUs are measured by
/// integrated power, named as AMD SMI names them; the average power is the file's value (the
/// trapezoid rule is exact for constant power; 5 % covers the first and last partial interval).
#[test]
fn run_measures_amd_gpus_by_integrated_power() {
    let t = tempfile::tempdir().unwrap();
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    fake::amdgpu(
        &h,
        "hwmon0",
        "0000:05:00.0",
        0x74a1,
        "aa",
        Some(500_000_000),
    )
    .unwrap();
    fake::amdgpu(
        &h,
        "hwmon1",
        "0000:26:00.0",
        0x74a1,
        "bb",
        Some(250_000_000),
    )
    .unwrap();
    let out = t.path().join("r.json");
    let cc = t.path().join("emissions.csv");
    amdahl(t.path())
        .args(["run", "--interval", "50ms", "-o"])
        .arg(&out)
        .arg("--codecarbon-csv")
        .arg(&cc)
        .args(["--", "sleep", "0.6"])
        .assert()
        .success();
    // The CodeCarbon row names the GPUs as AMD SMI's market name, which CodeCarbon writes.
    let csv = std::fs::read_to_string(&cc).unwrap();
    assert!(csv.contains("AMD Instinct MI300X"), "{csv}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for (id, w) in [("amdgpu:0", 500.0), ("amdgpu:1", 250.0)] {
        let d = device(&r, id).unwrap_or_else(|| panic!("{id} in {r}"));
        assert_eq!(d["name"], "AMD Instinct MI300X");
        assert_eq!(d["method"], "integrated-power");
        assert_eq!(d["kind"], "gpu");
        let p = d["avg_power_w"].as_f64().unwrap();
        assert!((p - w).abs() < 0.05 * w, "{id}: {p} W, want {w}");
    }
    assert!(device(&r, "intel-rapl:0").is_some(), "{r}");
}

/// ROCR_VISIBLE_DEVICES=1 leaves the second GPU only: the first is not in the record.
#[test]
fn run_honours_rocr_visible_devices() {
    let t = tempfile::tempdir().unwrap();
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    fake::amdgpu(
        &h,
        "hwmon0",
        "0000:05:00.0",
        0x74a1,
        "aa",
        Some(500_000_000),
    )
    .unwrap();
    fake::amdgpu(
        &h,
        "hwmon1",
        "0000:26:00.0",
        0x74a1,
        "bb",
        Some(250_000_000),
    )
    .unwrap();
    let out = t.path().join("r.json");
    amdahl(t.path())
        .env("ROCR_VISIBLE_DEVICES", "1")
        .args(["run", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sleep", "0.2"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(device(&r, "amdgpu:0").is_none(), "{r}");
    assert!(device(&r, "amdgpu:1").is_some(), "{r}");
}

/// ZE_AFFINITY_MASK=0.1,1 on two Max 1550 cards: tile 1 of the first card (its own counter,
/// not the card's, which holds both tiles) and the whole second card; `detect` says why the
/// first card is not read.
#[test]
fn run_honours_ze_affinity_mask() {
    let t = tempfile::tempdir().unwrap();
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    fake::i915(
        &h,
        0,
        "0000:3a:00.0",
        0x0bd5,
        9_000_000,
        &[4_000_000, 5_000_000],
    )
    .unwrap();
    fake::i915(
        &h,
        10,
        "0000:9a:00.0",
        0x0bd5,
        8_000_000,
        &[3_000_000, 5_000_000],
    )
    .unwrap();
    let out = t.path().join("r.json");
    amdahl(t.path())
        .env("ZE_AFFINITY_MASK", "0.1,1")
        .args(["run", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sleep", "0.2"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for (id, present) in [
        ("i915:0", false),
        ("i915:0:gt0", false),
        ("i915:0:gt1", true),
        ("i915:1", true),
        ("i915:1:gt0", false),
    ] {
        assert_eq!(device(&r, id).is_some(), present, "{id}: {r}");
    }
    let d = amdahl(t.path())
        .env("ZE_AFFINITY_MASK", "0.1,1")
        .args(["detect", "--json"])
        .output()
        .unwrap();
    let d: Value = serde_json::from_slice(&d.stdout).unwrap();
    let card = d["sensors"]
        .as_array()
        .and_then(|rows| rows.iter().find(|x| x["device"] == "i915:0"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(card["status"], "ignored", "{d}");
    assert!(
        card["detail"]
            .as_str()
            .unwrap_or("")
            .contains("ZE_AFFINITY_MASK=0.1,1"),
        "{card}"
    );
}

/// A Grace node without RAPL: the two sockets are the CPU (and its memory), so no estimate is
/// added; 120 W per socket.
#[test]
fn run_on_grace_uses_the_socket_sensors_not_the_estimate() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("hwmon");
    let mut k = 0;
    for s in 0..2 {
        for (area, w) in [("Module", 700), ("Grace", 120), ("CPU", 80), ("SysIO", 25)] {
            fake::grace(&h, &format!("hwmon{k}"), area, s, w * 1_000_000).unwrap();
            k += 1;
        }
    }
    let out = t.path().join("r.json");
    amdahl(t.path())
        .args(["run", "--no-gpu", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sleep", "0.4"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ids: Vec<&str> = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(ids, ["grace:socket0", "grace:socket1"], "{r}");
    let p = device(&r, "grace:socket0").unwrap()["avg_power_w"]
        .as_f64()
        .unwrap();
    assert!((p - 120.0).abs() < 6.0, "{p} W");
}

/// detect: an MI250X node with ROCR hiding the second package, and a Max 1550 whose card
/// counter holds garbage: every row says what it is, the garbage one how to fix it.
#[test]
fn detect_lists_packages_tiles_hidden_gpus_and_garbage() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("hwmon");
    let p = [Some(500_000_000), None, Some(510_000_000), None];
    for (k, uw) in p.iter().enumerate() {
        let addr = format!("0000:{:02x}:00.0", 0xc1 + k);
        fake::amdgpu(
            &h,
            &format!("hwmon{k}"),
            &addr,
            0x740c,
            &format!("{k:04x}"),
            *uw,
        )
        .unwrap();
    }
    let card = fake::i915(&h, 10, "0000:3a:00.0", 0x0bd5, 1, &[2, 3]).unwrap();
    fake::set(&card, "energy1_input", "garbage").unwrap();
    let out = amdahl(t.path())
        .env("ROCR_VISIBLE_DEVICES", "0,1")
        .args(["detect", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = d["sensors"].as_array().unwrap();
    let row = |id: &str| {
        rows.iter()
            .find(|x| x["device"] == id)
            .unwrap_or_else(|| panic!("{id} in {d}"))
    };
    assert_eq!(
        (
            row("amdgpu:0")["status"].as_str(),
            row("amdgpu:0")["sensor"].as_str()
        ),
        (Some("ok"), Some("amdgpu"))
    );
    assert!(row("amdgpu:1")["detail"]
        .as_str()
        .unwrap()
        .contains("second GCD"));
    assert!(row("amdgpu:2")["detail"]
        .as_str()
        .unwrap()
        .contains("ROCR_VISIBLE_DEVICES=0,1"));
    assert_eq!(row("amdgpu:2")["status"], "ignored");
    assert_eq!(row("i915:0")["status"], "unusable");
    assert!(row("i915:0")["fix"]
        .as_str()
        .unwrap()
        .contains("does not hold a number"));
    assert_eq!(row("i915:0:gt0")["status"], "ok");
    assert_eq!(d["hwmon_root"], h.display().to_string());
}

/// A node with RAPL packages and one amdgpu card (400 W) under `dir`; its hwmon root.
fn amd_node(dir: &Path) -> PathBuf {
    amdahl_meter::rapl::fake::standard(&dir.join("powercap")).unwrap();
    let h = dir.join("hwmon");
    fake::amdgpu(
        &h,
        "hwmon0",
        "0000:05:00.0",
        0x74a1,
        "aa",
        Some(400_000_000),
    )
    .unwrap();
    h
}

/// One `exporter --once` sample of the fake node under `dir`, processes from `proc`.
fn exporter_once(dir: &Path, proc: &Path) -> std::process::Output {
    amdahl(dir)
        .args(["exporter", "--once", "--interval", "100ms", "--proc-root"])
        .arg(proc)
        .output()
        .unwrap()
}

/// The attribution rule the exporter reports for the card `amdgpu:0`.
fn amd_rule(m: &[Metric]) -> Option<&str> {
    m.iter()
        .find(|x| {
            x.name == "amdahl_gpu_attribution_rule"
                && x.labels.get("device").map(String::as_str) == Some("amdgpu:0")
        })
        .and_then(|x| x.labels.get("rule"))
        .map(String::as_str)
}

/// The exporter serves an AMD GPU's node energy (unattributed to processes: no KFD tree, which
/// it says on stderr).
#[test]
fn exporter_serves_amd_gpu_energy() {
    let t = tempfile::tempdir().unwrap();
    amd_node(t.path());
    let proc = t.path().join("proc");
    amdahl_meter::attribution::procs::fake::machine(&proc, 0, 1_000_000).unwrap();
    let out = exporter_once(t.path(), &proc);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let m = parse_metrics(&text);
    let j = sum(
        &m,
        crate::support::fake_node::E,
        &[("scope", "node"), ("device", "amdgpu:0")],
    );
    // 400 W over the one interval of --once (100 ms, plus scheduling): 40 J, within a factor
    // the loaded CI machine's wake-ups allow.
    assert!(j > 30.0 && j < 120.0, "{j} J\n{text}");
    assert_eq!(amd_rule(&m), Some("unattributed"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kfd/kfd/topology/nodes"), "{err}");
}

/// With the amdgpu KFD tree beside the hwmon root, the exporter splits an AMD GPU's energy
/// among the processes holding VRAM on it, by CU occupancy (3:1 here), and charges their jobs.
#[test]
fn exporter_attributes_amd_gpu_energy_by_kfd_cu_occupancy() {
    use amdahl_meter::attribution::procs::fake as procs;
    let t = tempfile::tempdir().unwrap();
    let h = amd_node(t.path());
    fake::kfd_cpu(&h, 0).unwrap();
    fake::kfd_gpu(&h, 1, 4242, "0000:05:00.0", 0).unwrap();
    let proc = t.path().join("proc");
    procs::machine(&proc, 0, 1_000_000).unwrap();
    for (pid, cu) in [(300, 90), (301, 30)] {
        let cg = format!("0::/system.slice/slurmstepd.scope/job_{pid}/step_0/user/task_0\n");
        procs::process(&proc, pid, "hip", 0, 0, Some(0), Some(&cg), &[]).unwrap();
        fake::kfd_process(&h, pid, 4242, 1 << 30, Some(cu)).unwrap();
    }
    let out = exporter_once(t.path(), &proc);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("kfd"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let m = parse_metrics(&text);
    let e = crate::support::fake_node::E;
    let job = |j: &str| {
        sum(
            &m,
            e,
            &[("scope", "job"), ("job", j), ("device", "amdgpu:0")],
        )
    };
    let node = sum(&m, e, &[("scope", "node"), ("device", "amdgpu:0")]);
    let (a, b) = (job("300"), job("301"));
    assert!(
        node > 0.0 && (a + b - node).abs() < 1e-3 && (a - 3.0 * b).abs() < 1e-3,
        "{text}"
    );
    assert_eq!(amd_rule(&m), Some("utilisation"), "{text}");
}

/// With a (fake) `libamd_smi.so` on the loader path, the GPU it has a counter for is read as a
/// counter (1 J per read: 64000 counts × 15.625 µJ), the other stays integrated power.
#[test]
fn run_reads_amd_smi_energy_counters_where_the_library_loads() {
    let t = tempfile::tempdir().unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../amdahl-meter/tests/fixtures/fake_amd_smi.c");
    let lib = t.path().join("libamd_smi.so");
    let built = std::process::Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !built {
        eprintln!("skipped: no C compiler to build the fake AMD SMI");
        return;
    }
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    fake::amdgpu(
        &h,
        "hwmon0",
        "0000:05:00.0",
        0x74a1,
        "aa",
        Some(500_000_000),
    )
    .unwrap();
    fake::amdgpu(
        &h,
        "hwmon1",
        "0000:26:00.0",
        0x74a1,
        "bb",
        Some(250_000_000),
    )
    .unwrap();
    let out = t.path().join("r.json");
    amdahl(t.path())
        .env("LD_LIBRARY_PATH", t.path())
        .env("FAKE_AMDSMI_GPUS", "0000:05:00.0=64000,0000:26:00.0=0")
        .args(["run", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sleep", "0.3"])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let d0 = device(&r, "amdgpu:0").unwrap();
    assert_eq!(d0["method"], "counter", "{r}");
    let j = d0["energy_j"].as_f64().unwrap();
    assert!(
        j >= 1.0 && j.fract() == 0.0,
        "{j} J: whole joules of the fake's steps"
    );
    assert_eq!(
        device(&r, "amdgpu:1").unwrap()["method"],
        "integrated-power"
    );
    // detect says which GPU AMD SMI reads.
    let out = amdahl(t.path())
        .env("LD_LIBRARY_PATH", t.path())
        .env("FAKE_AMDSMI_GPUS", "0000:05:00.0=64000,0000:26:00.0=0")
        .args(["detect", "--json"])
        .output()
        .unwrap();
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let smi = |id: &str| {
        d["sensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["sensor"] == "amdsmi" && x["device"] == id)
            .map(|x| x["status"].clone())
    };
    assert_eq!(smi("amdgpu:0"), Some("ok".into()), "{d}");
    assert_eq!(smi("amdgpu:1"), Some("ignored".into()), "{d}");
}

/// `bench` on a Grace node without RAPL: joules per FLOP from the two sockets' integrated power.
/// At a constant 2 × 150 W the probe's energy over a case is 300 W × the time between its reads,
/// which holds every timed repeat: so J per run lies between 300 W × the fastest repeat and
/// 300 W × the slowest (50 % above it for the reads' own time on a loaded machine).
#[test]
fn bench_energy_per_flop_from_grace_sockets() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("hwmon");
    for s in 0..2 {
        fake::grace(&h, &format!("hwmon{s}"), "Grace", s, 150_000_000).unwrap();
    }
    let out = amdahl(t.path())
        .args([
            "bench",
            "gemm",
            "--quick",
            "--precision",
            "fp32",
            "--sizes",
            "512",
        ])
        .args(["--repeats", "20", "--threads", "1", "--json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["energy"]["status"], "measured", "{}", v["energy"]);
    let src = v["energy"]["source"].as_str().unwrap();
    assert!(
        src.contains("grace:socket0") && src.contains("grace:socket1"),
        "{src}"
    );
    for r in v["rows"].as_array().unwrap() {
        let per_run = r["energy"]["joules_per_run"].as_f64().unwrap();
        let (min, max) = (
            r["seconds"]["min"].as_f64().unwrap(),
            r["seconds"]["max"].as_f64().unwrap(),
        );
        assert!(
            per_run >= 0.99 * 300.0 * min && per_run <= 1.5 * 300.0 * max,
            "{per_run} J per run, repeats {min}..{max} s: {r}"
        );
    }
}

/// A Max 1550 whose card counter the measured command moves by exactly 8 J (1 J → 9 J): the
/// record has the card as a counter with those 8 J, and neither tile (inside the card).
#[test]
fn run_measures_an_intel_card_counter_exactly_and_not_its_tiles() {
    let t = tempfile::tempdir().unwrap();
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    let card = fake::i915(
        &h,
        0,
        "0000:3a:00.0",
        0x0bd5,
        1_000_000,
        &[400_000, 600_000],
    )
    .unwrap();
    let out = t.path().join("r.json");
    let script = format!(
        "sleep 0.2; echo 9000000 > {}/energy1_input; sleep 0.2",
        card.display()
    );
    amdahl(t.path())
        .args(["run", "--interval", "50ms", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let d = device(&r, "i915:0").unwrap_or_else(|| panic!("{r}"));
    assert_eq!(d["method"], "counter");
    assert_eq!(d["name"], "Intel Data Center GPU Max 1550");
    assert_eq!(d["energy_j"].as_f64(), Some(8.0), "{d}");
    assert!(device(&r, "i915:0:gt0").is_none() && device(&r, "i915:0:gt1").is_none());
}

/// The exporter on a Grace node: each socket's node energy is served (and split by CPU time
/// like a RAPL package).
#[test]
fn exporter_serves_grace_socket_energy() {
    let t = tempfile::tempdir().unwrap();
    let h = t.path().join("hwmon");
    for s in 0..2 {
        fake::grace(&h, &format!("hwmon{s}"), "Grace", s, 200_000_000).unwrap();
    }
    let proc = t.path().join("proc");
    amdahl_meter::attribution::procs::fake::machine(&proc, 0, 1_000_000).unwrap();
    let out = amdahl(t.path())
        .args([
            "exporter",
            "--once",
            "--no-gpu",
            "--interval",
            "100ms",
            "--proc-root",
        ])
        .arg(&proc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let m = parse_metrics(&text);
    for dev in ["grace:socket0", "grace:socket1"] {
        let j = sum(
            &m,
            crate::support::fake_node::E,
            &[("scope", "node"), ("device", dev)],
        );
        // 200 W over --once's one 100 ms interval: 20 J, within what a loaded machine's late
        // wake-ups allow.
        assert!(j > 15.0 && j < 60.0, "{dev}: {j} J\n{text}");
    }
}

/// `scale` through an Intel card counter: each run adds N J to `energy1_input` (RAPL stands
/// still), so every point's energy is exactly N J.
#[test]
fn scale_meters_an_intel_card_counter() {
    let t = tempfile::tempdir().unwrap();
    amdahl_meter::rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let h = t.path().join("hwmon");
    let card = fake::i915(&h, 0, "0000:3a:00.0", 0x0bd5, 1_000_000, &[]).unwrap();
    let f = card.join("energy1_input");
    let work = format!(
        "sleep 0.{{n}}; echo $(( $(cat {f}) + {{n}}000000 )) > {f}",
        f = f.display()
    );
    let out = t.path().join("scale.json");
    amdahl(t.path())
        .args([
            "scale", "--n", "1,2", "--runs", "1", "--warmup", "0", "--idle", "50ms",
        ])
        .arg("-o")
        .arg(&out)
        .args(["--json", "--", "sh", "-c", &work])
        .assert()
        .success();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let pts = r["points"].as_array().unwrap();
    for (p, n) in pts.iter().zip([1.0, 2.0]) {
        assert_eq!(p["energy_j"]["median"].as_f64(), Some(n), "{p}");
    }
}
