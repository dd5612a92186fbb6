//! The NVML backend. `nvml-wrapper` opens `libnvidia-ml.so.1` with `dlopen` at run time, so this
//! compiles and runs on machines with no NVIDIA driver: `init` then fails and says why.

use crate::gpu::GpuBackend;
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
}
