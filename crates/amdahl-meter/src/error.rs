//! Errors of the measuring crate. Every message says what failed, where, and how to fix it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// `energy_uj` is root-only on Linux ≥ 5.10 and on patched older kernels since
    /// CVE-2020-8694 (Platypus: power side channel through RAPL).
    #[error(
        "permission denied reading {path}: RAPL energy counters are root-only since CVE-2020-8694. \
         Fix: run as root, or grant read access for this boot with \
         `sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj /sys/class/powercap/intel-rapl:*:*/energy_uj` \
         (or a udev rule / `setfacl -m u:$USER:r` for a lasting fix)"
    )]
    PermissionDenied { path: PathBuf },
    /// hwmon files are world-readable by default (hwmon sysfs-interface: 0444), so EACCES means a
    /// hardened or containerised /sys.
    #[error(
        "permission denied reading {path}: hwmon sensors are normally readable by everyone, so \
         this /sys is restricted. Fix: run as root, or `sudo chmod a+r {path}` (until reboot; a \
         udev rule makes it last); in a container, bind-mount /sys/class/hwmon and the devices it \
         links to read-only"
    )]
    HwmonPermission { path: PathBuf },
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: expected an unsigned integer, found `{found}`")]
    Parse { path: PathBuf, found: String },
    #[error("GPU {device}: {message}")]
    Gpu { device: String, message: String },
    #[error("cannot start `{program}`: command not found (check the spelling and your PATH)")]
    CommandNotFound { program: String },
    #[error("cannot start `{program}`: permission denied (is the file executable? `chmod +x {program}`)")]
    CommandNotExecutable { program: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for the command: {0}")]
    Wait(#[source] std::io::Error),
    #[error("cannot install the signal handlers: {0}")]
    Signals(String),
    #[error("the sampler thread stopped unexpectedly")]
    SamplerPanicked,
    #[error("{path}: not an amdahl.run/1 record: {message}")]
    BadRecord { path: PathBuf, message: String },
}

impl MeterError {
    /// Map a file-read error, recognising EACCES/EPERM so the fix gets printed.
    pub(crate) fn from_io(path: &std::path::Path, e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            MeterError::PermissionDenied {
                path: path.to_path_buf(),
            }
        } else {
            MeterError::Io {
                path: path.to_path_buf(),
                source: e,
            }
        }
    }
}
