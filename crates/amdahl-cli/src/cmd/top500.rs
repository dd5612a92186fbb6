//! `amdahl top500` — not implemented yet.

use anyhow::{bail, Result};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<ExitCode> {
    bail!("`amdahl top500` is not implemented yet")
}
