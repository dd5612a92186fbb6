//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod bench;
pub mod carbon;
pub mod catalog;
pub mod demo;
pub mod detect;
pub mod fit;
pub mod merge;
pub mod plan;
pub mod run;
pub mod surface;
pub mod top500;
