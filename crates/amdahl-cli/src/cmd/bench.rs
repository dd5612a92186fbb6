//! `amdahl bench` — measure this machine: GEMM per precision, sparse vs dense, STREAM memory
//! bandwidth, the roofline, and thread scaling. Raw flags are validated into the library's
//! configs here; progress goes to stderr through a progress bar, results to stdout.

use super::measure_args::PowercapArgs;
use crate::output::{check_result, print_result, FormatArgs};
use amdahl_bench::energy::ESTIMATE_ONLY;
use amdahl_bench::gemm::GemmConfig;
use amdahl_bench::machine::{logical_cpus, positive_size, resolve_threads, Threads};
use amdahl_bench::memory::MemoryConfig;
use amdahl_bench::roofline::RooflineConfig;
use amdahl_bench::scaling::ScalingConfig;
use amdahl_bench::sparse::SparseConfig;
use amdahl_bench::{BenchProgress, Hooks, MeterProbe, Precision};
use amdahl_meter::estimate::Target;
use amdahl_meter::gpu::Visible;
use amdahl_meter::{rapl, sensors};
use amdahl_report::render::Render;
use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use indicatif::ProgressStyle;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

mod gpu;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Subcommand, Debug)]
pub enum What {
    /// Measure matrix-multiply throughput at fp64, fp32, fp16, bf16 and int8.
    Gemm {
        #[command(flatten)]
        common: Common,
        /// Precisions to measure, comma-separated (fp64, fp32, fp16, bf16, int8).
        #[arg(long, value_delimiter = ',')]
        precision: Vec<String>,
    },
    /// Compare sparse × dense with dense at 0–99 % sparsity; find the crossover.
    Sparse {
        #[command(flatten)]
        common: Common,
        /// Sparsities (fractions of zeros in [0, 1)), comma-separated.
        #[arg(long, value_delimiter = ',')]
        sparsity: Vec<f64>,
    },
    /// Measure STREAM copy/scale/add/triad bandwidth and a working-set sweep over the caches.
    Memory {
        #[command(flatten)]
        common: Common,
    },
    /// Build this machine's roofline from measured peak and bandwidth, kernels placed on it.
    Roofline {
        #[command(flatten)]
        common: Common,
    },
    /// Run a GEMM and one MLP training step at 1..P threads; Karp–Flatt serial fraction.
    Scaling {
        #[command(flatten)]
        common: Common,
    },
    /// Measure cuBLAS GEMM per precision and host↔device copy bandwidth (feature `cuda`).
    Gpu(gpu::GpuArgs),
}

/// Flags every benchmark takes.
#[derive(ClapArgs, Debug)]
pub struct Common {
    /// Run CI-sized problems with few repeats (seconds, not minutes).
    #[arg(long)]
    pub quick: bool,
    /// Threads to use (default: all logical CPUs); more than the machine has is capped.
    #[arg(long)]
    pub threads: Option<i64>,
    /// Problem sizes, comma-separated: matrix orders (gemm, sparse, scaling, roofline) or
    /// elements per STREAM array (memory).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<i64>,
    /// Timed repeats after the warm-up.
    #[arg(long)]
    pub repeats: Option<i64>,
    /// Also write the plot as SVG to this file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub powercap: PowercapArgs,
    #[command(flatten)]
    pub profile: ProfileArgs,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// The quiet window before the loads in which idle power is read.
#[derive(ClapArgs, Debug, Clone)]
pub struct PowerWindowArgs {
    /// Seconds of the quiet window before the benchmark in which idle power is read (gemm and
    /// memory with --profile-out; gpu always, and each GPU power load is held this long): 2.5 or
    /// a duration such as 3s; 0 reads no idle power [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = crate::domain::seconds)]
    pub power_window: Option<f64>,
}

impl PowerWindowArgs {
    pub fn window(&self) -> std::time::Duration {
        self.power_window
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
            .unwrap_or(amdahl_bench::power::POWER_WINDOW)
    }
}

/// `--profile-out`: the measurements as a device profile for `plan`, `infer`, `carbon` and
/// `calibrate` (`--device-profile`).
#[derive(ClapArgs, Debug, Clone)]
pub struct ProfileArgs {
    /// Also write what was measured as a device profile (amdahl.device-profile/1) here (gemm,
    /// memory and gpu); an existing profile of the same device is merged into, anything else
    /// refused.
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,
    /// The catalog device the profile is of (`amdahl catalog devices`) [default: matched by the
    /// measured device's name, if one matches].
    #[arg(long, value_name = "NAME", requires = "profile_out")]
    pub profile_system: Option<String>,
    #[command(flatten)]
    pub power: PowerWindowArgs,
}

impl ProfileArgs {
    /// Where and when, and which catalog device: `--profile-system` (looked up, so a typo is an
    /// error), else the catalogued device whose name or alias the measured name contains (the
    /// longest such), else none.
    pub fn origin(&self, measured: &str) -> Result<amdahl_bench::profile::Origin> {
        let devices = amdahl_model::catalog::devices::embedded()?;
        let system = match &self.profile_system {
            Some(n) => Some(devices.lookup(n).context("--profile-system")?.name.clone()),
            None => match_device(devices, measured),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Ok(amdahl_bench::profile::Origin {
            host: amdahl_meter::procfs::hostname(),
            measured_at: amdahl_meter::record::utc_iso(now),
            system,
        })
    }

    /// Write `profile` to `--profile-out`, if given: merged into the profile already there
    /// (of the same device; anything else is refused and left as it is), atomically.
    pub fn write(&self, profile: amdahl_model::profile::DeviceProfile) -> Result<()> {
        let Some(path) = &self.profile_out else {
            return Ok(());
        };
        let file = path.display().to_string();
        let unmatched = profile.system.is_none().then(|| profile.device.clone());
        let (profile, merged) = match self.existing()? {
            Some(old) => {
                let m = amdahl_bench::profile::merge(&old, profile, &file)?;
                let said = m.summary(&file);
                (m.profile, Some(said))
            }
            None => (profile, None),
        };
        crate::output::write_file(path, &amdahl_report::to_json(&profile)?)?;
        match merged {
            Some(said) => crate::output::note(&said),
            None => crate::output::wrote(path),
        }
        if let (None, Some(device)) = (&profile.system, unmatched) {
            eprintln!(
                "amdahl: warning: `{device}` matches no catalogued device; `plan`/`infer` will \
                 refuse this profile until it is rerun with --profile-system NAME (calibrate's \
                 `gemm` rows use it as it is)"
            );
        }
        Ok(())
    }

    /// The profile already at `--profile-out`, to merge into: `None` when there is no file (or
    /// the path is a FIFO or device, which is written, never read); an error, before anything
    /// is written, when the file is not an `amdahl.device-profile/1`.
    fn existing(&self) -> Result<Option<amdahl_model::profile::DeviceProfile>> {
        let Some(path) = &self.profile_out else {
            return Ok(None);
        };
        if crate::output::is_stream(path) {
            return Ok(None);
        }
        let file = path.display().to_string();
        let bytes = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Ok(m) if m.len() > MAX_PROFILE_BYTES => {
                return Err(amdahl_model::profile::MergeError::NotAProfile {
                    file,
                    why: format!("{} bytes, more than any profile", m.len()),
                }
                .into())
            }
            _ => std::fs::read(path).with_context(|| {
                format!("--profile-out {file}: reading the file to merge the profile into")
            })?,
        };
        let text = String::from_utf8(bytes).map_err(|_| {
            amdahl_model::profile::MergeError::NotAProfile {
                file: file.clone(),
                why: "not UTF-8 text".into(),
            }
        })?;
        Ok(Some(amdahl_model::profile::parse_existing(&text, &file)?))
    }

    /// Before the benchmark runs: refuse at once an existing `--profile-out` that the profile
    /// of a `kind` device (named `device`, when known yet) on this host could not merge into.
    pub fn preflight(&self, kind: &str, device: Option<&str>, system: Option<&str>) -> Result<()> {
        if let (Some(old), Some(path)) = (self.existing()?, &self.profile_out) {
            let host = amdahl_meter::procfs::hostname();
            old.check_same(&path.display().to_string(), kind, &host, device, system)?;
        }
        Ok(())
    }
}

/// A file at `--profile-out` larger than this is not a profile (one is a few kB).
const MAX_PROFILE_BYTES: u64 = 16 << 20;

/// The catalog device whose name or an alias, letters and digits only, the measured name
/// contains; the longest such match ("NVIDIA A100-SXM4-80GB" → A100 SXM4 80GB).
fn match_device(
    devices: &amdahl_model::catalog::devices::Devices,
    measured: &str,
) -> Option<String> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let m = norm(measured);
    devices
        .iter()
        .flat_map(|d| {
            std::iter::once(d.name.as_str())
                .chain(d.aliases.iter().map(String::as_str))
                .map(move |n| (norm(n), d))
        })
        .filter(|(n, _)| n.len() >= 4 && m.contains(n.as_str()))
        .max_by_key(|(n, _)| n.len())
        .map(|(_, d)| d.name.clone())
}

/// Validated common settings.
struct Settings {
    threads: Threads,
    sizes: Vec<usize>,
    repeats: Option<usize>,
    energy: MeterProbe,
}

impl Common {
    fn settings(&self) -> Result<Settings> {
        let threads = resolve_threads(self.threads, logical_cpus())?;
        if let Some(asked) = threads.capped_from {
            eprintln!(
                "warning: --threads {asked} exceeds the {} logical CPUs of this machine; using {}",
                logical_cpus(),
                threads.used
            );
        }
        let sizes = self
            .sizes
            .iter()
            .map(|&s| positive_size("--sizes", s))
            .collect::<Result<Vec<_>, _>>()?;
        let repeats = self
            .repeats
            .map(amdahl_bench::machine::repeats)
            .transpose()?;
        if amdahl_bench::DEBUG_BUILD {
            eprintln!("note: debug build; timings are not representative (use a release build)");
        }
        Ok(Settings {
            threads,
            sizes,
            repeats,
            energy: energy_probe(&self.powercap),
        })
    }
}

/// The energy probe: RAPL counters under the powercap root, as `amdahl run` finds them. NVML
/// is not opened: these are CPU kernels, and idle GPUs would add their power to every J/FLOP.
/// Estimates are never reported, so the meter's estimate warnings (TDP fallback) are not
/// printed; unreadable RAPL zones are, with their fix (EACCES: root-only since CVE-2020-8694).
fn energy_probe(p: &PowercapArgs) -> MeterProbe {
    let d = sensors::discover(sensors::Options {
        powercap_root: p.powercap_root.clone(),
        reader: rapl::fs_reader(),
        cpu_tdp: None,
        gpus: false,
        visible: Visible::All,
        hwmon_root: p.hwmon_root.clone(),
        amd_visible: amdahl_meter::hwmon::AmdVisible::all(),
        amd_smi: false,
        target: Target::Machine,
    });
    // The zones again, for their problems alone (discover's warnings mix in the estimate's).
    let scan = rapl::scan(&p.powercap_root, &rapl::fs_reader());
    for z in scan.zones.iter().filter(|z| z.kind.is_some()) {
        if let Err(e) = &z.status {
            eprintln!(
                "amdahl: warning: RAPL {} ({}) not measured: {e}",
                z.id, z.name
            );
        }
    }
    let probe = MeterProbe::new(d.sources);
    if !probe.measures() {
        let why = if scan.zones.is_empty() {
            sensors::no_powercap_fix(&p.powercap_root)
        } else {
            "no RAPL counter is readable (see the warnings above)".into()
        };
        eprintln!("amdahl: energy per benchmark not measured ({ESTIMATE_ONLY}): {why}");
    }
    probe
}

/// The profile's origin when `--profile-out` is given (before the benchmark runs, so a wrong
/// `--profile-system` fails at once); `device` names the measured device.
fn profile_origin(
    p: &ProfileArgs,
    device: impl FnOnce() -> Option<String>,
) -> Result<Option<amdahl_bench::profile::Origin>> {
    if p.profile_out.is_none() {
        return Ok(None);
    }
    // As the profile names the CPU (amdahl_bench::profile::from_gemm).
    let device = device().unwrap_or_else(|| "CPU".into());
    let origin = p.origin(&device)?;
    p.preflight("cpu", Some(&device), origin.system.as_deref())?;
    Ok(Some(origin))
}

/// Idle power for the profile, read across the power window before the benchmark, only when a
/// profile is written and a counter is readable (otherwise nothing is waited for and the status
/// says why).
fn profile_idle(
    h: &mut amdahl_bench::Hooks<'_>,
    profile: bool,
    window: std::time::Duration,
) -> Option<amdahl_bench::PowerStatus> {
    profile.then(|| h.idle_power(window))
}

/// Say on stderr that the machine should stay quiet while idle power is read.
fn announce_idle(probe: &MeterProbe, window: std::time::Duration) {
    if probe.measures() && !window.is_zero() {
        crate::output::note(&format!(
            "reading idle power for {} s before the benchmark; keep the machine quiet",
            window.as_secs_f64()
        ));
    }
}

/// `--profile-out` on a benchmark that measures nothing a profile holds.
fn no_profile(p: &ProfileArgs, what: &str) -> Result<()> {
    if p.profile_out.is_some() {
        anyhow::bail!(
            "--profile-out: `bench {what}` measures nothing a device profile holds; profile with \
             `bench gemm`, `bench memory` or `bench gpu`"
        );
    }
    idle_needs_profile(p, what)
}

/// `--power-window` on a CPU benchmark sets the idle window of its profile: without
/// `--profile-out` it would be ignored, so it is refused instead.
fn idle_needs_profile(p: &ProfileArgs, what: &str) -> Result<()> {
    if p.power.power_window.is_some() && p.profile_out.is_none() {
        anyhow::bail!(
            "--power-window: `bench {what}` reads idle power only for a device profile; add \
             --profile-out FILE (or drop --power-window)"
        );
    }
    Ok(())
}

pub fn run(args: Args) -> Result<ExitCode> {
    match &args.what {
        What::Sparse { common, .. } => no_profile(&common.profile, "sparse")?,
        What::Roofline { common } => no_profile(&common.profile, "roofline")?,
        What::Scaling { common } => no_profile(&common.profile, "scaling")?,
        What::Gemm { common, .. } => idle_needs_profile(&common.profile, "gemm")?,
        What::Memory { common } => idle_needs_profile(&common.profile, "memory")?,
        What::Gpu(_) => {}
    }
    match args.what {
        What::Gpu(a) => gpu::run(a),
        What::Gemm { common, precision } => run_gemm(common, precision),
        What::Sparse { common, sparsity } => run_sparse(common, sparsity),
        What::Memory { common } => run_memory(common),
        What::Roofline { common } => run_roofline(common),
        What::Scaling { common } => run_scaling(common),
    }
}

/// GEMM per precision: the configuration from the flags, validated, then run and emitted.
fn run_gemm(common: Common, precision: Vec<String>) -> Result<ExitCode> {
    let st = common.settings()?;
    let mut cfg = if common.quick {
        GemmConfig::quick(st.threads)
    } else {
        GemmConfig::full(st.threads)
    };
    if !st.sizes.is_empty() {
        cfg.sizes = st.sizes;
    }
    if !precision.is_empty() {
        cfg.precisions = precision
            .iter()
            .map(|p| p.parse::<Precision>())
            .collect::<Result<Vec<_>, _>>()?;
    }
    if let Some(r) = st.repeats {
        cfg.repeats = r;
    }
    amdahl_bench::gemm::validate(&cfg)?;
    let origin = profile_origin(&common.profile, amdahl_meter::procfs::cpu_model)?;
    let window = common.profile.power.window();
    if origin.is_some() {
        announce_idle(&st.energy, window);
    }
    let (r, idle) = with_progress(st.energy, |h| {
        let idle = profile_idle(h, origin.is_some(), window);
        amdahl_bench::gemm::run(&cfg, h).map(|r| (r, idle))
    })
    .context("running the GEMM benchmark")?;
    if let (Some(o), Some(idle)) = (origin, idle) {
        common
            .profile
            .write(amdahl_bench::profile::from_gemm(&r, &o, &idle))?;
    }
    emit(&common, &r)
}

/// Sparse vs dense at each sparsity: the configuration from the flags, validated, then run and emitted.
fn run_sparse(common: Common, sparsity: Vec<f64>) -> Result<ExitCode> {
    let st = common.settings()?;
    let mut cfg = if common.quick {
        SparseConfig::quick(st.threads)
    } else {
        SparseConfig::full(st.threads)
    };
    if let Some(&n) = st.sizes.first() {
        cfg.n = n;
    }
    if !sparsity.is_empty() {
        cfg.sparsities = sparsity;
    }
    if let Some(r) = st.repeats {
        cfg.repeats = r;
    }
    amdahl_bench::sparse::validate(&cfg)?;
    let r = with_progress(st.energy, |h| amdahl_bench::sparse::run(&cfg, h))
        .context("running the sparse benchmark")?;
    emit(&common, &r)
}

/// STREAM and the cache sweep: the configuration from the flags, then run and emitted.
fn run_memory(common: Common) -> Result<ExitCode> {
    let st = common.settings()?;
    let mut cfg = if common.quick {
        MemoryConfig::quick(st.threads)
    } else {
        MemoryConfig::full(st.threads)
    };
    if let Some(&n) = st.sizes.first() {
        cfg.stream_len = Some(n);
    }
    if let Some(r) = st.repeats {
        cfg.repeats = r;
    }
    let origin = profile_origin(&common.profile, amdahl_meter::procfs::cpu_model)?;
    let window = common.profile.power.window();
    if origin.is_some() {
        announce_idle(&st.energy, window);
    }
    let (r, idle) = with_progress(st.energy, |h| {
        let idle = profile_idle(h, origin.is_some(), window);
        amdahl_bench::memory::run(&cfg, h).map(|r| (r, idle))
    })
    .context("running the memory benchmark")?;
    if let (Some(o), Some(idle)) = (origin, idle) {
        common
            .profile
            .write(amdahl_bench::profile::from_memory(&r, &o, &idle))?;
    }
    emit(&common, &r)
}

/// The roofline: one `--repeats` for its GEMM, memory and sparse kernels, the GEMM part validated, then run and emitted.
fn run_roofline(common: Common) -> Result<ExitCode> {
    let st = common.settings()?;
    let mut cfg = if common.quick {
        RooflineConfig::quick(st.threads)
    } else {
        RooflineConfig::full(st.threads)
    };
    if !st.sizes.is_empty() {
        cfg.gemm.sizes = st.sizes;
    }
    if let Some(r) = st.repeats {
        cfg.gemm.repeats = r;
        cfg.memory.repeats = r;
        cfg.sparse.repeats = r;
    }
    amdahl_bench::gemm::validate(&cfg.gemm)?;
    let r = with_progress(st.energy, |h| amdahl_bench::roofline::run(&cfg, h))
        .context("measuring the roofline")?;
    emit(&common, &r)
}

/// Thread scaling: the configuration from the flags, then run and emitted.
fn run_scaling(common: Common) -> Result<ExitCode> {
    let st = common.settings()?;
    let mut cfg = if common.quick {
        ScalingConfig::quick(st.threads)
    } else {
        ScalingConfig::full(st.threads)
    };
    if let Some(&n) = st.sizes.first() {
        cfg.gemm_n = n;
    }
    if let Some(r) = st.repeats {
        cfg.repeats = r;
    }
    let r = with_progress(st.energy, |h| amdahl_bench::scaling::run(&cfg, h))
        .context("running the scaling benchmark")?;
    emit(&common, &r)
}

/// Run a benchmark with a progress bar on stderr (hidden when stderr is not a terminal).
fn with_progress<T>(
    energy: MeterProbe,
    f: impl FnOnce(&mut Hooks<'_>) -> amdahl_bench::Result<T>,
) -> amdahl_bench::Result<T> {
    let bar = crate::output::progress_bar(Some(0));
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}") {
        bar.set_style(style);
    }
    let b = bar.clone();
    let mut hooks = Hooks::default()
        .on_progress(move |p: &BenchProgress| {
            b.set_length(p.total as u64);
            b.set_position(p.done as u64);
            b.set_message(p.label.clone());
        })
        .with_energy(energy);
    let out = f(&mut hooks);
    bar.finish_and_clear();
    out
}

/// Write the result in the chosen format to stdout, and its plot when asked.
fn emit<T: Serialize + Render>(common: &Common, report: &T) -> Result<ExitCode> {
    if let Some(path) = &common.svg {
        check_result(report)?;
        if let Some(svg) = report.svg() {
            crate::output::write_plot(path, &svg)?;
        }
    }
    print_result(report, &report.render(common.format.format())?)?;
    Ok(ExitCode::SUCCESS)
}
