//! Device power from what the device does: the one power model `plan`, `infer` and
//! `carbon --from` share (docs/methodology.md, "Power model").
//!
//! A busy accelerator draws far more than its idle power before it does any useful work: its
//! clocks are up, its leakage is that of a hot die, its schedulers and caches run. On top of that,
//! power grows with the rate at which the tensor cores execute FLOPs and with the rate at which
//! HBM is read and written (each byte from DRAM costs ~100× a 16-bit multiply: Horowitz 2014).
//! So, as fractions of the board's TDP,
//!
//!   P / TDP = (1 − busy) · idle / TDP + busy · a + c · u_compute + m · u_memory,
//!
//! clamped to [idle, min(TDP, cap)], where `busy` is the fraction of time kernels run,
//! `u_compute` the FLOP rate over the data-sheet dense peak of the arithmetic used and `u_memory`
//! the byte rate over the data-sheet memory bandwidth, both averaged over the whole interval.
//! `a`, the draw of a busy device before compute and memory traffic, differs between generations
//! (leakage and clocks of a process and a design: a B200 runs at 85 % of its TDP streaming weights
//! where an H100 runs at 63 %); `c` and `m` are shared. They are fitted on the energy validation
//! set (data/validation/energy.csv) with the leave-one-configuration-out error reported beside
//! them: see [`ACTIVE`], [`COMPUTE`], [`MEMORY`].

use crate::units::Watts;
use serde::{Deserialize, Serialize};

/// What a device does over an interval, each as a time average in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Activity {
    /// Fraction of the interval in which kernels run (the rest: pipeline bubbles, waiting).
    pub busy: f64,
    /// FLOP rate over the data-sheet dense peak of the arithmetic precision.
    pub compute: f64,
    /// Bytes moved to and from device memory per second over the data-sheet bandwidth.
    pub memory: f64,
}

/// The power model's coefficients, as fractions of TDP.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Coefficients {
    /// Draw of a device running kernels that neither compute nor stream memory (clocks up).
    pub active: f64,
    /// Added at the full dense peak of the arithmetic used.
    pub compute: f64,
    /// Added at the full data-sheet memory bandwidth.
    pub memory: f64,
}

/// Busy draw without compute or memory traffic, per device generation (the catalog's `arch`),
/// where the energy validation set has power measurements of that generation to fit it on.
pub const ACTIVE: [(&str, f64); 2] = [("hopper", 0.34), ("blackwell", 0.50)];

/// The busy draw of a generation without measurements in the set (Volta, Ampere, CDNA, …): the
/// mean of the fitted generations; `amdahl infer` says so in its notes.
pub const ACTIVE_UNFITTED: f64 = 0.42;

/// Added at the full dense peak and at the full data-sheet bandwidth, every generation alike.
pub const COMPUTE: f64 = 0.90;
pub const MEMORY: f64 = 0.55;

/// The shipped coefficients are a weighted least-squares fit (relative error) over the power rows
/// of the energy validation set: one busy draw per generation with measurements, one compute and
/// one memory coefficient for all. `energy_validation`'s tests refit them and fail if the shipped
/// values drift from the data. The accuracy amdahl claims for them is the error with each
/// configuration left out of the fit, which `amdahl catalog validation --energy` prints.
impl Coefficients {
    /// The coefficients of a device of generation `arch` (case-insensitive).
    pub fn of(arch: &str) -> Coefficients {
        Coefficients {
            active: active_of(arch).unwrap_or(ACTIVE_UNFITTED),
            compute: COMPUTE,
            memory: MEMORY,
        }
    }
}

/// The fitted busy draw of generation `arch`, `None` where the set has no measurement of it.
pub fn active_of(arch: &str) -> Option<f64> {
    of_generation(&ACTIVE, arch)
}

/// The value a per-generation table gives `arch` (case-insensitive; no allocation: capped passes
/// look it up on every bisection).
fn of_generation(table: &[(&str, f64)], arch: &str) -> Option<f64> {
    let arch = arch.trim();
    table
        .iter()
        .find(|(a, _)| a.eq_ignore_ascii_case(arch))
        .map(|(_, v)| *v)
}

/// Power of one device of TDP `tdp` and idle draw `idle` doing `a`, under an optional power
/// `cap`: never below idle, never above the TDP or the cap. Non-finite activity is read as full
/// load, so a broken estimate can only over-state power, not hide it.
pub fn device_power(
    k: &Coefficients,
    tdp: Watts,
    idle: Watts,
    cap: Option<Watts>,
    a: &Activity,
) -> Watts {
    let clean = |x: f64| {
        if x.is_finite() {
            x.clamp(0.0, 1.0)
        } else {
            1.0
        }
    };
    let (busy, uc, um) = (clean(a.busy), clean(a.compute), clean(a.memory));
    let limit = cap.map_or(tdp.get(), |c| c.get().min(tdp.get()));
    let p =
        (1.0 - busy) * idle.get() + tdp.get() * (busy * k.active + k.compute * uc + k.memory * um);
    Watts(p.clamp(idle.get().min(limit), limit))
}

/// The lowest clock, as a share of the full clock, that [`capped_clock`] considers: below it a cap
/// is reported as impossible rather than met by an implausibly slow device.
pub const MIN_CLOCK_SHARE: f64 = 0.1;

/// How the energy of one FLOP falls as a power cap lowers the clock to the share `s` of full
/// speed: it scales by s^e. Dynamic CMOS power is C·V²·f, so where DVFS lowers the voltage along
/// with the clock e = 2 (Weste & Harris, *CMOS VLSI Design*, ch. 5); where the voltage is already
/// at its floor, e = 0. Per device generation (the catalog's `arch`), where measurements fit it:
///
/// - Hopper **0, fitted**: NVIDIA's MLPerf Inference v4.1 H200 runs at 700 W and capped (MaxQ)
///   lose 35 % of their throughput at 350 W (GPT-J) and 17 % at 500 W (Mixtral-8x7B); with e = 2
///   the model lost 21 % and 8 %, with e = 1 26 % and 11 %, with e = 0 35 % and 16 %. Llama-2-70B
///   at 500 W, held out of the fit, loses 19 %; e = 0 predicts 16 %, e = 2 8 %
///   (data/validation/power_caps.csv, docs/methodology.md "Power caps"). 0 is the end of the
///   range: no voltage left to trade for clock.
/// - Other generations: the textbook 2, unvalidated ([`CLOCK_ENERGY_EXPONENT_UNFITTED`]).
pub const CLOCK_ENERGY_EXPONENT: [(&str, f64); 1] = [("hopper", 0.0)];

/// The exponent of a generation without capped measurements to fit it on: DVFS with the voltage
/// proportional to the clock. Zeus's V100 and A40 traces (capped ResNet-50 training, which amdahl
/// does not simulate) save energy under caps as only a falling voltage can.
pub const CLOCK_ENERGY_EXPONENT_UNFITTED: f64 = 2.0;

/// The exponent e of generation `arch` (case-insensitive): [`CLOCK_ENERGY_EXPONENT`].
pub fn clock_energy_exponent(arch: &str) -> f64 {
    of_generation(&CLOCK_ENERGY_EXPONENT, arch).unwrap_or(CLOCK_ENERGY_EXPONENT_UNFITTED)
}

/// How a device meets a power cap: its compute clock falls to the share `s` of full speed at
/// which it draws `cap` (NVIDIA's power capping lowers the graphics clocks; the memory clock, so
/// the bandwidth, holds). At share `s` the energy per FLOP scales by s^`exponent`
/// ([`clock_energy_exponent`]) and the busy draw, leakage and clock tree, by s (its leakage part
/// scales with V, the conservative choice). The compute-bound part of the pass (`compute_share`
/// of its time at full clock) stretches by 1/s, which also dilutes the pass's memory traffic over
/// a longer time. Returns 1 when the device already draws at most `cap`, `None` when even
/// [`MIN_CLOCK_SHARE`] draws more (the pass's memory traffic alone exceeds the cap).
pub fn capped_clock(
    k: &Coefficients,
    tdp: Watts,
    idle: Watts,
    cap: Watts,
    a: &Activity,
    compute_share: f64,
    exponent: f64,
) -> Option<f64> {
    let clean = |x: f64| {
        if x.is_finite() {
            x.clamp(0.0, 1.0)
        } else {
            1.0
        }
    };
    let (busy, uc, um, cs) = (
        clean(a.busy),
        clean(a.compute),
        clean(a.memory),
        clean(compute_share),
    );
    // Energy per FLOP at clock share s over that at full clock; the shipped exponents without
    // `powf`, which this bisection of every capped pass would otherwise call ~30 times.
    let per_flop = |s: f64| match exponent {
        0.0 => 1.0,
        2.0 => s * s,
        e => s.powf(e),
    };
    let power = |s: f64| {
        let stretch = 1.0 + cs * (1.0 / s - 1.0);
        (1.0 - busy) * idle.get()
            + tdp.get()
                * (busy * k.active * s
                    + k.compute * uc * per_flop(s) / stretch
                    + k.memory * um / stretch)
    };
    if power(1.0) <= cap.get() {
        return Some(1.0);
    }
    if power(MIN_CLOCK_SHARE) > cap.get() {
        return None;
    }
    // power(s) rises with s: bisect to a relative width of 1e-9.
    let (mut lo, mut hi) = (MIN_CLOCK_SHARE, 1.0);
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if power(mid) > cap.get() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(lo)
}

/// The share of a server's non-GPU envelope (its data sheet's maximum power after the power
/// supplies, less the GPUs' TDP: CPUs at TDP, fans at full speed, DRAM, NICs, NVSwitches, storage)
/// that it draws while its GPUs work: 0.5, an **estimate** (the envelope is every component's worst
/// case at once, which a training or serving run does not reach). It puts a DGX H100's host at
/// 2.1 kW (262 W per GPU), inside the 0.8–3.1 kW per node that published wall-power measurements of
/// 8-GPU servers leave beside their GPUs; measure the server and pass `--host-w`.
pub const HOST_LOAD_SHARE: f64 = 0.5;

/// What a server adds to its GPUs' power at the wall, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerShare {
    /// The server (`amdahl catalog servers`), or `given` for `--host-w`.
    pub name: String,
    /// Non-GPU DC power of the server under load, divided by its GPUs.
    pub host_w_per_gpu: f64,
    pub psu_efficiency: f64,
    /// `host_w_per_gpu` is [`HOST_LOAD_SHARE`] of the data sheet's envelope, not a measurement.
    pub estimated: bool,
    pub source: String,
}

impl ServerShare {
    /// The host of a catalogued server: [`HOST_LOAD_SHARE`] of its non-GPU envelope, per GPU;
    /// `gpu_tdp` is its GPUs' TDP.
    pub fn of_server(s: &crate::catalog::servers::Server, gpu_tdp: Watts) -> ServerShare {
        let envelope = s.max_power_w * s.psu_efficiency - f64::from(s.gpus) * gpu_tdp.get();
        ServerShare {
            name: s.name.clone(),
            host_w_per_gpu: HOST_LOAD_SHARE * envelope.max(0.0) / f64::from(s.gpus),
            psu_efficiency: s.psu_efficiency,
            estimated: true,
            source: s.source.clone(),
        }
    }

    /// Wall power of one GPU drawing `gpu` and its share of the host, through the power supplies.
    pub fn wall(&self, gpu: Watts) -> Watts {
        Watts((gpu.get() + self.host_w_per_gpu) / self.psu_efficiency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const K: Coefficients = Coefficients {
        active: 0.4,
        compute: 0.5,
        memory: 0.2,
    };

    #[test]
    fn worked_values() {
        let (tdp, idle) = (Watts(700.0), Watts(70.0));
        // Fully idle: the idle draw.
        let p = device_power(&K, tdp, idle, None, &Activity::default());
        assert_eq!(p, Watts(70.0));
        // Busy, streaming memory at 60 %: 700 · (0.4 + 0.2 · 0.6) = 364 W.
        let a = Activity {
            busy: 1.0,
            compute: 0.0,
            memory: 0.6,
        };
        assert!((device_power(&K, tdp, idle, None, &a).get() - 364.0).abs() < 1e-9);
        // Half the time busy at 50 % compute: 35 + 700 · (0.2 + 0.25) = 350 W.
        let a = Activity {
            busy: 0.5,
            compute: 0.5,
            memory: 0.0,
        };
        assert!((device_power(&K, tdp, idle, None, &a).get() - 350.0).abs() < 1e-9);
        // Everything at full rate exceeds the TDP: clamped to it, or to a lower cap.
        let full = Activity {
            busy: 1.0,
            compute: 1.0,
            memory: 1.0,
        };
        assert_eq!(device_power(&K, tdp, idle, None, &full), tdp);
        assert_eq!(
            device_power(&K, tdp, idle, Some(Watts(450.0)), &full),
            Watts(450.0)
        );
        // A cap above the TDP does not raise the ceiling.
        assert_eq!(device_power(&K, tdp, idle, Some(Watts(900.0)), &full), tdp);
    }

    #[test]
    fn a_dgx_h100_host() {
        let dgx = crate::catalog::servers::embedded()
            .unwrap()
            .lookup("dgx-h100")
            .unwrap();
        let share = ServerShare::of_server(dgx, Watts(700.0));
        // (10,200 × 0.96 − 8 × 700) / 2 / 8 = 262 W per GPU.
        assert!((share.host_w_per_gpu - 262.0).abs() < 1e-9, "{share:?}");
        // A GPU at 600 W: (600 + 262) / 0.96 = 897.9 W at the wall.
        assert!((share.wall(Watts(600.0)).get() - 862.0 / 0.96).abs() < 1e-9);
    }

    #[test]
    fn a_cap_slows_the_compute_clock_until_the_power_fits() {
        let k = Coefficients::of("hopper");
        let (tdp, idle) = (Watts(700.0), Watts(87.5));
        // A compute-bound pass at 50 % of peak: 700 · (0.34 + 0.90 · 0.5 + 0.55 · 0.1) = 591.5 W
        // uncapped.
        let a = Activity {
            busy: 1.0,
            compute: 0.5,
            memory: 0.1,
        };
        assert_eq!(
            capped_clock(&k, tdp, idle, Watts(700.0), &a, 0.9, 2.0),
            Some(1.0)
        );
        let s = capped_clock(&k, tdp, idle, Watts(450.0), &a, 0.9, 2.0).unwrap();
        // At the returned clock the pass draws the cap.
        let stretch = 1.0 + 0.9 * (1.0 / s - 1.0);
        let p =
            700.0 * (k.active * s + k.compute * 0.5 * s * s / stretch + k.memory * 0.1 / stretch);
        assert!((p - 450.0).abs() < 1e-4, "{s} {p}");
        assert!(s < 1.0 && s > 0.5, "{s}");
        // Without voltage to trade (e = 0) each FLOP costs the same at any clock, so the same cap
        // needs a lower clock: there the compute term is 0.90 · 0.5 / stretch.
        let s0 = capped_clock(&k, tdp, idle, Watts(450.0), &a, 0.9, 0.0).unwrap();
        let stretch = 1.0 + 0.9 * (1.0 / s0 - 1.0);
        let p = 700.0 * (k.active * s0 + k.compute * 0.5 / stretch + k.memory * 0.1 / stretch);
        assert!((p - 450.0).abs() < 1e-4, "{s0} {p}");
        assert!(s0 < s - 0.05, "{s0} {s}");
        assert_eq!(clock_energy_exponent("Hopper"), 0.0);
        assert_eq!(clock_energy_exponent("ampere"), 2.0);
        // Memory traffic alone above the cap: impossible.
        let mem = Activity {
            busy: 1.0,
            compute: 0.0,
            memory: 1.0,
        };
        assert_eq!(
            capped_clock(&k, tdp, idle, Watts(300.0), &mem, 0.0, 2.0),
            None
        );
    }

    proptest! {
        #[test]
        fn a_lower_cap_never_speeds_a_step_up(c in 0.0..1.0f64, m in 0.0..1.0f64,
                                               share in 0.0..1.0f64, cap in 150.0..700.0f64,
                                               lower in 0.0..200.0f64, e in 0.0..2.0f64) {
            let k = Coefficients::of("hopper");
            let a = Activity { busy: 1.0, compute: c, memory: m };
            let hi = capped_clock(&k, Watts(700.0), Watts(87.5), Watts(cap), &a, share, e);
            let lo = capped_clock(&k, Watts(700.0), Watts(87.5), Watts(cap - lower), &a, share, e);
            if let (Some(hi), Some(lo)) = (hi, lo) {
                prop_assert!(lo <= hi + 1e-9);
            }
            // A feasible lower cap implies a feasible higher one.
            prop_assert!(!(lo.is_some() && hi.is_none()));
        }

        #[test]
        fn server_scope_is_at_least_gpu_scope(gpu in 0.0..2000.0f64, host in 0.0..1000.0f64,
                                              eff in 0.5..1.0f64) {
            let s = ServerShare { name: "x".into(), host_w_per_gpu: host, psu_efficiency: eff,
                                  estimated: true, source: String::new() };
            prop_assert!(s.wall(Watts(gpu)).get() >= gpu);
        }

        #[test]
        fn between_idle_and_the_limit(busy in -1.0..2.0f64, c in -1.0..2.0f64, m in -1.0..2.0f64,
                                      tdp in 50.0..1500.0f64, idle_share in 0.0..0.5f64,
                                      cap_share in 0.3..1.2f64) {
            let (tdp, idle) = (Watts(tdp), Watts(tdp * idle_share));
            let cap = Watts(tdp.get() * cap_share);
            let a = Activity { busy, compute: c, memory: m };
            let p = device_power(&Coefficients::of("hopper"), tdp, idle, Some(cap), &a).get();
            let limit = cap.get().min(tdp.get());
            prop_assert!(p <= limit + 1e-9);
            prop_assert!(p >= idle.get().min(limit) - 1e-9);
        }

        #[test]
        fn more_work_never_draws_less(c in 0.0..1.0f64, m in 0.0..1.0f64, dc in 0.0..0.5f64) {
            let (tdp, idle) = (Watts(700.0), Watts(70.0));
            let a = Activity { busy: 1.0, compute: c, memory: m };
            let b = Activity { compute: (c + dc).min(1.0), ..a };
            prop_assert!(device_power(&Coefficients::of("hopper"), tdp, idle, None, &b)
                >= device_power(&Coefficients::of("hopper"), tdp, idle, None, &a));
        }
    }
}
