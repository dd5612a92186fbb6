//! The NVML backend. `nvml-wrapper` opens `libnvidia-ml.so.1` with `dlopen` at run time, so this
//! compiles and runs on machines with no NVIDIA driver: `init` then fails and says why.

use crate::gpu::{GpuBackend, ProcessSample};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

pub struct NvmlBackend(Nvml);

/// Why NVML cannot be opened, with the fix.
pub fn explain(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => format!(
            "libnvidia-ml.so.1 not found ({e}): no NVIDIA driver on this machine, or, in a \
             container, start it with the NVIDIA Container Toolkit (`docker run --gpus all`)"
        ),
        NvmlError::DriverNotLoaded => {
            "the NVIDIA kernel driver is not loaded: check `nvidia-smi` and `lsmod | grep nvidia`"
                .into()
        }
        NvmlError::NoPermission => {
            "no permission to open the GPU device files /dev/nvidia*: add your user to the group \
             that owns them"
                .into()
        }
        other => format!("NVML: {other}"),
    }
}

impl NvmlBackend {
    pub fn init() -> Result<Self, String> {
        Nvml::init().map(NvmlBackend).map_err(|e| explain(&e))
    }
}

fn opt<T>(r: Result<T, NvmlError>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

impl GpuBackend for NvmlBackend {
    fn count(&self) -> Result<u32, String> {
        self.0.device_count().map_err(|e| e.to_string())
    }
    fn name(&self, i: u32) -> Result<String, String> {
        self.0
            .device_by_index(i)
            .and_then(|d| d.name())
            .map_err(|e| e.to_string())
    }
    fn uuid(&self, i: u32) -> Result<String, String> {
        self.0
            .device_by_index(i)
            .and_then(|d| d.uuid())
            .map_err(|e| e.to_string())
    }
    fn energy_mj(&self, i: u32) -> Result<Option<u64>, String> {
        let d = self.0.device_by_index(i).map_err(|e| e.to_string())?;
        opt(d.total_energy_consumption())
    }
    fn power_mw(&self, i: u32) -> Result<Option<u32>, String> {
        let d = self.0.device_by_index(i).map_err(|e| e.to_string())?;
        opt(d.power_usage())
    }
    /// `nvmlDeviceGetProcessUtilization` (Maxwell and newer): one sample per process with
    /// non-zero utilisation since `since_us`. NVML answers NOT_FOUND when it has no sample
    /// newer than the timestamp, which here means "no process used the GPU": an empty list.
    /// Not exercised in CI (no GPU there); the logic above it is tested through the fake.
    fn process_utilisation(
        &self,
        i: u32,
        since_us: u64,
    ) -> Result<Option<Vec<ProcessSample>>, String> {
        let d = self.0.device_by_index(i).map_err(|e| e.to_string())?;
        match d.process_utilization_stats(since_us) {
            Ok(v) => Ok(Some(
                v.into_iter()
                    .map(|s| ProcessSample {
                        pid: s.pid,
                        timestamp_us: s.timestamp,
                        sm_percent: s.sm_util,
                    })
                    .collect(),
            )),
            Err(NvmlError::NotFound) => Ok(Some(Vec::new())),
            Err(NvmlError::NotSupported) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    /// `nvmlDeviceGetComputeRunningProcesses_v3` and `...GraphicsRunningProcesses_v3`: the
    /// processes holding a context on the GPU (a process may hold both; callers deduplicate).
    /// Not exercised in CI (no GPU there).
    fn processes(&self, i: u32) -> Result<Option<Vec<u32>>, String> {
        let d = self.0.device_by_index(i).map_err(|e| e.to_string())?;
        let compute = opt(d.running_compute_processes())?;
        let graphics = opt(d.running_graphics_processes())?;
        if compute.is_none() && graphics.is_none() {
            return Ok(None);
        }
        Ok(Some(
            compute
                .into_iter()
                .chain(graphics)
                .flatten()
                .map(|p| p.pid)
                .collect(),
        ))
    }
}
