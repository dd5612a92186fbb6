//! `amdahl top500` — read official TOP500 spreadsheets (or the built-in history) and print each
//! system's HPL efficiency, non-parallel fraction 1−α_eff with the N it counts, HPCG efficiency
//! and energy efficiency.

use crate::output::{print_result, FormatArgs};
use amdahl_model::top500::{analyse, builtin_history, read_list, ListFile, NCounts, Query};
use amdahl_report::render::Render;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// TOP500 list files (.xls or .xlsx as top500.org publishes them, or CSV with the same
    /// headers). Without files: the built-in history (Piz Daint, Summit, Fugaku, Frontier, …).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// What N counts in 1−α_eff: `cores` (TOP500 "Total Cores", which counts each GPU SM as a
    /// core), `accelerators` (GPUs/co-processors, from the accelerator cores and a per-device
    /// table) or `nodes` (where the list gives them; otherwise reported as unknown).
    #[arg(long = "n", value_name = "COUNT", default_value = "cores", value_parser = parse_n)]
    pub n: NCounts,
    /// Follow one system across lists, e.g. "Piz Daint" (case and punctuation ignored).
    #[arg(long, value_name = "NAME")]
    pub system: Option<String>,
    /// Only the top K systems of each list.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub top: Option<u32>,
    #[command(flatten)]
    pub format: FormatArgs,
}

/// Parse `--n`: cores, accelerators (or gpus), nodes.
pub fn parse_n(s: &str) -> Result<NCounts, String> {
    s.parse()
}

/// Keep panic messages raised inside calamine off the terminal: the reader catches them and
/// returns an error naming the file (`amdahl_model::top500`), which is what the user should see.
fn quiet_calamine_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info
                .location()
                .is_some_and(|l| l.file().contains("calamine"))
            {
                default(info);
            }
        }));
    });
}

/// Read every file (or the built-in history when there are none), printing how each was
/// interpreted to stderr.
pub fn load(files: &[PathBuf]) -> Result<Vec<ListFile>> {
    quiet_calamine_panics();
    let lists = if files.is_empty() {
        vec![builtin_history().context("reading the built-in TOP500 history")?]
    } else {
        files
            .iter()
            .map(|p| {
                let bytes = crate::input::read_bytes(p)?;
                Ok(read_list(&p.display().to_string(), &bytes)?)
            })
            .collect::<Result<Vec<_>>>()?
    };
    for note in lists.iter().flat_map(|l| &l.notes) {
        if note.starts_with("warning: ") {
            eprintln!("{note}");
        } else {
            eprintln!("note: {note}");
        }
    }
    Ok(lists)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let lists = load(&args.files)?;
    let query = Query {
        n_counts: args.n,
        system: args.system.clone(),
        top: args.top,
    };
    let result = analyse(&lists, &query);
    if result.systems.is_empty() {
        match &args.system {
            Some(name) => bail!(
                "no system named \"{name}\" in {}; check the spelling (case and punctuation are ignored)",
                describe(&args.files)
            ),
            None => bail!("no systems in {}", describe(&args.files)),
        }
    }
    let text = result.render(args.format.format())?;
    print_result(&result, &text)?;
    Ok(ExitCode::SUCCESS)
}

fn describe(files: &[PathBuf]) -> String {
    if files.is_empty() {
        "the built-in history".into()
    } else {
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}
