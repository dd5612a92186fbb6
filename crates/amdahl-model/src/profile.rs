//! `amdahl.device-profile/1`: what `amdahl bench … --profile-out` measured on one device, and
//! how `plan`, `infer` and `carbon` use it in place of the catalog's constants
//! (`--device-profile FILE`; docs/methodology.md, "Device profiles").
//!
//! A profile holds the measured GEMM time per precision over sizes, from which the planner's
//! curve `t = latency + F / rate` is fitted ([`fit_curve`]); the achieved memory bandwidth
//! (STREAM triad on CPUs); host↔device copy bandwidth (GPUs); and the power at idle, under a
//! compute-bound and under a memory-bound load where a counter was readable. Absent fields were
//! not measured and leave the catalog's constants in place; the profile says why in `notes`.
//!
//! One profile may hold the figures of several benchmarks of the same device (`--profile-out`
//! merges into an existing profile: [`DeviceProfile::merge`]); `benchmarks` says which run
//! measured which figure, and when.

use crate::plan::{ComputePrecision, GemmCurve, Hardware};
use crate::units::{Seconds, Watts};
use serde::{Deserialize, Serialize};

mod merge;
pub use merge::{parse_existing, Figure, MergeError, Merged};

pub const PROFILE_SCHEMA: &str = "amdahl.device-profile/1";

/// One timed GEMM size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GemmPoint {
    /// Matrix order (square n × n × n).
    pub n: usize,
    /// 2·n³.
    pub flops: f64,
    /// Median seconds per GEMM.
    pub seconds: f64,
}

/// The measured GEMM curve of one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GemmProfile {
    /// fp64, fp32, tf32, fp16, bf16, int8.
    pub precision: String,
    pub points: Vec<GemmPoint>,
    /// The fitted sustained rate (FLOP/s) of large GEMMs, 1 / slope of t over F.
    pub sustained_flops_per_s: f64,
    /// The fitted fixed time per GEMM (the intercept, at least 0).
    pub latency_s: f64,
}

/// Power of the device while the benchmark ran, where a counter was readable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PowerProfile {
    /// Over a quiet window before the loads (`--power-window`; on a GPU before the CUDA context
    /// is opened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_w: Option<f64>,
    /// During the largest GEMM of the 16-bit (else fp32) precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_w: Option<f64>,
    /// During the memory-bandwidth kernel (STREAM triad; a device-to-device copy on GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_w: Option<f64>,
    /// The counter (`RAPL package-0`, `NVML`), or why none was read.
    pub method: String,
}

/// One benchmark run whose figures a profile holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchmarkRun {
    /// `bench gemm`, `bench memory` or `bench gpu`.
    pub bench: String,
    /// UTC, ISO 8601: when this benchmark ran.
    pub measured_at: String,
    pub amdahl_version: String,
    /// Measured by a debug build: its timings are not representative.
    pub debug_build: bool,
    /// Threads its CPU kernels used (CPU benchmarks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// The profile's figures this run measured and the profile still holds (a later run of the
    /// same figure replaces it): `gemm fp32` (one per precision), `memory_bandwidth`,
    /// `host_to_device`, `device_to_host`, `power.idle_w`, `power.compute_w`, `power.memory_w`.
    pub figures: Vec<String>,
}

/// A measured device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceProfile {
    pub schema: String,
    pub amdahl_version: String,
    /// `gpu` or `cpu`.
    pub kind: String,
    /// The device as it names itself (CUDA device name, /proc/cpuinfo model name).
    pub device: String,
    /// The catalog device it is (`amdahl catalog devices`): `--profile-system`, else matched by
    /// name; `None` when neither.
    pub system: Option<String>,
    /// The host name of the machine measured.
    pub host: String,
    /// Driver and CUDA versions, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// UTC, ISO 8601: when the newest of its benchmarks ran (each one's date in `benchmarks`).
    pub measured_at: String,
    /// Some figure was measured by a debug build: its timings are not representative.
    pub debug_build: bool,
    /// Threads the CPU kernels of the newest benchmark used (CPU profiles; each one's in
    /// `benchmarks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    pub gemm: Vec<GemmProfile>,
    /// Achieved device-memory bandwidth, bytes/s (STREAM triad on CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth: Option<f64>,
    /// Host → device and device → host copy bandwidth, bytes/s (largest copy measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_to_device: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_to_host: Option<f64>,
    pub power: PowerProfile,
    /// What was not measured, and why; each note starts with the figure it is about
    /// (`power.idle_w: …`, `memory bandwidth: …`, `GEMM: …`).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The benchmarks whose figures the profile holds, oldest first, each with the figures it
    /// measured (absent in profiles written before profiles were merged: one benchmark, the
    /// profile's own date).
    #[serde(default)]
    pub benchmarks: Vec<BenchmarkRun>,
}

/// Fit `t = latency + F / rate` to the points by least squares of the relative error (each
/// point weighs alike whatever its size): linear in (latency, 1/rate). A negative intercept
/// (noise on tiny sizes) is refitted through the origin. `None` without a usable point.
pub fn fit_curve(points: &[GemmPoint]) -> Option<(f64, f64)> {
    let pts: Vec<&GemmPoint> = points
        .iter()
        .filter(|p| p.seconds > 0.0 && p.seconds.is_finite() && p.flops > 0.0)
        .collect();
    if pts.is_empty() {
        return None;
    }
    // Minimise Σ ((L + b·F)/t − 1)²: normal equations in (L, b) with x = (1/t, F/t), y = 1.
    let (mut s11, mut s12, mut s22, mut y1, mut y2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in &pts {
        let (a, c) = (1.0 / p.seconds, p.flops / p.seconds);
        s11 += a * a;
        s12 += a * c;
        s22 += c * c;
        y1 += a;
        y2 += c;
    }
    let det = s11 * s22 - s12 * s12;
    let through_origin = || (y2 / s22, 0.0);
    let (b, l) = if pts.len() >= 2 && det > 1e-12 * s11 * s22 {
        let l = (y1 * s22 - y2 * s12) / det;
        let b = (s11 * y2 - s12 * y1) / det;
        if l >= 0.0 && b > 0.0 {
            (b, l)
        } else {
            through_origin()
        }
    } else {
        through_origin()
    };
    (b > 0.0 && b.is_finite()).then(|| (1.0 / b, l))
}

/// Why a profile cannot be used for `--system`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProfileError {
    #[error("{file}: schema `{found}`, not `{PROFILE_SCHEMA}`: give a file written by `amdahl bench … --profile-out`")]
    Schema { file: String, found: String },
    #[error("{file}: a profile of `{device}`, which matched no catalogued device: rerun the benchmark with --profile-system NAME (`amdahl catalog devices`)")]
    NoSystem { file: String, device: String },
    #[error("{file}: a profile of the {profiled} (`{device}`), but --system is the {system}: give --system {profiled}, or profile this device")]
    Device {
        file: String,
        profiled: String,
        device: String,
        system: String,
    },
    #[error("{file}: {field} = {value} is not a positive number; the file was edited or damaged: rerun the benchmark")]
    Value {
        file: String,
        field: String,
        value: f64,
    },
    #[error("{file}: no GEMM of precision {precision} was measured: rerun the benchmark with --precision {precision}")]
    Precision { file: String, precision: String },
}

impl DeviceProfile {
    /// Check the schema and that every measured figure is a positive number.
    pub fn check(&self, file: &str) -> Result<(), ProfileError> {
        if self.schema != PROFILE_SCHEMA {
            return Err(ProfileError::Schema {
                file: file.into(),
                found: self.schema.clone(),
            });
        }
        let bad = |field: String, value: f64| ProfileError::Value {
            file: file.into(),
            field,
            value,
        };
        for g in &self.gemm {
            for (what, v) in [
                ("sustained_flops_per_s", g.sustained_flops_per_s),
                ("latency_s", g.latency_s + 1.0),
            ] {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(bad(format!("gemm {} {what}", g.precision), v));
                }
            }
        }
        for (what, v) in [
            ("memory_bandwidth", self.memory_bandwidth),
            ("host_to_device", self.host_to_device),
            ("device_to_host", self.device_to_host),
            ("power.idle_w", self.power.idle_w),
            ("power.compute_w", self.power.compute_w),
            ("power.memory_w", self.power.memory_w),
        ] {
            if let Some(v) = v {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(bad(what.into(), v));
                }
            }
        }
        Ok(())
    }

    /// The GEMM curve measured at `p`, if any.
    pub fn gemm_of(&self, p: &str) -> Option<&GemmProfile> {
        self.gemm
            .iter()
            .find(|g| g.precision.eq_ignore_ascii_case(p))
    }

    /// "A100 SXM4 80GB, profiled on HOST at DATE"; a profile merged from several benchmarks
    /// names each one's date ("profiled on HOST: bench gemm at DATE, bench memory at DATE").
    pub fn provenance(&self, name: &str, file: &str) -> String {
        let when = if self.benchmarks.len() > 1 {
            let runs: Vec<String> = self
                .benchmarks
                .iter()
                .map(|b| format!("{} at {}", b.bench, b.measured_at))
                .collect();
            format!(": {}", runs.join(", "))
        } else {
            format!(" at {}", self.measured_at)
        };
        format!(
            "{name}, profiled on {}{when} ({file}{})",
            self.host,
            if self.debug_build {
                "; a debug build: timings not representative"
            } else {
                ""
            }
        )
    }

    /// Lay the measured constants over `hw`, the catalog's view of the same device: the GEMM
    /// curve's efficiency (the 16-bit, else fp32, sustained rate over the data-sheet peak) and
    /// latency, the bandwidth fraction, the idle power and the power coefficients the loads
    /// determine. What was not measured keeps the catalog's value.
    pub fn apply(&self, hw: &mut Hardware, file: &str) -> Result<(), ProfileError> {
        self.check(file)?;
        let Some(system) = &self.system else {
            return Err(ProfileError::NoSystem {
                file: file.into(),
                device: self.device.clone(),
            });
        };
        if !system.eq_ignore_ascii_case(&hw.name) {
            return Err(ProfileError::Device {
                file: file.into(),
                profiled: system.clone(),
                device: self.device.clone(),
                system: hw.name.clone(),
            });
        }
        let mut curve: GemmCurve = hw.curve();
        let mut power = hw.power_coefficients();
        let sixteen = ["bf16", "fp16"]
            .iter()
            .find_map(|p| self.gemm_of(p).map(|g| (g, hw.peak_bf16.get())));
        let measured = sixteen.or_else(|| {
            let g = self.gemm_of("fp32")?;
            Some((g, hw.peak(ComputePrecision::Fp32)?.get()))
        });
        let mut u_compute = None;
        if let Some((g, peak)) = measured {
            curve.max_efficiency = g.sustained_flops_per_s / peak;
            curve.latency = Seconds(g.latency_s);
            u_compute = Some(curve.max_efficiency);
        }
        let mut u_memory = None;
        if let Some(bw) = self.memory_bandwidth {
            curve.memory_efficiency = bw / hw.memory_bandwidth.get();
            u_memory = Some(curve.memory_efficiency);
        }
        if let Some(idle) = self.power.idle_w {
            hw.idle_power = Watts(idle.min(hw.tdp.get()));
            hw.idle_power_estimated = false;
        }
        // A load at full busy draws TDP·(active + c·u): with the generation's `active`, each
        // measured load gives its coefficient (crate::power).
        let tdp = hw.tdp.get();
        let mut p_changed = false;
        if let (Some(w), Some(u)) = (self.power.compute_w, u_compute) {
            power.compute = ((w / tdp - power.active) / u).max(0.0);
            p_changed = true;
        }
        if let (Some(w), Some(u)) = (self.power.memory_w, u_memory) {
            power.memory = ((w / tdp - power.active) / u).max(0.0);
            p_changed = true;
        }
        hw.tuning.curve = Some(curve);
        if p_changed {
            hw.tuning.power = Some(power);
        }
        let name = hw.name.clone();
        hw.tuning.provenance.push(self.provenance(&name, file));
        Ok(())
    }

    /// The device as a GEMM loop sees it, for `amdahl calibrate`'s `gemm` rows: its measured
    /// sustained rate at `precision` as the peak, the fitted latency, efficiency 1 (relative to
    /// that rate). Every other field of the hardware is unused by a GEMM row and left empty.
    pub fn gemm_hardware(
        &self,
        precision: &str,
        file: &str,
    ) -> Result<(Hardware, f64), ProfileError> {
        self.check(file)?;
        let g = self
            .gemm_of(precision)
            .ok_or_else(|| ProfileError::Precision {
                file: file.into(),
                precision: precision.into(),
            })?;
        let peak = g.sustained_flops_per_s;
        let hw = Hardware {
            name: self.system.clone().unwrap_or_else(|| self.device.clone()),
            class: crate::plan::DeviceClass::Generic,
            arch: String::new(),
            peak_fp32: None,
            peak_bf16: crate::units::FlopsPerSecond(peak),
            has_bf16: true,
            peak_fp8: None,
            peak_tf32: None,
            peak_fp4: None,
            memory: crate::units::Bytes(0.0),
            memory_bandwidth: crate::units::BytesPerSecond(self.memory_bandwidth.unwrap_or(1.0)),
            intra_node_bandwidth: None,
            tdp: Watts(0.0),
            idle_power: Watts(0.0),
            idle_power_estimated: true,
            server: None,
            power_cap: None,
            tuning: crate::plan::Tuning {
                curve: Some(GemmCurve {
                    max_efficiency: 1.0,
                    fp8_efficiency: 1.0,
                    latency: Seconds(g.latency_s),
                    memory_efficiency: 1.0,
                }),
                power: None,
                step_overhead: None,
                per_sequence_overhead: None,
                provenance: vec![self.provenance(&self.device, file)],
            },
        };
        Ok((hw, peak))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(latency: f64, rate: f64) -> Vec<GemmPoint> {
        [64usize, 128, 256, 512]
            .iter()
            .map(|&n| {
                let flops = 2.0 * (n as f64).powi(3);
                GemmPoint {
                    n,
                    flops,
                    seconds: latency + flops / rate,
                }
            })
            .collect()
    }

    #[test]
    fn the_curve_fit_recovers_rate_and_latency() {
        let (rate, lat) = fit_curve(&points(2e-5, 5e10)).unwrap();
        assert!((rate / 5e10 - 1.0).abs() < 1e-9, "{rate}");
        assert!((lat / 2e-5 - 1.0).abs() < 1e-6, "{lat}");
        // No latency at all: a zero intercept, not a negative one.
        let (rate, lat) = fit_curve(&points(0.0, 5e10)).unwrap();
        assert!(
            (rate / 5e10 - 1.0).abs() < 1e-9 && lat.abs() < 1e-12,
            "{rate} {lat}"
        );
        assert!(fit_curve(&[]).is_none());
    }
}
