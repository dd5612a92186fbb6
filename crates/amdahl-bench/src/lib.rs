//! Micro-benchmarks of the real machine: GEMM per precision, sparse × dense against dense, STREAM
//! bandwidth and a working-set sweep, the roofline built from them, and thread scaling of a GEMM
//! and of one training step of a small MLP.
//!
//! Every benchmark takes a config and [`Hooks`] (progress callback, energy probe) and returns a
//! serde-serialisable report with a `schema` field. Nothing here prints.

pub mod energy;
pub mod error;
pub mod gemm;
pub mod gpu;
pub mod kernels;
pub mod machine;
pub mod memory;
pub mod mlp;
pub mod power;
pub mod precision;
pub mod profile;
pub mod roofline;
pub mod scaling;
pub mod sparse;
pub mod stats;

pub use energy::{EnergyProbe, EnergyReading, EnergyStatus, MeterProbe, NoProbe};
pub use error::{BenchError, Result};
pub use power::PowerStatus;
pub use precision::Precision;

/// One step of a benchmark run, for a progress bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchProgress {
    /// Steps finished so far (0 when announcing the first).
    pub done: usize,
    pub total: usize,
    /// What runs next ("fp32 n=1024, 2 threads").
    pub label: String,
}

/// What a benchmark calls back into: a progress callback and an energy probe.
pub struct Hooks<'a> {
    progress: Box<dyn FnMut(&BenchProgress) + 'a>,
    energy: Box<dyn EnergyProbe + 'a>,
    /// (index, count) when one benchmark runs several others in turn (the roofline), so the
    /// progress reported is of the whole run, not restarted by each part.
    phase: Option<(usize, usize)>,
}

impl Default for Hooks<'_> {
    fn default() -> Self {
        Self {
            progress: Box::new(|_| {}),
            energy: Box::new(NoProbe),
            phase: None,
        }
    }
}

impl<'a> Hooks<'a> {
    /// Call `f` before each step and once at the end (`done == total`).
    pub fn on_progress(mut self, f: impl FnMut(&BenchProgress) + 'a) -> Self {
        self.progress = Box::new(f);
        self
    }

    /// Measure energy per benchmark case with `probe` (from `amdahl-meter`).
    pub fn with_energy(mut self, probe: impl EnergyProbe + 'a) -> Self {
        self.energy = Box::new(probe);
        self
    }

    pub(crate) fn step(&mut self, done: usize, total: usize, label: impl Into<String>) {
        let label = label.into();
        let p = match self.phase {
            // Each part gets an equal share of PART steps of the whole.
            Some((i, n)) => {
                const PART: usize = 1000;
                BenchProgress {
                    done: i * PART + done.min(total) * PART / total.max(1),
                    total: n * PART,
                    label: format!("[{}/{n}] {label}", i + 1),
                }
            }
            None => BenchProgress { done, total, label },
        };
        (self.progress)(&p);
    }

    /// Report the next steps as part `index` of `count` (`None` to stop).
    pub(crate) fn set_phase(&mut self, phase: Option<(usize, usize)>) {
        self.phase = phase;
    }

    /// Time `f` (warm-up, then repeats) with the energy probe around the timed repeats.
    pub(crate) fn measure(
        &mut self,
        warmup: usize,
        repeats: usize,
        work_per_run: f64,
        unit: &str,
        mut f: impl FnMut(),
    ) -> (stats::Stats, Option<EnergyReading>) {
        for _ in 0..warmup {
            f();
        }
        self.energy.start();
        let started = std::time::Instant::now();
        let s = stats::measure(0, repeats, f);
        let total = self.energy.stop();
        let interval = started.elapsed().as_secs_f64();
        let e = EnergyReading::new(self.energy.source(), total, s.repeats, work_per_run, unit)
            .map(|e| e.over(interval));
        (s, e)
    }

    /// What the report says about its energy columns, from `measured` readings of `cases`.
    pub(crate) fn energy_status(&self, measured: usize, cases: usize) -> EnergyStatus {
        EnergyStatus::of(self.energy.as_ref(), measured, cases)
    }
}

/// Was this library compiled without optimisation? Timings from a debug build are not
/// representative; reports carry this flag and the binary warns.
pub const DEBUG_BUILD: bool = cfg!(debug_assertions);
