//! Measuring: energy sensors behind the `EnergySource` trait (RAPL powercap, NVML, a CPU-time
//! estimate), a background sampler and a child-process runner. See issue "Energy meter".
