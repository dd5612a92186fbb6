//! Rendering of `amdahl bench gpu` (schema `amdahl.bench.gpu/1`): a GEMM table, a copy-bandwidth
//! table, the device-memory bandwidth, the power and notes; one CSV grid holding them. Pure
//! functions of [`GpuReport`].

use crate::bench::Grid;
use crate::sig;
use crate::table::Table;
use amdahl_bench::gpu::{Direction, GpuReport, HostMemory};
use amdahl_bench::PowerStatus;

const GIGA: f64 = 1e9;
const TERA: f64 = 1e12;
const MIB: f64 = (1u64 << 20) as f64;

fn direction(d: Direction) -> &'static str {
    match d {
        Direction::H2d => "host→device",
        Direction::D2h => "device→host",
    }
}

fn host(h: HostMemory) -> &'static str {
    match h {
        HostMemory::Pageable => "pageable",
        HostMemory::Pinned => "pinned",
    }
}

fn percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{}%", sig(100.0 * x, 3)))
}

/// Every measurement as one row: GEMMs in TFLOP/s (int8: TOP/s), copies in GB/s.
pub fn gpu_grid(r: &GpuReport) -> Grid {
    let headers = [
        "benchmark",
        "case",
        "size",
        "min",
        "median",
        "max",
        "unit",
        "median s",
        "copy share",
    ];
    let mut rows = Vec::new();
    for g in &r.gemm {
        rows.push(vec![
            "gemm".into(),
            g.precision.to_string(),
            g.n.to_string(),
            sig(g.flops.min / TERA, 4),
            sig(g.flops.median / TERA, 4),
            sig(g.flops.max / TERA, 4),
            if g.precision == amdahl_bench::gpu::GpuPrecision::Int8 {
                "TOP/s".into()
            } else {
                "TFLOP/s".into()
            },
            sig(g.time.median.0, 3),
            percent(g.copy_share),
        ]);
    }
    for c in &r.copies {
        rows.push(vec![
            "copy".into(),
            format!("{} {}", direction(c.direction), host(c.host)),
            c.bytes.to_string(),
            sig(c.bandwidth.min / GIGA, 4),
            sig(c.bandwidth.median / GIGA, 4),
            sig(c.bandwidth.max / GIGA, 4),
            "GB/s".into(),
            sig(c.time.median.0, 3),
            "-".into(),
        ]);
    }
    if let Some(d) = &r.device_memory {
        rows.push(vec![
            "device memory".into(),
            "device→device (read + write)".into(),
            d.bytes.to_string(),
            sig(d.bandwidth.min / GIGA, 4),
            sig(d.bandwidth.median / GIGA, 4),
            sig(d.bandwidth.max / GIGA, 4),
            "GB/s".into(),
            sig(d.time.median.0, 3),
            "-".into(),
        ]);
    }
    for (case, p) in power_cases(r) {
        if let PowerStatus::Measured { watts, seconds, .. } = p {
            let w = format!("{watts:.1}");
            rows.push(vec![
                "power".into(),
                case.into(),
                "-".into(),
                w.clone(),
                w.clone(),
                w,
                "W".into(),
                format!("{seconds:.2}"),
                "-".into(),
            ]);
        }
    }
    Grid {
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

fn power_cases(r: &GpuReport) -> [(&'static str, &PowerStatus); 3] {
    [
        ("idle", &r.power.idle),
        ("compute", &r.power.compute),
        ("memory", &r.power.memory),
    ]
}

/// "idle: 71.5 W over 2.00 s" or "idle: not measured (why)".
fn power_line(case: &str, p: &PowerStatus) -> String {
    match p {
        PowerStatus::Measured {
            watts,
            seconds,
            during,
            ..
        } => format!("  {case}: {watts:.1} W ({during}, {seconds:.2} s)\n"),
        PowerStatus::NotMeasured { reason } => format!("  {case}: not measured ({reason})\n"),
    }
}

/// The GEMM table and its legend; empty without GEMMs.
fn gemm_section(r: &GpuReport) -> String {
    if r.gemm.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    s.push_str("\ncuBLAS GEMM C = Aᵀ·B, n×n, 2·n³ operations per call\n");
    let mut t = Table::new([
        "precision",
        "n",
        "compute type",
        "min T/s",
        "median T/s",
        "max T/s",
        "median s",
        "copy share",
    ]);
    for g in &r.gemm {
        t.row([
            g.precision.to_string(),
            g.n.to_string(),
            g.compute_type.clone(),
            sig(g.flops.min / TERA, 4),
            sig(g.flops.median / TERA, 4),
            sig(g.flops.max / TERA, 4),
            sig(g.time.median.0, 3),
            percent(g.copy_share),
        ]);
    }
    s.push_str(&t.render());
    s.push_str(
        "T/s: TFLOP/s (int8: TOP/s). copy share: time to send A, B up and C back over pinned \
         memory ÷ (that + the GEMM), the non-parallelizable part if every call crossed the bus\n",
    );
    s
}

pub fn gpu_text(r: &GpuReport) -> String {
    let d = &r.device;
    let mut s = format!(
        "GPU {}: {} (compute capability {}, {} GiB, driver CUDA {})\n",
        d.index,
        d.name,
        d.compute_capability,
        sig(d.memory_bytes as f64 / (MIB * 1024.0), 4),
        d.driver_cuda_version.as_deref().unwrap_or("unknown"),
    );
    if r.debug_build {
        s.push_str("note: debug build (host-side timings are not representative)\n");
    }
    s.push_str(&gemm_section(r));
    if !r.copies.is_empty() {
        s.push_str("\nhost↔device copies\n");
        let mut t = Table::new([
            "direction",
            "host memory",
            "MiB",
            "min GB/s",
            "median GB/s",
            "max GB/s",
        ]);
        for c in &r.copies {
            t.row([
                direction(c.direction).to_string(),
                host(c.host).to_string(),
                sig(c.bytes as f64 / MIB, 4),
                sig(c.bandwidth.min / GIGA, 4),
                sig(c.bandwidth.median / GIGA, 4),
                sig(c.bandwidth.max / GIGA, 4),
            ]);
        }
        s.push_str(&t.render());
    }
    if let Some(d) = &r.device_memory {
        s.push_str(&format!(
            "\ndevice memory: device-to-device copy of {} MiB, read + write counted (2 × the \
             buffer per copy): best {} GB/s, median {} GB/s\n",
            sig(d.bytes as f64 / MIB, 4),
            sig(d.bandwidth.max / GIGA, 4),
            sig(d.bandwidth.median / GIGA, 4),
        ));
    }
    if !r.checks.is_empty() {
        let checks: Vec<String> = r
            .checks
            .iter()
            .map(|c| format!("{} {:.1e} ≤ {:.1e}", c.precision, c.max_error, c.tolerance))
            .collect();
        s.push_str(&format!(
            "\nchecked against an f64 reference at n={}: {}\n",
            r.checks.first().map_or(0, |c| c.n),
            checks.join(", ")
        ));
    }
    for m in &r.not_measured {
        s.push_str(&format!("not measured: {}: {}\n", m.what, m.reason));
    }
    s.push_str(&format!("timing: {}\n", r.timing));
    let source = power_cases(r).iter().find_map(|(_, p)| match p {
        PowerStatus::Measured { source, .. } => Some(source.clone()),
        PowerStatus::NotMeasured { .. } => None,
    });
    s.push_str(&format!(
        "power{}:\n",
        source.map_or(String::new(), |x| format!(" ({x})"))
    ));
    for (case, p) in power_cases(r) {
        s.push_str(&power_line(case, p));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_bench::gpu::*;
    use amdahl_bench::stats::Stats;
    use amdahl_model::units::Seconds;

    fn stats(s: f64) -> Stats {
        Stats {
            min: Seconds(s),
            median: Seconds(s),
            max: Seconds(s),
            repeats: 3,
        }
    }

    fn report() -> GpuReport {
        let mut r = GpuReport {
            schema: SCHEMA.into(),
            device: GpuDevice {
                index: 0,
                name: "Fake H200".into(),
                compute_capability: "9.0".into(),
                memory_bytes: 140 << 30,
                driver_cuda_version: Some("12.4".into()),
            },
            debug_build: false,
            timing: "events".into(),
            checks: vec![GpuCheck {
                precision: GpuPrecision::Fp16,
                n: 128,
                max_error: 1e-4,
                tolerance: 2f64.powi(-10),
            }],
            // 2·4096³ = 1.374e11 FLOP in 0.2 ms: 687 TFLOP/s.
            gemm: vec![GpuGemmRow {
                precision: GpuPrecision::Fp16,
                n: 4096,
                compute_type: "CUBLAS_COMPUTE_32F".into(),
                flops_per_run: gemm_flops(4096),
                time: stats(2e-4),
                flops: stats(2e-4).rates(gemm_flops(4096)),
                device_bytes: gemm_device_bytes(GpuPrecision::Fp16, 4096).unwrap_or(0),
                copy_share: None,
            }],
            copies: vec![CopyRow {
                direction: Direction::H2d,
                host: HostMemory::Pinned,
                bytes: 1 << 26,
                time: stats(1e-3),
                bandwidth: stats(1e-3).rates((1u64 << 26) as f64),
            }],
            device_memory: Some(DeviceCopyRow {
                bytes: 1 << 30,
                bytes_moved: device_copy_bytes_moved(1 << 30),
                time: stats(1e-3),
                bandwidth: stats(1e-3).rates(device_copy_bytes_moved(1 << 30)),
            }),
            power: GpuPower {
                idle: PowerStatus::Measured {
                    watts: 71.5,
                    seconds: 2.0,
                    during: "idle".into(),
                    source: "gpu:0 Fake H200 (counter)".into(),
                },
                compute: PowerStatus::Measured {
                    watts: 655.0,
                    seconds: 2.01,
                    during: "fp16 GEMM n=4096".into(),
                    source: "gpu:0 Fake H200 (counter)".into(),
                },
                memory: PowerStatus::not_measured("power window of 0 s"),
            },
            not_measured: vec![NotMeasured {
                what: "int8 n=1001".into(),
                reason: "multiple of 4".into(),
            }],
        };
        r.copies.push(CopyRow {
            direction: Direction::D2h,
            ..r.copies[0].clone()
        });
        fill_copy_shares(&mut r);
        r
    }

    #[test]
    fn text_has_rates_copies_checks_and_gaps() {
        let t = gpu_text(&report());
        assert!(t.contains("Fake H200"), "{t}");
        assert!(t.contains("687.2"), "{t}");
        // 64 MiB in 1 ms = 67.11 GB/s.
        assert!(t.contains("67.11"), "{t}");
        assert!(t.contains("fp16 1.0e-4"), "{t}");
        assert!(t.contains("not measured: int8 n=1001"), "{t}");
        // Copy share: 3·4096²·2 B = 100.7 MB at 67.1 GB/s = 1.5 ms vs 0.2 ms GEMM: 88.2 %.
        assert!(t.contains("88.2%"), "{t}");
        // 2 GiB moved per 1 ms copy: 2147 GB/s.
        assert!(t.contains("best 2147 GB/s"), "{t}");
        assert!(t.contains("power (gpu:0 Fake H200 (counter)):"), "{t}");
        assert!(t.contains("  idle: 71.5 W (idle, 2.00 s)"), "{t}");
        assert!(
            t.contains("  compute: 655.0 W (fp16 GEMM n=4096, 2.01 s)"),
            "{t}"
        );
        assert!(
            t.contains("  memory: not measured (power window of 0 s)"),
            "{t}"
        );
    }

    #[test]
    fn grid_has_one_row_per_measurement() {
        let g = gpu_grid(&report());
        // A GEMM, two copies, the device copy and the two measured powers.
        assert_eq!(g.rows.len(), 6);
        assert_eq!(g.rows[3][0], "device memory");
        assert_eq!(g.rows[3][5], "2147");
        assert_eq!(g.rows[4][..3], ["power", "idle", "-"]);
        assert_eq!(g.rows[4][4], "71.5");
        assert_eq!(g.rows[0][0], "gemm");
        assert_eq!(g.rows[0][6], "TFLOP/s");
        assert_eq!(g.rows[1][1], "host→device pinned");
        let csv = g.csv().unwrap();
        assert!(csv.starts_with("benchmark,case,size,min,median,max,unit,median s,copy share\n"));
    }

    #[test]
    fn json_has_the_schema() {
        let j = crate::to_json(&report()).unwrap();
        assert!(j.contains("\"schema\": \"amdahl.bench.gpu/1\""), "{j}");
        assert!(j.contains("\"precision\": \"fp16\""), "{j}");
        assert!(j.contains("\"direction\": \"h2d\""), "{j}");
    }
}
