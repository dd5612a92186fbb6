//! The meter: every device of every source with its accumulator; one `sample` reads them all.

use crate::accum::Accumulator;
use crate::source::{DeviceInfo, DeviceKind, EnergySource, Method};
use amdahl_model::units::{Joules, Seconds, Watts};
use serde::{Deserialize, Serialize};
use std::time::Instant;

struct Device {
    info: DeviceInfo,
    acc: Accumulator,
    /// Kept to rebuild the accumulator on [`Meter::reset`].
    fallback: Option<crate::accum::Fallback>,
}

pub struct Meter {
    sources: Vec<(Box<dyn EnergySource>, Vec<usize>)>,
    devices: Vec<Device>,
    start: Instant,
    last_t: Seconds,
}

/// Energy of one device so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceEnergy {
    pub id: String,
    pub kind: DeviceKind,
    pub name: String,
    pub method: Method,
    pub energy_j: Joules,
    /// Why the reading is less than complete (stalled counter, device vanished, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Counter steps rejected as physically impossible (their intervals are missing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rejected_steps: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `schema` of a sample log (`amdahl run --log`).
pub const SAMPLES_SCHEMA: &str = "amdahl.samples/1";

/// The first line of a sample log: which run, which devices. Every later line is a [`Sample`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampleLogHeader {
    pub schema: String,
    pub run_id: String,
    pub devices: Vec<DeviceInfo>,
}

impl SampleLogHeader {
    pub fn new(run_id: &str, devices: Vec<DeviceInfo>) -> Self {
        Self {
            schema: SAMPLES_SCHEMA.into(),
            run_id: run_id.into(),
            devices,
        }
    }
}

/// One line of the sample log: cumulative energy and latest interval power per device.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    pub t_s: Seconds,
    pub devices: Vec<SampleDevice>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampleDevice {
    pub id: String,
    pub energy_j: Joules,
    pub power_w: Option<Watts>,
}

/// Measured devices get the plausibility check of their kind; estimates need none.
fn accumulator(info: &DeviceInfo) -> Accumulator {
    let limit = match info.method {
        Method::Estimate => None,
        Method::Counter | Method::IntegratedPower => info.kind.plausible_max_power(),
    };
    Accumulator::with_max_power(info.method, limit)
}

impl Meter {
    pub fn new(sources: Vec<Box<dyn EnergySource>>) -> Self {
        let mut devices = Vec::new();
        let sources = sources
            .into_iter()
            .map(|s| {
                let fallbacks = s.fallbacks();
                let idx = s
                    .devices()
                    .into_iter()
                    .enumerate()
                    .map(|(k, info)| {
                        let f = fallbacks.get(k).cloned().flatten();
                        devices.push(Device {
                            acc: accumulator(&info).with_fallback(f.clone()),
                            info,
                            fallback: f,
                        });
                        devices.len() - 1
                    })
                    .collect();
                (s, idx)
            })
            .collect();
        Meter {
            sources,
            devices,
            start: Instant::now(),
            last_t: Seconds::ZERO,
        }
    }

    pub fn device_infos(&self) -> Vec<DeviceInfo> {
        self.devices.iter().map(|d| d.info.clone()).collect()
    }

    /// Forget all energy (after an idle baseline), keeping the sources.
    pub fn reset(&mut self) {
        for d in &mut self.devices {
            d.acc = accumulator(&d.info).with_fallback(d.fallback.clone());
        }
        self.last_t = Seconds::ZERO;
    }

    /// Restart the clock (after a baseline phase, so `t_s` counts from the command's start).
    pub fn restart_clock(&mut self) {
        self.start = Instant::now();
    }

    /// Idle power over `d` before the work starts (hyperfine's calibrate-and-subtract, for
    /// power): the devices' average power and how long it was measured. The energy is then
    /// forgotten and the clock restarts with the work.
    pub fn measure_idle(&mut self, d: std::time::Duration) -> (Seconds, Watts) {
        self.restart_clock();
        self.sample();
        std::thread::sleep(d);
        self.sample();
        let secs = self.elapsed();
        let p = crate::record::total_power(&self.energies(), secs);
        self.reset();
        (secs, p)
    }

    /// Read every source now.
    pub fn sample(&mut self) -> Sample {
        let t = Seconds(self.start.elapsed().as_secs_f64());
        self.sample_at(t)
    }

    /// Read every source, stamping the readings with `t` (tests drive time explicitly).
    pub fn sample_at(&mut self, t: Seconds) -> Sample {
        for (src, idx) in &mut self.sources {
            let readings = src.read();
            for (k, &i) in idx.iter().enumerate() {
                let Some(dev) = self.devices.get_mut(i) else {
                    continue;
                };
                dev.acc.seen(t);
                match readings.get(k) {
                    Some(Ok(raw)) => dev.acc.update(t, *raw),
                    Some(Err(e)) => dev
                        .acc
                        .lose(format!("unreadable from {:.1} s: {e}", t.get())),
                    None => dev.acc.lose("the source returned no reading".into()),
                }
            }
        }
        self.last_t = t;
        Sample {
            t_s: t,
            devices: self
                .devices
                .iter()
                .map(|d| SampleDevice {
                    id: d.info.id.clone(),
                    energy_j: d.acc.energy().0,
                    power_w: d.acc.last_power,
                })
                .collect(),
        }
    }

    /// Seconds since the clock started at the latest sample.
    pub fn elapsed(&self) -> Seconds {
        self.last_t
    }

    /// The devices whose latest reading added nothing (unreadable, rejected, stepped back),
    /// with why; a device leaves the list at its next good reading.
    pub fn incomplete(&self) -> Vec<(String, String)> {
        self.devices
            .iter()
            .filter_map(|d| Some((d.info.id.clone(), d.acc.incomplete_now.clone()?)))
            .collect()
    }

    pub fn energies(&self) -> Vec<DeviceEnergy> {
        self.devices
            .iter()
            .map(|d| {
                let (energy_j, method, note) = d.acc.energy();
                let note = match (note, &d.acc.lost) {
                    (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    (a, b) => a.or_else(|| b.clone()),
                };
                DeviceEnergy {
                    id: d.info.id.clone(),
                    kind: d.info.kind,
                    name: d.info.name.clone(),
                    method,
                    energy_j,
                    note,
                    rejected_steps: d.acc.rejected,
                }
            })
            .collect()
    }
}
