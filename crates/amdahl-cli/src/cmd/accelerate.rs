//! `amdahl accelerate`: Végh's what-if from one measured point. The parallel part runs K× faster
//! (a faster accelerator, or half precision), the serial and communication time does not — so
//! 1−α grows and efficiency falls even as the job gets faster. The model is
//! `amdahl_model::scaling::whatif` (docs/methodology.md, "Végh's what-if").

use crate::domain;
use crate::output::{print_result, FormatArgs};
use amdahl_model::scaling::whatif::{AccelerateResult, WhatIf};
use amdahl_report::render::Render;
use anyhow::{bail, Result};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Processor count of the measured run (as N is counted there: cores, GPUs, nodes).
    #[arg(long, value_parser = domain::processors)]
    pub n: f64,
    /// Measured parallel efficiency E in (0, 1] (HPL: Rmax/Rpeak).
    #[arg(long, value_name = "E", conflicts_with = "serial", value_parser = domain::fraction)]
    pub efficiency: Option<f64>,
    /// Or the non-parallel fraction 1−α directly, in [0, 1).
    #[arg(long, value_name = "1−α", value_parser = domain::serial_fraction)]
    pub serial: Option<f64>,
    /// How many times faster the parallel part runs, K ≥ 1 (e.g. 4 for a 4× faster accelerator).
    #[arg(long, value_name = "K", value_parser = domain::speedup)]
    pub by: f64,
    /// Share of 1−α that is communication, in [0, 1] (scaled by --bytes-ratio).
    #[arg(long, value_name = "SHARE", default_value_t = 0.0, value_parser = domain::share)]
    pub comm_share: f64,
    /// Factor on communication bytes (fp32 -> bf16 gradients: 0.5).
    #[arg(long, value_name = "RATIO", default_value_t = 1.0, value_parser = domain::non_negative)]
    pub bytes_ratio: f64,
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let serial = match (args.efficiency, args.serial) {
        (Some(e), _) => amdahl_model::scaling::laws::serial_from_efficiency(args.n, e),
        (None, Some(s)) => s,
        (None, None) => bail!("give the measured point as --efficiency E or --serial 1−α"),
    };
    let input = WhatIf {
        n: args.n,
        serial,
        k: args.by,
        comm_share: args.comm_share,
        bytes_ratio: args.bytes_ratio,
    };
    let result = input.evaluate()?;
    let out = AccelerateResult::new(input, result);
    print_result(&out, &out.render(args.format.format())?)?;
    Ok(ExitCode::SUCCESS)
}
