//! Where one sample of `amdahl exporter` spends its time: on a fake /proc tree of 500
//! processes in 50 cgroups (the real layout in a temp dir, ticks advancing every step), times
//! reading /proc alone, the attribution step (reading included), the snapshot and the
//! OpenMetrics rendering, averaged over ITERATIONS samples. Complements bench_exporter (whole
//! process CPU %): this one says which phase to make cheaper.
//!
//! Usage: `cargo run --release -p amdahl-cli --example bench_exporter_phases -- [ITERATIONS]`

use amdahl_meter::attribution::procs::{fake as fproc, ProcFs, ProcView};
use amdahl_meter::attribution::{Attributor, Options};
use amdahl_meter::meter::DeviceEnergy;
use amdahl_meter::{DeviceKind, Method};
use amdahl_model::units::Joules;
use std::time::{Duration, Instant};

const PROCS: u32 = 500;
const CGROUPS: u32 = 50;

fn dev(id: &str, kind: DeviceKind, j: f64) -> DeviceEnergy {
    DeviceEnergy {
        id: id.into(),
        kind,
        name: id.into(),
        method: Method::Counter,
        energy_j: Joules(j),
        note: None,
        rejected_steps: 0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir()?;
    let root = dir.path().to_path_buf();
    fproc::machine(&root, 0, 64 * 1024 * 1024)?;
    for i in 0..PROCS {
        let cg = format!("0::/system.slice/svc-{}.service\n", i % CGROUPS);
        fproc::process(&root, 1000 + i, "worker", 0, 2560, Some(0), Some(&cg), &[])?;
    }
    let advance = |k: u64| -> std::io::Result<()> {
        fproc::machine(&root, 600 * k, 64 * 1024 * 1024)?;
        for i in 0..PROCS {
            fproc::set_ticks(&root, 1000 + i, "worker", k, 2560)?;
        }
        Ok(())
    };
    for (cached, processes) in [(false, true), (true, true), (true, false)] {
        let make = || {
            if cached {
                ProcFs::new(&root)
            } else {
                ProcFs::uncached(&root)
            }
        };
        let view = make();
        let mut a = Attributor::new(
            Box::new(make()),
            Options {
                processes,
                ..Options::default()
            },
        );
        let (mut read, mut step, mut snap, mut render) = (
            Duration::ZERO,
            Duration::ZERO,
            Duration::ZERO,
            Duration::ZERO,
        );
        let mut bytes = 0;
        for k in 1..=u64::from(n) {
            advance(k)?;
            let t = Instant::now();
            let got = view
                .pids()
                .into_iter()
                .filter_map(|p| view.process(p, false))
                .count();
            read += t.elapsed();
            assert_eq!(got, PROCS as usize);
            let e = [
                dev("pkg", DeviceKind::CpuPackage, 100.0 * k as f64),
                dev("dram", DeviceKind::Dram, 10.0 * k as f64),
            ];
            let t = Instant::now();
            a.step(k as f64, &e);
            step += t.elapsed();
            let t = Instant::now();
            let s = a.snapshot();
            snap += t.elapsed();
            let t = Instant::now();
            bytes = amdahl_report::exporter::render(&s)?.len();
            render += t.elapsed();
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / f64::from(n);
        println!(
            "{PROCS} processes in {CGROUPS} cgroups, /proc {}, process series {}: per sample \
             (mean of {n}): /proc read {:.2} ms, step (read + attribute) {:.2} ms, snapshot {:.2} ms, \
             render {:.2} ms ({bytes} bytes); total {:.2} ms = {:.2} % of one core at a 1 s interval",
            if cached { "kept entries" } else { "every file every sample" },
            if processes { "on" } else { "off" },
            ms(read),
            ms(step),
            ms(snap),
            ms(render),
            ms(step + snap + render),
            ms(step + snap + render) / 10.0
        );
    }
    Ok(())
}
