//! GPU micro-benchmarks: cuBLAS GEMM throughput per precision, host↔device copy bandwidth,
//! device-memory (HBM) bandwidth from device-to-device copies, and the board's power at idle and
//! under the compute-bound (GEMM) and memory-bound (copy) loads where NVML is readable.
//!
//! The measuring code (`gpu/cuda.rs`) exists only with the `cuda` feature; it loads the CUDA
//! driver and cuBLAS at run time (cudarc's dynamic loading), so the feature builds on machines
//! without CUDA. Everything here — configuration, validation, FLOP and byte accounting, the
//! reference check and the report — is plain Rust and tested without a GPU.
//!
//! Why copies matter: in Végh's reading of Amdahl's law, the time spent moving data between host
//! and accelerator does not shrink with more accelerators, so it belongs to the
//! non-parallelizable part (1−α_eff). [`copy_share`] turns the measured bandwidth into that share
//! for each GEMM measured.

#[cfg(feature = "cuda")]
mod cuda;

use crate::power::PowerStatus;
use crate::stats::{Rate, Stats};
use crate::Hooks;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

pub const SCHEMA: &str = "amdahl.bench.gpu/1";

/// Whether this build can measure a GPU at all.
pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

/// The rebuild command printed when the feature is missing.
pub const REBUILD_HINT: &str = "cargo build --release -p amdahl-cli --features cuda";

/// GEMM precisions measured through `cublasGemmEx`. Inputs, output and accumulation per
/// precision follow the cuBLAS documentation of `cublasGemmEx` (section "cublasGemmEx",
/// table of supported type combinations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuPrecision {
    Fp64,
    Fp32,
    /// fp32 in and out, multiplied on tensor cores with inputs rounded to TF32 (10-bit mantissa).
    Tf32,
    Fp16,
    Bf16,
    Int8,
}

impl GpuPrecision {
    pub const ALL: [GpuPrecision; 6] = [
        GpuPrecision::Fp64,
        GpuPrecision::Fp32,
        GpuPrecision::Tf32,
        GpuPrecision::Fp16,
        GpuPrecision::Bf16,
        GpuPrecision::Int8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GpuPrecision::Fp64 => "fp64",
            GpuPrecision::Fp32 => "fp32",
            GpuPrecision::Tf32 => "tf32",
            GpuPrecision::Fp16 => "fp16",
            GpuPrecision::Bf16 => "bf16",
            GpuPrecision::Int8 => "int8",
        }
    }

    /// Bytes per element of A and B.
    pub fn input_bytes(self) -> u64 {
        match self {
            GpuPrecision::Fp64 => 8,
            GpuPrecision::Fp32 | GpuPrecision::Tf32 => 4,
            GpuPrecision::Fp16 | GpuPrecision::Bf16 => 2,
            GpuPrecision::Int8 => 1,
        }
    }

    /// Bytes per element of C (int8 products accumulate into and are stored as int32).
    pub fn output_bytes(self) -> u64 {
        match self {
            GpuPrecision::Int8 => 4,
            p => p.input_bytes(),
        }
    }

    /// The `cublasComputeType_t` used (documented in the report).
    pub fn compute_type(self) -> &'static str {
        match self {
            GpuPrecision::Fp64 => "CUBLAS_COMPUTE_64F",
            GpuPrecision::Fp32 => "CUBLAS_COMPUTE_32F",
            GpuPrecision::Tf32 => "CUBLAS_COMPUTE_32F_FAST_TF32",
            GpuPrecision::Fp16 | GpuPrecision::Bf16 => "CUBLAS_COMPUTE_32F",
            GpuPrecision::Int8 => "CUBLAS_COMPUTE_32I",
        }
    }

    /// Largest error allowed in the reference check, relative to Σ|a||b| of the element.
    ///
    /// The check inputs are k/8 (|k| ≤ 8; integers for int8), exact in every format here, and the
    /// check size keeps every partial sum exact in an fp32 accumulator, so the only rounding is
    /// of the stored output: half an ulp, 2^-11 for fp16 (11-bit significand) and 2^-8 for bf16
    /// (8-bit). The bounds below are twice that; fp64/fp32/tf32 get a small margin for
    /// reassociated sums; int8 must be exact.
    pub fn check_tolerance(self) -> f64 {
        match self {
            GpuPrecision::Fp64 => 1e-12,
            GpuPrecision::Fp32 | GpuPrecision::Tf32 => 1e-6,
            GpuPrecision::Fp16 => 2f64.powi(-10),
            GpuPrecision::Bf16 => 2f64.powi(-7),
            GpuPrecision::Int8 => 0.0,
        }
    }

    /// int8 only at n a multiple of 4: cuBLAS's int8 (IMMA) kernels want 4-byte aligned columns,
    /// and older GPUs reject other leading dimensions outright. Kept on every GPU so the int8
    /// sizes are the same everywhere.
    pub fn size_ok(self, n: usize) -> bool {
        self != GpuPrecision::Int8 || n.is_multiple_of(4)
    }
}

impl fmt::Display for GpuPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GpuPrecision {
    type Err = GpuError;
    fn from_str(s: &str) -> Result<Self, GpuError> {
        let t = s.trim().to_ascii_lowercase();
        GpuPrecision::ALL
            .into_iter()
            .find(|p| p.name() == t)
            .ok_or_else(|| GpuError::UnknownPrecision(s.to_string()))
    }
}

#[derive(Debug, Error)]
pub enum GpuError {
    #[error("built without the `cuda` feature: {REBUILD_HINT}")]
    NotBuilt,

    #[error(
        "no CUDA driver found ({0}); install the NVIDIA driver (libcuda.so.1) or add its folder \
         to LD_LIBRARY_PATH"
    )]
    NoDriver(String),

    #[error("CUDA: {what}: {message}")]
    Cuda { what: String, message: String },

    #[error(
        "{what} needs {needed_gib:.2} GiB of GPU memory but only {free_gib:.2} GiB is free; \
         pass smaller --sizes"
    )]
    OutOfMemory {
        what: String,
        needed_gib: f64,
        free_gib: f64,
    },

    #[error(
        "cuBLAS {precision} GEMM gave a wrong result at element ({row}, {col}) of the n={n} \
         check: got {got}, reference {want}, allowed error {tol:e}; please report it"
    )]
    WrongResult {
        precision: GpuPrecision,
        n: usize,
        row: usize,
        col: usize,
        got: f64,
        want: f64,
        tol: f64,
    },

    #[error("unknown GPU precision `{0}`; use one of fp64, fp32, tf32, fp16, bf16, int8")]
    UnknownPrecision(String),

    #[error("{0}")]
    Invalid(String),
}

/// What to measure. Build with [`GpuConfig::quick`] or [`GpuConfig::full`], then adjust.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuConfig {
    /// CUDA device ordinal (after `CUDA_VISIBLE_DEVICES`).
    pub device: usize,
    /// Square GEMM orders n (C = Aᵀ·B, all n×n).
    pub sizes: Vec<usize>,
    pub precisions: Vec<GpuPrecision>,
    /// Bytes per host↔device copy.
    pub copy_sizes: Vec<usize>,
    pub warmup: usize,
    pub repeats: usize,
    /// Keep repeating each case until this many seconds of timed work (0: just `repeats`).
    pub min_time_s: f64,
    /// Order of the reference check run once per precision before timing.
    pub check_n: usize,
    /// Bytes of each of the two buffers of the device-to-device copy (0: not measured).
    pub device_copy_bytes: usize,
    /// Seconds of the idle window before the loads and of each power load (0: no power read).
    pub power_window_s: f64,
}

const MIB: usize = 1 << 20;

/// Device-to-device copy buffers, each far larger than the L2 cache so the copy streams from
/// and to HBM: H100 has 50 MB of L2 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022),
/// A100 40 MB (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020), so 1 GiB is 20×
/// Hopper's and the quick 256 MiB 5×. A GPU with a larger L2 wants a larger `--device-mib`.
pub const DEVICE_COPY_BYTES: usize = 1024 * MIB;
pub const DEVICE_COPY_BYTES_QUICK: usize = 256 * MIB;

impl GpuConfig {
    /// Seconds, not minutes: two sizes, few repeats, 64 MiB copies.
    pub fn quick(device: usize) -> Self {
        Self {
            device,
            sizes: vec![1024, 4096],
            precisions: GpuPrecision::ALL.to_vec(),
            copy_sizes: vec![MIB, 64 * MIB],
            warmup: 2,
            repeats: 5,
            min_time_s: 0.0,
            check_n: 128,
            device_copy_bytes: DEVICE_COPY_BYTES_QUICK,
            power_window_s: crate::power::POWER_WINDOW.as_secs_f64(),
        }
    }

    /// Sizes up to 16384 (fp64 at 16384 needs 6 GiB) and copies up to 1 GiB.
    pub fn full(device: usize) -> Self {
        Self {
            sizes: vec![1024, 2048, 4096, 8192, 16384],
            copy_sizes: vec![MIB, 16 * MIB, 256 * MIB, 1024 * MIB],
            warmup: 3,
            repeats: 20,
            device_copy_bytes: DEVICE_COPY_BYTES,
            ..Self::quick(device)
        }
    }

    /// Reject what cannot run before touching a device.
    pub fn validate(&self) -> Result<(), GpuError> {
        if self.sizes.is_empty() && self.copy_sizes.is_empty() && self.device_copy_bytes == 0 {
            return Err(GpuError::Invalid("nothing to measure: no sizes".into()));
        }
        if !self.sizes.is_empty() && self.precisions.is_empty() {
            return Err(GpuError::Invalid(
                "no precision to measure; pass --precision fp64,fp32,...".into(),
            ));
        }
        for &n in self.sizes.iter().chain([&self.check_n]) {
            // cuBLAS takes int dimensions; n² elements must be addressable.
            if n == 0
                || i32::try_from(n).is_err()
                || gemm_device_bytes(GpuPrecision::Fp64, n).is_none()
            {
                return Err(GpuError::Invalid(format!(
                    "GEMM order {n} is out of range; pass 1 ≤ n ≤ {}",
                    i32::MAX
                )));
            }
        }
        if self.copy_sizes.contains(&0) {
            return Err(GpuError::Invalid(
                "copy size 0; pass a positive size".into(),
            ));
        }
        if self.repeats == 0 {
            return Err(GpuError::Invalid("--repeats must be 1 or more".into()));
        }
        if !(self.min_time_s.is_finite() && self.min_time_s >= 0.0) {
            return Err(GpuError::Invalid(format!(
                "--min-time must be a number of seconds ≥ 0, got {}",
                self.min_time_s
            )));
        }
        if !(self.power_window_s.is_finite() && self.power_window_s >= 0.0) {
            return Err(GpuError::Invalid(format!(
                "--power-window must be a number of seconds ≥ 0, got {}",
                self.power_window_s
            )));
        }
        if device_copy_device_bytes(self.device_copy_bytes).is_none() {
            return Err(GpuError::Invalid(format!(
                "--device-mib {} is too large",
                self.device_copy_bytes >> 20
            )));
        }
        Ok(())
    }

    /// The power window as a duration (validated: finite, ≥ 0).
    pub fn power_window(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.power_window_s).unwrap_or_default()
    }

    /// The GEMM whose power is read as the compute-bound load: the largest size of the 16-bit
    /// precision (bf16, else fp16), else fp32 — the precision whose sustained rate a profile
    /// turns into the GEMM efficiency (`amdahl_model::profile::DeviceProfile::apply`), so the
    /// power and the utilisation it is divided by belong to the same load.
    pub fn power_gemm(&self) -> Option<(GpuPrecision, usize)> {
        let p = [GpuPrecision::Bf16, GpuPrecision::Fp16, GpuPrecision::Fp32]
            .into_iter()
            .find(|p| self.precisions.contains(p))?;
        let n = self.sizes.iter().copied().filter(|&n| p.size_ok(n)).max()?;
        Some((p, n))
    }
}

/// FLOPs of one n×n×n GEMM: 2·n³ (n³ multiply-adds, each counted as two operations) — the
/// convention of LINPACK/HPL (2/3·n³ for LU is derived the same way) and of vendor peak figures,
/// which count a fused multiply-add as 2 FLOPs. For int8 these are integer OPs.
pub fn gemm_flops(n: usize) -> f64 {
    let n = n as f64;
    2.0 * n * n * n
}

/// Device memory one case holds: A and B (n² inputs each) and C (n² outputs). `None` on
/// overflow.
pub fn gemm_device_bytes(p: GpuPrecision, n: usize) -> Option<u64> {
    let n2 = (n as u64).checked_mul(n as u64)?;
    let inputs = n2.checked_mul(2 * p.input_bytes())?;
    inputs.checked_add(n2.checked_mul(p.output_bytes())?)
}

/// Refuse sizes that cannot fit in `free` bytes of device memory before allocating anything.
pub fn check_memory(cfg: &GpuConfig, free: u64) -> Result<(), GpuError> {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let gemm = cfg.precisions.iter().flat_map(|&p| {
        cfg.sizes
            .iter()
            .map(move |&n| (format!("{p} GEMM n={n}"), gemm_device_bytes(p, n)))
    });
    let copies = cfg
        .copy_sizes
        .iter()
        .map(|&b| (format!("a {} MiB copy", b >> 20), Some(b as u64)));
    let device = (cfg.device_copy_bytes > 0).then(|| {
        (
            format!(
                "the device-to-device copy ({} MiB, two buffers)",
                cfg.device_copy_bytes >> 20
            ),
            device_copy_device_bytes(cfg.device_copy_bytes),
        )
    });
    for (what, need) in gemm.chain(copies).chain(device) {
        let need = need.unwrap_or(u64::MAX);
        if need > free {
            return Err(GpuError::OutOfMemory {
                what,
                needed_gib: gib(need),
                free_gib: gib(free),
            });
        }
    }
    Ok(())
}

/// Bytes of HBM traffic one device-to-device copy of `bytes` moves: each byte is read once and
/// written once. The convention of NVIDIA's `bandwidthTest` (cuda-samples, device-to-device: 2 ×
/// size / time) and of STREAM's and BabelStream's copy kernel (2 × 8 B per element): the
/// achieved bandwidth, not the copy rate, which is half of it.
pub fn device_copy_bytes_moved(bytes: usize) -> f64 {
    2.0 * bytes as f64
}

/// Device memory the copy holds (source and destination). `None` on overflow.
pub fn device_copy_device_bytes(bytes: usize) -> Option<u64> {
    (bytes as u64).checked_mul(2)
}

/// Which way a copy went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Host to device.
    H2d,
    /// Device to host.
    D2h,
}

/// Host memory of a copy: ordinary (pageable) memory is staged by the driver through a pinned
/// bounce buffer; page-locked (pinned, `cuMemHostAlloc`) memory is read by the GPU's DMA engine
/// directly (CUDA C++ Programming Guide, "Page-Locked Host Memory").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostMemory {
    Pageable,
    Pinned,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuDevice {
    pub index: usize,
    pub name: String,
    /// "9.0" for Hopper.
    pub compute_capability: String,
    pub memory_bytes: u64,
    /// The driver's CUDA version ("12.4"), from `cuDriverGetVersion`.
    pub driver_cuda_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuGemmRow {
    pub precision: GpuPrecision,
    pub n: usize,
    pub compute_type: String,
    /// 2·n³ per call.
    pub flops_per_run: f64,
    pub time: Stats,
    /// FLOP/s (OP/s for int8): max from the fastest run, min from the slowest.
    pub flops: Rate,
    pub device_bytes: u64,
    /// Share of time the copies would take if A and B went up and C came back over pinned
    /// memory for every call: t_copy / (t_copy + t_gemm), with the median times. `None` when
    /// the pinned copies were not measured.
    pub copy_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuCheck {
    pub precision: GpuPrecision,
    pub n: usize,
    /// Largest |got − reference| / Σ|a||b| over all elements.
    pub max_error: f64,
    pub tolerance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotMeasured {
    pub what: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CopyRow {
    pub direction: Direction,
    pub host: HostMemory,
    pub bytes: u64,
    pub time: Stats,
    /// Bytes per second.
    pub bandwidth: Rate,
}

/// Device-memory bandwidth: `cuMemcpyDtoDAsync` of one buffer into another on the same GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceCopyRow {
    /// Bytes per buffer (one copy's size).
    pub bytes: u64,
    /// HBM traffic per copy counted for the bandwidth: read + write, 2 × `bytes`.
    pub bytes_moved: f64,
    pub time: Stats,
    /// `bytes_moved` per second; `max` (from the fastest copy) is the achieved bandwidth the
    /// profile keeps (best of the repeats, as STREAM and `bandwidthTest` report).
    pub bandwidth: Rate,
}

/// The board's power (NVML) at idle and under the two loads, or why not.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuPower {
    /// Before the CUDA context is opened: nothing of this process on the GPU.
    pub idle: PowerStatus,
    /// Holding the compute-bound GEMM ([`GpuConfig::power_gemm`]).
    pub compute: PowerStatus,
    /// Holding the device-to-device copy.
    pub memory: PowerStatus,
}

impl GpuPower {
    /// Every figure not measured, for the same reason.
    pub fn not_measured(reason: &str) -> Self {
        Self {
            idle: PowerStatus::not_measured(reason),
            compute: PowerStatus::not_measured(reason),
            memory: PowerStatus::not_measured(reason),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuReport {
    pub schema: String,
    pub device: GpuDevice,
    pub debug_build: bool,
    /// How the times were taken.
    pub timing: String,
    pub checks: Vec<GpuCheck>,
    pub gemm: Vec<GpuGemmRow>,
    pub copies: Vec<CopyRow>,
    /// The device-to-device copy, where measured.
    #[serde(default)]
    pub device_memory: Option<DeviceCopyRow>,
    #[serde(default)]
    pub power: GpuPower,
    pub not_measured: Vec<NotMeasured>,
}

impl GpuReport {
    /// The achieved device-memory bandwidth (B/s): the best device-to-device copy.
    pub fn memory_bandwidth(&self) -> Option<f64> {
        self.device_memory
            .as_ref()
            .map(|d| d.bandwidth.max)
            .filter(|b| b.is_finite() && *b > 0.0)
    }
}

/// Measure the GPU. Without the `cuda` feature this is [`GpuError::NotBuilt`].
pub fn run(cfg: &GpuConfig, hooks: &mut Hooks<'_>) -> Result<GpuReport, GpuError> {
    cfg.validate()?;
    #[cfg(feature = "cuda")]
    {
        let mut report = cuda::run(cfg, hooks)?;
        fill_copy_shares(&mut report);
        Ok(report)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = hooks;
        Err(GpuError::NotBuilt)
    }
}

/// Median pinned bandwidth of the largest copy measured in `dir`.
pub fn pinned_bandwidth(copies: &[CopyRow], dir: Direction) -> Option<f64> {
    copies
        .iter()
        .filter(|c| c.direction == dir && c.host == HostMemory::Pinned)
        .max_by_key(|c| c.bytes)
        .map(|c| c.bandwidth.median)
        .filter(|b| b.is_finite() && *b > 0.0)
}

/// Copy share of one GEMM (see [`GpuGemmRow::copy_share`]): inputs up at `h2d` B/s, output down
/// at `d2h` B/s, against `gemm_s` seconds of compute.
pub fn copy_share(p: GpuPrecision, n: usize, gemm_s: f64, h2d: f64, d2h: f64) -> f64 {
    let n2 = (n as f64) * (n as f64);
    let up = 2.0 * n2 * p.input_bytes() as f64 / h2d;
    let down = n2 * p.output_bytes() as f64 / d2h;
    let copy = up + down;
    copy / (copy + gemm_s)
}

pub fn fill_copy_shares(r: &mut GpuReport) {
    let bw = pinned_bandwidth(&r.copies, Direction::H2d)
        .zip(pinned_bandwidth(&r.copies, Direction::D2h));
    for row in &mut r.gemm {
        row.copy_share =
            bw.map(|(h2d, d2h)| copy_share(row.precision, row.n, row.time.median.0, h2d, d2h));
    }
}

/// The next value of Vigna's splitmix64 generator (the seeding generator of xoshiro,
/// <https://prng.di.unimi.it/splitmix64.c>).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `len` pseudo-random bytes (splitmix64): the device-to-device copy's source, incompressible.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Deterministic check inputs (splitmix64): k/8 with k ∈ [−8, 8] for floating point, k for int8,
/// exactly representable in every precision here.
pub fn check_values(p: GpuPrecision, len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            let k = (splitmix64(&mut state) % 17) as f64 - 8.0;
            if p == GpuPrecision::Int8 {
                k
            } else {
                k / 8.0
            }
        })
        .collect()
}

/// Reference of C = Aᵀ·B for column-major n×n A and B (the layout the benchmark hands cuBLAS:
/// `transa = T`, `transb = N`): C[i + j·n] = Σ_p
/// A[p + i·n]·B[p + j·n], in f64 (exact for the check inputs), with Σ|a||b| for the tolerance.
pub fn reference_tn(a: &[f64], b: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; n * n];
    let mut abs = vec![0.0; n * n];
    for j in 0..n {
        let bj = &b[j * n..(j + 1) * n];
        for i in 0..n {
            let ai = &a[i * n..(i + 1) * n];
            let (s, m) = ai
                .iter()
                .zip(bj)
                .fold((0.0, 0.0), |(s, m), (x, y)| (s + x * y, m + (x * y).abs()));
            c[i + j * n] = s;
            abs[i + j * n] = m;
        }
    }
    (c, abs)
}

/// Compare a device result with the reference; the worst relative error or the first element
/// out of tolerance.
pub fn compare(
    p: GpuPrecision,
    n: usize,
    got: &[f64],
    want: &[f64],
    abs: &[f64],
) -> Result<GpuCheck, GpuError> {
    if got.len() != want.len() || abs.len() != want.len() {
        return Err(GpuError::Invalid(format!(
            "{p} check returned {} elements, expected {}",
            got.len(),
            want.len()
        )));
    }
    let tol = p.check_tolerance();
    let mut worst: f64 = 0.0;
    for (idx, ((g, w), m)) in got.iter().zip(want).zip(abs).enumerate() {
        let err = (g - w).abs();
        let rel = if *m > 0.0 { err / m } else { err };
        if rel.is_nan() || rel > tol {
            return Err(GpuError::WrongResult {
                precision: p,
                n,
                row: idx % n.max(1),
                col: idx / n.max(1),
                got: *g,
                want: *w,
                tol,
            });
        }
        worst = worst.max(rel);
    }
    Ok(GpuCheck {
        precision: p,
        n,
        max_error: worst,
        tolerance: tol,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use amdahl_model::units::Seconds;

    #[test]
    fn flops_are_two_n_cubed() {
        // 2·n³ (HPL's convention: a multiply-add is two FLOPs).
        assert_eq!(gemm_flops(1024), 2.0 * 1024f64.powi(3));
        assert_eq!(gemm_flops(1), 2.0);
    }

    #[test]
    fn device_bytes_per_precision() {
        let n = 4096u64;
        assert_eq!(
            gemm_device_bytes(GpuPrecision::Fp64, 4096),
            Some(3 * n * n * 8)
        );
        assert_eq!(
            gemm_device_bytes(GpuPrecision::Tf32, 4096),
            Some(3 * n * n * 4)
        );
        assert_eq!(
            gemm_device_bytes(GpuPrecision::Bf16, 4096),
            Some(3 * n * n * 2)
        );
        // int8: A and B one byte, C int32.
        assert_eq!(
            gemm_device_bytes(GpuPrecision::Int8, 4096),
            Some(2 * n * n + 4 * n * n)
        );
        assert_eq!(gemm_device_bytes(GpuPrecision::Fp64, usize::MAX), None);
    }

    #[test]
    fn precisions_parse_and_reject() {
        for p in GpuPrecision::ALL {
            assert_eq!(p.name().parse::<GpuPrecision>().unwrap(), p);
        }
        assert_eq!(" TF32".parse::<GpuPrecision>().unwrap(), GpuPrecision::Tf32);
        let e = "fp8".parse::<GpuPrecision>().unwrap_err().to_string();
        assert!(e.contains("fp8") && e.contains("tf32"), "{e}");
    }

    #[test]
    fn validation_rejects_bad_configs() {
        assert!(GpuConfig::quick(0).validate().is_ok());
        assert!(GpuConfig::full(0).validate().is_ok());
        let bad = |f: fn(&mut GpuConfig)| {
            let mut c = GpuConfig::quick(0);
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(|c| c.sizes = vec![0]).contains("out of range"));
        assert!(bad(|c| c.sizes = vec![1 << 40]).contains("out of range"));
        assert!(bad(|c| c.repeats = 0).contains("--repeats"));
        assert!(bad(|c| c.min_time_s = f64::NAN).contains("--min-time"));
        assert!(bad(|c| c.min_time_s = -1.0).contains("--min-time"));
        assert!(bad(|c| c.precisions.clear()).contains("--precision"));
        assert!(bad(|c| c.copy_sizes = vec![0]).contains("copy size"));
        assert!(bad(|c| {
            c.sizes.clear();
            c.copy_sizes.clear();
            c.device_copy_bytes = 0;
        })
        .contains("nothing"));
    }

    #[test]
    fn sizes_beyond_free_memory_are_refused_with_the_need() {
        let mut c = GpuConfig::quick(0);
        c.sizes = vec![16384];
        c.precisions = vec![GpuPrecision::Fp64];
        c.copy_sizes = vec![1 << 20];
        // fp64 at n = 16384: 3 · 16384² · 8 B = 6 GiB.
        assert!(check_memory(&c, 6 << 30).is_ok());
        let e = check_memory(&c, 4 << 30).unwrap_err().to_string();
        assert!(
            e.contains("fp64 GEMM n=16384 needs 6.00 GiB") && e.contains("4.00 GiB"),
            "{e}"
        );
        c.sizes.clear();
        c.copy_sizes = vec![8 << 30];
        let e = check_memory(&c, 4 << 30).unwrap_err().to_string();
        assert!(e.contains("8192 MiB copy needs 8.00 GiB"), "{e}");
    }

    #[test]
    fn int8_needs_multiples_of_four() {
        assert!(GpuPrecision::Int8.size_ok(4096));
        assert!(!GpuPrecision::Int8.size_ok(1001));
        assert!(GpuPrecision::Fp32.size_ok(1001));
    }

    #[test]
    fn check_values_are_exact_in_every_format() {
        for p in GpuPrecision::ALL {
            let v = check_values(p, 1000, 7);
            for x in &v {
                let k = if p == GpuPrecision::Int8 { *x } else { x * 8.0 };
                assert!(k.fract() == 0.0 && k.abs() <= 8.0, "{p}: {x}");
                // k/8 with |k| ≤ 8 has at most 4 significant bits: exact in bf16 (8) and up.
                assert_eq!(half::bf16::from_f64(*x).to_f64(), *x);
            }
            // Not constant: the check would miss transposition errors otherwise.
            assert!(v.iter().any(|x| *x != v[0]));
        }
    }

    #[test]
    fn reference_is_a_transposed_product() {
        // A = [[1,2],[3,4]] column-major is [1,3,2,4]; Aᵀ·B with B = I is Aᵀ = [[1,3],[2,4]],
        // column-major [1,2,3,4].
        let a = [1.0, 3.0, 2.0, 4.0];
        let i2 = [1.0, 0.0, 0.0, 1.0];
        let (c, abs) = reference_tn(&a, &i2, 2);
        assert_eq!(c, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(abs, vec![1.0, 2.0, 3.0, 4.0]);
        let neg = [-1.0, 0.0, 0.0, -1.0];
        let (c, abs) = reference_tn(&a, &neg, 2);
        assert_eq!(c, vec![-1.0, -2.0, -3.0, -4.0]);
        assert_eq!(abs, vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn compare_accepts_rounding_and_rejects_errors() {
        let n = 16;
        let p = GpuPrecision::Fp16;
        let a = check_values(p, n * n, 1);
        let b = check_values(p, n * n, 2);
        let (want, abs) = reference_tn(&a, &b, n);
        // The result as fp16 stores it: rounding of the output only.
        let got: Vec<f64> = want
            .iter()
            .map(|x| half::f16::from_f64(*x).to_f64())
            .collect();
        let ok = compare(p, n, &got, &want, &abs).unwrap();
        assert!(ok.max_error <= 2f64.powi(-11), "{}", ok.max_error);
        let mut bad = got.clone();
        bad[3 + 5 * n] += 1.0;
        match compare(p, n, &bad, &want, &abs) {
            Err(GpuError::WrongResult { row, col, .. }) => assert_eq!((row, col), (3, 5)),
            other => panic!("{other:?}"),
        }
        let mut nan = got;
        nan[0] = f64::NAN;
        assert!(compare(p, n, &nan, &want, &abs).is_err());
        // int8 must be exact.
        assert!(compare(GpuPrecision::Int8, 1, &[3.0], &[2.0], &[2.0]).is_err());
        assert!(compare(GpuPrecision::Int8, 1, &[2.0], &[2.0], &[2.0]).is_ok());
    }

    fn stats(s: f64) -> Stats {
        Stats {
            min: Seconds(s),
            median: Seconds(s),
            max: Seconds(s),
            repeats: 1,
        }
    }

    #[test]
    fn copy_share_counts_inputs_up_and_output_down() {
        // fp32, n = 1000: 8 MB up at 8 GB/s = 1 ms, 4 MB down at 4 GB/s = 1 ms; GEMM 2 ms → 0.5.
        let s = copy_share(GpuPrecision::Fp32, 1000, 2e-3, 8e9, 4e9);
        assert!((s - 0.5).abs() < 1e-12, "{s}");
        let mut r = GpuReport {
            schema: SCHEMA.into(),
            device: GpuDevice {
                index: 0,
                name: "fake".into(),
                compute_capability: "9.0".into(),
                memory_bytes: 0,
                driver_cuda_version: None,
            },
            debug_build: false,
            timing: String::new(),
            checks: vec![],
            gemm: vec![GpuGemmRow {
                precision: GpuPrecision::Fp32,
                n: 1000,
                compute_type: String::new(),
                flops_per_run: gemm_flops(1000),
                time: stats(2e-3),
                flops: stats(2e-3).rates(gemm_flops(1000)),
                device_bytes: 0,
                copy_share: None,
            }],
            copies: vec![],
            device_memory: None,
            power: GpuPower::default(),
            not_measured: vec![],
        };
        fill_copy_shares(&mut r);
        assert_eq!(r.gemm[0].copy_share, None, "no copies measured: no share");
        for (direction, bw) in [(Direction::H2d, 8e9), (Direction::D2h, 4e9)] {
            r.copies.push(CopyRow {
                direction,
                host: HostMemory::Pinned,
                bytes: 1 << 20,
                time: stats((1 << 20) as f64 / bw),
                bandwidth: stats((1 << 20) as f64 / bw).rates((1 << 20) as f64),
            });
        }
        fill_copy_shares(&mut r);
        let s = r.gemm[0].copy_share.unwrap();
        assert!((s - 0.5).abs() < 1e-9, "{s}");
    }

    #[test]
    fn a_device_copy_moves_each_byte_twice() {
        // 1 GiB read and 1 GiB written: 2 GiB of HBM traffic; in 1 ms, 2.147 TB/s.
        assert_eq!(device_copy_bytes_moved(1 << 30), 2.0 * (1u64 << 30) as f64);
        assert_eq!(device_copy_device_bytes(1 << 30), Some(2 << 30));
        assert_eq!(device_copy_device_bytes(usize::MAX), None);
        let time = Stats {
            min: Seconds(1e-3),
            median: Seconds(2e-3),
            max: Seconds(4e-3),
            repeats: 3,
        };
        let moved = device_copy_bytes_moved(1 << 30);
        let mut r = GpuReport {
            schema: SCHEMA.into(),
            device: GpuDevice {
                index: 0,
                name: "fake".into(),
                compute_capability: "9.0".into(),
                memory_bytes: 0,
                driver_cuda_version: None,
            },
            debug_build: false,
            timing: String::new(),
            checks: vec![],
            gemm: vec![],
            copies: vec![],
            device_memory: None,
            power: GpuPower::default(),
            not_measured: vec![],
        };
        assert_eq!(r.memory_bandwidth(), None);
        r.device_memory = Some(DeviceCopyRow {
            bytes: 1 << 30,
            bytes_moved: moved,
            time,
            bandwidth: time.rates(moved),
        });
        // The best copy (1 ms), not the median (2 ms).
        let bw = r.memory_bandwidth().unwrap();
        assert!((bw - 2.0 * (1u64 << 30) as f64 / 1e-3).abs() < 1.0, "{bw}");
    }

    #[test]
    fn the_device_copy_counts_against_free_memory() {
        let mut c = GpuConfig::quick(0);
        c.sizes.clear();
        c.copy_sizes.clear();
        c.device_copy_bytes = 1 << 30;
        assert!(
            c.validate().is_ok(),
            "a device copy alone is something to measure"
        );
        assert!(check_memory(&c, 2 << 30).is_ok());
        let e = check_memory(&c, 1 << 30).unwrap_err().to_string();
        assert!(
            e.contains("device-to-device copy (1024 MiB, two buffers) needs 2.00 GiB"),
            "{e}"
        );
        c.device_copy_bytes = 0;
        assert!(c.validate().unwrap_err().to_string().contains("nothing"));
    }

    #[test]
    fn the_power_gemm_is_the_largest_16_bit_else_fp32() {
        let mut c = GpuConfig::quick(0);
        c.sizes = vec![1024, 4096, 2048];
        assert_eq!(c.power_gemm(), Some((GpuPrecision::Bf16, 4096)));
        c.precisions = vec![GpuPrecision::Fp32, GpuPrecision::Fp16];
        assert_eq!(c.power_gemm(), Some((GpuPrecision::Fp16, 4096)));
        c.precisions = vec![GpuPrecision::Fp64, GpuPrecision::Fp32];
        assert_eq!(c.power_gemm(), Some((GpuPrecision::Fp32, 4096)));
        c.precisions = vec![GpuPrecision::Fp64, GpuPrecision::Int8];
        assert_eq!(c.power_gemm(), None);
        c.precisions = vec![GpuPrecision::Bf16];
        c.sizes.clear();
        assert_eq!(c.power_gemm(), None);
    }

    #[test]
    fn power_window_is_validated() {
        let mut c = GpuConfig::quick(0);
        assert_eq!(c.power_window(), crate::power::POWER_WINDOW);
        c.power_window_s = 0.0;
        assert!(c.validate().is_ok());
        assert!(c.power_window().is_zero());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            c.power_window_s = bad;
            assert!(
                c.validate()
                    .unwrap_err()
                    .to_string()
                    .contains("--power-window"),
                "{bad}"
            );
        }
    }

    #[test]
    fn random_bytes_are_not_a_constant() {
        let b = random_bytes(1000, 4);
        assert_eq!(b.len(), 1000);
        // Every byte value about equally often: no run of zeros for compression to find.
        let zeros = b.iter().filter(|x| **x == 0).count();
        assert!(zeros < 20, "{zeros}");
        assert_eq!(b, random_bytes(1000, 4));
        assert_ne!(b, random_bytes(1000, 5));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_feature_run_says_how_to_rebuild() {
        let e = run(&GpuConfig::quick(0), &mut Hooks::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "built without the `cuda` feature: cargo build --release -p amdahl-cli --features cuda"
        );
    }
}
