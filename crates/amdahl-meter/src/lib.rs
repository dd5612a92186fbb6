//! Measuring: energy sensors behind the [`EnergySource`] trait (RAPL powercap, NVML, a CPU-time
//! estimate), a background [`sampler`], a child-process [`runner`], launcher detection for
//! clusters, and the `amdahl.run/1` record with its job-level [`record::merge`].
//!
//! Pipeline: [`sensors::discover`] → [`Meter`] (one accumulator per device, wrap-around and
//! integration in [`accum`]) → [`sampler::start`] → [`record::build`]. A [`session::Session`]
//! runs that pipeline around some work and hands the record to its [`sink::RecordSink`]s (the
//! JSON result, the CodeCarbon CSV, the Prometheus textfile, the sample log).

pub mod accum;
pub mod amdsmi;
pub mod attribution;
pub mod cluster;
pub mod coverage;
pub mod cpu_power;
mod error;
pub mod estimate;
pub mod gpu;
pub mod hwmon;
pub mod meter;
#[cfg(feature = "nvml")]
pub mod nvml;
pub mod procfs;
pub mod progress;
pub mod rapl;
pub mod record;
pub mod runner;
pub mod sampler;
pub mod scale;
pub mod sensors;
pub mod session;
pub mod sink;
pub mod small_file;
pub mod source;
pub mod stdout_progress;
pub mod utilization;

pub use error::MeterError;
pub use meter::{DeviceEnergy, Meter, Sample};
pub use source::{DeviceInfo, DeviceKind, EnergySource, Method, Raw};
