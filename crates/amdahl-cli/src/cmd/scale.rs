//! `amdahl scale` — not implemented yet.

use anyhow::{bail, Result};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode> {
    bail!("`amdahl scale` is not implemented yet")
}
