//! AMD SMI (`libamd_smi.so`, ROCm ≥ 6.0), opened with `dlopen` at run time like NVML, so the
//! binary builds and runs on machines without ROCm: opening then fails and says why, and AMD
//! GPUs are read through hwmon (`hwmon::amd`, integrated power) instead.
//!
//! Only the energy counter is used: `amdsmi_get_energy_count(handle, *energy, *resolution,
//! *timestamp)` ("accumulates all energy consumed"; µJ = energy × resolution, amdsmi.h), matched
//! to the hwmon chip of the same PCI function through `amdsmi_get_gpu_device_bdf`
//! (`amdsmi_bdf_t`: function bits 0–2, device 3–7, bus 8–15, domain 16–63). Per-process usage
//! (`amdsmi_get_gpu_process_list`) is not read: its struct changed between releases, so the
//! exporter leaves AMD GPU energy unattributed rather than guess a layout.

use std::ffi::{c_char, c_void, CStr, CString};

type Status = u32;
type Handle = *mut c_void;
type InitFn = unsafe extern "C" fn(u64) -> Status;
type ShutFn = unsafe extern "C" fn() -> Status;
type SocketsFn = unsafe extern "C" fn(*mut u32, *mut Handle) -> Status;
type ProcsFn = unsafe extern "C" fn(Handle, *mut u32, *mut Handle) -> Status;
type BdfFn = unsafe extern "C" fn(Handle, *mut u64) -> Status;
type EnergyFn = unsafe extern "C" fn(Handle, *mut u64, *mut f32, *mut u64) -> Status;

/// `AMDSMI_STATUS_SUCCESS` and `AMDSMI_INIT_AMD_GPUS = (1 << 1)` (amdsmi.h).
const SUCCESS: Status = 0;
const INIT_AMD_GPUS: u64 = 1 << 1;
/// `AMDSMI_STATUS_NOT_SUPPORTED` (amdsmi.h).
const NOT_SUPPORTED: Status = 2;
/// More sockets or processors than any node has (`AMDSMI_MAX_DEVICES` is 32).
const MAX_HANDLES: usize = 64;

/// Where the library is looked for: the loader's path (LD_LIBRARY_PATH, ldconfig), then ROCm's
/// default prefix.
pub const LIBRARY: &[&str] = &["libamd_smi.so", "/opt/rocm/lib/libamd_smi.so"];

/// One GPU AMD SMI knows: its PCI address (`0000:c1:00.0`) and handle.
struct Gpu {
    bdf: String,
    handle: Handle,
}

/// An opened AMD SMI. Handles stay valid until `amdsmi_shut_down`, called on drop.
pub struct AmdSmi {
    energy: EnergyFn,
    shut: ShutFn,
    gpus: Vec<Gpu>,
}

// The handles are opaque ids the library hands out for the process's lifetime; calls from the
// sampler thread, one at a time (the source owns the value), are what AMD SMI supports.
unsafe impl Send for AmdSmi {}

/// `amdsmi_bdf_t.as_uint` as `dddd:bb:dd.f`.
pub fn bdf_string(v: u64) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        v >> 16,
        (v >> 8) & 0xff,
        (v >> 3) & 0x1f,
        v & 0x7
    )
}

fn sym<T: Copy>(lib: *mut c_void, path: &str, name: &str) -> Result<T, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `lib` is a live dlopen handle; the symbol's type is the one amdsmi.h declares.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "{path} has no `{name}`: not the AMD SMI of ROCm 6.0 or newer (wrong version); AMD \
             GPUs are read through hwmon instead"
        ));
    }
    // SAFETY: a function pointer of the declared signature, the size of a data pointer.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local C string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated, valid until the next dl* call on this thread.
        unsafe { CStr::from_ptr(e as *const c_char) }
            .to_string_lossy()
            .into_owned()
    }
}

fn check(what: &str, s: Status) -> Result<(), String> {
    if s == SUCCESS {
        Ok(())
    } else {
        Err(format!("AMD SMI {what} failed (amdsmi_status_t {s})"))
    }
}

impl AmdSmi {
    /// Open the first library of [`LIBRARY`] that loads.
    pub fn open() -> Result<Self, String> {
        let mut why = Vec::new();
        for p in LIBRARY {
            match Self::open_path(p) {
                Ok(s) => return Ok(s),
                Err(e) => why.push(e),
            }
        }
        Err(format!(
            "libamd_smi.so not found ({}): no ROCm on this machine (AMD GPUs are read through hwmon)",
            why.first().map(String::as_str).unwrap_or("")
        ))
    }

    /// Open the library at `path`, initialise it for AMD GPUs and list them.
    pub fn open_path(path: &str) -> Result<Self, String> {
        let c = CString::new(path).map_err(|e| e.to_string())?;
        // SAFETY: loading a shared library runs its constructors; AMD SMI's are benign, and a
        // fake one in tests is ours.
        let lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(dl_error());
        }
        let init: InitFn = sym(lib, path, "amdsmi_init")?;
        let shut: ShutFn = sym(lib, path, "amdsmi_shut_down")?;
        let sockets: SocketsFn = sym(lib, path, "amdsmi_get_socket_handles")?;
        let procs: ProcsFn = sym(lib, path, "amdsmi_get_processor_handles")?;
        let bdf: BdfFn = sym(lib, path, "amdsmi_get_gpu_device_bdf")?;
        let energy: EnergyFn = sym(lib, path, "amdsmi_get_energy_count")?;
        // SAFETY: the functions of amdsmi.h, called with valid pointers and bounded counts.
        unsafe {
            check("init", init(INIT_AMD_GPUS))?;
            // From here, dropping `me` (on an error below too) shuts the library down.
            let mut me = AmdSmi {
                energy,
                shut,
                gpus: Vec::new(),
            };
            let mut n: u32 = MAX_HANDLES as u32;
            let mut socks = [std::ptr::null_mut(); MAX_HANDLES];
            check("socket list", sockets(&mut n, socks.as_mut_ptr()))?;
            for &s in socks.iter().take((n as usize).min(MAX_HANDLES)) {
                let mut m: u32 = MAX_HANDLES as u32;
                let mut hs = [std::ptr::null_mut(); MAX_HANDLES];
                check("processor list", procs(s, &mut m, hs.as_mut_ptr()))?;
                for &h in hs.iter().take((m as usize).min(MAX_HANDLES)) {
                    let mut v = 0u64;
                    if bdf(h, &mut v) == SUCCESS {
                        me.gpus.push(Gpu {
                            bdf: bdf_string(v),
                            handle: h,
                        });
                    }
                }
            }
            Ok(me)
        }
    }

    /// PCI addresses of the GPUs AMD SMI lists.
    pub fn addresses(&self) -> Vec<String> {
        self.gpus.iter().map(|g| g.bdf.clone()).collect()
    }

    /// The energy counter of the GPU at `bdf`: (count, µJ per count), or None where the GPU
    /// has none (`AMDSMI_STATUS_NOT_SUPPORTED`).
    pub fn energy(&self, bdf: &str) -> Result<Option<(u64, f64)>, String> {
        let g = self
            .gpus
            .iter()
            .find(|g| g.bdf == bdf)
            .ok_or_else(|| format!("AMD SMI lists no GPU at {bdf}"))?;
        let (mut e, mut r, mut t) = (0u64, 0f32, 0u64);
        // SAFETY: a handle from this library, valid pointers.
        let s = unsafe { (self.energy)(g.handle, &mut e, &mut r, &mut t) };
        match s {
            SUCCESS if r.is_finite() && r > 0.0 => Ok(Some((e, f64::from(r)))),
            SUCCESS => Err(format!(
                "AMD SMI energy counter of {bdf} has resolution {r} µJ, not a positive number"
            )),
            NOT_SUPPORTED => Ok(None),
            other => Err(format!(
                "AMD SMI energy counter of {bdf} failed (amdsmi_status_t {other})"
            )),
        }
    }
}

impl Drop for AmdSmi {
    fn drop(&mut self) {
        // SAFETY: initialised in open_path; the library stays loaded (never dlclosed).
        unsafe {
            (self.shut)();
        }
    }
}

/// The AMD GPUs a run meters (as hwmon chose them: visible, one per package) whose energy
/// counter AMD SMI reads, as a counter source in place of hwmon's integrated power.
pub struct AmdSmiSource {
    smi: AmdSmi,
    devices: Vec<(crate::DeviceInfo, String)>,
}

impl AmdSmiSource {
    /// Take from `sensors` (the amdgpu sensors a run would add) those AMD SMI has a counter for;
    /// notes say why any other is left to hwmon.
    pub fn new(smi: AmdSmi, sensors: &[&crate::hwmon::Sensor]) -> (Option<Self>, Vec<String>) {
        let mut notes = Vec::new();
        let mut devices = Vec::new();
        for s in sensors
            .iter()
            .filter(|s| s.driver == "amdgpu" && !s.pci.is_empty())
        {
            if !smi.addresses().contains(&s.pci) {
                continue;
            }
            match smi.energy(&s.pci) {
                Ok(Some(_)) => {
                    let mut info = s.info.clone();
                    info.method = crate::Method::Counter;
                    devices.push((info, s.pci.clone()));
                }
                Ok(None) => notes.push(format!(
                    "{}: AMD SMI has no energy counter for {}; read through hwmon",
                    s.info.id, s.pci
                )),
                Err(e) => notes.push(format!("{}: {e}; read through hwmon", s.info.id)),
            }
        }
        let src = (!devices.is_empty()).then_some(AmdSmiSource { smi, devices });
        (src, notes)
    }

    /// Ids of the devices this source reads (hwmon must not read them too).
    pub fn ids(&self) -> Vec<String> {
        self.devices.iter().map(|(d, _)| d.id.clone()).collect()
    }
}

impl crate::EnergySource for AmdSmiSource {
    fn devices(&self) -> Vec<crate::DeviceInfo> {
        self.devices.iter().map(|(d, _)| d.clone()).collect()
    }

    fn read(&mut self) -> Vec<Result<crate::Raw, crate::MeterError>> {
        self.devices
            .iter()
            .map(|(d, bdf)| {
                let err = |message: String| crate::MeterError::Gpu {
                    device: d.id.clone(),
                    message,
                };
                match self.smi.energy(bdf).map_err(err)? {
                    // µJ = count × resolution: the divisor of counts per joule.
                    Some((count, res)) => Ok(crate::Raw::Counter {
                        value: count,
                        units_per_joule: 1e6 / res,
                        max: None,
                        power: None,
                    }),
                    None => Err(err("energy counter stopped answering".into())),
                }
            })
            .collect()
    }
}

/// `amdahl detect`'s rows for AMD SMI, for the AMD GPUs a run would meter: which energy
/// counters it reads (in place of hwmon's power), or why it cannot.
pub fn reports(amd: &[&crate::hwmon::Sensor]) -> Vec<crate::sensors::SensorReport> {
    use crate::sensors::SensorReport;
    if amd.is_empty() {
        return Vec::new();
    }
    let row = |device: &str, status: &str, detail: String, fix: Option<&str>| SensorReport {
        sensor: "amdsmi".into(),
        device: device.into(),
        path: None,
        status: status.into(),
        detail,
        fix: fix.map(String::from),
    };
    let smi = match AmdSmi::open() {
        Ok(s) => s,
        Err(e) => {
            return vec![row(
                "-",
                "unusable",
                e,
                Some(
                    "install AMD SMI of ROCm 6.0 or newer (package amd-smi-lib) for energy \
                     counters, or keep hwmon's integrated power",
                ),
            )]
        }
    };
    amd.iter()
        .filter(|s| smi.addresses().contains(&s.pci))
        .map(|s| match smi.energy(&s.pci) {
            Ok(Some((count, res))) => row(
                &s.info.id,
                "ok",
                format!(
                    "{}: energy counter, {:.0} µJ now (used instead of hwmon's power)",
                    s.info.name,
                    count as f64 * res
                ),
                None,
            ),
            Ok(None) => row(
                &s.info.id,
                "ignored",
                format!(
                    "{}: no energy counter; hwmon's power is integrated",
                    s.info.name
                ),
                None,
            ),
            Err(e) => row(&s.info.id, "unusable", e, None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hwmon::{self, fake, AmdVisible};
    use crate::rapl::fs_reader;
    use crate::{EnergySource, Meter, Method};
    use amdahl_model::units::Seconds;
    use std::path::{Path, PathBuf};

    /// Build `tests/fixtures/fake_amd_smi.c` (with `-D` flags) into `dir`; None without a C
    /// compiler, as the fake CUDA driver's tests do.
    fn build(dir: &Path, flags: &[&str]) -> Option<PathBuf> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_amd_smi.c");
        let lib = dir.join("libamd_smi.so");
        let ok = std::process::Command::new("cc")
            .args(["-O2", "-shared", "-fPIC"])
            .args(flags)
            .arg("-o")
            .arg(&lib)
            .arg(&src)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("skipped: no C compiler to build the fake AMD SMI");
        }
        ok.then_some(lib)
    }

    #[test]
    fn bdf_bits_follow_amdsmi_bdf_t() {
        // domain 0, bus 0xc1, device 0, function 0; and 0001:05:1f.7.
        assert_eq!(bdf_string(0xc1 << 8), "0000:c1:00.0");
        assert_eq!(
            bdf_string((1 << 16) | (5 << 8) | (0x1f << 3) | 7),
            "0001:05:1f.7"
        );
    }

    /// Through the fake: the counter of the GPU AMD SMI reads replaces hwmon's power; 64000
    /// counts × 15.625 µJ = 1 J per read (exact), so three reads after the first are 3 J. A GPU
    /// whose counter is not supported stays with hwmon, said in a note. One test, because the
    /// fake's state is the process's (one library loaded once).
    #[test]
    fn the_energy_counter_replaces_integrated_power_where_amd_smi_has_it() {
        let t = tempfile::tempdir().unwrap();
        let Some(lib) = build(t.path(), &[]) else {
            return;
        };
        std::env::set_var("FAKE_AMDSMI_GPUS", "0000:05:00.0=64000,0000:26:00.0=0");
        let smi = AmdSmi::open_path(&lib.display().to_string()).unwrap();
        assert_eq!(smi.addresses(), ["0000:05:00.0", "0000:26:00.0"]);
        let root = t.path().join("hwmon");
        fake::amdgpu(&root, "hwmon0", "0000:05:00.0", 0x74a1, "aa", Some(1)).unwrap();
        fake::amdgpu(&root, "hwmon1", "0000:26:00.0", 0x74a1, "bb", Some(1)).unwrap();
        let scan = hwmon::scan(&root, &fs_reader(), &AmdVisible::all());
        let amd: Vec<&hwmon::Sensor> = scan.sensors.iter().collect();
        let (src, notes) = AmdSmiSource::new(smi, &amd);
        let src = src.unwrap();
        assert_eq!(src.ids(), ["amdgpu:0"]);
        assert_eq!(src.devices()[0].method, Method::Counter);
        assert!(notes.iter().any(|n| n.contains("amdgpu:1")), "{notes:?}");
        let mut m = Meter::new(vec![Box::new(src)]);
        for k in 0..4 {
            m.sample_at(Seconds(k as f64));
        }
        assert_eq!(m.energies()[0].energy_j.get(), 3.0);

        // The wrong version: no amdsmi_get_energy_count, refused by name.
        let old = tempfile::tempdir().unwrap();
        let Some(lib) = build(old.path(), &["-DOLD_API"]) else {
            return;
        };
        let e = AmdSmi::open_path(&lib.display().to_string()).err().unwrap();
        assert!(
            e.contains("amdsmi_get_energy_count") && e.contains("wrong version"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_library_says_so() {
        let e = AmdSmi::open_path("/nonexistent/libamd_smi.so")
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent/libamd_smi.so"), "{e}");
    }
}
