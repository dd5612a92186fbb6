//! Device profiles from benchmark reports (`amdahl bench gemm|memory|gpu --profile-out`): the
//! measured GEMM curve per precision, bandwidths and power, as an
//! [`amdahl_model::profile::DeviceProfile`] that `plan`, `infer`, `carbon` and `calibrate` read.

use crate::gemm::GemmReport;
use crate::gpu::{pinned_bandwidth, Direction, GpuReport};
use crate::memory::MemoryReport;
use amdahl_model::profile::{
    fit_curve, DeviceProfile, GemmPoint, GemmProfile, PowerProfile, PROFILE_SCHEMA,
};

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
    }
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

/// The CPU's profile from `bench gemm`: each precision's rows at the most threads measured, and
/// the power during the largest GEMM of the 16-bit (else fp32) precision where RAPL was read.
pub fn from_gemm(r: &GemmReport, o: &Origin) -> DeviceProfile {
    let device = r.machine.cpu_model.clone().unwrap_or_else(|| "CPU".into());
    let mut p = empty("cpu", device, o, r.debug_build);
    let threads = r.rows.iter().map(|x| x.threads).max().unwrap_or(1);
    p.threads = Some(threads);
    for info in &r.precisions {
        let rows: Vec<_> = r
            .rows
            .iter()
            .filter(|x| x.precision == info.precision && x.threads == threads)
            .collect();
        let points = rows
            .iter()
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
    match loaded.and_then(|x| Some((x.energy.as_ref()?, x.seconds.median.0))) {
        Some((e, s)) if s > 0.0 => {
            p.power.compute_w = Some(e.joules_per_run.0 / s);
            p.power.method = e.source.clone();
        }
        _ => {
            p.power.method = "not measured: no readable RAPL counter".into();
            p.notes.push(
                "power: no RAPL counter was readable during the benchmark (see its warning); the \
                 power model keeps the catalog's coefficients"
                    .into(),
            );
        }
    }
    p.notes.push(
        "idle power: not measured by the benchmark; measure it with `amdahl run -- sleep 60`"
            .into(),
    );
    p
}

/// The CPU's profile from `bench memory`: the STREAM triad bandwidth and its power.
pub fn from_memory(r: &MemoryReport, o: &Origin) -> DeviceProfile {
    let device = r.machine.cpu_model.clone().unwrap_or_else(|| "CPU".into());
    let mut p = empty("cpu", device, o, r.debug_build);
    p.threads = Some(r.machine.threads.used);
    let triad = r.triad();
    p.memory_bandwidth = triad.map(|t| t.rate.median).filter(|b| *b > 0.0);
    if r.fits_in_cache {
        p.notes.push(
            "memory bandwidth: the STREAM arrays fit in the caches, so the figure is a cache's, \
             not DRAM's; give larger --sizes"
                .into(),
        );
    }
    match triad.and_then(|t| Some((t.energy.as_ref()?, t.seconds.median.0))) {
        Some((e, s)) if s > 0.0 => {
            p.power.memory_w = Some(e.joules_per_run.0 / s);
            p.power.method = e.source.clone();
        }
        _ => {
            p.power.method = "not measured: no readable RAPL counter".into();
        }
    }
    p.notes
        .push("GEMM: not measured by `bench memory`; profile with `bench gemm` too".into());
    p
}

/// The GPU's profile from `bench gpu`: cuBLAS GEMM per precision, pinned copy bandwidth. The
/// benchmark reads no power counter and runs no device-memory kernel: those stay the catalog's,
/// as its notes say.
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
    p.power.method = "not measured: `bench gpu` reads no power counter".into();
    p.notes.push(
        "power: measure idle and loaded power with `amdahl run` (NVML) around `bench gpu \
         --min-time 60s` and give it to `calibrate` as power_w rows"
            .into(),
    );
    p.notes.push(
        "device-memory bandwidth: not measured by `bench gpu`; the catalog's achieved fraction \
         stays"
            .into(),
    );
    p
}
