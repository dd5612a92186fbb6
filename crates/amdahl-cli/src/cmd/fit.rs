//! `amdahl fit` — fit scaling laws to measured runs (or the built-in series) and report
//! α_eff, Karp–Flatt e, the chosen model, predictions and plots.

use crate::domain;
use crate::output::{self, FormatArgs};
use amdahl_model::scaling::analysis::WhatIfSpec;
use amdahl_model::scaling::input::{self, Dataset};
use amdahl_model::scaling::{analyse, builtin, FitOptions};
use amdahl_report::render::Render;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How to read FILE.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    Csv,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Measured runs as CSV or JSON: column `n` plus one of time, throughput, speedup, efficiency,
    /// or rmax+rpeak; optional label and phase columns. `-` reads standard input.
    #[arg(required_unless_present = "builtin", conflicts_with = "builtin")]
    pub file: Option<PathBuf>,
    /// Analyse the built-in measured series (Cisco benchmark, Schwartz 2015) instead of a file.
    #[arg(long)]
    pub builtin: bool,
    /// Input format [default: from the file extension, else guessed from the content].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,
    /// Baseline run: S = T(N0)/T(N), p = N/N0 [default: smallest N for time/throughput, else 1].
    #[arg(long, value_name = "N0", value_parser = domain::processors)]
    pub baseline_n: Option<f64>,
    /// Predict speedup, efficiency and α_eff at these N with the chosen model, e.g. 1024,4096.
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = domain::processors)]
    pub predict: Vec<f64>,
    /// What N counts (processes, GPUs, nodes), printed next to every α_eff.
    #[arg(long, value_name = "TEXT")]
    pub n_counts: Option<String>,
    /// Végh's what-if: the parallel part runs K times faster (serial and communication unchanged).
    #[arg(long, value_name = "K", value_parser = domain::speedup)]
    pub accelerate: Option<f64>,
    /// With --accelerate: share of 1−α that is communication, in [0, 1].
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = 0.0,
        requires = "accelerate",
        value_parser = domain::share
    )]
    pub comm_share: f64,
    /// With --accelerate: factor on communication bytes (fp32 -> bf16 gradients: 0.5).
    #[arg(
        long,
        value_name = "RATIO",
        default_value_t = 1.0,
        requires = "accelerate",
        value_parser = domain::non_negative
    )]
    pub bytes_ratio: f64,
    /// Also write the speedup and efficiency plot to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArgs,
}

fn load(path: &Path, hint: Option<InputFormat>) -> Result<Dataset> {
    let text = crate::input::read_text(path)?;
    let format = match hint {
        Some(InputFormat::Csv) => input::Format::Csv,
        Some(InputFormat::Json) => input::Format::Json,
        None => match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
        {
            Some(e) if e == "json" => input::Format::Json,
            Some(e) if e == "csv" => input::Format::Csv,
            _ => input::Format::sniff(&text),
        },
    };
    input::parse(&text, format).with_context(|| format!("reading {}", path.display()))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let (dataset, source) = match (&args.file, args.builtin) {
        (Some(p), _) => (load(p, args.input_format)?, p.display().to_string()),
        (None, true) => (
            builtin::cisco().context("the built-in series failed to parse (a build defect)")?,
            builtin::CISCO_SOURCE.to_string(),
        ),
        (None, false) => bail!("give a FILE of measured runs or --builtin"),
    };
    let opts = FitOptions {
        baseline_n: args.baseline_n,
        predict: args.predict.clone(),
        n_counts: args.n_counts.clone(),
        what_if: args.accelerate.map(|k| WhatIfSpec {
            k,
            comm_share: args.comm_share,
            bytes_ratio: args.bytes_ratio,
        }),
    };
    let mut result = analyse(&dataset, &opts).with_context(|| format!("analysing {source}"))?;
    result.source = Some(source);
    if let Some(path) = &args.svg {
        output::check_result(&result)?;
        output::write_plot(path, &amdahl_report::fit::svg(&result))?;
    }
    let text = result.render(args.format.format())?;
    output::print_result(&result, &text)?;
    Ok(ExitCode::SUCCESS)
}
