//! Fake trees with the drivers' layouts (see `fake`, which cites them), read through the real
//! scan, source and meter.

use super::fake::{self, set};
use super::*;
use crate::estimate::Target;
use crate::gpu::Visible;
use crate::rapl::{self, fs_reader};
use crate::sensors::{self, Options};
use crate::Meter;
use amdahl_model::units::Seconds;
use std::sync::Arc;

fn scan_all(root: &Path) -> Scan {
    scan(root, &fs_reader(), &AmdVisible::all())
}

fn by_id<'a>(s: &'a Scan, id: &str) -> &'a Sensor {
    s.sensors
        .iter()
        .find(|x| x.info.id == id)
        .unwrap_or_else(|| panic!("no sensor {id} in {:?}", ids(s)))
}

fn ids(s: &Scan) -> Vec<(String, bool)> {
    s.sensors
        .iter()
        .map(|x| (x.info.id.clone(), x.usable()))
        .collect()
}

fn options(t: &Path, hwmon: &Path) -> Options {
    Options {
        powercap_root: t.join("powercap"),
        reader: fs_reader(),
        cpu_tdp: Some(Watts(100.0)),
        gpus: true,
        visible: Visible::All,
        hwmon_root: hwmon.to_path_buf(),
        amd_visible: AmdVisible::all(),
        amd_smi: false,
        target: Target::Machine,
    }
}

fn device_ids(d: &sensors::Discovery) -> Vec<String> {
    d.sources
        .iter()
        .flat_map(|s| s.devices())
        .map(|d| d.id)
        .collect()
}

/// Two MI300X: `power1_average` µW integrated by the trapezoid rule. 750 W for 2 s = 1500 J,
/// then 600 W: (750 + 600)/2 × 1 s = 675 J more (exact in binary floating point).
#[test]
fn mi300x_power_is_integrated_and_named_as_amd_smi_does() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let g0 = fake::amdgpu(
        &root,
        "hwmon2",
        "0000:05:00.0",
        0x74a1,
        "a1b2",
        Some(750_000_000),
    )
    .unwrap();
    fake::amdgpu(
        &root,
        "hwmon3",
        "0000:26:00.0",
        0x74a1,
        "c3d4",
        Some(300_000_000),
    )
    .unwrap();
    let s = scan_all(&root);
    assert_eq!(
        ids(&s),
        [("amdgpu:0".into(), true), ("amdgpu:1".into(), true)]
    );
    let d = &by_id(&s, "amdgpu:0").info;
    assert_eq!(
        (d.name.as_str(), d.method),
        ("AMD Instinct MI300X", Method::IntegratedPower)
    );
    let src = HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap();
    let mut m = Meter::new(vec![Box::new(src)]);
    m.sample_at(Seconds(0.0));
    m.sample_at(Seconds(2.0));
    set(&g0, "power1_average", 600_000_000).unwrap();
    m.sample_at(Seconds(3.0));
    let e = m.energies();
    assert_eq!(e[0].energy_j.get(), 1500.0 + 675.0);
    assert_eq!(e[1].energy_j.get(), 900.0);
}

/// An `energy1_input` (µJ) is preferred to power where a kernel exposes one.
#[test]
fn an_amdgpu_energy_counter_is_used_as_a_counter() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let g = fake::amdgpu(&root, "hwmon0", "0000:05:00.0", 0x74a1, "a1", Some(1)).unwrap();
    set(&g, "energy1_input", 5_000_000).unwrap();
    let s = scan_all(&root);
    assert_eq!(by_id(&s, "amdgpu:0").info.method, Method::Counter);
    let mut m = Meter::new(vec![Box::new(
        HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap(),
    )]);
    m.sample_at(Seconds(0.0));
    set(&g, "energy1_input", 12_000_000).unwrap();
    m.sample_at(Seconds(1.0));
    assert_eq!(m.energies()[0].energy_j.get(), 7.0);
}

/// MI250X: four GCDs in two packages. GCD 1 has no power file, GCD 3 reads 0 (the two ways
/// kernels show the secondary die): only GCDs 0 and 2 are added.
#[test]
fn mi250x_counts_each_package_once() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let p = [Some(500_000_000), None, Some(520_000_000), Some(0)];
    for (k, uw) in p.iter().enumerate() {
        let addr = format!("0000:{:02x}:00.0", 0xc1 + k);
        fake::amdgpu(
            &root,
            &format!("hwmon{k}"),
            &addr,
            0x740c,
            &format!("{k:016x}"),
            *uw,
        )
        .unwrap();
    }
    let s = scan_all(&root);
    assert_eq!(
        ids(&s),
        [
            ("amdgpu:0".into(), true),
            ("amdgpu:1".into(), false),
            ("amdgpu:2".into(), true),
            ("amdgpu:3".into(), false)
        ]
    );
    assert!(matches!(&by_id(&s, "amdgpu:1").use_, Use::Inside(w) if w.contains("first GCD")));
    // A kernel that reported the package's power on both dies: still once.
    set(&root.join("hwmon1"), "power1_average", 500_000_000).unwrap();
    let s = scan_all(&root);
    assert!(matches!(&by_id(&s, "amdgpu:1").use_, Use::Inside(w) if w.contains("amdgpu:0")));
}

/// MI300A: the APU's socket power covers the CPU RAPL reads and the HBM, so neither the RAPL
/// package nor a CPU or RAM estimate is added next to it.
#[test]
fn mi300a_replaces_the_rapl_package_and_the_estimates() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::amdgpu(
        &root,
        "hwmon0",
        "0000:02:00.0",
        0x74a0,
        "aa",
        Some(550_000_000),
    )
    .unwrap();
    rapl::fake::zone(
        &t.path().join("powercap"),
        "intel-rapl:0",
        "package-0",
        1,
        1 << 32,
    )
    .unwrap();
    let d = sensors::discover(options(t.path(), &root));
    assert_eq!(device_ids(&d), ["amdgpu:0"]);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("RAPL packages not added")),
        "{:?}",
        d.notes
    );
    // With GPUs off, the package is measured by RAPL again.
    let d = sensors::discover(Options {
        gpus: false,
        ..options(t.path(), &root)
    });
    assert!(device_ids(&d).contains(&"intel-rapl:0".to_string()));
}

/// A Ryzen APU (Rembrandt, 1002:1681): its socket power covers the CPU cores RAPL's package
/// reads, not the DIMMs: the package leaves, RAM is still estimated, no CPU estimate is added.
#[test]
fn a_ryzen_apu_replaces_the_rapl_package_but_not_ram() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::amdgpu(
        &root,
        "hwmon0",
        "0000:04:00.0",
        0x1681,
        "",
        Some(25_000_000),
    )
    .unwrap();
    rapl::fake::zone(
        &t.path().join("powercap"),
        "intel-rapl:0",
        "package-0",
        1,
        1 << 32,
    )
    .unwrap();
    let s = scan_all(&root);
    let g = by_id(&s, "amdgpu:0");
    assert_eq!(g.info.name, "AMD Ryzen APU graphics (Rembrandt)");
    assert!(g.covers_cpu_package && !g.covers_host);
    assert!(g.covers.contains("Ryzen APU"), "{}", g.covers);
    let d = sensors::discover(options(t.path(), &root));
    let ids = device_ids(&d);
    assert!(ids.contains(&"amdgpu:0".to_string()), "{ids:?}");
    assert!(!ids.contains(&"intel-rapl:0".to_string()), "{ids:?}");
    assert!(!ids.iter().any(|i| i.contains("cpu")), "{ids:?}");
    assert!(ids.iter().any(|i| i.contains("ram")), "{ids:?}");
}

#[test]
fn rocr_then_hip_visible_devices_compose() {
    let uuids: Vec<String> = ["GPU-aa", "GPU-bb", "GPU-cc", "GPU-dd"]
        .map(String::from)
        .into();
    let env = |rocr: Option<&str>, hip: Option<&str>| {
        let (r, h) = (rocr.map(String::from), hip.map(String::from));
        AmdVisible::from_env(move |k| match k {
            "ROCR_VISIBLE_DEVICES" => r.clone(),
            "HIP_VISIBLE_DEVICES" => h.clone(),
            _ => None,
        })
    };
    assert_eq!(env(None, None).admitted(&uuids), [true; 4]);
    // ROCR leaves 3 and 1 (in that order); HIP's index 1 is the second of those: GPU 1.
    assert_eq!(
        env(Some("3,GPU-bb"), Some("1")).admitted(&uuids),
        [false, true, false, false]
    );
    assert_eq!(env(Some(""), None).admitted(&uuids), [false; 4]);
    assert_eq!(
        env(None, Some("0,9")).admitted(&uuids),
        [true, false, false, false]
    );
}

#[test]
fn a_gpu_hidden_by_rocr_visible_devices_is_listed_not_measured() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    for k in 0..2 {
        let addr = format!("0000:0{k}:00.0");
        fake::amdgpu(
            &root,
            &format!("hwmon{k}"),
            &addr,
            0x74a1,
            &format!("{k}f"),
            Some(1),
        )
        .unwrap();
    }
    let vis = AmdVisible {
        rocr: crate::gpu::parse_visible(Some("GPU-1f")),
        hip: Visible::All,
        ze: ZeMask::all(),
    };
    let s = scan(&root, &fs_reader(), &vis);
    assert_eq!(
        ids(&s),
        [("amdgpu:0".into(), false), ("amdgpu:1".into(), true)]
    );
    assert!(
        matches!(&by_id(&s, "amdgpu:0").use_, Use::Hidden(w) if w.contains("ROCR_VISIBLE_DEVICES=GPU-1f"))
    );
}

/// Max 1550: the card's energy1_input is added, its two tiles are inside it. With the card's
/// file holding garbage, it is unusable (with the fix) and the tiles, disjoint, are added.
#[test]
fn i915_card_before_tiles_and_tiles_when_the_card_is_garbage() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let card = fake::i915(
        &root,
        0,
        "0000:3a:00.0",
        0x0bd5,
        9_000_000,
        &[4_000_000, 5_000_000],
    )
    .unwrap();
    let s = scan_all(&root);
    assert_eq!(
        ids(&s),
        [
            ("i915:0".into(), true),
            ("i915:0:gt0".into(), false),
            ("i915:0:gt1".into(), false)
        ]
    );
    let c = by_id(&s, "i915:0");
    assert_eq!(
        (c.info.name.as_str(), c.info.method),
        ("Intel Data Center GPU Max 1550", Method::Counter)
    );
    set(&card, "energy1_input", "-ENODATA").unwrap();
    let s = scan_all(&root);
    assert_eq!(
        ids(&s),
        [
            ("i915:0".into(), false),
            ("i915:0:gt0".into(), true),
            ("i915:0:gt1".into(), true)
        ]
    );
    let e = by_id(&s, "i915:0").status.as_ref().unwrap_err().to_string();
    assert!(e.contains("energy1_input") && e.contains("-ENODATA"), "{e}");
    // The tiles measure the card, so the garbage card is not estimated next to them.
    let src = HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap();
    let ids: Vec<String> = src.devices().into_iter().map(|d| d.id).collect();
    assert_eq!(ids, ["i915:0:gt0", "i915:0:gt1"]);
}

/// `ZE_AFFINITY_MASK`: a card it leaves out is hidden; a card of which it names one tile is
/// measured by that tile's counter (the card's, holding both tiles, is hidden); without
/// per-tile counters (xe) the card is read and says the other tiles are in it.
#[test]
fn ze_affinity_mask_hides_cards_and_picks_tiles() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::i915(
        &root,
        0,
        "0000:3a:00.0",
        0x0bd5,
        9_000_000,
        &[4_000_000, 5_000_000],
    )
    .unwrap();
    fake::i915(
        &root,
        10,
        "0000:9a:00.0",
        0x0bd5,
        8_000_000,
        &[3_000_000, 5_000_000],
    )
    .unwrap();
    let with = |mask: &str| {
        let vis = AmdVisible {
            ze: ZeMask::parse(Some(mask)),
            ..AmdVisible::all()
        };
        scan(&root, &fs_reader(), &vis)
    };
    let s = with("1");
    assert_eq!(
        ids(&s),
        [
            ("i915:0".into(), false),
            ("i915:0:gt0".into(), false),
            ("i915:0:gt1".into(), false),
            ("i915:1".into(), true),
            ("i915:1:gt0".into(), false),
            ("i915:1:gt1".into(), false)
        ]
    );
    assert!(
        matches!(&by_id(&s, "i915:0").use_, Use::Hidden(w) if w.contains("ZE_AFFINITY_MASK=1"))
    );
    // Tile 1 of card 0 and all of card 1.
    let s = with("0.1, 1");
    let used: Vec<String> = ids(&s).into_iter().filter(|x| x.1).map(|x| x.0).collect();
    assert_eq!(used, ["i915:0:gt1", "i915:1"]);
    assert!(matches!(&by_id(&s, "i915:0").use_, Use::Hidden(w) if w.contains("tile(s) 1")));
    // Unset, blank or garbage-only: a blank mask is every device, garbage names none.
    assert_eq!(ZeMask::parse(Some(" ")), ZeMask::all());
    let s = with("x,1.y");
    assert!(ids(&s).iter().all(|x| !x.1), "{:?}", ids(&s));

    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::xe(&root, "hwmon1", "0000:03:00.0", 0xe20b, 10, 8).unwrap();
    let vis = AmdVisible {
        ze: ZeMask::parse(Some("0.0")),
        ..AmdVisible::all()
    };
    let s = scan(&root, &fs_reader(), &vis);
    assert_eq!(ids(&s), [("xe:0".into(), true), ("xe:0:pkg".into(), false)]);
    assert!(by_id(&s, "xe:0")
        .covers
        .contains("other tiles' energy is in this reading"));
}

#[test]
fn xe_uses_the_card_channel_not_the_package_inside_it() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::xe(&root, "hwmon1", "0000:03:00.0", 0xe20b, 10, 8).unwrap();
    let s = scan_all(&root);
    assert_eq!(ids(&s), [("xe:0".into(), true), ("xe:0:pkg".into(), false)]);
}

/// The i915 file is a 64-bit sum the driver keeps (no range): a decrease is a reset, never a
/// negative or a huge wrapped step. Its interval is estimated at the card's catalog TDP (Max
/// 1550: 600 W), so nothing is lost, and the device is then an estimate, said in its note.
#[test]
fn an_intel_counter_that_steps_back_is_estimated_for_that_interval() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let card = fake::i915(&root, 0, "0000:3a:00.0", 0x0bd5, 10_000_000, &[]).unwrap();
    let s = scan_all(&root);
    let mut m = Meter::new(vec![Box::new(
        HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap(),
    )]);
    m.sample_at(Seconds(0.0));
    set(&card, "energy1_input", 310_000_000).unwrap(); // +300 J in 1 s
    m.sample_at(Seconds(1.0));
    set(&card, "energy1_input", 1_000_000).unwrap(); // driver reloaded
    m.sample_at(Seconds(2.0));
    set(&card, "energy1_input", 201_000_000).unwrap(); // +200 J
    m.sample_at(Seconds(3.0));
    let e = &m.energies()[0];
    assert_eq!(
        (e.energy_j.get(), e.method),
        (500.0 + 600.0, Method::Estimate)
    );
    let note = e.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("estimated for 1.0 of 3.0 s at 600 W")
            && note.contains("catalog TDP of Max 1550")
            && note.contains("backwards"),
        "{note}"
    );
}

/// A sensor that disappears (GPU unbound, hot-unplugged) keeps what it measured, and the time
/// since is estimated at the catalog TDP (MI300X: 750 W) while it stays unreadable; if the file
/// comes back, the power readings span the gap and the device is measured again.
#[test]
fn a_sensor_that_disappears_is_estimated_until_it_comes_back() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let g = fake::amdgpu(
        &root,
        "hwmon0",
        "0000:05:00.0",
        0x74a1,
        "a",
        Some(400_000_000),
    )
    .unwrap();
    let s = scan_all(&root);
    let mut m = Meter::new(vec![Box::new(
        HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap(),
    )]);
    m.sample_at(Seconds(0.0));
    m.sample_at(Seconds(1.0));
    std::fs::remove_file(g.join("power1_average")).unwrap();
    m.sample_at(Seconds(2.0));
    let e = &m.energies()[0];
    assert_eq!(
        (e.energy_j.get(), e.method),
        (400.0 + 750.0, Method::Estimate)
    );
    let note = e.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("power1_average") && note.contains("estimated for 1.0 of 2.0 s at 750 W"),
        "{note}"
    );
    set(&g, "power1_average", 400_000_000).unwrap();
    m.sample_at(Seconds(3.0));
    let e = &m.energies()[0];
    assert_eq!(
        (e.energy_j.get(), e.method),
        (1200.0, Method::IntegratedPower)
    );
}

/// A GPU whose power file holds garbage from the start is metered as an estimate at its
/// catalog TDP, with the file's content in the note and the warning; if the file turns
/// readable, what it measures from then on is added to the estimate before it.
#[test]
fn a_gpu_with_a_garbage_file_is_estimated_not_dropped() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let g = fake::amdgpu(&root, "hwmon0", "0000:05:00.0", 0x74a1, "a", Some(1)).unwrap();
    set(&g, "power1_average", "garbage").unwrap();
    let d = sensors::discover(options(t.path(), &root));
    assert!(device_ids(&d).contains(&"amdgpu:0".to_string()));
    let w = d.warnings.join("\n");
    assert!(
        w.contains("amdgpu:0") && w.contains("garbage") && w.contains("estimated at 750 W"),
        "{w}"
    );
    let s = scan_all(&root);
    let src = HwmonSource::from_scan(&s, fs_reader(), |_| true).unwrap();
    assert_eq!(src.devices()[0].method, Method::Estimate);
    let mut m = Meter::new(vec![Box::new(src)]);
    for k in 0..3 {
        m.sample_at(Seconds(f64::from(k)));
    }
    let e = &m.energies()[0];
    assert_eq!((e.energy_j.get(), e.method), (1500.0, Method::Estimate));
    let note = e.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("estimated for 2.0 of 2.0 s at 750 W") && note.contains("garbage"),
        "{note}"
    );
    set(&g, "power1_average", 100_000_000).unwrap();
    m.sample_at(Seconds(3.0));
    m.sample_at(Seconds(4.0));
    let e = &m.energies()[0];
    // 3 s estimated (0 → 3, up to the first good reading), then 100 W for 1 s.
    assert_eq!(
        (e.energy_j.get(), e.method),
        (2250.0 + 100.0, Method::Estimate)
    );
}

/// A GPU the device catalog does not know cannot be estimated: it stays out of the total, and
/// the warning says why and how to add it.
#[test]
fn an_unknown_unreadable_gpu_says_why_it_is_not_estimated() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let g = fake::amdgpu(&root, "hwmon0", "0000:05:00.0", 0x1234, "a", Some(1)).unwrap();
    set(&g, "power1_average", "garbage").unwrap();
    let d = sensors::discover(options(t.path(), &root));
    assert!(!device_ids(&d).contains(&"amdgpu:0".to_string()));
    let w = d.warnings.join("\n");
    assert!(
        w.contains("not estimated either") && w.contains("--catalog"),
        "{w}"
    );
}

#[test]
fn permission_denied_says_how_to_fix_it() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    fake::amdgpu(&root, "hwmon0", "0000:05:00.0", 0x74a1, "a", Some(1)).unwrap();
    let reader: crate::rapl::FileReader = Arc::new(|p: &Path| {
        if p.ends_with("power1_average") {
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        } else {
            std::fs::read_to_string(p)
        }
    });
    let d = sensors::discover(Options {
        reader: reader.clone(),
        ..options(t.path(), &root)
    });
    let w = d.warnings.join("\n");
    assert!(
        w.contains("amdgpu:0") && w.contains("sudo chmod a+r") && w.contains("power1_average"),
        "{w}"
    );
    // Denied, not dropped: the GPU is metered as an estimate at its catalog TDP. (The reader
    // fakes EACCES: tests may run as root, whom chmod 000 does not stop.)
    let est: Vec<_> = d
        .sources
        .iter()
        .flat_map(|s| s.devices())
        .filter(|x| x.id == "amdgpu:0")
        .map(|x| x.method)
        .collect();
    assert_eq!(est, [Method::Estimate]);
    assert!(w.contains("estimated at 750 W"), "{w}");
    let r = sensors::detect(&sensors::DetectOptions {
        powercap_root: t.path().join("powercap"),
        reader,
        gpus: true,
        visible: Visible::All,
        hwmon_root: root,
        amd_visible: AmdVisible::all(),
        amd_smi: false,
    });
    let row = r.sensors.iter().find(|x| x.device == "amdgpu:0").unwrap();
    assert_eq!(row.status, "unusable");
    assert!(
        row.detail.contains("a run estimates it at 750 W"),
        "{row:?}"
    );
    assert!(
        row.fix.as_deref().is_some_and(|f| f.contains("chmod")),
        "{row:?}"
    );
}

/// GH200, two sockets: the Grace sockets are the CPU (and cover its LPDDR5X, so no RAM
/// estimate); the CPU/SysIO rails are inside them; the module (which holds the GPU NVML reads)
/// is never added. 150 W for 2 s = 300 J per socket.
#[test]
fn grace_sockets_are_the_cpu_rails_and_module_are_listed() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let mut k = 0;
    for socket in 0..2 {
        for (area, w) in [("Module", 900), ("Grace", 150), ("CPU", 100), ("SysIO", 30)] {
            fake::grace(&root, &format!("hwmon{k}"), area, socket, w * 1_000_000).unwrap();
            k += 1;
        }
    }
    let d = sensors::discover(options(t.path(), &root));
    assert_eq!(device_ids(&d), ["grace:socket0", "grace:socket1"]);
    let mut m = Meter::new(d.sources);
    m.sample_at(Seconds(0.0));
    m.sample_at(Seconds(2.0));
    let e = m.energies();
    assert_eq!(e.iter().map(|x| x.energy_j.get()).sum::<f64>(), 600.0);
    assert!(e.iter().all(|x| x.kind == DeviceKind::CpuPackage));
    // On a machine whose RAPL reads the CPU, host sensors are not added next to it.
    rapl::fake::standard(&t.path().join("powercap")).unwrap();
    let d = sensors::discover(options(t.path(), &root));
    assert_eq!(device_ids(&d), ["intel-rapl:0", "intel-rapl:0:2"]);
}

#[test]
fn altra_rails_are_added_and_unknown_sensors_only_listed() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("hwmon");
    let a = fake::chip(&root, "hwmon0", "apm_xgene", "APMC0D29:00", false).unwrap();
    set(&a, "power1_input", 80_000_000).unwrap();
    set(&a, "power1_label", "CPU power").unwrap();
    set(&a, "power2_input", 20_000_000).unwrap();
    set(&a, "power2_label", "IO power").unwrap();
    let n = fake::chip(&root, "hwmon1", "ina3221", "i2c-1", false).unwrap();
    set(&n, "power1_input", 5_000_000).unwrap();
    let s = scan_all(&root);
    assert_eq!(
        ids(&s),
        [
            ("hwmon:hwmon0:power1".into(), true),
            ("hwmon:hwmon0:power2".into(), true),
            ("hwmon:hwmon1:power1".into(), false)
        ]
    );
    assert!(matches!(
        &by_id(&s, "hwmon:hwmon1:power1").use_,
        Use::Unknown(_)
    ));
}

#[test]
fn a_missing_root_is_one_row_saying_so() {
    let t = tempfile::tempdir().unwrap();
    let s = scan_all(&t.path().join("nope"));
    let r = detect::reports(&s, &HwmonUse::new(true, false));
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].status.as_str(), r[0].detail.as_str()),
        ("unusable", "directory missing")
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;

    fn sensor(k: usize, package: u8, readable: bool) -> Sensor {
        Sensor {
            info: info(
                format!("s{k}"),
                DeviceKind::Gpu,
                "x".into(),
                Reading::PowerUw,
            ),
            driver: "amdgpu".into(),
            pci: String::new(),
            covers: String::new(),
            path: PathBuf::new(),
            reading: Reading::PowerUw,
            domain: Domain::Gpu,
            package: format!("p{package}"),
            covers_cpu_package: false,
            covers_host: false,
            use_: Use::Metered,
            status: if readable {
                Ok(1)
            } else {
                Err(MeterError::Parse {
                    path: PathBuf::new(),
                    found: "x".into(),
                })
            },
        }
    }

    proptest! {
        /// A node's total never counts a package twice: after `dedupe`, every package that had
        /// a readable sensor has exactly one sensor added.
        #[test]
        fn each_package_is_added_exactly_once(v in proptest::collection::vec((0u8..4, any::<bool>()), 0..12)) {
            let mut s: Vec<Sensor> = v.iter().enumerate().map(|(k, (p, r))| sensor(k, *p, *r)).collect();
            dedupe(&mut s);
            for p in 0u8..4 {
                let readable = v.iter().any(|(q, r)| *q == p && *r);
                let added = s.iter().filter(|x| x.usable() && x.package == format!("p{p}")).count();
                prop_assert_eq!(added, usize::from(readable));
            }
        }
    }
}
