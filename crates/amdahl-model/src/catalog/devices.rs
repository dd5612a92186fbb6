//! Accelerators and server CPUs: vendor peak FLOP/s per precision, memory, links, power and the
//! embodied-carbon inputs (die area, process node, memory capacity), each row with its sources.

use super::{normalise, suggest, table, CatalogError};
use crate::units::{Bytes, BytesPerSecond, FlopsPerSecond, Watts};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

const FILE: &str = "data/devices.csv";
const TEXT: &str = include_str!("../../../../data/devices.csv");

/// Arithmetic precisions with a vendor peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "Precision")]
pub enum PeakPrecision {
    Fp64,
    Fp32,
    Tf32,
    /// 16-bit floating point: bf16 or fp16 (equal peaks on every catalogued device that has both).
    Fp16,
    Fp8,
    Int8,
}

impl PeakPrecision {
    pub const ALL: [PeakPrecision; 6] = [
        PeakPrecision::Fp64,
        PeakPrecision::Fp32,
        PeakPrecision::Tf32,
        PeakPrecision::Fp16,
        PeakPrecision::Fp8,
        PeakPrecision::Int8,
    ];
    pub fn name(self) -> &'static str {
        match self {
            PeakPrecision::Fp64 => "fp64",
            PeakPrecision::Fp32 => "fp32",
            PeakPrecision::Tf32 => "tf32",
            PeakPrecision::Fp16 => "fp16",
            PeakPrecision::Fp8 => "fp8",
            PeakPrecision::Int8 => "int8",
        }
    }
}

impl fmt::Display for PeakPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PeakPrecision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "fp64" | "f64" | "double" => Ok(PeakPrecision::Fp64),
            "fp32" | "f32" | "float" => Ok(PeakPrecision::Fp32),
            "tf32" => Ok(PeakPrecision::Tf32),
            "fp16" | "bf16" | "f16" | "half" => Ok(PeakPrecision::Fp16),
            "fp8" | "f8" => Ok(PeakPrecision::Fp8),
            "int8" | "i8" => Ok(PeakPrecision::Int8),
            _ => Err(format!(
                "unknown precision `{s}`; use one of fp64, fp32, tf32, bf16/fp16, fp8, int8"
            )),
        }
    }
}

/// What kind of processor a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Gpu,
    Tpu,
    /// Habana/Intel Gaudi.
    Hpu,
    Cpu,
}

/// Peak rates per precision; `None` where the vendor publishes none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Peaks {
    pub fp64: Option<FlopsPerSecond>,
    pub fp32: Option<FlopsPerSecond>,
    pub tf32: Option<FlopsPerSecond>,
    pub fp16: Option<FlopsPerSecond>,
    pub fp8: Option<FlopsPerSecond>,
    pub int8: Option<FlopsPerSecond>,
}

impl Peaks {
    pub fn get(&self, p: PeakPrecision) -> Option<FlopsPerSecond> {
        match p {
            PeakPrecision::Fp64 => self.fp64,
            PeakPrecision::Fp32 => self.fp32,
            PeakPrecision::Tf32 => self.tf32,
            PeakPrecision::Fp16 => self.fp16,
            PeakPrecision::Fp8 => self.fp8,
            PeakPrecision::Int8 => self.int8,
        }
    }
}

/// One catalogued device.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Device {
    pub name: String,
    pub aliases: Vec<String>,
    pub kind: DeviceKind,
    pub vendor: String,
    /// Dense vendor peaks.
    pub peak: Peaks,
    /// 2:4 structured-sparsity peaks, where the vendor gives them.
    pub sparse_peak: Peaks,
    /// On-package memory (vendor GB, 1e9 B); `None` for CPUs (system memory is not part of the part).
    pub memory: Option<Bytes>,
    pub memory_bandwidth: Option<BytesPerSecond>,
    /// Intra-node link bandwidth per device (NVLink, Infinity Fabric, ICI, PCIe).
    pub link_bandwidth: Option<BytesPerSecond>,
    pub link: String,
    pub tdp: Option<Watts>,
    pub idle: Option<Watts>,
    /// Physical cores (CPUs).
    pub cores: Option<u32>,
    /// Die area in mm² (all logic dies), for embodied carbon.
    pub die_area_mm2: Option<f64>,
    /// Process node in nm, which selects the embodied carbon per die area.
    pub process_nm: Option<f64>,
    pub year: u16,
    pub source: String,
    pub embodied_source: String,
    /// Microarchitecture (`Volta`, `Ampere`, `Hopper`, `CDNA 3`, ...).
    pub arch: String,
    /// Inter-node (scale-out) network bandwidth per device in the vendor's reference server, Gbit/s
    /// (DGX A100: 8 × HDR 200 Gb/s for 8 GPUs = 200); `None` where no reference server is catalogued.
    pub scale_out_gbit: Option<f64>,
    /// Where `scale_out_gbit` comes from.
    pub scale_out_source: String,
}

impl Device {
    /// Dense peak for a precision.
    pub fn peak(&self, p: PeakPrecision) -> Option<FlopsPerSecond> {
        self.peak.get(p)
    }
    /// 2:4-sparse peak for a precision, where published.
    pub fn sparse_peak(&self, p: PeakPrecision) -> Option<FlopsPerSecond> {
        self.sparse_peak.get(p)
    }
    /// Memory capacity in vendor GB (what embodied-carbon factors are quoted per).
    pub fn memory_gb(&self) -> Option<f64> {
        self.memory.map(|b| b.get() / 1e9)
    }
    /// TDP per physical core (CPUs): the share of the package power budget one busy core stands for.
    pub fn tdp_per_core(&self) -> Option<Watts> {
        match (self.tdp, self.cores) {
            (Some(t), Some(c)) => Some(t / f64::from(c)),
            _ => None,
        }
    }
}

/// The device catalog.
#[derive(Debug, Clone, Default)]
pub struct Devices {
    items: Vec<Device>,
}

const REQUIRED: &[&str] = &["name", "kind", "tdp_w", "year", "source"];

impl Devices {
    /// Parse a devices CSV (the format of `data/devices.csv`).
    pub fn parse(text: &str, file: &str) -> Result<Self, CatalogError> {
        let items = table::parse(text, file, REQUIRED, |r| {
            let tflops = |c: &str| -> Result<Option<FlopsPerSecond>, CatalogError> {
                Ok(r.opt_positive(c)?.map(FlopsPerSecond::from_tflops))
            };
            let gbs = |c: &str| -> Result<Option<BytesPerSecond>, CatalogError> {
                Ok(r.opt_positive(c)?.map(|g| BytesPerSecond(g * 1e9)))
            };
            let kind = match r.cell("kind").to_ascii_lowercase().as_str() {
                "gpu" => DeviceKind::Gpu,
                "tpu" => DeviceKind::Tpu,
                "hpu" => DeviceKind::Hpu,
                "cpu" => DeviceKind::Cpu,
                other => {
                    return Err(r.err(
                        "kind",
                        format!("`{other}` is not one of gpu, tpu, hpu, cpu"),
                    ))
                }
            };
            let tdp = r.opt_positive("tdp_w")?.map(Watts);
            let idle = r.opt_positive("idle_w")?.map(Watts);
            if let (Some(t), Some(i)) = (tdp, idle) {
                if i > t {
                    return Err(r.err("idle_w", "idle power exceeds TDP"));
                }
            }
            Ok(Device {
                name: r.text("name")?,
                aliases: r.list("aliases"),
                kind,
                vendor: r.cell("vendor").to_string(),
                peak: Peaks {
                    fp64: tflops("fp64_tflops")?,
                    fp32: tflops("fp32_tflops")?,
                    tf32: tflops("tf32_tflops")?,
                    fp16: tflops("fp16_tflops")?,
                    fp8: tflops("fp8_tflops")?,
                    int8: tflops("int8_tops")?,
                },
                sparse_peak: Peaks {
                    tf32: tflops("tf32_sparse_tflops")?,
                    fp16: tflops("fp16_sparse_tflops")?,
                    fp8: tflops("fp8_sparse_tflops")?,
                    int8: tflops("int8_sparse_tops")?,
                    ..Peaks::default()
                },
                memory: r.opt_positive("memory_gb")?.map(|g| Bytes(g * 1e9)),
                memory_bandwidth: gbs("memory_bw_gbs")?,
                link_bandwidth: gbs("link_gbs")?,
                link: r.cell("link").to_string(),
                tdp,
                idle,
                cores: r.opt_count("cores")?,
                die_area_mm2: r.opt_positive("die_mm2")?,
                process_nm: r.opt_positive("process_nm")?,
                year: r.year("year")?,
                source: r.text("source")?,
                embodied_source: r.cell("embodied_source").to_string(),
                arch: r.cell("arch").to_string(),
                scale_out_gbit: r.opt_positive("scale_out_gbit")?,
                scale_out_source: r.cell("scale_out_source").to_string(),
            })
        })?;
        Ok(Self { items })
    }

    /// Find a device by name or alias, ignoring case, spaces and punctuation (`h100` → H100 SXM5 80GB).
    pub fn lookup(&self, name: &str) -> Result<&Device, CatalogError> {
        let key = normalise(name);
        self.items
            .iter()
            .find(|d| normalise(&d.name) == key)
            .or_else(|| {
                self.items
                    .iter()
                    .find(|d| d.aliases.iter().any(|a| normalise(a) == key))
            })
            .ok_or_else(|| CatalogError::Unknown {
                kind: "device",
                name: name.into(),
                suggestions: suggest::nearest(
                    name,
                    self.items
                        .iter()
                        .flat_map(|d| std::iter::once(&d.name).chain(&d.aliases))
                        .map(String::as_str),
                ),
            })
    }

    /// Recognise a device in a model string reported by the system (`nvidia-smi` names such as
    /// "NVIDIA H100 PCIe" or "Tesla V100-SXM2-32GB", `/proc/cpuinfo` names such as "AMD EPYC 7763
    /// 64-Core Processor"): the catalogued name or alias contained in the string, longest first.
    /// A heuristic: `None` when nothing matches.
    pub fn identify(&self, reported: &str) -> Option<&Device> {
        let text = normalise(reported);
        self.items
            .iter()
            .flat_map(|d| {
                std::iter::once(&d.name)
                    .chain(&d.aliases)
                    .map(move |n| (normalise(n), d))
            })
            .filter(|(n, _)| !n.is_empty() && text.contains(n.as_str()))
            .max_by_key(|(n, _)| n.len())
            .map(|(_, d)| d)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Device> {
        self.items.iter()
    }

    /// Rows of `user` replace rows of the same (normalised) name; new names are appended.
    pub fn merge(&mut self, user: Devices) {
        table::merge_by(&mut self.items, user.items, |d| normalise(&d.name));
    }
}

/// The embedded catalog, parsed on first use.
pub fn embedded() -> Result<&'static Devices, CatalogError> {
    static CELL: OnceLock<Result<Devices, CatalogError>> = OnceLock::new();
    CELL.get_or_init(|| Devices::parse(TEXT, FILE))
        .as_ref()
        .map_err(Clone::clone)
}

/// Recognise a system-reported model string in the embedded catalog (see [`Devices::identify`]).
pub fn identify(reported: &str) -> Option<&'static Device> {
    embedded().ok()?.identify(reported)
}

/// Look a device up in the embedded catalog.
pub fn lookup(name: &str) -> Result<&'static Device, CatalogError> {
    embedded()?.lookup(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_case() {
        let d = lookup("h100").unwrap();
        assert_eq!(d.name, "H100 SXM5 80GB");
        assert_eq!(lookup("H100 sxm5 80gb").unwrap().name, d.name);
        assert_eq!(lookup("V100").unwrap().name, "V100 SXM2 16GB");
    }

    #[test]
    fn datasheet_values() {
        // NVIDIA V100 datasheet: 125 TFLOP/s fp16 tensor; H100 SXM: 989.4 dense bf16, 1978.9 sparse.
        let v = lookup("v100").unwrap();
        assert_eq!(v.peak(PeakPrecision::Fp16).unwrap().tflops(), 125.0);
        let h = lookup("h100").unwrap();
        assert_eq!(h.sparse_peak(PeakPrecision::Fp16).unwrap().tflops(), 1978.9);
        assert_eq!(h.tdp, Some(Watts(700.0)));
        assert_eq!(h.memory_gb(), Some(80.0));
    }

    #[test]
    fn sparse_peak_is_twice_dense_where_given() {
        for d in embedded().unwrap().iter() {
            for p in PeakPrecision::ALL {
                if let (Some(s), Some(x)) = (d.sparse_peak(p), d.peak(p)) {
                    let r = s / x;
                    // 3 %: the L40S datasheet lists 362.05 dense and 733 sparse.
                    assert!((r - 2.0).abs() < 0.06, "{} {p}: sparse/dense = {r}", d.name);
                }
            }
        }
    }

    #[test]
    fn issue_devices_are_present() {
        for n in [
            "v100",
            "v100-32gb",
            "a100",
            "a100-80gb",
            "a100-pcie",
            "a100-pcie-80gb",
            "h100",
            "h100-pcie",
            "h200",
            "b200",
            "gh200",
            "l4",
            "l40s",
            "t4",
            "mi250x",
            "mi300x",
            "tpuv3",
            "tpuv4",
            "tpuv5e",
            "tpuv5p",
            "gaudi2",
            "epyc-7763",
            "xeon-8480",
        ] {
            assert!(lookup(n).is_ok(), "{n} missing");
        }
    }

    #[test]
    fn identify_reported_names() {
        for (reported, want) in [
            ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
            ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
            ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
            ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
            ("NVIDIA L40S", "L40S"),
            ("AMD EPYC 7763 64-Core Processor", "EPYC 7763"),
            ("Intel(R) Xeon(R) Platinum 8480+", "Xeon Platinum 8480+"),
        ] {
            assert_eq!(
                identify(reported).map(|d| d.name.as_str()),
                Some(want),
                "{reported}"
            );
        }
        assert!(identify("Apple M2").is_none());
    }

    #[test]
    fn cpu_tdp_per_core() {
        // AMD EPYC 7763: 280 W over 64 cores = 4.375 W per core.
        let c = lookup("epyc-7763").unwrap();
        assert!((c.tdp_per_core().unwrap().get() - 4.375).abs() < 1e-9);
    }

    #[test]
    fn unknown_device_suggests() {
        let e = lookup("h1000").unwrap_err().to_string();
        assert!(e.contains("did you mean") && e.contains("h100"), "{e}");
    }

    #[test]
    fn precision_parses_bf16_as_fp16() {
        assert_eq!("bf16".parse::<PeakPrecision>(), Ok(PeakPrecision::Fp16));
        assert!("fp4".parse::<PeakPrecision>().is_err());
    }
}
