//! `amdahl merge FILES...`: sum per-node `amdahl run` results into a job total, counting each
//! node once (see `amdahl_meter::record::merge` for the rules).

use crate::output::{print_result, FormatArgs};
use amdahl_meter::record::{merge, read_record};
use amdahl_report::render::Render;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Result files written by `amdahl run -o` (schema amdahl.run/1), one or more per node.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Also write the merged result as JSON (schema amdahl.merge/1).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let records = args
        .files
        .iter()
        .map(|p| read_record(p).map(|r| (p.clone(), r)))
        .collect::<Result<Vec<_>, _>>()?;
    let m = merge(records);
    for w in &m.warnings {
        eprintln!("amdahl: warning: {w}");
    }
    if let Some(o) = &args.output {
        crate::output::write_file(o, &amdahl_report::to_json(&m).context("serialising")?)?;
        crate::output::wrote(o);
    }
    let text = m.render(args.format.format())?;
    print_result(&m, &text)?;
    Ok(ExitCode::SUCCESS)
}
