//! GPUs: the measuring logic over a small backend trait, so NVML (real) and a fake (tests) share
//! it. The total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ since driver load,
//! Volta and newer) is used where supported; otherwise the power reading
//! (`nvmlDeviceGetPowerUsage`, mW) is integrated and the device says `integrated-power`.

use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
use crate::MeterError;
use amdahl_model::units::Watts;

/// What a GPU library must answer. Errors are messages; `Ok(None)` means "not supported".
pub trait GpuBackend: Send {
    fn count(&self) -> Result<u32, String>;
    fn name(&self, index: u32) -> Result<String, String>;
    fn uuid(&self, index: u32) -> Result<String, String>;
    /// Millijoules since driver load, or None where the GPU has no energy counter.
    fn energy_mj(&self, index: u32) -> Result<Option<u64>, String>;
    /// Milliwatts now, or None where unsupported.
    fn power_mw(&self, index: u32) -> Result<Option<u32>, String>;
    /// Per-process utilisation samples taken after `since_us` (the driver's CPU timestamp, µs;
    /// 0: all it has buffered), or None where the driver does not give them. Used by the
    /// exporter's attribution only, so backends that only measure need not answer.
    fn process_utilisation(
        &self,
        _index: u32,
        _since_us: u64,
    ) -> Result<Option<Vec<ProcessSample>>, String> {
        Ok(None)
    }
    /// Pids of the processes with a compute or graphics context on the GPU now, or None where
    /// unreadable.
    fn processes(&self, _index: u32) -> Result<Option<Vec<u32>>, String> {
        Ok(None)
    }
}

/// One per-process utilisation sample (NVML `nvmlProcessUtilizationSample_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessSample {
    pub pid: u32,
    /// CPU timestamp of the sample, µs.
    pub timestamp_us: u64,
    /// SM (3D/compute) utilisation in the sample period, percent.
    pub sm_percent: u32,
}

/// Which GPUs `CUDA_VISIBLE_DEVICES` leaves visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visible {
    /// Unset: every device.
    All,
    /// A list of indices (`0,2`) or UUID prefixes (`GPU-8e3f…`, `MIG-…`), in CUDA's order.
    List(Vec<String>),
}

/// Parse `CUDA_VISIBLE_DEVICES` the way the CUDA runtime does: a comma-separated list that stops
/// at the first invalid entry; empty or `-1`-led means no device. Integer indices are NVML
/// indices, which equal CUDA's when `CUDA_DEVICE_ORDER=PCI_BUS_ID` (Slurm's gres sets matching
/// values); UUIDs match exactly whatever the order.
pub fn parse_visible(var: Option<&str>) -> Visible {
    let Some(v) = var else { return Visible::All };
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim) {
        let ok_index = !item.is_empty() && item.bytes().all(|b| b.is_ascii_digit());
        let ok_uuid = item.starts_with("GPU-") || item.starts_with("MIG-");
        if !(ok_index || ok_uuid) {
            break;
        }
        out.push(item.to_string());
    }
    Visible::List(out)
}

impl Visible {
    /// Only the device a CUDA program opens as ordinal `ordinal`: the `ordinal`-th entry of the
    /// list (none past its end), or NVML index `ordinal` when every device is visible — CUDA's
    /// ordinal equals NVML's index when `CUDA_DEVICE_ORDER=PCI_BUS_ID`; callers that need
    /// certainty compare the names.
    pub fn nth(&self, ordinal: usize) -> Visible {
        match self {
            Visible::All => Visible::List(vec![ordinal.to_string()]),
            Visible::List(items) => {
                Visible::List(items.get(ordinal).cloned().into_iter().collect())
            }
        }
    }

    pub fn admits(&self, index: u32, uuid: &str) -> bool {
        match self {
            Visible::All => true,
            Visible::List(items) => items.iter().any(|it| {
                it.parse::<u32>().map(|i| i == index).unwrap_or(false)
                    || (it.len() > 4 && uuid.starts_with(it.as_str()))
            }),
        }
    }
}

struct Gpu {
    index: u32,
    info: DeviceInfo,
}

/// The visible GPUs of a backend as an energy source.
pub struct GpuSource<B: GpuBackend> {
    backend: B,
    gpus: Vec<Gpu>,
}

impl<B: GpuBackend> GpuSource<B> {
    /// Enumerate the devices `visible` admits, probing whether each has an energy counter.
    /// Returns the source (None if no GPU) and notes about devices that cannot be read.
    pub fn new(backend: B, visible: &Visible) -> (Option<Self>, Vec<String>) {
        let mut notes = Vec::new();
        let n = match backend.count() {
            Ok(n) => n,
            Err(e) => {
                notes.push(format!("GPU count: {e}"));
                0
            }
        };
        let mut gpus = Vec::new();
        for index in 0..n {
            let uuid = backend.uuid(index).unwrap_or_default();
            if !visible.admits(index, &uuid) {
                continue;
            }
            let name = backend.name(index).unwrap_or_else(|_| "NVIDIA GPU".into());
            let method = match (backend.energy_mj(index), backend.power_mw(index)) {
                (Ok(Some(_)), _) => Method::Counter,
                (_, Ok(Some(_))) => Method::IntegratedPower,
                (e, p) => {
                    notes.push(format!(
                        "GPU {index} ({name}): neither energy nor power readable ({}; {}); not measured",
                        e.err().unwrap_or_else(|| "energy counter not supported".into()),
                        p.err().unwrap_or_else(|| "power not supported".into())
                    ));
                    continue;
                }
            };
            gpus.push(Gpu {
                index,
                info: DeviceInfo {
                    id: format!("gpu:{index}"),
                    kind: DeviceKind::Gpu,
                    name,
                    method,
                },
            });
        }
        let src = (!gpus.is_empty()).then_some(GpuSource { backend, gpus });
        (src, notes)
    }
}

impl<B: GpuBackend> EnergySource for GpuSource<B> {
    fn devices(&self) -> Vec<DeviceInfo> {
        self.gpus.iter().map(|g| g.info.clone()).collect()
    }

    fn read(&mut self) -> Vec<Result<Raw, MeterError>> {
        self.gpus
            .iter()
            .map(|g| {
                let err = |message: String| MeterError::Gpu {
                    device: g.info.id.clone(),
                    message,
                };
                let power = self.backend.power_mw(g.index).map_err(err)?;
                let power = power.map(|mw| Watts(mw as f64 / 1e3));
                match g.info.method {
                    Method::Counter => match self.backend.energy_mj(g.index).map_err(err)? {
                        Some(value) => Ok(Raw::Counter {
                            value,
                            units_per_joule: 1e3,
                            max: None,
                            power,
                        }),
                        None => Err(err("energy counter stopped answering".into())),
                    },
                    _ => power
                        .map(Raw::Power)
                        .ok_or_else(|| err("power reading stopped answering".into())),
                }
            })
            .collect()
    }
}

/// A scripted GPU for tests: energy and power follow closures of the call count.
pub mod fake {
    use super::{GpuBackend, ProcessSample};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    /// What a fake GPU's driver says about its processes; tests change it between samples.
    #[derive(Debug, Clone, Default)]
    pub struct FakeUsage {
        /// Per-process samples (None: the driver does not give them, as before Maxwell).
        pub samples: Option<Vec<ProcessSample>>,
        /// Pids with a context on the GPU (None: unreadable).
        pub processes: Option<Vec<u32>>,
    }

    #[derive(Clone)]
    pub struct FakeGpu {
        pub name: String,
        pub uuid: String,
        /// mJ per energy read, or None: no counter (pre-Volta).
        pub mj_per_read: Option<u64>,
        pub power_mw: Option<u32>,
        pub reads: Arc<AtomicU64>,
        pub usage: Arc<Mutex<FakeUsage>>,
    }

    pub struct FakeBackend(pub Vec<FakeGpu>);

    impl GpuBackend for FakeBackend {
        fn count(&self) -> Result<u32, String> {
            Ok(self.0.len() as u32)
        }
        fn name(&self, i: u32) -> Result<String, String> {
            self.0
                .get(i as usize)
                .map(|g| g.name.clone())
                .ok_or_else(|| "no such GPU".into())
        }
        fn uuid(&self, i: u32) -> Result<String, String> {
            self.0
                .get(i as usize)
                .map(|g| g.uuid.clone())
                .ok_or_else(|| "no such GPU".into())
        }
        fn energy_mj(&self, i: u32) -> Result<Option<u64>, String> {
            let g = self.0.get(i as usize).ok_or("no such GPU")?;
            Ok(g.mj_per_read
                .map(|step| step * g.reads.fetch_add(1, Ordering::SeqCst)))
        }
        fn power_mw(&self, i: u32) -> Result<Option<u32>, String> {
            Ok(self.0.get(i as usize).ok_or("no such GPU")?.power_mw)
        }
        fn process_utilisation(
            &self,
            i: u32,
            since_us: u64,
        ) -> Result<Option<Vec<ProcessSample>>, String> {
            let g = self.0.get(i as usize).ok_or("no such GPU")?;
            let u = g.usage.lock().map_err(|_| "poisoned")?;
            // Like NVML: only samples newer than the timestamp given.
            Ok(u.samples.as_ref().map(|v| {
                v.iter()
                    .filter(|s| s.timestamp_us > since_us)
                    .copied()
                    .collect()
            }))
        }
        fn processes(&self, i: u32) -> Result<Option<Vec<u32>>, String> {
            let g = self.0.get(i as usize).ok_or("no such GPU")?;
            let u = g.usage.lock().map_err(|_| "poisoned")?;
            Ok(u.processes.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;

    #[test]
    fn the_nth_visible_device_is_cudas_ordinal() {
        assert_eq!(Visible::All.nth(2), Visible::List(vec!["2".into()]));
        let v = parse_visible(Some("3,GPU-8e3f"));
        assert_eq!(v.nth(0), Visible::List(vec!["3".into()]));
        assert_eq!(v.nth(1), Visible::List(vec!["GPU-8e3f".into()]));
        assert!(v.nth(1).admits(0, "GPU-8e3f-1234") && !v.nth(1).admits(3, "GPU-aaaa"));
        // Past the list: no device at all, not the first.
        assert_eq!(v.nth(2), Visible::List(vec![]));
        assert!(!v.nth(2).admits(0, "GPU-8e3f"));
    }

    #[test]
    fn cuda_visible_devices_follows_cuda_rules() {
        assert_eq!(parse_visible(None), Visible::All);
        assert_eq!(parse_visible(Some("")), Visible::List(vec![]));
        assert_eq!(parse_visible(Some("-1")), Visible::List(vec![]));
        assert_eq!(
            parse_visible(Some("0,2,x,1")),
            Visible::List(vec!["0".into(), "2".into()])
        );
        let v = parse_visible(Some("GPU-8e3f"));
        assert!(v.admits(5, "GPU-8e3f0c1a-aaaa"));
        assert!(!v.admits(0, "GPU-1234"));
        assert!(parse_visible(Some("1")).admits(1, "GPU-x"));
    }

    fn gpu(uuid: &str, mj: Option<u64>, mw: Option<u32>) -> FakeGpu {
        FakeGpu {
            name: "Fake H100".into(),
            uuid: uuid.into(),
            mj_per_read: mj,
            power_mw: mw,
            reads: Default::default(),
            usage: Default::default(),
        }
    }

    #[test]
    fn counter_where_supported_power_otherwise_and_visibility() {
        let b = FakeBackend(vec![
            gpu("GPU-aaaa", Some(1500), Some(300_000)),
            gpu("GPU-bbbb", None, Some(250_000)),
            gpu("GPU-cccc", None, None),
        ]);
        let (src, notes) = GpuSource::new(b, &Visible::All);
        let src = src.unwrap();
        let m: Vec<_> = src.devices().iter().map(|d| d.method).collect();
        assert_eq!(m, [Method::Counter, Method::IntegratedPower]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let b = FakeBackend(vec![
            gpu("GPU-aaaa", Some(1), None),
            gpu("GPU-bbbb", Some(1), None),
        ]);
        let (src, _) = GpuSource::new(b, &parse_visible(Some("GPU-bbbb")));
        let d = src.unwrap().devices();
        assert_eq!((d.len(), d[0].id.as_str()), (1, "gpu:1"));
    }
}
