//! The measuring half of [`super`]: CUDA driver and cuBLAS through cudarc, loaded at run time.
//!
//! GEMMs go through `cublasGemmEx` with `transa = T, transb = N` (C = Aᵀ·B, every matrix n×n,
//! column-major) for all precisions, so the layout is the same everywhere (TN: both operands are
//! read along contiguous columns, which int8 kernels favour). Each timed call sits between two CUDA events on the stream;
//! copies are timed with the host clock around the copy and a stream synchronisation, because a
//! pageable copy is staged by the host and events would miss part of it. The device-to-device
//! copy runs on the device alone, so each one sits between two events like a GEMM.
//!
//! Power (the hooks' energy probe, NVML in the binary): idle before the context is opened, then
//! the compute-bound GEMM and the device-to-device copy each held for the power window.

use super::{
    check_memory, check_values, compare, device_copy_bytes_moved, gemm_device_bytes, gemm_flops,
    random_bytes, reference_tn, CopyRow, DeviceCopyRow, Direction, GpuCheck, GpuConfig, GpuDevice,
    GpuError, GpuGemmRow, GpuPower, GpuPrecision, GpuReport, HostMemory, NotMeasured, SCHEMA,
};
use crate::power::PowerStatus;
use crate::stats::Stats;
use crate::Hooks;
use cudarc::cublas::{result as blas, sys as bsys, CudaBlas};
use cudarc::driver::{
    sys as dsys, CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
    HostSlice, ValidAsZeroBits,
};
use std::ffi::c_void;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Inputs for timing repeat a pattern of this many values (a prime, so rows do not line up).
const PATTERN: usize = 1_048_573;

/// A power load is enqueued in batches of about this much device time between synchronisations,
/// so the host's wait does not leave the GPU idle between calls (a launch costs microseconds).
const POWER_BATCH_S: f64 = 0.01;

pub(super) fn run(cfg: &GpuConfig, hooks: &mut Hooks<'_>) -> Result<GpuReport, GpuError> {
    // cudarc panics when it cannot dlopen a library it needs: look for the driver first.
    // SAFETY: only tries to load libcuda with libloading.
    if !unsafe { dsys::is_culib_present() } {
        return Err(GpuError::NoDriver("libcuda.so could not be loaded".into()));
    }
    // A missing symbol (a driver older than CUDA 12.0) would still panic inside cudarc; turn it
    // into an error rather than abort the report.
    match catch_unwind(AssertUnwindSafe(|| measure(cfg, hooks))) {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(GpuError::Cuda {
                what: "the CUDA bindings failed (is the driver older than CUDA 12.0?)".into(),
                message,
            })
        }
    }
}

fn cu<E: Display>(what: impl Into<String>) -> impl FnOnce(E) -> GpuError {
    let what = what.into();
    move |e| GpuError::Cuda {
        what,
        message: e.to_string(),
    }
}

/// Seconds of each call of `op`, timed by events recorded on `stream` around it, until both
/// `cfg.repeats` calls and `cfg.min_time_s` of wall time are reached (CUDA Driver API:
/// `cuEventRecord`, `cuEventElapsedTime`).
fn event_timed(
    stream: &Arc<CudaStream>,
    cfg: &GpuConfig,
    mut op: impl FnMut() -> Result<(), GpuError>,
) -> Result<Vec<f64>, GpuError> {
    let timing = Some(dsys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut samples = Vec::with_capacity(cfg.repeats);
    let started = Instant::now();
    while samples.len() < cfg.repeats || started.elapsed().as_secs_f64() < cfg.min_time_s {
        let start = stream
            .record_event(timing)
            .map_err(cu("recording an event"))?;
        op()?;
        let end = stream
            .record_event(timing)
            .map_err(cu("recording an event"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(cu("reading the event timer"))?;
        samples.push(f64::from(ms) / 1e3);
    }
    Ok(samples)
}

fn measure(cfg: &GpuConfig, hooks: &mut Hooks<'_>) -> Result<GpuReport, GpuError> {
    // Before this process holds a context: the GPU as a job that has not started finds it.
    let idle = hooks.idle_power(cfg.power_window());
    let (ctx, device) = open_device(cfg)?;
    let stream = ctx.default_stream();
    let (free, _) = ctx.mem_get_info().map_err(cu("reading free memory"))?;
    check_memory(cfg, free as u64)?;

    let gemm_steps = cfg.precisions.len() * (cfg.sizes.len() + 1);
    let total = if cfg.sizes.is_empty() { 0 } else { gemm_steps }
        + cfg.copy_sizes.len() * 4
        + usize::from(cfg.device_copy_bytes > 0);
    let mut steps = Steps {
        hooks,
        done: 0,
        total,
    };
    let mut not_measured = Vec::new();
    let (checks, gemm, compute) = measure_gemm(cfg, &stream, &mut steps, &mut not_measured)?;
    let copies = measure_copies(cfg, &ctx, &stream, &mut steps)?;
    let (device_memory, memory) = match measure_device_copy(cfg, &stream, &mut steps)? {
        Some((row, power)) => (Some(row), power),
        None => (
            None,
            PowerStatus::not_measured("no device-to-device copy (--device-mib 0)"),
        ),
    };
    steps.finish();

    Ok(GpuReport {
        schema: SCHEMA.into(),
        device,
        debug_build: crate::DEBUG_BUILD,
        timing: "GEMM and device-to-device copy: CUDA events around each call (after warm-up); \
                 host↔device copies: host clock around cuMemcpy*Async + stream synchronize"
            .into(),
        checks,
        gemm,
        copies,
        device_memory,
        power: GpuPower {
            idle,
            compute,
            memory,
        },
        not_measured,
    })
}

/// The progress of [`measure`]'s steps: `done` of `total`, reported through the hooks.
struct Steps<'h, 'a> {
    hooks: &'h mut Hooks<'a>,
    done: usize,
    total: usize,
}

impl Steps<'_, '_> {
    /// Say that step `label` starts (the next one, `done` of `total`).
    fn start(&mut self, label: String) {
        self.hooks.step(self.done, self.total, label);
    }

    /// Say that every step is done.
    fn finish(self) {
        self.hooks.step(self.total, self.total, "done");
    }
}

/// Open `cfg.device` (after checking that CUDA sees it) and describe it.
fn open_device(cfg: &GpuConfig) -> Result<(Arc<CudaContext>, GpuDevice), GpuError> {
    let count = match CudaContext::device_count() {
        Ok(c) => usize::try_from(c).unwrap_or(0),
        // cuInit says so itself when the driver loads but finds no GPU.
        Err(e) if e.0 == dsys::cudaError_enum::CUDA_ERROR_NO_DEVICE => 0,
        Err(e) => return Err(cu("initialising CUDA (cuInit)")(e)),
    };
    if count == 0 {
        return Err(GpuError::Cuda {
            what: "finding a GPU".into(),
            message: "the driver sees no CUDA device; check nvidia-smi and CUDA_VISIBLE_DEVICES"
                .into(),
        });
    }
    if cfg.device >= count {
        return Err(GpuError::Invalid(format!(
            "--device {} does not exist: {count} CUDA device(s) visible (0..={})",
            cfg.device,
            count - 1
        )));
    }
    let ctx = CudaContext::new(cfg.device).map_err(cu("opening the device"))?;
    let (cc_major, cc_minor) = ctx
        .compute_capability()
        .map_err(cu("reading the compute capability"))?;
    let device = GpuDevice {
        index: cfg.device,
        name: ctx.name().map_err(cu("reading the device name"))?,
        compute_capability: format!("{cc_major}.{cc_minor}"),
        memory_bytes: ctx.total_mem().map_err(cu("reading the memory size"))? as u64,
        driver_cuda_version: driver_version(),
    };
    Ok((ctx, device))
}

/// What [`measure_gemm`] gives: the checks, the timed GEMMs and the compute-bound power.
type GemmResults = (Vec<GpuCheck>, Vec<GpuGemmRow>, PowerStatus);

/// The cuBLAS check and timed GEMMs of every precision and size, and the power held over
/// [`GpuConfig::power_gemm`]; what cannot be measured (no cuBLAS, int8 at a size not a multiple
/// of 4) goes to `not_measured`.
fn measure_gemm(
    cfg: &GpuConfig,
    stream: &Arc<CudaStream>,
    steps: &mut Steps<'_, '_>,
    not_measured: &mut Vec<NotMeasured>,
) -> Result<GemmResults, GpuError> {
    let (mut checks, mut gemm) = (Vec::new(), Vec::new());
    let power_case = cfg.power_gemm();
    let mut compute = PowerStatus::not_measured(if cfg.sizes.is_empty() {
        "no GEMM measured (--no-gemm)"
    } else {
        "no bf16, fp16 or fp32 GEMM measured (--precision)"
    });
    if cfg.sizes.is_empty() {
        return Ok((checks, gemm, compute));
    }
    // SAFETY: only tries to load libcublas with libloading.
    if !unsafe { bsys::is_culib_present() } {
        not_measured.push(NotMeasured {
            what: "GEMM (all precisions)".into(),
            reason: "libcublas.so could not be loaded; install cuBLAS (CUDA toolkit, or the \
                     nvidia-cublas-cu12 wheel) and add its lib folder to LD_LIBRARY_PATH"
                .into(),
        });
        compute = PowerStatus::not_measured("no GEMM measured (libcublas.so not loaded)");
        return Ok((checks, gemm, compute));
    }
    let handle = CudaBlas::new(stream.clone()).map_err(cu("creating a cuBLAS handle"))?;
    for &p in &cfg.precisions {
        steps.start(format!("{p} check n={}", cfg.check_n));
        checks.push(dispatch_check(&handle, stream, p, cfg.check_n)?);
        steps.done += 1;
        for &n in &cfg.sizes {
            if !p.size_ok(n) {
                not_measured.push(NotMeasured {
                    what: format!("{p} n={n}"),
                    reason: "int8 is measured only at n a multiple of 4 (4-byte aligned columns)"
                        .into(),
                });
                steps.done += 1;
                continue;
            }
            steps.start(format!("{p} n={n}"));
            let hold = (power_case == Some((p, n))).then_some(&mut *steps.hooks);
            let (time, power) = dispatch_time(&handle, stream, p, n, cfg, hold)?;
            if let Some(power) = power {
                compute = power;
            }
            let flops_per_run = gemm_flops(n);
            gemm.push(GpuGemmRow {
                precision: p,
                n,
                compute_type: p.compute_type().into(),
                flops_per_run,
                time,
                flops: time.rates(flops_per_run),
                device_bytes: gemm_device_bytes(p, n).unwrap_or(0),
                copy_share: None,
            });
            steps.done += 1;
        }
    }
    Ok((checks, gemm, compute))
}

/// Host↔device copies of every size, pageable and pinned, each direction.
fn measure_copies(
    cfg: &GpuConfig,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    steps: &mut Steps<'_, '_>,
) -> Result<Vec<CopyRow>, GpuError> {
    let mut copies = Vec::new();
    for &bytes in &cfg.copy_sizes {
        for host in [HostMemory::Pageable, HostMemory::Pinned] {
            for direction in [Direction::H2d, Direction::D2h] {
                steps.start(format!("copy {direction:?} {host:?} {} MiB", bytes >> 20));
                let time = time_copy(ctx, stream, bytes, host, direction, cfg)?;
                copies.push(CopyRow {
                    direction,
                    host,
                    bytes: bytes as u64,
                    time,
                    bandwidth: time.rates(bytes as f64),
                });
                steps.done += 1;
            }
        }
    }
    Ok(copies)
}

fn driver_version() -> Option<String> {
    let mut v: i32 = 0;
    // SAFETY: writes one int.
    let r = unsafe { dsys::cuDriverGetVersion(&mut v) };
    (r == dsys::cudaError_enum::CUDA_SUCCESS).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// An element type cuBLAS reads or writes.
trait Elem: DeviceRepr + ValidAsZeroBits + Copy + Unpin {
    const DT: bsys::cudaDataType_t;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! elem {
    ($t:ty, $dt:ident, $from:expr, $to:expr) => {
        impl Elem for $t {
            const DT: bsys::cudaDataType_t = bsys::cudaDataType_t::$dt;
            fn from_f64(x: f64) -> Self {
                $from(x)
            }
            fn to_f64(self) -> f64 {
                $to(self)
            }
        }
    };
}

elem!(f64, CUDA_R_64F, |x| x, |x| x);
elem!(f32, CUDA_R_32F, |x| x as f32, f64::from);
elem!(
    half::f16,
    CUDA_R_16F,
    half::f16::from_f64,
    half::f16::to_f64
);
elem!(
    half::bf16,
    CUDA_R_16BF,
    half::bf16::from_f64,
    half::bf16::to_f64
);
// Check and timing inputs are integers in [−8, 8] for int8.
elem!(i8, CUDA_R_8I, |x: f64| x as i8, f64::from);
elem!(i32, CUDA_R_32I, |x: f64| x as i32, f64::from);

/// α = 1, β = 0 in the scalar type the compute type wants (cublasGemmEx: float for 32F and
/// 32F_FAST_TF32, double for 64F, int for 32I).
enum Scalar {
    F64(f64),
    F32(f32),
    I32(i32),
}

impl Scalar {
    fn new(p: GpuPrecision, v: i32) -> Self {
        match p {
            GpuPrecision::Fp64 => Scalar::F64(f64::from(v)),
            GpuPrecision::Int8 => Scalar::I32(v),
            _ => Scalar::F32(v as f32),
        }
    }
    fn ptr(&self) -> *const c_void {
        match self {
            Scalar::F64(x) => x as *const f64 as *const c_void,
            Scalar::F32(x) => x as *const f32 as *const c_void,
            Scalar::I32(x) => x as *const i32 as *const c_void,
        }
    }
}

fn compute_type(p: GpuPrecision) -> bsys::cublasComputeType_t {
    use bsys::cublasComputeType_t as C;
    match p {
        GpuPrecision::Fp64 => C::CUBLAS_COMPUTE_64F,
        GpuPrecision::Fp32 | GpuPrecision::Fp16 | GpuPrecision::Bf16 => C::CUBLAS_COMPUTE_32F,
        GpuPrecision::Tf32 => C::CUBLAS_COMPUTE_32F_FAST_TF32,
        GpuPrecision::Int8 => C::CUBLAS_COMPUTE_32I,
    }
}

struct Operands<I: Elem, O: Elem> {
    a: CudaSlice<I>,
    b: CudaSlice<I>,
    c: CudaSlice<O>,
    n: usize,
}

impl<I: Elem, O: Elem> Operands<I, O> {
    fn upload(stream: &Arc<CudaStream>, a: &[I], b: &[I], n: usize) -> Result<Self, GpuError> {
        Ok(Self {
            a: stream
                .clone_htod(a)
                .map_err(cu("copying A to the device"))?,
            b: stream
                .clone_htod(b)
                .map_err(cu("copying B to the device"))?,
            c: stream
                .alloc_zeros::<O>(n * n)
                .map_err(cu("allocating C on the device"))?,
            n,
        })
    }

    /// Enqueue C = Aᵀ·B.
    fn gemm(
        &mut self,
        h: &CudaBlas,
        stream: &Arc<CudaStream>,
        p: GpuPrecision,
    ) -> Result<(), GpuError> {
        let n = i32::try_from(self.n).map_err(|_| {
            GpuError::Invalid(format!("GEMM order {} exceeds cuBLAS's int", self.n))
        })?;
        let (alpha, beta) = (Scalar::new(p, 1), Scalar::new(p, 0));
        let (a, _ra) = self.a.device_ptr(stream);
        let (b, _rb) = self.b.device_ptr(stream);
        let (c, _rc) = self.c.device_ptr_mut(stream);
        // SAFETY: A, B and C each hold n·n elements of the types named, lda = ldb = ldc = n is
        // valid for op(A) = Aᵀ, op(B) = B, C all n×n; α and β outlive the (host-pointer-mode)
        // call, which reads them before returning.
        unsafe {
            blas::gemm_ex(
                *h.handle(),
                bsys::cublasOperation_t::CUBLAS_OP_T,
                bsys::cublasOperation_t::CUBLAS_OP_N,
                n,
                n,
                n,
                alpha.ptr(),
                a as *const c_void,
                I::DT,
                n,
                b as *const c_void,
                I::DT,
                n,
                beta.ptr(),
                c as *mut c_void,
                O::DT,
                n,
                compute_type(p),
                bsys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(cu(format!("cublasGemmEx {p} n={}", self.n)))
    }
}

fn dispatch_check(
    h: &CudaBlas,
    s: &Arc<CudaStream>,
    p: GpuPrecision,
    n: usize,
) -> Result<GpuCheck, GpuError> {
    match p {
        GpuPrecision::Fp64 => check::<f64, f64>(h, s, p, n),
        GpuPrecision::Fp32 | GpuPrecision::Tf32 => check::<f32, f32>(h, s, p, n),
        GpuPrecision::Fp16 => check::<half::f16, half::f16>(h, s, p, n),
        GpuPrecision::Bf16 => check::<half::bf16, half::bf16>(h, s, p, n),
        GpuPrecision::Int8 => check::<i8, i32>(h, s, p, n),
    }
}

fn dispatch_time(
    h: &CudaBlas,
    s: &Arc<CudaStream>,
    p: GpuPrecision,
    n: usize,
    cfg: &GpuConfig,
    hold: Option<&mut Hooks<'_>>,
) -> Result<(Stats, Option<PowerStatus>), GpuError> {
    match p {
        GpuPrecision::Fp64 => time_gemm::<f64, f64>(h, s, p, n, cfg, hold),
        GpuPrecision::Fp32 | GpuPrecision::Tf32 => time_gemm::<f32, f32>(h, s, p, n, cfg, hold),
        GpuPrecision::Fp16 => time_gemm::<half::f16, half::f16>(h, s, p, n, cfg, hold),
        GpuPrecision::Bf16 => time_gemm::<half::bf16, half::bf16>(h, s, p, n, cfg, hold),
        GpuPrecision::Int8 => time_gemm::<i8, i32>(h, s, p, n, cfg, hold),
    }
}

/// Calls per power batch: about [`POWER_BATCH_S`] of device time at the median time per call.
fn power_batch(median_s: f64) -> usize {
    if median_s > 0.0 && median_s.is_finite() {
        ((POWER_BATCH_S / median_s).ceil() as usize).clamp(1, 10_000)
    } else {
        1
    }
}

/// Run one GEMM on exactly representable inputs and compare with the f64 reference.
fn check<I: Elem, O: Elem>(
    h: &CudaBlas,
    stream: &Arc<CudaStream>,
    p: GpuPrecision,
    n: usize,
) -> Result<GpuCheck, GpuError> {
    let a = check_values(p, n * n, 1);
    let b = check_values(p, n * n, 2);
    let conv = |v: &[f64]| v.iter().map(|&x| I::from_f64(x)).collect::<Vec<I>>();
    let mut ops = Operands::<I, O>::upload(stream, &conv(&a), &conv(&b), n)?;
    ops.gemm(h, stream, p)?;
    let raw = stream.clone_dtoh(&ops.c).map_err(cu("copying C back"))?;
    // A copy into pageable memory has finished when it returns (CUDA Driver API, "API
    // synchronization behavior"); synchronise anyway, so nothing is read early and an error of
    // the GEMM itself surfaces here, named.
    stream
        .synchronize()
        .map_err(cu(format!("running the {p} check")))?;
    let got: Vec<f64> = raw.into_iter().map(O::to_f64).collect();
    let (want, abs) = reference_tn(&a, &b, n);
    compare(p, n, &got, &want, &abs)
}

/// Warm up, then time calls until `repeats` and `min_time_s` are both reached; with `hold`,
/// then keep calling for the power window with its energy probe around.
fn time_gemm<I: Elem, O: Elem>(
    h: &CudaBlas,
    stream: &Arc<CudaStream>,
    p: GpuPrecision,
    n: usize,
    cfg: &GpuConfig,
    hold: Option<&mut Hooks<'_>>,
) -> Result<(Stats, Option<PowerStatus>), GpuError> {
    let pattern: Vec<I> = check_values(p, PATTERN.min(n * n), 3)
        .into_iter()
        .map(I::from_f64)
        .collect();
    let fill = |offset: usize| -> Vec<I> {
        (0..n * n)
            .map(|i| pattern[(i + offset) % pattern.len()])
            .collect()
    };
    let mut ops = Operands::<I, O>::upload(stream, &fill(0), &fill(pattern.len() / 2), n)?;
    for _ in 0..cfg.warmup {
        ops.gemm(h, stream, p)?;
    }
    stream.synchronize().map_err(cu("synchronising"))?;
    let samples = event_timed(stream, cfg, || ops.gemm(h, stream, p))?;
    let stats = Stats::from_samples(&samples).ok_or_else(|| GpuError::Cuda {
        what: format!("timing {p} n={n}"),
        message: "the event timer returned no finite time".into(),
    })?;
    let Some(hooks) = hold else {
        return Ok((stats, None));
    };
    let batch = power_batch(stats.median.0);
    let power = hooks.power_during(&format!("{p} GEMM n={n}"), cfg.power_window(), || {
        for _ in 0..batch {
            ops.gemm(h, stream, p)?;
        }
        stream.synchronize().map_err(cu("synchronising"))
    })?;
    Ok((stats, Some(power)))
}

/// The device-memory bandwidth: `cuMemcpyDtoDAsync` of one buffer into another (random bytes),
/// warm-up, then each copy between two events; then the copy held for the power window.
fn measure_device_copy(
    cfg: &GpuConfig,
    stream: &Arc<CudaStream>,
    steps: &mut Steps<'_, '_>,
) -> Result<Option<(DeviceCopyRow, PowerStatus)>, GpuError> {
    let bytes = cfg.device_copy_bytes;
    if bytes == 0 {
        return Ok(None);
    }
    steps.start(format!("device-to-device copy {} MiB", bytes >> 20));
    // Random bytes, not zeros: Ampere and newer compress data in L2 and DRAM ("compute data
    // compression", NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020), which would
    // shrink the traffic of a zero-filled buffer.
    // A 1 MiB random block repeated: a block that repeats only every MiB is as incompressible
    // to the hardware as one that never does, and filling 1 GiB takes a memcpy per MiB.
    let pattern = random_bytes(PATTERN.min(bytes), 4);
    let mut host = vec![0u8; bytes];
    for chunk in host.chunks_mut(pattern.len()) {
        chunk.copy_from_slice(&pattern[..chunk.len()]);
    }
    let src = stream
        .clone_htod(&host)
        .map_err(cu("copying the source buffer to the device"))?;
    drop(host);
    let mut dst = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(cu("allocating the destination buffer"))?;
    let mut copy = || {
        stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(cu("copying device to device"))
    };
    for _ in 0..cfg.warmup.max(1) {
        copy()?;
    }
    stream.synchronize().map_err(cu("synchronising"))?;
    let samples = event_timed(stream, cfg, &mut copy)?;
    let time = Stats::from_samples(&samples).ok_or_else(|| GpuError::Cuda {
        what: "timing the device-to-device copy".into(),
        message: "the event timer returned no finite time".into(),
    })?;
    let moved = device_copy_bytes_moved(bytes);
    let row = DeviceCopyRow {
        bytes: bytes as u64,
        bytes_moved: moved,
        time,
        bandwidth: time.rates(moved),
    };
    let batch = power_batch(time.median.0);
    let during = format!("device-to-device copy of {} MiB", bytes >> 20);
    let power = steps.hooks.power_during(&during, cfg.power_window(), || {
        for _ in 0..batch {
            copy()?;
        }
        stream.synchronize().map_err(cu("synchronising"))
    })?;
    steps.done += 1;
    Ok(Some((row, power)))
}

fn time_copy(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    bytes: usize,
    host: HostMemory,
    dir: Direction,
    cfg: &GpuConfig,
) -> Result<Stats, GpuError> {
    let mut dev = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(cu("allocating the copy buffer"))?;
    match host {
        // Filled with ones, so every page is touched before timing.
        HostMemory::Pageable => {
            let mut h = vec![1u8; bytes];
            copy_loop(stream, &mut h, &mut dev, dir, cfg)
        }
        HostMemory::Pinned => {
            // Plain page-locked memory (flags 0), as cudaMallocHost gives; cudarc's default
            // adds write-combining, which is not what most programs use.
            // SAFETY: the memory is filled right after allocation.
            let mut h = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }
                .map_err(cu("allocating pinned host memory"))?;
            h.as_mut_slice()
                .map_err(cu("mapping pinned host memory"))?
                .fill(1);
            copy_loop(stream, &mut h, &mut dev, dir, cfg)
        }
    }
}

fn copy_loop<H: HostSlice<u8> + ?Sized>(
    stream: &Arc<CudaStream>,
    host: &mut H,
    dev: &mut CudaSlice<u8>,
    dir: Direction,
    cfg: &GpuConfig,
) -> Result<Stats, GpuError> {
    let mut once = || -> Result<f64, GpuError> {
        let t = Instant::now();
        match dir {
            Direction::H2d => stream.memcpy_htod(&*host, dev),
            Direction::D2h => stream.memcpy_dtoh(&*dev, host),
        }
        .map_err(cu(format!("copying {dir:?}")))?;
        stream.synchronize().map_err(cu("synchronising"))?;
        Ok(t.elapsed().as_secs_f64())
    };
    for _ in 0..cfg.warmup.max(1) {
        once()?;
    }
    let samples = (0..cfg.repeats)
        .map(|_| once())
        .collect::<Result<Vec<_>, _>>()?;
    Stats::from_samples(&samples).ok_or_else(|| GpuError::Invalid("no copy timings".into()))
}
