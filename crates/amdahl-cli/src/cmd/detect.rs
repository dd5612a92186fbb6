//! `amdahl detect`: every energy sensor on this machine, what it reads, and for each unusable
//! one why and how to fix it. Always exits 0: an unusable sensor is a finding, not an error.

use crate::output::{print_unchecked, FormatArgs};
use amdahl_meter::gpu::parse_visible;
use amdahl_meter::hwmon::AmdVisible;
use amdahl_meter::{rapl, sensors};
use amdahl_report::render::Render;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub powercap: super::measure_args::PowercapArgs,
    /// Do not look at GPUs (NVML, AMD/Intel hwmon chips).
    #[arg(long)]
    pub no_gpu: bool,
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let d = sensors::detect(&sensors::DetectOptions {
        powercap_root: args.powercap.powercap_root.clone(),
        reader: rapl::fs_reader(),
        gpus: !args.no_gpu,
        visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref()),
        hwmon_root: args.powercap.hwmon_root.clone(),
        amd_visible: AmdVisible::from_env(|k| std::env::var(k).ok()),
        amd_smi: true,
    });
    let text = d.render(args.format.format())?;
    print_unchecked(&d, &text)?;
    Ok(ExitCode::SUCCESS)
}
