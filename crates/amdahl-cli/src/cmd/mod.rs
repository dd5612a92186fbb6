//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.
//! `resolve` holds the catalog-backed options several subcommands share; `measure_args` the
//! measuring flags of `run`, `scale`, `exporter`, `bench` and `detect`.

pub mod accelerate;
pub mod bench;
pub mod calibrate;
pub mod carbon;
pub mod catalog;
pub mod demo;
pub mod detect;
pub mod energy_note;
pub mod exporter;
pub mod fit;
pub mod infer;
pub mod lifetime;
pub mod measure_args;
pub mod merge;
pub mod plan;
pub mod report;
pub mod resolve;
pub mod run;
pub mod scale;
pub mod sci;
pub mod serve;
pub mod serve_max_rate;
pub mod serve_note;
pub mod shape;
pub mod surface;
pub mod top500;
