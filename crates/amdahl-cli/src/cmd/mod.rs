//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.
//! `resolve` holds the catalog-backed options several subcommands share.

pub mod accelerate;
pub mod bench;
pub mod carbon;
pub mod catalog;
pub mod demo;
pub mod detect;
pub mod fit;
pub mod merge;
pub mod plan;
pub mod resolve;
pub mod run;
pub mod scale;
pub mod surface;
pub mod top500;
