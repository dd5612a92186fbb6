//! Every end-to-end test of the `amdahl` binary, in one test binary: one link of the whole
//! program instead of one per file (each file was its own binary, a large share of CI's
//! build time). Each module is one command or one concern; `support` holds what they share.

mod support;

mod accelerate;
mod bench;
mod bench_gpu;
mod calibrate;
mod carbon;
mod catalog;
mod consistency;
mod demo;
mod detect;
mod docs;
mod exporter;
mod faults;
mod fit;
mod hwmon;
mod infer;
mod inter_node;
mod intervals;
mod intra_node;
mod lifetime;
mod merge;
mod mpi;
mod numbers;
mod plan;
mod plan_moe;
mod prometheus;
mod report;
mod run;
mod run_progress;
mod scale;
mod schemas;
mod sci;
mod serve;
mod slurm;
mod surface;
mod top500;
