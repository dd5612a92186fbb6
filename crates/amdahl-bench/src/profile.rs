//! Device profiles from benchmark reports (`amdahl bench gemm|memory|gpu --profile-out`): the
//! measured GEMM curve per precision, bandwidths and power, as an
//! [`amdahl_model::profile::DeviceProfile`] that `plan`, `infer`, `carbon` and `calibrate` read.

use crate::energy::{EnergyReading, EnergyStatus};
use crate::gemm::GemmReport;
use crate::gpu::{pinned_bandwidth, Direction, GpuReport};
use crate::memory::MemoryReport;
use crate::power::PowerStatus;
use crate::stats::Stats;
use amdahl_model::profile::{
    fit_curve, BenchmarkRun, DeviceProfile, Figure, GemmPoint, GemmProfile, MergeError, Merged,
    PowerProfile, PROFILE_SCHEMA,
};

/// The benchmarks that write profiles, as a profile's `benchmarks` names them.
pub const BENCH_GEMM: &str = "bench gemm";
pub const BENCH_MEMORY: &str = "bench memory";
pub const BENCH_GPU: &str = "bench gpu";

/// The figures whose load `bench` runs: a figure it did not measure replaces the notes of the
/// file it merges into only when it ran the load (its "not measured: why" is then the news).
pub fn covers(bench: &str) -> &'static [Figure] {
    match bench {
        BENCH_GEMM => &[Figure::IdleW, Figure::ComputeW, Figure::Gemm],
        BENCH_MEMORY => &[Figure::IdleW, Figure::MemoryW, Figure::MemoryBandwidth],
        BENCH_GPU => &Figure::ALL,
        _ => &[],
    }
}

/// Merge `new`, the profile one benchmark just wrote, into `old`, the profile already at
/// `file` (`--profile-out` on an existing file): [`DeviceProfile::merge`] with the figures
/// that benchmark covers.
pub fn merge(old: &DeviceProfile, new: DeviceProfile, file: &str) -> Result<Merged, MergeError> {
    let bench = new
        .benchmarks
        .last()
        .map(|b| b.bench.clone())
        .unwrap_or_default();
    old.merge(new, covers(&bench), file)
}

/// Where a profile was measured: the host and the time, filled by the caller.
#[derive(Debug, Clone)]
pub struct Origin {
    pub host: String,
    pub measured_at: String,
    /// The catalog device (`--profile-system`, else matched by name).
    pub system: Option<String>,
}

fn empty(kind: &str, device: String, o: &Origin, debug_build: bool) -> DeviceProfile {
    DeviceProfile {
        schema: PROFILE_SCHEMA.into(),
        amdahl_version: env!("CARGO_PKG_VERSION").into(),
        kind: kind.into(),
        device,
        system: o.system.clone(),
        host: o.host.clone(),
        driver: None,
        measured_at: o.measured_at.clone(),
        debug_build,
        threads: None,
        gemm: Vec::new(),
        memory_bandwidth: None,
        host_to_device: None,
        device_to_host: None,
        power: PowerProfile::default(),
        notes: Vec::new(),
        benchmarks: Vec::new(),
    }
}

/// Record the benchmark `bench` as the one run that measured every figure of `p`.
fn ran(mut p: DeviceProfile, bench: &str) -> DeviceProfile {
    p.benchmarks = vec![BenchmarkRun {
        bench: bench.into(),
        ..p.as_one_run()
    }];
    p
}

/// One precision's curve from its (n, flops, median seconds) points; `None` when none is usable.
fn curve(precision: &str, points: Vec<GemmPoint>) -> Option<GemmProfile> {
    let (rate, latency) = fit_curve(&points)?;
    Some(GemmProfile {
        precision: precision.into(),
        points,
        sustained_flops_per_s: rate,
        latency_s: latency,
    })
}

/// The power a benchmark saw: idle, and under its compute-bound and memory-bound loads. `None`
/// for a load the benchmark does not run (`bench gemm` streams no memory, `bench memory` runs
/// no GEMM), which the notes name with the benchmark that runs it.
struct Powers {
    idle: PowerStatus,
    compute: Option<PowerStatus>,
    memory: Option<PowerStatus>,
}

/// Lay the measured power into the profile: each figure where measured, each missing one in the
/// notes with why, and `method` naming the counters read (or why none was).
fn fill_power(p: &mut DeviceProfile, w: Powers) {
    let mut sources: Vec<String> = Vec::new();
    let mut first_reason = None;
    let figures = [
        (Figure::IdleW, Some(w.idle), "", &mut p.power.idle_w),
        (
            Figure::ComputeW,
            w.compute,
            "`bench gemm` (or `bench gpu`)",
            &mut p.power.compute_w,
        ),
        (
            Figure::MemoryW,
            w.memory,
            "`bench memory` (or `bench gpu`)",
            &mut p.power.memory_w,
        ),
    ];
    for (field, status, other, slot) in figures {
        match status {
            Some(PowerStatus::Measured {
                watts,
                during,
                source,
                seconds,
            }) => {
                *slot = Some(watts);
                p.notes.push(field.note(format_args!(
                    "{watts:.1} W during {during} over {seconds:.2} s"
                )));
                if !sources.contains(&source) {
                    sources.push(source);
                }
            }
            Some(PowerStatus::NotMeasured { reason }) => {
                p.notes
                    .push(field.note(format_args!("not measured: {reason}")));
                first_reason.get_or_insert(reason);
            }
            None => p.notes.push(field.note(format_args!(
                "this benchmark runs no such load; profile with {other} for it"
            ))),
        }
    }
    p.power.method = if sources.is_empty() {
        format!(
            "not measured: {}",
            first_reason.unwrap_or_else(|| "no power counter read".into())
        )
    } else {
        sources.join("; ")
    };
}

fn threads_said(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

/// The power of a timed case from its energy reading: the interval's joules over its length
/// (the timed repeats between the two counter readings).
fn case_power(
    e: Option<&EnergyReading>,
    time: &Stats,
    during: String,
    status: &EnergyStatus,
) -> PowerStatus {
    let why = || match status {
        EnergyStatus::NotMeasured { reason } => reason.clone(),
        EnergyStatus::Measured {
            missing: Some(m), ..
        } => m.clone(),
        EnergyStatus::Measured { .. } => format!("{during} had no energy reading"),
    };
    match e.and_then(|e| Some((e.watts(time.repeats)?, e.interval_s?, e))) {
        Some((watts, seconds, e)) => PowerStatus::Measured {
            watts,
            seconds,
            during,
            source: e.source.clone(),
        },
        None if e.is_some() => PowerStatus::not_measured(format!(
            "{during}: the energy reading has no interval (a report saved by an older version)"
        )),
        None => PowerStatus::not_measured(why()),
    }
}

/// The CPU's profile from `bench gemm`: each precision's rows at the most threads measured, the
/// power during the largest GEMM of the 16-bit (else fp32) precision where RAPL was read, and
/// `idle` (measured before the benchmark).
pub fn from_gemm(r: &GemmReport, o: &Origin, idle: &PowerStatus) -> DeviceProfile {
    let device = r.machine.cpu_model.clone().unwrap_or_else(|| "CPU".into());
    let mut p = empty("cpu", device, o, r.debug_build);
    let threads = r.rows.iter().map(|x| x.threads).max().unwrap_or(1);
    p.threads = Some(threads);
    for info in &r.precisions {
        let points = r
            .rows
            .iter()
            .filter(|x| x.precision == info.precision && x.threads == threads)
            .map(|x| GemmPoint {
                n: x.n,
                flops: x.work,
                seconds: x.seconds.median.0,
            })
            .collect();
        if let Some(c) = curve(info.precision.name(), points) {
            p.gemm.push(c);
        }
    }
    let loaded = ["bf16", "fp16", "fp32"].iter().find_map(|name| {
        r.rows
            .iter()
            .filter(|x| x.precision.name() == *name && x.threads == threads)
            .max_by_key(|x| x.n)
    });
    let compute = match loaded {
        Some(x) => case_power(
            x.energy.as_ref(),
            &x.seconds,
            format!(
                "{} GEMM n={} on {}",
                x.precision.name(),
                x.n,
                threads_said(x.threads)
            ),
            &r.energy,
        ),
        None => PowerStatus::not_measured("no bf16, fp16 or fp32 GEMM measured (--precision)"),
    };
    fill_power(
        &mut p,
        Powers {
            idle: idle.clone(),
            compute: Some(compute),
            memory: None,
        },
    );
    p.notes.push(
        Figure::MemoryBandwidth.note("not measured by `bench gemm`; profile with `bench memory`"),
    );
    ran(p, BENCH_GEMM)
}

/// The CPU's profile from `bench memory`: the STREAM triad bandwidth, its power and `idle`.
pub fn from_memory(r: &MemoryReport, o: &Origin, idle: &PowerStatus) -> DeviceProfile {
    let device = r.machine.cpu_model.clone().unwrap_or_else(|| "CPU".into());
    let mut p = empty("cpu", device, o, r.debug_build);
    p.threads = Some(r.machine.threads.used);
    let triad = r.triad();
    p.memory_bandwidth = triad.map(|t| t.rate.median).filter(|b| *b > 0.0);
    if p.memory_bandwidth.is_none() {
        p.notes
            .push(Figure::MemoryBandwidth.note("not measured: no STREAM triad measured"));
    } else if r.fits_in_cache {
        p.notes.push(Figure::MemoryBandwidth.note(
            "the STREAM arrays fit in the caches, so the figure is a cache's, not DRAM's; give \
             larger --sizes",
        ));
    }
    let memory = match triad {
        Some(t) => case_power(
            t.energy.as_ref(),
            &t.seconds,
            format!("STREAM triad on {}", threads_said(r.machine.threads.used)),
            &r.energy,
        ),
        None => PowerStatus::not_measured("no STREAM triad measured"),
    };
    fill_power(
        &mut p,
        Powers {
            idle: idle.clone(),
            compute: None,
            memory: Some(memory),
        },
    );
    p.notes
        .push(Figure::Gemm.note("not measured by `bench memory`; profile with `bench gemm` too"));
    ran(p, BENCH_MEMORY)
}

/// The GPU's profile from `bench gpu`: cuBLAS GEMM per precision, pinned copy bandwidth, the
/// device-to-device copy's best bandwidth as the memory bandwidth, and the NVML power the
/// report holds (idle, GEMM, copy).
pub fn from_gpu(r: &GpuReport, o: &Origin) -> DeviceProfile {
    let mut p = empty("gpu", r.device.name.clone(), o, r.debug_build);
    p.driver = r
        .device
        .driver_cuda_version
        .as_ref()
        .map(|v| format!("CUDA driver {v}"));
    let mut precisions: Vec<_> = r.gemm.iter().map(|g| g.precision).collect();
    precisions.dedup();
    for prec in precisions {
        let points = r
            .gemm
            .iter()
            .filter(|g| g.precision == prec)
            .map(|g| GemmPoint {
                n: g.n,
                flops: g.flops_per_run,
                seconds: g.time.median.0,
            })
            .collect();
        if let Some(c) = curve(prec.name(), points) {
            p.gemm.push(c);
        }
    }
    p.host_to_device = pinned_bandwidth(&r.copies, Direction::H2d);
    p.device_to_host = pinned_bandwidth(&r.copies, Direction::D2h);
    p.memory_bandwidth = r.memory_bandwidth();
    if p.memory_bandwidth.is_none() {
        p.notes.push(Figure::MemoryBandwidth.note(
            "no device-to-device copy measured (--device-mib 0); the catalog's achieved fraction \
             stays",
        ));
    }
    fill_power(
        &mut p,
        Powers {
            idle: r.power.idle.clone(),
            compute: Some(r.power.compute.clone()),
            memory: Some(r.power.memory.clone()),
        },
    );
    ran(p, BENCH_GPU)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::{self, GemmConfig};
    use crate::gpu::{DeviceCopyRow, GpuDevice, GpuPower, SCHEMA};
    use crate::machine::Threads;
    use crate::precision::Precision;
    use crate::Hooks;
    use amdahl_model::units::Seconds;

    fn origin() -> Origin {
        Origin {
            host: "h".into(),
            measured_at: "2026-01-01T00:00:00Z".into(),
            system: None,
        }
    }

    fn measured(watts: f64, during: &str, source: &str) -> PowerStatus {
        PowerStatus::Measured {
            watts,
            seconds: 2.0,
            during: during.into(),
            source: source.into(),
        }
    }

    fn stats(min: f64, median: f64) -> Stats {
        Stats {
            min: Seconds(min),
            median: Seconds(median),
            max: Seconds(median * 2.0),
            repeats: 5,
        }
    }

    fn gpu_report(power: GpuPower, copy: bool) -> GpuReport {
        let moved = crate::gpu::device_copy_bytes_moved(1 << 30);
        GpuReport {
            schema: SCHEMA.into(),
            device: GpuDevice {
                index: 0,
                name: "NVIDIA H100 80GB HBM3".into(),
                compute_capability: "9.0".into(),
                memory_bytes: 80 << 30,
                driver_cuda_version: Some("12.4".into()),
            },
            debug_build: false,
            timing: String::new(),
            checks: vec![],
            gemm: vec![],
            copies: vec![],
            // 2 GiB moved in 0.8 ms at best: 2.684 TB/s; the median copy 1 ms.
            device_memory: copy.then(|| DeviceCopyRow {
                bytes: 1 << 30,
                bytes_moved: moved,
                time: stats(0.8e-3, 1e-3),
                bandwidth: stats(0.8e-3, 1e-3).rates(moved),
            }),
            power,
            not_measured: vec![],
        }
    }

    #[test]
    fn a_gpu_profile_takes_the_device_copy_and_the_nvml_power() {
        let nvml = "gpu:0 NVIDIA H100 80GB HBM3 (counter)";
        let r = gpu_report(
            GpuPower {
                idle: measured(71.5, "idle", nvml),
                compute: measured(655.0, "bf16 GEMM n=8192", nvml),
                memory: measured(420.0, "device-to-device copy of 1024 MiB", nvml),
            },
            true,
        );
        let p = from_gpu(&r, &origin());
        let bw = p.memory_bandwidth.unwrap();
        assert!(
            (bw / (2.0 * (1u64 << 30) as f64 / 0.8e-3) - 1.0).abs() < 1e-12,
            "{bw}"
        );
        assert_eq!(p.power.idle_w, Some(71.5));
        assert_eq!(p.power.compute_w, Some(655.0));
        assert_eq!(p.power.memory_w, Some(420.0));
        assert_eq!(p.power.method, nvml);
        let notes = p.notes.join("\n");
        assert!(
            notes.contains("power.idle_w: 71.5 W during idle"),
            "{notes}"
        );
        assert!(!notes.contains("not measured"), "{notes}");
        p.check("p.json").unwrap();
    }

    #[test]
    fn a_gpu_profile_without_nvml_has_no_power_and_says_why() {
        let r = gpu_report(GpuPower::not_measured("libnvidia-ml.so.1 not found"), false);
        let p = from_gpu(&r, &origin());
        assert_eq!(p.memory_bandwidth, None);
        assert_eq!(
            (p.power.idle_w, p.power.compute_w, p.power.memory_w),
            (None, None, None)
        );
        assert_eq!(p.power.method, "not measured: libnvidia-ml.so.1 not found");
        let notes = p.notes.join("\n");
        for f in ["power.idle_w", "power.compute_w", "power.memory_w"] {
            assert!(
                notes.contains(&format!("{f}: not measured: libnvidia-ml.so.1 not found")),
                "{notes}"
            );
        }
        assert!(notes.contains("--device-mib 0"), "{notes}");
    }

    fn tiny_gemm() -> GemmReport {
        let mut cfg = GemmConfig::quick(Threads {
            used: 1,
            capped_from: None,
        });
        cfg.sizes = vec![16, 24];
        cfg.precisions = vec![Precision::Fp32];
        cfg.repeats = 1;
        gemm::run(&cfg, &mut Hooks::default()).unwrap()
    }

    #[test]
    fn a_cpu_profile_holds_the_idle_power_measured_before_the_benchmark() {
        let r = tiny_gemm();
        let rapl = "intel-rapl:0 package-0 (counter)";
        let p = from_gemm(&r, &origin(), &measured(30.0, "idle", rapl));
        assert_eq!(p.power.idle_w, Some(30.0));
        // The GEMM ran without a probe: no power under load, and why.
        assert_eq!(p.power.compute_w, None);
        assert_eq!(p.power.method, rapl);
        let notes = p.notes.join("\n");
        assert!(
            notes.contains("power.compute_w: not measured: no energy sensor wired"),
            "{notes}"
        );
        assert!(notes.contains("power.memory_w: this benchmark runs no such load"));

        let p = from_gemm(
            &r,
            &origin(),
            &PowerStatus::not_measured("estimate only: CPU time × TDP share"),
        );
        assert_eq!(p.power.idle_w, None);
        assert!(p.power.method.starts_with("not measured: estimate only"));
        assert!(p
            .notes
            .join("\n")
            .contains("power.idle_w: not measured: estimate only"));
    }

    fn tiny_memory() -> MemoryReport {
        let mut cfg = crate::memory::MemoryConfig::quick(Threads {
            used: 1,
            capped_from: None,
        });
        cfg.stream_len = Some(4096);
        cfg.repeats = 1;
        cfg.sweep = false;
        crate::memory::run(&cfg, &mut Hooks::default()).unwrap()
    }

    /// `bench gemm` then `bench memory` into one file: one profile with the GEMM curve and the
    /// bandwidth, whose notes no longer send the reader to `bench memory`.
    #[test]
    fn a_memory_profile_merges_into_a_gemm_profile() {
        let rapl = "intel-rapl:0 package-0 (counter)";
        let g = from_gemm(&tiny_gemm(), &origin(), &measured(30.0, "idle", rapl));
        assert_eq!(g.benchmarks.len(), 1);
        assert_eq!(g.benchmarks[0].bench, BENCH_GEMM);
        assert_eq!(g.benchmarks[0].figures, ["power.idle_w", "gemm fp32"]);
        let later = Origin {
            measured_at: "2026-01-02T00:00:00Z".into(),
            ..origin()
        };
        let m = from_memory(
            &tiny_memory(),
            &later,
            &PowerStatus::not_measured("estimate only: CPU time × TDP share"),
        );
        assert_eq!(m.benchmarks[0].figures, ["memory_bandwidth"]);
        let out = merge(&g, m, "cpu.json").unwrap();
        let p = &out.profile;
        p.check("cpu.json").unwrap();
        assert!(p.gemm_of("fp32").is_some());
        assert!(p.memory_bandwidth.is_some_and(|b| b > 0.0));
        // The idle power RAPL gave the GEMM run stays: the memory run could not read one.
        assert_eq!(p.power.idle_w, Some(30.0));
        assert_eq!(p.power.method, rapl);
        let notes = p.notes.join("\n");
        for gone in [
            "profile with `bench memory`",
            "GEMM: not measured",
            "power.idle_w: not measured",
            "runs no such load; profile with `bench memory`",
        ] {
            assert!(!notes.contains(gone), "{gone}: {notes}");
        }
        assert!(notes.contains("power.memory_w: not measured: "), "{notes}");
        assert!(notes.contains("power.compute_w: not measured: no energy sensor wired"));
        let runs: Vec<_> = p.benchmarks.iter().map(|b| b.bench.as_str()).collect();
        assert_eq!(runs, [BENCH_GEMM, BENCH_MEMORY]);
        assert_eq!(p.measured_at, "2026-01-02T00:00:00Z");
        assert_eq!(
            out.summary("cpu.json"),
            "merged bench memory into cpu.json (kept: idle power, GEMM curve (fp32) from bench \
             gemm)"
        );
    }

    #[test]
    fn a_gpu_profile_does_not_merge_into_a_cpu_one() {
        let g = from_gemm(
            &tiny_gemm(),
            &origin(),
            &PowerStatus::not_measured("no counter"),
        );
        let gpu = from_gpu(&gpu_report(GpuPower::not_measured("none"), true), &origin());
        let e = merge(&g, gpu, "cpu.json").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--profile-out cpu.json: the profile's kind is `cpu`, this benchmark's is `gpu`"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_case_power_is_its_joules_over_its_interval() {
        let e = EnergyReading::new(
            "rapl".into(),
            Some(amdahl_model::units::Joules(10.0)),
            5,
            1e9,
            "J/FLOP",
        )
        .map(|e| e.over(0.25));
        let status = EnergyStatus::Measured {
            source: "rapl".into(),
            missing: None,
        };
        // 10 J over the 5 runs' 0.25 s: 40 W, whatever the median run.
        let s = case_power(e.as_ref(), &stats(0.04, 0.03), "fp32 GEMM".into(), &status);
        assert_eq!(
            s,
            PowerStatus::Measured {
                watts: 40.0,
                seconds: 0.25,
                during: "fp32 GEMM".into(),
                source: "rapl".into()
            }
        );
        let short = EnergyStatus::Measured {
            source: "rapl".into(),
            missing: Some("1 of 2 cases not measured: the timed runs took 2 ms".into()),
        };
        let s = case_power(None, &stats(0.04, 0.05), "fp32 GEMM".into(), &short);
        assert_eq!(
            s,
            PowerStatus::not_measured("1 of 2 cases not measured: the timed runs took 2 ms")
        );
        // A reading without its interval (an older report) gives no power rather than a guess.
        let old = EnergyReading::new(
            "rapl".into(),
            Some(amdahl_model::units::Joules(10.0)),
            5,
            1e9,
            "J/FLOP",
        );
        let s = case_power(
            old.as_ref(),
            &stats(0.04, 0.05),
            "fp32 GEMM".into(),
            &status,
        );
        assert_eq!(s.watts(), None);
    }
}
