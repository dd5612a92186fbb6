//! The whole measuring pipeline on fakes: a powercap tree in a temp dir with the real layout and a
//! scripted GPU, driven sample by sample with explicit timestamps.

use amdahl_meter::cluster::{Cluster, Role};
use amdahl_meter::gpu::fake::{FakeBackend, FakeGpu};
use amdahl_meter::gpu::{GpuSource, Visible};
use amdahl_meter::rapl::{self, fake, FileReader, RaplSource};
use amdahl_meter::record::{build, Host, Intensity, MeasurementScope, RunContext, RunState};
use amdahl_meter::{EnergySource, Meter, Method};
use amdahl_model::units::{GramsPerKwh, Joules, Seconds};
use std::path::Path;
use std::sync::Arc;

fn set(root: &Path, rel: &str, uj: u64) {
    std::fs::write(root.join(rel).join("energy_uj"), format!("{uj}\n")).unwrap();
}

fn rapl_source(root: &Path) -> Box<dyn EnergySource> {
    let scan = rapl::scan(root, &rapl::fs_reader());
    Box::new(RaplSource::from_scan(&scan, rapl::fs_reader()).unwrap())
}

const MAX: u64 = 262_143_328_850;

#[test]
fn known_deltas_wrap_and_vanishing_zone_are_exact() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    fake::standard(r).unwrap();
    // psys on its own top-level zone; dram starts 1 J below its wrap point.
    fake::zone(r, "intel-rapl:1", "psys", 10_000_000, MAX).unwrap();
    set(r, "intel-rapl:0/intel-rapl:0:2", 65_712_999_613 - 1_000_000);
    let mut m = Meter::new(vec![rapl_source(r)]);
    m.sample_at(Seconds(0.0));
    set(r, "intel-rapl:0", 1_000_000 + 12_345_678);
    set(r, "intel-rapl:0/intel-rapl:0:2", 2_500_000); // wrapped: 1 J + 2.5 J
    set(r, "intel-rapl:1", 30_000_000);
    m.sample_at(Seconds(1.0));
    std::fs::remove_dir_all(r.join("intel-rapl:1")).unwrap();
    set(r, "intel-rapl:0", 1_000_000 + 20_000_000);
    m.sample_at(Seconds(2.0));
    let e = m.energies();
    let by = |id: &str| e.iter().find(|d| d.id == id).unwrap().clone();
    assert_eq!(by("intel-rapl:0").energy_j, Joules(20.0));
    assert_eq!(by("intel-rapl:0:2").energy_j, Joules(3.5));
    let psys = by("intel-rapl:1");
    assert_eq!(psys.energy_j, Joules(20.0));
    assert!(psys.note.unwrap().contains("unreadable from 2.0 s"));
    assert!(e.iter().all(|d| d.name != "core" && d.name != "uncore"));
}

#[test]
fn permission_denied_zone_is_left_out_with_the_fix() {
    let t = tempfile::tempdir().unwrap();
    fake::standard(t.path()).unwrap();
    // Injected EACCES on dram only: works the same whether or not the tests run as root.
    let reader: FileReader = Arc::new(|p: &Path| {
        if p.to_string_lossy().contains("intel-rapl:0:2/energy_uj") {
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        } else {
            std::fs::read_to_string(p)
        }
    });
    let d = amdahl_meter::sensors::discover(amdahl_meter::sensors::Options {
        powercap_root: t.path().to_path_buf(),
        reader,
        cpu_tdp: None,
        gpus: false,
        visible: Visible::All,
        hwmon_root: t.path().join("no-hwmon"),
        amd_visible: amdahl_meter::hwmon::AmdVisible::all(),
        amd_smi: false,
        target: amdahl_meter::estimate::Target::Machine,
    });
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("CVE-2020-8694") && w.contains("intel-rapl:0:2")),
        "{:?}",
        d.warnings
    );
    let devices: Vec<_> = d
        .sources
        .iter()
        .flat_map(|s| s.devices())
        .map(|x| x.id)
        .collect();
    // Package measured; RAM falls back to the estimate because dram is unreadable.
    assert_eq!(devices, ["intel-rapl:0", "estimate:ram"]);
}

fn gpu(mj: Option<u64>, mw: u32) -> FakeGpu {
    FakeGpu {
        name: "Fake GPU".into(),
        uuid: "GPU-0000".into(),
        mj_per_read: mj,
        power_mw: Some(mw),
        reads: Default::default(),
        usage: Default::default(),
    }
}

#[test]
fn fake_gpus_counter_integrated_and_never_zero() {
    // GPU 0: counter +250 J per read; GPU 1: power only, 300 W; GPU 2: counter stuck (+0).
    let b = FakeBackend(vec![
        gpu(Some(250_000), 300_000),
        gpu(None, 300_000),
        gpu(Some(0), 200_000),
    ]);
    let (src, notes) = GpuSource::new(b, &Visible::All);
    assert!(notes.is_empty());
    let mut m = Meter::new(vec![Box::new(src.unwrap())]);
    for i in 0..=4 {
        m.sample_at(Seconds(i as f64));
    }
    let e = m.energies();
    // Construction probed the counter once, so reads 1..=5: 4 deltas of 250 J.
    assert_eq!(
        (e[0].energy_j, e[0].method),
        (Joules(1000.0), Method::Counter)
    );
    assert_eq!(
        (e[1].energy_j, e[1].method),
        (Joules(1200.0), Method::IntegratedPower)
    );
    assert_eq!(
        (e[2].energy_j, e[2].method),
        (Joules(800.0), Method::IntegratedPower)
    );
    assert!(e[2].note.is_some());
}

#[test]
fn process_scope_is_a_share_of_the_machine() {
    let t = tempfile::tempdir().unwrap();
    fake::standard(t.path()).unwrap();
    let mut m = Meter::new(vec![rapl_source(t.path())]);
    m.sample_at(Seconds(0.0));
    set(t.path(), "intel-rapl:0", 101_000_000);
    m.sample_at(Seconds(1.0));
    let ctx = RunContext {
        run_id: "x".into(),
        project: None,
        command: vec!["x".into()],
        started_unix_s: 0.0,
        scope: MeasurementScope::Process,
        interval: Seconds(1.0),
        host: Host {
            hostname: "h".into(),
            os: String::new(),
            cpu_model: String::new(),
            cpu_count: 4,
            ram_total_gb: 1.0,
            boot_id: None,
        },
        cluster: Cluster {
            launcher: None,
            job_id: None,
            rank: None,
            local_rank: None,
            role: Role::Measured,
        },
        pue: 1.0,
        intensity: Intensity {
            g_per_kwh: GramsPerKwh(475.0),
            region: "world".into(),
            source: "IEA 2019".into(),
            year: Some(2019),
            location: None,
        },
        baseline: None,
        python_version: None,
    };
    let share = amdahl_meter::estimate::cpu_share(0.5, 2.0);
    let r = build(
        &ctx,
        &m.energies(),
        RunState {
            duration: Seconds(1.0),
            exit_code: Some(0),
            share: Some(share),
            ..Default::default()
        },
    );
    let pkg = &r.devices[0];
    assert_eq!(pkg.machine_energy_j, Some(Joules(100.0)));
    assert_eq!(pkg.energy_j, Joules(25.0));
    assert!(r
        .devices
        .iter()
        .all(|d| d.energy_j <= d.machine_energy_j.unwrap_or(d.energy_j)));
}
