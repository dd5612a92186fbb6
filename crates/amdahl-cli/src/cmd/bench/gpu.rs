//! `amdahl bench gpu` — cuBLAS GEMM per precision and host↔device copy bandwidth. Present in
//! every build; without the `cuda` feature it says how to rebuild (exit 1).

use crate::output::{print_result, FormatArgs};
use amdahl_bench::gpu::{GpuConfig, GpuError, GpuPrecision};
use amdahl_bench::machine::positive_size;
use amdahl_bench::BenchError;
use amdahl_report::render::Render;
use anyhow::{Context, Result};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct GpuArgs {
    /// Run CI-sized problems (n = 1024, 4096; 1 and 64 MiB copies; few repeats).
    #[arg(long)]
    pub quick: bool,
    /// GEMM orders n, comma-separated (default 1024..16384, --quick 1024,4096).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<i64>,
    /// Precisions, comma-separated: fp64, fp32, tf32, fp16, bf16, int8 (default all).
    #[arg(long, value_delimiter = ',')]
    pub precision: Vec<String>,
    /// Host↔device copy sizes in MiB, comma-separated (default 1,16,256,1024; --quick 1,64).
    #[arg(long, value_delimiter = ',')]
    pub copy_mib: Vec<i64>,
    /// Measure no GEMM, only the copies.
    #[arg(long, conflicts_with = "no_copy")]
    pub no_gemm: bool,
    /// Measure no copy, only the GEMMs.
    #[arg(long)]
    pub no_copy: bool,
    /// Timed repeats after the warm-up.
    #[arg(long)]
    pub repeats: Option<i64>,
    /// Keep repeating each GEMM for at least this long (a steady load for `amdahl run`): seconds
    /// (2.5) or a duration such as 90s or 5m.
    #[arg(long, value_name = "DURATION", value_parser = crate::domain::seconds)]
    pub min_time: Option<f64>,
    /// CUDA device ordinal (after CUDA_VISIBLE_DEVICES).
    #[arg(long, default_value_t = 0, value_parser = crate::domain::natural_usize)]
    pub device: usize,
    /// MiB per buffer of the device-to-device copy that measures device-memory bandwidth
    /// (default 1024, --quick 256; 0: not measured).
    #[arg(long, value_name = "MIB")]
    pub device_mib: Option<i64>,
    #[command(flatten)]
    pub profile: super::ProfileArgs,
    #[command(flatten)]
    pub format: FormatArgs,
}

impl GpuArgs {
    /// Raw flags → a validated config; everything that can be wrong without a GPU is caught here.
    pub fn config(&self) -> Result<GpuConfig> {
        let mut cfg = if self.quick {
            GpuConfig::quick(self.device)
        } else {
            GpuConfig::full(self.device)
        };
        if !self.sizes.is_empty() {
            cfg.sizes = self
                .sizes
                .iter()
                .map(|&s| positive_size("--sizes", s))
                .collect::<Result<_, _>>()?;
        }
        if !self.precision.is_empty() {
            cfg.precisions = self
                .precision
                .iter()
                .map(|p| p.parse::<GpuPrecision>())
                .collect::<Result<_, _>>()?;
        }
        if !self.copy_mib.is_empty() {
            cfg.copy_sizes = self
                .copy_mib
                .iter()
                .map(|&m| {
                    let m = positive_size("--copy-mib", m)?;
                    m.checked_mul(1 << 20)
                        .ok_or_else(|| BenchError::Invalid(format!("--copy-mib {m} is too large")))
                })
                .collect::<Result<_, _>>()?;
        }
        if self.no_gemm {
            cfg.sizes.clear();
        }
        if self.no_copy {
            cfg.copy_sizes.clear();
        }
        if let Some(r) = self.repeats {
            cfg.repeats = amdahl_bench::machine::repeats(r)?;
        }
        if let Some(t) = self.min_time {
            cfg.min_time_s = t;
        }
        if let Some(m) = self.device_mib {
            let m = usize::try_from(m)
                .ok()
                .and_then(|m| m.checked_mul(1 << 20))
                .ok_or_else(|| {
                    BenchError::Invalid(format!(
                        "--device-mib {m} is out of range; pass 0 (no device-to-device copy) or a \
                         positive number of MiB"
                    ))
                })?;
            cfg.device_copy_bytes = m;
        }
        cfg.power_window_s = self.profile.power.window().as_secs_f64();
        cfg.validate()?;
        Ok(cfg)
    }
}

pub fn run(args: GpuArgs) -> Result<ExitCode> {
    let cfg = args.config()?;
    if !amdahl_bench::gpu::CUDA_BUILT {
        return Err(GpuError::NotBuilt.into());
    }
    // An existing --profile-out the GPU's profile could not merge into is refused before the
    // benchmark runs (its device name is checked when the profile is written).
    args.profile.preflight("gpu", None, None)?;
    let (probe, nvml_name) = nvml_probe(cfg.device);
    if probe.measures() && cfg.power_window_s > 0.0 {
        crate::output::note(&format!(
            "reading the GPU's idle power for {} s before the benchmark, then holding each power \
             load as long",
            cfg.power_window_s
        ));
    }
    // The shared progress bar speaks the CPU benchmarks' error type; carry the message over.
    let mut r = super::with_progress(probe, |h| {
        amdahl_bench::gpu::run(&cfg, h).map_err(|e| BenchError::Invalid(e.to_string()))
    })
    .context("running the GPU benchmark")?;
    check_nvml_device(&mut r, nvml_name.as_deref());
    if args.profile.profile_out.is_some() {
        let o = args.profile.origin(&r.device.name)?;
        args.profile
            .write(amdahl_bench::profile::from_gpu(&r, &o))?;
    }
    let out = r.render(args.format.format())?;
    print_result(&r, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// NVML's view of the GPU the benchmark opens (`--device` among `CUDA_VISIBLE_DEVICES`) as the
/// energy probe, and its name; an empty probe (every power figure "not measured", with why)
/// where NVML does not open or reads neither energy nor power. RAPL is not opened: the board's
/// power is the GPU's.
fn nvml_probe(device: usize) -> (amdahl_bench::MeterProbe, Option<String>) {
    let visible =
        amdahl_meter::gpu::parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())
            .nth(device);
    let (source, notes) = amdahl_meter::sensors::nvml_source(&visible);
    let name = source
        .as_ref()
        .and_then(|s| s.devices().first().map(|d| d.name.clone()));
    let probe = amdahl_bench::MeterProbe::new(source.into_iter().collect());
    if !probe.measures() {
        let why = notes
            .first()
            .cloned()
            .unwrap_or_else(|| format!("NVML shows no GPU for CUDA device {device}"));
        eprintln!("amdahl: GPU power not measured: {why}");
    }
    (probe, name)
}

/// NVML's index and CUDA's ordinal name the same GPU only under `CUDA_DEVICE_ORDER=PCI_BUS_ID`
/// (or on a machine of one model): where the names differ, the power read was another GPU's and
/// is dropped, saying how to fix it.
fn check_nvml_device(r: &mut amdahl_bench::gpu::GpuReport, nvml_name: Option<&str>) {
    let Some(nvml) = nvml_name else { return };
    if nvml != r.device.name {
        r.power = amdahl_bench::gpu::GpuPower::not_measured(&format!(
            "NVML's GPU for this device is `{nvml}`, but CUDA opened `{}`: set \
             CUDA_DEVICE_ORDER=PCI_BUS_ID so both number the GPUs alike",
            r.device.name
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gpu: GpuArgs,
    }

    fn config(args: &[&str]) -> Result<GpuConfig> {
        let cli: Cli = crate::parse(std::iter::once("gpu").chain(args.iter().copied()))?;
        cli.gpu.config()
    }

    #[test]
    fn flags_become_the_config() {
        let c = config(&[
            "--quick",
            "--sizes",
            "256,512",
            "--precision",
            "fp16,int8",
            "--copy-mib",
            "8",
            "--repeats",
            "4",
            "--min-time",
            "2.5",
            "--device",
            "1",
        ])
        .unwrap();
        assert_eq!(c.sizes, vec![256, 512]);
        assert_eq!(c.precisions, vec![GpuPrecision::Fp16, GpuPrecision::Int8]);
        assert_eq!(c.copy_sizes, vec![8 << 20]);
        assert_eq!((c.repeats, c.min_time_s, c.device), (4, 2.5, 1));
        let c = config(&["--min-time", "1m 30s"]).unwrap();
        assert_eq!(c.min_time_s, 90.0);
        let c = config(&["--no-copy"]).unwrap();
        assert!(c.copy_sizes.is_empty() && !c.sizes.is_empty());
        let c = config(&["--no-gemm"]).unwrap();
        assert!(c.sizes.is_empty() && !c.copy_sizes.is_empty());
        // The device-to-device copy and the power window.
        let c = config(&["--quick"]).unwrap();
        assert_eq!((c.device_copy_bytes, c.power_window_s), (256 << 20, 2.0));
        let c = config(&["--device-mib", "8", "--power-window", "500ms"]).unwrap();
        assert_eq!((c.device_copy_bytes, c.power_window_s), (8 << 20, 0.5));
        let c = config(&["--device-mib", "0", "--power-window", "0"]).unwrap();
        assert_eq!((c.device_copy_bytes, c.power_window_s), (0, 0.0));
    }

    #[test]
    fn bad_flags_are_refused_with_the_flag_named() {
        let err = |a: &[&str]| format!("{:#}", config(a).unwrap_err());
        assert!(err(&["--sizes", "0"]).contains("--sizes"));
        assert!(err(&["--sizes", "-5"]).contains("--sizes"));
        assert!(err(&["--precision", "fp8"]).contains("fp8"));
        assert!(err(&["--repeats", "0"]).contains("--repeats"));
        assert!(err(&["--min-time", "-1"]).contains("--min-time"));
        assert!(err(&["--copy-mib", "0"]).contains("--copy-mib"));
        assert!(err(&["--device-mib", "-2"]).contains("--device-mib -2 is out of range"));
        assert!(err(&["--power-window", "-1"]).contains("--power-window"));
        assert!(err(&["--sizes", "3000000000"]).contains("out of range"));
        assert!(config(&["--no-gemm", "--no-copy"]).is_err());
    }
}
